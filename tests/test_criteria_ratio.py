"""smoothed_ratio: value, sensitivity formula (bound and near-tightness), neighbours."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import neighbours
from dpbundle.mechanisms.criteria import EvalContext, make_criterion

ENTRY = {"id": "ratio", "type": "smoothed_ratio", "clip": 2.0, "threshold": 1.41, "epsilon": 0.3}


def rho(r: int, s: int, c: float) -> float:
    return min(c, max((r + 1) / (s + 1), (s + 1) / (r + 1)))


def brute(t, s, c):
    best = 1.0
    for j, k in enumerate(t.domain):
        for v in range(k):
            best = max(best, rho(int((t.codes[:, j] == v).sum()), int((s.codes[:, j] == v).sum()), c))
    return best


@settings(max_examples=200, deadline=None)
@given(neighbours(max_size=5), st.sampled_from([1.5, 2.0, 3.0]))
def test_value_and_neighbour_sensitivity(tc, clip):
    t, t2, c = tc
    crit = make_criterion(dict(ENTRY, clip=clip))
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    v, v2 = crit.value(ctx), crit.value(ctx2)
    assert v == pytest.approx(brute(t, c, clip))
    sens, inputs = crit.sensitivity(ctx)
    # s' from C over the full domain, computed here directly
    s_min = min(int((c.codes[:, j] == v_).sum()) for j, k in enumerate(c.domain) for v_ in range(k)) + 1
    assert inputs["min_smoothed_synthetic_count"] == s_min
    assert sens == pytest.approx(max(1 / s_min, clip - 1 / (1 / clip + 1 / s_min)))
    assert abs(v - v2) <= sens + 1e-12


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 400), st.sampled_from([1.2, 2.0, 5.0]))
def test_single_term_bound_is_sound_and_tight(s, clip):
    """max over r of |rho(r+1, s) - rho(r, s)| is <= Delta(s+1), and nearly reaches it."""
    delta = max(1 / (s + 1), clip - 1 / (1 / clip + 1 / (s + 1)))
    worst = max(abs(rho(r + 1, s, clip) - rho(r, s, clip)) for r in range(0, 3 * (s + 2)))
    assert worst <= delta + 1e-12
    # the a/x-branch supremum is approached when (s+1)/(r+1) sits just above c (integer r:
    # within 10 c^2/(s+1)^2 of it once s+1 >= 2c)
    if s + 1 >= 2 * clip:
        assert worst >= delta - 10 * clip**2 / (s + 1) ** 2 - 1e-12


def test_value_absent_from_synthetic():
    """Known bug 2: a value with no synthetic record makes s' = 1 (huge sensitivity)."""
    from criteria_util import int_coding
    from dpbundle.mechanisms.coding import Coded

    col = (int_coding("a", [0, 1, 2, 3]),)
    t = Coded(codes=np.array([[0]] * 50 + [[1]] * 50 + [[2]] * 50), columns=col)
    c = Coded(codes=np.array([[0]] * 75 + [[1]] * 75), columns=col)
    crit = make_criterion(ENTRY)
    sens, inputs = crit.sensitivity(EvalContext(t, c, {}))
    assert inputs["min_smoothed_synthetic_count"] == 1
    assert inputs["at"] == {"column": "a", "value": "2"}
    assert sens == pytest.approx(2 - 1 / 1.5)
    assert crit.value(EvalContext(t, c, {})) == pytest.approx(2.0, rel=1e-12)  # lipschitz_float


# ------------------------------------------------------------------ smoothing k (issue 13)


def rho_k(r: int, s: int, c: float, k: float) -> float:
    return min(c, max((r + k) / (s + k), (s + k) / (r + k)))


