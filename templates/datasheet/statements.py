"""Edition 2's statements that edition 1 did not make, each from the bundle's public files.

- :func:`simulated`: spec.json's ``release.simulated`` (an ``--example`` release): the source is
  a simulated registry, no real person's record.
- :func:`ledger_facts`: manifest.json's ``ledger``: how many recorded runs spent budget on these
  people and the composed epsilon (pure-DP sequential composition: the sum).
- :func:`generator_name` / :func:`mechanism_name`: human names for the spec's identifiers.
- :func:`derivation_text`: a derived threshold's derivation as a sentence.
- :func:`measured_numbers_text`: what a mean over a binned column is a mean of (codebook.csv's
  numbers, open bins named).
- :func:`suspicion_bands`: the epsilon chart's shading, from the same formula as the page's
  "a 1% suspicion can become at most ..." sentence.

Every function reads only its arguments (parsed public files); nothing is private.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from .numbers import noisy, plain

__all__ = ["simulated", "ledger_facts", "ordinal", "generator_name", "mechanism_name", "derivation_text",
           "derived_threshold_text", "measured_numbers_text", "open_bins", "suspicion_bands",
           "posterior", "epsilon_for_posterior", "GENERATOR_NAMES", "MECHANISM_NAMES", "SUSPICION_LEVELS"]

#: generator type (spec.json) -> the name a reader knows it by
GENERATOR_NAMES = {"privbayes": "PrivBayes", "privsyn": "PrivSyn", "aim_pure": "AIM (pure DP)",
                   "mst_pure": "MST (pure DP)"}

#: metrics.json's mechanism -> words
MECHANISM_NAMES = {"laplace": "Laplace", "functional_mechanism": "functional mechanism",
                   "sufficient_statistics": "noisy sufficient statistics",
                   "exponential_mechanism": "exponential mechanism"}

#: the posteriors (of a 1% prior) at which the epsilon chart's shading changes
SUSPICION_LEVELS = (0.02, 0.1, 0.5, 0.9, 0.99)


def simulated(spec: dict) -> bool:
    """spec.json's ``release.simulated`` is true (only ``true`` counts)."""
    release = spec.get("release") if isinstance(spec, dict) else None
    return isinstance(release, dict) and release.get("simulated") is True


def generator_name(gen_type: Any) -> str:
    """PrivBayes, PrivSyn, AIM (pure DP), MST (pure DP); another type with its underscores as spaces."""
    return GENERATOR_NAMES.get(str(gen_type), str(gen_type).replace("_", " "))


def mechanism_name(mechanism: Any) -> str:
    """Laplace, functional mechanism, ...; another identifier with its underscores as spaces."""
    return MECHANISM_NAMES.get(str(mechanism), str(mechanism).replace("_", " "))


