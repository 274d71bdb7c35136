"""Where a released column comes from, in words: the input column's header (the text of the
confidential file's header, as the public spec declares it) and the recode that made the
released values (``age = whole years from "date of birth" to 2023-03-15``, ``1 → male``),
from spec.json and the selected configuration only."""
from __future__ import annotations

from typing import Any

from .numbers import plain

__all__ = ["provenance_text", "selected_alternative"]

_ARROW = "\u2192"
_MAX_LISTED = 6


def selected_alternative(spec: dict, configuration: dict, name: str) -> dict | None:
    """The spec's alternative of column ``name`` that the configuration selected (None if unknown)."""
    col = next((c for c in spec.get("columns") or [] if isinstance(c, dict) and c.get("name") == name), None)
    if not col:
        return None
    alts = [a for a in col.get("alternatives") or [] if isinstance(a, dict)]
    chosen = None
    cfg = configuration.get("columns") if isinstance(configuration.get("columns"), dict) else {}
    if name in cfg:
        chosen = cfg[name]
        if isinstance(chosen, dict):
            chosen = chosen.get("id")
    found = next((a for a in alts if a.get("id") == chosen), None)
    if found is None and len(alts) == 1:
        found = alts[0]
    return found


def _quote(text: Any) -> str:
    return f"\u201c{text}\u201d"


def _input(spec: dict, name: str) -> dict:
    cols = (spec.get("input") or {}).get("columns") or []
    return next((c for c in cols if isinstance(c, dict) and c.get("name") == name), {"name": name})


def _recode_text(alt: dict, inp: dict) -> str:
    """``1 → male, 2 → female``, grouped by released category when many inputs share one."""
    cats = [str(c) for c in alt.get("categories") or []]
    mapping = {str(k): str(v) for k, v in (alt.get("map") or {}).items()}
    default = alt.get("default")
    if inp.get("type") == "boolean" and not mapping:
        return ""
    if mapping and all(k == v for k, v in mapping.items()) and default is None:
        return "the input's categories, unchanged"
    if not mapping and default is None:
        return "the input's categories, unchanged"
    groups: dict[str, list[str]] = {c: [] for c in cats}
    for k, v in mapping.items():
        groups.setdefault(v, []).append(k)
    parts = []
    for target, sources in groups.items():
        if target == default and not sources:
            continue
        if not sources:
            if target in cats and default != target:
                parts.append(f"{target} {_ARROW} {target}")
            continue
        if len(sources) == 1:
            parts.append(f"{sources[0]} {_ARROW} {target}")
        else:
            shown = ", ".join(sources[:_MAX_LISTED])
            more = f" and {len(sources) - _MAX_LISTED} more" if len(sources) > _MAX_LISTED else ""
            parts.append(f"{shown}{more} {_ARROW} {target}")
    if default is not None:
        parts.append(f"every other value {_ARROW} {default}")
    return "; ".join(parts)


def provenance_text(spec: dict, configuration: dict, name: str, unit: str = "") -> str:
    """One phrase: the input column (by its header) and the recode of column ``name``, e.g.
    ``input column “hours per week”, clipped to the range 1 to 80 hours, in the bins listed``."""
    from .numbers import with_unit

    col = next((c for c in spec.get("columns") or [] if isinstance(c, dict) and c.get("name") == name), None)
    if not col or not isinstance(col.get("source"), dict):
        return ""
    src = col["source"]
    inp = _input(spec, str(src.get("column", "")))
    header = _quote(inp.get("header") or inp.get("name") or src.get("column"))
    alt = selected_alternative(spec, configuration, name) or {}
    derive = src.get("derive")
    if derive == "month":
        text = f"the month (1 to 12) of the input column {header}"
    elif derive == "year":
        text = f"the year of the input column {header}"
    elif derive == "age":
        text = f"whole years from the input column {header} to {src.get('reference', '')}"
    elif derive == "linear":
        scale, offset = src.get("scale", 1), src.get("offset", 0) or 0
        expr = header if scale == 1 else f"{plain(scale)} \u00d7 {header}"
        if offset:
            expr += f" {'+' if offset > 0 else chr(0x2212)} {plain(abs(offset))}"
        text = f"{name} = {expr} (input column {header})"
    else:
        text = f"input column {header}"
    if "categories" in alt:
        recode = _recode_text(alt, inp)
        if inp.get("type") == "boolean" and alt.get("map"):
            recode = ", ".join(f"{k} {_ARROW} {v}" for k, v in alt["map"].items())
        return text + (f", recoded: {recode}" if recode else "")
    clip = alt.get("clip")
    if isinstance(clip, list) and len(clip) == 2:
        text += f", clipped to the range {plain(clip[0])} to {with_unit(plain(clip[1]), unit)}"
    if "edges" in alt or "unit_bins" in alt:
        text += ", in the bins listed"
    specials = [sp for sp in inp.get("special") or [] if isinstance(sp, dict)] if "categories" not in alt else []
    if specials:
        shown = "; ".join(f"\u201c{sp.get('label')}\u201d ({str(sp.get('kind', '')).replace('_', ' ')}, "
                          f"recorded {sp.get('value')})" for sp in specials)
        text += (f"; special values (not numbers): {shown}" if len(specials) > 1 else
                 f"; a special value (not a number): {shown}")
    if isinstance(alt.get("dp_edges"), dict):
        d = alt["dp_edges"]
        text += (f", whose {plain(d.get('bins'))} bins were chosen under differential privacy: each inner edge "
                 f"is a DP quantile of the real records (ε = {plain(d.get('epsilon'))} for all of them)")
    return text
