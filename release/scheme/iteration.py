"""One iteration of the universal scheme: a pure function of (data, spec, configuration,
randomness) returning the candidate, its DP metrics and (through ``rand``) its transcript.

    T       <- transform(original, config)            clip + bin with public edges
    model   <- generator.fit(T, eps_gen)               pure DP
    S       <- n records of the model that satisfy the synthetic constraints, as record
               types (sampler version 2: counts; version 1: ~1.1 n rows a round, first n kept)
    C       <- face-privacy projection of S            post-processing
    metrics <- every acceptance criterion on (T, C)    Laplace, sum of epsilons = eps_eval
    passed  <- every DP metric < its threshold

The order of randomness requests is fixed (the "arithmetic" mark of version 2, fit, the
"sampler" mark of version 2, "sample round k", "projection", then the criteria in spec order)
so that an enclave auditor can replay an iteration from its transcript.

Arithmetic (``dpbundle.mechanisms.arithmetic``, docs/determinism.md): the attempt's criteria
are evaluated with version 2 (fixed-order sums and linear algebra, no BLAS or LAPACK: the same
bits on the auditor's machine), marked right after the attempt's "iteration" mark
(``{"mark": "arithmetic", "version": 2}``); ``run_iteration(..., arithmetic=1)`` evaluates as
dpbundle 0.2 did, unmarked.

Counts, not rows: T is binned once per prepared table and binning and kept in memory
(``transform.cached_transform``), with its record types, from which PrivBayes fits; the count
sampler (``dpbundle.mechanisms.sampling``, version 2, the default :data:`DEFAULT_SAMPLER`)
draws the counts of each record type and applies the synthetic constraints to the distinct
types; the projection works on the record types and only its final shuffle writes n rows (the
rows of data.csv); every criterion reads the record types of T and C
(``dpbundle.mechanisms.cells``). The row sampler (version 1, ``sample_constrained``,
``sample_cells``) stays for bundles made with it: ``run_iteration(..., sampler=1)``; the enclave
replay (audit/replay.py) reads the version from the transcript and runs the same code.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from dpbundle.mechanisms import arithmetic as ar
from dpbundle.mechanisms.cells import DENSE_CELLS, RecordTypes, domain_cells, fit_on_types, remember, types_from_cells
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionResult, EvalContext, make_criterion
from dpbundle.mechanisms.generators import Generator, make_generator
from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.projection import arrange, arranged, project, project_types
# the bound, the round sizes and the failure are the sampling module's (re-exported here)
from dpbundle.mechanisms.sampling import (BASE_SAMPLER, COUNT_SAMPLER, DRAWN_EXTRA,  # noqa: F401
                                          DRAWN_FACTOR, MAX_SAMPLE_ROUNDS, OVERSAMPLE,
                                          SAMPLER_MARK, SAMPLERS, ConstraintShortfall,
                                          DrawBoundExceeded, max_drawn, public_sampler,
                                          sample_types, set_model_sampler)

from dpbundle.release.data.constraints import synthetic_violations, violation_table
from dpbundle.release.data.prepare import Prepared
from dpbundle.release.scheme.space import config_id
from dpbundle.release.spec.load import Spec
from dpbundle.release.spec.typed import Constraint
from dpbundle.release.data.transform import cached_transform

#: The sampler of new releases: 3 = counts of record types, from a bounded base of records where
#: the public rule ``sampling.public_sampler`` says so (a generator that makes records one by one,
#: n > ``BASE_RECORDS``; recorded as 3), else as 2 (recorded as 2: small releases are unchanged);
#: 2 = counts of record types; 1 = rows (``mechanisms/sampling.py``).
DEFAULT_SAMPLER = BASE_SAMPLER


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
    """The generator of a configuration, spending the spec's eps_gen (or rho_generation under
    ``privacy.definition: zcdp``)."""
    params = {k: v for k, v in config["generator"].items() if k not in ("type", "flavour")}
    if config["generator"]["type"] == "aim_pure" and "workload" not in params:
        from dpbundle.mechanisms.aim import criteria_workload

        params["workload"] = criteria_workload(spec.public_dict(), spec.column_names)
    return make_generator(config["generator"]["type"], **spec.generation_budget(), **params)


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
            raise DrawBoundExceeded(
                f"round {k} would draw {m} more rows, beyond {max_drawn(n)} in all (4 n + 128): the "
                "model's samples fail the synthetic constraints too often", max_drawn(n))
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


def _implausible(constraints: Sequence[Constraint | Mapping], columns):
    """(rows, cells) -> mask of the records a synthetic constraint rules out (None without
    constraints): a lookup in the table over the domain's cells when it is small, else the
    constraints evaluated on the rows."""
    if not constraints:
        return None
    size = domain_cells(tuple(c.size for c in columns))
    if size is not None and size <= DENSE_CELLS:
        table = violation_table(constraints, columns)
        return lambda rows, cells: table[cells]
    return lambda rows, cells: synthetic_violations(constraints, Coded(rows, columns))


def sample_counted(model, n: int, constraints: Sequence[Constraint | Mapping], columns,
                   rand: Randomness, version: int = COUNT_SAMPLER) -> RecordTypes:
    """Sampler version 2 or 3: the record types of n records of ``model`` that satisfy the
    synthetic constraints (``mechanisms.sampling.sample_types``, seeds "sample round k", and for
    version 3's scaling "sample scale")."""
    rows, counts, cells = sample_types(model, n, tuple(c.size for c in columns),
                                       _implausible(constraints, columns), rand.rng,
                                       version=version)
    return RecordTypes(Coded.unchecked(rows, tuple(columns)), counts, cells)


def project_counted(types: RecordTypes, min_count: int, rng: np.random.Generator) -> Coded:
    """C = the projection of the sampled record types, as its record types: its n rows (the
    final shuffle, ``projection.arranged``; the draws of ``projection.project_counts``) are
    written when first read (data.csv of the released candidate), never for the others."""
    return arranged(project_types(types, min_count, rng), rng)


def project_cells(cells: np.ndarray, columns, min_count: int, rng: np.random.Generator) -> Coded:
    """C = project(rows of ``cells``, min_count, rng) exactly, computed on record types (one
    bincount of the cells); C's record types are remembered for the criteria."""
    out = project_types(types_from_cells(cells, columns), min_count, rng)
    return remember(Coded.unchecked(arrange(out, rng), tuple(columns)), out)


def run_iteration(prepared: Prepared, spec: Spec, config: dict, rand: Randomness,
                  phase: Callable[[str], None] | None = None,
                  sampler: int | None = None, arithmetic: int | None = None) -> IterationResult:
    """Run one iteration. ``phase`` (optional) is told each step's name, for progress displays.
    ``sampler``: the sampler version (``mechanisms/sampling.py``; default :data:`DEFAULT_SAMPLER`);
    version 2 is recorded in the transcript (a "sampler" mark) and on the fitted model.
    ``arithmetic``: the arithmetic version (``mechanisms/arithmetic.py``; default
    ``release_arithmetic()``, 2); version 2 is recorded first (an "arithmetic" mark)."""
    version = DEFAULT_SAMPLER if sampler is None else sampler
    if version not in SAMPLERS:
        raise ValueError(f"unknown sampler version {version!r}; known: {SAMPLERS}")
    arith = ar.release_arithmetic() if arithmetic is None else arithmetic
    if arith not in ar.ARITHMETICS or isinstance(arith, bool):
        raise ValueError(f"unknown arithmetic version {arith!r}; known: {ar.ARITHMETICS}")
    if arith != ar.BLAS:
        rand.mark(ar.ARITHMETIC_MARK, version=arith)
    with ar.use(arith):
        return _run_iteration(prepared, spec, config, rand, phase, version)


def _stepper(phase: Callable[[str], None] | None, timings: dict[str, float]) -> Callable:
    """step(name, fn, *args): tell ``phase`` the step's name, run it, record its time."""
    say = phase or (lambda _name: None)

    def step(name: str, fn: Callable, *args):
        say(name)
        t0 = time.perf_counter()
        out = fn(*args)
        timings[name] = time.perf_counter() - t0
        return out

    return step


def _run_iteration(prepared: Prepared, spec: Spec, config: dict, rand: Randomness,
                   phase: Callable[[str], None] | None, version: int) -> IterationResult:
    """:func:`run_iteration` with the sampler ``version``, inside its arithmetic."""
    timings: dict[str, float] = {}
    step = _stepper(phase, timings)
    real = step("transform", cached_transform, prepared, spec, config)
    generator = make_config_generator(spec, config)
    model = step("fit", fit_on_types, generator, real, rand)
    return _evaluate(step, FittedModel(config, config_id(config), real, generator, model), spec,
                     rand, version, timings)


def _evaluate(step: Callable, fitted: "FittedModel", spec: Spec, rand: Randomness, version: int,
              timings: dict[str, float]) -> IterationResult:
    """S, C and the criteria of one candidate of a fitted model (post-processing of the model,
    then the criteria's DP measurements on (T, C))."""
    config, real = fitted.config, fitted.real
    min_count = int(config["projection"]["min_count"])
    try:
        candidate = _sample_and_project(step, fitted.model, real, spec.model.all_synthetic_constraints,
                                        min_count, rand, version, config.get("generator"))
    except ConstraintShortfall as exc:
        return IterationResult(config, fitted.config_id, real, None, [], False, fitted.generator,
                               timings, note=str(exc))
    ctx = EvalContext(real=real, synth=candidate, spec=spec.evaluation_document, alternatives=dict(config["columns"]))
    results = []
    for crit in spec.model.acceptance:
        results.append(step(f"criterion {crit.id}", make_criterion(crit.to_document()).evaluate, ctx, rand))
    passed = all(r.passed for r in results)
    return IterationResult(config, fitted.config_id, real, candidate, results, passed, fitted.generator,
                           timings, model=fitted.model)


@dataclass
class FittedModel:
    """The generator fitted once by a ``retries: resample`` selection (private: T is inside)."""

    config: dict
    config_id: str
    real: Coded
    generator: Generator
    model: Any
    timings: dict[str, float] = field(default_factory=dict)


#: the transcript's marks around the one fit of a ``retries: resample`` selection
FIT_MARK, FIT_END_MARK = "fit", "fit end"


def fit_once(prepared: Prepared, spec: Spec, config: dict, rand: Randomness,
             phase: Callable[[str], None] | None = None, arithmetic: int | None = None) -> FittedModel:
    """The one fit of a ``retries: resample`` selection (eps_gen, spent once): marks "fit"
    (config, config_id) and, for arithmetic version 2, "arithmetic", then T and the fit, then
    "fit end". Every attempt then samples from this model (:func:`run_resampled`)."""
    arith = ar.release_arithmetic() if arithmetic is None else arithmetic
    rand.mark(FIT_MARK, config=config, config_id=config_id(config))
    if arith != ar.BLAS:
        rand.mark(ar.ARITHMETIC_MARK, version=arith)
    timings: dict[str, float] = {}
    step = _stepper(phase, timings)
    with ar.use(arith):
        real = step("transform", cached_transform, prepared, spec, config)
        generator = make_config_generator(spec, config)
        model = step("fit", fit_on_types, generator, real, rand)
    rand.mark(FIT_END_MARK)
    return FittedModel(config, config_id(config), real, generator, model, timings)


def run_resampled(fitted: FittedModel, spec: Spec, rand: Randomness,
                  phase: Callable[[str], None] | None = None, sampler: int | None = None,
                  arithmetic: int | None = None) -> IterationResult:
    """One attempt of a ``retries: resample`` selection: the "arithmetic" mark (version 2), then
    S, C and the criteria from ``fitted`` (the caller writes the "iteration" marks)."""
    version = DEFAULT_SAMPLER if sampler is None else sampler
    arith = ar.release_arithmetic() if arithmetic is None else arithmetic
    if arith != ar.BLAS:
        rand.mark(ar.ARITHMETIC_MARK, version=arith)
    timings: dict[str, float] = {}
    with ar.use(arith):
        return _evaluate(_stepper(phase, timings), fitted, spec, rand, version, timings)


def _sample_and_project(step: Callable, model, real: Coded, constraints, min_count: int,
                        rand: Randomness, version: int, generator: Mapping | None = None) -> Coded:
    """S and C of an iteration, with the sampler ``version``: 3 is recorded (and drawn) only
    where the public rule says so for the configuration's ``generator`` and n
    (``sampling.public_sampler``, which manifest.json states and the audit re-derives), else as
    2; 2 and 3 fall back to 1, unrecorded, for a domain of >= 2^62 cells (no int64 cell index)."""
    by_cells = domain_cells(real.domain) is not None
    if version in (COUNT_SAMPLER, BASE_SAMPLER) and by_cells:
        used = (public_sampler(generator, real.n, real.domain) if version == BASE_SAMPLER
                else COUNT_SAMPLER)
        rand.mark(SAMPLER_MARK, version=used)
        set_model_sampler(model, used)
        types = step("sample", sample_counted, model, real.n, constraints, real.columns, rand, used)
        return step("project", project_counted, types, min_count, rand.rng("projection"))
    sampled = step("sample", sample_cells if by_cells else sample_constrained, model, real.n,
                   constraints, real.columns, rand)
    if by_cells:
        return step("project", project_cells, sampled, real.columns, min_count, rand.rng("projection"))
    return real.with_codes(step("project", project, sampled, min_count, rand.rng("projection")))
