"""A starting spec from a published data dictionary (``dpbundle spec from-dictionary``).

A statistics office usually has a data dictionary before it has a spec: per column a description
and the values it may take, as codes with labels, as a range, or both. This module reads such a
dictionary (the format of NIST's ACS excerpt dictionary: a JSON object keyed by the CSV header,
each entry ``{"description": ..., "values": {code: label, ..., "min": number, "max": number}}``)
and writes a spec the office then reviews: every bin edge and category comes from the dictionary
alone, never from the data (edges computed from the data would be private).

Per column:

* codes only: a category column; the released categories are the dictionary's labels (its codes
  when two labels are equal), in the dictionary's order; not-applicable codes ("N") stay values;
* a range only: an integer (both ends integers) or float column clipped to the range; a range of
  at most :data:`MAX_UNIT_VALUES` integers gets one bin per value and, as a second alternative,
  equal-width bins; a larger range only the equal-width bins (:func:`equal_width_edges`: a round
  width, about ``bins`` bins);
* codes and a range of at most :data:`MAX_UNIT_VALUES` integers: a category column of the codes and
  the range's integers; codes beside a larger range: a number column whose codes are special
  values (``input.columns[].special``: N/A codes not applicable, others unknown), except a code
  that reads as the number just above the range, which widens it (POVPIP's 501);
* no values, or a weight (its description has the word "weight"): left out.

With ``dp_epsilon`` (``--dp-edges``) every numeric range also gets an alternative ``dp{bins}``
whose bins the release draws under DP (``dp_edges``: quantiles of the real records, docs/spec.md
"Bins chosen under DP"); its epsilon is added to the cap.

Every left-out column is named, with the reason, in the notes returned (and in the YAML's header).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

__all__ = ["DictionaryError", "read_dictionary", "dictionary_spec", "equal_width_edges", "spec_yaml",
           "placeholder_fields", "PLACEHOLDER",
           "MAX_UNIT_VALUES", "DEFAULT_BINS"]

MAX_UNIT_VALUES = 100       # integer ranges of at most this many values are coded value by value
DEFAULT_BINS = 10
MAX_DICTIONARY_BYTES = 50 << 20
PLACEHOLDER = "CHANGE ME"


class DictionaryError(ValueError):
    """The dictionary cannot be read or used; the message names the entry and the rule."""


def read_dictionary(path: Path) -> dict:
    """The dictionary's JSON object, its entries checked (module docstring)."""
    from dpbundle.release.common.safe_io import InputFileError, read_bounded

    path = Path(path)
    try:
        doc = json.loads(read_bounded(path, "data dictionary", MAX_DICTIONARY_BYTES).decode("utf-8"))
    except InputFileError as e:
        raise DictionaryError(str(e)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DictionaryError(f"{path}: not a JSON file ({e})") from None
    if not isinstance(doc, dict) or not doc:
        raise DictionaryError(f"{path}: a dictionary is a JSON object with one entry per column")
    for key, entry in doc.items():
        where = f"{path}: entry {key!r}"
        if not isinstance(entry, dict):
            raise DictionaryError(f"{where}: must be an object with a description and values")
        values = entry.get("values", {})
        if not isinstance(values, dict):
            raise DictionaryError(f"{where}: 'values' must be an object (code: label, min, max)")
        for bound in ("min", "max"):
            v = values.get(bound)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise DictionaryError(f"{where}: values.{bound} must be a number, got {v!r}")
        if ("min" in values) != ("max" in values):
            raise DictionaryError(f"{where}: a range needs both values.min and values.max")
        if "min" in values and not values["max"] > values["min"]:
            raise DictionaryError(f"{where}: values.max must be larger than values.min")
        if any(not isinstance(lab, (str, int, float)) or isinstance(lab, bool)
               for code, lab in values.items() if code not in ("min", "max")):
            raise DictionaryError(f"{where}: every code's label must be a text")
    return doc


def _nice_width(span: float, bins: int, integer: bool) -> float:
    """The smallest round width (1, 2, 2.5 or 5 times a power of ten; an integer for integers)
    of which ``bins`` bins cover ``span``."""
    raw = max(span / bins, 1e-12)
    power = 10.0 ** math.floor(math.log10(raw))
    for step in (1, 2, 2.5, 5, 10):
        width = step * power
        if width >= raw * (1 - 1e-12) and (not integer or float(width).is_integer()):
            return max(width, 1.0) if integer else width
    return max(math.ceil(raw), 1) if integer else 10 * power


def equal_width_edges(lo: float, hi: float, bins: int, integer: bool) -> list:
    """Edges from ``lo`` in steps of a round width (:func:`_nice_width`) until one is above ``hi``:
    about ``bins`` left-closed bins, the first starting at ``lo``, the last holding ``hi``."""
    width = _nice_width((hi - lo + (1 if integer else 0)), bins, integer)
    edges = [lo]
    while edges[-1] <= hi:
        nxt = lo + len(edges) * width
        edges.append(int(round(nxt)) if integer else float(f"{nxt:.12g}"))
    return edges


def _codes(values: dict) -> list[tuple[str, str]]:
    return [(str(code), str(label)) for code, label in values.items() if code not in ("min", "max")]


def _describe(entry: dict, codes: list[tuple[str, str]]) -> str:
    text = str(entry.get("description") or "").strip() or "(no description in the dictionary)"
    if codes:
        text += ": " + "; ".join(f"{c} {lab}" for c, lab in codes)
    return text[:4000]


def _safe_name(key: str, taken: set[str]) -> str:
    base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in key).strip("_") or "column"
    if base[0].isdigit():
        base = "c_" + base
    name, i = base[:64], 2
    while name in taken:
        name, i = f"{base[:60]}_{i}", i + 1
    taken.add(name)
    return name


