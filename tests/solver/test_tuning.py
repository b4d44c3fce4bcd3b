"""A small real optuna study in a real SQLite file: it resumes, prunes, and its output solves."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import optuna
import pytest

from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, OutputSpec
from counterplan.planning.errors import InvalidInputError
from counterplan.planning.space import FloatMatrix
from counterplan.solver import SolverConfig, TerminationConfig, explain
from counterplan.solver.core.scope import CALL_MARGIN_SECONDS
from counterplan.solver.tuning import (
    StudyMismatchError,
    TuningStoppedError,
    row_cost,
    suggest_config,
    tune,
)
from tests.solver.conftest import linear_score


def _rows(problem: CounterfactualProblem, count: int) -> list[CounterfactualProblem]:
    return [problem] * count


def test_a_study_runs_resumes_and_its_best_configuration_solves(
    linear_problem: CounterfactualProblem, tmp_path: Path
) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    report = tune(
        _rows(linear_problem, 2),
        _rows(linear_problem, 1),
        n_trials=3,
        budget_seconds=0.1,
        storage=storage,
        study_name="s",
        seed=1,
    )
    assert len(report.study.trials) == 3
    assert report.default_heldout is not None and report.tuned_heldout is not None
    # held-out results depend on the machine's speed (a 0.05 s budget): check they were measured
    assert report.tuned_heldout.median_seconds > 0 and report.tuned_heldout.mean_cost >= 0
    again = tune(_rows(linear_problem, 2), [], n_trials=2, budget_seconds=0.1, storage=storage, study_name="s", seed=1)
    assert len(again.study.trials) == 5  # resumed from the same SQLite file
    reopened = optuna.load_study(study_name="s", storage=storage)
    assert len(reopened.trials) == 5 and reopened.best_value == again.best_value
    saved = tmp_path / "best.yaml"
    saved.write_text(again.best_config.to_yaml())
    config = SolverConfig.load(saved)
    assert config == again.best_config
    # the output loads and solves; a step limit instead of its 0.1 s budget keeps this test
    # independent of the machine's load
    steady = config.model_copy(update={"termination": TerminationConfig(step_count_limit=60)})
    assert explain(linear_problem, steady, seed=0).valid


def test_unpromising_trials_are_pruned(linear_problem: CounterfactualProblem, tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'pruned.db'}"
    with pytest.raises(ValueError, match="no trial completed"):
        tune(
            _rows(linear_problem, 3),
            [],
            n_trials=2,
            budget_seconds=0.1,
            storage=storage,
            study_name="p",
            pruner=optuna.pruners.ThresholdPruner(upper=0.0),
        )  # every cost is above 0: prune at once
    study = optuna.load_study(study_name="p", storage=storage)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.PRUNED] * 2
    assert all(len(t.intermediate_values) == 1 for t in study.trials)  # stopped after the first row


def test_the_search_space_is_conditional_per_engine(linear_problem: CounterfactualProblem) -> None:
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    engines: dict[str, set[str]] = {}
    for _ in range(40):
        trial = study.ask()
        config = suggest_config(trial, 0.1)
        engines.setdefault(trial.params["engine"], set()).update(trial.params)
        study.tell(trial, row_cost(explain(linear_problem, config)) if len(engines) < 3 else 1.0)
    assert "entity_tabu_size" in engines["tabu_search"]
    assert "temperature_hard" in engines["simulated_annealing"]
    assert all("entity_tabu_size" not in params for engine, params in engines.items() if engine != "tabu_search")
    assert len(engines) >= 4


def test_a_study_of_another_problem_is_refused_and_each_problem_gets_its_own(
    linear_problem: CounterfactualProblem, loan_problem: CounterfactualProblem, tmp_path: Path
) -> None:
    from counterplan.solver.tuning import StudyMismatchError, default_study_name

    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    first = tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage, study_name="mine")
    with pytest.raises(StudyMismatchError, match="made for another problem"):
        tune(_rows(loan_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage, study_name="mine")
    assert len(optuna.load_study(study_name="mine", storage=storage).trials) == 1  # nothing mixed in
    linear = tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    loan = tune(_rows(loan_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert linear.study.study_name == default_study_name([linear_problem], 0.1) != loan.study.study_name
    again = tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert again.study.study_name == linear.study.study_name and len(again.study.trials) == 2  # resumed
    assert first.study.study_name == "mine"


@pytest.mark.parametrize("storage", ["/nowhere/study.db", "sqlite:////nowhere/study.db", "nodb://host/study"])
def test_a_storage_that_cannot_be_opened_is_refused_naming_it(
    linear_problem: CounterfactualProblem, storage: str
) -> None:
    """A bare path, a missing directory or an unknown database was SQLAlchemy's traceback on the
    command line (exit 1); it is a bad input naming the storage (exit 2, one line)."""
    with pytest.raises(InvalidInputError, match="storage") as caught:
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert caught.value.field == "storage" and storage in caught.value.problem


@pytest.mark.parametrize(
    ("tables", "why"),
    [
        (["CREATE TABLE studies (x INTEGER)"], "table studies has no column named study_name"),
        (
            ["CREATE TABLE alembic_version (version_num VARCHAR(32))", "INSERT INTO alembic_version VALUES ('v9.9')"],
            "no longer compatible with the table schema",
        ),
    ],
    ids=["another program's studies table", "another optuna's schema"],
)
def test_a_database_optuna_cannot_use_is_refused_naming_it(
    linear_problem: CounterfactualProblem, tmp_path: Path, tables: list[str], why: str
) -> None:
    """A SQLite file of another program with a table named as optuna's, or one whose tables another
    version of optuna set up, ended the command with optuna's traceback (StorageInternalError,
    RuntimeError; the cli fuzz)."""
    import sqlite3
    from contextlib import closing

    database = tmp_path / "other.db"
    with closing(sqlite3.connect(database)) as connection:
        for statement in tables:
            connection.execute(statement)
        connection.commit()
    storage = f"sqlite:///{database}"
    with pytest.raises(InvalidInputError, match="storage") as caught:
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert caught.value.field == "storage" and storage in caught.value.problem and why in caught.value.problem


@pytest.mark.parametrize("table", ["trials", "trial_params"])
def test_a_storage_damaged_past_its_study_is_refused_naming_it(
    linear_problem: CounterfactualProblem, tmp_path: Path, table: str
) -> None:
    """A damaged page of a study's trials opens (the study's own tables are whole) and fails when
    the trials are first read or written: the run ended with optuna's traceback (the cli fuzz: a
    study file with 4 KB overwritten)."""
    import sqlite3
    from contextlib import closing

    database = tmp_path / "study.db"
    storage = f"sqlite:///{database}"
    tune(_rows(linear_problem, 1), [], n_trials=2, budget_seconds=0.1, storage=storage)
    with closing(sqlite3.connect(database)) as connection:
        (page_size,) = connection.execute("PRAGMA page_size").fetchone()
        (root,) = connection.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    data = bytearray(database.read_bytes())
    data[(root - 1) * page_size : root * page_size] = b"\xde\xad" * (page_size // 2)
    database.write_bytes(bytes(data))
    with pytest.raises(InvalidInputError, match="storage") as caught:
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert caught.value.field == "storage" and storage in caught.value.problem, caught.value.problem
    assert "malformed" in caught.value.problem, caught.value.problem


def test_a_trial_count_past_the_bound_is_refused_before_any_trial(
    linear_problem: CounterfactualProblem, tmp_path: Path
) -> None:
    """100,000,000 trials ran until killed; the count is bounded as the solver's counts are."""
    from counterplan.solver.tuning import MAX_TRIALS

    storage = f"sqlite:///{tmp_path / 'bounded.db'}"
    with pytest.raises(ValueError, match=f"n_trials must be from 0 to {MAX_TRIALS:,}"):
        tune(_rows(linear_problem, 2), [], n_trials=MAX_TRIALS + 1, budget_seconds=0.1, storage=storage)
    assert not (tmp_path / "bounded.db").exists()  # no study was opened


