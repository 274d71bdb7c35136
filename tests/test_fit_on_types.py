"""Every generator that says FITS_TYPES makes, on T's record types, the fit it makes on T's
rows (issue 28: at 50M records no generator needs the rows): the same draws in the same order
(a replay of the rows fit's transcript runs through), the same model (the same samples)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpbundle.mechanisms.cells import types_from_rows
from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.release.data.prepare import prepare
from dpbundle.release.data.transform import transform
from dpbundle.release.scheme.iteration import make_config_generator
from dpbundle.release.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
GENERATORS = [{"type": "privbayes", "flavour": "theta", "epsilon_split": 0.5, "theta": 8},
              {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.5, "theta": 8, "oneway": "measure"},
              {"type": "privsyn"}, {"type": "mst_pure"}, {"type": "aim_pure", "rounds_per_column": 1}]


@pytest.fixture(scope="module")
def births():
    spec = load_spec(ROOT / "examples" / "births.yaml")
    prepared = prepare(ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv", spec)
    columns = {c.name: c.alternative_ids[0] for c in spec.model.columns}
    return spec, prepared, columns


@pytest.mark.parametrize("gen", GENERATORS, ids=lambda g: "-".join(str(v) for v in g.values()))
def test_the_fit_on_record_types_is_the_fit_on_rows(births, gen):
    spec, prepared, columns = births
    config = {"columns": columns, "generator": gen, "projection": {"min_count": 2}}
    real = transform(prepared, spec, config)
    generator = make_config_generator(spec, config)
    assert getattr(generator, "FITS_TYPES", False), gen
    rows = np.array(real.codes)                         # plain rows: nothing remembered
    rec = Randomness(Transcript())
    a = make_config_generator(spec, config).fit(rows, real.domain, rec)
    types = types_from_rows(rows, real.columns)
    assert len(types.counts) < real.n                    # the types really are fewer
    rep = Randomness.replay(rec.transcript.records)
    b = make_config_generator(spec, config).fit(types.table.codes, real.domain, rep, counts=types.counts)
    rep.check_finished()
    sa = a.sample(5000, np.random.default_rng(1))
    sb = b.sample(5000, np.random.default_rng(1))
    assert np.array_equal(sa, sb)


def test_counts_must_match_the_rows():
    from dpbundle.mechanisms.generators import record_weights

    assert record_weights(np.array([1, 3]), 2).tolist() == [1.0, 3.0]
    for bad, rows in ((np.array([1, 0]), 2), (np.array([1]), 2), (np.array([2 ** 53]), 1)):
        with pytest.raises(ValueError, match="do not match"):
            record_weights(bad, rows)
