"""The statements of ``budget.json``: every text field, generated from the public spec.

budget.json's numbers are the run's (the epsilons the spec declares, the noise scales OpenDP
calibrated, the stop probability used); its words are not: what the guarantee protects
(``neighbouring``), what is said about the number of records (``records.statement``), the
mechanisms and the selection method are fixed texts chosen by the spec's records policy, its
unit of privacy and whether it publishes the model. The release writes them from here and the
audit requires budget.json to say exactly this (docs/audit.md, "The closure rule").
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_POLICY, guarantee_text

__all__ = ["budget_words", "budget_words_of_spec", "accepted_budget_words", "SELECTION_METHOD", "RECORDS_MECHANISM", "RECORDS_RESIZE",
           "PUBLISHED_MODEL_NOTE", "INPUT_METRIC", "spec_records_policy", "spec_retries",
           "generation_parts"]

INPUT_METRIC = "change_one_distance"
SELECTION_METHOD = ("private selection with a known threshold (Liu & Talwar 2019, Algorithm 1): after each "
                    "candidate that fails, stop with the stop probability (exact Bernoulli draws from OpenDP); "
                    "the total is checked against OpenDP make_select_private_candidate's privacy map")
SELECTION_METHOD_RESAMPLE = (
    "the generator is fitted once, before the selection (its epsilon counted once); then private "
    "selection with a known threshold (Liu & Talwar 2019, Algorithm 1) over candidates that sample "
    "that model again and evaluate the criteria (the criteria's epsilon counted twice): after each "
    "candidate that fails, stop with the stop probability (exact Bernoulli draws from OpenDP); the "
    "selection's part is checked against OpenDP make_select_private_candidate's privacy map")
#: what zCDP gives up against pure DP, in plain words (the datasheet and the registry entry)
ZCDP_PLAIN = ("Zero-concentrated DP bounds the privacy loss on average over the noise rather than in "
              "every outcome: it allows a tiny probability (delta) that a person's privacy loss exceeds "
              "epsilon, which pure DP never allows, in exchange for Gaussian noise, whose cost adds up "
              "more slowly over many measurements.")
RECORDS_MECHANISM = ("discrete Laplace (OpenDP make_laplace on i64) of the count of plausible records; "
                     "m = max(count + noise, 1)")
RECORDS_RESIZE = ("uniform subsample of the plausible records, or all of them plus uniform pad records, "
                  "shuffled (mechanisms/records.py)")
PUBLISHED_MODEL_NOTE = {
    "file": "model.json",
    "extra_epsilon": 0,
    "why": "the model is the output of the generator's DP measurement (the generation part above), "
           "which the selection already accounts for; publishing it is post-processing",
}
# Edition 1 (bundles of dpbundle 0.2.x): the first releases of 0.2.0 called the confidential data
# "the registry" in the neighbouring relation (tests/data/rederive-golden holds such bundles);
# later 0.2.0 releases wrote today's words. Both are accepted for a 0.2 bundle, nothing else.
_NEIGHBOURING_0_2 = {
    "dp_count": "change one record of the registry as delivered (before the plausibility rules): any one "
                "record may hold any other values the input schema accepts, including values the rules drop",
    "declared_public": "registries with the same number of plausible records that differ in one record, which "
                       "may hold any other values the input schema accepts (the count of plausible records is "
                       "declared public)",
}


def budget_words(policy: str, unit_of_privacy: Any, publish_model: bool,
                 retries: str = "refit") -> dict[str, Any]:
    """budget.json's statements, by dotted path: the unit of privacy, the neighbouring relation
    and the input metric, the records block's policy, statement (and, for ``dp_count``, its
    mechanism and resize), the selection method (by ``retries``, the spec's
    privacy.selection.retries), and ``published_model`` when the model is published.
    ValueError for an unknown records policy."""
    text = guarantee_text(policy)
    method = SELECTION_METHOD_RESAMPLE if retries == "resample" else SELECTION_METHOD
    words: dict[str, Any] = {"unit_of_privacy": unit_of_privacy, "neighbouring": text["neighbouring"],
                             "input_metric": INPUT_METRIC, "records.policy": policy,
                             "records.statement": text["n_statement"], "selection.method": method}
    if policy == "dp_count":
        words.update({"records.mechanism": RECORDS_MECHANISM, "records.resize": RECORDS_RESIZE})
    if publish_model:
        words["published_model"] = dict(PUBLISHED_MODEL_NOTE)
    return words


def spec_records_policy(spec: dict) -> Any:
    """The records policy a public spec declares (``privacy.records.policy``; the default when
    it declares none)."""
    privacy = spec.get("privacy") if isinstance(spec.get("privacy"), dict) else {}
    records = privacy.get("records") if isinstance(privacy.get("records"), dict) else {}
    return records.get("policy", DEFAULT_POLICY)


def budget_words_of_spec(spec: dict) -> dict[str, Any]:
    """:func:`budget_words` of a public spec (spec.json's ``spec``, a plain dict)."""
    release = spec.get("release") if isinstance(spec.get("release"), dict) else {}
    publish = spec.get("publish") or []
    publish_model = "model" in (publish if isinstance(publish, list) else [publish])
    return budget_words(spec_records_policy(spec), release.get("unit_of_privacy"), publish_model,
                        spec_retries(spec))


def spec_retries(spec: dict) -> Any:
    """``privacy.selection.retries`` of a public spec ("refit" when it declares none)."""
    privacy = spec.get("privacy") if isinstance(spec.get("privacy"), dict) else {}
    selection = privacy.get("selection") if isinstance(privacy.get("selection"), dict) else {}
    return selection.get("retries", "refit")


def accepted_budget_words(spec: dict, edition: int) -> dict[str, tuple[Any, ...]]:
    """Each statement's accepted texts for a bundle of this datasheet edition
    (``templates/datasheet/edition.py``): the one text :func:`budget_words_of_spec` gives, and
    for edition 1 (dpbundle 0.2.x) also the earlier 0.2.0 wording of the neighbouring relation."""
    words = budget_words_of_spec(spec)
    accepted = {path: (value,) for path, value in words.items()}
    older = _NEIGHBOURING_0_2.get(spec_records_policy(spec))
    if edition == 1 and older is not None:
        accepted["neighbouring"] = (words["neighbouring"], older)
    return accepted


def _decimal_near(x: float) -> Fraction:
    """The decimal with the fewest significant digits that lies within one unit in the last
    place of the float ``x`` (0.7999999999999999 -> 4/5, fl(1.6) -> 8/5, 0.25 -> 1/4)."""
    b = exact.binary(x)
    ulp = Fraction(math.ulp(x))
    for digits in range(1, 18):
        d = Fraction(format(x, f".{digits}g"))
        if abs(d - b) < ulp:
            return d
    return b  # pragma: no cover - 17 significant digits always round-trip


def generation_parts(parts: list[dict], generation_epsilon, key: str = "epsilon") -> list[dict]:
    """budget.json's ``generation.parts`` from the generator's ``budget_parts()`` (the floats
    handed to OpenDP, whose exact binary sum is at most the declared generation epsilon).

    A generator computes each float share from decimals the spec declares (the generation
    epsilon and a split such as ``epsilon_split: 0.5``), rounded down for OpenDP: 1.6 x 0.5 is
    handed over as 0.7999999999999999. Each part is published as the shortest decimal within one
    unit in the last place of its float (0.8), with the float itself as ``epsilon_opendp``, when
    those decimals add up exactly to the declared generation epsilon (which proves them the
    generator's decimal shares). Otherwise the floats are published as they are (``epsilon``
    only), which the audit checks the way it always has (binary sum at most the generation
    epsilon). ``key``: "rho" for a zCDP generator's parts (``rho``, ``rho_opendp``)."""
    total = exact.dec(generation_epsilon)
    floats = [float(p[key]) for p in parts]
    decimals = [_decimal_near(f) for f in floats]
    if (sum(decimals, Fraction(0)) == total and all(exact.dec(float(d)) == d for d in decimals)
            and sum((exact.binary(f) for f in floats), Fraction(0)) <= total):
        return [{"purpose": p["purpose"], key: float(d), f"{key}_opendp": f}
                for p, d, f in zip(parts, decimals, floats)]
    return [{"purpose": p["purpose"], key: f} for p, f in zip(parts, floats)]
