"""The audit's own loading of the private input for the enclave replay: CSV(.gz) or Parquet
parsing per the spec's input columns, the raw constraints, and binning into codes per the
selected configuration. Written independently of ``release/data/prepare.py``,
``release/data/parquet_read.py`` and ``release/data/transform.py``.

A file whose name ends in ``.parquet`` is read as Parquet (pyarrow, ``pip install
'dpbundle[parquet]'``) in record batches: each value becomes the text its CSV cell would hold
(integers and decimals in decimal, a float as its shortest decimal, booleans true/false, dates
YYYY-MM-DD, strings as they are) and is parsed as that cell; a null is a missing value where the
column declares a missing-value marker (else a problem); other column types are refused.
Problems name "row R (row group G)" (rows from 1, row groups from 0) instead of a line.

Reading: an input column comes from the CSV column headed by its ``header`` (default its
``name``); a cell is missing when it equals one of ``input.missing_values`` or of the column's own
``missing`` markers; a category cell is matched by text against the declared categories (an
integer category 3 is the text "3"). Each integer, float or date value is stored as its atom
(:class:`_Atoms`): the replay's stored rows are bounded by the spec, not by the records. Raw
constraints compare in input units (category values by
text; ``in`` / ``not in`` take lists); a comparison with a missing cell is false. Binning derives
month, year, ``age`` (completed years at ``source.reference``) or ``linear`` (scale * x + offset)
and maps categories by ``map``, then ``default``, then the same text; a category that a raw
constraint always removes (one single ``==`` / ``in`` condition on its column) need not be mapped.
"""
from __future__ import annotations

import copy
import csv
import datetime as dt
import gzip
import io
import math
import operator
import os
import re
import zlib
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .labels import SpecView

__all__ = ["PrivateDataError", "PrivateTable", "load_private", "bin_private", "bin_stored"]

TRUE_TOKENS = {"true", "1", "t", "yes"}
FALSE_TOKENS = {"false", "0", "f", "no"}
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "==": operator.eq, "!=": operator.ne}
SET_OPS = ("in", "not in")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
MAX_PRIVATE_BYTES = 4 * 1024**3
#: Bytes a record of the private file may take when the limit grows with the bundle's n
#: (:func:`private_limit`).
PRIVATE_ROW_BYTES = 1024
MAX_REPORTED = 8
MAX_PROBLEMS = 1_000              # reading stops after this many problems
MAX_CELL_ENV = "DPBUNDLE_MAX_CELL_CHARS"
DEFAULT_MAX_CELL = 65_536         # characters in one cell (the release's limit too)
HEADER_LIMIT = 1 << 22            # characters in the header line
_UNDECODABLE = re.compile("[\udc80-\udcff]")


class PrivateDataError(ValueError):
    """The private data cannot be used (the message names line, column and rule)."""


@dataclass
class PrivateTable:
    """Typed input columns after the raw constraints (private), held as *stored rows*: each
    distinct row of atoms (:class:`_Atoms`: the values the raw constraints and every binning of
    the spec cannot tell apart, each atom as its first value read) is stored once (with
    ``load_private(..., atoms=False)``: each distinct row of the file's cells, while the memo of
    rows seen holds fewer than MEMO_ROWS), and ``index[i]`` is the stored row of plausible
    record i, in file order. ``values[name]`` is
    float64 with NaN for missing (dates: proleptic ordinal; booleans 0/1; categories: index);
    dates also keep their year, month and day. ``n``: the plausible records."""

    values: dict[str, np.ndarray]
    months: dict[str, np.ndarray]
    years: dict[str, np.ndarray]
    days: dict[str, np.ndarray]
    kinds: dict[str, str]
    n: int
    rows_read: int
    index: np.ndarray | None = None    # None: one stored row per record (index = arange(n))

    def record_rows(self) -> np.ndarray:
        """The stored row of every plausible record, in file order."""
        return np.arange(self.n) if self.index is None else self.index


def _open(path: Path, limit: int = MAX_PRIVATE_BYTES):
    """The file as text: gunzipped when it starts with the gzip magic; UTF-8 (a byte-order mark
    is skipped), undecodable bytes kept as U+DC80..U+DCFF so that their line and column can be
    named."""
    from .safe_read import InputFileError, open_regular_file

    try:   # one open of a regular file (never a FIFO or a device)
        fh = open_regular_file(path, "private data", limit)
    except InputFileError as e:
        raise PrivateDataError(str(e)) from None
    magic = fh.read(2)
    fh.seek(0)
    raw = _OwnedGzip(fh) if magic == b"\x1f\x8b" else fh
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline="")


class _OwnedGzip(gzip.GzipFile):
    """A gzip reader that closes the file it reads when it is closed."""

    def __init__(self, fh) -> None:
        super().__init__(fileobj=fh, mode="rb")
        self._owned = fh

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._owned.close()


