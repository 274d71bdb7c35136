"""Face-privacy projection: every released record appears at least `min_count` times.

Post-processing only (no privacy budget): the output holds only records present in the input,
has the same number of rows n, and is shuffled so that row order reveals nothing.

Algorithm (m = min_count; "type" = a distinct full record, with count c in the input):

1. Common types (c >= m) are kept exactly as they are.
2. Rare types (0 < c < m) hold R = n - (rows of common types) rows. Write R = m*K + r with
   K = R // m and 0 <= r < m.
3. If R == 0 there is nothing to do. If R >= m (so K >= 1): choose exactly K rare types by
   systematic sampling (exact integer arithmetic, over the rare types in a random order) with
   inclusion probabilities P_t = K*c_t/R (each <= 1 since c_t < m <= R/K). Each chosen type gets
   m rows, and the r remaining rows go, one by one, to chosen types drawn uniformly at random.
   Then E[count_t] = m*P_t + P_t*(r/K) = c_t*(m*K + r)/R = c_t: every rare type keeps its expected
   count exactly, every common type its count, and the total is exactly n. When r == 0, P_t is
   the natural c_t/m (a rare type is raised to m with probability c_t/m, else removed).
4. If 0 < R < m, no rare type can reach m rows within the rare rows, so the expectations cannot
   be kept: every rare type is removed and the R freed rows go to common types (each an extra
   copy of a common record drawn uniformly among the common rows, i.e. proportionally to the
   counts). This is the only case in which a common type's count changes (it only grows).
5. n < m is impossible (no type can reach m rows): ValueError.

Types are found with a mixed-radix integer key (np.unique on one int64 column) when the domain
fits in 63 bits, else np.unique(axis=0); the output is np.repeat of the types, then
rng.permutation. :func:`project_types` does steps 1-5 on record types (sorted distinct rows and
counts, e.g. from one np.bincount of cell indices) and :func:`arrange` the final shuffle:
``arrange(project_types(types of codes, m, rng), rng)`` is ``project(codes, m, rng)`` exactly
(same types in the same order, the same draws in the same order).
"""
from __future__ import annotations

import numpy as np

from .cells import RecordTypes, remember
from .coding import Coded
from .failures import AttemptFailure

__all__ = ["ProjectionError", "project", "record_types", "project_types", "arrange", "project_counts",
           "ArrangedCoded", "arranged"]


class ProjectionError(ValueError):
    """The projection is impossible or its input is unusable."""


class TooFewRecords(ProjectionError, AttemptFailure):
    """Fewer records than min_count: no table of that size has every record min_count times.
    The size is public (the declared n, or the DP count of records), so this is a failed attempt
    (a function of DP outputs), not an internal error."""


