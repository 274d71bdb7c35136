"""Noise against thresholds, before any private run: which acceptance criteria would give only
weak evidence (``spec validate``, ``sweep``).

A criterion released with Laplace noise of scale b = Delta / epsilon (standard deviation
sqrt(2) b) passes when its noisy value is below the threshold t. Its evidence is *weak* when the
noise std is at least half of (t - the metric's smallest value) -- the rule the datasheet uses
(:mod:`dpbundle.templates.datasheet.evidence`, which also states the error a check rules out:
t + b ln 10 at 95%). Delta depends on the data:

- ``kway_marginals``, ``faithfulness``: 1/n; ``regression_mae_difference``: 2 (U - L)/n;
  ``classification`` with ``report: accuracy``: 2/n. Weak exactly when n <= n* =
  2 sqrt(2) c / (epsilon (t - floor)) with Delta = c/n.
- ``conditional_means``: (U - L)/m, m the smallest group after the resize margin (at most n):
  weak when m <= m* = 2 sqrt(2) (U - L) / (epsilon t).
- ``smoothed_ratio``: max(1/s', c^2/(c + s')), s' the smallest smoothed synthetic count: weak
  when s' <= s*.
- fits (``regression_coefficients``, ``classification`` coefficients) and ``quantile`` put the
  noise inside a fit or on a choice, not on the value: no rule on sizes (the datasheet estimates
  their effect from the released data). On data, :func:`fit_warnings_on_data` runs the
  datasheet's simulation of a fit's noise before the spend (weak when the 95th percentile of the
  distance the noise alone causes is at least 0.81 of the threshold, the datasheet's rule), and
  :func:`collapse_warnings_on_data` names the classification coefficients a threshold lets fall
  to 0 together (the threshold is an L1 sum over every coefficient).

Without data (``spec validate SPEC``) the rules are printed as conditions on n, the smallest
group or the smallest count. With data (``spec validate --data``, inside the enclave: private;
``sweep``, on public data), :func:`noise_warnings_on_data` computes each criterion's sensitivity
exactly as a release would, with the transformed data standing in for a candidate (a candidate
that passes resembles it), under every binning of the spec (the first ``limit``), and warns
where the evidence would be weak.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from dpbundle.templates.datasheet.evidence import LAPLACE_Z, WEAK_STD_SHARE

__all__ = ["NoiseRule", "noise_rules", "noise_notes", "noise_warnings_on_data", "BINNING_LIMIT"]

BINNING_LIMIT = 64
_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class NoiseRule:
    """When one criterion's evidence is weak: ``size`` <= ``critical`` (``size``: "n", "group" or
    "count"); ``critical`` None: no rule (noise not on the value)."""

    index: int
    id: str
    type: str
    threshold: float
    floor: float
    epsilon: float
    size: str | None
    critical: float | None


def _criterion(entry: dict):
    """(criterion, threshold, metric floor) of an acceptance entry (Nones when it has none)."""
    from dpbundle.mechanisms.criteria import CriterionError, make_criterion

    try:
        c = make_criterion(entry)
        t = c.threshold()[0]
        floor = c.metric_range()[0]
    except (CriterionError, KeyError, TypeError, ValueError):
        return None, None, None
    return c, float(t), float(floor)


def noise_rules(spec) -> list[NoiseRule]:
    """The weak-evidence rule of every criterion of a validated spec (a loaded Spec)."""
    out = []
    for i, crit in enumerate(spec.model.acceptance):
        c, t, floor = _criterion(crit.to_document())
        if c is None or not t > floor:
            continue
        span, eps = t - floor, float(c.epsilon)
        share = WEAK_STD_SHARE * span          # weak when std >= share
        size, critical = None, None
        if c.mechanism == "laplace":
            typ = c.type
            if typ in ("kway_marginals", "faithfulness"):
                size, critical = "n", _SQRT2 * 1.0 / (eps * share)
            elif typ == "regression_mae_difference":
                size, critical = "n", _SQRT2 * 2.0 * (c.U - c.L) / (eps * share)
            elif typ == "classification":
                size, critical = "n", _SQRT2 * 2.0 / (eps * share)
            elif typ == "conditional_means":
                size, critical = "group", _SQRT2 * (c.U - c.L) / (eps * share)
            elif typ == "smoothed_ratio":
                d = eps * share / _SQRT2           # weak when Delta(s') >= d
                size, critical = "count", max(1.0 / d, c.clip * c.clip / d - c.clip)
        out.append(NoiseRule(i, c.id, c.type, t, floor, eps, size, critical))
    return out


def _count(x: float) -> str:
    return f"{math.floor(x):,}"


def noise_notes(spec) -> list[str]:
    """Without data: one line per criterion with a rule, the condition under which its evidence
    is weak (noise std at least half the threshold). ``spec``: a loaded Spec."""
    lines = []
    entries = [c.to_document() for c in spec.model.acceptance]
    for r in noise_rules(spec):
        if r.critical is None:
            if entries[r.index].get("type") == "classification" and _simulated_fit(entries[r.index]):
                lines.append(f"acceptance[{r.index}] ({r.id}): the noise is inside the fit: whether a pass "
                             f"would be weak evidence, and which coefficients the threshold {_fmt(r.threshold)} "
                             f"lets fall to 0, depend on the data: run `spec validate --data` (inside the "
                             f"enclave) or `sweep` (on public data), which say it before any spend")
            continue
        where = f"acceptance[{r.index}] ({r.id})"
        if r.size == "n":
            cond = f"n is {_count(r.critical)} records or fewer"
        elif r.size == "group":
            cond = (f"its smallest group holds {_count(r.critical)} records or fewer "
                    f"(after the resize margin)")
        else:
            cond = (f"some value of some column has {_count(r.critical)} or fewer synthetic records "
                    f"(smoothed)")
        lines.append(f"{where}: weak evidence when {cond}")
    return lines


def _binnings(spec, limit: int) -> tuple[list[dict], int]:
    names = spec.model.column_names
    alts = [c.alternative_ids for c in spec.model.columns]
    total = math.prod(len(a) for a in alts)
    chosen = [dict(zip(names, choice)) for choice in itertools.islice(itertools.product(*alts), limit)]
    return chosen, total


def _names_in(obj) -> list[str]:
    """Every string in a criterion entry (its target, groupings, features, columns)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _names_in(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _names_in(v)]
    return []


