"""Sampling a fitted model under the synthetic constraints: n records, as record types.

Post-processing of the DP model (no privacy cost). Every random draw comes from the recorded
generators ``rng_for(purpose)`` (``Randomness.rng`` in a release, the transcript's seeds in the
enclave replay, the beacon-bound seeds in the public re-derivation); the purposes are those of
every version: ``"sample round k"``, k = 0, 1, ...

Two samplers, both kept so that every bundle replays byte for byte with the one it was made with:

* **version 1, rows** (bundles made before the count sampler; ``release/scheme/iteration.py``
  ``sample_constrained``/``sample_cells`` and ``audit/replay.py``): each round draws m rows with
  ``model.sample(m, rng)``, drops those a synthetic constraint rules out, and the first n kept
  rows are the sample.
* **version 2, counts** (:func:`sample_types`): each round draws the *counts* of m records per
  record type with ``model.sample_counts(m, rng)`` (a model that has it: PrivBayes and pure MST,
  ``mechanisms/privbayes.py``; the cross-tabulation and marginals models,
  ``mechanisms/marginals.py``), drops the types a constraint rules out, and thins the last
  round's counts to the number still needed with one multivariate hypergeometric draw from the
  same round's generator. A model without ``sample_counts`` (PrivSyn, a raked model, AIM/MST
  through private-pgm) is sampled as in version 1 and its kept rows are tabulated: for it both
  versions give the same sample from the same seeds (below the round cap). The round sizes are
  those of version 1: m = max(ceil(1.1 need / max(rate, 0.05)), 16) (rate = the previous
  round's keep rate), at most :data:`MAX_SAMPLE_ROUNDS` rounds and :func:`max_drawn` records
  drawn in all (and at most :data:`MAX_ROUND` records a round, the most numpy's thinning takes:
  binding from n ~ 9 x 10^8 on).

* **version 3, a bounded base** (:func:`sample_types` with ``version=3`` and n >
  :data:`BASE_RECORDS`; a release records it only where the public rule :func:`public_sampler`
  says so, for a configuration whose generator makes records one by one (no ``sample_counts``)
  and n > B, otherwise it records version 2 and nothing changes): the model makes B =
  :data:`BASE_RECORDS` records as version 2 would make them (rounds "sample round k", the
  constraint filter, the draw bound 4 B + 128), and the n records are these B records, each
  repeated q = n // B times, plus r = n - q B of them once more, chosen uniformly without
  replacement (one multivariate hypergeometric draw from the generator ``"sample scale"``). A
  GUM or raking sampler then moves B records, not n: memory and time of the attempt stop growing
  with n (issue 38). The released distribution changes (the n records are a scaled copy of a
  B-record sample, not n fresh draws), hence a new version; every record type has a count
  q c_t + h_t (c_t its count among the B, h_t <= c_t), so the released 1-way and k-way shares are
  those of the B-record sample up to r/n, and the synthetic constraints hold for every record.
  The law of a share: a set of record types with C of the B base records (c = C / B) has, given
  C, H ~ Hypergeometric(B, C, r) of them among the r extra ones, so its share S = (q C + H) / n
  has E[S | C] = c (the base's share, unbiased) and Var[S | C] = r (B - r) / (B - 1) c (1 - c) / n^2,
  where r (B - r) / n^2 <= 1/8 for every n > B (the maximum at n = 4 B / 3; 0 when r = 0): the
  scaling adds at most 1 / (32 (B - 1)) to the base's variance (a standard deviation of 0.000086
  at B = 4,194,304). The base's own law is the model's: for B independent draws (C ~
  Binomial(B, p)) Var[S] = p (1 - p) / B (1 + r (B - r) / n^2), a standard error of at most
  sqrt(9/8 p (1 - p) / B) <= 0.000259; GUM and raking make their records jointly (fitted to
  marginals, not drawn independently), so for them Var[C / B] is that of the model's B records.
  All before the face-privacy projection (applied after the scaling, as in version 2). Measured
  through :func:`scale_counts` in tests/test_i38_review_sampler.py.

Where a transcript says which: an attempt sampled with version 2 or 3 has a mark ``"sampler"``
(``version: 2`` or ``3``) right before its first sampling seed; without it, version 1. A
published model (model.json) sampled with version 2 or 3 says ``"sampler": 2`` or ``3``
(:func:`model_sampler`).

Why version 2 has the distribution of version 1. Let p be the model's distribution over the
cells (record types), A the cells no constraint rules out, p(A) > 0, and q = p restricted to A
and renormalised: q_c = p_c / p(A) for c in A, 0 elsewhere.

1. Version 1 keeps the first n of i.i.d. draws X_1, X_2, ... ~ p that fall in A (a round's size
   depends only on earlier rounds, and its rows are fresh draws, so the concatenated rows are
   i.i.d. p). The first kept draw Y_1 is c in A with probability
   sum_{t >= 1} P(X_1, ..., X_{t-1} not in A) P(X_t = c) = sum_t (1 - p(A))^(t-1) p_c = q_c,
   and since the draws after it are again i.i.d. p and independent of it, Y_1, ..., Y_n are
   i.i.d. q. Their counts per cell are multinomial(n, q): the whole row sample up to its order,
   which the projection then shuffles (``mechanisms/projection.py``).
2. Version 2: a round's counts N ~ multinomial(m, p) are the counts of m i.i.d. draws. Given
   the number K = sum_{c in A} N_c of them in A, the counts on A are multinomial(K, q) (each of
   the K draws in A is, given that, a draw from q, independently). Given the totals of all
   rounds, the rounds are independent multinomials with the same q. In the last round, a
   multivariate hypergeometric draw of need = n - have of its K records is a uniformly random
   need-subset of K i.i.d. q draws, i.e. need i.i.d. q draws: multinomial(need, q). The sum of
   independent multinomials with the same q is multinomial(n, q), whatever the totals were, so
   it is unconditionally. The totals K of the rounds are Binomial(m, p(A)) in both versions, so
   a version fails (too many rounds, too many records drawn) exactly as often as the other.
3. ``sample_counts`` draws multinomial(m, p) without drawing rows. For a Bayesian network
   p(x) = prod_i P_i(x_i | pa_i(x)) (the columns in network order): the counts of the first
   column's values are multinomial(m, P_1); then every partial record type t (values of the
   first i columns) with count c_t is split by one multinomial(c_t, P_{i+1}( . | pa(t))). Given
   the counts of the prefixes, the next values of the c_t draws with prefix t are i.i.d.
   P_{i+1}( . | pa(t)), independently across t (they are different draws), so each split is
   exactly the law of the counts of ancestral samples, and the final counts are those of m
   i.i.d. draws from p: multinomial(m, p). A model with its distribution p over all cells
   draws ``rng.multinomial(m, p)`` directly.

The cost is that of the record types, not of the records: a split touches each partial type
once (at most min(m, cells) of them per column) and a round's constraint filter and thinning
work on its distinct types; the projection works on the types too, and only its final shuffle
writes n rows, when the released candidate's data.csv is written
(``projection.ArrangedCoded``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .cells import DENSE_CELLS, domain_cells
from .failures import AttemptFailure

__all__ = ["ROW_SAMPLER", "COUNT_SAMPLER", "SAMPLERS", "SAMPLER_MARK", "OVERSAMPLE",
           "MAX_SAMPLE_ROUNDS", "max_drawn", "round_size", "ConstraintShortfall", "DrawBoundExceeded",
           "counts_capable", "sample_types", "model_sampler", "set_model_sampler",
           "sampler_of_records", "split_counts", "counts_from_distribution", "BASE_SAMPLER",
           "BASE_RECORDS", "scale_counts", "ROW_MODEL_TYPES", "samples_rows",
           "public_sampler"]

ROW_SAMPLER, COUNT_SAMPLER, BASE_SAMPLER = 1, 2, 3
SAMPLERS = (ROW_SAMPLER, COUNT_SAMPLER, BASE_SAMPLER)
#: Version 3's base: the records a model without ``sample_counts`` makes when n is larger. Part
#: of version 3's definition (a bundle's replay depends on it): never change it, add a version.
BASE_RECORDS = 1 << 22   # 4,194,304
#: The transcript mark of an attempt sampled with version 2 or 3 (none: version 1).
SAMPLER_MARK = "sampler"

OVERSAMPLE = 1.1
MAX_SAMPLE_ROUNDS = 8
DRAWN_FACTOR, DRAWN_EXTRA = 4, 16 * 8   # at most 4 n + 128 records drawn in all (the audit's bound)

#: Cells of one block of multinomial splits (a (types, values) block of probabilities and counts).
SPLIT_BLOCK = 1 << 18
#: Most records one round of version 2 draws: numpy's multivariate hypergeometric ("marginals")
#: thins fewer than 10^9 records. Binding only for n above about 9 x 10^8 (then more rounds).
MAX_ROUND = 10**9 - 1

_ATTRIBUTE = "_dpbundle_sampler"

Implausible = Callable[[np.ndarray, np.ndarray], np.ndarray]


def max_drawn(n: int) -> int:
    """The most records an attempt draws from its model over all sampling rounds: 4 n + 128. The
    public audit re-derives data.csv under the same bound (audit/bounds.py), so a release never
    draws more than its audit allows; an attempt that would is a failed attempt."""
    return DRAWN_FACTOR * int(n) + DRAWN_EXTRA


def round_size(need: int, rate: float) -> int:
    """Records drawn by a round that still needs ``need``: max(ceil(1.1 need / max(rate, 0.05)), 16)."""
    return max(int(math.ceil(OVERSAMPLE * need / max(rate, 0.05))), 16)


class ConstraintShortfall(AttemptFailure):
    """The model's samples fail the synthetic constraints too often to keep n records."""


