"""The audit's own loading of the private input for the enclave replay: CSV(.gz) parsing per the
spec's input columns, the raw constraints, and binning into codes per the selected
configuration. Written independently of ``release/prepare.py`` and ``release/transform.py``.

Reading: an input column comes from the CSV column headed by its ``header`` (default its
``name``); a cell is missing when it equals one of ``input.missing_values`` or of the column's own
``missing`` markers; a category cell is matched by text against the declared categories (an
integer category 3 is the text "3"). Raw constraints compare in input units (category values by
text; ``in`` / ``not in`` take lists); a comparison with a missing cell is false. Binning derives
month, year, ``age`` (completed years at ``source.reference``) or ``linear`` (scale * x + offset)
and maps categories by ``map``, then ``default``, then the same text.
"""
from __future__ import annotations

import csv
import datetime as dt
import gzip
import io
import math
import operator
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .labels import SpecView

__all__ = ["PrivateDataError", "PrivateTable", "load_private", "bin_private"]

TRUE_TOKENS = {"true", "1", "t", "yes"}
FALSE_TOKENS = {"false", "0", "f", "no"}
OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "==": operator.eq, "!=": operator.ne}
SET_OPS = ("in", "not in")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
MAX_PRIVATE_BYTES = 4 * 1024**3
MAX_REPORTED = 8


class PrivateDataError(ValueError):
    """The private data cannot be used (the message names line, column and rule)."""


@dataclass
class PrivateTable:
    """Typed input columns after the raw constraints (private). ``values[name]`` is float64 with
    NaN for missing (dates: proleptic ordinal; booleans 0/1; categories: index); dates also keep
    their year, month and day."""

    values: dict[str, np.ndarray]
    months: dict[str, np.ndarray]
    years: dict[str, np.ndarray]
    days: dict[str, np.ndarray]
    kinds: dict[str, str]
    n: int
    rows_read: int


def _open(path: Path):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        raw = gzip.open(path, "rb")
    else:
        raw = open(path, "rb")
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")


