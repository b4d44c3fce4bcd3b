"""Batch records written as they complete, so a long job that stops keeps what it found.

Two formats, chosen by the output's suffix:

- ``.csv``: records are appended a batch at a time (:data:`CSV_RECORDS` records or
  :data:`CSV_SECONDS` seconds; the header once) and flushed, so the file is always a valid CSV
  of the rows done so far (a line a crash tore is cut off before the job resumes:
  :mod:`counterplan.solver.batch.torn_line`).
- ``.parquet``: a parquet file cannot be appended to, so records go to part files in a sibling
  directory, ``<output>.parts/part-NNNNN.parquet`` (one per :data:`PART_RECORDS` records or
  :data:`PART_SECONDS` seconds, each written under a temporary name and renamed, so a part is
  whole or absent), which :meth:`ParquetRecords.finish` combines into ``<output>`` and removes
  (a part left by a job stopped between the two is known as merged: its rows are the output's).

Every frame written has one schema, fixed by the training data's column types (see
:func:`record_dtypes`), so parts, resumed runs and the final file combine without type drift
(an all-error part would otherwise store a numeric feature's proposed values as nulls).
"""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from counterplan.planning.errors import ProblemError, echo
from counterplan.solver.batch.records import PROPOSED_PREFIX, RECORD_COLUMNS, records_frame
from counterplan.solver.batch.rows import id_text, row_seed

SUFFIXES = (".csv", ".parquet")
"""Output formats, by suffix."""
CSV_RECORDS = 64
"""Records per batch appended to a CSV (a batch is also appended once :data:`CSV_SECONDS` have passed)."""
CSV_SECONDS = 1.0
"""Seconds after which buffered records are appended to a CSV even if fewer than :data:`CSV_RECORDS`."""
PART_RECORDS = 64
"""Records per parquet part file (a part is also written once :data:`PART_SECONDS` have passed)."""
PART_SECONDS = 5.0
"""Seconds after which buffered records are written as a part even if fewer than :data:`PART_RECORDS`."""
PARTS_SUFFIX = ".parts"
"""The parts directory of ``results.parquet`` is ``results.parquet.parts``."""

_FIXED_DTYPES: dict[str, str] = {
    "row_id": "int64",
    "status": "string",
    "valid": "bool",
    "score": "string",
    "distance": "float64",
    "changed": "int64",
    "changes": "string",
    "seconds": "float64",
    "model_calls": "int64",
    "seed": "int64",
    "question": "string",
    "error": "string",
}


def record_dtypes(data: pd.DataFrame, features: Sequence[str]) -> dict[str, str]:
    """The column types of a batch's records: the fixed columns', then each proposed value's
    from its feature's type in ``data`` (nullable, as an error row has no proposed values)."""
    dtypes = dict(_FIXED_DTYPES)
    for name in features:
        column = data[name]
        if pd.api.types.is_bool_dtype(column):
            dtypes[PROPOSED_PREFIX + name] = "boolean"
        elif pd.api.types.is_integer_dtype(column):
            dtypes[PROPOSED_PREFIX + name] = "Int64"
        elif pd.api.types.is_numeric_dtype(column):
            dtypes[PROPOSED_PREFIX + name] = "float64"
        else:
            dtypes[PROPOSED_PREFIX + name] = "string"
    return dtypes


