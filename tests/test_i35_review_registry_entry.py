"""Issue 35, review H11: registry-entry.yaml (edition 2) of a simulated release does not say the
curator ran the spec "on the real registry", and lists the earlier runs' epsilons as a list in
words ("3 and 3", not "3, 3")."""
from __future__ import annotations

import json

import pytest

from dpbundle.release.bundle.registry_entry import registry_entry_of
from i35_datasheet_util import PRECHANGE
from test_i35_registry_entry_wording import _facts


@pytest.mark.parametrize("flag", [True, False])
def test_the_actors_name_the_registry_the_release_was_made_from(flag):
    entry = registry_entry_of(_facts("births", release={"simulated": flag}))
    actors = entry["deployment"]["deployment_model"]["actors"]
    assert ("on the real registry" in actors) is not flag
    assert ("on the simulated registry" in actors) is flag
    assert ("sees the simulated data" in actors) is flag


@pytest.mark.parametrize("earlier, words", [([3.0], "epsilon 3."), ([3.0, 3.0], "epsilon 3 and 3."),
                                            ([1.5, 0.25, 2.0], "epsilon 1.5, 0.25 and 2.")])
def test_the_earlier_runs_epsilons_read_as_a_list(earlier, words):
    total = json.loads((PRECHANGE / "births-bundle" / "budget.json").read_text())["total_epsilon"]
    ledger = {"spends_on_registry": len(earlier) + 1, "spend_id": "0" * 32, "earlier_epsilons": earlier,
              "composed_epsilon": round(total + sum(earlier), 10)}
    details = registry_entry_of(_facts("births", ledger=ledger))["deployment"]["privacy_loss"][
        "privacy_parameters_details"]
    assert f"the earlier runs spent {words}" in details, details
