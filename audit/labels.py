"""The audit's own reading of a spec: which labels each released column may carry, and the
number of each label (DESIGN / internals "Numbers of codes").

Independent of ``release/data/transform.py``: labels are derived from the selected alternative of
each column, and numbers are parsed back from the labels:

* ``"<18"``, ``"under 18"`` -> open below, number 18
* ``"44<"`` -> open above, number 44 (label style ``births-2024``: "greater than 44")
* ``"45 and over"``, ``"45+"`` -> open above, number 45 (label styles ``office``, ``plus``)
* ``"18-19"`` -> bounded, number 18.5 (midpoint of the inclusive integers)
* ``"7"``   -> 7
* categories -> the spec's ``values`` (else 0, 1, ...); a categorical alternative's ``labels``
  override what data.csv shows, its ``categories`` stay the names constraints use

The label style of a column: its ``label_style``, else the spec's, else ``births-2024`` for a spec
of format version 1 (``dpbundle_spec: 1``) and ``office`` for version 2. An open bin below the
clip range ``[b, ...)`` is ``"under b"`` (office) or ``"<b"``; one above, from a, is ``"a and
over"`` (office), ``"a+"`` (plus) or ``"(a-1)<"`` (births-2024, integer sources; ``"a<"``
otherwise).

The range of a derived source, from the spec only: ``month`` 1..12; ``year`` the years of the
input min/max; ``age`` (whole years at ``reference``) the ages of the input max/min dates;
``linear`` ``scale * [min, max] + offset`` (integer only for an integer input and integer
scale and offset).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .bounds import MAX_BINS_PER_COLUMN, MAX_COLUMNS, MAX_LABELS

__all__ = [
    "AuditColumn",
    "SpecView",
    "SpecViewError",
    "label_number",
    "LABEL_STYLES",
    "column_label_style",
    "alternative_labels",
    "build_view",
]

_NUM = r"-?\d+(?:\.\d+)?"
_RE_BELOW = re.compile(rf"^<({_NUM})$")
_RE_ABOVE = re.compile(rf"^({_NUM})<$")
_RE_UNDER = re.compile(rf"^under ({_NUM})$")
_RE_AND_OVER = re.compile(rf"^({_NUM}) and over$")
_RE_PLUS = re.compile(rf"^({_NUM})\+$")
_RE_RANGE = re.compile(rf"^({_NUM})-({_NUM})$")

#: Label styles of open bins, and the style of a spec that names none by its format version.
LABEL_STYLES = ("office", "plus", "births-2024")
_DEFAULT_STYLE = {1: "births-2024", 2: "office"}
_RE_ONE = re.compile(rf"^({_NUM})$")


class SpecViewError(ValueError):
    """The bundle's spec.json cannot be interpreted (names the field)."""


def label_number(label: str) -> float:
    """Number of a numeric label; ValueError if the label is not of a known form."""
    s = label.strip()
    m = _RE_BELOW.match(s)
    if m:
        return float(m.group(1))
    m = _RE_ABOVE.match(s) or _RE_UNDER.match(s) or _RE_AND_OVER.match(s) or _RE_PLUS.match(s)
    if m:
        return float(m.group(1))
    m = _RE_RANGE.match(s)
    if m:
        return (float(m.group(1)) + float(m.group(2))) / 2.0
    m = _RE_ONE.match(s)
    if m:
        return float(m.group(1))
    raise ValueError(f"label {label!r} is not of the form '<a', 'under a', 'a<', 'a and over', "
                     f"'a+', 'a-b' or 'a'")


def _fmt(x) -> str:
    f = float(x)
    if f.is_integer():
        return str(int(f))
    return f"{f:g}"


@dataclass(frozen=True)
class AuditColumn:
    name: str
    alternative: str
    labels: tuple[str, ...]
    numbers: np.ndarray          # float64, the number of each label
    ordered: bool
    lower: np.ndarray | None = None   # inclusive lower edge per bin (-inf when open below; nan for categories)
    upper: np.ndarray | None = None   # exclusive upper edge per bin (+inf when open above; nan for categories)
    integer: bool = True              # bins of an integer (or date-part) source hold integers only
    categories: tuple[str, ...] | None = None  # category names of a categorical column (constraints use them)
    declared_ordered: bool = False    # a categorical alternative's ``ordered: true`` (ordinal categories)
    special: tuple[str, ...] | None = None     # per code: the kind of a special value (after the bins), else ""

    @property
    def special_codes(self) -> tuple[int, ...]:
        """The codes of special values (not applicable, unknown): no number, no bounds."""
        return tuple(i for i, k in enumerate(self.special or ()) if k)

    @property
    def size(self) -> int:
        return len(self.labels)

    @property
    def categories_ordered(self) -> bool:
        """Are the column's values in their natural order, as datapackage.json's
        ``categoriesOrdered`` must state? Bins always (``ordered``); categories when the spec's
        alternative declares ``ordered: true``. ``ordered`` itself stays "binned": the
        constraints and the criteria's designs treat declared-ordered categories as categories."""
        return bool(self.ordered or self.declared_ordered)