def _cell_limit() -> int:
    """The longest cell read, in characters: $DPBUNDLE_MAX_CELL_CHARS (as for the release) or 65,536."""
    raw = os.environ.get(MAX_CELL_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_CELL
    if not raw.replace("_", "").isdigit() or int(raw.replace("_", "")) < 1:
        raise PrivateDataError(f"environment variable {MAX_CELL_ENV}: not a positive whole number")
    return int(raw.replace("_", ""))


def _cells_of(text: str) -> list[tuple[int, int, str]]:
    """(offset, length, state) of the cells of one record's text as far as it goes; state "ok",
    "open" (a quote never closed) or "junk" (text after a closing quote)."""
    out: list[tuple[int, int, str]] = []
    i, n = 0, len(text)
    while True:
        start = i
        if i < n and text[i] == '"':
            j, length = i + 1, 0
            while True:
                k = text.find('"', j)
                if k < 0:
                    out.append((start, length + n - j, "open"))
                    return out
                length += k - j
                if k + 1 < n and text[k + 1] == '"':
                    length, j = length + 1, k + 2
                    continue
                i = k + 1
                break
            if i < n and text[i] not in ",\r\n":
                out.append((start, length, "junk"))
                return out
        else:
            ends = [e for e in (text.find(",", i), text.find("\r", i), text.find("\n", i)) if e >= 0]
            i = min(ends) if ends else n
            length = i - start
        out.append((start, length, "ok"))
        if i >= n or text[i] != ",":
            return out
        i += 1


def _line_breaks(text: str) -> int:
    return len(re.findall(r"\r\n|\r|\n", text))


class _Lines:
    """Physical lines for csv.reader, each read at most ``limit`` characters; a longer line ends
    the reading (``overlong`` keeps its start). ``record``: the lines of the record being parsed."""

    def __init__(self, f, limit: int):
        self.f, self.limit = f, limit
        self.record: list[str] = []
        self.undecodable = False
        self.overlong: str | None = None

    def __iter__(self):
        while True:
            piece = self.f.readline(self.limit)
            if not piece:
                return
            if len(piece) >= self.limit and piece[-1] not in "\r\n":
                self.overlong = "".join(self.record) + piece
                return
            if not piece.isascii() and _UNDECODABLE.search(piece):
                self.undecodable = True
            self.record.append(piece)
            yield piece


class _Trouble:
    """Problems of the private file, bounded; where and which rule, never a cell or a count.
    Problems with a rule seen before on other lines are folded into the first one."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.total = 0
        self.folded: dict[tuple, int] = {}   # (column, rule) -> index in shown (or -1)
        self.place = lambda line: f"line {line}"   # a Parquet file's rows: "row R (row group G)"
        self.unit = "lines"                         # "rows" in a Parquet file

    def add(self, line: int, column: str | None, rule: str, fold: bool = False) -> None:
        self.total += 1
        key = (column, rule)
        if fold and key in self.folded:
            i = self.folded[key]
            other = f" (and on other {self.unit})"
            if i >= 0 and not self.shown[i].endswith(other):
                self.shown[i] += other
            return
        name = None if column is None else repr(column[:40]) + ("..." if len(column) > 40 else "")
        where = self.place(line) + (f", column {name}" if name is not None else "")
        if len(self.shown) < MAX_REPORTED:
            self.shown.append(f"{where}: {rule}")
            if fold:
                self.folded[key] = len(self.shown) - 1
        elif fold:
            self.folded[key] = -1


def _records(path: Path, wanted: list[str], trouble: _Trouble, limit: int = MAX_PRIVATE_BYTES):
    """{header: position} of ``wanted``, then (line, row, spans several lines) for every usable
    data row (blank lines are skipped; lines are the file's own); problems go
    to ``trouble``; reading stops at a problem that makes the rest unreadable or after
    MAX_PROBLEMS problems."""
    cap = _cell_limit()
    old_limit = csv.field_size_limit(cap)
    reader = None
    try:
        with _open(path, limit) as f:
            lines = _Lines(f, HEADER_LIMIT)
            reader = csv.reader(lines, strict=True)
            got = _header(reader, lines, wanted, trouble, cap)
            if got is None:
                return
            header, pos = got
            width = len(header)
            lines.limit = (width + 1) * (2 * cap + 3) + 2
            yield pos
            prev = reader.line_num
            while trouble.total < MAX_PROBLEMS:
                start = prev + 1
                try:
                    row = next(reader)
                except StopIteration:
                    if lines.overlong is not None:
                        _report_overlong(lines, reader.line_num + 1, header, cap, trouble)
                    return
                except csv.Error as e:
                    if lines.overlong is not None:
                        _report_overlong(lines, reader.line_num + 1, header, cap, trouble)
                        return
                    _report_csv_error(e, lines, start, header, cap, trouble)
                    prev = reader.line_num
                    lines.record.clear()
                    lines.undecodable = False
                    continue
                prev = reader.line_num
                lines.record.clear()
                if lines.undecodable:
                    lines.undecodable = False
                    _report_undecodable(row, start, header, trouble)
                    continue
                if not row:
                    continue   # a blank line
                if len(row) != width:
                    trouble.add(start, None, _width_rule(row, header), fold=True)
                    continue
                yield start, row, prev > start
    except (OSError, EOFError, zlib.error) as e:
        # A decompression or read error: which line, and the exception's type only (its text
        # may quote the data).
        trouble.add(reader.line_num + 1 if reader is not None else 1, None,
                    f"the file cannot be read from here on ({'zlib.error' if isinstance(e, zlib.error) else type(e).__name__}: "
                    "corrupt or truncated gzip data?)")
    finally:
        csv.field_size_limit(old_limit)


PARQUET_SUFFIX = ".parquet"
PARQUET_HINT = "pip install 'dpbundle[parquet]'"


def _is_parquet(path: Path) -> bool:
    """A file read as Parquet: its name ends in ``.parquet`` (any other is read as CSV)."""
    return path.name.endswith(PARQUET_SUFFIX)


def _arrow():
    """(pyarrow, pyarrow.parquet, pyarrow.compute); PrivateDataError when pyarrow is absent."""
    try:
        import pyarrow
        import pyarrow.compute
        import pyarrow.parquet
    except ImportError:
        raise PrivateDataError(f"reading a Parquet file needs pyarrow, which is not installed: "
                               f"{PARQUET_HINT}") from None
    return pyarrow, pyarrow.parquet, pyarrow.compute


def _text_type(pa, t) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view"


def _parquet_type_problem(pa, t) -> str | None:
    """None for a column type whose values are read as cell texts; else the rule broken."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    read = (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_date32(t) or pa.types.is_null(t) or _text_type(pa, t))
    if read:
        return None
    if pa.types.is_timestamp(t) or pa.types.is_date64(t):
        return f"a {t} column: dates are read from Parquet DATE (date32) or YYYY-MM-DD text only"
    return (f"a {t} column: integers, floating-point numbers, decimals, booleans, dates (date32) "
            "and strings are read")


def _parquet_texts(pa, pc, column):
    """A column's values as cell texts (an Arrow string array, nulls kept): numbers in decimal
    (a float as its shortest decimal), booleans true/false, dates YYYY-MM-DD, strings as they are."""
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.string())
    if pa.types.is_string(column.type):
        return column
    return column.cast(pa.string()) if _text_type(pa, column.type) else pc.cast(column, pa.string())


def _not_utf8(pa, texts) -> set[int]:
    """The rows of a string array whose bytes are not UTF-8."""
    out = set()
    for i, value in enumerate(texts.cast(pa.binary()).to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                out.add(i)
    return out


def _open_parquet(path: Path, pa, pq, limit: int = MAX_PRIVATE_BYTES):
    """(the file, its ParquetFile, the cumulative row counts of its row groups); PrivateDataError
    naming the rule (an exception's type, never its text) when it is not a readable Parquet file."""
    from .safe_read import InputFileError, open_regular_file

    try:
        fh = open_regular_file(path, "private data", limit)
    except InputFileError as e:
        raise PrivateDataError(str(e)) from None
    try:
        head = fh.read(4)
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(size - 4, 0))
        tail = fh.read(4) if size >= 8 else b""
        fh.seek(0)
        if b"PARE" in (head, tail):
            raise PrivateDataError(f"{path}: an encrypted Parquet file (not read)")
        if head != b"PAR1" or tail != b"PAR1":
            raise PrivateDataError(f"{path}: not a Parquet file (no PAR1 magic bytes at its start and end)")
        try:
            pf = pq.ParquetFile(fh, buffer_size=1 << 20, pre_buffer=False, page_checksum_verification=True)
            meta = pf.metadata
            ends = np.cumsum([meta.row_group(g).num_rows for g in range(meta.num_row_groups)], dtype=np.int64)
        except (pa.ArrowException, OSError, ValueError, EOFError) as e:
            raise PrivateDataError(f"{path}: the Parquet footer cannot be decoded ({type(e).__name__}); "
                                   "a corrupt or truncated file?") from None
    except BaseException:
        fh.close()
        raise
    return fh, pf, ends


def _parquet_records(path: Path, wanted: list[str], trouble: _Trouble, limit: int = MAX_PRIVATE_BYTES):
    """:func:`_records` of a Parquet file: {header: position}, then (row, cells, False) for every
    usable row, rows counted from 1, a cell None for a null; read in record batches (memory: a
    row group's wanted columns). Problems name 'row R (row group G)', the column and the rule."""
    pa, pq, pc = _arrow()
    cap = _cell_limit()
    fh, pf, ends = _open_parquet(path, pa, pq, limit)
    trouble.place = lambda row: f"row {row} (row group {int(np.searchsorted(ends, row - 1, side='right'))})"
    trouble.unit = "rows"
    try:
        names = pf.schema_arrow.names
        absent = [h for h in wanted if h not in names]
        if absent:
            raise PrivateDataError(f"{path}: the Parquet file lacks column(s) {absent}")
        for h in wanted:
            if names.count(h) > 1:
                raise PrivateDataError(f"{path}: the Parquet file names column {h!r} twice")
            problem = _parquet_type_problem(pa, pf.schema_arrow.field(h).type)
            if problem:
                raise PrivateDataError(f"{path}: column {h!r} is {problem}")
        yield {h: i for i, h in enumerate(wanted)}
        row = 0
        batches = pf.iter_batches(batch_size=4096, columns=wanted, use_threads=False)
        while trouble.total < MAX_PROBLEMS:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError, ValueError, EOFError) as e:
                trouble.add(row + 1, None, f"the Parquet data cannot be read from here on ({type(e).__name__}: "
                                           "corrupt or truncated?)")
                return
            if batch is None:
                return
            columns, skip = _parquet_batch(pa, pc, batch, wanted, cap, row, trouble)
            for k, cells in enumerate(zip(*columns)):
                if k not in skip:
                    yield row + k + 1, list(cells), False
            row += batch.num_rows
    finally:
        fh.close()


