"""The audit's report.html: self-contained, escaped, and drawn, checked in a real browser.

Headless Chromium (Debian's ``chromium``; ``.ci/run`` installs it) opens the page twice: once to
dump the DOM after a small probe script has recorded where each plot image sits and whether it
decoded, once to take a screenshot; the regions of the plots must then hold drawn pixels in the
plots' own colours. Without the browser the test is skipped, unless COUNTERPLAN_REQUIRE_BROWSER=1
(CI sets it), when it fails.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")

from counterplan.solver.audit.html import (
    COST_COLOUR,
    COVERAGE_COLOUR,
    PLOT_IDS,
    RATE_COLOUR,
    VALIDITY_COLOUR,
    render,
    shown_features,
    write_report,
)
from counterplan.solver.audit.report import (
    Action,
    AuditReport,
    AuditRule,
    AuditSettings,
    AuditTiming,
    BurdenFigures,
    Condition,
    FeatureFigures,
    GroupBurden,
    GroupFigures,
)
from counterplan.solver.audit.rules import global_rules
from counterplan.solver.audit.runner import AuditOptions, run_audit
from counterplan.solver.batch.rows import RowSelection
from tests.solver.audit.test_rules import credit_case

pytestmark = pytest.mark.unit

NASTY = '<img src=x onerror="alert(1)">'
"""A group value a page must show as text, never run."""


def _group(n: int, rate: float, cost: float) -> GroupFigures:
    with_recourse = round(n * rate)
    return GroupFigures(
        n=n,
        with_recourse=with_recourse,
        no_recourse_proven=(n - with_recourse) // 2,
        no_recourse_unproven=n - with_recourse - (n - with_recourse) // 2,
        errors=0,
        already_met=3,
        recourse_rate=rate,
        recourse_rate_ci=(rate - 0.08, min(rate + 0.07, 1.0)),
        cost_mean=cost,
        cost_mean_ci=(cost * 0.8, cost * 1.25),
        cost_median=cost * 0.9,
        changed_mean=1.5,
        changed_median=1.0,
    )


def _report() -> AuditReport:
    groups = {
        "sex": {"female": _group(40, 0.55, 1.8), "male": _group(60, 0.8, 1.1)},
        "race": {"a": _group(50, 0.7, 1.2), NASTY: _group(50, 0.6, 1.6)},
    }
    features = {
        name: FeatureFigures(
            changed=changed,
            share=changed / 70,
            by_group={
                column: {value: min(1.0, changed / 70 * (0.7 + 0.2 * k)) for k, value in enumerate(values)}
                for column, values in groups.items()
            },
        )
        for name, changed in (("income", 60), ("debt", 25), ("hours_per_week", 12), ("education", 4))
    }
    burden = {
        column: GroupBurden(
            cost_reference=min(values, key=lambda v: values[v].cost_mean or 0.0),
            no_recourse_reference=max(values, key=lambda v: values[v].recourse_rate or 0.0),
            values={v: BurdenFigures(cost_ratio=1.3, no_recourse_ratio=1.6) for v in values},
        )
        for column, values in groups.items()
    }
    rules = [
        AuditRule(
            condition=[Condition(feature="debt", op="<=", value=29)],
            action=[Action(feature="income", kind="add", value=40)],
            coverage=0.31,
            validity=1.0,
            cost_mean=1.86,
            rows_covered=31,
        ),
        AuditRule(
            condition=[],
            action=[Action(feature="income", kind="add", value=40), Action(feature="home", kind="set", value=NASTY)],
            coverage=1.0,
            validity=0.85,
            cost_mean=3.3,
            rows_covered=100,
        ),
    ]
    return AuditReport(
        recourse_rate=0.7,
        recourse_rate_ci=(0.61, 0.78),
        n_rows=103,
        with_recourse=list(range(70)),
        no_recourse_proven=list(range(70, 85)),
        no_recourse_unproven=list(range(85, 100)),
        unproven_reasons={"time limit": 15},
        already_met=[100, 101, 102],
        errors=[],
        cost_mean=1.4,
        cost_mean_ci=(1.2, 1.6),
        cost_median=1.2,
        changed_mean=1.5,
        groups=groups,
        burden=burden,
        features=features,
        rules=rules,
        settings=AuditSettings(
            engine="local",
            seed=0,
            goal="approved = 1",
            rows="rejected",
            groups=list(groups),
            bootstrap=200,
            retrain=0,
            prove=True,
            workers=1,
            started="2026-01-01T00:00:00Z",
        ),
        timing=AuditTiming(
            seconds=12.5,
            search_seconds=10.0,
            prove_seconds=2.0,
            statistics_seconds=0.5,
            rows_searched=100,
            rows_proved=30,
            rows_per_second=10.0,
        ),
    )


def _rows() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 100
    status = np.where(np.arange(n) < 70, "with_recourse", "no_recourse_proven")
    return pd.DataFrame(
        {
            "row_id": np.arange(n),
            "audit_status": status,
            "distance": np.where(status == "with_recourse", rng.gamma(2.0, 0.7, n), np.nan),
            "sex": rng.choice(["female", "male"], n),
            "race": rng.choice(["a", NASTY], n),
        }
    )


def test_the_page_is_self_contained_and_escaped(tmp_path: Path) -> None:
    path = write_report(_report(), _rows(), tmp_path)
    assert path == tmp_path / "report.html"
    text = path.read_text(encoding="utf-8")
    for plot in PLOT_IDS:
        assert len(re.findall(rf'<img class="plot" id="{plot}" [^>]*src="data:image/png;base64,', text)) == 1
    assert "<script" not in text.lower()
    assert not re.search(r"(src|href)=\"(?!data:)", text)  # no file, no address: every image inline
    assert "http://" not in text and "https://" not in text
    assert NASTY not in text  # the nasty group value and rule value are shown escaped
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in text
    assert "debt &lt;= 29" in text and "change income by +40" in text
    assert render(_report(), _rows()) == text  # the same report, the same page


def test_labels_with_dollar_signs_are_drawn_as_text() -> None:
    """matplotlib reads the text between two ``$`` as a formula: a group value or feature name
    holding ``$\\alpha^$`` made the drawing raise once the audit had run (its report.html never
    written), ``cost $5 to $6`` was drawn as one. Every label from the data is drawn as text."""
    from counterplan.solver.audit.html import _short

    report = _report()
    groups = {"$x$ band": {"$\\alpha^$": _group(40, 0.5, 1.0), "cost $5 to $6": _group(60, 0.7, 1.2)}}
    features = {"$\\beta^$": report.features["income"].model_copy(update={"by_group": {}})}
    odd = report.model_copy(update={"groups": groups, "burden": {}, "features": features})
    rows = _rows().rename(columns={"sex": "$x$ band"})
    rows["$x$ band"] = np.where(rows.index % 2 == 0, "$\\alpha^$", "cost $5 to $6")
    assert all(page_count == 1 for page_count in (render(odd, rows).count(f'id="{p}"') for p in PLOT_IDS))
    assert _short("cost $5 to $6") == r"cost \$5 to \$6"


def test_cost_falls_back_to_means_without_rows() -> None:
    assert render(_report(), None).count('id="plot-cost"') == 1
    empty = _report().model_copy(update={"groups": {}, "rules": [], "features": {}, "burden": {}})
    page = render(empty, None)
    assert all(page.count(f'id="{plot}"') == 1 for plot in PLOT_IDS)
    assert "No group columns were given" in page


def test_the_heat_map_shows_the_features_some_answer_changes() -> None:
    report = _report()
    features = {**report.features, "age": FeatureFigures(changed=0, share=0.0)}
    assert shown_features(report.model_copy(update={"features": features})) == [
        "income",
        "debt",
        "hours_per_week",
        "education",
    ]


# --- in a real browser -------------------------------------------------------------------------

_PROBE = """<script>
window.addEventListener("load", () => {
  const out = [];
  for (const id of %s) {
    const img = document.getElementById(id);
    if (!img) { out.push(id + ":missing:0:0:0:0"); continue; }
    const r = img.getBoundingClientRect();
    const state = img.complete && img.naturalWidth > 0 ? "decoded" : "broken";
    out.push([id, state, r.left + scrollX, r.top + scrollY, r.width, r.height].map(
      v => typeof v === "number" ? Math.round(v) : v).join(":"));
  }
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = out.join(";") + ";height:" + document.documentElement.scrollHeight;
  document.body.appendChild(pre);
});
</script>"""
_EXPECTED_COLOURS = {
    "plot-recourse-rate": (RATE_COLOUR,),
    "plot-cost": (COST_COLOUR,),
    "plot-features": (),  # a heat map: its cells' blues (see _near)
    "plot-rules": (COVERAGE_COLOUR, VALIDITY_COLOUR),
}


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("COUNTERPLAN_REQUIRE_BROWSER") == "1":
            pytest.fail("COUNTERPLAN_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH (COUNTERPLAN_REQUIRE_BROWSER=1 makes this a failure)")
    return found


def _browse(browser: str, page: Path, work: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={work / 'profile'}",
    ]
    return subprocess.run(
        [browser, *flags, *extra, page.as_uri()], capture_output=True, text=True, timeout=180, check=True
    )


def _rgb(colour: str) -> np.ndarray:
    return np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=np.float64) / 255.0


def _near(region: np.ndarray, colours: tuple[str, ...]) -> list[int]:
    """Per colour, the pixels of ``region`` close to it; no colours: the pixels of a clear blue
    (the heat map's Blues colour map, above its palest cells)."""
    if not colours:
        return [int(((region[:, :, 2] - region[:, :, 0]) > 0.25).sum())]
    return [int((np.abs(region - _rgb(c)).max(axis=2) < 0.06).sum()) for c in colours]


def drawing_problems(html: str, work: Path) -> list[str]:
    """What is wrong with how Chromium draws ``html``'s plots: missing or undecoded images, or a
    plot's region of the screenshot blank, nearly one colour, or without the plot's colours."""
    import matplotlib.image

    browser = _chromium()
    work.mkdir(parents=True, exist_ok=True)
    page = work / "probed.html"
    probe = _PROBE % ("[" + ", ".join(f'"{p}"' for p in PLOT_IDS) + "]")
    page.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    # the same width in both runs: the same layout
    dom = _browse(browser, page, work, "--dump-dom", "--virtual-time-budget=10000", "--window-size=1200,3000").stdout
    found = re.search(r'<pre id="probe">([^<]*)</pre>', dom)
    if found is None:
        return ["the probe did not run: no layout to check"]
    entries = found.group(1).split(";")
    height = int(entries[-1].split(":")[1])
    shot = work / "shot.png"
    _browse(browser, page, work, f"--screenshot={shot}", f"--window-size=1200,{min(max(height, 800), 16000)}")
    pixels = matplotlib.image.imread(shot)[:, :, :3]
    problems = []
    for entry in entries[:-1]:
        plot, state, *box = entry.split(":")
        left, top, width, height = (int(v) for v in box)
        if state != "decoded" or width < 100 or height < 100:
            problems.append(f"{plot}: {state}, {width}x{height}")
            continue
        region = pixels[top : top + height, left : left + width]
        if region.shape[0] < height or region.shape[1] < width:
            problems.append(f"{plot}: outside the screenshot")
            continue
        drawn = (region < 0.94).any(axis=2).mean()
        colours = len(np.unique((region * 31).round().reshape(-1, 3), axis=0))
        near = _near(region, _EXPECTED_COLOURS[plot])
        if drawn < 0.03 or colours < 8 or min(near) < 200:
            problems.append(f"{plot}: {drawn:.1%} drawn, {colours} colours, palette pixels {near}")
    return problems


def test_an_audits_page_with_its_rules_is_drawn(tmp_path: Path) -> None:
    """The whole way: an audit's report and rows, its global rules, the page, the browser."""
    explainer, data, _ = credit_case()
    assert explainer.data is not None
    explainer.data["sex"] = np.where(np.arange(len(data)) % 3 == 0, "female", "male")
    report, rows = run_audit(explainer, "rejected", AuditOptions(groups=("home", "sex"), bootstrap=50))
    frame = explainer.data.loc[rows["row_id"]]
    rules = global_rules(explainer, frame, rows)
    assert rules and rules[0].condition[0].feature == "debt"
    page = write_report(report.model_copy(update={"rules": rules}), rows, tmp_path / "report.html")
    text = page.read_text(encoding="utf-8")
    assert "debt &lt;= 29" in text and "sex=female" not in text  # the rule's text; labels are in the images
    assert drawing_problems(text, tmp_path / "browser") == []


@pytest.fixture(scope="module")
def banded() -> tuple[AuditReport, pd.DataFrame]:
    """An audit of the rejected among 60 rows, grouped by a column of numbers with gaps (1.0, 2.0, NaN), at 80%."""
    explainer, data, _ = credit_case()
    assert explainer.data is not None
    explainer.data["band"] = np.where(np.arange(len(data)) % 3 == 0, np.nan, 1.0 + np.arange(len(data)) % 2)
    rejected = RowSelection(tuple(range(60)), only_rejected=True)  # the first 60 rows' rejected ones
    return run_audit(explainer, rejected, AuditOptions(groups=("band",), bootstrap=50, confidence=0.8, rules=0))


def test_a_numeric_group_column_has_its_costs_drawn(banded: tuple[AuditReport, pd.DataFrame]) -> None:
    """A group column of numbers with gaps is reported as 1, 2 and missing: the cost plot matched
    the rows' text (1.0, 2.0, nan) against those keys, found no row for any value and drew no box."""
    from counterplan.solver.audit.html import _cost_spreads, _group_items

    report, rows = banded
    items = _group_items(report)
    assert [value for _, value in items] == ["1", "2", "missing"]
    spreads = _cost_spreads(report, rows, items)
    assert spreads is not None
    for (column, value), spread in zip(items, spreads, strict=True):
        figures = report.groups[column][value]
        assert len(spread) == figures.with_recourse > 0
        assert float(np.mean(spread)) == pytest.approx(figures.cost_mean)


def test_the_page_states_the_intervals_level(banded: tuple[AuditReport, pd.DataFrame]) -> None:
    """The plots' titles said 95% whatever the audit's confidence, and the tables did not say it."""
    from counterplan.solver.audit.html import _cost_figure, _recourse_figure

    report, rows = banded
    assert "(bars: 80% Wilson score interval)" in _recourse_figure(report).axes[0].get_title()
    assert "(bars: 80% bootstrap interval)" in _cost_figure(report, None).axes[0].get_title()
    assert "intervals: 80%: recourse rates Wilson score, other figures percentile bootstrap (50 resamples)" in render(
        report, rows
    )


def test_a_group_without_a_figure_is_not_drawn_as_zero() -> None:
    """A group value whose every row meets the goal already has no recourse rate and no cost: its
    bar was drawn at 0, a rate of 0% and a cost of 0; the plots now say why it has none."""
    from counterplan.solver.audit.html import _cost_figure, _recourse_figure

    report = _report()
    met = GroupFigures(
        n=0, with_recourse=0, no_recourse_proven=0, no_recourse_unproven=0, errors=0, already_met=4, recourse_rate=None
    )
    groups = {**report.groups, "sex": {**report.groups["sex"], "other": met}}
    report = report.model_copy(update={"groups": groups})
    rate_notes = [t.get_text() for t in _recourse_figure(report).axes[0].texts]
    cost_notes = [t.get_text() for t in _cost_figure(report, None).axes[0].texts]
    assert rate_notes == ["no row needs a change"] and cost_notes == ["no answer"]
    assert [t.get_text() for t in _recourse_figure(_report()).axes[0].texts] == []


def test_the_summary_counts_the_rows_left_out_as_meeting_the_goal(banded: tuple[AuditReport, pd.DataFrame]) -> None:
    """``rows="rejected"`` leaves out the rows that meet the goal before the search: the page said
    none meet it (0), where the command's summary of the same report counted them."""
    report, rows = banded
    assert report.skipped_already_met > 0 and not report.already_met
    cell = f'<td>Already meet the goal</td><td class="num">{report.skipped_already_met:,} ('
    assert cell in render(report, rows)
    assert (
        report.already_met_text()
        == f"{report.skipped_already_met:,} ({report.skipped_already_met:,} left out before the search)"
    )


def test_a_partial_audits_page_says_so() -> None:
    """A stopped audit's report covers the rows done (``partial``): its page read as the whole
    selection's, nowhere saying the audit had stopped."""
    assert 'id="partial"' not in render(_report(), None)
    page = render(_report().model_copy(update={"partial": True}), None)
    assert "<strong>Partial audit</strong>" in page and "over the 103 rows done" in page


def _blank_png() -> str:
    from matplotlib.figure import Figure

    buffer = io.BytesIO()
    Figure(figsize=(10, 3)).savefig(buffer, format="png", dpi=100)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def test_the_plots_are_drawn_in_a_browser(tmp_path: Path) -> None:
    text = render(_report(), _rows())
    assert drawing_problems(text, tmp_path / "good") == []


def test_the_browser_check_catches_blank_and_missing_plots(tmp_path: Path) -> None:
    """The check itself: blank images and a missing one are each reported."""
    text = render(_report(), _rows())
    blank = re.sub(r'(id="plot-[a-z-]+" [^>]*src="data:image/png;base64,)[^"]+', rf"\g<1>{_blank_png()}", text)
    assert blank != text
    problems = drawing_problems(blank, tmp_path / "blank")
    assert {p.split(":")[0] for p in problems} == set(PLOT_IDS)
    broken = re.sub(r'<img class="plot" id="plot-rules"[^>]*>', "", text)
    broken = broken.replace('id="plot-cost"', 'id="plot-cost" src="data:image/png;base64,AAAA" data-x')
    problems = drawing_problems(broken, tmp_path / "broken")
    assert [p.split(",")[0] for p in problems] == ["plot-cost: broken", "plot-rules: missing"]
