"""Issue 23: registry-entry.yaml is built section by section from :class:`RegistryFacts`; the
entry built from the public documents of a bundle made before the split is that bundle's
registry-entry.yaml, byte for byte (tests/data/prechange), whichever entry point is used."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dpbundle.release.bundle.registry_entry import (RegistryEntryError, RegistryFacts, registry_entry,
                                                    registry_entry_bytes, registry_entry_of)

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def _facts(name: str) -> tuple[Path, dict]:
    """registry_entry's keyword arguments, from a bundle's public files (as write.py gives them)."""
    d = PRECHANGE / f"{name}-bundle"

    def doc(n):
        return json.loads((d / n).read_text("utf-8"))

    spec, manifest = doc("spec.json"), doc("manifest.json")
    data = next(r for r in doc("datapackage.json")["resources"] if r["path"] == "data.csv")
    columns = [(f["name"], len(f["categories"]), bool(f.get("categoriesOrdered"))) for f in data["schema"]["fields"]]
    n = (d / "data.csv").read_text("utf-8").count("\n") - 1
    return d, dict(spec=spec["spec"], configuration=spec["configuration"], configuration_id=spec["configuration_id"],
                   budget=doc("budget.json"), criteria=doc("metrics.json")["criteria"], n=n, columns=columns,
                   created=manifest["created"], dpbundle_version=manifest["dpbundle_version"],
                   fingerprint=manifest["public_key"]["fingerprint"], files=[f["path"] for f in manifest["files"]],
                   preregistration=None)


@pytest.mark.parametrize("name", ["births", "persons"])
def test_the_entry_of_a_bundle_made_before_the_split_is_the_same_bytes(name):
    d, kw = _facts(name)
    entry = registry_entry(**kw)
    assert entry == registry_entry_of(RegistryFacts(**kw))
    assert registry_entry_bytes(entry) == (d / "registry-entry.yaml").read_bytes()


def test_a_missing_field_is_a_registry_entry_error():
    _, kw = _facts("births")
    kw = copy.deepcopy(kw)
    del kw["budget"]["generation"]
    with pytest.raises(RegistryEntryError, match=r"registry-entry.yaml: the bundle's documents lack a field "
                                                 r"it needs \(KeyError\('generation'\)\)"):
        registry_entry(**kw)
