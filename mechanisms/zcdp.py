"""Zero-concentrated DP (zCDP) accounting: how a release's parts compose in rho, and the
(epsilon, delta) guarantee a total rho implies. Shared by the release and the audit (which
re-derives every number of a zCDP bundle's budget.json with these functions).

Definitions (Bun & Steinke, "Concentrated differential privacy: simplifications, extensions,
and lower bounds", TCC 2016):

* M is rho-zCDP if for all neighbours D, D' and every Renyi order a > 1,
  D_a(M(D) || M(D')) <= rho a.
* Prop. 1.4: an epsilon-DP (pure) mechanism is (epsilon^2 / 2)-zCDP. dpbundle's pure parts (the
  DP count of records, the criteria's Laplace draws, the private selection over them) enter a
  zCDP total this way.
* Lemma 2.3: adaptive composition adds rho.
* Conversion: rho-zCDP implies (epsilon, delta)-DP for every delta > 0; dpbundle states the
  epsilon of OpenDP's conversion (Canonne, Kamath & Steinke 2020, section 2.3; tighter than
  Bun & Steinke's epsilon = rho + 2 sqrt(rho ln(1/delta)), Prop. 1.3): at delta = 1e-9,
  rho = 0.01497 gives epsilon 1.
* Group privacy: rho-zCDP for one record gives k^2 rho for k records (Prop. 1.9; stated in the
  registry entry).

A zCDP release (``privacy.definition: zcdp``, selection ``retries: resample``):

    total rho = eps_count^2 / 2 + rho_generation + (2 eps_eval)^2 / 2 + sum(eps_pre^2 / 2)

where the generator is fitted once (rho_generation, Gaussian measurements) and Liu & Talwar's
known-threshold selection over candidates that read the data only through the eps_eval-DP
criteria is 2 eps_eval-DP (pure), hence (2 eps_eval)^2 / 2-zCDP. Each pure part is converted on
its own (the sum of squares is at most the square of the sum).

Every rho here is an exact :class:`fractions.Fraction` of the declared decimals; the epsilon of
the conversion is OpenDP's float, shown to people rounded UP to :data:`SIGNIFICANT` significant
digits (so "at most epsilon" stays true).
"""
from __future__ import annotations

from fractions import Fraction

from . import exact

__all__ = ["pure_to_rho", "release_rho", "epsilon_at_delta", "shown_epsilon", "SIGNIFICANT",
           "CONVERSION"]

SIGNIFICANT = 4
CONVERSION = ("OpenDP make_zCDP_to_approxDP (Canonne, Kamath & Steinke 2020, section 2.3): "
              "rho-zCDP implies (epsilon, delta)-DP")


def pure_to_rho(epsilon: Fraction | float | int | str) -> Fraction:
    """rho = epsilon^2 / 2 of an epsilon-DP part (Bun & Steinke 2016, Prop. 1.4), exactly."""
    e = exact.dec(epsilon) if not isinstance(epsilon, Fraction) else epsilon
    if e < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon!r}")
    return e * e / 2


def release_rho(eps_count: Fraction, rho_generation: Fraction, eps_eval: Fraction,
                eps_pre: list[Fraction] | tuple[Fraction, ...] = ()) -> dict[str, Fraction]:
    """The parts of a zCDP release's total rho and their sum (module docstring), exactly."""
    parts = {"count": pure_to_rho(eps_count), "generation": Fraction(rho_generation),
             "selection": pure_to_rho(2 * Fraction(eps_eval)),
             "pre_selection": sum((pure_to_rho(e) for e in eps_pre), Fraction(0))}
    parts["total"] = sum(parts.values(), Fraction(0))
    return parts


def epsilon_at_delta(rho: Fraction | float, delta: float) -> float:
    """The epsilon of the (epsilon, delta)-DP guarantee that rho-zCDP implies, from OpenDP's
    ``make_zCDP_to_approxDP`` (its privacy curve at ``delta``: Canonne, Kamath & Steinke 2020,
    section 2.3, as proved in OpenDP's ``cdp_epsilon``): a user measurement whose map is
    ``d -> rho d^2`` (rho rounded up to a float) is converted and its curve read at delta.
    ValueError unless rho >= 0 and 0 < delta < 1."""
    r = Fraction(rho) if not isinstance(rho, Fraction) else rho
    if r < 0 or isinstance(delta, bool) or not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ValueError(f"need rho >= 0 and 0 < delta < 1, got rho={rho!r}, delta={delta!r}")
    if r == 0:
        return 0.0
    import opendp.prelude as dp

    dp.enable_features("contrib", "honest-but-curious")
    rho_f = exact.float_up(r)
    meas = dp.m.make_user_measurement(dp.atom_domain(T=bool), dp.change_one_distance(),
                                      dp.zero_concentrated_divergence(), lambda _x: 0.0,
                                      lambda d: rho_f * d * d, TO="f64")
    return float(dp.c.make_zCDP_to_approxDP(meas).map(1).epsilon(float(delta)))


def shown_epsilon(epsilon: float) -> str:
    """An epsilon of the conversion for people: rounded UP to :data:`SIGNIFICANT` significant
    digits ("at most" stays true)."""
    import decimal

    d = decimal.Decimal(repr(float(epsilon)))
    if d == 0:
        return "0"
    q = decimal.Decimal(1).scaleb(d.adjusted() - SIGNIFICANT + 1)
    return format(d.quantize(q, rounding=decimal.ROUND_CEILING).normalize(), "f")

