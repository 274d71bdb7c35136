"""The rules of ``dp_edges`` alternatives (bins whose edges the release draws under DP; docs/spec.md
"Bins chosen under DP"), from the spec alone: what the edges will be drawn among, and what in the
spec would need to know them before they exist."""
from __future__ import annotations

from dpbundle.mechanisms.edges import candidate_grid

__all__ = ["dp_edges_alternatives", "dp_edges_problems"]


def dp_edges_alternatives(doc: dict) -> list[tuple[int, int, dict, dict]]:
    """(column index, alternative index, column, alternative) of every ``dp_edges`` alternative."""
    return [(i, j, col, alt) for i, col in enumerate(doc.get("columns") or [])
            for j, alt in enumerate(col.get("alternatives") or []) if "dp_edges" in alt]


def _label_number(x: float) -> str:
    """A number as the generated bin labels show it (release/spec/coding.py's rule: 6 significant
    digits, whole numbers without a decimal point)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _whole(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and float(x).is_integer()


def dp_edges_problems(doc: dict) -> list[str]:
    """``path: message`` for each rule a ``dp_edges`` alternative breaks."""
    problems: list[str] = []
    found = dp_edges_alternatives(doc)
    if not found:
        return problems
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    if (doc.get("privacy") or {}).get("definition") == "zcdp":
        problems.append("privacy.definition: dp_edges alternatives are drawn under pure DP; a zCDP "
                        "spec cannot have them yet (give the bins as edges)")
    names = {col["name"] for _, _, col, _ in found}
    for i, j, col, alt in found:
        path = f"columns[{i}].alternatives[{j}]"
        d = alt["dp_edges"]
        if "edges" in alt:
            problems.append(f"{path}.edges: the release draws the edges of a dp_edges alternative; "
                            "remove `edges` (a bundle's spec.json carries the edges its release drew)")
        if not isinstance(alt.get("clip"), list):
            problems.append(f"{path}.clip: dp_edges draws its edges inside a public clip range [min, max]: "
                            "give one")
            continue
        src = inputs.get(col["source"]["column"]) or {}
        whole = src.get("type") in ("integer", "date") and col["source"].get("derive") != "linear"
        if "step" not in d and not whole:
            problems.append(f"{path}.dp_edges.step: needed for a {src.get('type', 'numeric')} column "
                            f"{'derived linearly ' if col['source'].get('derive') == 'linear' else ''}(the "
                            "candidate edges are clip[0] + i x step; the default 1 suits whole numbers)")
            continue
        try:
            grid = candidate_grid(alt["clip"], d.get("step"))
        except ValueError as exc:
            problems.append(f"{path}.dp_edges: {exc}")
            continue
        if whole and (not _whole(d.get("step", 1)) or not all(_whole(v) for v in alt["clip"])):
            problems.append(f"{path}.dp_edges: a column of whole numbers needs a whole step and whole clip "
                            f"ends (got step {d.get('step', 1)!r}, clip {alt['clip']}): other edges would make "
                            "bins no value can fall in, and labels that say otherwise")
            continue
        shown = [_label_number(v) for v in [alt["clip"][0], *grid]]
        if len(set(shown)) < len(shown):
            problems.append(f"{path}.dp_edges.step: two candidate edges would be labelled alike (labels show "
                            "6 significant digits): take a larger step or a narrower clip range")
            continue
        if len(grid) < d["bins"] - 1:
            problems.append(f"{path}.dp_edges.bins: {d['bins']} bins need {d['bins'] - 1} candidate "
                            f"edges, and the clip range {alt['clip']} with step {d.get('step', 1)} has "
                            f"{len(grid)}")
    for name in sorted(names & set(doc.get("group_bins") or {})):
        problems.append(f"group_bins.{name}: the column has a dp_edges alternative, whose bins are "
                        "drawn at release time: group edges cannot be checked against them")
    for k, c in enumerate(doc.get("synthetic_constraints") or []):
        if any(cond and cond[0] in names for cond in c.get("when") or []):
            problems.append(f"synthetic_constraints[{k}]: names a column with a dp_edges alternative, "
                            "whose labels are drawn at release time")
    for k, c in enumerate(doc.get("acceptance") or []):
        if c.get("type") == "classification" and c.get("target") in names:
            problems.append(f"acceptance[{k}].target: a classification names its positive labels, "
                            "which a dp_edges column has only at release time")
    return problems
