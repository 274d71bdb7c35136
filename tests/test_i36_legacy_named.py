"""Issue 36: a bundle claiming a dpbundle version before 0.2 gets only a numbers search of its
datasheet (no codebook to render it from); the report must then name README.html and README.pdf
among what only the signature vouches for, so that a verdict never covers their words. A bundle
of 0.2 or later (whose datasheet is re-derived) names neither."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def test_a_pre_0_2_bundles_datasheet_is_named_signature_only(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    fx.build_bundle(d)
    named = run_audit(d).get("schema").facts["signature_only"]
    assert any(s.startswith("README.pdf (") for s in named)
    assert any(s.startswith("README.html (") for s in named)


def test_a_0_2_bundles_datasheet_is_not():
    rep = run_audit(PRECHANGE / "births-bundle", pubkey=PRECHANGE / "key.pub")
    named = rep.get("schema").facts["signature_only"]
    assert not any(s.startswith("README.") for s in named)
    assert rep.verdict == "verified"
