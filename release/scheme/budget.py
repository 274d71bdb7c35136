"""The privacy budget of a release, as published in budget.json.

Every epsilon the spec declares appears in budget.json exactly as declared (0.8, never
0.7999999999999999): sums are exact (:mod:`dpbundle.mechanisms.exact`) and written as the float
whose shortest text is the exact decimal. The generator's parts are the one place where floats
computed for OpenDP enter: each part is published as its share of the declared generation
epsilon, a decimal (the parts add up to it exactly), beside ``epsilon_opendp``, the float handed
to OpenDP (within one unit in the last place of it; the floats' exact binary sum is at most the
generation epsilon). See :func:`generation_parts`.
"""
from __future__ import annotations

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.generators import Generator
from dpbundle.templates.metadata.budget_words import budget_words, generation_parts

from dpbundle.release.spec.load import SELECTION_FACTOR, Spec
from dpbundle.release.scheme.stopping import StopPlan

NEIGHBOURING = budget_words("declared_public", None, False)["neighbouring"]  # of bundles without `records`


def opendp_version() -> str:
    from importlib.metadata import version

    return version("opendp")


def records_block(spec: Spec, released_n: int) -> dict:
    """budget.json's ``records``: the policy for n, its epsilon and what is protected (the words
    from :func:`dpbundle.templates.metadata.budget_words.budget_words`, which the audit re-derives)."""
    policy = spec.records_policy
    words = _words(spec)
    block = {"policy": policy, "epsilon": spec.epsilon_count, "released_n": int(released_n),
             "statement": words["records.statement"]}
    if policy == "dp_count":
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        block.update({"mechanism": words["records.mechanism"], "sensitivity": 1,
                      "noise_scale": calibrated_laplace_scale(1, spec.epsilon_count, integer=True),
                      "resize": words["records.resize"]})
    return block


def edges_block(spec: Spec) -> dict | None:
    """budget.json's ``edges``: every ``dp_edges`` alternative's draws (quantile as OpenDP's
    fraction, sensitivity, epsilon, noise scale) and drawn edges; None without them. ``spec`` is
    the resolved spec (:meth:`Spec.with_edges`)."""
    from dpbundle.mechanisms.edges import MECHANISM, alpha_fraction, candidate_grid, score_sensitivity
    from dpbundle.mechanisms.noise import calibrated_exponential_scale

    alternatives = []
    for col in spec.model.columns:
        for alt in col.alternatives:
            if alt.dp_edges is None:
                continue
            k = int(alt.dp_edges.bins)
            eps_j = exact.even_split(alt.dp_edges.epsilon, k - 1)
            draws = []
            for j in range(1, k):
                num, den = alpha_fraction(j / k)
                sens = score_sensitivity((num, den))
                draws.append({"quantile": [num, den], "sensitivity": sens, "epsilon": eps_j,
                              "noise_scale": calibrated_exponential_scale(sens, eps_j)})
            alternatives.append({"column": col.name, "alternative": alt.id, "bins": k,
                                 "epsilon": float(exact.dec(alt.dp_edges.epsilon)),
                                 "step": alt.dp_edges.step if alt.dp_edges.step is not None else 1,
                                 "candidates": len(candidate_grid(alt.clip, alt.dp_edges.step)),
                                 "edges": [float(e) for e in alt.edges], "draws": draws})
    if not alternatives:
        return None
    return {"epsilon": float(spec.epsilon_edges), "mechanism": MECHANISM, "alternatives": alternatives}


def _words(spec: Spec) -> dict:
    """budget.json's statements for this spec (templates/metadata/budget_words.py)."""
    return budget_words(spec.records_policy, spec.model.release.unit_of_privacy, spec.publish_model,
                        spec.retries)


def build_budget(spec: Spec, generator: Generator, total_opendp: float, released_n: int,
                 stop: "StopPlan | None" = None) -> dict:
    """Every epsilon spent and how the total is composed: total = eps_count (dp_count policy)
    + eps_edges (``dp_edges`` draws; ``spec`` resolved) + SELECTION_FACTOR x (eps_gen + sum of criterion epsilons) + pre-selection epsilons; with
    ``retries: resample``, eps_count + eps_gen + SELECTION_FACTOR x eps_eval + pre-selection
    (``per_iteration_epsilon`` is then the candidate's eps_eval and ``selection.retries`` says so).
    ``stop``: the stop probability used and where it came from (default: the spec's)."""
    gamma = spec.stop_probability if stop is None else stop.gamma
    source = "spec" if stop is None else stop.source.split(":", 1)[0]
    acceptance = spec.model.acceptance
    criteria = [{"id": c.id, "epsilon": float(c.epsilon)} for c in acceptance]
    eps_eval = exact.total(c.epsilon for c in acceptance)
    if spec.definition == "zcdp":
        rho_gen = exact.dec(spec.rho_generation)
        generation = {"type": generator.type, "rho": float(rho_gen),
                      "parts": generation_parts(generator.budget_parts(), rho_gen, key="rho")}
        per_iteration = float(eps_eval)
    else:
        eps_gen = exact.dec(generator.epsilon)
        generation = {"type": generator.type, "epsilon": float(eps_gen),
                      "parts": generation_parts(generator.budget_parts(), eps_gen)}
        per_iteration = float(eps_eval if spec.retries == "resample" else eps_gen + eps_eval)
    words = _words(spec)
    return ({"definition": "zcdp", "zcdp": zcdp_block(spec)} if spec.definition == "zcdp" else {}) | {
        "unit_of_privacy": words["unit_of_privacy"],
        "neighbouring": words["neighbouring"],
        "input_metric": words["input_metric"],
        "records": records_block(spec, released_n),
    } | ({"edges": edges_block(spec)} if spec.epsilon_edges else {}) | {
        "generation": generation,
        "evaluation": {"epsilon": float(eps_eval), "criteria": criteria},
        "pre_selection": [{"purpose": p.purpose, "epsilon": float(exact.dec(p.epsilon))}
                          for p in spec.model.privacy.pre_selection_items],
        "per_iteration_epsilon": per_iteration,
        "selection": {
            "method": words["selection.method"],
            "factor": SELECTION_FACTOR,
            "stop_probability": gamma,
            "stop_probability_source": source,
            "threshold": 1.0,
        } | ({"retries": "resample"} if spec.retries == "resample" else {}),
        "total_epsilon": spec.total_epsilon,
        "total_epsilon_opendp": float(total_opendp),
        "epsilon_cap": spec.epsilon_cap,
        "opendp_version": opendp_version(),
    } | ({"published_model": words["published_model"]} if spec.publish_model else {})


def zcdp_block(spec: Spec) -> dict:
    """budget.json's ``zcdp`` block: the delta, every rho part and the total (exact decimals of
    :func:`dpbundle.release.spec.model.zcdp_parts`, written as floats) and the conversion."""
    from dpbundle.mechanisms import zcdp

    parts = spec.zcdp_parts()
    return {"delta": spec.delta, "rho_count": float(parts["count"]), "rho_generation": float(parts["generation"]),
            "rho_selection": float(parts["selection"]), "rho_pre_selection": float(parts["pre_selection"]),
            "total_rho": float(parts["total"]), "conversion": zcdp.CONVERSION}
