"""Issue 36: the run is bound to the bundle's source files through the transcript commitment.

A publisher holding the key forged bundles that the enclave replay called VERIFIED, because the
replay recomputed the criteria from the bundle's own, edited spec: a threshold tightened in
spec.json (metrics.json edited to match, the datasheet re-rendered), a spec text rewritten, a
version downgrade, a lowered count of spends. A release now records in its transcript's
'selection' mark what shaped the run (audit/run_binding.py); each forgery below, re-signed with
the publisher's key, must fail the enclave replay naming the file, while the untouched bundle
replays."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402


def _release(t: Path, name: str, ledger: Path) -> dict:
    res = CliRunner().invoke(app, ["release", str(t / "fast.yaml"), str(t / "registry.csv"), "--out", str(t / name),
                                   "--key", str(t / "k.key"), "--ledger", str(ledger),
                                   "--transcript", str(t / f"{name}.jsonl"), "--allow-additional-spend"])
    assert res.exit_code == 0, res.output
    return {"bundle": t / name, "transcript": t / f"{name}.jsonl"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    t = tmp_path_factory.mktemp("run-binding")
    assert CliRunner().invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    fx.fast_spec(t / "fast.yaml")
    fx.example_registry(t / "registry.csv", 3000, 5)
    ledger = t / "ledger.jsonl"
    first = _release(t, "first", ledger)
    second = _release(t, "second", ledger)     # the second recorded spend on the registry
    return {"first": first, "second": second, "data": t / "registry.csv", "key": t / "k.key",
            "pub": t / "k.pub"}


def _copy(run: dict, tmp_path: Path) -> Path:
    out = tmp_path / "B"
    shutil.copytree(run["bundle"], out)
    return out


def _enclave(runs: dict, bundle: Path, run: dict):
    return run_audit(bundle, pubkey=runs["pub"], transcript=run["transcript"], data=runs["data"])


def test_the_transcript_records_the_run_and_an_untouched_bundle_replays(runs):
    for name in ("first", "second"):
        rep = _enclave(runs, runs[name]["bundle"], runs[name])
        assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
        assert rep.get("replay").facts["run_binding"] == "matches"
    mark = next(json.loads(line) for line in runs["second"]["transcript"].read_text().splitlines()[1:]
                if '"selection"' in line)
    assert mark["run"]["ledger"]["spends_on_registry"] == 2
    assert len(mark["run"]["ledger"]["earlier_epsilons"]) == 1


def _tighten_threshold(bundle: Path) -> None:
    metrics = json.loads((bundle / "metrics.json").read_text())
    row = metrics["criteria"][0]
    new = round(abs(row["dp_value"]) * 1.1 + 1e-9, 12)

    def spec_edit(doc):
        entry = next(e for e in doc["spec"]["acceptance"] if e["id"] == row["id"])
        entry["threshold"] = new

    def metrics_edit(doc):
        doc["criteria"][0]["threshold"] = new

    cu.edit_json(bundle / "spec.json", spec_edit)
    cu.edit_json(bundle / "metrics.json", metrics_edit)


def _rewrite_description(bundle: Path) -> None:
    cu.edit_json(bundle / "spec.json",
                 lambda doc: doc["spec"]["release"].__setitem__("description", "Real, unaltered records."))


FORGERIES = {
    "threshold tightened in spec.json and metrics.json": ("first", _tighten_threshold, None, "spec.json"),
    "spec description rewritten": ("first", _rewrite_description, None, "spec.json"),
    "spends on the registry lowered": ("second", None,
                                       lambda m: m["ledger"].update(spends_on_registry=1, earlier_epsilons=[],
                                                                    composed_epsilon=m["ledger"]["composed_epsilon"]
                                                                    - m["ledger"]["earlier_epsilons"][0]),
                                       "manifest.json"),
}


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_a_forgery_of_the_source_files_fails_the_enclave_replay(runs, tmp_path, case):
    which, edit_files, edit_manifest, file = FORGERIES[case]
    bundle = _copy(runs[which], tmp_path)
    if edit_files is not None:
        edit_files(bundle)
    cu.rerender_datasheet(bundle)
    cu.resign(bundle, runs["key"], edit_manifest)
    rep = _enclave(runs, bundle, runs[which])
    replay = rep.get("replay")
    assert replay.result == "fail", replay.detail
    assert any(p.startswith(f"{file}:") and "differs from what the committed transcript recorded" in p
               for p in replay.problems), replay.problems
    assert rep.verdict == "failed"


def test_a_version_downgrade_fails_the_enclave_replay(runs, tmp_path):
    bundle = _copy(runs["first"], tmp_path)
    cu.resign(bundle, runs["key"], lambda m: m.__setitem__("dpbundle_version", "0.2.0"))
    rep = _enclave(runs, bundle, runs["first"])
    assert any("version downgrade" in p for p in rep.get("replay").problems), rep.get("replay").problems
    assert rep.verdict == "failed"
