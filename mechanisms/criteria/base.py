"""Common machinery of the acceptance criteria: context, result row, base class, registry.

A criterion compares the transformed real data T (private) with a candidate C (public once
released) and releases one number with pure epsilon-DP under *bounded* neighbours (change one
record of T; n and C are public and fixed). Every criterion type implements

* ``value(ctx)``        the exact metric f(T, C) (private; recorded only in the transcript),
* ``sensitivity(ctx)``  max |f(T, C) - f(T', C)| over neighbours T ~ T', computed from public
                        information only (n, C, the spec) -- never from T,
* ``evaluate(ctx, rand)`` the DP release ``rand.laplace(value, sensitivity, epsilon,
                        purpose=f"criterion {id}")`` and its :class:`CriterionResult` row.

``sensitivity`` methods read ``ctx.synth`` and ``ctx.spec`` only; ``n`` is taken from C
(``len(T) == len(C)`` is checked in ``value``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from dpbundle.mechanisms.coding import Coded
    from dpbundle.mechanisms.noise import Randomness

__all__ = [
    "EvalContext",
    "CriterionResult",
    "Criterion",
    "CriterionError",
    "register",
    "make_criterion",
    "criterion_types",
    "laplace_quantile",
    "group_keys",
    "alternative_of",
]


class CriterionError(ValueError):
    """An acceptance entry of the spec is unusable (message names the entry and the field)."""


@dataclass(frozen=True)
class EvalContext:
    """What a criterion sees: T (private), C (public candidate), the validated spec dict.

    ``released`` collects *DP outputs* of criteria already evaluated on this context (public
    post-processing material, e.g. the DP regression coefficients that the MAE criterion uses
    as its "real" regression). It starts empty; use one context per candidate.

    ``alternatives`` maps a released column to the id of the alternative the configuration
    chose for it (public; needed by ``group_bins.<col>.per_alternative``). A column missing
    from it resolves to its only alternative when the spec declares one.
    """

    real: "Coded"
    synth: "Coded"
    spec: dict
    released: dict = field(default_factory=dict)
    alternatives: dict = field(default_factory=dict)

    def alternative(self, column: str) -> str | None:
        """The configuration's alternative of ``column`` (None when it cannot be told)."""
        return alternative_of(self.spec, column, self.alternatives)

    @property
    def n(self) -> int:
        """Public number of records (taken from C; T has the same size)."""
        return int(self.synth.n)   # (C's n: no need of its rows)


@dataclass
class CriterionResult:
    """One row of metrics.csv / metrics.json."""

    id: str
    type: str
    description: str
    threshold: float
    stakeholder_threshold: float | None
    threshold_inputs: dict | None
    dp_value: float
    passed: bool
    epsilon: float
    sensitivity: float
    sensitivity_inputs: dict
    mechanism: str
    noise_scale: float
    noise_std: float

    def to_dict(self) -> dict:
        """Plain dict (JSON-able when the inputs are)."""
        return asdict(self)


# --------------------------------------------------------------------------- helpers


def alternative_of(spec: dict, column: str, alternatives: dict | None) -> str | None:
    """Alternative id of ``column``: from ``alternatives``, else the spec's only alternative."""
    if alternatives and column in alternatives:
        return str(alternatives[column])
    for col in spec.get("columns", []) or []:
        if isinstance(col, dict) and col.get("name") == column:
            alts = col.get("alternatives") or []
            if len(alts) == 1 and isinstance(alts[0], dict):
                return alts[0].get("id")
    return None