def _parquet_batch(pa, pc, batch, wanted: list[str], cap: int, before: int, trouble: _Trouble):
    """(each wanted column's cells as a list of str or None, the rows to skip: a problem reported)."""
    columns, skip = [], set()
    for h in wanted:
        texts = _parquet_texts(pa, pc, batch.column(batch.schema.get_field_index(h)))
        try:
            texts.validate(full=True)
        except pa.ArrowInvalid:      # its text may quote the bytes: not used
            bad = _not_utf8(pa, texts)
            for k in sorted(bad - skip):
                trouble.add(before + k + 1, h, "bytes that are not UTF-8 text", fold=True)
            skip |= bad
            texts = pc.if_else(pa.array([k in bad for k in range(len(texts))]), pa.scalar(None, pa.string()), texts)
        lengths = pc.utf8_length(texts)
        longest = pc.max(lengths).as_py()
        if longest is not None and longest > cap:
            for k, n in enumerate(lengths.to_pylist()):
                if n is not None and n > cap and k not in skip:
                    skip.add(k)
                    trouble.add(before + k + 1, h, f"a cell longer than {cap} characters ({MAX_CELL_ENV} sets the limit)",
                                fold=True)
        columns.append(texts.to_pylist())
    return columns, skip


def _header(reader, lines: _Lines, wanted: list[str], trouble: _Trouble, cap: int):
    """(header, {wanted name: position}) or None (problem recorded)."""
    while True:
        start = reader.line_num + 1
        try:
            header = next(reader)
        except StopIteration:
            if lines.overlong is not None:
                _report_overlong(lines, reader.line_num + 1, [], cap, trouble)
            else:
                trouble.add(1, None, "empty file (no header line)")
            return None
        except csv.Error as e:
            _report_csv_error(e, lines, start, [], cap, trouble)
            return None
        if lines.undecodable:
            _report_undecodable(header, start, [], trouble)
            return None
        if header:
            break
        lines.record.clear()
    text = "".join(lines.record).rstrip("\r\n")
    lines.record.clear()
    first: dict[str, int] = {}
    for i, name in enumerate(header):
        if name and name in first:
            trouble.add(start, name, f"the header names this column twice (columns {first[name] + 1} and {i + 1})")
            return None
        first.setdefault(name, i)
    absent = [h for h in wanted if h not in header]
    if absent:
        for sep, what in ((";", "';'"), ("\t", "a tab"), ("|", "'|'")):
            if sep in text:
                other = next(csv.reader([text], delimiter=sep))
                if sum(h in other for h in wanted) > len(wanted) - len(absent):
                    trouble.add(start, None, f"header: the columns are separated by {what}, not by commas "
                                             "(comma-separated values expected)")
                    return None
        trouble.add(start, None, f"header lacks column(s) {absent}")
        return None
    return header, {h: header.index(h) for h in wanted}


def _column(header: list[str], i: int) -> str:
    return header[i] if i < len(header) else f"#{i + 1}"


