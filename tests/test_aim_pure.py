"""Tests of mechanisms/aim.py ("aim_pure"): the score's sensitivity on neighbouring datasets
(worst cases included), every true value of a fit against its declared sensitivity, the exact
budget schedule (and its public check), post-processing that reads only DP outputs, accuracy,
transcript replay, and the workload built from a spec's criteria."""
from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from generator_util import FixedNoise, code_neighbours, planted  # noqa: E402
from dpbundle.mechanisms import aim as A
from dpbundle.mechanisms import exact
from dpbundle.mechanisms.generators import generator_types, make_generator
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _table(codes: np.ndarray, domain, r) -> np.ndarray:
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j in r:
        key = key * domain[j] + codes[:, j]
    return np.bincount(key, minlength=int(np.prod([domain[j] for j in r]))).astype(np.int64)


# ----------------------------------------------------------------------------- the score

@SETTINGS
@given(code_neighbours(min_d=2, max_d=4, max_k=4, max_n=30), st.data())
def test_score_vector_moves_within_the_declared_sensitivity(case, data):
    """Any public estimate, weight and penalty: the float scores of neighbours differ by at most
    score_sensitivity in every coordinate."""
    codes, other, domain = case
    d = len(domain)
    cands = [r for k in (2, 3) for r in itertools.combinations(range(d), k)]
    n = codes.shape[0]
    ests, weights, pens = [], [], []
    for r in cands:
        c = int(np.prod([domain[j] for j in r]))
        ests.append(np.array(data.draw(st.lists(st.floats(0, 2.0 * n, allow_nan=False), min_size=c, max_size=c))))
        weights.append(Fraction(data.draw(st.integers(1, 40)), data.draw(st.integers(1, 7))))
        pens.append(data.draw(st.floats(0, 1e6, allow_nan=False)))
    sens = A.score_sensitivity(n, ests, weights, pens)
    for r, e, w, p in zip(cands, ests, weights, pens):
        q = A.score(_table(codes, domain, r), e, w, p)
        q2 = A.score(_table(other, domain, r), e, w, p)
        assert abs(q - q2) <= sens


def test_score_sensitivity_is_attained():
    """A record leaving a cell below its estimate for a cell at or above it moves the score by
    2 w exactly (the bound is tight up to its rounding term)."""
    t = np.array([5, 5, 0, 0], dtype=np.int64)
    est = np.array([6.0, 5.0, 0.0, 0.0])
    w = Fraction(3)
    moved = t.copy()
    moved[0] -= 1
    moved[1] += 1
    gap = A.score(moved, est, w, 1.5) - A.score(t, est, w, 1.5)
    assert gap == pytest.approx(2 * 3)
    sens = A.score_sensitivity(10, [est], [w], [1.5])
    assert 6 <= sens < 6 + 1e-9


def test_score_is_weight_times_distance_minus_penalty():
    t = np.array([3, 1, 0], dtype=np.int64)
    est = np.array([1.0, 1.0, 2.0])
    assert A.score(t, est, Fraction(1, 2), 1.0) == pytest.approx(0.5 * (2 + 0 + 2 - 1.0))


@SETTINGS
@given(code_neighbours(min_d=2, max_d=4, max_k=4, max_n=12))
def test_every_true_value_of_fit_moves_within_its_declared_sensitivity(case):
    """Both fits see the same DP outputs (FixedNoise), so they ask for the same measurements in
    the same order; the true values of each request differ by at most its sensitivity (L1 for
    Laplace, linf for the noisy max)."""
    codes, other, domain = case
    ra, rb = FixedNoise(), FixedNoise()
    g = A.AdaptiveMarginals(1.0, rounds_per_column=2, estimate_rows=100)
    g.fit(codes, domain, ra)
    g.fit(other, domain, rb)
    assert [c["purpose"] for c in ra.calls] == [c["purpose"] for c in rb.calls]
    for x, y in zip(ra.calls, rb.calls):
        assert x["sensitivity"] == y["sensitivity"] and x["epsilon"] == y["epsilon"]
        if x["kind"] == "laplace":
            assert np.abs(np.asarray(x["true"]) - np.asarray(y["true"])).sum() <= x["sensitivity"]
        else:
            assert np.abs(np.asarray(x["true"]) - np.asarray(y["true"])).max() <= x["sensitivity"]
    assert ra.calls[0]["sensitivity"] == 2 * len(domain)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(2, 4), min_size=2, max_size=4), st.integers(5, 60),
       st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
