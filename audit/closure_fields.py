"""The closure rule's field checks: the fields of a bundle (dpbundle 0.2 and later) that no other
check re-derives, re-derived here from spec.json and dpbundle.mechanisms; and the list of what
only the signature vouches for in a bundle (the report names it)."""
from __future__ import annotations

import json
from typing import Any

from .checks_integrity import made_since
from .closure import KNOWN_FILES, PREREG, RULES, SIGNATURE_ONLY, _regex, field_paths
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_closure", "check_fields", "signature_only_items"]

_RULE = "closure rule: re-derived from spec.json"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:160] + "..."


def check_fields(ctx: AuditContext, r: CheckResult) -> None:
    """manifest.json's title and number format, metrics.json's descriptions, stakeholder
    thresholds and mechanisms, budget.json's generator, its parts and the selection's threshold."""
    manifest = ctx.json("manifest.json")
    if not isinstance(manifest, dict) or not made_since(manifest, (0, 2)):
        return
    spec_json = ctx.json("spec.json")
    spec = spec_json.get("spec") if isinstance(spec_json, dict) else None
    if not isinstance(spec, dict):
        raise Missing("spec.json: no spec")
    _manifest_fields(ctx, manifest, spec, r)
    _metrics_fields(ctx, spec, r)
    _generation(ctx, spec, spec_json.get("configuration"), r)


def _same(where: str, got: Any, want: Any, r: CheckResult, what: str) -> None:
    if got != want or type(got) is not type(want):
        r.fail(f"{where}: {_show(got)} is not {what}, {_show(want)} ({_RULE})")


def _manifest_fields(ctx: AuditContext, manifest: dict, spec: dict, r: CheckResult) -> None:
    from dpbundle.templates.datasheet.numbers import NUMBER_FORMAT_DOC

    release = spec.get("release") if isinstance(spec.get("release"), dict) else {}
    _same("manifest.json: title", manifest.get("title"), release.get("title") or "", r, "the spec's title")
    _same("manifest.json: number_format", manifest.get("number_format"), NUMBER_FORMAT_DOC, r,
          "the datasheet's number format")
    metrics = ctx.json("metrics.json")
    _same("metrics.json: number_format", metrics.get("number_format") if isinstance(metrics, dict) else None,
          NUMBER_FORMAT_DOC, r, "the datasheet's number format")
    _sampler_field(ctx, manifest, r)


def _sampler_field(ctx: AuditContext, manifest: dict, r: CheckResult) -> None:
    """manifest.json's ``sampler`` (sampler version 3, dpbundle 0.4 and later): present exactly
    when the public rule says so (the configuration's generator makes records one by one, n is
    above the base, the domain has an int64 cell index; ``dpbundle.mechanisms.sampling.
    public_sampler``), compared as JSON (1000.0 is not 1000), absent from older bundles; and
    model.json's ``sampler`` (a published model) is 3 exactly then."""
    from dpbundle.mechanisms.sampling import BASE_RECORDS, BASE_SAMPLER, public_sampler

    got = manifest.get("sampler")
    try:
        model = ctx.json("model.json") if ctx.bundle.has("model.json") else None
    except Missing:
        model = None   # the schema check names it
    model_sampler = model.get("sampler") if isinstance(model, dict) else None
    if not made_since(manifest, (0, 4)):
        if got is not None:
            r.fail("manifest.json: sampler: only dpbundle 0.4 and later write it, but manifest.json claims "
                   f"dpbundle {manifest.get('dpbundle_version')!r}")
        if _is_three(model_sampler):
            r.fail("model.json: sampler 3: only dpbundle 0.4 and later sample with it, but manifest.json "
                   f"claims dpbundle {manifest.get('dpbundle_version')!r}")
        return
    n = manifest.get("n")
    if not isinstance(n, int) or isinstance(n, bool):
        return   # the schema and size checks name it
    try:
        view = ctx.view()
    except Missing:
        return   # spec.json is unusable: the schema check names it
    generator = (view.configuration or {}).get("generator") if isinstance(view.configuration, dict) else None
    want_three = public_sampler(generator, n, [len(c.labels) for c in view.columns]) == BASE_SAMPLER
    if want_three:
        want = {"version": BASE_SAMPLER, "base_records": BASE_RECORDS}
        if _canonical(got) != _canonical(want):
            r.fail(f"manifest.json: sampler: {_show(got)} is not sampler version 3 for this configuration's "
                   f"generator and n, {_show(want)} ({_RULE})")
    elif got is not None:
        r.fail(f"manifest.json: sampler: {_show(got)}, but this configuration's generator and n are sampled "
               "with version 2, which manifest.json does not name")
    if model is not None and _is_three(model_sampler) != want_three:
        r.fail(f"model.json: sampler {_show(model_sampler)}, but this configuration's generator and n are "
               f"sampled with version {3 if want_three else 'at most 2'}")


