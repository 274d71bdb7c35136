"""examples/notebook.ipynb runs: its code cells, concatenated, run as a plain script (no Jupyter
needed) in a fresh process, everything in a temporary folder; the audit says "verified"."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "notebook.ipynb"


def _notebook() -> dict:
    return json.loads(NOTEBOOK.read_text("utf-8"))


def test_the_notebook_is_stored_without_outputs():
    nb = _notebook()
    assert nb["nbformat"] == 4
    kinds = {c["cell_type"] for c in nb["cells"]}
    assert kinds == {"markdown", "code"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None
    text = "".join("".join(c["source"]) for c in nb["cells"])
    assert "/work/" not in text and "/home/" not in text  # no paths of one machine


def test_the_notebook_runs_as_a_script(tmp_path):
    code = "\n\n".join("".join(c["source"]) for c in _notebook()["cells"] if c["cell_type"] == "code")
    script = tmp_path / "notebook.py"
    script.write_text(code, encoding="utf-8")
    env = dict(os.environ, DPBUNDLE_PRIVATE_DIR=str(tmp_path / "private"), TMPDIR=str(tmp_path),
               MPLBACKEND="Agg")
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = res.stdout
    assert "audit verdict: verified" in out
    assert "verify: verified" in out
    assert "<SweepResult" in out
    # section 7: ten copies of a persons bundle with publish: tables, combined into an interval
    import re

    m = re.search(r"share with a bachelor's degree: ([0-9.]+), 95% interval ([0-9.]+) to ([0-9.]+) \(10 copies\)", out)
    one = re.search(r"one copy alone would say ([0-9.]+) \+- ([0-9.]+), leaving out the DP noise; the "
                    r"copies' interval is ([0-9.]+) times as wide", out)
    assert m and one, out[-2000:]
    est, lo, hi = map(float, m.groups())
    assert lo < est < hi
    assert float(one.group(3)) == pytest.approx((hi - lo) / (2 * float(one.group(2))), abs=0.35)
    # everything it wrote is in the temporary folder, the private transcript included
    work = [p for p in tmp_path.iterdir() if p.name.startswith("dpbundle-notebook-")]
    assert len(work) == 1 and (work[0] / "births-bundle" / "manifest.json").is_file()
    assert list((tmp_path / "private").glob("*.transcript.jsonl"))
