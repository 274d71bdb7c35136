"""Generator protocol and registry.

A *generator* is a pure-DP mechanism (epsilon fixed at construction) that fits a *model* on
integer-coded data over a public domain; the model samples synthetic codes (post-processing,
with a caller-supplied recorded ``np.random.Generator``). Types are registered by name and
imported lazily, so optional generators (AIM/MST) cost nothing when their extra is missing.
"""
from __future__ import annotations

import importlib
import inspect
import math
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from . import exact
from .noise import Randomness

__all__ = [
    "Generator",
    "Model",
    "make_generator",
    "generator_types",
    "register_generator",
    "check_codes",
    "even_split",
    "declared_share",
    "constructor_grid_problems",
]


@runtime_checkable
class Model(Protocol):
    """A fitted model; sampling is post-processing."""

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """int64 array (m, d) of codes within the fitted domain."""
        ...


@runtime_checkable
class Generator(Protocol):
    """A pure-DP generator: ``fit`` is ``epsilon``-DP under change-one-record neighbours."""

    type: str
    epsilon: float

    def hyperparameters(self) -> dict: ...

    def privacy_map(self, d_in: int) -> float: ...

    def budget_parts(self) -> list[dict]: ...

    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness) -> Model: ...


# type -> "module:attribute" (lazy) or the class itself
_REGISTRY: dict[str, str | type] = {
    "privbayes": "dpbundle.mechanisms.privbayes:PrivBayes",
    "crosstab": "dpbundle.mechanisms.marginals:NoisyCrossTab",
    "marginals": "dpbundle.mechanisms.marginals:NoisyMarginals",
    "aim": "dpbundle.mechanisms.mbi:AIM",
    "mst": "dpbundle.mechanisms.mbi:MST",
    "privsyn": "dpbundle.mechanisms.privsyn:PrivSyn",
    "mst_pure": "dpbundle.mechanisms.mst:PureMST",
    "aim_pure": "dpbundle.mechanisms.aim:AdaptiveMarginals",
}


def register_generator(type: str, target: str | type) -> None:
    """Register a generator class (or ``"module:Class"`` for a lazy import) under ``type``."""
    if not isinstance(type, str) or not type:
        raise ValueError("generator type must be a non-empty string")
    if isinstance(target, str) and ":" not in target:
        raise ValueError(f"lazy generator target must be 'module:Class', got {target!r}")
    _REGISTRY[type] = target


def _resolve(type: str) -> tuple[type | None, str]:
    """(class, "") or (None, reason it is unavailable)."""
    target = _REGISTRY[type]
    if not isinstance(target, str):
        cls = target
    else:
        mod_name, _, attr = target.partition(":")
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            return None, f"cannot import {mod_name}: {e}"
        cls = getattr(mod, attr, None)
        if cls is None:
            return None, f"{mod_name} has no {attr}"
    avail = getattr(cls, "availability", None)
    if callable(avail):
        ok, reason = avail()
        if not ok:
            return None, reason
    return cls, ""


def _hyperparameter_names(cls: type) -> list[str]:
    names = getattr(cls, "HYPERPARAMETERS", None)
    if names is not None:
        return list(names)
    sig = inspect.signature(cls.__init__)
    return [
        p.name for p in sig.parameters.values()
        if p.name not in ("self", "epsilon")
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]


def generator_types() -> dict[str, dict]:
    """type -> {"available": bool, "reason": str, "hyperparameters": [names]}."""
    out: dict[str, dict] = {}
    for t in sorted(_REGISTRY):
        cls, reason = _resolve(t)
        if cls is None:
            target = _REGISTRY[t]
            hp: list[str] = []
            # the unavailable class may still be importable (e.g. mbi without its extra)
            if isinstance(target, str):
                try:
                    mod_name, _, attr = target.partition(":")
                    c = getattr(importlib.import_module(mod_name), attr)
                    hp = _hyperparameter_names(c)
                except Exception:  # noqa: BLE001 - listing only
                    hp = []
            out[t] = {"available": False, "reason": reason, "hyperparameters": hp}
        else:
            out[t] = {"available": True, "reason": "", "hyperparameters": _hyperparameter_names(cls)}
    return out


#: generator types that measure under zCDP (a ``rho`` keyword: Gaussian measurements)
ZCDP_TYPES = frozenset({"privsyn"})


def supports_zcdp(type: Any) -> bool:
    """Whether a generator type can be fitted under zCDP (``make_generator(type, rho=...)``)."""
    return type in ZCDP_TYPES


