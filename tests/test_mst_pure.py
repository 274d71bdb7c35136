"""Tests of mechanisms/mst.py (native pure-DP MST, "mst_pure"): sensitivities on neighbouring
datasets, exact budget, spanning tree, post-processing that reads only DP outputs, sampling
accuracy, transcript replay, registration and an end-to-end release + enclave audit."""
from __future__ import annotations

import math
import sys
import zlib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator_util import FixedNoise, code_neighbours  # noqa: E402
from dpbundle.mechanisms import exact
from dpbundle.mechanisms import mst as M
from dpbundle.mechanisms.generators import generator_types, make_generator
from dpbundle.mechanisms.mst import (
    SCORE_SENSITIVITY,
    PureMST,
    consistent_tree,
    independence_estimate,
    oneway_counts,
    oneway_sensitivity,
    pair_counts,
    selection_score,
)
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- helpers

def _chain(n: int, seed: int = 3) -> tuple[np.ndarray, tuple[int, ...]]:
    """A strongly dependent Markov chain a -> b -> c -> e (a tree, so MST can model it)."""
    g = np.random.default_rng(seed)
    a = g.choice(4, n, p=[0.1, 0.2, 0.3, 0.4])
    b = np.where(g.random(n) < 0.85, a % 3, g.integers(0, 3, n))
    c = np.where(g.random(n) < 0.8, (2 * b + 1) % 5, g.integers(0, 5, n))
    e = np.where(g.random(n) < 0.9, (c >= 2).astype(int), g.integers(0, 2, n))
    return np.stack([a, b, c, e], axis=1).astype(np.int64), (4, 3, 5, 2)


def _freq2(codes: np.ndarray, domain, i: int, j: int) -> np.ndarray:
    idx = codes[:, i] * domain[j] + codes[:, j]
    return np.bincount(idx, minlength=domain[i] * domain[j]) / codes.shape[0]


def _is_spanning_tree(d: int, edges) -> bool:
    parent = list(range(d))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    if len(edges) != d - 1:
        return False
    for a, b in edges:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
    return len({find(x) for x in range(d)}) == 1


# ----------------------------------------------------------------------------- sensitivities

@SETTINGS
@given(code_neighbours(min_d=2))
def test_oneway_counts_l1_change_within_2d(case):
    codes, other, domain = case
    a, b = oneway_counts(codes, domain), oneway_counts(other, domain)
    assert a.shape == b.shape == (sum(domain),) and a.sum() == codes.shape[0] * len(domain)
    assert np.abs(a - b).sum() <= oneway_sensitivity(len(domain))


@SETTINGS
@given(code_neighbours(min_d=2, every_column=True))
def test_oneway_sensitivity_is_attained_when_every_column_changes(case):
    codes, other, domain = case
    delta = np.abs(oneway_counts(codes, domain) - oneway_counts(other, domain)).sum()
    assert delta == oneway_sensitivity(len(domain)) == 2 * len(domain)


@SETTINGS
@given(code_neighbours(min_d=2), st.data())
def test_pair_counts_l1_change_at_most_2(case, data):
    codes, other, domain = case
    i, j = sorted(data.draw(st.lists(st.integers(0, len(domain) - 1), min_size=2, max_size=2,
                                     unique=True)))
    a, b = pair_counts(codes, domain, i, j), pair_counts(other, domain, i, j)
    assert a.shape == (domain[i], domain[j]) and a.sum() == codes.shape[0]
    assert np.abs(a - b).sum() <= 2


def test_pair_counts_worst_case_is_2():
    codes = np.array([[0, 0], [1, 1]])
    other = np.array([[0, 0], [0, 1]])
    assert np.abs(pair_counts(codes, (2, 2), 0, 1) - pair_counts(other, (2, 2), 0, 1)).sum() == 2


