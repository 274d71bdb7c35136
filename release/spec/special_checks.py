"""The rules of special values (``input.columns[].special``: cell texts of a number column that are
values of their own, such as N = not applicable or -4 = hours vary; docs/spec.md "Special values"),
from the spec alone.

A special value has no number: every binned alternative of a column that reads it releases it
with its own label after the bins, and nothing that computes with the column's numbers may see
it. What does (numeric targets and features of the criteria, group edges, synthetic constraints)
is refused here, before any spend, unless the criterion says how to leave the special values out
(``special: exclude``)."""
from __future__ import annotations

import re

__all__ = ["special_problems", "special_columns"]

#: criteria that take ``special`` (include / exclude)
TAKES_SPECIAL = ("kway_marginals", "conditional_means")
#: criteria that compute with the numbers of their target / features (special values have none)
NUMERIC_READERS = ("quantile", "regression_coefficients", "regression_mae_difference", "classification")


def special_columns(doc: dict) -> dict[str, str]:
    """released column -> its input column, for every released column whose source has special values."""
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    return {c["name"]: c["source"]["column"] for c in doc.get("columns") or []
            if (inputs.get(c["source"]["column"]) or {}).get("special")}


#: the forms of numbers and generated bin labels: 40, 18-30, <30, 44<, 45+, under 18, 45 and over
_BIN_LABEL = re.compile(r"^\s*(under\s+|<)?-?\d[\d.,eE+]*(\s*-\s*-?\d[\d.,eE+]*)?(\s*<|\+|\s+and\s+over)?\s*$")


def _number(text: str) -> float | None:
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def _input_problems(i: int, col: dict, shared_missing: list) -> list[str]:
    path = f"input.columns[{i}].special"
    out: list[str] = []
    if col.get("type") not in ("integer", "float"):
        return [f"{path}: special values are for integer and float columns (a {col.get('type')} column's "
                "values are already values of their own: declare the code as a category)"]
    if col.get("max") is None:
        out.append(f"{path}: a column with special values needs a max (they are kept above it)")
    texts = [str(s["value"]) for s in col["special"]]
    labels = [s["label"] for s in col["special"]]
    if len(set(texts)) < len(texts) or len(set(labels)) < len(labels):
        out.append(f"{path}: each special value needs its own cell text and its own label")
    numbers = [x for x in (_number(t) for t in texts) if x is not None]
    if len(set(numbers)) < len(numbers):
        out.append(f"{path}: two special values read as the same number")
    for j, label in enumerate(labels):
        if _BIN_LABEL.match(label):
            out.append(f"{path}[{j}].label: {label!r} reads as a number or a bin's label (18-30, <30, "
                       "45 and over); a special value's label must say what it is (a word)")
    missing = {str(m) for m in list(shared_missing) + list(col.get("missing") or [])}
    for j, text in enumerate(texts):
        if text in missing:
            out.append(f"{path}[{j}].value: {text!r} is also a missing-value marker; a cell is either missing "
                       "(the record is dropped by any_missing) or a special value (kept with its label)")
        x = _number(text)
        lo, hi = col.get("min"), col.get("max")
        if x is not None and (lo is None or x >= lo) and (hi is None or x <= hi):
            out.append(f"{path}[{j}].value: {text!r} lies inside the column's range [{lo}, {hi}]: a number "
                       "there is a number; a special value must be a text no number of the column can have")
    return out


def _raw_condition_problems(doc: dict) -> list[str]:
    """A raw constraint's condition that names a special value of its column: it would never hold
    (a condition never holds on a special value), so nothing would be dropped."""
    specials = {c["name"]: {str(s["value"]) for s in c["special"]} for c in doc["input"]["columns"]
                if c.get("special")}
    out = []
    for i, con in enumerate(doc.get("raw_constraints") or []):
        for j, cond in enumerate(con.get("when") or []):
            if not cond or cond[0] not in specials:
                continue
            items = cond[2] if isinstance(cond[2], list) else [cond[2]]
            numbers = {x for x in (_number(t) for t in specials[cond[0]]) if x is not None}
            named = [v for v in items if str(v) in specials[cond[0]]
                     or (isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) in numbers)]
            if named:
                out.append(f"raw_constraints[{i}].when[{j}]: {named[0]!r} is a special value of {cond[0]}, "
                           "and a condition never holds on one (it is not a number): to drop those "
                           "records, declare the text a missing marker instead")
    return out


