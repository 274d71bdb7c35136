"""Issue 37: the self-test (record and replay on neighbours) covers privsyn's hierarchical
estimator: its merged-code InDif scores and 2-way tables keep their declared sensitivities, and a
sensitivity cut too small is found."""
from __future__ import annotations

import numpy as np
import pytest

from test_selftest import _write, every_type_spec, simulate

from dpbundle.release.data.prepare import prepare
from dpbundle.release.selftest import choose_configs, run_selftest
from dpbundle.release.spec.load import load_spec


@pytest.fixture(scope="module")
def hierarchical(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hier")
    spec = every_type_spec()
    # pair_values 2: every column of more than two values enters the pairs with merged codes
    spec["generators"] = [{"type": "privsyn", "grid": {"estimator": ["hierarchical"], "pair_values": [2],
                                                       "select_rule": ["top"], "max_pairs": [3]}}]
    path, data = _write(tmp, spec, simulate(1200))
    loaded = load_spec(path)
    return loaded, prepare(data, loaded)


def test_the_hierarchical_estimator_keeps_its_sensitivities(hierarchical):
    spec, prepared = hierarchical
    configs, skipped = choose_configs(spec, None, 0, True, np.random.default_rng(5))
    assert configs and not skipped
    report = run_selftest(spec, prepared, configs, pairs=8, seed=7)
    assert report.passed, [f.message for f in report.findings]
    purposes = {o.purpose for o in report.observations}
    assert "privsyn: InDif scores of all candidate pairs" in purposes
    assert any("codes merged" in p for p in purposes), purposes


def test_a_too_small_indif_sensitivity_is_found(hierarchical, monkeypatch):
    import dpbundle.mechanisms.privsyn as ps

    spec, prepared = hierarchical
    # a neighbour moves the InDif vector by a few units in L1; the declared 6 per pair cut to
    # 0.06 per pair is then exceeded by most neighbours (the run's noise draws are OpenDP's)
    monkeypatch.setattr(ps, "INDIF_SENSITIVITY", ps.INDIF_SENSITIVITY / 100)
    configs, _ = choose_configs(spec, None, 0, True, np.random.default_rng(5))
    report = run_selftest(spec, prepared, configs, pairs=12, seed=7)
    assert not report.passed
    assert any("InDif" in f.message for f in report.findings), [f.message for f in report.findings]


def test_the_selftest_covers_a_zcdp_generator(tmp_path):
    """Under privacy.definition: zcdp the self-test pairs privsyn's Gaussian tables by their L2
    distance against the declared sqrt(2) and finds nothing."""
    spec = every_type_spec()
    spec["generators"] = [{"type": "privsyn", "grid": {"estimator": ["hierarchical"]}}]
    priv = spec["privacy"]
    priv.pop("epsilon_generation")
    priv.update({"definition": "zcdp", "rho_generation": 0.5, "delta": 1e-9, "epsilon_cap": 50.0,
                 "acknowledge_weak_guarantee": True,
                 "selection": {"stop_probability": 0.05, "retries": "resample"}})
    path, data = _write(tmp_path, spec, simulate(1200))
    loaded = load_spec(path)
    configs, _ = choose_configs(loaded, None, 0, True, np.random.default_rng(5))
    report = run_selftest(loaded, prepare(data, loaded), configs, pairs=8, seed=7)
    assert report.passed, [f.message for f in report.findings]
    gaussian = [o for o in report.observations if "Gaussian" in o.mechanism]
    assert gaussian and all(o.purpose.startswith("privsyn: ") for o in gaussian)