def _fmt(x: float) -> str:
    from dpbundle.templates.datasheet.numbers import plain

    return plain(x, sig=3)


def noise_warnings_on_data(spec, prepared, limit: int = BINNING_LIMIT) -> list[str]:
    """Warnings for the criteria whose noise std, computed on ``prepared`` (transformed under
    each binning, standing in for a candidate), is at least half their threshold; the worst
    binning is named. ``spec``: a loaded Spec; ``prepared``: release.prepare's Prepared."""
    from dpbundle.mechanisms.criteria import EvalContext

    from dpbundle.release.data.transform import transform

    rules = {r.id: r for r in noise_rules(spec) if r.critical is not None}
    if not rules or getattr(prepared, "n", 0) <= 0:
        return []
    entries = [c.to_document() for c in spec.model.acceptance if c.id in rules]
    binnings, total = _binnings(spec, limit)
    worst: dict[str, tuple[float, float, float, dict]] = {}
    for columns in binnings:
        try:
            real = transform(prepared, spec, {"columns": columns})
        except Exception:  # noqa: BLE001 - a binning that cannot be built is reported elsewhere
            continue
        ctx = EvalContext(real=real, synth=real, spec=spec.evaluation_document, alternatives=dict(columns))
        for entry in entries:
            c, t, floor = _criterion(entry)
            if c is None:
                continue
            try:
                sens, _ = c.sensitivity(ctx)
            except Exception:  # noqa: BLE001 - no warning rather than a crash in a warning
                continue
            scale = float(sens) / float(c.epsilon)
            ratio = _SQRT2 * scale / (t - floor)
            if c.id not in worst or ratio > worst[c.id][0]:
                worst[c.id] = (ratio, scale, t, columns)
    lines = []
    for entry in entries:
        cid = entry["id"]
        if cid not in worst:
            continue
        ratio, scale, t, columns = worst[cid]
        if ratio < WEAK_STD_SHARE:
            continue
        r = rules[cid]
        named = set(_names_in(entry))
        varying = {k: v for k, v in columns.items() if (k in named or r.type != "conditional_means")
                   and len(spec.model.column(k).alternatives) > 1}
        binning = ", ".join(f"{k}={v}" for k, v in varying.items())
        lines.append(
            f"acceptance[{r.index}] ({cid}): noise std {_fmt(_SQRT2 * scale)} is at least half the threshold "
            f"{_fmt(t)}{' above ' + _fmt(r.floor) if r.floor else ''}"
            f"{' (binning ' + binning + ')' if binning else ''}: a pass would be weak evidence; only a true "
            f"value above {_fmt(t + scale * LAPLACE_Z)} would fail with probability >= 95%. Raise its "
            f"epsilon (the std falls as 1/epsilon){', or widen its groups' if r.size == 'group' else ''}.")
    lines += fit_warnings_on_data(spec, prepared, limit)
    lines += collapse_warnings_on_data(spec, prepared, limit)
    if total > len(binnings) and lines:
        lines.append(f"(noise checked under the first {len(binnings)} of {total:,} binnings)")
    return lines


