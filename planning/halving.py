"""Finding the rows a model call fails on by halving the call: one driver for every caller.

A model that raises on a few candidates of a batch fails the whole batch; calling the halves
again keeps the predictions of the rows it answers. A solve's calculator, the vectorised
engine's block scoring and a learned relation's regressor (:mod:`counterplan.planning.relations`)
halve by this one driver, each with its own policy of where to cut and when to give a run up
(the calculator: a solve's budget of failed calls and the stop check; the block: an instance's
boundary first, so one instance's failures cost the others nothing; a relation: down to the
rows it fails on).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from counterplan.planning.errors import ModelAdapterError

T = TypeVar("T")


@dataclass(frozen=True)
class Run:
    """Rows ``start:stop`` of a call, ``depth`` halvings below the call that holds them."""

    start: int
    stop: int
    depth: int = 0

    @property
    def rows(self) -> slice:
        """The run's rows."""
        return slice(self.start, self.stop)

    @property
    def size(self) -> int:
        """How many rows."""
        return self.stop - self.start

    def halves(self) -> tuple[Run, Run]:
        """The run cut in the middle, one halving deeper."""
        middle = (self.start + self.stop) // 2
        return Run(self.start, middle, self.depth + 1), Run(middle, self.stop, self.depth + 1)


def call_in_halves(
    rows: int, call: Callable[[Run], T], split: Callable[[Run, Exception], tuple[Run, Run] | None]
) -> list[tuple[Run, T | Exception]]:
    """Every run of ``rows`` rows with ``call``'s result, or the exception it raised, in row order.

    Where ``call`` raises, ``split`` says how to cut the run in two to call again (``None``: the
    run keeps its exception). Runs are called depth first, left before right, so a policy that
    counts failures sees them in row order. A :class:`ModelAdapterError` is counterplan's own
    reading of the model, not a row's fault: it is raised, never halved.
    """
    out: list[tuple[Run, T | Exception]] = []
    pending = [Run(0, rows)]
    while pending:
        run = pending.pop()
        try:
            out.append((run, call(run)))
        except ModelAdapterError:
            raise
        except Exception as error:
            halves = split(run, error)
            if halves is None:
                out.append((run, error))
            else:
                pending += [halves[1], halves[0]]
    return out