def laplace_quantile(q: float, scale: float) -> float:
    """F^-1(q) of Laplace(0, scale): -b sgn(q-1/2) ln(1 - 2|q - 1/2|)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    return -scale * math.copysign(1.0, q - 0.5) * math.log(1.0 - 2.0 * abs(q - 0.5))


def group_keys(codes: np.ndarray, domain: Sequence[int]) -> tuple[np.ndarray, int]:
    """Mixed-radix cell index of each row over ``domain`` (C order) and the number of cells."""
    size = 1
    for s in domain:
        size *= int(s)
    if size >= 2**62:
        raise OverflowError(f"domain of {size} cells is too large for int64 keys")
    idx = np.zeros(codes.shape[0], dtype=np.int64)
    for j, s in enumerate(domain):
        idx *= int(s)
        idx += codes[:, j]
    return idx, size


def _number(entry: dict, key: str, where: str, *, positive: bool = False,
            default: Any = None) -> float:
    v = entry.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise CriterionError(f"{where}.{key}: expected a finite number, got {v!r}")
    if positive and v <= 0:
        raise CriterionError(f"{where}.{key}: must be > 0, got {v!r}")
    return float(v)


def _column_name(entry: dict, key: str, where: str) -> str:
    """A released column's name in ``entry[key]`` (e.g. ``target``), with a clear error."""
    v = entry.get(key)
    if not isinstance(v, str):
        raise CriterionError(f"{where}.{key}: expected a column name, got {v!r}")
    return v


# --------------------------------------------------------------------------- base class

_REGISTRY: dict[str, type["Criterion"]] = {}


def register(cls: type["Criterion"]) -> type["Criterion"]:
    """Class decorator: make ``cls.type`` available to :func:`make_criterion`."""
    _REGISTRY[cls.type] = cls
    return cls


