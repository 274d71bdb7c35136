"""The count sampler (sampler version 2, issue 24): n records of a model under the synthetic
constraints drawn as counts of record types, with the distribution of the row sampler
(version 1), recorded, and replayed.

* distribution: on a small Bayesian network (generalised parents, zero-probability cells) and on a
  cell-distribution model, the count sampler and the row sampler are compared over many draws:
  pooled per-cell frequencies agree (two-sample chi-square) and agree with the exact law
  multinomial(n, q) (q = p on the plausible cells, renormalised); the dispersion of each draw
  (its Pearson statistic against q) is that of a multinomial. With constraints that rule out
  about half the mass the rounds and the final thinning are exercised.
* the same sample from the same seeds as version 1 for a model without ``sample_counts``;
* the cost follows the record types, not n;
* recorded and replayed: the "sampler" mark, model.json's "sampler", the audit's replay of a
  real release (tests/test_enclave_private.py and test_preregistration.py do more of these).
"""
from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpbundle.mechanisms import arithmetic
import yaml
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.mechanisms import sampling  # noqa: E402
from dpbundle.mechanisms.coding import mixed_radix_decode, mixed_radix_index  # noqa: E402
from dpbundle.mechanisms.marginals import CrossTabModel  # noqa: E402
from dpbundle.mechanisms.noise import Randomness, ReplayMismatch, Transcript  # noqa: E402
from dpbundle.mechanisms.privbayes import NetworkNode, PrivBayesModel  # noqa: E402
from dpbundle.mechanisms.projection import project, project_counts  # noqa: E402
from dpbundle.mechanisms.sampling import (ConstraintShortfall, DrawBoundExceeded,  # noqa: E402
                                          sample_types)

P_FLOOR = 1e-6     # a correct sampler fails a test below with probability about 1e-6 (fixed seeds)


class Seeds:
    """``rng(purpose)``: a fresh seeded generator per request (a stand-in for Randomness.rng)."""

    def __init__(self, seed: int) -> None:
        self._seq = np.random.SeedSequence(seed)

    def rng(self, purpose: str) -> np.random.Generator:
        return np.random.Generator(np.random.PCG64(self._seq.spawn(1)[0]))


def small_network(seed: int = 3) -> PrivBayesModel:
    """4 columns (3, 4, 5, 2); column 2 has a generalised parent (1 >> 1); some zero cells."""
    rng = np.random.default_rng(seed)
    domain = (3, 4, 5, 2)
    network = [NetworkNode(1, ()), NetworkNode(0, ((1, 0),)), NetworkNode(2, ((1, 1), (0, 0))),
               NetworkNode(3, ((2, 0),))]
    shapes = [(1, 4), (4, 3), (2 * 3, 5), (5, 2)]
    tables = []
    for shape in shapes:
        t = rng.dirichlet(np.full(shape[1], 0.8), size=shape[0])
        t[rng.random(shape) < 0.15] = 0.0       # zero-probability values
        t[:, 0] += 1e-3                          # every row keeps some mass
        tables.append(t * rng.uniform(0.5, 3.0))  # unnormalised rows: the model normalises them
    return PrivBayesModel(domain, network, tables)


def exact_p(model: PrivBayesModel) -> np.ndarray:
    """The network's distribution over the flat cells, by enumeration."""
    cells = np.arange(math.prod(model.domain))
    rows = mixed_radix_decode(cells, model.domain)
    p = np.ones(cells.size)
    for node, cond in zip(model.network, model.conditionals):
        cfg = np.zeros(cells.size, np.int64)
        for j, lv in node.parents:
            cfg = cfg * (((model.domain[j] - 1) >> lv) + 1) + (rows[:, j] >> lv)
        probs = cond / cond.sum(axis=1, keepdims=True)
        p *= probs[cfg, rows[:, node.attribute]]
    return p / p.sum()


def implausible_table(size: int, seed: int, share: float) -> np.ndarray:
    """A made-up constraint table ruling out about ``share`` of the cells."""
    return np.random.default_rng(seed).random(size) < share


