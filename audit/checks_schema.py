"""Check 2, schema: every JSON file validates against its schema; data.csv has exactly the
spec's released columns, only declared labels and no empty cells; datapackage.json agrees with
the spec (and with data.csv's size and hash when it declares them); registry-entry.yaml (the
OpenDP Deployments Registry entry) parses under the strict YAML rules and validates against its
schema (its numbers are checked against budget.json by the budget check). What the bundle's own
spec and files promise must be there (``publish: model`` means model.json; a pre-registered
bundle has its record, the record's signature and seeds.json), and configurations.yaml, when
present, must hold the selected configuration (:mod:`.configurations`)."""
from __future__ import annotations


from .bounds import spec_count_problems
from .bundle_io import BundleFileError
from .context import AuditContext, Missing
from .report import CheckResult
from .schema_util import SchemaMissing, validate

__all__ = ["check_schema", "JSON_SCHEMAS", "REGISTRY_ENTRY", "registry_entry"]

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
    "dp-tables.json": "dp-tables",
}
REQUIRED = ("manifest.json", "metrics.json", "budget.json", "spec.json", "datapackage.json", "data.csv")
REGISTRY_ENTRY = "registry-entry.yaml"   # optional: bundles before it existed have none
MAX_REGISTRY_ENTRY_BYTES = 1024 * 1024   # an entry is a few kilobytes


def registry_entry(ctx: AuditContext) -> dict:
    """registry-entry.yaml as JSON data, parsed once by the audit's strict YAML loader (no
    anchors, aliases, merge keys or duplicate keys, at most 64 levels, dates as strings) after
    a size check; Missing naming the rule otherwise."""
    from .preregistration import strict_yaml_mapping

    key = f"yaml:{REGISTRY_ENTRY}"
    if key not in ctx._docs:
        try:
            size = ctx.bundle.files.get(REGISTRY_ENTRY)
            if size is None:
                raise Missing(f"{REGISTRY_ENTRY}: missing from the bundle")
            if size > MAX_REGISTRY_ENTRY_BYTES:
                raise Missing(f"{REGISTRY_ENTRY}: {size:,} bytes, more than the limit of "
                              f"{MAX_REGISTRY_ENTRY_BYTES:,}")
            try:
                data = ctx.bundle.read_bytes(REGISTRY_ENTRY)
            except BundleFileError as e:
                raise Missing(str(e)) from None
            if len(data) > MAX_REGISTRY_ENTRY_BYTES:
                raise Missing(f"{REGISTRY_ENTRY}: more than {MAX_REGISTRY_ENTRY_BYTES:,} bytes")
            try:
                doc = strict_yaml_mapping(data, REGISTRY_ENTRY)
            except ValueError as e:
                raise Missing(str(e)) from None
            ctx._docs[key] = ("ok", doc)
        except Missing as e:
            ctx._docs[key] = ("err", str(e))
    status, value = ctx._docs[key]
    if status == "err":
        raise Missing(value)
    return value


def check_schema(ctx: AuditContext, validate_json: bool = True) -> CheckResult:
    """``validate_json=False`` (the runner's choice when the integrity check failed): the JSON
    files are parsed but not validated against their schemas, which costs far more than reading
    them (about 0.5 s a MB); a warning says so."""
    r = CheckResult("schema")
    b = ctx.bundle
    if not validate_json:
        r.warn("the JSON files were parsed but not validated against their schemas: the integrity "
               "check failed, and checks that cost more than reading the files do not run")
    for name in REQUIRED:
        if not b.has(name):
            r.fail(f"{name}: missing from the bundle")
    validated = sum(_check_json_file(ctx, name, validate_json, r)
                    for name in sorted(b.files) if name.endswith(".json"))
    # -- registry-entry.yaml (optional) --------------------------------------------------
    if b.has(REGISTRY_ENTRY) and validate_json:
        validated += _check_registry_entry_schema(ctx, r)
    _promised_files(ctx, r)
    # -- configurations.yaml: the list the selection drew from (optional) ------------------
    from .configurations import configurations_problems

    problems, facts = configurations_problems(ctx, validate_json)
    for p in problems:
        r.fail(p)
    r.facts.update(facts)
    from .closure_fields import check_closure

    check_closure(ctx, r)
    view = _check_data_csv(ctx, r)
    if view is not None:
        _check_configuration_id(ctx, view, r)
        # -- datapackage.json against the spec ------------------------------------------
        try:
            _datapackage(ctx, view, r)
        except Missing as e:
            r.fail(str(e))
    if not r.failed:
        r.detail = (f"{validated} files valid against their schemas; data.csv has the "
                    f"{len(view.names)} released columns and only declared labels; datapackage.json agrees")
    return r