class DrawBoundExceeded(ConstraintShortfall):
    """The next round would draw more records in all than ``limit`` (:func:`max_drawn`)."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


def counts_capable(model: Any) -> bool:
    """Whether ``model``'s class samples counts (``sample_counts``). Looked up on the class: a
    wrapper that forwards unknown attributes (a raked model) does not inherit its base's."""
    return callable(getattr(type(model), "sample_counts", None))


# --------------------------------------------------------------------------- the version record


def model_sampler(model: Any) -> int:
    """The sampler version a fitted or published model was sampled with (1 unless set)."""
    return getattr(model, "__dict__", {}).get(_ATTRIBUTE, ROW_SAMPLER)


def set_model_sampler(model: Any, version: int) -> Any:
    """Record on ``model`` (in its own attributes, never a wrapped model's) the sampler version
    its sample was drawn with; returns it. model.json then says ``"sampler": version`` (2, 3)."""
    if version not in SAMPLERS:
        raise ValueError(f"unknown sampler version {version!r}; known: {SAMPLERS}")
    if version != ROW_SAMPLER or _ATTRIBUTE in getattr(model, "__dict__", {}):
        object.__setattr__(model, _ATTRIBUTE, int(version))
    return model


def sampler_of_records(records: Sequence[dict]) -> int:
    """The sampler version of one attempt's transcript records: the ``"sampler"`` mark's
    version, else 1 (transcripts made before the count sampler have no such mark)."""
    for rec in records:
        if rec.get("kind") == "mark" and rec.get("mark") == SAMPLER_MARK:
            version = rec.get("version")
            if version not in SAMPLERS or isinstance(version, bool):
                raise ValueError("the transcript's sampler mark names no known sampler version")
            return int(version)
    return ROW_SAMPLER


