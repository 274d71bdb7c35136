"""The coding of every released column under each of its alternatives, from the spec alone:
labels, representative values, bin edges (open bins infinite), the open-bin label styles."""
from __future__ import annotations

import numpy as np

from dpbundle.mechanisms.coding import ColumnCoding
from dpbundle.release.spec.columns import _bins_of, derived_range
from dpbundle.release.spec.model import Spec
from dpbundle.release.spec.typed import DEFAULT_LABEL_STYLE, Alternative, ReleasedColumn


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _source_range(spec: Spec, col: ReleasedColumn) -> tuple[float | None, float | None, bool]:
    """(min, max, integer?) of the values a released column's source can take, from the spec."""
    src = spec.model.input.column(col.source.column)
    return derived_range(src.to_document(), col.source.to_document())


#: The label styles of open bins (spec ``label_style``, top level or per released column).
LABEL_STYLES = ("office", "plus", "births-2024")


def label_style(doc: dict, col: dict) -> str:
    """The label style of released column ``col`` of spec document ``doc``: the column's
    ``label_style``, else the spec's, else the default of the spec's format version
    (:data:`~dpbundle.release.spec.typed.DEFAULT_LABEL_STYLE`; the typed spec's
    ``SpecModel.label_style_of`` is the same rule)."""
    return col.get("label_style") or doc.get("label_style") or DEFAULT_LABEL_STYLE[doc.get("dpbundle_spec", 1)]


def open_bin(style: str, side: str, edge: float, integer: bool) -> tuple[str, float]:
    """(label, number) of an open bin. ``side`` "below": the first bin, everything under ``edge``
    (its upper edge b): ``"under b"`` (office) or ``"<b"``, number b. ``side`` "above": the last
    bin, everything from ``edge`` (its lower edge a) on: ``"a and over"`` (office) or ``"a+"``
    (plus), number a; ``births-2024``: ``"(a-1)<"`` ("greater than a-1"), number a-1, for an
    integer source (``"a<"``, number a, otherwise)."""
    if style not in LABEL_STYLES:
        raise ValueError(f"unknown label style {style!r} (known: {', '.join(LABEL_STYLES)})")
    if side == "below":
        return (f"under {_fmt(edge)}" if style == "office" else f"<{_fmt(edge)}"), float(edge)
    if style == "births-2024":
        shown = edge - 1 if integer else edge
        return f"{_fmt(shown)}<", float(shown)
    return (f"{_fmt(edge)} and over" if style == "office" else f"{_fmt(edge)}+"), float(edge)


def _bins(alt: Alternative | dict) -> list[tuple[float, float]]:
    """The [lower, upper) bins of a binned alternative (typed, or its document form)."""
    bins = alt.bins() if isinstance(alt, Alternative) else _bins_of(alt)
    if bins is None:
        if isinstance(alt, Alternative) and alt.undrawn:
            raise KeyError(f"alternative {alt.id!r}: its dp_edges are not drawn yet")
        raise KeyError("unit_bins")
    return bins


def column_coding(spec: Spec, name: str, alternative: str) -> ColumnCoding:
    """The coding of released column ``name`` under one of its alternatives."""
    col = spec.model.column(name)
    alt = col.alternative(alternative)
    if alt is None:
        known = ", ".join(col.alternative_ids)
        raise KeyError(f"column {name!r} has no alternative {alternative!r} (known: {known})")
    if alt.categories is not None:
        k = len(alt.categories)
        labels = alt.labels if alt.labels is not None else alt.categories
        values = alt.values if alt.values is not None else list(range(k))
        nan = np.full(k, np.nan)
        return ColumnCoding(name, tuple(labels), np.asarray(values, float), False, nan, nan,
                            categories=tuple(alt.categories))
    bins = _bins(alt)
    src_lo, src_hi, integer = _source_range(spec, col)
    clip = alt.clip
    open_below = clip is not None and (src_lo is None or src_lo < clip[0])
    open_above = clip is not None and (src_hi is None or src_hi > clip[1])
    labels, values = _bin_labels(bins, open_below, open_above, spec.model.label_style_of(col), bool(integer))
    if alt.labels is not None:
        labels = list(alt.labels)
    if alt.values is not None:
        values = list(alt.values)
    # Open bins stand for every value beyond the clip range: their outer edge is infinite.
    lower = np.array([a for a, _ in bins], float)
    upper = np.array([b for _, b in bins], float)
    if open_below:
        lower[0] = -np.inf
    if open_above:
        upper[-1] = np.inf
    specials = spec.model.input.column(col.source.column).specials
    if specials:    # special values (not numbers): after the bins, no number, no bounds
        nan = [np.nan] * len(specials)
        labels, values = [*labels, *(sp.label for sp in specials)], [*values, *nan]
        lower, upper = np.concatenate([lower, nan]), np.concatenate([upper, nan])
    kinds = ("",) * len(bins) + tuple(sp.kind for sp in specials)
    return ColumnCoding(name, tuple(labels), np.asarray(values, float), True, lower, upper, integer=bool(integer),
                        special=kinds)


def _bin_labels(bins: list[tuple[float, float]], open_below: bool, open_above: bool, style: str,
                integer: bool) -> tuple[list[str], list[float]]:
    """(label, number) of every bin in label style ``style`` (open bins: :func:`open_bin`)."""
    labels, values = [], []
    for i, (a, b) in enumerate(bins):
        last = b - 1 if integer else b
        if i == 0 and open_below:
            label, number = open_bin(style, "below", b, integer)
            labels.append(label)
            values.append(number)
        elif i == len(bins) - 1 and open_above:
            label, number = open_bin(style, "above", a, integer)
            labels.append(label)
            values.append(number)
        elif integer and last == a:
            labels.append(_fmt(a))
            values.append(float(a))
        else:
            labels.append(f"{_fmt(a)}-{_fmt(last)}")
            values.append((a + last) / 2.0)
    return labels, values


def codings(spec: Spec, config: dict) -> tuple[ColumnCoding, ...]:
    """The codings of every released column under a configuration (spec order)."""
    return tuple(column_coding(spec, name, config["columns"][name]) for name in spec.column_names)


def categories_ordered(spec: Spec | dict, configuration: dict) -> dict[str, bool]:
    """Released column -> are its values in their natural order under ``configuration``
    (datapackage.json's ``categoriesOrdered``)? Bins always; categories when their alternative
    declares ``ordered: true``. ``spec``: a :class:`Spec` or a spec document (as in spec.json).
    This is a statement for readers only: :attr:`ColumnCoding.ordered` stays "binned" (the
    criteria's designs and the constraints treat ordered categories as categories)."""
    doc = spec.raw if isinstance(spec, Spec) else spec
    chosen = configuration.get("columns") or {}
    out: dict[str, bool] = {}
    for col in doc.get("columns") or []:
        alts = {a.get("id"): a for a in col.get("alternatives") or []}
        alt = alts.get(chosen.get(col["name"])) if len(alts) != 1 else next(iter(alts.values()))
        if alt is None:
            raise KeyError(f"the configuration selects no known alternative of column {col['name']!r}")
        out[col["name"]] = "categories" not in alt or alt.get("ordered") is True
    return out
