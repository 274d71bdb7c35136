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
    assert crit.value(EvalContext(t, c, {})) == 2.0
