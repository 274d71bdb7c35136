"""Checks 3-5 on the released table: size (rows = public n), face privacy (every full record
and every declared quasi-identifier combination at least min_count times, exactly what the spec
promises: no unique row when min_count >= 2, no requirement at all when min_count = 1) and the
synthetic constraints (no row matches a ``when`` conjunction; evaluated on whole bins, see
audit/constraints.py)."""
from __future__ import annotations


import numpy as np

from .bounds import MAX_QUASI_IDENTIFIER_SETS
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_size", "check_face_privacy", "check_constraints", "cell_counts"]



def cell_counts(codes: np.ndarray, sizes: list[int], weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows as flat keys, their counts) over the columns with these domain sizes;
    ``weights``: how many records each row of ``codes`` stands for (default 1)."""
    if codes.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    total = 1
    for s in sizes:
        total *= max(int(s), 1)
    if total < 2**62:
        key = np.zeros(codes.shape[0], dtype=np.int64)
        for j, s in enumerate(sizes):
            key *= int(s)
            key += codes[:, j]
        uniq, inv = np.unique(key, return_inverse=True)
    else:
        _, inv = np.unique(codes, axis=0, return_inverse=True)
        uniq = np.arange(int(inv.max()) + 1)
    counts = np.bincount(inv.reshape(-1), weights=weights, minlength=len(uniq))
    return uniq, np.rint(counts).astype(np.int64)


def check_size(ctx: AuditContext) -> CheckResult:
    r = CheckResult("size")
    try:
        table = ctx.table()
        n = ctx.declared_n()
    except Missing as e:
        r.fail(str(e))
        return r
    declared = {}
    for name in ("manifest.json", "metrics.json"):
        try:
            v = ctx.json(name).get("n")
            declared[name] = v
        except (Missing, AttributeError):
            r.fail(f"{name}: unusable, cannot read its n")
    for name, v in declared.items():
        if v != n:
            r.fail(f"{name}: n = {v!r} differs from the public n {n}")
    r.facts.update({"n": n, "rows": table.rows})
    if table.data is None:
        r.fail("data.csv: unusable, rows not counted")
    elif table.rows != n:
        r.fail(f"data.csv has {table.rows} rows, the public n is {n}")
    if not r.failed:
        r.detail = f"{table.rows} rows = public n"
    return r


def check_face_privacy(ctx: AuditContext) -> CheckResult:
    r = CheckResult("face_privacy")
    try:
        view = ctx.view()
        k = ctx.min_count()
        table = ctx.table()
    except Missing as e:
        r.fail(str(e))
        return r
    if table.data is None:
        r.fail("data.csv: unusable")
        return r
    if table.problems:
        r.fail(f"data.csv: {table.bad_rows} row(s) could not be read; face privacy cannot be verified")
    codes, weights = table.data.rows, table.data.counts
    sizes = [c.size for c in view.columns]
    _, counts = cell_counts(codes, sizes, weights)
    r.facts["min_count"] = k
    r.facts["distinct_records"] = int(counts.size)
    r.facts["unique_rows_allowed"] = k == 1
    low = int(np.sum(counts < k))      # for k >= 2 these include every unique row
    if low:
        uniq = int(np.sum(counts == 1))
        r.fail(f"{low} distinct full record(s) appear fewer than min_count = {k} times "
               f"(smallest count {int(counts.min())}" + (f"; {uniq} unique row(s))" if uniq else ")"))
    qi_sets = _check_quasi_identifiers(r, view, codes, sizes, weights, k)
    if not r.failed:
        r.detail = _face_privacy_detail(k, counts, qi_sets)
    return r


def _check_quasi_identifiers(r: CheckResult, view, codes: np.ndarray, sizes: list[int],
                             weights: np.ndarray, k: int) -> int:
    """k-anonymity (k = min_count) of each declared quasi-identifier set, failures into ``r``;
    the number of sets declared (0 when they cannot be checked)."""
    qis = ((view.spec.get("face_privacy") or {}).get("quasi_identifiers")) or []
    if not isinstance(qis, list):
        r.fail("spec.json: face_privacy.quasi_identifiers is not a list")
        qis = []
    elif len(qis) > MAX_QUASI_IDENTIFIER_SETS:   # each one is a pass over every row
        r.fail(f"spec.json: face_privacy.quasi_identifiers has {len(qis):,} sets, more than the "
               f"limit of {MAX_QUASI_IDENTIFIER_SETS}; k-anonymity not checked")
        qis = []
    pos = {c.name: j for j, c in enumerate(view.columns)}
    for i, qi in enumerate(qis):
        if not isinstance(qi, list) or not qi:
            r.fail(f"spec.json: face_privacy.quasi_identifiers[{i}] is not a list of columns")
            continue
        try:
            idx = list(dict.fromkeys(pos[c] for c in qi))
        except (KeyError, TypeError):
            r.fail(f"spec.json: face_privacy.quasi_identifiers[{i}] names an unknown column ({qi})")
            continue
        _, qc = cell_counts(codes[:, idx], [sizes[j] for j in idx], weights)
        bad = int(np.sum(qc < k))
        if bad:
            r.fail(f"k-anonymity (k = {k}) fails for {qi}: {bad} combination(s) appear fewer than "
                   f"{k} times (smallest {int(qc.min())})")
    return len(qis)


def _face_privacy_detail(k: int, counts: np.ndarray, qi_sets: int) -> str:
    """What the passed check verified, no more: the spec's promise for min_count ``k``."""
    smallest = int(counts.min()) if counts.size else 0
    if k == 1:
        return ("min_count = 1: the spec promises no face privacy (a full record may appear once, "
                f"smallest count {smallest}); nothing to verify")
    return (f"every full record appears >= {k} times (smallest count {smallest}), so no unique row; "
            f"k-anonymity (k = {k}) holds for {qi_sets} quasi-identifier set(s)")


def check_constraints(ctx: AuditContext) -> CheckResult:
    r = CheckResult("constraints")
    try:
        view = ctx.view()
        table = ctx.table()
    except Missing as e:
        r.fail(str(e))
        return r
    if table.data is None:
        r.fail("data.csv: unusable")
        return r
    if table.problems:
        r.fail(f"data.csv: {table.bad_rows} row(s) could not be read; constraints checked on the others")
    cons = view.spec.get("synthetic_constraints") or []
    if not isinstance(cons, list):
        r.fail("spec.json: synthetic_constraints is not a list")
        return r
    codes, weights, first_rows = table.data.rows, table.data.counts, table.data.first
    n = table.data.n
    from .constraints import ConstraintError, conditions_over_limit, violations

    too_many = conditions_over_limit(cons)   # each condition is a pass over every row
    if too_many:
        r.fail(f"spec.json: {too_many}; no constraint checked")
        return r

    checked = 0
    for i, c in enumerate(cons):
        try:
            (name, mask), = violations([c], view.columns, codes, view.names)
        except ConstraintError as e:
            r.fail(str(e).replace("synthetic_constraints[0]", f"synthetic_constraints[{i}]"))
            continue
        checked += 1
        bad = int(weights[mask].sum())
        if bad:
            first = int(first_rows[mask].min()) + 2      # line number in data.csv (header = 1)
            r.fail(f"{bad} row(s) violate synthetic constraint {name!r} (first at data.csv line {first})")
    if not r.failed:
        r.detail = f"{checked} synthetic constraint(s) hold on all {n} rows"
    return r
