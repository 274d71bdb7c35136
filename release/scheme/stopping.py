"""When the private selection stops: the stop probability and what it costs in utility.

The private selection (release/scheme/selection.py, mechanisms/private_selection.py) runs attempts until
one passes; after each failed attempt it stops (releasing nothing) with probability gamma (the
spec's ``stop_probability``, or ``--stop-probability``), drawn exactly.
Its privacy cost is 2 x one attempt's epsilon whatever gamma is (Liu & Talwar 2019, Thm 3.1
with a known threshold), so gamma is a utility choice: gamma = 0 may run for ever on data where
nothing passes; gamma > 0 ends every run, at the price of a chance of releasing nothing.

With a pass probability p per attempt (configurations drawn uniformly from a list, p the mean of
their acceptance on public data):

    P(nothing) = sum_k (1 - p)^(k+1) gamma (1 - gamma)^k = (1 - p) gamma / (p + gamma - p gamma)
    E[attempts] = 1 / (p + gamma - p gamma)

and for a target chance q of releasing nothing, solving P(nothing) = q:

    gamma = q p / ((1 - p) (1 - q)).

``auto`` uses the lower ends of the sweep's confidence intervals for p (the real data may be
harder than the public data), so the printed chance is an estimate, not a promise.

Interrupting a run (Ctrl-C) is not a random stop: whoever interrupts chooses when, while
watching it, so an interrupted run is outside the selection's guarantee; its whole budget stays
recorded as spent in the ledger.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AUTO_NOTHING_CHANCE", "MAX_AUTO_STOP", "LOW_ACCEPTANCE", "StopPlan", "nothing_chance",
           "expected_attempts", "stop_for", "plan_stop"]

AUTO_NOTHING_CHANCE = 0.05   # target chance of releasing nothing for --stop-probability auto
MAX_AUTO_STOP = 0.5
LOW_ACCEPTANCE = 0.10        # below this mean acceptance, release warns before spending


def nothing_chance(p: float, gamma: float) -> float:
    """P(the selection stops before a candidate passes) = (1 - p) gamma / (p + gamma - p gamma)."""
    denom = p + gamma - p * gamma
    return 1.0 if denom <= 0 else (1.0 - p) * gamma / denom


def expected_attempts(p: float, gamma: float) -> float:
    """E[number of attempts] = 1 / (p + gamma - p gamma) (inf if both are 0)."""
    denom = p + gamma - p * gamma
    return float("inf") if denom <= 0 else 1.0 / denom


def stop_for(p: float, target: float = AUTO_NOTHING_CHANCE) -> float:
    """gamma with nothing_chance(p, gamma) = target: q p / ((1 - p)(1 - q)), capped at
    MAX_AUTO_STOP (p = 1 needs no stop; any gamma gives chance 0)."""
    if not 0 < target < 1:
        raise ValueError(f"the target chance of releasing nothing must be in (0, 1), got {target}")
    if p <= 0:
        return 0.0
    if p >= 1:
        return MAX_AUTO_STOP
    return min(target * p / ((1.0 - p) * (1.0 - target)), MAX_AUTO_STOP)


@dataclass(frozen=True)
class StopPlan:
    """The stop probability chosen for a release and the arithmetic behind it (public: it is
    derived from the public sweep and printed)."""

    gamma: float
    p_mean: float | None     # mean acceptance of the configuration list (None: no estimate)
    p_low: float | None      # mean lower confidence bound (used by auto)
    source: str              # "spec", "option" or "auto"

    def lines(self) -> list[str]:
        """Sentences for the console."""
        out = [f"stop probability {self.gamma:.4g} ({self.source})"]
        if self.p_mean is None:
            out.append("no sweep estimate of the acceptance: the number of attempts and the chance "
                       "of releasing nothing are unknown")
            return out
        for label, p in (("sweep estimate", self.p_mean), ("lower bound", self.p_low)):
            if p is None:
                continue
            out.append(f"with the {label} p = {p:.3g} per attempt: chance of releasing nothing "
                       f"{nothing_chance(p, self.gamma):.3g} = (1 - p) g / (p + g - p g), expected "
                       f"attempts {expected_attempts(p, self.gamma):.3g}")
        out.append("these p come from the sweep that chose the list (in-sample): on other data "
                   "acceptance can be lower (the built-in births list: 57% instead of 87% on a harder "
                   "doubled half of its sample), and the chance of releasing nothing higher")
        return out


def plan_stop(option: str | None, spec_gamma: float, acceptances: list[float] | None,
              lows: list[float | None] | None) -> StopPlan:
    """The stop probability from ``--stop-probability`` (None: the spec's; a number; or
    "auto") and the configuration list's sweep estimates. Raises ValueError with a message for
    the user when "auto" has no estimate or the number is out of [0, 1)."""
    p_mean = sum(acceptances) / len(acceptances) if acceptances else None
    low_vals = [x for x in (lows or []) if isinstance(x, (int, float))]
    p_low = sum(low_vals) / len(low_vals) if acceptances and len(low_vals) == len(acceptances) else None
    if option is None:
        return StopPlan(spec_gamma, p_mean, p_low, "spec")
    if option.strip().lower() == "auto":
        if p_mean is None:
            raise ValueError("--stop-probability auto needs sweep estimates: pass --configs with the "
                             "narrowed.yaml of `dpbundle sweep` (its acceptance figures)")
        p = p_low if p_low is not None else p_mean
        return StopPlan(stop_for(p), p_mean, p_low,
                        f"auto: chance of releasing nothing {AUTO_NOTHING_CHANCE:g} at p = {p:.3g}")
    try:
        gamma = float(option)
    except ValueError:
        raise ValueError(f"--stop-probability: expected a number in [0, 1) or 'auto', got {option!r}") from None
    if not 0 <= gamma < 1:
        raise ValueError(f"--stop-probability: expected a number in [0, 1) or 'auto', got {option!r}")
    return StopPlan(gamma, p_mean, p_low, "option")
