"""The private selection's stop rule, tested on its distribution (not on printed arithmetic).

With a candidate that never passes, the number of attempts of Liu & Talwar's known-threshold
selection with stop probability g is Geometric(g) on {1, 2, ...}: P(K = k) = (1 - g)^(k-1) g,
mean 1/g. OpenDP 0.16's ``make_select_private_candidate`` does not give that distribution (each
failed attempt continues with probability exp(1 / ln(1 - g))); dpbundle runs the loop itself with
exact OpenDP Bernoulli draws. Every test here would have failed on the combinator.

False-alarm rate: each statistical assertion below is a two-sided test at level 1e-6 (or a
chi-square test at 1e-6), so the whole file fails by chance with probability below 1e-4.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbundle.mechanisms.private_selection import (KnownThresholdSelection, StopRule, bernoulli,
                                                   opendp_selection_map)

ALPHA = 1e-6


def _attempts(gamma: float, runs: int) -> np.ndarray:
    """Number of attempts of each of ``runs`` selections whose candidate never passes."""
    out = np.empty(runs, dtype=np.int64)
    for r in range(runs):
        calls = []
        loop = KnownThresholdSelection(1.0, StopRule(gamma))
        assert loop.run(lambda k: (calls.append(k), (0.0, None))[1]) is None
        assert calls == list(range(len(calls)))
        out[r] = len(calls)
    return out


def _geometric_gof(sample: np.ndarray, gamma: float) -> float:
    """Chi-square goodness-of-fit p-value of ``sample`` against Geometric(gamma) on {1, 2, ...},
    with cells 1..K and a tail cell, K chosen so that every expected count is >= 5."""
    n = len(sample)
    pmf = lambda k: (1 - gamma) ** (k - 1) * gamma  # noqa: E731
    cells, k = [], 1
    while n * pmf(k) >= 5 and n * (1 - gamma) ** k >= 5:
        cells.append(k)
        k += 1
    expected = [n * pmf(c) for c in cells] + [n * (1 - gamma) ** len(cells)]
    observed = [int(np.sum(sample == c)) for c in cells] + [int(np.sum(sample > len(cells)))]
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("gamma,runs", [(0.5, 1500), (0.2, 800), (0.05, 400)])
def test_attempts_are_geometric(gamma: float, runs: int) -> None:
    sample = _attempts(gamma, runs)
    mean, sd = 1 / gamma, math.sqrt(1 - gamma) / gamma
    z = stats.norm.isf(ALPHA / 2)
    assert abs(sample.mean() - mean) <= z * sd / math.sqrt(runs), \
        f"mean attempts {sample.mean():.3f}, Geometric({gamma}) gives {mean:.3f}"
    assert _geometric_gof(sample, gamma) > ALPHA


def test_release_with_stop_02_makes_about_five_attempts() -> None:
    """The issue's acceptance: stop probability 0.2 on a spec that never passes -> 5 on average
    (OpenDP 0.16's combinator gave exactly 1 almost always)."""
    sample = _attempts(0.2, 800)
    assert 4.5 < sample.mean() < 5.5
    assert np.mean(sample == 1) < 0.3          # P(K = 1) = 0.2 here, 0.989 with the combinator


@pytest.mark.parametrize("p", [0.5, 0.7, 0.2, 0.0127, 0.999, 2.0 ** -6 * 1.5])
def test_bernoulli_frequency(p: float) -> None:
    n = 10_000
    k = sum(bernoulli(p) for _ in range(n))
    assert stats.binomtest(k, n, p).pvalue > ALPHA, f"{k}/{n} draws for p = {p}"


def test_bernoulli_edges() -> None:
    assert not any(bernoulli(0.0) for _ in range(100))
    for bad in (1.0, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ValueError):
            bernoulli(bad)  # type: ignore[arg-type]


def test_zero_stop_probability_never_stops() -> None:
    loop = KnownThresholdSelection(1.0, StopRule(0.0))
    out = loop.run(lambda k: (1.0 if k == 300 else 0.0, k))
    assert out == (300, 300)


def test_first_passing_is_released_and_draws_are_reported() -> None:
    draws = []
    loop = KnownThresholdSelection(1.0, StopRule(0.01))
    out = None
    while out is None:        # with probability > 0.97 the first loop reaches candidate 3
        draws.clear()
        out = loop.run(lambda k: (1.0 if k == 3 else 0.0, f"c{k}"), on_stop_draw=lambda k, s: draws.append((k, s)))
    assert out == (3, "c3")
    assert draws == [(0, False), (1, False), (2, False)]


@pytest.mark.parametrize("gamma", [0.0, 0.0127, 0.2, 0.5])
def test_accounting_matches_opendp_combinator_map(gamma: float) -> None:
    """Our privacy map (2 x the candidate's, any gamma) against OpenDP's combinator map."""
    loop = KnownThresholdSelection(4.99, StopRule(gamma))
    assert float(loop.privacy_map(1)) == pytest.approx(opendp_selection_map(4.99, gamma), rel=1e-12)
    assert opendp_selection_map(4.99, gamma) == pytest.approx(9.98, rel=1e-12)


def test_opendp_combinator_still_inverts_the_stop_probability() -> None:
    """Documents the upstream behaviour (docs/opendp-stop-probability.md) that made dpbundle run
    the loop itself: with g = 0.5 OpenDP 0.16 gives mean 1 / (1 - exp(1 / ln(1 - g))) = 1.31
    attempts, not 2. If this fails, OpenDP changed its sampling: re-read the note, and consider
    calling the combinator again."""
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    calls = []
    cand = dp.m.make_user_measurement(
        dp.user_domain("x", lambda _x: True), dp.change_one_distance(), dp.max_divergence(),
        lambda _x: (calls.append(1), (0.0, None))[1], lambda d: 1.0 * d, TO="(f64, ExtrinsicObject)")
    meas = dp.c.make_select_private_candidate(cand, stop_probability=0.5, threshold=1.0)
    runs = 1000
    for _ in range(runs):
        meas(0)
    q = math.exp(1 / math.log(0.5))               # OpenDP's continue probability
    mean, sd = 1 / (1 - q), math.sqrt(q) / (1 - q)
    assert abs(len(calls) / runs - mean) <= stats.norm.isf(ALPHA / 2) * sd / math.sqrt(runs)


# ------------------------------------------------------------------ wired into the release's selection


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    import yaml

    from dpbundle.release.data.example import write_example
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.scheme.space import enumerate_configs
    from dpbundle.release.spec.load import validate_spec

    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    doc = yaml.safe_load((root / "examples" / "births.yaml").read_text("utf-8"))
    data = tmp_path_factory.mktemp("stop") / "R.csv"
    write_example(data, rows=1000, seed=5)
    spec = validate_spec(doc)
    return spec, prepare(data, spec), next(iter(enumerate_configs(spec)))


def _never_passing(monkeypatch):
    from types import SimpleNamespace

    import dpbundle.release.scheme.selection as selection_mod

    def fake(prepared, spec, config, rand, phase=None):
        rand.laplace(0.0, sensitivity=1.0, epsilon=1.0, purpose="fake")
        return SimpleNamespace(passed=False)

    monkeypatch.setattr(selection_mod, "run_iteration", fake)


def test_release_selection_stops_geometrically(small, monkeypatch):
    """release/scheme/selection.py's select with stop probability 0.2 and no passing candidate: the
    attempts in the private transcript are Geometric(0.2), each failed attempt followed by one
    recorded stop draw, the last one 'stop'; the stop probability is recorded."""
    from dpbundle.mechanisms.noise import Transcript
    from dpbundle.release.scheme.selection import NothingSelected, select

    spec, prepared, config = small
    _never_passing(monkeypatch)
    spec.raw["privacy"].setdefault("selection", {})["stop_probability"] = 0.2
    counts = []
    for _ in range(300):
        t = Transcript()
        with pytest.raises(NothingSelected):
            select(prepared, spec, t, [config])
        marks = [r for r in t.records if r["kind"] == "mark"]
        assert marks[0]["mark"] == "selection" and marks[0]["stop_probability"] == 0.2
        draws = [r["stop"] for r in marks if r["mark"] == "stop draw"]
        attempts = sum(r["mark"] == "iteration" for r in marks)
        assert draws == [False] * (attempts - 1) + [True]
        counts.append(attempts)
    counts = np.asarray(counts)
    assert abs(counts.mean() - 5) <= stats.norm.isf(ALPHA / 2) * math.sqrt(0.8) / 0.2 / math.sqrt(300)
    assert _geometric_gof(counts, 0.2) > ALPHA


def test_audit_checks_the_stop_draws(small, monkeypatch):
    """The enclave audit's structure check: a released transcript has one 'continue' stop draw
    after each failed attempt; a draw that said stop, a missing draw, or a stop probability other
    than budget.json's is refused."""
    from types import SimpleNamespace

    import dpbundle.release.scheme.selection as selection_mod
    from dpbundle.audit.replay import TranscriptError, _check_first_passing, check_records
    from dpbundle.mechanisms.noise import Transcript
    from dpbundle.release.scheme.selection import select

    spec, prepared, config = small
    outcomes = iter([False, False, True])
    monkeypatch.setattr(selection_mod, "run_iteration",
                        lambda *a, **k: SimpleNamespace(passed=next(outcomes)))
    monkeypatch.setattr(selection_mod.StopRule, "draw", lambda self: False)
    spec.raw["privacy"].setdefault("selection", {})["stop_probability"] = 0.2
    t = Transcript()
    select(prepared, spec, t, [config])
    recs = t.records
    check_records(__import__("pathlib").Path("t.jsonl"), recs)
    _check_first_passing(recs, 0.2)
    assert [r["mark"] for r in recs if r["kind"] == "mark"] == [
        "selection", "iteration", "iteration end", "stop draw", "iteration", "iteration end",
        "stop draw", "iteration", "iteration end", "selected"]
    with pytest.raises(TranscriptError, match="differs from budget"):
        _check_first_passing(recs, 0.5)
    said_stop = [dict(r) for r in recs]
    said_stop[3]["stop"] = True
    with pytest.raises(TranscriptError, match="said stop"):
        _check_first_passing(said_stop)
    missing = [r for i, r in enumerate(recs) if i != 6]
    assert recs[6]["mark"] == "stop draw"
    with pytest.raises(TranscriptError, match="no stop draw"):
        _check_first_passing(missing)