@dataclass
class SpecView:
    spec: dict
    configuration: dict
    configuration_id: str
    columns: list[AuditColumn]
    min_count: int | None
    notes: list[str]

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def index(self, name: str) -> int:
        for j, c in enumerate(self.columns):
            if c.name == name:
                return j
        raise KeyError(name)


def _bins(alt: dict) -> list[tuple[float, float]]:
    """The bins of an alternative; SpecViewError over MAX_BINS_PER_COLUMN (before they are made:
    ``unit_bins: [0, 10**12]`` is two numbers in spec.json and 10^12 bins)."""
    if "edges" in alt:
        if len(alt["edges"]) - 1 > MAX_BINS_PER_COLUMN:
            raise SpecViewError(f"alternative {_short(alt.get('id'))}: {len(alt['edges']) - 1:,} bins, "
                                f"more than the limit of {MAX_BINS_PER_COLUMN:,} per column")
        e = [float(x) for x in alt["edges"]]
        return list(zip(e[:-1], e[1:]))
    a, b = alt["unit_bins"]
    span = int(b) - int(a) + 1
    if span > MAX_BINS_PER_COLUMN:
        raise SpecViewError(f"alternative {_short(alt.get('id'))}: unit_bins {_short([a, b])} make {span:,} "
                            f"bins, more than the limit of {MAX_BINS_PER_COLUMN:,} per column")
    return [(float(v), float(v) + 1.0) for v in range(int(a), int(b) + 1)]


class AmbiguousAlternative(SpecViewError):
    """The configuration does not name a column's alternative and the labels seen do not single
    one out (the view is built again with the labels data.csv holds)."""


def _alternative_size(alt: dict) -> int:
    """The number of bins or categories of an alternative, from its size fields alone."""
    if isinstance(alt.get("categories"), list):
        return len(alt["categories"])
    if isinstance(alt.get("edges"), list):
        return max(len(alt["edges"]) - 1, 0)
    ub = alt.get("unit_bins")
    if isinstance(ub, list) and len(ub) == 2 and all(isinstance(x, int) for x in ub):
        return max(ub[1] - ub[0] + 1, 0)
    return 1


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 80 else text[:80] + "..."


def column_label_style(spec: dict, column: dict) -> str:
    """The label style of a released column (see the module doc); SpecViewError if unknown."""
    style = column.get("label_style") or spec.get("label_style")
    if style is None:
        version = spec.get("dpbundle_spec")
        if not isinstance(version, int) or isinstance(version, bool) or version not in _DEFAULT_STYLE:
            raise SpecViewError(f"spec.json: unknown spec format version dpbundle_spec {_short(version)}")
        style = _DEFAULT_STYLE[version]
    if style not in LABEL_STYLES:
        raise SpecViewError(f"spec.json: column {_short(column.get('name'))}: unknown label_style "
                            f"{_short(style)}")
    return style


def _open_label(style: str, below: bool, edge: float, integer: bool) -> str:
    """The label of an open bin: below the range (``edge`` = its upper edge b) or above it
    (``edge`` = its lower edge a)."""
    if below:
        return f"under {_fmt(edge)}" if style == "office" else f"<{_fmt(edge)}"
    if style == "office":
        return f"{_fmt(edge)} and over"
    if style == "plus":
        return f"{_fmt(edge)}+"
    return f"{_fmt(edge - 1 if integer else edge)}<"


def alternative_labels(column: dict, alt: dict, input_column: dict | None,
                       style: str = "births-2024") -> tuple[list[str], list[float], bool]:
    """(labels, numbers, ordered) of one alternative of a released column."""
    labels, numbers, ordered, _ = alternative_coding(column, alt, input_column, style)
    return labels, numbers, ordered


