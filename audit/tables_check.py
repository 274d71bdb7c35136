"""Check ``tables`` (``publish: tables``): the DP count tables, re-derived from the public files.

dp-tables.json lists the noisy count tables the selected candidate's generator measured. Every
field but the counts is re-derived here from spec.json (the generation epsilon, the selected
configuration's generator and hyperparameters) and the released columns' sizes:

- the structure the generator's public rule allows: PrivBayes, one conditional table per column
  (parents earlier in the network, merged ``2^level`` codes at a time), and with ``oneway:
  measure`` one 1-way table per column after them; ``mst_pure``, the 1-way tables then a
  spanning tree of 2-way tables; PrivSyn, the 1-way tables of the columns with two values or
  more, then at most ``max_pairs`` distinct pairs (hierarchical estimator: a column of more than
  ``pair_values`` values merged ``ceil(k / pair_values)`` codes at a time);
- each table's sensitivity, epsilon (the generator's own split: ``exact.split_float``, PrivSyn's
  ``allocate`` by cells), OpenDP's calibrated discrete Laplace scale, the measurement's purpose,
  and the 95% half-width (computed here from the scale, :func:`half_width`);
- dp-tables.csv, rendered again from dp-tables.json and the released labels, byte for byte.

The counts are the transcript's: the enclave replay refits the generator and requires
dp-tables.json to be the replayed measurements (audit/replay.py).
"""
from __future__ import annotations

import math

from .context import AuditContext, Missing, spec_publishes
from .report import CheckResult

__all__ = ["check_tables", "spec_publishes_tables", "half_width", "expected_tables", "count_scale",
           "TABLES_JSON", "TABLES_CSV"]

TABLES_JSON, TABLES_CSV = "dp-tables.json", "dp-tables.csv"
MEASUREMENT_FIELDS = ("measurement", "sensitivity", "epsilon", "scale")


def spec_publishes_tables(ctx: AuditContext) -> bool | None:
    """Whether spec.json's spec says ``publish: tables`` (None if spec.json is unusable)."""
    return spec_publishes(ctx, "tables")


def count_scale(spec: dict) -> float | None:
    """The DP count's OpenDP scale under the spec's records policy ``dp_count`` (the table the
    generator measured was resized to that count), None under ``declared_public``."""
    from dpbundle.mechanisms.noise import calibrated_laplace_scale
    from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON, DEFAULT_POLICY

    rec = (spec.get("privacy") or {}).get("records") or {}
    if rec.get("policy", DEFAULT_POLICY) != "dp_count":
        return None
    return calibrated_laplace_scale(1, float(rec.get("epsilon", DEFAULT_COUNT_EPSILON)), integer=True)


def half_width(scale: float, level: float = 0.95) -> int:
    """The audit's own 95% half-width of OpenDP's discrete Laplace of ``scale``: the smallest
    integer t >= 0 with P(|Z| > t) <= 1 - level. With a = exp(-1/scale), P(Z = k) is
    (1 - a)/(1 + a) a^|k|, so P(|Z| <= t) = 1 - 2 a^(t+1) / (1 + a); found by bisection on that
    closed form (no closed-form quantile, unlike mechanisms/measured.py)."""
    a = math.exp(-1.0 / scale)

    def covered(t: int) -> bool:
        return 2.0 * math.exp((t + 1) * (-1.0 / scale)) / (1.0 + a) <= 1.0 - level

    hi = 1
    while not covered(hi):
        hi *= 2
    lo = -1                       # covered(lo) is false (t = -1: P(|Z| > -1) = 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mid >= 0 and covered(mid):
            hi = mid
        else:
            lo = mid
    return hi