def _is_three(value: Any) -> bool:
    return type(value) is int and value == 3


def _canonical(value: Any) -> str:
    """JSON text with sorted keys: equal only for the same types all the way down."""
    return json.dumps(value, sort_keys=True)


def _metrics_fields(ctx: AuditContext, spec: dict, r: CheckResult) -> None:
    """Each criterion's description and stakeholder threshold are the spec's, its mechanism the
    criterion's (dpbundle.mechanisms.criteria)."""
    from dpbundle.mechanisms.criteria import make_criterion

    entries = {e.get("id"): e for e in spec.get("acceptance") or [] if isinstance(e, dict)}
    metrics = ctx.json("metrics.json")
    for row in (metrics.get("criteria") if isinstance(metrics, dict) else None) or []:
        entry = entries.get(row.get("id")) if isinstance(row, dict) else None
        if entry is None:
            continue   # the budget check reports criteria that are not the spec's
        w = f"metrics.json: criterion {row.get('id')}"
        threshold = entry.get("threshold")
        _same(f"{w} description", row.get("description"), str(entry.get("description", "") or ""), r,
              "the spec's description")
        stake = threshold.get("stakeholder") if isinstance(threshold, dict) else None
        got = row.get("stakeholder_threshold")
        if not (got == stake and (stake is None) == (got is None)):
            r.fail(f"{w} stakeholder_threshold: {_show(got)} is not the spec's, {_show(stake)} ({_RULE})")
        try:
            mechanism = make_criterion(entry).mechanism
        except Exception as e:  # noqa: BLE001 - a spec the mechanisms refuse
            r.fail(f"{w}: its mechanism cannot be re-derived ({type(e).__name__}: {e})")
            continue
        _same(f"{w} mechanism", row.get("mechanism"), mechanism, r, "the criterion's mechanism")


def _generation(ctx: AuditContext, spec: dict, configuration: Any, r: CheckResult) -> None:
    """budget.json's generation block (type, parts) is the configuration's generator's, and the
    selection's threshold 1.0 (the known-threshold selection's score)."""
    from dpbundle.templates.metadata.budget_words import generation_parts

    from .model_check import config_generator

    budget = ctx.json("budget.json")
    gen = budget.get("generation") if isinstance(budget, dict) else None
    if not isinstance(gen, dict) or not isinstance(configuration, dict):
        return      # the schema validation reports it
    _same("budget.json: selection.threshold", (budget.get("selection") or {}).get("threshold"), 1.0, r,
          "the known-threshold selection's threshold")
    want_type = (configuration.get("generator") or {}).get("type")
    _same("budget.json: generation.type", gen.get("type"), want_type, r, "the configuration's generator")
    try:
        names = [c.get("name") for c in spec.get("columns") or []]
        if budget.get("definition") == "zcdp":     # a zCDP generator's parts are in rho
            generator = config_generator(configuration, None, spec, names, rho=float(gen["rho"]))
            want = generation_parts(generator.budget_parts(), gen["rho"], key="rho")
        else:
            generator = config_generator(configuration, float(gen["epsilon"]), spec, names)
            want = generation_parts(generator.budget_parts(), gen["epsilon"])
    except Exception as e:  # noqa: BLE001 - hostile input or a generator this audit cannot build
        r.fail(f"budget.json: generation.parts cannot be re-derived from the configuration's generator "
               f"({type(e).__name__}: {e})")
        return
    _same("budget.json: generation.parts", gen.get("parts"), _as_written(ctx, gen.get("parts"), want), r,
          "the configuration's generator's parts")