def _category_column(name: str, key: str, entry: dict, codes: list[tuple[str, str]],
                     described: list[tuple[str, str]] | None = None) -> tuple[dict, dict]:
    labels = [lab for _, lab in codes]
    released = labels if len(set(labels)) == len(labels) and all(labels) else [c for c, _ in codes]
    inp = {"name": name, "type": "category", "categories": [c for c, _ in codes],
           "description": _describe(entry, codes if described is None else described)}
    if name != key:
        inp["header"] = key
    col = {"name": name, "description": str(entry.get("description") or key)[:1000],
           "source": {"column": name, "derive": "category"},
           "alternatives": [{"id": "dictionary", "categories": released,
                             "map": {c: r for (c, _), r in zip(codes, released)}}]}
    return inp, col


def _dp_edges_alternative(lo: float, hi: float, bins: int, epsilon: float, integer: bool) -> dict:
    """An alternative whose ``bins`` bins the release draws under DP (quantiles) at ``epsilon``:
    candidates every whole number (integers over at most 1,000 values) or every hundredth of the
    range, rounded (floats, wider integer ranges)."""
    dp: dict = {"bins": bins, "epsilon": epsilon}
    if not integer:
        dp["step"] = _nice_width(hi - lo, 100, False)
    elif hi - lo > 1000:       # a wide integer range: about a hundred candidates, a whole step
        dp["step"] = int(_nice_width(hi - lo, 100, True))
    return {"id": f"dp{bins}", "clip": [lo, hi], "dp_edges": dp}