class Criterion:
    """Base class of the criterion types (see the module docstring for the contract)."""

    type: ClassVar[str] = ""
    mechanism: ClassVar[str] = "laplace"
    summary: ClassVar[str] = ""
    #: spec keys of this type besides id/type/description/threshold/epsilon: name -> help
    parameters: ClassVar[dict[str, str]] = {}

    def __init__(self, entry: dict) -> None:
        if not isinstance(entry, dict):
            raise CriterionError(f"acceptance entry must be a mapping, got {type(entry).__name__}")
        self.entry = dict(entry)
        cid = entry.get("id")
        if not isinstance(cid, str) or not cid:
            raise CriterionError(f"acceptance entry {entry!r}: 'id' must be a non-empty string")
        self.id: str = cid
        self.where = f"acceptance[{cid}]"
        self.description: str = str(entry.get("description", "") or "")
        self.epsilon: float = _number(entry, "epsilon", self.where, positive=True)
        known = {"id", "type", "description", "threshold", "epsilon", *self.parameters}
        unknown = sorted(set(entry) - known)
        if unknown:
            raise CriterionError(
                f"{self.where}: unknown field(s) {unknown} for type {self.type!r}; "
                f"allowed: {sorted(known)}")
        t = entry.get("threshold")
        if isinstance(t, dict):
            if "derive" not in t:
                raise CriterionError(f"{self.where}.threshold: a mapping needs 'derive'")
        elif isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t):
            raise CriterionError(f"{self.where}.threshold: expected a number or "
                                 f"{{derive: ...}}, got {t!r}")
        self._threshold_spec = t

    # ---- threshold

    def threshold(self) -> tuple[float, float | None, dict | None]:
        """(threshold, stakeholder threshold, derivation inputs); plain numbers pass through.

        ``{derive: laplace_false_positive, stakeholder: c0, false_positive: p, ...}``:
        threshold = c0 - F^-1_Laplace(1 - p; scale = Delta_assumed / epsilon), i.e. a metric
        whose true value is c0 passes with probability p only. Delta_assumed is the spec's
        ``assumed_sensitivity`` or the type's :meth:`assumed_sensitivity` of the entry.
        """
        t = self._threshold_spec
        if not isinstance(t, dict):
            return float(t), None, None
        w = f"{self.where}.threshold"
        if t["derive"] != "laplace_false_positive":
            raise CriterionError(f"{w}.derive: unknown derivation {t['derive']!r} "
                                 "(known: laplace_false_positive)")
        c0 = _number(t, "stakeholder", w)
        p = _number(t, "false_positive", w, positive=True)
        if p >= 0.5:
            raise CriterionError(f"{w}.false_positive: must be < 0.5, got {p}")
        inputs: dict[str, Any] = {"derive": "laplace_false_positive", "stakeholder": c0,
                                  "false_positive": p, "epsilon": self.epsilon}
        if "assumed_sensitivity" in t:
            delta = _number(t, "assumed_sensitivity", w, positive=True)
        else:
            delta, extra = self.assumed_sensitivity(t)
            inputs.update(extra)
        scale = delta / self.epsilon
        q = laplace_quantile(1.0 - p, scale)
        inputs.update({"assumed_sensitivity": delta, "scale": scale, "laplace_quantile": q,
                       "formula": "stakeholder - F^-1_Laplace(1 - false_positive; "
                                  "assumed_sensitivity / epsilon)"})
        return c0 - q, c0, inputs

    def metric_range(self) -> tuple[float, float]:
        """[lo, hi]: the values the exact metric f(T, C) can take (types override). A threshold
        t is attainable when lo < t <= hi: at t <= lo no candidate's true value is below t (a
        release could pass only by noise, and would usually loop until the budget ends), at
        t > hi every candidate passes (the criterion tests nothing)."""
        return 0.0, math.inf

    def assumed_sensitivity(self, t: dict) -> tuple[float, dict]:
        """Delta_assumed for a derived threshold (types override; default: unsupported)."""
        raise CriterionError(f"{self.where}.threshold: type {self.type!r} needs "
                             "'assumed_sensitivity' to derive a threshold")

    # ---- to implement

    def value(self, ctx: EvalContext) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def sensitivity(self, ctx: EvalContext) -> tuple[float, dict]:  # pragma: no cover
        raise NotImplementedError

    # ---- release

    def purpose(self) -> str:
        return f"criterion {self.id}"

    def _check(self, ctx: EvalContext) -> None:
        real, synth = (ctx.real.n, len(ctx.real.columns)), (ctx.synth.n, len(ctx.synth.columns))
        if real != synth:
            raise ValueError(f"{self.where}: T has shape {real}, C has {synth}; they must have "
                             "the same n and columns")
        if tuple(c.name for c in ctx.real.columns) != tuple(c.name for c in ctx.synth.columns):
            raise ValueError(f"{self.where}: T and C have different columns")

    def _result(self, dp_value: float, sens: float, inputs: dict, scale: float) -> CriterionResult:
        thr, stake, tin = self.threshold()
        return CriterionResult(
            id=self.id, type=self.type, description=self.description, threshold=float(thr),
            stakeholder_threshold=stake, threshold_inputs=tin, dp_value=float(dp_value),
            passed=bool(dp_value < thr), epsilon=self.epsilon, sensitivity=float(sens),
            sensitivity_inputs=inputs, mechanism=self.mechanism, noise_scale=float(scale),
            noise_std=math.sqrt(2.0) * float(scale))

    def evaluate(self, ctx: EvalContext, rand: "Randomness") -> CriterionResult:
        """Laplace release of :meth:`value` calibrated to :meth:`sensitivity`."""
        from dpbundle.mechanisms.noise import calibrated_laplace_scale

        self._check(ctx)
        sens, inputs = self.sensitivity(ctx)
        true = float(self.value(ctx))
        noisy = float(rand.laplace(true, sensitivity=sens, epsilon=self.epsilon,
                                   purpose=self.purpose()))
        scale = calibrated_laplace_scale(sens, self.epsilon, vector=False)
        return self._result(noisy, sens, inputs, scale)


def make_criterion(spec_entry: dict) -> Criterion:
    """Build the criterion of one ``acceptance`` entry of the spec."""
    if not isinstance(spec_entry, dict):
        raise CriterionError(f"acceptance entry must be a mapping, got {spec_entry!r}")
    t = spec_entry.get("type")
    if t not in _REGISTRY:
        raise CriterionError(f"acceptance[{spec_entry.get('id')}].type: unknown criterion type "
                             f"{t!r}; known: {sorted(_REGISTRY)}")
    return _REGISTRY[t](spec_entry)


def criterion_types() -> dict[str, dict]:
    """type -> {"summary", "mechanism", "parameters": {name: help}} for every registered type."""
    return {t: {"summary": c.summary, "mechanism": c.mechanism, "parameters": dict(c.parameters)}
            for t, c in sorted(_REGISTRY.items())}