def make_generator(type: str, epsilon: float | None = None, *, rho: float | None = None,
                   **hyperparameters: Any) -> Generator:
    """Construct a registered generator with its budget: ``epsilon`` (pure DP) or ``rho``
    (zCDP, types in :data:`ZCDP_TYPES`); ValueError naming the valid choices otherwise."""
    if type not in _REGISTRY:
        raise ValueError(
            f"unknown generator type {type!r}; valid types are {sorted(_REGISTRY)}"
        )
    if rho is not None:
        if epsilon is not None:
            raise ValueError(f"generator {type!r}: give epsilon or rho, not both")
        if not supports_zcdp(type):
            raise ValueError(f"generator {type!r} measures under pure DP only (zCDP: {sorted(ZCDP_TYPES)})")
        budget, name = rho, "rho"
    else:
        budget, name = epsilon, "epsilon"
    if not (isinstance(budget, (int, float)) and not isinstance(budget, bool)
            and math.isfinite(budget) and budget > 0):
        raise ValueError(f"generator {type!r}: {name} must be a finite number > 0, got {budget!r}")
    cls, reason = _resolve(type)
    if cls is None:
        raise ValueError(f"generator type {type!r} is not available: {reason}")
    valid = _hyperparameter_names(cls)
    unknown = sorted(set(hyperparameters) - set(valid))
    if unknown:
        raise ValueError(
            f"generator {type!r}: unknown hyperparameter(s) {unknown}; valid ones are {valid}"
        )
    try:
        if rho is not None:
            return cls(None, rho=float(rho), **hyperparameters)
        return cls(float(epsilon), **hyperparameters)
    except TypeError as e:
        raise ValueError(f"generator {type!r}: bad hyperparameters {hyperparameters}: {e}") from None


# --------------------------------------------------------------------------- helpers for generators


def record_weights(counts: np.ndarray, rows: int) -> np.ndarray:
    """The counts of ``rows`` record types as exact float64 ``np.bincount`` weights (each >= 1,
    their sum below 2^53, so every weighted count is the integer count of the records)."""
    c = np.asarray(counts, dtype=np.int64)
    if c.shape != (rows,) or (c < 1).any() or int(c.sum()) >= 2 ** 53:
        raise ValueError("the record types and their counts do not match")
    return c.astype(np.float64)


def check_codes(codes: np.ndarray, domain: Sequence[int]) -> tuple[np.ndarray, tuple[int, ...]]:
    """Validate ``codes`` (n, d) against the public ``domain``; returns (int64 codes, domain).

    Raises ValueError if a code lies outside ``range(domain[j])``: the domain comes from the
    spec, never from the data, so such a code is a bug upstream, not something to adapt to.
    """
    dom = tuple(int(s) for s in domain)
    if any(s < 1 for s in dom) or len(dom) == 0:
        raise ValueError(f"domain sizes must be positive integers, got {tuple(domain)}")
    arr = np.asarray(codes)
    if arr.ndim != 2 or arr.shape[1] != len(dom):
        raise ValueError(f"codes must have shape (n, {len(dom)}), got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"codes must be integers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.shape[0]:
        lo, hi = arr.min(axis=0), arr.max(axis=0)
        bad = [j for j in range(len(dom)) if lo[j] < 0 or hi[j] >= dom[j]]
        if bad:
            j = bad[0]
            raise ValueError(
                f"codes of column {j} lie in [{lo[j]}, {hi[j]}], outside the domain 0..{dom[j] - 1}"
            )
    return arr, dom


def even_split(epsilon: float, k: int) -> float:
    """One of ``k`` equal float shares of a *declared* epsilon (the spec's decimal), exactly:
    the largest float ``e`` with ``k * binary(e) <= dec(epsilon)`` (``exact.even_split``).

    ``fsum([e] * k) <= epsilon`` is not enough: fsum rounds the exact sum to a float, and
    5 x fl(0.8) = 4 + 2.2e-16 rounds to 4.0; the exact share of 4.0 / 5 is 0.7999999999999999.
    """
    if k < 1:
        raise ValueError("cannot split a budget into fewer than one part")
    return exact.even_split(epsilon, k)


def declared_share(epsilon: float) -> float:
    """The float handed to OpenDP for a whole declared epsilon (one part):
    ``float_down(dec(epsilon))``, so its binary value never exceeds the decimal (fl(0.8) is
    0.8000000000000000444 > 4/5; the share is 0.7999999999999999)."""
    return exact.even_split(epsilon, 1)


def constructor_grid_problems(cls: type, names: Sequence[str], grid: dict) -> list[str]:
    """Problems of a spec grid for a generator whose every hyperparameter value is checked by
    its constructor alone, each as ``".key[j]: message"`` (the ``type: `` prefix removed)."""
    problems = []
    prefix = f"{cls.type}: "
    for key, values in grid.items():
        if key not in names or not isinstance(values, list):
            continue
        for j, v in enumerate(values):
            try:
                cls(1.0, **{key: v})
            except (ValueError, TypeError) as e:
                problems.append(f".{key}[{j}]: {str(e).removeprefix(prefix)}")
    return problems
