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

from .bounds import (DRAWN_EXTRA, DRAWN_FACTOR, WORK_FLOOR, WORK_PER_BYTE, clip, first_round_rows,
                     max_drawn, model_problems, sampling_cost, work_budget)
from .bundle_io import BundleFileError
from .checks_seeds import RECORD, SEEDS, derive_seed
from .context import AuditContext, Missing, spec_publishes
from .report import CheckResult, StopCheck

__all__ = ["check_rederivation", "MODEL", "spec_publishes", "spec_publishes_model"]

MODEL = "model.json"


def spec_publishes_model(ctx: AuditContext) -> bool | None:
    """Whether spec.json's spec says ``publish: model`` (None if spec.json is unusable)."""
    return spec_publishes(ctx, "model")


def check_rederivation(ctx: AuditContext) -> CheckResult:
    """Check: data.csv re-derived byte for byte from the published model and beacon-bound seeds."""
    r = CheckResult("rederivation")
    if not _model_published(ctx, r):
        return r
    prereg = ctx.bundle.has(SEEDS) and ctx.bundle.has(RECORD)
    try:
        model_doc, view, seeds, metrics, config = _rederivation_inputs(ctx, prereg)
    except (Missing, KeyError, TypeError) as e:
        r.fail(f"cannot read what the re-derivation needs: {e}")
        return r
    for w in _library_warnings(ctx):
        r.warn(w)
    # -- every number that sets the work, bounded before any of it (audit/bounds.py) ----------
    n, released = _bounded_n(ctx, r, metrics)
    _check_model_doc(ctx, r, model_doc, view, config, prereg)
    if r.failed:
        return r
    # -- the model's structure, sizes and noise scales, from the spec and the configuration ---
    from .model_check import model_structure_problems

    problems, plan = model_structure_problems(model_doc, config,
                                              view.spec["privacy"]["epsilon_generation"], n,
                                              view.spec, list(view.names))
    for p in problems:
        r.fail(p)
    if r.failed:
        return r
    r.facts["model_noise"] = plan
    structure = (f"the model's structure, table sizes and {len(plan)} noise scales are the ones "
                 "the spec and the configuration give")
    if not prereg:
        r.skip(f"{structure}; the release was not pre-registered, so its sampling seeds are "
               "private and data.csv cannot be re-derived publicly")
        r.warn("publish: model without a pre-registration: the model can be inspected and "
               "sampled (`dpbundle sample`), but data.csv cannot be checked against it")
        return r
    try:
        cost = _rederive(ctx, model_doc, view, config, seeds, n, released)
    except StopCheck as e:
        r.fail(str(e))
        return r
    r.facts.update({"rows": n, "model_kind": model_doc["kind"], "work_units_per_row": cost})
    r.detail = ("data.csv re-derived byte for byte from the published model, the beacon-bound "
                f"seeds, n, the configuration and the synthetic constraints; {structure}")
    return r


def _model_published(ctx: AuditContext, r: CheckResult) -> bool:
    """Whether the bundle has a model.json to re-derive from (failing if it and the spec disagree)."""
    promised = spec_publishes_model(ctx)
    if promised and not ctx.bundle.has(MODEL):
        r.fail(f"spec.json says publish: model, but the bundle has no {MODEL}: what the spec "
               "promises is required (a model removed after the fact, and the bundle re-signed, "
               "fails here)")
        return False
    if promised is False and ctx.bundle.has(MODEL):
        r.fail(f"the bundle has a {MODEL}, but spec.json does not say publish: model")
        return False
    if not ctx.bundle.has(MODEL):
        r.skip("the bundle publishes no model (publish: model): data.csv can be re-derived only "
               "inside the enclave (replay from the private transcript)")
        return False
    return True


def _rederivation_inputs(ctx: AuditContext, prereg: bool) -> tuple:
    """model.json, the spec view, seeds.json (pre-registered only), metrics.json, the configuration."""
    model_doc, view = ctx.json(MODEL), ctx.view()
    seeds = ctx.json(SEEDS) if prereg else None
    metrics = ctx.json("metrics.json")
    config = ctx.json("spec.json")["configuration"]
    return model_doc, view, seeds, metrics, config


