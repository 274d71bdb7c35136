"""``registry-entry.yaml``: the bundle's entry for the OpenDP Deployments Registry.

The registry (registry.opendp.org; data and schema in the public repository
opendp/deployments-registry-data, ``schemas/deployments-schema.yaml``) describes DP deployments
in YAML at three tiers. Israel's own 2024 entry for its births release sits at tier 1 with the
tier-3 fields (privacy unit details, pre-processing and tuning, justification, ...) left blank.
dpbundle knows every one of them, so every bundle carries a tier-3 entry built here from the
bundle's public documents only (the spec, budget.json, the metrics, the selected configuration
and the facts known when the manifest is written: the day, the tool version, the key's
fingerprint, the optional public files). The publisher can submit it as it is (status Draft) or
edit the few fields the spec cannot give (the region, the sector).

The entry follows the registry's schema (field names, nesting, enumerations) and is checked
against ``schemas/registry-entry.schema.json`` (written from that field list, stricter: dpbundle
fills every tier-3 field) before it is written (``release/bundle/registry_entry.py``). Its strings
follow the registry's own file checks (no folded YAML style, no LaTeX double backslashes). It is
made from public files only, so the audit renders it again from the bundle (:class:`RegistryFacts`
from spec.json, budget.json, metrics.json, the manifest and the optional files) and requires the
same bytes (the closure rule, docs/audit.md).

Its wording follows the datasheet's editions (``templates/datasheet/edition.py``, from the facts'
``dpbundle_version``): edition 1 is dpbundle 0.2's entry unchanged; edition 2 names the generator
as people know it (PrivSyn, not privsyn), says SIMULATED for a spec with ``release.simulated``, and
states the privacy loss composed over every run the curator's budget ledger records on the
registry (``RegistryFacts.ledger``, the manifest's ``ledger``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

import yaml

from dpbundle.mechanisms import exact
from dpbundle.templates.datasheet import statements
from dpbundle.templates.datasheet.edition import edition_of
from dpbundle.templates.metadata.budget_words import ZCDP_PLAIN

__all__ = ["REGISTRY_ENTRY", "RegistryFacts", "registry_entry", "registry_entry_of", "entry_yaml",
           "composition_formula", "RegistryEntryError", "SCHEMA"]

REGISTRY_ENTRY = "registry-entry.yaml"
SCHEMA = "registry-entry"
NOT_STATED = "Not stated in the release spec"

_MECHANISM_WORDS = {
    "laplace": "the Laplace mechanism (OpenDP make_laplace)",
    "functional_mechanism": "the functional mechanism (Zhang et al. 2012: Laplace noise on the "
                            "coefficients of the regression's loss, OpenDP)",
    "sufficient_statistics": "noisy sufficient statistics (Laplace noise, OpenDP)",
    "exponential_mechanism": "the exponential mechanism as report-noisy-max (OpenDP make_noisy_max)",
}


class RegistryEntryError(ValueError):
    """The registry entry cannot be built from the documents given."""


# --------------------------------------------------------------------------------- helpers

def _show(x: Any) -> str:
    """A declared number as its exact decimal (0.8, 4, 9.98)."""
    return exact.show(exact.dec(x))


def composition_formula(budget: dict) -> str:
    """The total epsilon spelled out from budget.json, e.g. ``total epsilon = records count 0.1
    (+ bin edges 0.05, when the spec draws bins under DP) + 2 x (generation 4 + acceptance criteria 0.99) = 10.08``. Every number is the exact decimal
    of budget.json's (the audit computes the same sentence from budget.json and looks for it in
    the entry's composition and privacy parameter details)."""
    rec = budget.get("records") or {"policy": "declared_public", "epsilon": 0}
    if _zcdp(budget):
        return zcdp_composition_formula(budget)
    head = f"records count {_show(rec['epsilon'])} + " if rec.get("policy") == "dp_count" else ""
    head += f"bin edges {_show(budget['edges']['epsilon'])} + " if budget.get("edges") else ""
    pre = budget.get("pre_selection") or []
    tail = f" + pre-selection {exact.show(exact.total(p['epsilon'] for p in pre))}" if pre else ""
    if _resample(budget):
        body = (f"generation {_show(budget['generation']['epsilon'])} (fitted once) + "
                f"{_show(budget['selection']['factor'])} x acceptance criteria "
                f"{_show(budget['evaluation']['epsilon'])}")
    else:
        body = (f"{_show(budget['selection']['factor'])} x (generation "
                f"{_show(budget['generation']['epsilon'])} + acceptance criteria "
                f"{_show(budget['evaluation']['epsilon'])})")
    return f"total epsilon = {head}{body}{tail} = {_show(budget['total_epsilon'])}"


