"""Optional AIM and MST generators through OpenDP's ``opendp.extras.mbi`` (pure DP).

Available only with the ``mbi`` extra (``pip install 'dpbundle[mbi]'``: ``opendp[mbi]``, which
pulls in Private-PGM (``mbi``), JAX, polars, pyarrow and scikit-learn). The default install
stays free of JAX; without the extra both types are listed by ``generator_types()`` as
unavailable, with the reason.

Release (``fit``). The integer codes become a polars LazyFrame with columns ``c0..c{d-1}``
(i64) over an explicitly built, public ``lazyframe_domain`` (nothing about the schema is
inferred from the data). The keys of every column come from the public domain only
(``keys={"cj": [0, ..., k_j - 1]}``; no cuts, no key discovery), so OpenDP runs its pure-DP
path (``max_divergence``, delta = 0). The measurement is
``Context.compositor(privacy_unit=unit_of(changes=1), privacy_loss=loss_of(epsilon))
.query(epsilon).contingency_table(keys, algorithm=dp.mbi.AIM(...)/dp.mbi.MST(...))``.

Privacy unit. dpbundle's neighbours are change-one-record (same n, one record replaced).
``unit_of(changes=1)`` is OpenDP's ``ChangeOneDistance`` with d_in = 1, i.e. exactly that
relation, so the privacy map OpenDP reports is in dpbundle's own unit and no conversion of ours
is involved (OpenDP itself lowers ChangeOneDistance d to SymmetricDistance 2d for the polars
plan: one change = one removal + one addition, which is sound for any neighbouring pair and
tight for histograms). ``fit`` checks that the resolved measurement has input metric
``ChangeOneDistance``, output measure ``MaxDivergence`` and ``map(1) <= epsilon`` before it
touches the data, and the compositor caps the whole interaction at ``epsilon`` as well. For
d_in > 1 the pure-DP group-privacy bound gives ``privacy_map(d_in) = d_in * epsilon``.

Budget split (declared, passed to OpenDP): ``oneway_split = 0.5`` (one-way marginals of all
columns, all keys public) and the rest to the algorithm's selection + measurement rounds
(split further inside OpenDP by ``measure_split``; AIM also adapts its per-round budget).

Randomness. All DP noise (Laplace counts, AIM/MST's exponential-mechanism selections) is drawn
inside OpenDP from OS randomness and is NOT recorded per draw in the dpbundle transcript: an
AIM/MST release cannot be replayed by an auditor, and ``fit`` raises in replay mode. ``fit``
records one ``opaque_release`` mark (generator, epsilon, the OpenDP map, hyperparameters and a
sha256 digest of the fitted sampler tables) so that the transcript says what happened.
Model fitting (Private-PGM mirror descent in JAX) is post-processing. Sampling is
post-processing too and uses only the caller's recorded ``np.random.Generator`` (mbi's own
``synthetic_data`` uses the global numpy state and is not used): the model is turned into a
sequence of conditional probability tables along the junction tree's elimination order and
records are drawn by inverse CDF, so the synthetic records are reproducible from the recorded
seed given the fitted model.

Hyperparameters common to both: ``max_cells`` (largest conditional table the sampler may
materialise; checked after the release, since the cliques are chosen privately) and ``iters``
(Private-PGM mirror-descent iterations, post-processing). None of them changes the privacy map.

OpenDP appends a null category to every keyset (for values outside the keys); our codes never
contain it, so its (tiny, noise-only) estimated mass is dropped and the tables renormalised.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .failures import AttemptFailure
from . import exact
from .generators import check_codes, declared_share
from .noise import Randomness

__all__ = ["AIM", "MST", "MbiModel", "mbi_availability", "ONEWAY_SPLIT"]

_NEEDED = ("mbi", "jax", "polars")
DEFAULT_MAX_CELLS = 10_000_000
ONEWAY_SPLIT = 0.5
_MAP_RTOL = 1e-9


def mbi_availability() -> tuple[bool, str]:
    """(True, "") if Private-PGM, JAX and polars are importable, else (False, reason)."""
    missing = [m for m in _NEEDED if importlib.util.find_spec(m) is None]
    if missing:
        return False, (f"needs the optional packages {missing}: install dpbundle[mbi] "
                       "(pip install 'dpbundle[mbi]')")
    return True, ""


def _positive_int(name: str, value, gtype: str, allow_none: bool = False) -> None:
    if allow_none and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{gtype}: {name} must be a positive integer, got {value!r}")


@dataclass
class _Step:
    column: int                 # output column filled by this step
    parents: tuple[int, ...]    # already-sampled columns it is conditioned on
    cdf: np.ndarray             # (prod(parent sizes), k) row-wise cumulative probabilities


@dataclass
class MbiModel:
    """Fitted Markov random field as conditional tables along an elimination order."""

    domain: tuple[int, ...]
    steps: list[_Step]

    def digest(self) -> str:
        """sha256 over the tables (what the transcript's ``opaque_release`` mark records)."""
        h = hashlib.sha256(repr(self.domain).encode())
        for s in self.steps:
            h.update(repr((s.column, s.parents, s.cdf.shape)).encode())
            h.update(np.ascontiguousarray(s.cdf, dtype=np.float64).tobytes())
        return h.hexdigest()

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        """m records drawn i.i.d. from the model (post-processing; only ``rng`` is used)."""
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 0:
            raise ValueError(f"the number of rows to sample must be an integer >= 0, got {m!r}")
        if not isinstance(rng, np.random.Generator):
            raise ValueError("sample needs a numpy Generator (a recorded rng from Randomness.rng)")
        m = int(m)
        out = np.zeros((m, len(self.domain)), dtype=np.int64)
        for s in self.steps:
            k = self.domain[s.column]
            u = rng.random(m)
            if s.parents:
                row = np.ravel_multi_index(tuple(out[:, p] for p in s.parents),
                                           tuple(self.domain[p] for p in s.parents))
                cdf = s.cdf[row]
                idx = (u[:, None] >= cdf).sum(axis=1)
            else:
                idx = np.searchsorted(s.cdf[0], u, side="right")
            out[:, s.column] = np.minimum(idx, k - 1)
        return out


def _conditional_tables(table, dom: tuple[int, ...], names: list[str],
                        max_cells: int, gtype: str) -> list[_Step]:
    """Turn the released ContingencyTable's model into sampler steps (post-processing)."""
    from mbi import junction_tree

    model = table.model
    col_of = {nm: j for j, nm in enumerate(names)}
    # positions of codes 0..k-1 in OpenDP's keysets (which carry an extra null key)
    positions = {}
    for j, nm in enumerate(names):
        keys = list(table.keys[nm].to_list())
        try:
            positions[nm] = np.array([keys.index(v) for v in range(dom[j])], dtype=np.intp)
        except ValueError:
            raise RuntimeError(f"{gtype}: OpenDP's keys for {nm} are {keys}, not 0..{dom[j] - 1}") \
                from None
    cliques = [set(c) for c in model.cliques]
    _, elimination = junction_tree.make_junction_tree(model.domain, cliques)
    order = list(elimination)[::-1]
    missing = set(names) - set(order)
    order += [nm for nm in names if nm in missing]      # unconnected columns (defensive)

    steps: list[_Step] = []
    used: list[str] = []
    for nm in order:
        near = set().union(*[c for c in cliques if nm in c]) if cliques else set()
        parents = tuple(p for p in used if p in near)
        attrs = parents + (nm,)
        cells = math.prod(dom[col_of[a]] for a in attrs)
        if cells > max_cells:
            # the cliques were chosen privately (AIM/MST): a failed attempt, not an abort
            raise AttemptFailure(f"{gtype}: sampling needs a table of {cells:,} cells over "
                                 f"{attrs}, more than max_cells={max_cells:,}")
        vals = np.asarray(model.project(attrs).transpose(attrs).values, dtype=np.float64)
        vals = vals[np.ix_(*[positions[a] for a in attrs])]      # drop the null categories
        vals = np.where(np.isfinite(vals), np.clip(vals, 0.0, None), 0.0)
        k = dom[col_of[nm]]
        rows = vals.reshape(-1, k)
        fallback = rows.sum(axis=0)
        fallback = fallback / fallback.sum() if fallback.sum() > 0 else np.full(k, 1.0 / k)
        tot = rows.sum(axis=1, keepdims=True)
        cond = np.where(tot > 0, rows / np.where(tot > 0, tot, 1.0), fallback)
        cdf = np.cumsum(cond, axis=1)
        cdf[:, -1] = 1.0
        steps.append(_Step(column=col_of[nm], parents=tuple(col_of[p] for p in parents),
                           cdf=np.ascontiguousarray(cdf)))
        used.append(nm)
    return steps


class _MbiGenerator:
    type = "mbi"
    HYPERPARAMETERS: tuple[str, ...] = ("max_cells", "iters")

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS,
                 iters: int = 1000) -> None:
        if isinstance(epsilon, bool) or not (isinstance(epsilon, (int, float))
                                             and math.isfinite(epsilon) and epsilon > 0):
            raise ValueError(f"{self.type}: epsilon must be a finite number > 0, got {epsilon!r}")
        _positive_int("max_cells", max_cells, self.type)
        _positive_int("iters", iters, self.type)
        self.epsilon = float(epsilon)
        self.max_cells = int(max_cells)
        self.iters = int(iters)

    @classmethod
    def availability(cls) -> tuple[bool, str]:
        return mbi_availability()

    def hyperparameters(self) -> dict:
        return {"max_cells": self.max_cells, "iters": self.iters}

    def privacy_map(self, d_in: int) -> float:
        """Change-one distance d_in -> d_in * epsilon (group privacy of the epsilon-DP fit)."""
        if isinstance(d_in, bool) or not isinstance(d_in, (int, np.integer)) or d_in < 0:
            raise ValueError(f"{self.type}: d_in must be an integer >= 0, got {d_in!r}")
        return float(d_in) * self.epsilon

    def budget_parts(self) -> list[dict]:
        """The declared split, exactly: ``one = float_down(dec(ONEWAY_SPLIT) dec(epsilon))``, the
        rest ``float_down(dec(epsilon) - binary(one))`` (sum <= the declared decimal)."""
        one = exact.float_down(exact.dec(ONEWAY_SPLIT) * exact.dec(self.epsilon))
        rest = exact.float_down(exact.dec(self.epsilon) - exact.binary(one))
        return [
            {"purpose": f"{self.type} one-way marginals (OpenDP mbi)", "epsilon": one},
            {"purpose": f"{self.type} selection + measurement rounds (OpenDP mbi, internal split)",
             "epsilon": rest},
        ]

    # ---- OpenDP plumbing (needs the mbi extra)

    def _algorithm(self, dp, estimator):  # pragma: no cover - overridden
        raise NotImplementedError

    def _estimator(self):
        from mbi import estimation

        return functools.partial(estimation.mirror_descent, iters=self.iters)

    def measurement(self, domain: Sequence[int], data=None):
        """(OpenDP context, resolved measurement) for this generator over ``domain``.

        Everything here is public: the column names, types and keys come from ``domain``.
        ``data`` (a polars LazyFrame) is only handed to the compositor; with ``data=None`` an
        empty frame is used (to inspect the measurement, e.g. its privacy map).
        """
        ok, reason = mbi_availability()
        if not ok:
            raise ValueError(f"generator {self.type!r} is not available: {reason}")
        import polars as pl
        import opendp.prelude as dp

        dp.enable_features("contrib")
        dom = tuple(int(s) for s in domain)
        names = [f"c{j}" for j in range(len(dom))]
        lf_domain = dp.lazyframe_domain(
            [dp.series_domain(nm, dp.atom_domain(T="i64")) for nm in names])
        if data is None:
            data = pl.LazyFrame({nm: pl.Series(nm, [], dtype=pl.Int64) for nm in names})
        eps = declared_share(self.epsilon)   # binary(eps) <= the declared decimal (fl(0.7) > 7/10)
        context = dp.Context.compositor(
            data=data,
            privacy_unit=dp.unit_of(changes=1),          # dpbundle's change-one neighbours
            privacy_loss=dp.loss_of(epsilon=eps),
            domain=lf_domain,
        )
        query = context.query(epsilon=eps).contingency_table(
            keys={nm: list(range(dom[j])) for j, nm in enumerate(names)},
            algorithm=self._algorithm(dp, self._estimator()),
        )
        meas = query.resolve()
        self._check_measurement(dp, meas, context)
        return context, meas

    def _check_measurement(self, dp, meas, context) -> float:
        """Refuse unless OpenDP's own map says epsilon-DP under change-one (d_in = 1)."""
        if meas.input_metric != dp.change_one_distance():
            raise RuntimeError(f"{self.type}: OpenDP measurement has input metric "
                               f"{meas.input_metric}, expected ChangeOneDistance")
        if meas.output_measure != dp.max_divergence():
            raise RuntimeError(f"{self.type}: OpenDP measurement has output measure "
                               f"{meas.output_measure}, expected MaxDivergence (pure DP)")
        eps_map = float(meas.map(1))
        total = float(context.accountant.map(1))
        cap = exact.dec(self.epsilon)      # exact: the declared decimal, not its float
        if not (exact.binary(eps_map) <= cap and exact.binary(total) <= cap):
            raise RuntimeError(f"{self.type}: OpenDP's privacy map at change-one distance 1 is "
                               f"{eps_map!r} (compositor {total!r}), more than epsilon "
                               f"{self.epsilon!r}")
        return eps_map

    def opendp_epsilon(self, domain: Sequence[int]) -> float:
        """The epsilon OpenDP's privacy map reports at change-one distance 1 (no data used)."""
        _, meas = self.measurement(domain)
        return float(meas.map(1))

    def fit(self, codes: np.ndarray, domain: Sequence[int], rand: Randomness) -> MbiModel:
        """Release an OpenDP ContingencyTable (epsilon-DP), turn its model into a sampler."""
        if rand.replaying:
            raise ValueError(
                f"generator {self.type!r} cannot be replayed: its DP noise is drawn inside "
                "OpenDP's mbi module (OS randomness) and is not recorded per draw in the "
                "transcript, so a replay cannot reproduce the release; use privbayes, crosstab "
                "or marginals for an auditable (replayable) release"
            )
        ok, reason = mbi_availability()
        if not ok:
            raise ValueError(f"generator {self.type!r} is not available: {reason}")
        codes, dom = check_codes(codes, domain)
        if self.type == "mst" and len(dom) < 2:
            raise ValueError("mst: needs at least two columns")
        import polars as pl

        names = [f"c{j}" for j in range(len(dom))]
        data = pl.LazyFrame({nm: pl.Series(nm, codes[:, j], dtype=pl.Int64)
                             for j, nm in enumerate(names)})
        context, meas = self.measurement(dom, data)
        eps_map = float(meas.map(1))
        table = context(meas)           # the only access to the data; epsilon-DP (checked above)
        steps = _conditional_tables(table, dom, names, self.max_cells, self.type)
        model = MbiModel(domain=dom, steps=steps)
        rand.mark("opaque_release", generator=self.type, epsilon=self.epsilon,
                  opendp_map=eps_map, hyperparameters=self.hyperparameters(),
                  model_sha256=model.digest(),
                  note="noise drawn inside OpenDP (not recorded per draw; not replayable)")
        return model