def test_post_processing_reads_only_dp_outputs(domain, n, seed_a, seed_b):
    """Two different datasets, the same DP outputs: the same model."""
    ga, gb = np.random.default_rng(seed_a), np.random.default_rng(seed_b)
    a = np.stack([ga.integers(0, k, n) for k in domain], axis=1)
    b = np.stack([gb.integers(0, k, n) for k in domain], axis=1)
    g = A.AdaptiveMarginals(2.0, rounds_per_column=2, estimate_rows=100)
    ma, mb = g.fit(a, domain, FixedNoise()), g.fit(b, domain, FixedNoise())
    assert ma.rounds == mb.rounds
    assert all(np.array_equal(x, y) for x, y in zip(ma.oneways, mb.oneways))
    assert [c for c, _ in ma.marginals] == [c for c, _ in mb.marginals]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(ma.marginals, mb.marginals))


# ----------------------------------------------------------------------------- budget

def _spent(records) -> Fraction:
    return sum((Fraction(r["epsilon"]) for r in records if r["kind"] in ("laplace", "exponential")),
               Fraction(0))


@pytest.mark.parametrize("eps,split,measure,rpc", [(0.8, 0.2, 0.9, 16), (0.3, 0.1, 0.5, 2),
                                                   (4.0, 0.5, 0.95, 4)])
def test_transcript_spends_at_most_the_declared_epsilon_exactly(eps, split, measure, rpc):
    codes, domain = planted(4000)
    g = A.AdaptiveMarginals(eps, split_1way=split, measure_split=measure, rounds_per_column=rpc)
    rand = Randomness()
    model = g.fit(codes, domain, rand)
    recs = list(rand.transcript.records)
    assert _spent(recs) <= exact.dec(eps)
    # the last round takes what remains: nothing of the rounds' budget is left unspent
    assert float(exact.dec(eps) - _spent(recs)) < 1e-12 * eps
    assert recs[0]["purpose"] == "aim_pure: 1-way marginals" and recs[0]["epsilon"] == g.epsilon_1
    rounds = [r.to_public() for r in model.rounds]
    assert A.schedule_problems(rounds, eps, split, measure, rpc, len(domain)) == []
    sels = [r for r in recs if r["kind"] == "exponential"]
    assert [r["epsilon"] for r in sels] == [x["epsilon_select"] for x in rounds]


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-3, 50), st.floats(0.01, 0.99), st.integers(1, 20), st.integers(2, 12),
       st.lists(st.booleans(), max_size=60))
def test_schedule_never_overspends_and_ends_on_the_remainder(eps, ms, rpc, d, doublings):
    """Any sequence of doubling decisions: budgets sum to the rest exactly, the split of every
    round spends at most its budget, and the rule's public check accepts the rounds."""
    rest = exact.dec(eps) - exact.binary(exact.float_down(Fraction(1, 5) * exact.dec(eps)))
    plan = A.schedule(rest, rpc * d)
    step = next(plan)
    budgets, rounds, i = [], [], 0
    while True:
        b, last = step
        budgets.append(b)
        sel, meas = A.round_split(b, ms)
        assert Fraction(sel) + Fraction(meas) <= b
        rounds.append({"columns": [0, 1], "epsilon_select": sel, "epsilon_measure": meas})
        if last:
            break
        step = plan.send(doublings[i] if i < len(doublings) else True)
        i += 1
    assert sum(budgets) == rest
    assert A.schedule_problems(rounds, eps, 0.2, ms, rpc, d) == []


def test_schedule_check_rejects_inflated_and_unfinished_rounds():
    codes, domain = planted(3000)
    g = A.AdaptiveMarginals(1.0)
    rounds = [r.to_public() for r in g.fit(codes, domain, Randomness()).rounds]
    args = (1.0, g.split_1way, g.measure_split, g.rounds_per_column, len(domain))
    assert A.schedule_problems(rounds, *args) == []
    bad = [dict(r) for r in rounds]
    bad[0]["epsilon_measure"] *= 2
    assert "not what the budget rule allows" in A.schedule_problems(bad, *args)[0]
    assert len(rounds) > 1
    assert "remaining budget" in A.schedule_problems(rounds[:-1], *args)[0]
    assert A.schedule_problems(rounds, 0.5, *args[1:]) != []


