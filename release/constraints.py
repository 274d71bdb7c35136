"""Declarative row constraints: ``{name, when: [[column, op, value], ...]}`` matches a row when
every condition holds (a conjunction); ``{name, any_missing: true}`` matches rows with a missing
value. Matching rows are dropped. Nothing is evaluated as code: ops come from a fixed table.

Raw constraints are evaluated on the typed input columns; synthetic constraints on the numbers of
the released bins (``ColumnCoding.values``), the same numbers the criteria use.
"""
from __future__ import annotations

import operator
from typing import Callable, Mapping

import numpy as np

from dpbundle.mechanisms.coding import Coded

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


def synthetic_violations(constraints: list[dict], coded: Coded) -> np.ndarray:
    """Rows of coded data that match any synthetic constraint (on the bins' numbers)."""
    n = coded.codes.shape[0]
    bad = np.zeros(n, dtype=bool)
    for constraint in constraints:
        mask = np.ones(n, dtype=bool)
        for column, op, value in constraint["when"]:
            j = coded.column(column)
            # Evaluate the condition once per code, then look it up per row.
            per_code = OPS[op](coded.columns[j].values, value)
            mask &= per_code[coded.codes[:, j]]
        bad |= mask
    return bad
