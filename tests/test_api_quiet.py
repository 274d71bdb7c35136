"""The Python API is quiet by default (nothing on stdout or stderr, file descriptors included):
progress and warnings go to the ``dpbundle`` logger; options as typed objects."""
from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import audit_fixtures as fx  # noqa: E402
from conftest import small_births_doc  # noqa: E402


def test_release_audit_and_sweep_write_nothing(tmp_path, capfd, caplog):
    from dpbundle.release.api import ReleaseOptions, SweepOptions, audit, release, sweep
    from dpbundle.release.bundle import keys
    from dpbundle.release.data.example import write_example

    spec = fx.fast_spec(tmp_path / "fast.yaml")
    data = fx.example_registry(tmp_path / "registry.csv", 3000, 9)
    keys.write_keypair(tmp_path / "k")
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small_births_doc([0.25, 0.5]), sort_keys=False))
    write_example(tmp_path / "pub.csv", rows=1200, seed=7)
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="dpbundle"):
        b = release(spec, data, out=tmp_path / "B", ledger=tmp_path / "l.jsonl",
                    options=ReleaseOptions(key=tmp_path / "k.key", transcript=tmp_path / "t.jsonl"))
        assert audit(tmp_path / "B", pubkey=tmp_path / "k.pub").verdict == "verified"
        s = sweep(tmp_path / "small.yaml", tmp_path / "pub.csv", out=tmp_path / "S", workers=1,
                  options=SweepOptions(reps=1, max_reps=1, sample=1, report=False, utility="none"))
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""
    assert s.summary["runs"] == 1
    assert b.transcript_path == tmp_path / "t.jsonl"
    assert any("PRIVATE" in w and "t.jsonl" in w for w in b.warnings)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("dpbundle")]
    assert any("t.jsonl" in r.getMessage() and "PRIVATE" in r.getMessage() for r in warned)
    b.close()


def test_an_option_given_both_ways_is_an_error(tmp_path):
    from dpbundle.release.api import ReleaseOptions, SweepOptions, UnusableInput, release, sweep

    with pytest.raises(UnusableInput, match="both"):
        release(example="births", out=tmp_path / "B", options=ReleaseOptions(force=True), force=True)
    with pytest.raises(UnusableInput, match="both"):
        sweep(tmp_path / "s.yaml", tmp_path / "d.csv", out=tmp_path / "S", options=SweepOptions(reps=2), reps=3)
    with pytest.raises(UnusableInput, match="ReleaseOptions"):
        release(example="births", out=tmp_path / "B", options=SweepOptions())


def test_options_are_the_requests_option_part():
    import dataclasses

    from dpbundle.release.api import _RELEASE_OPTIONS, ReleaseOptions, SweepOptions
    from dpbundle.release.pipeline.request import ReleaseRequest
    from dpbundle.release.sweep.request import SweepRequest

    assert issubclass(ReleaseRequest, ReleaseOptions) and issubclass(SweepRequest, SweepOptions)
    names = {("zip" if f.name == "make_zip" else f.name) for f in dataclasses.fields(ReleaseOptions)}
    assert names == set(_RELEASE_OPTIONS) - {"out"}
    r = ReleaseRequest.of(Path("o"), options=ReleaseOptions(make_zip=True))
    assert r.make_zip and r.options == ReleaseOptions(make_zip=True)
    assert "``key``" in ReleaseOptions.__doc__ and "``sample``" in SweepOptions.__doc__