def _zcdp(budget: dict) -> bool:
    """budget.json is a zCDP release's (``definition: zcdp``)."""
    return budget.get("definition") == "zcdp"


def zcdp_composition_formula(budget: dict) -> str:
    """A zCDP release's total spelled out from budget.json, e.g. ``total rho = records count
    0.02^2/2 + generation 0.0139 (fitted once) + (2 x acceptance criteria 0.02)^2/2 = 0.0149,
    which implies (epsilon, delta)-DP with epsilon 0.997449894615702 at delta 1e-09``."""
    from dpbundle.mechanisms import zcdp

    rec = budget.get("records") or {"policy": "declared_public", "epsilon": 0}
    z = budget["zcdp"]
    head = f"records count {_show(rec['epsilon'])}^2/2 + " if rec.get("policy") == "dp_count" else ""
    tail = "".join(f" + pre-selection {_show(p['epsilon'])}^2/2" for p in budget.get("pre_selection") or [])
    return (f"total rho = {head}generation {_show(budget['generation']['rho'])} (fitted once) + "
            f"({_show(budget['selection']['factor'])} x acceptance criteria "
            f"{_show(budget['evaluation']['epsilon'])})^2/2{tail} = {_show(z['total_rho'])}, which implies "
            f"(epsilon, delta)-DP with epsilon {zcdp.shown_epsilon(budget['total_epsilon'])} at delta "
            f"{z['delta']:g}")


def _gen_budget(gen: dict) -> str:
    """The generator's budget: 'rho 0.0139' (zCDP) or the epsilon, e.g. '0.94'."""
    return f"rho {_show(gen['rho'])}" if "rho" in gen else _show(gen["epsilon"])


def _resample(budget: dict) -> bool:
    """budget.json's selection fitted the generator once (``selection.retries: resample``)."""
    sel = budget.get("selection")
    return isinstance(sel, dict) and sel.get("retries") == "resample"


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:120].strip("-") or "dp-release"


def _sentence(text: str) -> str:
    text = " ".join(str(text).split())
    return text if not text or text.endswith((".", "!", "?")) else text + "."


def _join(items: Sequence[str], last: str = "and") -> str:
    items = [str(i) for i in items]
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


def _params(d: dict, skip: Sequence[str] = ("type",)) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items() if k not in skip)


def _input_column(c: dict) -> str:
    t = c.get("type", "?")
    bits = [f"{c.get('name')} ({t}"]
    if c.get("min") is not None or c.get("max") is not None:
        bits.append(f" {c.get('min', '')}..{c.get('max', '')}")
    if c.get("categories"):
        cats = [str(x) for x in c["categories"]]
        bits.append(": " + ", ".join(cats[:12]) + (", ..." if len(cats) > 12 else ""))
    return "".join(bits) + ")"


def _threshold_words(entry: dict, row: dict | None, edition: int = 2) -> str:
    t = entry.get("threshold")
    used = row.get("threshold") if row else None
    if isinstance(t, dict):
        stake = t.get("stakeholder")
        fp = t.get("false_positive")
        derived = f"{used:.6g}" if isinstance(used, (int, float)) else "derived"
        if edition >= 2 and isinstance(stake, (int, float)) and not isinstance(stake, bool):
            stake = _show(stake)  # 2, not 2.0
        return (f"threshold {derived}, lowered from the stakeholders' {stake} so that a candidate beyond "
                f"their limit passes by the noise alone with probability at most {fp}")
    return f"threshold {_show(t) if isinstance(t, (int, float)) else t}"


# --------------------------------------------------------------------------------- the entry