def _report_overlong(lines: _Lines, line: int, header: list[str], cap: int, trouble: _Trouble) -> None:
    text = lines.overlong or ""
    first = line - len(lines.record)
    for i, (offset, length, _state) in enumerate(_cells_of(text)):
        if length > cap:
            trouble.add(first + _line_breaks(text[:offset]), _column(header, i),
                        f"a cell longer than {cap} characters ({MAX_CELL_ENV} sets the limit); "
                        "reading stopped here")
            return
    trouble.add(line, None, f"a line longer than {lines.limit} characters; reading stopped here")


def _report_csv_error(e: csv.Error, lines: _Lines, start: int, header: list[str], cap: int,
                      trouble: _Trouble) -> None:
    text = "".join(lines.record)
    cells = _cells_of(text) if text else []
    said = str(e)
    if "field limit" in said:
        rule = f"a cell longer than {cap} characters ({MAX_CELL_ENV} sets the limit), or a quote never closed"
        hit = next((i for i, c in enumerate(cells) if c[1] > cap), len(cells) - 1 if cells else None)
    elif "end of data" in said:
        rule = "a quoted cell that is never closed"
        hit = next((i for i, c in enumerate(cells) if c[2] == "open"), None)
    elif "expected after" in said:
        rule = "text after the closing quote of a cell"
        hit = next((i for i, c in enumerate(cells) if c[2] == "junk"), None)
    else:
        rule, hit = "malformed CSV (csv.Error)", None
    if hit is None:
        trouble.add(start, None, rule)
    else:
        trouble.add(start + _line_breaks(text[:cells[hit][0]]), _column(header, hit), rule)


def _report_undecodable(row: list[str], start: int, header: list[str], trouble: _Trouble) -> None:
    for i, cell in enumerate(row):
        m = _UNDECODABLE.search(cell)
        if m:
            line = start + _line_breaks("".join(row[:i])) + _line_breaks(cell[:m.start()])
            trouble.add(line, _column(header, i), "bytes that are not UTF-8 text (UnicodeDecodeError)", fold=True)
            return
    trouble.add(start, None, "bytes that are not UTF-8 text (UnicodeDecodeError)", fold=True)


def _width_rule(row: list[str], header: list[str]) -> str:
    n, w = len(row), len(header)
    rule = f"{n} cells where the header has {w}"
    if n > w and not any(row[w:]):
        return rule + " (a trailing comma at the end of the line)"
    if n == w - 1 and header[-1] == "":
        return rule + " (the header ends with a comma)"
    return rule


def private_limit(n: object) -> int:
    """The most bytes a private file may hold: :data:`MAX_PRIVATE_BYTES`, or for a bundle of n
    records (manifest.json) :data:`PRIVATE_ROW_BYTES` a record when that is more (a registry of
    331 million records is a 9.8 GB CSV file). Devices, FIFOs and sockets are refused whatever
    the limit; a file is read as a stream."""
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        return max(MAX_PRIVATE_BYTES, n * PRIVATE_ROW_BYTES)
    return MAX_PRIVATE_BYTES


def load_private(path: Path, spec: dict, limit: int = MAX_PRIVATE_BYTES, atoms: bool = True) -> PrivateTable:
    """Parse, validate and apply the raw constraints; PrivateDataError on bad input. ``atoms``
    (default): the stored rows are rows of atoms (:class:`_Atoms`: what the raw constraints and
    every binning of the spec read of each value); ``atoms=False`` keeps each row's values."""
    path = Path(path)
    for part in private_parts(path):
        try:
            if part.stat().st_size > limit:
                raise PrivateDataError(f"{part}: larger than {limit} bytes")
        except OSError as e:
            raise PrivateDataError(f"{part}: cannot read ({e.strerror})") from None
    inputs = [c for c in (spec.get("input") or {}).get("columns", []) if isinstance(c, dict)]
    if not inputs:
        raise PrivateDataError("spec.json: spec.input.columns is missing")
    shared = [_text(t) for t in (spec.get("input") or {}).get("missing_values", []) or []]
    tokens = {c["name"]: set(shared) | {_text(t) for t in c.get("missing", []) or []} for c in inputs}
    names = [c["name"] for c in inputs]
    headers = {c["name"]: str(c.get("header", c["name"])) for c in inputs}
    kinds = {c["name"]: c.get("type") for c in inputs}
    cols, (months, years, days), rows, index = _read_parts(path, inputs, tokens, headers, kinds, limit,
                                                           _Atoms(spec, inputs, kinds) if atoms else None)
    values = {nm: np.asarray(cols[nm], dtype=np.float64) for nm in names}
    mon = {nm: np.asarray(v, dtype=np.float64) for nm, v in months.items()}
    yea = {nm: np.asarray(v, dtype=np.float64) for nm, v in years.items()}
    day = {nm: np.asarray(v, dtype=np.float64) for nm, v in days.items()}
    cats = {c["name"]: [_text(x) for x in c.get("categories", [])] for c in inputs}
    stored = len(values[names[0]])
    keep = ~_raw_constraint_drop(spec, values, kinds, cats, stored)      # per stored row
    left = [nm for nm in names if np.isnan(values[nm][keep]).any()]
    if left:
        raise PrivateDataError(f"{path}: missing values left after the raw constraints in {left}")
    kept = _kept_records(index, keep)
    return PrivateTable(values={k: v[keep] for k, v in values.items()},
                        months={k: v[keep] for k, v in mon.items()},
                        years={k: v[keep] for k, v in yea.items()},
                        days={k: v[keep] for k, v in day.items()},
                        kinds=kinds, n=int(kept.size), rows_read=rows,
                        index=kept)


_PART_SUFFIXES = (".csv.gz", ".parquet", ".csv")


#: Parts below this many bytes in all are read in this process whatever $DPBUNDLE_READ_WORKERS says.
PARALLEL_BYTES = 32 * 1024 * 1024


def _read_workers(parts: list[Path]) -> int:
    """Local processes reading the parts: ``$DPBUNDLE_READ_WORKERS`` (default 1: each holds a
    part's stored rows while it reads, so the peak memory grows with it), at most one per usable
    core and per part, 1 for parts below :data:`PARALLEL_BYTES` in all."""
    asked = os.environ.get("DPBUNDLE_READ_WORKERS", "")
    if not asked.isdigit() or int(asked) <= 1 or len(parts) < 2:
        return 1
    try:
        if sum(p.stat().st_size for p in parts) < PARALLEL_BYTES:
            return 1
    except OSError:
        return 1   # the reading names the part that cannot be read
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(int(asked), cores, len(parts)))


