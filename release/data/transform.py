"""One configuration's transformations: clip, bin and code every released column.

Everything here comes from the public spec: clip ranges, bin edges, labels and the number of each
bin. The rules (DESIGN.md, and the labels of the 2024 births release):

* bins are left-closed ``[a, b)``; values are clipped into the clip range first;
* labels: a bin holding one integer is ``"a"``, a wider one ``"a-(b-1)"`` (e.g. ``"18-19"``); the
  first bin is open below when values below the clip minimum are possible (the input range allows
  them), the last open above when values above the clip maximum are possible. Open bins are
  labelled in the spec's label style (:func:`label_style`, :func:`open_bin`): ``office`` ``"under
  18"`` / ``"45 and over"``, ``plus`` ``"<18"`` / ``"45+"``, ``births-2024`` (the 2024 births
  release) ``"<18"`` / ``"44<"`` ("greater than 44");
* the number of a bin (used by means, regression and synthetic constraints): a single value is
  itself, a bounded bin its midpoint over the integers it holds (``"18-19"`` -> 18.5), an open bin
  the number in its label (``"<18"`` and ``"under 18"`` -> 18, ``"44<"`` -> 44, ``"45 and over"``
  and ``"45+"`` -> 45); categories take the spec's ``values`` (default 0, 1, ...). A spec may
  override labels and values per alternative (a categorical alternative's ``labels`` only change
  what data.csv shows: constraints still name its ``categories``; a binned alternative's
  ``labels`` keep the style's numbers);
* sources: a date's ``month``/``year``, its ``age`` in whole years at ``source.reference``, or a
  ``linear`` recode ``scale * x + offset`` of a number; an input category goes to
  ``map[c]``, else to ``default``, else to the released category of the same text (a category
  that a raw constraint always removes need not land anywhere: ``spec.removed_categories``);
* ``ColumnCoding.lower``/``upper`` are the bin's edges, infinite on the open side of an open bin.
"""
from __future__ import annotations

import json
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from dpbundle.mechanisms.cells import (RecordTypes, compact_dtype, deferred, domain_cells, types_from_rows,
                                      types_from_weighted)
from dpbundle.mechanisms.coding import Coded, ColumnCoding

from dpbundle.release.data.binning import _age, _source_values, category_lookup, code_column  # noqa: F401
from dpbundle.release.data.prepare import Prepared
from dpbundle.release.spec.coding import (  # noqa: F401  (also importable from here)
    DEFAULT_LABEL_STYLE, LABEL_STYLES, _bins, _fmt, _source_range, codings, column_coding, label_style, open_bin)
from dpbundle.release.spec.model import Spec


def _distinct_codes(prepared: Prepared, spec: Spec, config: dict) -> tuple[list[ColumnCoding], np.ndarray]:
    """The configuration's codings and the int64 codes of every distinct prepared row."""
    cols = codings(spec, config)
    size = len(prepared.counts)
    codes = np.empty((size, len(cols)), dtype=np.int64)
    for j, c in enumerate(cols):
        codes[:, j] = code_column(spec, c.name, config["columns"][c.name], prepared.distinct, c)
    return cols, codes


def _rows(prepared: Prepared, cols: list[ColumnCoding], distinct_codes: np.ndarray) -> np.ndarray:
    """T's rows: each record's distinct row's codes, in file order, then resized (dp_count)."""
    codes = np.take(distinct_codes, prepared.index, axis=0)
    if prepared.resize is not None:  # dp_count: resized to the DP count (mechanisms/records.py)
        codes = prepared.resize.apply(codes, [c.size for c in cols])
    return np.ascontiguousarray(codes, dtype=np.int64)


def transform(prepared: Prepared, spec: Spec, config: dict) -> Coded:
    """T = transform(original, config): the integer-coded released columns of the prepared data
    (coded once per distinct row, gathered per record)."""
    cols, distinct_codes = _distinct_codes(prepared, spec, config)
    return Coded(codes=_rows(prepared, cols, distinct_codes), columns=cols)


