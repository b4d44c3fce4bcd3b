"""The audit's ``report.html``: one self-contained page a reviewer opens in any browser, offline.

Everything is in the file: the styles inline, the plots as base64 PNG images drawn with
matplotlib's Agg renderer (the ``plot`` extra, loaded only here, through ``Figure`` objects: no
pyplot, no global state), no script and no link to anything outside. Every string that comes from
the data (group values, feature names, rule conditions, reasons) is escaped, so a category named
``<script>`` is shown, never run.

The page holds a summary table, then four plots, each an ``<img>`` with a stable id (a test finds
them by it): ``plot-recourse-rate`` (the recourse rate of each value of each group column, with its
Wilson score interval, against the overall rate), ``plot-cost`` (the answers' distance by group
value: box plots from the rows when they are given, else the mean with its interval),
``plot-features`` (the share of each value's answers that change each feature, as a heat map of
the features some answer changes) and
``plot-rules`` (each global rule's coverage and validity); then the tables behind them.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from counterplan.solver.audit.report import AuditReport, AuditRule, Interval, level_text
from counterplan.solver.audit.stats import group_labels

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

PLOT_IDS = ("plot-recourse-rate", "plot-cost", "plot-features", "plot-rules")
"""The ids of the page's plot images, in page order."""
RATE_COLOUR = "#4c72b0"
COST_COLOUR = "#dd8452"
COVERAGE_COLOUR = "#55a868"
VALIDITY_COLOUR = "#c44e52"
PALETTE = (RATE_COLOUR, COST_COLOUR, COVERAGE_COLOUR, VALIDITY_COLOUR)
"""The plots' colours (a test looks for them in a screenshot)."""
WIDTH = 10.0
"""Every figure's width in inches (at 100 dpi: 1,000 pixels)."""
MAX_FEATURES = 20
"""Features shown in the heat map, the most often changed first."""
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1040px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img.plot { display: block; max-width: 100%; margin: 0.5em 0; }
p.note { color: #555; font-size: 0.9em; }
"""


def write_report(report: AuditReport, rows: pd.DataFrame | None, path: str | Path) -> Path:
    """Write ``report`` as one self-contained HTML page at ``path`` (a directory gets
    ``report.html``); ``rows`` (the audit's rows with their records, as ``rows.parquet`` holds
    them) lets the cost plot show each group's spread, not only its mean. Returns the file."""
    target = Path(path)
    if target.is_dir():
        target = target / "report.html"
    target.write_text(render(report, rows), encoding="utf-8")
    return target


def render(report: AuditReport, rows: pd.DataFrame | None = None) -> str:
    """The page's HTML text."""
    title = "Recourse audit"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        f'<p class="note">Goal: {_e(report.settings.goal)}; rows: {_e(report.settings.rows)}; '
        f"started {_e(report.settings.started)}; intervals: {_levels(report)}.</p>",
        _partial_note(report),
        '<h2 id="summary">Summary</h2>',
        _summary_table(report),
        '<h2 id="recourse-rate">Recourse rate by group</h2>',
        _image("plot-recourse-rate", _recourse_figure(report), "Recourse rate by group value, with intervals"),
        '<h2 id="cost">Cost by group</h2>',
        _image("plot-cost", _cost_figure(report, rows), "Cost of the answers by group value"),
        '<h2 id="features">What is asked of whom</h2>',
        _image("plot-features", _features_figure(report), "Share of answers changing each feature, by group value"),
        '<h2 id="rules">Global rules</h2>',
        _rules_table(report.rules),
        _image("plot-rules", _rules_figure(report.rules), "Coverage and validity of each global rule"),
        '<h2 id="groups">Groups</h2>',
        _groups_table(report),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _partial_note(report: AuditReport) -> str:
    """A stopped audit says so (``partial``): its page read as the whole selection's."""
    if not report.partial:
        return ""
    return (
        '<p class="note" id="partial"><strong>Partial audit</strong>: it was stopped before every row was '
        f"searched and proved; the figures are over the {report.n_rows:,} rows done.</p>"
    )


def _levels(report: AuditReport) -> str:
    """What the page's intervals are (their level is ``confidence``, 0.95 by default)."""
    if not report.settings.bootstrap:
        return "none (no bootstrap)"
    level = level_text(report.confidence)
    return (
        f"{level}: recourse rates Wilson score, other figures percentile bootstrap "
        f"({report.settings.bootstrap:,} resamples)"
    )


def _e(value: Any) -> str:
    """Any value from the data as escaped text."""
    return html.escape(str(value), quote=True)


def _share(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:,.4g}"


def _interval(interval: Interval, share: bool = False) -> str:
    low, high = interval
    if low is None or high is None:
        return ""
    shown = _share if share else _number
    return f" [{shown(low)}, {shown(high)}]"


def _table(header: Sequence[str], body: Sequence[Sequence[tuple[str, bool]]]) -> str:
    """An HTML table; each cell is (escaped text, is a number)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    lines = [
        "<tr>" + "".join(f'<td class="num">{t}</td>' if num else f"<td>{t}</td>" for t, num in row) + "</tr>"
        for row in body
    ]
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(lines)}</tbody></table>"


def _summary_table(report: AuditReport) -> str:
    needing = report.n_rows - len(report.already_met)
    reasons = ", ".join(f"{_e(k)}: {v:,}" for k, v in sorted(report.unproven_reasons.items()))
    entries: list[tuple[str, str]] = [
        ("Rows audited", f"{report.n_rows:,}"),
        ("Rows that need a change", f"{needing:,}"),
        ("Recourse rate", _share(report.recourse_rate) + _interval(report.recourse_rate_ci, share=True)),
        ("With recourse", f"{len(report.with_recourse):,}"),
        ("No recourse, proven", f"{len(report.no_recourse_proven):,}"),
        ("No recourse, not proven", f"{len(report.no_recourse_unproven):,}" + (f" ({reasons})" if reasons else "")),
        ("Already meet the goal", report.already_met_text()),
        ("Errors", f"{len(report.errors):,}"),
        ("Mean cost (distance)", _number(report.cost_mean) + _interval(report.cost_mean_ci)),
        ("Median cost", _number(report.cost_median)),
        ("Mean changed features", _number(report.changed_mean)),
    ]
    if report.robustness is not None:
        robust = report.robustness
        entries.append(
            (f"Still valid after {robust.k} refits", f"mean {_share(robust.mean)}, lowest {_share(robust.minimum)}")
        )
    timing = report.timing
    entries.append(("Time", f"{timing.seconds:,.1f} s ({_number(timing.rows_per_second)} rows/s searched)"))
    settings = report.settings
    entries.append(("Engine", _e(settings.engine or "the explainer's") + f"; seed {settings.seed}"))
    return _table(["", ""], [[(_e(k), False), (v, True)] for k, v in entries])


def _groups_table(report: AuditReport) -> str:
    if not report.groups:
        return '<p class="note">No group columns were given.</p>'
    body = []
    for column, values in report.groups.items():
        burden = report.burden.get(column)
        for value, figures in values.items():
            ratio = burden.values.get(value) if burden is not None else None
            body.append(
                [
                    (_e(column), False),
                    (_e(value), False),
                    (f"{figures.n:,}", True),
                    (_share(figures.recourse_rate) + _interval(figures.recourse_rate_ci, share=True), True),
                    (f"{figures.no_recourse_proven:,}", True),
                    (f"{figures.no_recourse_unproven:,}", True),
                    (_number(figures.cost_mean) + _interval(figures.cost_mean_ci), True),
                    (_number(figures.cost_median), True),
                    (_number(ratio.cost_ratio) + _interval(ratio.cost_ratio_ci) if ratio else "-", True),
                    (_number(ratio.no_recourse_ratio) if ratio else "-", True),
                ]
            )
    header = [
        "column",
        "value",
        "n",
        "recourse rate",
        "no recourse (proven)",
        "no recourse (unproven)",
        "mean cost",
        "median cost",
        "cost burden",
        "no-recourse burden",
    ]
    return _table(header, body)


def _rules_table(rules: Sequence[AuditRule]) -> str:
    if not rules:
        return '<p class="note">No rule reaches the validity asked for.</p>'
    body = [
        [
            (f"R{i}", False),
            (_e(rule.condition_text()), False),
            (_e(rule.action_text()), False),
            (f"{rule.rows_covered:,}", True),
            (_share(rule.coverage), True),
            (_share(rule.validity), True),
            (_number(rule.cost_mean), True),
        ]
        for i, rule in enumerate(rules, start=1)
    ]
    return _table(["rule", "for rows with", "change", "rows covered", "coverage", "validity", "mean cost"], body)


def _image(element_id: str, figure: Figure, alt: str) -> str:
    """A figure as an ``<img>`` holding its PNG."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img class="plot" id="{element_id}" alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def _figure(height: float, columns: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure  # noqa: PLC0415 - the plot extra, loaded only for a report

    figure = Figure(figsize=(WIDTH, height), layout="constrained")
    axes = figure.subplots(1, columns, squeeze=False)[0]
    return figure, list(axes)


def _group_items(report: AuditReport) -> list[tuple[str, str]]:
    """Every (column, value) of the report's groups, in its order."""
    return [(column, value) for column, values in report.groups.items() for value in values]


def _label(column: str, value: str, columns: int) -> str:
    return value if columns == 1 else f"{column}={value}"


def _recourse_figure(report: AuditReport) -> Figure:
    items = _group_items(report)
    figure, (axes,) = _figure(1.4 + 0.35 * max(len(items), 1))
    if items:
        labels = [_label(c, v, len(report.groups)) for c, v in items]
        rates = [report.groups[c][v].recourse_rate for c, v in items]
        intervals = [report.groups[c][v].recourse_rate_ci for c, v in items]
    else:
        labels, rates, intervals = ["all rows"], [report.recourse_rate], [report.recourse_rate_ci]
    values = [100 * r if r is not None else 0.0 for r in rates]
    errors = _errors(values, intervals, scale=100)
    positions = list(range(len(labels)))[::-1]  # the first value on top
    axes.barh(positions, values, xerr=errors, color=RATE_COLOUR, ecolor="#222", capsize=3)
    _no_figure(axes, positions, rates, "no row needs a change")
    axes.set_yticks(positions, labels=[_short(label) for label in labels])
    if report.recourse_rate is not None:
        axes.axvline(100 * report.recourse_rate, color="#222", linestyle="--", linewidth=1, label="overall")
        axes.legend(loc="lower right")
    axes.set_xlim(0, 105)
    axes.set_xlabel("rows with a valid answer (%)")
    axes.set_title(f"Recourse rate by group value (bars: {level_text(report.confidence)} Wilson score interval)")
    return figure


def _no_figure(axes: Axes, positions: Sequence[int], figures: Sequence[float | None], why: str) -> None:
    """Say ``why`` beside each bar that has no figure: its bar of length 0 read as a rate of 0%
    (a group whose every row meets the goal already) or a cost of 0 (a group without an answer)."""
    for position, figure in zip(positions, figures, strict=True):
        if figure is None:
            axes.text(0.01, position, why, va="center", color="#555", fontsize=8, transform=axes.get_yaxis_transform())


def _errors(values: list[float], intervals: Sequence[Interval], scale: float) -> list[list[float]]:
    """Error bar lengths below and above each value (0 where there is no interval)."""
    below, above = [], []
    for value, (low, high) in zip(values, intervals, strict=True):
        below.append(max(value - scale * low, 0.0) if low is not None else 0.0)
        above.append(max(scale * high - value, 0.0) if high is not None else 0.0)
    return [below, above]


def _short(label: str, limit: int = 30) -> str:
    """A label from the data as a plot shows it: cut to ``limit`` characters, and each ``$``
    escaped, since matplotlib reads the text between two ``$`` as mathtext: a group value
    ``$\\alpha^$`` made the page's drawing raise after the whole audit had run, and ``cost $5 to $6``
    was drawn as a formula."""
    cut = label if len(label) <= limit else label[: limit - 1] + "…"
    return cut.replace("$", r"\$")


def _cost_figure(report: AuditReport, rows: pd.DataFrame | None) -> Figure:
    items = _group_items(report)
    figure, (axes,) = _figure(1.4 + 0.35 * max(len(items), 1))
    labels = [_label(c, v, len(report.groups)) for c, v in items] or ["all rows"]
    positions = list(range(len(labels)))[::-1]
    spreads = _cost_spreads(report, rows, items)
    if spreads is not None and any(len(s) for s in spreads):
        boxes = axes.boxplot(
            [s if len(s) else [math.nan] for s in spreads],
            positions=positions,
            patch_artist=True,
            widths=0.6,
            showfliers=False,
            medianprops={"color": "#222"},
            **_horizontal(),
        )
        for box in boxes["boxes"]:
            box.set_facecolor(COST_COLOUR)
        centres = [float(pd.Series(s).mean()) if len(s) else math.nan for s in spreads]
        axes.plot(centres, positions, "D", color="#222", markersize=5, label="mean")
        axes.legend(loc="lower right")
        axes.set_title("Cost of the answers by group value (boxes: quartiles, whiskers: 1.5 IQR)")
    else:
        if items:
            means: list[float | None] = [report.groups[c][v].cost_mean for c, v in items]
            intervals = [report.groups[c][v].cost_mean_ci for c, v in items]
        else:
            means, intervals = [report.cost_mean], [report.cost_mean_ci]
        values = [m if m is not None else 0.0 for m in means]
        axes.barh(positions, values, xerr=_errors(values, intervals, 1.0), color=COST_COLOUR, capsize=3)
        _no_figure(axes, positions, means, "no answer")
        axes.set_title(
            f"Mean cost of the answers by group value (bars: {level_text(report.confidence)} bootstrap interval)"
        )
    axes.set_yticks(positions, labels=[_short(label) for label in labels])
    axes.set_xlabel("distance of the answer (the problem's distance)")
    return figure


def _horizontal() -> dict[str, Any]:
    """Box plots lying down: ``orientation`` from matplotlib 3.10, ``vert`` before (deprecated since)."""
    import matplotlib  # noqa: PLC0415

    major, minor = (int(part) for part in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def _cost_spreads(report: AuditReport, rows: pd.DataFrame | None, items: list[tuple[str, str]]) -> list[Any] | None:
    """Each group value's answers' distances, from the rows (None: the rows cannot say)."""
    if rows is None or "distance" not in rows.columns:
        return None
    if "audit_status" in rows.columns:
        answered = rows[rows["audit_status"] == "with_recourse"]
    elif "valid" in rows.columns and "status" in rows.columns:
        answered = rows[rows["valid"].astype(bool) & (rows["status"] == "ok")]
    else:
        return None
    if not items:
        return [answered["distance"].dropna().to_numpy()]
    if any(column not in answered.columns for column, _ in items):
        return None
    # the report's keys (5 for 5.0, missing for a gap): a column's text (5.0, nan) matched none of a
    # numeric column's values, whose boxes were left empty
    return [answered.loc[(group_labels(answered[c]) == v).to_numpy(), "distance"].dropna().to_numpy() for c, v in items]


def shown_features(report: AuditReport) -> list[str]:
    """The heat map's features: those some answer changes, the most often changed first (at most
    :data:`MAX_FEATURES`); a row of zeros would only push the others apart."""
    changed = [(name, f.changed) for name, f in report.features.items() if f.changed > 0]
    return [name for name, _ in sorted(changed, key=lambda item: (-item[1], item[0]))[:MAX_FEATURES]]


def _features_figure(report: AuditReport) -> Figure:
    features = [(name, report.features[name]) for name in shown_features(report)]
    items = _group_items(report)
    columns = [_label(c, v, len(report.groups)) for c, v in items] or ["all rows"]
    figure, (axes,) = _figure(1.8 + 0.32 * max(len(features), 1))
    if not features:
        axes.text(0.5, 0.5, "no answer changes any feature", ha="center", va="center", color=RATE_COLOUR)
        axes.set_axis_off()
        return figure
    grid = [
        [_or_nan(f.by_group.get(c, {}).get(v)) if items else _or_nan(f.share) for c, v in (items or [("", "")])]
        for _, f in features
    ]
    image = axes.imshow(grid, cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
    for i, row in enumerate(grid):
        for j, share in enumerate(row):
            if not math.isnan(share):
                axes.text(j, i, f"{share:.0%}", ha="center", va="center", color="white" if share > 0.6 else "#222")
    axes.set_xticks(range(len(columns)), labels=[_short(c, 18) for c in columns], rotation=30, ha="right")
    axes.set_yticks(range(len(features)), labels=[_short(name) for name, _ in features])
    figure.colorbar(image, ax=axes, label="share of the answers that change it")
    axes.set_title("What is asked of whom: share of each group's answers that change each feature")
    return figure


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _rules_figure(rules: Sequence[AuditRule]) -> Figure:
    figure, (axes,) = _figure(1.6 + 0.45 * max(len(rules), 1))
    if not rules:
        axes.text(0.5, 0.5, "no global rule", ha="center", va="center", color=RATE_COLOUR)
        axes.set_axis_off()
        return figure
    positions = list(range(len(rules)))[::-1]
    coverage = [100 * (r.coverage or 0.0) for r in rules]
    validity = [100 * (r.validity or 0.0) for r in rules]
    axes.barh([p + 0.2 for p in positions], coverage, height=0.4, color=COVERAGE_COLOUR, label="coverage")
    axes.barh([p - 0.2 for p in positions], validity, height=0.4, color=VALIDITY_COLOUR, label="validity")
    axes.set_yticks(positions, labels=[f"R{i}" for i in range(1, len(rules) + 1)])
    axes.set_xlim(0, 105)
    axes.set_xlabel("% of the rows needing a change (coverage), % of the covered rows helped (validity)")
    axes.legend(loc="lower right")
    axes.set_title("Global rules: coverage and validity (the table above says what each asks)")
    return figure
