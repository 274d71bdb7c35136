"""Check ``rederivation``: anyone rebuilds data.csv from the published DP model and seeds.

With ``publish: model`` the bundle carries ``model.json`` (the selected candidate's fitted DP
model); with a pre-registration it carries ``seeds.json`` (the opened commitment; the ``seeds``
check verifies it). From these, the published n, the selected configuration and the spec's
synthetic constraints, this check re-runs the post-processing exactly as the release does
(sampling rounds, constraint filter, face-privacy projection with its shuffle: see
``replay.sample_and_project``) with the beacon-bound seeds, and requires the rebuilt data.csv
to equal the released one byte for byte. A publisher who swapped records (even keeping every
count >= min_count and every constraint) and re-signed the bundle fails here.

The model is rebuilt by ``dpbundle.mechanisms.published`` (the same sampling code as the
release: re-deriving means running it); everything else is the audit's own.
"""
from __future__ import annotations

from .checks_seeds import RECORD, SEEDS, derive_seed
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_rederivation", "MODEL"]

MODEL = "model.json"


def check_rederivation(ctx: AuditContext) -> CheckResult:
    r = CheckResult("rederivation")
    if not ctx.bundle.has(MODEL):
        r.skip("the bundle publishes no model (publish: model): data.csv can be re-derived only "
               "inside the enclave (replay from the private transcript)")
        return r
    if not (ctx.bundle.has(SEEDS) and ctx.bundle.has(RECORD)):
        r.skip("the model is published but the release was not pre-registered: its sampling "
               "seeds are private, so data.csv cannot be re-derived publicly")
        r.warn("publish: model without a pre-registration: the model can be inspected and "
               "sampled (`dpbundle sample`), but data.csv cannot be checked against it")
        return r
    try:
        model_doc, seeds, view = ctx.json(MODEL), ctx.json(SEEDS), ctx.view()
        metrics = ctx.json("metrics.json")
        config = ctx.json("spec.json")["configuration"]
    except (Missing, KeyError, TypeError) as e:
        r.fail(f"cannot read what the re-derivation needs: {e}")
        return r
    _check_model_doc(ctx, r, model_doc, view, config)
    if r.failed:
        return r
    from dpbundle.mechanisms.published import PublishError, model_from_document

    try:
        model = model_from_document(model_doc)
    except PublishError as e:
        r.fail(f"{MODEL}: {e}")
        return r
    rebuilt = _rebuild(model, int(metrics["n"]), config, view, seeds)
    released = ctx.bundle.read_bytes("data.csv")
    if rebuilt != released:
        from .replay import _first_differing_line

        r.fail("data.csv is not what the published model and seeds produce (first difference "
               f"at line {_first_differing_line(rebuilt, released)})")
        return r
    r.facts.update({"rows": int(metrics["n"]), "model_kind": model_doc["kind"]})
    r.detail = ("data.csv re-derived byte for byte from the published model, the beacon-bound "
                "seeds, n, the configuration and the synthetic constraints")
    return r


def _check_model_doc(ctx: AuditContext, r: CheckResult, doc: dict, view, config: dict) -> None:
    """Schema, and the model belongs to this release: generator, epsilon, columns, domain."""
    from .schema_util import validate

    for p in validate(doc, "model")[:5]:
        r.fail(f"{MODEL}: {p}")
    if r.failed:
        return
    if doc["generator"] != config.get("generator"):
        r.fail(f"{MODEL}: generator {doc['generator']} is not the selected configuration's "
               f"{config.get('generator')}")
    eps = view.spec.get("privacy", {}).get("epsilon_generation")
    if doc["epsilon_generation"] != eps:
        r.fail(f"{MODEL}: epsilon_generation {doc['epsilon_generation']} is not the spec's {eps}")
    if doc["columns"] != list(view.names):
        r.fail(f"{MODEL}: columns {doc['columns']} are not the released columns {list(view.names)}")
    domain = [len(c.labels) for c in view.columns]
    model_domain = doc.get("domain") or (doc.get("base") or {}).get("domain")
    if model_domain is not None and list(model_domain) != domain:
        r.fail(f"{MODEL}: domain {model_domain} is not the released columns' {domain}")
    try:
        budget = ctx.json("budget.json")
    except Missing:
        budget = {}
    if not isinstance(budget.get("published_model"), dict):
        r.fail("budget.json does not declare the published model (published_model)")


def _rebuild(model, n: int, config: dict, view, seeds: dict) -> bytes:
    """data.csv from the model with the bound seeds (k-th request of a purpose -> k)."""
    import numpy as np

    from .replay import csv_bytes, sample_and_project

    uses: dict[str, int] = {}
    secret, beacon = seeds["secret"], seeds["beacon"]["value"]

    def rng_for(purpose: str):
        k = uses.get(purpose, 0)
        uses[purpose] = k + 1
        return np.random.Generator(np.random.PCG64(derive_seed(secret, beacon, purpose, k)))

    return csv_bytes(view, sample_and_project(model, n, config, view, rng_for))
