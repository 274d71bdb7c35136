"""Issue 38: a registry read to the spec's atoms (release/data/atoms.py, record_keys.py, and the
audit's own atoms in audit/private_data.py).

What must hold, whatever the data:
* the prepared table read to atoms gives, under every configuration, the record types, the
  plausible count and the raw constraints' drops of the table of the records themselves;
* the ledger fingerprint from the packed record keys is the fingerprint of the records
  (table_fingerprint on atoms=False), also across parts, several key words, a dictionary that
  leaves the dense table, and ids met over many chunks;
* two values share an atom exactly when every raw-constraint condition and every alternative's
  code agree on them (the definition, checked against code_column, not against atoms.py);
* the enclave replay's stored rows are atoms, and its codes those of the records.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from dpbundle.mechanisms.cells import types_of
from dpbundle.release.data import atoms as atoms_mod
from dpbundle.release.data import record_keys as keys_mod
from dpbundle.release.data.fingerprint import table_fingerprint
from dpbundle.release.data.parts import prepare_parts
from dpbundle.release.data.prepare import Prepared, prepare
from dpbundle.release.data.transform import cached_transform, code_column
from dpbundle.release.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"


def _births_rows(n: int, seed: int) -> list[str]:
    """Births-like rows with weights in grams, dates over two years, and some rows the raw
    constraints drop (missing values, light weights, implausible parity)."""
    rng = np.random.default_rng(seed)
    days = np.datetime64("2013-06-01") + rng.integers(0, 700, n)
    rows = []
    for i in range(n):
        age = int(rng.integers(12, 60))
        parity = int(rng.integers(1, 14))
        week = int(rng.integers(20, 46))
        weight = "NA" if rng.random() < 0.01 else str(int(rng.integers(300, 6000)))
        female = "True" if rng.random() < 0.5 else "False"
        rows.append(f"{age},{parity},{week},{female},{weight},{days[i]}")
    return rows


def _narrow_rows(n: int, seed: int) -> list[str]:
    """Records nearly all distinct (weights in grams, days of a year) in few atoms: mothers of
    30-31, parity 1-2, weeks 38-39, weights within 3,000-3,199 g (two 100 g bins)."""
    rng = np.random.default_rng(seed)
    days = np.datetime64("2014-01-01") + rng.integers(0, 365, n)
    return [f"{30 + rng.integers(0, 2)},{1 + rng.integers(0, 2)},{38 + rng.integers(0, 2)},"
            f"{'True' if rng.random() < 0.5 else 'False'},{3000 + rng.integers(0, 200)},{days[i]}" for i in range(n)]


def _write(path: Path, rows: list[str]) -> Path:
    path.write_text("mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth\n"
                    + "\n".join(rows) + "\n")
    return path


@pytest.fixture(scope="module")
def spec():
    return load_spec(BIRTHS)


def _configs(spec, limit: int = 40):
    cols = spec.model.columns
    for combo in itertools.islice(itertools.product(*[c.alternative_ids for c in cols]), limit):
        yield {"columns": dict(zip([c.name for c in cols], combo))}


def _same_release_input(a: Prepared, b: Prepared, spec) -> None:
    assert (a.n, a.rows_read, a.dropped_by, a.dropped_total) == (b.n, b.rows_read, b.dropped_by, b.dropped_total)
    for cfg in _configs(spec):
        ta, tb = types_of(cached_transform(a, spec, cfg)), types_of(cached_transform(b, spec, cfg))
        assert np.array_equal(ta.table.codes, tb.table.codes), cfg
        assert np.array_equal(ta.counts, tb.counts), cfg


def test_atoms_give_the_records_release_input_and_fingerprint(tmp_path, spec):
    path = _write(tmp_path / "b.csv", _births_rows(6000, 1))
    raw, atomized = prepare(path, spec, atoms=False), prepare(path, spec)
    assert atomized.atomized and not raw.atomized
    assert len(atomized.counts) < len(raw.counts)
    _same_release_input(raw, atomized, spec)
    assert table_fingerprint(atomized, spec) == table_fingerprint(raw, spec)


def test_distinct_rows_are_bounded_by_the_atoms_not_by_the_records(tmp_path, spec):
    """5,000 records, nearly all distinct, in 2 x 2 x 2 x 2 x 2 x 12 = 384 atom rows at most."""
    path = _write(tmp_path / "b.csv", _narrow_rows(5000, 11))
    raw, atomized = prepare(path, spec, atoms=False), prepare(path, spec)
    assert len(raw.counts) > 4000
    assert len(atomized.counts) <= 384
    _same_release_input(raw, atomized, spec)
    assert table_fingerprint(atomized, spec) == table_fingerprint(raw, spec)


def test_the_fingerprint_still_tells_records_apart(tmp_path, spec):
    """Two registries with the same atoms but one weight changed inside its bin: the release
    input is the same, the ledger fingerprint is not (it is of the records)."""
    rows = _births_rows(500, 2)
    i = next(k for k, r in enumerate(rows) if r.split(",")[4] not in ("NA",) and 2000 < int(r.split(",")[4]) < 5000)
    cells = rows[i].split(",")
    cells[4] = str(int(cells[4]) + 1)
    other = rows[:i] + [",".join(cells)] + rows[i + 1:]
    a, b = prepare(_write(tmp_path / "a.csv", rows), spec), prepare(_write(tmp_path / "b.csv", other), spec)
    assert table_fingerprint(a, spec) != table_fingerprint(b, spec)
    assert table_fingerprint(b, spec) == table_fingerprint(prepare(tmp_path / "b.csv", spec, atoms=False), spec)


def test_parts_give_the_fingerprint_of_the_whole_registry(tmp_path, spec):
    rows = _births_rows(3000, 3)
    whole = prepare(_write(tmp_path / "whole.csv", rows), spec, atoms=False)
    parts = tmp_path / "parts"
    parts.mkdir()
    for k in range(3):
        _write(parts / f"p{k}.csv", rows[k * 1000:(k + 1) * 1000])
    gathered = prepare_parts(parts, spec)
    assert table_fingerprint(gathered, spec) == table_fingerprint(whole, spec)
    _same_release_input(whole, gathered, spec)


def test_fingerprint_with_several_key_words_and_without_the_dense_table(tmp_path, spec, monkeypatch):
    """Narrow words force several words a record (lexsort path), small storage blocks make
    chunks straddle them, and a tiny dense span forces the sorted lookup (values as float
    bits) from the second chunk on."""
    path = _write(tmp_path / "b.csv", _births_rows(4000, 4))
    expected = table_fingerprint(prepare(path, spec, atoms=False), spec)
    monkeypatch.setattr(keys_mod, "_WORD_BITS", 12)
    monkeypatch.setattr(keys_mod, "STORE_ROWS", 97)       # chunks straddle storage blocks
    monkeypatch.setattr(atoms_mod, "DENSE_SPAN", 50)
    atomized = prepare(path, spec)
    assert table_fingerprint(atomized, spec) == expected
    _same_release_input(prepare(path, spec, atoms=False), atomized, spec)
    parts = tmp_path / "parts"
    parts.mkdir()
    rows = path.read_text().splitlines()
    _write(parts / "a.csv", rows[1:1500])
    _write(parts / "b.csv", rows[1500:])
    assert table_fingerprint(prepare_parts(parts, spec), spec) == expected      # compacted parts


def test_a_part_sends_back_its_records_without_their_order(tmp_path):
    """Under declared_public what a worker sends back does not depend on the order of the
    records: the same records reversed give the same words, values, atom rows and counts."""
    from dpbundle.release.data.parts import count_part

    spec = load_spec(BIRTHS)
    rows = _births_rows(3000, 9)
    a = count_part(str(_write(tmp_path / "a.csv", rows)), spec)
    b = count_part(str(_write(tmp_path / "b.csv", rows[::-1])), spec)
    assert a.index is None and b.index is None
    assert len(a.keys.runs) == len(b.keys.runs) == 1
    assert a.keys.runs[0][1:] == b.keys.runs[0][1:]
    wa = np.concatenate(a.keys.blocks[0])[:a.keys.rows]
    wb = np.concatenate(b.keys.blocks[0])[:b.keys.rows]
    assert np.all(np.diff(wa) >= 0) and np.array_equal(wa, wb)
    for n in a.keys.names:       # the values read, in their own order (not the order met)
        assert np.array_equal(a.keys.values[n].view(np.int64), b.keys.values[n].view(np.int64), equal_nan=False)
    for n in a.distinct:         # the atom rows and their counts, in the order of their values
        assert np.array_equal(a.distinct[n].view(np.int64), b.distinct[n].view(np.int64))
    assert np.array_equal(a.counts, b.counts)
    from dpbundle.release.data.record_keys import keys_fingerprint
    assert keys_fingerprint([a.keys]) == keys_fingerprint([b.keys])


def test_a_subset_of_an_atomized_table_has_no_fingerprint(tmp_path, spec):
    prepared = prepare(_write(tmp_path / "b.csv", _births_rows(300, 5)), spec)
    with pytest.raises(ValueError, match="atoms"):
        table_fingerprint(prepared.subset(np.arange(10)), spec)


def test_fingerprint_of_many_small_chunks_with_growing_dictionaries(spec):
    """The reader fed chunk by chunk (ids met late, widths growing between chunks): the keys'
    fingerprint is that of the concatenated records."""
    from dpbundle.release.data.atoms import AtomReader
    from dpbundle.release.data.record_keys import RecordKeys, keys_fingerprint

    rng = np.random.default_rng(6)
    n = 5000
    table = {
        "mother_age": rng.integers(15, 50, n).astype(float),
        "parity": rng.integers(1, 9, n).astype(float),
        "gestation_week": rng.integers(23, 44, n).astype(float),
        "is_female": rng.integers(0, 2, n).astype(float),
        "birth_weight": np.sort(rng.integers(700, 5400, n)).astype(float),     # new values all along
        "date_of_birth": np.datetime64("2014-01-01") + rng.integers(0, 365, n),
    }
    inputs = spec.model.input.by_name
    keys = RecordKeys(list(inputs), {k: m.type for k, m in inputs.items()}, {})
    reader = AtomReader(spec, keys)
    for s in range(0, n, 97):
        reader.add({k: v[s:s + 97] for k, v in table.items()})
    distinct, index = reader.finish()
    raw = Prepared("t", table, n, n)
    kept = int(raw.counts.sum())
    assert keys.rows <= kept
    # the raw constraints of the births spec drop some of these rows: compare with prepare's rule
    from dpbundle.release.data.prepare import _constrained
    expected = _constrained("t", raw.distinct, raw.index, n, spec, True, "")
    assert keys.rows == expected.n
    assert keys_fingerprint([keys]) == table_fingerprint(expected, spec)


@pytest.mark.parametrize("name", ["birth_weight", "mother_age", "gestation_week", "date_of_birth"])
def test_atoms_are_exactly_the_classes_the_spec_cannot_tell_apart(spec, name):
    """Every value of the column's range: two values share an atom iff every raw-constraint
    condition on the column and every alternative's code (code_column) agree on them."""
    from dpbundle.release.data.atoms import ColumnAtoms, atom_signatures
    from dpbundle.release.data.constraints import constraint_mask

    meta = spec.model.input.by_name[name]
    if meta.type == "date":
        values = np.datetime64("2013-01-01") + np.arange(0, 1100)
    else:
        values = np.arange(meta.min, meta.max + 1, dtype=float)
    col = ColumnAtoms(meta.type, atom_signatures(spec, name))
    _, atom = col.encode(values)
    reads = []
    for c in spec.model.all_raw_constraints:
        for cond in c.when or ():
            if cond[0] == name:
                reads.append(constraint_mask({"name": "x", "when": [list(cond)]}, {name: values},
                                             {name: meta.type}).astype(int))
    for rc in spec.model.columns:
        if rc.source.column != name:
            continue
        for alt in rc.alternative_ids:
            out = np.empty(len(values), dtype=np.int64)
            for i in range(len(values)):
                try:
                    out[i] = code_column(spec, rc.name, alt, {name: values[i:i + 1]})[0]
                except ValueError:
                    out[i] = -1
            reads.append(out)
    what = np.stack(reads, axis=1)
    _, by_reads = np.unique(what, axis=0, return_inverse=True)
    by_reads = by_reads.reshape(-1)
    # same atom <=> same reads: the two partitions of the values are the same
    pairs = set(zip(atom.tolist(), by_reads.tolist()))
    assert len(pairs) == len(set(atom.tolist())) == len(set(by_reads.tolist()))
    assert len(set(atom.tolist())) < len(values)


