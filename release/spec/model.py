"""The validated spec (:class:`Spec`) and the budget arithmetic it implies.

A :class:`Spec` is made only by :func:`dpbundle.release.spec.load.validate_spec` (or ``load_spec``);
its properties are the typed views every stage reads.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON, DEFAULT_POLICY

SELECTION_FACTOR = 2  # Liu & Talwar private selection with a known threshold doubles the per-iteration epsilon


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no whitespace): the basis of every fingerprint."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@dataclass(frozen=True)
class Spec:
    """A validated release spec. ``raw`` is the plain dict; the properties are typed views."""

    raw: dict
    source: str = "<spec>"
    warnings: tuple[str, ...] = field(default=())

    @property
    def input_columns(self) -> dict[str, dict]:
        return {c["name"]: c for c in self.raw["input"]["columns"]}

    @property
    def columns(self) -> list[dict]:
        """The released columns, in release order."""
        return self.raw["columns"]

    @property
    def column_names(self) -> list[str]:
        return [c["name"] for c in self.raw["columns"]]

    def column(self, name: str) -> dict:
        for c in self.raw["columns"]:
            if c["name"] == name:
                return c
        raise KeyError(name)

    @property
    def criteria(self) -> list[dict]:
        return self.raw["acceptance"]

    @property
    def epsilon_generation(self) -> float:
        return float(self.raw["privacy"]["epsilon_generation"])

    @property
    def epsilon_evaluation(self) -> float:
        """eps_eval: the sum of the acceptance criteria's epsilons (exact, then as a float)."""
        return float(exact.total(c["epsilon"] for c in self.criteria))

    @property
    def pre_selection(self) -> list[dict]:
        return list(self.raw["privacy"].get("pre_selection", []))

    @property
    def publish_model(self) -> bool:
        """``publish: model``: the bundle carries the selected DP model (model.json)."""
        return "model" in _publish_items(self.raw)

    @property
    def records_policy(self) -> str:
        """How n is released: ``dp_count`` (default) or ``declared_public``."""
        return records_settings(self.raw)[0]

    @property
    def epsilon_count(self) -> float:
        """The DP count's epsilon (0 under ``declared_public``)."""
        return float(records_settings(self.raw)[1])

    @property
    def total_epsilon_exact(self) -> Fraction:
        """eps_count + 2 x (eps_gen + eps_eval) + pre-selection epsilons, as declared decimals."""
        return budget_total(self.raw)

    @property
    def total_epsilon(self) -> float:
        """total = eps_count + 2 x (eps_gen + eps_eval) + measurements made once before the
        selection (see :attr:`total_epsilon_exact`)."""
        return float(self.total_epsilon_exact)

    @property
    def epsilon_cap(self) -> float:
        return float(self.raw["privacy"]["epsilon_cap"])

    @property
    def stop_probability(self) -> float:
        return float(self.raw["privacy"].get("selection", {}).get("stop_probability", 0.0))

    @property
    def private_fingerprints(self) -> list[str]:
        return list(self.raw["privacy"].get("private_data_sha256", []))

    def public_dict(self) -> dict:
        """The spec as published in a bundle: without the fingerprints of confidential files."""
        public = json.loads(canonical_json(self.raw))
        public["privacy"].pop("private_data_sha256", None)
        return public

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the whole spec."""
        return hashlib.sha256(canonical_json(self.raw)).hexdigest()


def _publish_items(doc: dict) -> list[str]:
    value = doc.get("publish") or []
    return [value] if isinstance(value, str) else list(value)


def records_settings(doc: dict) -> tuple[str, Fraction]:
    """(policy, eps_count) of a spec document; defaults: dp_count at DEFAULT_COUNT_EPSILON."""
    rec = (doc.get("privacy") or {}).get("records") or {}
    policy = rec.get("policy", DEFAULT_POLICY)
    if policy == "declared_public":
        return policy, Fraction(0)
    return policy, exact.dec(rec.get("epsilon", DEFAULT_COUNT_EPSILON))


def budget_total(doc: dict) -> Fraction:
    """eps_count + 2 x (eps_gen + sum of criterion epsilons) + pre-selection, exactly."""
    priv = doc["privacy"]
    per_iteration = exact.dec(priv["epsilon_generation"]) + exact.total(
        c["epsilon"] for c in doc["acceptance"])
    pre = exact.total(p["epsilon"] for p in priv.get("pre_selection", []))
    return records_settings(doc)[1] + SELECTION_FACTOR * per_iteration + pre


def budget_formula(doc: dict) -> str:
    """The total spelled out, e.g. 'count 0.1 + 2 x (generation 4 + criteria 0.76) = 9.62'."""
    priv = doc["privacy"]
    policy, eps_count = records_settings(doc)
    eps_eval = exact.total(c["epsilon"] for c in doc["acceptance"])
    pre = exact.total(p["epsilon"] for p in priv.get("pre_selection", []))
    head = f"count {exact.show(eps_count)} + " if policy == "dp_count" else ""
    tail = f" + pre-selection {exact.show(pre)}" if pre else ""
    return (f"{head}{SELECTION_FACTOR} x (generation {exact.show(exact.dec(priv['epsilon_generation']))} "
            f"+ criteria {exact.show(eps_eval)}){tail} = {exact.show(budget_total(doc))}")
