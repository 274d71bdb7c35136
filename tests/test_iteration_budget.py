"""DP accounting of one iteration, recomputed from its transcript (independent of spec.py's
arithmetic): every noise draw is calibrated so that OpenDP's own privacy map is <= its recorded
epsilon, and the epsilons of all draws sum to eps_gen + eps_eval (what the selection's
per-candidate privacy map claims)."""
from __future__ import annotations

import math

import pytest

from dpbundle.mechanisms.noise import Randomness, Transcript, laplace_measurement, noisy_max_measurement
from dpbundle.release.scheme.iteration import run_iteration
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.space import enumerate_configs


def _opendp_epsilon(rec: dict) -> float:
    if rec["kind"] == "exponential":
        return float(noisy_max_measurement(rec["scale"]).map(rec["sensitivity"]))
    integer = rec["mechanism"].endswith("/integer")
    vector = isinstance(rec["true"], list)
    d_in = int(rec["sensitivity"]) if integer else rec["sensitivity"]
    return float(laplace_measurement(rec["scale"], vector, integer).map(d_in))


def test_iteration_spends_exactly_eps_gen_plus_eps_eval(births_spec, shared_data_dir):
    spec = births_spec
    prepared = prepare(shared_data_dir / "nvss2019_singleton_10k.csv", spec)
    config = next(iter(enumerate_configs(spec)))
    transcript = Transcript()
    result = run_iteration(prepared, spec, config, Randomness(transcript))
    assert result.candidate is not None, result.note
    draws = [r for r in transcript.records if r["kind"] in ("laplace", "exponential")]
    for r in draws:
        assert _opendp_epsilon(r) <= r["epsilon"], r["purpose"]
        assert r["scale"] >= (2.0 if r["kind"] == "exponential" else 1.0) * r["sensitivity"] / r["epsilon"]
    gen = math.fsum(r["epsilon"] for r in draws if r["purpose"].startswith("privbayes"))
    ev = {r["purpose"]: r["epsilon"] for r in draws if r["purpose"].startswith("criterion ")}
    # one draw per criterion, each with the spec's epsilon
    assert ev == {f"criterion {c['id']}": float(c["epsilon"]) for c in spec.criteria}
    assert gen <= spec.epsilon_generation and gen == pytest.approx(spec.epsilon_generation, rel=1e-12)
    total = math.fsum(r["epsilon"] for r in draws)
    per_iteration = spec.epsilon_generation + spec.epsilon_evaluation
    assert total <= per_iteration * (1 + 1e-15) and total == pytest.approx(per_iteration, rel=1e-12)
    # and every draw's purpose is accounted for (no stray DP release outside generator + criteria)
    assert len(draws) == sum(1 for r in draws if r["purpose"].startswith(("privbayes", "criterion ")))
