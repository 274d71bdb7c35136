"""What the spec says about its columns, read from the spec alone (no data): category texts,
missing markers, the range a released column's source can take, the categories a raw constraint
always removes."""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence


def _bins_of(alt: dict) -> list[tuple[float, float]] | None:
    """The [lower, upper) bins of a numeric alternative (None for categories)."""
    if "edges" in alt:
        e = alt["edges"]
        return list(zip(e[:-1], e[1:]))
    if "unit_bins" in alt:
        a, b = alt["unit_bins"]
        return [(v, v + 1) for v in range(a, b + 1)]
    return None


def category_text(value: Any) -> str | None:
    """The text of a category or category value (a cell matches a category by its text): a string
    stays itself, an integer becomes its decimal text; anything else (bool, float, ...) has none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    return None


def input_categories(meta: dict) -> list[str]:
    """The declared categories of an input column, as texts (integer codes as their decimal text)."""
    return [category_text(c) or str(c) for c in meta.get("categories", [])]


def missing_markers(doc_input: dict, meta: dict) -> list[str]:
    """Every cell text that means 'missing' in one input column: input.missing_values + its own `missing`."""
    own = [category_text(m) or str(m) for m in meta.get("missing", [])]
    return list(dict.fromkeys(list(doc_input.get("missing_values", [])) + own))


def _date_parts(text: str) -> tuple[int, int, int] | None:
    import datetime as _dt

    try:
        d = _dt.date.fromisoformat(str(text))
    except ValueError:
        return None
    return d.year, d.month, d.day


def age_between(birth: tuple[int, int, int], reference: tuple[int, int, int]) -> int:
    """Whole years from ``birth`` to ``reference`` (y, m, d): the year difference, minus one when
    the reference's (month, day) comes before the birth's (a 29 February birthday counts from
    1 March in common years)."""
    return reference[0] - birth[0] - (1 if (reference[1], reference[2]) < (birth[1], birth[2]) else 0)


def derived_range(src: dict, source: dict) -> tuple[float | None, float | None, bool]:
    """(smallest, largest, integer?) value a released column's source can take, from the spec only
    (None = unbounded on that side). month: 1..12; year: the years of the input min/max; age: the
    ages at ``reference`` of the input max/min dates; linear: a * [min, max] + b (sorted); integer
    when the source is an integer column and a, b are integers."""
    derive = source.get("derive")
    lo, hi = src.get("min"), src.get("max")
    if derive == "month":
        return 1, 12, True
    if derive in ("year", "age"):
        dlo = _date_parts(lo) if lo is not None else None
        dhi = _date_parts(hi) if hi is not None else None
        if derive == "year":
            return (dlo[0] if dlo else None), (dhi[0] if dhi else None), True
        ref = _date_parts(source.get("reference", ""))
        if ref is None:
            return None, None, True
        return (age_between(dhi, ref) if dhi else None), (age_between(dlo, ref) if dlo else None), True
    if derive == "linear":
        a, b = float(source.get("scale", 1)), float(source.get("offset", 0))
        ends = [None if v is None or isinstance(v, str) else a * float(v) + b for v in (lo, hi)]
        if a < 0:
            ends.reverse()
        integer = src.get("type") == "integer" and a.is_integer() and b.is_integer()
        return ends[0], ends[1], integer
    if isinstance(lo, str) or isinstance(hi, str):
        return None, None, src.get("type") == "integer"
    return lo, hi, src.get("type") == "integer"


def removed_categories(doc: dict) -> dict[str, frozenset[str]]:
    """Input column name -> the category texts that a raw constraint always removes.

    Only a constraint that drops every record holding the value, whatever its other cells, counts:
    a single condition ``[column, "==", v]`` or ``[column, "in", [v, ...]]`` on a category column
    (``{name: unknown origin, when: [[origin, "==", unknown]]}``). A conjunction (``[[c, "==", v],
    [age, "<", 18]]``) keeps some records with v, and ``!=`` / ``not in`` name the values they keep;
    neither counts. A removed value never reaches an alternative's ``map``: no plausible record
    holds it, so the alternatives need not map it (release, enclave replay and ``spec explain``
    agree on this rule; the audit has its own copy in ``audit/private_data.py``)."""
    inputs = {c.get("name"): c for c in (doc.get("input") or {}).get("columns") or [] if isinstance(c, dict)}
    declared = {name: input_categories(meta) for name, meta in inputs.items() if meta.get("type") == "category"}
    whens = (c.get("when") if isinstance(c, dict) else None for c in doc.get("raw_constraints") or [])
    return removed_by(declared, whens)


def removed_by(declared: Mapping[str, Sequence[str]], whens: Iterable[Any]) -> dict[str, frozenset[str]]:
    """:func:`removed_categories` from its parts: the declared category texts of every category
    column, and the ``when`` of every raw constraint (None for an ``any_missing`` one); a
    condition is ``[column, op, value]``, a list or a tuple (the typed spec's)."""
    out: dict[str, set[str]] = {}
    for when in whens:
        if not isinstance(when, (list, tuple)) or len(when) != 1 or not isinstance(when[0], (list, tuple)) \
                or len(when[0]) != 3:
            continue
        column, op, value = when[0]
        if column not in declared:
            continue
        if op == "==":
            items = [value]
        elif op == "in" and isinstance(value, (list, tuple)):
            items = value
        else:
            continue
        texts = {category_text(v) for v in items}
        known = set(declared[column])
        out.setdefault(column, set()).update(t for t in texts if t is not None and t in known)
    return {k: frozenset(v) for k, v in out.items() if v}
