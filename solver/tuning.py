"""Tuning solver configurations with optuna, the way data scientists tune models.

The search space is defined by run (conditional parameters per engine): the engine and its
parameters, walkers, moves per step and move-selector weights, the forager's accepted-count
limit, and the phases (feature scan and its greedy chain, boundary polish, how long the local
search goes on once feasible). Each trial solves every tuning row under a fixed time budget per
row and scores the configuration by one number, lower is better:

    cost(row) = 0 if valid else 10 + min(goal distance, 1)      (validity first)
              + d / (1 + d), d = feature distance (soft 0)     (then proximity)
              + 0.1 * c / (1 + c), c = changed features        (then sparsity)
    objective = mean cost over the tuning rows

Both proximity and sparsity terms are bounded (below 1 and 0.1), so a valid answer always costs
less than an invalid one, whatever the distance metric's scale (MAD-scaled distances can reach
thousands). The running mean is reported after every row, so optuna's pruner
stops unpromising trials early. The study lives in real optuna storage (SQLite by default, any
RDB URL): stopping and running again resumes it, and optuna-dashboard can open it. Finally the
best configuration is compared with the default on held-out rows the tuning never saw; it beats
the default only when its held-out objective is lower by more than :data:`MEANINGFUL_GAIN`
(:attr:`TuningReport.beats_default`). A smaller gain is within what the time budget's noise
gives: the default is as good, and a configuration slower for no gain is not worth using.

``optuna`` is an optional dependency (``pip install 'counterplan[tune]'``), imported only here.
"""

from __future__ import annotations

import hashlib
import statistics
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from counterplan.planning.calculator import Evaluation as RowEvaluation, ScoreCalculator
from counterplan.planning.errors import ECHO_CHARS, InvalidInputError, ModelFailureError, echo, one_line
from counterplan.planning.problem import CounterfactualProblem
from counterplan.solver.batch.block import stop_watched
from counterplan.solver.core.config import SolverConfig, TerminationConfig, stable_termination
from counterplan.solver.core.scope import CALL_MARGIN_SECONDS
from counterplan.solver.counterfactual import CounterfactualSolver, explain
from counterplan.solver.engines import EngineChoice, choose
from counterplan.solver.local.config import (
    BoundaryPolishPhaseConfig,
    FeatureScanPhaseConfig,
    ForagerConfig,
    GreatDelugeAcceptorConfig,
    HillClimbingAcceptorConfig,
    LateAcceptanceAcceptorConfig,
    LocalSearchPhaseConfig,
    MoveSelectorConfig,
    SimulatedAnnealingAcceptorConfig,
    StepCountingHillClimbingAcceptorConfig,
    TabuSearchAcceptorConfig,
)
from counterplan.solver.result import CounterfactualResult
from counterplan.solver.swarm.config import SwarmPhaseConfig
from counterplan.solver.tuning_sampler import TrialSeededSampler

ENGINES = (
    "tabu_search",
    "hill_climbing",
    "late_acceptance",
    "simulated_annealing",
    "great_deluge",
    "step_counting_hill_climbing",
)
INVALID_PENALTY = 10.0
MEANINGFUL_GAIN = 0.01
"""The held-out gain (default's mean objective minus the tuned one's) beyond which a tuned
configuration is better than the default. A valid answer costs less than 1.1, so 0.01 is about
1% of it: every held-out row's cost 0.01 lower, or one row in twelve 0.12 lower. Less is within
the noise of solves cut by a time budget, whose answers depend on how fast the machine is; a row
made valid gains 10 divided by the rows, far beyond it."""
MAX_TRIALS = 10_000
"""Trials one run may be asked for: each solves every tuning row within its budget, so more is a
typo that would run for days (optuna's sampler also slows with the trials it has); a study
resumed by running the command again continues where it stopped."""
MIN_BUDGET_SECONDS = CALL_MARGIN_SECONDS
"""A budget per row must be longer than this: a solve starts no model call within
:data:`~counterplan.solver.core.scope.CALL_MARGIN_SECONDS` of its time limit (a deadline is a
promise), so with a budget of at most that no row is searched, every trial scores the same
(every answer invalid) and the study tunes nothing."""
SPARSITY_WEIGHT = 0.1