#: Draws of the noise simulation of a fit before the spend (the datasheet's uses value_noise.DRAWS).
FIT_DRAWS = 100

#: Binnings (of the columns a fit uses) tried for a fit's warnings (each one a simulation).
FIT_BINNING_LIMIT = 32


def _fit_columns(spec, entry: dict) -> set[str]:
    """The released columns a fit uses: its target and features (every column without ``features``)."""
    if "features" not in entry:
        return set(spec.model.column_names)
    return set(_names_in(entry))


#: The fits whose noise (inside the fit) the datasheet simulates on the released data.
_SIMULATED_FITS = ("classification", "regression_coefficients")


def _simulated_fit(entry: dict) -> bool:
    """A fit whose noise the datasheet simulates: classification reporting coefficients, or the
    linear regression's coefficients."""
    if entry.get("type") == "classification":
        return entry.get("report", "coefficients") == "coefficients"
    return entry.get("type") in _SIMULATED_FITS


def _fit_q95(c, entry: dict, real, spec, columns: dict, draws: int) -> float | None:
    """q95 of the distance the noise alone moves the fit's coefficients, of one criterion on
    ``real`` standing in for a candidate (value_noise's simulation, the datasheet's)."""
    from dpbundle.mechanisms.criteria import EvalContext
    from dpbundle.templates.datasheet import value_noise

    ctx = EvalContext(real=real, synth=real, spec=spec.evaluation_document, alternatives=dict(columns))
    sens, _ = c.sensitivity(ctx)
    scale = float(sens) / float(c.epsilon)
    row = {"id": entry["id"], "type": entry["type"], "mechanism": c.mechanism, "noise_scale": scale}
    est = value_noise.estimate(spec.evaluation_document, real.columns, real, [row], draws=draws)
    got = est.get(entry["id"])
    return None if got is None else float(got["q95"])


def fit_weak_share() -> float:
    """A fit's evidence is weak when the noise's 95th-percentile distance q95 is at least this
    share of (threshold - floor): the datasheet's rule, ruled-out error t + q95 >= WEAK_FACTOR x t."""
    from dpbundle.templates.datasheet.evidence import WEAK_FACTOR

    return WEAK_FACTOR - 1.0


def fit_warnings_on_data(spec, prepared, limit: int = BINNING_LIMIT, draws: int = FIT_DRAWS) -> list[str]:
    """Warnings for the fits (classification coefficients, linear regression coefficients) whose
    noise would make a pass weak evidence, as the datasheet will judge it after the spend: the
    fit's DP noise is simulated on ``prepared`` (transformed under each binning of the columns
    the fit uses, standing in for a candidate), and the evidence is weak when the 95th
    percentile q95 of the distance the noise alone moves the coefficients is at least
    :func:`fit_weak_share` of the threshold. The worst binning is named."""
    entries = [c.to_document() for c in spec.model.acceptance]
    entries = [(i, e) for i, e in enumerate(entries) if _simulated_fit(e)]
    if not entries or getattr(prepared, "n", 0) <= 0:
        return []
    lines = []
    for i, entry in entries:
        c, t, floor = _criterion(entry)
        if c is None or not t > floor:
            continue
        worst = _worst_fit(c, entry, spec, prepared, limit, draws)
        if worst is None:
            continue
        q95, columns = worst
        if q95 < fit_weak_share() * (t - floor):
            continue
        binning = ", ".join(f"{k}={v}" for k, v in columns.items() if len(spec.model.column(k).alternatives) > 1)
        lines.append(
            f"acceptance[{i}] ({entry['id']}): the noise inside the fit alone moves the coefficients by up "
            f"to {_fmt(q95)} (95th percentile, simulated{' under binning ' + binning if binning else ''}), at "
            f"least {_fmt(fit_weak_share())} of the threshold {_fmt(t)}: a pass would be weak evidence "
            f"(the datasheet will say so): a fit whose true distance is up to {_fmt(t + q95)} can pass. "
            f"Raise its epsilon (the noise falls as 1/epsilon), or lower its threshold only together "
            f"with a larger epsilon (docs/spec.md, 'Choosing the threshold').")
    return lines