def test_a_stop_ends_the_study_within_a_row_and_keeps_its_finished_trials(
    linear_problem: CounterfactualProblem, tmp_path: Path
) -> None:
    """The command line's Ctrl-C is a stop check: asked before every row's solve (and while it
    runs, and after every trial), it ends the study there; a Ctrl-C's own KeyboardInterrupt could
    be lost in a weak reference's callback, and the study ran on. (The stop says stop once the
    first trial is done: it is asked while a row solves too, as often as the solve takes.)"""
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    finished = threading.Event()

    def trial_done(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        finished.set()

    with pytest.raises(TuningStoppedError):
        tune(
            _rows(linear_problem, 2),
            [],
            n_trials=50,
            budget_seconds=0.1,
            storage=storage,
            study_name="s",
            on_trial=trial_done,
            stop=finished.is_set,
        )
    study = optuna.load_study(study_name="s", storage=storage)
    states = [t.state for t in study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE]
    again = tune(_rows(linear_problem, 2), [], n_trials=1, budget_seconds=0.1, storage=storage, study_name="s")
    assert len(again.study.trials) == len(states) + 1  # resumed


def test_a_stop_ends_a_rows_solve_within_a_model_call(linear_problem: CounterfactualProblem, tmp_path: Path) -> None:
    """The stop was asked only before each row's solve, so a Ctrl-C waited for the row's whole
    search (up to its budget): with a model of 0.1 s a call, a 10 s budget ran out after the stop. A
    helper thread now asks it while the row solves and ends the solve at its next step."""
    import time

    calls: list[float] = []
    said: list[float] = []

    def slow(X: FloatMatrix) -> FloatMatrix:  # never approves: the search runs to its budget
        calls.append(time.perf_counter())
        if len(calls) == 8:  # the row's search is under way: Ctrl-C
            said.append(time.perf_counter())
        time.sleep(0.1)
        return np.tile([0.9, 0.1], (len(X), 1))

    slow_model = CallableAdapter(slow, [OutputSpec("approved", (0, 1))])
    problem = CounterfactualProblem(linear_problem.space.features, [ClassGoal(target=1, margin=0.0)], slow_model)
    storage = f"sqlite:///{tmp_path / 'slow.db'}"
    with pytest.raises(TuningStoppedError):
        tune([problem], [], n_trials=5, budget_seconds=10.0, storage=storage, study_name="s", stop=lambda: bool(said))
    after = [t for t in calls if t > said[0]]
    assert len(after) <= 2, len(after)  # the call in flight's successor at most (the poll's 0.05 s)


def test_a_study_resumed_with_another_budget_is_another_study(
    linear_problem: CounterfactualProblem, tmp_path: Path
) -> None:
    """Trials scored with 3 s per row are no rivals of trials scored with 0.1 s, and the best
    trial's configuration keeps the budget it was scored with: one study for both reported,
    wrote and compared with the default (at the new budget) a configuration of the earlier one."""
    storage = f"sqlite:///{tmp_path / 'budgets.db'}"
    roomy = tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.3, storage=storage)
    tight = tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage)
    assert tight.study.study_name != roomy.study.study_name and len(tight.study.trials) == 1
    assert tight.best_config.termination.spent_limit_seconds == 0.1  # the budget asked, not the earlier one
    name = roomy.study.study_name
    with pytest.raises(StudyMismatchError, match=r"0\.3 s per row .*; this one is .*0\.1 s per row"):
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage, study_name=name)
    assert len(optuna.load_study(study_name=name, storage=storage).trials) == 1  # nothing mixed in


