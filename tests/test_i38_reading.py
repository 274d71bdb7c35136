"""Issue 38: reading a registry at national scale in bounded memory: the kept records' index
remapped in blocks, the index pieces joined without a second copy (both exactly the one-shot
numpy forms they replace)."""
from __future__ import annotations

import numpy as np
import pytest



@pytest.mark.parametrize("block", [3, 1 << 24])
def test_kept_index_is_the_one_shot_remap(monkeypatch, block):
    from dpbundle.release.data import distinct

    monkeypatch.setattr(distinct, "REMAP_BLOCK", block)
    rng = np.random.default_rng(4)
    for size, n in ((1, 5), (7, 100), (50, 1001), (3, 0)):
        index = rng.integers(0, size, n).astype(np.int32)
        keep = rng.random(size) < 0.6
        want = (np.cumsum(keep) - 1)[index[keep[index]]]
        got = distinct.kept_index(index, keep)
        assert np.array_equal(got, want) and got.dtype == np.int32


def test_join_indices_concatenates_and_empties_the_list():
    from dpbundle.release.data.distinct import join_indices

    pieces = [np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int64), np.zeros(0, np.int32)]
    want = np.concatenate(pieces).astype(np.int32)
    got = join_indices(pieces, np.int32)
    assert np.array_equal(got, want) and got.dtype == np.int32 and pieces == []


@pytest.mark.parametrize("block", [2, 1 << 24])
def test_the_audits_kept_records_is_the_one_shot_remap(monkeypatch, block):
    from dpbundle.audit import private_data

    monkeypatch.setattr(private_data, "KEEP_BLOCK", block)
    rng = np.random.default_rng(9)
    for size, n in ((1, 4), (9, 77), (40, 1000)):
        index = rng.integers(0, size, n).astype(np.int32)
        keep = rng.random(size) < 0.5
        want = (np.cumsum(keep) - 1)[index[keep[index]]]
        got = private_data._kept_records(index, keep)
        assert np.array_equal(got, want) and got.dtype == np.int32