#: records remapped at a time by :func:`_kept_records` (bounds its temporaries)
KEEP_BLOCK = 1 << 24


def _kept_records(index: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Each plausible record's stored row, renumbered among the kept stored rows:
    ``(cumsum(keep) - 1)[index[keep[index]]]``, computed in blocks of :data:`KEEP_BLOCK` records
    into one int32 (or int64) array, so that only ``index``, the result and one block's
    temporaries are in memory (a registry of 331 million records)."""
    dtype = np.int32 if int(keep.sum()) < 2**31 else np.int64
    renumber = (np.cumsum(keep, dtype=np.int64) - 1).astype(dtype)
    starts = range(0, len(index), KEEP_BLOCK)
    out = np.empty(sum(int(keep[index[s:s + KEEP_BLOCK]].sum()) for s in starts), dtype=dtype)
    at = 0
    for s in starts:
        block = index[s:s + KEEP_BLOCK]
        block = renumber[block[keep[block]]]
        out[at:at + len(block)] = block
        at += len(block)
    return out


def private_parts(path: Path) -> list[Path]:
    """The files of the private data: the file itself, or a directory's ``*.csv``, ``*.csv.gz``
    and ``*.parquet`` files in name order (hidden ones skipped; two whose names differ only by
    that suffix, ``x.csv`` beside ``x.csv.gz`` or ``x.parquet``, refused), the registry's parts as
    the release reads them."""
    if not path.is_dir():
        return [path]
    parts = sorted((p for p in path.iterdir() if p.is_file() and not p.name.startswith(".")
                    and p.name.endswith(_PART_SUFFIXES)), key=lambda p: p.name)
    if not parts:
        raise PrivateDataError(f"{path}: a directory of registry parts with no *.csv, *.csv.gz or *.parquet file")
    stems: dict[str, str] = {}
    for p in parts:
        suffix = next(x for x in _PART_SUFFIXES if p.name.endswith(x))
        first = stems.setdefault(p.name[:-len(suffix)], p.name)
        if first != p.name:
            raise PrivateDataError(f"{path}: {first} and {p.name} are both parts")
    return parts


def _read_parts(path: Path, inputs: list[dict], tokens: dict, headers: dict,
                kinds: dict, limit: int = MAX_PRIVATE_BYTES,
                atoms: "_Atoms | None" = None) -> tuple[dict, tuple[dict, dict, dict], int, np.ndarray]:
    """:func:`_read_private` of every part, their stored rows and indices joined in order; the
    parts read by ``$DPBUNDLE_READ_WORKERS`` local processes when it is above 1 (as the release
    reads them: :func:`_read_workers`), the result the same."""
    parts = private_parts(path)
    workers = _read_workers(parts)
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            pieces = list(pool.map(_read_private, parts,
                                   *([x] * len(parts) for x in (inputs, tokens, headers, kinds, limit, atoms))))
    else:
        # each part with atoms of its own, as each process of the parallel reading has
        pieces = [_read_private(part, inputs, tokens, headers, kinds, limit, copy.deepcopy(atoms))
                  for part in parts]
    if len(pieces) == 1:
        return pieces[0]
    cols = {nm: [v for p in pieces for v in p[0][nm]] for nm in pieces[0][0]}
    dates = tuple({nm: [v for p in pieces for v in p[1][k][nm]] for nm in pieces[0][1][k]} for k in range(3))
    offsets = np.cumsum([0] + [len(next(iter(p[0].values()))) for p in pieces])
    dtype = np.int32 if int(offsets[-1]) < 2**31 else np.int64
    index = np.empty(sum(len(p[3]) for p in pieces), dtype=dtype)
    at = 0
    for p, off in zip(pieces, offsets):   # each part's stored rows shifted by the rows stored before it
        index[at:at + len(p[3])] = p[3]
        index[at:at + len(p[3])] += dtype(off)
        at += len(p[3])
    return cols, dates, sum(p[2] for p in pieces), index


#: Distinct rows remembered while reading the private file (then the memo starts again: a
#: registry of unique rows stores each once, one of repeated rows far fewer than its records).
MEMO_ROWS = 1 << 21


def _read_private(path: Path, inputs: list[dict], tokens: dict, headers: dict,
                  kinds: dict, limit: int = MAX_PRIVATE_BYTES,
                  atoms: "_Atoms | None" = None) -> tuple[dict, tuple[dict, dict, dict], int, np.ndarray]:
    """Every input column's parsed cells (and a date's month, year, day) of each stored row,
    the rows read and the stored row of each (see :class:`PrivateTable`); PrivateDataError
    naming where and which rule (never a cell) if a row is unusable (a row repeated within the
    memo is reported at its first line). With ``atoms``, a stored row is a row of atoms (each
    atom as its first value read: :class:`_Atoms`), so the stored rows are bounded by the spec."""
    names = [c["name"] for c in inputs]
    cols: dict[str, list] = {nm: [] for nm in names}
    months: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    years: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    days: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    rows = 0
    index = array("i")   # 4 bytes a record (331 million records: 1.3 GB); 8 past 2^31 - 1 stored rows
    memo: dict[tuple, int] = {}
    trouble = _Trouble()
    reader = _parquet_records if _is_parquet(path) else _records
    records = reader(path, [headers[nm] for nm in names], trouble, limit)
    pos_by_header = next(records, None)
    cells_of = [dict() for _ in inputs]      # per column: cell text -> (atom, parsed, error)
    by_atoms: dict[tuple, int] = {}          # atom row -> stored row (never cleared: bounded by the spec)
    if pos_by_header is not None:
        pos = {nm: pos_by_header[headers[nm]] for nm in names}
        wanted = [pos[c["name"]] for c in inputs]
        for line, row, spans in records:
            rows += 1
            key = tuple([row[p] for p in wanted])
            stored = memo.get(key)
            if stored is not None:
                index.append(stored)
                continue
            if len(memo) >= MEMO_ROWS:
                memo.clear()
            if index.typecode == "i" and len(cols[names[0]]) >= 2**31 - 1:
                index = array("q", index)
            if atoms is None:
                parsed = [_parse(cell, c, tokens[c["name"]]) for cell, c in zip(key, inputs)]
                stored = len(cols[names[0]])
            else:
                cells = []
                for j, (cell, c) in enumerate(zip(key, inputs)):
                    hit = cells_of[j].get(cell)
                    if hit is None:
                        if len(cells_of[j]) >= MEMO_ROWS:
                            cells_of[j].clear()
                        hit = cells_of[j][cell] = atoms.cell(c["name"], _parse(cell, c, tokens[c["name"]]))
                    cells.append(hit)
                parsed = [h[1] for h in cells]
                if any(p[4] for p in parsed):
                    stored = len(cols[names[0]])       # a bad row: reported below, stored as read
                else:
                    atom_row = tuple(h[0] for h in cells)
                    stored = by_atoms.get(atom_row)
                    if stored is not None:
                        memo[key] = stored
                        index.append(stored)
                        continue
                    stored = by_atoms[atom_row] = len(cols[names[0]])
            memo[key] = stored
            index.append(stored)
            for c, (v, mo, yr, dy, err) in zip(inputs, parsed):
                nm = c["name"]
                if err:   # where and which rule, never the cell
                    at = line + _line_breaks(",".join(row[:pos[nm]])) if spans else line
                    trouble.add(at, headers[nm], err)
                cols[nm].append(v)
                if nm in months:
                    months[nm].append(mo)
                    years[nm].append(yr)
                    days[nm].append(dy)
        records.close()
    if trouble.total:   # the number of bad rows is a count of the private data: not printed
        more = "; and more" if trouble.total > len(trouble.shown) else ""
        stopped = "; reading stopped there" if trouble.total >= MAX_PROBLEMS else ""
        raise PrivateDataError(f"{path}: unusable rows: " + "; ".join(trouble.shown) + more + stopped)
    return cols, (months, years, days), rows, (np.frombuffer(index, dtype=np.dtype(f"i{index.itemsize}"))
                                               if rows else np.zeros(0, np.int32))


class _Atoms:
    """The replay's own atoms of the input columns. The replay reads an input value only
    through the missing test, the raw constraints' conditions on its column and the bins of the
    released columns that read it (every alternative: derive, clip, edges); two values with the
    same results in all of these (the same *signature*) are interchangeable, so a stored row
    holds each value's atom, the first value read with its signature. Integer, float and date
    columns are read to atoms; booleans and categories keep each value (they have few)."""

    def __init__(self, spec: dict, inputs: list[dict], kinds: dict) -> None:
        self.kinds = kinds
        self.cats = {c["name"]: [_text(x) for x in c.get("categories", []) or []] for c in inputs}
        self.conditions: dict[str, list] = {c["name"]: [] for c in inputs}
        for i, con in enumerate(spec.get("raw_constraints", []) or []):
            for cond in (con.get("when", []) or []) if isinstance(con, dict) else []:
                if isinstance(cond, list) and cond and cond[0] in self.conditions:
                    self.conditions[cond[0]].append((i, cond))
        self.bins: dict[str, list] = {c["name"]: [] for c in inputs}
        for col in spec.get("columns", []) or []:
            source = col.get("source", {}) if isinstance(col, dict) else {}
            if source.get("column") in self.bins:
                self.bins[source["column"]].extend((source, alt) for alt in col.get("alternatives", [])
                                                   if isinstance(alt, dict) and "categories" not in alt)
        self.atoms: dict[str, dict] = {c["name"]: {} for c in inputs}
        self._grids: dict[int, np.ndarray] = {}
        self.limits = special_limits(spec)

    def _grid(self, alt: dict) -> np.ndarray:
        """A ``dp_edges`` alternative's candidates, listed once."""
        from .edges_check import grid_of

        if id(alt) not in self._grids:
            self._grids[id(alt)] = np.asarray(grid_of(alt), dtype=np.float64)
        return self._grids[id(alt)]

    def cell(self, name: str, parsed: tuple) -> tuple[int, tuple]:
        """(the atom of a parsed cell, the atom's first parsed cell); a bad cell is its own."""
        if parsed[4]:
            return -1, parsed
        table = self.atoms[name]
        sig = self.signature(name, parsed)
        hit = table.get(sig)
        if hit is None:
            hit = table[sig] = (len(table), parsed)
        return hit

    def signature(self, name: str, parsed: tuple) -> tuple:
        v, mo, yr, dy, _ = parsed
        if self.kinds[name] not in ("integer", "float", "date"):
            return ("value", v) if not math.isnan(v) else ("missing",)
        if math.isnan(v):
            return ("missing",)
        one = {name: np.array([v])}
        sig: list = [bool(_condition_hit(i, cond, one, self.kinds, self.cats, self.limits)[0])
                     for i, cond in self.conditions[name]]
        table = PrivateTable(values=one, months={name: np.array([mo])}, years={name: np.array([yr])},
                             days={name: np.array([dy])}, kinds=self.kinds, n=1, rows_read=1)
        if name in self.limits and v > self.limits[name]:     # a special value: its own atom
            return ("special", v)
        sig.extend(int(_bin_codes(alt, _derived(table, source))[0]) if "dp_edges" not in alt
                   else int(grid_codes(alt, _derived(table, source), self._grid(alt))[0])
                   for source, alt in self.bins[name])
        return tuple(sig)


