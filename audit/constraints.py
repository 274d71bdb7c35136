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

from .labels import AuditColumn

__all__ = ["OPS", "bin_condition", "violations", "ConstraintError"]

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
    missing = [x for x in names if x not in cats]
    if missing:
        raise ConstraintError(f"column {col.name!r}: {missing[0]!r} is not one of its categories ({', '.join(cats)})")
    return np.array([cats.index(x) for x in names], dtype=np.int64)


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
        out = np.zeros(col.size, dtype=bool)
        if col.integer:
            wanted = set(nums)
            for i, (a, b) in enumerate(zip(col.lower, col.upper)):
                if math.isfinite(a) and math.isfinite(b):
                    out[i] = all(float(x) in wanted for x in range(int(a), int(b)))
        return out
    if op == "not in":
        out = np.ones(col.size, dtype=bool)
        for v in nums:
            out &= _one(col, "!=", v)
        return out
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


def violations(constraints: list, columns: list[AuditColumn], codes: np.ndarray,
               names: list[str]) -> list[tuple[str, np.ndarray]]:
    """(constraint name, row mask) for every constraint; ConstraintError if one is unusable."""
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
            if col not in names:
                raise ConstraintError(f"{where}: unknown released column {col!r}")
            if op not in OPS and op not in SET_OPS:
                raise ConstraintError(f"{where}: unknown operator {op!r}")
            j = names.index(col)
            _check_value(where, columns[j], op, value)
            mask &= bin_condition(columns[j], op, value)[codes[:, j]]
        out.append((name, mask))
    return out