def test_budget_doubles_when_the_update_is_not_significant():
    """At a tiny epsilon every measurement drowns in noise: the budget doubles after every
    round, so there are about log2(T) rounds, not T, and the measuring epsilons grow."""
    codes, domain = planted(3000)
    g = A.AdaptiveMarginals(0.05, rounds_per_column=16)
    model = g.fit(codes, domain, Randomness())
    T = 16 * len(domain)
    assert len(model.rounds) <= int(np.log2(T)) + 2
    meas = [r.epsilon_measure for r in model.rounds[:-1]]
    assert len(meas) >= 2 and meas[-1] >= 2 * meas[0] * (1 - 1e-12)


def test_without_doubling_the_rounds_take_equal_shares():
    """At a generous epsilon the measurements move the model: no doubling, so T equal rounds
    (the last takes the exact remainder)."""
    codes, domain = planted(20000)
    g = A.AdaptiveMarginals(50.0, rounds_per_column=1)
    model = g.fit(codes, domain, Randomness())
    meas = [r.epsilon_measure for r in model.rounds]
    assert len(meas) == len(domain)
    assert max(meas[:-1]) == pytest.approx(min(meas[:-1]))


def test_one_column_or_no_candidate_runs_no_round():
    codes = np.random.default_rng(1).integers(0, 3, (500, 1))
    rand = Randomness()
    model = A.AdaptiveMarginals(1.0).fit(codes, (3,), rand)
    draws = [r["kind"] for r in rand.transcript.records if r["kind"] in ("laplace", "exponential")]
    assert model.rounds == [] and draws == ["laplace"]
    codes = np.random.default_rng(1).integers(0, 3, (500, 2))
    rand = Randomness()
    model = A.AdaptiveMarginals(1.0, max_cells=4).fit(codes, (3, 3), rand)   # a 9-cell pair is too big
    assert model.rounds == [] and _spent(rand.transcript.records) <= Fraction(1, 10)
    assert A.schedule_problems([], 1.0, 0.1, 0.9, 2, 2, has_candidates=False) == []


def test_schedule_check_rejects_what_the_rule_never_produces():
    codes, domain = planted(3000)
    g = A.AdaptiveMarginals(0.3, rounds_per_column=4)
    rounds = [r.to_public() for r in g.fit(codes, domain, Randomness()).rounds]
    args = (0.3, g.split_1way, g.measure_split, g.rounds_per_column, len(domain))
    assert len(rounds) >= 2 and A.schedule_problems(rounds, *args) == []
    rest = exact.dec(0.3) - exact.binary(g.epsilon_1)
    e = rest / (g.rounds_per_column * len(domain))
    sel2, meas2 = A.round_split(2 * e, g.measure_split)
    first_doubled = [{**rounds[0], "epsilon_select": sel2, "epsilon_measure": meas2}] + rounds[1:]
    assert "rounds[0]" in A.schedule_problems(first_doubled, *args)[0]      # no doubling before round 1
    sel, meas = A.round_split(rest, g.measure_split)
    early_end = [{**rounds[0], "epsilon_select": sel, "epsilon_measure": meas}] + rounds[1:]
    assert A.schedule_problems(early_end, *args) != []                        # the remainder, not last
    assert "no rounds" in A.schedule_problems([], *args)[0]
    assert "no candidate" in A.schedule_problems(rounds, *args, has_candidates=False)[0]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2**40 - 1), st.lists(st.integers(0, 2**30), min_size=4, max_size=4),
       st.integers(0, 3), st.integers(0, 3), st.integers(1, 10**6), st.integers(1, 10**6),
       st.floats(0, 1e13, allow_nan=False), st.lists(st.floats(0, 2.0**41, allow_nan=False), min_size=4, max_size=4))
def test_score_sensitivity_holds_for_huge_counts(n, parts, x, y, p, q, pen, est):
    """Large n, large counts, awkward weights and penalties: the float scores of a table and of
    its neighbour (one record moved from cell x to cell y) differ by at most the sensitivity."""
    t = np.array(parts, dtype=np.int64)
    t[0] += max(0, n - int(t.sum()))
    if t[x] == 0:
        t[x] = 1
    moved = t.copy()
    moved[x] -= 1
    moved[y] += 1
    e, w = np.array(est), Fraction(p, q)
    sens = A.score_sensitivity(int(t.sum()), [e], [w], [pen])
    assert abs(A.score(t, e, w, pen) - A.score(moved, e, w, pen)) <= sens