def _criterion_problems(k: int, c: dict, special: dict[str, str], all_columns: list[str]) -> list[str]:
    where = f"acceptance[{k}]"
    ctype = c.get("type")
    out: list[str] = []
    if "special" in c and ctype not in TAKES_SPECIAL:
        out.append(f"{where}.special: only {' and '.join(TAKES_SPECIAL)} take it")
    if ctype in NUMERIC_READERS:
        target = c.get("target")
        features = c.get("features") or [x for x in all_columns if x != target] if ctype != "quantile" else []
        named = [x for x in [target, *features] if x in special]
        if named:
            out.append(f"{where}: {ctype} computes with the numbers of {', '.join(named)}, whose special "
                       "values have none (not supported yet: leave the column out, or use "
                       "conditional_means with special: exclude)")
    if ctype == "conditional_means" and c.get("target") in special and c.get("special", "include") != "exclude":
        out.append(f"{where}.special: the target {c['target']} has special values, which have no number: "
                   "say special: exclude (the records whose target is special are left out of every mean)")
    return out


def special_problems(doc: dict) -> list[str]:
    """``path: message`` for each rule special values break."""
    problems: list[str] = []
    shared = list((doc.get("input") or {}).get("missing_values") or [])
    for i, col in enumerate(doc["input"]["columns"]):
        if col.get("special"):
            problems += _input_problems(i, col, shared)
    problems += _raw_condition_problems(doc)
    special = special_columns(doc)
    if not special:
        for k, c in enumerate(doc.get("acceptance") or []):
            if "special" in c:
                problems.append(f"acceptance[{k}].special: no released column has special values")
        return problems
    for name in sorted(set(special) & set(doc.get("group_bins") or {})):
        problems.append(f"group_bins.{name}: group edges cut numbers, and the column's special values "
                        "have none (its groups are its bins and special values)")
    for k, c in enumerate(doc.get("synthetic_constraints") or []):
        if any(cond and cond[0] in special for cond in c.get("when") or []):
            problems.append(f"synthetic_constraints[{k}]: names a column with special values (not supported yet)")
    names = [c["name"] for c in doc.get("columns") or []]
    for k, c in enumerate(doc.get("acceptance") or []):
        problems += _criterion_problems(k, c, special, names)
    if not problems:
        problems += _label_problems(doc, special)
    return problems


def _label_problems(doc: dict, special: dict[str, str]) -> list[str]:
    """A special value's label must be no other label of its column (its bins) nor of any other
    released column: datapackage.json declares the labels missing values for the whole table."""
    from dpbundle.release.spec.coding import column_coding
    from dpbundle.release.spec.model import Spec

    try:
        spec = Spec(raw=doc).provisional()
    except Exception:  # noqa: BLE001 - another rule reports what makes the spec unusable
        return []
    labels: dict[str, set[str]] = {}
    out = []
    for col in spec.model.columns:
        for alt in col.alternatives:
            try:
                cc = column_coding(spec, col.name, alt.id)
            except ValueError as exc:
                if col.name in special and "labels must be distinct" in str(exc):
                    out.append(f"columns[{col.name}].alternatives[{alt.id}]: a special value's label is "
                               "also the label of one of its bins; give it another")
                continue
            except Exception:  # noqa: BLE001 - reported by the column checks
                continue
            labels.setdefault(col.name, set()).update(lab for i, lab in enumerate(cc.labels)
                                                      if i not in cc.special_codes)
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    kinds: dict[str, set[str]] = {}
    for src in set(special.values()):
        for sp in inputs[src]["special"]:
            kinds.setdefault(sp["label"], set()).add(sp["kind"])
    out += [f"input.columns: the special label {lab!r} has two kinds ({', '.join(sorted(k))}); "
            "datapackage.json declares each label once" for lab, k in kinds.items() if len(k) > 1]
    for name, src in special.items():
        for sp in inputs[src]["special"]:
            clash = sorted(other for other, labs in labels.items() if sp["label"] in labs)
            if clash:
                out.append(f"input.columns[{src}].special: the label {sp['label']!r} is also a value of "
                           f"{', '.join(clash)}; a special value's label must be no other value's (readers "
                           "take it for the special value wherever it appears)")
    return out