@dataclass(frozen=True)
class RegistryFacts:
    """What the entry is made from: the bundle's public documents and the manifest's facts.

    ``spec``: the public spec; ``configuration`` / ``configuration_id``: spec.json's;
    ``budget``: budget.json; ``criteria``: metrics.json's rows; ``n``: the released rows;
    ``columns``: (name, number of values, ordered) of each released column; ``created``: the UTC
    day; ``dpbundle_version``: the tool's version; ``fingerprint``: the signing key's SHA-256;
    ``files``: the bundle's file names; ``preregistration``: preregistration.json when the
    release was pre-registered; ``ledger``: manifest.json's ``ledger`` (spends_on_registry,
    earlier_epsilons, composed_epsilon), when the release has one: the entry then states the
    privacy loss composed over every recorded run on the registry. A spec with
    ``release.simulated: true`` (an ``--example`` release) makes the entry say SIMULATED in its
    name, description and notes."""

    spec: dict
    configuration: dict
    configuration_id: str
    budget: dict
    criteria: Sequence[dict]
    n: int
    columns: Sequence[tuple[str, int, bool]]
    created: str
    dpbundle_version: str
    fingerprint: str
    files: Sequence[str]
    preregistration: dict | None = None
    ledger: dict | None = None


def registry_entry(**facts: Any) -> dict:
    """The registry entry (a dict in the registry's layout) from the bundle's public documents,
    given as the keyword arguments of :class:`RegistryFacts` (see :func:`registry_entry_of`)."""
    return registry_entry_of(RegistryFacts(**facts))


def registry_entry_of(facts: RegistryFacts) -> dict:
    """The registry entry (a dict in the registry's layout) from :class:`RegistryFacts`;
    :class:`RegistryEntryError` when a document lacks a field the entry needs."""
    try:
        return _entry(replace(facts, criteria=list(facts.criteria), n=int(facts.n), columns=list(facts.columns),
                              files=list(facts.files)))
    except (KeyError, TypeError, AttributeError) as exc:
        raise RegistryEntryError(f"{REGISTRY_ENTRY}: the bundle's documents lack a field it needs "
                                 f"({exc!r})") from None


@dataclass(frozen=True)
class _Common:
    """The facts several sections of the entry state, read once (in this order)."""

    release: dict
    privacy: dict
    title: str
    publisher: str
    rows: dict            # metrics.json's rows by criterion id
    acceptance: list
    gen: dict             # budget.json's generation
    records: dict         # budget.json's records (default: the count published exactly)
    dp_count: bool
    formula: str          # composition_formula(budget)
    min_count: Any        # the projection's min_count (None: no projection)
    when: str             # " from START to END" (the registry's period) or ""
    seeds_bound: bool     # seeds.json in the bundle
    has_model: bool       # model.json in the bundle
    simulated: bool       # spec.json's release.simulated
    ledger: dict          # statements.ledger_facts of the manifest's ledger
    gen_name: str         # the generator as people know it (PrivSyn, AIM (pure DP), ...); edition 1: its type
    edition: int          # the wording's edition (templates/datasheet/edition.py): 1 = dpbundle 0.2's entry


def _common(f: RegistryFacts) -> _Common:
    release = f.spec["release"]
    privacy = f.spec["privacy"]
    title, publisher = str(release["title"]), str(release["publisher"])
    rows = {c["id"]: c for c in f.criteria}
    acceptance = f.spec.get("acceptance") or []
    gen = f.budget["generation"]
    records = f.budget.get("records") or {"policy": "declared_public", "epsilon": 0, "released_n": f.n,
                                          "statement": "the number of records is published exactly"}
    dp_count = records["policy"] == "dp_count"
    formula = composition_formula(f.budget)
    min_count = (f.configuration.get("projection") or {}).get("min_count")
    period = release.get("period") or {}
    when = f" from {period['start']} to {period['end']}" if period.get("start") and period.get("end") else ""
    edition = edition_of(f.dpbundle_version)
    return _Common(release=release, privacy=privacy, title=title, publisher=publisher, rows=rows,
                   acceptance=acceptance, gen=gen, records=records, dp_count=dp_count, formula=formula,
                   min_count=min_count, when=when, seeds_bound="seeds.json" in f.files,
                   has_model="model.json" in f.files, simulated=edition >= 2 and statements.simulated(f.spec),
                   ledger=(statements.ledger_facts(f.ledger, float(f.budget["total_epsilon"])) if edition >= 2
                           else statements.ledger_facts(None, 0.0)),
                   gen_name=statements.generator_name(gen["type"]) if edition >= 2 else str(gen["type"]),
                   edition=edition)