@SETTINGS
@given(code_neighbours(min_d=2), st.data())
def test_selection_score_change_within_sensitivity(case, data):
    """For any estimate computed from noisy 1-ways (arbitrary integers, negative ones included),
    the score moves by at most 2 between neighbours."""
    codes, other, domain = case
    n = codes.shape[0]
    i, j = sorted(data.draw(st.lists(st.integers(0, len(domain) - 1), min_size=2, max_size=2,
                                     unique=True)))
    noisy_i = np.array(data.draw(st.lists(st.integers(-20, 40), min_size=domain[i], max_size=domain[i])))
    noisy_j = np.array(data.draw(st.lists(st.integers(-20, 40), min_size=domain[j], max_size=domain[j])))
    est = independence_estimate(noisy_i, noisy_j, n)
    assert est.shape == (domain[i], domain[j]) and est.sum() == pytest.approx(n)
    delta = abs(selection_score(pair_counts(codes, domain, i, j), est)
                - selection_score(pair_counts(other, domain, i, j), est))
    assert delta <= SCORE_SENSITIVITY + 1e-9


@SETTINGS
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 10), st.data())
def test_selection_score_change_within_sensitivity_any_estimate(ki, kj, n, data):
    """Worst cases: an arbitrary non-negative estimate (not only products) and tables
    concentrated on one or two cells."""
    cells = [(a, b) for a in range(ki) for b in range(kj)]
    rows = data.draw(st.lists(st.sampled_from(cells), min_size=n, max_size=n))
    codes = np.array(rows, dtype=np.int64).reshape(n, 2)
    other = codes.copy()
    other[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from(cells))
    est = np.array(data.draw(st.lists(st.floats(0, 2 * n), min_size=ki * kj, max_size=ki * kj))
                   ).reshape(ki, kj)
    delta = abs(selection_score(pair_counts(codes, (ki, kj), 0, 1), est)
                - selection_score(pair_counts(other, (ki, kj), 0, 1), est))
    assert delta <= SCORE_SENSITIVITY + 1e-9


def test_selection_score_sensitivity_is_attained():
    """The bound 2 is tight (a claimed 1 would be wrong): E from noisy 1-ways [1, 0] x [1, 0]."""
    est = independence_estimate(np.array([1, 0]), np.array([1, 0]), 1)
    d1 = selection_score(pair_counts(np.array([[0, 0]]), (2, 2), 0, 1), est)
    d2 = selection_score(pair_counts(np.array([[1, 1]]), (2, 2), 0, 1), est)
    assert (d1, d2) == (0.0, 2.0) and abs(d1 - d2) == SCORE_SENSITIVITY


@SETTINGS
@given(code_neighbours(min_d=2, max_d=5, max_k=4, max_n=10))
def test_every_true_value_of_fit_moves_within_its_declared_sensitivity(case):
    """The values fit hands to the mechanisms (1-way vector, candidate scores of every step,
    tree 2-ways) against the sensitivity it declares for them, on neighbouring datasets; the DP
    outputs are the same for both (FixedNoise), so both runs ask for the same things."""
    codes, other, domain = case
    ra, rb = FixedNoise(), FixedNoise()
    PureMST(1.0).fit(codes, domain, ra)
    PureMST(1.0).fit(other, domain, rb)
    assert [c["purpose"] for c in ra.calls] == [c["purpose"] for c in rb.calls]
    d = len(domain)
    kinds = [c["kind"] for c in ra.calls]
    assert kinds == ["laplace"] + ["exponential"] * (d - 1) + ["laplace"] * (d - 1)
    for x, y in zip(ra.calls, rb.calls):
        assert x["sensitivity"] == y["sensitivity"]
        if x["kind"] == "laplace":      # L1 sensitivity
            assert np.abs(x["true"] - y["true"]).sum() <= x["sensitivity"]
        else:                           # linf sensitivity of the score vector
            assert np.abs(x["true"] - y["true"]).max() <= x["sensitivity"] + 1e-9
    assert ra.calls[0]["sensitivity"] == 2 * d
    assert {c["sensitivity"] for c in ra.calls[1:]} <= {2.0, 2}