def _range_column(name: str, key: str, entry: dict, lo: float, hi: float, bins: int,
                  dp_epsilon: float | None = None) -> tuple[dict, dict]:
    integer = isinstance(lo, int) and isinstance(hi, int)
    inp = {"name": name, "type": "integer" if integer else "float", "min": lo, "max": hi,
           "description": _describe(entry, [])}
    if name != key:
        inp["header"] = key
    alts = []
    if integer and hi - lo + 1 <= MAX_UNIT_VALUES:
        alts.append({"id": "values", "clip": [lo, hi], "unit_bins": [lo, hi]})
    edges = equal_width_edges(lo, hi, bins, integer)
    alts.append({"id": f"bins{len(edges) - 1}", "clip": [lo, hi], "edges": edges})
    grid = hi - lo if integer else 100
    if dp_epsilon is not None and grid >= bins - 1:
        alts.append(_dp_edges_alternative(lo, hi, bins, dp_epsilon, integer))
    col = {"name": name, "description": str(entry.get("description") or key)[:1000],
           "source": {"column": name}, "alternatives": alts}
    return inp, col


def _column(name: str, key: str, entry: dict, bins: int, dp_epsilon: float | None = None) -> tuple[dict, dict] | str:
    """(input column, released column), or why the column is left out."""
    values = entry.get("values") or {}
    codes = _codes(values)
    description = str(entry.get("description") or "")
    if re.search(r"\bweights?\b", description.lower()):
        return "a weight (its description says so), not an attribute to release"
    if not codes and "min" not in values:
        return "the dictionary lists no codes and no range"
    if "min" not in values:
        return _category_column(name, key, entry, codes)
    lo, hi = values["min"], values["max"]
    if not codes:
        return _range_column(name, key, entry, lo, hi, bins, dp_epsilon)
    integer = isinstance(lo, int) and isinstance(hi, int)
    if integer and hi - lo + 1 <= MAX_UNIT_VALUES:
        taken = {c for c, _ in codes}
        extra = [(str(v), str(v)) for v in range(lo, hi + 1) if str(v) not in taken]
        return _category_column(name, key, entry, codes + extra, codes + [(f"{lo} to {hi}", "the number")])
    return _range_with_specials(name, key, entry, lo, hi, bins, codes, dp_epsilon)


def _range_with_specials(name: str, key: str, entry: dict, lo, hi, bins: int, codes: list,
                         dp_epsilon: float | None) -> tuple[dict, dict] | str:
    """A wide range beside codes: the codes that read as numbers just above the range widen it
    (POVPIP's 501, "501 or more"), every other code is a special value of its own (N: not
    applicable when its label starts "N/A", else unknown)."""
    integer = isinstance(lo, int) and isinstance(hi, int)
    specials = []
    for code, label in codes:
        try:
            x = float(code)
        except ValueError:
            x = None
        if x is not None and integer and x == hi + 1:
            hi += 1
            continue
        if x is not None and lo <= x <= hi:
            return f"the code {code!r} lies inside its range [{lo}, {hi}]"
        kind = "not_applicable" if label.strip().upper().startswith("N/A") else "unknown"
        specials.append({"value": code, "label": label, "kind": kind})
    inp, col = _range_column(name, key, entry, lo, hi, bins, dp_epsilon)
    inp["max"] = hi
    if specials:
        inp["special"] = specials
    return inp, col


