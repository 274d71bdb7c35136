"""Checks 6-7: budget arithmetic (epsilons, noise scales, recomputed sensitivities and derived
thresholds) and acceptance (every DP value below its threshold)."""
from __future__ import annotations

import math
from fractions import Fraction

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON
from dpbundle.templates.metadata.registry_entry import composition_formula

from .bounds import MAX_CRITERIA, MAX_DATA_PASSES
from .context import AuditContext, Missing, need, need_number
from .edges_check import check_edges
from .report import CheckResult, StopCheck
from .sensitivity import (Unverifiable, data_passes, derive_threshold, quantile_releases,
                          recompute_sensitivity)

__all__ = ["check_budget", "check_acceptance", "REL_TOL", "close"]

REL_TOL = 1e-9       # the producer may nudge a scale up by a few ulps for OpenDP's map
OPENDP_TOL = 1e-6    # OpenDP's own total may exceed the exact sum by float rounding
EPSILON_CEILING = 20  # above it a spec must acknowledge the weak guarantee (docs/spec.md)
REGISTRY_ENTRY_NAME = "registry-entry.yaml"



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
    """Check 6: every criterion's scale, sensitivity and threshold, then the budget's sums."""
    r = CheckResult("budget")
    try:
        budget, view, rows, n = _budget_inputs(ctx)
        entries = _acceptance_entries(view, rows, r)
    except StopCheck as e:
        r.fail(str(e))
        return r
    try:
        codes = ctx.codes()
        codes_note = None
    except Missing as e:
        codes, codes_note = None, str(e)
    recomputed: dict = {}
    for row in rows:
        _check_criterion(row, entries.get(row.get("id")), (view, codes, codes_note, n), r, recomputed)
    r.facts["recomputed"] = recomputed
    try:
        _budget_arithmetic(budget, rows, view.spec, r, n)
    except Missing as e:
        r.fail(str(e))
    _registry_entry_numbers(ctx, budget, r)
    _rederived_words(ctx, budget, view.spec, r)
    _composed_spends(ctx, budget, r)
    if not r.failed:
        policy = {"dp_count": f"n is a DP count (epsilon {_fmt(r.facts.get('epsilon_count'))})",
                  "declared_public": "n declared public (the count of plausible records, "
                                     "published exactly)"}.get(r.facts.get("records_policy"), "")
        r.detail = (f"total epsilon {_fmt(r.facts.get('total_epsilon'))} <= cap "
                    f"{_fmt(r.facts.get('epsilon_cap'))}; {policy}; {len(rows)} criteria: scales, "
                    f"stds, sensitivities and thresholds recomputed")
        if r.facts.get("epsilon_edges"):
            r.detail += (f"; bins drawn under DP (epsilon {_fmt(r.facts['epsilon_edges'])}): candidates, "
                         "quantiles, sensitivities, epsilons and noise scales recomputed")
        if "composed_epsilon" in r.facts:
            k = r.facts["spends_on_registry"]
            r.detail += (f"; composed epsilon {_fmt(r.facts['composed_epsilon'])} over the {k} spend(s) "
                         f"recorded on the registry ({k - 1} earlier, as the manifest states)")
    return r


def _composed_spends(ctx: AuditContext, budget: dict, r: CheckResult) -> None:
    """manifest.json's ``ledger`` (dpbundle 0.3 and later): ``earlier_epsilons`` lists
    ``spends_on_registry`` - 1 epsilons (each finite and >= 0) and ``composed_epsilon`` is
    budget.json's total_epsilon plus their sum, summed exactly as decimals, then the nearest
    float. A 0.3 bundle whose ledger lacks them fails; a bundle without a ledger states nothing
    to check. Whether the earlier epsilons are the ledger's own is checked by ``--ledger``."""
    from .checks_integrity import SIGNED_CHECKSUMS_SINCE, made_since

    try:
        manifest = ctx.json("manifest.json")
    except Missing:
        return                      # the integrity check reports it
    ledger = manifest.get("ledger") if isinstance(manifest, dict) else None
    if not isinstance(ledger, dict):
        return
    w = "manifest.json: ledger"
    if "earlier_epsilons" not in ledger and "composed_epsilon" not in ledger:
        if made_since(manifest, SIGNED_CHECKSUMS_SINCE):
            r.fail(f"{w} states no earlier_epsilons and composed_epsilon (a bundle made by dpbundle 0.3 "
                   "or later states the composed privacy loss over every recorded spend)")
        return
    k, earlier, composed = (ledger.get(f) for f in ("spends_on_registry", "earlier_epsilons", "composed_epsilon"))
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        r.fail(f"{w}.spends_on_registry is not an integer >= 1")
        return
    if not isinstance(earlier, list) or not all(_finite_nonnegative(e) for e in earlier):
        r.fail(f"{w}.earlier_epsilons is not a list of finite numbers >= 0")
        return
    if len(earlier) != k - 1:
        r.fail(f"{w}.earlier_epsilons lists {len(earlier)} epsilon(s), but spends_on_registry {k} means "
               f"{k - 1} earlier spend(s)")
    try:
        want = float(exact.dec(budget["total_epsilon"]) + exact.total(earlier))
    except (KeyError, TypeError, ValueError, ArithmeticError):
        r.fail("budget.json: total_epsilon is not a number, so the composed epsilon cannot be checked")
        return
    if not _finite_nonnegative(composed) or float(composed) != want:
        r.fail(f"{w}.composed_epsilon {composed!r} is not budget.json's total_epsilon plus the earlier "
               f"epsilons, {want!r}")
    r.facts.update({"spends_on_registry": k, "earlier_epsilons": list(earlier), "composed_epsilon": want})


