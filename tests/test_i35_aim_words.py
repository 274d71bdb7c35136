"""Issue 35 (review): aim_pure's budget part reads as a sentence in budget.json, the datasheet and
the registry entry ("at most this (nothing without a candidate marginal)" did not parse); the
audit requires 0.3's words in a 0.3 bundle (a bundle claiming 0.2 may keep 0.2's)."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.mechanisms.aim import ROUNDS_PURPOSE, ROUNDS_PURPOSE_0_2  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402


@pytest.fixture(scope="module")
def aim_bundle(tmp_path_factory):
    t = tmp_path_factory.mktemp("aim-words")
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    spec = fx.fast_spec(t / "fast.yaml")
    doc = yaml.safe_load(spec.read_text())
    doc["generators"] = [{"type": "aim_pure", "grid": {"rounds_per_column": [1], "split_1way": [0.2]}}]
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(t / "registry.csv", 3000, 5)
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(t / "B"), "--key", str(t / "k.key"),
                              "--ledger", str(t / "l.jsonl"), "--transcript", str(t / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return {"bundle": t / "B", "key": t / "k.key", "pub": t / "k.pub"}


def test_the_rounds_part_reads_as_a_sentence_everywhere(aim_bundle):
    b = aim_bundle["bundle"]
    parts = json.loads((b / "budget.json").read_text())["generation"]["parts"]
    assert [p["purpose"] for p in parts][1] == ROUNDS_PURPOSE
    for name in ("README.html", "registry-entry.yaml", "budget.json"):
        assert "nothing without a candidate marginal" not in (b / name).read_text()
    assert run_audit(b, pubkey=aim_bundle["pub"]).verdict == "verified"


def test_a_0_3_bundle_with_0_2_words_fails(aim_bundle, tmp_path):
    b = tmp_path / "B"
    shutil.copytree(aim_bundle["bundle"], b)

    def edit(doc):
        doc["generation"]["parts"][1]["purpose"] = ROUNDS_PURPOSE_0_2
    cu.edit_json(b / "budget.json", edit)
    cu.rerender_datasheet(b)
    cu.resign(b, aim_bundle["key"])
    rep = run_audit(b, pubkey=aim_bundle["pub"])
    assert rep.verdict == "failed"
    assert any("generation.parts" in p for c in rep.checks for p in c.problems)
