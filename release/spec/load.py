"""The release spec: load (YAML or JSON), validate against `schemas/spec.schema.json`, then check
what a schema cannot (bin edges, column references, the privacy budget).

A spec is untrusted input: it is parsed with a safe loader with limits (:mod:`.spec_yaml`: aliases,
nesting depth, duplicate keys) and never evaluated as code. Every problem is reported as
``json.path: message``, e.g. ``acceptance[3].epsilon: must be > 0``; a spec loaded from a file
also gets the line and column where the path is written.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterable

import jsonschema

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON

from dpbundle.release.spec.columns import (  # noqa: F401  (also importable from here)
    _bins_of, _date_parts, age_between, category_text, derived_range, input_categories, missing_markers,
    removed_categories)
from dpbundle.release.spec.model import (  # noqa: F401  (also importable from here)
    SELECTION_FACTOR, Spec, _publish_items, budget_formula, budget_total, canonical_json, records_settings)
from dpbundle.release.spec.yaml_text import Marks, SpecTextError, load_json, load_yaml
from dpbundle.release.spec.typed import SpecModel

MAX_SPEC_BYTES = 2_000_000
# At most MAX_PROBLEMS problems are collected and reported (a spec with 100,000 wrong entries is
# refused as fast as one with a single wrong entry; the last line says that more were left out).
MAX_PROBLEMS = 50
# Every number of a spec is 0 or has a magnitude in [MIN_MAGNITUDE, MAX_MAGNITUDE]: the products,
# quotients and noise scales made from them (sensitivity / epsilon, threshold x n, bound spans)
# then stay finite and non-zero in floating point (docs/spec.md, "Ranges of numbers").
MIN_MAGNITUDE = 1e-12
MAX_MAGNITUDE = 1e15
# Every epsilon (privacy.epsilon_generation, epsilon_cap, records.epsilon, pre_selection and each
# criterion's): at least MIN_EPSILON (a noise scale sensitivity / epsilon stays finite) and at most
# MAX_EPSILON (a sum of epsilons stays a finite float); the schema holds the same bounds.
MIN_EPSILON = 1e-6
MAX_EPSILON = 1e9
# A total epsilon above EPSILON_CEILING is refused unless privacy.acknowledge_weak_guarantee is
# true; above WEAK_GUARANTEE_EPSILON the datasheet says in plain words that the protection is weak.
EPSILON_CEILING = 20
WEAK_GUARANTEE_EPSILON = 10


class SpecError(ValueError):
    """A spec that cannot be used. ``problems`` holds one ``path: message`` line per problem;
    ``locations`` (same length, or None) the (line, column) in the file where each one is written
    (None when unknown, e.g. for a spec validated from a dict)."""

    def __init__(self, source: str, problems: list[str],
                 locations: list[tuple[int, int] | None] | None = None):
        problems = capped(problems)
        if locations is not None:
            locations = list(locations)[:len(problems)] + [None] * (len(problems) - len(locations))
        self.source = source
        self.problems = problems
        self.locations = list(locations) if locations is not None else [None] * len(problems)
        lines = "\n".join(f"  line {at[0]}, column {at[1]}: {p}" if at else f"  {p}"
                          for p, at in zip(problems, self.locations))
        count = (f"more than {MAX_PROBLEMS} problems" if problems and problems[-1].startswith(MORE_PROBLEMS)
                 else f"{len(problems)} problem(s)")
        super().__init__(f"{source}: invalid release spec ({count}):\n{lines}")


MORE_PROBLEMS = "(more): further problems are not listed"


def capped(problems: list[str]) -> list[str]:
    """At most :data:`MAX_PROBLEMS` problems; when there were more, a last line says so (a
    ``(more)`` line, which has no place in the file)."""
    if len(problems) <= MAX_PROBLEMS:
        return list(problems)
    return list(problems[:MAX_PROBLEMS]) + [
        f"{MORE_PROBLEMS} (only the first {MAX_PROBLEMS} are shown; fix them and validate again)"]


def json_path(parts: Iterable[Any]) -> str:
    """Render a jsonschema path deque as ``a.b[3].c`` ("(root)" for the document itself)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


_EDGES_EXAMPLE = "e.g. {edges: [25, 30], labels: ['<25', '25-29', '30+']}"


def _group_edges_message(error: jsonschema.ValidationError) -> str | None:
    """``group_bins.<column>[.per_alternative.<id>]`` whose ``edges`` are not a list of numbers
    (e.g. the group labels written as edges) or are missing: say that edges must be numbers."""
    path = list(error.absolute_path)
    if len(path) < 2 or path[0] != "group_bins":
        return None
    rest = path[2:]
    if rest[:1] == ["per_alternative"]:
        if len(rest) < 2:
            return None
        rest = rest[2:]
    if error.validator == "required" and not rest and isinstance(error.instance, dict) \
            and "edges" not in error.instance:
        return (f"missing required field 'edges': group_bins edges must be numbers, the released "
                f"numbers at which the groups are cut (the group names go in labels; {_EDGES_EXAMPLE})")
    if error.validator != "type":
        return None
    if rest == ["edges"]:
        return (f"group_bins edges must be numbers: a list of the released numbers at which the "
                f"groups are cut (got {error.instance!r}; {_EDGES_EXAMPLE})")
    if len(rest) == 2 and rest[0] == "edges" and isinstance(rest[1], int):
        return (f"group_bins edges must be numbers, the released numbers at which the groups are "
                f"cut, not labels or texts (got {error.instance!r}); the group names go in labels, "
                f"{_EDGES_EXAMPLE}")
    return None