class AIM(_MbiGenerator):
    """AIM (McKenna et al. 2022) via ``dp.mbi.AIM`` under pure DP.

    ``degree``: largest interaction order in the workload (OpenDP ``queries``);
    ``measure_split``, ``rounds`` and ``max_model_size`` (MB; OpenDP's ``max_size``) are passed
    to ``dp.mbi.AIM``; ``rounds=None`` means OpenDP's default (16 * number of columns).
    """

    type = "aim"
    HYPERPARAMETERS = ("max_cells", "iters", "degree", "measure_split", "max_model_size", "rounds")

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS, iters: int = 1000,
                 degree: int = 3, measure_split: float = 0.9, max_model_size: float = 80.0,
                 rounds: int | None = None) -> None:
        super().__init__(epsilon, max_cells, iters)
        _positive_int("degree", degree, "aim")
        _positive_int("rounds", rounds, "aim", allow_none=True)
        if isinstance(measure_split, bool) or not (isinstance(measure_split, (int, float))
                                                   and 0 < measure_split <= 1):
            raise ValueError(f"aim: measure_split must be in (0, 1], got {measure_split!r}")
        if isinstance(max_model_size, bool) or not (
                isinstance(max_model_size, (int, float)) and math.isfinite(max_model_size)
                and max_model_size > 0):
            raise ValueError(f"aim: max_model_size must be a finite number > 0 (MB), got "
                             f"{max_model_size!r}")
        self.degree = int(degree)
        self.measure_split = float(measure_split)
        self.max_model_size = float(max_model_size)
        self.rounds = None if rounds is None else int(rounds)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "degree": self.degree,
                "measure_split": self.measure_split, "max_model_size": self.max_model_size,
                "rounds": self.rounds}

    def _algorithm(self, dp, estimator):
        return dp.mbi.AIM(queries=self.degree, measure_split=self.measure_split,
                          max_size=self.max_model_size, rounds=self.rounds,
                          oneway_split=ONEWAY_SPLIT, estimator=estimator)


