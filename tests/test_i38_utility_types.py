"""Issue 38: the sweep's granular utility on record types (a 10M-row sweep on a Dask cluster
kept its workers under their memory limit only once no measure built the n rows). Every measure
on types equals the row-by-row computation it replaces (written out here from the definitions),
and a table held as its types is never expanded."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpbundle.mechanisms.cells import deferred, types_from_rows
from dpbundle.mechanisms.coding import Coded
from dpbundle.release.sweep.utility import evaluate_utility, weighted_median
from test_utility import COLS, population


def _rowwise_tables(T: Coded, C: Coded):
    out = {}
    for k in (2, 3):
        for cols in itertools.combinations(range(4), k):
            size = int(np.prod([T.domain[j] for j in cols]))
            idx = lambda X: np.ravel_multi_index(tuple(X[:, j] for j in cols), [T.domain[j] for j in cols])  # noqa: E731
            y = np.bincount(idx(T.codes), minlength=size) / T.n
            s = np.bincount(idx(C.codes), minlength=size) / C.n
            out[tuple(cols)] = (0.5 * np.abs(y - s).sum(), np.abs(y - s).max())
    return out


@pytest.fixture(scope="module")
def pair():
    rng = np.random.default_rng(38)
    return population(4000, rng), population(3000, rng, distort=0.3)


def test_tables_means_medians_correlations_equal_the_row_computation(pair):
    T, C = pair
    u = evaluate_utility(T, C, None, permutations=0)
    want = _rowwise_tables(T, C)
    for row in u["tables"]:
        cols = tuple(T.names.index(nm) for nm in row["columns"])
        assert row["tvd"] == pytest.approx(want[cols][0], abs=1e-12)
        assert row["max_abs_error"] == pytest.approx(want[cols][1], abs=1e-12)
    R = np.corrcoef(C.codes.T.astype(float))
    assert np.allclose(np.array(u["correlations"]["synth"]), np.round(R, 6), atol=2e-6)
    first = next(r for r in u["groups"]["rows"] if r["target"] == "a" and r["by"] == "c" and r["group"] == "1")
    a, c = C.codes[:, 0].astype(float), C.codes[:, 2]
    sel = np.sort(a[c == 1])
    assert first["n_synth"] == sel.size and first["mean_synth"] == pytest.approx(sel.mean())
    assert first["median_synth"] == sel[(sel.size - 1) // 2]


@pytest.mark.parametrize("seed", range(20))
def test_weighted_median_is_the_lower_median_of_the_expanded_values(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 6, rng.integers(1, 9)).astype(float)
    weights = rng.integers(0, 5, values.size)
    weights[rng.integers(0, values.size)] += 1
    expanded = np.repeat(values, weights)
    assert weighted_median(values, weights) == weighted_median(expanded)
    assert np.isnan(weighted_median(values, np.zeros(values.size, np.int64)))


def test_a_table_held_as_types_is_not_expanded(pair):
    T, C = pair
    built = []

    def lazy(table: Coded) -> Coded:
        types = types_from_rows(table.codes, COLS)

        def make():
            built.append(1)
            return table.codes
        return deferred(types, make=make)

    u_lazy = evaluate_utility(lazy(T), lazy(C), None, permutations=2, seed=3)
    assert built == []
    u_rows = evaluate_utility(T, C, None, permutations=2, seed=3)
    assert u_lazy["propensity"]["pmse"] == pytest.approx(u_rows["propensity"]["pmse"], rel=1e-9)
    assert u_lazy["tables"] == u_rows["tables"]
