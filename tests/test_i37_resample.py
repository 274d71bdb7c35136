"""Issue 37: ``privacy.selection.retries: resample`` — the generator is fitted once, before the
private selection, and every attempt samples that model again and evaluates the criteria.

total = count + generation + 2 x criteria (instead of count + 2 x (generation + criteria)); the
release, the public audit and the enclave replay walk it, and a key holder's edits fail.
"""
from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

import audit_fixtures as fx
from i36_closure_util import edit_json, resign

from dpbundle.mechanisms import exact


def _resample_spec(path: Path, *, gamma: float = 0.05, threshold: float | None = None) -> Path:
    """The fast births spec (one configuration) with ``retries: resample``, dp_count policy;
    ``threshold``: the kway criterion's, measured with epsilon 5 (noise scale 1 / (5 n): its
    verdict is then the true error's)."""
    fx.fast_spec(path, policy="dp_count")
    spec = yaml.safe_load(path.read_text())
    spec["privacy"]["records"] = {"policy": "dp_count", "epsilon": 0.1}
    spec["privacy"]["selection"] = {"stop_probability": gamma, "retries": "resample"}
    if threshold is not None:
        for e in spec["acceptance"]:
            if e["type"] == "kway_marginals":
                e["threshold"], e["epsilon"] = threshold, 5
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _records(transcript: Path) -> list[dict]:
    return [json.loads(x) for x in transcript.read_text().splitlines()[1:] if x.strip()]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    tmp = tmp_path_factory.mktemp("i37r")
    keys.write_keypair(tmp / "k")
    spec = _resample_spec(tmp / "spec.yaml")
    data = fx.example_registry(tmp / "births.csv", 3000, 5)
    with release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "ledger.jsonl",
                 transcript=tmp / "t.jsonl"):
        pass
    return {"tmp": tmp, "bundle": tmp / "b", "pub": tmp / "k.pub", "key": tmp / "k.key",
            "transcript": tmp / "t.jsonl", "data": data, "spec": spec}


def test_the_budget_counts_the_generator_once_and_the_criteria_twice(made):
    spec = yaml.safe_load(made["spec"].read_text())
    b = json.loads((made["bundle"] / "budget.json").read_text())
    gen = exact.dec(spec["privacy"]["epsilon_generation"])
    ev = exact.total(c["epsilon"] for c in spec["acceptance"])
    count = exact.dec(spec["privacy"]["records"]["epsilon"])
    assert b["selection"]["retries"] == "resample"
    assert exact.dec(b["per_iteration_epsilon"]) == ev
    assert exact.dec(b["total_epsilon"]) == count + gen + 2 * ev
    assert exact.dec(b["total_epsilon"]) < count + 2 * (gen + ev)
    # OpenDP's maps agree: the count, the fit once, the selection combinator over eps_eval
    assert abs(b["total_epsilon_opendp"] - float(count + gen + 2 * ev)) < 1e-9


def test_the_public_audit_and_the_enclave_replay_verify_it(made):
    from dpbundle.audit.runner import run_audit

    rep = run_audit(str(made["bundle"]), pubkey=str(made["pub"]), transcript=str(made["transcript"]),
                    data=str(made["data"]))
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    assert rep.get("replay").result == "pass"


def test_the_transcript_fits_once_before_the_first_attempt(made):
    recs = _records(made["transcript"])
    marks = [r["mark"] for r in recs if r.get("kind") == "mark"]
    assert marks.count("fit") == 1 and marks.count("fit end") == 1
    assert marks.index("fit") < marks.index("fit end") < marks.index("iteration")
    sel = next(r for r in recs if r.get("mark") == "selection")
    assert sel["retries"] == "resample" and sel["stop_probability"] == 0.05


def test_the_datasheet_and_registry_entry_say_the_model_was_fitted_once(made):
    html = (made["bundle"] / "README.html").read_text()
    assert "fitted once, before\n  the selection" in html or "fitted once, before the selection" in html
    assert "new sample of the model trained once in step 4" in html
    entry = (made["bundle"] / "registry-entry.yaml").read_text()
    assert "(fitted once)" in entry


