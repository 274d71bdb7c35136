"""Data preparation: load a CSV (or .csv.gz) into typed columns, validate it against the spec's
input columns, and drop the rows that fail the raw-data constraints. The remaining row count n is
public (it is released as the number of records).

Typed representation (one numpy array per input column, rows in file order):
integer/float/boolean -> float64 (NaN = missing; booleans 0/1), date -> datetime64[D] (NaT =
missing), category -> int64 index into the declared categories (-1 = missing; a cell matches a
category by its text, so integer-coded categories ``[1, 2]`` match the cells ``1`` and ``2``).
Each input column is read from the CSV column whose header is its ``header`` (default: its
``name``); a cell is missing when it is one of ``input.missing_values`` or of the column's own
``missing`` markers.

A release reads the table to the spec's *atoms* (:func:`read_atoms`,
:mod:`dpbundle.release.data.atoms`): each value as the smallest value the spec cannot tell apart
from it (no raw-constraint condition and no alternative's code differs), so that the distinct
rows are bounded by the spec, not by the number of records; every binning and constraint gives
what it gives on the records, and the ledger fingerprint is computed from the records themselves
while reading (:mod:`dpbundle.release.data.record_keys`). ``prepare(..., atoms=False)`` keeps the
records' own values (the self-test, which builds neighbours from them).

Bad input raises :class:`InputError` naming the file, line, column and rule (first few problems
plus a count). Nothing is written anywhere. The file is read in chunks by
:mod:`dpbundle.release.data.csv_read` (cell length limit, encoding, gzip, header and row structure,
line numbers as a text editor counts them; reading stops after MAX_PROBLEMS problems), or, for a
name ending in ``.parquet``, in record batches by :mod:`dpbundle.release.data.parquet_read` (its
values as the texts a CSV cell would hold, checked and typed alike; a null is a missing value;
"row R (row group G)" in messages).
"""
from __future__ import annotations

import gc
import hashlib
import re
import functools
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import numpy as np
import pandas as pd

from dpbundle.release.data.constraints import constraint_mask, is_missing  # noqa: F401  (is_missing: also from here)
from dpbundle.release.data.distinct import DistinctAccumulator, distinct_rows, index_counts, kept_index
from dpbundle.release.data.csv_read import MAX_PROBLEMS, MAX_REPORTED, CsvReader, Problems, file_sha256, max_cell_chars
from dpbundle.release.spec.model import Spec
from dpbundle.release.spec.typed import InputColumn

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.records import ResizePlan
    from dpbundle.release.data.record_keys import RecordKeys

TRUE_TOKENS = {"true", "1", "t", "yes"}
FALSE_TOKENS = {"false", "0", "f", "no"}


class InputError(ValueError):
    """Unusable input data: ``problems`` are 'line L, column C: what is wrong' strings."""

    def __init__(self, source: str, problems: list[str], total: int | None = None, *,
                 represented: int | None = None, stopped_at: int | None = None,
                 show_counts: bool = True, stopped_where: str | None = None):
        self.source = source
        self.problems = problems
        self.total = total if total is not None else len(problems)
        self.stopped_at = stopped_at
        shown = problems[:MAX_REPORTED]
        rest = self.total - (represented if represented is not None else len(shown))
        text = "\n".join(f"  {p}" for p in shown)
        # counts of bad rows come from the private data: `release` (show_counts False) omits them
        n_rest = f"{rest:,} " if show_counts else ""
        if stopped_at is not None:
            more = (f"\n  ... {f'and {n_rest}more problem(s); ' if rest > 0 else ''}reading stopped at "
                    f"{stopped_where or f'line {stopped_at}'} after "
                    f"{f'{self.total:,}' if show_counts else 'too many'} problems: "
                    f"the rest of the {'file' if stopped_where is None else 'table'} was not checked")
            count = f"{self.total:,} or more problems" if show_counts else "many problems"
        else:
            more = f"\n  ... and {n_rest}more problem(s)" if rest > 0 else ""
            count = f"{self.total:,} problem(s)" if show_counts else "problems"
        hint = ("\n  (line numbers are the file's own lines, as a text editor counts them)"
                if any(p.startswith("line ") for p in problems) else
                "\n  (rows are counted from 1 in the file, row groups from 0 as pyarrow numbers them)"
                if any(p.startswith("row ") and "(row group " in p for p in problems) else "")
        super().__init__(f"{source}: unusable input data ({count}):\n{text}{more}{hint}")

    def __reduce__(self):
        """Pickled with its message (it crosses a process or a Dask cluster whole)."""
        return (_input_error_of, (self.source, self.problems, self.total, self.stopped_at, str(self)))

    @classmethod
    def from_problems(cls, source: str, problems: "_Problems") -> "InputError":
        stopped_where = None
        if problems.stopped_at is not None and problems.unit != "line":
            stopped_where = problems.label(problems.stopped_at)
        return cls(source, problems.messages(), problems.total, represented=problems.represented(),
                   stopped_at=problems.stopped_at, show_counts=problems.show_values, stopped_where=stopped_where)


