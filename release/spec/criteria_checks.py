"""Semantic checks of the spec's criteria parts: ``group_bins``, ``acceptance`` and
``faithfulness`` (what the JSON Schema cannot check). Called by ``spec.semantic_problems``.

One unit system: group bins cut the released NUMBERS of a column (``ColumnCoding.values``: a
bin's number, or a categorical alternative's ``values``), computed here from the spec with
``release.transform.column_coding`` -- the very numbers the criteria group on -- never code
indices or the input's bin edges. Every problem is a ``json.path: message`` line in the units
the user wrote.
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

__all__ = ["criteria_problems", "criteria_warnings", "label_numbers", "label_warnings", "open_bin_warnings",
           "open_bins", "released_numbers"]

_TARGET_TYPES = ("conditional_means", "regression_coefficients", "regression_mae_difference")


def _fmt(x: float) -> str:
    x = float(x)
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return str(int(x)) if x.is_integer() else f"{x:.6g}"


def _spec_of(doc: Any) -> Any:
    """A :class:`~dpbundle.release.spec.model.Spec` of a (schema-valid) document, or the Spec given."""
    from dpbundle.release.spec.model import Spec

    return doc if isinstance(doc, Spec) else Spec(raw=doc)


def released_numbers(doc: dict, spec: Any = None) -> dict[str, dict[str, tuple[np.ndarray, bool, tuple[str, ...]]]]:
    """column -> alternative id -> (numbers of its codes, categorical?, labels), from the spec
    alone; an alternative whose coding cannot be built (a problem reported elsewhere) is left out.
    ``spec``: the Spec of ``doc`` when already made."""
    from dpbundle.release.spec.coding import column_coding

    spec = spec if spec is not None else _spec_of(doc)
    out: dict[str, dict[str, tuple[np.ndarray, bool, tuple[str, ...]]]] = {}
    for col in doc["columns"]:
        alts = {}
        for alt in col["alternatives"]:
            try:
                cc = column_coding(spec, col["name"], alt["id"])
            except Exception:  # noqa: BLE001 - a broken alternative is reported by the column checks
                continue
            alts[alt["id"]] = (np.asarray(cc.values, dtype=np.float64), "categories" in alt, cc.labels)
        out[col["name"]] = alts
    return out


def criteria_problems(doc: dict) -> list[str]:
    """Every semantic problem of group_bins, acceptance and faithfulness (``path: message``)."""
    problems: list[str] = []
    released = {c["name"]: c for c in doc["columns"]}
    spec = _spec_of(doc)
    numbers = released_numbers(doc, spec)
    _check_group_bins(doc, released, numbers, problems)
    for i, crit in enumerate(doc["acceptance"]):
        _check_criterion(i, crit, spec, released, problems)
    _check_faithfulness(doc, released, problems)
    _check_label_styles(doc, problems)
    return problems


def criteria_warnings(doc: Any) -> list[str]:
    """Lines about a validated spec (a Spec, or its document) that are not errors: a threshold
    above the metric's largest value (every candidate passes: the criterion tests nothing); an
    open bin whose overridden label shows another number than the one it counts as
    (:func:`label_warnings`); bounds much wider than every number their target can take
    (:func:`_loose_bounds`: noise sized for a range the data never use). Open bins of
    conditional_means targets: :func:`open_bin_warnings`."""
    spec = _spec_of(doc)
    doc = spec.raw
    warnings: list[str] = []
    numbers = None
    for i, crit in enumerate(doc["acceptance"]):
        if not ("bounds" in crit and not crit["bounds"][1] > crit["bounds"][0]):
            _threshold_range(i, crit, [], warnings)
        if "bounds" in crit and crit["bounds"][1] > crit["bounds"][0]:
            numbers = numbers if numbers is not None else released_numbers(doc, spec)
            _loose_bounds(i, crit, numbers, warnings)
    warnings.extend(label_warnings(doc, spec))
    return warnings


def open_bin_warnings(doc: Any) -> list[str]:
    """One line per ``conditional_means`` criterion whose target has open bins
    (:func:`_open_bin_target`): ``spec validate`` prints them beside :func:`criteria_warnings`."""
    spec = _spec_of(doc)
    warnings: list[str] = []
    for i, crit in enumerate(spec.raw["acceptance"]):
        _open_bin_target(i, crit, spec, warnings)
    return warnings


def open_bins(spec: Any, column: str) -> list[tuple[str, str, float]]:
    """(alternative id, label, number) of every open bin of released column ``column`` (a first
    bin holding everything below the clip range, a last one everything above), from the spec
    alone: the number each counts as in a mean. [] for categories and closed bins."""
    from dpbundle.release.spec.coding import column_coding

    out: list[tuple[str, str, float]] = []
    for alt in spec.model.column(column).alternatives:
        if alt.categorical:
            continue
        try:
            cc = column_coding(spec, column, alt.id)
        except Exception:  # noqa: BLE001 - a broken alternative is reported by the column checks
            continue
        for k in range(cc.size):
            if math.isinf(cc.lower[k]) or math.isinf(cc.upper[k]):
                out.append((alt.id, cc.labels[k], float(cc.values[k])))
    return out


def _open_bin_target(i: int, crit: dict, spec: Any, warnings: list[str]) -> None:
    """A ``conditional_means`` criterion whose target has an open bin: the criterion compares
    means of the bins' numbers, and an open bin counts as one number ("50 and over" as 50), so a
    mean computed from the real values (or from data.csv read with other numbers) differs."""
    if crit.get("type") != "conditional_means":
        return
    target = crit.get("target")
    try:
        found = open_bins(spec, target)
    except KeyError:
        return
    if not found:
        return
    shown = "; ".join(f"{label!r} counts as {_fmt(number)} (alternative {alt})" for alt, label, number in found)
    warnings.append(
        f"acceptance[{i}] ({crit.get('id')}): the target column {target!r} has open bins, each counted "
        f"in the means as one number: {shown}. The criterion compares means of these released "
        f"numbers, not of the real values: a mean of the real values can differ by more than the "
        f"threshold even when the criterion passes. To measure real means, use a clip range that "
        f"holds every value the input allows (no open bin)")


#: ``_loose_bounds`` speaks when the target's numbers use at most this share of U - L.
LOOSE_BOUNDS_SHARE = 0.75


def _loose_bounds(i: int, crit: dict, numbers: dict, warnings: list[str]) -> None:
    """A ``conditional_means`` criterion whose bounds [L, U] hold a much narrower range [lo, hi]
    of every number the target can take (over its alternatives, from the spec alone): its
    sensitivity (U - L) / min group grows with U - L, so its noise is sized for values no record
    can have. Spoken when L <= lo < hi <= U and (hi - lo) <= LOOSE_BOUNDS_SHARE (U - L); bounds
    [lo, hi] clip no released number."""
    if crit.get("type") != "conditional_means":   # the regressions also rescale with the bounds
        return
    alts = numbers.get(crit.get("target"), {})
    vals = [v for v, _cat, _labels in alts.values() if v.size]
    if not vals:
        return
    L, U = (float(x) for x in crit["bounds"])
    lo = min(float(v.min()) for v in vals)
    hi = max(float(v.max()) for v in vals)
    # bounds that clip some number are a choice this rule does not judge; [v, v] is no bounds
    if not L <= lo < hi <= U or hi - lo > LOOSE_BOUNDS_SHARE * (U - L):
        return
    warnings.append(
        f"acceptance[{i}].bounds: [{_fmt(L)}, {_fmt(U)}] is wider than every number the target "
        f"{crit['target']!r} can take under any of its alternatives ({_fmt(lo)} to {_fmt(hi)}): the noise is "
        f"sized for U - L = {_fmt(U - L)}; bounds [{_fmt(lo)}, {_fmt(hi)}] clip no released number and "
        f"shrink the noise in the target's units to {_fmt(round((hi - lo) / (U - L), 2))} of its size (or give the "
        f"same noise at that share of the epsilon)")


# --------------------------------------------------------------------------- label styles

#: A number written in a label: "65" in "65+", "4,500" in "4,500 g and over", "-5" in "under -5"
#: (a minus sign counts only where no digit precedes it: "18-19" shows 18 and 19).
_LABEL_NUMBER = re.compile(r"(?<![\w.])(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)")


def label_numbers(label: str) -> list[float]:
    """The numbers a label shows, in order (thousands separators "," dropped)."""
    return [float(m.replace(",", "")) for m in _LABEL_NUMBER.findall(label)]


def _check_label_styles(doc: dict, problems: list[str]) -> None:
    """A column's ``label_style`` names how its open bins are labelled: it needs a binned
    alternative (the spec-wide ``label_style`` applies to binned columns only, silently)."""
    for i, col in enumerate(doc["columns"]):
        if "label_style" in col and all("categories" in a for a in col["alternatives"]):
            problems.append(f"columns[{i}].label_style: column {col['name']!r} has no binned alternative (edges or "
                            f"unit_bins): label_style names how open bins are labelled, and categories have none")


def label_warnings(doc: dict, spec: Any = None) -> list[str]:
    """An open bin of a binned alternative whose ``labels`` override shows numbers, none of which
    is the number the bin counts as in means, medians, regressions and group bins (its released
    number: the number in the label its label style would give, e.g. 64 for a '65+' written over
    the births-2024 label '64<'). Not checked: bins with a ``values`` override (the numbers are
    declared), labels showing no number ('elderly'), bounded bins. ``spec``: the Spec of ``doc``
    when already made."""
    from dpbundle.release.spec.coding import LABEL_STYLES, column_coding, label_style, open_bin

    spec = spec if spec is not None else _spec_of(doc)
    warnings: list[str] = []
    for i, col in enumerate(doc["columns"]):
        for j, alt in enumerate(col["alternatives"]):
            if "categories" in alt or "labels" not in alt or "values" in alt:
                continue
            try:
                cc = column_coding(spec, col["name"], alt["id"])
            except Exception:  # noqa: BLE001 - a broken alternative is reported by the column checks
                continue
            last = cc.size - 1
            opens = [(0, "below", float(cc.upper[0]))] if math.isinf(cc.lower[0]) else []
            if last > 0 and math.isinf(cc.upper[last]):
                opens.append((last, "above", float(cc.lower[last])))
            for k, side, edge in opens:
                label, number = cc.labels[k], float(cc.values[k])
                shown = label_numbers(label)
                if not shown or number in shown:
                    continue
                style = label_style(doc, col)
                values = [float(v) for v in cc.values]
                values[k] = shown[0]
                listed = (f"`values: [{', '.join(_fmt(v) for v in values)}]`" if len(values) <= 30 else
                          f"`values` (one number per bin, {len(values)} in all, {_fmt(shown[0])} for this one)")
                fixes = [f"give {listed} to count it as {_fmt(shown[0])}"]
                fitting = [s for s in LABEL_STYLES if s != style
                           and open_bin(s, side, edge, cc.integer) == (label, shown[0])]
                if fitting:
                    fixes.append(f"set the column's `label_style: {fitting[0]}`, which labels this bin "
                                 f"{label!r} and counts it as {_fmt(shown[0])}")
                where = "below" if side == "below" else "above"
                warnings.append(
                    f"columns[{i}].alternatives[{j}].labels[{k}]: column {col['name']!r}, alternative "
                    f"{alt['id']!r}: the open bin {where} the clip range labelled {label!r} counts as "
                    f"{_fmt(number)} in means, medians, regressions and group bins (an open bin's number "
                    f"under label style {style}), not {_fmt(shown[0])} as its label says; "
                    + ", or ".join(fixes))
    return warnings


# --------------------------------------------------------------------------- group_bins

def _group_range(edges: list[float], g: int) -> str:
    lo = edges[g - 1] if g > 0 else -math.inf
    hi = edges[g] if g < len(edges) else math.inf
    if g == 0:
        return f"numbers < {_fmt(hi)}"
    if g == len(edges):
        return f"numbers >= {_fmt(lo)}"
    return f"numbers in [{_fmt(lo)}, {_fmt(hi)})"


def _split_bin(edges: list[float], alt: dict) -> tuple[float, float, float] | None:
    """(edge, lower, upper) of a group edge lying strictly inside a bin of a binned alternative
    without a ``values`` override (such a bin stands for the released numbers lower..upper-1 of
    an integer source, or [lower, upper)), else None. With ``values`` a bin is its declared
    number, which a group edge cannot split."""
    if "values" in alt or "categories" in alt:
        return None
    if "edges" in alt:
        bins = list(zip(alt["edges"][:-1], alt["edges"][1:]))
    elif "unit_bins" in alt:
        a, b = alt["unit_bins"]
        bins = [(v, v + 1) for v in range(a, b + 1)]
    else:
        return None
    for lo, hi in bins:
        last = hi - 1 if float(lo).is_integer() and float(hi).is_integer() else hi
        inside = [e for e in edges if lo < e <= last]
        if inside:
            return inside[0], lo, hi
    return None


def _check_cut(where: str, name: str, cut: dict, alts: dict[str, tuple[np.ndarray, bool, tuple]],
               col_alts: dict[str, dict], hint: str, problems: list[str]) -> None:
    """One {edges, labels}: increasing edges, one label per group, no edge inside a bin (of an
    alternative without a ``values`` override), and every group holds the number of at least
    one code of each alternative it applies to (else it does not fit)."""
    edges, labels = cut["edges"], cut["labels"]
    if any(not edges[k] > edges[k - 1] for k in range(1, len(edges))):
        problems.append(f"{where}.edges: must be strictly increasing (got {edges})")
        return
    if len(labels) != len(edges) + 1:
        problems.append(f"{where}.labels: {len(edges)} edges make {len(edges) + 1} groups, got {len(labels)} labels")
        return
    for alt_id, (values, _, _) in alts.items():
        split = _split_bin(edges, col_alts[alt_id])
        if split:
            e, lo, hi = split
            problems.append(f"{where}.edges: edge {_fmt(e)} splits the bin [{_fmt(lo)}, {_fmt(hi)}) of alternative "
                            f"{alt_id!r}: its records would all count in one group")
            continue
        group = np.searchsorted(np.asarray(edges, dtype=np.float64), values, side="right")
        empty = [g for g in range(len(labels)) if not np.any(group == g)]
        if empty:
            g = empty[0]
            shown = ", ".join(_fmt(v) for v in values[:12]) + (", ..." if values.size > 12 else "")
            problems.append(f"{where}: group {labels[g]!r} ({_group_range(edges, g)}) holds none of the released "
                            f"numbers of alternative {alt_id!r} of column {name!r} ({shown}): the group bins do not "
                            f"fit that alternative{hint}")


def _check_group_bins(doc: dict, released: dict, numbers: dict, problems: list[str]) -> None:
    for name, g in (doc.get("group_bins") or {}).items():
        if name not in released:
            problems.append(f"group_bins.{name}: unknown released column {name!r} (known: {', '.join(released)})")
            continue
        col_alts = {a["id"]: a for a in released[name]["alternatives"]}
        for alt_id, alt in col_alts.items():
            applies = "per_alternative" not in g or alt_id in (g.get("per_alternative") or {})
            if applies and "categories" in alt and "values" not in alt:
                where = f"group_bins.{name}" + (f".per_alternative.{alt_id}" if "per_alternative" in g else "")
                problems.append(f"{where}: group bins cut released numbers, and alternative {alt_id!r} of the "
                                f"categorical column {name!r} declares no `values`: declare values, or drop the group "
                                f"bins (each category is then its own group)")
        have = numbers.get(name, {})
        if "per_alternative" in g:
            for alt_id, cut in (g["per_alternative"] or {}).items():
                where = f"group_bins.{name}.per_alternative.{alt_id}"
                if alt_id not in col_alts:
                    problems.append(f"{where}: column {name!r} has no alternative {alt_id!r} "
                                    f"(known: {', '.join(col_alts)})")
                    continue
                if "categories" in col_alts[alt_id] and "values" not in col_alts[alt_id]:
                    continue
                _check_cut(where, name, cut, {alt_id: have[alt_id]} if alt_id in have else {}, col_alts, "",
                           problems)
        else:
            usable = {a: v for a, v in have.items()
                      if not ("categories" in col_alts[a] and "values" not in col_alts[a])}
            hint = (" (group_bins.<column>.per_alternative cuts each alternative differently)"
                    if len(col_alts) > 1 else "")
            _check_cut(f"group_bins.{name}", name, g, usable, col_alts, hint, problems)


# --------------------------------------------------------------------------- acceptance

def _categorical_without_values(col: dict) -> str | None:
    """Id of an alternative with more than two categories and no ``values`` (its numbers would
    be code indices), else None."""
    for alt in col["alternatives"]:
        if "categories" in alt and "values" not in alt and len(alt["categories"]) > 2:
            return alt["id"]
    return None


def _check_by(i: int, crit: dict, released: dict, problems: list[str]) -> None:
    for j, b in enumerate(crit.get("by", [])):
        if b is None:
            continue
        items = [b] if isinstance(b, str) else list(b)
        if isinstance(b, list) and len(set(items)) != len(items):
            problems.append(f"acceptance[{i}].by[{j}]: a column is listed twice in the joint groups {items}")
        for k, name in enumerate(items):
            path = f"acceptance[{i}].by[{j}]" + (f"[{k}]" if isinstance(b, list) else "")
            if name not in released:
                problems.append(f"{path}: unknown released column {name!r} (known: {', '.join(released)})")
            elif name == crit.get("target"):
                problems.append(f"{path}: the target {name!r} cannot group itself")


def _check_columns_list(i: int, crit: dict, key: str, released: dict, problems: list[str]) -> None:
    items = crit.get(key, [])
    for j, f in enumerate(items):
        if f not in released:
            problems.append(f"acceptance[{i}].{key}[{j}]: unknown released column {f!r} (known: {', '.join(released)})")
        elif key == "features" and f == crit.get("target"):
            problems.append(f"acceptance[{i}].features[{j}]: the target {f!r} cannot be a feature")
    dup = sorted({f for f in items if items.count(f) > 1})
    if dup:
        problems.append(f"acceptance[{i}].{key}: {dup[0]!r} is listed twice")


def _threshold_range(i: int, crit: dict, problems: list[str], warnings: list[str] | None = None) -> None:
    """A (typed or derived) threshold must lie in the metric's attainable range (lo, hi]: at or
    below lo no candidate can pass (a problem); above hi every candidate passes (a warning: the
    criterion tests nothing, which tests and dry runs use on purpose)."""
    from dpbundle.mechanisms.criteria import CriterionError, make_criterion

    try:
        c = make_criterion(crit)
        thr, stake, tin = c.threshold()
        lo, hi = c.metric_range()
    except CriterionError as e:
        if "unknown criterion type" not in str(e):
            problems.append(f"acceptance[{i}]: {e}")
        return
    if lo < thr <= hi:
        return
    if thr > lo and warnings is None:
        # Above the metric's maximum the criterion always passes: a weak but harmless choice
        # (tests and exploratory sweeps use it); only a threshold that no value can get under is
        # refused, the other is reported by criteria_warnings.
        return
    if tin:
        what = (f"the derived threshold {_fmt(thr)} = stakeholder {_fmt(stake)} - Laplace quantile "
                f"{_fmt(tin.get('laplace_quantile', float('nan')))} (false_positive {_fmt(tin.get('false_positive', 0))}, "
                f"assumed sensitivity {_fmt(tin.get('assumed_sensitivity', float('nan')))}, "
                f"epsilon {_fmt(c.epsilon)})")
    else:
        what = f"the threshold {_fmt(thr)}"
    rng = f"[{_fmt(lo)}, {_fmt(hi)}]"
    if thr <= lo:
        why = (f"a candidate passes when its value is below the threshold, and the {crit['type']} metric is never "
               f"below {_fmt(lo)}: no candidate could ever pass and a release would loop until its budget ends"
               + (" (raise epsilon, the stakeholder threshold or false_positive)" if tin else ""))
    else:
        why = f"the {crit['type']} metric never exceeds {_fmt(hi)}: every candidate would pass, the criterion tests nothing"
    line = f"acceptance[{i}].threshold: {what} lies outside the metric's range {rng}: {why}"
    (problems if thr <= lo else warnings).append(line)  # type: ignore[union-attr]


def _check_criterion(i: int, crit: dict, spec: Any, released: dict, problems: list[str]) -> None:
    doc = spec.raw
    typ = crit["type"]
    t_ok = crit.get("target") in released
    if "target" in crit:
        t = crit["target"]
        if t not in released:
            problems.append(f"acceptance[{i}].target: unknown released column {t!r} (known: {', '.join(released)})")
        elif typ in _TARGET_TYPES and _categorical_without_values(released[t]):
            alt = _categorical_without_values(released[t])
            problems.append(f"acceptance[{i}].target: column {t!r} is categorical with more than two categories and "
                            f"alternative {alt!r} declares no `values`: its numbers would be code indices "
                            f"(declare values)")
    _check_by(i, crit, released, problems)
    _check_columns_list(i, crit, "features", released, problems)
    _check_columns_list(i, crit, "columns", released, problems)
    if typ == "kway_marginals" and "max_k" in crit:
        d = len(crit.get("columns") or released)
        if crit["max_k"] > d:
            problems.append(f"acceptance[{i}].max_k: {crit['max_k']} exceeds the {d} compared column(s)")
    if "bounds" in crit and not crit["bounds"][1] > crit["bounds"][0]:
        problems.append(f"acceptance[{i}].bounds: [L, U] needs U > L (got {crit['bounds']})")
    if typ == "regression_mae_difference":
        earlier = [c for c in doc["acceptance"][:i] if c["type"] == "regression_coefficients"]
        ref = crit.get("reference")
        match = [c for c in earlier if (c["id"] == ref if ref else c.get("target") == crit.get("target"))]
        if not match:
            problems.append(f"acceptance[{i}]: a regression_mae_difference criterion needs an earlier regression_coefficients "
                            f"criterion {'with id ' + repr(ref) if ref else 'on the same target'}: its DP coefficients are the real-data model")
    if typ == "classification" and t_ok:
        _check_classification(i, crit, spec, released[crit["target"]], problems)
    if typ == "quantile" and t_ok:
        for alt in released[crit["target"]]["alternatives"]:
            if "categories" in alt and "values" not in alt:
                problems.append(f"acceptance[{i}].target: column {crit['target']!r} has no numbers under alternative "
                                f"{alt['id']!r} (categories without `values`): quantiles need ordered numbers "
                                f"(declare values, or use a binned column)")
                break
    if typ == "faithfulness" and "faithfulness" not in doc:
        problems.append(f"acceptance[{i}]: a faithfulness criterion needs the 'faithfulness' cost rules")
    if typ == "smoothed_ratio" and isinstance(crit["threshold"], dict):
        if crit["threshold"]["stakeholder"] > crit.get("clip", math.inf):
            problems.append(f"acceptance[{i}].threshold.stakeholder: must not exceed clip {crit.get('clip')}")
    if not ("bounds" in crit and not crit["bounds"][1] > crit["bounds"][0]):
        _threshold_range(i, crit, problems)


def _check_classification(i: int, crit: dict, spec: Any, col: dict, problems: list[str]) -> None:
    """``positive`` names categories/labels of every alternative of the target and leaves one
    negative; an accuracy report needs an earlier coefficients report (its DP model)."""
    from dpbundle.release.spec.coding import column_coding

    doc = spec.raw
    pos = crit["positive"] if isinstance(crit["positive"], list) else [crit["positive"]]
    pos = [str(p) for p in pos]
    for alt in col["alternatives"]:
        try:
            cc = column_coding(spec, col["name"], alt["id"])
        except Exception:  # noqa: BLE001 - a broken alternative is reported by the column checks
            continue
        names = set(cc.labels) | set(cc.categories or ())
        unknown = [p for p in pos if p not in names]
        if unknown:
            problems.append(f"acceptance[{i}].positive: {unknown[0]!r} is not a category or label of column "
                            f"{col['name']!r} under alternative {alt['id']!r} (labels: {', '.join(cc.labels)})")
            return
        if all(a in pos or b in pos for a, b in zip(cc.labels, cc.categories or cc.labels)):
            problems.append(f"acceptance[{i}].positive: every category of {col['name']!r} under alternative "
                            f"{alt['id']!r} is positive: leave at least one negative")
            return
    if crit.get("report", "coefficients") == "accuracy":
        ref = crit.get("reference")
        earlier = [c for c in doc["acceptance"][:i]
                   if c["type"] == "classification" and c.get("report", "coefficients") == "coefficients"]
        match = [c for c in earlier if (c["id"] == ref if ref else
                                        (c.get("target"), c.get("positive")) == (crit["target"], crit["positive"]))]
        if not match:
            problems.append(f"acceptance[{i}]: a classification criterion with report: accuracy needs an earlier "
                            f"classification criterion with report: coefficients "
                            f"{'with id ' + repr(ref) if ref else 'on the same target and positive class'}: "
                            f"its DP model is the real-data model")


# --------------------------------------------------------------------------- faithfulness

def _check_faithfulness(doc: dict, released: dict, problems: list[str]) -> None:
    faith = doc.get("faithfulness")
    if not faith:
        return
    lists = {k: list(faith.get(k, []) or []) for k in ("exact", "adjacent", "nominal")}
    for k, names in lists.items():
        for j, name in enumerate(names):
            if name not in released:
                problems.append(f"faithfulness.{k}[{j}]: unknown released column {name!r}")
            elif k == "adjacent":
                cat = next((a["id"] for a in released[name]["alternatives"] if "categories" in a), None)
                if cat is not None:
                    problems.append(f"faithfulness.adjacent[{j}]: column {name!r} is categorical (alternative {cat!r} "
                                    f"has categories): unordered categories have no adjacent neighbours; list it under "
                                    f"exact or nominal")
    listed = [n for names in lists.values() for n in names]
    missing = [n for n in released if n not in listed]
    if missing:
        problems.append(f"faithfulness: every released column must be listed in exact, adjacent or nominal "
                        f"(missing: {', '.join(missing)})")
    for a, b in (("exact", "adjacent"), ("exact", "nominal"), ("adjacent", "nominal")):
        dup = sorted(set(lists[a]) & set(lists[b]))
        if dup:
            problems.append(f"faithfulness: {', '.join(dup)} listed both as {a} and {b}")
    for k in ("exact", "adjacent", "nominal"):
        dup = sorted({n for n in lists[k] if lists[k].count(n) > 1})
        if dup:
            problems.append(f"faithfulness.{k}: {dup[0]!r} is listed twice")
    for name in faith.get("exact_if_contains", {}):
        if name not in released:
            problems.append(f"faithfulness.exact_if_contains.{name}: unknown released column {name!r}")
    if faith.get("max_nominal", 0) > 0 and not lists["nominal"]:
        problems.append("faithfulness.max_nominal: no column is listed under nominal")
