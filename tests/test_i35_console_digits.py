"""Issue 35 (review): the release console's criteria table rounds each DP value to the precision
its noise supports, as the datasheet does (a noisy 0.00217708 with noise std 0.000856 was
printed with six digits): the last printed decimal place is no finer than a hundredth of the
value's noise std, and the printed number is the DP value rounded there."""
from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.release.cli.main import app  # noqa: E402


def test_the_console_rounds_dp_values_to_their_noise(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    spec = fx.fast_spec(tmp_path / "fast.yaml")
    data = fx.example_registry(tmp_path / "registry.csv", 3000, 5)
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp_path / "B"), "--key",
                              str(tmp_path / "k.key"), "--ledger", str(tmp_path / "l.jsonl"),
                              "--transcript", str(tmp_path / "t.jsonl")], terminal_width=160)
    assert res.exit_code == 0, res.output
    metrics = {r["id"]: r for r in json.loads((tmp_path / "B" / "metrics.json").read_text())["criteria"]}
    stds = {r["id"]: r["value_noise_std"] for r in csv.DictReader(io.StringIO((tmp_path / "B" / "metrics.csv").read_text()))}
    checked = 0
    for cid, row in metrics.items():
        m = re.search(rf"│ {re.escape(cid)}\s+│\s+(\S+)\s+│", res.output)
        assert m, (cid, res.output)
        printed = m.group(1).replace("\u2212", "-")
        if not stds[cid]:
            continue
        std = float(stds[cid])
        digits = printed.lstrip("-").replace(",", "")
        # the last printed place: 10^-decimals, or for a whole number 10^(its trailing zeros)
        place = (10.0 ** -len(digits.split(".")[1]) if "." in digits
                 else 10.0 ** (len(digits) - len(digits.rstrip("0"))) if digits.strip("0") else 1.0)
        assert place >= std / 100, (cid, printed, std)                   # no finer than the noise supports
        assert abs(float(digits) * (-1 if printed.startswith("-") else 1) - row["dp_value"]) <= 0.5 * place + 1e-12, \
            (cid, printed)
        checked += 1
    assert checked >= 5
