"""Checks 6-7: budget arithmetic (epsilons, noise scales, recomputed sensitivities and derived
thresholds) and acceptance (every DP value below its threshold)."""
from __future__ import annotations

import math

from .context import AuditContext, Missing, need, need_number
from .report import CheckResult
from .sensitivity import Unverifiable, derive_threshold, quantile_releases, recompute_sensitivity

__all__ = ["check_budget", "check_acceptance", "REL_TOL", "close"]

REL_TOL = 1e-9       # the producer may nudge a scale up by a few ulps for OpenDP's map
OPENDP_TOL = 1e-6    # OpenDP's own total may exceed the exact sum by float rounding



def _check_scale(w: str, row: dict, entry: dict, sens: float, eps: float, scale: float,
                 std: float, r) -> None:
    """Laplace-type rows: scale = sensitivity / epsilon, std = sqrt(2) scale. Report-noisy-max
    rows (quantile): R releases at epsilon / R, scale = 2 sensitivity R / epsilon, std = scale."""
    if row.get("mechanism") == "exponential_mechanism":
        if entry.get("type") != "quantile":
            r.fail(f"{w}: mechanism exponential_mechanism for a {entry.get('type')!r} criterion")
            return
        try:
            R = quantile_releases(entry, w)
        except Unverifiable as e:
            r.fail(str(e))
            return
        want = 2.0 * sens * R / eps
        if not close(scale, want):
            r.fail(f"{w}: noise scale {_fmt(scale)} != 2 x sensitivity x releases / epsilon = "
                   f"2 x {_fmt(sens)} x {R} / {_fmt(eps)} = {_fmt(want)}")
        if not close(std, scale):
            r.fail(f"{w}: noise std {_fmt(std)} != scale {_fmt(scale)} (exponential noise)")
        return
    if not close(scale, sens / eps):
        r.fail(f"{w}: noise scale {_fmt(scale)} != sensitivity / epsilon = "
               f"{_fmt(sens)} / {_fmt(eps)} = {_fmt(sens / eps)}")
    if not close(std, math.sqrt(2.0) * scale):
        r.fail(f"{w}: noise std {_fmt(std)} != sqrt(2) x scale = {_fmt(math.sqrt(2.0) * scale)}")
    if row.get("mechanism") not in ("laplace", "functional_mechanism", "sufficient_statistics"):
        r.warn(f"{w}: mechanism {row.get('mechanism')!r} (the audit checks scale = sensitivity / epsilon)")

def close(a: float, b: float, rel: float = REL_TOL) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


def _fmt(x) -> str:
    return format(float(x), ".10g") if isinstance(x, (int, float)) else repr(x)


def _rows(metrics) -> list[dict]:
    rows = need(metrics, "criteria", where="metrics.json")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise Missing("metrics.json: criteria is not a list of objects")
    return rows


