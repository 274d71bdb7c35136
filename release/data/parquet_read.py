"""Streaming reader of the confidential data as a Parquet file, for
:mod:`dpbundle.release.data.prepare` (a path ending in ``.parquet``; everything else is CSV).

It has the interface of :class:`~dpbundle.release.data.csv_read.CsvReader` (``ok``,
``check_columns``, ``chunks`` yielding :class:`~dpbundle.release.data.csv_read.Chunk`), so that
every value goes through the same checks and typing as the same table written as CSV. The file
is read in record batches of at most :data:`BATCH_ROWS` rows (``ParquetFile.iter_batches``), only
the columns the spec reads, pages streamed: memory is bounded by a batch and the page being
decoded, never by the file or its row groups. A batch holds fewer rows where the footer says the
columns read hold more than :data:`BATCH_BYTES` bytes per :data:`BATCH_ROWS` rows (long texts),
as the CSV reader's chunks end after so many characters; and a page is never decompressed whose
header declares more bytes than its values could hold were each within the cell cap (see
:func:`page_limit`): a cell longer than the cap is refused from the page headers, before it is
decompressed (a few kilobytes of zstd can declare a gigabyte-long cell).

Cells: each value of a column read becomes the text a CSV cell would hold, and that text is
checked and typed as the CSV reader's cells are:

* integers (signed or unsigned) in decimal (``23``), decimals as written (``12.50``);
* floating-point numbers as their shortest decimal (``3705.0`` is ``3705``, ``0.1`` is ``0.1``); a
  NaN or an infinity is a value, not a missing one: ``nan`` / ``inf`` are refused as not a number;
* booleans ``true`` / ``false``; dates (Parquet DATE, Arrow ``date32``) ``YYYY-MM-DD``;
* strings as they are (dictionary-encoded columns are decoded first);
* a null is a missing value, as a cell holding one of the column's declared missing-value
  markers is (``read_distinct`` refuses a null in a column that declares none, as it refuses an
  empty CSV cell); a column of Arrow type ``null`` is all nulls.

Any other type (timestamps, times, durations, ``date64``, binary, lists, structs, maps...) is
refused before a row is read, naming the column and its type: a timestamp is not silently cut to
its date, bytes are not guessed to be text.

Limits and checks (each problem names the file, the row and its row group, the column when there
is one, and the rule; never a value when ``show_values`` is False):

* a cell longer than :func:`~dpbundle.release.data.csv_read.max_cell_chars` characters (a string,
  or the text of any other value) is refused, as in a CSV file; a page (or a dictionary page)
  larger than its values could be within that cap is refused from its header, naming its first
  row (a dictionary page: the row group's first row);
* a string that is not valid UTF-8 (Parquet writers do not all check it);
* a column whose pages hold another number of rows than the footer says their row group has
  (pyarrow trusts the footer: rows beyond its count would be dropped silently);
* a file that is not Parquet (it must begin and end with the magic bytes ``PAR1``), an encrypted
  one, or one whose footer or data pyarrow cannot decode: the exception's type is named, never
  its text (which may quote the data);
* a column the spec reads that the file lacks or names twice (a column's type is named in at most
  :data:`TYPE_CHARS` characters: a struct's type lists all its fields);
* reading stops after the batch in which ``MAX_PROBLEMS`` problems were found.

Rows are numbered from 1 in the file (all row groups together); row groups from 0, as pyarrow
(``ParquetFile.read_row_group``) numbers them: "row 5001 (row group 1)".

pyarrow is an optional dependency (``pip install 'dpbundle[parquet]'``); without it a Parquet
file is refused with that advice before anything is read.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator, Optional

import numpy as np

from dpbundle.release.data.csv_read import CHUNK_ROWS, Chunk, Problems, _long_cell_rule, echo, max_cell_chars

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "INSTALL_HINT", "ParquetReader", "is_parquet", "cell_texts", "page_headers",
           "page_limit", "type_text", "unsupported_type"]

#: rows per record batch read (the CSV reader's chunk size)
BATCH_ROWS = CHUNK_ROWS
#: bytes read from the file at a time while decoding a column chunk (pages streamed, not loaded whole)
STREAM_BYTES = 1 << 20
#: decoded bytes of the columns read in one batch, at most (as the footer counts them): a row group
#: of long texts is read in batches of fewer rows than BATCH_ROWS (never fewer than MIN_BATCH_ROWS)
BATCH_BYTES = 1 << 23
MIN_BATCH_ROWS = 16
#: a page may declare this many bytes beyond what its values hold at most (levels, headers, slack)
PAGE_SLACK = 1 << 20
#: a page header longer than this is not read (pyarrow's own limit: it refuses such a file)
MAX_PAGE_HEADER = 16 << 20
#: a column type is named in messages in at most this many characters
TYPE_CHARS = 120
MAGIC = b"PAR1"
ENCRYPTED_MAGIC = b"PARE"
INSTALL_HINT = "pip install 'dpbundle[parquet]'"
SUFFIX = ".parquet"


def is_parquet(path: Path | str) -> bool:
    """A path the Parquet reader reads: its name ends in ``.parquet``."""
    return Path(path).name.endswith(SUFFIX)


def _pyarrow():
    """(pyarrow, pyarrow.parquet, pyarrow.compute), or ImportError."""
    import pyarrow
    import pyarrow.compute
    import pyarrow.parquet

    return pyarrow, pyarrow.parquet, pyarrow.compute


def unsupported_type(pa, dtype) -> Optional[str]:
    """None when a column of Arrow type ``dtype`` is read; else why not (the rule's text)."""
    t = pa.types
    if t.is_dictionary(dtype):
        return unsupported_type(pa, dtype.value_type)
    if (t.is_integer(dtype) or t.is_floating(dtype) or t.is_boolean(dtype) or t.is_decimal(dtype)
            or t.is_date32(dtype) or t.is_null(dtype) or _is_text(pa, dtype)):
        return None
    if t.is_timestamp(dtype) or t.is_date64(dtype):
        return (f"a {type_text(dtype)} column: dpbundle reads dates as Parquet DATE (Arrow date32) or as "
                "YYYY-MM-DD text, and does not cut a time of day away; write the column as a date "
                "(pandas: .dt.date) or as text")
    if t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_fixed_size_binary(dtype) or \
            str(dtype) == "binary_view":
        return f"a {type_text(dtype)} column (bytes): write text as a Parquet string (UTF-8) column"
    return (f"a {type_text(dtype)} column: dpbundle reads integers, floating-point numbers, decimals, booleans, "
            "dates (date32) and strings")


def type_text(dtype) -> str:
    """A column type for a message, cut after :data:`TYPE_CHARS` characters."""
    text = str(dtype)
    return text if len(text) <= TYPE_CHARS else text[:TYPE_CHARS - 3] + "..."


def page_limit(values: int, cap: int) -> int:
    """The most bytes a page of ``values`` values can decompress to when each value's text is
    within ``cap`` characters: 4 bytes of UTF-8 a character (a fixed-width value: at most 64
    bytes) and 8 bytes of length and levels a value, plus :data:`PAGE_SLACK`."""
    return max(values, 0) * (4 * max(cap, 16) + 8) + PAGE_SLACK


class _Thrift:
    """A reader of Thrift's compact protocol (a Parquet page header) over ``data``: IndexError
    when the bytes end before the structure, ValueError when they are not Thrift. Binary fields
    (statistics: values of the column) are skipped, never kept."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _byte(self) -> int:
        b = self.data[self.pos]
        self.pos += 1
        return b

    def _skip(self, n: int) -> None:
        if n < 0:
            raise ValueError("negative length")
        self.pos += n
        if self.pos > len(self.data):
            raise IndexError("past the end")

    def varint(self) -> int:
        out = shift = 0
        while True:
            b = self._byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def struct(self, depth: int = 0) -> dict:
        """{field id: value} (an int, a bool, a nested dict; None for what is skipped)."""
        if depth > 32:
            raise ValueError("nested too deep")
        fields, last = {}, 0
        while True:
            b = self._byte()
            if b == 0:
                return fields
            delta, kind = b >> 4, b & 0x0F
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind, depth)

    def value(self, kind: int, depth: int, in_list: bool = False):
        if kind in (1, 2):
            if in_list:               # a list's booleans are a byte each
                return self._byte() == 1
            return kind == 1
        if kind == 3:
            return self._byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            return self._skip(8)
        if kind == 8:
            return self._skip(self.varint())
        if kind in (9, 10):
            head = self._byte()
            size, elem = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                self.value(elem, depth + 1, in_list=True)
            return None
        if kind == 11:
            size = self.varint()
            if size:
                types = self._byte()
                for _ in range(size):
                    self.value(types >> 4, depth + 1, in_list=True)
                    self.value(types & 0x0F, depth + 1, in_list=True)
            return None
        if kind == 12:
            return self.struct(depth + 1)
        raise ValueError(f"unknown Thrift type {kind}")


#: Parquet page types (parquet.thrift PageType) and the header field holding each one's counts
_DATA, _DICTIONARY, _DATA_V2 = 0, 2, 3
_COUNTS = {_DATA: 5, _DICTIONARY: 7, _DATA_V2: 8}


def page_headers(read, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(page type, declared decompressed size, rows or values, where the next page begins) of
    each page of the column chunk in bytes [start, end) of the file (``read(offset, n)`` reads its
    bytes); stops quietly where a header cannot be read (pyarrow then refuses the page itself)."""
    pos = start
    while pos < end:
        size = 512              # a header without long statistics is a few dozen bytes
        while True:
            data = read(pos, min(size, end - pos))
            r = _Thrift(data)
            try:
                header = r.struct()
                break
            except IndexError:
                if len(data) < size or size >= MAX_PAGE_HEADER:
                    return
                size *= 4
            except (ValueError, RecursionError):
                return
        kind, full, packed = header.get(1), header.get(2), header.get(3)
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (kind, full, packed)) or packed < 0:
            return
        counts = header.get(_COUNTS.get(kind, -1))
        count = None
        if isinstance(counts, dict):
            count = counts.get(3) if kind == _DATA_V2 and isinstance(counts.get(3), int) else counts.get(1)
        pos += r.pos + packed
        if not isinstance(count, int) or isinstance(count, bool):
            return
        yield kind, full, count, pos


