"""Declarative row constraints: ``{name, when: [[column, op, value], ...]}`` matches a row when
every condition holds (a conjunction); ``{name, any_missing: true}`` matches rows with a missing
value. Matching rows are dropped. Nothing is evaluated as code: ops come from a fixed table.

Ops: ``<, <=, >, >=, ==, !=`` with one value, ``in`` / ``not in`` with a list of values.

Raw constraints are evaluated on the typed input columns, in input units: numbers, ISO dates,
true/false, and for a category column its declared categories (matched by text, so the integer
``8`` and the string ``"8"`` name the same category). A comparison with a missing cell is False
(also for ``!=`` and ``not in``), and so is a comparison with a special value of a number column
(``input.columns[].special``: not applicable, unknown; they are neither numbers nor missing).

Synthetic constraints act on the released columns, in released units (see :func:`bin_condition`):
a bin matches a condition when every value it stands for does; a categorical column compares by
category name (the spec's ``categories``), or by its numbers (``values``) when given numbers.
"""
from __future__ import annotations

import operator
from typing import Callable, Mapping, Sequence

import numpy as np

from dpbundle.mechanisms.coding import Coded, ColumnCoding

from dpbundle.release.spec.typed import Constraint, as_constraint

OPS: dict[str, Callable] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}
SET_OPS = ("in", "not in")


def is_missing(kind: str, values: np.ndarray) -> np.ndarray:
    """Missing-value mask of one typed input column (NaT for dates, -1 for categories, NaN)."""
    if kind == "date":
        return np.isnat(values)
    if kind == "category":
        return values < 0
    return np.isnan(values)


def _items(op: str, value) -> list:
    return list(value) if op in SET_OPS else [value]


def _operand(kind: str, value):
    if kind == "date":
        return np.datetime64(str(value), "D")
    if kind == "boolean":
        return 1.0 if value else 0.0
    return float(value)


def _compare(values: np.ndarray, op: str, operands: list) -> np.ndarray:
    """``values op operand`` elementwise; ``in``/``not in`` test membership in ``operands``."""
    with np.errstate(invalid="ignore"):
        if op == "in":
            return np.isin(values, np.asarray(operands))
        if op == "not in":
            return ~np.isin(values, np.asarray(operands))
        return OPS[op](values, operands[0])


def _category_codes(column: str, cats: list[str], items: list) -> list[int]:
    """Indices of category values among the declared category texts (ValueError if one is unknown)."""
    codes = []
    for v in items:
        text = v if isinstance(v, str) else (str(v) if isinstance(v, int) and not isinstance(v, bool) else None)
        if text is None or text not in cats:
            raise ValueError(f"column {column!r}: {v!r} is not a declared category ({', '.join(cats)})")
        codes.append(cats.index(text))
    return codes


def constraint_mask(constraint: Constraint | Mapping, table: Mapping[str, np.ndarray], kinds: Mapping[str, str],
                    missing: Callable[[str, np.ndarray], np.ndarray] | None = None,
                    categories: Mapping[str, list[str]] | None = None,
                    specials: Mapping[str, float] | None = None) -> np.ndarray:
    """Rows matching one raw constraint (typed, or its document form ``{name, when | any_missing}``).
    ``categories``: the declared category texts of every category column (its cells are coded as
    indices into them, -1 = missing). ``specials``: the ``max`` of every number column with
    special values (typed above it): a condition on such a column never holds on a special value
    (it is not a number), and ``any_missing`` does not count it as missing."""
    constraint = as_constraint(constraint)
    n = len(next(iter(table.values())))
    if constraint.any_missing:
        mask = np.zeros(n, dtype=bool)
        for name, values in table.items():
            mask |= missing(kinds[name], values)
        return mask
    mask = np.ones(n, dtype=bool)
    for column, op, value in constraint.when:
        values = table[column]
        kind = kinds[column]
        items = _items(op, value)
        if kind == "category":
            if categories is None or column not in categories:
                raise ValueError(f"column {column!r}: the declared categories are needed to evaluate a category condition")
            codes = _category_codes(column, list(categories[column]), items)
            mask &= _compare(values, op, codes) & (values >= 0)
            continue
        hit = _compare(values, op, [_operand(kind, v) for v in items])
        # NaN != x and NaT != x are True in IEEE/numpy: exclude missing values explicitly.
        present = ~np.isnat(values) if kind == "date" else ~np.isnan(values)
        if specials and column in specials:
            present &= values <= specials[column]       # special values are not numbers
        mask &= hit & present
    return mask


def _holds_integers(coding: ColumnCoding) -> bool:
    if coding.integer is not None:
        return bool(coding.integer)
    lo, up = coding.lower, coding.upper
    return bool(np.all(np.mod(lo[np.isfinite(lo)], 1) == 0) and np.all(np.mod(up[np.isfinite(up)], 1) == 0))


