"""Adversarial review of issue 37 item 2 (zCDP beside pure DP).

Pinned here (sound, and each test can fail):

* the rho the transcript actually hands to OpenDP (every Gaussian table's rho plus the InDif
  Laplace epsilon's e^2/2) adds up, exactly, to at most the declared rho_generation; every
  Gaussian record's scale is at least its L2 sensitivity / sqrt(2 rho) and its sensitivity at
  least sqrt(2);
* change-one neighbours move every count table privsyn measures (1-ways on full codes, 2-ways
  on merged codes) by at most sqrt(2) in L2 (random neighbours, independent computation);
* the epsilon the bundle states is at least the Canonne-Kamath-Steinke conversion of its total
  rho, computed here independently of OpenDP (a numeric minimisation over the Renyi order);
* a run whose Gaussian draws added no noise (the transcript says so honestly, the commitment is
  the release's) fails the enclave audit's noise check.

Strict xfails (public sentences of a zCDP bundle that are not true of it):

* the datasheet's "What it means" and "How large is epsilon" promise the pure-DP bound (every
  outcome's probability changes by at most a factor e^epsilon) with no delta;
* the datasheet's comparison table calls the 2024 births release "pure differential privacy, as
  here";
* the datasheet's method step 4 says the generator was trained "with epsilon = rho 0.5";
* the registry entry says the privacy loss of the registry's people "is this epsilon" (no delta);
* the composed row of the datasheet's epsilon scale calls a zCDP run's composition "pure
  differential privacy, composed".
"""
from __future__ import annotations

import html
import json
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import yaml

import audit_fixtures as fx
from test_i37_zcdp import DELTA, RHO_GEN, _zcdp_spec


def _release(tmp, name="b"):
    from dpbundle.release.api import release

    spec = _zcdp_spec(tmp / f"{name}.yaml")
    data = fx.example_registry(tmp / f"{name}.csv", 3000, 5)
    with release(spec, data, out=tmp / name, key=tmp / "k.key", ledger=tmp / f"{name}.ledger.jsonl",
                 transcript=tmp / f"{name}.t.jsonl"):
        pass
    return {"bundle": tmp / name, "pub": tmp / "k.pub", "transcript": tmp / f"{name}.t.jsonl", "data": data}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    from dpbundle.release.bundle import keys

    tmp = tmp_path_factory.mktemp("i37zreview")
    keys.write_keypair(tmp / "k")
    return _release(tmp)


def _records(path):
    return [json.loads(x) for x in path.read_text().splitlines()[1:] if x.strip()]


def _text(bundle):
    t = (bundle / "README.html").read_text()
    t = re.sub(r"<style.*?</style>|<svg.*?</svg>", "", t, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", t)))


# ----------------------------------------------------------------------------- sound


def test_the_rho_handed_to_opendp_adds_up_to_at_most_rho_generation(made):
    recs = _records(made["transcript"])
    gauss = [r for r in recs if r.get("kind") == "gaussian"]
    indif = [r for r in recs if r.get("kind") == "laplace" and "InDif" in str(r.get("purpose"))]
    assert gauss and len(indif) == 1
    spent = sum((Fraction(float(r["rho"])) for r in gauss), Fraction(0))
    spent += Fraction(float(indif[0]["epsilon"])) ** 2 / 2
    assert spent <= Fraction(str(RHO_GEN))
    assert spent > Fraction(str(RHO_GEN)) * Fraction(999, 1000)      # and nearly all of it is used
    for r in gauss:
        assert Fraction(float(r["sensitivity"])) ** 2 >= 2
        # sigma >= Delta / sqrt(2 rho)  <=>  sigma^2 * 2 rho >= Delta^2 (exactly)
        assert Fraction(float(r["scale"])) ** 2 * 2 * Fraction(float(r["rho"])) >= 2


def test_count_tables_move_by_at_most_sqrt2_in_l2_under_change_one():
    from dpbundle.mechanisms import estimation

    rng = np.random.default_rng(7)
    dom = [100, 7, 13, 2]
    for trial in range(300):
        n = int(rng.integers(1, 40))
        codes = np.stack([rng.integers(0, k, n) for k in dom], axis=1)
        other = codes.copy()
        i = int(rng.integers(0, n))
        other[i] = [rng.integers(0, k) for k in dom]
        g = int(rng.choice([1, 5, 20]))
        for a in range(len(dom)):
            t1 = np.bincount(codes[:, a], minlength=dom[a])
            t2 = np.bincount(other[:, a], minlength=dom[a])
            assert np.sum((t1 - t2) ** 2) <= 2
            for b in range(a + 1, len(dom)):
                fa, fb = estimation.merge_factor(dom[a], g), estimation.merge_factor(dom[b], g)
                ka, kb = estimation.merged_size(dom[a], fa), estimation.merged_size(dom[b], fb)

                def table(c):
                    x = estimation.merge_codes(c[:, a], fa) * kb + estimation.merge_codes(c[:, b], fb)
                    return np.bincount(x, minlength=ka * kb)
                assert np.sum((table(codes) - table(other)) ** 2) <= 2


def _cks_epsilon(rho: float, delta: float) -> float:
    """min over a > 1 of a rho + (ln(1/delta) + (a - 1) ln(1 - 1/a) - ln a) / (a - 1)
    (Canonne, Kamath & Steinke 2020, Prop. 12 / Cor. 13), by a grid then a bounded search."""
    from scipy.optimize import minimize_scalar

    def f(la):
        a = 1.0 + math.exp(la)
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)
    grid = min(f(x / 100) for x in range(-2000, 2000))
    res = minimize_scalar(f, bounds=(-20, 20), method="bounded", options={"xatol": 1e-12})
    return max(0.0, min(grid, float(res.fun)))


