"""Credit scorecards: optbinning's and plain points tables, explained by every engine; the exact
engine's optimum equals brute force over every candidate, its goals are exact (a probability is
the log-odds bound, not a piecewise sigmoid), and answers name the bins."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from counterplan.planning import (
    CategoricalFeature,
    ClassGoal,
    CounterfactualProblem,
    IntegerFeature,
    RangeGoal,
)
from counterplan.planning.distance import DistanceSettings
from counterplan.planning.errors import ModelAdapterError, ProblemError
from counterplan.planning.scorecard import (
    OddsScaling,
    PointsTable,
    ScorecardAdapter,
    ScorecardBin,
    ScorecardVariable,
    points_table_from_csv,
    read_optbinning,
)
from counterplan.solver.counterfactual import explain
from tests.solver.exact.test_exact import _brute_force

pytest.importorskip("highspy")

HOMES = ("own", "rent", "mortgage", "other")


def _credit(n: int = 2000, seed: int = 0) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 15, n).round(1),
            "cards": rng.integers(0, 8, n),
            "home": rng.choice(HOMES, n),
        }
    )
    home = frame.home.map(dict(zip(HOMES, [0.8, -0.5, 0.3, 0.0], strict=True)))
    logit = 0.08 * (frame.income - 50) - 0.4 * (frame.cards - 3) + home
    y = pd.Series((rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int), name="default")
    return frame, y


@pytest.fixture(scope="module")
def optbinning_card() -> tuple[Any, pd.DataFrame]:
    optbinning = pytest.importorskip("optbinning")
    frame, y = _credit()
    process = optbinning.BinningProcess(list(frame.columns), categorical_variables=["home"])
    card = optbinning.Scorecard(
        binning_process=process,
        estimator=LogisticRegression(),
        scaling_method="min_max",
        scaling_method_params={"min": 300, "max": 850},
    )
    card.fit(frame, y)
    return card, frame.assign(default=y)


def test_the_table_read_from_optbinning_reproduces_its_scores_and_log_odds(optbinning_card: Any) -> None:
    card, data = optbinning_card
    table = read_optbinning(card)
    frame = data.drop(columns="default")
    assert np.allclose(table.score(frame), card.score(frame), rtol=0, atol=1e-9)
    proba = card.predict_proba(frame)
    # the table's log-odds are the high-score class's: class 0 (optbinning's non-event)
    assert np.allclose(table.log_odds(frame), np.log(proba[:, 0] / proba[:, 1]), atol=1e-9)


def test_an_optbinning_scorecard_is_accepted_directly_and_answers_name_the_bins(optbinning_card: Any) -> None:
    card, data = optbinning_card
    row = int(np.argmax(card.predict_proba(data.drop(columns="default"))[:, 0]))
    problem = CounterfactualProblem.from_dataframe(
        data, row, card, target="default", goals=[ClassGoal(target=1, confidence=0.7)]
    )
    assert problem.space.names == ("income", "cards", "home")  # the scorecard's own variables
    assert isinstance(problem.model, ScorecardAdapter)
    exact = explain(problem, engine="exact", seed=0)
    local = explain(problem, engine="local", seed=0)
    assert exact.valid and exact.statistics.exact is not None and exact.statistics.exact.proven
    # verified through the real scorecard
    proposed = pd.DataFrame([exact.proposed])
    assert card.predict_proba(proposed)[0, 1] >= 0.7
    assert exact.score_levels[3] >= local.score_levels[3] - 1e-9
    for change in exact.changes:
        variable = problem.model.table.variable(change.feature)
        assert variable is not None
        assert change.proposed_bin == problem.model.bin_label(change.feature, change.proposed)
        assert change.proposed_bin != change.original_bin  # one bin per feature, and a different one
        assert change.proposed_bin in {b.label for b in variable.bins}


def _table(**extra: Any) -> PointsTable:
    """A small points table: integer income (thousands), cards, a category."""
    income = ScorecardVariable(
        name="income",
        bins=(
            ScorecardBin(upper=20, points=10),
            ScorecardBin(lower=20, upper=35, points=40),
            ScorecardBin(lower=35, upper=50, points=70),
            ScorecardBin(lower=50, points=95),
        ),
    )
    cards = ScorecardVariable(
        name="cards",
        bins=(
            ScorecardBin(upper=2, points=60),
            ScorecardBin(lower=2, upper=5, points=35),
            ScorecardBin(lower=5, points=0),
        ),
    )
    home = ScorecardVariable(
        name="home",
        bins=(
            ScorecardBin(categories=("own", "mortgage"), points=50),
            ScorecardBin(categories=("rent",), points=20),
        ),
    )
    return PointsTable(variables=(income, cards, home), classes=("bad", "good"), **extra)


def _table_problem(table: PointsTable, goal: Any, **original: Any) -> CounterfactualProblem:
    values = {"income": 18, "cards": 6, "home": "rent"} | original
    features = [
        IntegerFeature(name="income", value=values["income"], low=0, high=80),
        IntegerFeature(name="cards", value=values["cards"], low=0, high=9),
        CategoricalFeature(name="home", value=values["home"], categories=("own", "rent", "mortgage", "other")),
    ]
    return CounterfactualProblem(features, [goal], ScorecardAdapter(table))


@pytest.mark.parametrize(
    ("extra", "goal"),
    [
        ({"cutoff": 150.0}, ClassGoal(target="good")),
        ({"odds": OddsScaling(points=150, odds=1.0, pdo=20)}, ClassGoal(target="good", confidence=0.8)),
        ({"cutoff": 150.0}, RangeGoal(output="score", low=170, high=200)),
        ({"cutoff": 150.0}, RangeGoal(output="score", low=170, high=math.inf)),
        ({"cutoff": 150.0}, RangeGoal(output="score", low=-math.inf, high=150)),
    ],
    ids=["decision at the cut-off", "probability", "score range", "score at least", "score at most"],
)
def test_the_exact_optimum_on_a_points_table_equals_brute_force(extra: dict[str, Any], goal: Any) -> None:
    at_most = isinstance(goal, RangeGoal) and goal.low == -math.inf
    original = {"income": 60, "cards": 0, "home": "own"} if at_most else {}  # a score of 205 to bring down
    problem = _table_problem(_table(**extra), goal, **original)
    result = explain(problem, engine="exact", seed=0)
    assert result.statistics.exact is not None and result.statistics.exact.proven, result.statistics.exact
    assert result.statistics.exact.objective == pytest.approx(-result.score_levels[3], abs=1e-9)
    best = _brute_force(problem)  # "other" is in no bin: its score is NaN, so brute force never picks it
    assert result.valid
    assert result.score_levels == pytest.approx(tuple(best), abs=1e-9)
    assert "other" not in {c.proposed for c in result.changes}


def test_a_score_exactly_at_the_cut_off_is_accepted() -> None:
    """Income 18 -> 20 (+30 points) and cards 6 -> 4 (+35): 10+0+20 = 30 -> 95, the cut-off
    itself; the exact engine must find the answer that lands exactly on it."""
    problem = _table_problem(_table(cutoff=95.0), ClassGoal(target="good"))
    result = explain(problem, engine="exact", seed=0)
    assert result.valid and result.statistics.exact is not None and result.statistics.exact.proven
    # the program's own optimum is this answer (not only local search's warm start)
    assert result.statistics.exact.objective == pytest.approx(-result.score_levels[3], abs=1e-9)
    assert result.predictions["score"] == pytest.approx(95.0)
    assert {c.feature: c.proposed for c in result.changes} == {"income": 20, "cards": 4}
    assert {c.feature: c.proposed_bin for c in result.changes} == {"income": "[20, 35)", "cards": "[2, 5)"}


def test_a_probability_goal_is_exact_not_a_piecewise_sigmoid() -> None:
    """P(good) >= 0.7 is log-odds >= logit(0.7): the answer's true probability is at least 0.7,
    and the cheapest answer below it is not taken."""
    table = _table(odds=OddsScaling(points=150, odds=1.0, pdo=20))
    problem = _table_problem(table, ClassGoal(target="good", confidence=0.7))
    result = explain(problem, engine="exact", seed=0)
    p = result.predictions["prediction"]["good"]
    assert p >= 0.7
    needed = 150 + 20 * math.log2(0.705 / 0.295)  # the goal's margin (0.005) included
    assert result.predictions["score"] >= needed - 1e-9
    assert result.score_levels == pytest.approx(tuple(_brute_force(problem)), abs=1e-9)


def test_points_tables_read_from_csv_and_refuse_bad_bins() -> None:
    text = "\n".join(
        [
            "feature,bin,points,classes",
            'income,"(-inf, 20)",10,bad|good',
            'income,"[20, inf)",40,',
            "home,own|mortgage,50,",
            "home,rent,20,",
            "(intercept),,5,",
            "(cutoff),,60,",
        ]
    )
    table = points_table_from_csv(text)
    assert table.intercept == 5 and table.cutoff == 60 and table.classes == ("bad", "good")
    frame = pd.DataFrame({"income": [10, 20, 25.5], "home": ["rent", "own", "mortgage"]})
    assert table.score(frame).tolist() == [35.0, 95.0, 95.0]
    with pytest.raises(ValueError, match="does not end where"):
        ScorecardVariable(name="x", bins=(ScorecardBin(upper=1, points=0), ScorecardBin(lower=2, points=1)))
    with pytest.raises(ValueError, match="in two bins"):
        ScorecardVariable(
            name="x", bins=(ScorecardBin(categories=("a",), points=0), ScorecardBin(categories=("a", "b"), points=1))
        )
    with pytest.raises(ModelAdapterError, match="half-open"):
        points_table_from_csv('feature,bin,points\nincome,"(-inf, 20]",1\n')


def test_a_category_in_no_bin_scores_nan_and_is_never_proposed() -> None:
    table = _table(cutoff=150.0)
    frame = pd.DataFrame({"income": [60], "cards": [0], "home": ["other"]})
    assert np.isnan(table.score(frame)[0])
    problem = _table_problem(table, ClassGoal(target="good"))
    local = explain(problem, engine="local", seed=0)
    assert local.valid and local.proposed["home"] != "other"


def _table_data(n: int = 400, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "income": rng.integers(0, 81, n),
            "cards": rng.integers(0, 10, n),
            "home": rng.choice(["own", "rent", "mortgage"], n),
        }
    )


@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (1.0, 1.0), (0.2, 1.0)])
def test_the_papers_objective_is_minimised_exactly(alpha: float, beta: float) -> None:
    """The scorecard metric (proximity in WoE space weighted by 1 / points range, plus the
    L1-Mahalanobis closeness to the data): the exact optimum equals brute force, and the
    objective the program reports is the answer's."""
    data = _table_data()
    table = _table(cutoff=150.0)
    original = {"income": 18, "cards": 6, "home": "rent"}
    problem = CounterfactualProblem.from_dataframe(
        data,
        original,
        ScorecardAdapter(table),
        [ClassGoal(target="good")],
        distance=DistanceSettings(metric="scorecard", alpha=alpha, beta=beta),
    )
    assert problem.scorecard_distance is not None
    result = explain(problem, engine="exact", seed=0)
    assert result.valid and result.statistics.exact is not None and result.statistics.exact.proven
    best = _brute_force(problem)
    assert result.score_levels[3] == pytest.approx(best[3], abs=1e-9)
    assert result.statistics.exact.objective == pytest.approx(-result.score_levels[3], abs=1e-9)
    # the objective is the paper's: recompute it by hand from the table
    frame = pd.DataFrame([result.proposed])
    points = {v.name: np.array([b.points for b in v.bins]) for v in table.variables}
    here = table.bins(pd.DataFrame([original]))[0]
    there = table.bins(frame)[0]
    proximity = sum(
        abs(points[v.name][int(there[c])] - points[v.name][int(here[c])]) / v.points_range
        for c, v in enumerate(table.variables)
    )
    assert problem.scorecard_distance.beta == beta
    woe = np.array([[points[v.name][int(there[c])] for c, v in enumerate(table.variables)]])
    closeness = problem.scorecard_distance.closeness(woe)[0]
    assert -result.score_levels[3] == pytest.approx(alpha * proximity + beta * closeness, abs=1e-9)