@settings(max_examples=200, deadline=None)
@given(neighbours(max_size=5), st.sampled_from([1.5, 2.0, 3.0]), st.sampled_from([1, 2.5, 10, 100]))
def test_smoothed_value_and_neighbour_sensitivity(tc, clip, k):
    t, t2, c = tc
    crit = make_criterion(dict(ENTRY, clip=clip, smoothing=k))
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    v, v2 = crit.value(ctx), crit.value(ctx2)
    brute_k = max([1.0] + [rho_k(int((t.codes[:, j] == x).sum()), int((c.codes[:, j] == x).sum()), clip, k)
                           for j, d in enumerate(t.domain) for x in range(d)])
    assert v == pytest.approx(brute_k)
    sens, inputs = crit.sensitivity(ctx)
    s_min = min(int((c.codes[:, j] == x).sum()) for j, d in enumerate(c.domain) for x in range(d)) + k
    assert inputs["min_smoothed_synthetic_count"] == s_min
    assert sens <= max(1 / k, clip**2 / (clip + k)) + 1e-12   # whatever the candidate
    assert abs(v - v2) <= sens + 1e-12


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.sampled_from([1.2, 2.0, 5.0]), st.sampled_from([1, 7, 50, 100]))
def test_smoothed_single_term_bound(s, clip, k):
    delta = max(1 / (s + k), clip**2 / (clip + s + k))
    worst = max(abs(rho_k(r + 1, s, clip, k) - rho_k(r, s, clip, k)) for r in range(0, 3 * (s + k + 2)))
    assert worst <= delta + 1e-12


def test_smoothing_keeps_the_derived_threshold_meaningful_at_small_epsilon(births_doc):
    """At epsilon 0.15 the births derivation (m = 50) falls below the metric's minimum of 1 and
    the spec is refused; with k = 100 the sensitivity is guaranteed and the threshold is 1.40."""
    from dpbundle.release.spec.load import SpecError, validate_spec

    thr = {"derive": "laplace_false_positive", "stakeholder": 2.0, "false_positive": 0.05,
           "assumed_min_count": 50}
    low = dict(ENTRY, epsilon=0.15, threshold=thr)
    assert make_criterion(low).threshold()[0] < 1.0
    crit = make_criterion(dict(low, smoothing=100))
    value, stakeholder, inputs = crit.threshold()
    assert value == pytest.approx(2 - (4 / 102 / 0.15) * np.log(10), abs=1e-9)
    assert 1.39 < value < 1.41 and inputs["smoothing"] == 100
    ratio = next(e for e in births_doc["acceptance"] if e["type"] == "smoothed_ratio")
    ratio["epsilon"] = 0.15
    with pytest.raises(SpecError, match="ratio"):
        validate_spec(births_doc)
    ratio["smoothing"] = 100
    validate_spec(births_doc)


def test_audit_derives_the_same_smoothed_threshold():
    """The audit's independent derivation agrees with the criterion's, smoothing included."""
    from dpbundle.audit.sensitivity import derive_threshold

    thr = {"derive": "laplace_false_positive", "stakeholder": 2.0, "false_positive": 0.05,
           "assumed_min_count": 50}
    for k in (1, 100):
        entry = dict(ENTRY, epsilon=0.15, threshold=thr, smoothing=k)
        assert derive_threshold(entry)[0] == pytest.approx(make_criterion(entry).threshold()[0], abs=1e-12)


@pytest.mark.slow
def test_release_with_smoothing_passes_its_audit(tmp_path):
    """A spec with `smoothing` released and audited: the audit recomputes the smoothed
    sensitivity from the public bundle and agrees."""
    import sys
    from pathlib import Path

    import yaml
    from typer.testing import CliRunner

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import audit_fixtures as fx
    from dpbundle.audit.runner import run_audit
    from dpbundle.release.cli.main import app

    spec = fx.fast_spec(tmp_path / "spec.yaml")
    doc = yaml.safe_load(spec.read_text())
    ratio = next(e for e in doc["acceptance"] if e["type"] == "smoothed_ratio")
    ratio["smoothing"] = 100
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(tmp_path / "r.csv", 3000, 4)
    run = CliRunner().invoke
    assert run(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    res = run(app, ["release", str(spec), str(data), "--out", str(tmp_path / "B"), "--key",
                    str(tmp_path / "k.key"), "--ledger", str(tmp_path / "l.jsonl"),
                    "--transcript", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 0, res.output
    metrics = {m["id"]: m for m in __import__("json").loads((tmp_path / "B" / "metrics.json").read_text())["criteria"]}
    assert metrics["ratio"]["sensitivity_inputs"]["smoothing"] == 100
    rep = run_audit(tmp_path / "B", pubkey=tmp_path / "k.pub", transcript=tmp_path / "t.jsonl", data=data)
    assert rep.get("budget").result == "pass", rep.get("budget").problems
    assert rep.get("replay").result == "pass", rep.get("replay").problems