def test_the_stated_epsilon_is_at_least_the_conversion_of_the_total_rho(made):
    from dpbundle.mechanisms.zcdp import epsilon_at_delta

    b = json.loads((made["bundle"] / "budget.json").read_text())
    rho = Fraction(str(b["zcdp"]["total_rho"]))
    assert b["total_epsilon"] >= _cks_epsilon(float(rho), DELTA) * (1 - 1e-13)
    for r, d in [("0.01497", 1e-9), ("2.56", 1e-10), ("1e-6", 1e-5), ("10", 1e-6)]:
        assert epsilon_at_delta(Fraction(r), d) >= _cks_epsilon(float(Fraction(r)), d) * (1 - 1e-13)


def test_gaussian_draws_without_noise_fail_the_enclave_noise_check(tmp_path):
    """A key holder's code that hands the true tables on as the 'noisy' ones, with an honest
    transcript and commitment: the replay reproduces data.csv, the noise check must refuse."""
    from dpbundle.audit.runner import run_audit
    from dpbundle.mechanisms import noise
    from dpbundle.release.bundle import keys

    keys.write_keypair(tmp_path / "k")
    real = noise.Randomness._fresh_laplace

    def no_gauss_noise(self, base, meas, shape, integer):
        if base.get("kind") == "gaussian":
            return real(self, base, lambda t: t, shape, integer)
        return real(self, base, meas, shape, integer)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(noise.Randomness, "_fresh_laplace", no_gauss_noise)
        m = _release(tmp_path, "nonoise")
    recs = _records(m["transcript"])
    assert all(r["noisy"] == r["true"] for r in recs if r.get("kind") == "gaussian")
    rep = run_audit(str(m["bundle"]), pubkey=str(m["pub"]), transcript=str(m["transcript"]), data=str(m["data"]))
    assert rep.verdict != "verified"
    problems = [q for c in rep.checks if c.failed for q in c.problems]
    assert rep.get("replay").failed and any("noise" in q.lower() for q in problems), problems


# ----------------------------------------------------------------------------- wording


def test_the_datasheet_guarantee_sentences_of_a_zcdp_release_name_delta(made):
    text = _text(made["bundle"])
    for start in ("What it means.", "How large is ε ="):     # the section, not a reference to it
        i = text.index(start)
        passage = text[i:i + 600]
        assert "factor of e" in passage
        assert "δ" in passage or "delta" in passage, passage


def test_the_datasheet_does_not_call_a_zcdp_release_pure_dp(made):
    assert "pure differential privacy, as here" not in _text(made["bundle"])


def test_the_method_step_gives_the_generator_budget_in_rho(made):
    text = _text(made["bundle"])
    step = text[text.index("generator was trained on them"):][:80]
    assert "ε = rho" not in step and "ρ" in step, step


def test_the_registry_entry_privacy_loss_sentence_names_delta(made):
    entry = yaml.safe_load((made["bundle"] / "registry-entry.yaml").read_text())
    details = entry["deployment"]["privacy_loss"]["privacy_parameters_details"]
    tail = details[details.index("budget ledger"):]
    assert "delta" in tail, tail


def test_a_composed_zcdp_run_is_not_called_pure_dp():
    from dpbundle.templates.datasheet.context import epsilon_scale

    scale = epsilon_scale(1.0, 2.5, 2, delta=1e-9)
    composed = [r for r in scale["rows"] if r["short"].endswith("recorded runs")]
    assert composed and "pure" not in composed[0]["kind"]