def _raw_constraint_drop(spec: dict, values: dict, kinds: dict, cats: dict, rows: int) -> np.ndarray:
    """The rows the spec's raw constraints drop (any missing value, or every condition met)."""
    drop = np.zeros(rows, dtype=bool)
    for i, con in enumerate(spec.get("raw_constraints", []) or []):
        if not isinstance(con, dict):
            raise PrivateDataError(f"spec raw_constraints[{i}] is not an object")
        if con.get("any_missing"):
            for nm in values:
                drop |= np.isnan(values[nm])
            continue
        mask = np.ones(rows, dtype=bool)
        for cond in con.get("when", []) or []:
            mask &= _condition_hit(i, cond, values, kinds, cats, special_limits(spec))
        drop |= mask
    return drop


def _condition_hit(i: int, cond, values: dict, kinds: dict, cats: dict,
                   limits: dict | None = None) -> np.ndarray:
    """The rows that meet one condition of raw constraint i (a missing value never does, nor a
    special value of a number column: ``limits``, :func:`special_limits`)."""
    col, op, value = cond
    if col not in values or (op not in OPS and op not in SET_OPS):
        raise PrivateDataError(f"spec raw_constraints[{i}]: unusable condition {cond!r}")
    if (op in SET_OPS) != isinstance(value, list):
        raise PrivateDataError(f"spec raw_constraints[{i}]: {op!r} with {value!r}")
    items = value if op in SET_OPS else [value]
    operands = [_operand(i, kinds[col], cats[col], v) for v in items]
    x = values[col]
    with np.errstate(invalid="ignore"):
        if op == "in":
            hit = np.isin(x, operands)
        elif op == "not in":
            hit = ~np.isin(x, operands)
        else:
            hit = OPS[op](x, operands[0])
    if limits and col in limits:
        hit = hit & (x <= limits[col])
    return hit & ~np.isnan(x)