def check_budget(ctx: AuditContext) -> CheckResult:
    r = CheckResult("budget")
    try:
        metrics = ctx.json("metrics.json")
        budget = ctx.json("budget.json")
        view = ctx.view()
        rows = _rows(metrics)
        n = ctx.declared_n()
    except Missing as e:
        r.fail(str(e))
        return r
    spec = view.spec
    acceptance = spec.get("acceptance")
    if not isinstance(acceptance, list):
        r.fail("spec.json: spec.acceptance is not a list")
        return r
    entries = {e.get("id"): e for e in acceptance if isinstance(e, dict)}
    row_ids = [row.get("id") for row in rows]
    spec_ids = [e.get("id") for e in acceptance if isinstance(e, dict)]
    if row_ids != spec_ids:
        r.fail(f"metrics.json criteria {row_ids} differ from the spec's acceptance entries {spec_ids}")
    try:
        codes = ctx.codes()
        codes_note = None
    except Missing as e:
        codes, codes_note = None, str(e)
    # -- per criterion -------------------------------------------------------------------
    recomputed = {}
    for row in rows:
        cid = row.get("id")
        w = f"metrics.json criterion {cid}"
        entry = entries.get(cid)
        try:
            eps = need_number(row, "epsilon", where=w)
            sens = need_number(row, "sensitivity", where=w)
            scale = need_number(row, "noise_scale", where=w)
            std = need_number(row, "noise_std", where=w)
            thr = need_number(row, "threshold", where=w)
        except Missing as e:
            r.fail(str(e))
            continue
        if eps <= 0:
            r.fail(f"{w}: epsilon {_fmt(eps)} is not positive")
            continue
        if entry is None:
            r.fail(f"{w}: no acceptance entry with this id in the spec")
            continue
        _check_scale(w, row, entry, sens, eps, scale, std, r)
        if row.get("type") != entry.get("type"):
            r.fail(f"{w}: type {row.get('type')!r} differs from the spec's {entry.get('type')!r}")
        spec_eps = entry.get("epsilon")
        if not isinstance(spec_eps, (int, float)) or not close(eps, float(spec_eps)):
            r.fail(f"{w}: epsilon {_fmt(eps)} differs from the spec's {_fmt(spec_eps)}")
        try:
            want_thr, stake, tfacts = derive_threshold(entry)
            if not close(thr, want_thr):
                r.fail(f"{w}: threshold {_fmt(thr)} != {_fmt(want_thr)} recomputed from the spec")
            if stake is not None:
                got_stake = row.get("stakeholder_threshold")
                if not isinstance(got_stake, (int, float)) or not close(float(got_stake), stake):
                    r.fail(f"{w}: stakeholder_threshold {got_stake!r} differs from the spec's {_fmt(stake)}")
                tin = row.get("threshold_inputs")
                if not isinstance(tin, dict):
                    r.fail(f"{w}: a derived threshold without threshold_inputs")
                else:
                    _threshold_inputs(w, entry, tin, thr, tfacts, r)
                recomputed.setdefault(cid, {})["threshold"] = want_thr
        except Unverifiable as e:
            r.fail(f"{w}: threshold cannot be recomputed: {e}")
        try:
            want, facts = recompute_sensitivity(entry, row, view, codes, n)
        except Unverifiable as e:
            msg = str(e)
            if codes is None and codes_note and "data.csv" in msg:
                msg += f" ({codes_note})"
            r.fail(f"{w}: sensitivity cannot be recomputed: {msg}")
            continue
        for k, v in facts.items():
            if k.startswith("declared_"):
                base = k[len("declared_"):]
                r.fail(f"{w}: sensitivity_inputs.{base} = {v!r}, recomputed {facts.get(base)!r}")
        recomputed.setdefault(cid, {})["sensitivity"] = want
        recomputed[cid].update({k: v for k, v in facts.items() if k != "note"})
        if not close(sens, want):
            r.fail(f"{w}: sensitivity {_fmt(sens)} != {_fmt(want)} recomputed from the public bundle "
                   f"({', '.join(f'{k}={v}' for k, v in facts.items() if k != 'note')})")
    r.facts["recomputed"] = recomputed
    # -- the budget ---------------------------------------------------------------------
    try:
        _budget_arithmetic(budget, rows, spec, r)
    except Missing as e:
        r.fail(str(e))
    if not r.failed:
        r.detail = (f"total epsilon {_fmt(r.facts.get('total_epsilon'))} <= cap "
                    f"{_fmt(r.facts.get('epsilon_cap'))}; {len(rows)} criteria: scales, stds, "
                    f"sensitivities and thresholds recomputed")
    return r