def alternative_coding(column: dict, alt: dict, input_column: dict | None, style: str = "births-2024"):
    """(labels, numbers, ordered, (lower, upper, integer)) of one alternative; ``style``: the
    column's label style (:func:`column_label_style`)."""
    if "categories" in alt:
        if len(alt["categories"]) > MAX_BINS_PER_COLUMN:
            raise SpecViewError(f"column {_short(column.get('name'))}: {len(alt['categories']):,} "
                                f"categories, more than the limit of {MAX_BINS_PER_COLUMN:,} per column")
        names = [str(c) for c in alt["categories"]]
        labels = [str(c) for c in alt["labels"]] if "labels" in alt else names
        if len(labels) != len(names) or len(set(labels)) != len(labels):
            raise SpecViewError(f"column {column.get('name')!r}: {len(labels)} labels for {len(names)} categories "
                                f"(labels must be distinct)")
        values = alt.get("values")
        if values is None:
            values = list(range(len(labels)))
        if len(values) != len(labels):
            raise SpecViewError(f"column {column.get('name')!r}: {len(values)} values for {len(labels)} categories")
        nan = np.full(len(labels), np.nan)
        return labels, [float(v) for v in values], False, (nan, nan, False)
    if "edges" not in alt and "unit_bins" not in alt:
        raise SpecViewError(f"column {column.get('name')!r}, alternative {alt.get('id')!r}: no edges, unit_bins or categories")
    try:
        bins = _bins(alt)
    except SpecViewError as e:
        raise SpecViewError(f"spec.json: column {_short(column.get('name'))}, {e}") from None
    clip = alt.get("clip")
    src_min = src_max = None
    integer = True
    if input_column is not None:
        src_min, src_max = input_column.get("min"), input_column.get("max")
        integer = input_column.get("type", "integer") in ("integer", "date")
    below = above = False
    if clip is not None:
        lo, hi = float(clip[0]), float(clip[1])
        below = src_min is None or float(src_min) < lo
        above = src_max is None or float(src_max) > hi
    default_labels, rule_numbers = [], []
    for i, (a, b) in enumerate(bins):
        last = b - 1 if integer else b
        if i == 0 and below:
            default_labels.append(_open_label(style, True, b, integer))
            rule_numbers.append(b)
        elif i == len(bins) - 1 and above:
            default_labels.append(_open_label(style, False, a, integer))
            rule_numbers.append(a - 1 if style == "births-2024" and integer else a)
        elif integer and last == a:
            default_labels.append(_fmt(a))
            rule_numbers.append(a)
        else:
            default_labels.append(f"{_fmt(a)}-{_fmt(last)}")
            rule_numbers.append((a + last) / 2.0)
    labels = [str(s) for s in alt["labels"]] if "labels" in alt else default_labels
    if len(labels) != len(bins):
        raise SpecViewError(f"column {column.get('name')!r}: {len(labels)} labels for {len(bins)} bins")
    if "values" in alt:
        numbers = [float(v) for v in alt["values"]]
        if len(numbers) != len(labels):
            raise SpecViewError(f"column {column.get('name')!r}: {len(numbers)} values for {len(labels)} bins")
    elif "labels" in alt:
        numbers = [float(x) for x in rule_numbers]
    else:
        try:
            numbers = [label_number(s) for s in labels]
        except ValueError as e:
            raise SpecViewError(f"column {column.get('name')!r}: {e}") from None
    lower = np.array([a for a, _ in bins], dtype=np.float64)
    upper = np.array([b for _, b in bins], dtype=np.float64)
    if below:
        lower[0] = -np.inf
    if above:
        upper[-1] = np.inf
    return labels, numbers, True, (lower, upper, integer)


SPECIAL_KINDS = ("not_applicable", "unknown")


def _special_kinds(alt: dict, spec: dict, src, input_column) -> list[tuple[str, str]]:
    """(label, kind) of each special value of a binned alternative's source (``input.columns[]
    .special``), in the spec's order; [] for categories and sources without special values."""
    if "categories" in alt or not isinstance(src, dict):
        return []
    inputs = {c.get("name"): c for c in (spec.get("input") or {}).get("columns") or [] if isinstance(c, dict)}
    specials = (inputs.get(src.get("column")) or {}).get("special") or []
    if not isinstance(specials, list):
        raise SpecViewError("spec.json: an input column's special is not a list")
    out = []
    for sp in specials:
        if not isinstance(sp, dict) or not isinstance(sp.get("label"), str) or sp.get("kind") not in SPECIAL_KINDS:
            raise SpecViewError("spec.json: a special value needs a label and a kind "
                                f"({' or '.join(SPECIAL_KINDS)})")
        out.append((sp["label"], sp["kind"]))
    return out


def _iso(text) -> tuple[int, int, int] | None:
    m = re.match(r"^(\d{4})-(\d{2})-(\d{2})$", str(text)) if text is not None else None
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def whole_years(birth: tuple[int, int, int], ref: tuple[int, int, int]) -> int:
    """Completed years from ``birth`` to ``ref``: one less than the year difference while the
    reference's (month, day) precedes the birth's."""
    return ref[0] - birth[0] - int((ref[1], ref[2]) < (birth[1], birth[2]))


