"""Feature names as a chart's labels: short enough to leave the chart its room, and still telling.

A bar chart's names sit left of its bars; a 60-character name pushes the bars and the title out
of a fixed-width figure (matplotlib gives up the layout). So a long name is shortened around an
ellipsis in its middle: feature names differ at either end (``months_since_..._revolving_line``,
``..._installment_line``), so both ends are kept. No name is ever dropped, and names that would
shorten alike are kept longer until their labels differ.
"""

from __future__ import annotations

from collections.abc import Sequence

ELLIPSIS = "…"
LABEL_LIMIT = 36
"""Characters of a label at most (unless two names need more to stay apart)."""


def short_label(name: str, limit: int = LABEL_LIMIT) -> str:
    """``name`` if it fits in ``limit`` characters, else its beginning and end around an ellipsis."""
    if len(name) <= limit:
        return name
    kept = max(limit - len(ELLIPSIS), 2)
    head = (kept + 1) // 2
    return f"{name[:head]}{ELLIPSIS}{name[len(name) - (kept - head) :]}"


def short_labels(names: Sequence[str], limit: int = LABEL_LIMIT) -> list[str]:
    """Each name's label (:func:`short_label`); the names whose labels would be alike get longer
    ones, until every label differs (at worst, the names themselves)."""
    limits = [limit] * len(names)
    while True:
        labels = [short_label(name, cap) for name, cap in zip(names, limits, strict=True)]
        alike = {i for i, label in enumerate(labels) if labels.count(label) > 1 and len(names[i]) > limits[i]}
        if not alike:
            return labels
        for i in alike:
            limits[i] += 4
