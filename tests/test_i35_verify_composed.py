"""Issue 35, item "Earlier spends on the same data are hidden": manifest.json's ``ledger`` states
the earlier spends' epsilons and the composed epsilon, and both audits check them.

Three real releases on one registry with one temporary ledger (the second and third with
--allow-additional-spend; between them a run killed before it wrote anything, recorded in the
ledger as started): each bundle states its rank, the earlier epsilons as the earlier bundles'
own budget.json gives them (the killed run's too) and their exact sum with its own total. The
public audit fails a bundle whose composed epsilon is not that sum or that drops an earlier
epsilon; the enclave audit (--ledger) fails a lowered count or a changed earlier epsilon, which
the public audit cannot see.
"""
from __future__ import annotations

import json
import shutil
import sys
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.release.bundle import keys  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

KILLED_EPSILON = 0.7


def _release(t: Path, name: str, spec: Path, data: Path, *more: str) -> Path:
    res = CliRunner().invoke(app, ["release", str(spec), str(data), "--out", str(t / name), "--key", str(t / "k.key"),
                                   "--ledger", str(t / "ledger.jsonl"), "--transcript", str(t / f"{name}.jsonl"),
                                   *more])
    assert res.exit_code == 0, res.output
    return t / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from dpbundle.release.data.fingerprint import file_sha256
    from dpbundle.release.scheme.ledger import Ledger

    t = tmp_path_factory.mktemp("i35-composed")
    assert CliRunner().invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    spec = fx.fast_spec(t / "fast.yaml")
    data = fx.example_registry(t / "registry.csv", 3000, 5)
    first = _release(t, "B1", spec, data)
    second = _release(t, "B2", spec, data, "--allow-additional-spend")
    # a run killed after its reservation, before it wrote anything: it counts all the same
    Ledger(t / "ledger.jsonl").record(file_sha256(data), "0" * 64, KILLED_EPSILON, "a killed run")
    third = _release(t, "B3", spec, data, "--allow-additional-spend")
    return {"t": t, "bundles": [first, second, third], "pub": t / "k.pub", "key": t / "k.key",
            "ledger": t / "ledger.jsonl", "data": data}


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def total(bundle: Path) -> float:
    return json.loads((bundle / "budget.json").read_text())["total_epsilon"]


def exact_sum(values) -> float:
    return float(sum((Fraction(repr(float(v))) for v in values), Fraction(0)))


def forged(runs, tmp_path, bundle: Path, **ledger) -> Path:
    """A copy whose manifest's ledger fields are changed and signed again with the publisher's key."""
    copy = tmp_path / bundle.name
    shutil.copytree(bundle, copy)
    doc = manifest(copy)
    doc["ledger"].update(ledger)
    for name in [k for k, v in ledger.items() if v is None]:
        del doc["ledger"][name]
    raw = (json.dumps(doc, indent=2) + "\n").encode()
    (copy / "manifest.json").write_bytes(raw)
    (copy / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(runs["key"]), raw))
    return copy


def test_each_release_states_the_earlier_epsilons_and_their_composition(runs):
    b1, b2, b3 = runs["bundles"]
    assert manifest(b1)["ledger"]["spends_on_registry"] == 1
    assert manifest(b1)["ledger"]["earlier_epsilons"] == []
    assert manifest(b1)["ledger"]["composed_epsilon"] == total(b1)
    second = manifest(b2)["ledger"]
    assert second["spends_on_registry"] == 2
    assert second["earlier_epsilons"] == [total(b1)]
    assert second["composed_epsilon"] == exact_sum([total(b1), total(b2)])
    third = manifest(b3)["ledger"]
    assert third["spends_on_registry"] == 4          # the killed run counts
    assert third["earlier_epsilons"] == [total(b1), total(b2), KILLED_EPSILON]
    assert third["composed_epsilon"] == exact_sum([total(b1), total(b2), KILLED_EPSILON, total(b3)])


def test_both_audits_pass_the_honest_bundles(runs):
    for bundle in runs["bundles"]:
        rep = run_audit(bundle, pubkey=runs["pub"], ledger=runs["ledger"])
        budget, led = rep.get("budget"), rep.get("ledger")
        assert budget.result == "pass", budget.problems
        assert led.result == "pass", led.problems
        assert budget.facts["composed_epsilon"] == manifest(bundle)["ledger"]["composed_epsilon"]
    detail = run_audit(runs["bundles"][2], pubkey=runs["pub"]).get("budget").detail
    assert "over the 4 spend(s) recorded on the registry (3 earlier" in detail