def _worst_fit(c, entry: dict, spec, prepared, limit: int, draws: int):
    """(q95, binning) of the binning (of the columns the fit uses) with the largest
    q95; None when no binning gives an estimate."""
    used = _fit_columns(spec, entry)
    worst = None
    for columns, real in _fit_binnings(spec, entry, prepared, limit):
        try:
            got = _fit_q95(c, entry, real, spec, columns, draws)
        except Exception:  # noqa: BLE001 - no warning rather than a crash in a warning
            continue
        if got is not None and (worst is None or got > worst[0]):
            worst = (got, {k: v for k, v in columns.items() if k in used})
    return worst


def _fit_binnings(spec, entry: dict, prepared, limit: int):
    """(columns, T) for each binning of the columns the fit uses (the others at their first
    alternative), the first ``min(limit, FIT_BINNING_LIMIT)``; a binning that cannot be
    transformed is skipped (no warning rather than a crash in a warning)."""
    from dpbundle.release.data.transform import transform

    used = _fit_columns(spec, entry)
    names = spec.model.column_names
    alts = [col.alternative_ids if col.name in used else col.alternative_ids[:1] for col in spec.model.columns]
    for choice in itertools.islice(itertools.product(*alts), min(limit, FIT_BINNING_LIMIT)):
        columns = dict(zip(names, choice))
        try:
            real = transform(prepared, spec, {"columns": columns})
        except Exception:  # noqa: BLE001 - see the docstring
            continue
        yield columns, real


def collapsible(coefficients: dict[str, float], threshold: float) -> list[tuple[str, float]]:
    """The coefficients that can all fall to 0 together while the L1 distance stays below
    ``threshold`` (the smallest first, while their sum of sizes is below it): a candidate whose
    fit lost exactly these effects would pass (noise aside). ``coefficients``: name -> value."""
    out, total = [], 0.0
    for name, value in sorted(coefficients.items(), key=lambda kv: abs(kv[1])):
        if total + abs(value) >= threshold:
            break
        total += abs(value)
        out.append((name, float(value)))
    return out


def collapse_warnings_on_data(spec, prepared, limit: int = BINNING_LIMIT) -> list[str]:
    """For each ``classification`` criterion reporting coefficients: the coefficients fitted on
    ``prepared`` (standing in for the real table, under each binning of the columns it uses, the
    first ``limit``) that could all fall to 0 in a candidate that still passes
    (:func:`collapsible`); spoken when the largest of them is at least a quarter of the
    threshold, for the binning that lets most of the fit collapse. The distance is the L1 sum
    over every coefficient, so a threshold comparable to the coefficients' sizes lets whole
    effects vanish (docs/spec.md, classification: choosing the threshold)."""
    from dpbundle.mechanisms.criteria import EvalContext

    if getattr(prepared, "n", 0) <= 0:
        return []
    lines = []
    for i, crit in enumerate(spec.model.acceptance):
        entry = crit.to_document()
        if entry.get("type") != "classification" or not _simulated_fit(entry):
            continue
        c, t, _floor = _criterion(entry)
        if c is None:
            continue
        used = _fit_columns(spec, entry)
        best = None
        for columns, real in _fit_binnings(spec, entry, prepared, limit):
            try:
                ctx = EvalContext(real=real, synth=real, spec=spec.evaluation_document, alternatives=columns)
                beta = c.synth_coefficients(ctx)
                feats = list(c.design(ctx).features)
            except Exception:  # noqa: BLE001 - no warning rather than a crash in a warning
                continue
            coefs = dict(zip(feats, (float(x) for x in beta[1:])))
            gone = collapsible(coefs, t)
            size = sum(abs(v) for _n, v in gone)
            if gone and (best is None or size > best[0]):
                best = (size, gone, coefs, {k: v for k, v in columns.items() if k in used})
        if best is None or max(abs(v) for _n, v in best[1]) < 0.25 * t:
            continue
        size, gone, coefs, columns = best
        total = sum(abs(v) for v in coefs.values())
        binning = ", ".join(f"{k}={v}" for k, v in columns.items() if len(spec.model.column(k).alternatives) > 1)
        shown = ", ".join(f"{n_} {_fmt(v)}" for n_, v in sorted(gone, key=lambda kv: -abs(kv[1])))
        lines.append(
            f"acceptance[{i}] ({entry['id']}): threshold {_fmt(t)} is {_fmt(t / total)} of the sum of the "
            f"coefficients' sizes fitted on this data ({_fmt(total)}{', binning ' + binning if binning else ''}): "
            f"a candidate in which these coefficients all fell to 0 would still pass (distance "
            f"{_fmt(size)} < {_fmt(t)}): {shown}. Choose the threshold from the size of the effects that "
            f"must survive (docs/spec.md, classification: choosing the threshold).")
    return lines