def _budget_arithmetic(budget: dict, rows: list[dict], spec: dict, r: CheckResult) -> None:
    W = "budget.json"
    priv = spec.get("privacy") if isinstance(spec.get("privacy"), dict) else {}
    # evaluation
    eps_rows = [float(row["epsilon"]) for row in rows
                if isinstance(row.get("epsilon"), (int, float)) and not isinstance(row.get("epsilon"), bool)]
    eps_eval_rows = math.fsum(eps_rows)
    eps_eval = need_number(budget, "evaluation", "epsilon", where=W)
    if not close(eps_eval, eps_eval_rows):
        r.fail(f"{W}: evaluation epsilon {_fmt(eps_eval)} != sum of the criteria's epsilons {_fmt(eps_eval_rows)}")
    crit = need(budget, "evaluation", "criteria", where=W)
    if not isinstance(crit, list):
        raise Missing(f"{W}: evaluation.criteria is not a list")
    by_row = {row.get("id"): row.get("epsilon") for row in rows}
    listed = [c.get("id") if isinstance(c, dict) else None for c in crit]
    if listed != [row.get("id") for row in rows]:
        r.fail(f"{W}: evaluation.criteria {listed} differ from metrics.json's {list(by_row)}")
    for c in crit:
        if isinstance(c, dict) and c.get("id") in by_row:
            a, b = c.get("epsilon"), by_row[c.get("id")]
            if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and close(float(a), float(b))):
                r.fail(f"{W}: criterion {c.get('id')} epsilon {a!r} differs from metrics.json's {b!r}")
    acc = spec.get("acceptance") or []
    spec_eval = math.fsum(float(e.get("epsilon", 0)) for e in acc if isinstance(e, dict)
                          and isinstance(e.get("epsilon"), (int, float)))
    if not close(eps_eval, spec_eval):
        r.fail(f"{W}: evaluation epsilon {_fmt(eps_eval)} != the spec's criteria sum {_fmt(spec_eval)}")
    # generation
    eps_gen = need_number(budget, "generation", "epsilon", where=W)
    spec_gen = priv.get("epsilon_generation")
    if not isinstance(spec_gen, (int, float)) or not close(eps_gen, float(spec_gen)):
        r.fail(f"{W}: generation epsilon {_fmt(eps_gen)} differs from the spec's {spec_gen!r}")
    parts = budget.get("generation", {}).get("parts")
    if isinstance(parts, list) and parts:
        vals = [p.get("epsilon") for p in parts if isinstance(p, dict)]
        if all(isinstance(v, (int, float)) for v in vals):
            s = math.fsum(float(v) for v in vals)
            if not close(s, eps_gen, 1e-6):
                r.fail(f"{W}: generation parts sum to {_fmt(s)}, not the generation epsilon {_fmt(eps_gen)}")
        else:
            r.fail(f"{W}: generation.parts has an entry without a numeric epsilon")
    # pre-selection
    pre = budget.get("pre_selection", [])
    if not isinstance(pre, list):
        raise Missing(f"{W}: pre_selection is not a list")
    pre_vals = [p.get("epsilon") for p in pre if isinstance(p, dict)]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in pre_vals) or len(pre_vals) != len(pre):
        r.fail(f"{W}: pre_selection has an entry without a numeric epsilon")
        pre_vals = [v for v in pre_vals if isinstance(v, (int, float))]
    eps_pre = math.fsum(float(v) for v in pre_vals)
    spec_pre = priv.get("pre_selection", []) or []
    spec_pre_sum = math.fsum(float(p.get("epsilon", 0)) for p in spec_pre if isinstance(p, dict))
    if not close(eps_pre, spec_pre_sum) and not (eps_pre == 0 and spec_pre_sum == 0):
        r.fail(f"{W}: pre-selection epsilons sum to {_fmt(eps_pre)}, the spec's to {_fmt(spec_pre_sum)}")
    # per iteration, selection, total, cap
    per = need_number(budget, "per_iteration_epsilon", where=W)
    if not close(per, eps_gen + eps_eval):
        r.fail(f"{W}: per-iteration epsilon {_fmt(per)} != generation + evaluation = {_fmt(eps_gen + eps_eval)}")
    factor = need_number(budget, "selection", "factor", where=W)
    if factor != 2:
        r.fail(f"{W}: selection factor {_fmt(factor)}, the private selection with a known threshold costs 2")
    stop = budget.get("selection", {}).get("stop_probability")
    spec_stop = (priv.get("selection") or {}).get("stop_probability", 0.0) if isinstance(priv.get("selection"), dict) else 0.0
    if isinstance(stop, (int, float)) and isinstance(spec_stop, (int, float)) and not close(float(stop), float(spec_stop)) \
            and not (stop == 0 and spec_stop == 0):
        r.fail(f"{W}: stop_probability {stop!r} differs from the spec's {spec_stop!r}")
    total = need_number(budget, "total_epsilon", where=W)
    want_total = 2.0 * (eps_gen + eps_eval) + eps_pre
    if not close(total, want_total):
        r.fail(f"{W}: total epsilon {_fmt(total)} != 2 x ({_fmt(eps_gen)} + {_fmt(eps_eval)}) + "
               f"{_fmt(eps_pre)} = {_fmt(want_total)}")
    cap = need_number(budget, "epsilon_cap", where=W)
    spec_cap = priv.get("epsilon_cap")
    if not isinstance(spec_cap, (int, float)) or not close(cap, float(spec_cap)):
        r.fail(f"{W}: epsilon cap {_fmt(cap)} differs from the spec's {spec_cap!r}")
    if max(total, want_total) > cap * (1 + 1e-12):
        r.fail(f"{W}: total epsilon {_fmt(max(total, want_total))} exceeds the cap {_fmt(cap)}")
    od = budget.get("total_epsilon_opendp")
    if od is not None:
        if isinstance(od, bool) or not isinstance(od, (int, float)):
            r.fail(f"{W}: total_epsilon_opendp {od!r} is not a number")
        else:
            if not close(float(od), want_total, OPENDP_TOL):
                r.fail(f"{W}: OpenDP's total {_fmt(od)} differs from the composed total {_fmt(want_total)}")
            if float(od) > cap * (1 + 1e-9):
                r.fail(f"{W}: OpenDP's total {_fmt(od)} exceeds the cap {_fmt(cap)}")
    if budget.get("input_metric") != "change_one_distance":
        r.fail(f"{W}: input_metric {budget.get('input_metric')!r}, expected 'change_one_distance' "
               "(bounded neighbours, n public)")
    unit = (spec.get("release") or {}).get("unit_of_privacy") if isinstance(spec.get("release"), dict) else None
    if isinstance(unit, str) and budget.get("unit_of_privacy") != unit:
        r.warn(f"{W}: unit_of_privacy {budget.get('unit_of_privacy')!r} differs from the spec's {unit!r}")
    r.facts.update({"epsilon_generation": eps_gen, "epsilon_evaluation": eps_eval,
                    "epsilon_pre_selection": eps_pre, "total_epsilon": total, "epsilon_cap": cap})