def _check_json_file(ctx: AuditContext, name: str, validate_json: bool, r: CheckResult) -> bool:
    """One JSON file parses and (with ``validate_json``) validates; True if validated."""
    schema = JSON_SCHEMAS.get(name)
    if schema is None:   # parsed once and not kept (no other check reads it)
        try:
            ctx.bundle.read_json(name, cache=False)
        except BundleFileError as e:
            r.fail(str(e))
            return False
        r.warn(f"{name}: no schema is known for this file (parsed as JSON only)")
        return False
    try:
        doc = ctx.json(name)
    except Missing as e:
        r.fail(str(e))
        return False
    if not validate_json:
        return False
    try:
        errors = validate(doc, schema)
    except SchemaMissing as e:
        r.fail(f"{name}: {e}")
        return False
    for e in errors:
        r.fail(f"{name}: {e}")
    if name == "spec.json" and not errors and isinstance(doc.get("spec"), dict):
        _check_spec_document(doc["spec"], r)
    return True


def _check_spec_document(spec: dict, r: CheckResult) -> None:
    """spec.json's spec is within the count bounds, then valid against the spec schema."""
    counts = spec_count_problems(spec)   # bounded before the slow validation
    for e in counts:
        r.fail(f"spec.json: {e}")
    try:
        spec_errors = [] if counts else validate(spec, "spec")
    except SchemaMissing:
        spec_errors = []
    for e in spec_errors:
        r.fail(f"spec.json: spec: {e}")


def _check_registry_entry_schema(ctx: AuditContext, r: CheckResult) -> int:
    """registry-entry.yaml validates against its schema (then its publication date); 1 if valid."""
    try:
        errors = validate(registry_entry(ctx), "registry-entry")
    except (Missing, SchemaMissing) as e:
        errors = None
        r.fail(str(e))
    for e in errors or []:
        r.fail(f"{REGISTRY_ENTRY}: {e}")
    if errors == []:
        _publication_date(ctx, r)
        return 1
    return 0


def _check_data_csv(ctx: AuditContext, r: CheckResult):
    """data.csv against the spec; returns the spec view (None if the bundle has no usable one)."""
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
        return None
    return view


def _check_configuration_id(ctx: AuditContext, view, r: CheckResult) -> None:
    """The configuration id (first 16 hex of SHA-256 of the configuration's canonical JSON) in
    spec.json and manifest.json."""
    from .configurations import config_id

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


def _promised_files(ctx: AuditContext, r: CheckResult) -> None:
    """What the bundle's own spec and files promise must be there: ``publish: model`` means
    model.json (and a model.json means the spec said so), budget.json's ``published_model``
    means model.json too; a pre-registered bundle has all three of preregistration.json, its
    .sig and seeds.json. Deleting a protection and re-signing the bundle fails here."""
    from .checks_seeds import RECORD, RECORD_SIG, SEEDS
    from .rederive import MODEL, spec_publishes_model

    b = ctx.bundle
    promised = spec_publishes_model(ctx)
    if promised and not b.has(MODEL):
        r.fail(f"{MODEL}: missing, but spec.json says publish: model")
    if promised is False and b.has(MODEL):
        r.fail(f"{MODEL}: in the bundle, but spec.json does not say publish: model")
    try:
        declared = isinstance(ctx.json("budget.json").get("published_model"), dict)
    except (Missing, AttributeError):
        declared = False
    if declared and not b.has(MODEL):
        r.fail(f"{MODEL}: missing, but budget.json declares a published model (published_model)")
    present = [f for f in (RECORD, RECORD_SIG, SEEDS) if b.has(f)]
    if 0 < len(present) < 3:
        missing = sorted({RECORD, RECORD_SIG, SEEDS} - set(present))
        r.fail(f"a pre-registered bundle has {RECORD}, {RECORD_SIG} and {SEEDS}; missing: "
               f"{', '.join(missing)}")