def _input_error_of(source: str, problems: list[str], total: int, stopped_at: int | None,
                    message: str) -> InputError:
    err = InputError.__new__(InputError)
    ValueError.__init__(err, message)
    err.source, err.problems, err.total, err.stopped_at = source, problems, total, stopped_at
    return err


class Prepared:
    """The private input after validation and raw constraints, held as its distinct rows
    (``distinct``: one array per input column) and the index of each plausible record's distinct
    row in file order (``index``, 4 bytes a record): ``table`` (the rows themselves) is
    ``{k: v[index]}``, built only when asked for. Only ``n`` is public: the count of plausible
    records under the ``declared_public`` policy; under ``dp_count`` it is the DP count m once
    :func:`dpbundle.release.scheme.records.release_records` attached ``resize`` (the table then
    keeps its ``resize.n_in`` plausible rows, and :func:`transform` resizes).

    ``Prepared(source, table, n, rows_read, ...)`` takes the rows (reduced to distinct rows
    here); with ``index=`` given, ``table`` is already the distinct rows."""

    def __init__(self, source: str, table: dict[str, np.ndarray], n: int, rows_read: int,
                 dropped_by: list[tuple[str, int]] | None = None, dropped_total: int = 0,
                 sha256: str = "", resize: Optional["ResizePlan"] = None, *,
                 index: np.ndarray | None = None, counts: np.ndarray | None = None) -> None:
        if index is None:
            table, index = distinct_rows(table)
        self.source, self.distinct, self.index = source, table, index
        # the ledger fingerprint, computed while reading when ``distinct`` holds atoms, not the
        # records (read_atoms, set by the reading); None: ``distinct`` holds the records' values
        self.fingerprint: str | None = None
        self.n, self.rows_read = n, rows_read
        self.dropped_by = list(dropped_by or [])   # rows matching each raw constraint (private)
        self.dropped_total, self.sha256, self.resize = dropped_total, sha256, resize
        size = len(next(iter(table.values()))) if table else 0
        # records per distinct row (``counts``: given by a caller that has them)
        self.counts = index_counts(self.index, size) if counts is None else counts

    @property
    def rows(self) -> int:
        """Rows of ``table`` (the plausible records; private under ``dp_count``)."""
        return self.resize.n_in if self.resize is not None else self.n

    @functools.cached_property
    def table(self) -> dict[str, np.ndarray]:
        """The plausible records' typed columns in file order (n cells a column: for small
        tables, tests and the selftest; the release works on ``distinct`` and ``index``)."""
        return {k: v[self.index] for k, v in self.distinct.items()}

    def replaced(self, **changes) -> "Prepared":
        """A copy with some attributes changed (``n``, ``resize``, ...); the tables are shared."""
        out = Prepared.__new__(Prepared)
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k != "table"})
        out.__dict__.update(changes)
        return out

    def subset(self, index: np.ndarray) -> "Prepared":
        """The same prepared data restricted to (or resampled at) ``index`` (used by benchmarks and tests)."""
        if self.resize is not None:
            raise ValueError("subset() of a resized table: subset before the records policy")
        out = Prepared(self.source, self.distinct, int(len(index)), int(len(index)), [], 0, self.sha256,
                       index=self.index[np.asarray(index)])
        out.atomized = self.atomized     # other records: no fingerprint, and none from atoms
        return out

    @property
    def atomized(self) -> bool:
        """Whether ``distinct`` holds the records' atoms rather than their values (read by
        :func:`read_atoms`): the ledger fingerprint then comes only from the reading."""
        return self.__dict__.get("_atomized", self.fingerprint is not None)

    @atomized.setter
    def atomized(self, value: bool) -> None:
        self.__dict__["_atomized"] = bool(value)


