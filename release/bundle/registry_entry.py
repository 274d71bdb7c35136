"""``registry-entry.yaml``: the bundle's entry for the OpenDP Deployments Registry.

The entry is built from the bundle's public files by :mod:`dpbundle.templates.metadata.registry_entry`
(shared with the audit, which renders it again from the bundle and requires the same bytes); this
module validates it against ``schemas/registry-entry.schema.json`` before the release writes it.
"""
from __future__ import annotations

from dpbundle.release.common import jsonschemas
from dpbundle.templates.metadata.registry_entry import (REGISTRY_ENTRY, SCHEMA, RegistryEntryError, RegistryFacts,
                                                        composition_formula, entry_yaml, registry_entry,
                                                        registry_entry_of)

__all__ = ["REGISTRY_ENTRY", "RegistryFacts", "registry_entry", "registry_entry_of", "registry_entry_bytes",
           "composition_formula", "RegistryEntryError"]


def registry_entry_bytes(doc: dict) -> bytes:
    """The entry as YAML (UTF-8), validated against ``schemas/registry-entry.schema.json``
    first (``SchemaValidationError`` otherwise); reading it back gives ``doc``."""
    jsonschemas.validate(doc, SCHEMA, document=REGISTRY_ENTRY)
    return entry_yaml(doc)
