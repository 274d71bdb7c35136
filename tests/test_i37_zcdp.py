"""Issue 37, item 2: zero-concentrated DP beside pure DP (``privacy.definition: zcdp``).

A zCDP release is walked through release, public audit and enclave replay; its budget.json's rho
parts and its (epsilon, delta) are recomputed here by hand (and with OpenDP's conversion called
directly); a key holder's edits of the zCDP numbers fail the audit; specs the accounting does not
cover are refused before anything is spent.
"""
from __future__ import annotations

import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

import audit_fixtures as fx
from i36_closure_util import edit_json, resign
from test_i36_closure_walk import unclassified
from test_i37_resample import _resample_spec

RHO_GEN, DELTA, EPS_COUNT, EPS_CRITERION = 0.5, 1e-9, 0.1, 0.05


def _zcdp_spec(path: Path, **privacy) -> Path:
    """The fast births spec (one configuration, loose thresholds) under zCDP: PrivSyn with
    Gaussian measurements at rho 0.5, criteria at epsilon 0.05 each, fitted once."""
    _resample_spec(path)
    spec = yaml.safe_load(path.read_text())
    spec["generators"] = [{"type": "privsyn"}]
    for e in spec["acceptance"]:
        e["epsilon"] = EPS_CRITERION
    priv = spec["privacy"]
    priv.pop("epsilon_generation")
    priv.update({"definition": "zcdp", "rho_generation": RHO_GEN, "delta": DELTA, "epsilon_cap": 20.0,
                 "records": {"policy": "dp_count", "epsilon": EPS_COUNT}}, **privacy)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _opendp_epsilon(rho: float, delta: float) -> float:
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    meas = dp.m.make_user_measurement(dp.atom_domain(T=bool), dp.change_one_distance(),
                                      dp.zero_concentrated_divergence(), lambda _x: 0.0,
                                      lambda d: rho * d * d, TO="f64")
    return dp.c.make_zCDP_to_approxDP(meas).map(1).epsilon(delta)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    tmp = tmp_path_factory.mktemp("i37z")
    keys.write_keypair(tmp / "k")
    spec = _zcdp_spec(tmp / "spec.yaml")
    data = fx.example_registry(tmp / "births.csv", 3000, 5)
    with release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "ledger.jsonl",
                 transcript=tmp / "t.jsonl"):
        pass
    return {"bundle": tmp / "b", "pub": tmp / "k.pub", "key": tmp / "k.key", "transcript": tmp / "t.jsonl",
            "data": data, "spec": spec, "ledger": tmp / "ledger.jsonl"}


def test_the_budget_composes_in_rho_and_states_the_epsilon_at_delta(made):
    b = json.loads((made["bundle"] / "budget.json").read_text())
    criteria = len(yaml.safe_load(made["spec"].read_text())["acceptance"])
    eps_eval = Fraction(str(EPS_CRITERION)) * criteria
    want = {"rho_count": Fraction(str(EPS_COUNT)) ** 2 / 2, "rho_generation": Fraction(str(RHO_GEN)),
            "rho_selection": (2 * eps_eval) ** 2 / 2, "rho_pre_selection": Fraction(0)}
    want["total_rho"] = sum(want.values())
    assert b["definition"] == "zcdp" and b["zcdp"]["delta"] == DELTA
    for name, value in want.items():
        assert Fraction(str(b["zcdp"][name])) == value, name
    assert b["generation"]["rho"] == RHO_GEN and "epsilon" not in b["generation"]
    rho_up = float(want["total_rho"])                    # the total rho rounded up to a float
    if Fraction(rho_up) < want["total_rho"]:
        rho_up = math.nextafter(rho_up, math.inf)
    assert b["total_epsilon"] == _opendp_epsilon(rho_up, DELTA)
    # the generator's parts are in rho, their floats' exact sum at most its rho
    assert sum(Fraction(p["rho"]) for p in b["generation"]["parts"]) <= Fraction(str(RHO_GEN))
    # the ledger records the spend as the epsilon at delta
    assert str(b["total_epsilon"])[:8] in made["ledger"].read_text()


def test_the_public_audit_and_the_enclave_replay_verify_it(made):
    from dpbundle.audit.runner import run_audit

    rep = run_audit(str(made["bundle"]), pubkey=str(made["pub"]), transcript=str(made["transcript"]),
                    data=str(made["data"]))
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    assert rep.get("replay").result == "pass"