def _line(rows: np.ndarray) -> np.ndarray:
    """File line numbers of 0-based data rows of a file without blank lines or line breaks in
    cells (line 1 is the header); :class:`Chunk.where` gives the true lines."""
    return rows + 2


# Collects 'line L, column C: rule (got V)' problems, bounded; ``show_values=False`` leaves out V
# (the private cell value) for messages that may leave the steward's own terminal.
_Problems = Problems

_BOOLEANS = {**{t: 1.0 for t in TRUE_TOKENS}, **{t: 0.0 for t in FALSE_TOKENS}}
_BOOLEANS_CASED = {v: x for t, x in _BOOLEANS.items() for v in (t, t.upper(), t.capitalize())}


def _numbers(cells: np.ndarray) -> np.ndarray:
    """float64 of number texts, NaN where a cell is not a number (pandas' ``to_numeric`` rules).
    Quick path: Python's float() gives the same values on ASCII texts without '_' (it also
    accepts '1_000' and non-ASCII digits, which to_numeric refuses)."""
    values = None
    joined = "".join(cells)
    if joined.isascii() and "_" not in joined:
        try:
            values = cells.astype(np.float64)
        except (ValueError, TypeError):
            values = None
    if values is None:
        values = pd.to_numeric(pd.Series(cells, dtype=object), errors="coerce").to_numpy(dtype=np.float64, copy=True)
    values += 0.0   # -0 -> 0 (one canonical zero)
    return values


def _is_marker(cells: np.ndarray, tokens) -> np.ndarray:
    """Cells equal to one of the missing-value markers."""
    if len(tokens) <= 4:
        out = np.zeros(len(cells), dtype=bool)
        for t in tokens:
            out |= cells == t
        return out
    return pd.Series(cells, dtype=object).isin(list(tokens)).to_numpy()


def _parse_column(name: str, meta: InputColumn, cells: np.ndarray, missing: np.ndarray, problems: _Problems,
                  where=None) -> np.ndarray:
    """Typed values of one column's cells (an object array of str); ``where(rows)``: their lines."""
    kind = meta.type
    empty = (cells == "") & ~missing
    problems.add(empty, name, "empty cell (declare a missing-value marker in input.missing_values or the column's missing if this is intended)",
                 where=where)
    present = ~missing & ~empty
    if kind in ("integer", "float"):
        special = _special_index(meta, cells)
        values = _checked_numbers(name, meta, _numbers(cells), present & (special < 0), problems, cells, where)
        return _with_specials(meta, values, special)
    if kind == "boolean":
        values = np.fromiter(map(_BOOLEANS_CASED.get, cells, repeat(np.nan)), dtype=np.float64, count=len(cells))
        for r in np.flatnonzero(present & np.isnan(values)):   # other spellings: tRUE, yES
            values[r] = _BOOLEANS.get(str(cells[r]).lower(), np.nan)
        problems.add(present & np.isnan(values), name, "not a boolean (True/False expected)", cells, where)
        values[~present] = np.nan
        return values
    if kind == "date":
        series = pd.Series(cells, dtype=object)
        parsed = pd.to_datetime(series, format="%Y-%m-%d", errors="coerce").to_numpy(dtype="datetime64[D]", copy=True)
        # exactly YYYY-MM-DD, year 1 or later: pandas also takes "2020-1-5" and year 0, which the
        # audit's own reader (and the codebook's YYYY-MM-DD) refuse
        parsed[(series.str.len().to_numpy() != 10) | (parsed < np.datetime64("0001-01-01"))] = np.datetime64("NaT")
        return _checked_dates(name, meta, parsed, present, problems, cells, where)
    # category
    cats = list(meta.category_texts)
    lookup = {c: i for i, c in enumerate(cats)}
    idx = np.fromiter((lookup.get(c, -2) for c in cells), dtype=np.int64, count=len(cells))
    problems.add(present & (idx == -2), name, f"not one of the declared categories {cats}", cells, where)
    idx[~present | (idx == -2)] = -1
    return idx


