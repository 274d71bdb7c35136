"""Tests of the optional AIM / MST generators (OpenDP ``opendp.extras.mbi``, pure DP).

The tests that fit a model need the ``mbi`` extra (Private-PGM, JAX, polars) and are skipped
without it, so the main environment (no JAX) skips them. Run them in the extra's venv:
``/work/venv-mbi/bin/python -m pytest tests/test_mbi.py -q``. Each generator is fitted once
(module-scoped fixture) at epsilon = 1e4 with small settings to keep the file fast.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from dpbundle.mechanisms.generators import Generator, Model, generator_types, make_generator
from dpbundle.mechanisms.mbi import AIM, MST, ONEWAY_SPLIT, mbi_availability
from dpbundle.mechanisms.noise import Randomness

MBI_OK, MBI_REASON = mbi_availability()
needs_mbi = pytest.mark.skipif(
    not MBI_OK, reason=f"the optional 'mbi' extra is not installed ({MBI_REASON})")

EPS = 1e4
DOMAIN = (2, 3, 4, 6)
N = 2000
M = 20_000
# small settings for speed; they change utility only (post-processing / round count),
# never the privacy guarantee
FAST = {
    "mst": {"iters": 100},
    "aim": {"iters": 100, "rounds": 2, "degree": 2},
}


def _data(seed: int = 20240601) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c0 = rng.integers(0, 2, N)
    # c1 strongly tied to c0 (so the 2-way marginal checks the conditional sampler)
    c1 = np.where(rng.random(N) < 0.9, c0, rng.integers(0, 3, N))
    c2 = rng.choice(4, size=N, p=[0.1, 0.2, 0.3, 0.4])
    c3 = rng.integers(0, 6, N)
    return np.stack([c0, c1, c2, c3], axis=1).astype(np.int64)


def _freq(codes: np.ndarray, cols: tuple[int, ...]) -> np.ndarray:
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), tuple(DOMAIN[c] for c in cols))
    return np.bincount(flat, minlength=math.prod(DOMAIN[c] for c in cols)) / codes.shape[0]


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return _data()


@pytest.fixture(scope="module", params=["mst", "aim"])
def fitted(request, data):
    gtype = request.param
    g = make_generator(gtype, EPS, **FAST[gtype])
    rand = Randomness()
    model = g.fit(data, DOMAIN, rand)
    return gtype, g, rand, model


# --------------------------------------------------------------------------- without the extra


@pytest.mark.parametrize("cls", [AIM, MST])
def test_protocol_without_fitting(cls):
    g = cls(0.7)
    assert isinstance(g, Generator) and g.epsilon == 0.7
    assert g.privacy_map(1) == 0.7 and g.privacy_map(3) == pytest.approx(2.1)
    parts = g.budget_parts()
    assert len(parts) == 2 and math.fsum(p["epsilon"] for p in parts) == 0.7
    assert parts[0]["epsilon"] == 0.7 * ONEWAY_SPLIT
    assert set(g.hyperparameters()) == set(cls.HYPERPARAMETERS)
    for bad in ({"iters": 0}, {"max_cells": -1}, {"iters": True}):
        with pytest.raises(ValueError):
            cls(1.0, **bad)
    with pytest.raises(ValueError, match="epsilon"):
        cls(0.0)


def test_bad_hyperparameters_without_fitting():
    with pytest.raises(ValueError, match="degree"):
        AIM(1.0, degree=0)
    with pytest.raises(ValueError, match="measure_split"):
        AIM(1.0, measure_split=1.5)
    with pytest.raises(ValueError, match="rounds"):
        AIM(1.0, rounds=0)
    with pytest.raises(ValueError, match="max_model_size"):
        AIM(1.0, max_model_size=0.0)
    with pytest.raises(ValueError, match="num_selections"):
        MST(1.0, num_selections=0)


@pytest.mark.parametrize("cls", [AIM, MST])
def test_replay_refused(cls):
    rand = Randomness.replay([])
    with pytest.raises(ValueError, match=r"cannot be replayed.*not recorded per draw"):
        cls(1.0).fit(np.zeros((5, 2), dtype=np.int64), (2, 2), rand)


# --------------------------------------------------------------------------- with the extra


@needs_mbi
def test_generator_types_report_available():
    types = generator_types()
    for t in ("aim", "mst"):
        assert types[t]["available"] is True and types[t]["reason"] == ""
    assert types["aim"]["hyperparameters"] == list(AIM.HYPERPARAMETERS)
    assert types["mst"]["hyperparameters"] == list(MST.HYPERPARAMETERS)


@needs_mbi
@pytest.mark.parametrize("gtype", ["aim", "mst"])
def test_make_generator(gtype):
    g = make_generator(gtype, 2.0, **FAST[gtype])
    assert g.type == gtype and isinstance(g, (AIM, MST)) and g.epsilon == 2.0
    hp = g.hyperparameters()
    assert make_generator(gtype, 2.0, **hp).hyperparameters() == hp
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        make_generator(gtype, 1.0, theta=1)


@needs_mbi
def test_sample_shape_dtype_domain(fitted):
    gtype, g, rand, model = fitted
    assert isinstance(model, Model)
    out = model.sample(M, np.random.default_rng(1))
    assert out.dtype == np.int64 and out.shape == (M, len(DOMAIN))
    assert (out >= 0).all() and (out < np.asarray(DOMAIN)).all()
    assert model.sample(0, np.random.default_rng(1)).shape == (0, len(DOMAIN))
    with pytest.raises(ValueError):
        model.sample(-1, np.random.default_rng(1))


@needs_mbi
def test_marginals_close_at_large_epsilon(fitted, data):
    gtype, g, rand, model = fitted
    out = model.sample(M, np.random.default_rng(2))
    for j in range(len(DOMAIN)):
        diff = np.abs(_freq(out, (j,)) - _freq(data, (j,))).max()
        assert diff < 0.03, f"{gtype}: 1-way marginal of column {j} off by {diff:.3f}"
    # the strong c0-c1 dependence is carried through the conditional sampler
    diff2 = np.abs(_freq(out, (0, 1)) - _freq(data, (0, 1))).max()
    assert diff2 < 0.05, f"{gtype}: 2-way marginal (0, 1) off by {diff2:.3f}"


@needs_mbi
def test_sampling_reproducible_from_seed(fitted):
    gtype, g, rand, model = fitted
    rec = Randomness()
    a = model.sample(500, rec.rng("synthetic sample"))
    b = model.sample(500, Randomness.replay(rec.transcript).rng("synthetic sample"))
    assert np.array_equal(a, b)
    c = model.sample(500, Randomness().rng("synthetic sample"))  # fresh seed
    assert not np.array_equal(a, c)


@needs_mbi
def test_privacy_map_matches_opendp(fitted):
    gtype, g, rand, model = fitted
    marks = [r for r in rand.transcript.records
             if r.get("kind") == "mark" and r.get("mark") == "opaque_release"]
    assert len(marks) == 1 and len(rand.transcript) == 1       # nothing else is recorded
    mark = marks[0]
    assert mark["generator"] == gtype and mark["epsilon"] == EPS
    assert mark["hyperparameters"] == g.hyperparameters()
    assert mark["model_sha256"] == model.digest()
    # OpenDP's own map of the measurement at change-one distance 1 (ChangeOneDistance input)
    opendp_eps = mark["opendp_map"]
    assert opendp_eps <= EPS and opendp_eps == pytest.approx(EPS, rel=1e-9)
    assert g.privacy_map(1) == EPS and g.privacy_map(2) == 2 * EPS
    parts = g.budget_parts()
    assert math.fsum(p["epsilon"] for p in parts) == EPS


@needs_mbi
def test_opendp_measurement_is_pure_dp_change_one():
    import opendp.prelude as dp

    g = MST(0.5, iters=10)
    _, meas = g.measurement((2, 3))
    assert meas.input_metric == dp.change_one_distance()
    assert meas.output_measure == dp.max_divergence()
    assert meas.map(1) <= 0.5 and meas.map(1) == pytest.approx(0.5, rel=1e-9)
