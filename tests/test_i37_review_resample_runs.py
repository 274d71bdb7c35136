"""Review of issue 37's ``retries: resample`` (adversarial review): how a run starts and what an
attempt redraws.

1. ``--stop-probability 0`` on a spec with ``retries: resample`` (the spec itself has a stop
   probability above 0, so validation passes): the option is accepted, the budget is reserved and
   the DP count is drawn, and only then ``select`` raises ValueError, reported as an internal
   error with the whole epsilon recorded as spent. The standard is: refuse before anything is
   spent (release/pipeline/selection_inputs.choose_stop is where the option is read).
2. A pre-registered resample release: every attempt gets the same bound post-processing seeds
   (mechanisms/seeds.py: "k the k-th request of that purpose within one attempt"), and the model
   is the same, so every attempt's candidate is the same records and only the criteria's noise is
   drawn again. Sound for privacy, but the datasheet (step 8: "each time with a new sample of the
   model") and the spec's words ("every attempt samples from it again") are then false, and the
   selection only retests one candidate until its noisy criteria pass.
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import audit_fixtures as fx


def _resample_spec(path, gamma=0.05):
    fx.fast_spec(path, policy="dp_count")
    doc = yaml.safe_load(path.read_text())
    doc["privacy"]["records"] = {"policy": "dp_count", "epsilon": 0.1}
    doc["privacy"]["selection"] = {"stop_probability": gamma, "retries": "resample"}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_stop_probability_option_0_with_resample_is_refused_before_the_spend(tmp_path):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys
    from dpbundle.release.errors import ReleaseFailed

    keys.write_keypair(tmp_path / "k")
    spec = _resample_spec(tmp_path / "spec.yaml")
    data = fx.example_registry(tmp_path / "births.csv", 500, 3)
    ledger = tmp_path / "l.jsonl"
    with pytest.raises(Exception) as caught:
        release(spec, data, out=tmp_path / "b", key=tmp_path / "k.key", ledger=ledger,
                transcript=tmp_path / "t.jsonl", stop_probability="0")
    assert not isinstance(caught.value, ReleaseFailed), str(caught.value)
    assert not ledger.exists() or '"spend"' not in ledger.read_text()


def test_a_resample_spec_cannot_be_preregistered(tmp_path):
    """The review's finding 2 (every pre-registered resample attempt would redraw the same
    sample) is closed by refusing the combination, before anything is written or spent."""
    from typer.testing import CliRunner

    from dpbundle.release.bundle import keys
    from dpbundle.release.cli.main import app

    keys.write_keypair(tmp_path / "k")
    spec = _resample_spec(tmp_path / "spec.yaml")
    res = CliRunner().invoke(app, ["preregister", str(spec), "--key", str(tmp_path / "k.key"),
                                   "--out", str(tmp_path / "rec.json"), "--beacon-source",
                                   "NIST beacon, pulse of 2026-12-01 00:00 UTC"])
    assert res.exit_code == 2, res.output
    assert "cannot be pre-registered" in res.output and not (tmp_path / "rec.json").exists()