def _types(prepared: Prepared, cols: list[ColumnCoding], distinct_codes: np.ndarray) -> RecordTypes | None:
    """T's record types without T's rows: the distinct rows' cells weighted by their records
    (under dp_count: the kept records' and the pads'); the same as ``types_from_rows`` of T's
    rows (ascending cells, int64 counts). None when the domain has no int64 cell index."""
    domain = tuple(c.size for c in cols)
    if domain_cells(domain) is None:
        return None
    plan = prepared.resize
    if plan is None:
        return types_from_weighted(distinct_codes, prepared.counts, cols)
    pads = plan.pad_rows(domain)
    return types_from_weighted(np.concatenate([distinct_codes, pads]),
                               np.concatenate([plan.kept_counts(prepared.index, len(distinct_codes)),
                                               np.ones(len(pads), dtype=np.int64)]), cols)


#: Binnings whose T is kept per prepared table (the distinct rows' codes and T's record types).
T_CACHE_SIZE = 4
# id(prepared) -> OrderedDict[binning key, _Entry]; private: in this process's memory only, never
# pickled or written anywhere; the entries go with their Prepared.
_T_CACHE: dict[int, OrderedDict] = {}


class _Entry:
    """One cached binning: what it was computed from, the codes of the distinct prepared rows,
    T's record types, and (weakly) the T last handed out, shared while some result holds it."""

    def __init__(self, prepared: Prepared, spec: Spec, config: dict) -> None:
        self.table, self.resize, self.index = prepared.distinct, prepared.resize, prepared.index
        self.cols, self.distinct_codes = _distinct_codes(prepared, spec, config)
        types = _types(prepared, self.cols, self.distinct_codes)
        if types is None:   # a domain without int64 cells: from the rows, as before
            types = types_from_rows(_rows(prepared, self.cols, self.distinct_codes), self.cols)
        self.types = types
        self.shared = lambda: None

    def fresh(self, prepared: Prepared) -> bool:
        return self.table is prepared.distinct and self.resize is prepared.resize and self.index is prepared.index

    def coded(self, prepared: Prepared) -> Coded:
        """T (its rows deferred, its record types remembered); the same object while an earlier
        result still holds it."""
        real = self.shared()
        if real is None:
            cols, distinct_codes = self.cols, self.distinct_codes
            real = deferred(self.types, lambda: _rows(prepared, cols, distinct_codes))
            self.shared = weakref.ref(real)
        return real


def binning_key(spec: Spec, config: dict) -> str:
    """What determines T besides the prepared data: the released and input column definitions
    of the spec, their label styles and the configuration's alternative of every column
    (canonical JSON)."""
    model = spec.model
    part = {"columns": [c.to_document() for c in model.columns],
            "input": [c.to_document() for c in model.input.columns],
            "chosen": {name: config["columns"][name] for name in model.column_names},
            "label_styles": [model.label_style_of(col) for col in model.columns]}
    return json.dumps(part, sort_keys=True, separators=(",", ":"), default=str)


def _entries(prepared: Prepared) -> OrderedDict:
    key = id(prepared)
    if key not in _T_CACHE:
        _T_CACHE[key] = OrderedDict()
        weakref.finalize(prepared, _T_CACHE.pop, key, None)
    return _T_CACHE[key]


def cached_transform(prepared: Prepared, spec: Spec, config: dict) -> Coded:
    """:func:`transform`, as record types: computed once per prepared table and binning (at
    most ``T_CACHE_SIZE`` binnings per table, in memory only) from the distinct prepared rows.
    Returns T with its record types remembered (``dpbundle.mechanisms.cells``) and its rows
    (those of a fresh transform, same order, read-only int64) built only if read."""
    entries = _entries(prepared)
    key = binning_key(spec, config)
    entry = entries.get(key)
    if entry is None or not entry.fresh(prepared):
        entry = entries[key] = _Entry(prepared, spec, config)
        while len(entries) > T_CACHE_SIZE:
            entries.popitem(last=False)
    entries.move_to_end(key)
    return entry.coded(prepared)