def _leaves(pa, dtype) -> int:
    """The Parquet leaf columns of an Arrow type."""
    t = pa.types
    if isinstance(dtype, pa.ExtensionType):
        return _leaves(pa, dtype.storage_type)
    if t.is_struct(dtype):
        return sum(_leaves(pa, dtype.field(i).type) for i in range(dtype.num_fields))
    if t.is_map(dtype):
        return _leaves(pa, dtype.key_type) + _leaves(pa, dtype.item_type)
    if t.is_list(dtype) or t.is_large_list(dtype) or t.is_fixed_size_list(dtype) or \
            getattr(t, "is_list_view", lambda _: False)(dtype) or getattr(t, "is_large_list_view", lambda _: False)(dtype):
        return _leaves(pa, dtype.value_type)
    return 1


def _is_text(pa, dtype) -> bool:
    t = pa.types
    return t.is_string(dtype) or t.is_large_string(dtype) or str(dtype) == "string_view"


def cell_texts(pa, pc, array):
    """The column's values as an Arrow string array of the texts a CSV cell would hold (nulls
    stay null; see the module docstring); the type must be one :func:`unsupported_type` accepts."""
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_null(array.type):
        return pa.nulls(len(array), pa.string())
    if _is_text(pa, array.type):
        return array if pa.types.is_string(array.type) else array.cast(pa.string())
    return pc.cast(array, pa.string())


