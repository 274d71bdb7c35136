"""The noisy count tables a generator measured, as published with ``publish: tables``.

Every marginal-based generator (PrivBayes, ``mst_pure``, PrivSyn) measures count tables of the
private records with OpenDP's discrete Laplace (``Randomness.laplace(integer=True)``) before it
post-processes them into a model. Those noisy counts are the DP tables a statistics office
publishes; publishing them costs no budget (they are the output of the generator's measurement,
which the budget already counts, and the selected candidate's output as a whole is covered by the
private selection). This module keeps them, as :class:`MeasuredTable`, and gives each cell an
interval.

The interval (derivation). A cell is ``y = c + Z`` with ``c`` the true count and ``Z`` drawn by
OpenDP's discrete Laplace of scale ``s``: ``P(Z = k) = (1 - a) / (1 + a) a^|k|``, ``a = exp(-1/s)``,
independent of the data. For an integer ``t >= 0``,

    P(|Z| > t) = 2 sum_{k > t} (1 - a) / (1 + a) a^k = 2 a^(t + 1) / (1 + a).

The half-width :func:`half_width` is the smallest integer ``t`` with ``P(|Z| > t) <= 1 - level``;
then ``[y - t, y + t]`` holds ``c`` with probability at least ``level`` whatever ``c`` is (exactly
``1 - 2 a^(t+1) / (1 + a)``).

The resize (records policy ``dp_count``). The generator is fitted on the plausible records
resized to the published DP count ``m = max(n + Z_n, 1)``, ``Z_n`` OpenDP's discrete Laplace of
the count's scale ``s_n`` (``mechanisms/records.py``): a uniform subsample of ``m`` of the ``n``
records, or all of them plus ``m - n`` pads. Every cell of every table then counts ``c'`` records
with ``|c' - c| <= |m - n| <= |Z_n|`` (a subsample removes ``n - m`` records in all, pads add
``m - n``; the max with 1 only shrinks ``|m - n|``), where ``c`` is the cell's count of the plausible
records of the registry. So ``|y - c| <= |Z| + |Z_n|``, and with ``t = half_width(s, 0.975)`` and
``t_n = half_width(s_n, 0.975)``, by the union bound, ``P(|y - c| > t + t_n) <= 2.5% + 2.5% = 5%``.
Under ``declared_public`` there is no resize and the half-width is ``half_width(s, 0.95)``.

A true count is never negative, so the published interval is ``[max(0, y - w), max(0, y + w)]``
(``w`` the half-width): it holds ``c`` whenever ``[y - w, y + w]`` does. The interval is per cell
(not simultaneous over a table); ``c`` is the count of the plausible records of the registry (after
the raw constraints).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import numpy as np

__all__ = ["MeasuredTable", "measured_table", "half_width", "cell_interval", "attach",
           "measured_of", "tables_document", "TABLES_FORMAT", "CONFIDENCE", "TABLE_GENERATORS"]

TABLES_FORMAT = "dpbundle-dp-tables/1"
#: The level of every published interval.
CONFIDENCE = 0.95
#: The level of each of the two noises (table, count) of a resized table's interval (union bound).
RESIZED_LEVEL = 0.975
#: Generators whose measured tables can be published (``publish: tables``).
TABLE_GENERATORS = ("privbayes", "mst_pure", "privsyn")
_ATTR = "_dpbundle_measured_tables"


@dataclass(frozen=True)
class MeasuredTable:
    """One noisy count table: ``counts`` (int64, flat; mixed radix over ``sizes``, the first
    column most significant) of the released columns ``columns``, each read on merged codes
    ``code // merge[i]`` (``sizes[i] = ceil(k_i / merge[i])``); the discrete Laplace of ``scale``
    calibrated by OpenDP to ``sensitivity`` (the L1 sensitivity of the vector draw the table was
    part of) at ``epsilon``; ``measurement``: the draw's purpose."""

    columns: tuple[int, ...]
    merge: tuple[int, ...]
    sizes: tuple[int, ...]
    counts: np.ndarray
    sensitivity: int
    epsilon: float
    measurement: str

    @property
    def cells(self) -> int:
        return int(math.prod(self.sizes))

    @cached_property
    def scale(self) -> float:
        """OpenDP's calibrated scale, the one ``Randomness.laplace`` drew with (computed when a
        document asks for it, not at every fit)."""
        from .noise import calibrated_laplace_scale

        return float(calibrated_laplace_scale(self.sensitivity, self.epsilon, vector=True, integer=True))


