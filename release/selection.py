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
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.noise import Randomness, Transcript

from .iteration import IterationResult, run_iteration
from .prepare import Prepared
from .space import config_id, draw_config
from .spec import Spec

THRESHOLD = 1.0


class NothingSelected(RuntimeError):
    """The selection stopped (stop_probability > 0) before any candidate passed."""


class SelectionAborted(RuntimeError):
    """An attempt raised something other than an :class:`AttemptFailure`: the release stops.
    The message is generic (the exception may carry private values); the details were recorded
    in the private transcript (mark "attempt error")."""

    def __init__(self, index: int, kind: str) -> None:
        super().__init__("an attempt of the private selection failed with an internal error "
                         f"({kind}); the details are in the private transcript only")
        self.index = index
        self.kind = kind


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


def count_epsilon_opendp(spec: Spec) -> float:
    """OpenDP's privacy map (at distance 1) of the DP count of records (0 if n is declared public)."""
    if spec.records_policy != "dp_count":
        return 0.0
    from dpbundle.mechanisms.noise import calibrated_laplace_scale, laplace_measurement

    scale = calibrated_laplace_scale(1, spec.epsilon_count, integer=True)
    return float(laplace_measurement(scale, vector=False, integer=True).map(1))


def opendp_total_epsilon(spec: Spec) -> float:
    """Total epsilon of a release according to OpenDP's privacy maps: the count of records (if
    DP) + the selection + pre-selection epsilons."""
    meas = selection_measurement(spec, lambda _data: (0.0, None))
    pre = exact.total(p["epsilon"] for p in spec.pre_selection)
    return float(exact.binary(count_epsilon_opendp(spec)) + exact.binary(float(meas.map(1))) + pre)


def check_accounting(spec: Spec) -> tuple[float, float]:
    """(OpenDP's total, ours); raises if they disagree (beyond OpenDP's own float rounding of
    its maps, which round up)."""
    theirs, ours = opendp_total_epsilon(spec), spec.total_epsilon
    if not math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12):
        raise RuntimeError(f"privacy accounting mismatch: OpenDP gives {theirs!r}, our arithmetic "
                           f"gives {ours!r}")
    return theirs, ours


def select(prepared: Prepared, spec: Spec, transcript: Transcript, configs: list[dict] | None = None,
           phase: Callable[[str], None] | None = None, seeds: Any = None) -> Selection:
    """Run the private selection; every attempt is recorded into ``transcript`` (private).
    ``seeds``: a :class:`dpbundle.mechanisms.seeds.SeedBinding` of a pre-registered release (the
    post-processing seeds of every attempt are then derived from it), or None."""
    theirs, ours = check_accounting(spec)
    counter = {"next": 0}
    raised: list[BaseException] = []

    def candidate(data: Prepared):
        # An exception (Ctrl-C included) must not unwind through OpenDP's FFI (it crashes the
        # interpreter): keep it, end the loop with a score at the threshold, re-raise below.
        index = counter["next"]
        counter["next"] += 1
        rand = Randomness(transcript, seeds=seeds)
        try:
            config = draw_config(spec, configs)
            rand.mark("iteration", index=index, config=config, config_id=config_id(config))
            result = run_iteration(data, spec, config, rand, phase=phase)
            rand.mark("iteration end", index=index, passed=result.passed)
            return (1.0 if result.passed else 0.0, (index, result))
        except AttemptFailure as exc:
            # a function of this attempt's DP outputs only: a failed attempt (score 0)
            rand.mark("iteration end", index=index, passed=False,
                      failure=f"{type(exc).__name__}: {exc}")
            return (0.0, None)
        except Exception as exc:  # noqa: BLE001 - private details to the transcript only
            rand.mark("attempt error", index=index, error=type(exc).__name__,
                      traceback="".join(traceback.format_exception(exc)))
            raised.append(SelectionAborted(index, type(exc).__name__))
            return (THRESHOLD, None)
        except BaseException as exc:  # noqa: BLE001 - Ctrl-C: re-raised after the FFI call returns
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
