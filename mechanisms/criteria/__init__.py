"""Acceptance criteria: spec-parameterised metric types with DP (Laplace) releases.

``make_criterion(entry)`` builds a criterion from one ``acceptance`` entry of the spec;
``criterion_types()`` lists the registered types. Types: ``kway_marginals``,
``smoothed_ratio``, ``conditional_means``, ``regression_coefficients``,
``regression_mae_difference``, ``classification``, ``quantile``, ``faithfulness`` (one
module each).
"""
from __future__ import annotations

from .base import (Criterion, CriterionError, CriterionResult, EvalContext, criterion_types,
                   make_criterion)
from . import (classification, condmeans, faithfulness, kway, mae, quantile,  # noqa: F401
               ratio, regression)  # (registration)

__all__ = ["make_criterion", "EvalContext", "CriterionResult", "Criterion", "CriterionError",
           "criterion_types"]