def _special_index(meta: InputColumn, cells: np.ndarray) -> np.ndarray:
    """Per cell, the index of the special value it is (``input.columns[].special``: its text, or
    for a value that reads as a number the same number, as a Parquet cell is matched), else -1."""
    out = np.full(len(cells), -1, dtype=np.int64)
    numbers = None
    for i, sp in enumerate(meta.specials):
        out[np.asarray(cells == sp.text, dtype=bool)] = i
        x = _special_number(sp.text)
        if x is not None:
            numbers = _numbers(np.asarray(cells, dtype=object).copy()) if numbers is None else numbers
            out[numbers == x] = i
    return out


def _special_number(text: str) -> float | None:
    """The number a special value's text reads as (None: it reads as none)."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if np.isfinite(x) else None


def _with_specials(meta: InputColumn, values: np.ndarray, special: np.ndarray) -> np.ndarray:
    """``values`` with each special cell set to its typed value, max + 1 + i (not missing)."""
    hit = special >= 0
    if hit.any():
        values[hit] = float(meta.max) + 1.0 + special[hit]
    return values


def _checked_numbers(name: str, meta: InputColumn, values: np.ndarray, present: np.ndarray,
                     problems: _Problems, cells, where) -> np.ndarray:
    """A number column's rules on its float64 ``values`` (NaN where not a number): finite, an
    integer for ``integer``, within min and max; NaN where missing or bad. ``cells[r]``: the
    text of row r, shown only to the steward (``spec validate --data``)."""
    kind = meta.type
    bad = present & ~np.isfinite(values)
    problems.add(bad, name, f"not a number ({kind} expected)", cells, where)
    if kind == "integer":
        frac = present & np.isfinite(values) & (values != np.round(values))
        problems.add(frac, name, "not an integer", cells, where)
    values[~present | bad] = np.nan
    lo, hi = meta.min, meta.max
    ok = present & ~bad
    if lo is not None:
        problems.add(ok & (values < lo), name, f"below the allowed minimum {lo}", cells, where)
    if hi is not None:
        problems.add(ok & (values > hi), name, f"above the allowed maximum {hi}", cells, where)
    return values


def _checked_dates(name: str, meta: InputColumn, parsed: np.ndarray, present: np.ndarray,
                   problems: _Problems, cells, where) -> np.ndarray:
    """A date column's rules on its datetime64[D] values (NaT where not a valid date): valid,
    within min and max; NaT where missing or bad."""
    bad = present & np.isnat(parsed)
    problems.add(bad, name, "not a valid date (YYYY-MM-DD expected; impossible dates such as 2019-02-30 are rejected)", cells, where)
    parsed[~present | bad] = np.datetime64("NaT")
    ok = present & ~bad
    if meta.min is not None:
        problems.add(ok & (parsed < np.datetime64(str(meta.min))), name, f"before the allowed minimum {meta.min}", cells, where)
    if meta.max is not None:
        problems.add(ok & (parsed > np.datetime64(str(meta.max))), name, f"after the allowed maximum {meta.max}", cells, where)
    return parsed


def _parse_typed(name: str, meta: InputColumn, values: np.ndarray, missing: np.ndarray, problems: _Problems,
                 cells, where=None) -> np.ndarray:
    """:func:`_parse_column` of a column read typed from Parquet (``values``: float64 numbers or
    booleans 0/1, or datetime64[D] dates; ``release/data/parquet_read.py`` hands over only values
    whose CSV text would parse to exactly these, and no missing-value marker can be such a text):
    the same rules, the same typed result, without a text per cell."""
    present = ~missing
    if meta.type in ("integer", "float"):
        values = np.array(values, dtype=np.float64)
        values += 0.0   # -0 -> 0 (one canonical zero), as _numbers
        special = np.full(len(values), -1, dtype=np.int64)
        for i, sp in enumerate(meta.specials):      # a number in Parquet: a special value equal to it
            x = _special_number(sp.text)
            if x is not None:
                special[present & (values == x)] = i
        values = _checked_numbers(name, meta, values, present & (special < 0), problems, cells, where)
        return _with_specials(meta, values, special)
    if meta.type == "boolean":
        values = np.array(values, dtype=np.float64)
        values[~present] = np.nan
        return values
    return _checked_dates(name, meta, np.array(values, dtype="datetime64[D]"), present, problems, cells, where)


def column_header(meta: InputColumn) -> str:
    """The CSV header text of an input column (its ``header``, default its ``name``)."""
    return meta.csv_header


def read_typed(path: Path, spec: Spec, show_values: bool = True, *, content: bytes | None = None,
               label: Callable[[int], str] | None = None) -> tuple[dict[str, np.ndarray], int]:
    """Read and validate the input file; return the typed columns (before raw constraints) and the
    row count (all rows in memory: see :func:`read_distinct` for the compact form)."""
    distinct, index, rows = read_distinct(path, spec, show_values, content=content, label=label)
    return {k: v[index] for k, v in distinct.items()}, rows


def read_distinct(path: Path, spec: Spec, show_values: bool = True, *, content: bytes | None = None,
                  label: Callable[[int], str] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Read and validate the input file in chunks, each reduced to its distinct typed rows as
    it arrives; return (the distinct rows before raw constraints, each row's index into them in
    file order, the row count). ``show_values=False``: error messages name line, column and
    rule but not the value. ``content``: the file's bytes, already in memory (``path`` then only
    names the source); ``label(line)``: where a line is, in messages (default "line L")."""
    acc = DistinctAccumulator()
    rows = _read(path, spec, show_values, content, label, acc)
    distinct, index = acc.finish({name: _concat(meta.type, []) for name, meta in spec.model.input.by_name.items()})
    return distinct, index, rows


