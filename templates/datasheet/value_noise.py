"""How much noise is on each criterion's *reported* value (the datasheet, metrics.csv, the CLI).

metrics.json's ``noise_std`` is the standard deviation of the noise the mechanism draws. For an
additive mechanism (Laplace) that noise is added to the reported value itself, so it is also
the noise of the value. For a fit with noise inside (the functional mechanism or perturbed
sufficient statistics of the regression criteria) it is the noise on *each coefficient of the
fitted loss*, in the loss's own scaled units: a number such as 161 printed next to a threshold
of 30 says nothing about the reported distance. For the exponential mechanism (quantiles) it
is the noise on the candidates' scores, not on the value either.

:func:`noise_on` classifies a mechanism; :func:`estimate` estimates, for the linear-regression
criterion (``regression_coefficients``), the noise of the reported distance by running the same
mechanism again on the *released* data in place of the real data (public post-processing: no
private data, no budget): the same design, sensitivity, noise scale and eigenvalue floor,
``DRAWS`` times with a fixed seed. With the released data standing in for the real data, the
distance without noise is 0, so each draw's distance is what the noise alone contributes; the
mean and the standard deviation of those distances are reported (and their 95th percentile,
from which the datasheet states the error the check rules out, ``evidence.py``). The logistic
functional mechanism (``classification`` with ``report: coefficients``) is simulated the same
way; other fits get no estimate and are marked "inside the fit". :func:`choice_estimates` does
the same for noise on the scores of a choice (``quantile``): the error the noise alone causes in
the chosen values (used for the datasheet's evidence only; metrics.csv's value-noise columns stay
empty for a choice).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

__all__ = ["noise_on", "estimate", "choice_estimates", "value_noise_rows", "value_noise_text", "DRAWS", "ON_VALUE",
           "ON_FIT", "ON_SCORES"]

DRAWS = 200
ON_VALUE, ON_FIT, ON_SCORES = "value", "inside_fit", "selection_scores"
_FIT_MECHANISMS = {"functional_mechanism", "sufficient_statistics", "objective_perturbation"}
_SELECTION_MECHANISMS = {"exponential_mechanism", "report_noisy_max", "permute_and_flip"}


def noise_on(mechanism: str) -> str:
    """Where a mechanism's noise goes: ``value`` (added to the reported value), ``inside_fit``
    (to a fitted model's loss or statistics), ``selection_scores`` (to the scores of a choice)."""
    m = str(mechanism)
    if m in _FIT_MECHANISMS:
        return ON_FIT
    if m in _SELECTION_MECHANISMS:
        return ON_SCORES
    return ON_VALUE


def _synth(codes: Any, columns: Sequence[Any]) -> Any:
    """The released table as a Coded over ``columns``: a Coded is used as it is (its record
    types), an array of codes is wrapped."""
    from dpbundle.mechanisms.coding import Coded

    return codes if isinstance(codes, Coded) else Coded(codes=np.asarray(codes), columns=tuple(columns))


def _regression_estimate(entry: dict, row: dict, columns: Sequence[Any], codes: np.ndarray,
                         draws: int, seed: int) -> dict | None:
    from dpbundle.mechanisms.cells import types_of
    from dpbundle.mechanisms.criteria import regression as R

    target, L, U, features = R.parse_regression_entry(entry, f"acceptance {row['id']}")
    fit = entry.get("fit", "functional_mechanism")
    include_intercept = bool(entry.get("include_intercept", False))
    synth = _synth(codes, columns)
    des = R.RegressionDesign.from_synth(synth, target, L, U, features)
    d = des.d
    stated_d = (row.get("sensitivity_inputs") or {}).get("d")
    if stated_d is not None and int(stated_d) != d:
        return None  # not the design the release used: no estimate rather than a wrong one
    scale = float(row["noise_scale"])
    if not (scale > 0 and math.isfinite(scale)):
        return None
    types = types_of(synth)
    tX, ty = des.scaled(types.table)
    vector = (R.fm_vector if fit == "functional_mechanism" else R.ss_vector)(tX, ty, types.weights)
    beta_c = R.weighted_ols(des, synth)
    floor = math.sqrt(d) * scale
    rng = np.random.default_rng(seed)
    dist = np.empty(draws)
    for k in range(draws):
        noisy = vector + rng.laplace(0.0, scale, size=vector.shape)
        if fit == "functional_mechanism":
            w = R.solve_fm(noisy, d, floor)
        else:
            w = R.solve_ss(noisy, d, synth.n, floor)
        dist[k] = R.coef_distance(des.unscale(w), beta_c, include_intercept)
    return _summary(dist)


def _summary(dist: np.ndarray) -> dict:
    return {"mean": float(dist.mean()), "std": float(dist.std(ddof=1)), "draws": int(dist.size),
            "q95": float(np.quantile(dist, 0.95)), "method": "simulated"}


def _classification_estimate(entry: dict, row: dict, columns: Sequence[Any], codes: np.ndarray,
                             draws: int, seed: int, spec: dict) -> dict | None:
    """The logistic functional mechanism (``classification``, ``report: coefficients``) run on
    the released data: the noise-free fit is the candidate's own, so each draw's distance is the
    noise's alone (as for the linear regression)."""
    from dpbundle.mechanisms.cells import types_of
    from dpbundle.mechanisms.criteria import classification as K
    from dpbundle.mechanisms.criteria.base import EvalContext
    from dpbundle.mechanisms.criteria.regression import coef_distance
    from dpbundle.mechanisms.criteria.rounding import on_grid

    crit = K.Classification(entry)
    if crit.report != "coefficients":
        return None
    synth = _synth(codes, columns)
    ctx = EvalContext(real=synth, synth=synth, spec=spec)
    des = crit.design(ctx)
    d = des.d
    stated_d = (row.get("sensitivity_inputs") or {}).get("d")
    if stated_d is not None and int(stated_d) != d:
        return None
    scale = float(row["noise_scale"])
    if not (scale > 0 and math.isfinite(scale)):
        return None
    tt = types_of(synth)
    vec = K.logistic_fm_vector(on_grid(des.tx(tt.table), synth.n), crit.y(tt.table), tt.weights)
    beta_c = crit.synth_coefficients(ctx)
    rng = np.random.default_rng(seed)
    dist = np.empty(draws)
    for k in range(draws):
        noisy = vec + rng.laplace(0.0, scale, size=vec.shape)
        Q, lin = K._quadratic(noisy, d, synth.n)
        w = K._solve(Q, -0.5 * lin, math.sqrt(d) * scale)
        dist[k] = coef_distance(des.unscale_logit(w), beta_c, crit.include_intercept)
    return _summary(dist)


def estimate(spec: dict, columns: Sequence[Any], codes: np.ndarray, criteria: Sequence[dict],
             draws: int = DRAWS, seed: int = 20240501, arithmetic: int = 2) -> dict[str, dict]:
    """{criterion id: {"mean", "std", "draws", "q95", "method"}} for the criteria whose noise is inside a
    fit and can be simulated on the released data (see the module docstring); others are absent.

    ``arithmetic``: the fits' arithmetic (``mechanisms/arithmetic.py``): 2, the default, gives the
    same bits on every CPU and BLAS kernel, so the audit's re-render prints the release's numbers
    on any machine; 1 (BLAS/LAPACK) is the datasheet's edition 1 (bundles of dpbundle 0.2)."""
    from dpbundle.mechanisms import arithmetic as ar

    with ar.use(arithmetic):
        return _estimate(spec, columns, codes, criteria, draws, seed)


def _estimate(spec: dict, columns: Sequence[Any], codes: np.ndarray, criteria: Sequence[dict],
              draws: int, seed: int) -> dict[str, dict]:
    entries = {e.get("id"): e for e in spec.get("acceptance") or [] if isinstance(e, dict)}
    out: dict[str, dict] = {}
    for row in criteria:
        if noise_on(row.get("mechanism", "")) != ON_FIT:
            continue
        entry = entries.get(row.get("id"))
        if entry is None:
            continue
        try:
            if row.get("type") == "regression_coefficients":
                est = _regression_estimate(entry, row, columns, codes, draws, seed)
            elif row.get("type") == "classification":
                est = _classification_estimate(entry, row, columns, codes, draws, seed, spec)
            else:
                est = None
        except Exception:  # noqa: BLE001 - no estimate is better than a failed bundle
            est = None
        if est is not None:
            out[row["id"]] = est
    return out


def choice_estimates(spec: dict, configuration: dict, columns: Sequence[Any], codes: np.ndarray,
                     criteria: Sequence[dict], draws: int = DRAWS, seed: int = 20240501) -> dict[str, dict]:
    """For the criteria whose noise is on the scores of a choice (``quantile``: report-noisy-max,
    exponential noise of metrics.json's ``noise_scale`` on every candidate's score): the error the
    noise alone causes in the chosen values, simulated on the released data (each group's scores
    from data.csv, the same scale, ``draws`` times with a fixed seed; the largest error over the
    compared groups and levels per draw). {id: {"mean", "std", "draws", "q95", "method"}}; the
    datasheet states from q95 the error a check rules out (evidence.py)."""
    from dpbundle.mechanisms.criteria.base import EvalContext
    from dpbundle.mechanisms.criteria.quantile import Quantile, quantile_scores

    entries = {e.get("id"): e for e in spec.get("acceptance") or [] if isinstance(e, dict)}
    cfg = configuration.get("columns") if isinstance(configuration.get("columns"), dict) else {}
    out: dict[str, dict] = {}
    for row in criteria:
        entry = entries.get(row.get("id"))
        if row.get("type") != "quantile" or entry is None:
            continue
        try:
            scale = float(row["noise_scale"])
            if not (scale > 0 and math.isfinite(scale)):
                continue
            crit = Quantile(entry)
            synth = _synth(codes, columns)
            ctx = EvalContext(real=synth, synth=synth, spec=spec,
                              alternatives={k: v for k, v in cfg.items() if isinstance(v, str)})
            cand, of_code, plan = crit._plan(ctx)
            blocks = []
            for item, alpha, _labels, compared, q_c in plan:
                if not compared.size:
                    continue
                h, _ = crit._hist(ctx.synth, item, ctx, of_code, cand.size)
                blocks.append((quantile_scores(h, alpha, ctx.n)[compared], cand[q_c[compared]]))
            if not blocks:
                continue
            rng = np.random.default_rng(seed)
            dist = np.empty(draws)
            for k in range(draws):
                err = 0.0
                for scores, truth in blocks:
                    noisy = scores + rng.exponential(scale, size=scores.shape)
                    err = max(err, float(np.abs(cand[np.argmax(noisy, axis=1)] - truth).max()))
                dist[k] = err
            out[row["id"]] = _summary(dist)
        except Exception:  # noqa: BLE001 - no estimate rather than a failed datasheet
            continue
    return out


def value_noise_rows(criteria: Sequence[dict], estimates: dict[str, dict] | None = None) -> dict[str, dict]:
    """For every criterion: ``noise_on``, ``value_noise_std`` (None when unknown), ``value_noise_mean``
    (what the noise alone adds on average: 0 for additive noise; None when unknown)."""
    estimates = estimates or {}
    rows = {}
    for c in criteria:
        where = noise_on(c.get("mechanism", ""))
        if where == ON_VALUE:
            rows[c["id"]] = {"noise_on": where, "value_noise_std": float(c["noise_std"]), "value_noise_mean": 0.0}
        else:
            est = estimates.get(c["id"])
            rows[c["id"]] = {"noise_on": where,
                             "value_noise_std": est["std"] if est else None,
                             "value_noise_mean": est["mean"] if est else None}
    return rows


def value_noise_text(metrics_csv) -> dict[str, str]:
    """{criterion id: the noise std of its reported value, as the CLI prints it} from a bundle's
    metrics.csv: "12.3" (noise on the value), "≈12.3 (fit)" (estimated; the noise is inside a
    fit), "in fit" (not estimated), "in choice" (noise on the scores of a choice). Empty when the file cannot be read (the caller falls back to noise_std)."""
    import csv
    from pathlib import Path

    try:
        with open(Path(metrics_csv), encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except (OSError, csv.Error, UnicodeDecodeError):
        return {}
    out = {}
    for r in rows:
        on, std = r.get("noise_on"), r.get("value_noise_std") or ""
        if not r.get("id") or on is None:
            continue
        try:
            shown = f"{float(std):.3g}" if std else ""
        except ValueError:
            shown = std
        if on == ON_VALUE:
            out[r["id"]] = shown
        elif on == ON_FIT:
            out[r["id"]] = f"≈{shown} (fit)" if shown else "in fit"
        else:
            out[r["id"]] = "in choice"
    return out
