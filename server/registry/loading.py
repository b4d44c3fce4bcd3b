"""Load models and data files named on the command line or in a model registry.

scikit-learn models come as skops files (safe: only trusted types load) or joblib/pickle
files (which run code while loading: only load files you trust).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import joblib
import pandas as pd

from counterplan.planning.errors import InvalidInputError, cut, one_line


class LoadError(InvalidInputError):
    """A file cannot be loaded; names the file and why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__("file", field, problem)


COMMAND_TRUST = "pass --trust-model to load them (only for a file you made)"
"""How a command (explain, batch, plan, tune) trusts a skops file's types: its own flag."""
CARD_TRUST = "list them as trusted_types in the model card"
"""How a model card trusts them (``serve`` has no flag for it: the card is where trust is written)."""
MAX_INSTANCE_BYTES = 1024 * 1024
"""An ``@file.json`` instance (a regular file: a named pipe waited for a writer for good) is one
row's values: a megabyte holds thousands of features."""


def load_model(
    path: str | Path, trust: bool = False, trusted_types: Sequence[str] = (), *, how_to_trust: str = COMMAND_TRUST
) -> Any:
    """Load a fitted model from a ``.skops`` or ``.joblib``/``.pkl`` file, an ONNX model from a
    ``.onnx`` file (an :class:`~counterplan.planning.onnx_model.OnnxModel`, already a model adapter:
    named after the target by :func:`~counterplan.planning.model_protocol.bind_target`, or a
    card's outputs by ``renamed``), or a scorecard's points table from a
    ``.yaml``/``.json``/``.csv`` file (:func:`counterplan.planning.scorecard.load_points_table`).

    Parameters
    ----------
    path:
        The file.
    trust:
        For skops files: also load every type skops does not trust by default (only for files
        you made). Joblib files always run code while loading.
    trusted_types:
        For skops files: the types beyond skops's defaults that may load (the safe way).
    how_to_trust:
        What a refusal of untrusted types tells the user to do, where they are: a command's
        ``--trust-model`` (:data:`COMMAND_TRUST`), a card's ``trusted_types`` (:data:`CARD_TRUST`).
    """
    file = existing_file(path)
    suffix = file.suffix.lower()
    try:
        if suffix == ".skops":
            import skops.io as sio  # noqa: PLC0415 - optional dependency, loaded at the edge

            untrusted = sio.get_untrusted_types(file=file)
            unlisted = [t for t in untrusted if t not in set(trusted_types)]
            if unlisted and not trust:
                raise LoadError(
                    str(file), f"holds types skops does not trust by default ({', '.join(unlisted)}); {how_to_trust}"
                )
            return sio.load(file, trusted=untrusted)
        if suffix in {".joblib", ".pkl", ".pickle"}:
            return joblib.load(file)
        if suffix == ".onnx":  # a graph run by onnxruntime: plain data, no code runs while loading
            from counterplan.planning.onnx_model import OnnxModel  # noqa: PLC0415

            return OnnxModel(file)
        if suffix in {".yaml", ".yml", ".json", ".csv"}:  # a scorecard's points table: plain data
            from counterplan.planning.scorecard import load_points_table  # noqa: PLC0415

            return load_points_table(file)
    except LoadError:
        raise
    except ImportError as exc:  # skops itself, or a library the pickled model's classes come from
        raise LoadError(str(file), missing_library(exc)) from None
    except Exception as exc:  # a corrupt or foreign file: report it, not a traceback
        raise LoadError(str(file), f"cannot load model: {type(exc).__name__}: {exc}") from None
    raise LoadError(
        str(file),
        f"unknown model file type {suffix!r}; use .skops, .joblib or .onnx (or a points table: .yaml, .json, .csv)",
    )


EXTRAS = {"optbinning": "scorecard", "ortools": "scorecard", "xgboost": "boosting", "lightgbm": "boosting"}
"""The counterplan extra that installs each library a model file may need (by its top-level module)."""