def check_acceptance(ctx: AuditContext) -> CheckResult:
    r = CheckResult("acceptance")
    try:
        rows = _rows(ctx.json("metrics.json"))
    except Missing as e:
        r.fail(str(e))
        return r
    if not rows:
        r.fail("metrics.json: no criteria")
    for row in rows:
        cid = row.get("id")
        w = f"criterion {cid}"
        try:
            v = need_number(row, "dp_value", where=w)
            t = need_number(row, "threshold", where=w)
        except Missing as e:
            r.fail(str(e))
            continue
        if not v < t:
            r.fail(f"{w}: DP value {_fmt(v)} is not below its threshold {_fmt(t)}")
        if row.get("passed") is not True:
            r.fail(f"{w}: marked passed = {row.get('passed')!r}")
    if not r.failed:
        r.detail = f"all {len(rows)} DP values below their thresholds"
    return r


def _threshold_inputs(w: str, entry: dict, tin: dict, thr: float, tfacts: dict, r: CheckResult) -> None:
    """The recorded inputs of a derived threshold agree with the spec and reproduce it."""
    t = entry.get("threshold") if isinstance(entry.get("threshold"), dict) else {}
    spec_values = {"stakeholder": t.get("stakeholder"), "false_positive": t.get("false_positive"),
                   "assumed_min_count": t.get("assumed_min_count"),
                   "assumed_sensitivity": tfacts.get("assumed_sensitivity"),
                   "epsilon": entry.get("epsilon"), "clip": entry.get("clip")}
    for key, want in spec_values.items():
        got = tin.get(key)
        if got is None or want is None:
            continue
        if (isinstance(got, bool) or not isinstance(got, (int, float))
                or not isinstance(want, (int, float)) or not close(float(got), float(want))):
            r.fail(f"{w}: threshold_inputs.{key} = {got!r}, recomputed from the spec {_fmt(want)}")
    # the threshold from the recorded inputs (the spec's for any input not recorded)
    rebuilt = {"id": entry.get("id"), "type": entry.get("type"),
               "epsilon": tin.get("epsilon", entry.get("epsilon")),
               "clip": tin.get("clip", entry.get("clip")),
               "threshold": {**{k: v for k, v in t.items() if k != "assumed_sensitivity"},
                             **{k: tin[k] for k in ("derive", "stakeholder", "false_positive",
                                                    "assumed_min_count", "assumed_sensitivity")
                                if k in tin}}}
    try:
        from_inputs, _, _ = derive_threshold(rebuilt)
    except Unverifiable as e:
        r.fail(f"{w}: the threshold cannot be recomputed from its threshold_inputs ({e})")
        return
    if not close(thr, from_inputs):
        r.fail(f"{w}: threshold {_fmt(thr)} != {_fmt(from_inputs)} recomputed from its threshold_inputs")
