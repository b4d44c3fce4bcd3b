"""The solves of one explain request: every instance checked first, then each explained in turn.

This is the part of the runtime that knows no KServe: it takes the runtime's
:class:`~counterplan.solver.explainer.Explainer` (built once, at load) and a checked
:class:`~counterplan.server.kserve.request.ExplainRequest`, and returns the response's JSON. Each
answer is the :class:`~counterplan.solver.result.CounterfactualResult` as ``counterplan explain
--json`` prints it (``model_dump(mode="json")``): one rendering of a result for the command line,
the KServe runtime and anyone reading both.

Every instance is checked before the first solve, so a bad instance late in a request costs no
search. Each instance's solve is capped by its share of the request's time
(:func:`~counterplan.server.kserve.request.instance_seconds`): the request answers by its deadline.
Instances run one after another on the calling thread (the runtime runs this off the event loop);
the answers are the same as ``Explainer.explain(row, seed=...)`` gives, whatever else the server
is doing, unless a time limit, the server's shutdown or the request's own stop (its client left)
cuts a search short.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from counterplan.planning.errors import MISSING_THE_MODEL_FAILS_ON, InvalidInputError, ModelFailureError
from counterplan.planning.problem import CounterfactualProblem
from counterplan.planning.profile import InstanceError
from counterplan.planning.spec import ProblemSpec
from counterplan.server.kserve.request import ExplainLimits, ExplainRequest, RequestError, instance_seconds
from counterplan.solver.core.config import SolverConfig, TerminationConfig
from counterplan.solver.counterfactual import CounterfactualSolver
from counterplan.solver.explainer import Explainer


def explain_instances(
    explainer: Explainer,
    request: ExplainRequest,
    limits: ExplainLimits,
    *,
    arrived: float | None = None,
    stops: SolveStops | None = None,
    cancelled: SolveStops | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """``{"explanations": [result, ...]}``, one result per instance in order.

    ``arrived`` is when the request came in, by ``clock`` (default: now): the time it waited for
    a worker thread, busy with other requests, counts against ``request_seconds``, so a request
    that waited answers with what is left of its time rather than its whole time again. With
    ``stops``, shutdown stops each search at its next step: it answers its best so far. With
    ``cancelled``, this request's own stop (its client left, no one reads the answer), its search
    stops at its next step and no later instance starts: the answer has the instances explained
    so far.

    Raises :class:`RequestError` (the caller's fault, naming the field) before any solve when an
    instance or the request's spec does not fit the model; a model that fails during the search
    raises its own error (the predictor's fault, not the request's), unless the instance it fails
    on leaves features missing: then :class:`RequestError` names the first of them (the model takes
    no missing values, and the caller's gaps are the request's fault).
    """
    started = clock() if arrived is None else arrived
    parameters = request.parameters
    problems = [_problem(explainer, i, instance, parameters.spec) for i, instance in enumerate(request.instances)]
    seed = parameters.seed if parameters.seed is not None else explainer.seed
    engine = explainer.engine
    explanations = []
    for i, problem in enumerate(problems):
        if cancelled is not None and cancelled.stopped:
            break
        left = limits.request_seconds - (clock() - started)
        config = capped(explainer.config, instance_seconds(parameters, limits, left, len(problems) - i))
        solver = CounterfactualSolver(problem, config, seed, parameters.num_counterfactuals, engine)
        with contextlib.ExitStack() as running:
            for each in (stops, cancelled):
                if each is not None:
                    running.enter_context(each.running(solver))
            try:
                explanations.append(solver.solve().model_dump(mode="json"))
            except ModelFailureError as exc:
                if not exc.missing:  # the predictor's fault: its own error (500)
                    raise
                more = f" (and {len(exc.missing) - 1} more)" if len(exc.missing) > 1 else ""
                raise RequestError(f"instances[{i}].{exc.missing[0]}", MISSING_THE_MODEL_FAILS_ON + more) from None
    return {"explanations": explanations}


class SolveStops:
    """Running searches, stopped together: a server's, when it shuts down (each answers its best
    so far by the server's grace, instead of the client getting an error when the grace cuts the
    request), or one request's, when its client leaves. An instance that starts after the stop
    stops at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopped = False
        self._running: set[CounterfactualSolver] = set()

    @contextlib.contextmanager
    def running(self, solver: CounterfactualSolver) -> Iterator[None]:
        """``solver`` runs inside; stopped at once when the stop came first."""
        with self._lock:
            self._running.add(solver)
            if self._stopped:
                solver.terminate_early()
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(solver)

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        with self._lock:
            return self._stopped

    def stop(self) -> None:
        """Stop every running search at its next step, and every later one at once."""
        with self._lock:
            self._stopped = True
            for solver in self._running:
                solver.terminate_early()


def capped(config: SolverConfig, seconds: float) -> SolverConfig:
    """``config`` ending by ``seconds`` at the latest, whatever its own termination says."""
    termination = TerminationConfig(spent_limit_seconds=seconds, children=(config.termination,))
    return config.model_copy(update={"termination": termination})


def _problem(
    explainer: Explainer, index: int, instance: Mapping[str, Any], spec: ProblemSpec | None
) -> CounterfactualProblem:
    """The problem of one instance; a bad value names ``instances[i].FEATURE``, a spec that does
    not fit the model names ``parameters.spec.FIELD``."""
    try:
        return explainer.problem(instance, spec=spec)
    except InstanceError as exc:
        feature, problem = exc.problems[0]
        more = f" (and {len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
        raise RequestError(f"instances[{index}].{feature}", problem + more) from None
    except InvalidInputError as exc:
        where = "parameters.spec" if spec is not None else f"instances[{index}]"
        raise RequestError(f"{where}.{exc.field}", exc.problem) from None