def read_atoms(path: Path, spec: Spec, show_values: bool = True, *, content: bytes | None = None,
               label: Callable[[int], str] | None = None) -> tuple[dict[str, np.ndarray], np.ndarray, int, "RecordKeys"]:
    """:func:`read_distinct` to the spec's atoms (:mod:`dpbundle.release.data.atoms`): the
    distinct rows are those of the records' atoms (each atom as one of its values), and the
    fourth result keeps the records the raw constraints do not drop, as packed value ids (the
    ledger fingerprint's material, :mod:`dpbundle.release.data.record_keys`). Every binning and
    raw constraint of the spec gives on these rows what it gives on the records."""
    from dpbundle.release.data.atoms import AtomReader
    from dpbundle.release.data.record_keys import RecordKeys
    from dpbundle.release.data.system_memory import large_arrays_mapped

    large_arrays_mapped()

    inputs = spec.model.input.by_name
    keys = RecordKeys(list(inputs), {n: m.type for n, m in inputs.items()},
                      {n: list(m.category_texts) for n, m in inputs.items() if m.type == "category"})
    sink = AtomReader(spec, keys)
    rows = _read(path, spec, show_values, content, label, sink)
    distinct, index = sink.finish()
    return distinct, index, rows, keys


def _read(path: Path, spec: Spec, show_values: bool, content: bytes | None,
          label: Callable[[int], str] | None, acc) -> int:
    """Read and validate the input file in chunks, each chunk's typed columns handed to
    ``acc.add`` (nothing is added once a problem is found); the row count. InputError on bad
    input."""
    source = str(path)
    inputs = spec.model.input.by_name
    headers = {name: column_header(meta) for name, meta in inputs.items()}
    wanted = list(dict.fromkeys(headers.values()))
    try:
        cap = max_cell_chars()
    except ValueError as exc:
        raise InputError(source, [str(exc)]) from None
    problems = _Problems(show_values, label)
    tokens = {name: spec.model.input.missing_markers(meta) for name, meta in inputs.items()}
    rows = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()   # millions of small lists and strings, no cycles: the collector only slows reading
    try:
        with _reader(path, problems, cap, content) as reader:
            reader.typed_columns = _typed_columns(inputs, headers, tokens)
            if reader.ok and reader.check_columns(wanted):
                for chunk in reader.chunks(wanted):
                    part = {}
                    for name, meta in inputs.items():
                        header = headers[name]
                        cells = chunk.cells[header]
                        missing = chunk.broken.copy()
                        if header in chunk.nulls:
                            missing |= _nulls(chunk, header, bool(tokens[name]), problems)
                        if header in chunk.typed:   # Parquet read typed: no marker can match
                            part[name] = _parse_typed(header, meta, chunk.typed[header], missing, problems,
                                                      cells, chunk.where(header))
                            continue
                        if tokens[name]:
                            missing |= _is_marker(cells, tokens[name])
                        part[name] = _parse_column(header, meta, cells, missing, problems, chunk.where(header))
                    rows += len(chunk.lines)
                    if not problems.total:
                        acc.add(part)
                    if problems.total >= MAX_PROBLEMS:
                        problems.stopped_at = chunk.last_line
                        break
    finally:
        if gc_was_enabled:
            gc.enable()
    if problems.total:
        raise InputError.from_problems(source, problems)
    return rows


