"""Synthetic constraints, evaluated by the audit on whole bins (docs/internals.md): a released
row matches a condition ``[column, op, value]`` when *every* value its bin stands for does.

Bins of an integer source ``[a, b)`` hold the integers a..b-1; an open bin extends to -inf/+inf;
bins of a float source hold the real interval [a, b). ``x in S`` holds for a bin when each of
its values is in S (a bounded integer bin listed value by value), ``x not in S`` when none of S
lies in the bin. Categorical columns: a category name (string) selects by the spec's
``categories`` (not by display labels); numbers compare the category numbers (``values``). A
row violates a constraint when it matches every condition of its ``when``.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .bounds import MAX_CONSTRAINT_CONDITIONS, clip
from .labels import AuditColumn

__all__ = ["OPS", "bin_condition", "violations", "conditions_over_limit", "ConstraintError"]

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "==": operator.eq, "!=": operator.ne}
SET_OPS = ("in", "not in")


class ConstraintError(ValueError):
    """A constraint the audit cannot evaluate (unknown column or operator, bad value)."""


def _one(col: AuditColumn, op: str, v: float) -> np.ndarray:
    """Per bin of an ordered column: ``x op v`` for every x of the bin."""
    lo, up = col.lower, col.upper
    if col.integer:
        top = np.where(np.isfinite(up), up - 1, up)      # largest integer of the bin
        if op == "<":
            return top < v
        if op == "<=":
            return top <= v
        if op == ">":
            return lo > v
        if op == ">=":
            return lo >= v
        inside = (lo <= v) & (v <= top) & (float(v).is_integer())
        if op == "==":
            return inside & (lo == top)
        return ~inside                                     # "!="
    # real intervals [lo, up)
    if op in ("<", "<="):
        return up <= v
    if op == ">":
        return lo > v
    if op == ">=":
        return lo >= v
    if op == "==":
        return np.zeros(col.size, dtype=bool)
    return ~((lo <= v) & (v < up))


def _category_codes(col: AuditColumn, names: list) -> np.ndarray:
    cats = list(col.categories) if col.categories is not None else list(col.labels)
    code = {}
    for k, c in enumerate(cats):
        code.setdefault(c, k)          # the first, as list.index gives it
    missing = [x for x in names if x not in code]
    if missing:
        raise ConstraintError(clip(f"column {col.name!r}: {missing[0]!r} is not one of its categories "
                                   f"({', '.join(cats)})", 300))
    return np.array([code[x] for x in names], dtype=np.int64)


def _count_in(values: np.ndarray, lo: np.ndarray, hi: np.ndarray, side_hi: str) -> np.ndarray:
    """Per bin, how many of the sorted distinct ``values`` lie in [lo, hi) (``side_hi`` "left")
    or [lo, hi] ("right"): two binary searches per bin, whatever the numbers of bins and values."""
    return np.searchsorted(values, hi, side=side_hi) - np.searchsorted(values, lo, side="left")


def bin_condition(col: AuditColumn, op: str, value) -> np.ndarray:
    """Per code of ``col``: does ``x op value`` hold for every value x of the bin?"""
    if op not in OPS and op not in SET_OPS:
        raise ConstraintError(f"unknown operator {op!r}")
    items = list(value) if op in SET_OPS else [value]
    if not col.ordered or col.lower is None or col.upper is None:
        if items and all(isinstance(x, str) for x in items):
            if op not in ("==", "!=", "in", "not in"):
                raise ConstraintError(f"column {col.name!r}: category names take ==, !=, in or not in")
            hit = np.isin(np.arange(col.size), _category_codes(col, items))
            return hit if op in ("==", "in") else ~hit
        nums = [float(x) for x in items]
        if op == "in":
            return np.isin(col.numbers, nums)
        if op == "not in":
            return ~np.isin(col.numbers, nums)
        return OPS[op](col.numbers, nums[0])
    nums = [float(x) for x in items]
    if op == "in":
        # a bounded integer bin [a, b) matches when each integer int(a) .. int(b) - 1 is listed
        # (an empty range too); counted with binary searches over the listed whole numbers, so
        # that neither many bins nor wide ones make it slow
        out = np.zeros(col.size, dtype=bool)
        if col.integer:
            whole = np.unique(np.array([v for v in nums if v.is_integer()], dtype=np.float64))
            finite = np.isfinite(col.lower) & np.isfinite(col.upper)
            a = np.trunc(np.where(finite, col.lower, 0.0))
            b = np.trunc(np.where(finite, col.upper, 0.0))
            width = np.maximum(b - a, 0.0)
            out = finite & (np.maximum(_count_in(whole, a, b, "left"), 0) == width)
        return out
    if op == "not in":
        # no listed value lies in the bin: for an integer bin, no whole number in [lo, top]
        # (top = up - 1, or +inf when open above); for a real bin, none in [lo, up)
        if col.integer:
            whole = np.unique(np.array([v for v in nums if v.is_integer()], dtype=np.float64))
            top = np.where(np.isfinite(col.upper), col.upper - 1, col.upper)
            return _count_in(whole, col.lower, top, "right") <= 0
        return _count_in(np.unique(np.array(nums, dtype=np.float64)), col.lower, col.upper, "left") <= 0
    return _one(col, op, nums[0])


def _check_value(where: str, col: AuditColumn, op: str, value) -> None:
    if op in SET_OPS:
        if not isinstance(value, list) or not value:
            raise ConstraintError(f"{where}: {op!r} needs a non-empty list of values")
        items = value
    else:
        items = [value]
    if any(isinstance(v, str) for v in items) and not all(isinstance(v, str) for v in items):
        raise ConstraintError(f"{where}: the values must be all category names or all numbers")
    for v in items:
        if isinstance(v, str):
            if col.ordered:
                raise ConstraintError(f"{where}: value {v!r} is not a number (column {col.name!r} is binned)")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise ConstraintError(f"{where}: value {v!r} is not a number or a category name")


def conditions_over_limit(constraints: list) -> str | None:
    """A message if the constraints have more than MAX_CONSTRAINT_CONDITIONS conditions together
    (each is a pass over every row), else None."""
    conditions = sum(len(c["when"]) if isinstance(c, dict) and isinstance(c.get("when"), list) else 1
                     for c in constraints)
    if conditions > MAX_CONSTRAINT_CONDITIONS:
        return (f"synthetic_constraints: {conditions:,} conditions in all, more than the limit of "
                f"{MAX_CONSTRAINT_CONDITIONS:,}")
    return None


def violations(constraints: list, columns: list[AuditColumn], codes: np.ndarray,
               names: list[str]) -> list[tuple[str, np.ndarray]]:
    """(constraint name, row mask) for every constraint; ConstraintError if one is unusable, or
    if they have more than MAX_CONSTRAINT_CONDITIONS conditions together (each condition is a
    pass over every row: checked before any)."""
    too_many = conditions_over_limit(constraints)
    if too_many:
        raise ConstraintError(too_many)
    pos = {n: j for j, n in enumerate(names)}
    out = []
    for i, c in enumerate(constraints):
        name = c.get("name", f"#{i}") if isinstance(c, dict) else f"#{i}"
        when = c.get("when") if isinstance(c, dict) else None
        where = f"synthetic_constraints[{i}] ({name})"
        if not isinstance(when, list) or not when:
            raise ConstraintError(f"{where}: no 'when' conjunction")
        mask = np.ones(codes.shape[0], dtype=bool)
        for cond in when:
            if not (isinstance(cond, list) and len(cond) == 3):
                raise ConstraintError(f"{where}: malformed condition {cond!r}")
            col, op, value = cond
            if not isinstance(col, str) or col not in pos:
                raise ConstraintError(clip(f"{where}: unknown released column {col!r}", 300))
            if not isinstance(op, str) or (op not in OPS and op not in SET_OPS):
                raise ConstraintError(clip(f"{where}: unknown operator {op!r}", 300))
            j = pos[col]
            _check_value(where, columns[j], op, value)
            mask &= bin_condition(columns[j], op, value)[codes[:, j]]
        out.append((name, mask))
    return out
