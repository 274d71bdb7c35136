"""Granular utility measures (release/sweep/utility.py): pMSE ratio, SPECKS, S_pMSE, marginals, moments."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from dpbundle.mechanisms.coding import Coded, ColumnCoding
from dpbundle.release.sweep.utility import (
    _weighted_ks,
    correlations,
    evaluate_utility,
    fit_logistic,
    group_statistics,
    marginal_tables,
    propensity_measures,
    s_pmse_table,
)


def _col(name: str, k: int, ordered: bool = True, start: float = 0.0) -> ColumnCoding:
    v = np.arange(k, dtype=float) + start
    return ColumnCoding(name, tuple(str(int(x)) for x in v), v, ordered, v, v + 1)


COLS = (_col("a", 10), _col("b", 8), _col("c", 2, ordered=False), _col("d", 30))


def population(n: int, rng: np.random.Generator, distort: float = 0.0) -> Coded:
    """A table with dependent columns; ``distort`` replaces that share of d by uniform noise."""
    a = rng.integers(0, 10, n)
    b = np.clip(a // 2 + rng.integers(0, 4, n), 0, 7)
    c = (rng.random(n) < 0.3 + 0.04 * a).astype(int)
    d = np.clip(a * 2 + b + rng.integers(0, 8, n), 0, 29)
    if distort:
        m = rng.random(n) < distort
        d[m] = rng.integers(0, 30, int(m.sum()))
    return Coded(np.column_stack([a, b, c, d]), COLS)


@pytest.fixture(scope="module")
def tables():
    rng = np.random.Generator(np.random.PCG64(2021))
    n = 5000
    T = population(n, rng)
    return {
        "T": T,
        "fresh": population(n, rng),
        "resample": T.with_codes(T.codes[rng.integers(0, n, n)]),
        "distorted": population(n, rng, distort=0.5),
    }


@pytest.fixture(scope="module")
def measures(tables):
    T = tables["T"]
    return {k: evaluate_utility(T, C, None, permutations=4, seed=1) for k, C in tables.items() if k != "T"}


def test_pmse_ratio_and_specks_fresh_vs_distorted(measures):
    fresh, bad = measures["fresh"]["propensity"], measures["distorted"]["propensity"]
    # same distribution: pMSE about its permutation null, propensity scores hardly separate T from C
    assert 0.6 < fresh["pmse_ratio"] < 1.6
    assert fresh["specks"] < 0.06
    # distorted: clearly worse on both
    assert bad["pmse_ratio"] > 2.5
    assert bad["pmse_ratio"] > 2 * fresh["pmse_ratio"]
    assert bad["specks"] > 1.5 * fresh["specks"]
    # Snoke et al.'s analytic null is the synthesis null: about twice the permutation ratio for c = 1/2
    assert fresh["pmse_ratio_snoke"] == pytest.approx(2 * fresh["pmse"] / fresh["pmse_null"], rel=0.35)
    assert fresh["c"] == pytest.approx(0.5)


def test_s_pmse_reference_values(measures):
    # synthesis from T's own distribution (the synthpop null) -> about 1
    for k in ("2", "3"):
        assert 0.75 < measures["resample"]["s_pmse"][k]["mean"] < 1.25
    # an independent sample of the same distribution -> about 2
    for k in ("2", "3"):
        assert 1.5 < measures["fresh"]["s_pmse"][k]["mean"] < 2.5
    # distorted -> clearly larger, and the worst table involves the distorted column
    assert measures["distorted"]["s_pmse"]["2"]["mean"] > 4.0
    assert measures["distorted"]["s_pmse"]["2"]["max"] > 10.0
    assert "d" in measures["distorted"]["s_pmse"]["2"]["worst"]
    assert measures["resample"]["propensity"]["pmse_ratio"] < 0.8  # resampling is closer than a fresh sample


def test_s_pmse_table_matches_raab_formula():
    rng = np.random.Generator(np.random.PCG64(3))
    y = rng.integers(0, 50, 40).astype(float)
    s = rng.integers(0, 50, 40).astype(float)
    y[3] = s[3] = 0.0       # a cell empty in both does not count
    s *= y.sum() / s.sum()  # equal totals, as in Raab's formula
    seen = (y + s) > 0
    raab = np.sum((y[seen] - s[seen]) ** 2 / ((y[seen] + s[seen]) / 2)) / (seen.sum() - 1)
    pmse, df, S = s_pmse_table(y, s)
    assert df == seen.sum() - 1
    assert S == pytest.approx(raab, rel=1e-12)
    # pMSE itself: mean over records of (propensity - 1/2)^2
    prop = s[seen] / (y[seen] + s[seen])
    N = y.sum() + s.sum()
    assert pmse == pytest.approx(np.sum((y[seen] + s[seen]) * (prop - 0.5) ** 2) / N)


def test_fit_logistic_matches_scipy_optimize():
    rng = np.random.Generator(np.random.PCG64(5))
    X = np.column_stack([np.ones(60), rng.normal(size=(60, 3))])
    m = rng.integers(1, 6, 60).astype(float)
    true = np.array([0.2, 1.0, -0.5, 0.0])
    y = rng.binomial(m.astype(int), 1 / (1 + np.exp(-X @ true))).astype(float)
    ridge = 0.7

    def negll(b):
        eta = X @ b
        return -(y @ eta - m @ np.logaddexp(0, eta)) + 0.5 * ridge * np.sum(b[1:] ** 2)

    ref = scipy.optimize.minimize(negll, np.zeros(4), method="BFGS", options={"gtol": 1e-10}).x
    ours = fit_logistic(X, y, m, ridge=ridge)
    assert ours == pytest.approx(ref, abs=1e-5)


def test_weighted_ks_matches_scipy_on_expanded_records():
    rng = np.random.Generator(np.random.PCG64(9))
    values = np.round(rng.random(30), 1)  # ties on purpose
    w1 = rng.integers(0, 5, 30).astype(float)
    w2 = rng.integers(0, 5, 30).astype(float)
    a = np.repeat(values, w1.astype(int))
    b = np.repeat(values, w2.astype(int))
    assert _weighted_ks(values, w1, w2) == pytest.approx(scipy.stats.ks_2samp(a, b).statistic, abs=1e-12)


def test_propensity_identical_tables_is_null():
    rng = np.random.Generator(np.random.PCG64(11))
    T = population(2000, rng)
    p = propensity_measures(T.codes, T.codes, T.domain, permutations=2)
    assert p["pmse"] == pytest.approx(0.0, abs=1e-12)
    assert p["specks"] == pytest.approx(0.0, abs=1e-12)


def test_marginal_errors_known_values():
    cols = (_col("x", 2), _col("y", 2), _col("z", 2))
    T = Coded(np.array([[0, 0, 0], [0, 1, 0], [1, 0, 1], [1, 1, 1]]), cols)
    C = Coded(np.array([[0, 0, 0], [0, 0, 0], [1, 1, 1], [1, 1, 1]]), cols)
    rows = {tuple(r["columns"]): r for r in marginal_tables(T, C, (2, 3))}
    # x,y: T = (1/4 each cell), C = {00: 1/2, 11: 1/2}: TVD = 1/2, max cell error 1/4
    assert rows[("x", "y")]["tvd"] == pytest.approx(0.5)
    assert rows[("x", "y")]["max_abs_error"] == pytest.approx(0.25)
    # x,z: identical
    assert rows[("x", "z")]["tvd"] == 0.0
    assert rows[("x", "y", "z")]["tvd"] == pytest.approx(0.5)
    assert rows[("x", "z")]["s_pmse"] == pytest.approx(0.0)


def test_correlations_and_groups():
    rng = np.random.Generator(np.random.PCG64(13))
    T = population(3000, rng)
    same = correlations(T, T)
    assert same["max_abs_diff"] == 0.0
    assert np.allclose(np.asarray(same["real"]), np.corrcoef(np.column_stack([T.values_of(n) for n in T.names]).T))
    shuffled = T.codes.copy()
    shuffled[:, 3] = rng.permutation(shuffled[:, 3])
    broken = correlations(T, T.with_codes(shuffled))
    assert broken["max_abs_diff"] > 0.5 and "d" in broken["worst"]

    spec = {"group_bins": {"a": {"edges": [5], "labels": ["<5", "5+"]}}}
    g = group_statistics(T, T.with_codes(shuffled), spec)
    rows = {(r["target"], r["by"], r["group"]): r for r in g["rows"]}
    a, d = T.values_of("a"), T.values_of("d")
    r = rows[("d", "a", "<5")]
    assert r["n_real"] == int((a < 5).sum())
    assert r["mean_real"] == pytest.approx(d[a < 5].mean())
    assert r["median_real"] == float(np.sort(d[a < 5])[((a < 5).sum() - 1) // 2])
    assert rows[("d", None, "all")]["mean_real"] == pytest.approx(rows[("d", None, "all")]["mean_synth"])
    assert g["summary"]["d"]["max_abs_mean_diff"] > 3  # shuffling d breaks its dependence on a
    assert "c" not in g["targets"]  # categories are not averaged


def test_evaluate_utility_is_json_able(measures):
    import json

    text = json.dumps(measures["fresh"], allow_nan=False)
    assert "propensity" in text and math.isfinite(measures["fresh"]["propensity"]["pmse_ratio"])
