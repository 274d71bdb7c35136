"""Declarative row constraints: ``{name, when: [[column, op, value], ...]}`` matches a row when
every condition holds (a conjunction); ``{name, any_missing: true}`` matches rows with a missing
value. Matching rows are dropped. Nothing is evaluated as code: ops come from a fixed table.

Raw constraints are evaluated on the typed input columns; synthetic constraints on the released
bins: a bin matches a condition when every value it stands for does (see :func:`bin_condition`).
"""
from __future__ import annotations

import operator
from typing import Callable, Mapping

import numpy as np

from dpbundle.mechanisms.coding import Coded, ColumnCoding

OPS: dict[str, Callable] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}


def _operand(kind: str, value):
    if kind == "date":
        return np.datetime64(str(value), "D")
    if kind == "boolean":
        return 1.0 if value else 0.0
    return value


def constraint_mask(constraint: dict, table: Mapping[str, np.ndarray], kinds: Mapping[str, str],
                    missing: Callable[[str, np.ndarray], np.ndarray] | None = None,
                    categories: Mapping[str, list[str]] | None = None) -> np.ndarray:
    """Rows matching one constraint. Comparisons with a missing value are False."""
    n = len(next(iter(table.values())))
    if constraint.get("any_missing"):
        mask = np.zeros(n, dtype=bool)
        for name, values in table.items():
            mask |= missing(kinds[name], values)
        return mask
    mask = np.ones(n, dtype=bool)
    for column, op, value in constraint["when"]:
        values = table[column]
        kind = kinds[column]
        if kind == "category":
            cats = (categories or {}).get(column, [])
            code = cats.index(value) if value in cats else -2
            with np.errstate(invalid="ignore"):
                mask &= OPS[op](values, code) & (values >= 0)
            continue
        with np.errstate(invalid="ignore"):
            hit = OPS[op](values, _operand(kind, value))
        # NaN != x and NaT != x are True in IEEE/numpy: exclude missing values explicitly.
        present = ~np.isnat(values) if kind == "date" else ~np.isnan(values)
        mask &= hit & present
    return mask


def bin_condition(coding: ColumnCoding, op: str, value: float) -> np.ndarray:
    """Per code: does ``x op value`` hold for EVERY value x the bin stands for?

    A synthetic record is dropped only when it is certainly implausible, so a binned column
    satisfies a condition when all of its bin does. Bins of integer edges ``[a, b)`` hold the
    integers a..b-1 (open bins extend to -inf / +inf); other bins hold the real interval. So
    ``x < v`` holds when the bin's largest value is < v, ``x > v`` when its smallest is > v,
    ``x == v`` only for the single-value bin {v}, ``x != v`` when v is outside the bin.
    Categories (no edges) compare their numbers (``ColumnCoding.values``).
    """
    if not coding.ordered:
        return OPS[op](coding.values, value)
    lo, up = coding.lower, coding.upper
    finite = np.isfinite(up)
    integer = bool(np.all(np.mod(lo[np.isfinite(lo)], 1) == 0) and np.all(np.mod(up[finite], 1) == 0))
    top = np.where(finite, up - 1, up) if integer else up  # largest value (integers) or supremum
    if op == "<":
        return top < value if integer else up <= value
    if op == "<=":
        return top <= value
    if op == ">":
        return lo > value
    if op == ">=":
        return lo >= value
    inside = (lo <= value) & ((value <= top) if integer else (value < up))
    if op == "==":
        return inside & (lo == top) if integer else np.zeros(coding.size, dtype=bool)
    return ~inside  # "!="


def synthetic_violations(constraints: list[dict], coded: Coded) -> np.ndarray:
    """Rows of coded data that match any synthetic constraint (see :func:`bin_condition`)."""
    n = coded.codes.shape[0]
    bad = np.zeros(n, dtype=bool)
    for constraint in constraints:
        mask = np.ones(n, dtype=bool)
        for column, op, value in constraint["when"]:
            j = coded.column(column)
            # Evaluate the condition once per code, then look it up per row.
            mask &= bin_condition(coded.columns[j], op, value)[coded.codes[:, j]]
        bad |= mask
    return bad
