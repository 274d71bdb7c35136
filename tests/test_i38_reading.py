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


# ----------------------------------------------------------------------------- the audit's size limits


def _bundle_dir(tmp, n, data_bytes):
    import json as _json

    b = tmp / f"b{n}"
    b.mkdir()
    (b / "manifest.json").write_text(_json.dumps({"n": n}))
    (b / "data.csv").write_bytes(b"a\n" + b"x" * (data_bytes - 2))
    return b


def test_the_audits_limits_grow_with_the_manifests_n(tmp_path):
    """A bundle of hundreds of millions of rows (a 331M-row data.csv is 9.6 GB) is not refused
    by the 2 GB default when its manifest's n accounts for it; a claim of no rows does not."""
    from dpbundle.audit.bundle_io import MB, ROW_BYTES, BundleError, Limits, open_bundle, scaled_limits

    base = Limits(data_csv=2 * MB, total=2 * MB + MB // 5)
    for bad in (None, True, -1, "9", 1.5):
        assert scaled_limits(base, bad) is base
    assert scaled_limits(base, 100) is base                      # 100 rows fit the default
    big = scaled_limits(base, 10_000)
    assert big.data_csv == 10_000 * ROW_BYTES + MB and big.total - big.data_csv == base.total - base.data_csv
    with pytest.raises(BundleError, match="bytes in all"):
        open_bundle(_bundle_dir(tmp_path, 0, 5 * MB // 2), limits=base)
    with open_bundle(_bundle_dir(tmp_path, 10_000, 5 * MB // 2), limits=base) as b:
        assert b.limits.data_csv == big.data_csv
        assert len(b.read_bytes("data.csv")) == 5 * MB // 2


def test_a_zip_bundles_limits_grow_with_its_manifests_n(tmp_path):
    import json as _json
    import zipfile

    from dpbundle.audit.bundle_io import MB, BundleError, Limits, open_bundle

    base = Limits(data_csv=2 * MB, total=2 * MB + MB // 5)
    for n, ok in ((0, False), (10_000, True)):
        z = tmp_path / f"b{n}.zip"
        with zipfile.ZipFile(z, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr("manifest.json", _json.dumps({"n": n}))
            zf.writestr("data.csv", b"a\n" + b"x" * (5 * MB // 2))
        if ok:
            with open_bundle(z, limits=base) as b:
                assert b.files["data.csv"] == 5 * MB // 2 + 2
        else:
            with pytest.raises(BundleError, match="more than the limit"):
                open_bundle(z, limits=base)


# ----------------------------------------------------------------------------- the replay's parts


def _parts_dir(tmp, bad: bool = False):
    from dpbundle.release.data.example import example_csv

    d = tmp / ("bad" if bad else "parts")
    d.mkdir()
    for k in range(3):
        text = example_csv("births", 3000, 20 + k)
        if bad and k == 1:
            lines = text.split(b"\n")
            cells = lines[7].split(b",")
            cells[0] = b"abc"
            lines[7] = b",".join(cells)
            text = b"\n".join(lines)
        (d / f"part-{k}.csv").write_bytes(text)
    return d


def _spec_dict():
    import json as _json

    import audit_fixtures as fx
    from dpbundle.release.bundle.write import public_spec

    return _json.loads(_json.dumps(public_spec(fx.load_spec())))


def test_the_replay_reads_parts_in_parallel_processes_to_the_same_table(tmp_path, monkeypatch):
    from dpbundle.audit import private_data as pd_

    parts = _parts_dir(tmp_path)
    spec = _spec_dict()
    monkeypatch.delenv("DPBUNDLE_READ_WORKERS", raising=False)
    one = pd_.load_private(parts, spec)
    monkeypatch.setattr(pd_, "PARALLEL_BYTES", 0)
    monkeypatch.setenv("DPBUNDLE_READ_WORKERS", "2")
    assert pd_._read_workers(pd_.private_parts(parts)) == min(2, len(__import__("os").sched_getaffinity(0)))
    two = pd_.load_private(parts, spec)
    assert one.n == two.n and one.rows_read == two.rows_read
    assert np.array_equal(one.record_rows(), two.record_rows())
    for name in one.values:
        assert np.array_equal(one.values[name], two.values[name], equal_nan=True)


def test_a_bad_part_read_in_parallel_is_named_as_in_one_process(tmp_path, monkeypatch):
    from dpbundle.audit import private_data as pd_

    parts = _parts_dir(tmp_path, bad=True)
    spec = _spec_dict()
    monkeypatch.delenv("DPBUNDLE_READ_WORKERS", raising=False)
    with pytest.raises(pd_.PrivateDataError) as one:
        pd_.load_private(parts, spec)
    monkeypatch.setattr(pd_, "PARALLEL_BYTES", 0)
    monkeypatch.setenv("DPBUNDLE_READ_WORKERS", "2")
    with pytest.raises(pd_.PrivateDataError) as two:
        pd_.load_private(parts, spec)
    assert str(one.value) == str(two.value) and "part-1.csv" in str(two.value) and "abc" not in str(two.value)


def test_the_replays_private_file_limit_grows_with_n(tmp_path):
    """A 331M-row registry is a 9.8 GB CSV: the replay refused files above 4 GB."""
    from dpbundle.audit import private_data as pd_

    assert pd_.private_limit(None) == pd_.MAX_PRIVATE_BYTES == pd_.private_limit(True)
    assert pd_.private_limit(1000) == pd_.MAX_PRIVATE_BYTES
    assert pd_.private_limit(331_000_000) == 331_000_000 * pd_.PRIVATE_ROW_BYTES
    parts = _parts_dir(tmp_path)
    spec = _spec_dict()
    size = sum(p.stat().st_size for p in parts.iterdir())
    with pytest.raises(pd_.PrivateDataError, match="larger than"):
        pd_.load_private(parts, spec, limit=size // 4)
    assert pd_.load_private(parts, spec, limit=size).rows_read == 9000
