"""Check 2, schema: every JSON file validates against its schema; data.csv has exactly the
spec's released columns, only declared labels and no empty cells; datapackage.json agrees with
the spec (and with data.csv's size and hash when it declares them)."""
from __future__ import annotations

from .context import AuditContext, Missing
from .report import CheckResult
from .schema_util import SchemaMissing, validate

__all__ = ["check_schema", "JSON_SCHEMAS"]

# bundle file -> schema name in dpbundle.schemas
JSON_SCHEMAS = {
    "manifest.json": "manifest",
    "metrics.json": "metrics",
    "budget.json": "budget",
    "spec.json": "spec-json",
    "datapackage.json": "datapackage",
    # optional: pre-registration (preregistration.json, seeds.json), publish: model (model.json)
    "preregistration.json": "preregistration",
    "seeds.json": "seeds",
    "model.json": "model",
}
REQUIRED = ("manifest.json", "metrics.json", "budget.json", "spec.json", "datapackage.json", "data.csv")


def check_schema(ctx: AuditContext) -> CheckResult:
    r = CheckResult("schema")
    b = ctx.bundle
    for name in REQUIRED:
        if not b.has(name):
            r.fail(f"{name}: missing from the bundle")
    validated = 0
    for name in sorted(b.files):
        if not name.endswith(".json"):
            continue
        try:
            doc = ctx.json(name)
        except Missing as e:
            r.fail(str(e))
            continue
        schema = JSON_SCHEMAS.get(name)
        if schema is None:
            r.warn(f"{name}: no schema is known for this file (parsed as JSON only)")
            continue
        try:
            errors = validate(doc, schema)
        except SchemaMissing as e:
            r.fail(f"{name}: {e}")
            continue
        for e in errors:
            r.fail(f"{name}: {e}")
        if name == "spec.json" and not errors and isinstance(doc.get("spec"), dict):
            try:
                spec_errors = validate(doc["spec"], "spec")
            except SchemaMissing:
                spec_errors = []
            for e in spec_errors:
                r.fail(f"spec.json: spec: {e}")
        validated += 1
    # -- data.csv against the spec ------------------------------------------------------
    try:
        view = ctx.view()
        for note in view.notes:
            r.warn(note)
        table = ctx.table()
        for p in table.problems:
            r.fail(p)
        r.facts["rows"] = table.rows
        r.facts["columns"] = view.names
    except Missing as e:
        r.fail(str(e))
        view = None
    # -- the configuration id (first 16 hex of SHA-256 of the configuration's canonical JSON)
    if view is not None:
        from .replay import config_id

        try:
            cid = config_id(view.configuration)
        except (TypeError, ValueError):
            cid = None
        if cid is not None and view.configuration_id != cid:
            r.fail(f"spec.json: configuration_id {view.configuration_id!r} is not the configuration's "
                   f"id {cid}")
        try:
            mcid = ctx.json("manifest.json").get("configuration_id")
        except (Missing, AttributeError):
            mcid = None
        if mcid is not None and mcid != view.configuration_id:
            r.fail(f"manifest.json: configuration_id {mcid!r} differs from spec.json's {view.configuration_id!r}")
    # -- datapackage.json against the spec ----------------------------------------------
    if view is not None:
        try:
            _datapackage(ctx, view, r)
        except Missing as e:
            r.fail(str(e))
    if not r.failed:
        r.detail = (f"{validated} JSON files valid; data.csv has the {len(view.names)} released "
                    f"columns and only declared labels; datapackage.json agrees")
    return r


def _categories(field: dict, col, r: CheckResult) -> None:
    """Table Schema v2 ``categories`` / ``categoriesOrdered`` (optional: bundles before 0.2
    lack them) must give the spec's labels in code order and the column's order."""
    if "categories" in field and list(field["categories"]) != list(col.labels):
        r.fail(f"datapackage.json: field {col.name} categories {field['categories']} differ from "
               f"the spec's {list(col.labels)}")
    if "categoriesOrdered" in field and field["categoriesOrdered"] is not bool(col.ordered):
        r.fail(f"datapackage.json: field {col.name} categoriesOrdered is "
               f"{field['categoriesOrdered']}, but the column is "
               f"{'ordered' if col.ordered else 'not ordered'} in the spec")


def _datapackage(ctx: AuditContext, view, r: CheckResult) -> None:
    dp = ctx.json("datapackage.json")
    resources = dp.get("resources") if isinstance(dp, dict) else None
    if not isinstance(resources, list) or not resources or not isinstance(resources[0], dict):
        raise Missing("datapackage.json: no resources")
    res = [x for x in resources if isinstance(x, dict) and x.get("path") == "data.csv"]
    if not res:
        r.fail("datapackage.json: no resource for data.csv")
        return
    res = res[0]
    fields = ((res.get("schema") or {}).get("fields")) if isinstance(res.get("schema"), dict) else None
    if not isinstance(fields, list):
        r.fail("datapackage.json: the data.csv resource has no schema.fields")
        return
    names = [f.get("name") if isinstance(f, dict) else None for f in fields]
    if names != view.names:
        r.fail(f"datapackage.json: fields {names} differ from the spec's released columns {view.names}")
        return
    for f, col in zip(fields, view.columns):
        enum = (f.get("constraints") or {}).get("enum") if isinstance(f.get("constraints"), dict) else None
        if enum is None:
            r.fail(f"datapackage.json: field {col.name} declares no labels (constraints.enum)")
        elif list(enum) != list(col.labels):
            r.fail(f"datapackage.json: field {col.name} labels {enum} differ from the spec's {list(col.labels)}")
        _categories(f, col, r)
    if "bytes" in res and ctx.bundle.has("data.csv"):
        if res["bytes"] != ctx.bundle.files["data.csv"]:
            r.fail(f"datapackage.json: bytes {res['bytes']} differs from data.csv's size {ctx.bundle.files['data.csv']}")
    if isinstance(res.get("hash"), str) and ctx.bundle.has("data.csv"):
        want = res["hash"].split(":", 1)[-1]
        got, _ = ctx.bundle.digest("data.csv")
        if want != got:
            r.fail("datapackage.json: hash differs from data.csv's SHA-256")
    title = (view.spec.get("release") or {}).get("title")
    if isinstance(title, str) and isinstance(dp.get("title"), str) and dp["title"] != title:
        r.warn(f"datapackage.json: title {dp['title']!r} differs from the spec's {title!r}")