@pytest.mark.parametrize(
    ("directions", "says"), [(["maximize"], "maximizes"), (["minimize"] * 2, "has several objectives")]
)
def test_a_study_that_does_not_minimize_one_objective_is_refused(
    linear_problem: CounterfactualProblem, tmp_path: Path, directions: list[str], says: str
) -> None:
    """A study of the name made by optuna for something else: maximizing, the sampler and the
    pruner sought the worst configurations (and the progress called the worst trial the best);
    with two objectives the first trial's report raised NotImplementedError."""
    storage = f"sqlite:///{tmp_path / 'theirs.db'}"
    optuna.create_study(study_name="theirs", storage=storage, directions=directions)
    with pytest.raises(StudyMismatchError, match=f"study 'theirs' {says}.*minimizes one") as caught:
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=0.1, storage=storage, study_name="theirs")
    assert caught.value.field == "study_name"
    assert not optuna.load_study(study_name="theirs", storage=storage).trials


@pytest.mark.parametrize("budget", [CALL_MARGIN_SECONDS, 0.0, -1.0, float("nan")])
def test_a_budget_no_row_can_be_searched_in_is_refused(
    linear_problem: CounterfactualProblem, tmp_path: Path, budget: float
) -> None:
    """A solve starts no model call within CALL_MARGIN_SECONDS of its time limit: with a budget of
    0.05 s every trial answered every row with its original and scored the same."""
    with pytest.raises(InvalidInputError, match=r"more than 0\.05 s per row") as caught:
        tune(_rows(linear_problem, 1), [], n_trials=1, budget_seconds=budget, storage=f"sqlite:///{tmp_path / 'b.db'}")
    assert caught.value.field == "budget_seconds"
    assert not (tmp_path / "b.db").exists()  # no study was opened