def _bin_scalar(coding: ColumnCoding, op: str, value: float) -> np.ndarray:
    """Per bin: does ``x op value`` hold for every x of the bin (one value)."""
    lo, up = coding.lower, coding.upper
    value = float(value)
    if _holds_integers(coding):
        top = np.where(np.isfinite(up), up - 1, up)  # largest integer of the bin
        if op == "<":
            return top < value
        if op == "<=":
            return top <= value
        if op == ">":
            return lo > value
        if op == ">=":
            return lo >= value
        inside = (lo <= value) & (value <= top) & value.is_integer()
        if op == "==":
            return inside & (lo == top)
        return ~inside  # "!="
    if op in ("<", "<="):
        return up <= value  # every x of [lo, up) is below up
    if op == ">":
        return lo > value
    if op == ">=":
        return lo >= value
    if op == "==":
        return np.zeros(coding.size, dtype=bool)  # a real interval holds more than one value
    return ~((lo <= value) & (value < up))  # "!="


def _bin_in(coding: ColumnCoding, values: list) -> np.ndarray:
    """Per bin: is every value of the bin in the set (only a bounded integer bin can be)."""
    wanted = {float(v) for v in values}
    out = np.zeros(coding.size, dtype=bool)
    if not _holds_integers(coding):
        return out
    for i, (a, b) in enumerate(zip(coding.lower, coding.upper)):
        if np.isfinite(a) and np.isfinite(b) and b - a <= len(wanted):
            out[i] = all(float(x) in wanted for x in np.arange(a, b))
    return out


def bin_condition(coding: ColumnCoding, op: str, value) -> np.ndarray:
    """Per code: does ``x op value`` hold for EVERY value x the bin stands for?

    A synthetic record is dropped only when it is certainly implausible, so a binned column
    satisfies a condition when all of its bin does. Bins ``[a, b)`` of an integer source hold
    the integers a..b-1 (open bins extend to -inf / +inf); other bins hold the real interval. So
    ``x < v`` holds when the bin's largest value is < v, ``x > v`` when its smallest is > v,
    ``x == v`` only for the single-value bin {v}, ``x != v`` when v is outside the bin;
    ``x in S`` when every value of the bin is in S, ``x not in S`` when no value of S is in the bin.
    Categorical columns: category names (strings) select categories by name; numbers compare
    the category numbers (``ColumnCoding.values``).
    """
    items = _items(op, value)
    if not coding.ordered:
        if items and all(isinstance(v, str) for v in items):
            codes = np.arange(coding.size)
            chosen = [coding.code_of_category(v) for v in items]
            if op in ("==", "in"):
                return np.isin(codes, chosen)
            if op in ("!=", "not in"):
                return ~np.isin(codes, chosen)
            raise ValueError(f"column {coding.name!r}: category names take ==, !=, in or not in (got {op!r})")
        return _compare(coding.values, op, [float(v) for v in items])
    if op == "in":
        return _bin_in(coding, items)
    if op == "not in":
        out = np.ones(coding.size, dtype=bool)
        for v in items:
            out &= _bin_scalar(coding, "!=", v)
        return out
    return _bin_scalar(coding, op, value)


def synthetic_violations(constraints: Sequence[Constraint | Mapping], coded: Coded) -> np.ndarray:
    """Rows of coded data that match any synthetic constraint (typed, or document forms; see
    :func:`bin_condition`)."""
    n = coded.codes.shape[0]
    bad = np.zeros(n, dtype=bool)
    for constraint in map(as_constraint, constraints):
        mask = np.ones(n, dtype=bool)
        for column, op, value in constraint.when:
            j = coded.column(column)
            # Evaluate the condition once per code, then look it up per row.
            mask &= bin_condition(coded.columns[j], op, value)[coded.codes[:, j]]
        bad |= mask
    return bad


def violation_table(constraints: Sequence[Constraint | Mapping], columns: tuple[ColumnCoding, ...]) -> np.ndarray:
    """bad[cell] for every cell of the full domain (mixed-radix index, C order): the value of
    :func:`synthetic_violations` on the record of that cell. Each condition is one table over its
    column's codes, broadcast along the other axes (public: the spec and the codings only)."""
    names = [c.name for c in columns]
    shape = tuple(c.size for c in columns)
    bad = np.zeros(shape, dtype=bool)
    for constraint in map(as_constraint, constraints):
        mask = np.ones((1,) * len(shape), dtype=bool)
        for column, op, value in constraint.when:
            if column not in names:
                raise KeyError(f"no column {column!r}; columns are {names}")
            j = names.index(column)
            axis = [1] * len(shape)
            axis[j] = shape[j]
            mask = mask & bin_condition(columns[j], op, value).reshape(axis)
        bad |= mask
    return bad.reshape(-1)
