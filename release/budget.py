"""The privacy budget of a release, as published in budget.json."""
from __future__ import annotations

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.generators import Generator
from dpbundle.mechanisms.records import guarantee_text

from .spec import SELECTION_FACTOR, Spec
from .stopping import StopPlan

NEIGHBOURING = guarantee_text("declared_public")["neighbouring"]  # of bundles without `records`


def opendp_version() -> str:
    from importlib.metadata import version

    return version("opendp")


def records_block(spec: Spec, released_n: int) -> dict:
    """budget.json's ``records``: the policy for n, its epsilon and what is protected."""
    policy = spec.records_policy
    text = guarantee_text(policy)
    block = {"policy": policy, "epsilon": spec.epsilon_count, "released_n": int(released_n),
             "statement": text["n_statement"]}
    if policy == "dp_count":
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        block.update({
            "mechanism": "discrete Laplace (OpenDP make_laplace on i64) of the count of plausible "
                         "records; m = max(count + noise, 1)",
            "sensitivity": 1,
            "noise_scale": calibrated_laplace_scale(1, spec.epsilon_count, integer=True),
            "resize": "uniform subsample of the plausible records, or all of them plus uniform "
                      "pad records, shuffled (mechanisms/records.py)"})
    return block


PUBLISHED_MODEL_NOTE = {
    "file": "model.json",
    "extra_epsilon": 0,
    "why": "the model is the output of the generator's DP measurement (the generation part above), "
           "which the selection already accounts for; publishing it is post-processing",
}


def build_budget(spec: Spec, generator: Generator, total_opendp: float, released_n: int,
                 stop: "StopPlan | None" = None) -> dict:
    """Every epsilon spent and how the total is composed: total = eps_count (dp_count policy)
    + SELECTION_FACTOR x (eps_gen + sum of criterion epsilons) + pre-selection epsilons.
    ``stop``: the stop probability used and where it came from (default: the spec's)."""
    gamma = spec.stop_probability if stop is None else stop.gamma
    source = "spec" if stop is None else stop.source.split(":", 1)[0]
    criteria = [{"id": c["id"], "epsilon": float(c["epsilon"])} for c in spec.criteria]
    eps_eval = exact.total(c["epsilon"] for c in spec.criteria)
    per_iteration = float(exact.dec(generator.epsilon) + eps_eval)
    return {
        "unit_of_privacy": spec.raw["release"]["unit_of_privacy"],
        "neighbouring": guarantee_text(spec.records_policy)["neighbouring"],
        "input_metric": "change_one_distance",
        "records": records_block(spec, released_n),
        "generation": {"type": generator.type, "epsilon": float(generator.epsilon),
                       "parts": [{"purpose": p["purpose"], "epsilon": float(p["epsilon"])} for p in generator.budget_parts()]},
        "evaluation": {"epsilon": float(eps_eval), "criteria": criteria},
        "pre_selection": [{"purpose": p["purpose"], "epsilon": float(p["epsilon"])} for p in spec.pre_selection],
        "per_iteration_epsilon": per_iteration,
        "selection": {
            "method": "private selection with a known threshold (Liu & Talwar 2019, Algorithm 1): "
                      "after each candidate that fails, stop with the stop probability (exact "
                      "Bernoulli draws from OpenDP); the total is checked against OpenDP "
                      "make_select_private_candidate's privacy map",
            "factor": SELECTION_FACTOR,
            "stop_probability": gamma,
            "stop_probability_source": source,
            "threshold": 1.0,
        },
        "total_epsilon": spec.total_epsilon,
        "total_epsilon_opendp": float(total_opendp),
        "epsilon_cap": spec.epsilon_cap,
        "opendp_version": opendp_version(),
    } | ({"published_model": PUBLISHED_MODEL_NOTE} if spec.publish_model else {})
