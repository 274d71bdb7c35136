"""Review of issue 37's ``retries: resample`` (adversarial review): a key holder's forged
transcripts against the enclave replay.

The bundle: a real resample release whose first attempt is made to fail (its verdict flipped after
the criteria, as a failing candidate would end), so the selected attempt is index 1 and the
transcript has one failed attempt. Each forgery edits the private transcript, then recomputes the
commitment and re-signs the bundle with the key (what a publisher holding the key can do), and
runs the public audit with the enclave replay.

Refused, and pinned here: a fit block after an attempt, two fit blocks, a failed fit followed by
attempts, a fit configuration other than the selected one, a transcript that drops
``retries: resample``.

Not refused (``xfail(strict=True)``, real gaps in the replay's checks): the replay reads only the
fit block and the selected attempt. So a failed attempt that fits the generator again
(``eps_gen`` spent once more, although budget.json counts it once), a failed attempt with another
configuration, or a second unmarked fit between 'fit end' and the first attempt all come back
"verified". The accounting total = count + eps_gen + 2 x eps_eval holds only if each attempt spends
nothing but the criteria; the replay could check that each attempt spends at most
per_iteration_epsilon (the sum of its recorded draws' epsilons) and that no draw falls outside the
records-policy head, the fit block and the attempts.
"""
from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

import audit_fixtures as fx
from i36_closure_util import rerender_datasheet, resign


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    import dpbundle.release.scheme.selection as selection
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    tmp = tmp_path_factory.mktemp("i37review")
    keys.write_keypair(tmp / "k")
    spec = fx.fast_spec(tmp / "spec.yaml", policy="dp_count")
    doc = yaml.safe_load(spec.read_text())
    doc["privacy"]["records"] = {"policy": "dp_count", "epsilon": 0.1}
    doc["privacy"]["selection"] = {"stop_probability": 0.01, "retries": "resample"}
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(tmp / "births.csv", 2000, 5)
    real, calls = selection.run_resampled, []

    def first_fails(*args, **kwargs):
        result = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            result.passed = False
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(selection, "run_resampled", first_fails)
        release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "l.jsonl",
                transcript=tmp / "t.jsonl")
    return {"tmp": tmp, "data": data}


def _at(recs, name, **kw):
    return [i for i, r in enumerate(recs) if r.get("kind") == "mark" and r.get("mark") == name
            and all(r.get(k) == v for k, v in kw.items())]


def _fit_draws(recs):
    f, e = _at(recs, "fit")[0], _at(recs, "fit end")[0]
    return [copy.deepcopy(r) for r in recs[f + 1:e] if r.get("kind") != "mark"]


def _refit_in_failed_attempt(recs):
    i = _at(recs, "iteration", index=0)[0]
    j = i + 1 + (recs[i + 1].get("mark") == "arithmetic")
    return recs[:j] + _fit_draws(recs) + recs[j:]


def _failed_attempt_other_configuration(recs):
    i = _at(recs, "iteration", index=0)[0]
    recs[i]["config"] = copy.deepcopy(recs[i]["config"])
    recs[i]["config"]["projection"]["min_count"] = 7
    recs[i]["config_id"] = "0" * 16
    return recs


def _second_fit_after_the_block(recs):
    e = _at(recs, "fit end")[0]
    return recs[:e + 1] + _fit_draws(recs) + recs[e + 1:]


def _fit_after_first_attempt(recs):
    f, e = _at(recs, "fit")[0], _at(recs, "fit end")[0]
    block, rest = recs[f:e + 1], recs[:f] + recs[e + 1:]
    i = _at(rest, "iteration", index=1)[0]
    return rest[:i] + block + rest[i:]


def _two_fit_blocks(recs):
    f, e = _at(recs, "fit")[0], _at(recs, "fit end")[0]
    return recs[:f] + copy.deepcopy(recs[f:e + 1]) + recs[f:]


def _failed_fit(recs):
    recs[_at(recs, "fit end")[0]]["failure"] = "AttemptFailure: forged"
    return recs


def _other_fit_configuration(recs):
    recs[_at(recs, "fit")[0]]["config"]["projection"]["min_count"] = 3
    return recs


def _refit_claimed_in_transcript(recs):
    recs[_at(recs, "selection")[0]].pop("retries")
    return recs


def _audit_forged(made, tmp_path, edit):
    from dpbundle.audit.replay import commitment_of, read_transcript
    from dpbundle.audit.runner import run_audit

    src = made["tmp"]
    shutil.copytree(src / "b", tmp_path / "b")
    salt, _raw, recs = read_transcript(src / "t.jsonl")
    recs = edit(recs)
    header = (src / "t.jsonl").read_text().splitlines()[0]
    body = "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in recs)
    (tmp_path / "t.jsonl").write_text(header + "\n" + body)
    value = commitment_of(salt, recs)
    resign(tmp_path / "b", src / "k.key",
           edit_manifest=lambda m: m["transcript_commitment"].__setitem__("value", value))
    rerender_datasheet(tmp_path / "b")       # the datasheet shows the commitment
    resign(tmp_path / "b", src / "k.key")
    return run_audit(str(tmp_path / "b"), pubkey=str(src / "k.pub"), transcript=str(tmp_path / "t.jsonl"),
                     data=str(made["data"]))


def test_the_unforged_bundle_selects_the_second_attempt_and_verifies(made, tmp_path):
    recs = [json.loads(x) for x in (made["tmp"] / "t.jsonl").read_text().splitlines()[1:] if x.strip()]
    assert [r["index"] for r in recs if r.get("mark") == "selected"] == [1]
    rep = _audit_forged(made, tmp_path, lambda recs: recs)
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]


@pytest.mark.parametrize("edit", [_fit_after_first_attempt, _two_fit_blocks, _failed_fit,
                                  _other_fit_configuration, _refit_claimed_in_transcript],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_forged_fit_block_fails_the_replay(made, tmp_path, edit):
    rep = _audit_forged(made, tmp_path, edit)
    assert rep.verdict != "verified"
    assert rep.get("replay").failed, [(c.check, c.problems) for c in rep.checks if c.failed]


@pytest.mark.parametrize("edit", [_refit_in_failed_attempt, _failed_attempt_other_configuration,
                                  _second_fit_after_the_block],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_transcript_that_spends_more_than_the_resample_total_fails_the_replay(made, tmp_path, edit):
    rep = _audit_forged(made, tmp_path, edit)
    assert rep.verdict != "verified"
    assert rep.get("replay").failed
