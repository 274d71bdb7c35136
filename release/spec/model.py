"""The validated spec (:class:`Spec`) and the budget arithmetic it implies.

A :class:`Spec` is made by :func:`dpbundle.release.spec.load.validate_spec` (or ``load_spec``).
``Spec.model`` is the typed spec (:class:`~dpbundle.release.spec.typed.SpecModel`), built once
from the validated document: every stage reads it, or the properties and accessors here. The
document itself (``raw``) stays inside the spec package; it leaves it only as the copies the
accessors below make for the readers of JSON (:meth:`Spec.document`, :meth:`Spec.public_dict`,
:attr:`Spec.evaluation_document`).
"""
from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON, DEFAULT_POLICY

from dpbundle.release.spec.typed import ReleasedColumn, SpecModel, thaw

SELECTION_FACTOR = 2  # Liu & Talwar private selection with a known threshold doubles the per-iteration epsilon
#: privacy.selection.retries: "refit" (default, as in 2024: every attempt fits the generator
#: anew) or "resample" (the generator is fitted once, before the selection; every attempt samples
#: from that model again and evaluates the criteria: only the criteria are doubled)
RETRIES = ("refit", "resample")


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no whitespace): the basis of every fingerprint."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@dataclass(frozen=True)
class Spec:
    """A validated release spec. ``model``: the typed spec, built from the document ``raw`` when
    not given (the spec package's own source of the JSON forms; other packages read ``model``
    and the accessors). ``input_columns``, ``columns``, ``column()``, ``criteria`` and
    ``pre_selection`` give parts of the document (dicts), for the tests and older callers."""

    raw: dict
    source: str = "<spec>"
    warnings: tuple[str, ...] = field(default=())
    model: SpecModel = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.model is None:
            object.__setattr__(self, "model", SpecModel.from_document(self.raw))

    @property
    def input_columns(self) -> dict[str, dict]:
        return {c["name"]: c for c in self.raw["input"]["columns"]}

    @property
    def columns(self) -> list[dict]:
        """The released columns, in release order (document form; typed: ``model.columns``)."""
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
        """The generator's epsilon (pure DP); a zCDP spec has none (``rho_generation``)."""
        if self.definition == "zcdp":
            raise ValueError("a zCDP spec gives privacy.rho_generation, not epsilon_generation")
        return float(self.raw["privacy"]["epsilon_generation"])

    @property
    def definition(self) -> str:
        """``privacy.definition``: "pure" (default) or "zcdp"."""
        return privacy_definition(self.raw)

    @property
    def rho_generation(self) -> float:
        """The generator's rho (``privacy.definition: zcdp``)."""
        return float(self.raw["privacy"]["rho_generation"])

    @property
    def delta(self) -> float:
        """The delta of a zCDP spec's stated (epsilon, delta) guarantee."""
        return float(self.raw["privacy"]["delta"])

    def zcdp_parts(self) -> dict[str, Fraction]:
        """A zCDP spec's rho parts and total (:func:`zcdp_parts`)."""
        return zcdp_parts(self.raw)

    def generation_budget(self) -> dict[str, float]:
        """The generator's budget as a keyword: {"epsilon": eps} or {"rho": rho}."""
        if self.definition == "zcdp":
            return {"rho": self.rho_generation}
        return {"epsilon": self.epsilon_generation}

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
    def publish_tables(self) -> bool:
        """``publish: tables``: the bundle carries the generator's noisy count tables
        (dp-tables.json and dp-tables.csv, with a 95% interval per cell)."""
        return "tables" in _publish_items(self.raw)

    @property
    def records_policy(self) -> str:
        """How n is released: ``dp_count`` (default) or ``declared_public``."""
        return records_settings(self.raw)[0]

    @property
    def epsilon_count(self) -> float:
        """The DP count's epsilon (0 under ``declared_public``)."""
        return float(records_settings(self.raw)[1])

    @property
    def epsilon_edges(self) -> Fraction:
        """The ``dp_edges`` draws' epsilon, exactly (0 without them)."""
        return edges_epsilon(self.raw)

    @property
    def undrawn_edges(self) -> bool:
        """Has the spec ``dp_edges`` alternatives whose edges are not drawn yet?"""
        return any(alt.undrawn for col in self.model.columns for alt in col.alternatives)

    def with_edges(self, drawn: dict) -> "Spec":
        """The resolved spec: every ``dp_edges`` alternative with its drawn edges (``drawn``:
        ``{(column, alternative): all edges}``), what the selection, the bundle's files and
        spec.json use (:func:`dpbundle.mechanisms.edges.resolved_document`)."""
        from dpbundle.mechanisms.edges import resolved_document

        doc = resolved_document(self.raw, drawn)
        return Spec(raw=doc, source=self.source, warnings=self.warnings, model=SpecModel.from_document(doc))

    def drawn_edges(self) -> dict:
        """``{(column, alternative): edges}`` of the ``dp_edges`` alternatives drawn so far."""
        from dpbundle.mechanisms.edges import drawn_edges

        return drawn_edges(self.raw)

    def provisional(self) -> "Spec":
        """For estimates made before the edges are drawn (the bundle's size): the spec resolved
        with the last ``bins - 1`` candidates of every undrawn ``dp_edges`` alternative as its
        inner edges (the longest numbers its labels can show). Never released."""
        from dpbundle.mechanisms.edges import candidate_grid, full_edges

        if not self.undrawn_edges:
            return self
        drawn = {}
        for col in self.model.columns:
            for alt in col.alternatives:
                if alt.undrawn:
                    grid = candidate_grid(alt.clip, alt.dp_edges.step)
                    inner = grid[len(grid) - (int(alt.dp_edges.bins) - 1):]
                    drawn[(col.name, alt.id)] = full_edges(alt.clip, alt.dp_edges.step, inner)
        return self.with_edges(drawn)

    @property
    def total_epsilon_exact(self) -> Fraction:
        """eps_count + eps_edges + 2 x (eps_gen + eps_eval) + pre-selection epsilons, as declared decimals."""
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
    def retries(self) -> str:
        """``privacy.selection.retries`` (:data:`RETRIES`; default "refit")."""
        return selection_retries(self.raw)

    @property
    def epsilon_per_candidate(self) -> float:
        """The epsilon of one candidate of the private selection: eps_gen + eps_eval ("refit"),
        eps_eval ("resample": the model is fitted once, before the selection)."""
        return float(per_candidate_epsilon(self.raw))

    @property
    def private_fingerprints(self) -> list[str]:
        return list(self.raw["privacy"].get("private_data_sha256", []))

    def public_dict(self) -> dict:
        """The spec as published in a bundle: without the fingerprints of confidential files
        (a fresh copy, keys sorted: the form that is hashed)."""
        public = json.loads(canonical_json(self.raw))
        public["privacy"].pop("private_data_sha256", None)
        return public

    def document(self) -> dict:
        """A fresh deep copy of the validated document as written (key order kept, private
        fingerprints included): for the writers that store or publish the spec as JSON (the
        bundle writer strips the fingerprints itself; a kept result keeps them)."""
        return copy.deepcopy(self.raw)

    @cached_property
    def evaluation_document(self) -> dict:
        """The spec document the criteria of :mod:`dpbundle.mechanisms.criteria` and the sweep's
        utility measures read (``EvalContext.spec``): the public spec exactly as the audit reads
        it from spec.json (key order kept, without ``privacy.private_data_sha256``). Made once
        and shared: read only."""
        doc = copy.deepcopy(self.raw)
        if isinstance(doc.get("privacy"), dict):
            doc["privacy"].pop("private_data_sha256", None)
        return doc

    # ---- typed accessors (the model's most used parts)

    @property
    def release_title(self) -> str:
        """``release.title``."""
        return self.model.release.title

    @property
    def simulated(self) -> bool:
        """``release.simulated``: the records were generated from a simulated registry (the
        built-in examples); default False."""
        return self.model.release.is_simulated

    def categories_ordered(self, column: str, alternative: str) -> bool:
        """Are released column ``column``'s values, under ``alternative``, in their natural order
        (datapackage.json's ``categoriesOrdered``)? Bins always; categories when the alternative
        declares ``ordered: true``. KeyError for an unknown column or alternative."""
        alt = self.model.column(column).alternative(alternative)
        if alt is None:
            raise KeyError(f"column {column!r} has no alternative {alternative!r}")
        return alt.categories_ordered

    @property
    def released_columns(self) -> tuple[ReleasedColumn, ...]:
        """The released columns, typed, in release order (``model.columns``)."""
        return self.model.columns

    @property
    def generator_types(self) -> list[str]:
        """The ``type`` of every generator entry, in spec order (repeats kept)."""
        return [g.type for g in self.model.generators]

    @property
    def group_bins(self) -> dict:
        """``group_bins`` in its document form, a fresh dict (column -> {edges, labels} or
        {per_alternative: {id: {edges, labels}}}; {} without): what the sweep's utility measures
        read. Typed: ``model.group_bins``."""
        return thaw(self.model.group_bins) if self.model.group_bins is not None else {}

    def label_style(self, column: str) -> str:
        """The label style of released column ``column``'s open bins."""
        return self.model.label_style_of(self.model.column(column))

    def budget_formula(self) -> str:
        """The total epsilon spelled out (:func:`budget_formula`)."""
        return budget_formula(self.raw)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the whole spec."""
        return hashlib.sha256(canonical_json(self.raw)).hexdigest()


def edges_epsilon(doc: dict) -> Fraction:
    """The epsilon of every ``dp_edges`` draw of a spec document, exactly (each alternative draws
    its edges whether or not the selection uses it)."""
    return exact.total(alt["dp_edges"]["epsilon"] for col in doc.get("columns") or []
                       for alt in col.get("alternatives") or [] if "dp_edges" in alt)


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


def selection_retries(doc: dict) -> str:
    """``privacy.selection.retries`` of a spec document: "refit" (default) or "resample"."""
    return ((doc.get("privacy") or {}).get("selection") or {}).get("retries", "refit")


def privacy_definition(doc: dict) -> str:
    """``privacy.definition`` of a spec document: "pure" (default) or "zcdp"."""
    return (doc.get("privacy") or {}).get("definition", "pure")


def zcdp_parts(doc: dict) -> dict[str, Fraction]:
    """A zCDP spec's rho parts and total (:func:`dpbundle.mechanisms.zcdp.release_rho`)."""
    from dpbundle.mechanisms import zcdp

    priv = doc["privacy"]
    eps_eval = exact.total(c["epsilon"] for c in doc["acceptance"])
    pre = [exact.dec(p["epsilon"]) for p in priv.get("pre_selection", [])]
    return zcdp.release_rho(records_settings(doc)[1], exact.dec(priv["rho_generation"]), eps_eval, pre)