def dictionary_spec(dictionary: dict, *, columns: list[str] | None = None, bins: int = DEFAULT_BINS,
                    title: str | None = None, dp_epsilon: float | None = None) -> tuple[dict, list[str]]:
    """(spec document, notes): the starting spec of ``dictionary``'s entries (or those named in
    ``columns``, in that order) and one note per entry left out (module docstring). The release
    metadata are placeholders starting with "CHANGE ME"; the privacy settings and the criterion
    are those of the ACS example (total epsilon 1). With ``dp_epsilon`` every numeric range also
    gets an alternative whose ``bins`` bins are drawn under DP at that epsilon (``dp_edges``), and
    the cap grows by what they spend."""
    if isinstance(bins, bool) or not isinstance(bins, int) or not 2 <= bins <= 1000:
        raise DictionaryError(f"--bins must be a whole number from 2 to 1,000, got {bins!r}")
    if dp_epsilon is not None and not (isinstance(dp_epsilon, (int, float)) and 1e-6 <= dp_epsilon <= 10):
        raise DictionaryError(f"--dp-edges must be an epsilon from 0.000001 to 10, got {dp_epsilon!r}")
    keys = list(dictionary) if columns is None else list(columns)
    unknown = [k for k in keys if k not in dictionary]
    if unknown:
        raise DictionaryError(f"--columns: {', '.join(map(repr, unknown[:5]))} not in the dictionary "
                              f"(its entries: {', '.join(list(dictionary)[:30])})")
    taken: set[str] = set()
    inputs, released, notes = [], [], []
    for key in keys:
        name = _safe_name(str(key), taken)
        made = _column(name, str(key), dictionary[key], bins, dp_epsilon)
        if isinstance(made, str):
            notes.append(f"{key}: left out: {made}")
            taken.discard(name)
            continue
        inputs.append(made[0])
        released.append(made[1])
    if not released:
        raise DictionaryError("no entry of the dictionary can be released (" + "; ".join(notes[:5]) + ")")
    doc = _document(inputs, released, title)
    drawn = [a["dp_edges"]["epsilon"] for c in released for a in c["alternatives"] if "dp_edges" in a]
    if drawn:
        from fractions import Fraction

        total = Fraction(str(doc["privacy"]["epsilon_cap"])) + sum((Fraction(str(e)) for e in drawn), Fraction(0))
        doc["privacy"]["epsilon_cap"] = float(total)
        notes.append(f"{len(drawn)} numeric column(s) get an alternative with bins drawn under DP "
                     f"(epsilon {dp_epsilon:g} each, spent whether or not the selection uses it); the "
                     f"cap is raised to {float(total):g}")
    return doc, notes


def _document(inputs: list[dict], released: list[dict], title: str | None) -> dict:
    return {
        "dpbundle_spec": 2,
        "release": {
            "title": title or f"{PLACEHOLDER}: the release's title",
            "publisher": f"{PLACEHOLDER}: the publishing office",
            "contact": f"{PLACEHOLDER}: an address for questions",
            "licence": "CC-BY-4.0",
            "description": f"{PLACEHOLDER}: what the records are, in plain words. Differentially private "
                           "synthetic records: no row describes a real person.",
            "unit_of_privacy": f"{PLACEHOLDER}: one person (one record of the table)",
        },
        "input": {"columns": inputs},
        "raw_constraints": [{"name": "missing value", "any_missing": True}],
        "columns": released,
        "generators": [{"type": "privsyn", "grid": {"estimator": ["hierarchical"], "select_rule": ["top"],
                                                     "max_pairs": [8]}}],
        "projection": {"min_count": [1]},
        "acceptance": [{"id": "kway", "type": "kway_marginals",
                        "description": "Largest error in the share of any cell of any 1- or 2-way table of "
                                       "the released columns",
                        "max_k": 2, "threshold": 0.1, "epsilon": 0.02}],
        "privacy": {"epsilon_generation": 0.94, "epsilon_cap": 1.0,
                    "records": {"policy": "dp_count", "epsilon": 0.02},
                    "selection": {"stop_probability": 0.05, "retries": "resample"}},
    }


def spec_yaml(doc: dict) -> str:
    """``doc`` as YAML for people: mappings in block style, lists of plain values on one line."""
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def represent_list(dumper, data):
        flow = all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)

    Dumper.add_representer(list, represent_list)
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)


def placeholder_fields(doc: dict) -> list[str]:
    """The ``release`` fields of a spec document that still hold a placeholder of this module
    (text starting with "CHANGE ME"): ``spec validate`` warns of them, ``release`` refuses them
    (the datasheet would print them)."""
    release = doc.get("release") if isinstance(doc, dict) else None
    if not isinstance(release, dict):
        return []
    return [f"release.{k}" for k, v in release.items()
            if isinstance(v, str) and v.lstrip().upper().startswith(PLACEHOLDER)]