# ----------------------------------------------------------------------------- budget

@settings(max_examples=300, deadline=None)
@given(st.floats(1e-3, 1e3, allow_nan=False), st.floats(0.01, 0.98), st.floats(0.01, 0.98))
def test_budget_parts_sum_exactly_to_at_most_epsilon(eps, s1, s2):
    if exact.dec(s1) + exact.dec(s2) >= 1:
        with pytest.raises(ValueError, match="split_1way \\+ split_select"):
            PureMST(eps, split_1way=s1, split_select=s2)
        return
    g = PureMST(eps, split_1way=s1, split_select=s2)
    parts = g.budget_parts()
    assert [p["purpose"] for p in parts] == ["1-way marginals", "tree selection",
                                             "2-way marginals of the tree"]
    assert all(p["epsilon"] > 0 for p in parts)
    spent = sum(Fraction(p["epsilon"]) for p in parts)
    assert spent <= exact.dec(eps)                              # exactly
    assert float(spent) == pytest.approx(eps, rel=1e-9)
    assert Fraction(parts[0]["epsilon"]) <= exact.dec(s1) * exact.dec(eps)
    assert Fraction(parts[1]["epsilon"]) <= exact.dec(s2) * exact.dec(eps)


def test_default_split_is_a_third_each():
    g = PureMST(3.0)
    assert g.hyperparameters() == {"split_1way": 1 / 3, "split_select": 1 / 3}
    assert [p["epsilon"] for p in g.budget_parts()] == pytest.approx([1.0, 1.0, 1.0])
    assert sum(Fraction(p["epsilon"]) for p in g.budget_parts()) <= 3


def test_transcript_spends_each_part_at_most_exactly():
    codes, domain = _chain(3000, seed=5)
    g = PureMST(0.8, split_1way=0.3, split_select=0.2)
    rand = Randomness()
    g.fit(codes, domain, rand)
    recs = rand.transcript.records
    by_part = {"1-way": Fraction(0), "edge": Fraction(0), "2-way": Fraction(0)}
    for r in recs:
        key = next(k for k in by_part if k in r["purpose"])
        by_part[key] += Fraction(r["epsilon"])
    d = len(domain)
    assert [r["kind"] for r in recs] == ["laplace"] + ["exponential"] * (d - 1) + ["laplace"] * (d - 1)
    assert by_part["1-way"] == Fraction(g.epsilon_1)
    assert by_part["edge"] <= Fraction(g.epsilon_select)
    assert by_part["2-way"] <= Fraction(g.epsilon_2)
    assert sum(by_part.values()) <= Fraction(4, 5)               # the declared decimal 0.8
    assert float(sum(by_part.values())) == pytest.approx(0.8, rel=1e-12)
    assert recs[0]["sensitivity"] == 2 * d and recs[0]["mechanism"] == "opendp.make_laplace/integer"
    assert all(r["sensitivity"] == 2.0 for r in recs[1:])
    assert g.privacy_map(1) == 0.8 and g.privacy_map(2) == 1.6


# ----------------------------------------------------------------------------- structure

@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=6), st.integers(1, 80),
       st.floats(0.05, 50), st.integers(0, 2**32 - 1))
def test_tree_is_spanning_and_samples_stay_in_domain(domain, n, eps, seed):
    g = np.random.default_rng(seed)
    codes = np.stack([g.integers(0, k, n) for k in domain], axis=1).astype(np.int64)
    rand = Randomness()
    gen = PureMST(eps)
    model = gen.fit(codes, domain, rand)
    d = len(domain)
    assert _is_spanning_tree(d, model.edges) and gen.edges == list(model.edges)
    assert all(a < b for a, b in model.edges)
    net = model.network_description()
    assert [node["attribute"] for node in net][0] == 0 and net[0]["parents"] == []
    undirected = {frozenset(e) for e in model.edges}
    for node in net[1:]:
        assert len(node["parents"]) == 1
        assert frozenset((node["attribute"], node["parents"][0]["attribute"])) in undirected
        assert node["parents"][0]["level"] == 0
    out = model.sample(300, rand.rng("sample"))
    assert out.shape == (300, d) and out.dtype == np.int64
    assert np.all(out >= 0) and np.all(out < np.asarray(domain))
    assert model.sample(0, rand.rng("empty")).shape == (0, d)


