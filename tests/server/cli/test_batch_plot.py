"""``batch --plot``: every feature's name is readable inside the figure, however long it is.

The chart is drawn with matplotlib's Agg backend and inspected before it is saved: every text
object (the title, the axis label, each bar's name and share) must lie inside the figure, and
each long name must keep its beginning and its end around an ellipsis, distinct from the others.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from counterplan.server.cli.batch import plot_shares
from counterplan.server.cli.labels import short_labels

NAMES = [
    "income",
    "months_since_most_recent_delinquency_on_any_revolving_trade_line",
    "months_since_most_recent_delinquency_on_any_installment_trade_line",
    "number_of_satisfactory_trades_opened_in_the_last_twenty_four_months",
    "x" * 150,
    "debt",
]


def _drawn(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: list[str]) -> Figure:
    """The figure ``plot_shares`` saves, drawn (its text laid out) and kept for inspection; the
    layout must not have given up (matplotlib warns when the names leave the axes no room)."""
    kept: list[Figure] = []
    save = Figure.savefig

    def keep(figure: Figure, *args: Any, **kwargs: Any) -> None:
        kept.append(figure)
        save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    shares = [0.9 - 0.1 * i for i in range(len(names))]
    features = pd.DataFrame({"feature": names, "changed": [100 - i for i in range(len(names))], "share": shares})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        plot_shares(features, tmp_path / "shares.png")
    collapsed = [str(w.message) for w in seen if "constrained_layout not applied" in str(w.message)]
    assert not collapsed, collapsed
    assert (tmp_path / "shares.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (figure,) = kept
    return figure


@pytest.mark.parametrize("names", [NAMES, [n for n in NAMES if len(n) < 100]], ids=["very-long", "long"])
def test_long_feature_names_stay_inside_the_figure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: list[str]
) -> None:
    figure = _drawn(monkeypatch, tmp_path, names)
    canvas = FigureCanvasAgg(figure)  # Agg: the text laid out as the PNG has it
    canvas.draw()
    renderer = canvas.get_renderer()
    (axes,) = figure.axes
    texts = [*figure.texts, axes.title, axes.xaxis.label, *axes.get_yticklabels(), *axes.texts]
    assert any("how often each feature is changed" in t.get_text() for t in texts), "the title is drawn"
    bounds = figure.bbox
    for text in texts:
        if not text.get_text() or not text.get_visible():
            continue
        box = text.get_window_extent(renderer)
        inside = box.x0 >= bounds.x0 - 1 and box.x1 <= bounds.x1 + 1 and box.y0 >= bounds.y0 - 1
        assert inside and box.y1 <= bounds.y1 + 1, (text.get_text(), box, bounds)


def test_a_long_name_keeps_its_beginning_and_its_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    figure = _drawn(monkeypatch, tmp_path, NAMES)
    (axes,) = figure.axes
    labels = [label.get_text() for label in axes.get_yticklabels()][::-1]  # drawn bottom-up
    assert len(labels) == len(NAMES) and len(set(labels)) == len(NAMES), labels  # none dropped, none alike
    for name, label in zip(NAMES, labels, strict=True):
        if len(name) <= 40:
            assert label == name
            continue
        head, _, tail = label.partition("…")
        assert tail and name.startswith(head) and name.endswith(tail) and len(head) >= 10 and len(tail) >= 10, label


def test_names_alike_at_both_ends_get_labels_long_enough_to_differ() -> None:
    names = ["a" * 20 + "_revolving_" + "b" * 20, "a" * 20 + "_installed_" + "b" * 20, "short"]
    labels = short_labels(names)
    assert len(set(labels)) == 3 and labels[2] == "short", labels