def _entry(f: RegistryFacts) -> dict:
    c = _common(f)
    deployment = {
        "basic": _basic(f, c),
        "dp_variant": _dp_variant(f, c),
        "privacy_loss": _privacy_loss(f, c),
        "deployment_model": _deployment_model(c),
        "accounting": _accounting(f, c),
        "implementation": _implementation(f, c),
        "administrative": _administrative(f, c),
    }
    return {
        "url_slug": _slug(f"{c.title} {c.publisher} {f.created[:4]}"),
        "status": "Draft",
        "tier": 3,
        "deployment": deployment,
    }


# -- tier 1

def _basic(f: RegistryFacts, c: _Common) -> dict:
    uses = [f"{e['id']}: {_sentence(e.get('description') or e.get('type'))[:-1]}" for e in c.acceptance]
    simulated = ("SIMULATED DATA, NO REAL PERSON: this release was made from a simulated registry, generated "
                 "by a program for demonstration (spec.json: release.simulated); where the text below names a "
                 "registry, it is the simulated one. " if c.simulated else "")
    return {
        "name": f"SIMULATED: {c.title}" if c.simulated else c.title,
        "data_curators": [c.publisher],
        "description": simulated + _sentence(c.release.get("description") or c.title)
        + f" {f.n:,} synthetic records in {len(f.columns)} categorical columns "
          f"({', '.join(col[0] for col in f.columns)}).",
        "intended_use": ("Open data for statistical analysis of the released columns. The analyses "
                         "validated before the release, each within a public threshold with DP noise: "
                         + "; ".join(uses) + ". Anything else is not guaranteed (see the datasheet, "
                         "README.pdf)."),
        "data_product_type": "Synthetic data",
        "data_product_region": NOT_STATED,
        "publication_date": f.created,
    }


# -- tier 2 and 3: the variant, the privacy loss

def _raw_rules(spec: dict) -> list:
    return [c.get("name") for c in spec.get("raw_constraints") or []]


def _dp_variant(f: RegistryFacts, c: _Common) -> dict:
    in_cols = (f.spec.get("input") or {}).get("columns") or []
    raw_rules = _raw_rules(f.spec)
    domain_size = 1
    for _, k, _ in f.columns:
        domain_size *= int(k)
    records = c.records
    return {
        "variant_name": "Zero-concentrated DP" if _zcdp(f.budget) else "Pure DP",
        "data_domain": (f"Tables of records (unit of privacy: {c.release['unit_of_privacy']}) with the input "
                        "columns "
                        + "; ".join(_input_column(col) for col in in_cols)
                        + (f". Rows that break one of the {len(raw_rules)} public plausibility rules of the "
                           "spec are dropped first" if raw_rules else "")
                        + f". The released table's records take one of {domain_size:,} combinations of "
                          "the released columns' values (codebook.csv)."),
        "unprotected_quantities": (
            (f"None of the records' values. The number of records ({records['released_n']:,}) is a DP "
             f"count (epsilon {_show(records['epsilon'])}, part of the total)." if c.dp_count else
             f"The number of records, {records['released_n']:,}: {records['statement']}.")
            + (" The spec (columns, bin edges, plausibility rules, criteria, thresholds, epsilons, cap) "
               "is public and was fixed without the data; the selected configuration and the DP "
               "values of the criteria are outputs of the DP mechanisms." if not f.budget.get("edges") else
               " The spec (columns, bins, plausibility rules, criteria, thresholds, epsilons, cap) is public "
               f"and was fixed without the data, except the bin edges of {_edges_names(f.budget['edges'])}, "
               "which are DP quantiles of the data (spec.json, budget.json); those edges, the selected "
               "configuration and the DP values of the criteria are outputs of the DP mechanisms.")),
    }


def _generation_parts(gen: dict) -> str:
    return "; ".join(f"{p['purpose']} " + (f"rho {_show(p['rho'])}" if "rho" in p else _show(p["epsilon"]))
                     for p in gen.get("parts") or [])