def row_cost(result: CounterfactualResult) -> float:
    """The scalarised cost of one answer (see the module docstring); lower is better."""
    hard0, _, _, soft0, soft1 = result.score_levels
    penalty = 0.0 if result.valid else INVALID_PENALTY + min(-hard0, 1.0)
    distance, changed = -soft0, -soft1
    return penalty + distance / (1.0 + distance) + SPARSITY_WEIGHT * changed / (1.0 + changed)


def suggest_config(trial: optuna.Trial, budget_seconds: float, seed: int = 0) -> SolverConfig:
    """A configuration from the define-by-run search space, capped at ``budget_seconds``."""
    engine = trial.suggest_categorical("engine", ENGINES)
    acceptor: Any
    if engine == "tabu_search":
        acceptor = TabuSearchAcceptorConfig(entity_tabu_size=trial.suggest_int("entity_tabu_size", 0, 7))
    elif engine == "late_acceptance":
        acceptor = LateAcceptanceAcceptorConfig(
            late_acceptance_size=trial.suggest_int("late_acceptance_size", 2, 100, log=True)
        )
    elif engine == "simulated_annealing":
        hard = trial.suggest_float("temperature_hard", 1e-3, 1.0, log=True)
        soft = trial.suggest_float("temperature_soft", 1e-3, 1.0, log=True)
        acceptor = SimulatedAnnealingAcceptorConfig(starting_temperature=f"[{hard!r}/0/0]hard/[{soft!r}/1]soft")
    elif engine == "great_deluge":
        acceptor = GreatDelugeAcceptorConfig(
            water_level_increment_ratio=trial.suggest_float("water_level_increment_ratio", 1e-3, 0.3, log=True)
        )
    elif engine == "step_counting_hill_climbing":
        acceptor = StepCountingHillClimbingAcceptorConfig(
            step_counting_hill_climbing_size=trial.suggest_int("step_counting_size", 2, 50, log=True)
        )
    else:
        acceptor = HillClimbingAcceptorConfig()
    moves = MoveSelectorConfig(
        moves_per_step=trial.suggest_int("moves_per_step", 16, 256, log=True),
        change_weight=trial.suggest_float("change_weight", 0.5, 8.0, log=True),
        revert_weight=trial.suggest_float("revert_weight", 0.0, 4.0),
        pair_change_weight=trial.suggest_float("pair_change_weight", 0.0, 4.0),
        toward_original_weight=trial.suggest_float("toward_original_weight", 0.0, 4.0),
        shrink_weight=trial.suggest_float("shrink_weight", 0.0, 4.0),
        local_step_ratio=trial.suggest_float("local_step_ratio", 0.0, 1.0),
        local_step_scale=trial.suggest_float("local_step_scale", 0.01, 0.5, log=True),
    )
    limit = trial.suggest_categorical("accepted_count_limit", ["all", "4", "16", "64"])
    local = LocalSearchPhaseConfig(
        acceptor=acceptor,
        forager=ForagerConfig(accepted_count_limit=None if limit == "all" else int(limit)),
        move_selector=moves,
        walkers=trial.suggest_int("walkers", 1, 16, log=True),
        termination=stable_termination(trial.suggest_int("unimproved_steps_when_feasible", 2, 30, log=True)),
    )
    phases: list[Any] = []
    if trial.suggest_categorical("feature_scan", [True, False]):
        phases.append(FeatureScanPhaseConfig(greedy_steps=trial.suggest_int("greedy_steps", 0, 8)))
    phases.append(local)
    if trial.suggest_categorical("boundary_polish", [True, False]):
        phases.append(BoundaryPolishPhaseConfig(starts=trial.suggest_int("polish_starts", 1, 64, log=True)))
    return SolverConfig(
        phases=tuple(phases),
        termination=TerminationConfig(spent_limit_seconds=budget_seconds, unimproved_step_count_limit=400),
        random_seed=seed,
    )