def check_tables(ctx: AuditContext) -> CheckResult:
    """Check: dp-tables.json's structure and noise, and dp-tables.csv, re-derived."""
    r = CheckResult("tables")
    b = ctx.bundle
    promised, present = spec_publishes_tables(ctx), [f for f in (TABLES_JSON, TABLES_CSV) if b.has(f)]
    if promised and len(present) < 2:
        r.fail(f"spec.json says publish: tables, but the bundle has no "
               f"{' or '.join(f for f in (TABLES_JSON, TABLES_CSV) if f not in present)}")
        return r
    if not promised and present:
        r.fail(f"the bundle has {', '.join(present)}, but spec.json does not say publish: tables")
        return r
    if not promised:
        r.skip("the bundle publishes no DP tables (publish: tables)")
        return r
    try:
        doc, view = ctx.json(TABLES_JSON), ctx.view()
    except Missing as e:
        r.fail(f"cannot read what the check needs: {e}")
        return r
    from .schema_util import validate

    for p in validate(doc, "dp-tables"):
        r.fail(f"{TABLES_JSON}: {p}")
    if r.failed:
        return r
    names, sizes = list(view.names), [c.size for c in view.columns]
    for p in _cell_problems(doc, names, sizes):
        r.fail(p)
    if r.failed:
        return r
    try:
        want, problems = expected_tables(doc, view.configuration, view.spec, names, sizes)
    except (KeyError, TypeError, ValueError) as e:
        r.fail(f"spec.json: the configuration's generator cannot be built ({e})")
        return r
    for p in problems:
        r.fail(p)
    if r.failed:
        return r
    resized = _resize(r, doc, view.spec)
    level = 0.95 if resized is None else 0.975
    extra = resized or 0
    for t, w in zip(doc["tables"], want):
        wrong = [f for f in MEASUREMENT_FIELDS if t[f] != w[f]]
        for field in wrong:
            r.fail(f"{TABLES_JSON}: table {t['id']}: {field} {t[field]!r}, but the spec and the "
                   f"configuration give {w[field]!r}")
        if not wrong and t["half_width"] != half_width(t["scale"], level) + extra:
            r.fail(f"{TABLES_JSON}: table {t['id']}: half_width {t['half_width']}, but the 95% interval "
                   f"needs {half_width(t['scale'], level) + extra} (the discrete Laplace of scale "
                   f"{t['scale']!r} at level {level}" + (f", plus {extra} for the resize)" if resized else ")"))
    if r.failed:
        return r
    _check_csv(ctx, r, doc, view)
    if not r.failed:
        cells = sum(len(t["counts"]) for t in doc["tables"])
        r.facts.update({"tables": len(doc["tables"]), "cells": cells,
                        "half_widths": [t["half_width"] for t in doc["tables"]]})
        r.detail = (f"{len(doc['tables'])} tables ({cells:,} cells): structure, epsilons, noise scales "
                    "and 95% intervals re-derived from the spec and the configuration; dp-tables.csv "
                    "rendered again byte for byte (the counts themselves: enclave replay)")
    return r


def _resize(r: CheckResult, doc: dict, spec: dict) -> int | None:
    """The count's share of every half-width under ``dp_count`` (None under declared_public):
    ``half_width(count scale, 0.975)``; dp-tables.json's ``resize`` must state it (failing ``r``)."""
    scale = count_scale(spec)
    if scale is None:
        if "resize" in doc:
            r.fail(f"{TABLES_JSON}: resize stated, but the records policy is declared_public (no resize)")
        return None
    want = {"count_scale": scale, "half_width": half_width(scale, 0.975)}
    if doc.get("resize") != want:
        r.fail(f"{TABLES_JSON}: resize {doc.get('resize')!r}, but the records policy dp_count gives {want!r} "
               "(the table was resized to the DP count: its noise widens every interval)")
    return want["half_width"]


