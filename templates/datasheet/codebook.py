"""``codebook.csv``: every released column's values, in order, with what each value stands for.

One row per (column, value): ``column, order, label, lower, upper, number, unit, description``.

- ``order``: 1, 2, ... within the column (the order of the categories in datapackage.json);
- ``label``: the text in data.csv;
- ``lower`` / ``upper``: the bin's bounds in the source's units, lower inclusive, upper exclusive
  (empty: no bound, for the open bins "below" / "and over", or not a range, for categories);
- ``number``: the number the value stands for in every statistic (a single value's value, a
  bounded bin's midpoint, an open bin's edge, a category's code or declared number);
- ``unit``: the column's unit (the spec's ``unit``), empty if it has none;
- ``description``: the column's description (repeated on each of its rows, so that each row
  reads alone in a spreadsheet);
- ``special`` (only in a bundle with special values): ``not_applicable`` or ``unknown`` for a
  special value (its number, lower and upper are then empty: it is not a number), empty otherwise.

Numbers are written exactly: integers without a decimal point, other numbers as Python's
shortest round-trip text, so :func:`read_codebook` rebuilds the same floats. The writer (release)
and the reader (the datasheet renderer, shared with the audit) live here together.
"""
from __future__ import annotations

import csv
import io
import math
from typing import Mapping, Sequence

import numpy as np

from dpbundle.mechanisms.coding import SPECIAL_KINDS, ColumnCoding

__all__ = ["CODEBOOK_FIELDS", "SPECIAL_FIELD", "codebook_bytes", "read_codebook", "CodebookError", "number_text"]

CODEBOOK_FIELDS = ("column", "order", "label", "lower", "upper", "number", "unit", "description")
#: The ninth field of a bundle with special values (not applicable, unknown): the kind, else empty.
SPECIAL_FIELD = "special"


class CodebookError(ValueError):
    """codebook.csv is malformed or disagrees with the columns it must describe."""


def number_text(x: float) -> str:
    """Exact, short text of a finite float ("" for nan and the infinities)."""
    x = float(x)
    if not math.isfinite(x):
        return ""
    if x.is_integer() and abs(x) < 2 ** 53:
        return str(int(x))
    return repr(x)


def codebook_bytes(columns: Sequence[ColumnCoding], units: Mapping[str, str],
                   descriptions: Mapping[str, str]) -> bytes:
    """The bytes of codebook.csv for the released ``columns`` (UTF-8, ``\\n`` line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    special = any(getattr(col, "special", None) for col in columns)
    w.writerow(CODEBOOK_FIELDS + ((SPECIAL_FIELD,) if special else ()))
    for col in columns:
        kinds = getattr(col, "special", None) or ("",) * col.size
        for i, label in enumerate(col.labels):
            w.writerow([col.name, i + 1, label, number_text(col.lower[i]), number_text(col.upper[i]),
                        number_text(col.values[i]), units.get(col.name, ""),
                        descriptions.get(col.name, "")] + ([kinds[i]] if special else []))
    return buf.getvalue().encode("utf-8")


def _number(text: str, where: str) -> float | None:
    if text == "":
        return None
    try:
        x = float(text)
    except ValueError:
        raise CodebookError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(x):
        raise CodebookError(f"{where}: {text!r} is not a finite number")
    return x


def read_codebook(data: bytes, names: Sequence[str], ordered: Mapping[str, bool],
                  max_rows: int = 1_000_000) -> tuple[list[ColumnCoding], dict[str, str], dict[str, str]]:
    """(columns in the order of ``names``, units, descriptions) from codebook.csv's bytes.

    ``ordered``: whether each column's values are ordered (datapackage.json's
    ``categoriesOrdered``); a column without bounds (categories, ordinal or not) is coded as
    unordered, as the release codes it. Empty bounds are -inf / +inf in a column that has bounds, nan in one
    that has none. Raises :class:`CodebookError` naming the line and the field."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CodebookError("codebook.csv: not UTF-8") from None
    rows = csv.reader(io.StringIO(text, newline=""))
    header = next(rows, None)
    if header is None or tuple(header) not in (CODEBOOK_FIELDS, CODEBOOK_FIELDS + (SPECIAL_FIELD,)):
        raise CodebookError(f"codebook.csv: the header must be {','.join(CODEBOOK_FIELDS)} (and "
                            f"{SPECIAL_FIELD} when a column has special values)")
    fields = len(header)
    by_col: dict[str, list[tuple]] = {name: [] for name in names}
    units: dict[str, str] = {}
    descriptions: dict[str, str] = {}
    for line, row in enumerate(rows, start=2):
        if line > max_rows + 1:
            raise CodebookError(f"codebook.csv: more than {max_rows:,} rows")
        if len(row) != fields:
            raise CodebookError(f"codebook.csv, line {line}: {len(row)} fields, expected {fields}")
        col, order, label, lower, upper, number, unit, description = row[:8]
        kind = row[8] if fields > 8 else ""
        if col not in by_col:
            raise CodebookError(f"codebook.csv, line {line}: {col!r} is not a column of data.csv")
        where = f"codebook.csv, line {line}"
        if order != str(len(by_col[col]) + 1):
            raise CodebookError(f"{where}: order {order!r}, expected {len(by_col[col]) + 1}")
        value = _number(number, f"{where}, number")
        if kind:    # a special value: no number, no bounds
            if kind not in SPECIAL_KINDS or (number, lower, upper) != ("", "", ""):
                raise CodebookError(f"{where}: a special value ({kind!r}) must be "
                                    f"{' or '.join(SPECIAL_KINDS)}, with no number and no bounds")
            by_col[col].append((label, None, None, math.nan, kind))
        else:
            if value is None:
                raise CodebookError(f"{where}: the number is empty")
            by_col[col].append((label, _number(lower, f"{where}, lower"), _number(upper, f"{where}, upper"),
                                value, ""))
        if units.setdefault(col, unit) != unit or descriptions.setdefault(col, description) != description:
            raise CodebookError(f"{where}: the unit or description differs from the column's first row")
    columns = []
    for name in names:
        entries = by_col[name]
        if not entries:
            raise CodebookError(f"codebook.csv: no row for column {name!r}")
        bounded = any(lo is not None or up is not None for _, lo, up, _, _ in entries)
        lows = [math.nan if k else (-math.inf if bounded else math.nan) if lo is None else lo
                for _, lo, _, _, k in entries]
        ups = [math.nan if k else (math.inf if bounded else math.nan) if up is None else up
               for _, _, up, _, k in entries]
        kinds = tuple(e[4] for e in entries)
        try:
            columns.append(ColumnCoding(name=name, labels=tuple(e[0] for e in entries),
                                        values=np.array([e[3] for e in entries]),
                                        # "ordered" means binned in ColumnCoding (the criteria's
                                        # designs branch on it): ordinal categories
                                        # (categoriesOrdered, no bounds) stay categories
                                        ordered=bool(ordered.get(name, False)) and bounded,
                                        lower=np.array(lows), upper=np.array(ups),
                                        special=kinds if any(kinds) else None))
        except ValueError as exc:
            raise CodebookError(f"codebook.csv: column {name!r}: {exc}") from None
    return columns, units, descriptions