def missing_library(exc: ImportError) -> str:
    """What to install when loading a model failed to import a module: the extra that brings it
    (``optbinning``: ``counterplan[scorecard]``), or the module's name. Loading a joblib file
    imports the modules of the classes it holds, so the missing one is the model's library, not
    necessarily skops."""
    name = (exc.name or "").partition(".")[0]
    if name == "skops":
        return "loading .skops files needs the skops extra: pip install 'counterplan[skops]'"
    if name in EXTRAS:
        return f"the model needs {name}, which is not installed: pip install 'counterplan[{EXTRAS[name]}]'"
    if name and name.isidentifier():
        return f"the model needs the module {name[:100]!r}, which is not installed here"
    return f"the model needs a library that is not installed here: {one_line(str(exc), 200)}"


def existing_file(path: str | Path) -> Path:
    """``path`` as a file that exists; else a :class:`LoadError` naming it, also for a name the
    file system refuses (a part longer than its limit), which ``is_file`` raises on."""
    file = Path(path)
    try:
        found = file.is_file()
    except OSError as exc:
        raise LoadError(str(file), f"cannot read: {exc.strerror or exc}") from None
    if not found:
        raise LoadError(str(file), "no such file")
    return file


def _repeated_name(file: Path) -> str | None:
    """A name the CSV's header gives to two columns, or None. pandas reads the second as
    ``income.1``, so a model reading ``income`` would get the first without a word, and a
    required column the user meant to rename would be reported missing."""
    from counterplan.planning.inference import repeated_name  # noqa: PLC0415 - the profile's own rule

    try:
        header = pd.read_csv(file, header=None, nrows=1, dtype=str, skipinitialspace=True, keep_default_na=False)
    except Exception:  # the data was read: whatever this fails on, the header is not the problem
        return None
    return repeated_name(name for name in header.iloc[0].tolist() if name != "")  # unnamed: a written index


def load_csv(path: str | Path) -> pd.DataFrame:
    """Read a CSV of training data."""
    file = existing_file(path)
    try:
        data = pd.read_csv(file, skipinitialspace=True)
    except Exception as exc:
        raise LoadError(str(file), f"cannot read CSV: {exc}") from None
    if data.empty:
        raise LoadError(str(file), "the CSV has no rows")
    repeated = _repeated_name(file)
    if repeated is not None:
        raise LoadError(
            str(file), f"the header names two columns {one_line(repr(repeated), 100)}: give each column one name"
        )
    return data


def _names_a_file(text: str) -> bool:
    """Whether ``text`` (no JSON) is the path of a file: an instance file given without its ``@``."""
    try:
        return len(text) < 4096 and Path(text).is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte
        return False


def load_instance(text: str) -> dict[str, Any]:
    """Parse an instance given as a JSON object, or as ``@file.json``."""
    if text.startswith("@"):
        from counterplan.planning.safe_yaml import ConfigTextError, read_config_file  # noqa: PLC0415

        try:
            text = read_config_file(text[1:], max_bytes=MAX_INSTANCE_BYTES)
        except ConfigTextError as exc:  # a named pipe, a device, a file past the cap: not read
            raise LoadError(text[1:], exc.problem) from None
        except OSError as exc:
            raise LoadError(text[1:], f"cannot read: {exc.strerror}") from None
        except UnicodeDecodeError as exc:  # a binary file: a ValueError, not an OSError
            raise LoadError(text[1:], f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        hint = f"; to read the file, give @{cut(text, 200)}" if _names_a_file(text) else ""
        raise LoadError("instance", f"not valid JSON: {exc.msg}{hint}") from None
    except RecursionError:  # "[[[[...": the decoder recurses per level, and this is no ValueError
        raise LoadError("instance", "not valid JSON: nested too deep") from None
    if not isinstance(value, dict):
        raise LoadError("instance", "expected a JSON object of feature values")
    return value
