"""A batch over training data with columns the model does not read (an id, a group column):
each row's problem reads the model's columns only, so the extra columns are ignored, in a
selection by position, ``rejected``, a given DataFrame and ``counterplan batch --data``; a rule
that names a column the model does not read is still refused."""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from counterplan.planning import ClassGoal
from counterplan.planning.errors import ProblemError
from counterplan.server.cli.main import main
from counterplan.solver.batch.rows import meeting_the_goal
from counterplan.solver.explainer import Explainer

GOAL = [ClassGoal(target=1, confidence=0.6)]
FEATURES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def data() -> pd.DataFrame:
    """Features a, b, c; an id and a region the model never sees; the label y."""
    rng = np.random.default_rng(11)
    n = 240
    frame = pd.DataFrame(
        {
            "id": np.arange(1000, 1000 + n),
            "a": rng.normal(0.0, 1.0, n).round(2),
            "b": rng.integers(0, 20, n),
            "c": rng.choice(["x", "y", "z"], n),
            "region": rng.choice(["north", "south"], n),
        }
    )
    score = frame["a"] + 0.1 * frame["b"] + (frame["c"] == "x") + rng.normal(0.0, 0.3, n)
    return frame.assign(y=(score > 1.0).astype(int))


@pytest.fixture(scope="module")
def model(data: pd.DataFrame) -> Pipeline:
    columns = ColumnTransformer([("num", StandardScaler(), ["a", "b"]), ("cat", OneHotEncoder(), ["c"])])
    return Pipeline([("encode", columns), ("classify", LogisticRegression())]).fit(data[FEATURES], data["y"])


@pytest.fixture(scope="module")
def explainer(data: pd.DataFrame, model: Pipeline) -> Explainer:
    return Explainer(model, data, GOAL, target="y", seed=0)


@pytest.fixture(scope="module")
def plain(data: pd.DataFrame, model: Pipeline) -> Explainer:
    """The same question on the model's columns and the label only."""
    return Explainer(model, data[[*FEATURES, "y"]], GOAL, target="y", seed=0)


def _same(ours: pd.DataFrame, theirs: pd.DataFrame) -> None:
    columns = ["row_id", "status", "valid", "score", "changes", *[f"cf_{f}" for f in FEATURES]]
    pd.testing.assert_frame_equal(ours[columns].reset_index(drop=True), theirs[columns].reset_index(drop=True))


def test_the_model_reads_its_own_columns_only(explainer: Explainer) -> None:
    assert explainer.columns == FEATURES


def test_rows_by_position_ignore_the_columns_the_model_does_not_read(explainer: Explainer, plain: Explainer) -> None:
    ours = explainer.explain_batch(list(range(12)), seed=4, window=6)
    assert "error" not in set(ours["status"]), ours["error"].dropna().head(1).tolist()
    assert {"ok", "already_met"} <= set(ours["status"])
    _same(ours, plain.explain_batch(list(range(12)), seed=4, window=6))


def test_rejected_rows_are_chosen_and_explained_with_the_extra_columns(
    explainer: Explainer, plain: Explainer, data: pd.DataFrame
) -> None:
    met = meeting_the_goal(explainer, data.iloc[:40])
    assert met.any() and not met.all()
    np.testing.assert_array_equal(met, meeting_the_goal(plain, data[[*FEATURES, "y"]].iloc[:40]))
    ours = explainer.explain_batch("0:40", seed=4, only_rejected=True)
    assert set(ours["status"]) <= {"ok", "not_found"} and len(ours) == int((~met).sum())
    assert ours.attrs["already_met_skipped"] == int(met.sum())
    _same(ours, plain.explain_batch("0:40", seed=4, only_rejected=True))


def test_a_given_frame_with_extra_columns_is_explained(explainer: Explainer, data: pd.DataFrame) -> None:
    rows = data.iloc[5:11]
    ours = explainer.explain_batch(rows, seed=4)
    assert "error" not in set(ours["status"])
    assert list(ours["row_id"]) == list(rows.index)


@pytest.mark.parametrize("vectorised", [True, False], ids=["vector", "threads"])
def test_a_frame_of_none_of_the_models_columns_gives_each_row_its_error_record(
    explainer: Explainer, data: pd.DataFrame, vectorised: bool
) -> None:
    """Rows holding only columns the model does not read (an id, the label): each row's record
    says what its problem misses, as for one missing column; the batch ended on a bare
    ``ValueError: zip() argument 2 is shorter than argument 1`` (pandas gives such a frame no
    records at all)."""
    rows = data.iloc[:3][["id", "region", "y"]]
    for only_rejected in (False, True):
        frame = explainer.explain_batch(rows, seed=0, vectorised=vectorised, only_rejected=only_rejected)
        assert frame["row_id"].tolist() == [0, 1, 2] and (frame["status"] == "error").all()
        assert frame["error"].str.contains("the instance has no value for this feature").all()


def test_a_column_named_twice_is_refused_naming_it(explainer: Explainer, data: pd.DataFrame, model: Pipeline) -> None:
    """pandas allows two columns of one name. In the rows, a record kept one of them without a
    word (pandas only warned "some columns will be omitted"); in the training data, the profile
    read the column as a frame of both and ended on an ``AttributeError``."""
    rows = data.iloc[5:9].copy()
    rows.insert(0, "a", rows["a"] + 5.0, allow_duplicates=True)
    with pytest.raises(ProblemError, match="the rows have two columns 'a'") as caught:
        explainer.explain_batch(rows, seed=4)
    assert caught.value.field == "rows"
    spare = data.iloc[5:9].copy()
    spare.insert(0, "region", "east", allow_duplicates=True)  # twice, but the model does not read it: left out
    assert explainer.explain_batch(spare, seed=4)["status"].ne("error").all()
    training = data.copy()
    training.insert(0, "b", training["b"], allow_duplicates=True)
    with pytest.raises(ProblemError, match="the training data has two columns 'b'") as caught:
        Explainer(model, training, GOAL, target="y")
    assert caught.value.field == "data"


def test_a_rule_naming_a_column_the_model_does_not_read_is_still_refused(data: pd.DataFrame, model: Pipeline) -> None:
    with pytest.raises(ProblemError, match=r"immutable.*'region' is not a feature column"):
        Explainer(model, data, GOAL, target="y", immutable=["region"])
    with pytest.raises(ProblemError, match="'nope' is not a feature column"):
        Explainer(model, data, GOAL, target="y", immutable=["nope"])


def test_counterplan_batch_on_a_file_with_extra_columns(
    tmp_path: Path, data: pd.DataFrame, model: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    data.iloc[:30].to_csv(tmp_path / "rows.csv", index=False)
    joblib.dump(model, tmp_path / "model.joblib")
    output = tmp_path / "out.csv"
    argv = ["batch", "--model", str(tmp_path / "model.joblib"), "--data", str(tmp_path / "rows.csv")]
    argv += ["--target", "y", "--rows", "all", "--seed", "2", "--output", str(output), "--no-progress"]
    argv += ["--goal", "class:1@0.6"]
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 0, err
    records = pd.read_csv(output)
    assert len(records) == 30
    assert "error" not in set(records["status"]), records["error"].dropna().head(1).tolist()
