"""``datapackage.json``: a Frictionless Data Package v2 declaring the bundle's three tables.

Built from public facts only (:class:`PackageFacts`: the public spec, the released columns and
their labels, the tables' SHA-256 and sizes, the day, the configuration id, the spec's
canonical SHA-256), so that the audit renders it again from the bundle and compares bytes.
"""
from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from .dp_tables import TABLES_CSV, tables_resource

__all__ = ["PackageFacts", "datapackage", "datapackage_id", "json_bytes", "DATAPACKAGE_PROFILE",
           "DATAPACKAGE_VERSION", "DATAPACKAGE_ID_PREFIX", "SIMULATED_TITLE_SUFFIX", "SIMULATED_NOTE",
           "LICENCES", "METRICS_CSV_FIELDS"]

LICENCES = {
    "CC-BY-4.0": ("https://creativecommons.org/licenses/by/4.0/", "Creative Commons Attribution 4.0"),
    "CC0-1.0": ("https://creativecommons.org/publicdomain/zero/1.0/", "CC0 1.0 Universal"),
    "CC-BY-SA-4.0": ("https://creativecommons.org/licenses/by-sa/4.0/", "Creative Commons Attribution-ShareAlike 4.0"),
    "ODC-BY-1.0": ("https://opendatacommons.org/licenses/by/1-0/", "Open Data Commons Attribution License 1.0"),
    "ODbL-1.0": ("https://opendatacommons.org/licenses/odbl/1-0/", "Open Data Commons Open Database License 1.0"),
    "PDDL-1.0": ("https://opendatacommons.org/licenses/pddl/1-0/", "Open Data Commons Public Domain Dedication and License 1.0"),
}
DATAPACKAGE_PROFILE = "https://datapackage.org/profiles/2.0/datapackage.json"
DATAPACKAGE_VERSION = "1.0.0"  # without the spec's release.version: one version per package id
# datapackage.json's ``id``: uuid5(NAMESPACE_URL, "dpbundle:<spec sha256>:<configuration id>:<data.csv sha256>")
DATAPACKAGE_ID_PREFIX = "dpbundle:"
SIMULATED_TITLE_SUFFIX = " (SIMULATED data)"
SIMULATED_NOTE = ("SIMULATED data: the records were generated from a simulated registry, not from real "
                  "people; no real person is described.")
_NOTE = ("Synthetic records generated with differential privacy; not real records. "
         "See README.pdf for intended uses and data quality.")
_DIALECT = {"delimiter": ",", "lineTerminator": "\n", "quoteChar": "\"", "doubleQuote": True, "header": True}
# metrics.csv's columns as Table Schema fields (types; "" is a missing value in that file)
METRICS_CSV_FIELDS = {
    "id": ("string", "The criterion's id in the spec."),
    "type": ("string", "The criterion's type."),
    "description": ("string", "What the criterion measures."),
    "threshold": ("number", "The candidate passes when the DP value is below it."),
    "stakeholder_threshold": ("number", "The stakeholders' threshold, when the threshold was derived from it."),
    "dp_value": ("number", "The released (noisy) value of the criterion."),
    "passed": ("boolean", "dp_value < threshold."),
    "epsilon": ("number", "The criterion's epsilon."),
    "sensitivity": ("number", "The sensitivity the noise was calibrated to."),
    "mechanism": ("string", "The DP mechanism."),
    "noise_scale": ("number", "The mechanism's noise scale."),
    "noise_std": ("number", "The standard deviation of the noise the mechanism draws."),
    "noise_on": ("string", "Where that noise goes: value, inside_fit or selection_scores."),
    "value_noise_std": ("number", "The standard deviation of the noise of dp_value (empty when unknown)."),
    "value_noise_mean": ("number", "The mean of the noise of dp_value (empty when unknown)."),
}
_METRICS_REQUIRED = ("id", "type", "threshold", "dp_value", "passed", "epsilon", "sensitivity", "mechanism",
                     "noise_scale", "noise_std")
_CODEBOOK_FIELDS = {
    "column": ("string", "The column of data.csv."),
    "order": ("integer", "The value's position in the column's order (1, 2, ...)."),
    "label": ("string", "The value as written in data.csv."),
    "lower": ("number", "The bin's inclusive lower bound, in the unit (empty: no bound, or a category)."),
    "upper": ("number", "The bin's exclusive upper bound, in the unit (empty: no bound, or a category)."),
    "number": ("number", "The number the value stands for in every statistic of the bundle."),
    "unit": ("string", "The column's unit (empty: none)."),
    "description": ("string", "The column's description."),
}
_SPECIAL_FIELD = ("string", "A special value's kind (not_applicable, unknown): not a number, so no "
                            "bounds and no number; empty for the other values.")


