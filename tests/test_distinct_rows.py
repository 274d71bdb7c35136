"""The prepared table as distinct rows + per-row index (issue 28): the rows come back bit for bit,
reading in chunks changes nothing, and the fingerprint is the one of the full sorted table."""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from dpbundle.release.data import fingerprint as fp
from dpbundle.release.data.distinct import DistinctAccumulator, distinct_rows
from dpbundle.release.data.prepare import Prepared, prepare
from dpbundle.release.spec.load import load_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table(rng: np.random.Generator, rows: int, wide: bool = False) -> dict[str, np.ndarray]:
    """Columns of the three prepared dtypes with NaN, -0.0, NaT and -1 among the values."""
    k = 1 << 11 if wide else 7
    num = rng.integers(0, k, rows).astype(np.float64)
    num[rng.random(rows) < 0.05] = np.nan
    num[rng.random(rows) < 0.05] = -0.0
    dates = (np.datetime64("2019-01-01") + rng.integers(0, k, rows)).astype("datetime64[D]")
    dates[rng.random(rows) < 0.05] = np.datetime64("NaT")
    cats = rng.integers(-1, 4, rows).astype(np.int64)
    out = {"num": num, "date": dates, "cat": cats}
    if wide:   # 8 columns of 2^11 values each: the mixed-radix key overflows and is re-ranked
        out.update({f"x{i}": rng.integers(0, k, rows).astype(np.float64) for i in range(5)})
    return out


def _same_bits(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(np.ascontiguousarray(a[k]).view(np.int64), np.ascontiguousarray(b[k]).view(np.int64))
        for k in a)


@pytest.mark.parametrize("wide", [False, True])
def test_distinct_rows_give_back_every_row_bit_for_bit(wide):
    rng = np.random.default_rng(7)
    table = _table(rng, 20_000, wide)
    distinct, index = distinct_rows(table)
    assert _same_bits({k: v[index] for k, v in distinct.items()}, table)
    stacked = np.stack([np.ascontiguousarray(v).view(np.int64) for v in distinct.values()], axis=1)
    assert len(np.unique(stacked, axis=0)) == len(stacked)          # no row twice
    if not wide:
        assert len(stacked) < 20_000                                 # and it did reduce


def test_accumulator_reading_in_chunks_equals_the_whole():
    rng = np.random.default_rng(11)
    table = _table(rng, 30_000)
    acc = DistinctAccumulator(buffer_rows=1_000, merge_parts=3)
    for start in range(0, 30_000, 700):
        acc.add({k: v[start:start + 700] for k, v in table.items()})
    distinct, index = acc.finish({k: v[:0] for k, v in table.items()})
    assert _same_bits({k: v[index] for k, v in distinct.items()}, table)
    assert len(next(iter(distinct.values()))) == len(next(iter(distinct_rows(table)[0].values())))


def _reference_fingerprint(table: dict[str, np.ndarray], spec) -> str:
    """The documented format computed the direct way: every row coded and sorted."""
    metas = spec.model.input.by_name
    names = sorted(table)
    rows = len(table[names[0]])
    h = hashlib.sha256()
    h.update(json.dumps({"columns": names, "format": fp.FORMAT, "rows": rows}, separators=(",", ":")).encode() + b"\n")
    codes = np.empty((rows, len(names)), dtype="<i8")
    for j, name in enumerate(names):
        meta = metas[name]
        texts = [fp._texts(meta.type, np.array([v]), list(meta.category_texts) if meta.type == "category" else [])[0]
                 for v in table[name]]
        dictionary = sorted(set(texts))
        codes[:, j] = [dictionary.index(t) for t in texts]
        h.update(json.dumps({"column": name, "values": dictionary}, separators=(",", ":"),
                            ensure_ascii=False).encode() + b"\n")
    order = np.lexsort(tuple(codes[:, j] for j in reversed(range(len(names)))))
    h.update(codes[order].tobytes())
    return h.hexdigest()


@pytest.mark.parametrize("block", [3, fp.HASH_BLOCK_ROWS])
def test_fingerprint_from_counts_is_the_full_tables(monkeypatch, block):
    """Rows repeated more than a hash block (block 3) and the usual block size."""
    monkeypatch.setattr(fp, "HASH_BLOCK_ROWS", block)
    spec = load_spec(ROOT / "examples" / "births.yaml")
    prepared = prepare(ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv", spec, atoms=False)
    rng = np.random.default_rng(3)
    resampled = prepared.subset(rng.integers(0, 40, size=2_000))   # 40 distinct rows, ~50 copies each
    assert fp.table_fingerprint(resampled, spec) == _reference_fingerprint(resampled.table, spec)
    small = prepared.subset(np.arange(300))
    assert fp.table_fingerprint(small, spec) == _reference_fingerprint(small.table, spec)


def test_row_order_and_reduction_do_not_change_the_fingerprint(tmp_path):
    spec = load_spec(ROOT / "examples" / "births.yaml")
    src = (ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv").read_bytes().splitlines()
    rng = np.random.default_rng(5)
    body = [src[1 + i] for i in rng.permutation(len(src) - 1)]
    shuffled = tmp_path / "shuffled.csv"
    shuffled.write_bytes(b"\n".join([src[0], *body]) + b"\n")
    a = prepare(ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv", spec)
    b = prepare(shuffled, spec)
    assert a.n == b.n and a.dropped_by == b.dropped_by
    assert fp.table_fingerprint(a, spec) == fp.table_fingerprint(b, spec)
    raw = prepare(shuffled, spec, atoms=False)                     # the records' own values
    again = Prepared(raw.source, raw.table, raw.n, raw.rows_read)  # from the rows themselves
    assert fp.table_fingerprint(again, spec) == fp.table_fingerprint(a, spec)