def source_domain(input_column: dict | None, source: dict) -> dict | None:
    """The {min, max, type} of the values a released column's bins see (see the module doc)."""
    derive = source.get("derive")
    if derive == "month":
        return {"min": 1, "max": 12, "type": "integer"}
    if input_column is None or derive not in ("year", "age", "linear"):
        return input_column
    lo, hi = input_column.get("min"), input_column.get("max")
    if derive == "year":
        a, b = _iso(lo), _iso(hi)
        return {"min": a[0] if a else None, "max": b[0] if b else None, "type": "integer"}
    if derive == "age":
        ref = _iso(source.get("reference"))
        if ref is None:
            raise ValueError(f"age reference {source.get('reference')!r} is not an ISO date")
        a, b = _iso(lo), _iso(hi)
        return {"min": whole_years(b, ref) if b else None, "max": whole_years(a, ref) if a else None,
                "type": "integer"}
    scale, offset = float(source["scale"]), float(source.get("offset", 0))
    ends = [None if v is None else scale * float(v) + offset for v in (lo, hi)]
    if scale < 0:
        ends = ends[::-1]
    integer = input_column.get("type") == "integer" and scale.is_integer() and offset.is_integer()
    return {"min": ends[0], "max": ends[1], "type": "integer" if integer else "float"}


# -- the selected configuration ---------------------------------------------------------

_COLUMN_KEYS = ("columns", "transformations", "alternatives", "column_alternatives")


def _selected_ids(configuration: dict) -> dict[str, str]:
    """Released column -> alternative id, from the forms a configuration may take."""
    out: dict[str, str] = {}
    for key in _COLUMN_KEYS:
        v = configuration.get(key)
        if isinstance(v, dict):
            for name, alt in v.items():
                if isinstance(alt, str):
                    out[str(name)] = alt
                elif isinstance(alt, dict):
                    for k in ("id", "alternative", "alternative_id"):
                        if isinstance(alt.get(k), str):
                            out[str(name)] = alt[k]
                            break
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    name = item.get("column", item.get("name"))
                    alt = item.get("alternative", item.get("id", item.get("alternative_id")))
                    if isinstance(name, str) and isinstance(alt, str):
                        out[name] = alt
    return out


def _min_count(configuration: dict) -> int | None:
    candidates = []
    proj = configuration.get("projection")
    if isinstance(proj, dict):
        candidates.append(proj.get("min_count"))
    elif isinstance(proj, int):
        candidates.append(proj)
    candidates.append(configuration.get("min_count"))
    candidates.append(configuration.get("projection_min_count"))
    for c in candidates:
        if isinstance(c, int) and not isinstance(c, bool):
            return c
    return None


def build_view(spec_json: dict, observed: dict[str, set[str]] | None = None) -> SpecView:
    """Interpret spec.json (``{"spec", "configuration", "configuration_id"}``).

    The alternative of each column is read from the configuration; if the configuration does
    not name it and the column has one alternative, that one; else the single alternative whose
    labels cover the labels ``observed`` in data.csv (SpecViewError if ambiguous).
    """
    spec, configuration, cols = _spec_parts(spec_json)
    builder = _ViewBuilder(spec, configuration, observed)
    out = [builder.column(i, col) for i, col in enumerate(cols)]
    cid = spec_json.get("configuration_id")
    return SpecView(spec=spec, configuration=configuration,
                    configuration_id=cid if isinstance(cid, str) else "",
                    columns=out, min_count=_min_count(configuration), notes=builder.notes)


def _spec_parts(spec_json: dict) -> tuple[dict, dict, list]:
    """spec.json's spec, configuration and released columns (a non-empty list within the limit)."""
    if not isinstance(spec_json, dict):
        raise SpecViewError("spec.json: not an object")
    spec = spec_json.get("spec")
    configuration = spec_json.get("configuration")
    if not isinstance(spec, dict):
        raise SpecViewError("spec.json: missing 'spec' object")
    if not isinstance(configuration, dict):
        raise SpecViewError("spec.json: missing 'configuration' object")
    cols = spec.get("columns")
    if not isinstance(cols, list) or not cols:
        raise SpecViewError("spec.json: spec.columns missing or empty")
    if len(cols) > MAX_COLUMNS:
        raise SpecViewError(f"spec.json: {len(cols):,} released columns, more than the limit of "
                            f"{MAX_COLUMNS:,}")
    return spec, configuration, cols