def _privacy_loss(f: RegistryFacts, c: _Common) -> dict:
    budget, gen = f.budget, c.gen
    parts = _generation_parts(gen)
    crit_eps = ", ".join(f"{x['id']} {_show(x['epsilon'])}" for x in budget["evaluation"]["criteria"])
    return {
        "privacy_unit": str(budget["unit_of_privacy"]),
        "privacy_unit_details": (
            f"Neighbouring registries: {_sentence(budget['neighbouring'])} Input metric: change-one "
            "distance (OpenDP change_one_distance; one record replaced by another), at distance 1. "
            + ("Someone with several records is protected by group privacy (k records: k^2 times the rho)."
               if _zcdp(budget) else
               "Someone with several records is protected by group privacy (k records: k times the epsilon).")),
        "privacy_parameters": ({"rho": float(budget["zcdp"]["total_rho"]), "epsilon": float(budget["total_epsilon"]),
                                "delta": float(budget["zcdp"]["delta"])} if _zcdp(budget)
                               else {"epsilon": float(budget["total_epsilon"])}),
        "privacy_parameters_details": (
            (f"Zero-concentrated DP (zCDP); {c.formula} (conversion: {budget['zcdp']['conversion']}). "
             + ZCDP_PLAIN + " The count of records and the acceptance criteria are pure-DP (Laplace) "
             "measurements, counted as epsilon^2/2. " if _zcdp(budget) else f"Pure DP (delta = 0); {c.formula}. ")
            + f"Generation ({c.gen_name}): {_gen_budget(gen)}"
            + (f" ({parts})" if parts else "")
            + f". Acceptance criteria: {_show(budget['evaluation']['epsilon'])} "
            f"({crit_eps}). "
            + (f"The generator is fitted once; the private selection over new samples of its model "
               f"doubles the acceptance criteria's epsilon (factor {_show(budget['selection']['factor'])}) "
               "whatever the number of candidates tried. Cap " if _resample(budget) else
               f"The private selection doubles the per-candidate epsilon (factor "
               f"{_show(budget['selection']['factor'])}) whatever the number of candidates tried. Cap ")
            + f"declared in the spec: {_show(budget['epsilon_cap'])}. "
            + ("OpenDP's conversion of the total rho from its maps gives epsilon "
               if _zcdp(budget) else "OpenDP's privacy map of the selection gives ")
            + f"{budget.get('total_epsilon_opendp')!r}." + _composed_words(budget, c)),
    }


def _composed_words(budget: dict, c: _Common) -> str:
    """The privacy loss over every run the publisher's budget ledger records on the registry
    (manifest.json's ledger; pure-DP sequential composition), or "" without a ledger."""
    led = c.ledger
    if not led["known"]:
        return ""
    delta = (f" (at delta {budget['zcdp']['delta']:g}; the ledger records the epsilons only, and each "
             "zero-concentrated DP run's delta adds to the others')" if _zcdp(budget) else "")
    if led["only"]:
        return (" The curator's budget ledger records this run as the only one on the registry: the "
                f"privacy loss of its people is this epsilon{delta}.")
    if led["composed"] is None:
        return (f" This is the {led['k_ordinal']} run on the registry recorded in the curator's budget ledger; "
                "the earlier runs' epsilons are not stated and add to this one.")
    shown = [_show(e) for e in led["earlier_epsilons_values"]]
    earlier = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"
    return (f" This is the {led['k_ordinal']} run on the registry recorded in the curator's budget ledger "
            f"(runs that released nothing included); the earlier runs spent epsilon {earlier}. Composed over "
            f"every recorded run (sequential composition: the epsilons add up), the privacy loss of the "
            f"registry's people is epsilon {_show(budget['total_epsilon'])} + {_show(led['earlier_sum'])} = "
            f"{_show(led['composed'])}{delta}; the cap bounds this release's total only.")


# -- the deployment model