def _rederive(ctx: AuditContext, model_doc: dict, view, config: dict, seeds, n: int,
              released: bytes) -> int:
    """Rebuild data.csv within the work bound; it must be the released one. Returns the work per row."""
    cost = sampling_cost(model_doc, view)
    size = sum(ctx.bundle.files.values())
    budget = work_budget(size)
    drawn_n = _drawn_records(model_doc, n)
    first = first_round_rows(drawn_n)
    if first * cost > budget:
        raise StopCheck(
            f"{MODEL}: re-deriving {n:,} rows would draw {first:,} rows at {cost:,} work units "
            f"each, more than the audit's bound of {budget:,} units for a bundle of {size:,} "
            f"bytes ({WORK_PER_BYTE} per byte + {WORK_FLOOR:,}; docs/audit.md, \"Bounds\")")
    from dpbundle.mechanisms.published import PublishError, model_from_document

    try:
        model = model_from_document(model_doc)
    except PublishError as e:
        raise StopCheck(f"{MODEL}: {e}") from None
    from .constraints import ConstraintError
    from .replay import DrawLimit

    limit = min(max_drawn(drawn_n), budget // cost)
    try:
        rebuilt = _rebuild(model, n, config, view, seeds, limit)
    except ConstraintError as e:
        raise StopCheck(f"spec.json: {e}") from None
    except DrawLimit as e:
        raise StopCheck(
            f"{MODEL}: the model's samples fail the synthetic constraints so often that "
            f"re-deriving n rows would draw more than {e.limit:,} rows (at most {DRAWN_FACTOR} n "
            f"+ {DRAWN_EXTRA} and the work bound; docs/audit.md, \"Bounds\")") from None
    if rebuilt != released:
        from .replay import _first_differing_line

        raise StopCheck("data.csv is not what the published model and seeds produce (first "
                        f"difference at line {_first_differing_line(rebuilt, released)})")
    return cost


def _library_warnings(ctx: AuditContext) -> list[str]:
    from .replay import library_version_warnings

    try:
        return library_version_warnings(ctx.json("manifest.json"), "re-derived")
    except Missing:
        return []


def _bounded_n(ctx: AuditContext, r: CheckResult, metrics) -> tuple[int, bytes]:
    """(metrics.json's n, data.csv's bytes), failing the check unless n is the signed
    manifest's n (when the bundle has its manifest) and at most the line ends of data.csv (less
    the header's), whose size the manifest signs: the rows to re-derive are never more than the
    released file holds."""
    n = metrics.get("n") if isinstance(metrics, dict) else None
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        r.fail(f"metrics.json: n {clip(repr(n), 80)} is not a positive integer")
        return 1, b""
    if ctx.bundle.has("manifest.json"):
        try:
            signed = ctx.json("manifest.json").get("n")
        except (Missing, AttributeError):
            signed = None
        if signed != n:
            r.fail(f"metrics.json: n = {n:,} is not the manifest's n ({clip(repr(signed), 80)}); "
                   "nothing re-derived")
            return 1, b""
    try:
        released = ctx.bundle.read_bytes("data.csv")
    except BundleFileError as e:
        r.fail(f"data.csv: {e}")
        return 1, b""
    rows = released.count(b"\n") - 1   # less the header's line end
    if n > rows:
        r.fail(f"metrics.json: n = {n:,} is more than the {max(rows, 0):,} rows data.csv can hold; "
               "nothing re-derived")
        return 1, b""
    return n, released


def _seeds_doc(ctx: AuditContext):
    try:
        return ctx.json(SEEDS)
    except Missing:
        return None


def _check_model_doc(ctx: AuditContext, r: CheckResult, doc: dict, view, config: dict,
                     prereg: bool = True) -> None:
    """Schema, and the model belongs to this release: generator, epsilon, columns, domain, and
    every number that sets the sampling's work is the configuration's or within its bound
    (:func:`.bounds.model_problems`)."""
    for p in model_problems(doc, view, config):
        r.fail(p)
    if r.failed:
        return
    privacy = view.spec.get("privacy")
    eps = privacy.get("epsilon_generation") if isinstance(privacy, dict) else None
    if doc["epsilon_generation"] != eps:
        r.fail(f"{MODEL}: epsilon_generation {doc['epsilon_generation']} is not the spec's {eps}")
    from .schema_util import validate

    if prereg:
        for e in validate(_seeds_doc(ctx), "seeds")[:3]:
            r.fail(f"{SEEDS}: {e}")
    try:
        budget = ctx.json("budget.json")
    except Missing:
        budget = {}
    if not isinstance(budget, dict) or not isinstance(budget.get("published_model"), dict):
        r.fail("budget.json does not declare the published model (published_model)")


def _rebuild(model, n: int, config: dict, view, seeds: dict, limit: int | None = None) -> bytes:
    """data.csv from the model with the bound seeds (k-th request of a purpose -> k), drawing at
    most ``limit`` rows in all (replay.DrawLimit)."""
    import numpy as np

    from .replay import csv_bytes, sample_and_project

    uses: dict[str, int] = {}
    secret, beacon = seeds["secret"], seeds["beacon"]["value"]

    def rng_for(purpose: str):
        k = uses.get(purpose, 0)
        uses[purpose] = k + 1
        return np.random.Generator(np.random.PCG64(derive_seed(secret, beacon, purpose, k)))

    return csv_bytes(view, sample_and_project(model, n, config, view, rng_for, max_rows=limit))


def _drawn_records(model_doc: dict, n: int) -> int:
    """The records the model itself makes for n released ones: n, or with sampler version 3
    (``dpbundle.mechanisms.sampling``) the base of ``BASE_RECORDS`` when n is larger."""
    from dpbundle.mechanisms.sampling import BASE_RECORDS, BASE_SAMPLER

    version = model_doc.get("sampler") if isinstance(model_doc, dict) else None
    return min(n, BASE_RECORDS) if type(version) is int and version == BASE_SAMPLER else n