def test_a_row_the_model_fails_on_is_refused_naming_it(linear_problem: CounterfactualProblem, tmp_path: Path) -> None:
    """The fingerprint asked the model about every tuning row: a row it raises on stopped the
    tuning with the model's own exception (a traceback on the command line); a held-out row it
    fails on stopped it after every trial."""

    def fails_past_one(X: FloatMatrix) -> FloatMatrix:
        if (X[:, 0] > 1.0).any():
            raise RuntimeError("no scores past x = 1")
        return linear_score(X)

    failing = CounterfactualProblem(
        [linear_problem.space.features[0].model_copy(update={"value": 2.5}), *linear_problem.space.features[1:]],
        [ClassGoal(target=1, margin=0.0)],
        CallableAdapter(fails_past_one, [OutputSpec("approved", (0, 1))]),
    )
    storage = f"sqlite:///{tmp_path / 'failing.db'}"
    for tuning, heldout, field in (
        ([linear_problem, failing], [], "tuning_problems[1]"),
        ([linear_problem], [failing], "heldout_problems[0]"),
    ):
        with pytest.raises(InvalidInputError, match="no scores past x = 1") as caught:
            tune(tuning, heldout, n_trials=1, budget_seconds=0.1, storage=storage)
        assert caught.value.field == field and "fails on the original instance" in caught.value.problem
    assert not optuna.get_all_study_names(storage)  # refused before a study was opened


def test_studies_opened_at_once_on_a_new_storage_all_open(tmp_path: Path) -> None:
    """optuna creates a new database's tables unguarded: of several tune runs started at once on
    one new SQLite file (optuna's way to tune in parallel), all but one failed with 'cannot open
    ...: table studies already exists' (or a UNIQUE constraint of alembic_version)."""
    from counterplan.solver import tuning

    storage = f"sqlite:///{tmp_path / 'parallel.db'}"
    together = threading.Barrier(4)
    errors: list[Exception] = []

    def open_it() -> None:
        together.wait()
        try:
            tuning._open_study("s", storage, "f" * 64, "a problem", pruner=None, seed=0)
        except Exception as exc:  # every failure is the test's to report
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert optuna.get_all_study_names(storage) == ["s"]


def test_runs_in_parallel_on_one_storage_draw_different_trials_and_one_run_the_same(tmp_path: Path) -> None:
    """Two ``tune`` runs opening one study at once (optuna's way to tune in parallel) each made a
    sampler seeded alike (the run's seed plus the trials so far: none yet), so their start-up
    trials were the same configurations measured twice. Each trial's draws now come from the
    seed and the trial's number, which the storage hands out once."""
    from counterplan.solver.tuning import _open_study

    def opened(storage: str) -> optuna.Study:
        return _open_study("s", storage, "fingerprint", "a problem", pruner=None, seed=7)

    storage = f"sqlite:///{tmp_path / 'parallel.db'}"
    first, second = opened(storage), opened(storage)  # two processes, neither has run a trial
    a, b = first.ask(), second.ask()  # both running at once
    drawn_a, drawn_b = suggest_config(a, 0.5).model_dump(), suggest_config(b, 0.5).model_dump()
    assert (a.number, b.number) == (0, 1) and a.params != b.params and drawn_a != drawn_b
    # one run alone draws the same trials every time: trial 0 of a new study as the first's
    again = opened(f"sqlite:///{tmp_path / 'again.db'}").ask()
    assert suggest_config(again, 0.5).model_dump() == drawn_a and again.params == a.params