def per_candidate_epsilon(doc: dict) -> Fraction:
    """One candidate's epsilon, exactly: eps_gen + eps_eval ("refit") or eps_eval ("resample")."""
    eps_eval = exact.total(c["epsilon"] for c in doc["acceptance"])
    if selection_retries(doc) == "resample":
        return eps_eval
    return exact.dec(doc["privacy"]["epsilon_generation"]) + eps_eval


def budget_total(doc: dict) -> Fraction:
    """Exactly: eps_count + eps_edges (every ``dp_edges`` alternative's draws) + 2 x (eps_gen + eps_eval) + pre-selection ("refit"), or
    eps_count + eps_gen + 2 x eps_eval + pre-selection ("resample": the model is one
    eps_gen-DP release made before the selection, which is Liu & Talwar's loop over candidates
    that only sample from it and evaluate the criteria; sequential composition). A zCDP spec:
    the epsilon at its delta that its total rho implies (OpenDP's conversion, the float as a
    fraction; :func:`zcdp_parts`)."""
    priv = doc["privacy"]
    if privacy_definition(doc) == "zcdp":
        from dpbundle.mechanisms import zcdp

        return Fraction(zcdp.epsilon_at_delta(zcdp_parts(doc)["total"], float(priv["delta"])))
    fitted_once = exact.dec(priv["epsilon_generation"]) if selection_retries(doc) == "resample" else 0
    pre = exact.total(p["epsilon"] for p in priv.get("pre_selection", []))
    return (records_settings(doc)[1] + edges_epsilon(doc) + fitted_once
            + SELECTION_FACTOR * per_candidate_epsilon(doc) + pre)


