"""Record types: a coded table up to the order of its rows.

Every acceptance criterion and the face-privacy projection depend on a table only through the
number of records of each *record type* (distinct row). :class:`RecordTypes` holds them: the
distinct rows as a small :class:`Coded` (``table``, ascending in mixed-radix order), their counts,
and their cells (mixed-radix index over the public domain, C order: column 0 most significant).
A statistic sum_i g(row_i) over the n records is sum_t counts[t] * g(type_t): O(types), not O(n).

``types_of(coded)`` computes them once per :class:`Coded` object and remembers them in memory
only (a weak map: the entry goes with the object; nothing is ever written anywhere). Code that
already knows the types of a table it builds (the cached transformation, the projection) hands
them over with :func:`remember`.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .coding import Coded, ColumnCoding, mixed_radix_decode, mixed_radix_index

__all__ = ["RecordTypes", "types_of", "remember", "known_types", "types_from_cells",
           "types_from_rows", "domain_cells", "tabulate", "compact_dtype", "DENSE_CELLS",
           "DeferredCoded", "deferred", "retyped", "types_from_weighted", "fit_on_types"]

#: Domains of at most this many cells are tabulated with one ``np.bincount`` (8 bytes a cell).
DENSE_CELLS = 1 << 24
_MAX_INDEX = 1 << 62  # cell indices must fit int64 with room to spare


@dataclass(frozen=True, eq=False)
class RecordTypes:
    """Distinct records and their counts: ``table.codes[t]`` occurs ``counts[t]`` times.

    ``cells[t]`` = mixed-radix index of ``table.codes[t]`` (ascending, so ``table`` is sorted
    lexicographically); None when the domain has 2^62 cells or more (then ``table`` is sorted
    lexicographically all the same).
    """

    table: Coded
    counts: np.ndarray
    cells: np.ndarray | None

    @property
    def n(self) -> int:
        """Number of records: sum of the counts."""
        return int(self.counts.sum())

    @property
    def weights(self) -> np.ndarray:
        """The counts as float64 (exact below 2^53), for weighted sums."""
        return self.counts.astype(np.float64)

    def column_counts(self, j: int) -> np.ndarray:
        """int64 number of records with each code of column j: sum_t counts[t] [code_tj = c]."""
        size = self.table.columns[j].size
        return np.bincount(self.table.codes[:, j], weights=self.weights, minlength=size).astype(np.int64)


def domain_cells(domain: Sequence[int]) -> int | None:
    """Number of cells of a domain, or None when it reaches 2^62 (no int64 cell index)."""
    total = math.prod(int(s) for s in domain)
    return total if total < _MAX_INDEX else None


def compact_dtype(domain: Sequence[int]) -> np.dtype:
    """Smallest unsigned integer dtype holding every code of the domain."""
    return np.min_scalar_type(max(int(s) for s in domain) - 1) if domain else np.dtype(np.uint8)


def tabulate(cells: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct cells ascending, their int64 counts): one bincount over a small domain, else a
    sort (``np.unique`` with counts)."""
    cells = np.asarray(cells, dtype=np.int64)
    if size <= DENSE_CELLS and size <= 16 * cells.size + 65536:
        counts = np.bincount(cells, minlength=size)
        uniq = np.flatnonzero(counts)
        return uniq, counts[uniq].astype(np.int64)
    uniq, counts = np.unique(cells, return_counts=True)
    return uniq.astype(np.int64), counts.astype(np.int64)


def types_from_cells(cells: np.ndarray, columns: Sequence[ColumnCoding],
                     counts: np.ndarray | None = None) -> RecordTypes:
    """Record types of records given by their cells (or of distinct ``cells`` with ``counts``)."""
    domain = tuple(c.size for c in columns)
    size = domain_cells(domain)
    if size is None:
        raise OverflowError(f"domain of {math.prod(domain)} cells is too large for int64 cells")
    if counts is None:
        uniq, cnt = tabulate(cells, size)
    else:
        uniq, cnt = np.asarray(cells, np.int64), np.asarray(counts, np.int64)
    table = Coded(mixed_radix_decode(uniq, domain), tuple(columns))
    return RecordTypes(table, cnt, uniq)