@dataclass(frozen=True)
class PackageFacts:
    """What datapackage.json is made from.

    ``spec``: the public spec (spec.json's ``spec``); ``columns``: (name, labels in code order,
    categoriesOrdered) of each released column, in data.csv's order; ``descriptions``: column ->
    its description ("" or absent: none); ``digests``: file -> (SHA-256, size) of data.csv,
    codebook.csv and metrics.csv (and dp-tables.csv with ``publish: tables``); ``table_ids``: the ids
    of dp-tables.json's tables; ``created``: the UTC day (manifest.json's); ``configuration_id``:
    spec.json's; ``spec_sha256``: the canonical SHA-256 of the public spec (``audit --spec``'s)."""

    spec: dict
    columns: Sequence[tuple[str, Sequence[str], bool]]
    descriptions: dict
    digests: dict
    created: str
    configuration_id: str
    spec_sha256: str
    table_ids: Sequence[str] = ()
    specials: dict = field(default_factory=dict)    # column -> [(label, kind)] of its special values


def json_bytes(obj: Any) -> bytes:
    """A bundle JSON document's bytes: two-space indent, UTF-8 as is, a final newline."""
    return (json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def datapackage_id(spec_sha256: str, configuration_id: str, data_sha256: str) -> str:
    """datapackage.json's ``id``: a UUID (version 5, RFC 4122) of the bundle's content, known
    before the manifest: ``uuid5(NAMESPACE_URL, "dpbundle:<spec SHA-256>:<configuration id>:<data.csv
    SHA-256>")``. Anyone can recompute it from the bundle (the spec's SHA-256 is the canonical one
    of ``audit --spec``); another spec, configuration or table gives another id."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL,
                          f"{DATAPACKAGE_ID_PREFIX}{spec_sha256}:{configuration_id}:{data_sha256}"))


def datapackage(facts: PackageFacts) -> dict:
    """datapackage.json: a Frictionless Data Package v2 (``$schema``; resources of ``type``
    "table"; Table Schema v2 ``categories`` / ``categoriesOrdered``) declaring data.csv,
    codebook.csv and metrics.csv.

    - ``version``: "1.0.0" (a signed bundle is never revised in place: a corrected release is
      another bundle, with another ``id``), unless the spec's ``release.version`` says otherwise.
    - ``id``: :func:`datapackage_id`, a UUID derived from the bundle's content.
    - ``sources``: the confidential registry, held by the publisher and not published.
    - a spec with ``release.simulated: true``: the title ends :data:`SIMULATED_TITLE_SUFFIX`, the
      description starts with :data:`SIMULATED_NOTE` and the source is the simulated registry."""
    release = facts.spec.get("release") or {}
    title = release.get("title") or "Differentially private synthetic data"
    title += SIMULATED_TITLE_SUFFIX if release.get("simulated") is True else ""
    package_id = datapackage_id(facts.spec_sha256, facts.configuration_id, facts.digests["data.csv"][0])
    pkg = _head(release, title, package_id, facts.created)
    pkg.update(_people(release))
    fields = _data_fields(facts.columns, facts.descriptions, facts.specials)
    pkg["resources"] = _resources(title, fields, [c[0] for c in facts.columns], facts.digests, facts.specials)
    if TABLES_CSV in facts.digests:
        pkg["resources"].append(_table(
            "dp-tables", TABLES_CSV,
            ("DP count tables", "The noisy count tables the generator measured (dp-tables.json): one "
             "row per cell, its DP count and 95% interval; a column is empty where the table does not "
             "have it."),
            facts.digests[TABLES_CSV], tables_resource([c[0] for c in facts.columns], facts.table_ids)))
    return pkg


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return s[:80] or "dp-release"


def _head(release: dict, title: str, package_id: str, created: str) -> dict:
    """The package's own fields: profile, name, id, version, title, description, created,
    keywords, licences."""
    licence = release.get("licence") or "other"
    lic = {"name": licence}
    if licence in LICENCES:
        lic["path"], lic["title"] = LICENCES[licence]
    description = (release.get("description") or "").strip()
    if release.get("simulated") is True:
        description = f"{SIMULATED_NOTE} {description}"
    return {
        "$schema": DATAPACKAGE_PROFILE,
        "name": _slug(title),
        "id": package_id,
        "version": str(release.get("version") or DATAPACKAGE_VERSION),
        "title": title,
        "description": f"{description} {_NOTE}".strip(),
        "created": f"{created}T00:00:00Z",  # the day only; Frictionless wants a datetime
        "keywords": ["synthetic data", "differential privacy", "open data"],
        "licenses": [lic],
    }


def _people(release: dict) -> dict:
    """``sources`` (the confidential registry, not published) and, when the spec names a
    publisher, ``contributors``."""
    publisher = str(release.get("publisher") or "the publisher")
    contact = str(release.get("contact") or "")
    period = release.get("period") or {}
    about = []
    if release.get("unit_of_privacy"):
        about.append(f"one record: {release['unit_of_privacy']}")
    if period.get("start") and period.get("end"):
        about.append(f"period {period['start']} to {period['end']}")
    what = f"Confidential records held by {publisher}, not published" + (f" ({'; '.join(about)})" if about else "")
    if release.get("simulated") is True:
        what = ("A simulated registry (generated, no real person), not published"
                + (f" ({'; '.join(about)})" if about else ""))
    source: dict[str, Any] = {"title": what}
    if "@" in contact:
        source["email"] = contact
    out: dict[str, Any] = {"sources": [source]}
    if release.get("publisher"):
        c: dict[str, Any] = {"title": release["publisher"], "roles": ["publisher"]}
        if "@" in contact:
            c["email"] = contact
        out["contributors"] = [c]
    return out


def _data_fields(columns: Sequence[tuple[str, Sequence[str], bool]], descriptions: dict,
                 specials: dict | None = None) -> list[dict]:
    """data.csv's Table Schema fields: every column categorical, its labels in order (Table
    Schema v2 ``categories``, and ``constraints.enum``, which validators check). A column's
    special values (not applicable, unknown) are not among them: the schema declares them
    labelled missing values (:func:`_missing_values`), so the field is not ``required``."""
    fields = []
    for name, labels, ordered in columns:
        f: dict[str, Any] = {"name": name, "type": "string"}
        if descriptions.get(name):
            f["description"] = descriptions[name]
        special = {lab for lab, _ in (specials or {}).get(name, [])}
        labels = [str(x) for x in labels if str(x) not in special]
        f["categories"] = labels
        f["categoriesOrdered"] = bool(ordered)
        f["constraints"] = {"required": not special, "enum": labels}
        fields.append(f)
    return fields


#: How a special value's kind reads in datapackage.json's labelled missing values.
KIND_WORDS = {"not_applicable": "not applicable", "unknown": "unknown"}


def _missing_values(specials: dict | None) -> list:
    """data.csv's ``missingValues``: Data Package v2 labelled missing values, ``{"value": label,
    "label": "<kind>: <label>"}`` for every special value of the columns, each label once (the
    spec refuses one label with two kinds; Frictionless wants values and labels unique), [] without."""
    out: dict[str, str] = {}
    for items in (specials or {}).values():
        for lab, kind in items:
            out.setdefault(lab, f"{KIND_WORDS[kind]}: {lab}")
    return [{"value": v, "label": w} for v, w in out.items()]


def _plain_fields(types: dict[str, tuple[str, str]], required: Sequence[str] = ()) -> list[dict]:
    out = []
    for name, (typ, desc) in types.items():
        f: dict[str, Any] = {"name": name, "type": typ, "description": desc}
        if name in required:
            f["constraints"] = {"required": True}
        out.append(f)
    return out


def _table(name: str, path: str, text: tuple[str, str], digest: tuple[str, int], schema: dict) -> dict:
    sha, size = digest
    return {"name": name, "type": "table", "path": path, "title": text[0], "description": text[1],
            "format": "csv", "mediatype": "text/csv", "encoding": "utf-8", "bytes": size,
            "hash": f"sha256:{sha}", "dialect": dict(_DIALECT), "schema": schema}


def _resources(title: str, fields: list[dict], names: list[str], digests: dict,
               specials: dict | None = None) -> list[dict]:
    """The three table resources: data.csv, codebook.csv, metrics.csv (codebook.csv with its
    ``special`` column, and an empty number on a special value's row, when a column has them)."""
    book = dict(_CODEBOOK_FIELDS) | ({"special": _SPECIAL_FIELD} if specials else {})
    codebook_fields = _plain_fields(book, required=("column", "order", "label") + (() if specials else ("number",)))
    codebook_fields[0]["constraints"]["enum"] = names
    codebook_fields[1]["constraints"]["minimum"] = 1
    metrics_fields = _plain_fields(METRICS_CSV_FIELDS, required=_METRICS_REQUIRED)
    return [
        _table("data", "data.csv", (title, "One synthetic record per row; every column is categorical "
                                           "(labels of bins, in order)."),
               digests["data.csv"], {"fields": fields, "missingValues": _missing_values(specials)}),
        _table("codebook", "codebook.csv",
               ("Codebook", "One row per value of each column of data.csv, in order: its label, bounds, "
                            "the number it stands for, the unit and the column's description."),
               digests["codebook.csv"],
               {"fields": codebook_fields, "missingValues": [""], "primaryKey": ["column", "order"]}),
        _table("metrics", "metrics.csv",
               ("Acceptance criteria (DP values)", "One row per acceptance criterion: its threshold, DP "
                "value, epsilon, sensitivity and noise; numbers printed with 6 significant digits "
                "(metrics.json has them in full)."),
               digests["metrics.csv"], {"fields": metrics_fields, "missingValues": [""], "primaryKey": ["id"]}),
    ]