# ----------------------------------------------------------------------------- behaviour

def test_large_epsilon_reproduces_the_workload_marginals():
    codes, domain = planted(20000, seed=3)
    g = A.AdaptiveMarginals(200.0, rounds_per_column=4)
    model = g.fit(codes, domain, Randomness())
    synth = model.sample(20000, np.random.default_rng(1))
    for r in itertools.combinations(range(len(domain)), 2):
        p = _table(codes, domain, r) / 20000
        q = _table(synth, domain, r) / 20000
        assert 0.5 * np.abs(p - q).sum() < 0.03, r


def test_the_selection_prefers_the_badly_explained_marginal():
    """With (a, b) strongly dependent and everything else independent, the first round picks a
    marginal containing both at a generous epsilon, in almost every run."""
    g = np.random.default_rng(5)
    n = 20000
    a = g.integers(0, 4, n)
    b = np.where(g.random(n) < 0.9, a, g.integers(0, 4, n))
    codes = np.stack([a, b, g.integers(0, 4, n), g.integers(0, 4, n)], axis=1)
    hits = 0
    for _ in range(20):
        m = A.AdaptiveMarginals(5.0, rounds_per_column=1, max_size=2).fit(codes, (4,) * 4, Randomness())
        hits += set(m.rounds[0].columns) == {0, 1}
    assert hits >= 18


def test_replay_reproduces_model_and_sample_bit_for_bit():
    codes, domain = planted(5000, seed=11)
    g = A.AdaptiveMarginals(1.5)
    rec = Randomness()
    model = g.fit(codes, domain, rec)
    synth = model.sample(3000, rec.rng("sample"))
    records = list(rec.transcript.records)
    rep = Randomness.replay(records)
    again = make_generator("aim_pure", 1.5, **g.hyperparameters()).fit(codes, domain, rep)
    assert np.array_equal(again.sample(3000, rep.rng("sample")), synth)
    rep.check_finished()
    assert again.rounds == model.rounds
    other = codes.copy()
    other[0] = [(v + 1) % k for v, k in zip(other[0], domain)]
    with pytest.raises(ReplayMismatch):
        g.fit(other, domain, Randomness.replay(records))


# ----------------------------------------------------------------------------- workload

def test_criteria_workload_from_a_spec_document():
    names = ["month", "age", "parity", "weight"]
    spec = {"acceptance": [
        {"type": "smoothed_ratio"},
        {"type": "conditional_means", "target": "weight", "by": ["age", None, ["age", "parity"]]},
        {"type": "regression_coefficients", "target": "weight", "features": ["age", "month"]},
        {"type": "kway_marginals", "max_k": 2, "columns": ["age", "parity"]},
        {"type": "unknown_type", "target": "weight"}],
        "faithfulness": {"exact": ["month"], "adjacent": ["weight"]}}
    assert A.criteria_workload(spec, names) == [
        [[0], [1], [2], [3]],
        [[1, 3], [3], [1, 2, 3]],
        [[1, 3], [0, 3]],
        [[1], [2], [1, 2]],
        [[0, 3]]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=4), min_size=1, max_size=5),
                min_size=1, max_size=4))
def test_weights_are_the_definition(workload):
    """w_r = sum over groups c of (1/|W_c|) sum_{s in W_c} |r ∩ s|, computed the slow way."""
    cands, weights = A.candidates(workload, (2, 3, 2, 4, 2, 3), max_size=3, max_cells=1000)
    for r, w in zip(cands, weights):
        slow = sum((Fraction(sum(len(set(r) & set(s)) for s in g), len(g)) for g in workload if g),
                   Fraction(0))
        assert w == slow


def test_candidates_and_weights():
    workload = [[[0, 1, 2]], [[0, 1], [2]]]
    cands, weights = A.candidates(workload, (2, 3, 4), max_size=3, max_cells=1000)
    assert cands == [(0, 1), (0, 2), (1, 2), (0, 1, 2)]
    # w_r = sum over groups of (1/|group|) sum_s |r ∩ s|
    assert weights == [Fraction(2) + Fraction(2, 2), Fraction(2) + Fraction(2, 2),
                       Fraction(2) + Fraction(2, 2), Fraction(3) + Fraction(3, 2)]
    cands, _ = A.candidates(workload, (2, 3, 4), max_size=2, max_cells=7)
    assert cands == [(0, 1)]
    assert A.candidates(workload, (1, 3, 4), 3, 1000)[0] == [(1, 2)]   # a 1-value column is no candidate