def labels_to_codes(coding: ColumnCoding, labels) -> np.ndarray:
    """Map labels back to codes (KeyError naming an unknown label)."""
    lookup = {label: i for i, label in enumerate(coding.labels)}
    try:
        return np.array([lookup[s] for s in labels], dtype=np.int64)
    except KeyError as exc:
        raise KeyError(f"column {coding.name!r}: unknown label {exc.args[0]!r} (declared: {', '.join(coding.labels)})") from None


def codes_to_labels(coding: ColumnCoding, codes: np.ndarray) -> np.ndarray:
    """Map codes to their labels."""
    return np.asarray(coding.labels, dtype=object)[codes]


# --------------------------------------------------------------------------- spec validate --data

#: A synthetic constraint whose columns have more binnings than this is summarised (the binnings
#: with the fewest and the most records removed) rather than listed binning by binning.
MAX_LISTED_BINNINGS = 12
#: At most this many binnings of one constraint's columns are evaluated (in the order of the
#: alternatives); a constraint naming many columns with many alternatives each says so.
MAX_EVALUATED_BINNINGS = 256


@dataclass(frozen=True)
class ConstraintHits:
    """What one synthetic constraint would remove from the real plausible records under one
    binning of the columns it names (PRIVATE: counts of the confidential data; printed by
    ``spec validate --data`` inside the enclave only, never by ``release``)."""

    index: int                       # position in synthetic_constraints
    name: str
    binning: tuple[tuple[str, str], ...]  # (released column, alternative id) of each column it names
    removed: int                     # plausible records it would remove
    n: int                           # plausible records
    binnings: int                    # binnings of this constraint's columns in all (public)

    @property
    def share(self) -> float:
        return self.removed / self.n if self.n else 0.0


def synthetic_constraint_hits(prepared: Prepared, spec: Spec) -> list[ConstraintHits]:
    """Every synthetic constraint evaluated on the real plausible records, under every binning of
    the columns it names (a constraint's matches depend on those columns' alternatives only, so
    these are all the outcomes any configuration can give; at most ``MAX_EVALUATED_BINNINGS`` per
    constraint). Rows of the prepared table (before any resize; once per distinct row, counted with
    its records), each coded as a release codes it
    and tested as the iteration tests synthetic rows
    (:func:`~dpbundle.release.data.constraints.bin_condition`: a bin matches when every value it stands
    for does). A rule that removes real plausible records is probably wrong: synthetic constraints
    should only remove combinations that cannot occur."""
    from itertools import islice, product
    from math import prod

    from dpbundle.release.data.constraints import bin_condition

    coded: dict[tuple[str, str], tuple[ColumnCoding, np.ndarray]] = {}

    def codes_of(name: str, alternative: str) -> tuple[ColumnCoding, np.ndarray]:
        key = (name, alternative)
        if key not in coded:
            coding = column_coding(spec, name, alternative)
            codes = code_column(spec, name, alternative, prepared.distinct, coding)
            coded[key] = coding, codes.astype(compact_dtype([coding.size]))  # per distinct row
        return coded[key]

    n = prepared.rows
    counts = prepared.counts
    size = len(counts)
    out = []
    for i, constraint in enumerate(spec.model.all_synthetic_constraints):
        when = constraint.when
        names = list(dict.fromkeys(column for column, _, _ in when))
        choices = [spec.model.column(name).alternative_ids for name in names]
        masks: dict[tuple[int, str], np.ndarray] = {}  # (condition, alternative) -> rows meeting it

        def meets(j: int, alternative: str) -> np.ndarray:
            if (j, alternative) not in masks:
                column, op, value = when[j]
                coding, codes = codes_of(column, alternative)
                masks[(j, alternative)] = bin_condition(coding, op, value)[codes]
            return masks[(j, alternative)]

        total = prod(len(c) for c in choices)
        for combo in islice(product(*choices), MAX_EVALUATED_BINNINGS):
            chosen = dict(zip(names, combo))
            mask = np.ones(size, dtype=bool)
            for j, (column, _, _) in enumerate(when):
                mask &= meets(j, chosen[column])
            out.append(ConstraintHits(i, constraint.name, tuple(chosen.items()), int(counts[mask].sum()), n, total))
    return out