def _deployment_model(c: _Common) -> dict:
    publisher = c.publisher
    led = c.ledger
    return {
        "model_name": "Central",
        "model_name_details": (f"{publisher} holds the {'simulated' if c.simulated else 'confidential'} registry "
                               "and runs dpbundle where the "
                               "registry is kept; only the signed bundle is published."),
        "actors": (f"The curator ({publisher}) sees the {'simulated' if c.simulated else 'confidential'} data "
                   "and the private randomness transcript and is trusted to run the published spec on the "
                   f"{'simulated' if c.simulated else 'real'} registry. An auditor "
                   "inside the enclave, given the transcript and the data, can replay the selected "
                   "candidate byte for byte against the published commitment. Everyone else, including "
                   "adversaries, sees only the bundle; anyone can check its signature, hashes and budget "
                   "arithmetic with dpbundle audit, without trusting the curator's code."),
        "release_type": "One release" if not (led["known"] and led["k"] > 1) else "Many releases",
        "release_type_details": ("One bundle. Its epsilon is recorded in the curator's private budget "
                                 "ledger; another release from the same registry adds to it and is refused "
                                 "unless the curator allows additional spending."
                                 + (f" The ledger records {led['k']} runs on this registry, this one included "
                                    "(see privacy_parameters_details)." if led["known"] and led["k"] > 1 else "")),
        "data_source_type": "Static",
        "data_source_type_details": f"One extract of the registry{c.when}.",
        "access_type": "Non-interactive",
        "access_type_details": "The bundle is published as files; no query is answered.",
    }


# -- accounting

def _post_processing(f: RegistryFacts, c: _Common) -> str:
    synth = [x.get("name") for x in f.spec.get("synthetic_constraints") or []]
    post = ["Sampling from the DP model (about 1.1 n records, resampled if short)"]
    if synth:
        post.append(f"dropping the sampled records that break one of {len(synth)} public synthetic "
                    f"constraints ({'; '.join(synth)})")
    post.append("keeping n records")
    if c.min_count == 1 and c.edition >= 2:
        post.append("no face-privacy projection (min_count 1: a released record may be unique)")
    elif c.min_count is not None:
        post.append(f"the face-privacy projection (every full record appears at least {c.min_count} times, "
                    "by removing or duplicating sampled records)")
    post.append("shuffling")
    return (", ".join(post) + ". The seeds of these steps are "
            + ("derived from a pre-registered secret and a public beacon value (seeds.json)" if c.seeds_bound
               else "256-bit values from the operating system's CSPRNG (Python secrets), recorded in the "
                    "private transcript")
            + ". The codebook, the datasheet and metrics.csv are computed from the DP outputs."
            + (" The DP model itself is published (model.json): post-processing of the generation step."
               if c.has_model else ""))


def _composition(f: RegistryFacts, c: _Common) -> str:
    budget, gen = f.budget, c.gen
    if _resample(budget):
        opening = (f"The generator ({c.gen_name}, {'' if 'rho' in gen else 'epsilon '}{_gen_budget(gen)}) is fitted once, "
                   "before the selection. The private selection with a known threshold (Liu and "
                   "Talwar 2019) draws new samples of its model, each evaluated by the acceptance "
                   f"criteria (epsilon {_show(budget['evaluation']['epsilon'])}), until one passes every "
                   "criterion")
        cost = "x the acceptance criteria's epsilon"
    else:
        opening = (f"Sequential composition within one candidate: the generator ({c.gen_name}, epsilon "
                   f"{_show(gen['epsilon'])}) and the acceptance criteria (epsilon "
                   f"{_show(budget['evaluation']['epsilon'])}). The private selection with a known "
                   "threshold (Liu and Talwar 2019) draws candidates until one passes every criterion")
        cost = "x the per-candidate epsilon"
    return (
        opening
        + (f", or stops, releasing nothing, with probability {budget['selection']['stop_probability']!r} "
           "after each failure" if budget["selection"]["stop_probability"] else "")
        + "; it costs "
        f"{_show(budget['selection']['factor'])} {cost} whatever the number of "
        "candidates tried, which is never published."
        + (f" The DP count of records (epsilon {_show(c.records['epsilon'])}) is measured once, before "
           "the selection." if c.dp_count else "")
        + (f" The bin edges of {_edges_names(budget['edges'])} are drawn under DP (epsilon "
           f"{_show(budget['edges']['epsilon'])} in all), once, before the selection." if budget.get("edges") else "")
        + (" Measurements made once before the selection: "
           + ", ".join(f"{p['purpose']} {_show(p['epsilon'])}" for p in budget.get("pre_selection"))
           + "." if budget.get("pre_selection") else "")
        + f" Hence {c.formula} (budget.json), at most the cap {_show(budget['epsilon_cap'])}.")


