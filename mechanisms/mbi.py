"""Optional AIM and MST generators through OpenDP's ``opendp.extras.mbi`` (pure DP).

Available only with the ``mbi`` extra (``pip install 'dpbundle[mbi]'``, which pulls in
Private-PGM, JAX and polars). Privacy: the OpenDP polars context is built with
``privacy_unit = unit_of(contributions=2)`` (one changed record = one removal + one addition,
symmetric distance 2) and ``privacy_loss = loss_of(epsilon)``, so the release is epsilon-DP
under change-one-record. The noise is drawn inside OpenDP (its samplers, OS randomness) and is
therefore NOT in the dpbundle transcript: runs of these generators cannot be replayed by an
auditor, and ``fit`` refuses to run in replay mode. Sampling uses the caller's recorded rng on
the model's dense joint distribution (refused above ``max_cells`` cells).

This module has not been exercised in the development environment (no JAX there).
"""
from __future__ import annotations

import hashlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .coding import mixed_radix_decode
from .generators import check_codes
from .noise import Randomness

__all__ = ["AIM", "MST", "mbi_availability"]

_NEEDED = ("mbi", "jax", "polars")
DEFAULT_MAX_CELLS = 10_000_000


def mbi_availability() -> tuple[bool, str]:
    """(True, "") if Private-PGM, JAX and polars are importable, else (False, reason)."""
    missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        return False, (f"needs the optional packages {missing}: install dpbundle[mbi] "
                       "(pip install 'dpbundle[mbi]')")
    return True, ""


@dataclass
class MbiModel:
    """Dense joint distribution of the fitted Markov random field."""

    domain: tuple[int, ...]
    p: np.ndarray

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records drawn i.i.d. from the model's joint distribution (post-processing)."""
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"the number of rows to sample must be an integer >= 0, got {m!r}")
        return mixed_radix_decode(rng.choice(self.p.shape[0], size=int(m), p=self.p), self.domain)


class _MbiGenerator:
    type = "mbi"
    HYPERPARAMETERS: tuple[str, ...] = ("max_cells",)

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS) -> None:
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"{self.type}: epsilon must be a finite number > 0, got {epsilon!r}")
        if isinstance(max_cells, bool) or not isinstance(max_cells, int) or max_cells < 1:
            raise ValueError(f"{self.type}: max_cells must be a positive integer, got {max_cells!r}")
        self.epsilon = float(epsilon)
        self.max_cells = max_cells

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        return mbi_availability()

    def hyperparameters(self) -> dict:
        return {"max_cells": self.max_cells}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance d_in -> d_in * epsilon (OpenDP checks the map for d_in = 1)."""
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict]:
        return [{"purpose": f"{self.type} (OpenDP mbi, internal split)", "epsilon": self.epsilon}]

    def _algorithm(self, dp):  # pragma: no cover - needs the mbi extra
        raise NotImplementedError

    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness) -> MbiModel:  # pragma: no cover
        """Release an OpenDP ContingencyTable (epsilon-DP), densify it, normalise."""
        ok, reason = mbi_availability()
        if not ok:
            raise ValueError(f"generator {self.type!r} is not available: {reason}")
        if rand.replaying:
            raise ValueError(
                f"generator {self.type!r} draws its noise inside OpenDP's mbi module and cannot be "
                "replayed; use privbayes, crosstab or marginals for an auditable release"
            )
        codes, dom = check_codes(codes, domain)
        cells = math.prod(dom)
        if cells > self.max_cells:
            raise ValueError(f"{self.type}: the domain has {cells:,} cells, more than "
                             f"max_cells={self.max_cells:,}")
        import polars as pl
        import opendp.prelude as dp

        dp.enable_features("contrib")
        names = [f"c{j}" for j in range(len(dom))]
        data = pl.LazyFrame({nm: codes[:, j] for j, nm in enumerate(names)})
        context = dp.Context.compositor(
            data=data,
            privacy_unit=dp.unit_of(contributions=2),   # change one = remove one + add one
            privacy_loss=dp.loss_of(epsilon=self.epsilon),
            split_evenly_over=1,
        )
        table = (
            context.query(epsilon=self.epsilon)
            .contingency_table(keys={nm: list(range(dom[j])) for j, nm in enumerate(names)},
                               algorithm=self._algorithm(dp))
            .release()
        )
        joint = np.asarray(table.project(names), dtype=np.float64).reshape(-1)
        joint = np.clip(joint, 0.0, None)
        total = joint.sum()
        p = joint / total if total > 0 else np.full(cells, 1.0 / cells)
        # the noise is not replayable; record what was done and a digest of the released model
        rand.mark("opaque_release", generator=self.type, epsilon=self.epsilon,
                  model_sha256=hashlib.sha256(p.tobytes()).hexdigest())
        return MbiModel(domain=dom, p=p)


class AIM(_MbiGenerator):
    """AIM (McKenna et al. 2022) via ``dp.mbi.AIM`` under pure DP."""

    type = "aim"
    HYPERPARAMETERS = ("max_cells", "degree", "measure_split")

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS, degree: int = 3,
                 measure_split: float = 0.9) -> None:
        super().__init__(epsilon, max_cells)
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"aim: degree must be a positive integer, got {degree!r}")
        if not (isinstance(measure_split, (int, float)) and 0 < measure_split <= 1):
            raise ValueError(f"aim: measure_split must be in (0, 1], got {measure_split!r}")
        self.degree = degree
        self.measure_split = float(measure_split)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "degree": self.degree,
                "measure_split": self.measure_split}

    def _algorithm(self, dp):  # pragma: no cover
        return dp.mbi.AIM(queries=self.degree, measure_split=self.measure_split)


class MST(_MbiGenerator):
    """MST (McKenna et al. 2021) via ``dp.mbi.MST`` under pure DP."""

    type = "mst"

    def _algorithm(self, dp):  # pragma: no cover
        return dp.mbi.MST()
