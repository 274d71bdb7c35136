"""Read a released data.csv into integer codes (the audit's own parser).

Every cell must be one of the column's declared labels; empty cells, short or long rows,
undeclared labels, a wrong header, bad UTF-8 and NUL bytes are reported as problems (with row
and column), never raised.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field

import numpy as np

from .bundle_io import Bundle, BundleFileError
from .bounds import MAX_BINS_PER_COLUMN, MAX_COLUMNS, MAX_RECORD_CHARS
from .labels import SpecView

__all__ = ["DataTable", "read_data_csv", "read_header_and_labels"]

MAX_REPORTED = 20


@dataclass
class DataTable:
    header: list[str]
    codes: np.ndarray | None         # int64 (rows, d); None if the header is unusable
    rows: int                        # number of data rows read
    problems: list[str] = field(default_factory=list)
    bad_rows: int = 0                # rows with at least one problem (not in codes)

    @property
    def ok(self) -> bool:
        return not self.problems


class RecordTooLong(ValueError):
    """A record of the CSV is longer than its bound (the csv module would build it whole)."""


class _Lines:
    """The lines of a text stream for csv.reader, each read with a limit, and at most
    ``limit`` characters for one record (which may span lines): the csv module builds a whole
    record before it returns it, so a line of a billion commas would otherwise become a list of
    a billion cells. ``used`` is set to 0 after each record."""

    def __init__(self, f, limit: int):
        self.readline, self.limit, self.used = f.readline, int(limit), 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        line = self.readline(self.limit + 1 - self.used)
        if not line:
            raise StopIteration
        self.used += len(line)
        if self.used > self.limit:
            raise RecordTooLong(f"a record longer than {self.limit:,} characters")
        return line


def record_limit(view: SpecView) -> int:
    """The longest record data.csv can hold under ``view``: every cell its longest label (or
    column name) with every character doubled by quoting, 2 quotes, a comma; a line end."""
    total = 2
    for c in view.columns:
        longest = max([len(c.name)] + [len(lab) for lab in c.labels])
        total += 2 * longest + 3
    return total


def _iter_rows(bundle: Bundle, name: str, limit: int = MAX_RECORD_CHARS):
    f = bundle.open_text(name)
    csv.field_size_limit(1 << 20)
    lines = _Lines(f, limit)
    reader = csv.reader(lines, strict=True)
    return f, reader, lines


def read_header_and_labels(bundle: Bundle, name: str = "data.csv", max_rows: int = 200_000):
    """(header, {column: set of labels seen}) from the first ``max_rows`` rows; None on failure.

    Used only to infer a column's alternative when the configuration does not name it.
    """
    try:
        f, reader, lines = _iter_rows(bundle, name)
        with f:
            header = next(reader, None)
            if header is None or len(header) > MAX_COLUMNS:
                return None
            lines.used = 0
            seen = {h: set() for h in header}
            for i, row in enumerate(reader):
                lines.used = 0
                if i >= max_rows:
                    break
                for h, v in zip(header, row):
                    labels = seen[h]
                    if len(labels) <= MAX_BINS_PER_COLUMN:   # more fit no alternative anyway
                        labels.add(v)
            return header, seen
    except (BundleFileError, csv.Error, UnicodeDecodeError, ValueError, OSError):
        return None


def read_data_csv(bundle: Bundle, view: SpecView, name: str = "data.csv") -> DataTable:
    """Parse ``name`` against the labels of ``view``; problems are collected, not raised."""
    problems: list[str] = []
    expected = view.names
    lookups = [{lab: k for k, lab in enumerate(c.labels)} for c in view.columns]
    d = len(expected)
    try:
        f, reader, lines = _iter_rows(bundle, name, record_limit(view))
    except BundleFileError as e:
        return DataTable(header=[], codes=None, rows=0, problems=[str(e)])
    chunks: list[np.ndarray] = []
    buf: list[list[int]] = []
    rows = bad = 0
    header: list[str] = []
    try:
        with f:
            header = next(reader, None) or []
            if not header:
                return DataTable(header=[], codes=None, rows=0, problems=[f"{name}: empty file (no header)"])
            if header != expected:
                problems.append(f"{name}: header {header} differs from the spec's released columns {expected}")
                return DataTable(header=header, codes=None, rows=0, problems=problems)
            lines.used = 0
            for row in reader:
                lines.used = 0
                rows += 1
                line = reader.line_num
                if len(row) != d:
                    bad += 1
                    if len(problems) < MAX_REPORTED:
                        problems.append(f"{name} line {line}: {len(row)} fields, expected {d}")
                    continue
                codes = []
                fine = True
                for j, v in enumerate(row):
                    k = lookups[j].get(v)
                    if k is None:
                        fine = False
                        if len(problems) < MAX_REPORTED:
                            if v == "":
                                problems.append(f"{name} line {line}, column {expected[j]}: empty cell")
                            else:
                                shown = v if len(v) <= 40 else v[:40] + "..."
                                problems.append(
                                    f"{name} line {line}, column {expected[j]}: undeclared label {shown!r}"
                                )
                        break
                    codes.append(k)
                if not fine:
                    bad += 1
                    continue
                buf.append(codes)
                if len(buf) >= 65536:
                    chunks.append(np.asarray(buf, dtype=np.int64))
                    buf = []
    except RecordTooLong as e:
        if not header:   # the header itself: no row was read
            return DataTable(header=[], codes=None, rows=0, problems=[
                f"{name}: the header is {e}, longer than the spec's released columns can be "
                f"({len(expected)} columns)"])
        problems.append(f"{name}: line {reader.line_num + 1} or after: {e}, longer than a row of "
                        f"the spec's labels can be")
    except csv.Error as e:
        problems.append(f"{name}: malformed CSV near line {reader.line_num} ({e})")
    except UnicodeDecodeError as e:
        problems.append(f"{name}: not UTF-8 ({e.reason})")
    except (OSError, ValueError) as e:
        problems.append(f"{name}: cannot read ({e})")
    if buf:
        chunks.append(np.asarray(buf, dtype=np.int64))
    codes = np.concatenate(chunks) if chunks else np.zeros((0, d), dtype=np.int64)
    if bad > MAX_REPORTED:
        problems.append(f"{name}: {bad} bad rows in all")
    return DataTable(header=header, codes=codes, rows=rows, problems=problems, bad_rows=bad)
