"""Atoms of the input columns: a registry read to what the spec can tell apart.

The release reads an input value only through (a) the missing test, (b) the raw constraints'
conditions on its column, and (c) the codes of every released column that reads it, under every
alternative of that column (:func:`~dpbundle.release.data.binning.code_column`: its derive, clip
range and bin edges; for a ``dp_edges`` alternative, whose edges are drawn later, its place among
the candidate edges, :func:`~dpbundle.release.data.binning.grid_signature`). Two values of one input column that give the same result in all of these
are interchangeable: putting one in place of the other changes no dropped record, no code of any
configuration, hence no T, no record type, no bundle. An *atom* is such a class of values, and
its *signature* the tuple of those results.

:class:`AtomReader` reads a registry chunk by chunk to each record's atoms (each atom stands as
its smallest value in the registry), so that the prepared table's distinct rows are
bounded by the spec's atoms, not by n: a simulated births registry with weights in grams has
nearly as many distinct records as rows, but with the births spec 20 million records read to
about a million atom rows, a number that grows ever slower towards the spec's bound. Integer, float and date columns are read to atoms; booleans and categories keep each
value (they have few).

The ledger's fingerprint is of the records themselves, not of their atoms (it must not depend on
the spec's bins): :class:`AtomReader` also keeps each plausible record's values as ids packed in
int64 words (:mod:`dpbundle.release.data.record_keys`, 8 bytes a record), from which
:func:`~dpbundle.release.data.record_keys.keys_fingerprint` computes exactly the value
:func:`~dpbundle.release.data.fingerprint.table_fingerprint` gives on the raw records.

Each value is looked up once per chunk: by a dense table over its integer span (integers, whole
numbers, dates; spans up to :data:`DENSE_SPAN`), otherwise by a sorted array of the values seen.
The signature is computed once per distinct value, on the first chunk that holds it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from dpbundle.release.data.constraints import constraint_mask, is_missing as _missing
from dpbundle.release.data.distinct import REMAP_BLOCK, distinct_rows, index_dtype

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.release.data.record_keys import RecordKeys
    from dpbundle.release.spec.model import Spec

__all__ = ["AtomReader", "ColumnAtoms", "atom_signatures", "joined_representatives", "DENSE_SPAN"]

#: the widest integer span a column is looked up in by a dense table (4 bytes an entry)
DENSE_SPAN = 1 << 22
_ATOMIZED = ("integer", "float", "date")


def atom_signatures(spec: "Spec", name: str) -> Callable[[np.ndarray], np.ndarray]:
    """The signature function of input column ``name``: typed values (k,) -> int64 (k, m), one
    row per value, equal for two values exactly when the release cannot tell them apart (the
    module doc): [missing, each raw-constraint condition on the column, the code of each
    released column reading it under each of its alternatives (-2 for a missing value, -1 for a
    value the alternative cannot code: such a record is refused or dropped before any code is
    used)]."""
    from dpbundle.release.data.binning import code_column, grid_signature
    from dpbundle.release.spec.typed import as_constraint

    model = spec.model
    meta = model.input.by_name[name]
    kind = meta.type
    kinds = {name: kind}
    cats = {name: list(meta.category_texts)} if kind == "category" else None
    conditions = [as_constraint({"name": "atom", "when": [list(cond)]})
                  for c in model.all_raw_constraints for cond in (c.when or ()) if cond[0] == name]
    binnings = [(col.name, alt) for col in model.columns if col.source.column == name
                for alt in col.alternative_ids]

    def codes(col: str, alt: str, values: np.ndarray) -> np.ndarray:
        if model.column(col).alternative(alt).undrawn:     # dp_edges: the candidates' grid
            return grid_signature(spec, col, alt, {name: values})
        try:
            return code_column(spec, col, alt, {name: values})
        except (ValueError, IndexError):      # some value outside every bin: value by value
            out = np.empty(len(values), dtype=np.int64)
            for i in range(len(values)):
                try:
                    out[i] = code_column(spec, col, alt, {name: values[i:i + 1]})[0]
                except (ValueError, IndexError):
                    out[i] = -1
            return out

    def signature(values: np.ndarray) -> np.ndarray:
        missing = _missing(kind, values)
        out = np.full((len(values), 1 + len(conditions) + len(binnings)), -2, dtype=np.int64)
        out[:, 0] = missing
        for j, cond in enumerate(conditions, start=1):
            out[:, j] = constraint_mask(cond, {name: values}, kinds, missing=_missing, categories=cats,
                                         specials=model.input.special_limits)
        present = values[~missing]
        for j, (col, alt) in enumerate(binnings, start=1 + len(conditions)):
            if len(present):
                out[~missing, j] = codes(col, alt, present)
        return out
    return signature


class ColumnAtoms:
    """One input column's values seen so far: an id for each distinct value (chunk by chunk in
    order of first appearance, a chunk's new values in value order; ``values`` by id), and each value's atom (``atom_values``: each atom's
    smallest value). ``signature=None``: each value is its own atom."""

    def __init__(self, kind: str, signature: Callable[[np.ndarray], np.ndarray] | None) -> None:
        self.kind, self.signature = kind, signature
        self._values: list[np.ndarray] = []
        self.size = 0                                   # distinct values seen
        self._atom_of = np.zeros(64, dtype=np.int64)    # by id (the first ``size`` entries; grows by doubling)
        self._atoms: dict[bytes, int] = {}
        self.atoms = 0
        self._missing_id = -1
        self._lo: int | None = None                     # dense table: ids of lo, lo + 1, ...
        self._table = np.zeros(0, dtype=np.int32)
        self._dense = True
        self._lookup = SortedLookup()     # once the dense table is left

    # -- results ---------------------------------------------------------------------------
    @property
    def values(self) -> np.ndarray:
        """Every distinct value seen, by id."""
        if len(self._values) > 1:
            self._values = [np.concatenate(self._values)]
        return self._values[0] if self._values else np.zeros(0, dtype=_dtype(self.kind))

    @property
    def atom_values(self) -> np.ndarray:
        """Each atom's representative, by atom: the smallest value seen in it (so the same
        records, however split or ordered, give the same representatives)."""
        values = self.values
        if not len(values):
            return values
        order = np.argsort(values, kind="stable")            # NaN / NaT last
        atoms, first = np.unique(self._atom_of[:self.size][order], return_index=True)
        out = np.empty(self.atoms, dtype=values.dtype)
        out[atoms] = values[order[first]]
        return out

    # -- reading ---------------------------------------------------------------------------
    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each row's value id, each row's atom), int64, for one chunk of typed values."""
        missing = _missing(self.kind, values)
        if not missing.any():
            ids = self._present_ids(values)
            return ids, self._atom_of[ids]
        if self._missing_id < 0:
            self._missing_id = self._new_values(values[np.flatnonzero(missing)[:1]])[0]
        ids = np.full(len(values), self._missing_id, dtype=np.int64)
        ids[~missing] = self._present_ids(values[~missing])
        return ids, self._atom_of[ids]

    def _integers(self, values: np.ndarray) -> np.ndarray | None:
        """Present values as the integers the dense table is indexed by (dates: days), or None
        when they are not all whole numbers."""
        if self.kind == "date":
            return values.view(np.int64)
        if self.kind == "category":
            return values.astype(np.int64, copy=False)
        if np.abs(values).max() < 2**53:
            ints = values.astype(np.int64)
            if np.array_equal(ints, values):
                return ints
        return None

    def _sort_keys(self, values: np.ndarray) -> np.ndarray:
        """Present values as the keys of the sorted lookup (dates: days; numbers: float64 bits)."""
        if self.kind in ("date", "category"):
            return self._integers(values)
        return np.ascontiguousarray(values, dtype=np.float64).view(np.int64)

    def _present_ids(self, values: np.ndarray) -> np.ndarray:
        if not len(values):
            return np.zeros(0, dtype=np.int64)
        if self._dense:
            ints = self._integers(values)
            if ints is not None and self._fits(int(ints.min()), int(ints.max())):
                return self._dense_ids(values, ints)
            self._leave_dense()
        return self._lookup.ids_of(self._sort_keys(values), lambda at: self._new_values(values[at]))

    def _fits(self, lo: int, hi: int) -> bool:
        if self._lo is None:
            return hi - lo < DENSE_SPAN
        return max(hi, self._lo + len(self._table) - 1) - min(lo, self._lo) < DENSE_SPAN

    def _dense_ids(self, values: np.ndarray, keys: np.ndarray) -> np.ndarray:
        lo, hi = int(keys.min()), int(keys.max())
        if self._lo is None:
            self._lo, self._table = lo, np.full(hi - lo + 1, -1, dtype=np.int32)
        elif lo < self._lo or hi >= self._lo + len(self._table):
            new_lo = min(lo, self._lo)
            table = np.full(max(hi, self._lo + len(self._table) - 1) - new_lo + 1, -1, dtype=np.int32)
            table[self._lo - new_lo:self._lo - new_lo + len(self._table)] = self._table
            self._lo, self._table = new_lo, table
        offsets = keys - self._lo
        ids = self._table[offsets]
        unseen = ids < 0
        if unseen.any():
            fresh, first = np.unique(offsets[unseen], return_index=True)
            self._table[fresh] = self._new_values(values[np.flatnonzero(unseen)[first]])
            ids = self._table[offsets]
        return ids.astype(np.int64)

    def _leave_dense(self) -> None:
        """From the dense table to the sorted lookup (the values' keys as float64 bits, or as
        integers for dates and categories)."""
        self._dense = False
        offsets = np.flatnonzero(self._table >= 0)
        if self._lo is not None and len(offsets):
            keys = offsets.astype(np.int64) + self._lo       # the values (numbers: whole)
            if self.kind not in ("date", "category"):
                keys = self._sort_keys(keys.astype(np.float64))
            self._lookup.insert(keys, self._table[offsets].astype(np.int64))
        self._table = np.zeros(0, dtype=np.int32)

    def _new_values(self, values: np.ndarray) -> np.ndarray:
        """Ids for values not seen before (distinct), their atoms found or made."""
        start = self.size
        self._values.append(np.array(values, copy=True))
        self.size += len(values)
        if self.signature is None:
            atoms = np.arange(self.atoms, self.atoms + len(values), dtype=np.int64)
            self.atoms += len(values)
        else:
            sig = np.ascontiguousarray(self.signature(values))
            atoms = np.empty(len(values), dtype=np.int64)
            for i in range(len(values)):
                key = sig[i].tobytes()
                atom = self._atoms.get(key)
                if atom is None:
                    atom = self._atoms[key] = self.atoms
                    self.atoms += 1
                atoms[i] = atom
        if self.size > len(self._atom_of):
            grown = np.zeros(max(self.size, 2 * len(self._atom_of)), dtype=np.int64)
            grown[:start] = self._atom_of[:start]
            self._atom_of = grown
        self._atom_of[start:self.size] = atoms
        return np.arange(start, self.size, dtype=np.int64)


