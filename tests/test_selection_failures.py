"""Failures inside the private selection, and stopping: failed attempts vs aborts, nothing private
on the console, Ctrl-C recorded as spent, and --stop-probability auto."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

import dpbundle.release.scheme.selection as selection_mod
from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.marginals import ConvergenceError
from dpbundle.mechanisms.noise import Transcript
from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example
from dpbundle.release.scheme.iteration import ConstraintShortfall
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.selection import SelectionAborted, select
from dpbundle.release.scheme.space import config_id, enumerate_configs
from dpbundle.release.spec.load import load_spec, validate_spec
from dpbundle.release.scheme.stopping import (expected_attempts, nothing_chance, plan_stop, stop_for)

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
SECRET = "0.0139536871"  # stands for a private statistic inside an exception message


def births_doc() -> dict:
    return yaml.safe_load((ROOT / "examples" / "births.yaml").read_text("utf-8"))


# ------------------------------------------------------------------ validation


def test_year_without_range_is_refused_by_spec_validate(tmp_path):
    """A year derived from a date with no min/max and no clip: some record (2013) would fall
    outside the bins inside the selection; `spec validate` refuses it first, naming the path."""
    doc = births_doc()
    doc["columns"].append({"name": "birth_year", "description": "Year of birth",
                           "source": {"column": "date_of_birth", "derive": "year"},
                           "alternatives": [{"id": "y", "edges": [2014, 2015]}]})
    doc["faithfulness"]["exact"].append("birth_year")
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = runner.invoke(app, ["spec", "validate", str(p)])
    assert res.exit_code == 2
    assert "columns[6].alternatives[0].clip" in res.output and "year" in res.output
    doc["columns"][-1]["alternatives"][0].update(clip=[2014, 2015], edges=[2014, 2015, 2016])
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert runner.invoke(app, ["spec", "validate", str(p)]).exit_code == 0


# ------------------------------------------------------------------ the selection loop


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sel")
    data = tmp / "R.csv"
    write_example(data, rows=2000, seed=3)
    spec = validate_spec(births_doc())
    return tmp, data, spec, prepare(data, spec), next(iter(enumerate_configs(spec)))


def _script(monkeypatch, outcomes):
    """Replace run_iteration by a script: each call takes the next outcome (an exception to
    raise, or True/False for passed)."""
    calls = iter(outcomes)

    def fake(prepared, spec, config, rand, phase=None):
        rand.laplace(1.0, sensitivity=1.0, epsilon=1.0, purpose="fake")
        out = next(calls)
        if isinstance(out, BaseException):
            raise out
        return SimpleNamespace(passed=out)

    monkeypatch.setattr(selection_mod, "run_iteration", fake)


@pytest.mark.parametrize("failure", [ConstraintShortfall("only 3 of 10 rows"),
                                     ConvergenceError("IPF", iterations=5, max_deviation=1.0,
                                                      sweep_change=0.1),
                                     AttemptFailure("model too large")])
def test_dp_output_failures_are_failed_attempts(small, monkeypatch, failure):
    _tmp, _data, spec, prepared, config = small
    _script(monkeypatch, [failure, False, True])
    t = Transcript()
    sel = select(prepared, spec, t, [config])
    assert sel.result.passed and sel.selected_index == 2
    ends = [r for r in t.records if r.get("mark") == "iteration end"]
    assert [e["passed"] for e in ends] == [False, False, True]
    assert "failure" in ends[0] and type(failure).__name__ in ends[0]["failure"]
    # the transcript keeps the structure the enclave audit checks
    from dpbundle.audit.replay import _check_first_passing, check_records

    _check_first_passing(t.records)
    check_records(Path("t.jsonl"), t.records)


def test_other_errors_abort_with_a_generic_message(small, monkeypatch):
    _tmp, _data, spec, prepared, config = small
    _script(monkeypatch, [False, ValueError(f"value 2013 lies outside the bins; score {SECRET}")])
    t = Transcript()
    with pytest.raises(SelectionAborted) as err:
        select(prepared, spec, t, [config])
    assert SECRET not in str(err.value) and "2013" not in str(err.value)
    assert "ValueError" in str(err.value)
    marks = [r for r in t.records if r.get("mark") == "attempt error"]
    assert len(marks) == 1 and marks[0]["index"] == 1 and SECRET in marks[0]["traceback"]
    from dpbundle.audit.replay import check_records

    check_records(Path("t.jsonl"), t.records)  # the schema knows the mark


def _release_args(tmp: Path, data: Path, name: str, *extra: str) -> list[str]:
    spec = tmp / "births.yaml"
    if not spec.exists():
        spec.write_text(yaml.safe_dump(births_doc(), sort_keys=False))
    if not (tmp / "k.key").exists():
        assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    return ["release", str(spec), str(data), "--out", str(tmp / name), "--key", str(tmp / "k.key"),
            "--ledger", str(tmp / f"{name}.ledger.jsonl"), "--transcript", str(tmp / f"{name}.tr.jsonl"),
            *extra]


def _ledger(tmp: Path, name: str) -> list[dict]:
    path = tmp / f"{name}.ledger.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_injected_failure_prints_nothing_private(small, monkeypatch):
    tmp, data, *_ = small
    _script(monkeypatch, [RuntimeError(f"private statistic {SECRET} at row 17")])
    res = runner.invoke(app, _release_args(tmp, data, "inj"))
    assert res.exit_code == 1, res.output
    assert SECRET not in res.output and "row 17" not in res.output
    assert "internal error" in res.output and "RuntimeError" not in res.output   # its type is private too (issue 36)
    assert "Traceback" not in res.output
    assert not (tmp / "inj").exists()
    tr = tmp / "inj.tr.jsonl"
    assert SECRET in tr.read_text()  # the details are kept, privately
    assert stat.S_IMODE(os.stat(tr).st_mode) == 0o600
    assert any(e.get("status") == "failed" or "failed" in json.dumps(e) for e in _ledger(tmp, "inj"))


def test_ctrl_c_is_recorded_as_spent(small, monkeypatch):
    tmp, data, *_ = small
    _script(monkeypatch, [KeyboardInterrupt()])
    res = runner.invoke(app, _release_args(tmp, data, "intr"))
    assert res.exit_code == 130, res.output
    assert "outside the private selection's guarantee" in res.output
    assert "stays recorded as spent" in res.output
    text = json.dumps(_ledger(tmp, "intr"))
    assert "interrupted" in text and "9.98" in text


# ------------------------------------------------------------------ stopping


@pytest.mark.parametrize("p,g", [(0.3, 0.05), (0.05, 0.2), (0.9, 0.01), (0.5, 0.5)])
def test_nothing_chance_matches_the_series_and_a_simulation(p, g):
    series = sum((1 - p) ** (k + 1) * g * (1 - g) ** k for k in range(5000))
    assert nothing_chance(p, g) == pytest.approx(series, rel=1e-9)
    rng = np.random.default_rng(1)
    stops, attempts = 0, 0
    for _ in range(20000):
        while True:
            attempts += 1
            if rng.random() < p:
                break
            if rng.random() < g:
                stops += 1
                break
    assert stops / 20000 == pytest.approx(nothing_chance(p, g), abs=0.012)
    assert attempts / 20000 == pytest.approx(expected_attempts(p, g), rel=0.05)


def test_stop_for_hits_the_target():
    for p in (0.02, 0.1, 0.27, 0.6):
        g = stop_for(p, 0.05)
        assert nothing_chance(p, g) == pytest.approx(0.05, rel=1e-9)
    assert stop_for(0.0) == 0.0 and stop_for(0.99) == 0.5
    with pytest.raises(ValueError):
        stop_for(0.5, 1.0)


def test_plan_stop_options():
    assert plan_stop(None, 0.0, None, None).gamma == 0.0
    assert plan_stop("0.25", 0.0, None, None).gamma == 0.25
    plan = plan_stop("auto", 0.0, [0.4, 0.2], [0.3, 0.1])
    assert plan.p_low == pytest.approx(0.2) and plan.gamma == pytest.approx(stop_for(0.2))
    assert any("chance of releasing nothing 0.05" in line for line in plan.lines())
    for bad in ("1", "-0.1", "often"):
        with pytest.raises(ValueError, match="stop-probability"):
            plan_stop(bad, 0.0, None, None)
    with pytest.raises(ValueError, match="needs sweep estimates"):
        plan_stop("auto", 0.0, None, None)


def _narrowed(tmp: Path, acceptance: float, low: float) -> Path:
    spec = load_spec(tmp / "births.yaml")
    c = next(iter(enumerate_configs(spec)))
    path = tmp / f"narrowed-{acceptance}.yaml"
    path.write_text(yaml.safe_dump({"format": "dpbundle-narrowed/1", "configurations": [
        {"id": config_id(c), "config": c, "acceptance": acceptance, "wilson_low": low,
         "wilson_high": min(1.0, acceptance + 0.1), "runs": 50}]}, sort_keys=False))
    return path


def test_release_auto_prints_the_derived_probability(small, monkeypatch):
    tmp, data, *_ = small
    _release_args(tmp, data, "x")  # writes births.yaml and the key
    _script(monkeypatch, [KeyboardInterrupt()])
    narrowed = _narrowed(tmp, 0.4, 0.3)
    res = runner.invoke(app, _release_args(tmp, data, "auto", "--configs", str(narrowed),
                                           "--stop-probability", "auto"))
    g = stop_for(0.3)
    assert f"stop probability {g:.4g}" in res.output, res.output
    assert "chance of releasing nothing 0.05" in res.output
    assert f"{nothing_chance(0.4, g):.3g}" in res.output  # at the sweep estimate


def test_auto_without_estimates_fails_before_spending(small):
    tmp, data, *_ = small
    res = runner.invoke(app, _release_args(tmp, data, "noest", "--stop-probability", "auto"))
    assert res.exit_code == 2 and "needs sweep estimates" in res.output
    assert _ledger(tmp, "noest") == []


def test_warnings_for_no_or_low_estimates(small, monkeypatch):
    tmp, data, *_ = small
    _script(monkeypatch, [KeyboardInterrupt()])
    res = runner.invoke(app, _release_args(tmp, data, "w1"))
    assert "no sweep estimate" in res.output and "may never end" in res.output
    _script(monkeypatch, [KeyboardInterrupt()])
    res = runner.invoke(app, _release_args(tmp, data, "w2", "--configs", str(_narrowed(tmp, 0.05, 0.01))))
    # a list with sweep estimates makes the DP-safe stop the default (issue 22)
    assert "only 5.0%" in res.output and "(auto: chance of releasing nothing" in res.output
    assert "may never end" not in res.output
    # the warnings come before anything is spent: before the ledger line of the run
    assert res.output.index("only 5.0%") < res.output.index("prepared")
    # stop probability 0 with such a list needs the explicit option, and warns
    _script(monkeypatch, [KeyboardInterrupt()])
    res = runner.invoke(app, _release_args(tmp, data, "w3", "--configs", str(_narrowed(tmp, 0.05, 0.01)),
                                           "--stop-probability", "0"))
    text = " ".join(res.output.split())
    assert "stop probability 0 (option)" in text and "may never end" in text
    assert "--stop-probability auto" in text