def _cell_problems(doc: dict, names: list[str], sizes: list[int]) -> list[str]:
    """Ids in order; columns released and distinct; sizes ceil(k / merge); one count per cell."""
    out = []
    for i, t in enumerate(doc["tables"]):
        where = f"{TABLES_JSON}: tables[{i}]"
        if t["id"] != f"t{i + 1:02d}":
            out.append(f"{where}: id {t['id']!r}, expected {f't{i + 1:02d}'!r} (ids number the tables in order)")
        cols = t["columns"]
        if len(set(cols)) != len(cols) or any(c not in names for c in cols):
            out.append(f"{where}: columns must be distinct released columns")
            continue
        if not len(t["merge"]) == len(t["sizes"]) == len(cols):
            out.append(f"{where}: one merge factor and one size per column")
            continue
        want = [-(-sizes[names.index(c)] // g) for c, g in zip(cols, t["merge"])]
        if t["sizes"] != want:
            out.append(f"{where}: sizes {t['sizes']}, but the columns' values merged as stated give {want}")
        elif len(t["counts"]) != math.prod(want):
            out.append(f"{where}: {len(t['counts'])} counts for {math.prod(want)} cells")
    return out


def expected_tables(doc: dict, config: dict, spec: dict, names: list[str],
                    sizes: list[int]) -> tuple[list[dict], list[str]]:
    """(the measurement fields each table must have, problems of the structure) for the
    configuration's generator (module docstring)."""
    from dpbundle.mechanisms import exact
    from dpbundle.mechanisms.noise import calibrated_laplace_scale

    from .model_check import config_generator

    gen_type = (config.get("generator") or {}).get("type")
    generator = config_generator(config, float(spec["privacy"]["epsilon_generation"]), spec, names)
    tables = [([names.index(c) for c in t["columns"]], list(t["merge"])) for t in doc["tables"]]
    d = len(names)
    if gen_type == "privbayes":
        want, problems = _privbayes(tables, d, sizes, generator, exact)
    elif gen_type == "mst_pure":
        want, problems = _mst(tables, d, generator, exact)
    elif gen_type == "privsyn":
        want, problems = _privsyn(tables, sizes, generator)
    else:
        return [], [f"spec.json: generator {gen_type!r} does not publish tables"]
    if problems:
        return [], problems
    if len(want) != len(tables):
        return [], [f"{TABLES_JSON}: {len(tables)} tables, but the generator measures {len(want)}"]
    for w in want:
        w["scale"] = calibrated_laplace_scale(w["sensitivity"], w["epsilon"], vector=True, integer=True)
    return want, []


def _privbayes(tables, d: int, sizes: list[int], gen, exact) -> tuple[list[dict], list[str]]:
    """One conditional table per column (attribute last, parents earlier in the network, merged
    2^level codes), then with ``oneway: measure`` the d 1-way tables."""
    from dpbundle.mechanisms.oneway import COLUMN_SENSITIVITY
    from dpbundle.mechanisms.privbayes import count_table_sensitivity

    if len(tables) < d:
        return [], [f"{TABLES_JSON}: {len(tables)} tables, but PrivBayes measures one per column ({d})"]
    problems, seen, want = [], [], []
    eps_table = exact.split_float(gen.epsilon_2, d)
    for i, (cols, merge) in enumerate(tables[:d]):
        x, parents = cols[-1], list(zip(cols[:-1], merge[:-1]))
        if merge[-1] != 1 or x in seen or (i == 0 and parents):
            problems.append(f"{TABLES_JSON}: tables[{i}]: not a conditional table of the network "
                            "(each column once, last and unmerged; the first without parents)")
        for p, g in parents:
            if p not in seen or g & (g - 1) or g >= 2 * sizes[p]:
                problems.append(f"{TABLES_JSON}: tables[{i}]: parent {p} must come earlier in the "
                                "network and be merged 2^level codes at a time")
        seen.append(x)
        want.append({"measurement": f"privbayes: conditional table of column {x}",
                     "sensitivity": int(count_table_sensitivity()), "epsilon": eps_table})
    if getattr(gen, "oneway", "none") == "measure":
        eps_col = exact.split_float(float(gen.epsilon_oneway), d)
        for j in range(d):
            if d + j < len(tables) and tables[d + j] != ([j], [1]):
                problems.append(f"{TABLES_JSON}: tables[{d + j}]: expected the 1-way table of column {j}")
            want.append({"measurement": f"privbayes: one-way marginal of column {j}",
                         "sensitivity": int(COLUMN_SENSITIVITY), "epsilon": eps_col})
    return want, problems


def _mst(tables, d: int, gen, exact) -> tuple[list[dict], list[str]]:
    """The d 1-way tables (one vector draw, sensitivity 2d), then d - 1 2-way tables forming a
    spanning tree."""
    from dpbundle.mechanisms.mst import oneway_sensitivity

    problems, want = [], []
    if tables[:d] != [([j], [1]) for j in range(d)]:
        problems.append(f"{TABLES_JSON}: mst_pure measures the 1-way tables of every column first, in order")
    comp = list(range(d))

    def find(v: int) -> int:
        while comp[v] != v:
            v = comp[v]
        return v

    eps_pair = exact.split_float(gen.epsilon_2, d - 1) if d > 1 else 0.0
    for i, (cols, merge) in enumerate(tables[d:], start=d):
        if len(cols) != 2 or cols[0] >= cols[1] or merge != [1, 1] or find(cols[0]) == find(cols[1]):
            problems.append(f"{TABLES_JSON}: tables[{i}]: not an edge of a spanning tree (two columns "
                            "in order, unmerged, joining two parts)")
            continue
        comp[find(cols[0])] = find(cols[1])
    want = [{"measurement": "mst_pure: 1-way marginals", "sensitivity": int(oneway_sensitivity(d)),
             "epsilon": gen.epsilon_1} for _ in range(d)]
    want += [{"measurement": f"mst_pure: 2-way marginal [{c[0]}, {c[1]}]", "sensitivity": 2,
              "epsilon": eps_pair} for c, _ in tables[d:]]
    if len(tables) != 2 * d - 1:
        problems.append(f"{TABLES_JSON}: mst_pure measures {2 * d - 1} tables, not {len(tables)}")
    return want, problems


def _privsyn(tables, sizes: list[int], gen) -> tuple[list[dict], list[str]]:
    """The 1-way tables of the columns of two values or more, then at most max_pairs distinct
    pairs (merged by the hierarchical estimator's public rule); epsilons by ``allocate``."""
    from dpbundle.mechanisms import estimation
    from dpbundle.mechanisms.privsyn import allocate

    ones = [([j], [1]) for j, k in enumerate(sizes) if k >= 2]
    problems = []
    if tables[:len(ones)] != ones:
        problems.append(f"{TABLES_JSON}: privsyn measures the 1-way tables of the columns with two "
                        "values or more first, in order")
    hier = gen.estimator == "hierarchical"
    factor = [estimation.merge_factor(k, gen.pair_values) if hier else 1 for k in sizes]
    pairs = tables[len(ones):]
    if gen.max_pairs is not None and len(pairs) > gen.max_pairs:
        problems.append(f"{TABLES_JSON}: {len(pairs)} pairs, more than max_pairs {gen.max_pairs}")
    if len({tuple(c) for c, _ in pairs}) != len(pairs):
        problems.append(f"{TABLES_JSON}: a pair of columns is measured twice")
    for i, (cols, merge) in enumerate(pairs, start=len(ones)):
        if len(cols) != 2 or cols[0] >= cols[1] or merge != [factor[cols[0]], factor[cols[1]]]:
            problems.append(f"{TABLES_JSON}: tables[{i}]: not a pair of columns in order, merged "
                            f"as the estimator's rule says")
    if problems:
        return [], problems
    cells = [sizes[c[0]] if len(c) == 1 else math.prod(-(-sizes[j] // g) for j, g in zip(c, m))
             for c, m in tables]
    want = []
    for (cols, merge), e in zip(tables, allocate(gen.epsilon_measure, cells)):
        what = (f"privsyn: 1-way marginal of column {cols[0]}" if len(cols) == 1
                else f"privsyn: 2-way marginal of columns {cols}")
        if len(cols) == 2 and (merge[0] > 1 or merge[1] > 1):
            what += f" (codes merged {merge[0]} and {merge[1]} at a time)"
        want.append({"measurement": what, "sensitivity": 2, "epsilon": e})
    return want, []


def _check_csv(ctx: AuditContext, r: CheckResult, doc: dict, view) -> None:
    """dp-tables.csv must be dp-tables.json rendered with the released labels, byte for byte."""
    from dpbundle.templates.metadata.dp_tables import dp_tables_csv

    try:
        want = dp_tables_csv(doc, [(c.name, list(c.labels)) for c in view.columns])
        got = ctx.bundle.read_bytes(TABLES_CSV)
    except (Missing, KeyError, TypeError, ValueError) as e:
        r.fail(f"{TABLES_CSV}: cannot be re-derived ({e})")
        return
    if got != want:
        line = next((i + 1 for i, (a, b) in enumerate(zip(got.split(b"\n"), want.split(b"\n"))) if a != b),
                    min(got.count(b"\n"), want.count(b"\n")) + 1)
        r.fail(f"{TABLES_CSV}: not dp-tables.json rendered with the released labels (first difference "
               f"at line {line}): a count, an interval or a label was changed")
