"""Canonical fingerprint of a prepared table: the key of the private budget ledger.

The SHA-256 of a data file's bytes changes when the same registry is exported again with other
column order, row order, quoting, whitespace, line ends or compression; the ledger would then
not see that budget was already spent on it. :func:`table_fingerprint` hashes what a release
actually reads instead, the prepared table (:class:`~dpbundle.release.data.prepare.Prepared`, after
validation and raw constraints), in a canonical form:

* a format tag (``FORMAT``), so the value cannot be confused with a file hash or another hash;
* the columns sorted by their input name;
* per column, its *dictionary*: the distinct values present, as canonical texts (numbers as
  their shortest decimal, ``30`` for an integral value; dates ``YYYY-MM-DD``; categories their
  declared text), sorted; each cell is coded by its rank in that dictionary;
* the multiset of coded rows, sorted lexicographically (little-endian int64, row-major).

The encoding is injective: equal fingerprints mean the same column names and the same multiset
of records (up to a SHA-256 collision), so any change of one record's prepared values changes it.
It depends on the values, not on how the spec declares them (category order, unused categories,
bounds, integer vs category typing of the same texts), so a spec edit of that kind does not
change it either. It does depend on which columns the spec reads and which rows its raw
constraints drop: the ledger therefore keeps the file hash as a second key.

The fingerprint is derived from private data (with a guess of all records but one, it confirms
the last): it is kept in the private ledger only, never printed and never put in a bundle.
"""
from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from dpbundle.release.data.csv_read import file_sha256  # noqa: F401  (also importable from here)
from dpbundle.release.data.record_keys import FORMAT, _json_line, _texts

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.release.data.prepare import Prepared
    from dpbundle.release.spec.model import Spec

__all__ = ["FORMAT", "table_fingerprint", "file_sha256"]



def table_fingerprint(prepared: "Prepared", spec: "Spec") -> str:
    """SHA-256 (hex) of the canonical serialisation of the prepared table (see the module doc),
    computed from its distinct rows and their counts: the sorted coded distinct rows, each
    repeated as often as it occurs, are the same bytes as the sorted coded rows. A table read
    to the spec's atoms (``prepared.atomized``) has it from its reading
    (:func:`~dpbundle.release.data.record_keys.keys_fingerprint`, the same value); a subset of
    such a table has none (ValueError)."""
    if getattr(prepared, "fingerprint", None) is not None:
        return prepared.fingerprint
    if getattr(prepared, "atomized", False):
        raise ValueError("this prepared table holds atoms, not records, and was not read whole: "
                         "it has no ledger fingerprint (prepare the records with atoms=False)")
    metas = spec.model.input.by_name
    names = sorted(prepared.distinct)
    counts = np.asarray(prepared.counts, dtype=np.int64)
    present = counts > 0                     # a subset may leave distinct rows without a record
    counts = counts[present]
    rows = int(counts.sum())
    h = hashlib.sha256()
    h.update(_json_line({"format": FORMAT, "columns": names, "rows": rows}))
    codes = np.empty((len(counts), len(names)), dtype="<i8")
    for j, name in enumerate(names):
        values = np.asarray(prepared.distinct[name])
        if len(values) != len(present):
            raise ValueError(f"prepared column {name!r} has another length than the others")
        meta = metas.get(name)
        kind = (meta.type if meta is not None else None) or ("date" if values.dtype.kind == "M" else "float")
        categories = list(meta.category_texts) if kind == "category" and meta is not None else []
        # np.unique sorts NaN/NaT last and keeps each once.
        uniq, inverse = np.unique(values[present], return_inverse=True)
        texts = _texts(kind, uniq, categories)
        dictionary = sorted(set(texts))
        rank = {t: i for i, t in enumerate(dictionary)}
        codes[:, j] = np.array([rank[t] for t in texts], dtype="<i8")[inverse.reshape(-1)]
        h.update(_json_line({"column": name, "values": dictionary}))
    if rows and names:
        order = np.lexsort(tuple(codes[:, j] for j in reversed(range(len(names)))))
        _hash_repeated(h, codes[order], counts[order])
    return h.hexdigest()


#: Rows hashed per update when the sorted rows are expanded by their counts.
HASH_BLOCK_ROWS = 1 << 16


def _hash_repeated(h: "hashlib._Hash", rows: np.ndarray, counts: np.ndarray) -> None:
    """``h.update(np.repeat(rows, counts, axis=0).tobytes())`` in blocks of about
    ``HASH_BLOCK_ROWS`` rows, never building the repeated array."""
    rows = np.ascontiguousarray(rows, dtype="<i8")
    ends = np.cumsum(counts)
    start = 0
    while start < len(rows):
        stop = int(np.searchsorted(ends, (ends[start - 1] if start else 0) + HASH_BLOCK_ROWS, side="right"))
        if stop == start:                      # one row occurring more than a block's worth
            row = rows[start].tobytes()
            left = int(counts[start])
            while left:
                k = min(left, HASH_BLOCK_ROWS)
                h.update(row * k)
                left -= k
            start += 1
            continue
        h.update(np.repeat(rows[start:stop], counts[start:stop], axis=0).tobytes())
        start = stop
