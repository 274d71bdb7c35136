"""Common criterion machinery: registry, thresholds, result rows, transcript, replay."""
from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from scipy import stats

from criteria_util import BIRTHS_FAITHFULNESS, BIRTHS_GROUP_BINS, births_like
from dpbundle.mechanisms.criteria import (CriterionError, CriterionResult, EvalContext,
                                          criterion_types, make_criterion)
from dpbundle.mechanisms.noise import Randomness

TYPES = {"kway_marginals", "smoothed_ratio", "conditional_means", "regression_coefficients",
         "regression_mae_difference", "classification", "quantile", "faithfulness"}


@pytest.fixture(scope="module")
def births_entries(births_spec_path):
    return yaml.safe_load(births_spec_path.read_text("utf-8"))["acceptance"]


@pytest.fixture(scope="module")
def ctx():
    rng = np.random.default_rng(7)
    real = births_like(3000, rng)
    codes = real.codes.copy()
    rows = rng.choice(real.n, 300, replace=False)
    codes[rows, 0] = rng.integers(0, 12, 300)
    spec = {"group_bins": BIRTHS_GROUP_BINS, "faithfulness": BIRTHS_FAITHFULNESS}
    return EvalContext(real=real, synth=real.with_codes(codes), spec=spec)


def test_types_registered():
    assert set(criterion_types()) == TYPES
    for info in criterion_types().values():
        assert info["summary"]


def test_unknown_type_and_field():
    with pytest.raises(CriterionError, match="unknown criterion type"):
        make_criterion({"id": "x", "type": "nope", "threshold": 1, "epsilon": 1})
    with pytest.raises(CriterionError, match="unknown field"):
        make_criterion({"id": "x", "type": "kway_marginals", "threshold": 1, "epsilon": 1,
                        "bogus": 3})
    with pytest.raises(CriterionError, match="epsilon"):
        make_criterion({"id": "x", "type": "kway_marginals", "threshold": 1, "epsilon": 0})


def test_births_ratio_threshold_is_1_41(births_entries):
    entry = next(e for e in births_entries if e["type"] == "smoothed_ratio")
    thr, stake, inputs = make_criterion(entry).threshold()
    assert stake == 2.0
    # independent: Delta at s' = 50, c = 2, Laplace quantile from scipy
    c, s = 2.0, 50.0
    delta = max(1 / s, c - 1 / (1 / c + 1 / s))
    expected = 2.0 - stats.laplace.ppf(0.95, scale=delta / 0.3)
    assert thr == pytest.approx(expected, rel=1e-12)
    assert round(thr, 2) == 1.41
    assert inputs["assumed_min_count"] == 50 and inputs["false_positive"] == 0.05


def test_evaluate_all_births_criteria(births_entries, ctx):
    rand = Randomness()
    results = [make_criterion(e).evaluate(ctx, rand) for e in births_entries]
    assert [r.id for r in results] == [e["id"] for e in births_entries]
    laplace = [r for r in rand.transcript.records if r["kind"] == "laplace"]
    assert [r["purpose"] for r in laplace] == [f"criterion {e['id']}" for e in births_entries]
    for res, rec in zip(results, laplace):
        assert isinstance(res, CriterionResult)
        assert res.passed == (res.dp_value < res.threshold)
        assert res.noise_std == pytest.approx(math.sqrt(2) * res.noise_scale)
        assert rec["scale"] == res.noise_scale
        assert rec["sensitivity"] == res.sensitivity
        assert res.noise_scale >= res.sensitivity / res.epsilon
        assert res.sensitivity_inputs["n"] == ctx.n
        if res.type == "regression_coefficients":
            assert res.mechanism == "functional_mechanism"
            assert isinstance(rec["true"], list)
        else:
            assert res.mechanism == "laplace"
            assert res.dp_value == rec["noisy"]
    # seeds only for the resizes of the conditional means
    seeds = [r["purpose"] for r in rand.transcript.records if r["kind"] == "seed"]
    assert seeds == [f"criterion {e['id']} resize" for e in births_entries
                     if e["type"] == "conditional_means"]


def test_replay_reproduces_results(births_entries, ctx):
    rand = Randomness()
    first = [make_criterion(e).evaluate(ctx, rand).to_dict()
             for e in births_entries]
    ctx2 = EvalContext(real=ctx.real, synth=ctx.synth, spec=ctx.spec)
    rep = Randomness.replay(rand.transcript.records)
    again = [make_criterion(e).evaluate(ctx2, rep).to_dict() for e in births_entries]
    rep.check_finished()
    assert first == again


def test_sensitivity_ignores_real_data(births_entries, ctx):
    """Sensitivities are computed from n, C and the spec only: replacing T changes nothing."""
    other = EvalContext(real=ctx.synth.with_codes(np.zeros_like(ctx.real.codes)),
                        synth=ctx.synth, spec=ctx.spec)
    for e in births_entries:
        c = make_criterion(e)
        assert c.sensitivity(ctx) == c.sensitivity(other)


def test_mismatched_shapes_rejected(ctx):
    c = make_criterion({"id": "k", "type": "kway_marginals", "threshold": 1, "epsilon": 1})
    bad = EvalContext(real=ctx.real.with_codes(ctx.real.codes[:10]), synth=ctx.synth, spec={})
    with pytest.raises(ValueError, match="same n"):
        c.value(bad)
