"""Review (issue 37 session): the Python API's warnings issued as they arise (commit 4c00d3c).

Outside pytest (which captures warnings), Python's default ``warnings.showwarning`` writes the
warning to ``sys.stderr``; inside ``release()`` that stream is the run's route
(release/pipeline/output._StderrSwitch), whose WARNING writer keeps the text as a new warning and
hands it to ``api._issue_now``, which warns again: a RecursionError, reported as "the release
stopped with an internal error (RecursionError)". Every plain script whose release warns (e.g. no
sweep estimate for the configurations) fails before the spend.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import audit_fixtures as fx

HERE = Path(__file__).resolve().parent


def test_release_from_a_plain_script_with_default_warning_filters(tmp_path):
    from dpbundle.release.bundle import keys

    keys.write_keypair(tmp_path / "k")
    spec = fx.fast_spec(tmp_path / "spec.yaml")
    data = fx.example_registry(tmp_path / "births.csv", 500, 3)
    script = textwrap.dedent(f"""
        from dpbundle.release.api import release
        release({str(spec)!r}, {str(data)!r}, out={str(tmp_path / 'b')!r}, key={str(tmp_path / 'k.key')!r},
                ledger={str(tmp_path / 'l.jsonl')!r}, transcript={str(tmp_path / 't.jsonl')!r})
        print("released")
    """)
    run = subprocess.run([sys.executable, "-W", "default", "-c", script], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert "RecursionError" not in run.stderr + run.stdout, run.stderr[-2000:]
    assert run.returncode == 0 and "released" in run.stdout, run.stderr[-2000:]
    assert "DpbundleWarning" in run.stderr      # shown once by Python's display, on the real stderr
