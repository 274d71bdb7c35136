"""The number of records: a DP count of the plausible records, and the resize to it.

Raw constraints (plausibility rules) drop records before anything else. The number that remains,
``n``, would be the number of rows of data.csv. Two policies (``privacy.records.policy``):

``declared_public`` (the 2024 births release, paper section 2.3.2)
    n is published exactly. The guarantee then covers registries *with the same number of
    plausible records* that differ in one record: moving a record across a plausibility rule
    changes n by one, and n tells whether a record passed the rules.

``dp_count`` (the default)
    n is released as a DP count and the filtered table is resized to it before the selection.

Derivation for ``dp_count`` (input relation: change one record of the registry R).

* Filter.  F = {r in R : r passes every raw constraint}. Change one record r -> r':
  both pass: F, F' differ in one record (change-one, |F| = |F'|); both fail: F = F'; exactly
  one passes: F' = F plus or minus one record (add/remove one, ||F| - |F'|| = 1). So the filter
  maps change-one distance 1 to symmetric distance <= 2 and count distance <= 1.
* Count.  |F| has sensitivity 1 (absolute distance) under a change of one registry record.
  m = max(|F| + Z, 1) with Z discrete Laplace of scale 1/eps_count (OpenDP ``make_laplace`` on
  i64): eps_count-DP; the max is post-processing.
* Resize (for a fixed, public m).  Shuffle F uniformly, keep the first min(m, |F|) records,
  append max(m - |F|, 0) pad records drawn from a public, data-independent rule, shuffle the m
  rows. A coupling of resize(F) and resize(F') that always yields tables of m records at
  change-one distance <= 1:
  - |F| = |F'| (one record changed): use the same permutation; the kept sets differ in at most
    the changed record, the pads are equal.
  - F' = F + {x}, m <= |F|: a uniform m-subset S' of F'; if x is in S', replace it with a
    uniform record of F \\ S' (non-empty: |F| >= m > |S' \\ {x}|). The result is a uniform
    m-subset of F and differs from S' in one record.
  - F' = F + {x}, m > |F|: F' keeps all |F| + 1 records and m - |F| - 1 pads; F keeps its |F|
    records and m - |F| pads: the same pads but one, against x.
  The final shuffle makes the order uniform in both, so any mechanism M that is eps-DP under
  change-one on tables of m records gives an eps-DP M o resize (average over the coupling).
  This is OpenDP's ``make_resize`` (symmetric distance, a constant as pad) with a uniform
  subsample and a random pad; here the rows are shuffled so that positions carry nothing.
* Composition.  The count is released first (eps_count), the selection runs on resize(F, m)
  with m fixed: total = eps_count + 2 x (eps_gen + eps_eval) (+ pre-selection epsilons).

Pad records: every released column's code is drawn uniformly from its bins (u in [0, 1) per
record and column, drawn once, so the pads are the same records under every configuration:
code = floor(u * number of bins)). They are as many as the count's noise is above |F| (a
handful at eps_count = 0.1), and they are data independent.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .noise import Randomness

__all__ = ["POLICIES", "DEFAULT_POLICY", "DEFAULT_COUNT_EPSILON", "COUNT_PURPOSE",
           "RESIZE_PURPOSE", "MIN_RECORDS", "ResizePlan", "dp_record_count", "resize_plan",
           "guarantee_text"]

POLICIES = ("dp_count", "declared_public")
DEFAULT_POLICY = "dp_count"
DEFAULT_COUNT_EPSILON = 0.1
COUNT_PURPOSE = "record count"
RESIZE_PURPOSE = "record resize"
MIN_RECORDS = 1


def dp_record_count(n_plausible: int, epsilon: float, rand: "Randomness") -> int:
    """m = max(n + Z, 1), Z ~ discrete Laplace(1 / epsilon) through OpenDP (sensitivity 1)."""
    noisy = rand.laplace(int(n_plausible), sensitivity=1, epsilon=epsilon, integer=True,
                         purpose=COUNT_PURPOSE)
    return max(int(noisy), MIN_RECORDS)


@dataclass(frozen=True)
class ResizePlan:
    """Which plausible records (``keep``, indices in file order) and how many pads (rows of
    ``pad_u``, one u in [0, 1) per released column) form the m records, in the order ``order``
    (a permutation of the m rows: first the kept records, then the pads). Private: ``keep``
    depends on n. Apply with :meth:`apply` to the coded table of any configuration."""

    n_in: int
    m: int
    keep: np.ndarray
    pad_u: np.ndarray
    order: np.ndarray

    @property
    def pads(self) -> int:
        return int(self.pad_u.shape[0])

    def apply(self, codes: np.ndarray, sizes: Sequence[int]) -> np.ndarray:
        """The m resized rows of ``codes`` (shape (n_in, d)); ``sizes``: bins per column."""
        if codes.shape[0] != self.n_in:
            raise ValueError(f"the resize plan is for {self.n_in} records, got {codes.shape[0]}")
        sizes_arr = np.asarray(sizes, dtype=np.int64)
        if self.pad_u.shape[1] != sizes_arr.size or codes.shape[1] != sizes_arr.size:
            raise ValueError("the resize plan and the table have different numbers of columns")
        rows = np.concatenate([codes[self.keep], self.pad_rows(sizes)])
        return rows[self.order]

    def kept_counts(self, index: np.ndarray, size: int) -> np.ndarray:
        """How many kept records each of ``size`` distinct rows holds, the records' distinct rows
        being ``index`` (in file order, as the table :meth:`apply` takes)."""
        return np.bincount(np.asarray(index)[self.keep], minlength=size).astype(np.int64)

    def pad_rows(self, sizes: Sequence[int]) -> np.ndarray:
        """The pads' codes (int64, (m - n_keep, d)): each u of ``pad_u`` times its column's size."""
        sizes_arr = np.asarray(sizes, dtype=np.int64)
        pads = np.minimum((self.pad_u * sizes_arr).astype(np.int64), sizes_arr - 1)
        return pads.reshape(-1, sizes_arr.size)


def resize_plan(n_in: int, m: int, columns: int, rng: np.random.Generator) -> ResizePlan:
    """Uniform subsample (m <= n_in) or all records plus m - n_in uniform pads, shuffled."""
    if n_in < 0 or m < MIN_RECORDS or columns < 1:
        raise ValueError(f"resize from {n_in} to {m} records of {columns} columns")
    keep = rng.permutation(n_in)[:min(m, n_in)]
    pad_u = rng.random((max(m - n_in, 0), columns))
    order = rng.permutation(m)
    return ResizePlan(n_in, m, keep, pad_u, order)


def guarantee_text(policy: str) -> dict[str, str]:
    """What a bundle promises under ``policy``: the neighbouring relation and the n statement
    (used in budget.json, the datasheet and the README)."""
    if policy == "dp_count":
        return {
            "neighbouring": ("change one record of the confidential data as delivered (before the "
                             "plausibility rules): any one record may hold any other values the "
                             "input schema accepts, including values the rules drop"),
            "n_statement": ("the number of records is a differentially private count of the "
                            "plausible records (its epsilon is part of the total); the table "
                            "was resized to that count before the synthesis"),
        }
    if policy == "declared_public":
        return {
            "neighbouring": ("confidential data sets with the same number of plausible records that differ "
                             "in one record, which may hold any other values the input schema "
                             "accepts (the count of plausible records is declared public)"),
            "n_statement": ("the number of records is the count of plausible records, published "
                            "exactly: it is not protected, and it changes when a record is moved "
                            "across a plausibility rule"),
        }
    raise ValueError(f"unknown records policy {policy!r} (known: {', '.join(POLICIES)})")
