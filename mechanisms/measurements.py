"""Small self-describing DP steps, in the spirit of OpenDP measurements.

Each descriptor states its input metric (change-one distance: bounded neighbours, n public),
its output measure (pure DP, max-divergence), its noise scale and its privacy map, and releases
through :class:`~dpbundle.mechanisms.noise.Randomness` (OpenDP samplers, transcript).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import exact
from .noise import Randomness, calibrated_exponential_scale, calibrated_laplace_scale, map_distance

__all__ = ["LaplaceRelease", "ExponentialSelection"]


def _check(sensitivity: float, epsilon: float) -> None:
    if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float))
                                         and math.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a finite number > 0, got {epsilon!r}")
    if isinstance(sensitivity, bool) or not (isinstance(sensitivity, (int, float))
                                             and math.isfinite(sensitivity) and sensitivity >= 0):
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity!r}")


def _check_d_in(d_in: float) -> float:
    if not (isinstance(d_in, (int, float)) and d_in >= 0):
        raise ValueError(f"d_in must be a number >= 0, got {d_in!r}")
    return float(d_in)


@dataclass(frozen=True)
class LaplaceRelease:
    """Release ``f(D) + Lap(scale)`` (per coordinate) for an ``f`` with the given sensitivity.

    ``sensitivity`` = max over change-one neighbours of ``|f(D) - f(D')|`` (L1 for vectors);
    ``scale`` = the OpenDP-calibrated ``sensitivity / epsilon`` (rounded up so that OpenDP's
    map is ``<= exact.spendable(epsilon)`` exactly); privacy map
    ``d_in -> d_in * sensitivity / scale`` (<= ``d_in * epsilon``).
    """

    purpose: str
    sensitivity: float
    epsilon: float
    vector: bool = False
    integer: bool = False           # discrete Laplace on integer values (e.g. counts)
    input_metric: str = field(default="change_one_distance", init=False)
    output_measure: str = field(default="max_divergence", init=False)
    mechanism: str = field(default="laplace", init=False)

    def __post_init__(self) -> None:
        _check(self.sensitivity, self.epsilon)

    @property
    def scale(self) -> float:
        """Noise scale b of Lap(b) (calibrated against OpenDP's privacy map)."""
        return calibrated_laplace_scale(self.sensitivity, self.epsilon, self.vector, self.integer)

    @property
    def noise_std(self) -> float:
        """Standard deviation of Lap(b): sqrt(2) * b."""
        return math.sqrt(2.0) * self.scale

    def privacy_map(self, d_in: float) -> float:
        """Epsilon for neighbours at change-one distance ``d_in``: ``d_in * s' / scale`` rounded
        up to a float, where ``s' = map_distance(sensitivity)`` is the distance the scale was
        calibrated at (the next float above a float sensitivity); at ``d_in = 1`` it equals
        OpenDP's map and is ``<= exact.spendable(epsilon)``."""
        d = _check_d_in(d_in)
        if self.sensitivity == 0 or d == 0:
            return 0.0
        s = exact.binary(map_distance(self.sensitivity, self.integer))
        return exact.float_up(exact.binary(d) * s / exact.binary(self.scale))

    def describe(self) -> dict:
        """JSON-able summary of this step."""
        return {
            "purpose": self.purpose, "mechanism": self.mechanism,
            "input_metric": self.input_metric, "output_measure": self.output_measure,
            "sensitivity": float(self.sensitivity), "epsilon": float(self.epsilon),
            "scale": self.scale, "noise_std": self.noise_std,
            "discrete": self.integer,
        }

    def release(self, true_value: float | np.ndarray, rand: Randomness) -> float | np.ndarray:
        """The noisy value (through ``rand.laplace``; recorded in its transcript)."""
        if (np.ndim(true_value) > 0) != self.vector:
            kind = "an array" if self.vector else "a scalar"
            raise ValueError(f"LaplaceRelease {self.purpose!r} expects {kind} true value")
        return rand.laplace(true_value, sensitivity=self.sensitivity, epsilon=self.epsilon,
                            purpose=self.purpose, integer=self.integer)


@dataclass(frozen=True)
class ExponentialSelection:
    """epsilon-DP choice of a high-scoring index (exponential-mechanism family).

    ``sensitivity`` = max over change-one neighbours and candidates of ``|u_i(D) - u_i(D')|``;
    implemented as OpenDP report-noisy-max under max_divergence, which adds exponential noise
    of ``scale`` = 2 * sensitivity / epsilon (rounded up against OpenDP's map, exactly):
    permute-and-flip, whose choice
    probabilities dominate the exponential mechanism's ``exp(epsilon * u_i / (2 * sensitivity))``.
    Privacy map ``d_in -> 2 * d_in * sensitivity / scale``.
    """

    purpose: str
    sensitivity: float
    epsilon: float
    input_metric: str = field(default="change_one_distance", init=False)
    output_measure: str = field(default="max_divergence", init=False)
    mechanism: str = field(default="report noisy max (exponential noise; permute-and-flip)", init=False)

    def __post_init__(self) -> None:
        _check(self.sensitivity, self.epsilon)

    @property
    def scale(self) -> float:
        """Exponential noise scale (calibrated against OpenDP's privacy map)."""
        return calibrated_exponential_scale(self.sensitivity, self.epsilon)

    def privacy_map(self, d_in: float) -> float:
        """Epsilon for change-one distance ``d_in``: ``2 * d_in * s' / scale`` rounded up, with
        ``s' = map_distance(sensitivity)`` (as :meth:`LaplaceRelease.privacy_map`)."""
        d = _check_d_in(d_in)
        if self.sensitivity == 0 or d == 0:
            return 0.0
        s = exact.binary(map_distance(self.sensitivity))
        return exact.float_up(2 * exact.binary(d) * s / exact.binary(self.scale))

    def describe(self) -> dict:
        """JSON-able summary of this step."""
        return {
            "purpose": self.purpose, "mechanism": self.mechanism,
            "input_metric": self.input_metric, "output_measure": self.output_measure,
            "sensitivity": float(self.sensitivity), "epsilon": float(self.epsilon),
            "scale": self.scale,
        }

    def release(self, scores: np.ndarray, rand: Randomness) -> int:
        """The chosen index (through ``rand.exponential``; recorded in its transcript)."""
        return rand.exponential(scores, sensitivity=self.sensitivity, epsilon=self.epsilon,
                                purpose=self.purpose)
