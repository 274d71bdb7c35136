"""The coding of every released column under each of its alternatives, from the spec alone:
labels, representative values, bin edges (open bins infinite), the open-bin label styles."""
from __future__ import annotations

import numpy as np

from dpbundle.mechanisms.coding import ColumnCoding
from dpbundle.release.spec.columns import derived_range
from dpbundle.release.spec.model import Spec


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _source_range(spec: Spec, col: dict) -> tuple[float | None, float | None, bool]:
    """(min, max, integer?) of the values a released column's source can take, from the spec."""
    return derived_range(spec.input_columns[col["source"]["column"]], col["source"])


#: The label styles of open bins (spec ``label_style``, top level or per released column).
LABEL_STYLES = ("office", "plus", "births-2024")


#: The label style of a spec that names none, by spec format version (``dpbundle_spec``): version 1
#: specs keep the labels of the 2024 births release (published bundles, and their audits, depend
#: on them); version 2 specs, the current format, get the statistical-office style.
DEFAULT_LABEL_STYLE = {1: "births-2024", 2: "office"}


def label_style(doc: dict, col: dict) -> str:
    """The label style of released column ``col`` of spec document ``doc``: the column's
    ``label_style``, else the spec's, else the default of the spec's format version."""
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


def _bins(alt: dict) -> list[tuple[float, float]]:
    if "edges" in alt:
        e = alt["edges"]
        return list(zip(e[:-1], e[1:]))
    a, b = alt["unit_bins"]
    return [(v, v + 1) for v in range(a, b + 1)]


def column_coding(spec: Spec, name: str, alternative: str) -> ColumnCoding:
    """The coding of released column ``name`` under one of its alternatives."""
    col = spec.column(name)
    alt = next((a for a in col["alternatives"] if a["id"] == alternative), None)
    if alt is None:
        known = ", ".join(a["id"] for a in col["alternatives"])
        raise KeyError(f"column {name!r} has no alternative {alternative!r} (known: {known})")
    if "categories" in alt:
        k = len(alt["categories"])
        labels = alt.get("labels", alt["categories"])
        values = alt.get("values", list(range(k)))
        nan = np.full(k, np.nan)
        return ColumnCoding(name, tuple(labels), np.asarray(values, float), False, nan, nan,
                            categories=tuple(alt["categories"]))
    bins = _bins(alt)
    src_lo, src_hi, integer = _source_range(spec, col)
    clip = alt.get("clip")
    open_below = clip is not None and (src_lo is None or src_lo < clip[0])
    open_above = clip is not None and (src_hi is None or src_hi > clip[1])
    style = label_style(spec.raw, col)
    labels, values = [], []
    for i, (a, b) in enumerate(bins):
        last = b - 1 if integer else b
        if i == 0 and open_below:
            label, number = open_bin(style, "below", b, bool(integer))
            labels.append(label)
            values.append(number)
        elif i == len(bins) - 1 and open_above:
            label, number = open_bin(style, "above", a, bool(integer))
            labels.append(label)
            values.append(number)
        elif integer and last == a:
            labels.append(_fmt(a))
            values.append(float(a))
        else:
            labels.append(f"{_fmt(a)}-{_fmt(last)}")
            values.append((a + last) / 2.0)
    labels = alt.get("labels", labels)
    values = alt.get("values", values)
    # Open bins stand for every value beyond the clip range: their outer edge is infinite.
    lower = np.array([a for a, _ in bins], float)
    upper = np.array([b for _, b in bins], float)
    if open_below:
        lower[0] = -np.inf
    if open_above:
        upper[-1] = np.inf
    return ColumnCoding(name, tuple(labels), np.asarray(values, float), True, lower, upper, integer=bool(integer))


def codings(spec: Spec, config: dict) -> tuple[ColumnCoding, ...]:
    """The codings of every released column under a configuration (spec order)."""
    return tuple(column_coding(spec, name, config["columns"][name]) for name in spec.column_names)
