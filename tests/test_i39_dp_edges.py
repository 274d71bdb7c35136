"""Issue 39, part 1, the building block: DP-quantile bin edges (mechanisms/edges.py).

- the scores are OpenDP's (make_quantile_score_candidates), alpha read as OpenDP reads it;
- the sensitivity: on change-one and add/remove neighbours no score moves by more than ``den``,
  and the worst case reaches it;
- the draws: exactly k - 1 sorted, distinct edges from the candidates; the exact quantiles at a
  large epsilon; OpenDP's utility bound; the privacy inequality between neighbours, measured;
- the transcript: a recorded run replays to the same edges, and other data is caught.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpbundle.mechanisms.edges import alpha_fraction, dp_edges, quantile_scores, score_sensitivity
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch


def _opendp_scores(data, candidates, alpha):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    t = dp.t.make_quantile_score_candidates(dp.vector_domain(dp.atom_domain(T=int)),
                                            dp.symmetric_distance(), [int(c) for c in candidates], alpha)
    return np.asarray(t([int(v) for v in data]), dtype=np.int64)


@pytest.mark.parametrize("k", [2, 3, 4, 5, 7, 10])
def test_scores_are_opendps(k):
    rng = np.random.default_rng(k)
    data = rng.integers(0, 60, size=500)
    cands = sorted(set(rng.integers(-5, 70, size=40).tolist()))
    for j in range(1, k):
        alpha = j / k
        assert np.array_equal(quantile_scores(data, cands, alpha_fraction(alpha)), _opendp_scores(data, cands, alpha))


def test_alpha_is_read_as_opendp_reads_it():
    """OpenDP's own reading, found from its scores (n = 1, one candidate below the value: the
    score is num): j/k for every k < 30, and 0.57 (5699.999... truncated)."""
    for k in range(2, 30):
        for j in range(1, k):
            assert alpha_fraction(j / k)[0] == int(_opendp_scores([5], [-1], j / k)[0]), (j, k)
    assert alpha_fraction(0.57) == (5699, 10_000) == (int(_opendp_scores([5], [-1], 0.57)[0]), 10_000)
    assert alpha_fraction(0.5) == (1, 2) and alpha_fraction(0.25) == (1, 4)
    assert alpha_fraction(2 / 3) == (6666, 10_000) and alpha_fraction(0.2) == (2000, 10_000)
    assert alpha_fraction(0.0) == (0, 1) and alpha_fraction(1.0) == (1, 1)
    assert Fraction(*alpha_fraction(0.375)) == Fraction(3, 8)


def test_counts_give_the_scores_of_the_rows():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 20, size=300)
    distinct, counts = np.unique(data, return_counts=True)
    cands = list(range(0, 22, 2))
    a = alpha_fraction(0.3)
    assert np.array_equal(quantile_scores(distinct, cands, a, counts=counts), quantile_scores(data, cands, a))


@pytest.mark.parametrize("alpha", [0.5, 0.25, 0.1, 1 / 3, 0.9])
def test_no_score_moves_by_more_than_den_on_neighbours(alpha):
    """3,000 random tables and a neighbour of each (one value replaced, added or removed), the
    candidates on both sides of the values: max |s(x) - s(x')| <= den; a value replaced across a
    candidate, the score keeping its sign, reaches den."""
    a = alpha_fraction(alpha)
    den = score_sensitivity(a)
    rng = np.random.default_rng(int(alpha * 1000))
    cands = list(range(0, 21))
    worst = 0
    for _ in range(3000):
        x = rng.integers(0, 21, size=int(rng.integers(1, 30)))
        y = x.copy()
        kind = rng.integers(3)
        if kind == 0:
            y[rng.integers(len(y))] = rng.integers(0, 21)
        elif kind == 1:
            y = np.append(y, rng.integers(0, 21))
        elif len(y) > 1:
            y = np.delete(y, rng.integers(len(y)))
        worst = max(worst, int(np.max(np.abs(quantile_scores(x, cands, a) - quantile_scores(y, cands, a)))))
    assert worst <= den
    # the worst case: a value below c = 3 replaced by one above it, T = (den - num) L - num G > 0
    x = np.array([1] * 20 + [5])
    y = np.array([1] * 19 + [12, 5])
    assert int(np.max(np.abs(quantile_scores(x, [3], a) - quantile_scores(y, [3], a)))) == den


@pytest.mark.parametrize("k", [2, 4, 6])
def test_edges_are_sorted_distinct_candidates(k):
    rng = np.random.default_rng(k)
    for trial in range(40):
        data = rng.integers(0, 100, size=int(rng.integers(1, 200)))
        cands = sorted(set(rng.integers(0, 101, size=int(rng.integers(k - 1, 30))).tolist()))
        if len(cands) < k - 1:
            continue
        edges = dp_edges(data, cands, k, float(rng.choice([0.01, 0.5, 5.0])), Randomness(), purpose="edges t")
        assert len(edges) == k - 1 and edges == sorted(set(edges)) and set(edges) <= set(map(float, cands))
    # exactly as many candidates as edges: every candidate is an edge
    assert dp_edges([1, 2, 3], [1, 2, 3], 4, 0.1, Randomness(), purpose="edges t") == [1.0, 2.0, 3.0]


def test_a_large_epsilon_gives_the_exact_quantiles():
    """At epsilon 1,000 the draws pick the candidate of the smallest score: the quartiles of
    0..1000 (the score is 0 at 250, 500 and 750 and at least den elsewhere)."""
    data = np.arange(1001)
    edges = dp_edges(data, list(range(1, 1000)), 4, 1000.0, Randomness(), purpose="edges t")
    assert edges == [250.0, 500.0, 750.0]


def test_the_error_stays_within_opendps_utility_bound():
    """Report-noisy-max with exponential noise of scale b = 2 den / eps: the chosen score exceeds
    the smallest by more than b ln(C / beta) with probability at most beta. 2,000 draws of a
    median at eps 0.2, beta 0.1: the share of such draws is at most 0.1 (plus 3 s.e.)."""
    rng = np.random.default_rng(7)
    data = rng.integers(0, 50, size=400)
    cands = list(range(0, 51))
    a = alpha_fraction(0.5)
    scores = quantile_scores(data, cands, a)
    eps, beta = 0.2, 0.1
    bound = scores.min() + 2 * score_sensitivity(a) / eps * math.log(len(cands) / beta)
    rand = Randomness()
    over = sum(scores[cands.index(int(dp_edges(data, cands, 2, eps, rand, purpose="edges t")[0]))] > bound
               for _ in range(2000))
    assert over / 2000 <= beta + 3 * math.sqrt(beta * (1 - beta) / 2000)


def test_neighbours_choose_alike_within_e_to_the_epsilon():
    """The privacy inequality, measured: 20,000 draws of the median of a table and of its
    worst-case neighbour at eps 1; for every edge drawn often enough on both sides, the ratio of
    the two frequencies is at most e (plus sampling error), and the frequencies differ (the test
    sees a difference when there is one)."""
    x = np.array([1, 3, 3, 4, 6, 6, 7, 9])
    y = x.copy()
    y[0] = 10                                        # one value moved across every candidate
    cands = list(range(0, 11))
    rand = Randomness()
    draws = 20_000
    fx = np.bincount([int(dp_edges(x, cands, 2, 1.0, rand, purpose="edges t")[0]) for _ in range(draws)], minlength=11)
    fy = np.bincount([int(dp_edges(y, cands, 2, 1.0, rand, purpose="edges t")[0]) for _ in range(draws)], minlength=11)
    px, py = fx / draws, fy / draws
    for c in range(11):
        if min(fx[c], fy[c]) >= 400:
            se = math.sqrt(1 / fx[c] + 1 / fy[c])          # of the log-ratio
            assert abs(math.log(px[c] / py[c])) <= 1.0 + 4 * se, c
    assert np.abs(px - py).sum() > 0.05


def test_a_recorded_run_replays_and_other_data_is_caught():
    rng = np.random.default_rng(11)
    data = rng.integers(0, 80, size=300)
    cands = list(range(1, 80))
    rec = Randomness()
    edges = dp_edges(data, cands, 5, 0.4, rec, purpose="edges age bands")
    records = list(rec.transcript.records)
    assert [r["purpose"] for r in records] == [f"edges age bands {j}/5" for j in range(1, 5)]
    assert all(r["kind"] == "exponential" and r["sensitivity"] == 10_000.0 for r in records[1:])
    replay = Randomness.replay(records)
    assert dp_edges(data, cands, 5, 0.4, replay, purpose="edges age bands") == edges
    replay.check_finished()
    other = data.copy()
    other[0] = 79 if other[0] < 40 else 0
    with pytest.raises(ReplayMismatch):
        dp_edges(other, cands, 5, 0.4, Randomness.replay(records), purpose="edges age bands")


def test_unusable_requests_are_refused():
    with pytest.raises(ValueError):
        dp_edges([1, 2], [1, 2], 1, 0.1, Randomness(), purpose="edges t")
    with pytest.raises(ValueError):
        dp_edges([1, 2], [1], 3, 0.1, Randomness(), purpose="edges t")
    with pytest.raises(ValueError):
        quantile_scores([1, 2], [2, 1], alpha_fraction(0.5))
    with pytest.raises(ValueError):
        alpha_fraction(1.5)