def test_single_column_measures_only_the_one_way():
    codes = np.array([[0], [1], [1], [2]] * 50)
    rand = Randomness()
    model = PureMST(5.0).fit(codes, (3,), rand)
    assert [r["kind"] for r in rand.transcript.records] == ["laplace"]
    assert model.edges == ()
    assert model.sample(10, rand.rng("s")).shape == (10, 1)


# ----------------------------------------------------------------------------- post-processing

@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=5), st.integers(5, 60),
       st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_post_processing_reads_only_dp_outputs(domain, n, seed_a, seed_b):
    """Two unrelated datasets with the same n and domain, the same DP outputs (FixedNoise):
    identical models and identical samples. A fit that let the data reach the model past the
    mechanisms would differ."""
    ga, gb = np.random.default_rng(seed_a), np.random.default_rng(seed_b)
    a = np.stack([ga.integers(0, k, n) for k in domain], axis=1)
    b = np.stack([gb.integers(0, k, n) for k in domain], axis=1)
    ma = PureMST(1.0).fit(a, domain, FixedNoise())
    mb = PureMST(1.0).fit(b, domain, FixedNoise())
    assert ma.edges == mb.edges
    for ca, cb in zip(ma.conditionals, mb.conditionals):
        assert np.array_equal(ca, cb)
    rng = lambda: np.random.Generator(np.random.PCG64(7))  # noqa: E731
    assert np.array_equal(ma.sample(200, rng()), mb.sample(200, rng()))


def test_consistent_tree_gets_exactly_the_released_noisy_values(monkeypatch):
    """The post-processing function's inputs are the DP outputs of the transcript (the recorded
    noisy vectors), the public n and domain, and nominal noise variances from epsilon and d."""
    seen = {}
    real = M.consistent_tree

    def spy(noisy_1way, noisy_2way, domain, n, var_1way, var_2way, root=0):
        seen.update(noisy_1way=[np.array(v) for v in noisy_1way],
                    noisy_2way={k: np.array(v) for k, v in noisy_2way.items()},
                    domain=domain, n=n, var_1way=var_1way, var_2way=var_2way)
        return real(noisy_1way, noisy_2way, domain, n, var_1way, var_2way, root)

    monkeypatch.setattr(M, "consistent_tree", spy)
    codes, domain = _chain(2000, seed=9)
    rand = Randomness()
    g = PureMST(2.0)
    model = g.fit(codes, domain, rand)
    recs = rand.transcript.records
    assert np.array_equal(np.concatenate(seen["noisy_1way"]), np.asarray(recs[0]["noisy"]))
    twoway = [r for r in recs if "2-way" in r["purpose"]]
    assert list(seen["noisy_2way"]) == list(model.edges)
    for (a, b), r in zip(model.edges, twoway):
        assert r["purpose"] == f"mst_pure: 2-way marginal [{a}, {b}]"
        assert np.array_equal(seen["noisy_2way"][(a, b)].ravel(), np.asarray(r["noisy"]))
    assert seen["domain"] == domain and seen["n"] == 2000.0
    b1, b2 = g.noise_scales(len(domain))
    assert (seen["var_1way"], seen["var_2way"]) == (2 * b1 * b1, 2 * b2 * b2)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=5), st.integers(1, 500), st.data())
