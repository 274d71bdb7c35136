"""m synthetic copies that carry the DP noise, and the rules that combine estimates from them.

One synthetic file understates uncertainty: an estimate computed on it varies with the sample
the model drew (which a user's usual standard error sees) *and* with the noise of the DP
measurements the model was built from (which no standard error computed on one file sees).
``dpbundle sample --copies m`` draws m copies that carry both, from the public files of a bundle
that publishes its model and its DP tables (``publish: [model, tables]``); the combining rules
below turn m estimates into an interval. Everything here is post-processing of published numbers:
no budget, no private data; the randomness is numpy's, seeded (a copy is not a DP release).

The draw (derivation). A published table is ``y = c + Z``, ``c`` its true counts and ``Z`` the
discrete Laplace of the published ``scale`` (``P(Z = k) = (1 - a)/(1 + a) a^|k|``, ``a =
exp(-1/scale)``), independent of ``c`` and of every other table's noise. Copy ``i`` redraws every
table independently as ``c*_i = y + Z*_i``, ``Z*_i`` a fresh draw of the same law: then ``c*_i -
y`` has the law of ``y - c`` (``Z`` is symmetric), so any linear function of the counts (a cell, a
margin, a share of the fixed total) scatters around its published value exactly as the published
value scatters around the truth. (In Bayesian terms, ``c*_i`` is a posterior draw under a flat
prior on all integer vectors, each table on its own: it ignores that counts are non-negative and
that tables sharing a column share its margin; the generator's estimator, rebuilt on ``c*_i``,
imposes both, as it did on ``y``.) The model is rebuilt with the generator's own estimator
(``generator.estimate``: the function the fit builds its model with, so a copy's model is what
the release would have built had it measured ``c*_i``), and ``n*_i`` records are drawn from it as
the release draws data.csv (synthetic constraints, projection). Under the records policy
``dp_count`` the number of plausible records is itself a noisy count ``n`` of the count's
published scale: ``n*_i = max(1, n + Z*_n)`` by the same argument; under ``declared_public``,
``n*_i = n``.

The combining rules (derivation). Let an analysis give, on copy ``i``, an estimate ``q_i`` and
the variance ``u_i`` the analysis would state if the copy were the registry (``p(1 - p)/n`` for
a share, ``s^2/n`` for a mean, a regression's squared standard error). Write ``q_i = Q*_i +
e_i``: ``Q*_i`` the value in a registry whose tables are ``c*_i``, ``e_i`` the error of drawing
the copy from the model, of variance ``v_s``. If the estimand ``Q`` is a function the model
reproduces (a share or mean of the columns of one measured table, and sums of them), the
posterior draws ``Q*_i`` scatter around the measured value with the variance ``V`` of the DP
noise, as the measured value scatters around ``Q``. With ``q̄ = mean(q_i)``, ``b = sum((q_i -
q̄)^2) / (m - 1)`` and ``ū = mean(u_i)``:

- ``E[b] = V + v_s`` and ``Var(Q - q̄) = V + V / m + v_s / m`` (the copies' mean still carries
  the one DP noise of the measurements, plus the average of m posterior draws and m samples),
  which is ``(1 + 1/m) E[b] - v_s``. So the registry's interval is ``q̄ ± t_{m-1}(0.975)
  sqrt(T)``, ``T = (1 + 1/m) b``: its variance is too large by ``v_s`` in expectation, which
  matters little when the DP noise dominates and makes the interval conservative otherwise.
  These hold for an estimand linear in the measured counts; the estimators are not linear
  (norm-sub, clipping at zero), so coverage is measured (docs/reading-the-data.md).
- Raghunathan, Reiter and Rubin's (2003) rule for fully synthetic data subtracts ``ū`` from
  ``T``; that is right only when a copy is drawn record by record (``v_s = ū``; PrivSyn's GUM
  sampler matches the measured margins and draws with less variance, so ``T - ū`` can fall
  below ``Var(Q - q̄)``), and it makes the degrees of freedom collapse when ``b`` is near ``ū``
  (measured: intervals 1.1 to 1.8 times as wide; docs/reading-the-data.md). So it is not used.
- For a population the registry is a random sample of (a survey), add the registry's own
  sampling variance, which ``ū`` estimates: ``T_pop = (1 + 1/m) b + ū``, with Satterthwaite's
  ``nu = (m - 1) (T_pop / ((1 + 1/m) b))^2`` degrees of freedom (``ū`` taken as known).

What the intervals do not cover: the error of a model that cannot reproduce the estimand (a
relation between columns no measured table holds: the copies agree on the model's answer, and
the interval is narrow around it), and bias of the estimator near zero (norm-sub, clipping at
zero, the face-privacy projection of rare records). Both are documented in
docs/reading-the-data.md with the coverage measured on the example registries.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .measured import MeasuredTable

__all__ = ["posterior_counts", "posterior_model", "posterior_n", "combine", "Combined",
           "discrete_laplace", "MIN_COPIES", "MAX_COPIES", "COPY_GENERATORS"]

MIN_COPIES, MAX_COPIES = 2, 100
#: Generators whose copies can be drawn: those that publish their tables (``publish: tables``)
#: and rebuild a model from them (``estimate``).
COPY_GENERATORS = ("privbayes", "mst_pure", "privsyn")
MAX_DF = 1e6


def discrete_laplace(scale: float, size: int | tuple, rng: np.random.Generator) -> np.ndarray:
    """Draws of the discrete Laplace of ``scale`` (``P(Z = k) ∝ exp(-|k| / scale)``) as the
    difference of two geometric counts of failures with success probability ``1 - exp(-1/scale)``
    (the difference of two i.i.d. geometrics is the two-sided geometric). Not a DP draw: numpy,
    seeded, for posterior draws of published counts."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"the scale must be a finite number > 0, got {scale!r}")
    p = -math.expm1(-1.0 / float(scale))
    return (rng.geometric(p, size) - rng.geometric(p, size)).astype(np.int64)


