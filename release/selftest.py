"""``dpbundle selftest``: a record/replay self-audit of every declared sensitivity.

After Re:cord-play (Cebere et al., PETS 2026): run one attempt on a dataset D (record mode), then
the *same* attempt on neighbours D' of D with the randomness frozen to D's run
(:meth:`Randomness.frozen`: every DP call returns D's noisy output, every post-processing
generator D's seed), and compare the two runs call by call.

* Sensitivity. For every DP call i with true values t_i(D), t_i(D') and declared sensitivities
  s_i(D), s_i(D'), the distance in the mechanism's input metric

      Laplace (scalar, absolute distance)          d_i = |t_i(D) - t_i(D')|
      Laplace (vector, L1; discrete Laplace too)   d_i = sum_k |t_ik(D) - t_ik(D')|
      report-noisy-max (non-monotonic L-infinity)  d_i = max_k |u_ik(D) - u_ik(D')|
      Gaussian (vector, L2; discrete Gaussian too)  d_i = sqrt(sum_k (t_ik(D) - t_ik(D'))^2)
      Gaussian (scalar, absolute distance)          d_i = |t_i(D) - t_i(D')|

  must satisfy ``d_i <= max(s_i(D), s_i(D')) + tol_i`` (see :func:`tolerance`). With every DP
  output frozen, the public inputs of a sensitivity (n, the candidate C, the spec, earlier DP
  outputs) are the same in both runs, so s_i(D) = s_i(D') for a sensitivity computed as the
  scheme requires; one that differs was computed from private data, which makes the noise
  scale itself data dependent (not covered by the Laplace or report-noisy-max guarantee). That
  is reported as its own finding ("varying sensitivity"), and the distance is compared with the
  larger of the two so that one root cause is not also reported as a distance violation.
* Control flow. The sequence of calls (kind, purpose, mechanism, epsilon or rho, output shape) may
  depend on the data only through DP outputs; with those frozen it must be identical. The
  number of sample rounds, PrivBayes' candidate parent sets, PrivSyn's budget split, the
  marginals MST measures and aim_pure's rounds (the marginal each chooses, each round's budget,
  the working table's estimates) depend on DP outputs (and seeds) only, so they stay the same; a
  difference is reported where it happens (record index, recorded call, asked call). An
  attempt that fails (``AttemptFailure``) in one run and not the other is reported the same way.
* Not covered: calls released without per-draw noise records (a mark ``opaque_release``: the
  optional mbi generators) and any configuration whose generator is not installed.

Neighbours (one record of the prepared input changed; public or simulated data only): a
plausible record replaced by another plausible one (every policy), and under ``dp_count`` a
plausible record made implausible or an implausible one made plausible (a move across a raw
constraint: the plausible count changes by one). Replacement records are built from the spec's
input schema: each column at the edges of its allowed range, at the raw constraints' thresholds
and the clip edges (at most, at least, or mixed), every category, one column of a rare record
moved to the far end of its range (the record stays in its groups), uniform random records and
copies of other records. Under ``dp_count`` the DP count is paired too, and the neighbour's
resize follows the coupling of the derivation in :mod:`dpbundle.mechanisms.records` (same
permutation; the added or removed record swapped against one kept record or one pad), not the
recorded seed: for tables of different sizes the same seed would give unrelated subsamples,
whereas the guarantee rests on that coupling.

Same-seed pairing needs randomness that is coupled seed by seed. One step is not:
``conditional_means`` draws its resize order of T's records by hypergeometric halving over
record types (``condmeans.LazyOrder``), which equals the per-row priority keys of its proof in
distribution, not seed by seed (with other type counts the same seed gives another order), so
same-seed distances would exceed its sensitivity without any violation. During the self-test
(both runs) its order is drawn instead by the proof's keys, one uniform key per row position
(:class:`RowKeyOrder`, installed by :func:`proof_couplings`): the criterion's own grouping,
resize arithmetic, value and sensitivity code are what is tested; the halving sampler is not
(tests/test_counts_hot_path.py checks that it has the keys' distribution). :data:`COUPLINGS`
lists every such replacement, and the output names them.

Nothing is spent and no ledger is touched; a pass is evidence on these data, not a proof.
"""
from __future__ import annotations

import math
import re
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.noise import PathDivergence, Randomness
from dpbundle.mechanisms.records import RESIZE_PURPOSE, ResizePlan, dp_record_count

from dpbundle.release.data.prepare import Prepared, is_missing
from dpbundle.release.spec.load import Spec

__all__ = ["FORMAT", "STATEMENT", "Change", "Observation", "Finding", "Report", "tolerance",
           "distance", "pair_records", "Neighbours", "coupled_plan", "choose_configs",
           "run_selftest"]

FORMAT = "dpbundle-selftest/1"
STATEMENT = ("This is a test on these data, not a proof of the guarantee: it tries sampled "
             "neighbours of one dataset with one random path per configuration, and a pass only "
             "says that no tried pair exceeded a declared sensitivity or changed the control flow.")
#: relative tolerance on a declared sensitivity, and the absolute one in ulps of the values' size
REL_TOL = 1e-9
ABS_ULPS = 4096
MAX_SHOWN = 20
#: criterion type -> the randomness the self-test draws as the type's proof couples it
COUPLINGS = {"conditional_means": "resize order drawn by per-row priority keys (the coupling "
                                  "of its proof) instead of the equal-in-distribution halving "
                                  "sampler"}


# --------------------------------------------------------------------------- distances