def test_consistent_tree_is_consistent_non_negative_with_total_n(domain, n, data):
    """Arbitrary noisy inputs (negative cells, wrong totals, empty rows): every table is
    non-negative with total n, rows match the parent's model marginal, and the child's model
    marginal is the table's column sums (so tables sharing an attribute agree on it)."""
    d = len(domain)
    edges = []
    for c in range(1, d):   # a random tree
        edges.append(tuple(sorted((data.draw(st.integers(0, c - 1)), c))))
    ints = lambda k: np.array(data.draw(st.lists(st.integers(-30, 80), min_size=k, max_size=k)))  # noqa: E731
    noisy_1 = [ints(k) for k in domain]
    noisy_2 = {(a, b): ints(domain[a] * domain[b]).reshape(domain[a], domain[b]) for a, b in edges}
    nodes, conds, info = consistent_tree(noisy_1, noisy_2, domain, float(n), 3.0, 5.0)
    assert sorted(node.attribute for node in nodes) == list(range(d))
    for i, m in info["oneway"].items():
        assert np.all(m >= 0) and m.sum() == pytest.approx(n)
    for (p, c), t in info["tables"].items():
        assert np.all(t >= 0) and t.sum() == pytest.approx(n)
        np.testing.assert_allclose(t.sum(axis=1), info["marginal"][p], atol=1e-9 * n)
        np.testing.assert_allclose(t.sum(axis=0), info["marginal"][c], atol=1e-9 * n)
    for cond in conds:
        assert np.all(cond >= 0)
        np.testing.assert_allclose(cond.sum(axis=1), 1.0)


def test_consistent_tree_weights_estimates_by_inverse_variance():
    """A 1-way measured with far less noise than the 2-way margins dominates the average."""
    noisy_1 = [np.array([80, 20]), np.array([50, 50])]
    noisy_2 = {(0, 1): np.array([[10, 10], [40, 40]])}          # margin of 0: [20, 80]
    _, _, precise_1way = consistent_tree(noisy_1, noisy_2, (2, 2), 100.0, 1e-6, 1.0)
    np.testing.assert_allclose(precise_1way["oneway"][0], [80, 20], atol=1e-3)
    _, _, precise_2way = consistent_tree(noisy_1, noisy_2, (2, 2), 100.0, 1.0, 1e-6)
    np.testing.assert_allclose(precise_2way["oneway"][0], [20, 80], atol=1e-3)
    _, _, equal = consistent_tree(noisy_1, noisy_2, (2, 2), 100.0, 2.0, 1.0)  # margin var 2 x 1
    np.testing.assert_allclose(equal["oneway"][0], [50, 50], atol=1e-9)


def test_consistent_tree_rejects_a_non_tree():
    noisy_1 = [np.array([1, 1])] * 4
    t = np.ones((2, 2))
    with pytest.raises(ValueError, match="do not connect"):   # a cycle 0-1-2, 3 left out
        consistent_tree(noisy_1, {(0, 1): t, (1, 2): t, (0, 2): t}, (2, 2, 2, 2), 4.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="spanning tree"):
        consistent_tree(noisy_1, {(0, 1): t}, (2, 2, 2, 2), 4.0, 1.0, 1.0)


# ----------------------------------------------------------------------------- accuracy

def test_large_epsilon_reproduces_every_two_way_marginal():
    """eps = 100 on a strongly dependent chain: the tree is the chain and every 2-way marginal
    of the sample (tree edges and the others) is within TVD 0.02 of the data. A wrong sampler
    (e.g. a transposed conditional or a child drawn from its 1-way) fails this."""
    codes, domain = _chain(40_000)
    rand = Randomness()
    model = PureMST(100.0).fit(codes, domain, rand)
    assert set(model.edges) == {(0, 1), (1, 2), (2, 3)}
    synth = model.sample(200_000, rand.rng("sample"))
    worst = 0.0
    for i in range(len(domain)):
        for j in range(i + 1, len(domain)):
            tvd = 0.5 * np.abs(_freq2(codes, domain, i, j) - _freq2(synth, domain, i, j)).sum()
            worst = max(worst, tvd)
    assert worst < 0.02, worst
    # control: independent columns with the right 1-ways are far off, so the bound has teeth
    shuffled = synth.copy()
    for j in range(1, len(domain)):
        shuffled[:, j] = np.random.default_rng(j).permutation(shuffled[:, j])
    tvd = 0.5 * np.abs(_freq2(codes, domain, 1, 2) - _freq2(shuffled, domain, 1, 2)).sum()
    assert tvd > 0.2


