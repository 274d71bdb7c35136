"""Runs end as promised and nothing private shows around the bundle (issue 22, sections 2-3):
lists measured at another size, sweep workers from plain scripts, one worker in-process, Ctrl-C
from Python, the transcript's name, the disk pre-flight under dp_count, and no refusal that
depends on one record."""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _ledger_lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


# ------------------------------------------------------------------ a list measured at another size


def test_example_rows_far_from_the_lists_size_is_refused_before_spending(tmp_path):
    """`release --example persons --example-rows 5000` selected for 18 minutes from a list
    measured at 45,000 rows; now it is refused at once, before the ledger entry."""
    ledger = tmp_path / "ledger.jsonl"
    t0 = time.monotonic()
    res = runner.invoke(app, ["release", "--example", "persons", "--example-rows", "5000",
                              "--out", str(tmp_path / "b"), "--ledger", str(ledger)])
    assert time.monotonic() - t0 < 60
    text = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "measured on 45,000 rows" in text and "5,000" in text and "--example-rows" in text
    assert "nothing was spent" in text
    assert _ledger_lines(ledger) == [] and not (tmp_path / "b").exists()


def _small_persons(tmp_path: Path, rows: int = 5000, edit=None) -> tuple[Path, Path, Path]:
    """The persons spec, a simulated registry of ``rows`` rows (optionally edited) and a key."""
    from importlib.resources import files

    from dpbundle.release.data.example import write_example

    spec = tmp_path / "persons.yaml"
    spec.write_text(files("dpbundle.examples").joinpath("persons-recommended.yaml").read_text("utf-8"))
    data = tmp_path / "persons.csv"
    write_example(data, rows=rows, name="persons", seed=11)
    if edit is not None:
        table = list(csv.reader(data.open(newline="")))
        edit(table)
        with data.open("w", newline="") as fh:
            csv.writer(fh, lineterminator="\n").writerows(table)
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    return spec, data, tmp_path / "k.key"


def _never_passing(monkeypatch):
    import dpbundle.release.scheme.selection as selection

    def fake(prepared, spec, config, rand, phase=None):
        rand.laplace(0.0, sensitivity=1.0, epsilon=1.0, purpose="fake")
        return SimpleNamespace(passed=False)

    monkeypatch.setattr(selection, "run_iteration", fake)