def test_release_injects_the_spec_workload(births_doc):
    from dpbundle.release.scheme.iteration import make_config_generator
    from dpbundle.release.spec.load import spec_of

    births_doc["generators"] = [{"type": "aim_pure"}]
    spec = spec_of(births_doc)
    gen = make_config_generator(spec, {"generator": {"type": "aim_pure"}})
    assert gen.workload == A.criteria_workload(spec.public_dict(), spec.column_names)
    assert any(len(s) >= 2 for group in gen.workload for s in group)


# ----------------------------------------------------------------------------- protocol

def test_registered_and_protocol():
    info = generator_types()["aim_pure"]
    assert info["available"] and info["hyperparameters"] == list(A.DEFAULTS)
    g = make_generator("aim_pure", 2.0, split_1way=0.25)
    assert g.privacy_map(1) == 2.0 and g.privacy_map(3) == 6.0
    parts = g.budget_parts()
    assert sum(Fraction(p["epsilon"]) for p in parts) <= 2
    assert parts[0]["epsilon"] == 0.5


@pytest.mark.parametrize("kw,msg", [({"split_1way": 1.0}, "split_1way"), ({"measure_split": 0}, "measure_split"),
                                    ({"max_size": 1}, "max_size"), ({"rounds_per_column": 0}, "rounds_per_column"),
                                    ({"gum_alpha": 2}, "gum_alpha"), ({"workload": [[[-1]]]}, "workload"),
                                    ({"workload": "all"}, "workload")])
def test_bad_hyperparameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        A.AdaptiveMarginals(1.0, **kw)
    assert A.grid_problems({k: [v] for k, v in kw.items()})


def test_the_audit_bounds_the_candidate_work_before_doing_it():
    """A spec whose criteria would give aim_pure millions of column sets is refused by the audit
    from counts alone (audit/bounds.py), and a small one is not."""
    from dpbundle.audit.bounds import aim_candidate_problems

    names = [f"c{j}" for j in range(200)]
    wide = {"acceptance": [{"type": "kway_marginals", "max_k": 3}]}
    problems = aim_candidate_problems(wide, names, [2] * 200, 3)
    assert problems and "aim_pure" in problems[0]
    small = {"acceptance": [{"type": "kway_marginals", "max_k": 3},
                            {"type": "regression_coefficients", "target": "c0"}]}
    assert aim_candidate_problems(small, names[:8], [2] * 8, 3) == []


def test_the_enclave_replay_bounds_the_candidate_work_before_doing_it(monkeypatch):
    """The enclave replay of an aim_pure iteration re-derives the candidates from spec.json too:
    a spec whose criteria would give millions of column sets is refused before the generator is
    built (it would otherwise enumerate them), whatever the transcript holds."""
    from types import SimpleNamespace

    from dpbundle.audit import model_check
    from dpbundle.audit.replay import TranscriptError, replay_iteration

    names = [f"c{j}" for j in range(200)]
    view = SimpleNamespace(spec={"acceptance": [{"type": "kway_marginals", "max_k": 3}],
                                 "privacy": {"epsilon_generation": 1.0}},
                           names=names, columns=[SimpleNamespace(labels=("a", "b"))] * 200)
    mark = {"config": {"generator": {"type": "aim_pure"}, "columns": {}, "projection": {"min_count": 2}}}
    def never(*a, **k):
        raise AssertionError("the generator (and its workload) was built before the bound")
    monkeypatch.setattr(model_check, "config_generator", never)
    with pytest.raises(TranscriptError, match="aim_pure"):
        replay_iteration([], 0, mark, view, np.zeros((1, 200), dtype=np.int64), None)
    mark["config"]["generator"]["max_size"] = 7
    with pytest.raises(TranscriptError, match="max_size"):
        replay_iteration([], 0, mark, view, np.zeros((1, 200), dtype=np.int64), None)