def test_small_epsilon_is_noisy_but_valid():
    codes, domain = _chain(300)
    rand = Randomness()
    model = PureMST(0.05).fit(codes, domain, rand)
    synth = model.sample(20_000, rand.rng("sample"))
    tvds = [0.5 * np.abs(_freq2(codes, domain, i, i + 1) - _freq2(synth, domain, i, i + 1)).sum()
            for i in range(3)]
    assert max(tvds) > 0.02


# ----------------------------------------------------------------------------- replay

def test_replay_reproduces_model_and_sample_bit_for_bit():
    codes, domain = _chain(5000, seed=11)
    g = PureMST(1.5, split_1way=0.25, split_select=0.25)
    rec = Randomness()
    model = g.fit(codes, domain, rec)
    synth = model.sample(4000, rec.rng("sample"))
    records = list(rec.transcript.records)

    rep = Randomness.replay(records)
    again_model = make_generator("mst_pure", 1.5, **g.hyperparameters()).fit(codes, domain, rep)
    again = again_model.sample(4000, rep.rng("sample"))
    rep.check_finished()
    assert again_model.edges == model.edges
    for a, b in zip(model.conditionals, again_model.conditionals):
        assert np.array_equal(a, b)
    assert np.array_equal(synth, again)
    assert rep.transcript.to_jsonl() == rec.transcript.to_jsonl()

    other = codes.copy()
    other[0] = [(v + 1) % k for v, k in zip(other[0], domain)]
    with pytest.raises(ReplayMismatch):
        g.fit(other, domain, Randomness.replay(records))


# ----------------------------------------------------------------------------- protocol

def test_registered_and_protocol():
    info = generator_types()["mst_pure"]
    assert info == {"available": True, "reason": "",
                    "hyperparameters": ["split_1way", "split_select"]}
    g = make_generator("mst_pure", 2.0, split_1way=0.5)
    assert isinstance(g, PureMST) and g.type == "mst_pure" and g.epsilon == 2.0
    assert g.hyperparameters() == {"split_1way": 0.5, "split_select": 1 / 3}
    assert PureMST(2.0, **g.hyperparameters()).hyperparameters() == g.hyperparameters()
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        make_generator("mst_pure", 1.0, theta=3)


@pytest.mark.parametrize("kw,msg", [
    ({"split_1way": 0.0}, "split_1way"), ({"split_1way": 1.0}, "split_1way"),
    ({"split_select": -0.1}, "split_select"), ({"split_select": "0.3"}, "split_select"),
    ({"split_1way": True}, "split_1way"), ({"split_1way": math.nan}, "split_1way"),
    ({"split_1way": 0.6, "split_select": 0.4}, "must be < 1"),
])
def test_bad_hyperparameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        PureMST(1.0, **kw)


@pytest.mark.parametrize("eps", [0, -1.0, math.inf, True])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        PureMST(eps)


def test_bad_codes():
    with pytest.raises(ValueError, match="domain"):
        PureMST(1.0).fit(np.array([[0, 3]]), (2, 3), Randomness())
    with pytest.raises(ValueError, match="at least one row"):
        PureMST(1.0).fit(np.zeros((0, 2), dtype=np.int64), (2, 3), Randomness())