def ordinal(k: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st, 112th."""
    if 10 <= k % 100 <= 20:
        suffix = "th"
    else:
        suffix = {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    v = float(x)
    return v if math.isfinite(v) and v >= 0 else None


def ledger_facts(ledger: dict | None, total: float) -> dict:
    """What the datasheet says about the runs recorded on the registry, from manifest.json's
    ``ledger``: ``known`` (the manifest states the count), ``k`` (this run's rank among the
    recorded spends, runs that released nothing included), ``earlier`` (their count), and, when
    the manifest states the earlier epsilons, ``composed`` (this bundle's total plus theirs: pure-DP
    sequential composition) and ``earlier_sum``. ``composed`` is computed from the stated
    epsilons, whatever the manifest's ``composed_epsilon`` says."""
    out: dict[str, Any] = {"known": False, "k": None, "earlier": None, "composed": None,
                           "earlier_sum": None, "only": False}
    if not isinstance(ledger, dict):
        return out
    k = ledger.get("spends_on_registry")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        return out
    out.update(known=True, k=k, earlier=k - 1, only=k == 1, k_ordinal=ordinal(k))
    eps = ledger.get("earlier_epsilons")
    values = [_number(e) for e in eps] if isinstance(eps, list) else None
    if values is not None and None not in values:
        earlier_sum = math.fsum(values)
        # computed here from the stated epsilons (the audit checks the manifest's composed_epsilon
        # against the same sum): the datasheet never repeats a composed figure that does not add up
        out.update(earlier_sum=earlier_sum, earlier_epsilons_values=values,
                   composed=math.fsum([float(total), *values]))
    return out


def derivation_text(inputs: dict, threshold: float) -> str:
    """A derived threshold in words: "Derived from the stakeholders' 2: a true value of 2 passes with
    probability at most 5% (Laplace noise of scale 0.256 = assumed sensitivity 0.0769 / epsilon
    0.3, whose 95th percentile is 0.590), so the threshold is 2 - 0.590 = 1.41." Other derivations:
    their inputs listed in words."""
    if inputs.get("derive") == "laplace_false_positive" and all(
            _number(inputs.get(k)) is not None for k in ("stakeholder", "false_positive", "epsilon",
                                                          "assumed_sensitivity", "scale", "laplace_quantile")):
        fp = float(inputs["false_positive"])
        return (f"Derived from the stakeholders\u2019 {plain(inputs['stakeholder'])}: a candidate whose true value "
                f"is {plain(inputs['stakeholder'])} passes by the noise alone with probability at most "
                f"{plain(100 * fp)}%. The noise assumed is Laplace of scale {plain(inputs['scale'], sig=3)} "
                f"(assumed sensitivity {plain(inputs['assumed_sensitivity'], sig=3)} / \u03b5 "
                f"{plain(inputs['epsilon'])}), whose {plain(100 * (1 - fp))}th percentile is "
                f"{plain(inputs['laplace_quantile'], sig=3)}; so the threshold is "
                f"{plain(inputs['stakeholder'])} \u2212 {plain(inputs['laplace_quantile'], sig=3)} = "
                f"{plain(threshold, sig=3)} ({plain(threshold)} in metrics.json).")
    listed = "; ".join(f"{str(k).replace('_', ' ')} {plain(v) if isinstance(v, float) else v}"
                       for k, v in inputs.items())
    return f"Derived ({listed})."


def derived_threshold_text(threshold: float, vstd: float | None) -> str:
    """A derived threshold for people: rounded like the DP value it is compared with (to its
    noise; three significant digits without one)."""
    return noisy(threshold, vstd) if vstd else plain(threshold, sig=3)


def _seq(column: Any, attr: str) -> list[float]:
    """A coding's array attribute as a list of floats (empty when absent)."""
    value = getattr(column, attr, None)
    return [] if value is None else [float(x) for x in value]


def open_bins(column: Any) -> list[tuple[str, str]]:
    """(label, number) of each open bin of a released column (a bound at infinity in codebook.csv)."""
    labels = [str(x) for x in getattr(column, "labels", [])]
    lower, upper, values = _seq(column, "lower"), _seq(column, "upper"), _seq(column, "values")
    out = []
    for i, label in enumerate(labels):
        lo = float(lower[i]) if i < len(lower) else math.nan
        up = float(upper[i]) if i < len(upper) else math.nan
        if (lo == -math.inf or up == math.inf) and i < len(values) and math.isfinite(float(values[i])):
            out.append((label, plain(float(values[i]))))
    return out


def _range_example(column: Any) -> tuple[str, str] | None:
    """(label, number) of a closed bin wider than one value, for the example."""
    labels = [str(x) for x in getattr(column, "labels", [])]
    lower, upper, values = _seq(column, "lower"), _seq(column, "upper"), _seq(column, "values")
    for i, label in enumerate(labels):
        if i < min(len(lower), len(upper), len(values)):
            lo, up, v = float(lower[i]), float(upper[i]), float(values[i])
            if math.isfinite(lo) and math.isfinite(up) and up > lo and math.isfinite(v) and label != plain(v):
                return label, plain(v)
    return None


def measured_numbers_text(target: Any, columns: Sequence[Any]) -> str:
    """What a statistic of a released column is computed from: "each record counts as the number
    codebook.csv gives its value of hours (for example “20-24” counts as 22; the open bin “50 and
    over” counts as 50), for the real records as for these", or "" when the column is not released."""
    col = next((c for c in columns if getattr(c, "name", None) == target), None)
    if col is None:
        return ""
    name = str(target).replace("_", " ")
    examples = []
    closed = _range_example(col)
    if closed:
        examples.append(f"\u201c{closed[0]}\u201d counts as {closed[1]}")
    examples += [f"the open bin \u201c{lab}\u201d counts as {num}" for lab, num in open_bins(col)]
    ex = f" ({'; '.join(examples)})" if examples else ""
    return (f"each record counts as the number codebook.csv gives its value of {name}{ex}, the real "
            f"records binned in the same way")


def posterior(eps: float, prior: float) -> float:
    """The largest belief a prior can become after an epsilon-DP release (odds times e^eps)."""
    if eps > 700:
        return 1.0
    q = math.exp(eps)
    return q * prior / (q * prior + 1 - prior)


def epsilon_for_posterior(target: float, prior: float) -> float:
    """The epsilon at which a prior ``prior`` can become ``target`` (inverse of :func:`posterior`)."""
    return math.log((target / (1 - target)) * ((1 - prior) / prior))


def suspicion_bands(prior: float, levels: Sequence[float] = SUSPICION_LEVELS) -> list[tuple[float, float, str]]:
    """The epsilon chart's shading: (epsilon from, epsilon to, label) for each range of epsilon
    over which a ``prior`` suspicion can become at most the next level (the last band: more than
    the last level)."""
    out, lo = [], 0.0
    for level in levels:
        hi = epsilon_for_posterior(level, prior)
        if hi > lo:
            out.append((lo, hi, f"up to {plain(100 * level)}%"))
            lo = hi
    out.append((lo, math.inf, f"above {plain(100 * levels[-1])}%"))
    return out