def _publication_date(ctx: AuditContext, r: CheckResult) -> None:
    """The registry entry's publication date is the bundle's creation day (manifest.json)."""
    try:
        created = ctx.json("manifest.json").get("created")
    except (Missing, AttributeError):
        return
    date = registry_entry(ctx)["deployment"]["basic"]["publication_date"]
    if isinstance(created, str) and date != created[:10]:
        r.fail(f"{REGISTRY_ENTRY}: publication_date {date!r} is not the bundle's creation day "
               f"{created[:10]!r} (manifest.json)")


def _regular_labels(col) -> list[str]:
    """A column's labels but its special values' (datapackage.json declares those missing values)."""
    special = set(getattr(col, "special_codes", ()))
    return [lab for i, lab in enumerate(col.labels) if i not in special]


def _categories(field: dict, col, r: CheckResult) -> None:
    """Table Schema v2 ``categories`` / ``categoriesOrdered`` (optional: bundles before 0.2
    lack them) must give the spec's labels in code order and the column's order: bins are
    ordered, and categories whose alternative declares ``ordered: true`` (the view's
    ``categories_ordered``)."""
    if "categories" in field and list(field["categories"]) != _regular_labels(col):
        r.fail(f"datapackage.json: field {col.name} categories {field['categories']} differ from "
               f"the spec's {_regular_labels(col)}")
    ordered = bool(getattr(col, "categories_ordered", col.ordered))
    if "categoriesOrdered" in field and field["categoriesOrdered"] is not ordered:
        r.fail(f"datapackage.json: field {col.name} categoriesOrdered is "
               f"{field['categoriesOrdered']}, but the column is "
               f"{'ordered' if ordered else 'not ordered'} in the spec")


from dpbundle.templates.metadata.datapackage import SIMULATED_TITLE_SUFFIX  # noqa: E402 - the renderer's, shared


def _package_title(dp: dict, release: dict, r: CheckResult) -> None:
    """datapackage.json's title is the spec's (warning otherwise); when the spec says
    ``release.simulated: true``, the title ends " (SIMULATED data)" and the description says
    SIMULATED (a failure otherwise: simulated data must never pass as real)."""
    title = release.get("title")
    simulated = release.get("simulated") is True
    if simulated:
        if not (isinstance(dp.get("title"), str) and dp["title"].endswith(SIMULATED_TITLE_SUFFIX)):
            r.fail(f"datapackage.json: the spec says release.simulated, but the title does not end "
                   f"{SIMULATED_TITLE_SUFFIX.strip()!r}")
        if not (isinstance(dp.get("description"), str) and "SIMULATED" in dp["description"]):
            r.fail("datapackage.json: the spec says release.simulated, but the description does not say "
                   "SIMULATED")
        title = f"{title}{SIMULATED_TITLE_SUFFIX}" if isinstance(title, str) else title
    if isinstance(title, str) and isinstance(dp.get("title"), str) and dp["title"] != title:
        r.warn(f"datapackage.json: title {dp['title']!r} differs from the spec's {title!r}")


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
        elif list(enum) != _regular_labels(col):
            r.fail(f"datapackage.json: field {col.name} labels {enum} differ from the spec's {_regular_labels(col)}")
        _categories(f, col, r)
    for res in resources:  # data.csv, and (newer bundles) codebook.csv and metrics.csv
        path = res.get("path") if isinstance(res, dict) else None
        if not isinstance(path, str) or not ctx.bundle.has(path):
            r.fail(f"datapackage.json: resource path {path!r} is not a file of the bundle")
            continue
        if "bytes" in res and res["bytes"] != ctx.bundle.files[path]:
            r.fail(f"datapackage.json: bytes {res['bytes']} differs from {path}'s size {ctx.bundle.files[path]}")
        if isinstance(res.get("hash"), str):
            want = res["hash"].split(":", 1)[-1]
            got, _ = ctx.bundle.digest(path)
            if want != got:
                r.fail(f"datapackage.json: hash differs from {path}'s SHA-256")
    release = view.spec.get("release")
    _package_title(dp, release if isinstance(release, dict) else {}, r)
    if _made_since(ctx, (0, 2)):   # dpbundle 0.2 and later render it from the public files
        from .metadata import check_datapackage_rederived

        check_datapackage_rederived(ctx, view, r)


def _made_since(ctx: AuditContext, version: tuple[int, int]) -> bool:
    """Whether manifest.json says the bundle was made by dpbundle ``version`` or later (an
    unreadable manifest: yes, the newest rules apply)."""
    from .checks_integrity import made_since

    try:
        return made_since(ctx.json("manifest.json"), version)
    except Missing:
        return True