def test_spec_validation_of_the_grid(births_doc):
    from dpbundle.release.spec.load import SpecError, validate_spec

    births_doc["generators"] = [{"type": "mst_pure", "grid": {"split_1way": [0.2, 0.4],
                                                               "split_select": [0.2]}}]
    validate_spec(births_doc)
    births_doc["generators"] = [{"type": "mst_pure"}]
    validate_spec(births_doc)
    births_doc["generators"] = [{"type": "mst_pure", "grid": {"split_1way": [0.5, 1.5, "x"],
                                                               "split_select": [0.5]}}]
    with pytest.raises(SpecError) as info:
        validate_spec(births_doc)
    text = "\n".join(info.value.problems)
    assert "generators[0].grid.split_1way[1]: must be a number > 0 and < 1" in text
    assert "generators[0].grid.split_1way[2]" in text
    assert "generators[0].grid: split_1way + split_select must be < 1" in text


# ----------------------------------------------------------------------------- end to end

sys.path.insert(0, str(Path(__file__).resolve().parent))

E2E_ROWS = 6000
LOOSE = {"kway_marginals": 0.8, "smoothed_ratio": 50, "conditional_means": 1e6,
         "regression_coefficients": 1e12, "regression_mae_difference": 1e9, "faithfulness": 10,
         "classification": 1e9, "quantile": 1e9}


@pytest.mark.slow
def test_release_with_mst_pure_passes_the_enclave_audit(tmp_path):
    """`dpbundle release` with an mst_pure spec on the built-in example registry, then
    `dpbundle audit --transcript --data`: every check passes, the replay included."""
    import json

    from typer.testing import CliRunner

    import audit_fixtures as fx
    from dpbundle.audit.cli import cli_audit
    from dpbundle.audit.report import PASS
    from dpbundle.release.cli.main import app
    from dpbundle.release.data.example import example_csv
    import typer

    spec = fx.load_spec()
    for col in spec["columns"]:
        col["alternatives"] = col["alternatives"][:1]
    spec["generators"] = [{"type": "mst_pure", "grid": {"split_1way": [0.3], "split_select": [0.2]}}]
    spec["projection"] = {"min_count": [2]}
    for e in spec["acceptance"]:
        e["threshold"] = LOOSE[e["type"]]
    spec["privacy"]["records"] = {"policy": "dp_count"}
    spec["privacy"]["epsilon_cap"] = 20.0
    spec_path = tmp_path / "mst.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    data = tmp_path / "registry.csv"
    data.write_bytes(example_csv("births", E2E_ROWS, 11))
    transcript = tmp_path / "private" / "run.transcript.jsonl"
    transcript.parent.mkdir(mode=0o700)

    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec_path), str(data), "--out", str(tmp_path / "B"),
                              "--key", str(tmp_path / "k.key"), "--ledger", str(tmp_path / "l.jsonl"),
                              "--transcript", str(transcript)])
    assert res.exit_code == 0, res.output
    budget = json.loads((tmp_path / "B" / "budget.json").read_text())
    assert budget["generation"]["type"] == "mst_pure"
    assert [p["purpose"] for p in budget["generation"]["parts"]] == [
        "1-way marginals", "tree selection", "2-way marginals of the tree"]
    purposes = [json.loads(line).get("purpose", "") for line in transcript.read_text().splitlines()[1:]]
    assert any(p.startswith("mst_pure: tree edge") for p in purposes)

    audit = typer.Typer()
    audit.command("audit")(cli_audit)
    public = runner.invoke(audit, [str(tmp_path / "B"), "--pubkey", str(tmp_path / "k.pub")])
    assert public.exit_code == 0, public.output
    report = tmp_path / "r.json"
    res = runner.invoke(audit, [str(tmp_path / "B"), "--pubkey", str(tmp_path / "k.pub"),
                                "--transcript", str(transcript), "--data", str(data),
                                "--json", str(report)])
    assert res.exit_code == 0, res.output
    doc = json.loads(report.read_text())
    assert doc["passed"] is True
    replay = [c for c in doc["checks"] if c["check"] == "replay"]
    assert len(replay) == 1 and replay[0]["result"] == PASS, replay