def test_other_size_is_allowed_with_a_warning(tmp_path, monkeypatch):
    from importlib.resources import files

    spec, data, key = _small_persons(tmp_path)
    listed = files("dpbundle.examples").joinpath("persons-recommended-narrowed.yaml")
    _never_passing(monkeypatch)
    args = ["release", str(spec), str(data), "--out", str(tmp_path / "b"), "--key", str(key),
            "--ledger", str(tmp_path / "l.jsonl"), "--configs", str(listed)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "--allow-other-size" in res.output
    res = runner.invoke(app, args + ["--allow-other-size", "--stop-probability", "0.5"])
    text = " ".join(res.output.split())
    assert "Used because of --allow-other-size" in text
    assert res.exit_code == 1 and "nothing is released" in text   # ended by a stop draw


# ------------------------------------------------------------------ sweep workers from Python


SCRIPT = """\
from dpbundle.release.api import sweep
print("top of script", flush=True)
s = sweep({spec!r}, {data!r}, out={out!r}, sample=1, reps=2, max_reps=2, workers=2, report=False)
print("swept", s.backend, s.workers, flush=True)
"""


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_plain_script_sweep_with_two_workers_returns(tmp_path, how):
    """A script without `if __name__ == "__main__":` used to re-run itself in every spawned
    worker and wait for ever; the workers now start without the caller's script."""
    code = SCRIPT.format(spec=str(ROOT / "examples" / "births.yaml"),
                         data=str(ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv"),
                         out=str(tmp_path / "sw"))
    script = tmp_path / "plain.py"
    script.write_text(code)
    cmd = [sys.executable, str(script)] if how == "file" else [sys.executable, "-"]
    proc = subprocess.run(cmd, input=None if how == "file" else code, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("top of script") == 1, proc.stdout
    assert "swept local 2" in proc.stdout


def test_a_worker_that_cannot_start_raises_within_seconds():
    import operator

    from dpbundle.release.sweep.execute import LocalBackend, WorkerStartError

    class Poison:
        def __reduce__(self):          # unpickling it in the worker raises ZeroDivisionError
            return operator.truediv, (1, 0)

    t0 = time.monotonic()
    with pytest.raises(WorkerStartError, match="could not start|did not start"):
        LocalBackend({"poison": Poison()}, 2)
    assert time.monotonic() - t0 < 60


def test_one_worker_runs_in_process(tmp_path):
    from dpbundle.release.api import sweep

    res = sweep(ROOT / "examples" / "births.yaml", ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv",
                out=tmp_path / "sw", sample=1, reps=2, max_reps=2, workers=1, report=False)
    assert res.backend == "in-process" and res.workers == 1 and res.new_runs == 2


def test_calls_from_a_bootstrapping_worker_are_refused(monkeypatch, tmp_path):
    """If a worker of some other pool re-runs a script that calls release() or sweep() at top
    level, nothing runs there (never a second spend)."""
    import multiprocessing

    from dpbundle.release.api import CommandError, release, sweep

    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    with pytest.raises(CommandError, match="worker process was starting"):
        release(example="births", out=tmp_path / "b")
    with pytest.raises(CommandError, match="worker process was starting"):
        sweep(ROOT / "examples" / "births.yaml", ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv",
              out=tmp_path / "sw")
    assert not (tmp_path / "b").exists() and not (tmp_path / "sw").exists()


# ------------------------------------------------------------------ Ctrl-C from Python


def test_ctrl_c_from_python_is_a_keyboard_interrupt_after_the_clean_up(tmp_path, monkeypatch):
    import dpbundle.release.scheme.selection as selection
    from dpbundle.release.api import ReleaseInterrupted, release

    spec, data, key = _small_persons(tmp_path, rows=3000)

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(selection, "run_iteration", interrupted)
    ledger = tmp_path / "l.jsonl"
    with pytest.raises(KeyboardInterrupt) as info:
        release(spec, data, out=tmp_path / "b", key=key, ledger=ledger)
    assert isinstance(info.value, ReleaseInterrupted) and info.value.code == 130
    assert "stays recorded as spent" in info.value.message
    assert [e.get("status") for e in _ledger_lines(ledger) if "status" in e][-1:] == ["interrupted"] \
        or "interrupted" in ledger.read_text()
    assert not (tmp_path / "b").exists()


# ------------------------------------------------------------------ timing and size channels


def test_the_transcript_name_holds_no_time(tmp_path, monkeypatch):
    from dpbundle.release.bundle.write import default_transcript_path

    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(tmp_path / "private"))
    (tmp_path / "private").mkdir(mode=0o700)
    names = {default_transcript_path(tmp_path / "bundle").name for _ in range(5)}
    assert len(names) == 5
    for name in names:
        assert re.fullmatch(r"bundle\.[0-9a-f]{12}\.transcript\.jsonl", name), name
        assert not re.search(r"\d{8}T\d{6}", name)  # no timestamp


def test_disk_preflight_under_dp_count_does_not_use_the_private_n(tmp_path, monkeypatch):
    """Under dp_count the pre-flight room check is sized from the rows read (the same for every
    neighbour) plus a noise margin, never from the plausible count."""
    import dpbundle.release.bundle.preflight as preflight

    seen = []
    real = preflight.estimate_bundle_bytes

    def spy(n, longest):
        seen.append(n)
        return real(n, longest)

    monkeypatch.setattr(preflight, "estimate_bundle_bytes", spy)

    def implausible(table):           # 100 records an employment rule drops: n < rows read
        col = table[0].index("hours per week")
        for row in table[1:101]:
            row[col] = "0"

    spec, data, key = _small_persons(tmp_path, rows=3000, edit=implausible)
    _never_passing(monkeypatch)
    runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp_path / "b"), "--key", str(key),
                        "--ledger", str(tmp_path / "l.jsonl"), "--stop-probability", "0.9"])
    assert seen, "the pre-flight did not run"
    assert seen[0] >= 3000          # rows read plus a margin; the plausible count is below 2,900


def test_no_plausible_record_is_not_refused_under_dp_count(tmp_path, monkeypatch):
    """A registry where every record fails a plausibility rule is a neighbour of one with a
    plausible record: under dp_count it is released like any other (the resize pads it)."""
    def all_implausible(table):
        col = table[0].index("hours per week")
        for row in table[1:]:
            row[col] = "0"

    spec, data, key = _small_persons(tmp_path, rows=2000, edit=all_implausible)
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp_path / "b"), "--key", str(key),
                              "--ledger", str(tmp_path / "l.jsonl"), "--stop-probability", "0.5"])
    text = " ".join(res.output.split())
    assert "no rows left" not in text
    assert res.exit_code in (0, 1), text     # released, or a stop draw ended the selection
    assert "released as a DP count" in text


def test_the_guarantee_names_the_input_schema():
    from dpbundle.mechanisms.records import guarantee_text

    for policy in ("dp_count", "declared_public"):
        assert "any other values the input schema accepts" in guarantee_text(policy)["neighbouring"]