def v1_counts(model, n: int, domain, bad: np.ndarray | None, rand) -> np.ndarray:
    """Version 1 (the release's own row sampler): counts per cell of the first n kept rows."""
    from dpbundle.release.scheme import iteration as it

    def keep(rows):
        cells = mixed_radix_index(rows, domain)
        return cells if bad is None else cells[~bad[cells]]

    cells = it._sample_rounds(model, n, rand, keep)
    return np.bincount(cells, minlength=math.prod(domain))


def v2_counts(model, n: int, domain, bad: np.ndarray | None, rand) -> np.ndarray:
    implausible = None if bad is None else (lambda rows, cells: bad[cells])
    rows, counts, cells = sample_types(model, n, domain, implausible, rand.rng)
    assert np.array_equal(cells, mixed_radix_index(rows, domain)) and (np.diff(cells) > 0).all()
    assert (counts > 0).all() and counts.sum() == n
    return np.bincount(cells, weights=counts, minlength=math.prod(domain)).astype(np.int64)


def draws(sampler, model, n: int, domain, bad, repeats: int, seed: int) -> np.ndarray:
    rand = Seeds(seed)
    return np.stack([sampler(model, n, domain, bad, rand) for _ in range(repeats)])


def assert_multinomial(samples: np.ndarray, q: np.ndarray, n: int) -> None:
    """Pooled frequencies against q (chi-square), and each draw's Pearson statistic: its mean
    over the draws against E = K - 1, Var = 2 (K - 1) + (sum 1/q - K^2 - 2K + 2) / n."""
    support = q > 0
    assert (samples[:, ~support] == 0).all(), "a cell of probability 0 was sampled"
    qs, s = q[support], samples[:, support]
    R, K = s.shape
    pooled = s.sum(axis=0)
    expected = R * n * qs
    chi2 = float(((pooled - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.ppf(1 - P_FLOOR, K - 1), (chi2, K)
    pearson = (((s - n * qs) ** 2) / (n * qs)).sum(axis=1)
    var = 2 * (K - 1) + ((1 / qs).sum() - K * K - 2 * K + 2) / n
    z = (pearson.mean() - (K - 1)) / math.sqrt(var / R)
    assert abs(z) < stats.norm.ppf(1 - P_FLOOR / 2), z


def assert_same_law(a: np.ndarray, b: np.ndarray) -> None:
    """Two-sample chi-square on the pooled per-cell counts (equal totals)."""
    A, B = a.sum(axis=0), b.sum(axis=0)
    assert A.sum() == B.sum()
    seen = (A + B) > 0
    chi2 = float(((A[seen] - B[seen]) ** 2 / (A[seen] + B[seen])).sum())
    assert chi2 < stats.chi2.ppf(1 - P_FLOOR, int(seen.sum()) - 1), chi2


@pytest.mark.parametrize("share", [0.0, 0.45])
def test_count_sampler_has_the_law_of_the_row_sampler(share):
    model = small_network()
    domain = model.domain
    size = math.prod(domain)
    bad = implausible_table(size, 8, share) if share else None
    p = exact_p(model)
    q = p if bad is None else np.where(bad, 0.0, p) / p[~bad].sum()
    if bad is not None:
        assert 0.3 < p[bad].sum() < 0.7   # rounds and a final thinning are needed
    n, R = 150, 600
    v2 = draws(v2_counts, model, n, domain, bad, R, 1)
    v1 = draws(v1_counts, model, n, domain, bad, R, 2)
    assert_multinomial(v2, q, n)
    assert_multinomial(v1, q, n)
    assert_same_law(v1, v2)


def test_cell_distribution_model_counts_have_its_law():
    rng = np.random.default_rng(4)
    domain = (4, 3, 5)
    p = rng.dirichlet(np.full(60, 0.5))
    p[rng.random(60) < 0.2] = 0.0
    p /= p.sum()
    model = CrossTabModel(domain, p)
    bad = implausible_table(60, 5, 0.3)
    q = np.where(bad, 0.0, p) / p[~bad].sum()
    v2 = draws(v2_counts, model, 200, domain, bad, 400, 6)
    v1 = draws(v1_counts, model, 200, domain, bad, 400, 7)
    assert_multinomial(v2, q, 200)
    assert_same_law(v1, v2)


def test_sample_counts_of_a_network_is_multinomial_of_m():
    """One round without constraints: counts sum to m, only support cells, law multinomial(m, p)."""
    model = small_network(5)
    p = exact_p(model)
    rng = np.random.default_rng(9)
    out = []
    for _ in range(500):
        rows, counts = model.sample_counts(120, rng)
        cells = mixed_radix_index(rows, model.domain)
        assert np.unique(cells).size == cells.size and counts.sum() == 120 and (counts > 0).all()
        out.append(np.bincount(cells, weights=counts, minlength=p.size))
    assert_multinomial(np.asarray(out, dtype=np.int64), p, 120)
    rows, counts = model.sample_counts(0, rng)
    assert rows.shape == (0, 4) and counts.size == 0


def test_the_cost_follows_the_record_types_not_n():
    model = small_network()
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    rows, counts = model.sample_counts(10**12, rng)   # 10^12 records: no row is drawn
    assert time.perf_counter() - t0 < 2.0
    assert int(counts.sum()) == 10**12 and rows.shape[0] <= math.prod(model.domain)


class RowsOnly:
    """A model without sample_counts (uniform rows)."""

    def __init__(self, domain):
        self.domain = domain

    def sample(self, m, rng):
        return np.stack([rng.integers(0, k, size=m) for k in self.domain], axis=1).astype(np.int64)


@pytest.mark.parametrize("n", [1, 37, 3000])
def test_a_rows_model_gives_the_version_1_sample_from_the_same_seeds(n):
    from dpbundle.release.scheme import iteration as it

    domain = (12, 9, 5, 6, 2, 32)
    model = RowsOnly(domain)
    bad = implausible_table(math.prod(domain), 3, 0.5)
    rec = Randomness(Transcript())
    _, counts, cells = sample_types(model, n, domain, lambda r, c: bad[c], rec.rng)
    rep = Randomness.replay(rec.transcript.records)
    kept = it._sample_rounds(model, n, rep, lambda r: mixed_radix_index(r, domain)[~bad[mixed_radix_index(r, domain)]])
    rep.check_finished()
    uniq, cnt = np.unique(kept, return_counts=True)
    assert np.array_equal(uniq, cells) and np.array_equal(cnt, counts)


def test_a_raked_model_is_not_sampled_by_counts():
    from dpbundle.mechanisms.oneway import RakedModel

    raked = RakedModel(small_network(), [None] * 4)
    assert callable(raked.sample_counts)             # forwarded to the base model ...
    assert not sampling.counts_capable(raked)        # ... but the sampler asks the class
    assert sampling.counts_capable(small_network())


def test_failures_are_attempt_failures_with_the_bound():
    model = small_network()
    everything = np.ones(math.prod(model.domain), dtype=bool)
    with pytest.raises(DrawBoundExceeded) as e:
        sample_types(model, 100, model.domain, lambda r, c: everything[c], Seeds(1).rng)
    assert e.value.limit == sampling.max_drawn(100)
    with pytest.raises(ConstraintShortfall):   # 8 rounds, never enough, within a large bound
        sample_types(model, 100, model.domain, lambda r, c: everything[c], Seeds(1).rng, limit=10**9)


def test_project_counts_is_project_of_the_rows():
    rng = np.random.default_rng(1)
    domain = (3, 4, 5, 2)
    rows = mixed_radix_decode(np.sort(rng.choice(120, size=40, replace=False)), domain)
    counts = rng.integers(1, 6, size=40)
    expanded = np.repeat(rows, counts, axis=0)[rng.permutation(int(counts.sum()))]
    for m in (1, 2, 3, 7):
        a = project_counts(rows, counts, m, np.random.default_rng(m))
        b = project(expanded, m, np.random.default_rng(m))
        assert np.array_equal(a, b)


def test_the_shuffle_in_place_is_the_permutation_gather():
    """The projection's final shuffle (in place) is the gather through rng.permutation(n) it
    replaced: the same rows in the same order, the same draws after it."""
    from dpbundle.mechanisms.projection import _shuffled

    rng = np.random.default_rng(2)
    for k, n in [(1, 1), (1, 9), (5, 17), (300, 20_000)]:
        counts = rng.multinomial(n, np.ones(k) / k)
        types = rng.integers(0, 9, size=(k, 3))
        a, b = np.random.default_rng(n), np.random.default_rng(n)
        which = np.repeat(np.arange(k), counts)
        want = np.take(types, which[a.permutation(which.size)], axis=0)
        assert np.array_equal(_shuffled(types, counts, b), want)
        assert a.random() == b.random()


# --------------------------------------------------------------------------- recorded, replayed


def test_sampler_version_records():
    model = small_network()
    assert sampling.model_sampler(model) == 1
    sampling.set_model_sampler(model, 2)
    assert sampling.model_sampler(model) == 2
    from dpbundle.mechanisms.oneway import RakedModel

    raked = RakedModel(model, [None] * 4)
    assert sampling.model_sampler(raked) == 1     # not the wrapped model's
    with pytest.raises(ValueError):
        sampling.set_model_sampler(model, 4)
    assert sampling.sampler_of_records([{"kind": "mark", "mark": "iteration"}]) == 1
    assert sampling.sampler_of_records([{"kind": "mark", "mark": "sampler", "version": 2}]) == 2
    with pytest.raises(ValueError):
        sampling.sampler_of_records([{"kind": "mark", "mark": "sampler", "version": 7}])


def test_model_json_says_the_sampler_and_the_schema_accepts_it():
    from dpbundle.audit.schema_util import validate
    from dpbundle.mechanisms.published import PublishError, model_document, model_from_document

    model = small_network()
    gen = {"type": "privbayes", "epsilon_split": 0.5, "theta": 4}
    cols = ["a", "b", "c", "d"]
    old = model_document(model, generator=gen, epsilon=1.0, columns=cols)
    assert "sampler" not in old and sampling.model_sampler(model_from_document(old)) == 1
    sampling.set_model_sampler(model, 2)
    doc = json.loads(json.dumps(model_document(model, generator=gen, epsilon=1.0, columns=cols)))
    assert doc["sampler"] == 2 and validate(doc, "model") == []
    assert sampling.model_sampler(model_from_document(doc)) == 2
    assert validate(dict(doc, sampler=3), "model") == []      # version 3 (issue 38)
    assert sampling.model_sampler(model_from_document(dict(doc, sampler=3))) == 3
    assert validate(dict(doc, sampler=4), "model") != []
    with pytest.raises(PublishError):
        model_from_document(dict(doc, sampler=4))


def test_transcript_schema_and_selection_check_accept_the_mark():
    from dpbundle.audit.replay import selected_slice
    from dpbundle.audit.schema_util import validate

    mark = {"kind": "mark", "mark": "sampler", "version": 2}
    assert validate(mark, "transcript-record") == []
    assert validate(dict(mark, version=5), "transcript-record") != []
    assert validate(dict(mark, extra=1), "transcript-record") != []
    config = {"columns": {}, "generator": {"type": "privbayes"}, "projection": {"min_count": 2}}
    records = [{"kind": "mark", "mark": "iteration", "index": 0, "config": config, "config_id": "0" * 16},
               {"kind": "seed", "purpose": "privbayes: first attribute", "seed": "1" * 64},
               mark,
               {"kind": "seed", "purpose": "sample round 0", "seed": "2" * 64},
               {"kind": "mark", "mark": "iteration end", "index": 0, "passed": True},
               {"kind": "mark", "mark": "selected", "index": 0}]
    index, start, end, _ = selected_slice(records)
    assert (index, start, end) == (0, 0, 5)


def test_iteration_records_version_2_and_replays_from_its_transcript(births_spec, shared_data_dir):
    """run_iteration (default: counts) against a replay of its transcript with the mechanisms'
    sampler and the row-evaluated constraints (the audit's path): same C, same DP values."""
    from dpbundle.mechanisms.criteria import EvalContext, make_criterion
    from dpbundle.release.data.constraints import synthetic_violations
    from dpbundle.release.data import transform as tr
    from dpbundle.release.scheme import iteration as it
    from dpbundle.mechanisms.coding import Coded

    prepared, config = _prepared_10k(births_spec, shared_data_dir)
    assert it.DEFAULT_SAMPLER == 3   # recorded as 2 here: a counts model (sampling.public_sampler)
    rec = Randomness(Transcript())
    result = it.run_iteration(prepared, births_spec, config, rec)
    marks = [r for r in rec.transcript.records if r["kind"] in ("mark", "seed")]
    i = marks.index({"kind": "mark", "mark": "sampler", "version": 2})
    assert marks[i + 1]["purpose"] == "sample round 0"
    assert sampling.model_sampler(result.model) == 2

    rep = Randomness.replay(rec.transcript.records)
    rep.mark("arithmetic", version=2)     # run_iteration's first record (mechanisms/arithmetic.py)
    real = tr.transform(prepared, births_spec, config)    # a new object: no remembered types
    model = it.make_config_generator(births_spec, config).fit(real.codes, real.domain, rep)
    assert sampling.sampler_of_records(rec.transcript.records) == 2
    rep.mark("sampler", version=2)
    constraints = births_spec.raw["synthetic_constraints"]
    rows, counts, _ = sample_types(model, real.n, real.domain,
                                   lambda r, c: synthetic_violations(constraints, Coded(r, real.columns)),
                                   rep.rng)
    cand = real.with_codes(project_counts(rows, counts, 2, rep.rng("projection")))
    assert np.array_equal(cand.codes, result.candidate.codes)
    ctx = EvalContext(real=real, synth=cand, spec=births_spec.raw, alternatives=config["columns"])
    with arithmetic.use(2):
        values = [make_criterion(e).evaluate(ctx, rep).dp_value for e in births_spec.criteria]
    rep.check_finished()
    assert values == [r.dp_value for r in result.results]
    # the row sampler cannot replay it: the transcript says version 2
    rows_replay = Randomness.replay(rec.transcript.records)
    rows_replay.mark("arithmetic", version=2)
    it.make_config_generator(births_spec, config).fit(real.codes, real.domain, rows_replay)
    with pytest.raises(ReplayMismatch):
        it.sample_cells(model, real.n, constraints, real.columns, rows_replay)


def test_fit_from_remembered_types_is_the_fit_from_rows(births_spec, shared_data_dir):
    """PrivBayes fits a cached T from its remembered record types: the same draws, the same
    model as from the rows."""
    from dpbundle.release.data import transform as tr
    from dpbundle.release.scheme import iteration as it

    prepared, config = _prepared_10k(births_spec, shared_data_dir)
    from dpbundle.mechanisms.cells import known_types

    cached = tr.cached_transform(prepared, births_spec, config)
    assert known_types(cached.codes) is not None
    rec = Randomness(Transcript())
    a = it.make_config_generator(births_spec, config).fit(cached.codes, cached.domain, rec)
    rep = Randomness.replay(rec.transcript.records)
    fresh = np.array(cached.codes)   # the same rows, nothing remembered
    assert known_types(fresh) is None
    b = it.make_config_generator(births_spec, config).fit(fresh, cached.domain, rep)
    rep.check_finished()
    assert all(np.array_equal(x, y) for x, y in zip(a.conditionals, b.conditionals))


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A real release (publish: model) with the default sampler, and its enclave audit."""
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    tmp = tmp_path_factory.mktemp("count-sampler")
    spec = fx.fast_spec(tmp / "fast.yaml")
    doc = yaml.safe_load(spec.read_text())
    doc["publish"] = "model"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(tmp / "registry.csv", 6000, 11)
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"),
                              "--key", str(tmp / "k.key"), "--ledger", str(tmp / "ledger.jsonl"),
                              "--transcript", str(tmp / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return tmp, data


def test_a_count_sampled_release_records_it_and_replays_byte_for_byte(released):
    from dpbundle.audit.runner import run_audit
    from dpbundle.mechanisms.noise import read_transcript_file

    tmp, data = released
    records = read_transcript_file(tmp / "t.jsonl")[1].records
    assert any(r.get("kind") == "mark" and r.get("mark") == "sampler" and r.get("version") == 2
               for r in records)
    assert json.loads((tmp / "B" / "model.json").read_text())["sampler"] == 2
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub", transcript=tmp / "t.jsonl", data=data)
    failed = {c.check: c.problems for c in rep.checks if c.failed}
    assert failed == {}, failed
    assert rep.get("replay").result == "pass"


def test_a_huge_n_is_sampled_in_rounds_numpy_can_thin():
    """n = 2 x 10^9 records (no row is drawn): rounds of at most MAX_ROUND records."""
    model = small_network()
    bad = implausible_table(math.prod(model.domain), 8, 0.45)
    _, counts, cells = sample_types(model, 2 * 10**9, model.domain, lambda r, c: bad[c],
                                       Seeds(3).rng)
    assert int(counts.sum()) == 2 * 10**9 and not bad[cells].any()


# --------------------------------------------------------------------------- C written once


def test_the_candidate_is_held_as_record_types_through_the_criteria(births_spec, shared_data_dir):
    """Every criterion of the births spec reads C's record types: its rows are not written by the
    iteration; written later they are the projection's shuffle (the same rows each time)."""
    import pickle

    from dpbundle.mechanisms.cells import known_types, types_of
    from dpbundle.mechanisms.projection import ArrangedCoded, arrange, project_types
    from dpbundle.release.scheme import iteration as it

    prepared, config = _prepared_10k(births_spec, shared_data_dir)
    rec = Randomness(Transcript())
    result = it.run_iteration(prepared, births_spec, config, rec)
    cand = result.candidate
    assert isinstance(cand, ArrangedCoded) and not cand.written
    assert len(result.results) == len(births_spec.model.acceptance)
    assert known_types(result.real.codes) is not None and not cand.written   # looked past it
    types = types_of(cand)
    assert cand.n == prepared.n == types.n
    copy = pickle.loads(pickle.dumps(cand))
    rows = cand.codes
    assert cand.written and rows is cand.codes and rows.shape == (prepared.n, 6)
    assert np.array_equal(copy.codes, rows)
    # the rows are arrange() of C's types, continuing the projection's generator: redo S, then
    # the projection from the recorded seeds
    rep = Randomness.replay(rec.transcript.records)
    rep.mark("arithmetic", version=2)     # run_iteration's first record (mechanisms/arithmetic.py)
    model = it.make_config_generator(births_spec, config).fit(result.real.codes, result.real.domain, rep)
    rep.mark("sampler", version=2)
    s = it.sample_counted(model, prepared.n, births_spec.model.all_synthetic_constraints,
                          result.real.columns, rep)
    again = rep.rng("projection")
    out = project_types(s, 2, again)
    assert np.array_equal(out.counts, types.counts)
    assert np.array_equal(arrange(out, again), rows)


def _prepared_10k(births_spec, shared_data_dir):
    """The public 10k sample prepared with the births spec, and a coarse PrivBayes configuration."""
    from dpbundle.release.data.prepare import prepare

    path = shared_data_dir / "nvss2019_singleton_10k.csv"
    if not path.exists():
        pytest.skip("examples/data/nvss2019_singleton_10k.csv is not available")
    config = {"columns": {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
                          "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"},
              "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
              "projection": {"min_count": 2}}
    return prepare(path, births_spec), config