def record_types(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows (sorted, as an (k, d) int64 array) and their counts."""
    n, d = codes.shape
    if n == 0:
        return codes.reshape(0, d), np.zeros(0, dtype=np.int64)
    lo = codes.min(axis=0)
    span = (codes.max(axis=0) - lo + 1).astype(object)  # Python ints: no overflow in the check
    total = 1
    for s in span:
        total *= int(s)
    if total < 2**63:
        keys = np.zeros(n, dtype=np.int64)
        for j in range(d):  # mixed-radix key, column 0 most significant (same order as rows)
            keys *= int(span[j])
            keys += codes[:, j] - lo[j]
        keys.sort()
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        counts = np.diff(np.r_[starts, n])
        uniq = keys[starts]
        types = np.empty((len(uniq), d), dtype=np.int64)
        for j in range(d - 1, -1, -1):  # decode the keys back into rows
            uniq, types[:, j] = np.divmod(uniq, int(span[j]))
            types[:, j] += lo[j]
        return types, counts.astype(np.int64)
    types, counts = np.unique(codes, axis=0, return_counts=True)
    return types, counts.astype(np.int64)


def _out_counts(counts: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Output count of each type (see the module docstring for the algorithm)."""
    out = counts.copy()
    rare = np.flatnonzero(counts < m)
    if rare.size == 0:
        return out
    c = counts[rare]
    R = int(c.sum())
    K, r = divmod(R, m)
    out[rare] = 0
    if K == 0:  # 0 < R < m: expectations cannot be kept; give the rows to common records
        common = np.flatnonzero(counts >= m)
        p = counts[common] / counts[common].sum()
        out[common] += rng.multinomial(R, p)
        return out
    order = rng.permutation(rare.size)
    cum = np.cumsum(K * c[order])               # integers, total K*R
    start = int(rng.integers(0, R))             # systematic sampling, step R, exact
    points = start + R * np.arange(K, dtype=np.int64)
    chosen = order[np.searchsorted(cum, points, side="right")]
    extra = np.bincount(rng.integers(0, K, size=r), minlength=K) if r else np.zeros(K, np.int64)
    out[rare[chosen]] = m + extra
    return out


def project(codes: np.ndarray, min_count: int, rng: np.random.Generator) -> np.ndarray:
    """Face-privacy projection of coded records: same n, every output record type >= min_count.

    codes: int (n, d) array of records; min_count: the minimum count (>= 1); rng: the seeded
    post-processing generator. Returns a new shuffled int64 (n, d) array.
    """
    codes = np.asarray(codes)
    if codes.ndim != 2:
        raise ProjectionError(f"project: codes must be a 2-d array (n, d), got shape {codes.shape}")
    if codes.dtype.kind not in "iu":
        raise ProjectionError(f"project: codes must be integers, got dtype {codes.dtype}")
    if isinstance(min_count, bool) or int(min_count) != min_count or min_count < 1:
        raise ProjectionError(f"project: min_count must be an integer >= 1, got {min_count!r}")
    if not isinstance(rng, np.random.Generator):
        raise ProjectionError("project: rng must be a numpy Generator (seeded by the caller)")
    m = int(min_count)
    n = codes.shape[0]
    if n < m:
        raise TooFewRecords(
            f"project: impossible: {n} records cannot all appear at least min_count={m} times")
    codes = codes.astype(np.int64, copy=False)
    types, counts = record_types(codes)
    return _shuffled(types, _out_counts(counts, m, rng), rng)


def _shuffled(types: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """np.repeat(types, counts, axis=0)[rng.permutation(n)], gathering rows of the small types
    table once (the same array, the same single draw): ``rng.permutation(n)`` is
    ``rng.shuffle(np.arange(n))``, and shuffling the type indices in place makes the same swaps
    (the same draws), so it gives ``which[rng.permutation(n)]`` without the n-long permutation."""
    return np.take(types, shuffled_types(counts, rng), axis=0)


def shuffled_types(counts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The type of each row of :func:`_shuffled`'s output (int32 while there are fewer than
    2^31 types): ``np.repeat(arange(k), counts)`` shuffled in place by ``rng``."""
    k = len(counts)
    which = np.repeat(np.arange(k, dtype=np.int32 if k < 2**31 else np.int64), counts)
    rng.shuffle(which)
    return which


def project_types(types: RecordTypes, min_count: int, rng: np.random.Generator) -> RecordTypes:
    """Steps 1-5 of the projection on record types (sorted, as :func:`record_types` gives them):
    the output's record types (those with a count > 0), drawing from ``rng`` as :func:`project`
    does before its shuffle."""
    m = int(min_count)
    if isinstance(min_count, bool) or m != min_count or m < 1:
        raise ProjectionError(f"project: min_count must be an integer >= 1, got {min_count!r}")
    if types.n < m:
        raise TooFewRecords(
            f"project: impossible: {types.n} records cannot all appear at least min_count={m} times")
    out = _out_counts(types.counts, m, rng)
    keep = np.flatnonzero(out)
    table = types.table.with_codes(types.table.codes[keep])
    return RecordTypes(table, out[keep], None if types.cells is None else types.cells[keep])


def arrange(types: RecordTypes, rng: np.random.Generator) -> np.ndarray:
    """The records of ``types`` in a uniformly random order (int64 (n, d)): the last step of
    :func:`project`, continuing the same ``rng``."""
    return _shuffled(types.table.codes, types.counts, rng)


def project_counts(rows: np.ndarray, counts: np.ndarray, min_count: int,
                   rng: np.random.Generator) -> np.ndarray:
    """:func:`project` of the records given by their types: ``rows`` (distinct, sorted as
    :func:`record_types` gives them) occurring ``counts`` (>= 1) times. Returns the shuffled int64
    (n, d) output, drawing from ``rng`` as ``arrange(project_types(...), rng)`` does (the
    enclave replay and the public re-derivation of a count-sampled bundle)."""
    _, which = project_counts_order(rows, counts, min_count, rng)
    return np.take(np.ascontiguousarray(rows, dtype=np.int64), which, axis=0)


def project_counts_order(rows: np.ndarray, counts: np.ndarray, min_count: int,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`project_counts` without its rows: (the output count of each of ``rows``, the row
    of ``rows`` at each output position), the same draws; the output is
    ``np.take(rows, which, axis=0)``."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if rows.ndim != 2 or counts.shape != (rows.shape[0],) or (counts < 1).any():
        raise ProjectionError("project: the record types and their (positive) counts do not match")
    if isinstance(min_count, bool) or int(min_count) != min_count or min_count < 1:
        raise ProjectionError(f"project: min_count must be an integer >= 1, got {min_count!r}")
    if not isinstance(rng, np.random.Generator):
        raise ProjectionError("project: rng must be a numpy Generator (seeded by the caller)")
    m, n = int(min_count), int(counts.sum())
    if n < m:
        raise TooFewRecords(
            f"project: impossible: {n} records cannot all appear at least min_count={m} times")
    out = _out_counts(counts, m, rng)
    return out, shuffled_types(out, rng)


class ArrangedCoded(Coded):
    """A projected table C held as its record types: its rows, the records of the types in a
    uniformly random order (:func:`arrange` with the projection's generator), are written the
    first time ``codes`` is read, and only then. Everything computed from the record types (the
    criteria, ``n``, the columns) never writes them: an attempt that is not released never
    does, the released one when data.csv is written. The rows do not depend on when they are
    written: the generator is the projection's own, used by nothing else."""

    @property
    def codes(self) -> np.ndarray:   # type: ignore[override]
        rows = self.__dict__.get("codes")
        if rows is None:
            types, which = self.arrangement()
            rows = np.take(types.table.codes, which, axis=0)
            self.__dict__["codes"] = rows
        return rows

    def arrangement(self) -> tuple[RecordTypes, np.ndarray]:
        """(the record types, the type of each row in the rows' order): the rows without
        writing them (4 bytes a row; ``np.take(types.table.codes, which, axis=0)`` are the
        rows). The order is drawn on the first call (or the first read of ``codes``)."""
        which = self.__dict__.get("_which")
        if which is None:
            which = self.__dict__["_which"] = shuffled_types(self.__dict__["_types"].counts,
                                                            self.__dict__.pop("_rng"))
        return self.__dict__["_types"], which

    @property
    def n(self) -> int:
        return self.__dict__["_types"].n

    @property
    def written(self) -> bool:
        """Whether the rows' order has been drawn (the rows written or their arrangement read)."""
        return "codes" in self.__dict__ or "_which" in self.__dict__


def arranged(types: RecordTypes, rng: np.random.Generator) -> Coded:
    """C = ``arrange(types, rng)`` as an :class:`ArrangedCoded` (rows written on first use), with
    its record types remembered (``cells.types_of``)."""
    obj = ArrangedCoded.__new__(ArrangedCoded)
    object.__setattr__(obj, "columns", tuple(types.table.columns))
    obj.__dict__["_types"] = types
    obj.__dict__["_rng"] = rng
    return remember(obj, types)