NULL_RULE = ("null cell (a missing value; declare a missing-value marker in input.missing_values or "
             "the column's missing if this is intended)")


def _typed_columns(inputs: dict, headers: dict, tokens: dict) -> dict[str, str]:
    """header -> type of the columns a Parquet reader may hand over typed
    (``ParquetReader.typed_columns``): integer, float, boolean and date columns none of whose
    missing-value markers could be the text of a value of that type (a marker such as "99" on a
    number column is matched on the cell texts, so that column is read as text)."""
    out: dict[str, str] = {}
    for name, meta in inputs.items():
        if meta.type not in ("integer", "float", "boolean", "date"):
            continue
        if any(_could_be_value(meta.type, t) for t in tokens[name]):
            continue
        if out.get(headers[name], meta.type) != meta.type:   # one header read as two types: text
            out.pop(headers[name])
            continue
        out[headers[name]] = meta.type
    return out


def _could_be_value(kind: str, token: str) -> bool:
    """Whether a marker could be the CSV text of a typed Parquet value of ``kind``."""
    t = str(token).strip().lower()
    if kind == "boolean":
        return t in ("true", "false")
    if kind == "date":
        return bool(re.fullmatch(r"[0-9+-][0-9-]*", t)) or t.startswith("<")
    return bool(re.fullmatch(r"[-+0-9.e]+|nan|inf|-inf|infinity|-infinity", t))


def _reader(path: Path, problems: _Problems, cap: int, content: bytes | None):
    """The reader of ``path``: Parquet for a name ending in ``.parquet``, else CSV (``content``:
    CSV bytes already in memory)."""
    from dpbundle.release.data.parquet_read import ParquetReader, is_parquet

    if content is None and is_parquet(path):
        return ParquetReader(path, problems, cap)
    return CsvReader(path, problems, cap, content)


