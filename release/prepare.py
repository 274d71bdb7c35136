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

Bad input raises :class:`InputError` naming the file, line, column and rule (first few problems
plus a count). Nothing is written anywhere.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .constraints import constraint_mask
from .spec import Spec, input_categories, missing_markers

MAX_REPORTED = 8
TRUE_TOKENS = {"true", "1", "t", "yes"}
FALSE_TOKENS = {"false", "0", "f", "no"}


class InputError(ValueError):
    """Unusable input data: ``problems`` are 'line L, column C: what is wrong' strings."""

    def __init__(self, source: str, problems: list[str], total: int | None = None):
        self.source = source
        self.problems = problems
        self.total = total if total is not None else len(problems)
        shown = "\n".join(f"  {p}" for p in problems[:MAX_REPORTED])
        more = f"\n  ... and {self.total - min(len(problems), MAX_REPORTED)} more problem(s)" if self.total > MAX_REPORTED else ""
        hint = ("\n  (line numbers count the header as line 1, like row numbers in a spreadsheet)"
                if any(p.startswith("line ") for p in problems) else "")
        super().__init__(f"{source}: unusable input data ({self.total} problem(s)):\n{shown}{more}{hint}")


@dataclass
class Prepared:
    """The private input after validation and raw constraints. Only ``n`` is public."""

    source: str
    table: dict[str, np.ndarray]
    n: int
    rows_read: int
    dropped_by: list[tuple[str, int]] = field(default_factory=list)  # rows matching each raw constraint (private)
    dropped_total: int = 0
    sha256: str = ""

    def subset(self, index: np.ndarray) -> "Prepared":
        """The same prepared data restricted to (or resampled at) ``index`` (used by benchmarks and tests)."""
        table = {k: v[index] for k, v in self.table.items()}
        return Prepared(self.source, table, int(len(index)), int(len(index)), [], 0, self.sha256)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _line(rows: np.ndarray) -> np.ndarray:
    """File line numbers of 0-based data rows (line 1 is the header)."""
    return rows + 2


class _Problems:
    """Collects 'line L, column C: rule (got V)' problems; ``show_values=False`` leaves out V
    (the private cell value) for messages that may leave the steward's own terminal."""

    def __init__(self, show_values: bool = True) -> None:
        self.items: list[tuple[int, str]] = []  # (line, message)
        self.total = 0
        self.show_values = show_values

    def add(self, mask: np.ndarray, column: str, rule: str, cells: np.ndarray | None = None) -> None:
        rows = np.flatnonzero(mask)
        self.total += len(rows)
        for r in rows[:MAX_REPORTED]:
            got = f" (got {str(cells[r])!r})" if cells is not None and self.show_values else ""
            self.items.append((int(_line(r)), f"line {int(_line(r))}, column {column!r}: {rule}{got}"))

    def messages(self) -> list[str]:
        return [m for _, m in sorted(self.items, key=lambda t: t[0])][:MAX_REPORTED]


def _parse_column(name: str, meta: dict, cells: np.ndarray, missing: np.ndarray, problems: _Problems) -> np.ndarray:
    kind = meta["type"]
    empty = (cells == "") & ~missing
    problems.add(empty, name, "empty cell (declare a missing-value marker in input.missing_values or the column's missing if this is intended)")
    present = ~missing & ~empty
    if kind in ("integer", "float"):
        values = pd.to_numeric(pd.Series(cells), errors="coerce").to_numpy(dtype=np.float64, copy=True)
        bad = present & ~np.isfinite(values)
        problems.add(bad, name, f"not a number ({kind} expected)", cells)
        if kind == "integer":
            frac = present & np.isfinite(values) & (values != np.round(values))
            problems.add(frac, name, "not an integer", cells)
        values[~present | bad] = np.nan
        lo, hi = meta.get("min"), meta.get("max")
        ok = present & ~bad
        if lo is not None:
            problems.add(ok & (values < lo), name, f"below the allowed minimum {lo}", cells)
        if hi is not None:
            problems.add(ok & (values > hi), name, f"above the allowed maximum {hi}", cells)
        return values
    if kind == "boolean":
        low = np.char.lower(cells.astype(str))
        t = np.isin(low, list(TRUE_TOKENS))
        f = np.isin(low, list(FALSE_TOKENS))
        problems.add(present & ~t & ~f, name, "not a boolean (True/False expected)", cells)
        return np.where(t, 1.0, np.where(f, 0.0, np.nan))
    if kind == "date":
        parsed = pd.to_datetime(pd.Series(cells), format="%Y-%m-%d", errors="coerce").to_numpy(dtype="datetime64[D]", copy=True)
        bad = present & np.isnat(parsed)
        problems.add(bad, name, "not a valid date (YYYY-MM-DD expected; impossible dates such as 2019-02-30 are rejected)", cells)
        parsed[~present | bad] = np.datetime64("NaT")
        ok = present & ~bad
        if meta.get("min") is not None:
            problems.add(ok & (parsed < np.datetime64(str(meta["min"]))), name, f"before the allowed minimum {meta['min']}", cells)
        if meta.get("max") is not None:
            problems.add(ok & (parsed > np.datetime64(str(meta["max"]))), name, f"after the allowed maximum {meta['max']}", cells)
        return parsed
    # category
    cats = input_categories(meta)
    lookup = {c: i for i, c in enumerate(cats)}
    idx = np.array([lookup.get(c, -2) for c in cells], dtype=np.int64)
    problems.add(present & (idx == -2), name, f"not one of the declared categories {cats}", cells)
    idx[~present | (idx == -2)] = -1
    return idx