def _text(x) -> str:
    """A category / marker as the cell text it stands for (integers in decimal)."""
    return x if isinstance(x, str) else str(int(x)) if isinstance(x, int) and not isinstance(x, bool) else repr(x)


def _operand(i: int, kind: str, cats: list[str], value) -> float:
    """A raw-constraint value in the typed units of its column (PrivateDataError if unusable)."""
    if kind == "date":
        m = _DATE.match(str(value))
        if not m:
            raise PrivateDataError(f"spec raw_constraints[{i}]: {value!r} is not a date")
        return float(dt.date(int(m[1]), int(m[2]), int(m[3])).toordinal())
    if kind == "boolean":
        return 1.0 if value else 0.0
    if kind == "category":
        if isinstance(value, bool) or not isinstance(value, (str, int)) or _text(value) not in cats:
            raise PrivateDataError(f"spec raw_constraints[{i}]: {value!r} is not a declared category {cats}")
        return float(cats.index(_text(value)))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PrivateDataError(f"spec raw_constraints[{i}]: {value!r} is not a number")
    return float(value)


def _special_index(cell: str, meta: dict) -> int | None:
    """The index of the special value a number column's cell is (``special[].value``: its text,
    or for a Parquet number the same number), else None."""
    for i, sp in enumerate(meta.get("special") or []):
        text = _text(sp.get("value")) if isinstance(sp, dict) else None
        if text is None:
            continue
        if cell == text:
            return i
        try:
            x, y = float(cell), float(text)
        except ValueError:
            continue
        if math.isfinite(y) and x == y:      # the same number (a Parquet cell's text, "-4.0")
            return i
    return None


def special_limits(spec: dict) -> dict[str, float]:
    """input column -> its max, for every number column with special values (typed above it)."""
    return {c["name"]: float(c["max"]) for c in (spec.get("input") or {}).get("columns") or []
            if isinstance(c, dict) and c.get("special") and c.get("type") in ("integer", "float")
            and isinstance(c.get("max"), (int, float))}


def _parse(cell: str | None, meta: dict, tokens: set) -> tuple[float, float, float, float, str | None]:
    """(value, month, year, day, error) of one cell; NaN for missing."""
    v, mo, yr, err = _parse_present(cell, meta, tokens)
    dy = float(dt.date.fromordinal(int(v)).day) if meta.get("type") == "date" and not math.isnan(v) else math.nan
    return v, mo, yr, dy, err


def _parse_present(cell: str | None, meta: dict, tokens: set) -> tuple[float, float, float, str | None]:
    nan = math.nan
    if cell is None:     # a Parquet null: a missing value where the column declares a marker
        return nan, nan, nan, None if tokens else "null cell (the column declares no missing-value marker)"
    if cell in tokens:
        return nan, nan, nan, None
    if cell == "":
        return nan, nan, nan, "empty cell"
    kind = meta.get("type")
    if kind in ("integer", "float"):
        special = _special_index(cell, meta)
        if special is not None:     # a value of its own (not applicable, unknown): above max
            return float(meta["max"]) + 1.0 + special, nan, nan, None
        try:
            v = float(cell)
        except ValueError:
            return nan, nan, nan, f"not a number ({kind} expected)"
        if not math.isfinite(v):
            return nan, nan, nan, "not a finite number"
        if kind == "integer" and v != round(v):
            return nan, nan, nan, "not an integer"
        lo, hi = meta.get("min"), meta.get("max")
        if lo is not None and v < lo:
            return nan, nan, nan, f"below the allowed minimum {lo}"
        if hi is not None and v > hi:
            return nan, nan, nan, f"above the allowed maximum {hi}"
        return v, nan, nan, None
    if kind == "boolean":
        low = cell.lower()
        if low in TRUE_TOKENS:
            return 1.0, nan, nan, None
        if low in FALSE_TOKENS:
            return 0.0, nan, nan, None
        return nan, nan, nan, "not a boolean"
    if kind == "date":
        m = _DATE.match(cell)
        if not m:
            return nan, nan, nan, "not a YYYY-MM-DD date"
        try:
            d = dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return nan, nan, nan, "not a valid date"
        for key, op in (("min", operator.lt), ("max", operator.gt)):
            bound = meta.get(key)
            if bound is not None:
                bm = _DATE.match(str(bound))
                if bm and op(d, dt.date(int(bm[1]), int(bm[2]), int(bm[3]))):
                    return nan, nan, nan, f"outside the allowed {key} {bound}"
        return float(d.toordinal()), float(d.month), float(d.year), None
    if kind == "category":
        cats = [_text(x) for x in meta.get("categories", [])]
        if cell not in cats:
            return nan, nan, nan, f"not one of the declared categories {cats}"
        return float(cats.index(cell)), nan, nan, None
    return nan, nan, nan, f"unknown input type {kind!r}"


def grid_codes(alt: dict, x: np.ndarray, grid: np.ndarray | None = None) -> np.ndarray:
    """For a ``dp_edges`` alternative: ``2 L + E`` of each derived value (clipped), ``L`` the
    candidates below it and ``E`` 1 when it is one: values alike in it fall in the same bin for
    any drawn edges and count alike in every quantile score (the replay of the draws needs that)."""
    from .edges_check import grid_of

    grid = np.asarray(grid_of(alt), dtype=np.float64) if grid is None else grid
    x = np.clip(x, float(alt["clip"][0]), float(alt["clip"][1]))
    below = np.searchsorted(grid, x, side="left")
    hit = (below < grid.size) & (grid[np.minimum(below, max(grid.size - 1, 0))] == x) if grid.size else below < 0
    return 2 * below + hit