def test_the_replay_reads_to_atoms_and_bins_as_the_records(tmp_path, spec):
    """The audit's own reader: stored rows are atom rows (far fewer than the records) and every
    selected binning gives each record the code it gives the record's own values."""
    import json

    from dpbundle.audit import private_data as pd_
    from dpbundle.audit.labels import SpecView

    path = _write(tmp_path / "b.csv", _births_rows(4000, 7) + _narrow_rows(4000, 8))
    doc = spec.public_dict()
    inputs = doc["input"]["columns"]
    table = pd_.load_private(path, doc)
    stored = len(next(iter(table.values.values())))
    assert stored < 4000 + 384                     # the narrow half: 384 atom rows at most
    tokens = {c["name"]: {"NA"} for c in inputs}
    headers = {c["name"]: c["name"] for c in inputs}
    kinds = {c["name"]: c["type"] for c in inputs}
    cols, (mo, yr, dy), rows, index = pd_._read_private(path, inputs, tokens, headers, kinds)
    values = {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    cats = {c["name"]: [] for c in inputs}
    keep = ~pd_._raw_constraint_drop(doc, values, kinds, cats, len(values["mother_age"]))
    kept = pd_._kept_records(index, keep)
    raw = pd_.PrivateTable(values={k: v[keep] for k, v in values.items()},
                           months={k: np.asarray(v, float)[keep] for k, v in mo.items()},
                           years={k: np.asarray(v, float)[keep] for k, v in yr.items()},
                           days={k: np.asarray(v, float)[keep] for k, v in dy.items()},
                           kinds=kinds, n=int(kept.size), rows_read=rows, index=kept)
    assert raw.n == table.n
    for cfg in _configs(spec, 12):
        view = SpecView.__new__(SpecView)
        view.spec = doc
        view.columns = [type("C", (), {"name": k, "alternative": v})() for k, v in cfg["columns"].items()]
        a, _ = pd_.bin_private(table, view)
        b, _ = pd_.bin_private(raw, view)
        assert np.array_equal(a, b), cfg


def test_freed_arrays_go_back_to_the_system_on_glibc():
    """On this Linux machine (glibc) the mmap threshold is fixed and the heap trimmed; a 256 MB
    array freed after that leaves the resident size where it was before."""
    import platform

    from dpbundle.release.data.system_memory import give_back, large_arrays_mapped

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")

    def rss() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))

    assert large_arrays_mapped()
    before = rss()
    for _ in range(3):              # freed large blocks, which glibc would keep on its heap
        a = np.ones(1 << 25)
        del a
    give_back()
    assert rss() - before < 64 * 1024     # kB


@pytest.mark.parametrize("span", [1 << 22, 4])
def test_a_value_keeps_its_id_when_the_lookup_leaves_the_dense_table(monkeypatch, span):
    """Whole numbers first (dense table), then fractions or a wide span (sorted lookup), then
    the first values again: every value keeps the id it got first, missing values one id."""
    from dpbundle.release.data.atoms import ColumnAtoms

    monkeypatch.setattr(atoms_mod, "DENSE_SPAN", span)
    col = ColumnAtoms("float", None)
    first = np.array([3.0, 1.0, 3.0, 2.0])
    ids1, _ = col.encode(first)
    ids2, _ = col.encode(np.array([2.5, np.nan, 1.0, 1e9, np.nan]))
    ids3, _ = col.encode(first[::-1])
    assert ids1[0] == ids1[2] and len({int(i) for i in ids1}) == 3
    assert ids2[2] == ids1[1] and ids2[1] == ids2[4] and len({int(i) for i in ids2}) == 4
    assert not {int(i) for i in ids2} - {int(ids1[1])} & {int(i) for i in ids1}     # new values, new ids
    assert ids3.tolist() == ids1[::-1].tolist()
    values = col.values
    assert all(values[i] == v for i, v in zip(ids1, first))
