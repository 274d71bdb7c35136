"""One iteration of the universal scheme: a pure function of (data, spec, configuration,
randomness) returning the candidate, its DP metrics and (through ``rand``) its transcript.

    T       <- transform(original, config)            clip + bin with public edges
    model   <- generator.fit(T, eps_gen)               pure DP
    S       <- sample ~1.1 n rows, drop rows failing the synthetic constraints, keep n
    C       <- face-privacy projection of S            post-processing
    metrics <- every acceptance criterion on (T, C)    Laplace, sum of epsilons = eps_eval
    passed  <- every DP metric < its threshold

The order of randomness requests is fixed (fit, "sample round k", "projection", then the
criteria in spec order) so that an enclave auditor can replay an iteration from its transcript.

Counts, not rows: T is binned once per prepared table and binning and kept in memory
(``transform.cached_transform``); sampled rows are reduced to their cells (mixed-radix indices)
and the synthetic constraints looked up in a table over the cells; the projection works on the
record types (one ``np.bincount``) and only its final shuffle writes n rows; every criterion
reads the record types of T and C (``dpbundle.mechanisms.cells``). The outputs and the draws are
those of the row-wise steps (``sample_constrained``, ``projection.project``), which the enclave
replay (audit/replay.py) still runs.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpbundle.mechanisms.cells import DENSE_CELLS, domain_cells, remember, types_from_cells
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionResult, EvalContext, make_criterion
from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.generators import Generator, make_generator
from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.projection import arrange, project, project_types

from dpbundle.release.data.constraints import synthetic_violations, violation_table
from dpbundle.release.data.prepare import Prepared
from dpbundle.release.scheme.space import config_id
from dpbundle.release.spec.load import Spec
from dpbundle.release.spec.typed import Constraint
from dpbundle.release.data.transform import cached_transform

OVERSAMPLE = 1.1
MAX_SAMPLE_ROUNDS = 8
DRAWN_FACTOR, DRAWN_EXTRA = 4, 16 * 8   # at most 4 n + 128 rows drawn in all (the audit's bound)


def max_drawn(n: int) -> int:
    """The most rows an attempt draws from its model over all sampling rounds: 4 n + 128. The
    public audit re-derives data.csv under the same bound (audit/bounds.py), so a release never
    draws more than its audit allows; an attempt that would is a failed attempt."""
    return DRAWN_FACTOR * int(n) + DRAWN_EXTRA


class ConstraintShortfall(AttemptFailure):
    """The model's samples fail the synthetic constraints too often to keep n rows."""


@dataclass
class IterationResult:
    config: dict
    config_id: str
    real: Coded                       # T (private)
    candidate: Coded | None           # C (None if sampling could not satisfy the constraints)
    results: list[CriterionResult]
    passed: bool
    generator: Generator
    timings: dict[str, float] = field(default_factory=dict)
    note: str = ""
    model: Any = None                 # the fitted DP model (published with `publish: model`)

    def metrics(self) -> list[dict]:
        return [r.to_dict() if hasattr(r, "to_dict") else dict(vars(r)) for r in self.results]


def make_config_generator(spec: Spec, config: dict) -> Generator:
    """The generator of a configuration, spending the spec's eps_gen."""
    params = {k: v for k, v in config["generator"].items() if k not in ("type", "flavour")}
    return make_generator(config["generator"]["type"], spec.epsilon_generation, **params)