def _nulls(chunk, header: str, allowed: bool, problems: _Problems) -> np.ndarray:
    """The chunk's null cells of ``header``: missing values where the column declares a
    missing-value marker, else a problem each (as an empty CSV cell is)."""
    nulls = chunk.nulls[header]
    if not allowed:
        problems.add(nulls & ~chunk.broken, header, NULL_RULE, where=chunk.where(header))
    return nulls


def _concat(kind: str, parts: list[np.ndarray]) -> np.ndarray:
    if parts:
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    dtype = {"date": "datetime64[D]", "category": np.int64}.get(kind, np.float64)
    return np.zeros(0, dtype=dtype)


def prepare(path: Path | str, spec: Spec, show_values: bool = True, atoms: bool = True) -> Prepared:
    """Load, validate and apply the raw constraints. Raises :class:`InputError` on bad input.

    ``show_values=False`` (used by ``release``) keeps private cell values and counts out of the
    error messages; ``spec validate --data`` shows them, for the steward inside the enclave.
    ``atoms`` (default): the table is read to the spec's atoms (:func:`read_atoms`: every
    binning, constraint and the ledger fingerprint as on the records, the distinct rows bounded
    by the spec); ``atoms=False`` keeps the records' own values (the self-test's neighbours)."""
    path = Path(path)
    if not atoms:
        distinct, index, rows = read_distinct(path, spec, show_values)
        return _constrained(str(path), distinct, index, rows, spec, show_values, file_sha256(path))
    distinct, index, rows, keys = read_atoms(path, spec, show_values)
    return _constrained(str(path), distinct, index, rows, spec, show_values, file_sha256(path), [keys])


def prepare_frame(frame: "pd.DataFrame", spec: Spec, show_values: bool = True) -> Prepared:
    """:func:`prepare` of a pandas DataFrame: it is written as the CSV file a steward would
    export (:func:`frame_csv`: the spec's input columns in the spec's order, the DataFrame's
    values as ``DataFrame.to_csv`` writes them, a missing value NaN/None as an empty cell) and
    that text is read and validated exactly as a file is. Messages name the DataFrame's row
    index ("row index 17") instead of a file line; the source is ``<DataFrame>``; ``sha256``
    is the SHA-256 of the serialised CSV bytes (the table's canonical fingerprint, which the
    ledger keys on, is that of the same data read from a file). A TypeError when ``frame`` is
    not a DataFrame, an :class:`InputError` for a missing column."""
    content, label = frame_csv(frame, spec)
    distinct, index, rows, keys = read_atoms(Path(FRAME_SOURCE), spec, show_values, content=content, label=label)
    return _constrained(FRAME_SOURCE, distinct, index, rows, spec, show_values, hashlib.sha256(content).hexdigest(),
                        [keys])


