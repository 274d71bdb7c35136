"""Streaming reader of the confidential CSV (plain or gzip) for :mod:`dpbundle.release.data.prepare`.

The file is read in chunks of rows with Python's C ``csv`` parser (RFC 4180: ``,`` separates
cells, ``"`` quotes them, ``""`` is a quote inside a quoted cell, a quoted cell may hold line
breaks). Only the columns the spec reads are kept, as object arrays of cell texts, so memory
grows with rows x (columns read) and not with rows x the longest cell; one physical line is read
at most ``(fields + 1) x (2 x cap + 3)`` characters at a time, so a hostile cell costs no more
than the limit.

Limits and checks (each problem names the file, the line, the column when there is one, and the
rule; problems found on many lines are reported once with the count of the other lines):

* a cell longer than :func:`max_cell_chars` characters (default 65,536; environment variable
  ``DPBUNDLE_MAX_CELL_CHARS``) is refused;
* bytes that are not UTF-8 (a UTF-8 byte-order mark is accepted); corrupt or truncated gzip data;
* a header naming a column twice; a header that is separated by ``;``, tab or ``|``; a row with
  another number of cells than the header (a trailing comma is named as such); a quote that is
  never closed or is followed by text; blank lines are skipped (like a spreadsheet would);
* reading stops after the chunk in which :data:`MAX_PROBLEMS` problems were found.

Line numbers are the file's own lines (a text editor's numbering): blank lines count, and a row
whose quoted cell holds line breaks spans several lines; a cell's problem names the line on which
that cell starts.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import os
import re
import zlib
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, islice, tee
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np

MAX_CELL_ENV = "DPBUNDLE_MAX_CELL_CHARS"
DEFAULT_MAX_CELL_CHARS = 65_536
MAX_REPORTED = 8           # problems shown in a message
MAX_PROBLEMS = 1_000       # reading stops after the chunk in which this many problems were found
BATCH_ROWS = 64            # rows per batch of the quick mode
FAST_PIECE_CHARS = 1 << 16  # the quick mode reads lines in pieces of at most this many characters
CHUNK_ROWS = 4_096         # rows per chunk ... (small chunks stay in the CPU caches: quicker)
CHUNK_CHARS = 1 << 22      # ... or characters per chunk, whichever comes first
HEADER_MAX_CHARS = 1 << 22  # the header line
ECHO_CHARS = 40            # an echoed cell value is cut after this many characters
MAX_GROUPS = 64            # distinct grouped rules kept (more are counted only)

_SURROGATE = re.compile("[\udc80-\udcff]")   # undecodable bytes under errors="surrogateescape"
_QUOTED = re.compile(r'"([^"]*(?:""[^"]*)*)("?)')
_PLAIN = re.compile(r'[^,\r\n]*')
_MAGIC = {**{b"BZh" + bytes([d]): "bzip2" for d in b"123456789"}, b"\xfd7zXZ": "xz", b"PK\x03\x04": "zip (or an Excel .xlsx workbook)",
          b"\x28\xb5\x2f\xfd": "zstd", b"\xd0\xcf\x11\xe0": "an Excel .xls workbook"}
_SEPARATORS = {";": "';' (semicolon)", "\t": "a tab", "|": "'|' (vertical bar)"}


def max_cell_chars() -> int:
    """The longest cell accepted, in characters: ``$DPBUNDLE_MAX_CELL_CHARS`` or 65,536."""
    text = os.environ.get(MAX_CELL_ENV, "").strip()
    if not text:
        return DEFAULT_MAX_CELL_CHARS
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"environment variable {MAX_CELL_ENV}={text!r}: not a positive whole number "
                         f"of characters (default {DEFAULT_MAX_CELL_CHARS})")
    return value


def echo(value: str) -> str:
    """A cell value for a message: quoted, control characters escaped, cut after ECHO_CHARS."""
    if len(value) <= ECHO_CHARS:
        return repr(value)
    return f"{value[:ECHO_CHARS]!r}... ({len(value):,} characters)"


class Problems:
    """Problems of one input file, in file order, bounded: the first MAX_REPORTED messages are
    kept; everything is counted. ``add`` takes a column's mask of bad cells (one message per bad
    cell); ``row`` groups one rule's occurrences on many lines into one message.
    ``show_values=False`` leaves the private cell values out of every message."""

    def __init__(self, show_values: bool = True, label: Callable[[int], str] | None = None) -> None:
        self.show_values = show_values
        # line -> where it is in a message ("line 19"; "row index 17" for an in-memory table)
        self.label: Callable[[int], str] = label if label is not None else (lambda line: f"line {line}")
        self.unit = "line" if label is None else "row"
        self.total = 0
        self.stopped_at: Optional[int] = None    # the last line read when reading stopped early
        self._cells: list[tuple[int, int, str]] = []               # (line, seq, message)
        self._groups: dict[tuple, list] = {}                        # key -> [line, seq, count, [lines], text]
        self._seq = 0

    # ------------------------------------------------------------------ adding
    def add(self, mask: np.ndarray, column: str, rule: str, cells: np.ndarray | None = None,
            where: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """One problem per True in ``mask``; ``where(rows)`` gives their lines (default: row + 2,
        a file without blank lines or line breaks in cells)."""
        rows = np.flatnonzero(mask)
        if not len(rows):
            return
        self.total += len(rows)
        shown = rows[:MAX_REPORTED]
        lines = where(shown) if where is not None else shown + 2
        for r, line in zip(shown, lines):
            # the steward's tool only (spec validate --data): a cell of the confidential file,
            # marked PRIVATE on its own line
            got = (f" (PRIVATE: {echo(str(cells[r]))})" if cells is not None and self.show_values
                   else "")
            self._seq += 1
            self._cells.append((int(line), self._seq, f"{self.label(int(line))}, column {column!r}: {rule}{got}"))
        if len(self._cells) > 4 * MAX_REPORTED:
            self._cells.sort()
            del self._cells[MAX_REPORTED:]

    def row(self, line: int, rule: str, column: str | None = None) -> None:
        """A rule broken on one line; the same (column, rule) on other lines joins its group."""
        self.total += 1
        key = (column, rule)
        group = self._groups.get(key)
        if group is not None:
            group[2] += 1
            if len(group[3]) < 3:
                group[3].append(line)
            return
        if len(self._groups) >= MAX_GROUPS:
            return   # counted in total, reported in "... and N more"
        where = self.label(line) + (f", column {echo(column)}" if column is not None else "")
        self._seq += 1
        self._groups[key] = [line, self._seq, 1, [], f"{where}: {rule}"]

    def fatal(self, line: int | None, rule: str, column: str | None = None) -> None:
        """A problem that ends the reading (it is the last one)."""
        if line is None:
            self.total += 1
            self._seq += 1
            self._cells.append((0, self._seq, rule))
        else:
            self.row(line, rule, column)

    # ------------------------------------------------------------------ reporting
    def _entries(self) -> list[tuple[int, int, str, int]]:
        out = [(line, seq, msg, 1) for line, seq, msg in self._cells]
        for line, seq, count, others, text in self._groups.values():
            if count > 1:
                listed = ", ".join(self.label(x) if self.unit == "row" else str(x) for x in others)
                rest = count - 1 - len(others)
                unit = self.unit
                more = (f" and {rest:,} more {unit}(s))" if self.show_values else f" and more {unit}s)")
                text = (f"{text} (the same on {listed}" if unit == "row" else
                        f"{text} (the same on line{'s' if count > 2 else ''} {listed}") + (more if rest else ")")
            out.append((line, seq, text, count))
        out.sort()
        return out[:MAX_REPORTED]

    def messages(self) -> list[str]:
        return [e[2] for e in self._entries()]

    def represented(self) -> int:
        """How many of ``total`` the messages account for."""
        return sum(e[3] for e in self._entries())


@dataclass
class Chunk:
    """Consecutive data rows: the line each starts on, the cell texts of the requested columns,
    and the rows whose problem was already reported (their cells are blank, not to be checked).
    ``nulls``: header -> the rows whose cell is null (a Parquet file's missing values; a CSV
    file has none), their text blank; a column without nulls has no entry. ``typed``: header ->
    the values of a Parquet column read without texts (none for CSV)."""

    lines: np.ndarray                      # int64
    cells: dict[str, np.ndarray]           # header -> object array of str
    broken: np.ndarray                     # bool
    fields: dict[str, int]                 # header -> field index
    spans: dict[int, list[int]] = field(default_factory=dict)   # row -> line offset of each field
    last_line: int = 0                     # the last line read
    nulls: dict[str, np.ndarray] = field(default_factory=dict)   # header -> bool, null cells
    # header -> the column's values read typed (a Parquet number, boolean or date column: float64
    # or datetime64[D], see release/data/parquet_read.py); its ``cells`` then give a row's text
    # on demand only (for the steward's messages)
    typed: dict[str, np.ndarray] = field(default_factory=dict)

    def where(self, header: str) -> Callable[[np.ndarray], np.ndarray]:
        """rows -> the line on which the ``header`` cell of each row starts."""
        j = self.fields[header]

        def lines(rows: np.ndarray) -> np.ndarray:
            out = self.lines[rows].copy()
            if self.spans:
                for k, r in enumerate(rows):
                    offsets = self.spans.get(int(r))
                    if offsets is not None:
                        out[k] += offsets[j]
            return out
        return lines


def _describe_compression_error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "the gzip data end too early (a truncated file)"
    if isinstance(exc, zlib.error):
        return "the gzip data are corrupt (decompression failed)"
    return f"the gzip data are corrupt ({type(exc).__name__})"


def _scan_fields(text: str) -> list[tuple[int, int, str | None]]:
    """(start offset, cell length, problem) of the cells of one record's text, as far as they go;
    problem: None, "unclosed" (a quote never closed) or "after quote" (text after a closing quote)."""
    out: list[tuple[int, int, str | None]] = []
    pos, n = 0, len(text)
    while True:
        if text.startswith('"', pos):
            m = _QUOTED.match(text, pos)
            content = m.group(1)
            length = len(content) - content.count('""')
            end = m.end()
            if not m.group(2):
                out.append((pos, length, "unclosed"))
                return out
            if end < n and text[end] not in ",\r\n":
                out.append((pos, length, "after quote"))
                return out
            out.append((pos, length, None))
        else:
            end = _PLAIN.match(text, pos).end()
            out.append((pos, end - pos, None))
        if end >= n or text[end] != ",":
            return out
        pos = end + 1


def _breaks(text: str) -> int:
    return text.count("\n") + text.count("\r") - text.count("\r\n")


class _Source:
    """Physical lines for ``csv.reader`` in the careful mode, from an iterator of line pieces
    (``readline(n)`` results): pieces cut without a line end are joined up to ``limit``
    characters, a longer line is reported (line, column) and skipped, undecodable bytes are
    flagged; ``record`` keeps the lines of the record being parsed (to locate a problem)."""

    def __init__(self, pieces, problems: Problems, cap: int, limit: int, piece: int,
                 header: list[str], base: int) -> None:
        self.it = iter(pieces)
        self.problems = problems
        self.cap = cap
        self.limit = limit              # the longest physical line
        self.piece = piece              # the longest piece
        self.header = header
        self.base = base                # lines before the first one of ``pieces``
        self.chars = 0
        self.record: list[str] = []
        self.tainted = False            # the current record holds a reported problem
        self.bad_bytes = False          # the current record holds undecodable bytes
        self.reader = None              # the csv.reader reading this source (for its line_num)

    def __iter__(self) -> Iterator[str]:
        record = self.record
        for line in self.it:
            if len(line) >= self.piece and line[-1] not in "\r\n":
                line = self._join(line)
            self.chars += len(line)
            if not line.isascii() and _SURROGATE.search(line):
                self.bad_bytes = self.tainted = True
            record.append(line)
            yield line

    def lines_read(self) -> int:
        return self.base + self.reader.line_num

    def column_name(self, index: int) -> str:
        if index < len(self.header):
            return self.header[index]
        return f"#{index + 1} (beyond the header's {len(self.header)} columns)" if self.header else f"#{index + 1}"

    def _join(self, first: str) -> str:
        """The rest of a physical line cut into pieces; past ``limit``: reported and skipped."""
        parts, total = [first], len(first)
        while total < self.limit:
            more = next(self.it, "")
            parts.append(more)
            total += len(more)
            if not more or more[-1] in "\r\n":
                return "".join(parts)
        line = "".join(parts)
        self._overlong(line[:self.limit])
        last = line
        while last and last[-1] not in "\r\n":      # skip the rest of the line
            last = next(self.it, "")
        self.tainted = True
        return "\n"   # the record ends here (or its quoted cell goes on)

    def _overlong(self, piece: str) -> None:
        lineno = self.lines_read() + 1
        text = "".join(self.record) + piece
        start = lineno - len(self.record)
        for i, (offset, length, _problem) in enumerate(_scan_fields(text)):
            if length > self.cap:
                self.problems.row(start + _breaks(text[:offset]), _long_cell_rule(self.cap), self.column_name(i))
                return
        self.problems.row(lineno, f"line longer than {self.limit:,} characters "
                                  f"(far more cells than the header's {len(self.header)})")


def _long_cell_rule(cap: int) -> str:
    return f"cell longer than the maximum of {cap:,} characters (set {MAX_CELL_ENV} to allow longer cells)"


def _open(path: Path, problems: Problems) -> tuple[Optional[io.TextIOBase], Optional[io.BufferedReader]]:
    """(the file as text, its byte stream): UTF-8 with undecodable bytes kept as surrogates,
    gunzipped when it is gzip data; (None, None), problem recorded, when it cannot be read."""
    import stat

    from dpbundle.release.common.safe_io import kind_of

    try:
        st = os.stat(path)
    except FileNotFoundError:
        problems.fatal(None, "file not found")
        return None, None
    except OSError as exc:
        problems.fatal(None, f"cannot be read ({exc.strerror or type(exc).__name__})")
        return None, None
    if stat.S_ISDIR(st.st_mode):
        problems.fatal(None, "is a directory, not a CSV file")
        return None, None
    if not stat.S_ISREG(st.st_mode):     # /dev/zero never ends; a FIFO blocks until a writer comes
        problems.fatal(None, f"is {kind_of(st.st_mode)}, not a regular file (devices, FIFOs and "
                             "sockets are refused: they may never end or block)")
        return None, None
    try:   # O_NONBLOCK: a FIFO swapped in after the check cannot hang the open
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
                     | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        problems.fatal(None, "file not found")
        return None, None
    except OSError as exc:
        problems.fatal(None, f"cannot be read ({exc.strerror or type(exc).__name__})")
        return None, None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        problems.fatal(None, "is not a regular file")
        return None, None
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    fh = os.fdopen(fd, "rb")
    try:
        magic = fh.read(4)
        fh.seek(0)
    except OSError as exc:
        fh.close()
        problems.fatal(None, f"cannot be read ({exc.strerror or type(exc).__name__})")
        return None, None
    if magic[:2] == b"\x1f\x8b":
        raw = gzip.GzipFile(fileobj=fh, mode="rb")
    else:
        kind = next((k for m, k in _MAGIC.items() if magic.startswith(m)), None)
        if kind is not None or path.name.endswith(".gz"):
            fh.close()
            what = f"{kind} data" if kind is not None else "named .gz but not gzip data"
            problems.fatal(None, f"not a CSV file: {what}; dpbundle reads a plain CSV file or a "
                                 "gzip-compressed one (.csv.gz)")
            return None, None
        raw = fh
    return io.TextIOWrapper(raw, encoding="utf-8-sig", errors="surrogateescape", newline=""), fh


class _Rows:
    """The rows of one chunk as they are read."""

    def __init__(self) -> None:
        self.recs: list[list[str]] = []
        self.starts: list[int] = []
        self.broken: list[int] = []
        self.spans: dict[int, list[int]] = {}
        self.chars = 0


class CsvReader:
    """``with CsvReader(path, problems) as r: if r.ok and r.check_columns(h): for chunk in r.chunks(h)``.
    Problems go to ``problems``; ``ok`` is False when the file or its header is unusable.

    Two modes read the same rows. The quick one hands csv.reader pieces of at most
    FAST_PIECE_CHARS characters and takes rows in batches of BATCH_ROWS, all in C; a batch is
    kept when every row is one line with the header's number of cells, no undecodable bytes and
    no overlong piece. Anything else (a blank line, a quoted line break, a problem) switches to
    the careful mode for the rest of the file, starting again at that batch's first line."""

    def __init__(self, path: Path | str, problems: Problems, cap: int | None = None,
                 content: bytes | None = None) -> None:
        self.path = Path(path)
        self.content = content   # the file's bytes, already in memory (``path`` then only names it)
        self.problems = problems
        self.cap = cap if cap is not None else max_cell_chars()
        self.header: list[str] = []
        self.header_line = 1
        self.ok = False
        self._text = None
        self._fh = None
        self._old_limit: Optional[int] = None
        self._header_text = ""

    def __enter__(self) -> "CsvReader":
        self._old_limit = csv.field_size_limit(self.cap)
        try:
            if self.content is not None:
                self._fh = io.BytesIO(self.content)
                self._text = io.TextIOWrapper(self._fh, encoding="utf-8-sig", errors="surrogateescape", newline="")
            else:
                self._text, self._fh = _open(self.path, self.problems)
            if self._text is not None:
                self.ok = self._read_header()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self._text is not None:
            try:
                self._text.close()
            except (OSError, EOFError, zlib.error):
                pass
            self._text = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        if self._old_limit is not None:
            csv.field_size_limit(self._old_limit)
            self._old_limit = None

    # ------------------------------------------------------------------ header
    def _careful(self, pieces, limit: int, piece: int, base: int) -> None:
        self._src = _Source(pieces, self.problems, self.cap, limit, piece, self.header, base)
        self._reader = csv.reader(self._src, strict=True)
        self._src.reader = self._reader

    def _read_header(self) -> bool:
        p = self.problems
        self._careful(iter(partial(self._text.readline, HEADER_MAX_CHARS), ""), HEADER_MAX_CHARS,
                      HEADER_MAX_CHARS, 0)
        src, reader = self._src, self._reader
        while True:
            start = reader.line_num + 1
            try:
                header = next(reader)
            except StopIteration:
                p.fatal(None, "empty file: no header line")
                return False
            except csv.Error as exc:
                self._csv_error(exc, start)
                return False
            except (OSError, EOFError, zlib.error) as exc:
                p.fatal(reader.line_num + 1, _describe_compression_error(exc))
                return False
            if src.tainted:
                self._tainted(header, start)
                return False
            if header:
                break
            src.record.clear()
        self._header_text = "".join(src.record)
        src.record.clear()
        self.header, self.header_line = header, start
        self._lines = reader.line_num
        seen: dict[str, int] = {}
        for i, name in enumerate(header):
            if name and name in seen:
                p.row(start, f"the header names this column twice (columns {seen[name] + 1} and {i + 1}); "
                             "rename or remove one", name)
            seen.setdefault(name, i)
        return p.total == 0

    def check_columns(self, wanted: list[str]) -> bool:
        """Every ``wanted`` header present (else one problem naming what is missing, or the
        separator the file seems to use)."""
        missing = [h for h in wanted if h not in self.header]
        if not missing:
            return True
        where = f"line {self.header_line} (header)"
        text = self._header_text.rstrip("\r\n")
        for sep, name in _SEPARATORS.items():
            if sep in text:
                parts = next(csv.reader([text], delimiter=sep))
                if sum(h in parts for h in wanted) > len(wanted) - len(missing):
                    self.problems.fatal(None, f"{where}: the columns are separated by {name}, not by "
                                              "commas: dpbundle reads comma-separated files (RFC 4180); "
                                              "export the file again with ',' as the separator")
                    return False
        loose = {h.strip().casefold(): h for h in self.header}
        notes = []
        for h in missing:
            near = loose.get(h.strip().casefold())
            notes.append(f"{h!r}" + (f" (the header has {echo(near)}: spaces or case differ)" if near is not None else ""))
        expected = ", ".join(repr(h) for h in wanted)
        label = "missing column" if len(missing) == 1 else "missing columns"
        self.problems.fatal(None, f"{where}: {label} {', '.join(notes)} (expected columns: {expected})")
        return False

    # ------------------------------------------------------------------ problems found by csv or the source
    def _csv_error(self, exc: csv.Error, start: int) -> None:
        src = self._src
        text = "".join(src.record)
        message = str(exc)
        fields = _scan_fields(text) if text else []
        line = start
        if "field limit" in message:
            rule = _long_cell_rule(self.cap)
            hit = next((i for i, f in enumerate(fields) if f[1] > self.cap), None)
            if hit is None and fields:
                hit = len(fields) - 1
                rule += "; or a quote '\"' that is never closed"
        elif "end of data" in message:
            rule = "a quoted cell starting here is never closed (a '\"' without its closing '\"')"
            hit = next((i for i, f in enumerate(fields) if f[2] == "unclosed"), None)
        elif "expected after" in message:
            rule = "text after the closing quote of a quoted cell (a '\"' inside a quoted cell must be doubled: \"\")"
            hit = next((i for i, f in enumerate(fields) if f[2] == "after quote"), None)
        else:
            rule, hit = f"malformed CSV ({message})", None
        column = None
        if hit is not None:
            column, line = src.column_name(hit), start + _breaks(text[:fields[hit][0]])
        self.problems.row(line, rule, column)
        src.record.clear()
        src.tainted = src.bad_bytes = False

    def _tainted(self, rec: list[str], start: int) -> None:
        """Report the undecodable bytes of ``rec`` (an overlong cell was reported already)."""
        src = self._src
        if src.bad_bytes:
            for i, cell in enumerate(rec):
                m = None if cell.isascii() else _SURROGATE.search(cell)
                if m is not None:
                    line = start + _breaks("".join(rec[:i])) + _breaks(cell[:m.start()])
                    self.problems.row(line, "bytes that are not UTF-8 text (save or export the file "
                                            "as UTF-8)", src.column_name(i))
        src.tainted = src.bad_bytes = False

    def _count_rule(self, rec: list[str], nf: int) -> str:
        n = len(rec)
        base = f"{n} cell{'s' if n != 1 else ''} where the header has {nf}"
        extra = n - nf
        if extra > 0 and not any(rec[nf:]):
            commas = "a comma" if extra == 1 else f"{extra} commas"
            return (f"{base}: the line ends with {commas} too many (a trailing comma); remove the "
                    "trailing commas, or name the extra column in the header")
        if extra < 0 and self.header and self.header[-1] == "" and n == nf - 1:
            return f"{base}: the header ends with a comma (an empty last column name); remove it"
        if n == 1:
            for sep, name in _SEPARATORS.items():
                if rec[0].count(sep) == nf - 1:
                    return f"{base}: the cells seem separated by {name}, not by commas"
        return base

    # ------------------------------------------------------------------ data rows
    def chunks(self, wanted: list[str]) -> Iterator[Chunk]:
        """The data rows in chunks; only the ``wanted`` columns' cells are kept."""
        if not self.ok:
            return
        nf = len(self.header)
        self._nf = nf
        self._blank = [""] * nf
        self._limit = (nf + 1) * (2 * self.cap + 3) + 2
        self._piece = min(self._limit, FAST_PIECE_CHARS)
        pieces = iter(partial(self._text.readline, self._piece), "")
        fast_lines, self._kept = tee(pieces)
        self._fast = csv.reader(fast_lines, strict=True)
        del fast_lines   # only the reader may hold it: once it is dropped, tee keeps nothing for it
        self._mode = "fast"
        self._stream_error: Optional[BaseException] = None
        fields = {h: self.header.index(h) for h in wanted}
        positions = [fields[h] for h in wanted]
        done = False
        while not done:
            rows = _Rows()
            while not done and len(rows.recs) < CHUNK_ROWS and rows.chars < CHUNK_CHARS:
                done = self._fast_batch(rows) if self._mode == "fast" else self._careful_rows(rows)
            recs = rows.recs
            if not recs:
                return
            n = len(recs)
            cells = {}
            if nf <= 2 * len(wanted) + 2:   # one 2-D array is quicker than column by column
                table = np.empty((n, nf), dtype=object)
                table[:] = recs
                for h, j in zip(wanted, positions):
                    cells[h] = table[:, j]
            else:
                for h, j in zip(wanted, positions):
                    column = np.empty(n, dtype=object)
                    column[:] = [r[j] for r in recs]
                    cells[h] = column
            broken = np.zeros(n, dtype=bool)
            broken[rows.broken] = True
            yield Chunk(np.asarray(rows.starts, dtype=np.int64), cells, broken, fields, rows.spans, self._lines)

    def _fast_batch(self, rows: _Rows) -> bool:
        """One batch in the quick mode; True at the end of the file."""
        reader = self._fast
        before = reader.line_num
        batch, error = None, None
        try:
            batch = list(islice(reader, min(BATCH_ROWS, CHUNK_ROWS - len(rows.recs))))
        except csv.Error:
            error = "csv"
        except (OSError, EOFError, zlib.error) as exc:
            error = exc
        consumed = reader.line_num - before
        lines = list(islice(self._kept, consumed))
        if error is None and not batch:
            return True
        text = "".join(lines)
        if (error is None and consumed == len(batch) and len(set(map(len, batch))) == 1 and len(batch[0]) == self._nf
                and (len(text) < self._piece or max(map(len, lines)) < self._piece)
                and (text.isascii() or not _SURROGATE.search(text))):
            start = self._lines + 1
            rows.recs.extend(batch)
            rows.starts.extend(range(start, start + consumed))
            rows.chars += len(text)
            self._lines += consumed
            return False
        # This batch's lines again, carefully; then quickly again, unless the last line goes on
        # in the file (an overlong line: carefully to the end).
        self._segment = True
        if error is not None and error != "csv":
            self._stream_error = error   # reported after the lines read before it
            pieces = iter(lines)
        elif lines and lines[-1][-1] not in "\r\n" and len(lines[-1]) >= self._piece:
            pieces, self._segment = chain(lines, self._kept), False
            self._fast = None
        else:
            pieces = iter(lines)
        self._careful(pieces, self._limit, self._piece, self._lines)
        self._mode = "careful"
        return False

    def _careful_rows(self, rows: _Rows) -> bool:
        """Rows in the careful mode until the chunk is full; True at the end of the file."""
        src, reader, p = self._src, self._reader, self.problems
        nf, blank, record = self._nf, self._blank, src.record
        recs, starts = rows.recs, rows.starts
        budget = src.chars + CHUNK_CHARS - rows.chars
        prev = src.lines_read()
        base = src.base
        try:
            while len(recs) < CHUNK_ROWS and src.chars < budget:
                try:
                    rec = next(reader)
                except StopIteration:
                    if self._stream_error is not None:
                        p.fatal(prev + 1, _describe_compression_error(self._stream_error) +
                                "; the lines before it were read, nothing after it")
                        return True
                    if self._segment:     # the batch is done: on quickly
                        self._mode = "fast"
                        return False
                    return True
                except csv.Error as exc:
                    self._csv_error(exc, prev + 1)
                    prev = base + reader.line_num
                    continue
                except (OSError, EOFError, zlib.error) as exc:
                    p.fatal(base + reader.line_num + 1, _describe_compression_error(exc) +
                            "; the lines before it were read, nothing after it")
                    return True
                end = base + reader.line_num
                start = prev + 1
                prev = end
                record.clear()
                if src.tainted or len(rec) != nf or end != start:
                    broken = False
                    if src.tainted:
                        self._tainted(rec, start)
                        broken = True
                    if not rec:
                        continue   # a blank line
                    if not broken and len(rec) != nf:
                        broken = True
                        p.row(start, self._count_rule(rec, nf))
                    if end > start:   # a quoted cell holds line breaks: the line of each cell
                        span, acc = [], 0
                        for cell in rec[:nf]:
                            span.append(acc)
                            acc += _breaks(cell)
                        rows.spans[len(recs)] = span + [acc] * (nf - len(span))
                    if broken:
                        rows.broken.append(len(recs))
                        rec = blank
                recs.append(rec)
                starts.append(start)
            return False
        finally:
            self._lines = src.lines_read()


def file_sha256(path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