def _as_written(ctx: AuditContext, got: Any, want: list) -> list:
    """``want`` in the words of the version the bundle claims: dpbundle 0.2 named aim_pure's
    rounds differently (mechanisms/aim.py ROUNDS_PURPOSE_0_2); a 0.3 bundle must use 0.3's."""
    from dpbundle.mechanisms.aim import ROUNDS_PURPOSE, ROUNDS_PURPOSE_0_2

    try:
        old = not made_since(ctx.json("manifest.json"), (0, 3))
    except (Missing, AttributeError, TypeError):
        return want
    if not old or not isinstance(got, list):
        return want
    return [dict(p, purpose=ROUNDS_PURPOSE_0_2) if isinstance(p, dict) and p.get("purpose") == ROUNDS_PURPOSE
            else p for p in want]


def signature_only_items(ctx: AuditContext) -> list[str]:
    """What only the signature vouches for in this bundle: ``file: field`` for every rule bound
    by the signature alone (or, for a bundle that was not pre-registered, bound by the
    pre-registration otherwise) whose file is present (and whose field the file holds)."""
    prereg = ctx.bundle.has("preregistration.json")
    run_bound = _run_recorded(ctx)
    out: list[str] = []
    for rule in RULES:
        binding = rule.binding if (rule.binding != PREREG or prereg) else rule.otherwise
        if binding != SIGNATURE_ONLY or not ctx.bundle.has(rule.file) or (rule.run_bound and run_bound):
            continue
        if rule.field in ("", "**"):
            out.append(rule.file)
        elif _holds(ctx, rule.file, rule.field):
            out.append(f"{rule.file}: {rule.field}")
    return out + _legacy_datasheet(ctx)


def _legacy_datasheet(ctx: AuditContext) -> list[str]:
    """A bundle claiming a version before 0.2 (no codebook): its datasheet was not rendered from
    its public files, so the documentation check only searches it for its numbers; its words are
    the publisher's (named, so that a verdict never covers them)."""
    try:
        manifest = ctx.json("manifest.json")
    except Missing:
        return []
    if made_since(manifest, (0, 2)) or ctx.bundle.has("codebook.csv"):
        return []
    return [f"{name} (a bundle claiming dpbundle before 0.2: only its numbers are checked)"
            for name in ("README.html", "README.pdf") if ctx.bundle.has(name)]


def _run_recorded(ctx: AuditContext) -> bool:
    """A bundle of dpbundle 0.3 or later: its transcript records the run (spec, list, version),
    which the enclave replay compares (audit/run_binding.py)."""
    try:
        return made_since(ctx.json("manifest.json"), (0, 3))
    except (Missing, AttributeError, TypeError):
        return False


def _holds(ctx: AuditContext, file: str, field: str) -> bool:
    """Whether the JSON file holds a leaf the field pattern matches."""
    if not file.endswith(".json"):
        return True
    try:
        doc = ctx.json(file)
    except Missing:
        return False
    pattern = _regex(field)
    return any(pattern.fullmatch(p) for p in field_paths(doc))


# ------------------------------------------------------------------------------ the check

def check_closure(ctx: AuditContext, r: CheckResult) -> None:
    """The closure rule's own checks (the ``schema`` check runs them): no listed file outside the
    rule, the version rules, the fields no other check re-derives; ``facts["signature_only"]``
    names what only the signature vouches for in this bundle."""
    from .closure_versions import check_versions

    for name in sorted(ctx.bundle.files):
        if name not in KNOWN_FILES:
            r.fail(f"{name}: a file no rule of the closure rule knows (docs/audit.md, \"The closure rule\"): "
                   f"dpbundle never writes it")
    try:
        check_versions(ctx, r)
        check_fields(ctx, r)
    except Missing as e:
        r.fail(str(e))
    r.facts["signature_only"] = signature_only_items(ctx)