def tolerance(declared: float, size: float) -> float:
    """The float tolerance of ``d <= declared``: ``REL_TOL * declared + ABS_ULPS * u * size``.

    The declared sensitivity s bounds the *exact* statistics: |t(D) - t(D')| <= s. What is
    compared is the distance of the *computed* ones, t~ = t + e with |e| <= c u ||t|| for a
    closed-form computation of error constant c (u = 2**-52; numpy's pairwise sums give
    c = O(log2 n), quotients and products a few ulps each), plus the rounding of the distance
    itself. So ``d~ <= s + 2 c u size`` with ``size`` the larger norm of the two true values
    (same norm as the distance); ABS_ULPS = 4096 allows c up to 2048. The declared float s
    may lie half an ulp below its formula ((U - L) / m, 3/n + 2/n^2); ``REL_TOL = 1e-9`` covers
    that many times over (OpenDP's calibration checks at the next float above s:
    ``noise.map_distance``). A wrong sensitivity is off by a factor (2 for a missing factor of
    two), eight orders of magnitude above this. Integer counts compare exactly. A statistic
    computed by an iterative solver would need its own tolerance (none is recorded today)."""
    return float(REL_TOL * declared + ABS_ULPS * np.finfo(np.float64).eps * size)


def distance(kind: str, a: Any, b: Any) -> tuple[str, float, float]:
    """(metric, distance, size) of two recorded true values of one call: L1 for a vector
    Laplace, L2 for a vector Gaussian, absolute for a scalar, non-monotonic L-infinity for
    report-noisy-max scores. ``size`` is the larger norm of the two, for :func:`tolerance`."""
    x = np.asarray(a, dtype=np.float64).reshape(-1)
    y = np.asarray(b, dtype=np.float64).reshape(-1)
    diff = np.abs(x - y)
    if kind == "exponential":
        return "Linf", float(diff.max()), float(max(np.abs(x).max(), np.abs(y).max()))
    if kind == "gaussian" and isinstance(a, list):
        return "L2", float(np.linalg.norm(diff)), float(max(np.linalg.norm(x), np.linalg.norm(y)))
    if isinstance(a, list):
        return "L1", float(diff.sum()), float(max(np.abs(x).sum(), np.abs(y).sum()))
    return "abs", float(diff[0]), float(max(abs(x[0]), abs(y[0])))


def call_family(purpose: str) -> str:
    """Purposes of one kind of call: numbers after step/column/edge/round and bracketed column
    lists become '#', a criterion's per-group releases become one row."""
    if purpose.startswith("criterion "):
        parts = purpose.split(" ", 2)
        return " ".join(parts[:2]) + (" (per group)" if len(parts) > 2 else "")
    out = re.sub(r"\[[^\]]*\]", "[#]", purpose)
    return re.sub(r"\b(step|column|edge|round) \d+\b", r"\1 #", out)


def _mechanism_name(rec: dict) -> str:
    if rec["kind"] == "exponential":
        return "report-noisy-max"
    if rec["kind"] == "gaussian":
        return "discrete Gaussian" if str(rec.get("mechanism", "")).endswith("/integer") else "Gaussian"
    return "discrete Laplace" if str(rec.get("mechanism", "")).endswith("/integer") else "Laplace"


# --------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Change:
    """One neighbour: ``kind`` change (a plausible record replaced), remove (a plausible record
    made implausible) or add (an implausible record made plausible); ``strategy`` names how
    the new record was built; ``row`` the base row changed or removed (None for add)."""

    kind: str
    strategy: str
    row: int | None = None

    def describe(self) -> str:
        what = {"change": "one plausible record replaced by",
                "remove": "one plausible record moved across a raw constraint (made implausible):",
                "add": "one implausible record moved across a raw constraint (made plausible):"}
        return f"{what[self.kind]} {self.strategy}"


@dataclass
class Observation:
    """One DP call of one pair: the distance of the true values against the declared
    sensitivities of the two runs (``bound`` = the larger, see the module docstring)."""

    config_id: str
    pair: int
    index: int
    kind: str
    purpose: str
    mechanism: str
    metric: str
    epsilon: float | None
    sensitivity: float
    sensitivity_other: float
    distance: float
    tolerance: float
    change: str
    #: the zCDP budget of a Gaussian call (``epsilon`` is then None); None for pure-DP calls
    rho: float | None = None

    @property
    def bound(self) -> float:
        return max(self.sensitivity, self.sensitivity_other)

    @property
    def ratio(self) -> float:
        if self.bound == 0:
            return math.inf if self.distance > 0 else 0.0
        return self.distance / self.bound

    @property
    def exceeds(self) -> bool:
        return self.distance > self.bound + self.tolerance

    @property
    def varies(self) -> bool:
        return self.sensitivity != self.sensitivity_other


@dataclass
class Finding:
    """Something that fails the self-test; ``kind``: sensitivity (a distance above the
    declared sensitivity), varying_sensitivity, control_flow, or error."""

    kind: str
    config_id: str
    pair: int | None
    message: str
    purpose: str | None = None
    index: int | None = None


@dataclass
class Report:
    """Everything one self-test found; :meth:`to_json` is the ``--json`` document."""

    policy: str
    pairs: int
    seed: int
    configs: list[dict] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    not_covered: list[dict] = field(default_factory=list)
    neighbours: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.findings

    def calls(self) -> list[dict]:
        """One row per call family (:func:`call_family`) and mechanism: declared sensitivity
        range, largest distance and ratio, pairs compared, verdict, the worst exact purpose."""
        rows: dict[tuple[str, str], dict] = {}
        for o in self.observations:
            key = (call_family(o.purpose), o.mechanism)
            row = rows.setdefault(key, {
                "call": key[0], "mechanism": o.mechanism, "metric": o.metric, "purposes": set(),
                "sensitivity_min": math.inf, "sensitivity_max": 0.0, "largest_distance": 0.0,
                "ratio": 0.0, "pairs": 0, "exceeds": False, "varies": False, "worst": None})
            row["purposes"].add(o.purpose)
            row["sensitivity_min"] = min(row["sensitivity_min"], o.sensitivity, o.sensitivity_other)
            row["sensitivity_max"] = max(row["sensitivity_max"], o.bound)
            row["largest_distance"] = max(row["largest_distance"], o.distance)
            row["pairs"] += 1
            row["varies"] |= o.varies
            row["exceeds"] |= o.exceeds
            if row["worst"] is None or o.ratio > row["ratio"]:
                row["ratio"] = o.ratio
                row["worst"] = {"purpose": o.purpose, "config_id": o.config_id, "pair": o.pair,
                                "neighbour": o.change}
        out = []
        for row in rows.values():
            row["purposes"] = len(row["purposes"])
            out.append(row)
        return out

    def to_json(self) -> dict:
        def num(x: float) -> float | str:
            return x if math.isfinite(x) else "inf"

        calls = [{**r, "ratio": num(r["ratio"])} for r in self.calls()]
        return {
            "format": FORMAT, "statement": STATEMENT, "passed": self.passed,
            "records_policy": self.policy, "pairs_per_configuration": self.pairs,
            "seed": self.seed, "seconds": round(self.seconds, 3),
            "tolerance": {"relative": REL_TOL, "absolute_ulps_of_size": ABS_ULPS},
            "configurations": self.configs, "neighbours": self.neighbours, "calls": calls,
            "couplings": COUPLINGS, "findings": [vars(f) for f in self.findings],
            "not_covered": self.not_covered,
            "observations": [_observation_json(o) | {"ratio": num(o.ratio)}
                             for o in self.observations],
        }