class MST(_MbiGenerator):
    """MST (McKenna et al. 2021) via ``dp.mbi.MST`` under pure DP.

    ``measure_split`` and ``num_selections`` (default: columns - 1) are passed to ``dp.mbi.MST``.
    """

    type = "mst"
    HYPERPARAMETERS = ("max_cells", "iters", "measure_split", "num_selections")

    def __init__(self, epsilon: float, max_cells: int = DEFAULT_MAX_CELLS, iters: int = 1000,
                 measure_split: float = 0.9, num_selections: int | None = None) -> None:
        super().__init__(epsilon, max_cells, iters)
        _positive_int("num_selections", num_selections, "mst", allow_none=True)
        if isinstance(measure_split, bool) or not (isinstance(measure_split, (int, float))
                                                   and 0 < measure_split <= 1):
            raise ValueError(f"mst: measure_split must be in (0, 1], got {measure_split!r}")
        self.measure_split = float(measure_split)
        self.num_selections = None if num_selections is None else int(num_selections)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "measure_split": self.measure_split,
                "num_selections": self.num_selections}

    def _algorithm(self, dp, estimator):
        return dp.mbi.MST(measure_split=self.measure_split, num_selections=self.num_selections,
                          oneway_split=ONEWAY_SPLIT, estimator=estimator)