#: Generator types whose models make records one by one (no ``sample_counts``): PrivSyn's and
#: aim_pure's GUM, private-pgm's AIM and MST. PrivBayes with one-way raking (``oneway`` tables or
#: measure) too: its raking moves records. tests/test_i38_base_sampler.py checks this table
#: against :func:`counts_capable` of every generator's fitted model.
ROW_MODEL_TYPES = ("privsyn", "aim_pure", "aim", "mst")


def samples_rows(generator: Any) -> bool:
    """Whether a configuration's generator (``{"type": ..., hyperparameters}``, public in
    spec.json) fits a model without ``sample_counts``: a public function of the configuration."""
    if not isinstance(generator, dict):
        return False
    kind = generator.get("type")
    return kind in ROW_MODEL_TYPES or (kind == "privbayes" and generator.get("oneway", "none") != "none")


def public_sampler(generator: Any, n: int, domain: Sequence[int] | None = None) -> int:
    """The sampler a release of dpbundle 0.4 or later uses for this public configuration's
    generator and n records, from public facts only: 3 (a bounded base) for a generator whose
    model has no ``sample_counts`` (:func:`samples_rows`) when n > :data:`BASE_RECORDS`, else 2.

    ``domain`` (the released columns' sizes, public in spec.json): a domain of 2^62 cells or
    more has no int64 cell index, and the iteration (``release/scheme/iteration.py``
    ``_sample_and_project``) then samples n rows with version 1 and records no mark; given the
    domain, the rule says so (1). Without it the rule assumes a narrower domain."""
    if domain is not None and domain_cells(tuple(int(s) for s in domain)) is None:
        return ROW_SAMPLER
    return BASE_SAMPLER if samples_rows(generator) and int(n) > BASE_RECORDS else COUNT_SAMPLER