_CRITERIA = st.lists(st.one_of(
    st.builds(lambda cols, k: {"type": "kway_marginals", "columns": cols, "max_k": k},
              st.lists(st.sampled_from([f"c{j}" for j in range(9)]), min_size=1, max_size=9, unique=True),
              st.integers(1, 4)),
    st.builds(lambda t, by: {"type": "conditional_means", "target": t, "by": by},
              st.sampled_from([f"c{j}" for j in range(9)]),
              st.lists(st.one_of(st.none(), st.sampled_from([f"c{j}" for j in range(9)]),
                                 st.lists(st.sampled_from([f"c{j}" for j in range(9)]), min_size=1, max_size=3)),
                       min_size=1, max_size=3)),
    st.builds(lambda t, f: {"type": "classification", "target": t, "features": f},
              st.sampled_from([f"c{j}" for j in range(9)]),
              st.lists(st.sampled_from([f"c{j}" for j in range(9)]), min_size=1, max_size=4, unique=True)),
    st.builds(lambda cols: {"type": "smoothed_ratio", "columns": cols},
              st.lists(st.sampled_from([f"c{j}" for j in range(9)]), min_size=1, max_size=3, unique=True))),
    min_size=0, max_size=4)


@settings(max_examples=150, deadline=None)
@given(_CRITERIA, st.lists(st.integers(1, 4), min_size=9, max_size=9), st.integers(2, 4))
@example([{"type": "kway_marginals", "max_k": 3}], [2] * 9, 3)        # every 2- and 3-set of 9
@example([{"type": "kway_marginals", "max_k": 4}], [3] * 9, 4)
def test_the_audits_count_of_candidates_is_never_below_the_real_one(criteria, domain, max_size):
    """audit/bounds.py counts aim_pure's candidate marginals from the spec without making them;
    the bound it checks must hold the candidates the release really makes (criteria_workload +
    candidates): with the limit one below the real count, the audit must refuse."""
    import dpbundle.audit.bounds as B

    names = [f"c{j}" for j in range(9)]
    spec = {"acceptance": criteria}
    real = len(A.candidates(A.criteria_workload(spec, names), domain, max_size, 1 << 40)[0])
    if real == 0:
        return
    saved = B.MAX_AIM_CANDIDATES
    try:
        B.MAX_AIM_CANDIDATES = real - 1
        assert B.aim_candidate_problems(spec, names, domain, max_size), (real, spec)
        B.MAX_AIM_CANDIDATES = real
        problems = B.aim_candidate_problems(spec, names, domain, max_size)
    finally:
        B.MAX_AIM_CANDIDATES = saved
    assert all("aim_pure" in p for p in problems)


def test_spec_validation_refuses_an_aim_pure_spec_the_audit_could_not_re_derive(monkeypatch):
    """What the audit's bound refuses, the release refuses before any budget is spent (exit 2 at
    spec validation), counted with every column's largest alternative and the grid's largest
    max_size; the shipped aim_pure spec is within it."""
    from pathlib import Path

    import dpbundle.audit.bounds as B
    from dpbundle.release.spec.load import SpecError, read_spec_document, validate_spec

    doc = read_spec_document(Path(__file__).resolve().parents[1] / "examples" / "births-eps3.yaml")
    validate_spec(doc)
    monkeypatch.setattr(B, "MAX_AIM_CANDIDATES", 5)
    with pytest.raises(SpecError) as info:
        validate_spec(doc)
    hit = [p for p in info.value.problems if "(aim_pure)" in p]
    assert hit and "candidate marginals" in hit[0] and "would refuse the bundle" in hit[0]


def test_the_replay_refuses_a_transcript_that_sets_the_workload():
    """The release sets aim_pure's workload from the spec's criteria; a transcript whose
    configuration sets one (and would so escape the bound) is refused."""
    from types import SimpleNamespace

    from dpbundle.audit.replay import TranscriptError, replay_iteration

    view = SimpleNamespace(spec={"acceptance": [], "privacy": {"epsilon_generation": 1.0}},
                           names=["a", "b"], columns=[SimpleNamespace(labels=("x", "y"))] * 2)
    mark = {"config": {"generator": {"type": "aim_pure", "workload": [[[0, 1]]]}, "columns": {},
                       "projection": {"min_count": 2}}}
    with pytest.raises(TranscriptError, match="workload"):
        replay_iteration([], 0, mark, view, np.zeros((1, 2), dtype=np.int64), None)