def is_missing(kind: str, values: np.ndarray) -> np.ndarray:
    """Missing-value mask of one typed column."""
    if kind == "date":
        return np.isnat(values)
    if kind == "category":
        return values < 0
    return np.isnan(values)


def column_header(meta: dict) -> str:
    """The CSV header text of an input column (its ``header``, default its ``name``)."""
    return str(meta.get("header", meta["name"]))


def read_typed(path: Path, spec: Spec, show_values: bool = True) -> tuple[dict[str, np.ndarray], int]:
    """Read and validate the input file; return the typed columns (before raw constraints) and the
    row count. ``show_values=False``: error messages name line, column and rule but not the value."""
    source = str(path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, compression="infer",
                            skipinitialspace=False, encoding="utf-8")
    except FileNotFoundError:
        raise InputError(source, ["file not found"]) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, EOFError, ValueError) as exc:
        raise InputError(source, [f"not a readable CSV file: {str(exc).strip()}"]) from None
    inputs = spec.input_columns
    headers = {name: column_header(meta) for name, meta in inputs.items()}
    missing_cols = [h for h in headers.values() if h not in frame.columns]
    if missing_cols:
        expected = ", ".join(repr(h) for h in headers.values())
        raise InputError(source, [f"line 1 (header): missing column {c!r} (expected columns: {expected})" for c in missing_cols])
    problems = _Problems(show_values)
    table: dict[str, np.ndarray] = {}
    for name, meta in inputs.items():
        cells = frame[headers[name]].to_numpy(dtype=str)
        tokens = missing_markers(spec.raw["input"], meta)
        missing = np.isin(cells, tokens) if tokens else np.zeros(len(cells), dtype=bool)
        table[name] = _parse_column(headers[name], meta, cells, missing, problems)
    if problems.total:
        raise InputError(source, problems.messages(), problems.total)
    return table, len(frame)


def prepare(path: Path | str, spec: Spec, show_values: bool = True) -> Prepared:
    """Load, validate and apply the raw constraints. Raises :class:`InputError` on bad input.

    ``show_values=False`` (used by ``release``) keeps private cell values and counts out of the
    error messages; ``spec validate --data`` shows them, for the steward inside the enclave."""
    path = Path(path)
    table, rows = read_typed(path, spec, show_values)
    kinds = {n: m["type"] for n, m in spec.input_columns.items()}
    cats = {n: input_categories(m) for n, m in spec.input_columns.items() if m["type"] == "category"}
    drop = np.zeros(rows, dtype=bool)
    dropped_by = []
    for c in spec.raw.get("raw_constraints", []):
        mask = constraint_mask(c, table, kinds, missing=is_missing, categories=cats)
        dropped_by.append((c["name"], int(mask.sum())))
        drop |= mask
    keep = ~drop
    kept = {k: v[keep] for k, v in table.items()}
    left_missing = [n for n, v in kept.items() if is_missing(kinds[n], v).any()]
    if left_missing:
        counts = {n: int(is_missing(kinds[n], kept[n]).sum()) for n in left_missing}
        headers = {n: column_header(m) for n, m in spec.input_columns.items()}
        raise InputError(str(path), [
            f"column {headers[n]!r}: {counts[n] if show_values else 'some'} row(s) have a missing value and no raw constraint drops them "
            f"(add {{name: 'missing value', any_missing: true}} to raw_constraints)" for n in left_missing])
    n = int(keep.sum())
    if n == 0:
        raise InputError(str(path), ["no rows left after the raw constraints"])
    return Prepared(str(path), kept, n, rows, dropped_by, int(drop.sum()), file_sha256(path))