def test_every_gaussian_draw_is_in_the_one_fit(made):
    recs = [json.loads(x) for x in made["transcript"].read_text().splitlines()[1:] if x.strip()]
    fit = next(i for i, r in enumerate(recs) if r.get("mark") == "fit")
    end = next(i for i, r in enumerate(recs) if r.get("mark") == "fit end")
    gaussian = [i for i, r in enumerate(recs) if r.get("kind") == "gaussian"]
    assert gaussian and all(fit < i < end for i in gaussian)
    assert all(r["rho"] > 0 for r in recs if r.get("kind") == "gaussian")


def test_the_public_text_says_zcdp_with_its_epsilon_and_delta(made):
    from dpbundle.mechanisms.zcdp import shown_epsilon

    b = json.loads((made["bundle"] / "budget.json").read_text())
    html = (made["bundle"] / "README.html").read_text()
    assert "Zero-concentrated differential privacy (zCDP)" in html and "Pure differential privacy." not in html
    assert shown_epsilon(b["total_epsilon"]) in html and "1e-09" in html
    assert "probability (delta)" in html         # what the weaker definition gives up, in words
    entry = yaml.safe_load((made["bundle"] / "registry-entry.yaml").read_text())
    dep = entry["deployment"]
    assert dep["dp_variant"]["variant_name"] == "Zero-concentrated DP"
    assert dep["privacy_loss"]["privacy_parameters"] == {"rho": b["zcdp"]["total_rho"],
                                                        "epsilon": b["total_epsilon"], "delta": DELTA}
    assert "k^2 times the rho" in dep["privacy_loss"]["privacy_unit_details"]


def test_every_field_of_the_zcdp_bundle_has_a_closure_rule(made):
    assert unclassified(made["bundle"]) == []


@pytest.mark.parametrize("edit", ["smaller_epsilon", "smaller_rho", "pure_claimed", "generation_rho"])
def test_a_key_holders_edit_of_the_zcdp_numbers_fails_the_audit(made, tmp_path, edit):
    from dpbundle.audit.runner import run_audit

    b = tmp_path / "b"
    shutil.copytree(made["bundle"], b)

    def change(doc):
        if edit == "smaller_epsilon":
            doc["total_epsilon"] = round(doc["total_epsilon"] / 2, 6)
        elif edit == "smaller_rho":
            doc["zcdp"]["rho_selection"] = 0.0
            doc["zcdp"]["total_rho"] = doc["zcdp"]["rho_count"] + doc["zcdp"]["rho_generation"]
        elif edit == "pure_claimed":
            doc.pop("definition")
        else:
            doc["generation"]["rho"] = RHO_GEN / 2

    edit_json(b / "budget.json", change)
    resign(b, made["key"])
    rep = run_audit(str(b), pubkey=str(made["pub"]))
    assert rep.verdict != "verified"
    assert rep.get("budget").failed, [(c.check, c.problems) for c in rep.checks if c.failed]


@pytest.mark.parametrize("change, message", [
    ({"selection": {"stop_probability": 0.05}}, "needs privacy.selection.retries: resample"),
    ({"epsilon_generation": 1.0}, "a zCDP spec gives the generator's budget as privacy.rho_generation"),
])
def test_specs_the_zcdp_accounting_does_not_cover_are_refused(tmp_path, change, message):
    from dpbundle.release.spec.load import SpecError, load_spec

    with pytest.raises(SpecError, match=message):
        load_spec(_zcdp_spec(tmp_path / "spec.yaml", **change))


def test_a_pure_dp_only_generator_is_refused_under_zcdp(tmp_path):
    from dpbundle.release.spec.load import SpecError, load_spec

    path = _zcdp_spec(tmp_path / "spec.yaml")
    spec = yaml.safe_load(path.read_text())
    spec["generators"] = [{"type": "privbayes"}]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(SpecError, match="measures under pure DP only"):
        load_spec(path)


def test_a_zcdp_release_with_a_public_count_passes_its_audit(tmp_path):
    """declared_public under zCDP (no count part: rho_count 0): release, public audit, replay."""
    from dpbundle.audit.runner import run_audit
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    keys.write_keypair(tmp_path / "k")
    spec = _zcdp_spec(tmp_path / "spec.yaml", records={"policy": "declared_public"})
    data = fx.example_registry(tmp_path / "births.csv", 2000, 7)
    with release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=tmp_path / "l.jsonl",
                 transcript=tmp_path / "t.jsonl"):
        pass
    b = json.loads((tmp_path / "b" / "budget.json").read_text())
    assert b["zcdp"]["rho_count"] == 0
    rep = run_audit(str(tmp_path / "b"), pubkey=str(tmp_path / "k.pub"), transcript=str(tmp_path / "t.jsonl"),
                    data=str(data))
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
