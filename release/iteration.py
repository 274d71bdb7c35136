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
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionResult, EvalContext, make_criterion
from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.generators import Generator, make_generator
from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.projection import project

from .constraints import synthetic_violations
from .prepare import Prepared
from .space import config_id
from .spec import Spec
from .transform import transform

OVERSAMPLE = 1.1
MAX_SAMPLE_ROUNDS = 8


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

    def metrics(self) -> list[dict]:
        return [r.to_dict() if hasattr(r, "to_dict") else dict(vars(r)) for r in self.results]


def make_config_generator(spec: Spec, config: dict) -> Generator:
    """The generator of a configuration, spending the spec's eps_gen."""
    params = {k: v for k, v in config["generator"].items() if k not in ("type", "flavour")}
    return make_generator(config["generator"]["type"], spec.epsilon_generation, **params)


def sample_constrained(model, n: int, constraints: list[dict], columns, rand: Randomness) -> np.ndarray:
    """Sample ~1.1 n rows, drop rows failing the synthetic constraints, keep the first n.

    If fewer than n remain, sample again (at most MAX_SAMPLE_ROUNDS rounds, each sized from the
    observed keep rate), then raise :class:`ConstraintShortfall`. Post-processing only.
    """
    kept: list[np.ndarray] = []
    have = 0
    rate = 1.0
    for k in range(MAX_SAMPLE_ROUNDS):
        need = n - have
        m = max(int(math.ceil(OVERSAMPLE * need / max(rate, 0.05))), 16)
        rows = model.sample(m, rand.rng(f"sample round {k}"))
        if constraints:
            bad = synthetic_violations(constraints, Coded(rows, columns))
            rows = rows[~bad]
            rate = max(len(rows) / m, 1e-6)
        kept.append(rows)
        have += len(rows)
        if have >= n:
            return np.concatenate(kept)[:n]
    raise ConstraintShortfall(
        f"after {MAX_SAMPLE_ROUNDS} rounds only {have} of {n} sampled rows satisfy the synthetic constraints")


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

    real = step("transform", transform, prepared, spec, config)
    generator = make_config_generator(spec, config)
    model = step("fit", generator.fit, real.codes, real.domain, rand)
    cid = config_id(config)
    try:
        sampled = step("sample", sample_constrained, model, real.n, spec.raw.get("synthetic_constraints", []),
                       real.columns, rand)
    except ConstraintShortfall as exc:
        return IterationResult(config, cid, real, None, [], False, generator, timings, note=str(exc))
    min_count = int(config["projection"]["min_count"])
    candidate = real.with_codes(step("project", project, sampled, min_count, rand.rng("projection")))
    ctx = EvalContext(real=real, synth=candidate, spec=spec.raw, alternatives=dict(config["columns"]))
    results = []
    for entry in spec.criteria:
        results.append(step(f"criterion {entry['id']}", make_criterion(entry).evaluate, ctx, rand))
    passed = all(r.passed for r in results)
    return IterationResult(config, cid, real, candidate, results, passed, generator, timings)