def _message(error: jsonschema.ValidationError) -> str:
    """A short 'what was expected' message for one schema error."""
    v, val = error.validator, error.validator_value
    edges = _group_edges_message(error)
    if edges is not None:
        return edges
    if v == "exclusiveMinimum":
        return f"must be > {val} (got {error.instance!r})"
    if v == "minimum":
        return f"must be >= {val} (got {error.instance!r})"
    if v == "exclusiveMaximum":
        return f"must be < {val} (got {error.instance!r})"
    if v == "maximum":
        return f"must be <= {val} (got {error.instance!r})"
    if v == "required":
        missing = [k for k in val if isinstance(error.instance, dict) and k not in error.instance]
        return f"missing required field {', '.join(repr(m) for m in missing)}"
    if v == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        return f"unknown field {', '.join(repr(e) for e in extra)} (allowed: {', '.join(allowed)})"
    if v == "enum":
        return f"must be one of {', '.join(repr(x) for x in val)} (got {error.instance!r})"
    if v == "const":
        return f"must be {val!r} (got {error.instance!r})"
    if v == "type":
        return f"must be of type {val} (got {type(error.instance).__name__} {error.instance!r})"
    if v == "pattern":
        return f"must match {val} (got {error.instance!r})"
    if v in ("minItems", "maxItems"):
        return f"must have {'at least' if v == 'minItems' else 'at most'} {val} item(s)"
    if v == "uniqueItems":
        return "items must be unique"
    if v in ("oneOf", "anyOf"):
        if error.context:
            return _message(_best_branch_error(error))
        return "does not match any allowed form"
    if v == "not":
        return "has a combination of fields that is not allowed"
    return error.message


def _branch_misfit(errors: list[jsonschema.ValidationError]) -> tuple[int, int]:
    """How badly a oneOf/anyOf branch fits the instance itself: (wrong type, unknown fields), both
    counted on the instance (not inside its values). A branch whose fields the instance uses is
    the one the author meant, even when a value inside it is wrong."""
    own = [e for e in errors if not e.relative_path]
    return (sum(e.validator == "type" for e in own),
            sum(e.validator == "additionalProperties" for e in own))