def test_failed_attempts_resample_the_same_model(tmp_path):
    """Criteria that can never pass and stop probability 0.3: the run ends with nothing released
    after a geometric number of attempts; the generator's draws are all inside the one fit, and
    no attempt draws for the generator again."""
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys
    from dpbundle.release.errors import ReleaseFailed

    keys.write_keypair(tmp_path / "k")
    spec = _resample_spec(tmp_path / "spec.yaml", gamma=0.3, threshold=1e-9)
    data = fx.example_registry(tmp_path / "births.csv", 2000, 3)
    with pytest.raises(ReleaseFailed):
        release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=tmp_path / "l.jsonl",
                transcript=tmp_path / "t.jsonl")
    assert not (tmp_path / "b").exists()
    recs = _records(tmp_path / "t.jsonl")
    fit_at = next(i for i, r in enumerate(recs) if r.get("mark") == "fit")
    end_at = next(i for i, r in enumerate(recs) if r.get("mark") == "fit end")
    fit_purposes = {r.get("purpose") for r in recs[fit_at:end_at] if r.get("kind") != "mark"}
    assert fit_purposes, "the fit made no draw"
    attempts = [r for r in recs if r.get("mark") == "iteration"]
    assert attempts and all(r["config"] == recs[fit_at]["config"] for r in attempts)
    later = {r.get("purpose") for r in recs[end_at:] if r.get("kind") != "mark"}
    assert not (later & fit_purposes), later & fit_purposes
    assert all(r.get("passed") is False for r in recs if r.get("mark") == "iteration end")


def test_resample_without_a_stop_probability_is_refused_before_anything_is_spent(tmp_path):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys
    from dpbundle.release.errors import UnusableInput

    keys.write_keypair(tmp_path / "k")
    spec = _resample_spec(tmp_path / "spec.yaml", gamma=0.0)
    data = fx.example_registry(tmp_path / "births.csv", 500, 3)
    with pytest.raises(UnusableInput, match="stop_probability above 0"):
        release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=tmp_path / "l.jsonl")
    assert not (tmp_path / "l.jsonl").exists() or "spend" not in (tmp_path / "l.jsonl").read_text()


@pytest.mark.parametrize("edit", ["drop_retries", "refit_total"])
def test_a_key_holder_who_hides_the_fit_once_fails_the_audit(made, tmp_path, edit):
    """budget.json edited and re-signed: without `retries` the total no longer adds up; with the
    refit total written in, it differs from the spec's arithmetic."""
    import shutil

    from dpbundle.audit.runner import run_audit

    b = tmp_path / "b"
    shutil.copytree(made["bundle"], b)

    def change(doc):
        if edit == "drop_retries":
            doc["selection"].pop("retries")
        else:
            gen, ev = exact.dec(doc["generation"]["epsilon"]), exact.dec(doc["evaluation"]["epsilon"])
            doc["per_iteration_epsilon"] = float(gen + ev)
            doc["total_epsilon"] = float(exact.dec(doc["records"]["epsilon"]) + 2 * (gen + ev))

    edit_json(b / "budget.json", change)
    resign(b, made["key"])
    rep = run_audit(str(b), pubkey=str(made["pub"]))
    assert rep.verdict != "verified"
    assert rep.get("budget").failed, [(c.check, c.problems) for c in rep.checks if c.failed]


def test_the_spec_total_and_formula():
    from dpbundle.release.spec.model import budget_formula, budget_total

    doc = {"privacy": {"epsilon_generation": 0.94, "records": {"policy": "dp_count", "epsilon": 0.02},
                       "selection": {"retries": "resample", "stop_probability": 0.05}},
           "acceptance": [{"epsilon": 0.01}, {"epsilon": 0.01}]}
    assert budget_total(doc) == Fraction(1)
    assert budget_formula(doc) == "count 0.02 + generation 0.94 (fitted once) + 2 x criteria 0.02 = 1"
    doc["privacy"]["selection"] = {"stop_probability": 0.05}
    assert budget_total(doc) == Fraction("0.02") + 2 * (Fraction("0.94") + Fraction("0.02"))


def test_the_python_api_warns_before_a_run_that_may_never_end_starts(tmp_path, monkeypatch):
    """Stop probability 0 and no sweep estimate: the warning reaches the caller (attributed to
    its line) before the private selection starts, not when the run ends."""
    import warnings

    import dpbundle.release.scheme.selection as selection
    from dpbundle.release.api import DpbundleWarning, release
    from dpbundle.release.bundle import keys

    seen: list = []

    def stop_here(*_a, **_k):
        seen.extend(caught)
        raise KeyboardInterrupt

    keys.write_keypair(tmp_path / "k")
    spec = fx.fast_spec(tmp_path / "spec.yaml")
    data = fx.example_registry(tmp_path / "births.csv", 500, 3)
    monkeypatch.setattr(selection, "select", stop_here)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(BaseException):
        warnings.simplefilter("always")
        release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=tmp_path / "l.jsonl")
    early = [w for w in seen if issubclass(w.category, DpbundleWarning)]
    assert any("may never end" in str(w.message) for w in early), [str(w.message) for w in seen]
    assert all(w.filename == __file__ for w in early), {w.filename for w in early}