def test_closeness_without_training_data_is_refused() -> None:
    with pytest.raises(ProblemError, match="closeness needs training data"):
        CounterfactualProblem(
            _table_problem(_table(cutoff=150.0), ClassGoal(target="good")).space.features,
            [ClassGoal(target="good")],
            ScorecardAdapter(_table(cutoff=150.0)),
            DistanceSettings(metric="scorecard"),
        )


ONE_PROCESS = """
import sys
import numpy as np
order = sys.argv[1]
if order == "optbinning first":
    import optbinning  # brings OR-Tools, which bundles its own HiGHS
    import highspy
else:
    import highspy
    import optbinning
from sklearn.linear_model import LogisticRegression
from tests.solver.exact.test_exact_scorecards import _credit
from counterplan.planning import ClassGoal, CounterfactualProblem
from counterplan.solver.counterfactual import explain

frame, y = _credit()
card = optbinning.Scorecard(
    binning_process=optbinning.BinningProcess(list(frame.columns), categorical_variables=["home"]),
    estimator=LogisticRegression(),
).fit(frame, y)
row = int(np.argmax(card.predict_proba(frame)[:, 0]))
problem = CounterfactualProblem.from_dataframe(
    frame.assign(default=y), row, card, target="default", goals=[ClassGoal(target=1, confidence=0.7)]
)
from counterplan.solver.core.config import SolverConfig
from counterplan.solver.exact.config import ExactPhaseConfig

for backend in ("auto", "highs"):
    config = SolverConfig(phases=(ExactPhaseConfig(backend=backend),))
    result = explain(problem, config, seed=0)
    print(result.valid, result.statistics.exact.proven, result.statistics.exact.backend)
"""


@pytest.mark.parametrize("order", ["optbinning first", "highspy first"])
def test_a_scorecard_read_from_optbinning_solves_exactly_in_one_process(order: str) -> None:
    """optbinning imports OR-Tools, which bundles its own HiGHS; with highspy 1.15 the two could
    not be loaded in one process (either order). The project requires highspy >= 1.16, which loads
    beside it: checked in a fresh process each way, as a user's session would import them."""
    pytest.importorskip("optbinning")
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, "-c", ONE_PROCESS, order], capture_output=True, text=True, cwd=root, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    auto, highs = done.stdout.strip().splitlines()[-2:]
    assert auto.startswith("True True SCIP") and auto.endswith("(OR-Tools 9.15)"), done.stdout  # a scorecard: SCIP
    assert highs.startswith("True True HiGHS") and highs.endswith("(highspy)"), done.stdout
