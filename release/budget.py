"""The privacy budget of a release, as published in budget.json."""
from __future__ import annotations

import math

from dpbundle.mechanisms.generators import Generator

from .spec import SELECTION_FACTOR, Spec

NEIGHBOURING = "change one record (bounded neighbours; the number of records n is public)"


def opendp_version() -> str:
    from importlib.metadata import version

    return version("opendp")


def build_budget(spec: Spec, generator: Generator, total_opendp: float) -> dict:
    """Every epsilon spent and how the total is composed:
    total = SELECTION_FACTOR x (eps_gen + sum of criterion epsilons) + pre-selection epsilons."""
    criteria = [{"id": c["id"], "epsilon": float(c["epsilon"])} for c in spec.criteria]
    eps_eval = math.fsum(c["epsilon"] for c in criteria)
    per_iteration = generator.epsilon + eps_eval
    return {
        "unit_of_privacy": spec.raw["release"]["unit_of_privacy"],
        "neighbouring": NEIGHBOURING,
        "input_metric": "change_one_distance",
        "generation": {"type": generator.type, "epsilon": float(generator.epsilon),
                       "parts": [{"purpose": p["purpose"], "epsilon": float(p["epsilon"])} for p in generator.budget_parts()]},
        "evaluation": {"epsilon": eps_eval, "criteria": criteria},
        "pre_selection": [{"purpose": p["purpose"], "epsilon": float(p["epsilon"])} for p in spec.pre_selection],
        "per_iteration_epsilon": per_iteration,
        "selection": {
            "method": "private selection with a known threshold (Liu & Talwar 2019), OpenDP make_select_private_candidate",
            "factor": SELECTION_FACTOR,
            "stop_probability": spec.stop_probability,
            "threshold": 1.0,
        },
        "total_epsilon": spec.total_epsilon,
        "total_epsilon_opendp": float(total_opendp),
        "epsilon_cap": spec.epsilon_cap,
        "opendp_version": opendp_version(),
    }