def suggest_swarm_config(
    trial: optuna.Trial, budget_seconds: float, seed: int = 0, n_features: int = 300
) -> SolverConfig:
    """A particle-swarm configuration from the define-by-run space (``--engine swarm``): swarm
    size and iterations, the four coefficients, the diversity term, the features searched, the
    box, the snap tolerance and the objective; then a boundary polish, and optionally local search
    between them."""
    top = trial.suggest_int("top_features", 1, max(n_features, 1), log=True)
    swarm = SwarmPhaseConfig(
        particles=trial.suggest_int("particles", 10, 200, log=True),
        iterations=trial.suggest_int("iterations", 10, 200, log=True),
        inertia=trial.suggest_float("inertia", 0.3, 1.0),
        cognitive=trial.suggest_float("cognitive", 0.5, 2.5),
        social=trial.suggest_float("social", 0.5, 2.5),
        diversity=trial.suggest_float("diversity", 0.0, 1.0),
        diversity_from=trial.suggest_categorical("diversity_from", ["swarm_mean", "global_best"]),
        top_features="all" if top >= n_features else top,
        rank_by=trial.suggest_categorical("rank_by", ["information_value", "sensitivity"]),
        box_ratio=trial.suggest_float("box_ratio", 0.05, 4.0, log=True),
        snap_tolerance=trial.suggest_float("snap_tolerance", 1e-3, 0.2, log=True),
        objective=trial.suggest_categorical("objective", ["score", "paper"]),
    )
    phases: list[Any] = [swarm]
    if trial.suggest_categorical("then_local_search", [True, False]):
        phases.append(LocalSearchPhaseConfig(termination=stable_termination()))
    phases.append(BoundaryPolishPhaseConfig())
    return SolverConfig(
        phases=tuple(phases),
        termination=TerminationConfig(spent_limit_seconds=budget_seconds, unimproved_step_count_limit=400),
        random_seed=seed,
    )


def check_row_budget(budget_seconds: float) -> None:
    """Refuse a budget per row in which no row can be searched (:data:`MIN_BUDGET_SECONDS`): such
    a study ran every trial and reported a configuration chosen among answers that all were
    the original row."""
    if not budget_seconds > MIN_BUDGET_SECONDS:
        raise InvalidInputError(
            "tuning",
            "budget_seconds",
            f"must be more than {MIN_BUDGET_SECONDS:g} s per row (a solve starts no model call within "
            f"{CALL_MARGIN_SECONDS:g} s of its time limit: no row would be searched), given {budget_seconds:g}",
        )


def with_budget(config: SolverConfig, budget_seconds: float) -> SolverConfig:
    """``config`` capped at ``budget_seconds`` per solve."""
    cap = TerminationConfig(spent_limit_seconds=budget_seconds, children=(config.termination,))
    return config.model_copy(update={"termination": cap})


@dataclass
class Evaluation:
    """How a configuration does on a set of rows."""

    mean_cost: float
    validity: float
    mean_distance: float
    mean_changed: float
    median_seconds: float

    @classmethod
    def of(cls, results: Sequence[CounterfactualResult], seconds: Sequence[float]) -> Evaluation:
        """Summarise solved rows."""
        valid = [r for r in results if r.valid]
        return cls(
            mean_cost=statistics.fmean(row_cost(r) for r in results),
            validity=len(valid) / len(results),
            mean_distance=statistics.fmean(-r.score_levels[3] for r in valid) if valid else float("nan"),
            mean_changed=statistics.fmean(len(r.changes) for r in valid) if valid else float("nan"),
            median_seconds=statistics.median(seconds),
        )