def _edges_names(edges: dict) -> str:
    """'hours (dp8)' and the like: the alternatives whose bins were drawn under DP."""
    return ", ".join(f"{a['column']} ({a['alternative']})" for a in edges.get("alternatives") or [])


def _accounting(f: RegistryFacts, c: _Common) -> dict:
    return {"post_processing": _post_processing(f, c), "composition": _composition(f, c)}


# -- implementation

def _tuning(f: RegistryFacts) -> str:
    budget, prereg = f.budget, f.preregistration
    raw_rules = _raw_rules(f.spec)
    source = (budget.get("selection") or {}).get("stop_probability_source", "spec")
    prereg_words = ""
    if prereg is not None:
        cs = prereg.get("configs_sha256")
        prereg_words = (" The spec" + (f", the configuration list (SHA-256 {cs})" if cs else "")
                        + " and the signing key were pre-registered before the data were used "
                          "(preregistration.json).")
    return (
        (f"Pre-processing: {len(raw_rules)} public plausibility rules drop rows; " if raw_rules
         else "Pre-processing: ")
        + ("every value is clipped and binned with bounds and edges from the spec, never from the data. "
           if not budget.get("edges") else
           "every value is clipped and binned with bounds from the spec, and with edges from the spec or, for "
           f"{_edges_names(budget['edges'])}, drawn under DP as quantiles of the data (epsilon "
           f"{_show(budget['edges']['epsilon'])} in the total). ")
        + "Hyperparameter tuning: the binning of each column, the generator's hyperparameters and the "
        + ("projection's min_count are those of one configuration drawn uniformly (independently of "
           "the data) before the generator's one fit; the private selection then only draws new "
           "samples of that model (its privacy loss is the factor "
           f"{_show(budget['selection']['factor'])} on the acceptance criteria in the total)" if _resample(budget) else
           "projection's min_count are chosen by the private selection, which draws a configuration "
           "uniformly for each candidate; its privacy loss is accounted (the factor "
           f"{_show(budget['selection']['factor'])} in the total)")
        + ". The thresholds and epsilons were fixed in "
        "the spec. The configurations may first be narrowed by a sweep on similar public data "
        "(dpbundle sweep), which reads no confidential record and so costs no privacy loss on the "
        "registry"
        + ("; this release's stop probability was derived from that sweep's acceptance estimates."
           if source == "auto" else ".")
        + prereg_words)


def _mechanisms(f: RegistryFacts, c: _Common) -> str:
    budget, gen, records = f.budget, c.gen, c.records
    mechs: dict[str, list[str]] = {}
    for row in f.criteria:
        mechs.setdefault(row.get("mechanism", "?"), []).append(row["id"])
    crit_words = "; ".join(f"{_MECHANISM_WORDS.get(m, m)} for {_join(ids)}" for m, ids in mechs.items())
    gen_cfg = f.configuration.get("generator") or {}
    rec_words = (f" Number of records: {records.get('mechanism')}; resize: {records.get('resize')}."
                 if c.dp_count else "")
    return (
        f"Generator {c.gen_name}"
        + (f" ({_params(gen_cfg)})" if _params(gen_cfg) or c.edition == 1 else "")
        + f", parts: {_generation_parts(gen) or _gen_budget(gen)}. "
        f"Acceptance criteria: {crit_words}. Selection: {budget['selection']['method']}.{rec_words} "
        f"Implementation: dpbundle {f.dpbundle_version} on OpenDP {budget.get('opendp_version')}. Every noise draw "
        "comes from OpenDP's samplers (exact arithmetic, the operating system's CSPRNG), not from "
        "floating-point samplers; the " + ("epsilons and rhos" if _zcdp(budget) else "epsilons")
        + " handed to OpenDP as floats add up, in exact rational "
        "arithmetic, to at most the declared decimals, and noise scales are rounded up. Timing: the "
        "deployment is non-interactive, and the bundle gives only the day it was written, so neither "
        "the run time nor the number of candidates tried is disclosed. Access control: the registry and the private "
        "transcript of every DP output (a file readable by the curator only) stay inside the enclave; "
        "the bundle publishes the transcript's salted SHA-256 commitment. The manifest of every file's "
        f"SHA-256 is signed with Ed25519 (key fingerprint {f.fingerprint}).")


