"""Issue 35: registry-entry.yaml (edition 2) says SIMULATED for a simulated release, states the
privacy loss composed over every recorded run, and has no raw machine text."""
from __future__ import annotations

import json
import math

import pytest

from dpbundle.release.bundle.registry_entry import RegistryFacts, registry_entry_bytes, registry_entry_of
from i35_datasheet_util import PRECHANGE


def _facts(name: str, *, version: str = "0.3.0", release: dict | None = None, ledger: dict | None = None,
           generator: dict | None = None) -> RegistryFacts:
    d = PRECHANGE / f"{name}-bundle"

    def doc(n):
        return json.loads((d / n).read_text("utf-8"))

    spec, manifest = doc("spec.json"), doc("manifest.json")
    spec["spec"]["release"].update(release or {})
    configuration = dict(spec["configuration"])
    if generator is not None:
        configuration["generator"] = generator
    data = next(r for r in doc("datapackage.json")["resources"] if r["path"] == "data.csv")
    columns = [(f["name"], len(f["categories"]), bool(f.get("categoriesOrdered"))) for f in data["schema"]["fields"]]
    return RegistryFacts(spec=spec["spec"], configuration=configuration, configuration_id=spec["configuration_id"],
                         budget=doc("budget.json"), criteria=doc("metrics.json")["criteria"],
                         n=(d / "data.csv").read_text("utf-8").count("\n") - 1, columns=columns,
                         created=manifest["created"], dpbundle_version=version,
                         fingerprint=manifest["public_key"]["fingerprint"],
                         files=[f["path"] for f in manifest["files"]], ledger=ledger)


def _text(entry: dict) -> str:
    return registry_entry_bytes(entry).decode("utf-8")


@pytest.mark.parametrize("flag", [True, False])
def test_simulated_is_in_the_name_description_and_notes_iff_flagged(flag):
    entry = registry_entry_of(_facts("births", release={"simulated": flag}))
    basic, notes = entry["deployment"]["basic"], entry["deployment"]["administrative"]["notes"]
    for text in (basic["name"], basic["description"], notes):
        assert ("SIMULATED" in text) is flag
    if flag:
        assert basic["description"].index("SIMULATED") < basic["description"].index("registry")
    model = entry["deployment"]["deployment_model"]["model_name_details"]
    assert ("simulated registry" in model) is flag and ("confidential registry" in model) is not flag


def test_the_composed_loss_is_stated_when_earlier_runs_are_recorded():
    facts = _facts("births")
    total = facts.budget["total_epsilon"]
    earlier = [0.5, 1.25, 0]
    ledger = {"spends_on_registry": 4, "spend_id": "0" * 32, "earlier_epsilons": earlier,
              "composed_epsilon": total + sum(earlier)}
    entry = registry_entry_of(_facts("births", ledger=ledger))
    loss = entry["deployment"]["privacy_loss"]
    details = loss["privacy_parameters_details"]
    assert "4th run on the registry" in details
    assert f"= {total + sum(earlier):g}" in details
    assert "the cap bounds this release's total only" in details
    assert loss["privacy_parameters"]["epsilon"] == total   # the bundle's own total (the audit's check)
    assert entry["deployment"]["deployment_model"]["release_type"] == "Many releases"
    from dpbundle.release.common import jsonschemas

    jsonschemas.validate(entry, "registry-entry")    # the registry's own enum ("Multiple" is not one)
    only = registry_entry_of(_facts("births", ledger={"spends_on_registry": 1, "spend_id": "0" * 32,
                                                      "earlier_epsilons": [], "composed_epsilon": total}))
    assert "the only one on the registry" in only["deployment"]["privacy_loss"]["privacy_parameters_details"]


def test_no_empty_generator_parameters_nor_raw_generator_names():
    entry = registry_entry_of(_facts("persons", generator={"type": "privsyn"}))
    text = _text(entry)
    assert "Generator PrivSyn, parts" in text
    assert "()" not in text and "privsyn" not in text
    assert "stakeholders' 2.0" not in _text(registry_entry_of(_facts("births")))


def test_edition_1_keeps_the_0_2_0_words():
    """(tests/test_registry_entry_sections.py checks the 0.2.0 bytes; here: the flag changes nothing.)"""
    entry = registry_entry_of(_facts("persons", version="0.2.0", release={"simulated": True}))
    assert "SIMULATED" not in _text(entry) and "Generator privsyn" in _text(entry)
