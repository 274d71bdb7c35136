"""Read a released data.csv into its distinct rows and their counts (the audit's own parser).

Every cell must be one of the column's declared labels; empty cells, short or long rows,
undeclared labels, a wrong header, bad UTF-8 and NUL bytes are reported as problems (with row
and column), never raised.
"""
from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from .bundle_io import Bundle, BundleFileError
from .bounds import MAX_BINS_PER_COLUMN, MAX_COLUMNS, MAX_RECORD_CHARS
from .labels import SpecView

__all__ = ["Counted", "DataTable", "as_counted", "read_data_csv", "read_header_and_labels"]

MAX_REPORTED = 20
FIELD_LIMIT = 1 << 20     # the csv module's limit on one field (its reader raises beyond it)


@dataclass(frozen=True)
class Counted:
    """A table held as its distinct rows and how often each occurs (a released table repeats
    its rows: face privacy), with the 0-based position of each distinct row's first occurrence
    among the readable rows."""

    rows: np.ndarray                 # int64 (u, d), distinct
    counts: np.ndarray               # int64 (u,), >= 1
    first: np.ndarray                # int64 (u,)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def column_counts(self, j: int, size: int) -> np.ndarray:
        """Records with each code of column j (int64)."""
        return np.bincount(self.rows[:, j], weights=self.counts, minlength=size).astype(np.int64)


def as_counted(codes) -> Counted:
    """A Counted table of an int array of rows (or the Counted itself)."""
    if isinstance(codes, Counted):
        return codes
    codes = np.asarray(codes, dtype=np.int64)
    if codes.shape[0] == 0:
        return Counted(codes.reshape(0, codes.shape[1] if codes.ndim == 2 else 0), np.zeros(0, np.int64),
                       np.zeros(0, np.int64))
    rows, first, counts = np.unique(codes, axis=0, return_index=True, return_counts=True)
    return Counted(rows, counts.astype(np.int64), first.astype(np.int64))


@dataclass
class DataTable:
    header: list[str]
    data: Counted | None             # the readable rows; None if the header is unusable
    rows: int                        # number of data rows read
    problems: list[str] = field(default_factory=list)
    bad_rows: int = 0                # rows with at least one problem (not in data)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> np.ndarray | None:
        """The readable rows as codes (int64 (rows, d)), in the order of their distinct rows (the
        multiset of data.csv's rows; built on request: the checks work on ``data``)."""
        if self.data is None:
            return None
        return np.repeat(self.data.rows, self.data.counts, axis=0)


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
    csv.field_size_limit(FIELD_LIMIT)
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
    """Parse ``name`` against the labels of ``view``; problems are collected, not raised.

    A clean file (the common case) is read by :func:`_read_clean`, without the csv module; any
    departure from the plain form it accepts makes it give up, and the file is read again by
    :func:`_read_checked`, which says what is wrong, with row and column."""
    expected = view.names
    lookups = [{lab: k for k, lab in enumerate(c.labels)} for c in view.columns]
    try:
        clean = _read_clean(bundle, name, expected, lookups, record_limit(view))
    except (BundleFileError, UnicodeDecodeError, OSError, ValueError):
        clean = None
    if clean is not None:
        data, rows = clean
        return DataTable(header=list(expected), data=data, rows=rows)
    return _read_checked(bundle, view, name, expected, lookups)


# The characters that make csv.reader do more than split a line at its commas: a quote, a line
# end other than "\n", NUL (which it refuses). A chunk with any of them is left to the csv module.
_SPECIAL = ('"', "\r", "\x00")
CLEAN_CHUNK_CHARS = 1 << 20    # characters read at a time: its cells as strings take ~10 times as much


def _special(text: str) -> bool:
    return any(ch in text for ch in _SPECIAL)


def _plain_labels(names: list[str], lookups: list[dict]) -> bool:
    """Whether every column name and label can only be written as plain text between commas
    (non-empty, no comma, quote, line end or NUL, within the csv module's field limit)."""
    for text in [*names, *(lab for lk in lookups for lab in lk)]:
        if not text or len(text) > FIELD_LIMIT or "," in text or "\n" in text or _special(text):
            return False
    return True


