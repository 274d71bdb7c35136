"""The closure rule's re-derived metadata: ``datapackage.json``, ``registry-entry.yaml`` and the
statements of ``budget.json``, rendered again from the bundle's source files with the shared
renderers of :mod:`dpbundle.templates.metadata` and compared with what the bundle holds.

A difference names the file, the rule ("re-derived from the public files") and the first
differing field (JSON) or line (YAML), with both values: a publisher who re-signs a bundle whose
package says "REAL records" or whose budget says the number of records is protected is caught
here, whatever the key.
"""
from __future__ import annotations

from typing import Any

from dpbundle.templates.metadata import budget_words, datapackage as package_mod, registry_entry as entry_mod

from .edges_check import declared_spec
from .bundle_io import BundleFileError
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_datapackage_rederived", "check_registry_entry_rederived", "check_budget_words",
           "first_difference", "DATAPACKAGE", "REGISTRY_ENTRY", "RULE"]

DATAPACKAGE = "datapackage.json"
REGISTRY_ENTRY = entry_mod.REGISTRY_ENTRY
RULE = "closure rule: re-derived from the bundle's public files"
_ABSENT = object()


def _show(value: Any, limit: int = 160) -> str:
    text = "(absent)" if value is _ABSENT else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def first_difference(got: Any, want: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first path (``a.b[2].c``) where two JSON values differ, with both values there
    (:data:`_ABSENT` for a missing key); None when they are equal (types included: 1 is not 1.0
    nor True)."""
    if isinstance(got, dict) and isinstance(want, dict):
        for key in [*want, *(k for k in got if k not in want)]:
            diff = first_difference(got.get(key, _ABSENT), want.get(key, _ABSENT), f"{path}.{key}" if path else key)
            if diff:
                return diff
        if list(got) != list(want):
            return (f"{path or '(top level)'} (key order)", list(got), list(want))
        return None
    if isinstance(got, list) and isinstance(want, list):
        for i, (g, w) in enumerate(zip(got, want)):
            diff = first_difference(g, w, f"{path}[{i}]")
            if diff:
                return diff
        if len(got) != len(want):
            return (f"{path} (length)", len(got), len(want))
        return None
    if type(got) is not type(want) or got != want:
        return (path or "(top level)", got, want)
    return None


def _first_line_difference(got: bytes, want: bytes) -> str:
    g, w = got.decode("utf-8", "replace").splitlines(), want.decode("utf-8", "replace").splitlines()
    for i, (a, b) in enumerate(zip(g, w), start=1):
        if a != b:
            return f"line {i}: {_show(a)} where the re-derivation has {_show(b)}"
    return f"{len(g)} lines where the re-derivation has {len(w)} (the first {min(len(g), len(w))} agree)"


# ------------------------------------------------------------------------ datapackage.json

def _manifest(ctx: AuditContext) -> dict:
    manifest = ctx.json("manifest.json")
    if not isinstance(manifest, dict):
        raise Missing("manifest.json: not an object")
    return manifest


def _package_facts(ctx: AuditContext, view) -> package_mod.PackageFacts:
    """datapackage.json's inputs, from spec.json, the spec view, the tables' digests and the
    manifest's day (all public, all signed)."""
    from .preregistration import canonical_sha256

    spec = view.spec
    spec_cols = {c.get("name"): c for c in spec.get("columns") or [] if isinstance(c, dict)}
    descriptions = {c.name: str(spec_cols.get(c.name, {}).get("description") or "") for c in view.columns}
    digests = {}
    for name in ("data.csv", "codebook.csv", "metrics.csv"):
        if not ctx.bundle.has(name):
            raise Missing(f"{name}: missing from the bundle, so {DATAPACKAGE} cannot be re-derived")
        digests[name] = ctx.bundle.digest(name)
    table_ids: list[str] = []
    if ctx.bundle.has("dp-tables.csv"):       # publish: tables (the tables check re-derives it)
        digests["dp-tables.csv"] = ctx.bundle.digest("dp-tables.csv")
        try:
            table_ids = [str(t["id"]) for t in ctx.json("dp-tables.json")["tables"]]
        except (KeyError, TypeError):
            raise Missing("dp-tables.json: no list of tables with ids") from None
    created = _manifest(ctx).get("created")
    if not isinstance(created, str):
        raise Missing("manifest.json: created is not a day")
    return package_mod.PackageFacts(
        spec=spec, columns=[(c.name, list(c.labels), c.categories_ordered) for c in view.columns],
        descriptions=descriptions, digests=digests, created=created,
        configuration_id=view.configuration_id, spec_sha256=canonical_sha256(declared_spec(spec)),
        table_ids=table_ids,
        specials={c.name: [(c.labels[i], c.special[i]) for i in c.special_codes]
                  for c in view.columns if c.special_codes})


def check_datapackage_rederived(ctx: AuditContext, view, r: CheckResult) -> None:
    """datapackage.json is, byte for byte, the package rendered from the bundle's public files
    (:func:`dpbundle.templates.metadata.datapackage.datapackage`); a failure names the first
    differing field."""
    try:
        want_doc = package_mod.datapackage(_package_facts(ctx, view))
        got = ctx.bundle.read_bytes(DATAPACKAGE)
    except (Missing, BundleFileError) as e:
        r.fail(f"{DATAPACKAGE}: cannot be re-derived ({e})")
        return
    want = package_mod.json_bytes(want_doc)
    if got == want:
        return
    try:
        diff = first_difference(ctx.json(DATAPACKAGE), want_doc)
    except Missing:
        diff = None
    where = (f"first difference at {diff[0]}: {_show(diff[1])} where the re-derivation gives {_show(diff[2])}"
             if diff else "same fields, other bytes (formatting)")
    r.fail(f"{DATAPACKAGE}: not the package rendered from spec.json, the tables and the manifest ({RULE}); "
           f"{where}")


# ------------------------------------------------------------------------ registry-entry.yaml

def _optional_json(ctx: AuditContext, name: str) -> dict | None:
    return ctx.json(name) if ctx.bundle.has(name) else None


def _registry_facts(ctx: AuditContext, view) -> entry_mod.RegistryFacts:
    """registry-entry.yaml's inputs: spec.json, budget.json, metrics.json, the manifest's day,
    version, key fingerprint, file list and ledger, and the pre-registration record."""
    manifest = _manifest(ctx)
    metrics = ctx.json("metrics.json")
    files = manifest.get("files")
    return entry_mod.RegistryFacts(
        spec=view.spec, configuration=view.configuration, configuration_id=view.configuration_id,
        budget=ctx.json("budget.json"), criteria=metrics.get("criteria") if isinstance(metrics, dict) else None,
        n=manifest.get("n"), columns=[(c.name, len(c.labels), c.ordered) for c in view.columns],
        created=manifest.get("created"), dpbundle_version=manifest.get("dpbundle_version"),
        fingerprint=(manifest.get("public_key") or {}).get("fingerprint"),
        files=[f.get("path") for f in files if isinstance(f, dict)] if isinstance(files, list) else None,
        preregistration=_optional_json(ctx, "preregistration.json"), ledger=manifest.get("ledger"))


def check_registry_entry_rederived(ctx: AuditContext, r: CheckResult) -> None:
    """registry-entry.yaml is, byte for byte, the entry rendered from the bundle's public files
    (:mod:`dpbundle.templates.metadata.registry_entry`); a failure names the first differing line."""
    try:
        view = ctx.view()
        want = entry_mod.entry_yaml(entry_mod.registry_entry_of(_registry_facts(ctx, view)))
        got = ctx.bundle.read_bytes(REGISTRY_ENTRY)
    except (Missing, BundleFileError, entry_mod.RegistryEntryError, ValueError, TypeError, AttributeError) as e:
        r.fail(f"{REGISTRY_ENTRY}: cannot be re-derived ({e})")
        return
    if got != want:
        r.fail(f"{REGISTRY_ENTRY}: not the entry rendered from spec.json, budget.json, metrics.json and the "
               f"manifest ({RULE}); {_entry_difference(ctx, got, want)}")


def _entry_difference(ctx: AuditContext, got: bytes, want: bytes) -> str:
    """The first differing field of the two entries when the bundle's parses, else the first
    differing line."""
    import yaml

    from .preregistration import strict_yaml_mapping

    try:
        diff = first_difference(strict_yaml_mapping(got, REGISTRY_ENTRY), yaml.safe_load(want.decode("utf-8")))
    except ValueError:
        diff = None
    if diff is None:
        return _first_line_difference(got, want)
    return f"first difference at {diff[0]}: {_show(diff[1])} where the re-derivation gives {_show(diff[2])}"


# ------------------------------------------------------------------------ budget.json's statements

def _at(doc: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return _ABSENT
        doc = doc[key]
    return doc


def check_budget_words(budget: dict, spec: dict, r: CheckResult, version: Any = None) -> None:
    """Every statement of budget.json (the unit of privacy, the neighbouring relation, the input
    metric, the records policy's statement, mechanism and resize, the selection method, the
    published-model note) is the text the spec gives
    (:func:`dpbundle.templates.metadata.budget_words.accepted_budget_words`, by the datasheet
    edition of the manifest's ``version``: a 0.2 bundle may carry 0.2.0's earlier wording)."""
    from dpbundle.templates.datasheet.edition import edition_of

    try:
        words = budget_words.accepted_budget_words(spec, edition_of(str(version)))
    except ValueError as e:
        r.fail(f"budget.json: {e}")
        return
    for path, accepted in words.items():
        got = _at(budget, path)
        if accepted[0] is None or any(got == want and type(got) is type(want) for want in accepted):
            continue
        r.fail(f"budget.json: {path} is not the statement the spec gives ({RULE}: the records policy "
               f"{budget_words.spec_records_policy(spec)!r}, the unit of privacy and publish give it): "
               f"{_show(got)} where the re-derivation gives {_show(accepted[0])}")