def evaluate_config(problems: Sequence[CounterfactualProblem], config: SolverConfig) -> Evaluation:
    """Solve every problem with ``config``; summarise."""
    results, seconds = [], []
    for problem in problems:
        start = time.perf_counter()
        results.append(explain(problem, config))
        seconds.append(time.perf_counter() - start)
    return Evaluation.of(results, seconds)


@dataclass
class TuningReport:
    """What a tuning run found."""

    study: optuna.Study
    best_config: SolverConfig
    best_value: float
    importances: dict[str, float]
    default_heldout: Evaluation | None
    tuned_heldout: Evaluation | None

    @property
    def heldout_gain(self) -> float | None:
        """The default's mean held-out objective minus the tuned one's (above 0: the tuned one is
        better); None without held-out rows."""
        if self.default_heldout is None or self.tuned_heldout is None:
            return None
        return self.default_heldout.mean_cost - self.tuned_heldout.mean_cost

    @property
    def beats_default(self) -> bool | None:
        """True when the tuned configuration is better than the default on the held-out rows by more
        than :data:`MEANINGFUL_GAIN`; False when the default is as good (or better); None without
        held-out rows (no verdict)."""
        gain = self.heldout_gain
        return None if gain is None else gain > MEANINGFUL_GAIN

    @property
    def slowdown(self) -> float | None:
        """The tuned configuration's median held-out seconds over the default's (3.6: 3.6 times
        slower); None without held-out rows or a time to compare with."""
        if self.default_heldout is None or self.tuned_heldout is None or self.default_heldout.median_seconds <= 0:
            return None
        return self.tuned_heldout.median_seconds / self.default_heldout.median_seconds


FINGERPRINT_ATTR = "problem_fingerprint"
SUMMARY_ATTR = "problem_summary"
"""A readable line about the problem a study was made for, so a refusal can name both problems."""


class TuningStoppedError(KeyboardInterrupt):
    """``tune``'s ``stop`` said stop: the study keeps its finished trials (the one running when
    it was asked is marked failed, as a Ctrl-C's), and running the same study again resumes it. A
    ``KeyboardInterrupt``, as the Ctrl-C it stands for."""