def _sample_rounds(model, n: int, rand: Randomness, keep: Callable[[np.ndarray], np.ndarray],
                   plausible: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
    """Sample ~1.1 n rows, keep what ``keep`` returns for the rows that satisfy the synthetic
    constraints (rows, or their cells), return the first n kept.

    If fewer than n remain, sample again (at most MAX_SAMPLE_ROUNDS rounds, each sized from the
    observed keep rate), then raise :class:`ConstraintShortfall`. Post-processing only.
    A model with ``accepts_keep`` (a raking model, mechanisms/oneway.py) is handed
    ``plausible`` (rows -> mask of the rows the constraints keep) so that it rakes those rows.
    """
    kept: list[np.ndarray] = []
    have = 0
    rate = 1.0
    drawn = 0
    for k in range(MAX_SAMPLE_ROUNDS):
        need = n - have
        m = max(int(math.ceil(OVERSAMPLE * need / max(rate, 0.05))), 16)
        if drawn + m > max_drawn(n):
            raise ConstraintShortfall(
                f"round {k} would draw {m} more rows, beyond {max_drawn(n)} in all (4 n + 128): the "
                "model's samples fail the synthetic constraints too often")
        drawn += m
        rng = rand.rng(f"sample round {k}")
        if plausible is not None and getattr(model, "accepts_keep", False):
            items = keep(model.sample(m, rng, keep=plausible))
        else:
            items = keep(model.sample(m, rng))
        rate = max(len(items) / m, 1e-6)  # 1.0 without constraints: every row is kept
        kept.append(items)
        have += len(items)
        if have >= n:
            return np.concatenate(kept)[:n]
    raise ConstraintShortfall(
        f"after {MAX_SAMPLE_ROUNDS} rounds only {have} of {n} sampled rows satisfy the synthetic constraints")


def _plausible(constraints: Sequence[Constraint | Mapping], columns) -> Callable[[np.ndarray], np.ndarray] | None:
    """rows -> mask of the rows no synthetic constraint drops (None without constraints)."""
    if not constraints:
        return None
    return lambda rows: ~synthetic_violations(constraints, Coded(rows, columns))


def sample_constrained(model, n: int, constraints: Sequence[Constraint | Mapping], columns, rand: Randomness) -> np.ndarray:
    """The first n sampled rows that satisfy the synthetic constraints (see :func:`_sample_rounds`)."""
    def keep(rows: np.ndarray) -> np.ndarray:
        return rows[~synthetic_violations(constraints, Coded(rows, columns))] if constraints else rows

    return _sample_rounds(model, n, rand, keep, _plausible(constraints, columns))


def sample_cells(model, n: int, constraints: Sequence[Constraint | Mapping], columns, rand: Randomness) -> np.ndarray:
    """The cells (mixed-radix indices) of the rows :func:`sample_constrained` keeps: the same
    draws; each row is reduced to its cell and the constraints are looked up in a table over the
    domain's cells (a small domain) or evaluated on the rows."""
    domain = tuple(c.size for c in columns)
    size = domain_cells(domain)
    if size is None:
        raise OverflowError("sample_cells: the domain has too many cells for int64 cell indices")
    sizes = np.asarray(domain, dtype=np.uint64)
    radix = np.asarray([math.prod(domain[j + 1:]) for j in range(len(domain))], dtype=np.int64)
    table = violation_table(constraints, columns) if constraints and size <= DENSE_CELLS else None

    def keep(rows: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if (rows.view(np.uint64) >= sizes).any():  # a negative code is a huge unsigned one
            raise ValueError("the generator sampled codes outside the domain")
        cells = rows @ radix  # = mixed_radix_index(rows, domain), exact in int64
        if not constraints:
            return cells
        bad = table[cells] if table is not None else synthetic_violations(constraints, Coded(rows, columns))
        return cells[~bad]

    return _sample_rounds(model, n, rand, keep, _plausible(constraints, columns))


def project_cells(cells: np.ndarray, columns, min_count: int, rng: np.random.Generator) -> Coded:
    """C = project(rows of ``cells``, min_count, rng) exactly, computed on record types (one
    bincount of the cells); C's record types are remembered for the criteria."""
    out = project_types(types_from_cells(cells, columns), min_count, rng)
    return remember(Coded.unchecked(arrange(out, rng), tuple(columns)), out)


def run_iteration(prepared: Prepared, spec: Spec, config: dict, rand: Randomness,
                  phase: Callable[[str], None] | None = None) -> IterationResult:
    """Run one iteration. ``phase`` (optional) is told each step's name, for progress displays."""
    timings: dict[str, float] = {}
    say = phase or (lambda _name: None)

    def step(name: str, fn: Callable, *args):
        say(name)
        t0 = time.perf_counter()
        out = fn(*args)
        timings[name] = time.perf_counter() - t0
        return out

    real = step("transform", cached_transform, prepared, spec, config)
    generator = make_config_generator(spec, config)
    model = step("fit", generator.fit, real.codes, real.domain, rand)
    cid = config_id(config)
    constraints = spec.model.all_synthetic_constraints
    by_cells = domain_cells(real.domain) is not None  # else rows (a domain of >= 2^62 cells)
    try:
        sampled = step("sample", sample_cells if by_cells else sample_constrained, model, real.n,
                       constraints, real.columns, rand)
    except ConstraintShortfall as exc:
        return IterationResult(config, cid, real, None, [], False, generator, timings, note=str(exc))
    min_count = int(config["projection"]["min_count"])
    if by_cells:
        candidate = step("project", project_cells, sampled, real.columns, min_count, rand.rng("projection"))
    else:
        candidate = real.with_codes(step("project", project, sampled, min_count, rand.rng("projection")))
    ctx = EvalContext(real=real, synth=candidate, spec=spec.evaluation_document, alternatives=dict(config["columns"]))
    results = []
    for crit in spec.model.acceptance:
        results.append(step(f"criterion {crit.id}", make_criterion(crit.to_document()).evaluate, ctx, rand))
    passed = all(r.passed for r in results)
    return IterationResult(config, cid, real, candidate, results, passed, generator, timings,
                           model=model)
