"""The inputs of the datasheet: a bundle's public files, parsed once.

The datasheet (README.html, and README.pdf's text) is a deterministic function of

    spec.json, metrics.json, budget.json, datapackage.json, codebook.csv, data.csv,
    the optional public files (preregistration.json, seeds.json, model.json),
    and the manifest's date, tool version, public key, transcript commitment and file list,

so that the public audit can render it again from the bundle and require the same bytes. The
release builds a :class:`PublicFiles` from the documents it is about to write; the audit from
the files it reads (:func:`read_public_files`). Nothing else goes into the datasheet.
"""
from __future__ import annotations

import csv
import functools
import io
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from dpbundle.mechanisms.cells import (RecordTypes, deferred, domain_cells, retyped, types_from_rows,
                                      types_from_weighted, types_of)
from dpbundle.mechanisms.coding import Coded, ColumnCoding

from .codebook import CodebookError, read_codebook

__all__ = ["Meta", "PublicFiles", "read_public_files", "meta_from_manifest", "DatasheetInputError",
           "parse_data_csv", "OPTIONAL_JSON"]

OPTIONAL_JSON = ("preregistration.json", "seeds.json", "dp-tables.json")


class DatasheetInputError(ValueError):
    """A public file the datasheet is made from is missing or malformed (the message says which)."""


@dataclass(frozen=True)
class Meta:
    """What the manifest states and the datasheet repeats."""

    created: str
    dpbundle_version: str
    fingerprint: str
    public_key_pem: str
    commitment: str
    files: tuple[str, ...]          # the bundle's files, manifest.json and manifest.sig aside
    extra: dict | None = None
    # manifest.json's ``ledger``: what the publisher's private budget ledger recorded on this
    # registry (spends_on_registry, spend_id and, from dpbundle 0.3, earlier_epsilons and
    # composed_epsilon); None when the manifest has none (a bundle written without a ledger)
    ledger: dict | None = None
    # manifest.json's ``sampler`` (dpbundle 0.4 and later, sampler version 3 only):
    # {"version": 3, "base_records": B}; None otherwise
    sampler: dict | None = None


@dataclass(frozen=True)
class PublicFiles:
    """The parsed public files (see the module docstring)."""

    spec: dict                      # spec.json's "spec"
    configuration: dict
    configuration_id: str
    metrics: list[dict]             # metrics.json's "criteria"
    budget: dict
    datapackage: dict
    columns: tuple[ColumnCoding, ...]
    units: dict[str, str]
    descriptions: dict[str, str]
    codes: Any                      # data.csv as codes (n, d), or a Coded table (record types)
    meta: Meta
    optional: dict[str, Any] = field(default_factory=dict)   # parsed optional JSON files
    has_model: bool = False

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @functools.cached_property
    def table(self) -> Coded:
        """data.csv as a Coded table over the codebook's columns, held as its record types
        (its rows built only if some consumer reads them)."""
        if isinstance(self.codes, Coded):
            types = retyped(types_of(self.codes), self.columns)
        elif hasattr(self.codes, "rows") and hasattr(self.codes, "counts"):   # distinct rows, counts
            types = _canonical_types(self.codes.rows, self.codes.counts, self.columns)
        else:
            types = types_from_rows(np.asarray(self.codes, dtype=np.int64), self.columns)
        return deferred(types)

    @property
    def types(self) -> RecordTypes:
        """data.csv's record types (distinct rows, their counts)."""
        return types_of(self.table)

    @property
    def n(self) -> int:
        return self.table.n


def _canonical_types(rows: np.ndarray, counts: np.ndarray, columns: Sequence[ColumnCoding]) -> RecordTypes:
    """The record types of rows occurring ``counts`` times, in the canonical order
    ``types_from_rows`` gives (ascending cells): the same arrays as from the rows themselves."""
    rows = np.asarray(rows, dtype=np.int64)
    if domain_cells(tuple(c.size for c in columns)) is None:
        return types_from_rows(np.repeat(rows, counts, axis=0), columns)
    return types_from_weighted(rows, counts, columns)


