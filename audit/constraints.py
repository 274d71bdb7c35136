"""Synthetic constraints, evaluated by the audit on whole bins (docs/internals.md): a released
row matches a condition ``[column, op, value]`` when *every* value its bin stands for does.

Bins of an integer source ``[a, b)`` hold the integers a..b-1; an open bin extends to -inf/+inf;
bins of a float source hold the real interval [a, b); categories compare their numbers (the
spec's ``values``). A row violates a constraint when it matches every condition of its ``when``.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .labels import AuditColumn

__all__ = ["OPS", "bin_condition", "violations", "ConstraintError"]

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
       "==": operator.eq, "!=": operator.ne}


class ConstraintError(ValueError):
    """A constraint the audit cannot evaluate (unknown column or operator, bad value)."""


def bin_condition(col: AuditColumn, op: str, value: float) -> np.ndarray:
    """Per code of ``col``: does ``x op value`` hold for every value x of the bin?"""
    if op not in OPS:
        raise ConstraintError(f"unknown operator {op!r}")
    v = float(value)
    if not col.ordered or col.lower is None or col.upper is None:
        return OPS[op](col.numbers, v)
    lo, up = col.lower, col.upper
    if col.integer:
        top = np.where(np.isfinite(up), up - 1, up)      # largest integer of the bin
        lo_i = lo                                          # smallest integer (or -inf)
        if op == "<":
            return top < v
        if op == "<=":
            return top <= v
        if op == ">":
            return lo_i > v
        if op == ">=":
            return lo_i >= v
        inside = (lo_i <= v) & (v <= top) & (float(v).is_integer())
        if op == "==":
            return inside & (lo_i == top)
        return ~inside                                     # "!="
    # real intervals [lo, up)
    if op == "<":
        return up <= v
    if op == "<=":
        return up <= v
    if op == ">":
        return lo > v
    if op == ">=":
        return lo >= v
    inside = (lo <= v) & (v < up)
    if op == "==":
        return np.zeros(col.size, dtype=bool)
    return ~inside


def violations(constraints: list, columns: list[AuditColumn], codes: np.ndarray,
               names: list[str]) -> list[tuple[str, np.ndarray]]:
    """(constraint name, row mask) for every constraint; ConstraintError if one is unusable."""
    out = []
    for i, c in enumerate(constraints):
        name = c.get("name", f"#{i}") if isinstance(c, dict) else f"#{i}"
        when = c.get("when") if isinstance(c, dict) else None
        if not isinstance(when, list) or not when:
            raise ConstraintError(f"synthetic_constraints[{i}] ({name}): no 'when' conjunction")
        mask = np.ones(codes.shape[0], dtype=bool)
        for cond in when:
            if not (isinstance(cond, list) and len(cond) == 3):
                raise ConstraintError(f"synthetic_constraints[{i}] ({name}): malformed condition {cond!r}")
            col, op, value = cond
            if col not in names:
                raise ConstraintError(f"synthetic_constraints[{i}] ({name}): unknown released column {col!r}")
            if op not in OPS:
                raise ConstraintError(f"synthetic_constraints[{i}] ({name}): unknown operator {op!r}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConstraintError(f"synthetic_constraints[{i}] ({name}): value {value!r} is not a number")
            j = names.index(col)
            mask &= bin_condition(columns[j], op, value)[codes[:, j]]
        out.append((name, mask))
    return out
