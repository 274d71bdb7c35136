"""Bundles made before the restructuring of release/ (issue 23) still verify and replay byte for
byte inside the enclave (tests/data/prechange/README.md)."""
from __future__ import annotations

from pathlib import Path

import pytest

from dpbundle.audit.runner import run_audit

HERE = Path(__file__).resolve().parent / "data" / "prechange"


@pytest.mark.parametrize("name, data", [("births", "births-3000.csv"), ("persons", "persons-3000.csv")])
def test_a_bundle_made_before_the_restructuring_replays(name, data):
    rep = run_audit(HERE / f"{name}-bundle", pubkey=HERE / "key.pub",
                    transcript=HERE / f"{name}.transcript.jsonl", data=HERE / data)
    failed = {c.check: c.problems for c in rep.checks if c.failed}
    assert failed == {}, failed
    assert rep.get("replay").result == "pass"
    assert rep.verdict == "verified"