def scale_counts(counts: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Version 3's n records from a base of B = sum(counts) records: every base record q = n // B
    times, and r = n - q B base records, a uniformly random r-subset (a multivariate
    hypergeometric draw from ``rng``), once more. Returns the new counts (int64, same order);
    they sum to n, and each is q c_t + h_t with 0 <= h_t <= c_t."""
    counts = np.asarray(counts, dtype=np.int64)
    base = int(counts.sum())
    if base <= 0:
        raise ValueError("scale_counts: the base has no records")
    q, r = divmod(int(n), base)
    extra = rng.multivariate_hypergeometric(counts, r, method="marginals").astype(np.int64)
    return q * counts + extra


# --------------------------------------------------------------------------- counts of a model


def split_counts(counts: np.ndarray, probs: np.ndarray, rows: np.ndarray,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One multinomial split per partial type: type t (count ``counts[t]``) splits into
    multinomial(counts[t], probs[rows[t]]) over the next column's values. Returns (type index,
    value, count) of the positive parts, types ascending, values ascending within a type.
    Drawn in blocks of :data:`SPLIT_BLOCK` cells, in order (the same draws as one call)."""
    k = probs.shape[1]
    step = max(1, SPLIT_BLOCK // k)
    ts, xs, cs = [], [], []
    for s in range(0, counts.shape[0], step):
        out = rng.multinomial(counts[s:s + step], probs[rows[s:s + step]])
        t, x = np.nonzero(out)
        ts.append(t + s)
        xs.append(x)
        cs.append(out[t, x])
    if not ts:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return (np.concatenate(ts).astype(np.int64), np.concatenate(xs).astype(np.int64),
            np.concatenate(cs).astype(np.int64))


def counts_from_distribution(p: np.ndarray, domain: Sequence[int], m: int,
                             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """multinomial(m, p) over the flat cells of ``domain`` (p sums to 1, C order): (distinct
    cells' rows, their counts)."""
    from .coding import mixed_radix_decode

    m = _check_m(m)
    counts = rng.multinomial(m, p)
    cells = np.flatnonzero(counts)
    return mixed_radix_decode(cells, domain), counts[cells].astype(np.int64)


def _check_m(m: Any) -> int:
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
        raise ValueError(f"the number of records to sample must be an integer >= 0, got {m!r}")
    return int(m)


# --------------------------------------------------------------------------- version 2


class _Rounds:
    """The rounds of one sample: sizes, the draw bound, what was kept so far."""

    def __init__(self, n: int, limit: int) -> None:
        self.n, self.limit = n, limit
        self.have, self.rate, self.drawn = 0, 1.0, 0
        self.cells: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []

    def next_size(self, k: int) -> int:
        m = min(round_size(self.n - self.have, self.rate), MAX_ROUND)
        if self.drawn + m > self.limit:
            raise DrawBoundExceeded(
                f"round {k} would draw {m} more records, beyond {self.limit} in all (4 n + 128): "
                "the model's samples fail the synthetic constraints too often", self.limit)
        self.drawn += m
        return m

    def keep(self, m: int, got: int, cells: np.ndarray, counts: np.ndarray) -> None:
        self.rate = max(got / m, 1e-6)
        self.have += int(counts.sum())
        self.cells.append(cells)
        self.counts.append(counts)


def sample_types(model: Any, n: int, domain: Sequence[int], implausible: Implausible | None,
                 rng_for: Callable[[str], np.random.Generator],
                 limit: int | None = None,
                 version: int = COUNT_SAMPLER) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Version 2 (or 3): n records of ``model`` that no synthetic constraint rules out, as record
    types (see the module docstring): (rows (types, d) int64, counts int64, cells), ascending in
    cell.

    ``implausible(rows, cells)``: mask of the distinct rows a constraint rules out (None: no
    constraint). ``rng_for(purpose)``: the recorded generator of a purpose. ``limit``: records
    drawn in all (default :func:`max_drawn`). Raises :class:`DrawBoundExceeded` before a round
    that would draw beyond it, :class:`ConstraintShortfall` after :data:`MAX_SAMPLE_ROUNDS`.
    ``version`` 3 with n > :data:`BASE_RECORDS` makes the base of B records (at most 4 B + 128
    drawn) and scales it to n (:func:`scale_counts`, the generator ``"sample scale"``), whatever
    the model (the release asks for 3 only where :func:`public_sampler` says so); at or below
    the base 3 draws as 2."""
    if version not in (COUNT_SAMPLER, BASE_SAMPLER):
        raise ValueError(f"sample_types draws with sampler 2 or 3, not {version!r}")
    if version == BASE_SAMPLER and int(n) > BASE_RECORDS:
        base_limit = max_drawn(BASE_RECORDS) if limit is None else min(int(limit), max_drawn(BASE_RECORDS))
        rows, counts, cells = _sample_types(model, BASE_RECORDS, domain, implausible, rng_for, base_limit)
        return rows, scale_counts(counts, n, rng_for("sample scale")), cells
    return _sample_types(model, n, domain, implausible, rng_for, limit)


def _sample_types(model: Any, n: int, domain: Sequence[int], implausible: Implausible | None,
                  rng_for: Callable[[str], np.random.Generator],
                  limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    domain = tuple(int(s) for s in domain)
    if domain_cells(domain) is None:
        raise OverflowError("sample_types: the domain has too many cells for int64 cell indices")
    rounds = _Rounds(int(n), max_drawn(n) if limit is None else int(limit))
    by_counts = counts_capable(model)
    for k in range(MAX_SAMPLE_ROUNDS):
        m = rounds.next_size(k)
        rng = rng_for(f"sample round {k}")
        need = rounds.n - rounds.have
        if by_counts:
            got, cells, counts = _counts_round(model, m, need, domain, implausible, rng)
        else:
            got, cells, counts = _rows_round(model, m, need, domain, implausible, rng)
        rounds.keep(m, got, cells, counts)
        if rounds.have >= rounds.n:
            return _merge(rounds.cells, rounds.counts, domain)
    raise ConstraintShortfall(f"after {MAX_SAMPLE_ROUNDS} rounds only {rounds.have} of {n} sampled "
                              "records satisfy the synthetic constraints")


def _radix(domain: tuple[int, ...]) -> np.ndarray:
    return np.asarray([math.prod(domain[j + 1:]) for j in range(len(domain))], dtype=np.int64)


def _cells_of(rows: np.ndarray, domain: tuple[int, ...]) -> np.ndarray:
    """Cells of sampled rows; ValueError if a code lies outside the domain."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.ndim != 2 or rows.shape[1] != len(domain):
        raise ValueError(f"the generator sampled an array of shape {rows.shape}, not (m, {len(domain)})")
    if (rows.view(np.uint64) >= np.asarray(domain, dtype=np.uint64)).any():  # negative = huge unsigned
        raise ValueError("the generator sampled codes outside the domain")
    return rows @ _radix(domain)   # = mixed_radix_index(rows, domain), exact in int64


def _counts_round(model: Any, m: int, need: int, domain: tuple[int, ...],
                  implausible: Implausible | None, rng: np.random.Generator):
    """One round of a counts model: (records kept before thinning, cells, counts) of the kept
    types, ascending; the counts thinned to ``need`` if more were kept."""
    rows, counts = model.sample_counts(m, rng)
    counts = np.asarray(counts, dtype=np.int64)
    cells = _cells_of(rows, domain)
    if counts.shape != cells.shape or (counts < 0).any() or int(counts.sum()) != m:
        raise ValueError("the generator's sample_counts did not return one count >= 0 per type, "
                         "summing to the records asked for")
    order = np.argsort(cells, kind="stable")
    cells, counts, rows = cells[order], counts[order], rows[order]
    if cells.size > 1 and not (cells[1:] > cells[:-1]).all():
        raise ValueError("the generator's sample_counts returned a record type twice")
    if implausible is not None and cells.size:
        ok = ~np.asarray(implausible(rows, cells), dtype=bool)
        cells, counts = cells[ok], counts[ok]
    got = int(counts.sum())
    if got > need:
        counts = rng.multivariate_hypergeometric(counts, need, method="marginals").astype(np.int64)
        keep = counts > 0
        cells, counts = cells[keep], counts[keep]
    return got, cells, counts


def _rows_round(model: Any, m: int, need: int, domain: tuple[int, ...],
                implausible: Implausible | None, rng: np.random.Generator):
    """One round of a rows model, as version 1 draws it: (rows kept, cells of the first ``need``
    kept rows in order, ones)."""
    if implausible is not None and getattr(model, "accepts_keep", False):  # a raking model
        def plausible(rows: np.ndarray) -> np.ndarray:
            rows = np.asarray(rows, dtype=np.int64)
            return ~np.asarray(implausible(rows, _cells_of(rows, domain)), dtype=bool)

        rows = model.sample(m, rng, keep=plausible)
    else:
        rows = model.sample(m, rng)
    cells = _cells_of(rows, domain)
    if implausible is not None and cells.size:
        cells = cells[~np.asarray(implausible(np.asarray(rows, np.int64), cells), dtype=bool)]
    got = int(cells.size)
    cells = cells[:need]
    return got, cells, np.ones(cells.size, dtype=np.int64)


def _merge(cells: list[np.ndarray], counts: list[np.ndarray], domain: tuple[int, ...]):
    """(rows, counts, cells) of the rounds' kept types added up, ascending in cell."""
    from .coding import mixed_radix_decode

    c, w = np.concatenate(cells), np.concatenate(counts)
    size = math.prod(domain)
    if size <= DENSE_CELLS and size <= 16 * c.size + 65536:
        total = np.bincount(c, weights=w, minlength=size)
        uniq = np.flatnonzero(total)
        tot = total[uniq]
    else:
        uniq, inverse = np.unique(c, return_inverse=True)
        tot = np.bincount(inverse.reshape(-1), weights=w, minlength=uniq.size)
    tot = np.rint(tot).astype(np.int64)   # integer sums < 2^53: exact in float64
    keep = tot > 0
    uniq, tot = uniq[keep].astype(np.int64), tot[keep]
    return mixed_radix_decode(uniq, domain), tot, uniq