def _read_clean(bundle: Bundle, name: str, expected: list[str], lookups: list[dict],
                limit: int) -> tuple[Counted, int] | None:
    """(its distinct rows and counts, rows) of a data.csv in plain form, or None: the header line
    is exactly the released columns joined by commas, and every other line, ending in a line feed
    (the last one may not), holds one declared label per column; no quote, carriage return or NUL
    anywhere, no line longer than ``limit`` characters. csv.reader reads such a file as these
    lines split at their commas, so the rows are the ones :func:`_read_checked` finds, with no
    problem. Memory: the distinct lines and a chunk of text."""
    if not _plain_labels(expected, lookups):
        return None
    types = _LineTypes(lookups, limit)
    header: str | None = None
    carry = ""
    with bundle.open_text(name) as f:
        while True:
            block = f.read(CLEAN_CHUNK_CHARS)
            text = carry + block
            cut = text.rfind("\n") + 1 if block else len(text)   # at the end: the last line
            region, carry = text[:cut], text[cut:]
            if len(carry) >= limit or _special(region):
                return None
            if region:     # whole lines: each ends in a line feed, except a last line at the end
                lines = region[:-1] if region.endswith("\n") else region
                if header is None:
                    header, more, lines = lines.partition("\n")
                    if header != ",".join(expected) or len(header) + 1 > limit:
                        return None
                    if not more:
                        lines = None
                if lines is not None and not types.add(lines.split("\n")):
                    return None
            if not block:
                break
    if header is None:
        return None
    return types.counted(len(expected)), types.rows


class _LineTypes:
    """The distinct lines of a plain data.csv, their codes, counts and first positions."""

    def __init__(self, lookups: list[dict], limit: int) -> None:
        self.lookups, self.limit = lookups, limit
        self.where: dict[str, int] = {}
        self.codes: list[np.ndarray] = []
        self.counts: list[int] = []
        self.first: list[int] = []
        self.rows = 0

    def add(self, lines: list[str]) -> bool:
        """Count a chunk's lines; False when one is not d declared labels joined by commas."""
        seen = Counter(lines)
        new = [line for line in seen if line not in self.where]
        if new:
            codes = _clean_codes(new, self.lookups, self.limit)
            if codes is None:
                return False
            position = dict(zip(reversed(lines), range(len(lines) - 1, -1, -1)))   # first index
            for line in new:
                self.where[line] = len(self.counts)
                self.counts.append(0)
                self.first.append(self.rows + position[line])
            self.codes.append(codes)
        for line, c in seen.items():
            self.counts[self.where[line]] += c
        self.rows += len(lines)
        return True

    def counted(self, d: int) -> Counted:
        rows = np.concatenate(self.codes) if self.codes else np.zeros((0, d), dtype=np.int64)
        return Counted(rows, np.asarray(self.counts, dtype=np.int64), np.asarray(self.first, dtype=np.int64))


def _clean_codes(distinct: list[str], lookups: list[dict], limit: int) -> np.ndarray | None:
    """The codes of distinct lines (each must be d declared labels joined by commas, else None)."""
    d = len(lookups)
    if max(map(len, distinct)) + 1 > limit or set(map(str.count, distinct, repeat(","))) != {d - 1}:
        return None
    cells = ",".join(distinct).split(",")
    table = np.empty((len(distinct), d), dtype=np.int64)
    for j, lookup in enumerate(lookups):
        codes = list(map(lookup.get, cells[j::d]))
        if None in codes:
            return None
        table[:, j] = codes
    return table


def _read_checked(bundle: Bundle, view: SpecView, name: str, expected: list[str],
                  lookups: list[dict]) -> DataTable:
    """The csv module's reading of ``name``, every problem reported with its row and column."""
    problems: list[str] = []
    d = len(expected)
    try:
        f, reader, lines = _iter_rows(bundle, name, record_limit(view))
    except BundleFileError as e:
        return DataTable(header=[], data=None, rows=0, problems=[str(e)])
    chunks: list[np.ndarray] = []
    buf: list[list[int]] = []
    rows = bad = 0
    header: list[str] = []
    try:
        with f:
            header = next(reader, None) or []
            if not header:
                return DataTable(header=[], data=None, rows=0, problems=[f"{name}: empty file (no header)"])
            if header != expected:
                problems.append(f"{name}: header {header} differs from the spec's released columns {expected}")
                return DataTable(header=header, data=None, rows=0, problems=problems)
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
            return DataTable(header=[], data=None, rows=0, problems=[
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
    return DataTable(header=header, data=as_counted(codes), rows=rows, problems=problems, bad_rows=bad)