class StudyMismatchError(InvalidInputError):
    """A named study in the storage was made for another problem; resuming it would mix their trials."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("tuning", field, problem)


def problem_fingerprint(problems: Sequence[CounterfactualProblem]) -> str:
    """A hash of what a study's trials are scored on: the rows, their features, domains and
    immutables, the goals, the distance and its per-feature scales (from the data's statistics),
    and the model (its type, its outputs and what it predicts for each row), so two problems
    share a study only when their trials are comparable. A row whose original the model fails on
    is refused naming it (:func:`_checked_row`): its one model call here is the row's check too."""
    digest = hashlib.sha256()
    for index, problem in enumerate(problems):
        space = problem.space
        digest.update(_model_name(problem).encode())
        digest.update(repr([f.model_dump(mode="json") for f in space.features]).encode())
        digest.update(repr([bound.goal.model_dump(mode="json") for bound in problem.goals]).encode())
        digest.update(repr(problem.distance.model_dump(mode="json")).encode())
        digest.update(np.asarray(problem.scales, dtype=np.float64).tobytes())
        digest.update(repr([(spec.name, spec.classes) for spec in problem.model.outputs]).encode())
        predictions = _checked_row("tuning_problems", index, problem).predictions
        for name in sorted(predictions):
            digest.update(np.round(np.asarray(predictions[name], dtype=np.float64), 9).tobytes())
    return digest.hexdigest()


def checked_original(problem: CounterfactualProblem) -> RowEvaluation:
    """``problem``'s original row scored as a solve scores it first: through the real model (the
    reference path), by the problem's score calculator.

    Raises
    ------
    ModelFailureError
        The model fails on the original (it raises, or gives no finite prediction): every solve
        of the row raises so, and so would every trial scored on it.
    """
    evaluation = ScoreCalculator(problem).check(problem.original_row())
    if evaluation.failures[0] is not None:
        raise ModelFailureError.on_original(evaluation.failures[0], problem.space.missing_names)
    return evaluation


def _checked_row(field: str, index: int, problem: CounterfactualProblem) -> RowEvaluation:
    """:func:`checked_original`, a failure refused naming the row (``field[index]``) before a study
    is opened: the first trial stopped the run with the model's own exception (the fingerprint's
    call), or the held-out comparison after every trial."""
    try:
        return checked_original(problem)
    except ModelFailureError as exc:
        raise InvalidInputError("tuning", f"{field}[{index}]", str(exc)) from None


def _model_name(problem: CounterfactualProblem) -> str:
    """The model's class (a scikit-learn adapter's estimator, else the adapter itself)."""
    model = getattr(problem.model, "model", problem.model)
    return f"{type(model).__module__}.{type(model).__qualname__}"


def problem_summary(problems: Sequence[CounterfactualProblem]) -> str:
    """One readable line: the model, the features, what is held fixed, the goal and the rows."""
    first = problems[0]
    names = list(first.space.names)
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    fixed = [f.name for f in first.space.features if f.constrained and not f.missing]
    goals = "; ".join(_goal_text(bound.goal, bound.output.name) for bound in first.goals)
    model = getattr(first.model, "model", first.model)
    steps = getattr(model, "steps", None)  # a pipeline: named by its final estimator too
    kind = type(model).__name__ + (f"({type(steps[-1][1]).__name__})" if steps else "")
    return (
        f"{kind} on {shown}"
        + (f" (immutable: {', '.join(fixed)})" if fixed else "")
        + f", goal {goals}, {len(problems)} rows"
    )


def _goal_text(goal: Any, output: str) -> str:
    """A goal as the command line writes it."""
    if goal.kind == "class":
        confidence = f"@{goal.confidence:g}" if goal.confidence is not None else ""
        return f"{output}=class:{goal.target}{confidence}"
    if goal.kind == "value":
        return f"{output}=value:{goal.value:g}~{goal.tolerance:g}"
    return f"{output}=range:{goal.low:g}..{goal.high:g}"


def study_fingerprint(
    problems: Sequence[CounterfactualProblem], budget_seconds: float, engine: EngineChoice | None = None
) -> str:
    """What a study's trial values are comparable on: the problem (:func:`problem_fingerprint`),
    the time budget every row is solved within and the engine. A trial scored with 3 s per row is
    no rival of one scored with 0.1 s (the longer budget finds more), and the best trial's
    configuration keeps the budget it was scored with: mixed in one study, a resumed run with
    another ``--budget`` reported, wrote and compared with the default a configuration of the
    earlier budget."""
    key = f"{problem_fingerprint(problems)}/budget={float(budget_seconds)!r}"
    if engine is not None and engine != "local":
        key += f"/engine={engine}"
    return hashlib.sha256(key.encode()).hexdigest()


def study_summary(
    problems: Sequence[CounterfactualProblem], budget_seconds: float, engine: EngineChoice | None = None
) -> str:
    """:func:`problem_summary` with the budget and the engine: what :func:`study_fingerprint` hashes, readable."""
    with_engine = f", engine {engine}" if engine is not None and engine != "local" else ""
    return f"{problem_summary(problems)}, {budget_seconds:g} s per row{with_engine}"


def default_study_name(
    problems: Sequence[CounterfactualProblem], budget_seconds: float, engine: EngineChoice | None = None
) -> str:
    """``counterplan-`` and 12 hex digits of the study's fingerprint (:func:`study_fingerprint`):
    one study per problem, budget and engine."""
    return f"counterplan-{study_fingerprint(problems, budget_seconds, engine)[:12]}"


def tune(
    tuning_problems: Sequence[CounterfactualProblem],
    heldout_problems: Sequence[CounterfactualProblem],
    *,
    n_trials: int,
    budget_seconds: float,
    storage: str = "sqlite:///counterplan-tuning.db",
    study_name: str | None = None,
    seed: int = 0,
    pruner: optuna.pruners.BasePruner | None = None,
    on_trial: Callable[[optuna.Study, optuna.trial.FrozenTrial], None] | None = None,
    engine: EngineChoice | None = None,
    stop: Callable[[], bool] | None = None,
) -> TuningReport:
    """Run (or resume) a study; return the best configuration and the held-out comparison.

    Parameters
    ----------
    tuning_problems:
        The rows the trials are scored on.
    heldout_problems:
        Rows for the final comparison of the tuned configuration with the default.
    n_trials:
        Trials to run now (a resumed study keeps its earlier ones), at most :data:`MAX_TRIALS`.
    budget_seconds:
        Time budget per row and solve, more than :data:`MIN_BUDGET_SECONDS`.
    storage:
        An optuna storage URL (SQLite by default; any RDB URL).
    study_name:
        Resumed when it exists in ``storage`` and was made for the same problem (the same
        tuning rows, model, goals and distance: :func:`problem_fingerprint`), budget and engine
        (:func:`study_fingerprint`); a study of another problem, budget or engine, or one that
        does not minimize one objective, raises :class:`StudyMismatchError`. Default:
        :func:`default_study_name`, one study per problem, budget and engine.
    pruner:
        Default: ``MedianPruner(n_startup_trials=3, n_warmup_steps=1)``.
    on_trial:
        Called after every trial (progress display).
    engine:
        ``exact`` or ``auto`` (:mod:`counterplan.solver.engines`): every trial's configuration ends with the
        exact engine (auto: when the first tuning row's problem can be encoded), so the tuned
        local search is its warm start; the written configuration keeps the exact phase.
        ``swarm``: the trials tune the particle swarm's own settings
        (:func:`suggest_swarm_config`), compared on held-out rows with the default swarm. A study
        belongs to one engine.
    stop:
        Asked before every row's solve, every
        :data:`~counterplan.solver.batch.block.STOP_POLL_SECONDS` while it runs (ending it at its
        next step) and after every trial; once it says stop, the study ends with
        :class:`TuningStoppedError`. The command line's Ctrl-C sets it: a ``KeyboardInterrupt``
        raised by the signal itself is lost when it lands in a weak reference's callback
        (SQLAlchemy's, under optuna's storage), and the study then ran all its trials.
    """
    if not tuning_problems:
        raise ValueError("tuning needs at least one row")
    if not 0 <= n_trials <= MAX_TRIALS:
        raise ValueError(f"n_trials must be from 0 to {MAX_TRIALS:,}, given {n_trials:,}")
    check_row_budget(budget_seconds)
    # checks each tuning row's original (held-out rows do not score trials: checked on their own)
    fingerprint = study_fingerprint(tuning_problems, budget_seconds, engine)
    for index, problem in enumerate(heldout_problems):
        _checked_row("heldout_problems", index, problem)

    def with_engine(config: SolverConfig) -> SolverConfig:
        return config if engine is None else choose(tuning_problems[0], config, engine)[0]

    with_engine(SolverConfig())  # an engine that cannot take the problem is refused before any trial

    study = _open_study(
        study_name or f"counterplan-{fingerprint[:12]}",  # default_study_name's
        storage,
        fingerprint,
        study_summary(tuning_problems, budget_seconds, engine),
        pruner=pruner,
        seed=seed,
    )

    def ask_stop(*_: Any) -> None:
        if stop is not None and stop():
            raise TuningStoppedError("the tuning was stopped; its finished trials are kept")

    objective = _objective(
        tuning_problems,
        budget_seconds,
        seed,
        swarm=engine == "swarm",
        with_engine=with_engine,
        ask_stop=ask_stop,
        stop=stop,
    )
    callbacks = [on_trial] if on_trial is not None else []
    with _storage_in_use(storage):
        study.optimize(objective, n_trials=n_trials, callbacks=[*callbacks, ask_stop])
        ask_stop()
        complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        importances = _importances(study) if len(complete) >= 2 else {}
    if not complete:
        raise ValueError("no trial completed; run more trials")
    best = min(complete, key=lambda t: t.value if t.value is not None else float("inf"))
    best_config = SolverConfig.from_dict(best.user_attrs["config"])
    default_heldout = tuned_heldout = None
    if heldout_problems:
        default_config = with_engine(with_budget(SolverConfig(random_seed=seed), budget_seconds))
        default_heldout = evaluate_config(heldout_problems, default_config)
        tuned_heldout = evaluate_config(heldout_problems, best_config)
    return TuningReport(study, best_config, float(best.value or 0.0), importances, default_heldout, tuned_heldout)


def _objective(
    problems: Sequence[CounterfactualProblem],
    budget_seconds: float,
    seed: int,
    *,
    swarm: bool,
    with_engine: Callable[[SolverConfig], SolverConfig],
    ask_stop: Callable[[], None],
    stop: Callable[[], bool] | None,
) -> Callable[[optuna.Trial], float]:
    """A trial's score: the mean row cost of its configuration over ``problems`` (reported row by
    row, so a poor trial is pruned early); the configuration is kept with the trial."""
    searchable = int(problems[0].space.mutable.sum())

    def objective(trial: optuna.Trial) -> float:
        if swarm:  # the swarm's own parameters are tuned
            config = suggest_swarm_config(trial, budget_seconds, seed, searchable)
        else:
            config = with_engine(suggest_config(trial, budget_seconds, seed))
        costs = []
        for step, problem in enumerate(problems):
            ask_stop()
            solver = CounterfactualSolver(problem, config)
            with stop_watched(solver, stop):  # a stop ends the row's solve at its next step
                result = solver.solve()
            ask_stop()  # a row cut short scores no trial
            costs.append(row_cost(result))
            trial.report(statistics.fmean(costs), step)
            if trial.should_prune():
                raise optuna.TrialPruned
        trial.set_user_attr("config", config.model_dump(mode="json"))
        return statistics.fmean(costs)

    return objective


def _open_study(
    study_name: str,
    storage: str,
    fingerprint: str,
    summary: str,
    *,
    pruner: optuna.pruners.BasePruner | None,
    seed: int,
) -> optuna.Study:
    """The study ``study_name`` in ``storage``, new or resumed, marked as made for the problem with
    this fingerprint; a study of another problem, or one that does not minimize one objective
    (made by optuna for something else: its sampler and pruner would seek the worst
    configurations, or a trial's report fails), raises :class:`StudyMismatchError`, a storage
    that cannot be opened (a bare path, a missing directory, an unknown database) an
    :class:`InvalidInputError` naming it (it was SQLAlchemy's traceback)."""
    study = _create_study(study_name, storage, pruner)
    if study.directions != [optuna.study.StudyDirection.MINIMIZE]:  # a study optuna made for something else
        goal = "has several objectives" if len(study.directions) > 1 else "maximizes its objective"
        raise StudyMismatchError(
            "study_name", f"study {study_name!r} {goal}; a tuning study minimizes one: name another study"
        )
    made_for = study.user_attrs.get(FINGERPRINT_ATTR)
    if made_for is None and study.trials:
        raise StudyMismatchError(
            "study_name", f"study {study_name!r} has trials of an unknown problem; name another study"
        )
    if made_for is not None and made_for != fingerprint:
        theirs = study.user_attrs.get(SUMMARY_ATTR, "a problem of an earlier version")
        raise StudyMismatchError(
            "study_name",
            f"study {study_name!r} was made for another problem: {theirs} (fingerprint {made_for[:12]}); "
            f"this one is {summary} (fingerprint {fingerprint[:12]}); name another study, or leave the "
            "name out for one per problem, budget and engine",
        )
    study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
    study.set_user_attr(SUMMARY_ATTR, summary)
    # Each trial's draws come from (seed, trial number): a resumed study does not replay its
    # start-up trials, and runs in parallel on one storage do not draw the same ones.
    study.sampler = TrialSeededSampler(seed)
    return study


OPEN_RETRIES = (0.1, 0.3, 0.9, 2.7)
"""Seconds waited before each new attempt to open a storage another process is creating: optuna
creates a new database's tables unguarded, so of several ``tune`` runs started at once on one
new SQLite file (optuna's way to tune in parallel) all but one failed ("table studies already
exists", "UNIQUE constraint failed: alembic_version")."""


def _create_study(study_name: str, storage: str, pruner: optuna.pruners.BasePruner | None) -> optuna.Study:
    """``optuna.create_study`` of the study, loaded if it exists, retried while another process
    creates the storage's tables (:data:`OPEN_RETRIES`); a storage that cannot be opened raises an
    :class:`InvalidInputError` naming it."""
    from sqlalchemy.exc import IntegrityError, SQLAlchemyError  # noqa: PLC0415 - optuna's RDB storage brings it

    for wait in (*OPEN_RETRIES, None):
        try:
            return optuna.create_study(
                study_name=study_name,
                storage=storage,
                direction="minimize",
                load_if_exists=True,
                pruner=pruner or optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1),
            )
        except SQLAlchemyError as exc:
            racing = isinstance(exc, IntegrityError) or any(
                words in str(exc) for words in ("already exists", "database is locked")
            )
            if not racing or wait is None:
                raise _unopened(storage, exc) from None
            time.sleep(wait)
        except optuna.exceptions.StorageInternalError as exc:  # another program's table named as optuna's
            raise _unopened(storage, exc.__cause__ or exc) from None
        except (ImportError, ValueError, RuntimeError) as exc:  # a URL it cannot parse, an unknown dialect or
            # driver (ImportError, ValueError), tables set up by an optuna this one cannot read (RuntimeError)
            raise _unopened(storage, exc) from None
    raise AssertionError("unreachable: the last attempt returns or raises")