def _rederived_words(ctx: AuditContext, budget: dict, spec: dict, r: CheckResult) -> None:
    """For bundles of dpbundle 0.2 and later (the closure rule, docs/audit.md): budget.json's
    statements are the spec's words and registry-entry.yaml is the entry rendered from the
    public files, byte for byte (:mod:`.metadata`)."""
    from .checks_integrity import made_since
    from .metadata import check_budget_words, check_registry_entry_rederived

    try:
        manifest = ctx.json("manifest.json")
    except Missing:
        return                      # the integrity check reports it
    if not made_since(manifest, (0, 2)) or not isinstance(budget, dict):
        return
    check_budget_words(budget, spec, r, manifest.get("dpbundle_version"))
    if ctx.bundle.has(REGISTRY_ENTRY_NAME):
        check_registry_entry_rederived(ctx, r)


def _finite_nonnegative(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


def _budget_inputs(ctx: AuditContext) -> tuple[dict, object, list[dict], int]:
    """budget.json, the spec view, metrics.json's criteria rows and the public n."""
    try:
        metrics = ctx.json("metrics.json")
        budget = ctx.json("budget.json")
        view = ctx.view()
        rows = _rows(metrics)
        n = ctx.declared_n()
    except Missing as e:
        raise StopCheck(str(e)) from None
    return budget, view, rows, n


def _acceptance_entries(view, rows: list[dict], r: CheckResult) -> dict:
    """The spec's acceptance entries by id, within the bounds; metrics.json must list the same ids."""
    acceptance = view.spec.get("acceptance")
    if not isinstance(acceptance, list):
        raise StopCheck("spec.json: spec.acceptance is not a list")
    if len(acceptance) > MAX_CRITERIA or len(rows) > MAX_CRITERIA:
        raise StopCheck(f"{max(len(acceptance), len(rows)):,} acceptance criteria (spec.json or "
                        f"metrics.json), more than the limit of {MAX_CRITERIA}; nothing recomputed")
    passes = sum(data_passes(e, view) for e in acceptance if isinstance(e, dict))
    if passes > MAX_DATA_PASSES:
        raise StopCheck(f"spec.json: recomputing the criteria's sensitivities would take {passes:,} "
                        f"passes over the columns of data.csv, more than the limit of "
                        f"{MAX_DATA_PASSES:,}; nothing recomputed")
    entries = {e.get("id"): e for e in acceptance if isinstance(e, dict)}
    row_ids = [row.get("id") for row in rows]
    spec_ids = [e.get("id") for e in acceptance if isinstance(e, dict)]
    if row_ids != spec_ids:
        r.fail(f"metrics.json criteria {row_ids} differ from the spec's acceptance entries {spec_ids}")
    return entries


def _check_criterion(row: dict, entry: dict | None, data: tuple, r: CheckResult,
                     recomputed: dict) -> None:
    """One metrics.json criterion: its numbers, scale, type, epsilon, threshold and sensitivity."""
    w = f"metrics.json criterion {row.get('id')}"
    try:
        eps = need_number(row, "epsilon", where=w)
        sens = need_number(row, "sensitivity", where=w)
        scale = need_number(row, "noise_scale", where=w)
        std = need_number(row, "noise_std", where=w)
        thr = need_number(row, "threshold", where=w)
    except Missing as e:
        r.fail(str(e))
        return
    if eps <= 0:
        r.fail(f"{w}: epsilon {_fmt(eps)} is not positive")
        return
    if entry is None:
        r.fail(f"{w}: no acceptance entry with this id in the spec")
        return
    _check_scale(w, row, entry, sens, eps, scale, std, r)
    if row.get("type") != entry.get("type"):
        r.fail(f"{w}: type {row.get('type')!r} differs from the spec's {entry.get('type')!r}")
    spec_eps = entry.get("epsilon")
    if not isinstance(spec_eps, (int, float)) or not close(eps, float(spec_eps)):
        r.fail(f"{w}: epsilon {_fmt(eps)} differs from the spec's {_fmt(spec_eps)}")
    _check_threshold(w, row, entry, thr, r, recomputed)
    _check_sensitivity(w, row, entry, sens, data, r, recomputed)


def _check_threshold(w: str, row: dict, entry: dict, thr: float, r: CheckResult,
                     recomputed: dict) -> None:
    """The criterion's threshold (and a derived one's stakeholder value and inputs), from the spec."""
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
            recomputed.setdefault(row.get("id"), {})["threshold"] = want_thr
    except Unverifiable as e:
        r.fail(f"{w}: threshold cannot be recomputed: {e}")


def _check_sensitivity(w: str, row: dict, entry: dict, sens: float, data: tuple, r: CheckResult,
                       recomputed: dict) -> None:
    """The criterion's sensitivity (and declared inputs), recomputed from the public bundle."""
    view, codes, codes_note, n = data
    cid = row.get("id")
    try:
        want, facts = recompute_sensitivity(entry, row, view, codes, n)
    except Unverifiable as e:
        msg = str(e)
        if codes is None and codes_note and "data.csv" in msg:
            msg += f" ({codes_note})"
        r.fail(f"{w}: sensitivity cannot be recomputed: {msg}")
        return
    for k, v in facts.items():
        if k.startswith("declared_"):
            base = k[len("declared_"):]
            r.fail(f"{w}: sensitivity_inputs.{base} = {v!r}, recomputed {facts.get(base)!r}")
    _check_declared_inputs(w, row, facts, r)
    recomputed.setdefault(cid, {})["sensitivity"] = want
    recomputed[cid].update({k: v for k, v in facts.items() if k != "note"})
    if not close(sens, want):
        r.fail(f"{w}: sensitivity {_fmt(sens)} != {_fmt(want)} recomputed from the public bundle "
               f"({', '.join(f'{k}={v}' for k, v in facts.items() if k != 'note')})")


def _check_declared_inputs(w: str, row: dict, facts: dict, r: CheckResult) -> None:
    """Every input metrics.json declares (``sensitivity_inputs``) that the recomputation also
    derived must be the recomputed one (numbers within float rounding, anything else equal)."""
    declared = row.get("sensitivity_inputs")
    if not isinstance(declared, dict):
        return
    for k, v in declared.items():
        if k == "note" or k not in facts or f"declared_{k}" in facts:
            continue
        mine = facts[k]
        same = (close(float(v), float(mine)) if _num(v) and _num(mine) else v == mine)
        if not same:
            r.fail(f"{w}: sensitivity_inputs.{k} = {v!r}, recomputed {mine!r} from the public bundle")


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_stop(budget: dict, priv: dict, r: CheckResult) -> None:
    """The stop probability is in [0, 1) (it does not change the epsilon); one that budget.json
    says came from the spec must be the spec's. Bundles before dpbundle 0.2 name no source and
    took it from the spec."""
    W = "budget.json"
    sel = budget.get("selection") if isinstance(budget.get("selection"), dict) else {}
    stop, source = sel.get("stop_probability"), sel.get("stop_probability_source", "spec")
    spec_sel = priv.get("selection") if isinstance(priv.get("selection"), dict) else {}
    spec_stop = spec_sel.get("stop_probability", 0.0)
    if not _num(stop) or not 0 <= stop < 1:
        r.fail(f"{W}: stop_probability {stop!r} is not a number in [0, 1)")
    elif source == "spec" and _num(spec_stop) and exact.dec(stop) != exact.dec(spec_stop):
        r.fail(f"{W}: stop_probability {stop!r} differs from the spec's {spec_stop!r}")
    elif source not in ("spec", "option", "auto"):
        r.fail(f"{W}: stop_probability_source {source!r} is not spec, option or auto")


def _records(budget: dict, spec: dict, n: int | None, r: CheckResult) -> Fraction:
    """The records policy: the same as the spec's, its epsilon, released_n = rows of data.csv,
    and (dp_count) the count's noise scale for sensitivity 1. Returns eps_count (exact)."""
    W = "budget.json"
    rec_spec = ((spec.get("privacy") or {}).get("records") or {}) if isinstance(spec.get("privacy"), dict) else {}
    spec_policy = rec_spec.get("policy", "dp_count")
    rec = budget.get("records")
    if rec is None:
        r.warn(f"{W}: no records block (a bundle older than the records policies): the number of "
               "records is treated as declared public, published exactly")
        if spec_policy != "declared_public" and "records" in (spec.get("privacy") or {}):
            r.fail(f"{W}: no records block, but the spec's records policy is {spec_policy}")
        r.facts["records_policy"] = "declared_public"
        return Fraction(0)
    if not isinstance(rec, dict):
        raise Missing(f"{W}: records is not an object")
    policy = rec.get("policy")
    r.facts["records_policy"] = policy
    if policy != spec_policy:
        r.fail(f"{W}: records policy {policy!r} differs from the spec's {spec_policy!r}")
    if n is not None and rec.get("released_n") != n:
        r.fail(f"{W}: records.released_n {rec.get('released_n')!r} != the {n} records of the bundle")
    eps = rec.get("epsilon")
    if not _num(eps):
        r.fail(f"{W}: records.epsilon {eps!r} is not a number")
        return Fraction(0)
    if policy == "declared_public":
        if eps != 0:
            r.fail(f"{W}: records.epsilon {eps!r} under declared_public (nothing is spent on n)")
        return Fraction(0)
    want_eps = exact.dec(rec_spec.get("epsilon", DEFAULT_COUNT_EPSILON))
    if exact.dec(eps) != want_eps:
        r.fail(f"{W}: records.epsilon {eps!r} differs from the spec's {exact.show(want_eps)}")
    if rec.get("sensitivity") != 1:
        r.fail(f"{W}: records.sensitivity {rec.get('sensitivity')!r}: a count of records has "
               "sensitivity 1 (one changed registry record moves it by at most 1)")
    scale = rec.get("noise_scale")
    if not _num(scale) or not close(float(scale), 1.0 / float(eps)):
        r.fail(f"{W}: records.noise_scale {scale!r} != 1 / epsilon = {_fmt(1.0 / float(eps))}")
    return exact.dec(eps)


def _generation_parts(parts: list, eps_gen: Fraction, r: CheckResult) -> None:
    """The generator's parts. With ``epsilon_opendp`` (newer bundles): the decimal
    shares add up exactly to the generation epsilon, the floats handed to OpenDP have an exact
    binary sum at most the generation epsilon, and each float is within one unit in its last
    place of its share. Without it: the parts are the floats handed to OpenDP, whose exact
    binary sum may not exceed the generation epsilon (and is close to it)."""
    W = "budget.json"
    items = [p for p in parts if isinstance(p, dict)]
    vals = [p.get("epsilon") for p in items]
    if len(items) != len(parts) or not all(_num(v) for v in vals):
        r.fail(f"{W}: generation.parts has an entry without a numeric epsilon")
        return
    if any("epsilon_opendp" in p for p in items):
        floats = [p.get("epsilon_opendp") for p in items]
        if not all(_num(f) for f in floats):
            r.fail(f"{W}: generation.parts: every part needs a numeric epsilon_opendp when one has it")
            return
        shares = exact.total(vals)
        if shares != eps_gen:
            r.fail(f"{W}: generation parts sum to {exact.show(shares)}, not the generation "
                   f"epsilon {exact.show(eps_gen)}")
        spent = sum((exact.binary(float(f)) for f in floats), Fraction(0))
        if spent > eps_gen:
            r.fail(f"{W}: the floats handed to OpenDP (generation.parts[].epsilon_opendp) sum to "
                   f"{float(spent)!r}, above the generation epsilon {exact.show(eps_gen)}")
        for i, (v, f) in enumerate(zip(vals, floats)):
            if abs(exact.binary(float(f)) - exact.dec(v)) >= Fraction(math.ulp(float(f))):
                r.fail(f"{W}: generation.parts[{i}]: epsilon_opendp {f!r} is not its share "
                       f"{v!r} rounded to a float")
        return
    # the parts are the floats handed to OpenDP: their exact binary sum may not exceed the
    # declared generation epsilon
    spent = sum((exact.binary(float(v)) for v in vals), Fraction(0))
    if spent > eps_gen:
        r.fail(f"{W}: generation parts sum to {float(spent)!r}, above the generation "
               f"epsilon {exact.show(eps_gen)}")
    elif not close(float(spent), float(eps_gen), 1e-6):
        r.fail(f"{W}: generation parts sum to {float(spent)!r}, not the generation "
               f"epsilon {exact.show(eps_gen)}")


def _budget_arithmetic(budget: dict, rows: list[dict], spec: dict, r: CheckResult,
                       n: int | None = None) -> None:
    """Every sum recomputed exactly (declared decimals as fractions): evaluation = sum of the
    criteria, per iteration = generation + evaluation, total = eps_count + eps_edges (the
    ``dp_edges`` draws, audit/edges_check.py) + 2 x per iteration + pre-selection <= cap; with ``retries: resample`` (spec and budget.json agreeing) per
    iteration = evaluation and total = eps_count + generation + 2 x evaluation + pre-selection."""
    W = "budget.json"
    dec = exact.dec
    priv = spec.get("privacy") if isinstance(spec.get("privacy"), dict) else {}
    eps_eval = _evaluation_epsilon(budget, rows, spec, r)
    if _definition(budget, priv, r) == "zcdp":
        _zcdp_arithmetic(budget, spec, priv, eps_eval, n, r)
        return
    eps_gen = _generation_epsilon(budget, priv, r)
    eps_pre = _pre_selection_epsilon(budget, priv, r)
    eps_edges = check_edges(budget, spec, r)
    # records, per iteration, selection, total, cap
    eps_count = _records(budget, spec, n, r) + eps_edges
    resample = _retries(budget, priv, r) == "resample"
    once = eps_gen if resample else Fraction(0)     # the generator fitted once, before the selection
    per = dec(need_number(budget, "per_iteration_epsilon", where=W))
    if per != eps_gen - once + eps_eval:
        what = "evaluation (the generator is fitted once)" if resample else "generation + evaluation"
        r.fail(f"{W}: per-iteration epsilon {exact.show(per)} != {what} = "
               f"{exact.show(eps_gen - once + eps_eval)}")
    factor = need_number(budget, "selection", "factor", where=W)
    if factor != 2:
        r.fail(f"{W}: selection factor {_fmt(factor)}, the private selection with a known threshold costs 2")
    _check_stop(budget, priv, r)
    total = dec(need_number(budget, "total_epsilon", where=W))
    want_total = eps_count + once + 2 * (eps_gen - once + eps_eval) + eps_pre
    if total != want_total:
        head = (f"{exact.show(eps_count - eps_edges)} + " if eps_count - eps_edges else "") + \
            (f"edges {exact.show(eps_edges)} + " if eps_edges else "")
        body = (f"{exact.show(eps_gen)} + 2 x {exact.show(eps_eval)}" if resample else
                f"2 x ({exact.show(eps_gen)} + {exact.show(eps_eval)})")
        r.fail(f"{W}: total epsilon {exact.show(total)} != {head}{body} + {exact.show(eps_pre)} = "
               f"{exact.show(want_total)}")
    cap_f, cap = _check_cap(budget, priv, max(total, want_total), r)
    _check_opendp_total(budget, want_total, cap_f, cap, r)
    _check_neighbours(budget, spec, r)
    r.facts.update({"epsilon_generation": float(eps_gen), "epsilon_evaluation": float(eps_eval),
                    "epsilon_pre_selection": float(eps_pre), "epsilon_count": float(eps_count - eps_edges),
                    "epsilon_edges": float(eps_edges),
                    "total_epsilon": float(total), "epsilon_cap": float(cap)})


def _definition(budget: dict, priv: dict, r: CheckResult) -> str:
    """The privacy definition: budget.json's ``definition`` ("zcdp" or absent: pure), which must
    be the spec's privacy.definition."""
    theirs = budget.get("definition", "pure")
    ours = priv.get("definition", "pure")
    if theirs != ours:
        r.fail(f"budget.json: definition {theirs!r} differs from the spec's privacy.definition {ours!r}")
    return "zcdp" if ours == "zcdp" and theirs == "zcdp" else "pure"


def _zcdp_arithmetic(budget: dict, spec: dict, priv: dict, eps_eval: Fraction, n: int | None,
                     r: CheckResult) -> None:
    """A zCDP bundle (``dpbundle.mechanisms.zcdp``): the generator's rho is the spec's and its
    parts add up to it; every rho part (count, generation, selection, pre-selection) and the
    total are recomputed exactly; total_epsilon is OpenDP's epsilon at the spec's delta for that
    total and within the cap; the selection refits nothing (retries: resample)."""
    from dpbundle.mechanisms import zcdp

    W = "budget.json"
    dec = exact.dec
    gen = budget.get("generation") if isinstance(budget.get("generation"), dict) else {}
    rho_gen = dec(need_number(budget, "generation", "rho", where=W))
    if not _num(priv.get("rho_generation")) or rho_gen != dec(priv["rho_generation"]):
        r.fail(f"{W}: generation rho {exact.show(rho_gen)} differs from the spec's {priv.get('rho_generation')!r}")
    parts = [p for p in gen.get("parts") or [] if isinstance(p, dict)]
    if any("rho_opendp" in p for p in parts):
        if exact.total(p.get("rho", 0) for p in parts) != rho_gen:
            r.fail(f"{W}: generation parts' rho shares do not add up to the generation rho {exact.show(rho_gen)}")
        if sum((exact.binary(float(p["rho_opendp"])) for p in parts if _num(p.get("rho_opendp"))),
               Fraction(0)) > rho_gen:
            r.fail(f"{W}: the rho floats handed to OpenDP add up to more than the generation rho "
                   f"{exact.show(rho_gen)}")
    elif sum((exact.binary(float(p["rho"])) for p in parts if _num(p.get("rho"))), Fraction(0)) > rho_gen:
        r.fail(f"{W}: the generation parts' rho floats add up to more than the generation rho {exact.show(rho_gen)}")
    if _retries(budget, priv, r) != "resample":
        r.fail(f"{W}: a zCDP release must fit its generator once (selection.retries: resample)")
    eps_pre = [dec(p["epsilon"]) for p in priv.get("pre_selection", []) or []
               if isinstance(p, dict) and _num(p.get("epsilon"))]
    _pre_selection_epsilon(budget, priv, r)
    eps_count = _records(budget, spec, n, r)
    if dec(need_number(budget, "per_iteration_epsilon", where=W)) != eps_eval:
        r.fail(f"{W}: per-iteration epsilon is not the criteria's {exact.show(eps_eval)} (fitted once)")
    if need_number(budget, "selection", "factor", where=W) != 2:
        r.fail(f"{W}: the private selection with a known threshold costs a factor 2")
    _check_stop(budget, priv, r)
    want = zcdp.release_rho(eps_count, rho_gen, eps_eval, eps_pre)
    block = budget.get("zcdp") if isinstance(budget.get("zcdp"), dict) else {}
    for name, part in (("rho_count", "count"), ("rho_generation", "generation"), ("rho_selection", "selection"),
                       ("rho_pre_selection", "pre_selection"), ("total_rho", "total")):
        got = block.get(name)
        if not _num(got) or dec(got) != want[part]:
            r.fail(f"{W}: zcdp.{name} {got!r} is not {exact.show(want[part])}")
    delta = priv.get("delta")
    if block.get("delta") != delta or not _num(delta):
        r.fail(f"{W}: zcdp.delta {block.get('delta')!r} differs from the spec's privacy.delta {delta!r}")
        return
    if block.get("conversion") != zcdp.CONVERSION:
        r.fail(f"{W}: zcdp.conversion is not the stated conversion")
    epsilon = zcdp.epsilon_at_delta(want["total"], float(delta))
    total = need_number(budget, "total_epsilon", where=W)
    if total != epsilon:
        r.fail(f"{W}: total epsilon {_fmt(total)} is not {epsilon!r}, the epsilon at delta {delta:g} of "
               f"rho {exact.show(want['total'])}")
    cap_f, cap = _check_cap(budget, priv, Fraction(epsilon), r)
    _check_opendp_total(budget, Fraction(epsilon), cap_f, cap, r)
    _check_neighbours(budget, spec, r)
    r.facts.update({"definition": "zcdp", "rho_generation": float(rho_gen), "total_rho": float(want["total"]),
                    "delta": float(delta), "epsilon_evaluation": float(eps_eval),
                    "epsilon_count": float(eps_count), "total_epsilon": float(epsilon), "epsilon_cap": float(cap)})


def _retries(budget: dict, priv: dict, r: CheckResult) -> str:
    """How failed candidates were retried: budget.json's selection.retries ("resample" or
    absent: "refit"), which must be the spec's privacy.selection.retries."""
    sel = budget.get("selection") if isinstance(budget.get("selection"), dict) else {}
    spec_sel = priv.get("selection") if isinstance(priv.get("selection"), dict) else {}
    theirs, ours = sel.get("retries", "refit"), spec_sel.get("retries", "refit")
    if theirs != ours:
        r.fail(f"budget.json: selection.retries {theirs!r} differs from the spec's "
               f"privacy.selection.retries {ours!r}")
    if ours == "resample" and not (_num(sel.get("stop_probability")) and sel["stop_probability"] > 0):
        r.fail("budget.json: a resample selection needs a stop probability above 0 (every run must end)")
    return ours if ours in ("refit", "resample") else "refit"


def _evaluation_epsilon(budget: dict, rows: list[dict], spec: dict, r: CheckResult) -> Fraction:
    """The evaluation epsilon: the sum of the criteria's, in metrics.json and in the spec."""
    W = "budget.json"
    dec = exact.dec
    eps_eval_rows = exact.total(row["epsilon"] for row in rows if _num(row.get("epsilon")))
    eps_eval = dec(need_number(budget, "evaluation", "epsilon", where=W))
    if eps_eval != eps_eval_rows:
        r.fail(f"{W}: evaluation epsilon {exact.show(eps_eval)} != sum of the criteria's epsilons "
               f"{exact.show(eps_eval_rows)}")
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
            if not (_num(a) and _num(b) and dec(a) == dec(b)):
                r.fail(f"{W}: criterion {c.get('id')} epsilon {a!r} differs from metrics.json's {b!r}")
    acc = spec.get("acceptance") or []
    spec_eval = exact.total(e["epsilon"] for e in acc if isinstance(e, dict) and _num(e.get("epsilon")))
    if eps_eval != spec_eval:
        r.fail(f"{W}: evaluation epsilon {exact.show(eps_eval)} != the spec's criteria sum "
               f"{exact.show(spec_eval)}")
    return eps_eval


def _generation_epsilon(budget: dict, priv: dict, r: CheckResult) -> Fraction:
    """The generation epsilon: the spec's, and the sum of its parts."""
    W = "budget.json"
    eps_gen = exact.dec(need_number(budget, "generation", "epsilon", where=W))
    spec_gen = priv.get("epsilon_generation")
    if not _num(spec_gen) or eps_gen != exact.dec(spec_gen):
        r.fail(f"{W}: generation epsilon {exact.show(eps_gen)} differs from the spec's {spec_gen!r}")
    parts = budget.get("generation", {}).get("parts")
    if isinstance(parts, list) and parts:
        _generation_parts(parts, eps_gen, r)
    return eps_gen


def _pre_selection_epsilon(budget: dict, priv: dict, r: CheckResult) -> Fraction:
    """The pre-selection epsilon: the sum of its entries, the same as the spec's."""
    W = "budget.json"
    pre = budget.get("pre_selection", [])
    if not isinstance(pre, list):
        raise Missing(f"{W}: pre_selection is not a list")
    pre_vals = [p.get("epsilon") for p in pre if isinstance(p, dict)]
    if not all(_num(v) for v in pre_vals) or len(pre_vals) != len(pre):
        r.fail(f"{W}: pre_selection has an entry without a numeric epsilon")
        pre_vals = [v for v in pre_vals if _num(v)]
    eps_pre = exact.total(pre_vals)
    spec_pre = priv.get("pre_selection", []) or []
    spec_pre_sum = exact.total(p["epsilon"] for p in spec_pre if isinstance(p, dict) and _num(p.get("epsilon")))
    if eps_pre != spec_pre_sum:
        r.fail(f"{W}: pre-selection epsilons sum to {exact.show(eps_pre)}, the spec's to "
               f"{exact.show(spec_pre_sum)}")
    return eps_pre


def _check_cap(budget: dict, priv: dict, spent: Fraction, r: CheckResult) -> tuple[float, Fraction]:
    """The cap is the spec's, the total is within it, and a total above the ceiling is acknowledged."""
    W = "budget.json"
    cap_f = need_number(budget, "epsilon_cap", where=W)
    cap = exact.dec(cap_f)
    spec_cap = priv.get("epsilon_cap")
    if not _num(spec_cap) or cap != exact.dec(spec_cap):
        r.fail(f"{W}: epsilon cap {_fmt(cap_f)} differs from the spec's {spec_cap!r}")
    if spent > cap:
        r.fail(f"{W}: total epsilon {exact.show(spent)} exceeds the cap {_fmt(cap_f)}")
    if spent > EPSILON_CEILING and priv.get("acknowledge_weak_guarantee") is not True:
        r.fail(f"{W}: total epsilon {exact.show(spent)} is above {EPSILON_CEILING}, "
               "where the guarantee is weak, and the spec does not acknowledge it "
               "(privacy.acknowledge_weak_guarantee)")
    return cap_f, cap


def _check_opendp_total(budget: dict, want_total: Fraction, cap_f: float, cap: Fraction,
                        r: CheckResult) -> None:
    """OpenDP's own total (when recorded) is the composed total and within the cap."""
    W = "budget.json"
    od = budget.get("total_epsilon_opendp")
    if od is None:
        return
    if not _num(od):
        r.fail(f"{W}: total_epsilon_opendp {od!r} is not a number")
        return
    if not close(float(od), float(want_total), OPENDP_TOL):
        r.fail(f"{W}: OpenDP's total {_fmt(od)} differs from the composed total "
               f"{exact.show(want_total)}")
    if float(od) > float(cap) * (1 + 1e-9):
        r.fail(f"{W}: OpenDP's total {_fmt(od)} exceeds the cap {_fmt(cap_f)}")


def _check_neighbours(budget: dict, spec: dict, r: CheckResult) -> None:
    """The input metric is bounded neighbours; the unit of privacy is the spec's (a warning)."""
    W = "budget.json"
    if budget.get("input_metric") != "change_one_distance":
        r.fail(f"{W}: input_metric {budget.get('input_metric')!r}, expected 'change_one_distance' "
               "(bounded neighbours of the registry)")
    unit = (spec.get("release") or {}).get("unit_of_privacy") if isinstance(spec.get("release"), dict) else None
    if isinstance(unit, str) and budget.get("unit_of_privacy") != unit:
        r.fail(f"{W}: unit_of_privacy {budget.get('unit_of_privacy')!r} differs from the spec's {unit!r}")


def _registry_entry_numbers(ctx: AuditContext, budget: dict, r: CheckResult) -> None:
    """registry-entry.yaml (when the bundle has one) states budget.json's numbers: its epsilon
    is the total, and its composition and privacy parameter details spell the total out as
    :func:`composition_formula` does from budget.json. The formula is the shared renderer's
    (templates/metadata), not a copy; for a bundle of dpbundle 0.2 or later the entry is also
    re-derived byte for byte (:func:`_rederived_words`), so this check names the misstated number
    and is the only check of an older bundle's entry."""
    from .checks_schema import REGISTRY_ENTRY, registry_entry

    if not ctx.bundle.has(REGISTRY_ENTRY) or not isinstance(budget, dict):
        return
    W = REGISTRY_ENTRY
    try:
        entry = registry_entry(ctx)
    except Missing as e:
        r.fail(str(e))
        return
    dep = entry.get("deployment") if isinstance(entry.get("deployment"), dict) else {}
    loss = dep.get("privacy_loss") if isinstance(dep.get("privacy_loss"), dict) else {}
    params = loss.get("privacy_parameters") if isinstance(loss.get("privacy_parameters"), dict) else {}
    eps, total = params.get("epsilon"), budget.get("total_epsilon")
    if not _num(eps) or not math.isfinite(eps):
        r.fail(f"{W}: privacy_parameters.epsilon {eps!r} is not a finite number")
    elif _num(total) and math.isfinite(total) and exact.dec(eps) != exact.dec(total):
        r.fail(f"{W}: privacy_parameters.epsilon {_fmt(eps)} differs from budget.json's total epsilon "
               f"{_fmt(total)}")
    try:
        formula = composition_formula(budget)
    except (KeyError, TypeError, ValueError, AttributeError):
        return  # budget.json itself is malformed: the arithmetic above says so
    acc = dep.get("accounting") if isinstance(dep.get("accounting"), dict) else {}
    for where, text in (("accounting.composition", acc.get("composition")),
                        ("privacy_loss.privacy_parameters_details", loss.get("privacy_parameters_details"))):
        if not isinstance(text, str) or formula not in text:
            r.fail(f"{W}: {where} does not state the composition of budget.json ({formula})")


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
