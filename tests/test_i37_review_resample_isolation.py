"""Review of issue 37's ``retries: resample`` (adversarial review): an attempt reads the private
table T only through the acceptance criteria.

The accounting total = count + eps_gen + 2 x eps_eval is sound only if, once the model is fitted,
an attempt's candidate C is a function of the model, public values (n, the domain, the synthetic
constraints, the configuration) and randomness independent of the data. These tests run the
release's own attempt code (``run_resampled``) on two neighbouring tables T and T' (one record
changed) with the same fitted model and the same bound post-processing seeds: C must be the same
bytes. A sampler, projection or constraint step that looked at T would make them differ.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import audit_fixtures as fx

from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.mechanisms.seeds import SeedBinding
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.iteration import fit_once, run_resampled
from dpbundle.release.scheme.space import draw_config
from dpbundle.release.spec.load import load_spec

GENERATORS = {
    "privbayes": {"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [4]}},
    "oneway-raked": {"type": "privbayes", "flavour": "theta",
                     "grid": {"epsilon_split": [0.5], "theta": [4], "oneway": ["measure"]}},
    "privsyn-hierarchical": {"type": "privsyn", "grid": {"estimator": ["hierarchical"], "pair_values": [3]}},
}


def _spec(tmp_path, generator: dict):
    import yaml

    path = fx.fast_spec(tmp_path / "spec.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["privacy"]["selection"] = {"stop_probability": 0.05, "retries": "resample"}
    doc["generators"] = [generator]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_spec(path)


def _neighbour(real):
    """T with its first record replaced by another row of the domain (change-one)."""
    codes = np.array(real.codes, copy=True)
    row = codes[0].copy()
    for j, col in enumerate(real.columns):
        row[j] = (row[j] + 1) % col.size
    codes[0] = row
    return real.with_codes(codes)


@pytest.mark.parametrize("kind", sorted(GENERATORS))
def test_an_attempts_candidate_does_not_depend_on_T(tmp_path, kind):
    spec = _spec(tmp_path, GENERATORS[kind])
    data = fx.example_registry(tmp_path / "births.csv", 1500, 7)
    prepared = prepare(data, spec)
    seeds = SeedBinding("ab" * 32, "review beacon")
    fitted = fit_once(prepared, spec, draw_config(spec, None), Randomness(Transcript(), seeds=seeds))
    other = dataclasses.replace(fitted, real=_neighbour(fitted.real))
    assert not np.array_equal(np.asarray(fitted.real.codes), np.asarray(other.real.codes))
    a = run_resampled(fitted, spec, Randomness(Transcript(), seeds=seeds))
    b = run_resampled(other, spec, Randomness(Transcript(), seeds=seeds))
    assert a.candidate is not None and b.candidate is not None
    assert np.array_equal(np.asarray(a.candidate.codes), np.asarray(b.candidate.codes))
