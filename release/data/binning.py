"""The codes of one released column for typed input values (clip, derive, bin; categories
mapped): :func:`code_column`, the one place the release turns input values into codes. The rules
are those of :mod:`dpbundle.release.data.transform` (its module doc); kept apart from it so that
the reading (:mod:`dpbundle.release.data.atoms`) can code values without the prepared table."""
from __future__ import annotations

import numpy as np

from dpbundle.mechanisms.coding import ColumnCoding

from dpbundle.release.spec.coding import _bins, column_coding
from dpbundle.release.spec.model import Spec
from dpbundle.release.spec.typed import Alternative, ReleasedColumn

__all__ = ["code_column", "category_lookup", "clipped_values", "grid_signature"]


def _source_values(spec: Spec, col: ReleasedColumn, table: dict[str, np.ndarray]) -> np.ndarray:
    src = col.source
    values = table[src.column]
    derive = src.derive
    if derive == "month":
        return (values.astype("datetime64[M]").astype(np.int64) % 12 + 1).astype(np.float64)
    if derive == "year":
        return (values.astype("datetime64[Y]").astype(np.int64) + 1970).astype(np.float64)
    if derive == "age":
        return _age(values, src.reference)
    if derive == "linear":
        return float(src.scale) * values.astype(np.float64) + float(src.offset if src.offset is not None else 0)
    return values


def _age(dates: np.ndarray, reference: str) -> np.ndarray:
    """Whole years from each date to ``reference``: year difference minus 1 when the reference's
    (month, day) comes before the date's (see ``spec.age_between``)."""
    ref = np.datetime64(reference, "D")
    ref_y = int(ref.astype("datetime64[Y]").astype(np.int64)) + 1970
    ref_m = int(ref.astype("datetime64[M]").astype(np.int64)) % 12 + 1
    ref_d = int((ref - ref.astype("datetime64[M]").astype("datetime64[D]")).astype(np.int64)) + 1
    months = dates.astype("datetime64[M]")
    y = months.astype("datetime64[Y]").astype(np.int64) + 1970
    m = months.astype(np.int64) % 12 + 1
    d = (dates - months.astype("datetime64[D]")).astype(np.int64) + 1
    before = (ref_m < m) | ((ref_m == m) & (ref_d < d))
    return (ref_y - y - before.astype(np.int64)).astype(np.float64)


def code_column(spec: Spec, name: str, alternative: str, table: dict[str, np.ndarray],
                coding: ColumnCoding | None = None) -> np.ndarray:
    """Integer codes of one released column for every row of a typed table."""
    col = spec.model.column(name)
    alt = col.alternative(alternative)
    if alt is None:
        raise KeyError(f"column {name!r} has no alternative {alternative!r} (known: {', '.join(col.alternative_ids)})")
    coding = coding or column_coding(spec, name, alternative)
    src_meta = spec.model.input.column(col.source.column)
    values = _source_values(spec, col, table)
    if alt.categorical:
        if src_meta.type == "boolean":
            lookup = category_lookup(alt, ["false", "true"])
            f, t = int(lookup[0]), int(lookup[1])
            return np.where(values > 0.5, t, f).astype(np.int64)
        removed = spec.model.removed_categories.get(col.source.column, frozenset())
        codes = category_lookup(alt, list(src_meta.category_texts), removed)[values]
        if (codes < 0).any():  # prepare's raw constraints rule this out; no private value named
            raise ValueError(f"column {name!r}: a record holds an input category that a raw constraint "
                             f"removes (alternative {alternative!r} does not map it); prepare the data first")
        return codes
    special = _special_of(spec, col, table)
    if alt.clip is not None:
        values = np.clip(values, alt.clip[0], alt.clip[1])
    edges = np.array([a for a, _ in _bins(alt)] + [_bins(alt)[-1][1]], float)
    codes = np.searchsorted(edges, values, side="right") - 1
    if special is not None:          # special values: the codes after the bins
        codes = np.where(special >= 0, coding.regular_size + special, codes)
    outside = (codes < 0) | (codes >= coding.size)
    if outside.any():  # validation rules this out; the message names no private value
        raise ValueError(f"column {name!r}: a value lies outside the bins of alternative {alternative!r}; give the alternative a clip range")
    return codes.astype(np.int64)


def _special_of(spec: Spec, col: ReleasedColumn, table: dict[str, np.ndarray]) -> np.ndarray | None:
    """Per row, the index of the special value its source holds (-1: a number); None when the
    source has no special values. Special i is typed max + 1 + i (release/data/prepare.py)."""
    meta = spec.model.input.column(col.source.column)
    if not meta.specials:
        return None
    raw = np.asarray(table[col.source.column], dtype=np.float64)
    top = float(meta.max)
    return np.where(raw > top, np.round(raw - top - 1.0), -1).astype(np.int64)


def clipped_values(spec: Spec, name: str, alternative: str, table: dict[str, np.ndarray]) -> np.ndarray:
    """The values a binned alternative of released column ``name`` bins: its source's values,
    derived, clipped to the alternative's range (float64); NaN for special values."""
    col = spec.model.column(name)
    alt = col.alternative(alternative)
    values = np.asarray(_source_values(spec, col, table), dtype=np.float64)
    values = np.clip(values, alt.clip[0], alt.clip[1]) if alt.clip is not None else values
    special = _special_of(spec, col, table)
    return values if special is None else np.where(special >= 0, np.nan, values)


def grid_signature(spec: Spec, name: str, alternative: str, table: dict[str, np.ndarray]) -> np.ndarray:
    """For a ``dp_edges`` alternative whose edges are not drawn yet: ``2 L + E`` of each value
    (derived, clipped), with ``L`` the number of candidates below it and ``E`` 1 if it is one.
    Two values with the same signature fall in the same bin whatever edges are drawn among the
    candidates, and count alike in every quantile score (:mod:`dpbundle.mechanisms.edges`)."""
    from dpbundle.mechanisms.edges import candidate_grid

    alt = spec.model.column(name).alternative(alternative)
    grid = np.asarray(candidate_grid(alt.clip, alt.dp_edges.step), dtype=np.float64)
    v = clipped_values(spec, name, alternative, table)
    below = np.searchsorted(grid, v, side="left")
    hit = (below < grid.size) & (grid[np.minimum(below, grid.size - 1)] == v)
    out = (2 * below + hit).astype(np.int64)
    special = _special_of(spec, spec.model.column(name), table)
    return out if special is None else np.where(special >= 0, -1 - special, out)


def category_lookup(alt: Alternative, source_categories: list[str],
                    removed: frozenset[str] = frozenset()) -> np.ndarray:
    """Released code of each input category (by text): ``map[c]``, else ``default``, else ``c``;
    -1 for a category that a raw constraint always removes (``spec.removed_categories``) and that
    lands on no released category (no plausible record holds it)."""
    mp, default = alt.map or {}, alt.default
    cats = list(alt.categories)
    out = []
    for c in source_categories:
        target = mp.get(c, default if default is not None else c)
        out.append(cats.index(target) if target in cats or c not in removed else -1)
    return np.array(out, dtype=np.int64)
