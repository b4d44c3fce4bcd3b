"""A points table read from a file refuses what it cannot score right, naming the field: a NaN
or infinite number (a cut-off of NaN refused every answer, silently), a bool read as a number,
points beyond 2^53, an empty category group, a class that is no scalar; and a malformed table
is a ``ModelAdapterError`` naming the field, not pydantic's dump."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from counterplan.planning.errors import ModelAdapterError
from counterplan.planning.scorecard import load_points_table, points_table_from_csv


def _table(**changes: Any) -> dict[str, Any]:
    income = {"name": "income", "bins": [{"upper": 20, "points": 10}, {"lower": 20, "points": 40}]}
    home = {"name": "home", "bins": [{"categories": ["own"], "points": 5}, {"categories": ["rent"], "points": 1}]}
    return {"variables": [income, home], "cutoff": 30, "classes": ["bad", "good"]} | changes


def _bin(table: dict[str, Any], **changes: Any) -> dict[str, Any]:
    table["variables"][0]["bins"][0].update(changes)
    return table


BAD = {
    "NaN cut-off": ("cutoff: .nan", "cutoff", "finite"),
    "infinite intercept": ("intercept: .inf", "intercept", "finite"),
    "bool cut-off": ("cutoff: true", "cutoff", "must be a number, given True"),
}


@pytest.mark.parametrize(("line", "field", "message"), BAD.values(), ids=BAD.keys())
def test_a_yaml_table_refuses_a_number_it_cannot_score(tmp_path: Path, line: str, field: str, message: str) -> None:
    text = "\n".join(
        [
            "variables:",
            "  - name: income",
            "    bins: [{upper: 20, points: 10}, {lower: 20, points: 40}]",
            "classes: [bad, good]",
            line,
        ]
    )
    path = tmp_path / "table.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ModelAdapterError, match=message) as caught:
        load_points_table(path)
    assert caught.value.field == field


JSON_BAD = {
    "bool points": (_bin(_table(), points=True), "variables.0.bins.0.points", "must be a number"),
    "NaN points": (_bin(_table(), points=float("nan")), "variables.0.bins.0.points", "finite"),
    "huge points": (_bin(_table(), points=1e300), "variables.0.bins.0.points", "between -2\\^53 and 2\\^53"),
    "NaN odds": (_table(odds={"points": float("nan"), "odds": 1, "pdo": 20}), "odds.points", "finite"),
    "infinite log-odds intercept": (_table(log_odds_intercept=float("inf")), "log_odds_intercept", "finite"),
    "NaN WoE": (_bin(_table(), woe=float("nan")), "variables.0.bins.0.woe", "finite"),
    "negative points span": (
        _table(variables=[{"name": "x", "bins": [{"points": 1}], "points_span": -1}]),
        "variables.0.points_span",
        "greater than or equal to 0",
    ),
    "empty category group": (
        _table(variables=[{"name": "home", "bins": [{"categories": [], "points": 1}]}]),
        "variables.0.bins.0.categories",
        "at least 1 item",
    ),
    "a class that is no scalar": (_table(classes=[[0], [1]]), "classes", "a class is a text"),
    "a missing class": (_table(classes=[None, "good"]), "classes", "a class is a text"),
    "a key in the wrong case": (_bin(_table(), Points=3), "variables.0.bins.0.Points", "Extra inputs"),
}


@pytest.mark.parametrize(("data", "field", "message"), JSON_BAD.values(), ids=JSON_BAD.keys())
def test_a_json_table_names_the_bad_field(tmp_path: Path, data: dict[str, Any], field: str, message: str) -> None:
    path = tmp_path / "table.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as JSON's readers write them
    with pytest.raises(ModelAdapterError, match=message) as caught:
        load_points_table(path)
    assert caught.value.field == field
    assert "pydantic" not in str(caught.value)


def test_numbers_written_as_text_still_read_as_numbers(tmp_path: Path) -> None:
    """YAML reads ``1e5`` as text: a table with such a number still loads."""
    path = tmp_path / "table.yaml"
    path.write_text("variables: [{name: x, bins: [{upper: 1e5, points: 1}, {lower: 1e5, points: 2e1}]}]\ncutoff: 5\n")
    table = load_points_table(path)
    assert table.variables[0].bins[1].points == 20.0 and table.variables[0].bins[0].upper == 1e5


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('feature,bin,points\nincome,"(-inf, 20)",nan\nincome,"[20, inf)",1\n', "CSV line 2.points"),
        ('feature,bin,points\nincome,"(-inf, nan)",1\nincome,"[nan, inf)",1\n', "CSV line 2.upper"),
        ("feature,bin,points\n(cutoff),,inf\nincome,a,1\n", "cutoff"),
        ("feature,bin,points,woe\nincome,a,1,x\n", "model"),
    ],
    ids=["NaN points", "NaN edge", "infinite cut-off", "woe not a number"],
)
def test_a_csv_table_names_the_bad_field(text: str, field: str) -> None:
    with pytest.raises(ModelAdapterError) as caught:
        points_table_from_csv(text)
    assert caught.value.field == field


ROWS = 'income,"(-inf, 20)",10\nincome,"[20, inf)",40\n(cutoff),,30\n'


@pytest.mark.parametrize(
    "header",
    ["\ufefffeature,bin,points", "Feature, Bin, Points"],
    ids=["a spreadsheet's byte-order mark", "spaces and capitals"],
)
def test_a_csv_table_reads_its_columns_as_a_spreadsheet_writes_them(tmp_path: Path, header: str) -> None:
    path = tmp_path / "table.csv"
    path.write_text(f"{header}\n{ROWS}", encoding="utf-8")
    table = load_points_table(path)
    assert table.cutoff == 30 and [b.points for b in table.variables[0].bins] == [10, 40]


def test_a_csv_table_refuses_text_not_utf8_and_a_second_cut_off(tmp_path: Path) -> None:
    path = tmp_path / "table.csv"
    path.write_bytes("feature,bin,points\nhome,caf\xe9,10\n(cutoff),,30\n".encode("latin-1"))
    with pytest.raises(ModelAdapterError, match="not UTF-8 text"):
        load_points_table(path)
    with pytest.raises(ModelAdapterError, match=r"CSV line 5: a second \(cutoff\) row"):
        points_table_from_csv(f"feature,bin,points\n{ROWS}(cutoff),,50\n")
    with pytest.raises(ModelAdapterError, match=r"needs the columns feature, bin, points; given \['name'"):
        points_table_from_csv("name,bin,points\n")


def test_a_large_json_table_is_read_by_the_json_reader(tmp_path: Path) -> None:
    """A 3 MB table of 60,000 bins: PyYAML's pure-Python reader took 45 s over 4 MB (a server
    loading its models directory waited as long); the json module reads it in about a second."""
    import time

    edges = range(1, 300)
    variables = [
        {
            "name": f"v{j}",
            "bins": [{"upper": 1, "points": 1.5}]
            + [{"lower": e, "upper": e + 1, "points": float(e % 7)} for e in edges[:-1]]
            + [{"lower": 299, "points": 2.0}],
        }
        for j in range(200)
    ]
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"variables": variables, "cutoff": 100}))
    assert path.stat().st_size > 2_500_000
    started = time.perf_counter()
    table = load_points_table(path)
    assert len(table.variables) == 200
    assert time.perf_counter() - started < 20.0  # 35 s and more before, on any machine


def test_a_json_table_keeps_the_readers_limits(tmp_path: Path) -> None:
    path = tmp_path / "table.json"
    path.write_text('{"variables": [], "cutoff": 1, "cutoff": 2}')
    with pytest.raises(ValueError, match="'cutoff' is given twice"):
        load_points_table(path)
    path.write_text('{"variables": ' + "[" * 40 + "]" * 40 + "}")
    with pytest.raises(ValueError, match="nested deeper than 32 levels"):
        load_points_table(path)


def test_a_table_that_is_no_regular_file_is_refused_not_read_for_good(tmp_path: Path) -> None:
    """A named pipe called ``table.yaml`` waited for a writer for good."""
    import os

    pipe = tmp_path / "table.yaml"
    os.mkfifo(pipe)
    with pytest.raises(ModelAdapterError, match="not a regular file"):
        load_points_table(pipe)