def _best_branch_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """The error to report for a failed oneOf/anyOf: when exactly one branch fits the instance's
    type and fields best (see :func:`_branch_misfit`), its first error (shallowest, then in
    document order; a nested oneOf/anyOf descends the same way); otherwise jsonschema's
    ``best_match``. Without this, ``group_bins.x: {edges: ['<25'], labels: [...]}`` was reported
    as "unknown field 'edges', 'labels'" (the other branch's complaint)."""
    branches: dict[Any, list[jsonschema.ValidationError]] = {}
    for e in error.context:
        branches.setdefault(e.relative_schema_path[0] if e.relative_schema_path else None, []).append(e)
    scores = {k: _branch_misfit(v) for k, v in branches.items()}
    best = min(scores.values())
    chosen = [k for k, score in scores.items() if score == best]
    if len(chosen) != 1 or len(branches) < 2:
        return jsonschema.exceptions.best_match(error.context)
    errors = sorted(branches[chosen[0]], key=lambda e: (len(e.relative_path), [
        (0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in e.relative_path]))
    first = errors[0]
    if first.validator in ("oneOf", "anyOf") and first.context:
        return _best_branch_error(first)
    return first


def schema_problems(document: Any, schema_name: str) -> list[str]:
    """Validate ``document`` against ``schemas/<schema_name>``; return ``path: message`` lines."""
    from dpbundle.release.common.jsonschemas import validator

    import itertools

    problems = []
    # at most MAX_PROBLEMS + 1 errors are produced (the iteration is lazy): the work is bounded
    first = itertools.islice(validator(schema_name).iter_errors(document), MAX_PROBLEMS + 1)
    for err in sorted(first, key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        # Descend into oneOf/anyOf to report the most specific location.
        target = err
        if err.validator in ("oneOf", "anyOf") and err.context:
            target = _best_branch_error(err)
        problems.append(f"{json_path(target.absolute_path)}: {_message(target)}")
    return problems


def read_spec_document(path: Path) -> dict:
    """Parse a YAML or JSON spec file into a dict (safe loader, size limit)."""
    return read_spec_marked(path)[0]


def read_spec_marked(path: Path) -> tuple[dict, Marks]:
    """Parse a YAML or JSON spec file: (document, where each value is written). The text is
    untrusted: size limit, then the limits of :mod:`.spec_yaml` (aliases, nesting depth,
    duplicate keys) before anything walks the document."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise SpecError(str(path), [f"(file): cannot read: {exc.strerror or exc}"]) from None
    if size > MAX_SPEC_BYTES:
        raise SpecError(str(path), [f"(file): {size} bytes is larger than the {MAX_SPEC_BYTES}-byte limit for a spec"])
    try:
        text = path.read_text("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise SpecError(str(path), [f"(file): not UTF-8 text: {exc}"]) from None
    except OSError as exc:
        raise SpecError(str(path), [f"(file): cannot read: {exc.strerror or exc}"]) from None
    try:
        doc, marks = (load_json if path.suffix.lower() == ".json" else load_yaml)(text)
    except SpecTextError as exc:
        raise SpecError(str(path), [exc.problem], [exc.location]) from None
    if not isinstance(doc, dict):
        raise SpecError(str(path), ["(root): must be a mapping of fields"], [marks.at(())])
    return doc, marks


def load_spec(path: Path | str) -> Spec:
    """Load and fully validate a spec file. Raises :class:`SpecError` listing every problem,
    each with the line and column where it is written."""
    doc, marks = read_spec_marked(Path(path))
    try:
        return validate_spec(doc, source=str(path))
    except SpecError as exc:
        raise SpecError(exc.source, exc.problems, [marks.locate(p) for p in exc.problems]) from None


def spec_of(value: "dict | Spec", source: str = "<spec dict>") -> Spec:
    """The Spec of an in-memory spec: a dict validated exactly as a spec file's document
    (:func:`validate_spec`; a deep copy, so later changes to the dict do not reach the Spec), a
    :class:`Spec` (already validated) passed through. A TypeError for anything else."""
    import copy

    if isinstance(value, Spec):
        return value
    if isinstance(value, dict):
        return validate_spec(copy.deepcopy(value), source=source)
    raise TypeError(f"spec must be a path, a dict or a Spec, not {type(value).__name__}")


def as_simulated(spec: Spec) -> Spec:
    """``spec`` with ``release.simulated: true`` (validated again, same source): the spec a
    built-in example releases with, so that every public file can say the records are simulated."""
    import copy

    if spec.simulated:
        return spec
    doc = copy.deepcopy(spec.raw)
    doc["release"]["simulated"] = True
    return validate_spec(doc, source=spec.source)


def _number_problem(value: Any) -> str | None:
    """Why a number of the spec is refused (None when it is fine): NaN and infinities (YAML
    .nan/.inf, JSON NaN/Infinity pass numeric schema checks and break the budget), and a magnitude
    outside [MIN_MAGNITUDE, MAX_MAGNITUDE] (0 excepted), which overflows or underflows the noise
    arithmetic (e.g. 1e308 overflows a sum of epsilons, 1e-300 a noise scale). Integers too:
    10**400 is no float."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return ("not valid Unicode text (a lone surrogate such as \\ud800; rule: every text of "
                    "a spec is written as UTF-8 into the bundle)")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number (got {value!r})"
    if value != 0 and not MIN_MAGNITUDE <= abs(value) <= MAX_MAGNITUDE:
        shown = (repr(value) if isinstance(value, float) or abs(value) < 10 ** 30
                 else f"an integer of {len(str(abs(value)))} digits")
        return (f"must be 0 or between {MIN_MAGNITUDE:g} and {MAX_MAGNITUDE:g} in magnitude (got "
                f"{shown}; rule: numbers of a spec stay in a range where the noise arithmetic "
                f"neither overflows nor underflows, docs/spec.md 'Ranges of numbers')")
    return None


def _non_finite_problems(node: Any, path: tuple = ()) -> list[str]:
    """Numbers out of range (:func:`_number_problem`), each with its path; at most
    :data:`MAX_PROBLEMS` + 1 are collected (iterative walk: no recursion limit)."""
    problems: list[str] = []
    stack = [(node, path)]
    while stack and len(problems) <= MAX_PROBLEMS:
        value, at = stack.pop()
        if isinstance(value, dict):
            stack.extend((v, at + (k,)) for k, v in reversed(list(value.items())))
            problems += [f"{json_path(at + (k,))}: (the key) {_number_problem(k)}" for k in value
                         if isinstance(k, str) and _number_problem(k)]
        elif isinstance(value, list):
            stack.extend((v, at + (i,)) for i, v in reversed(list(enumerate(value))))
        else:
            problem = _number_problem(value)
            if problem:
                problems.append(f"{json_path(at)}: {problem}")
    return problems


def validate_spec(doc: dict, source: str = "<spec>") -> Spec:
    """Validate a spec dict: the JSON Schema first, then the semantic checks."""
    problems = _non_finite_problems(doc)
    if problems:
        raise SpecError(source, problems)
    problems = schema_problems(doc, "spec.schema.json")
    if problems:
        raise SpecError(source, problems)
    problems = size_problems(doc) or semantic_problems(doc) + ceiling_problems(doc)
    if problems:
        raise SpecError(source, problems)
    return Spec(raw=doc, source=source, model=SpecModel.from_document(doc))


# The audit's size bounds (audit/bounds.py and docs/audit.md "Bounds"): a spec beyond them would
# give a bundle that its own public audit refuses, so the release refuses it first.
SIZE_LIMITS = {"columns": 1_000, "bins per alternative": 100_000, "labels": 1_000_000,
               "synthetic constraint conditions": 1_000, "quasi-identifier sets": 100,
               "acceptance criteria": 100}


def size_problems(doc: dict) -> list[str]:
    """Sizes over :data:`SIZE_LIMITS` (the audit's bounds), each with its JSON path."""
    out: list[str] = []
    columns = doc.get("columns") or []
    largest = 0
    for i, col in enumerate(columns):
        sizes = []
        for j, alt in enumerate(col.get("alternatives") or []):
            if "categories" in alt:
                k = len(alt["categories"])
            elif "edges" in alt:
                k = len(alt["edges"]) - 1
            elif "unit_bins" in alt:
                k = int(alt["unit_bins"][1]) - int(alt["unit_bins"][0]) + 1
            elif "dp_edges" in alt:
                k = int(alt["dp_edges"]["bins"])
            else:
                continue
            if k > SIZE_LIMITS["bins per alternative"]:
                out.append(f"columns[{i}].alternatives[{j}]: {k:,} bins, more than the limit of "
                           f"{SIZE_LIMITS['bins per alternative']:,} (the audit's bound)")
            sizes.append(k)
        largest += max(sizes, default=0)
    conditions = sum(len(c.get("when") or []) for c in doc.get("synthetic_constraints") or [])
    qi = len(((doc.get("face_privacy") or {}).get("quasi_identifiers")) or [])
    for what, n in (("columns", len(columns)), ("labels", largest),
                    ("synthetic constraint conditions", conditions), ("quasi-identifier sets", qi),
                    ("acceptance criteria", len(doc.get("acceptance") or []))):
        if n > SIZE_LIMITS[what]:
            out.append(f"{what}: {n:,}, more than the limit of {SIZE_LIMITS[what]:,} (the audit's "
                       "bound: a bundle beyond it would fail its own public audit)")
    return out


def ceiling_problems(doc: dict) -> list[str]:
    """A total epsilon above EPSILON_CEILING protects next to nothing (e^20 is about 5 x 10^8):
    refused unless the spec says ``privacy.acknowledge_weak_guarantee: true``."""
    total = budget_total(doc)
    if total <= EPSILON_CEILING or doc["privacy"].get("acknowledge_weak_guarantee") is True:
        return []
    return [f"privacy: total epsilon {budget_formula(doc)} is above the ceiling of {EPSILON_CEILING} "
            f"(rule: a total this large gives practically no protection to any record; lower the "
            f"epsilons, or, if this is really intended, add privacy.acknowledge_weak_guarantee: true "
            f"and the datasheet will say that the protection is weak)"]


# --------------------------------------------------------------------------- semantic checks


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _unmapped_message(path: str, column: str, src_name: str, alt: dict, value: str, target: str,
                      cats: list[str]) -> str:
    """An input category that no released category of the alternative takes: name the value, the
    columns and the alternative, and the two clean routes."""
    return (f"{path}: input category {value!r} of input column {src_name!r} has no released category "
            f"in alternative {alt['id']!r} of column {column!r} (it would map to {target!r}, which is "
            f"not among the categories {cats}); either map it (map: {{{value!r}: ...}}, or a default), "
            f"or, if {value!r} stands for a missing value, make it a missing marker: move it from the "
            f"categories of input column {src_name!r} to its missing (missing: [{value!r}]) and drop "
            f"it with the raw constraint {{name: missing value, any_missing: true}} (a raw constraint "
            f"whose only condition is [{src_name}, '==', {value!r}] also removes it, and then no "
            f"alternative needs to map it)")


def _check_category_alternative(path: str, src_name: str, src: dict | None, derive: str | None,
                                alt: dict, problems: list[str], column: str = "",
                                removed: frozenset[str] = frozenset()) -> None:
    """map / default of a categorical alternative: every input category (or true/false) lands on
    one of the released categories, except one that a raw constraint always removes (``removed``,
    see :func:`removed_categories`); map keys are declared input categories."""
    cats = alt["categories"]
    src_type = src["type"] if src else None
    mp = alt.get("map", {})
    default = alt.get("default")
    if default is not None and default not in cats:
        problems.append(f"{path}.default: {default!r} is not among the categories {cats}")
    for key, target in mp.items():
        if target not in cats:
            problems.append(f"{path}.map.{key}: {target!r} is not among the categories {cats}")
    if derive not in (None, "boolean", "category"):
        problems.append(f"{path}.categories: categories need derive boolean or category (derive is {derive})")
    elif derive == "boolean" or src_type == "boolean":
        unknown = [k for k in mp if k not in ("true", "false")]
        if unknown:
            problems.append(f"{path}.map: a boolean source takes only the keys 'true' and 'false' (got {unknown[0]!r})")
        if any(k not in mp for k in ("true", "false")) and default is None:
            problems.append(f"{path}.map: a boolean source needs a map with keys 'true' and 'false' (or a default)")
    elif src_type == "category":
        srccats = input_categories(src)
        for key in mp:
            if key not in srccats:
                problems.append(f"{path}.map.{key}: {key!r} is not a declared category of input column {src_name!r} "
                                f"(declared: {', '.join(srccats)})")
        for c in srccats:
            target = mp.get(c, default if default is not None else c)
            if target not in cats and c not in removed:
                problems.append(_unmapped_message(path, column, src_name, alt, c, target, cats))
    elif src is not None:
        problems.append(f"{path}.categories: categories need a boolean or category source (source column is {src_type})")


def _check_alternative(path: str, col: dict, alt: dict, src: dict | None, problems: list[str],
                       removed: frozenset[str] = frozenset()) -> None:
    derive = col["source"].get("derive")
    src_type = src["type"] if src else None
    if "categories" in alt:
        _check_category_alternative(path, col["source"]["column"], src, derive, alt, problems,
                                    col["name"], removed)
        n_bins = len(alt["categories"])
    else:
        if "ordered" in alt:
            problems.append(f"{path}.ordered: only categories take `ordered` (bins are always in their "
                            "order); remove it")
        numeric_ok = (src_type in ("integer", "float") and derive in (None, "linear")) or \
                     (src_type == "date" and derive in ("month", "year", "age")) or src_type is None
        if not numeric_ok:
            problems.append(f"{path}: numeric bins need an integer or float source (derive none or linear), or a date with "
                            f"derive month/year/age (source is {src_type}{', derive ' + derive if derive else ''})")
        if "edges" in alt:
            e = alt["edges"]
            bad = [i for i in range(1, len(e)) if not e[i] > e[i - 1]]
            if bad:
                problems.append(f"{path}.edges: must be strictly increasing (edges[{bad[0]}] = {e[bad[0]]} is not > {e[bad[0] - 1]})")
        if "unit_bins" in alt:
            a, b = alt["unit_bins"]
            if not b >= a:
                problems.append(f"{path}.unit_bins: [first, last] needs last >= first")
        bins = _bins_of(alt) or []
        if "clip" in alt:
            lo, hi = alt["clip"]
            if not hi > lo:
                problems.append(f"{path}.clip: [min, max] needs max > min")
            elif bins:
                if bins[0][0] != lo:
                    problems.append(f"{path}: the first bin must start at the clip minimum {lo} (it starts at {bins[0][0]})")
                if not (bins[-1][0] <= hi < bins[-1][1]):
                    problems.append(f"{path}: the last bin [{bins[-1][0]}, {bins[-1][1]}) must contain the clip maximum {hi}")
                inside = [b for b in bins if not (lo <= b[0] <= hi)]
                if inside:
                    problems.append(f"{path}.edges: bin edges must lie inside the clip range [{lo}, {hi}] (bin starting at {inside[0][0]})")
        elif src_type in ("integer", "float"):
            problems.append(f"{path}.clip: a numeric column needs a public clip range [min, max]")
        elif src_type == "date" and bins and numeric_ok:
            _check_unclipped_date_bins(path, col, src, bins, problems)
        n_bins = len(bins)
        for key in ("map", "default"):
            if key in alt:
                problems.append(f"{path}.{key}: only a categorical alternative (with categories) takes {key!r}")
    if "labels" in alt and len(alt["labels"]) != n_bins:
        problems.append(f"{path}.labels: {len(alt['labels'])} labels for {n_bins} bins")
    if "values" in alt and len(alt["values"]) != n_bins:
        problems.append(f"{path}.values: {len(alt['values'])} values for {n_bins} bins")


def _check_unclipped_date_bins(path: str, col: dict, src: dict, bins: list[tuple[float, float]],
                               problems: list[str]) -> None:
    """Without a clip range every value the spec allows must fall in a bin, or transform would fail on
    the private data: the derived range [lo, hi] (from the input min/max) must lie in [first, last)."""
    derive = col["source"]["derive"]
    lo, hi, _ = derived_range(src, col["source"])
    what = "months 1..12" if derive == "month" else f"{derive} values"
    if lo is None or hi is None:
        problems.append(f"{path}.clip: a {derive}-derived column needs a clip range [min, max], or a min and max "
                        f"on input column {col['source']['column']!r} (without them its {derive}s are unbounded)")
        return
    if not (bins[0][0] <= lo and hi < bins[-1][1]):
        rng = "" if derive == "month" else f" {_fmt_num(lo)}..{_fmt_num(hi)} (from the input min and max)"
        problems.append(f"{path}: the bins [{_fmt_num(bins[0][0])}, {_fmt_num(bins[-1][1])}) do not cover the {what}{rng} "
                        f"(add a clip range)")


def _items(op: str, value: Any) -> list[Any]:
    return list(value) if op in ("in", "not in") else [value]


def _check_raw_condition(where: str, col: str, op: str, value: Any, meta: dict, problems: list[str]) -> None:
    """One raw condition against its input column's type, in the units the user wrote."""
    kind = meta["type"]
    items = _items(op, value)
    if kind in ("integer", "float"):
        bad = [v for v in items if isinstance(v, bool) or not isinstance(v, (int, float))]
        if bad:
            problems.append(f"{where}: column {col!r} is numeric; the value must be a number (got {bad[0]!r})")
    elif kind == "boolean":
        if op not in ("==", "!=") or not isinstance(value, bool):
            problems.append(f"{where}: a boolean column takes == or != with true/false")
    elif kind == "date":
        bad = [v for v in items if not isinstance(v, str) or _date_parts(v) is None]
        if bad:
            problems.append(f"{where}: a date column compares with an ISO date string YYYY-MM-DD (got {bad[0]!r})")
    elif kind == "category":
        if op not in ("==", "!=", "in", "not in"):
            problems.append(f"{where}: a category column takes ==, !=, in or not in (got {op!r})")
            return
        cats = input_categories(meta)
        for v in items:
            text = category_text(v)
            if text is None or text not in cats:
                problems.append(f"{where}: {v!r} is not a declared category of input column {col!r} "
                                f"(declared: {', '.join(cats)})")


def _check_synthetic_condition(where: str, col: str, op: str, value: Any, released: dict, problems: list[str]) -> None:
    """One synthetic condition on a released column: numbers (the released numbers) for a binned
    column; category names (or numbers, when every alternative declares `values`) for a categorical one."""
    alts = released["alternatives"]
    items = _items(op, value)
    if any(isinstance(v, bool) for v in items):
        problems.append(f"{where}: a released column compares with numbers or category names, not true/false")
        return
    if not any("categories" in a for a in alts):
        bad = [v for v in items if not isinstance(v, (int, float))]
        if bad:
            problems.append(f"{where}: column {col!r} is binned; the value must be a number in the column's units (got {bad[0]!r})")
        return
    if all(isinstance(v, str) for v in items):
        if op not in ("==", "!=", "in", "not in"):
            problems.append(f"{where}: category names take ==, !=, in or not in (got {op!r})")
            return
        for alt in alts:
            for v in items:
                if v not in alt["categories"]:
                    problems.append(f"{where}: {v!r} is not a category of column {col!r} in alternative {alt['id']!r} "
                                    f"(categories: {', '.join(alt['categories'])})")
        return
    if all(isinstance(v, (int, float)) for v in items):
        lacking = [a["id"] for a in alts if "values" not in a]
        if lacking:
            problems.append(f"{where}: column {col!r} is categorical: compare with its category names, or declare "
                            f"`values` (numbers) in every alternative (alternative {lacking[0]!r} has none)")
        return
    problems.append(f"{where}: the values must be all category names or all numbers (got {value!r})")


def _check_constraints(key: str, items: list[dict], columns: dict[str, dict], problems: list[str], raw: bool) -> None:
    for i, c in enumerate(items):
        for j, (col, op, value) in enumerate(c.get("when", [])):
            where = f"{key}[{i}].when[{j}]"
            if col not in columns:
                problems.append(f"{where}: unknown column {col!r} (known: {', '.join(columns)})")
                continue
            if raw:
                _check_raw_condition(where, col, op, value, columns[col], problems)
            else:
                _check_synthetic_condition(where, col, op, value, columns[col], problems)


def _period_problems(doc: dict) -> list[str]:
    """release.period: real dates (the schema checks only the YYYY-MM-DD form), start <= end."""
    period = doc["release"].get("period")
    if not period:
        return []
    parts = {k: _date_parts(period[k]) for k in ("start", "end")}
    bad = [f"release.period.{k}: not a valid date ({period[k]!r})" for k, v in parts.items() if v is None]
    if bad:
        return bad
    if parts["start"] > parts["end"]:
        return [f"release.period: start {period['start']} is after end {period['end']} (rule: the "
                "period covered by the records starts on or before its end)"]
    return []


def _check_inputs(doc: dict, problems: list[str]) -> None:
    """Input columns: min <= max; categories distinct by text and not a missing marker; a type-less
    `categories` or `missing` marker where it cannot apply."""
    for i, c in enumerate(doc["input"]["columns"]):
        lo, hi = c.get("min"), c.get("max")
        if c["type"] == "date":
            for key in ("min", "max"):
                if c.get(key) is not None and (not isinstance(c[key], str) or _date_parts(c[key]) is None):
                    problems.append(f"input.columns[{i}].{key}: a date column takes an ISO date YYYY-MM-DD (got {c[key]!r})")
        elif c["type"] in ("integer", "float"):
            for key in ("min", "max"):
                if isinstance(c.get(key), str):
                    problems.append(f"input.columns[{i}].{key}: a numeric column takes a number (got {c[key]!r})")
        if lo is not None and hi is not None and type(lo) is type(hi) and not hi >= lo:
            problems.append(f"input.columns[{i}]: max {hi} is below min {lo}")
        if "categories" in c and c["type"] != "category":
            problems.append(f"input.columns[{i}].categories: only a category column takes categories")
        if c["type"] == "category":
            texts = input_categories(c)
            dup = sorted({t for t in texts if texts.count(t) > 1})
            if dup:
                problems.append(f"input.columns[{i}].categories: {dup[0]!r} is declared twice (a category is matched by its text)")
            marks = missing_markers(doc["input"], c)
            both = [m for m in marks if m in texts]
            if both:
                problems.append(f"input.columns[{i}]: {both[0]!r} is both a declared category and a missing-value marker")


def _missing_problems(doc: dict) -> list[str]:
    """A column that may hold a missing-value marker needs a raw constraint that drops missing
    values (``any_missing: true``): otherwise one record with a missing cell would make the
    release refuse the registry, a refusal that depends on one record (outside the neighbouring
    relation, under which any record may hold any value the input schema accepts)."""
    if any(c.get("any_missing") for c in doc.get("raw_constraints") or []):
        return []
    fix = ("but no raw constraint drops missing values; add {name: missing value, any_missing: "
           "true} to raw_constraints (a release must not refuse a registry because one record has "
           "a missing cell)")
    shared = list(doc["input"].get("missing_values") or [])
    if shared:
        return [f"input.missing_values: cells may be marked missing "
                f"({', '.join(repr(m) for m in shared[:3])}), {fix}"]
    return [f"input.columns[{i}].missing: cells of {c['name']!r} may be marked missing "
            f"({', '.join(repr(m) for m in missing_markers(doc['input'], c)[:3])}), {fix}"
            for i, c in enumerate(doc["input"]["columns"]) if missing_markers(doc["input"], c)]


def _publish_problems(doc: dict) -> list[str]:
    """``publish: model`` needs generators whose models can be written and rebuilt;
    ``publish: tables`` generators that measure count tables with a fixed budget rule the audit
    can recompute (mechanisms/measured.py)."""
    items = _publish_items(doc)
    out: list[str] = []
    if "model" in items:
        from dpbundle.mechanisms.published import PUBLISHABLE_GENERATORS

        out += [f"generators[{i}].type: publish: model needs a generator whose model can be "
                f"published ({', '.join(sorted(PUBLISHABLE_GENERATORS))}); {g['type']!r} cannot"
                for i, g in enumerate(doc["generators"]) if g["type"] not in PUBLISHABLE_GENERATORS]
    if "tables" in items:
        from dpbundle.mechanisms.measured import TABLE_GENERATORS

        out += [f"generators[{i}].type: publish: tables needs a generator whose noisy count tables "
                f"can be published ({', '.join(TABLE_GENERATORS)}); {g['type']!r} cannot"
                + (" yet (its rounds' epsilons are chosen privately; publish: model shows them)"
                   if g["type"] == "aim_pure" else "")
                for i, g in enumerate(doc["generators"]) if g["type"] not in TABLE_GENERATORS]
        from dpbundle.templates.metadata.dp_tables import reserved_name_problems

        out += reserved_name_problems([str(c.get("name")) for c in doc.get("columns") or []
                                       if isinstance(c, dict)])
    return out


def _duplicate_name_problems(doc: dict) -> list[str]:
    """Input columns, released columns and acceptance criteria: each name (id) once."""
    problems: list[str] = []
    for key, names in (("input.columns", [c["name"] for c in doc["input"]["columns"]]),
                       ("columns", [c["name"] for c in doc["columns"]]),
                       ("acceptance", [c["id"] for c in doc["acceptance"]])):
        seen = set()
        for i, n in enumerate(names):
            if n in seen:
                problems.append(f"{key}[{i}]: duplicate name {n!r}")
            seen.add(n)
    return problems


# source.derive -> (the input column types it needs, how the message names them)
_DERIVE_NEEDS = {
    "month": (("date",), "a date"), "year": (("date",), "a date"), "boolean": (("boolean",), "a boolean"),
    "age": (("date",), "a date"), "linear": (("integer", "float"), "an integer or float"),
    "category": (("category",), "a category"),
}


def _source_problems(i: int, col: dict, inputs: dict[str, dict]) -> list[str]:
    """A released column's source: a known input column of the type its derivation needs, and
    only the derivation's own settings, valid."""
    problems: list[str] = []
    source = col["source"]
    src_name = source["column"]
    src = inputs.get(src_name)
    if src is None:
        problems.append(f"columns[{i}].source.column: unknown input column {src_name!r} (known: {', '.join(inputs)})")
    derive = source.get("derive")
    if src and derive in _DERIVE_NEEDS and src["type"] not in _DERIVE_NEEDS[derive][0]:
        problems.append(f"columns[{i}].source.derive: '{derive}' needs {_DERIVE_NEEDS[derive][1]} column "
                        f"({src_name} is {src['type']})")
    for key, needs in (("reference", "age"), ("scale", "linear"), ("offset", "linear")):
        if key in source and derive != needs:
            problems.append(f"columns[{i}].source.{key}: only derive {needs!r} takes {key!r}")
    if derive == "linear" and source.get("scale") == 0:
        problems.append(f"columns[{i}].source.scale: must not be 0")
    if derive == "age" and _date_parts(source.get("reference", "")) is None:
        problems.append(f"columns[{i}].source.reference: not a valid date ({source.get('reference')!r})")
    return problems


def _column_problems(doc: dict, inputs: dict[str, dict]) -> list[str]:
    """Each released column: its source, then its alternatives (unique ids, valid bins or categories)."""
    problems: list[str] = []
    removed = removed_categories(doc)
    for i, col in enumerate(doc["columns"]):
        problems += _source_problems(i, col, inputs)
        src_name = col["source"]["column"]
        src = inputs.get(src_name)
        ids = set()
        for j, alt in enumerate(col["alternatives"]):
            if alt["id"] in ids:
                problems.append(f"columns[{i}].alternatives[{j}].id: duplicate id {alt['id']!r}")
            ids.add(alt["id"])
            _check_alternative(f"columns[{i}].alternatives[{j}]", col, alt, src, problems,
                               removed.get(src_name, frozenset()))
    return problems


def _face_privacy_problems(doc: dict, released: dict[str, dict]) -> list[str]:
    """Every quasi-identifier names released columns."""
    problems: list[str] = []
    for i, qi in enumerate(doc.get("face_privacy", {}).get("quasi_identifiers", [])):
        for j, name in enumerate(qi):
            if name not in released:
                problems.append(f"face_privacy.quasi_identifiers[{i}][{j}]: unknown released column {name!r}")
    return problems


def _privbayes_grid_problems(i: int, gen: dict, grid: dict) -> list[str]:
    """PrivBayes: a flavour with its grid, epsilon_split values in (0, 1), valid theta / degree values."""
    problems: list[str] = []
    flavour = gen.get("flavour")
    if flavour is None:
        problems.append(f"generators[{i}].flavour: privbayes needs flavour 'theta' or 'degree'")
    elif flavour not in grid:
        problems.append(f"generators[{i}].grid: flavour {flavour!r} needs a grid of {flavour} values")
    other = {"theta": "degree", "degree": "theta"}.get(flavour or "")
    if other and other in grid:
        problems.append(f"generators[{i}].grid.{other}: not used by the {flavour} flavour")
    for j, s in enumerate(grid.get("epsilon_split", [])):
        if not isinstance(s, (int, float)) or not 0 < s < 1:
            problems.append(f"generators[{i}].grid.epsilon_split[{j}]: must be > 0 and < 1 (got {s!r})")
    if "epsilon_split" not in grid:
        problems.append(f"generators[{i}].grid: privbayes needs epsilon_split values")
    for j, t in enumerate(grid.get("theta", [])):
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not t > 0:
            problems.append(f"generators[{i}].grid.theta[{j}]: must be > 0 (got {t!r})")
    for j, t in enumerate(grid.get("degree", [])):
        if not isinstance(t, int) or isinstance(t, bool) or not t >= 1:
            problems.append(f"generators[{i}].grid.degree[{j}]: must be an integer >= 1 (got {t!r})")
    from dpbundle.mechanisms.privbayes import oneway_grid_problems

    problems.extend(f"generators[{i}].grid{p}" for p in oneway_grid_problems(grid))
    return problems


def _generator_problems(doc: dict) -> list[str]:
    """Each generator's grid: only the hyperparameters its type declares, valid for that type."""
    from dpbundle.mechanisms.generators import generator_types

    problems: list[str] = []
    declared = generator_types()  # each generator declares its hyperparameters (one source of truth)
    for i, gen in enumerate(doc["generators"]):
        allowed = set(declared[gen["type"]]["hyperparameters"])
        grid = gen.get("grid", {})
        for key in grid:
            if key not in allowed:
                problems.append(f"generators[{i}].grid.{key}: unknown hyperparameter for {gen['type']} (known: {', '.join(sorted(allowed)) or 'none'})")
        if gen["type"] == "privbayes":
            problems += _privbayes_grid_problems(i, gen, grid)
        if gen["type"] == "mst_pure":
            from dpbundle.mechanisms.mst import grid_problems as mst_grid_problems

            problems.extend(f"generators[{i}].grid{p}" for p in mst_grid_problems(grid))
        if gen["type"] == "privsyn":
            from dpbundle.mechanisms.privsyn import grid_problems as privsyn_grid_problems

            problems.extend(f"generators[{i}].grid{p}" for p in privsyn_grid_problems(grid))
        if gen["type"] == "aim_pure":
            problems += _aim_pure_grid_problems(i, grid) or _aim_pure_work_problems(i, doc, grid)
    return problems


def _aim_pure_work_problems(i: int, doc: dict, grid: dict) -> list[str]:
    """The audit re-derives aim_pure's candidate marginals from the spec's criteria and refuses a
    bundle whose count of them (``audit.bounds.aim_candidate_problems``, counted from the spec)
    is over its bound: the same count here, before any budget is spent, with every column's
    largest alternative and the grid's largest ``max_size`` (the count only grows with both),
    so that a bundle the release signs is one the audit re-derives."""
    from dpbundle.audit.bounds import aim_candidate_problems
    from dpbundle.release.spec.criteria_checks import released_numbers

    numbers = released_numbers(doc)
    names = [c["name"] for c in doc["columns"]]
    domain = [max((len(v) for v, _cat, _labels in numbers.get(n, {}).values()), default=0) for n in names]
    max_size = max(grid.get("max_size") or [3])
    return [f"generators[{i}] (aim_pure): " + p.removeprefix("spec.json: ")
            + "; the audit re-derives them from the spec and would refuse the bundle: use fewer "
              "columns in the criteria, a smaller max_k or max_size, or another generator"
            for p in aim_candidate_problems(doc, names, domain, int(max_size))]


def _aim_pure_grid_problems(i: int, grid: dict) -> list[str]:
    """An ``aim_pure`` grid: ``workload`` is the release's to set (from the spec's criteria),
    every other value one the generator accepts."""
    from dpbundle.mechanisms.aim import grid_problems as aim_grid_problems

    problems: list[str] = []
    if "workload" in grid:
        problems.append(f"generators[{i}].grid.workload: aim_pure's workload is set by the release "
                        "from the spec's acceptance criteria and faithfulness (public), not by the "
                        "spec; remove it from the grid")
    rest = {k: v for k, v in grid.items() if k != "workload"}
    problems.extend(f"generators[{i}].grid{p}" for p in aim_grid_problems(rest))
    return problems


def _definition_problems(doc: dict) -> list[str]:
    """``definition: zcdp`` needs ``retries: resample`` (the selection over candidates that
    refit a zCDP generator would need a Renyi-DP private selection, which dpbundle does not
    implement), a generator that measures under zCDP, and no published model yet."""
    priv = doc["privacy"]
    if priv.get("definition") != "zcdp":
        return [f"privacy.{k}: only a spec with privacy.definition: zcdp gives it (pure DP: "
                "epsilon_generation)" for k in ("rho_generation", "delta") if k in priv]
    problems = []
    if "epsilon_generation" in priv:
        problems.append("privacy.epsilon_generation: a zCDP spec gives the generator's budget as "
                        "privacy.rho_generation, not epsilon_generation")
    if (priv.get("selection") or {}).get("retries") != "resample":
        problems.append("privacy.definition: zcdp needs privacy.selection.retries: resample (the generator "
                        "fitted once; a selection that refits a zCDP generator at every attempt is not "
                        "implemented)")
    from dpbundle.mechanisms.generators import supports_zcdp

    for i, g in enumerate(doc.get("generators") or []):
        if isinstance(g, dict) and not supports_zcdp(g.get("type")):
            problems.append(f"generators[{i}].type: {g.get('type')!r} measures under pure DP only; "
                            "privacy.definition: zcdp needs a generator with Gaussian measurements (privsyn)")
    for item in ("model", "tables"):
        if item in _publish_items(doc):
            problems.append(f"publish: {item} is not available with privacy.definition: zcdp yet")
    return problems


def _retries_problems(doc: dict) -> list[str]:
    """``retries: resample`` needs a stop probability above 0: a model that no sample of which
    passes would otherwise be sampled for ever (every run must end)."""
    sel = doc["privacy"].get("selection") or {}
    if sel.get("retries") == "resample" and not sel.get("stop_probability"):
        return ["privacy.selection.retries: resample fits the generator once and samples from it "
                "until a candidate passes: set privacy.selection.stop_probability above 0 (e.g. 0.05: "
                "about 20 attempts expected if no sample of the model can pass), so that every run ends"]
    return []


def _cap_problems(doc: dict) -> list[str]:
    """The total epsilon (records count included) within the cap."""
    priv = doc["privacy"]
    if budget_total(doc) <= exact.dec(priv["epsilon_cap"]):
        return []
    hint = ""
    if "records" not in priv:
        hint = (f"; the default records policy dp_count spends {DEFAULT_COUNT_EPSILON:g} on the "
                "count of records: lower another epsilon, raise the cap, or declare "
                "privacy.records: {policy: declared_public} (the 2024 births release's policy: "
                "the count of plausible records is published exactly)")
    return [f"privacy.epsilon_cap: total epsilon {budget_formula(doc)} exceeds the cap "
            f"{priv['epsilon_cap']:g}{hint}"]


# The configuration space (docs/spec.md, "Ranges of numbers"): its generator settings are listed
# (`spec space`, the release's draw, every --configs check), so their number is bounded; the
# number of configurations is only ever computed (a product), bounded so that it stays readable.
MAX_GENERATOR_SETTINGS = 100_000
MAX_CONFIGURATIONS = 10 ** 15


def space_bound(doc: dict) -> tuple[int, int]:
    """(generator settings, configurations) of a spec document, counted arithmetically (products
    of the grids' and alternatives' lengths, nothing enumerated): upper bounds, since a privbayes
    grid's oneway_split values count once per oneway value here, before the duplicates a
    oneway other than 'measure' makes are removed."""
    settings = sum(math.prod(len(v) for v in (g.get("grid") or {}).values() if isinstance(v, list))
                   for g in doc.get("generators") or [])
    columns = math.prod(len(c.get("alternatives") or []) for c in doc.get("columns") or [])
    min_counts = len((doc.get("projection") or {}).get("min_count") or [])
    return settings, columns * settings * min_counts


def space_problems(doc: dict) -> list[str]:
    """The configuration space's size, counted arithmetically (nothing is enumerated), within
    :data:`MAX_GENERATOR_SETTINGS` and :data:`MAX_CONFIGURATIONS`."""
    settings, total = space_bound(doc)
    problems = []
    if settings > MAX_GENERATOR_SETTINGS:
        problems.append(f"generators: the grids make {settings:,} generator settings (the product of "
                        f"each grid's list lengths, summed over the generators), more than the limit "
                        f"of {MAX_GENERATOR_SETTINGS:,} (rule: the settings are listed to draw from "
                        "them; give fewer values)")
    elif total > MAX_CONFIGURATIONS:
        problems.append(f"columns: the configuration space has {total:.3g} configurations (alternatives "
                        f"x generator settings x min_count values), more than the limit of "
                        f"{MAX_CONFIGURATIONS:.0e}; give fewer alternatives or grid values")
    return problems


def _epsilon_paths(doc: dict) -> list[tuple[str, Any]]:
    """Every epsilon the spec declares: (JSON path, value)."""
    priv = doc["privacy"]
    out = [(f"privacy.{k}", priv[k]) for k in ("epsilon_generation", "rho_generation") if k in priv]
    out.append(("privacy.epsilon_cap", priv["epsilon_cap"]))
    if "epsilon" in (priv.get("records") or {}):
        out.append(("privacy.records.epsilon", priv["records"]["epsilon"]))
    out += [(f"privacy.pre_selection[{i}].epsilon", m["epsilon"])
            for i, m in enumerate(priv.get("pre_selection") or [])]
    out += [(f"acceptance[{i}].epsilon", c["epsilon"]) for i, c in enumerate(doc["acceptance"])]
    out += [(f"columns[{i}].alternatives[{j}].dp_edges.epsilon", alt["dp_edges"]["epsilon"])
            for i, col in enumerate(doc["columns"]) for j, alt in enumerate(col["alternatives"])
            if "dp_edges" in alt]
    return out


def epsilon_problems(doc: dict) -> list[str]:
    """Every epsilon at least :data:`MIN_EPSILON` (the schema holds > 0 and <= MAX_EPSILON): a
    smaller one makes a noise scale (sensitivity / epsilon) beyond what floating point and the
    noise samplers handle, found only after the spend."""
    return [f"{path}: must be >= {MIN_EPSILON:g} (got {value!r}; rule: an epsilon this small makes a "
            f"noise scale too large to draw from)" for path, value in _epsilon_paths(doc)
            if value < MIN_EPSILON]


def semantic_problems(doc: dict) -> list[str]:
    """Everything the JSON Schema cannot check. Returns ``path: message`` lines, rule group by
    rule group in this order."""
    from dpbundle.release.spec.criteria_checks import criteria_problems  # group_bins, acceptance, faithfulness
    from dpbundle.release.spec.dp_edges_checks import dp_edges_problems
    from dpbundle.release.spec.special_checks import special_problems

    problems: list[str] = (epsilon_problems(doc) + _period_problems(doc) + _publish_problems(doc)
                           + _missing_problems(doc) + _duplicate_name_problems(doc))
    _check_inputs(doc, problems)
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    released = {c["name"]: c for c in doc["columns"]}
    problems += _column_problems(doc, inputs)
    _check_constraints("raw_constraints", doc.get("raw_constraints", []), inputs, problems, raw=True)
    _check_constraints("synthetic_constraints", doc.get("synthetic_constraints", []), released, problems, raw=False)
    problems += criteria_problems(doc)
    problems += _face_privacy_problems(doc, released)
    problems += _generator_problems(doc)
    problems += _retries_problems(doc)
    problems += _definition_problems(doc)
    problems += dp_edges_problems(doc)
    problems += special_problems(doc)
    if not [p for p in problems if p.startswith(("privacy.definition", "generators["))]:
        problems += _cap_problems(doc)
    problems += space_problems(doc)
    return problems