def _unopened(storage: str, exc: BaseException, doing: str = "open") -> InvalidInputError:
    """One line naming the storage that could not be opened (or used: ``doing``), and why (it was
    SQLAlchemy's traceback, or optuna's: a database whose ``studies`` table is another program's,
    or whose tables another version of optuna set up and this one cannot read)."""
    why = one_line(str(exc).split("\n")[0], ECHO_CHARS * 2)
    return InvalidInputError(
        "tuning", "storage", f"cannot {doing} {echo(storage)} (an optuna storage URL: sqlite:///FILE): {why}"
    )


@contextmanager
def _storage_in_use(storage: str) -> Iterator[None]:
    """A storage that fails once its study is open (a damaged page of its trials' tables: SQLite's
    "database disk image is malformed" when the sampler first reads them) is refused naming it, as
    one that cannot be opened: it ended the run with optuna's traceback. The trials finished
    before are kept, as far as the database keeps them."""
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415 - optuna's RDB storage brings it

    try:
        yield
    except optuna.exceptions.StorageInternalError as exc:  # optuna's wrapper of a failed commit
        raise _unopened(storage, exc.__cause__ or exc, "use") from None
    except SQLAlchemyError as exc:
        raise _unopened(storage, exc, "use") from None


def _importances(study: optuna.Study) -> dict[str, float]:
    """Each parameter's importance over the study's trials (empty when they are too few to judge)."""
    with warnings.catch_warnings():  # optuna warns when a parameter has few trials; the report says so
        warnings.simplefilter("ignore")
        try:
            return dict(optuna.importance.get_param_importances(study))
        except (ValueError, RuntimeError):  # too few distinct trials to judge
            return {}