def types_from_weighted(rows: np.ndarray, weights: np.ndarray, columns: Sequence[ColumnCoding]) -> RecordTypes:
    """Record types of ``rows`` (not necessarily distinct) standing for ``weights`` (>= 0, integer)
    records each: ``types_from_rows`` of every row repeated by its weight, without building them
    (the domain must have int64 cells)."""
    domain = tuple(c.size for c in columns)
    uniq, inverse = np.unique(mixed_radix_index(rows, domain), return_inverse=True)
    total = np.bincount(inverse.reshape(-1), weights=np.asarray(weights, dtype=np.float64), minlength=len(uniq))
    present = total > 0
    return types_from_cells(uniq[present], columns, np.rint(total[present]).astype(np.int64))


def types_from_rows(codes: np.ndarray, columns: Sequence[ColumnCoding]) -> RecordTypes:
    """Record types of coded rows (any integer dtype; the codes must lie in the domain)."""
    domain = tuple(c.size for c in columns)
    if domain_cells(domain) is not None:
        return types_from_cells(mixed_radix_index(codes, domain), columns)
    if codes.shape[0] == 0:
        return RecordTypes(Coded(np.zeros((0, len(domain)), np.int64), tuple(columns)),
                           np.zeros(0, np.int64), None)
    rows, cnt = np.unique(codes, axis=0, return_counts=True)
    return RecordTypes(Coded(rows, tuple(columns)), cnt.astype(np.int64), None)


_MEMO: "weakref.WeakKeyDictionary[Coded, RecordTypes]" = weakref.WeakKeyDictionary()


def remember(coded: Coded, types: RecordTypes) -> Coded:
    """Record that ``types`` are the record types of ``coded`` (the caller vouches); returns it."""
    if types.n != coded.n:  # (no counts in the message: they may be private)
        raise ValueError("the record types and the table have different numbers of records")
    _MEMO[coded] = types
    return coded


def types_of(coded: Coded) -> RecordTypes:
    """The record types of ``coded`` (computed once per object, kept in memory only)."""
    types = _MEMO.get(coded)
    if types is None:
        types = types_from_rows(coded.codes, coded.columns)
        remember(coded, types)
    return types


def known_types(codes: np.ndarray) -> RecordTypes | None:
    """The remembered record types of the table whose ``codes`` array this is, if any."""
    for coded, types in list(_MEMO.items()):
        if coded.__dict__.get("codes") is codes:   # (not ``coded.codes``: rows not yet written stay so)
            return types
    return None


class DeferredCoded(Coded):
    """A table held as its record types: its rows (int64 (n, d), read-only) are built the
    first time ``codes`` is read, by the builder given to :func:`deferred`, and only then;
    everything computed from the record types (``types_of``) never builds them."""

    @property
    def codes(self) -> np.ndarray:   # type: ignore[override]
        rows = self.__dict__.get("codes")
        if rows is None:
            rows = self.__dict__.pop("_make")()
            rows.setflags(write=False)
            self.__dict__["codes"] = rows
        return rows

    @property
    def n(self) -> int:
        return self.__dict__["_types"].n


def deferred(types: RecordTypes, make=None) -> Coded:
    """The table of ``types`` (their columns), rows built by ``make()`` if ever read (default:
    each type repeated by its count, in type order: for consumers of the multiset only)."""
    obj = DeferredCoded.__new__(DeferredCoded)
    object.__setattr__(obj, "columns", tuple(types.table.columns))
    obj.__dict__["_types"] = types
    obj.__dict__["_make"] = make or (lambda: np.ascontiguousarray(
        np.repeat(types.table.codes, types.counts, axis=0), dtype=np.int64))
    return remember(obj, types)


def retyped(types: RecordTypes, columns: Sequence[ColumnCoding]) -> RecordTypes:
    """The same record types with other column codings of the same sizes (e.g. the codebook's)."""
    columns = tuple(columns)
    if tuple(c.size for c in columns) != tuple(types.table.domain):
        raise ValueError("retyped: the columns' sizes differ from the record types' domain")
    return RecordTypes(Coded.unchecked(np.ascontiguousarray(types.table.codes, dtype=np.int64), columns),
                       types.counts, types.cells)


def fit_on_types(generator, coded: Coded, rand):
    """``generator.fit`` of the table ``coded``: on its record types when the generator fits on
    them (``FITS_TYPES``: the same counts, so the same fit and draws; its rows never built),
    else on its rows."""
    types = types_of(coded)
    if getattr(generator, "FITS_TYPES", False) and types.cells is not None:
        return generator.fit(types.table.codes, coded.domain, rand, counts=types.counts)
    return generator.fit(coded.codes, coded.domain, rand)
