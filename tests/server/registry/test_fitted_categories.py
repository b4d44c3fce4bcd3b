"""A LightGBM model fitted on a pandas ``category`` column, its data read from a CSV: the command
line and a model card could not explain it ("train and valid dataset categorical_feature do not
match": a CSV has no dtypes), and a value it was not fitted on would be read as a gap."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
import yaml

from counterplan.server.registry.fitted_categories import CategoriesError, fitted_categories, with_fitted_categories
from tests.cli import run_cli

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, pd.DataFrame, Path]:
    """The model, its training frame (a ``category`` column of text and one of codes) and the
    frame written as a CSV with the target ``y``."""
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "income": rng.normal(50, 10, n).round(1),
            "city": pd.Categorical(rng.choice(["north", "south", "east"], n)),
            "plan": pd.Categorical(rng.choice([3, 7, 9], n)),
            "age": rng.integers(20, 60, n),
        }
    )
    y = ((frame["income"] > 50) & (frame["city"] != "east")).astype(int)
    model = lightgbm.LGBMClassifier(n_estimators=20, verbose=-1, random_state=0).fit(frame, y)
    folder = tmp_path_factory.mktemp("lgbm-categories")
    frame.assign(y=y).to_csv(folder / "train.csv", index=False)
    joblib.dump(model, folder / "m.joblib")
    return model, frame, folder


def test_the_categories_a_model_was_fitted_on_come_back(fitted: tuple[Any, pd.DataFrame, Path]) -> None:
    model, frame, folder = fitted
    assert fitted_categories(model) == {"city": ["east", "north", "south"], "plan": [3, 7, 9]}
    read = pd.read_csv(folder / "train.csv")
    with pytest.raises(ValueError, match="categorical_feature do not match"):
        model.predict_proba(read[frame.columns])  # the CSV as it reads
    restored = with_fitted_categories(model, read, "--data")
    assert isinstance(restored["city"].dtype, pd.CategoricalDtype) and isinstance(
        restored["plan"].dtype, pd.CategoricalDtype
    )
    np.testing.assert_array_equal(model.predict_proba(restored[frame.columns]), model.predict_proba(frame))
    assert fitted_categories(object()) == {} and with_fitted_categories(object(), read, "--data") is read


def test_a_category_the_model_does_not_know_is_refused_naming_it(fitted: tuple[Any, pd.DataFrame, Path]) -> None:
    model, _, folder = fitted
    read = pd.read_csv(folder / "train.csv")
    read.loc[5, "city"] = "west"
    with pytest.raises(CategoriesError) as info:
        with_fitted_categories(model, read, "--data")
    assert info.value.field == "--data"
    assert "column 'city' holds 'west', a category the model was not fitted on" in info.value.problem


def test_the_command_line_explains_it_from_a_csv(
    fitted: tuple[Any, pd.DataFrame, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, frame, folder = fitted
    rejected = int(np.flatnonzero(model.predict(frame) == 0)[0])
    files = ["--model", str(folder / "m.joblib"), "--trust-model", "--target", "y", "--row", str(rejected)]
    code, out, err = run_cli(capsys, "explain", "--data", str(folder / "train.csv"), *files, "--json")
    assert code == 0, err  # before: exit 2, "the model fails on the original instance"
    assert '"valid": true' in out
    bad = pd.read_csv(folder / "train.csv")
    bad.loc[5, "city"] = "west"
    bad.to_csv(tmp_path / "bad.csv", index=False)
    code, _, err = run_cli(capsys, "explain", "--data", str(tmp_path / "bad.csv"), *files)
    assert code == 2 and "'--data'" in err and "holds 'west'" in err and "Traceback" not in err


def test_a_model_card_with_training_data_serves_it(fitted: tuple[Any, pd.DataFrame, Path]) -> None:
    from counterplan.server.registry.registry import RegistryError, load_card

    _, _, folder = fitted
    card = {"id": "m", "model_file": "m.joblib", "outputs": ["y"], "training_data": "train.csv", "target": "y"}
    (folder / "m.yaml").write_text(yaml.safe_dump(card))
    registered = load_card(folder / "m.yaml", trust_pickle=True)
    assert registered.training is not None and isinstance(registered.training["city"].dtype, pd.CategoricalDtype)
    bad = pd.read_csv(folder / "train.csv")
    bad.loc[0, "plan"] = 4
    bad.to_csv(folder / "bad.csv", index=False)
    (folder / "bad.yaml").write_text(yaml.safe_dump({**card, "training_data": "bad.csv"}))
    with pytest.raises(RegistryError, match=r"bad\.yaml:training_data.*column 'plan' holds 4"):
        load_card(folder / "bad.yaml", trust_pickle=True)


def test_an_xgboost_model_fitted_on_category_columns_is_explained_from_a_csv(
    fitted: tuple[Any, pd.DataFrame, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """XGBoost (``enable_categorical``) refused the CSV's text column ("DataFrame.dtypes for data
    must be int, float, bool or category"); it keeps its categories (3.1 and later)."""
    xgboost = pytest.importorskip("xgboost")
    pytest.importorskip("pyarrow")
    _, frame, folder = fitted
    data = pd.read_csv(folder / "train.csv")
    model = xgboost.XGBClassifier(n_estimators=20, enable_categorical=True, tree_method="hist", random_state=0)
    model.fit(frame, data["y"])
    if tuple(int(p) for p in xgboost.__version__.split(".")[:2]) < (3, 1):
        pytest.skip("XGBoost keeps a model's categories from 3.1")
    assert fitted_categories(model) == {"city": ["east", "north", "south"], "plan": [3, 7, 9]}
    joblib.dump(model, tmp_path / "x.joblib")
    rejected = int(np.flatnonzero(model.predict(frame) == 0)[0])
    files = ["--model", str(tmp_path / "x.joblib"), "--trust-model", "--target", "y", "--row", str(rejected)]
    code, out, err = run_cli(capsys, "explain", "--data", str(folder / "train.csv"), *files, "--json")
    assert code == 0 and '"valid": true' in out, err