def _justification(c: _Common) -> str:
    privacy, min_count = c.privacy, c.min_count
    just = [f"{e['id']} ({_threshold_words(e, c.rows.get(e['id']), c.edition)}, epsilon {_show(e['epsilon'])})"
            for e in c.acceptance]
    return (
        "The data users' needs are the acceptance criteria of the spec, each with the largest error the "
        "stakeholders accept and the epsilon its DP check may spend: " + "; ".join(just) + ". "
        + (f"The generator's rho ({_show(privacy['rho_generation'])}), the delta ({privacy['delta']:g}) "
           if "rho_generation" in privacy else f"The generator's epsilon ({_show(privacy['epsilon_generation'])}) ")
        + f"and the cap "
        f"({_show(privacy['epsilon_cap'])}) are the spec's"
        + ("; the spec acknowledges a total above 20 as a weak guarantee"
           if privacy.get("acknowledge_weak_guarantee") else "")
        + ". "
        + _face_privacy_words(min_count, c.edition)
        + "Validation: the audit (dpbundle audit) re-checks the signature, every hash, every sensitivity "
          "and derived threshold, the budget arithmetic, face privacy, the constraints and the datasheet's "
          "numbers from the public bundle; inside the enclave, with the private transcript, it can replay "
          "the selected candidate byte for byte. "
        + "Method: Hod and Canetti 2024, the universal scheme of Israel's 2024 release of its National "
          "Registry of Live Births, with the soundness fixes listed in dpbundle's design notes.")


def _face_privacy_words(min_count: Any, edition: int) -> str:
    """The justification's face-privacy sentence: min_count 1 asks for none (edition 2)."""
    if min_count is None:
        return ""
    if min_count == 1 and edition >= 2:
        return "Face privacy: none requested (min_count 1: a released record may be unique). "
    return f"Face privacy: no released record is unique (every full record appears at least {min_count} times). "


def _implementation(f: RegistryFacts, c: _Common) -> dict:
    return {
        "preprocessing_and_hyperparameter_tuning": _tuning(f),
        "mechanisms": _mechanisms(f, c),
        "justification": _justification(c),
    }


def _administrative(f: RegistryFacts, c: _Common) -> dict:
    version, fingerprint = f.dpbundle_version, f.fingerprint
    return {
        "sources": ("The bundle's datasheet (README.pdf, README.html) and its files. Contact: "
                    f"{c.release.get('contact', '')}. Method: https://arxiv.org/abs/2405.00267; private "
                    "selection: https://arxiv.org/abs/1811.07971."),
        "notes": (("SIMULATED DATA: made from a simulated registry for demonstration; do not submit it as a real "
                   "deployment. " if c.simulated else "")
                  + f"Generated by dpbundle {version} from the bundle's public files on {f.created} (configuration "
                  f"{f.configuration_id}). Verify the bundle with: dpbundle audit BUNDLE --pubkey {fingerprint}. "
                  "Region and sector are not part of the release spec: fill them in before submitting."),
        "registry_authors": [c.publisher],
    }


# --------------------------------------------------------------------------------- YAML

class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings as literal blocks (the registry refuses folded '>')."""


def _str(dumper: yaml.SafeDumper, text: str):
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _str)

_HEADER = ("# OpenDP Deployments Registry entry (https://registry.opendp.org), tier 3, written by dpbundle\n"
           "# from this bundle's public files; fields follow the registry's schema\n"
           "# (opendp/deployments-registry-data, schemas/deployments-schema.yaml).\n")


def entry_yaml(doc: dict) -> bytes:
    """The entry as the bundle's YAML bytes (UTF-8, the header comment, block style); reading it
    back gives ``doc``. The release validates ``doc`` against ``schemas/registry-entry.schema.json``
    first; the audit renders the entry again from the bundle's files and compares the bytes."""
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False,
                     width=100)
    if yaml.safe_load(text) != doc:  # pragma: no cover - a dumper bug, never a user error
        raise RegistryEntryError(f"{REGISTRY_ENTRY}: the YAML text does not read back as the entry")
    return (_HEADER + text).encode("utf-8")