class _ViewBuilder:
    """The released columns of :func:`build_view`, one by one, with the label counts bounded
    across all of them (``tried``: labels made to infer alternatives; ``total``: labels released)."""

    def __init__(self, spec: dict, configuration: dict, observed: dict[str, set[str]] | None) -> None:
        self.spec = spec
        self.inputs = {}
        for c in (spec.get("input") or {}).get("columns", []) or []:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                self.inputs[c["name"]] = c
        self.chosen = _selected_ids(configuration)
        self.observed = observed
        self.notes: list[str] = []
        self.total = self.tried = 0

    def column(self, i: int, col) -> AuditColumn:
        """The i-th released column, coded under its selected alternative."""
        if not isinstance(col, dict) or not isinstance(col.get("name"), str):
            raise SpecViewError(f"spec.json: spec.columns[{i}] has no name")
        name = col["name"]
        alts = col.get("alternatives")
        if not isinstance(alts, list) or not alts or not all(isinstance(a, dict) for a in alts):
            raise SpecViewError(f"spec.json: spec.columns[{i}].alternatives missing")
        style = column_label_style(self.spec, col)
        src = col.get("source") or {}
        input_column = self.inputs.get(src.get("column")) if isinstance(src, dict) else None
        if isinstance(src, dict):
            try:
                input_column = source_domain(input_column, src)
            except (TypeError, ValueError) as e:
                raise SpecViewError(f"spec.json: column {name!r}: unusable source ({e})") from None
        by_id = {a.get("id"): a for a in alts}
        try:
            alt = self._alternative(col, by_id, input_column, style)
            labels, numbers, ordered, (lower, upper, integer) = alternative_coding(col, alt, input_column, style)
        except SpecViewError:
            raise
        except (TypeError, KeyError, IndexError, ValueError) as e:
            raise SpecViewError(f"spec.json: column {_short(name)}: malformed alternative ({e})") from None
        kinds = _special_kinds(alt, self.spec, src, input_column)
        if kinds:    # special values of the source: after the bins, no number, no bounds
            labels = [*labels, *(label for label, _ in kinds)]
            numbers = [*numbers, *([math.nan] * len(kinds))]
            nan = np.full(len(kinds), np.nan)
            lower, upper = np.concatenate([lower, nan]), np.concatenate([upper, nan])
            if len(set(labels)) != len(labels):
                raise SpecViewError(f"spec.json: column {name!r}: a special value's label is also a bin's")
        regular = numbers[:len(numbers) - len(kinds)]
        if any(not math.isfinite(x) for x in regular):
            raise SpecViewError(f"spec.json: column {name!r}: non-finite bin number")
        self.total += len(labels)
        if self.total > MAX_LABELS:
            raise SpecViewError(f"spec.json: the released columns have more than {MAX_LABELS:,} "
                                f"labels in all (the limit)")
        cats = tuple(str(c) for c in alt["categories"]) if "categories" in alt else None
        return AuditColumn(name=name, alternative=str(alt.get("id")), labels=tuple(labels),
                           numbers=np.asarray(numbers, dtype=np.float64), ordered=ordered,
                           lower=lower, upper=upper, integer=integer, categories=cats,
                           declared_ordered=cats is not None and alt.get("ordered") is True,
                           special=("",) * (len(labels) - len(kinds)) + tuple(k for _, k in kinds)
                           if kinds else None)

    def _alternative(self, col: dict, by_id: dict, input_column: dict | None, style: str) -> dict:
        """The column's alternative: the configuration's, the only one, or the one data.csv fits."""
        name, alts = col["name"], col["alternatives"]
        if name in self.chosen:
            if self.chosen[name] not in by_id:
                raise SpecViewError(
                    f"spec.json: configuration selects alternative {self.chosen[name]!r} for column "
                    f"{name!r}, which the spec does not declare"
                )
            return by_id[self.chosen[name]]
        if len(alts) == 1:
            return alts[0]
        seen = (self.observed or {}).get(name)
        fits = []
        for a in alts:
            self.tried += _alternative_size(a)   # bounded before the labels are made
            if self.tried > MAX_LABELS:
                raise SpecViewError(f"spec.json: inferring the alternatives of the columns "
                                    f"would make more than {MAX_LABELS:,} labels (the limit)")
            labels, _, _ = alternative_labels(col, a, input_column, style)
            if seen is not None and seen <= set(labels):
                fits.append(a)
        if len(fits) != 1:
            raise AmbiguousAlternative(
                f"spec.json: the configuration does not name the alternative of column "
                f"{name!r} and the data fit {len(fits)} of its alternatives"
            )
        self.notes.append(f"{name}: alternative {fits[0].get('id')!r} inferred from data.csv")
        return fits[0]