def budget_formula(doc: dict) -> str:
    """The total spelled out, e.g. 'count 0.1 + 2 x (generation 4 + criteria 0.76) = 9.62', or
    'count 0.02 + generation 0.94 (fitted once) + 2 x criteria 0.02 = 1'."""
    priv = doc["privacy"]
    policy, eps_count = records_settings(doc)
    eps_eval = exact.total(c["epsilon"] for c in doc["acceptance"])
    pre = exact.total(p["epsilon"] for p in priv.get("pre_selection", []))
    if privacy_definition(doc) == "zcdp":
        return zcdp_formula(doc)
    head = f"count {exact.show(eps_count)} + " if policy == "dp_count" else ""
    eps_edges = edges_epsilon(doc)
    head += f"edges {exact.show(eps_edges)} + " if eps_edges else ""
    tail = f" + pre-selection {exact.show(pre)}" if pre else ""
    gen = exact.show(exact.dec(priv["epsilon_generation"]))
    if selection_retries(doc) == "resample":
        body = f"generation {gen} (fitted once) + {SELECTION_FACTOR} x criteria {exact.show(eps_eval)}"
    else:
        body = f"{SELECTION_FACTOR} x (generation {gen} + criteria {exact.show(eps_eval)})"
    return f"{head}{body}{tail} = {exact.show(budget_total(doc))}"


def zcdp_formula(doc: dict) -> str:
    """A zCDP spec's total spelled out, e.g. 'rho = count 0.02^2/2 + generation 0.0139 (fitted
    once) + (2 x criteria 0.02)^2/2 = 0.0149, epsilon 0.9975 at delta 1e-09'."""
    from dpbundle.mechanisms import zcdp

    priv = doc["privacy"]
    policy, eps_count = records_settings(doc)
    parts = zcdp_parts(doc)
    eps_eval = exact.total(c["epsilon"] for c in doc["acceptance"])
    pre = [exact.dec(p["epsilon"]) for p in priv.get("pre_selection", [])]
    head = f"count {exact.show(eps_count)}^2/2 + " if policy == "dp_count" else ""
    tail = "".join(f" + pre-selection {exact.show(e)}^2/2" for e in pre)
    eps = zcdp.epsilon_at_delta(parts["total"], float(priv["delta"]))
    return (f"rho = {head}generation {exact.show(exact.dec(priv['rho_generation']))} (fitted once) + "
            f"(2 x criteria {exact.show(eps_eval)})^2/2{tail} = {exact.show(parts['total'])}, "
            f"epsilon {zcdp.shown_epsilon(eps)} at delta {float(priv['delta']):g}")