def conform(frame: pd.DataFrame, dtypes: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with each column in its type; a column whose values do not fit keeps its own
    (a whole number column that gets 2.5 stays float) rather than losing values."""
    out = frame.copy()
    for name, dtype in dtypes.items():
        if name not in out.columns:
            continue
        try:
            out[name] = out[name].astype(dtype)  # type: ignore[call-overload]
        except (TypeError, ValueError, OverflowError):  # OverflowError: an infinity where whole numbers go
            if dtype in ("Int64", "boolean"):
                out[name] = pd.to_numeric(out[name], errors="coerce").astype("float64")
    return out


def parts_directory(path: Path) -> Path:
    """Where the part files of a parquet output go."""
    return path.with_name(path.name + PARTS_SUFFIX)


def check_output(path: Path, *, resume: bool) -> None:
    """Refuse, before any work, an output that cannot be written or would be overwritten.

    Raises
    ------
    ProblemError
        Field ``output``: the suffix is not ``.csv``/``.parquet`` (or Parquet without pyarrow), the
        directory does not exist or is not writable, a Parquet output's parts directory
        (:func:`parts_directory`) is a file, or the output exists and ``resume`` is not set.
    """
    if path.suffix.lower() not in SUFFIXES:
        raise ProblemError("output", f"must end in .parquet or .csv, given {str(path)!r}")
    if path.suffix.lower() == ".parquet" and importlib.util.find_spec("pyarrow") is None:
        raise ProblemError("output", "writing Parquet needs pyarrow: pip install 'counterplan[parquet]'")
    check_writable_directory("output", path)
    parts = parts_directory(path)
    if path.suffix.lower() == ".parquet" and exists("output", parts) and not parts.is_dir():
        raise ProblemError("output", f"{echo(str(parts))} is not a directory: the output's parts go there; remove it")
    if not resume and _exists(path):
        if not path.exists():  # only an interrupted job's parts: say so, not that the file exists
            raise ProblemError(
                "output",
                f"{str(parts)!r} exists; pass --resume to continue the interrupted job it holds or remove it",
            )
        raise ProblemError("output", f"{str(path)!r} exists; pass --resume to continue it or remove it")


def check_writable_directory(field: str, path: Path) -> None:
    """Refuse a file path whose directory does not exist or cannot be written to, that is a
    directory itself or no regular file (a named pipe blocks the write after the work until a
    reader comes, forever; a device is no file to keep), or whose name the file system refuses:
    before the work, not after it."""
    folder = path.parent if str(path.parent) else Path()
    if not exists(field, folder) or not folder.is_dir():
        raise ProblemError(field, f"the directory {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ProblemError(field, f"the directory {str(folder)!r} is not writable")
    if exists(field, path) and not path.is_file():
        kind = "a directory" if path.is_dir() else "not a regular file (a pipe, a socket or a device)"
        raise ProblemError(field, f"{echo(str(path))} is {kind}")


def exists(field: str, path: Path) -> bool:
    """Whether ``path`` exists. A name the file system refuses (a part longer than its limit)
    raises here, naming ``field``, rather than when the file is written after the work."""
    try:
        return path.exists()
    except OSError as exc:
        raise ProblemError(field, f"cannot use {echo(str(path))}: {exc.strerror or exc}") from None


def _exists(path: Path) -> bool:
    return path.exists() or (path.suffix.lower() == ".parquet" and parts_directory(path).exists())


def read_existing(
    path: Path, columns: Sequence[str], dtypes: Mapping[str, str], *, rows: int | None = None
) -> pd.DataFrame:
    """The records an earlier run of the job wrote to ``path`` (none: an empty frame). A CSV's torn
    last line is cut off before (:func:`counterplan.solver.batch.torn_line.drop_torn_line`).
    ``rows``, when given, is the number of rows in the data (a batch's row ids are positions):
    the records must then be one job's, each a position of the data, once.

    Raises
    ------
    ProblemError
        Field ``output``: the file cannot be read, holds another job's columns, or (``rows``
        given) is no output of one job: a row id that is no position of the data (a header in
        the middle: two outputs joined) or a row twice.
    """
    try:
        frames = _read_csv(path) if path.suffix.lower() == ".csv" else _read_parquet(path)
    except (OSError, ValueError) as exc:
        raise ProblemError("output", f"cannot read {str(path)!r} to resume it: {exc}") from None
    for frame in frames:
        if list(frame.columns) != list(columns):
            raise ProblemError(
                "output", f"{str(path)!r} holds the records of another job (other columns); write to a new file"
            )
    if not frames:
        return no_records(columns, dtypes)
    records = pd.concat([conform(f, dtypes) for f in frames], ignore_index=True)
    if rows is not None:
        _check_row_ids(path, records["row_id"], rows)
    return records


def _check_row_ids(path: Path, ids: pd.Series, rows: int) -> None:
    """Refuse records that are no output of one job over ``rows`` positions: a resume skips every
    row id they hold, so an id that is not a whole number (a second header: two outputs joined),
    one beyond the data, or one held twice would end the job on a bare ``int()`` error or count a
    row twice."""
    numbers = pd.to_numeric(ids, errors="coerce")
    outside = numbers.isna() | (numbers < 0) | (numbers % 1 != 0) | (numbers >= rows)
    if outside.any():
        value = ids[outside].iloc[0]
        shown = echo(value.item() if isinstance(value, np.generic) else value)
        raise ProblemError(
            "output",
            f"{str(path)!r} holds the row id {shown}, no position of the data's {rows:,} rows "
            "(two outputs joined, or another data file's); write to a new file",
        )
    twice = numbers[numbers.duplicated()]
    if len(twice):
        raise ProblemError(
            "output",
            f"{str(path)!r} holds row {int(twice.iloc[0])} twice: it is no output of one job; write to a new file",
        )


def check_same_job(
    existing: pd.DataFrame, *, seed: int, question: str, path: Path, field: str = "output", fresh: str = "a new file"
) -> None:
    """Refuse to continue ``existing``, the records an earlier run wrote to ``path``, with another
    job: an output of two seeds' or two questions' answers is the answer of no run (a ``--resume``
    given another ``--seed``, ``--goal``, ``--immutable`` or ``--batch-engine`` was taken without
    a word, and so was an audit's, whose report then mixed them).

    Each record holds its row's seed (:func:`~counterplan.solver.batch.rows.row_seed` of the
    batch's ``seed`` and its id) and its question's fingerprint (``question``:
    :func:`~counterplan.solver.batch.records.question_of` of the goals, the rules, the distance,
    the configuration and the engine, marked by
    :func:`~counterplan.solver.batch.records.batch_question` for the threads path).

    Raises
    ------
    ProblemError
        Field ``field``, naming the first row of another seed or question; ``fresh`` says where to
        start afresh instead."""
    seeds = pd.to_numeric(existing["seed"], errors="coerce")  # an edited file's text is no seed either
    for row_id, held in zip(existing["row_id"].tolist(), seeds.tolist(), strict=True):
        if held != row_seed(seed, row_id):
            raise ProblemError(
                field,
                f"{str(path)!r} holds row {id_text(row_id)} explained with another seed than this run's {seed} "
                f"(--seed, or the configuration's random_seed): resume with the seed it was started with, "
                f"or write to {fresh}",
            )
    for row_id, held in zip(existing["row_id"].tolist(), existing["question"].tolist(), strict=True):
        if not isinstance(held, str) or held != question:  # an emptied cell reads as a gap (pandas' NA)
            raise ProblemError(
                field,
                f"{str(path)!r} holds row {id_text(row_id)} answered to another question than this run's (the "
                "goal, the rules, the distance, --config, --engine or --batch-engine differ): resume with the "
                f"flags it was started with, or write to {fresh}",
            )


def no_records(columns: Sequence[str], dtypes: Mapping[str, str]) -> pd.DataFrame:
    """An empty frame of records, with the columns and types of a job's."""
    return conform(pd.DataFrame({name: [] for name in columns}), dtypes)


def _read_csv(path: Path) -> list[pd.DataFrame]:
    """The CSV's records, the fixed text columns read as text: a question's fingerprint of hex
    digits alone ("0123...", "12e4...") would be read as a number, and compare unequal to itself;
    and the numbers as they were written (pandas' default parser reads a number of 17 digits up
    to a unit in the last place off: a resumed job's summary differed from the job's own)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    text = {name: "string" for name, dtype in _FIXED_DTYPES.items() if dtype == "string"}
    return [pd.read_csv(io.BytesIO(data), dtype=text, float_precision="round_trip")] if data.strip() else []


def _read_parquet(path: Path) -> list[pd.DataFrame]:
    """The output's records and its parts', but for the parts merged into it already: a job's end
    combines its parts into the output, then removes them, and a job stopped in between (Ctrl-C,
    ``kill -9``) left the output holding every row once and its parts the same rows again, which a
    resume refused as no output of one job. A part is written whole or not at all, and a resumed
    job writes only rows the output does not hold, so a part whose rows the output holds, every
    one, is such a merged part (one holding some of them is still refused, when the rows are
    checked)."""
    whole = [pd.read_parquet(path)] if path.exists() else []
    folder = parts_directory(path)
    parts = [pd.read_parquet(file) for file in sorted(folder.glob("part-*.parquet"))] if folder.is_dir() else []
    if whole and "row_id" in whole[0].columns:
        parts = [part for part in parts if not _merged(part, whole[0]["row_id"])]
    return whole + parts


def _merged(part: pd.DataFrame, held: pd.Series) -> bool:
    """Whether every row of ``part`` is among the row ids ``held`` (an output's)."""
    return "row_id" in part.columns and len(part) > 0 and bool(part["row_id"].isin(held).all())


class _BufferedRecords:
    """Records gathered and written a batch at a time: building a frame costs milliseconds, so
    each record alone would cap a fast job at a few dozen rows per second. A batch is written
    once it holds ``batch_records()`` records or ``batch_seconds()`` have passed since the last;
    :meth:`stop` writes what is left, so an interrupted job loses nothing it was told."""

    def __init__(self, path: Path, features: Sequence[str], dtypes: Mapping[str, str]) -> None:
        self.path = path
        self.features = list(features)
        self.dtypes = dict(dtypes)
        self.written = 0
        self._buffer: list[dict[str, Any]] = []
        self._last_batch = time.monotonic()

    def batch_records(self) -> int:
        """Records per written batch."""
        raise NotImplementedError

    def batch_seconds(self) -> float:
        """Seconds after which a smaller batch is written."""
        raise NotImplementedError

    def write(self, record: dict[str, Any]) -> None:
        """Take ``record``; write the batch once it is full or old enough."""
        self._buffer.append(record)
        self.written += 1
        if len(self._buffer) >= self.batch_records() or time.monotonic() - self._last_batch >= self.batch_seconds():
            self._write_buffer()

    def _write_buffer(self) -> None:
        self._last_batch = time.monotonic()
        if self._buffer:
            self._write_batch(conform(records_frame(self._buffer, self.features), self.dtypes))
            self._buffer = []

    def _write_batch(self, frame: pd.DataFrame) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Write what is buffered; the output stays as it is for ``--resume`` (an interrupted job)."""
        self._write_buffer()


class CsvRecords(_BufferedRecords):
    """Appends records to a CSV, a batch at a time (:data:`CSV_RECORDS`, :data:`CSV_SECONDS`),
    each flushed; the file is opened at the first batch, so a job that fails before any row is
    done writes nothing."""

    def __init__(self, path: Path, features: Sequence[str], dtypes: Mapping[str, str]) -> None:
        super().__init__(path, features, dtypes)
        self._handle: io.TextIOWrapper | None = None

    def batch_records(self) -> int:
        """Records per appended batch."""
        return CSV_RECORDS

    def batch_seconds(self) -> float:
        """Seconds after which a smaller batch is appended."""
        return CSV_SECONDS

    def _write_batch(self, frame: pd.DataFrame) -> None:
        handle = self._open()
        frame.to_csv(handle, header=handle.tell() == 0, index=False)
        handle.flush()

    def _open(self) -> io.TextIOWrapper:
        if self._handle is None:  # a resumed output's torn last line was cut off before (torn_line)
            self._handle = open(self.path, "a", encoding="utf-8", newline="")  # noqa: SIM115 - kept open for the job
        return self._handle

    def stop(self) -> None:
        """Append what is buffered and close the file."""
        try:
            super().stop()
        finally:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    def finish(self) -> None:
        """Append the rest: the CSV is complete (a job with no records writes the header)."""
        self._write_buffer()
        if self._handle is None and not self.path.exists():
            self._write_batch(no_records([*RECORD_COLUMNS, *(PROPOSED_PREFIX + f for f in self.features)], self.dtypes))
        self.stop()


class ParquetRecords(_BufferedRecords):
    """Writes records as part files beside the output (:data:`PART_RECORDS`,
    :data:`PART_SECONDS`) and combines them at the end."""

    def __init__(self, path: Path, features: Sequence[str], dtypes: Mapping[str, str]) -> None:
        super().__init__(path, features, dtypes)
        self.parts = parts_directory(path)

    def batch_records(self) -> int:
        """Records per part file."""
        return PART_RECORDS

    def batch_seconds(self) -> float:
        """Seconds after which a smaller part is written."""
        return PART_SECONDS

    def _write_batch(self, frame: pd.DataFrame) -> None:
        self.parts.mkdir(exist_ok=True)
        numbers = [int(p.stem.split("-")[-1]) for p in self.parts.glob("part-*.parquet")]
        target = self.parts / f"part-{max(numbers, default=-1) + 1:05d}.parquet"
        temporary = target.with_suffix(".tmp")
        frame.to_parquet(temporary, index=False)
        temporary.replace(target)  # a part is whole or absent

    def finish(self) -> None:
        """Combine the earlier output (if resumed) and every part into the output; remove the parts."""
        self._write_buffer()
        if self.path.exists() and not self.parts.is_dir():
            return  # nothing new: the output is as it was
        columns = [*RECORD_COLUMNS, *(PROPOSED_PREFIX + f for f in self.features)]
        combined = read_existing(self.path, columns, self.dtypes)
        temporary = self.path.with_name(self.path.name + ".tmp")
        combined.to_parquet(temporary, index=False)
        temporary.replace(self.path)
        if self.parts.is_dir():
            shutil.rmtree(self.parts)


def open_records(path: Path, features: Sequence[str], dtypes: Mapping[str, str]) -> CsvRecords | ParquetRecords:
    """The writer for ``path``'s format (checked by :func:`check_output`)."""
    kind = CsvRecords if path.suffix.lower() == ".csv" else ParquetRecords
    return kind(path, features, dtypes)