def derived_values(table: PrivateTable, source: dict) -> np.ndarray:
    """The values a released column's bins see, per stored row (public name of :func:`_derived`)."""
    return _derived(table, source)


def _bin_edges(alt: dict) -> list[float]:
    if "edges" in alt:
        return [float(x) for x in alt["edges"]]
    a, b = alt["unit_bins"]
    return [float(v) for v in range(int(a), int(b) + 2)]


def _bin_codes(alt: dict, x: np.ndarray) -> np.ndarray:
    """The bin of each derived value under a binned alternative (clipped first); -1 outside
    every bin."""
    if "clip" in alt:
        x = np.clip(x, float(alt["clip"][0]), float(alt["clip"][1]))
    e = np.asarray(_bin_edges(alt))
    c = np.searchsorted(e, x, side="right") - 1
    c[(c < 0) | (c >= len(e) - 1)] = -1
    return c


def _target(alt: dict, key: str, cats: list[str], removed: frozenset = frozenset()) -> int:
    """Released code of one input category text: map, else default, else the same text; -1 for
    a text the raw constraints always remove (see :func:`always_removed`) that maps nowhere."""
    mp = alt.get("map", {}) or {}
    name = mp[key] if key in mp else alt["default"] if alt.get("default") is not None else key
    if name not in cats:
        if key in removed:
            return -1
        raise PrivateDataError(f"input category {key!r} has no released category among {cats}")
    return cats.index(name)


def always_removed(spec: dict) -> dict[str, frozenset]:
    """Input column -> the category texts no plausible record can hold: those named by a raw
    constraint with one single condition ``[column, "==", v]`` or ``[column, "in", [v, ...]]`` on
    a category column (it drops every record holding v whatever its other cells). Such a text
    need not be mapped by any alternative. A condition joined with others, ``!=`` and ``not in``
    do not count."""
    inputs = {c.get("name"): c for c in (spec.get("input") or {}).get("columns", []) or []
              if isinstance(c, dict)}
    out: dict[str, set] = {}
    for con in spec.get("raw_constraints", []) or []:
        when = con.get("when") if isinstance(con, dict) else None
        if not isinstance(when, list) or len(when) != 1:
            continue
        cond = when[0]
        if not isinstance(cond, list) or len(cond) != 3:
            continue
        col, op, value = cond
        meta = inputs.get(col)
        if not isinstance(meta, dict) or meta.get("type") != "category":
            continue
        if op == "==" and not isinstance(value, list):
            items = [value]
        elif op == "in" and isinstance(value, list):
            items = value
        else:
            continue
        cats = {_text(x) for x in meta.get("categories", []) or []}
        texts = {_text(v) for v in items if isinstance(v, (str, int)) and not isinstance(v, bool)}
        out.setdefault(col, set()).update(texts & cats)
    return {k: frozenset(v) for k, v in out.items() if v}


def _derived(table: PrivateTable, source: dict) -> np.ndarray:
    """The values the bins see: a date part, an age, a linear recode, or the input value."""
    src, derive = source["column"], source.get("derive")
    if derive == "month":
        return table.months[src]
    if derive == "year":
        return table.years[src]
    if derive == "age":
        m = _DATE.match(str(source.get("reference")))
        if not m:
            raise PrivateDataError(f"age reference {source.get('reference')!r} is not a date")
        ry, rm, rd = int(m[1]), int(m[2]), int(m[3])
        y, mo, d = table.years[src], table.months[src], table.days[src]
        not_yet = (mo > rm) | ((mo == rm) & (d > rd))     # birthday still to come in the reference year
        return ry - y - not_yet.astype(np.float64)
    if derive == "linear":
        return float(source["scale"]) * table.values[src] + float(source.get("offset", 0))
    return table.values[src]


def bin_private(table: PrivateTable, view: SpecView) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """Codes (n, d) of the private table under the view's selected alternatives, and the
    (lower, upper) bin edges of each column (NaN for categories)."""
    codes, edges = bin_stored(table, view)
    return np.take(codes, table.record_rows(), axis=0), edges


def bin_stored(table: PrivateTable, view: SpecView) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """:func:`bin_private` of each stored row (the records' codes are these rows at
    ``table.record_rows()``)."""
    spec = view.spec
    cols = {c["name"]: c for c in spec["columns"]}
    inputs = {c["name"]: c for c in spec["input"]["columns"]}
    stored = len(next(iter(table.values.values()))) if table.values else table.n
    codes = np.empty((stored, len(view.columns)), dtype=np.int64)
    removed = always_removed(spec)
    edges_out = []
    for j, vc in enumerate(view.columns):
        col = cols[vc.name]
        alt = next(a for a in col["alternatives"] if str(a.get("id")) == vc.alternative)
        src = col["source"]["column"]
        x = _derived(table, col["source"])
        if "categories" in alt:
            cats = [str(c) for c in alt["categories"]]
            if table.kinds[src] == "boolean":
                t, f = _target(alt, "true", cats), _target(alt, "false", cats)
                codes[:, j] = np.where(x > 0.5, t, f)
            else:
                srccats = [_text(c) for c in inputs[src].get("categories", [])]
                gone = removed.get(src, frozenset())
                lookup = np.array([_target(alt, c, cats, gone) for c in srccats], dtype=np.int64)
                codes[:, j] = lookup[x.astype(np.int64)]
                if (codes[:, j] < 0).any():   # the raw constraints rule this out; no value named
                    raise PrivateDataError(f"column {vc.name!r}: a record holds an input category "
                                           f"that a raw constraint removes")
            nan = np.full(len(cats), np.nan)
            edges_out.append((nan, nan))
            continue
        c = _bin_codes(alt, x)
        limits = special_limits(spec)
        if src in limits:         # special values: the codes after the bins
            raw = table.values[src]
            special = raw > limits[src]
            c = np.where(special, len(_bin_edges(alt)) - 1 + np.round(raw - limits[src] - 1.0).astype(np.int64), c)
        if (c < 0).any():
            raise PrivateDataError(f"column {vc.name!r}: a value lies outside the bins of "
                                   f"alternative {vc.alternative!r}")
        codes[:, j] = c
        e = np.asarray(_bin_edges(alt))
        extra = np.full(len(getattr(vc, "special_codes", ())), np.nan)     # special values: no bounds
        edges_out.append((np.concatenate([e[:-1], extra]), np.concatenate([e[1:], extra])))
    return codes, edges_out