def measured_table(columns: Sequence[int], merge: Sequence[int], domain: Sequence[int], noisy: Any,
                   sensitivity: int, epsilon: float, measurement: str) -> MeasuredTable:
    """A :class:`MeasuredTable` of a discrete Laplace draw of ``sensitivity`` at ``epsilon``."""
    cols = tuple(int(c) for c in columns)
    mg = tuple(int(g) for g in merge)
    if len(cols) != len(mg) or not cols or any(g < 1 for g in mg):
        raise ValueError(f"a measured table needs one merge factor >= 1 per column, got {cols}, {mg}")
    sizes = tuple(-(-int(domain[c]) // g) for c, g in zip(cols, mg))
    counts = np.asarray(noisy).reshape(-1)
    if counts.size != math.prod(sizes):
        raise ValueError(f"{counts.size} counts for a table of {math.prod(sizes)} cells")
    if not np.all(counts == np.round(counts)):
        raise ValueError("a measured table holds integer counts (the discrete Laplace's)")
    return MeasuredTable(cols, mg, sizes, counts.astype(np.int64), int(sensitivity), float(epsilon),
                         str(measurement))


def half_width(scale: float, level: float = CONFIDENCE) -> int:
    """The smallest integer ``t >= 0`` with ``P(|Z| > t) = 2 a^(t+1) / (1 + a) <= 1 - level``,
    ``a = exp(-1/scale)`` (module docstring). Computed in closed form, then moved by one where
    float rounding put it off (the tail formula decides)."""
    if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"the scale must be a finite number > 0, got {scale!r}")
    if not 0 < level < 1:
        raise ValueError(f"the level must be in (0, 1), got {level!r}")
    log_a = -1.0 / float(scale)
    alpha = 1.0 - level

    def tail(t: int) -> float:      # log P(|Z| > t)
        return math.log(2.0) + (t + 1) * log_a - math.log1p(math.exp(log_a))

    t = max(0, math.ceil((math.log(alpha) - math.log(2.0) + math.log1p(math.exp(log_a))) / log_a) - 1)
    while t > 0 and tail(t - 1) <= math.log(alpha):
        t -= 1
    while tail(t) > math.log(alpha):
        t += 1
    return int(t)


def cell_interval(count: int, width: int) -> tuple[int, int]:
    """``(max(0, count - width), max(0, count + width))``: the interval of a cell (module doc)."""
    return max(0, int(count) - int(width)), max(0, int(count) + int(width))


def attach(model: Any, tables: Sequence[MeasuredTable]) -> Any:
    """Keep ``tables`` with the fitted ``model`` (returned) for ``publish: tables``."""
    object.__setattr__(model, _ATTR, tuple(tables))
    return model


def measured_of(model: Any) -> tuple[MeasuredTable, ...]:
    """The tables :func:`attach` kept with ``model`` (ValueError if none were)."""
    tables = getattr(model, _ATTR, None)
    if tables is None:
        raise ValueError("the model keeps no measured tables (its generator cannot publish tables)")
    return tables


def tables_document(tables: Sequence[MeasuredTable], names: Sequence[str],
                    count_scale: float | None = None) -> dict:
    """dp-tables.json: every measured table in measurement order, with its columns (names),
    merge factors, sizes, noise (mechanism, sensitivity, epsilon, scale), the half-width of its
    95% interval and the noisy counts. ``id``: ``t01``, ``t02``, ... ``count_scale``: the DP
    count's scale under the records policy ``dp_count`` (the table was resized; ``resize``
    states the count's share of the half-width), None under ``declared_public`` (module doc)."""
    level = CONFIDENCE if count_scale is None else RESIZED_LEVEL
    extra = 0 if count_scale is None else half_width(count_scale, level)
    out = []
    for i, t in enumerate(tables):
        out.append({"id": f"t{i + 1:02d}", "measurement": t.measurement,
                    "columns": [str(names[c]) for c in t.columns], "merge": list(t.merge),
                    "sizes": list(t.sizes), "mechanism": "opendp.make_laplace/integer",
                    "sensitivity": t.sensitivity, "epsilon": t.epsilon, "scale": t.scale,
                    "half_width": half_width(t.scale, level) + extra, "counts": [int(c) for c in t.counts]})
    doc: dict[str, Any] = {"format": TABLES_FORMAT, "confidence": CONFIDENCE}
    if count_scale is not None:
        doc["resize"] = {"count_scale": float(count_scale), "half_width": extra}
    return doc | {"tables": out}