def _observation_json(o: Observation) -> dict:
    """An observation's fields; ``rho`` only for a Gaussian (zCDP) call, so a pure-DP
    observation has the fields it always had."""
    out = dict(vars(o))
    if out.get("rho") is None:
        out.pop("rho", None)
    return out


# --------------------------------------------------------------------------- pairing


def pair_records(base: list[dict], other: list[dict], config_id: str, pair: int,
                 change: str) -> tuple[list[Observation], list[Finding]]:
    """Compare the DP calls of two runs of one attempt record by record (frozen mode has
    already checked that kind, purpose, mechanism, epsilon and shape agree up to ``other``'s
    length). Seeds and marks carry no true value; an unknown kind with a true value is a
    finding (the self-test does not know its metric)."""
    observations: list[Observation] = []
    findings: list[Finding] = []
    for i, (a, b) in enumerate(zip(base, other)):
        if a["kind"] not in ("laplace", "exponential", "gaussian"):
            if "true" in a:
                findings.append(Finding("error", config_id, pair, f"record {i}: kind {a['kind']!r} "
                                        "has a true value but no known metric", a.get("purpose"), i))
            continue
        metric, d, size = distance(a["kind"], a["true"], b["true"])
        s_a, s_b = float(a["sensitivity"]), float(b["sensitivity"])
        gauss = a["kind"] == "gaussian"
        o = Observation(config_id, pair, i, a["kind"], a["purpose"], _mechanism_name(a), metric,
                        None if gauss else float(a["epsilon"]), s_a, s_b, d,
                        tolerance(max(s_a, s_b), size), change,
                        rho=float(a["rho"]) if gauss else None)
        observations.append(o)
        findings.extend(_judge(o))
    return observations, findings


def _judge(o: Observation) -> list[Finding]:
    out = []
    if o.varies:
        out.append(Finding("varying_sensitivity", o.config_id, o.pair,
                           f"{o.purpose!r}: the declared sensitivity differs between the "
                           f"neighbours ({o.sensitivity:.6g} vs {o.sensitivity_other:.6g}) although "
                           "every DP output is the same: it depends on private data",
                           o.purpose, o.index))
    if o.exceeds:
        out.append(Finding("sensitivity", o.config_id, o.pair,
                           f"{o.purpose!r} ({o.mechanism}, {o.metric}): distance {o.distance:.6g} "
                           f"> declared sensitivity {o.bound:.6g} (ratio {o.ratio:.3g}); "
                           f"neighbour: {o.change}", o.purpose, o.index))
    return out


# --------------------------------------------------------------------------- neighbours


@dataclass(frozen=True)
class ColumnDomain:
    """What values an input column may take (typed as in :class:`Prepared`): the allowed range
    (spec min/max, else the data's own), and the edge values tried first: the range's ends,
    every raw-constraint threshold and its neighbours, the clip edges of released columns that
    read the column directly, and its special values; categories and booleans: every value."""

    name: str
    kind: str
    low: Any
    high: Any
    edges: tuple


def _typed(kind: str, value: Any) -> Any:
    if kind == "date":
        return np.datetime64(str(value), "D")
    return float(value)


def _step(kind: str) -> Any:
    return np.timedelta64(1, "D") if kind == "date" else 1.0


def _thresholds(spec: Spec, name: str, kind: str) -> list[Any]:
    """Raw-constraint thresholds on column ``name`` and (integers, dates) one step either side."""
    out = []
    for c in spec.model.all_raw_constraints:
        for column, op, value in c.conditions:
            if column != name or op in ("in", "not in") or isinstance(value, (list, tuple, bool)):
                continue
            v = _typed(kind, value)
            out.append(v)
            if kind in ("integer", "date"):
                out.extend([v - _step(kind), v + _step(kind)])
    return out


def _clip_edges(spec: Spec, name: str) -> list[float]:
    """Clip ends of released columns read directly from ``name`` (no derivation), and one beyond."""
    out: list[float] = []
    for col in spec.model.columns:
        src = col.source
        if src.column != name or src.derive not in (None, "number"):
            continue
        for alt in col.alternatives:
            if alt.clip is not None:
                lo, hi = alt.clip
                out.extend([float(lo) - 1, float(lo), float(hi), float(hi) + 1])
    return out


def _gap(kind: str, a: Any, b: Any) -> float:
    """|a - b| of two typed values (dates in days, categories as indices)."""
    diff = a - b
    return abs(float(diff / np.timedelta64(1, "D")) if kind == "date" else float(diff))


