"""The enclave replay's national-scale tables (issue 28): stored rows + index give the records,
T's record types are those of T's rows (with and without the DP count's resize), and the
replayed data.csv written from an arrangement is the one written from the rows."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit import private_data  # noqa: E402
from dpbundle.audit.replay_data import PrivateCodes, arranged_csv_blocks, csv_blocks  # noqa: E402
from dpbundle.mechanisms.cells import types_from_rows  # noqa: E402
from dpbundle.mechanisms.coding import ColumnCoding  # noqa: E402
from dpbundle.mechanisms.records import resize_plan  # noqa: E402


def _columns(sizes):
    return tuple(ColumnCoding(f"c{j}", [f"v{i}" for i in range(k)], np.arange(k, dtype=float), True,
                              np.arange(k, dtype=float), np.arange(1, k + 1, dtype=float))
                 for j, k in enumerate(sizes))


@pytest.mark.parametrize("resize", [None, "down", "up"])
def test_private_types_are_the_types_of_the_rows(resize):
    rng = np.random.default_rng(5)
    sizes = [3, 5, 2, 7]
    for trial in range(20):
        stored = np.stack([rng.integers(0, k, size=40) for k in sizes], axis=1)
        stored[5] = stored[3]                       # a row stored twice (the memo started again)
        index = rng.integers(0, 40, size=int(rng.integers(1, 400)))
        plan = None
        if resize is not None:
            m = max(index.size + (-int(rng.integers(0, index.size)) if resize == "down" else int(rng.integers(1, 30))), 1)
            plan = resize_plan(index.size, m, len(sizes), rng)
        private = PrivateCodes(stored, index, plan, sizes)
        cols = _columns(sizes)
        got, want = private.types(cols), types_from_rows(private.rows(), cols)
        assert private.n == want.n
        assert np.array_equal(got.table.codes, want.table.codes) and np.array_equal(got.counts, want.counts)
        assert np.array_equal(got.cells, want.cells)


def test_the_memo_of_rows_changes_nothing_but_memory(tmp_path, monkeypatch):
    """Records in file order, the same binned codes, whether the memo holds every row or 3."""
    spec = fx.load_spec()
    lines = fx.example_registry(tmp_path / "r.csv", 1500, 4).read_bytes().splitlines(keepends=True)
    data = tmp_path / "twice.csv"
    data.write_bytes(b"".join([lines[0], *lines[1:], *lines[1:][::-1]]))     # every record twice
    full = private_data.load_private(data, spec, atoms=False)
    atoms_full = private_data.load_private(data, spec)
    monkeypatch.setattr(private_data, "MEMO_ROWS", 3)
    small = private_data.load_private(data, spec, atoms=False)
    atoms_small = private_data.load_private(data, spec)
    assert full.n == small.n and full.rows_read == small.rows_read == 3000
    stored_full, stored_small = (len(next(iter(t.values.values()))) for t in (full, small))
    assert stored_full <= full.n // 2 and stored_small > 1.9 * stored_full   # repeats stored once, or again
    # read to atoms, a row of atoms is stored once whatever the memo holds
    stored_atoms = [len(next(iter(t.values.values()))) for t in (atoms_full, atoms_small)]
    assert stored_atoms[0] == stored_atoms[1] <= stored_full
    for a, b in ((full, small), (atoms_full, atoms_small)):
        for name in a.values:
            assert np.array_equal(a.values[name][a.record_rows()], b.values[name][b.record_rows()], equal_nan=True)


def test_arranged_csv_is_the_rows_csv():
    class View:
        names = ["a", "b"]
        columns = [type("C", (), {"labels": ["x", "y,z", 'q"']})(), type("C", (), {"labels": ["1", "2"]})()]

    rng = np.random.default_rng(1)
    rows = np.array([[0, 0], [1, 1], [2, 0]])
    which = rng.integers(0, 3, size=5000)
    a = b"".join(arranged_csv_blocks(View, rows, which))
    b = b"".join(csv_blocks(View, np.take(rows, which, axis=0)))
    assert a == b and a.count(b"\n") == 5001 and b'"y,z"' in a


def test_the_replays_data_csv_is_the_releases():
    """The audit's writers (from rows, from an arrangement) give the bytes of the release's
    data.csv writer, quoted labels included."""
    from types import SimpleNamespace

    from dpbundle.release.bundle.data_csv import data_csv_bytes

    labels = [["x", "y,z", 'q"'], ["1", "2"], ["a b", "\u00e9"]]
    cols = [SimpleNamespace(name=f"c{j}", labels=lab) for j, lab in enumerate(labels)]
    view = SimpleNamespace(names=[c.name for c in cols], columns=cols)
    rng = np.random.default_rng(2)
    rows = np.array([[0, 0, 0], [1, 1, 1], [2, 0, 1]])
    which = rng.integers(0, 3, size=3000)
    full = np.take(rows, which, axis=0)
    want = data_csv_bytes(cols, full)
    assert b"".join(csv_blocks(view, full)) == want
    assert b"".join(arranged_csv_blocks(view, rows, which)) == want


@pytest.mark.parametrize("resize", [False, True])
def test_replayed_types_are_the_releases(resize):
    """PrivateCodes.types (audit) and the release's cached transform give the same record types
    of T, on the same prepared records (with the DP count's resize plan too)."""
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.data.transform import _distinct_codes, _types
    from dpbundle.release.spec.load import load_spec

    root = Path(__file__).resolve().parents[1]
    spec = load_spec(root / "examples" / "births.yaml")
    prepared = prepare(root / "examples" / "data" / "nvss2019_singleton_10k.csv", spec)
    config = {"columns": {c.name: c.alternative_ids[0] for c in spec.model.columns},
              "generator": {"type": "privbayes"}, "projection": {"min_count": 2}}
    if resize:
        plan = resize_plan(prepared.n, prepared.n + 37, len(spec.model.columns), np.random.default_rng(3))
        prepared = prepared.replaced(n=plan.m, resize=plan)
    cols, distinct_codes = _distinct_codes(prepared, spec, config)
    release_types = _types(prepared, cols, distinct_codes)
    private = PrivateCodes(distinct_codes, prepared.index, prepared.resize, [c.size for c in cols])
    audit_types = private.types(cols)
    assert np.array_equal(release_types.table.codes, audit_types.table.codes)
    assert np.array_equal(release_types.counts, audit_types.counts) and audit_types.n == prepared.n