def load_private(path: Path, spec: dict) -> PrivateTable:
    """Parse, validate and apply the raw constraints; PrivateDataError on bad input."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_PRIVATE_BYTES:
            raise PrivateDataError(f"{path}: larger than {MAX_PRIVATE_BYTES} bytes")
    except OSError as e:
        raise PrivateDataError(f"{path}: cannot read ({e.strerror})") from None
    inputs = [c for c in (spec.get("input") or {}).get("columns", []) if isinstance(c, dict)]
    if not inputs:
        raise PrivateDataError("spec.json: spec.input.columns is missing")
    shared = [_text(t) for t in (spec.get("input") or {}).get("missing_values", []) or []]
    tokens = {c["name"]: set(shared) | {_text(t) for t in c.get("missing", []) or []} for c in inputs}
    names = [c["name"] for c in inputs]
    headers = {c["name"]: str(c.get("header", c["name"])) for c in inputs}
    kinds = {c["name"]: c.get("type") for c in inputs}
    cols: dict[str, list] = {nm: [] for nm in names}
    months: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    years: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    days: dict[str, list] = {nm: [] for nm in names if kinds[nm] == "date"}
    problems: list[str] = []
    total_problems = 0
    rows = 0
    try:
        with _open(path) as f:
            reader = csv.reader(f, strict=True)
            header = next(reader, None)
            if header is None:
                raise PrivateDataError(f"{path}: empty file")
            missing_cols = [headers[nm] for nm in names if headers[nm] not in header]
            if missing_cols:
                raise PrivateDataError(f"{path}: header lacks column(s) {missing_cols}")
            pos = {nm: header.index(headers[nm]) for nm in names}
            for row in reader:
                rows += 1
                line = rows + 1
                if len(row) != len(header):
                    total_problems += 1
                    if len(problems) < MAX_REPORTED:
                        problems.append(f"line {line}: {len(row)} fields, expected {len(header)}")
                    for nm in names:
                        cols[nm].append(math.nan)
                        if nm in months:
                            months[nm].append(math.nan)
                            years[nm].append(math.nan)
                            days[nm].append(math.nan)
                    continue
                for c in inputs:
                    nm = c["name"]
                    cell = row[pos[nm]]
                    v, mo, yr, dy, err = _parse(cell, c, tokens[nm])
                    if err:
                        total_problems += 1
                        if len(problems) < MAX_REPORTED:
                            problems.append(f"line {line}, column {headers[nm]!r}: {err} (got {cell!r})")
                    cols[nm].append(v)
                    if nm in months:
                        months[nm].append(mo)
                        years[nm].append(yr)
                        days[nm].append(dy)
    except PrivateDataError:
        raise
    except (csv.Error, UnicodeDecodeError, OSError, EOFError, ValueError) as e:
        raise PrivateDataError(f"{path}: not a readable CSV file ({e})") from None
    if total_problems:
        raise PrivateDataError(f"{path}: {total_problems} problem(s): " + "; ".join(problems))
    values = {nm: np.asarray(cols[nm], dtype=np.float64) for nm in names}
    mon = {nm: np.asarray(v, dtype=np.float64) for nm, v in months.items()}
    yea = {nm: np.asarray(v, dtype=np.float64) for nm, v in years.items()}
    day = {nm: np.asarray(v, dtype=np.float64) for nm, v in days.items()}
    drop = np.zeros(rows, dtype=bool)
    cats = {c["name"]: [_text(x) for x in c.get("categories", [])] for c in inputs}
    for i, con in enumerate(spec.get("raw_constraints", []) or []):
        if not isinstance(con, dict):
            raise PrivateDataError(f"spec raw_constraints[{i}] is not an object")
        if con.get("any_missing"):
            for nm in names:
                drop |= np.isnan(values[nm])
            continue
        mask = np.ones(rows, dtype=bool)
        for cond in con.get("when", []) or []:
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
            mask &= hit & ~np.isnan(x)
        drop |= mask
    keep = ~drop
    left = [nm for nm in names if np.isnan(values[nm][keep]).any()]
    if left:
        raise PrivateDataError(f"{path}: missing values left after the raw constraints in {left}")
    return PrivateTable(values={k: v[keep] for k, v in values.items()},
                        months={k: v[keep] for k, v in mon.items()},
                        years={k: v[keep] for k, v in yea.items()},
                        days={k: v[keep] for k, v in day.items()},
                        kinds=kinds, n=int(keep.sum()), rows_read=rows)


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


def _parse(cell: str, meta: dict, tokens: set) -> tuple[float, float, float, float, str | None]:
    """(value, month, year, day, error) of one cell; NaN for missing."""
    v, mo, yr, err = _parse_present(cell, meta, tokens)
    dy = float(dt.date.fromordinal(int(v)).day) if meta.get("type") == "date" and not math.isnan(v) else math.nan
    return v, mo, yr, dy, err


def _parse_present(cell: str, meta: dict, tokens: set) -> tuple[float, float, float, str | None]:
    nan = math.nan
    if cell in tokens:
        return nan, nan, nan, None
    if cell == "":
        return nan, nan, nan, "empty cell"
    kind = meta.get("type")
    if kind in ("integer", "float"):
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


def _bin_edges(alt: dict) -> list[float]:
    if "edges" in alt:
        return [float(x) for x in alt["edges"]]
    a, b = alt["unit_bins"]
    return [float(v) for v in range(int(a), int(b) + 2)]


def _target(alt: dict, key: str, cats: list[str]) -> int:
    """Released code of one input category text: map, else default, else the same text."""
    mp = alt.get("map", {}) or {}
    name = mp[key] if key in mp else alt["default"] if alt.get("default") is not None else key
    if name not in cats:
        raise PrivateDataError(f"input category {key!r} has no released category among {cats}")
    return cats.index(name)


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
    spec = view.spec
    cols = {c["name"]: c for c in spec["columns"]}
    inputs = {c["name"]: c for c in spec["input"]["columns"]}
    codes = np.empty((table.n, len(view.columns)), dtype=np.int64)
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
                lookup = np.array([_target(alt, c, cats) for c in srccats], dtype=np.int64)
                codes[:, j] = lookup[x.astype(np.int64)]
            nan = np.full(len(cats), np.nan)
            edges_out.append((nan, nan))
            continue
        if "clip" in alt:
            x = np.clip(x, float(alt["clip"][0]), float(alt["clip"][1]))
        e = np.asarray(_bin_edges(alt))
        c = np.searchsorted(e, x, side="right") - 1
        if ((c < 0) | (c >= len(e) - 1)).any():
            raise PrivateDataError(f"column {vc.name!r}: a value lies outside the bins of "
                                   f"alternative {vc.alternative!r}")
        codes[:, j] = c
        edges_out.append((e[:-1].copy(), e[1:].copy()))
    return codes, edges_out
