"""A CSV of batch records whose last line a crash tore: found and cut off before a job resumes.

A batch appends its records to a CSV as rows finish (:class:`counterplan.solver.batch.writer.CsvRecords`),
so a process killed mid-write can leave a last line cut anywhere: in the middle of a field, just
after a comma, before its newline, or inside the row id itself (``99`` of ``9999``). Read as a
record, such a line becomes a row that looks done (pandas fills the missing fields with NaN) and
is never solved again, or a record of a row the data does not have; a reader of the output sees
it as one more answer. So ``--resume`` repairs the file first (:func:`drop_torn_line`): the last
line is kept only when it is a whole record of this job, and otherwise cut off the file and
logged, and its row (when it is asked for) is solved again.

A whole record ends with a newline, has the header's number of fields, and holds values of its
columns' types: a row id of the data, a known status, ``True``/``False``, whole numbers and
numbers where the records hold them. Only the last record can be torn (records are appended, and a
resume repairs the file before it appends), so only it is checked; the records before it are read
as they are.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog

from counterplan.planning.errors import echo
from counterplan.solver.batch.records import STATUSES

log = structlog.get_logger(__name__)

_WHOLE = re.compile(r"-?[0-9]+")


@dataclass(frozen=True)
class TornLine:
    """What :func:`drop_torn_line` cut off the file, and why it is not a record."""

    text: str
    """The line as it was (whole: quote it with :func:`counterplan.planning.errors.echo`)."""
    reason: str
    """Why it is not a whole record, in words."""


@dataclass(frozen=True)
class _Record:
    start: int
    """Byte offset of the record's first line."""
    end: int
    """Byte offset just past its last line."""
    fields: list[str] | None
    """Its fields; ``None`` when the CSV reader could not read it (a quote left open)."""


def drop_torn_line(
    path: Path, columns: Sequence[str], dtypes: Mapping[str, str], *, rows: int | None = None
) -> TornLine | None:
    """Cut a torn last line off the CSV at ``path`` (a job's earlier output) and log it.

    ``columns`` and ``dtypes`` are the job's (:func:`counterplan.solver.batch.writer.record_dtypes`);
    ``rows`` is the number of rows in the data (row ids are positions), so a row id beyond it
    marks a line as torn. A file that is not a CSV, is missing, or holds another job's header is
    left alone (reading it refuses the last). A header cut short is cut off too: the job
    starts the file again.

    Returns
    -------
    TornLine | None
        The line cut off, or ``None`` when the file ends with a whole record (or only its header).
    """
    if path.suffix.lower() != ".csv" or not path.is_file():
        return None
    data = path.read_bytes()
    records = _records(data)
    if not records:
        return None
    header = records[0]
    if len(records) == 1:
        torn = _torn_header(data, header, columns)
    elif header.fields != list(columns):
        return None
    else:
        torn = _torn_record(data, records[-1], dtypes, rows)
    if torn is None:
        return None
    os.truncate(path, records[-1].start)  # the header alone: 0, the job starts the file again
    log.warning(
        "--resume dropped a torn last line of the output: not a record; its row, when asked for, is solved again",
        output=str(path),
        reason=torn.reason,
        line=echo(torn.text),
    )
    return torn


def _torn_header(data: bytes, header: _Record, columns: Sequence[str]) -> TornLine | None:
    """A header without its newline that starts the job's header: torn when it was written."""
    text = _text(data, header)
    if data[header.end - 1 : header.end] == b"\n" or not ",".join(columns).startswith(text):
        return None
    return TornLine(text, "the header has no newline at its end: cut short")


def _torn_record(data: bytes, record: _Record, dtypes: Mapping[str, str], rows: int | None) -> TornLine | None:
    """Why the last record is not a whole record of the job, or ``None`` when it is one."""
    text = _text(data, record)
    if data[record.end - 1 : record.end] != b"\n":
        return TornLine(text, "no newline at its end: cut short")
    if record.fields is None:
        return TornLine(text, "a quoted field is not closed")
    if len(record.fields) != len(dtypes):
        return TornLine(text, f"{len(record.fields)} fields, the header has {len(dtypes)}")
    for (name, dtype), value in zip(dtypes.items(), record.fields, strict=True):
        problem = _bad_value(name, dtype, value, rows)
        if problem is not None:
            return TornLine(text, f"{name} {echo(value)} {problem}")
    return None


def _bad_value(name: str, dtype: str, value: str, rows: int | None) -> str | None:
    """Why ``value`` cannot be column ``name``'s (of type ``dtype``, as pandas writes it), or ``None``."""
    if name == "row_id":
        if not _WHOLE.fullmatch(value) or int(value) < 0:
            return "is not a row id"
        return None if rows is None or int(value) < rows else f"is not a row of the data ({rows:,} rows)"
    if name == "status":
        return None if value in STATUSES else "is not a status"
    if dtype == "bool":
        return None if value in ("True", "False") else "is not True or False"
    if dtype == "int64":
        return None if _WHOLE.fullmatch(value) else "is not a whole number"
    if dtype in ("float64", "Int64", "boolean"):  # a proposed value may keep another type (see conform)
        return None if value in ("", "True", "False") or _number(value) else "is not a number"
    return None


def _number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _text(data: bytes, record: _Record) -> str:
    return data[record.start : record.end].decode("utf-8", errors="replace").rstrip("\r\n")


def _records(data: bytes) -> list[_Record]:
    """The first and the last record of ``data`` with their byte spans (one when it has one, none
    when it is empty). A quoted field may hold a newline, so a record can span lines; a quote left
    open at the end makes the last record unreadable (``fields`` ``None``). A file the CSV reader
    stops on before its end is not a torn one: no records (reading it refuses it)."""
    ends: list[int] = [0]

    def lines() -> Iterator[str]:
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline + 1
            ends[0] = end
            yield data[start:end].decode("utf-8", errors="replace")
            start = end

    first: _Record | None = None
    last: _Record | None = None
    reader = csv.reader(lines(), strict=True)
    start = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error:
            if ends[0] != len(data):
                return []
            fields = None
        last = _Record(start, ends[0], fields)
        first = first or last
        start = ends[0]
        if fields is None:
            break
    if first is None or last is None:
        return []
    return [first] if first is last else [first, last]
