"""Private selection (Liu & Talwar 2019, known threshold) through OpenDP.

One candidate = one iteration with a configuration drawn uniformly (CSPRNG) from the space or a
narrowed list; its privacy map is eps_gen + eps_eval per unit of change-one distance. OpenDP's
``make_select_private_candidate(measurement, stop_probability, threshold=1)`` repeats it until a
candidate scores 1 (every DP metric below its threshold) or the random stop, and its privacy map
gives the total: 2 x (eps_gen + eps_eval) for d_in = 1.

Nothing about failed attempts (how many, their scores or configurations) leaves this module except
into the private transcript.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from dpbundle.mechanisms.noise import Randomness, Transcript

from .iteration import IterationResult, run_iteration
from .prepare import Prepared
from .space import config_id, draw_config
from .spec import SELECTION_FACTOR, Spec

THRESHOLD = 1.0


class NothingSelected(RuntimeError):
    """The selection stopped (stop_probability > 0) before any candidate passed."""


@dataclass
class Selection:
    result: IterationResult
    selected_index: int               # private: position in the transcript, never published
    total_epsilon_opendp: float       # OpenDP's privacy map of the whole selection (+ pre-selection)
    total_epsilon_ours: float         # our own arithmetic from the spec


def _opendp():
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    return dp


def selection_measurement(spec: Spec, candidate_fn: Callable[[Prepared], tuple[float, object]]):
    """The OpenDP measurement of the whole selection, for an arbitrary candidate function."""
    dp = _opendp()
    per_iteration = spec.epsilon_generation + spec.epsilon_evaluation
    domain = dp.user_domain("dpbundle.PreparedData", lambda x: isinstance(x, Prepared))
    candidate = dp.m.make_user_measurement(
        domain, dp.change_one_distance(), dp.max_divergence(), candidate_fn,
        lambda d_in: per_iteration * d_in, TO="(f64, ExtrinsicObject)")
    return dp.c.make_select_private_candidate(candidate, stop_probability=spec.stop_probability, threshold=THRESHOLD)


def opendp_total_epsilon(spec: Spec) -> float:
    """Total epsilon of a release according to OpenDP's privacy maps (+ pre-selection epsilons)."""
    meas = selection_measurement(spec, lambda _data: (0.0, None))
    return float(meas.map(1)) + math.fsum(float(p["epsilon"]) for p in spec.pre_selection)


def check_accounting(spec: Spec) -> tuple[float, float]:
    """(OpenDP's total, ours); raises if they disagree (beyond float rounding)."""
    theirs, ours = opendp_total_epsilon(spec), spec.total_epsilon
    if not math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12):
        raise RuntimeError(f"privacy accounting mismatch: OpenDP gives {theirs!r}, our arithmetic "
                           f"{SELECTION_FACTOR} x (eps_gen + eps_eval) gives {ours!r}")
    return theirs, ours


def select(prepared: Prepared, spec: Spec, transcript: Transcript, configs: list[dict] | None = None,
           phase: Callable[[str], None] | None = None) -> Selection:
    """Run the private selection; every attempt is recorded into ``transcript`` (private)."""
    theirs, ours = check_accounting(spec)
    counter = {"next": 0}
    raised: list[BaseException] = []

    def candidate(data: Prepared):
        # An exception (Ctrl-C included) must not unwind through OpenDP's FFI (it crashes the
        # interpreter): keep it, end the loop with a score at the threshold, re-raise below.
        try:
            index = counter["next"]
            counter["next"] += 1
            config = draw_config(spec, configs)
            rand = Randomness(transcript)
            rand.mark("iteration", index=index, config=config, config_id=config_id(config))
            result = run_iteration(data, spec, config, rand, phase=phase)
            rand.mark("iteration end", index=index, passed=result.passed)
            return (1.0 if result.passed else 0.0, (index, result))
        except BaseException as exc:  # noqa: BLE001 - re-raised after the FFI call returns
            raised.append(exc)
            return (THRESHOLD, None)

    meas = selection_measurement(spec, candidate)
    try:
        out = meas(prepared)
    except BaseException:
        if raised:
            raise raised[0] from None
        raise
    if raised:
        raise raised[0]
    if out is None or out[1] is None:
        raise NothingSelected("the private selection stopped before a candidate passed every criterion; nothing is released")
    _score, (index, result) = out
    Randomness(transcript).mark("selected", index=index)
    return Selection(result, index, theirs, ours)
