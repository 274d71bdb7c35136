"""quantile: scores, their sensitivity, the release count and the exact quantiles."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import cat_coding, int_coding, neighbours
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionError, EvalContext, make_criterion
from dpbundle.mechanisms.criteria.quantile import quantile_releases, quantile_scores
from dpbundle.mechanisms.noise import Randomness

Q = {"id": "med", "type": "quantile", "target": "h", "threshold": 2, "epsilon": 0.3}


def brute_scores(hist, alpha):
    out = []
    for k in range(len(hist)):
        a, b = sum(hist[:k]), sum(hist[k + 1:])
        out.append(-abs((1 - alpha) * a - alpha * b))
    return np.array(out)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=1, max_size=8), st.floats(0.01, 0.99))
def test_scores_match_the_definition(hist, alpha):
    assert np.allclose(quantile_scores(np.array(hist), alpha), brute_scores(hist, alpha))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 10), min_size=1, max_size=8), st.floats(0.01, 0.99),
       st.data())
def test_scores_change_by_at_most_one(hist, alpha, data):
    """One record moves between candidates (inside the group), leaves, or joins: every score
    moves by <= 1 (the sensitivity given to report-noisy-max)."""
    K = len(hist)
    h = np.array(hist)
    h2 = h.copy()
    move = data.draw(st.sampled_from(["move", "leave", "join"]))
    if move != "join":
        if h.sum() == 0:
            return
        src = data.draw(st.sampled_from(np.flatnonzero(h).tolist()))
        h2[src] -= 1
    if move != "leave":
        h2[data.draw(st.integers(0, K - 1))] += 1
    diff = np.abs(quantile_scores(h, alpha) - quantile_scores(h2, alpha))
    assert diff.max() <= 1 + 1e-12


def test_score_change_of_one_is_attained():
    """alpha = 0.5, a record moving from below candidate 1 to above it: a - b changes by 2,
    the score of candidate 1 from -1 to 0 -- a claimed sensitivity of 1/2 would be wrong."""
    s1 = quantile_scores(np.array([2, 0, 0]), 0.5)
    s2 = quantile_scores(np.array([1, 0, 1]), 0.5)
    assert np.abs(s1 - s2).max() == pytest.approx(1.0)


def test_releases_by_hand():
    assert quantile_releases(1, [None]) == 1
    assert quantile_releases(1, [None, "sex", "age"]) == 5
    assert quantile_releases(3, [None, ["a", "b"]]) == 9


def _coded(values, groups=None):
    cols = [int_coding("h", [0, 10, 20, 30, 40, 50])]  # numbers 4.5, 14.5, ..., 44.5
    codes = [np.asarray(values)]
    if groups is not None:
        cols.append(cat_coding("g", ["a", "b"], [0, 1]))
        codes.append(np.asarray(groups))
    return Coded(codes=np.column_stack(codes).astype(np.int64), columns=tuple(cols))


def test_exact_quantiles_by_hand():
    """Codes 0,1,1,2,4 -> numbers 4.5, 14.5, 14.5, 24.5, 44.5 (candidates 4.5 ... 44.5 in steps
    of 10): the median is the third, 14.5; C = five records at 24.5; error 10."""
    t = _coded([0, 1, 1, 2, 4])
    c = _coded([2, 2, 2, 2, 2])
    assert make_criterion(Q).value(EvalContext(t, c, {})) == pytest.approx(10.0)
    # alpha 0.7: scores at 24.5: -|0.3*3 - 0.7*1| = -0.2, at 34.5: -|0.3*4 - 0.7| = -0.5:
    # the 0.7 quantile is 24.5, error 0 against C
    assert make_criterion(dict(Q, quantiles=[0.7])).value(EvalContext(t, c, {})) == 0.0
    # alpha 0.8: at 34.5 (no record there) -|0.2*4 - 0.8*1| = 0: any value between 24.5 and
    # 44.5 splits 4:1, and the candidate 34.5 is chosen: error 10
    assert make_criterion(dict(Q, quantiles=[0.8])).value(EvalContext(t, c, {})) == 10.0
    # alpha 0.1: at 4.5 -|0 - 0.1*4| = -0.4, at 14.5 -|0.9 - 0.2| = -0.7: 4.5, error 20
    v = make_criterion(dict(Q, quantiles=[0.1, 0.7])).value(EvalContext(t, c, {}))
    assert v == pytest.approx(20.0)


def test_groups_absent_from_c_are_not_compared():
    """T's group b (far from C) is left out when C has no b records."""
    t = _coded([0, 0, 4, 4], groups=[0, 0, 1, 1])
    c = _coded([0, 0, 0, 0], groups=[0, 0, 0, 0])
    crit = make_criterion(dict(Q, by=["g"]))
    assert crit.value(EvalContext(t, c, {})) == 0.0
    c2 = _coded([0, 0, 0, 0], groups=[0, 0, 1, 1])
    assert crit.value(EvalContext(t, c2, {})) == pytest.approx(40.0)


@settings(max_examples=150, deadline=None)
@given(neighbours(columns=(int_coding("h", [0, 10, 20, 30, 40, 50]),
                           cat_coding("g", ["a", "b", "c"], [0, 1, 2])), max_n=30),
       st.floats(0.05, 0.95))
def test_grouped_scores_neighbours(cs, alpha):
    """Per grouping, one changed record changes the score vectors of at most 2 groups, each by
    <= 1 in every coordinate (so R = 2 per grouping, 1 for null, is enough)."""
    t, t2, c = cs
    crit = make_criterion(dict(Q, by=["g"], quantiles=[alpha]))
    ctx = EvalContext(t, c, {})
    cand, of_code = crit.candidates(t)
    h1, _ = crit._hist(t, "g", ctx, of_code, cand.size)
    h2, _ = crit._hist(t2, "g", ctx, of_code, cand.size)
    d = np.abs(quantile_scores(h1, alpha) - quantile_scores(h2, alpha))
    assert d.max() <= 1 + 1e-12
    assert (d.max(axis=1) > 0).sum() <= 2


def test_evaluate_records_one_choice_per_compared_group_and_level():
    rng = np.random.default_rng(3)
    t = _coded(rng.integers(0, 5, 300), groups=rng.integers(0, 2, 300))
    crit = make_criterion(dict(Q, by=[None, "g"], quantiles=[0.25, 0.5]))
    assert crit.releases == 2 * (1 + 2)
    rand = Randomness()
    res = crit.evaluate(EvalContext(t, t, {}), rand)
    recs = rand.transcript.records
    # compared groups: all (1) + a, b (2) = 3, times 2 levels = 6 choices
    assert len(recs) == 6 and all(r["kind"] == "exponential" for r in recs)
    assert all(r["epsilon"] == pytest.approx(0.3 / 6) for r in recs)
    assert res.noise_std == res.noise_scale
    assert 0 <= res.dp_value <= 40


def test_errors():
    cols = (cat_coding("s", ["x", "y"], [np.nan, np.nan]),)
    coded = Coded(codes=np.zeros((2, 1), dtype=np.int64), columns=cols)
    with pytest.raises(CriterionError, match="no numbers"):
        make_criterion(dict(Q, target="s")).value(EvalContext(coded, coded, {}))
    for bad in ({"quantiles": [0]}, {"quantiles": [1.0]}, {"quantiles": []},
                {"quantiles": [0.5, 0.5]}, {"quantiles": "median"}, {"by": []},
                {"by": [3]}, {"target": 3}):
        with pytest.raises(CriterionError):
            make_criterion(dict(Q, **bad))