def column_domain(spec: Spec, prepared: Prepared, name: str) -> ColumnDomain:
    """The :class:`ColumnDomain` of one input column."""
    meta = spec.model.input.column(name)
    kind = meta.type
    if kind == "category":
        k = len(meta.category_texts)
        return ColumnDomain(name, kind, 0, k - 1, tuple(range(k)))
    if kind == "boolean":
        return ColumnDomain(name, kind, 0.0, 1.0, (0.0, 1.0))
    values = prepared.table[name]
    low = _typed(kind, meta.min) if meta.min is not None else values.min()
    high = _typed(kind, meta.max) if meta.max is not None else values.max()
    extra = _thresholds(spec, name, kind) + ([] if kind == "date" else _clip_edges(spec, name))
    edges = sorted({low, high, *(v for v in extra if low <= v <= high)})
    # special values (typed max + 1 + i): tried as edge values too, so that neighbours move records
    # between a number and a special value
    edges += [meta.special_code(i) for i in range(len(meta.specials))]
    return ColumnDomain(name, kind, low, high, tuple(edges))


class Neighbours:
    """Neighbouring tables of one prepared table (plausible rows), drawn by strategy.

    Under ``declared_public`` every neighbour replaces one plausible record by another
    plausible one (the number of plausible records is the declared-public n); under ``dp_count``
    records are also removed or added (moved across a raw constraint)."""

    CHANGE = ("edge-max", "flip", "edge-min", "edge-mixed", "flip", "edge-single", "random",
              "flip", "copy")
    SCHEDULE = {
        "declared_public": [("change", s) for s in CHANGE],
        "dp_count": [("change", "edge-max"), ("remove", "rare"), ("change", "flip"),
                     ("add", "edge-min"), ("change", "edge-min"), ("remove", "extreme"),
                     ("change", "flip"), ("add", "edge-max"), ("change", "edge-mixed"),
                     ("remove", "random"), ("change", "flip"), ("change", "random"),
                     ("add", "random"), ("change", "edge-single"), ("change", "copy")],
    }

    def __init__(self, spec: Spec, prepared: Prepared, rng: np.random.Generator,
                 kept: np.ndarray | None = None) -> None:
        """``kept``: the rows the records policy's resize keeps (``dp_count``); a changed or
        removed record is one of them, else the resized tables would be equal."""
        self.spec, self.base, self.rng = spec, prepared, rng
        self.kept = np.arange(prepared.rows) if kept is None else np.asarray(kept)
        inputs = spec.model.input.by_name
        self.names = list(inputs)
        self.kinds = {n: m.type for n, m in inputs.items()}
        self.cats = {n: list(m.category_texts) for n, m in inputs.items() if m.type == "category"}
        self.domains = {n: column_domain(spec, prepared, n) for n in self.names}
        self._single = 0
        self._flips = 0
        self._rare: np.ndarray | None = None

    def schedule(self, pairs: int) -> list[tuple[str, str]]:
        """The first ``pairs`` (kind, strategy) of the policy's schedule, cycled."""
        plan = self.SCHEDULE[self.spec.records_policy]
        return [plan[k % len(plan)] for k in range(pairs)]

    # ---- records

    def _any_row(self) -> int:
        return int(self.kept[int(self.rng.integers(self.kept.size))])

    def _row(self, i: int) -> dict[str, Any]:
        return {n: self.base.table[n][i] for n in self.names}

    def plausible(self, record: dict[str, Any]) -> bool:
        """No raw constraint drops ``record`` (evaluated as prepare does, on a one-row table)."""
        from dpbundle.release.data.constraints import constraint_mask

        table = {n: np.asarray([record[n]], dtype=self.base.table[n].dtype) for n in self.names}
        return not any(constraint_mask(c, table, self.kinds, missing=is_missing,
                                       categories=self.cats, specials=self.spec.model.input.special_limits)[0]
                       for c in self.spec.model.all_raw_constraints)

    def _uniform(self, dom: ColumnDomain) -> Any:
        if dom.kind in ("category", "boolean"):
            return dom.edges[int(self.rng.integers(len(dom.edges)))]
        if dom.kind == "date":
            days = int((dom.high - dom.low).astype(np.int64))
            return dom.low + np.timedelta64(int(self.rng.integers(days + 1)), "D")
        if dom.kind == "integer":
            return float(self.rng.integers(int(dom.low), int(dom.high) + 1))
        return float(self.rng.uniform(dom.low, dom.high))

    def _edge(self, direction: str) -> dict[str, Any]:
        """A plausible record pushed to the edges: start from a random plausible row, and set
        each column (random order) to its most extreme edge value (largest, smallest, or a
        random end per column) that keeps the record plausible."""
        record = self._row(int(self.rng.integers(self.base.rows)))
        for name in self.rng.permutation(self.names):
            edges = list(self.domains[name].edges)
            way = direction if direction != "edge-mixed" else self.rng.choice(["edge-max", "edge-min"])
            for v in (reversed(edges) if way == "edge-max" else edges):
                trial = {**record, name: v}
                if self.plausible(trial):
                    record = trial
                    break
        return record

    def _edge_single(self) -> dict[str, Any]:
        """A random plausible row with one column at one of its edge values (cycling through
        columns and values from one neighbour to the next: every category in turn)."""
        k = self._single
        self._single += 1
        name = self.names[k % len(self.names)]
        edges = self.domains[name].edges
        for j in range(len(edges)):
            record = {**self._row(int(self.rng.integers(self.base.rows))),
                      name: edges[(k // len(self.names) + j) % len(edges)]}
            if self.plausible(record):
                return record
        return self._row(int(self.rng.integers(self.base.rows)))

    def _random(self) -> dict[str, Any]:
        for _ in range(64):
            record = {n: self._uniform(self.domains[n]) for n in self.names}
            if self.plausible(record):
                return record
        return self._row(int(self.rng.integers(self.base.rows)))

    def rare_rows(self) -> np.ndarray:
        """Kept rows, rarest first: rows are typed by every column's value cut at its edge
        values (categories as they are), and ordered by how many rows share their type. A rare
        row lies in small groups of any grouping, where one record moves a statistic most."""
        if self._rare is None:
            keys = []
            for n in self.names:
                dom, v = self.domains[n], self.base.table[n][self.kept]
                if dom.kind in ("category", "boolean"):
                    keys.append(v.astype(np.int64))
                else:
                    keys.append(np.searchsorted(np.asarray(dom.edges), v, side="right"))
            _, inverse, counts = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True,
                                           return_counts=True)
            rarity = counts[inverse.reshape(-1)] + self.rng.random(self.kept.size)  # random ties
            self._rare = self.kept[np.argsort(rarity, kind="stable")]
        return self._rare

    def _flip(self) -> tuple[int, dict[str, Any]]:
        """One of the rarest rows with one column (cycling) moved to the far end of its range
        (the plausible edge value farthest from its value; a category to another one): the
        record keeps every other column, so it stays in its groups while that column's value
        moves as far as it can -- the worst case of a group mean or share of that column."""
        k = self._flips
        self._flips += 1
        rare = self.rare_rows()
        i = int(rare[(k // len(self.names)) % min(rare.size, 16)])
        name = self.names[k % len(self.names)]
        record = self._row(i)
        dom = self.domains[name]
        for v in sorted(dom.edges, key=lambda v: _gap(dom.kind, v, record[name]), reverse=True):
            trial = {**record, name: v}
            if v != record[name] and self.plausible(trial):
                return i, trial
        return i, record

    def record(self, strategy: str) -> dict[str, Any]:
        """A plausible record built by ``strategy``."""
        if strategy.startswith("edge-") and strategy != "edge-single":
            return self._edge(strategy)
        if strategy == "edge-single":
            return self._edge_single()
        if strategy == "random":
            return self._random()
        return self._row(int(self.rng.integers(self.base.rows)))  # copy

    # ---- rows

    def _scaled(self, table: dict[str, np.ndarray]) -> np.ndarray:
        """The rows of a typed table as points in [0, 1]^d (each column scaled by its allowed
        range; a category by its index), for the farthest-row choice."""
        cols = []
        for n in self.names:
            dom, v = self.domains[n], table[n]
            if dom.kind == "category":
                cols.append(v.astype(np.float64) / max(dom.high, 1))
                continue
            lo, hi = dom.low, dom.high
            if dom.kind == "date":
                v, lo, hi = (x.astype("datetime64[D]").astype(np.int64) for x in (v, lo, hi))
            cols.append((v.astype(np.float64) - float(lo)) / max(float(hi) - float(lo), 1e-12))
        return np.stack(cols, axis=1)

    def _point(self, record: dict[str, Any]) -> np.ndarray:
        return self._scaled({n: np.asarray([record[n]], dtype=self.base.table[n].dtype)
                             for n in self.names})[0]

    def farthest_row(self, point: np.ndarray | None) -> int:
        """The row (of a random sample of at most 512) farthest (L1) from ``point`` (None: from
        the sample's median, i.e. the most extreme row)."""
        sample = self.rng.choice(self.kept, size=min(512, self.kept.size), replace=False)
        pts = self._scaled({n: self.base.table[n][sample] for n in self.names})
        centre = np.median(pts, axis=0) if point is None else point
        return int(sample[int(np.argmax(np.abs(pts - centre).sum(axis=1)))])

    def draw(self, kind: str, strategy: str) -> tuple[Prepared, Change]:
        """A neighbouring prepared table and what changed."""
        table = self.base.table
        if kind == "remove":
            i = {"extreme": lambda: self.farthest_row(None),
                 "rare": lambda: int(self.rare_rows()[0])}.get(strategy, self._any_row)()
            new = {n: np.delete(v, i) for n, v in table.items()}
            return self._prepared(new), Change(kind, f"{strategy} row", i)
        if strategy == "flip":
            i, record = self._flip()
            return self._changed(i, record), Change(kind, "the same record with one column "
                                                    "moved to the far end of its range", i)
        record = self.record(strategy)
        if kind == "add":
            new = {n: np.append(v, np.asarray([record[n]], dtype=v.dtype)) for n, v in table.items()}
            return self._prepared(new), Change(kind, f"{strategy} record")
        far = strategy.startswith("edge")
        i = self.farthest_row(self._point(record)) if far else self._any_row()
        return self._changed(i, record), Change(kind, f"{strategy} record", i)

    def _changed(self, i: int, record: dict[str, Any]) -> Prepared:
        new = {n: v.copy() for n, v in self.base.table.items()}
        for n in self.names:
            new[n][i] = record[n]
        return self._prepared(new)

    def _prepared(self, table: dict[str, np.ndarray]) -> Prepared:
        rows = len(next(iter(table.values())))
        b = self.base
        return Prepared(b.source, table, rows, b.rows_read, [], 0, "")


# --------------------------------------------------------------------------- records policy


def coupled_plan(plan: ResizePlan, change: Change, rng: np.random.Generator) -> ResizePlan:
    """The neighbour's resize plan under the coupling of :mod:`dpbundle.mechanisms.records`.

    Base: rows = concat(F[keep], pads)[order], |F| = n, m rows. change: the same plan (the
    changed row keeps its index). add x (index n of F'): m <= n -- one kept record (uniform)
    is replaced by x; m > n -- x takes the first pad's place. remove row i (F' indices shift
    down above i): m < n -- if i was kept, a record not kept takes its place; m >= n -- a new
    uniform pad takes i's place. In every case the m resized rows differ in at most one
    position, as in the derivation."""
    if change.kind == "change":
        return plan
    if change.kind == "add":
        return _coupled_add(plan, rng)
    return _coupled_remove(plan, int(change.row), rng)


def _coupled_add(plan: ResizePlan, rng: np.random.Generator) -> ResizePlan:
    n, m = plan.n_in, plan.m
    if m <= n:
        keep = plan.keep.copy()
        keep[int(rng.integers(keep.size))] = n
        return ResizePlan(n + 1, m, keep, plan.pad_u, plan.order)
    return ResizePlan(n + 1, m, np.append(plan.keep, n), plan.pad_u[1:], plan.order)


def _coupled_remove(plan: ResizePlan, i: int, rng: np.random.Generator) -> ResizePlan:
    n, m = plan.n_in, plan.m
    if m < n:
        keep = plan.keep.copy()
        hit = np.flatnonzero(keep == i)
        if hit.size:
            spare = np.setdiff1d(np.arange(n), keep)
            keep[hit[0]] = spare[int(rng.integers(spare.size))]
        return ResizePlan(n - 1, m, keep - (keep > i), plan.pad_u, plan.order)
    q = int(np.flatnonzero(plan.keep == i)[0])
    rest = np.delete(plan.keep, q)
    pads = np.concatenate([rng.random((1, plan.pad_u.shape[1])), plan.pad_u])
    where = np.arange(m)                      # base layout position -> neighbour position
    where[q] = n - 1
    where[q + 1:n] -= 1
    return ResizePlan(n - 1, m, rest - (rest > i), pads, where[plan.order])


def records_step(prepared: Prepared, spec: Spec, rand: Randomness,
                 base_plan: ResizePlan | None = None, change: Change | None = None) -> Prepared:
    """The records policy on ``prepared`` (``release.records.release_records``), and for a
    neighbour that adds or removes a record the coupled plan instead of the seed's plan; the
    DP count is one of the paired calls either way."""
    from dpbundle.release.scheme.records import release_records

    if spec.records_policy == "declared_public" or change is None or change.kind == "change":
        return release_records(prepared, spec, rand)
    m = dp_record_count(prepared.n, spec.epsilon_count, rand)
    plan = coupled_plan(base_plan, change, rand.rng(RESIZE_PURPOSE))
    assert plan.m == m
    return prepared.replaced(n=m, resize=plan)


def edges_step(prepared: Prepared, spec: Spec, rand: Randomness) -> Spec:
    """The ``dp_edges`` draws on ``prepared`` (``release.scheme.edges.release_edges``): the spec
    resolved with them. Frozen, a neighbour's draws return the recorded edges, and their scores
    are paired with the recorded ones (report-noisy-max: non-monotonic L-infinity distance)."""
    from dpbundle.release.scheme.edges import release_edges

    return release_edges(prepared, spec, rand)


# --------------------------------------------------------------------------- configurations


def variant(generator: dict) -> tuple:
    """What makes generator settings take different code paths: the type and every
    non-numeric hyperparameter (flavour, oneway, score, select rule, ...)."""
    switches = [(k, v) for k, v in generator.items()
                if k != "type" and (isinstance(v, (str, bool)) or v is None)]
    return (generator["type"], *sorted(switches, key=repr))


def choose_configs(spec: Spec, listed: list[dict] | None, draws: int, all_generators: bool,
                   rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """(configurations, not covered): ``draws`` drawn from ``listed`` (or the spec's space),
    plus with ``all_generators`` one configuration of every generator variant of the space
    (:func:`variant`) not drawn yet; unavailable generators are not covered."""
    from dpbundle.mechanisms.generators import generator_types

    from dpbundle.release.scheme.space import config_at, config_id, generator_configs, space_size

    chosen: list[dict] = []
    if listed:
        picks = rng.permutation(len(listed))[:draws]
        chosen = [listed[int(k)] for k in picks]
    else:
        size = space_size(spec)
        chosen = [config_at(spec, int(rng.integers(size))) for _ in range(draws)]
    if all_generators:
        seen = {variant(c["generator"]) for c in chosen}
        settings: dict[tuple, list[dict]] = {}
        for g in generator_configs(spec):
            settings.setdefault(variant(g), []).append(g)
        for key, gens in settings.items():
            if key not in seen:
                base = config_at(spec, int(rng.integers(space_size(spec))))
                chosen.append({**base, "generator": gens[int(rng.integers(len(gens)))]})
    available = generator_types()
    keep, skipped = [], []
    for c in {config_id(c): c for c in chosen}.values():
        info = available.get(c["generator"]["type"], {"available": False, "reason": "unknown"})
        if info["available"]:
            keep.append(c)
        else:
            skipped.append({"config_id": config_id(c), "generator": c["generator"]["type"],
                            "reason": f"generator not installed: {info['reason']}"})
    return keep, skipped


# --------------------------------------------------------------------------- couplings


class RowKeyOrder:
    """The resize order of ``conditional_means``' proof: one uniform priority key per row
    position of T (drawn from the step's recorded seed), the records in ascending key order.
    Neighbours differing in the record at one position keep every key, so a group's kept set
    changes by at most that record (the proof's coupling). Same interface as
    ``condmeans.LazyOrder`` for ``ConditionalMeans._kept_sum``: ``size`` and ``first``."""

    def __init__(self, fine_of_row: np.ndarray, size: int, rng: np.random.Generator) -> None:
        keys = rng.random(fine_of_row.size)
        self.sequence = fine_of_row[np.argsort(keys, kind="stable")]
        self.size = size

    def first(self, member: np.ndarray, m: int) -> np.ndarray:
        """Count of each fine type among the first ``m`` records whose type is a member."""
        hits = self.sequence[member[self.sequence]][:m]
        return np.bincount(hits, minlength=self.size).astype(np.int64)


def _row_types(coded: Any, types: Any) -> np.ndarray:
    """The record type (index into ``types.table``) of every row of ``coded``."""
    from dpbundle.mechanisms.coding import mixed_radix_index

    if types.cells is not None:
        return np.searchsorted(types.cells, mixed_radix_index(coded.codes, coded.domain))
    return np.unique(coded.codes, axis=0, return_inverse=True)[1].reshape(-1)


def _row_key_resize_order(self: Any, ctx: Any, rng: np.random.Generator) -> tuple:
    """``ConditionalMeans.resize_order`` with :class:`RowKeyOrder` in place of LazyOrder."""
    from dpbundle.mechanisms.cells import types_of
    from dpbundle.mechanisms.criteria.condmeans import fine_types

    tt = types_of(ctx.real)
    target = tt.table.codes[:, tt.table.column(self.target)]
    counts, fine = fine_types([target, *self._ids(ctx, tt)], tt.counts)
    return RowKeyOrder(fine[_row_types(ctx.real, tt)], counts.size, rng), fine


@contextmanager
def proof_couplings() -> Iterator[None]:
    """Install the randomness of :data:`COUPLINGS` for the duration of a self-test."""
    from dpbundle.mechanisms.criteria.condmeans import ConditionalMeans

    saved = ConditionalMeans.resize_order
    ConditionalMeans.resize_order = _row_key_resize_order
    try:
        yield
    finally:
        ConditionalMeans.resize_order = saved


# --------------------------------------------------------------------------- runs


@dataclass
class _Run:
    records: list[dict]
    failure: str | None = None      # AttemptFailure type name
    error: str | None = None        # anything else, type and place
    divergence: PathDivergence | None = None


def _where(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    last = tb[-1] if tb else None
    place = f" at {Path(last.filename).name}:{last.lineno}" if last else ""
    return f"{type(exc).__name__}{place}: {str(exc)[:200]}"


def _attempt(prepared: Prepared, spec: Spec, config: dict, rand: Randomness) -> _Run:
    """One attempt as the selection runs it (``AttemptFailure`` ends it as failed)."""
    from dpbundle.release.scheme.iteration import run_iteration

    run = _Run(rand.transcript.records)
    try:
        run_iteration(prepared, spec, config, rand)
        if rand.following:
            rand.check_finished()
    except PathDivergence as exc:
        run.divergence = exc
    except AttemptFailure as exc:
        run.failure = type(exc).__name__
    except Exception as exc:  # noqa: BLE001 - reported as a finding, by type and place
        run.error = _where(exc)
    return run


def _compare_runs(base: _Run, other: _Run, cid: str, pair: int, change: Change) -> tuple[list, list]:
    obs, findings = pair_records(base.records, other.records, cid, pair, change.describe())
    tail = f"; neighbour: {change.describe()}"
    if other.divergence is not None:
        d = other.divergence
        findings.append(Finding("control_flow", cid, pair, f"{d}{tail}", d.purpose, d.index))
    elif other.error is not None:
        findings.append(Finding("error", cid, pair, f"the neighbour's attempt raised {other.error}{tail}"))
    elif other.failure != base.failure or len(other.records) != len(base.records):
        findings.append(Finding("control_flow", cid, pair,
                                f"the attempt ended differently: recorded {base.failure or 'completed'} "
                                f"after {len(base.records)} records, neighbour "
                                f"{other.failure or 'completed'} after {len(other.records)}{tail}"))
    return obs, findings


def run_selftest(spec: Spec, prepared: Prepared, configs: list[dict], pairs: int, seed: int,
                 progress: Callable[[str], None] | None = None) -> Report:
    """Record one attempt per configuration on ``prepared``, then follow it on ``pairs``
    neighbours (each neighbour is used for every configuration) and pair the transcripts,
    with the randomness of :data:`COUPLINGS` installed."""
    started = time.perf_counter()
    report = Report(spec.records_policy, pairs, seed)
    with proof_couplings():
        _run(report, spec, prepared, configs, progress or (lambda _text: None))
    report.seconds = time.perf_counter() - started
    return report


def _run(report: Report, spec: Spec, prepared: Prepared, configs: list[dict],
         say: Callable[[str], None]) -> None:
    from dpbundle.release.scheme.space import config_id

    rng = np.random.Generator(np.random.PCG64(report.seed))
    rec_rand = Randomness()
    base_prepared = records_step(prepared, spec, rec_rand)
    declared, spec = spec, edges_step(prepared, spec, rec_rand)     # dp_edges drawn, as a release does
    prefix = list(rec_rand.transcript.records)
    bases: dict[str, _Run] = {}
    for config in configs:
        cid = config_id(config)
        say(f"recording configuration {cid}")
        base = _attempt(base_prepared, spec, config, Randomness())
        report.configs.append(_config_entry(cid, config, base))
        if base.error is not None:
            report.findings.append(Finding("error", cid, None, f"the recorded attempt raised {base.error}"))
        elif any(r.get("kind") == "mark" and r.get("mark") == "opaque_release" for r in base.records):
            report.not_covered.append({"config_id": cid, "generator": config["generator"]["type"],
                                       "reason": "opaque release: noise drawn without per-draw records"})
        else:
            bases[cid] = base
    plan = base_prepared.resize
    neighbours = Neighbours(spec, prepared, rng, None if plan is None else plan.keep)
    by_id = {config_id(c): c for c in configs}
    for k, (kind, strategy) in enumerate(neighbours.schedule(report.pairs)):
        say(f"neighbour {k + 1} of {report.pairs}")
        other, change = neighbours.draw(kind, strategy)
        report.neighbours.append(change.describe())
        _follow_pair(report, (declared, spec), other, change, k, prefix, base_prepared, bases, by_id)


def _follow_pair(report: Report, specs: tuple[Spec, Spec], other: Prepared, change: Change, k: int,
                 prefix: list[dict], base_prepared: Prepared, bases: dict[str, _Run],
                 by_id: dict[str, dict]) -> None:
    """One neighbour: the records policy and the dp_edges draws (paired once; ``specs``: the
    spec as declared and as resolved with the recorded edges), then every recorded configuration."""
    declared, spec = specs
    rand = Randomness.frozen(prefix)
    try:
        other_prepared = records_step(other, declared, rand, base_prepared.resize, change)
        edges_step(other, declared, rand)
        rand.check_finished()
    except PathDivergence as exc:
        report.findings.append(Finding("control_flow", "records", k, f"{exc}; neighbour: {change.describe()}",
                                       exc.purpose, exc.index))
        return
    obs, findings = pair_records(prefix, rand.transcript.records, "records", k, change.describe())
    report.observations += obs
    report.findings += findings
    for cid, base in bases.items():
        run = _attempt(other_prepared, spec, by_id[cid], Randomness.frozen(base.records))
        obs, findings = _compare_runs(base, run, cid, k, change)
        report.observations += obs
        report.findings += findings


def _config_entry(cid: str, config: dict, base: _Run) -> dict:
    status = "error" if base.error else (f"failed ({base.failure})" if base.failure else "completed")
    calls = sum(1 for r in base.records if r["kind"] in ("laplace", "exponential", "gaussian"))
    return {"config_id": cid, "config": config, "recorded_attempt": status, "dp_calls": calls}


# --------------------------------------------------------------------------- output


def _fmt(x: float) -> str:
    return "inf" if not math.isfinite(x) else f"{x:.4g}"


def _verdict(row: dict) -> str:
    if row["exceeds"]:
        return "[bold red]EXCEEDS[/]"
    if row["varies"]:
        return "[bold red]VARIES[/]"
    return "[green]ok[/]"


def render(report: Report, console: Any) -> None:
    """The per-call table, the findings, what was not covered, one summary line and the
    statement (distances and sensitivities only: never a record or a true value)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Self-test: observed neighbour distance vs declared sensitivity")
    table.add_column("DP call")
    for name, justify in (("mechanism, metric", "left"), ("declared", "right"),
                          ("max distance", "right"), ("ratio", "right"), ("pairs", "right"),
                          ("result", "left")):
        table.add_column(name, justify=justify)
    for row in report.calls():
        low, high = row["sensitivity_min"], row["sensitivity_max"]
        sens = _fmt(high) if low == high else f"{low:.3g}..{high:.3g}"
        name = escape(row["call"]) + (f" ({row['purposes']} calls)" if row["purposes"] > 1 else "")
        table.add_row(name, f"{row['mechanism']}, {row['metric']}", sens, _fmt(row["largest_distance"]),
                      _fmt(row["ratio"]), str(row["pairs"]), _verdict(row))
    console.print(table)
    for f in report.findings[:MAX_SHOWN]:
        console.print(f"[bold red]FAIL[/] {f.kind} (configuration {f.config_id}, pair {f.pair}): "
                      f"{escape(f.message)}", highlight=False)
    if len(report.findings) > MAX_SHOWN:
        console.print(f"... and {len(report.findings) - MAX_SHOWN} more finding(s) (all of them "
                      "are in the --json report)", highlight=False)
    for ctype, how in COUPLINGS.items():
        console.print(f"[dim]coupling[/] {ctype}: {how}", highlight=False)
    for nc in report.not_covered:
        console.print(f"[yellow]not covered[/] configuration {nc['config_id']} "
                      f"({nc['generator']}): {escape(nc['reason'])}", highlight=False)
    console.print(summary_line(report), highlight=False)
    console.print(STATEMENT, highlight=False)


def summary_line(report: Report) -> str:
    fails = len(report.findings)
    calls = len(report.calls())
    verdict = "PASS" if report.passed else "FAIL"
    return (f"selftest {verdict}: {len(report.configs)} configuration(s) x {report.pairs} "
            f"neighbour(s), {len(report.observations)} paired DP calls in {calls} call families, "
            f"{fails} finding(s), {len(report.not_covered)} not covered; seed {report.seed}; "
            f"{report.seconds:.1f} s; nothing spent")


# --------------------------------------------------------------------------- command


class _InputProblem(Exception):
    pass


@contextmanager
def _inputs(spec_path: Path | None, data: Path | None, example: str | None,
            example_rows: int) -> Iterator[tuple[Spec, Path, Path | None]]:
    """(spec, data, narrowed list or None); an example's in a temporary directory."""
    if example is None:
        if spec_path is None or data is None:
            raise _InputProblem("give SPEC and DATA, or --example NAME")
        yield _spec(spec_path), data, None
        return
    if spec_path is not None or data is not None:
        raise _InputProblem("give either SPEC and DATA or --example, not both")
    from dpbundle.release.api import CommandError
    from dpbundle.release.pipeline import example_inputs

    try:
        with example_inputs(example, example_rows) as (s, d, narrowed):
            yield _spec(s), d, narrowed
    except CommandError as exc:
        raise _InputProblem(str(exc)) from None


def _spec(path: Path) -> Spec:
    from dpbundle.release.spec.load import SpecError, load_spec

    try:
        return load_spec(path)
    except (SpecError, OSError) as exc:
        raise _InputProblem(str(exc)) from None


def _prepare_public(spec: Spec, data: Path) -> Prepared:
    from dpbundle.release.data.fingerprint import file_sha256
    from dpbundle.release.data.prepare import InputError, prepare

    try:
        sha = file_sha256(data)
        if sha in spec.private_fingerprints:
            raise _InputProblem(f"{data}: refusing to self-test: this file's SHA-256 is listed in "
                                "the spec's privacy.private_data_sha256 (confidential data); "
                                "the self-test prints statistics of its data: use public data")
        return prepare(data, spec, atoms=False)   # its neighbours change record values
    except (InputError, OSError) as exc:
        raise _InputProblem(str(exc)) from None


def _listed(spec: Spec, path: Path | None) -> list[dict] | None:
    if path is None:
        return None
    from dpbundle.release.sweep.run import load_narrowed

    try:
        return [e["config"] for e in load_narrowed(path, spec)] or None
    except (OSError, ValueError) as exc:
        raise _InputProblem(f"{path}: cannot use the configuration list: {exc}") from None


def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        return x.item()
    if isinstance(x, set):
        return sorted(x)
    raise TypeError(f"not JSON: {type(x).__name__}")