def meta_from_manifest(manifest: dict) -> Meta:
    """The datasheet's :class:`Meta` from a parsed manifest.json (its ``ledger`` is optional: a
    bundle of dpbundle 0.2 has only ``spends_on_registry`` and ``spend_id`` there, or none)."""
    try:
        key = manifest["public_key"]
        return Meta(created=str(manifest["created"]), dpbundle_version=str(manifest["dpbundle_version"]),
                    fingerprint=str(key["fingerprint"]), public_key_pem=str(key["pem"]),
                    commitment=str(manifest["transcript_commitment"]["value"]),
                    files=tuple(str(f["path"]) for f in manifest["files"]),
                    extra=manifest.get("extra") if isinstance(manifest.get("extra"), dict) else None,
                    ledger=manifest.get("ledger") if isinstance(manifest.get("ledger"), dict) else None,
                    sampler=manifest.get("sampler") if isinstance(manifest.get("sampler"), dict) else None)
    except (KeyError, TypeError) as exc:
        raise DatasheetInputError(f"manifest.json: missing field {exc}") from None


def _fields(datapackage: dict) -> list[dict]:
    try:
        res = next(r for r in datapackage["resources"] if r.get("path") == "data.csv")
        fields = res["schema"]["fields"]
    except (KeyError, TypeError, StopIteration):
        raise DatasheetInputError("datapackage.json: no data.csv resource with a schema") from None
    if not isinstance(fields, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str)
                                               for f in fields):
        raise DatasheetInputError("datapackage.json: the data.csv schema's fields are malformed")
    return fields


def parse_data_csv(data: bytes, columns: Sequence[ColumnCoding]) -> np.ndarray:
    """data.csv's rows as codes (indices of the labels); DatasheetInputError on a header or
    label that the columns do not have."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise DatasheetInputError("data.csv: not UTF-8") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header != [c.name for c in columns]:
        raise DatasheetInputError("data.csv: the header differs from the codebook's columns")
    index = [{label: i for i, label in enumerate(c.labels)} for c in columns]
    rows = []
    for line, row in enumerate(reader, start=2):
        try:
            rows.append([index[j][v] for j, v in enumerate(row)])
        except (KeyError, IndexError):
            raise DatasheetInputError(f"data.csv, line {line}: a value that the codebook does not list") from None
        if len(row) != len(columns):
            raise DatasheetInputError(f"data.csv, line {line}: {len(row)} fields")
    return np.array(rows, dtype=np.int64).reshape(-1, len(columns))


def _json(read: Callable[[str], bytes], name: str) -> Any:
    try:
        return json.loads(read(name).decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise DatasheetInputError(f"{name}: not JSON") from None


def read_public_files(read: Callable[[str], bytes], has: Callable[[str], bool], meta: Meta,
                      codes: np.ndarray | None = None) -> PublicFiles:
    """Parse the public files through ``read(name) -> bytes`` (``has(name)`` for the optional
    ones). ``codes``: data.csv already parsed by the caller (else parsed here)."""
    spec_doc = _json(read, "spec.json")
    metrics = _json(read, "metrics.json")
    budget = _json(read, "budget.json")
    package = _json(read, "datapackage.json")
    if not (isinstance(spec_doc, dict) and isinstance(spec_doc.get("spec"), dict)
            and isinstance(metrics, dict) and isinstance(metrics.get("criteria"), list)
            and isinstance(budget, dict) and isinstance(package, dict)):
        raise DatasheetInputError("spec.json, metrics.json, budget.json or datapackage.json: unexpected structure")
    fields = _fields(package)
    names = [f["name"] for f in fields]
    ordered = {f["name"]: bool(f.get("categoriesOrdered")) for f in fields}
    try:
        columns, units, descriptions = read_codebook(read("codebook.csv"), names, ordered)
    except CodebookError as exc:
        raise DatasheetInputError(str(exc)) from None
    if codes is None:
        codes = parse_data_csv(read("data.csv"), columns)
    optional = {name: _json(read, name) for name in OPTIONAL_JSON if has(name)}
    return PublicFiles(spec=spec_doc["spec"], configuration=spec_doc.get("configuration") or {},
                       configuration_id=str(spec_doc.get("configuration_id", "")),
                       metrics=metrics["criteria"], budget=budget, datapackage=package,
                       columns=tuple(columns), units=units, descriptions=descriptions,
                       codes=codes if isinstance(codes, Coded) or hasattr(codes, "counts") else np.asarray(codes),
                       meta=meta, optional=optional, has_model=has("model.json"))