def _budget_problems(runs, bundle: Path) -> list[str]:
    return run_audit(bundle, pubkey=runs["pub"]).get("budget").problems


def _arithmetic_problems(runs, bundle: Path) -> list[str]:
    """The budget check's problems but the registry entry's re-derivation: this forger re-signs
    only the manifest, and registry-entry.yaml (which states the composed loss) still says the
    original; a careful forger renders it again (templates/metadata), which the public audit
    cannot tell from an honest one. What is left is the public arithmetic."""
    return [p for p in _budget_problems(runs, bundle) if not p.startswith("registry-entry.yaml: not the entry")]


def test_a_tampered_composed_epsilon_fails_the_public_audit(runs, tmp_path):
    b2 = runs["bundles"][1]
    copy = forged(runs, tmp_path, b2, composed_epsilon=total(b2))      # the earlier spend left out
    assert any("composed_epsilon" in p and "is not budget.json's total_epsilon plus" in p
               for p in _budget_problems(runs, copy))


def test_a_dropped_earlier_epsilon_fails_the_public_audit(runs, tmp_path):
    b3 = runs["bundles"][2]
    earlier = manifest(b3)["ledger"]["earlier_epsilons"][:-1]          # the killed run hidden
    copy = forged(runs, tmp_path, b3, earlier_epsilons=earlier, composed_epsilon=exact_sum([*earlier, total(b3)]))
    problems = _budget_problems(runs, copy)
    assert any("earlier_epsilons lists 2 epsilon(s), but spends_on_registry 4 means 3" in p for p in problems), problems


def test_a_03_ledger_without_the_composition_fails_the_public_audit(runs, tmp_path):
    copy = forged(runs, tmp_path, runs["bundles"][1], earlier_epsilons=None, composed_epsilon=None)
    assert any("states no earlier_epsilons and composed_epsilon" in p for p in _budget_problems(runs, copy))


def test_a_lowered_count_passes_the_public_arithmetic_but_fails_the_ledger(runs, tmp_path):
    b2 = runs["bundles"][1]
    copy = forged(runs, tmp_path, b2, spends_on_registry=1, earlier_epsilons=[], composed_epsilon=total(b2))
    assert _arithmetic_problems(runs, copy) == []
    led = run_audit(copy, pubkey=runs["pub"], ledger=runs["ledger"]).get("ledger")
    assert led.failed and any("states 1 spend(s)" in p for p in led.problems), led.problems


def test_a_changed_earlier_epsilon_fails_the_ledger(runs, tmp_path):
    b3 = runs["bundles"][2]
    earlier = [*manifest(b3)["ledger"]["earlier_epsilons"][:-1], 0.1]
    copy = forged(runs, tmp_path, b3, earlier_epsilons=earlier, composed_epsilon=exact_sum([*earlier, total(b3)]))
    assert _arithmetic_problems(runs, copy) == []
    led = run_audit(copy, pubkey=runs["pub"], ledger=runs["ledger"]).get("ledger")
    assert any("ledger.earlier_epsilons[2] 0.1 is not the epsilon the ledger records" in p for p in led.problems), \
        led.problems


@pytest.mark.parametrize("ledger, words", [
    ({"spends_on_registry": 2, "spend_id": "x", "earlier_epsilons": []}, "lists 0 epsilon(s)"),
    ({"spends_on_registry": 1, "spend_id": "x"}, "earlier_epsilons must list"),
    ({"spends_on_registry": 2, "spend_id": "x", "earlier_epsilons": [float("nan")]}, "finite number >= 0"),
    ({"spends_on_registry": 2, "spend_id": "x", "earlier_epsilons": [1.0], "composed_epsilon": 2.0},
     "composed_epsilon 2.0 is not"),
])
def test_the_writer_refuses_an_inconsistent_ledger_statement(ledger, words):
    from dpbundle.release.bundle.write import BundleError, _ledger_doc

    with pytest.raises(BundleError, match=words.replace("(", r"\(").replace(")", r"\)")):
        _ledger_doc(ledger, 0.5)


def test_the_writer_composes_exactly():
    from dpbundle.release.bundle.write import _ledger_doc

    doc = _ledger_doc({"spends_on_registry": 3, "spend_id": "x", "earlier_epsilons": [0.1, 0.2]}, 0.3)
    assert 0.1 + 0.2 + 0.3 != 0.6                     # floats: 0.6000000000000001
    assert doc["composed_epsilon"] == 0.6