def posterior_counts(tables: Sequence[MeasuredTable], rng: np.random.Generator) -> list[MeasuredTable]:
    """One posterior draw of every table's true counts: ``y + Z*`` (module docstring), each table
    with its own published scale; everything else of the table as published."""
    out = []
    for t in tables:
        drawn = t.counts + discrete_laplace(t.scale, t.counts.shape, rng)
        out.append(MeasuredTable(t.columns, t.merge, t.sizes, drawn, t.sensitivity, t.epsilon,
                                 t.measurement))
    return out


def posterior_n(n: int, count_scale: float | None, rng: np.random.Generator) -> int:
    """One posterior draw of the number of plausible records: ``max(1, n + Z*_n)`` under
    ``dp_count`` (the count's published scale), ``n`` under ``declared_public`` (None)."""
    if count_scale is None:
        return int(n)
    return max(1, int(n) + int(discrete_laplace(count_scale, 1, rng)[0]))


def posterior_model(generator: Any, tables: Sequence[MeasuredTable], domain: Sequence[int], n: int,
                    rng: np.random.Generator) -> Any:
    """The model of one copy: ``generator.estimate`` on one posterior draw of the tables,
    normalised to the published ``n`` as the release's were (``dpbundle sample --copies`` and
    benchmarks/copies_coverage.py both draw through it)."""
    if not hasattr(generator, "estimate"):
        raise ValueError(f"generator {getattr(generator, 'type', generator)!r} cannot rebuild a model "
                         "from its tables")
    return generator.estimate(posterior_counts(tables, rng), domain, n)


@dataclass(frozen=True)
class Combined:
    """The combined estimate of m copies (module docstring): ``estimate`` (q̄), ``between`` (b),
    ``within`` (ū), ``variance`` (T, or T_pop), ``df`` (nu), ``lower``/``upper`` (the interval at
    ``level``)."""

    estimate: float
    between: float
    within: float
    variance: float
    df: float
    lower: float
    upper: float
    level: float


def _t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (scipy's)."""
    from scipy.stats import t

    return float(t.ppf(p, df))


def combine(estimates: Sequence[float], variances: Sequence[float], *, level: float = 0.95,
            target: str = "registry") -> Combined:
    """Combine ``m >= 2`` copies' estimates and within-copy variances (module docstring).
    ``target``: "registry" (the value in the registry's plausible records) or "population" (a
    population the registry is a random sample of)."""
    q = np.asarray(estimates, dtype=np.float64)
    u = np.asarray(variances, dtype=np.float64)
    m = q.size
    if m < MIN_COPIES or u.size != m:
        raise ValueError(f"need one estimate and one variance per copy, and at least {MIN_COPIES} copies")
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(u)) and np.all(u >= 0)):
        raise ValueError("estimates must be finite and variances finite and >= 0")
    if target not in ("registry", "population"):
        raise ValueError(f"target must be 'registry' or 'population', got {target!r}")
    if not 0 < level < 1:
        raise ValueError(f"the level must be in (0, 1), got {level!r}")
    qbar, b, ubar = float(q.mean()), float(q.var(ddof=1)), float(u.mean())
    between = (1 + 1 / m) * b
    var = between if target == "registry" else between + ubar
    df = float(m - 1) if between == 0 or target == "registry" else min((m - 1) * (var / between) ** 2, MAX_DF)
    if var <= 0:        # every copy gave the same estimate and no within-copy variance
        return Combined(qbar, b, ubar, 0.0, df, qbar, qbar, level)
    half = _t_quantile(0.5 + level / 2, df) * math.sqrt(var)
    return Combined(qbar, b, ubar, var, df, qbar - half, qbar + half, level)