def _constrained(source: str, distinct: dict, index: np.ndarray, rows: int, spec: Spec, show_values: bool,
                 sha256: str, keys: list["RecordKeys"] | None = None) -> Prepared:
    """The read table with the raw constraints applied (the rows they match dropped), evaluated
    once per distinct row and counted with each distinct row's number of records. ``keys``:
    the table was read to atoms, and these readings hold its plausible records (the ledger
    fingerprint is computed from them here; they are emptied)."""
    inputs = spec.model.input.by_name
    kinds = {n: m.type for n, m in inputs.items()}
    cats = {n: list(m.category_texts) for n, m in inputs.items() if m.type == "category"}
    size = len(next(iter(distinct.values()))) if distinct else 0
    counts = index_counts(index, size)
    drop = np.zeros(size, dtype=bool)
    dropped_by = []
    for c in spec.model.all_raw_constraints:
        mask = constraint_mask(c, distinct, kinds, missing=is_missing, categories=cats,
                               specials=spec.model.input.special_limits)
        dropped_by.append((c.name, int(counts[mask].sum())))
        drop |= mask
    keep = ~drop
    kept = {k: v[keep] for k, v in distinct.items()}
    left_missing = [n for n, v in kept.items() if is_missing(kinds[n], v).any()]
    if left_missing:
        counts_kept = counts[keep]
        missing = {n: int(counts_kept[is_missing(kinds[n], kept[n])].sum()) for n in left_missing}
        headers = {n: column_header(m) for n, m in inputs.items()}
        raise InputError(source, [
            f"column {headers[n]!r}: {missing[n] if show_values else 'some'} row(s) have a missing value and no raw constraint drops them "
            f"(add {{name: 'missing value', any_missing: true}} to raw_constraints)" for n in left_missing])
    n = int(counts[keep].sum())
    if n == 0 and spec.records_policy == "declared_public":
        # Under dp_count no plausible record is a registry like any other (the resize pads it):
        # refusing it would depend on one record, outside the stated neighbouring relation.
        raise InputError(source, ["no rows left after the raw constraints"])
    fingerprint = None
    if keys is not None:
        from dpbundle.release.data.record_keys import keys_fingerprint

        if sum(k.rows for k in keys) != n:   # the chunks' constraints and the distinct rows' disagree
            raise RuntimeError("internal error: the records kept for the ledger fingerprint are not the plausible records")
        fingerprint = keys_fingerprint(keys)
        from dpbundle.release.data.system_memory import give_back

        give_back()      # the keys' blocks and the re-packed words are gone
    index = kept_index(index, keep, n)   # in blocks: no n-sized int64 temporaries
    prepared = Prepared(source, kept, n, rows, dropped_by, int(counts[drop].sum()), sha256, index=index,
                        counts=counts[keep])
    prepared.fingerprint = fingerprint
    return prepared


FRAME_SOURCE = "<DataFrame>"


def frame_csv(frame: "pd.DataFrame", spec: Spec) -> tuple[bytes, Callable[[int], str]]:
    """(the CSV bytes a file of ``frame`` would hold, line -> "row index X" for messages): the
    spec's input columns (their ``header``) in the spec's order, UTF-8, "\n" line ends, the
    values as ``DataFrame.to_csv`` writes them (NaN and None as empty cells)."""
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"data must be a path or a pandas DataFrame, not {type(frame).__name__}")
    wanted = list(dict.fromkeys(column_header(m) for m in spec.model.input.by_name.values()))
    names = [str(c) for c in frame.columns]
    missing = [h for h in wanted if h not in names]
    if missing:
        has = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise InputError(FRAME_SOURCE, [
            f"the DataFrame's columns: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(h) for h in missing)} (expected columns: {', '.join(repr(h) for h in wanted)}; "
            f"the DataFrame has {has or 'no columns'})"])
    order = sorted((i for i, n in enumerate(names) if n in wanted), key=lambda i: (wanted.index(names[i]), i))
    sub = frame.iloc[:, order]
    text = sub.to_csv(index=False, header=[names[i] for i in order], lineterminator="\n", na_rep="")
    content = text.encode("utf-8", errors="surrogatepass")
    starts = np.arange(len(sub), dtype=np.int64) + 2       # the line each row starts on
    if "\r" in text or text.count("\n") != len(sub) + 1:  # line breaks inside cells
        from dpbundle.release.data.csv_read import _breaks

        first = 2 + sum(_breaks(names[i]) for i in order)
        spans = [sum(_breaks(v) for v in row if isinstance(v, str)) for row in sub.itertuples(index=False)]
        starts = first + np.arange(len(sub), dtype=np.int64) + np.concatenate(([0], np.cumsum(spans, dtype=np.int64)[:-1]))
    index = frame.index

    def label(line: int) -> str:
        if line <= 1 or not len(index):
            return "the DataFrame's column names"
        row = min(int(np.searchsorted(starts, line, side="right")) - 1, len(index) - 1)
        value = index[row]
        shown = str(int(value)) if isinstance(value, (int, np.integer)) else repr(value)
        return f"row index {shown}"
    return content, label