#: Dates read typed only between these years: within pandas' range, whose parsing of the text
#: path refuses dates outside about 1677-2262 (a chunk with a date outside is read as text).
TYPED_DATE_YEARS = (1700, 2200)


def typed_values(pa, pc, array, kind: str | None):
    """The column's values as the text path would type them, without texts, or None (then it is
    read as text): integers and float64 (not float16/32, whose texts are their shortest decimals)
    as float64 for a number column; booleans as 0/1 for a boolean column; DATE (date32) as
    datetime64[D] for a date column, when every date lies within :data:`TYPED_DATE_YEARS`. Nulls
    become 0 / NaT here (the caller marks them missing). The text of an integer parses to the
    correctly rounded float64 of the integer, which numpy's conversion is; a float64's shortest
    decimal parses back to itself; "true"/"false" to 1/0; a date's YYYY-MM-DD to itself."""
    t = array.type
    if kind is None or pa.types.is_dictionary(t):
        return None
    if kind in ("integer", "float") and (pa.types.is_integer(t) or pa.types.is_float64(t)):
        filled = pc.fill_null(array, 0) if array.null_count else array
        return filled.to_numpy(zero_copy_only=False).astype(np.float64)
    if kind == "boolean" and pa.types.is_boolean(t):
        filled = pc.fill_null(array, False) if array.null_count else array
        return filled.to_numpy(zero_copy_only=False).astype(np.float64)
    if kind == "date" and pa.types.is_date32(t):
        days = (pc.fill_null(array, 0) if array.null_count else array).cast(pa.int32())
        days = days.to_numpy(zero_copy_only=False).astype(np.int64)
        lo, hi = (np.datetime64(f"{y}-01-01", "D").astype(np.int64) for y in TYPED_DATE_YEARS)
        if len(days) and (days.min() < lo or days.max() >= hi):
            return None
        return days.astype("datetime64[D]")
    return None


