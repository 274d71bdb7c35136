"""The enclave replay's check that the transcript binds the bundle's source files to the run.

A release of dpbundle 0.3 or later records, in its transcript's ``selection`` mark, what shaped
the run besides the private data (``run``, schemas/transcript-record.schema.json
``run_binding``): the tool's version, the SHA-256 of the canonical public spec, of the
configuration list it drew from and of its pre-registration record, the signing key's
fingerprint, where its stop probability came from, and the ledger statement the manifest makes.
The transcript is committed to in manifest.json (salted SHA-256), so none of these can be changed
after the run without the replay seeing it: a threshold tightened in spec.json (with metrics.json
edited to match), a spec text rewritten, another configuration list, a re-signing key, a
version downgrade or a lowered count of spends fail here even though the public audit, which can
only compare the bundle with itself, passes them (docs/audit.md, "The closure rule").

A bundle that claims dpbundle 0.2 has no such record; a transcript that has one belongs to a
later version, so a 0.2 claim with it is a downgrade and fails too.
"""
from __future__ import annotations

import hashlib
import re

from .edges_check import declared_spec
from .context import AuditContext, Missing
from .preregistration import canonical_sha256
from .report import CheckResult

__all__ = ["check_run_binding", "RUN_FIELDS"]

#: run field -> (the bundle file it must agree with, what a difference means)
RUN_FIELDS = {
    "dpbundle_version": ("manifest.json", "the version that made the bundle"),
    "spec_sha256": ("spec.json", "the spec (thresholds, epsilons, texts: any field)"),
    "configurations_sha256": ("configurations.yaml", "the configuration list the selection drew from"),
    "key_fingerprint": ("manifest.json", "the signing key"),
    "preregistration_sha256": ("preregistration.json", "the pre-registration record"),
    "stop_probability_source": ("budget.json", "where the stop probability came from"),
    "ledger": ("manifest.json", "the spends on the registry stated in the ledger statement"),
}


def _version(text: object) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _sha256_of(ctx: AuditContext, name: str) -> str | None:
    return hashlib.sha256(ctx.bundle.read_bytes(name)).hexdigest() if ctx.bundle.has(name) else None


def bundle_facts(ctx: AuditContext) -> dict:
    """What the bundle says about each run field (its public files only)."""
    manifest = ctx.json("manifest.json")
    spec_doc = ctx.json("spec.json")
    budget = ctx.json("budget.json")
    if not (isinstance(manifest, dict) and isinstance(spec_doc, dict) and isinstance(budget, dict)
            and isinstance(spec_doc.get("spec"), dict)):
        raise Missing("manifest.json, spec.json or budget.json: unexpected structure")
    return {
        "dpbundle_version": manifest.get("dpbundle_version"),
        "spec_sha256": canonical_sha256(declared_spec(spec_doc["spec"])),
        "configurations_sha256": _sha256_of(ctx, "configurations.yaml"),
        "key_fingerprint": (manifest.get("public_key") or {}).get("fingerprint"),
        "preregistration_sha256": _sha256_of(ctx, "preregistration.json"),
        "stop_probability_source": (budget.get("selection") or {}).get("stop_probability_source"),
        "ledger": _ledger_statement(manifest.get("ledger")),
    }


def _ledger_statement(ledger: object) -> dict | None:
    """The ledger statement's fields fixed when the budget was reserved (its composed_epsilon is
    their sum with the total, which the public budget check recomputes)."""
    if not isinstance(ledger, dict):
        return None
    return {k: ledger[k] for k in ("spends_on_registry", "spend_id", "earlier_epsilons") if k in ledger}


def _recorded_run(records: list[dict]) -> dict | None:
    for rec in records:
        if rec.get("kind") == "mark" and rec.get("mark") == "selection":
            run = rec.get("run")
            return run if isinstance(run, dict) else None
    return None


def check_run_binding(ctx: AuditContext, r: CheckResult, records: list[dict]) -> None:
    """Fail ``r`` for every run field the committed transcript records differently from the
    bundle (each problem names the file and what it binds; the values are public but long, so
    only the field is named)."""
    try:
        facts = bundle_facts(ctx)
    except Missing as e:
        r.fail(f"the run binding cannot be checked: {e}")
        return
    run = _recorded_run(records)
    claimed = _version(facts["dpbundle_version"])
    if claimed < (0, 3):
        if run is not None:
            r.fail(f"manifest.json claims dpbundle {facts['dpbundle_version']}, but the transcript was "
                   f"written by dpbundle {run.get('dpbundle_version')!s:.40} (it records the run's "
                   "binding, which 0.2 did not): a version downgrade")
        return
    if run is None:
        r.fail("the transcript records no run binding (the 'selection' mark's run): a bundle of "
               "dpbundle 0.3 or later binds its spec, configuration list, key, version and "
               "ledger statement to the run there")
        return
    bad = [f for f in RUN_FIELDS if run.get(f) != facts[f]]
    for field in bad:
        file, what = RUN_FIELDS[field]
        r.fail(f"{file}: {what} differs from what the committed transcript recorded for the run "
               f"(run.{field}): the bundle was changed after the run")
    r.facts["run_binding"] = "matches" if not bad else "differs"
