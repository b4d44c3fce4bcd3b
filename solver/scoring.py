"""The planning domain's score calculator seen as the engines' batch scorer.

The engines know a problem only through :class:`~counterplan.solver.core.protocol.BatchScorer`;
:class:`CalculatorScorer` adapts :class:`~counterplan.planning.calculator.ScoreCalculator` to it:
batched scoring (features computed from others set on the rows as scored), the real model's check
of answers, and the prediction kept for a best row when the solve is stopping.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from counterplan.planning.calculator import Evaluation, ScoreCalculator
from counterplan.solver.core.protocol import FloatMatrix


class CalculatorScorer:
    """Adapts :class:`~counterplan.planning.calculator.ScoreCalculator` to the engines' batch-scorer protocol.

    ``original`` (the original row's evaluation) answers a batch of that row alone without a
    model call; ``on_give_up`` is called when the calculator stops calling a model that keeps
    failing (the solve then ends with what it found).
    """

    def __init__(
        self,
        calculator: ScoreCalculator,
        original: Evaluation | None = None,
        on_give_up: Callable[[], None] | None = None,
    ) -> None:
        self.calculator = calculator
        self._original = original
        self._on_give_up = on_give_up

    @property
    def calculation_count(self) -> int:
        """Candidates scored so far."""
        return self.calculator.calculation_count

    @property
    def model_call_count(self) -> int:
        """Model calls made so far."""
        return self.calculator.model_call_count

    @property
    def call_seconds(self) -> float:
        """How long the next model call is expected to take (the calculator's running estimate)."""
        return self.calculator.call_seconds

    def score_final(self, X: FloatMatrix) -> FloatMatrix:
        """Score a batch with one model call even when the solve is stopping (final answers), each
        row as it is reported (:meth:`ScoreCalculator.check`)."""
        return self.calculator.check(X).scores

    def check(self, X: FloatMatrix) -> Evaluation:
        """Every row checked through the real model in one call, even when the solve is stopping,
        as it is reported: the evaluation's ``rows`` are the rows checked."""
        return self.calculator.check(X)

    def check_best(self, row: FloatMatrix, *, stopping: bool) -> Evaluation:
        """The best row re-checked through the model on its own, as it is reported. A solve that is
        stopping (its time is up, it was cancelled, the model keeps failing) keeps the model's
        prediction of the row from the batch it was found in, so it ends within one model call of
        its limit; only a row the calculator did not keep as reported costs one more call."""
        calculator = self.calculator
        kept = calculator.evaluation_of(row) if stopping or calculator.gave_up is not None else None
        return kept if kept is not None else calculator.check(row)

    def complete(self, X: FloatMatrix) -> FloatMatrix:
        """``X`` with the features computed from others set (as is without learned constraints)."""
        relations = self.calculator.problem.relations
        return X if relations is None else relations.apply(X)

    def score(self, X: FloatMatrix, beat: FloatMatrix | None = None) -> FloatMatrix:
        """Score a batch with one model call (the original row alone is already scored); with
        ``beat``, rows that cannot beat it score :data:`~counterplan.planning.calculator.PRUNED`
        without the model."""
        space = self.calculator.problem.space
        if self._original is not None and X.shape[0] == 1 and np.array_equal(X[0], space.original):
            return self._original.scores.copy()
        relations = self.calculator.problem.relations
        if relations is not None:  # the engines keep the rows as scored: computed features set
            X[...] = relations.apply(X)
        scores = self.calculator.calculate(X, beat).scores
        if self.calculator.gave_up is not None and self._on_give_up is not None:
            self._on_give_up()  # the model keeps failing: end the solve with what it found
        return scores