class _TextsOnDemand:
    """A typed column's cell texts, made one at a time when a message shows one (``cells[r]``)."""

    def __init__(self, pa, pc, array) -> None:
        self._pa, self._pc, self._array = pa, pc, array

    def __getitem__(self, r) -> str:
        one = cell_texts(self._pa, self._pc, self._array.slice(int(r), 1))[0].as_py()
        return "" if one is None else one

    def __len__(self) -> int:
        return len(self._array)


def _bad_utf8(pa, texts) -> np.ndarray:
    """Rows of a string array whose bytes are not UTF-8 (checked one by one: a rare case)."""
    raw = texts.cast(pa.binary())
    bad = np.zeros(len(raw), dtype=bool)
    for i, value in enumerate(raw):
        data = value.as_py()
        if data is not None:
            try:
                data.decode("utf-8")
            except UnicodeDecodeError:
                bad[i] = True
    return bad


class ParquetReader:
    """``with ParquetReader(path, problems) as r: if r.ok and r.check_columns(h): for chunk in
    r.chunks(h)``, as :class:`~dpbundle.release.data.csv_read.CsvReader`. Problems go to
    ``problems`` (whose ``label`` becomes "row R (row group G)"); ``ok`` is False when the file is
    unusable."""

    def __init__(self, path: Path | str, problems: Problems, cap: int | None = None) -> None:
        self.path = Path(path)
        self.problems = problems
        self.cap = cap if cap is not None else max_cell_chars()
        self.ok = False
        self.header: list[str] = []
        self._fh = None
        self._file = None
        self._group_ends = np.zeros(0, dtype=np.int64)
        self._types: dict = {}
        # header -> spec type of the columns that may be read typed (set by the caller:
        # release/data/prepare.py ``_typed_columns``); empty: every column as text
        self.typed_columns: dict[str, str] = {}

    # ------------------------------------------------------------------ opening
    def __enter__(self) -> "ParquetReader":
        try:
            self.ok = self._open()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except Exception:  # noqa: BLE001 - closing: nothing more to do
                pass
            self._file = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def label(self, row: int) -> str:
        """Where data row ``row`` (from 1) is: 'row R (row group G)'."""
        group = int(np.searchsorted(self._group_ends, row - 1, side="right"))
        return f"row {row} (row group {group})"

    def _open(self) -> bool:
        p = self.problems
        try:
            self._pa, self._pq, self._pc = _pyarrow()
        except ImportError:
            p.fatal(None, f"reading a Parquet file needs pyarrow, which is not installed: {INSTALL_HINT} "
                          "(or give the data as CSV)")
            return False
        self._fh = self._open_file()
        if self._fh is None:
            return False
        problem = self._magic_problem()
        if problem:
            p.fatal(None, problem)
            return False
        try:
            self._file = self._pq.ParquetFile(self._fh, buffer_size=STREAM_BYTES, pre_buffer=False,
                                                page_checksum_verification=True)
            meta = self._file.metadata
            sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
            schema = self._file.schema_arrow
        except (self._pa.ArrowException, OSError, ValueError, EOFError) as exc:
            p.fatal(None, f"not a readable Parquet file: its footer (schema and row groups) cannot "
                          f"be decoded ({type(exc).__name__}); a corrupt or truncated file?")
            return False
        self._group_ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
        self.header = list(schema.names)
        self._types = {f.name: f.type for f in schema}
        p.label, p.unit = self.label, "row"
        return True

    def _open_file(self):
        """The file opened for binary reading (a regular file), or None (problem recorded)."""
        from dpbundle.release.common.safe_io import kind_of

        p = self.problems
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            p.fatal(None, "file not found")
            return None
        except OSError as exc:
            p.fatal(None, f"cannot be read ({exc.strerror or type(exc).__name__})")
            return None
        if not stat.S_ISREG(st.st_mode):
            p.fatal(None, f"is {kind_of(st.st_mode)}, not a regular file (a Parquet file is read "
                          "from a regular file)")
            return None
        try:   # O_NONBLOCK: a FIFO swapped in after the check cannot hang the open
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                         | getattr(os, "O_BINARY", 0))
        except OSError as exc:
            p.fatal(None, f"cannot be read ({exc.strerror or type(exc).__name__})")
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            p.fatal(None, "is not a regular file")
            return None
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")

    def _magic_problem(self) -> Optional[str]:
        """Why the file is not a plain Parquet file (None when it looks like one)."""
        fh = self._fh
        try:
            head = fh.read(4)
            size = fh.seek(0, os.SEEK_END)
            tail = b""
            if size >= 8:
                fh.seek(size - 4)
                tail = fh.read(4)
            fh.seek(0)
        except OSError as exc:
            return f"cannot be read ({exc.strerror or type(exc).__name__})"
        if head == ENCRYPTED_MAGIC or tail == ENCRYPTED_MAGIC:
            return "an encrypted Parquet file: dpbundle reads unencrypted Parquet files only"
        if head != MAGIC or tail != MAGIC:
            what = "it is empty" if size == 0 else "it does not begin and end with the Parquet magic bytes PAR1"
            return (f"not a Parquet file ({what}); a file named .parquet is read as Parquet, any "
                    "other as CSV")
        return None

    # ------------------------------------------------------------------ columns
    def check_columns(self, wanted: list[str]) -> bool:
        """Every ``wanted`` column present once, of a type that is read (else fatal problems)."""
        p = self.problems
        where = "the file's columns (Parquet schema)"
        missing = [h for h in wanted if h not in self.header]
        if missing:
            loose = {h.strip().casefold(): h for h in self.header}
            notes = []
            for h in missing:
                near = loose.get(h.strip().casefold())
                notes.append(f"{h!r}" + (f" (the file has {echo(near)}: spaces or case differ)" if near is not None else ""))
            label = "missing column" if len(missing) == 1 else "missing columns"
            p.fatal(None, f"{where}: {label} {', '.join(notes)} (expected columns: "
                          f"{', '.join(repr(h) for h in wanted)})")
            return False
        ok = True
        for h in wanted:
            if self.header.count(h) > 1:
                p.fatal(None, f"{where}: the file names column {h!r} {self.header.count(h)} times; rename or remove one")
                ok = False
                continue
            problem = unsupported_type(self._pa, self._types[h])
            if problem:
                p.fatal(None, f"{where}: column {h!r} is {problem}")
                ok = False
        return ok and self._check_pages(wanted)

    # ------------------------------------------------------------------ pages
    def _leaf(self, name: str) -> Optional[int]:
        """The Parquet leaf column of top-level column ``name`` (a column of a type that is read),
        or None when the Parquet schema does not say so plainly."""
        i = 0
        for f in self._file.schema_arrow:
            if f.name == name:
                break
            i += _leaves(self._pa, f.type)
        meta = self._file.metadata
        if i >= meta.num_columns:
            return None
        column = meta.schema.column(i)
        return i if column.name == name and column.max_repetition_level == 0 else None

    def _read_at(self, offset: int, n: int) -> bytes:
        fd = self._fh.fileno()
        if hasattr(os, "pread"):
            return os.pread(fd, n, offset)
        here = self._fh.tell()       # pragma: no cover - no pread (Windows)
        try:
            self._fh.seek(offset)
            return self._fh.read(n)
        finally:
            self._fh.seek(here)

    def _check_pages(self, wanted: list[str]) -> bool:
        """No page of a column read declares more decompressed bytes than its values can hold
        within the cell cap (:func:`page_limit`): such a page holds a longer cell (or lies), and
        is refused from its header, before pyarrow decompresses it (fatal problems)."""
        meta, starts, ok = self._file.metadata, np.concatenate([[0], self._group_ends]), True
        for h in wanted:
            leaf = self._leaf(h)
            if leaf is None:
                continue
            for g in range(meta.num_row_groups):
                rows = int(self._group_ends[g] - starts[g])
                try:
                    chunk = meta.row_group(g).column(leaf)
                    start, end = self._chunk_span(chunk)
                    problem = self._page_problem(start, end, rows)
                except (self._pa.ArrowException, OSError, ValueError):
                    problem = None        # pyarrow refuses what it cannot read, while reading
                if problem is not None:
                    at, rule = problem
                    self.problems.fatal(int(starts[g]) + at + 1, rule, h)
                    ok = False
                    break
        return ok

    @staticmethod
    def _chunk_span(chunk) -> tuple[int, int]:
        """Bytes [start, end) of a column chunk in the file (its dictionary page first, if any)."""
        start = chunk.data_page_offset
        dictionary = chunk.dictionary_page_offset if chunk.has_dictionary_page else None
        if dictionary is not None and 0 < dictionary < start:
            start = dictionary
        return start, start + chunk.total_compressed_size

    def _page_problem(self, start: int, end: int, rows: int) -> Optional[tuple[int, str]]:
        """(a row of the row group, counted from 0; the rule) of the first page of a column chunk
        larger than its values can be, or of a chunk whose data pages hold another number of rows
        than the footer says the row group has (pyarrow would trust the footer: rows dropped, or
        row groups misnumbered); None when there is none."""
        seen, reached = 0, start
        for kind, size, count, reached in page_headers(self._read_at, start, end):
            values = min(count, rows)
            if kind in (_DATA, _DATA_V2, _DICTIONARY) and size > page_limit(values, self.cap):
                if kind == _DICTIONARY:
                    return 0, _long_cell_rule(self.cap) + (
                        " (in the column's dictionary for this row group: its page declares more bytes "
                        "than its values can hold within that maximum)")
                return min(seen, max(rows - 1, 0)), _long_cell_rule(self.cap) + (
                    " (in the page from this row on: its header declares more bytes than its values can "
                    "hold within that maximum)")
            if kind in (_DATA, _DATA_V2):
                seen += max(count, 0)
        if reached == end and seen != rows:
            return 0, ("the column's pages in this row group hold another number of rows than the "
                       "file's footer says the row group has: a corrupt file")
        return None

    # ------------------------------------------------------------------ rows
    def chunks(self, wanted: list[str]) -> Iterator[Chunk]:
        """The rows in record batches of about BATCH_ROWS rows; only the ``wanted`` columns."""
        if not self.ok:
            return
        fields = {h: i for i, h in enumerate(wanted)}
        batches = self._batches(wanted)
        done = 0
        while True:
            try:
                batch = next(batches, None)
            except (self._pa.ArrowException, OSError, ValueError, EOFError) as exc:
                self.problems.fatal(done + 1, f"the Parquet data cannot be read from here on "
                                              f"({type(exc).__name__}: a corrupt or truncated file?); "
                                              "the rows before it were read, nothing after it")
                return
            if batch is None:
                return
            n = batch.num_rows
            if n == 0:
                continue
            lines = np.arange(done + 1, done + 1 + n, dtype=np.int64)
            done += n
            yield self._chunk(batch, wanted, fields, lines)

    def batch_rows(self, wanted: list[str]) -> list[int]:
        """Each row group's rows a batch: :data:`BATCH_ROWS`, fewer where the footer counts more
        than :data:`BATCH_BYTES` decoded bytes of the columns read in so many rows (long texts),
        at least :data:`MIN_BATCH_ROWS`."""
        meta = self._file.metadata
        leaves = [i for i in map(self._leaf, wanted) if i is not None]
        out = []
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            nbytes = sum(max(group.column(i).total_uncompressed_size, 0) for i in leaves)
            rows = BATCH_ROWS if nbytes <= 0 else BATCH_BYTES * max(group.num_rows, 1) // nbytes
            out.append(int(min(max(rows, MIN_BATCH_ROWS), BATCH_ROWS)))
        return out

    def _batches(self, wanted: list[str]):
        """The record batches of the ``wanted`` columns, row group after row group (consecutive
        row groups of the same batch size read by one ``iter_batches``)."""
        try:
            sizes = self.batch_rows(wanted)
        except (self._pa.ArrowException, OSError, ValueError):
            sizes = []
        if not sizes or len(set(sizes)) == 1:
            yield from self._file.iter_batches(batch_size=sizes[0] if sizes else BATCH_ROWS, columns=wanted,
                                               use_threads=False)
            return
        g = 0
        while g < len(sizes):
            run = g
            while run < len(sizes) and sizes[run] == sizes[g]:
                run += 1
            yield from self._file.iter_batches(batch_size=sizes[g], row_groups=list(range(g, run)),
                                               columns=wanted, use_threads=False)
            g = run

    def _chunk(self, batch, wanted: list[str], fields: dict[str, int], lines: np.ndarray) -> Chunk:
        """One batch as a Chunk: the cells' texts, the nulls, the rows with an unusable cell."""
        pa, pc = self._pa, self._pc
        n = batch.num_rows
        broken = np.zeros(n, dtype=bool)
        texts, nulls, typed, lazy = {}, {}, {}, {}
        where = lambda rows: lines[rows]   # noqa: E731
        for h in wanted:
            raw = batch.column(batch.schema.get_field_index(h))
            values = typed_values(pa, pc, raw, self.typed_columns.get(h))
            if values is not None:
                typed[h] = values
                lazy[h] = _TextsOnDemand(pa, pc, raw)
                if raw.null_count:
                    nulls[h] = raw.is_null().to_numpy(zero_copy_only=False)
                continue
            column = cell_texts(pa, pc, raw)
            try:
                column.validate(full=True)
            except pa.ArrowInvalid:        # its text may quote the bytes: not used
                bad = _bad_utf8(pa, column)
                self.problems.add(bad, h, "bytes that are not UTF-8 text (a Parquet string must be UTF-8)",
                                  where=where)
                broken |= bad
                column = pc.if_else(pa.array(bad), pa.scalar(None, pa.string()), column)
            if column.null_count:
                nulls[h] = column.is_null().to_numpy(zero_copy_only=False)
            lengths = pc.utf8_length(column).to_numpy(zero_copy_only=False)   # NaN for a null
            long = np.nan_to_num(lengths.astype(np.float64, copy=False)) > self.cap
            if long.any():
                self.problems.add(long & ~broken, h, _long_cell_rule(self.cap), where=where)
                broken |= long
            texts[h] = column
        cells = dict(lazy)
        for h, column in texts.items():
            if broken.any():
                column = pc.if_else(pa.array(broken), pa.scalar("", pa.string()), column)
            cells[h] = pc.fill_null(column, "").to_numpy(zero_copy_only=False).astype(object, copy=False)
        return Chunk(lines, cells, broken, fields, last_line=int(lines[-1]) if n else 0, nulls=nulls,
                     typed=typed)