#: keys met since the last merge into the large sorted run (looked up in a small run of their own)
RECENT_ROWS = 4096


def _merged(keys: np.ndarray, ids: np.ndarray, new_keys: np.ndarray, new_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted run ``keys`` (with ``ids``) with ``new_keys`` (distinct, none in ``keys``)
    inserted in order: O(len(keys)) copying, no sort of the large run."""
    order = np.argsort(new_keys, kind="stable")
    new_keys, new_ids = new_keys[order], new_ids[order]
    at = np.searchsorted(keys, new_keys)
    return np.insert(keys, at, new_keys), np.insert(ids, at, new_ids)


class SortedLookup:
    """int64 keys -> ids, for keys arriving in batches: a large sorted run and a small one of
    the keys inserted since the last merge (merged into the large one by insertion every
    :data:`RECENT_ROWS` keys, so no batch sorts the large run)."""

    def __init__(self) -> None:
        self.keys = self.ids = np.zeros(0, dtype=np.int64)
        self.recent_keys = self.recent_ids = np.zeros(0, dtype=np.int64)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The id of each key (distinct keys), -1 where unknown."""
        ids = np.full(len(keys), -1, dtype=np.int64)
        for run_keys, run_ids in ((self.keys, self.ids), (self.recent_keys, self.recent_ids)):
            at = np.searchsorted(run_keys, keys)
            found = at < len(run_keys)
            found[found] = run_keys[at[found]] == keys[found]
            ids[found] = run_ids[at[found]]
        return ids

    def ids_of(self, keys: np.ndarray, new: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The id of each of ``keys`` (repeats allowed): the known ones looked up; the others
        numbered by ``new(first)`` (``first``: where each unknown key first occurs in ``keys``)
        and inserted."""
        uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        ids = self.find(uniq)
        unseen = ids < 0
        if unseen.any():
            ids[unseen] = new(first[unseen])
            self.insert(uniq[unseen], ids[unseen])
        return ids[inverse.reshape(-1)]

    def insert(self, keys: np.ndarray, ids: np.ndarray) -> None:
        """Add keys not known yet (distinct), with their ids."""
        self.recent_keys, self.recent_ids = _merged(self.recent_keys, self.recent_ids, keys, ids)
        if len(self.recent_keys) >= RECENT_ROWS:
            self.keys, self.ids = _merged(self.keys, self.ids, self.recent_keys, self.recent_ids)
            self.recent_keys, self.recent_ids = self.recent_keys[:0], self.recent_ids[:0]


def _dtype(kind: str):
    return {"date": "datetime64[D]", "category": np.int64}.get(kind, np.float64)


#: records of one block of the record index (4 MB); the blocks are joined at the end
INDEX_BLOCK = 1 << 20
#: records looked up at a time (one sort of their keys; 48 MB of codes for six columns)
BUFFER_ROWS = 1 << 20
_KEY_BITS = 62


class AtomRows:
    """The distinct rows of atom codes met chunk by chunk, each numbered once and for all (as
    they are first met, a buffer's new rows in key order), and each record's row number (4 bytes a record, kept in blocks):
    no record's number is ever rewritten as rows arrive, so reading holds the index once.

    A chunk's rows are looked up by an int64 key that packs each column's code in a fixed
    number of bits; when a column's codes outgrow their bits, the known rows' keys are packed
    again (atoms stop appearing early in a reading: a few times in all). Rows wider than 62
    bits are looked up by their bytes in a dict instead (slower; a spec of many columns)."""

    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.bits = [1] * len(self.names)
        self.codes = np.zeros((64, len(self.names)), dtype=np.int64)   # each known row's codes
        self.size = 0
        self._lookup = SortedLookup()                   # packed key -> row
        self._by_bytes: dict[bytes, int] | None = None  # the wide-row lookup, once packed keys do not fit
        self._blocks: list[np.ndarray] = []
        self._filled = 0                                # records in the last block
        self.records = 0
        self._buffer: list[np.ndarray] = []             # chunks not yet looked up
        self._buffered = 0

    def add(self, codes: dict[str, np.ndarray]) -> None:
        """One chunk's codes (looked up :data:`BUFFER_ROWS` records at a time)."""
        rows = len(codes[self.names[0]]) if self.names else 0
        if not rows:
            return
        self._buffer.append(np.stack([np.asarray(codes[n], dtype=np.int64) for n in self.names], axis=1))
        self._buffered += rows
        if self._buffered >= BUFFER_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        matrix = self._buffer[0] if len(self._buffer) == 1 else np.concatenate(self._buffer)
        self._buffer, self._buffered = [], 0
        if self._by_bytes is None:
            need = [max(1, int(m).bit_length()) for m in matrix.max(axis=0)]
            if any(n > b for n, b in zip(need, self.bits)):
                self.bits = [max(b, n + 1) for b, n in zip(self.bits, need)]   # room to grow
                if sum(self.bits) > _KEY_BITS:
                    self._by_bytes = {self.codes[i].tobytes(): i for i in range(self.size)}
                else:
                    self._repack()
        rows = self._rows_of(matrix)
        self._append(rows)

    def _key(self, matrix: np.ndarray) -> np.ndarray:
        key = np.zeros(len(matrix), dtype=np.int64)
        for j, b in enumerate(self.bits):
            key = (key << b) | matrix[:, j]
        return key

    def _repack(self) -> None:
        self._lookup = SortedLookup()
        self._lookup.insert(self._key(self.codes[:self.size]), np.arange(self.size, dtype=np.int64))

    def _rows_of(self, matrix: np.ndarray) -> np.ndarray:
        if self._by_bytes is not None:
            uniq, first, inverse = np.unique(matrix, axis=0, return_index=True, return_inverse=True)
            ids = np.empty(len(uniq), dtype=np.int64)
            for i, row in enumerate(uniq):
                key = row.tobytes()
                got = self._by_bytes.get(key)
                if got is None:
                    got = self._by_bytes[key] = self._new_rows(row[None, :])[0]
                ids[i] = got
            return ids[inverse.reshape(-1)]
        return self._lookup.ids_of(self._key(matrix), lambda at: self._new_rows(matrix[at]))

    def _new_rows(self, rows: np.ndarray) -> np.ndarray:
        start = self.size
        self.size += len(rows)
        if self.size > len(self.codes):
            grown = np.zeros((max(self.size, 2 * len(self.codes)), len(self.names)), dtype=np.int64)
            grown[:start] = self.codes[:start]
            self.codes = grown
        self.codes[start:self.size] = rows
        return np.arange(start, self.size, dtype=np.int64)

    def _append(self, rows: np.ndarray) -> None:
        done = 0
        while done < len(rows):
            if not self._blocks or self._filled == INDEX_BLOCK:
                self._blocks.append(np.empty(INDEX_BLOCK, dtype=np.int64 if self.size >= 2**31 else np.int32))
                self._filled = 0
            block = self._blocks[-1]
            k = min(len(rows) - done, INDEX_BLOCK - self._filled)
            if block.dtype == np.int32 and self.size >= 2**31:     # pragma: no cover - 2^31 atom rows
                block = self._blocks[-1] = block.astype(np.int64)
            block[self._filled:self._filled + k] = rows[done:done + k]
            self._filled += k
            done += k
        self.records += len(rows)

    def finish(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(each distinct row's codes by column, each record's row in reading order); the
        blocks are released as they are joined."""
        self._flush()
        dtype = index_dtype(self.size)
        index = np.empty(self.records, dtype=dtype)
        at = 0
        self._blocks.reverse()
        while self._blocks:
            block = self._blocks.pop()
            k = min(INDEX_BLOCK, self.records - at)
            index[at:at + k] = block[:k]
            at += k
            del block
        return {n: self.codes[:self.size, j].copy() for j, n in enumerate(self.names)}, index


class AtomReader:
    """The chunks of a registry read to their atoms (see the module doc): ``add`` each chunk's
    typed columns (before the raw constraints), then ``finish`` gives the distinct atom rows
    (each atom as its representative value: ``Prepared.distinct``) and each row's index into
    them in reading order. With ``keys`` (a :class:`~dpbundle.release.data.record_keys.RecordKeys`),
    the value ids of the rows no raw constraint drops are kept there too (the fingerprint's
    material)."""

    def __init__(self, spec: "Spec", keys: "RecordKeys | None" = None) -> None:
        inputs = spec.model.input.by_name
        self.names = list(inputs)
        self.kinds = {n: m.type for n, m in inputs.items()}
        self.columns = {n: ColumnAtoms(m.type, atom_signatures(spec, n) if m.type in _ATOMIZED else None)
                        for n, m in inputs.items()}
        self.constraints = list(spec.model.all_raw_constraints)
        self.categories = {n: list(m.category_texts) for n, m in inputs.items() if m.type == "category"}
        self.specials = spec.model.input.special_limits
        self.acc = AtomRows(self.names)
        self.keys = keys

    def add(self, table: dict[str, np.ndarray]) -> None:
        rows = len(next(iter(table.values()))) if table else 0
        if not rows:
            return
        ids, atoms = {}, {}
        for name in self.names:
            ids[name], atoms[name] = self.columns[name].encode(table[name])
        self.acc.add(atoms)
        if self.keys is not None:
            drop = np.zeros(rows, dtype=bool)
            for c in self.constraints:
                drop |= constraint_mask(c, table, self.kinds, missing=_missing, categories=self.categories,
                                      specials=self.specials)
            keep = ~drop
            self.keys.add({n: ids[n][keep] for n in self.names}, {n: self.columns[n].size for n in self.names})

    def finish(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """(the distinct atom rows, each as its representatives, in the order of their values,
        as :func:`~dpbundle.release.data.distinct.distinct_rows` orders rows; each record's
        index into them, in reading order)."""
        codes, index = self.acc.finish()
        distinct = {n: self.columns[n].atom_values[codes[n]] if len(codes[n]) else np.zeros(0, dtype=_dtype(self.kinds[n]))
                    for n in self.names}
        if len(index):      # rows in the order of their values, not of the atoms' first reading
            distinct, order = distinct_rows(distinct)
            for s in range(0, len(index), REMAP_BLOCK):
                index[s:s + REMAP_BLOCK] = order[index[s:s + REMAP_BLOCK]]
        if self.keys is not None:
            self.keys.set_values({n: self.columns[n].values for n in self.names})
        return distinct, index


def joined_representatives(spec: "Spec", tables: list[dict[str, np.ndarray]],
                           seen: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """The distinct atom rows of several readings of one registry (its parts: ``tables``, each
    reading's ``distinct``; ``seen``: every value each reading met, by column) with each atom
    as its smallest value over all the readings: the representatives one reading of the whole
    registry gives, so that the parts' table is the single file's."""
    out = [dict(t) for t in tables]
    for name, meta in spec.model.input.by_name.items():
        if meta.type not in _ATOMIZED:
            continue
        values = np.unique(np.concatenate([s[name] for s in seen]))          # sorted, NaN / NaT last
        if not len(values):
            continue
        _, group = np.unique(atom_signatures(spec, name)(values), axis=0, return_inverse=True)
        group = group.reshape(-1)
        _, first = np.unique(group, return_index=True)       # each group's first value: its smallest
        smallest = values[first[group]]
        for t in out:
            at = np.searchsorted(values, t[name])
            t[name] = smallest[at]
    return out
