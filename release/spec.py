"""The release spec: load (YAML or JSON), validate against `schemas/spec.schema.json`, then check
what a schema cannot (bin edges, column references, the privacy budget).

A spec is untrusted input: it is parsed with a safe loader and never evaluated as code. Every
problem is reported as ``json.path: message``, e.g. ``acceptance[3].epsilon: must be > 0``.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import jsonschema
import yaml

MAX_SPEC_BYTES = 2_000_000
SELECTION_FACTOR = 2  # Liu & Talwar private selection with a known threshold doubles the per-iteration epsilon


class SpecError(ValueError):
    """A spec that cannot be used. ``problems`` holds one ``path: message`` line per problem."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{source}: invalid release spec ({len(problems)} problem(s)):\n{lines}")


def json_path(parts: Iterable[Any]) -> str:
    """Render a jsonschema path deque as ``a.b[3].c`` ("(root)" for the document itself)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(root)"


def _message(error: jsonschema.ValidationError) -> str:
    """A short 'what was expected' message for one schema error."""
    v, val = error.validator, error.validator_value
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
            best = jsonschema.exceptions.best_match(error.context)
            return _message(best)
        return "does not match any allowed form"
    if v == "not":
        return "has a combination of fields that is not allowed"
    return error.message


def schema_problems(document: Any, schema_name: str) -> list[str]:
    """Validate ``document`` against ``schemas/<schema_name>``; return ``path: message`` lines."""
    from .jsonschemas import validator

    problems = []
    for err in sorted(validator(schema_name).iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        # Descend into oneOf/anyOf to report the most specific location.
        target = err
        if err.validator in ("oneOf", "anyOf") and err.context:
            target = jsonschema.exceptions.best_match(err.context)
        problems.append(f"{json_path(target.absolute_path)}: {_message(target)}")
    return problems


class _SafeLoaderNoDates(yaml.SafeLoader):
    """Safe YAML loader that keeps dates as strings (the schema expects ISO strings)."""


_SafeLoaderNoDates.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def canonical_json(obj: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no whitespace): the basis of every fingerprint."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


@dataclass(frozen=True)
class Spec:
    """A validated release spec. ``raw`` is the plain dict; the properties are typed views."""

    raw: dict
    source: str = "<spec>"
    warnings: tuple[str, ...] = field(default=())

    @property
    def input_columns(self) -> dict[str, dict]:
        return {c["name"]: c for c in self.raw["input"]["columns"]}

    @property
    def columns(self) -> list[dict]:
        """The released columns, in release order."""
        return self.raw["columns"]

    @property
    def column_names(self) -> list[str]:
        return [c["name"] for c in self.raw["columns"]]

    def column(self, name: str) -> dict:
        for c in self.raw["columns"]:
            if c["name"] == name:
                return c
        raise KeyError(name)

    @property
    def criteria(self) -> list[dict]:
        return self.raw["acceptance"]

    @property
    def epsilon_generation(self) -> float:
        return float(self.raw["privacy"]["epsilon_generation"])

    @property
    def epsilon_evaluation(self) -> float:
        """eps_eval: the sum of the acceptance criteria's epsilons."""
        return math.fsum(float(c["epsilon"]) for c in self.criteria)

    @property
    def pre_selection(self) -> list[dict]:
        return list(self.raw["privacy"].get("pre_selection", []))

    @property
    def total_epsilon(self) -> float:
        """total = 2 x (eps_gen + eps_eval) + measurements made once before the selection."""
        per_iteration = self.epsilon_generation + self.epsilon_evaluation
        return SELECTION_FACTOR * per_iteration + math.fsum(float(p["epsilon"]) for p in self.pre_selection)

    @property
    def epsilon_cap(self) -> float:
        return float(self.raw["privacy"]["epsilon_cap"])

    @property
    def stop_probability(self) -> float:
        return float(self.raw["privacy"].get("selection", {}).get("stop_probability", 0.0))

    @property
    def private_fingerprints(self) -> list[str]:
        return list(self.raw["privacy"].get("private_data_sha256", []))

    def public_dict(self) -> dict:
        """The spec as published in a bundle: without the fingerprints of confidential files."""
        public = json.loads(canonical_json(self.raw))
        public["privacy"].pop("private_data_sha256", None)
        return public

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of the whole spec."""
        return hashlib.sha256(canonical_json(self.raw)).hexdigest()


def read_spec_document(path: Path) -> dict:
    """Parse a YAML or JSON spec file into a dict (safe loader, size limit)."""
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
        if path.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            doc = yaml.load(text, Loader=_SafeLoaderNoDates)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(str(path), [f"(file): not valid {'JSON' if path.suffix.lower() == '.json' else 'YAML'}: {exc}"]) from None
    if not isinstance(doc, dict):
        raise SpecError(str(path), ["(root): must be a mapping of fields"])
    return doc


def load_spec(path: Path | str) -> Spec:
    """Load and fully validate a spec file. Raises :class:`SpecError` listing every problem."""
    doc = read_spec_document(Path(path))
    return validate_spec(doc, source=str(path))


def _non_finite_problems(node: Any, path: tuple = ()) -> list[str]:
    """NaN and infinities (YAML .nan/.inf, JSON NaN/Infinity) pass numeric schema checks and break the budget."""
    if isinstance(node, float) and not math.isfinite(node):
        return [f"{json_path(path)}: must be a finite number (got {node!r})"]
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _non_finite_problems(v, path + (k,))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _non_finite_problems(v, path + (i,))]
    return []


def validate_spec(doc: dict, source: str = "<spec>") -> Spec:
    """Validate a spec dict: the JSON Schema first, then the semantic checks."""
    problems = _non_finite_problems(doc)
    if problems:
        raise SpecError(source, problems)
    problems = schema_problems(doc, "spec.schema.json")
    if problems:
        raise SpecError(source, problems)
    problems = semantic_problems(doc)
    if problems:
        raise SpecError(source, problems)
    return Spec(raw=doc, source=source)


# --------------------------------------------------------------------------- semantic checks

def _bins_of(alt: dict) -> list[tuple[float, float]] | None:
    """The [lower, upper) bins of a numeric alternative (None for categories)."""
    if "edges" in alt:
        e = alt["edges"]
        return list(zip(e[:-1], e[1:]))
    if "unit_bins" in alt:
        a, b = alt["unit_bins"]
        return [(v, v + 1) for v in range(a, b + 1)]
    return None


def _check_alternative(path: str, col: dict, alt: dict, src: dict | None, problems: list[str]) -> None:
    derive = col["source"].get("derive")
    src_type = src["type"] if src else None
    if "categories" in alt:
        cats = alt["categories"]
        if derive in ("boolean",) or src_type == "boolean":
            mp = alt.get("map")
            if not mp or set(mp) != {"true", "false"}:
                problems.append(f"{path}.map: a boolean source needs a map with keys 'true' and 'false'")
            elif not set(mp.values()) <= set(cats):
                problems.append(f"{path}.map: values must be among the categories {cats}")
        elif src_type == "category":
            mp = alt.get("map", {})
            srccats = src.get("categories", [])
            for c in srccats:
                target = mp.get(c, c)
                if target not in cats:
                    problems.append(f"{path}: input category {c!r} maps to {target!r}, which is not among the categories {cats}")
        else:
            problems.append(f"{path}.categories: categories need a boolean or category source (source column is {src_type})")
        n_bins = len(cats)
    else:
        if src_type not in ("integer", "float", "date", None) or (src_type == "date" and derive not in ("month", "year")):
            problems.append(f"{path}: numeric bins need an integer or float source, or a date with derive month/year (source is {src_type})")
        if src_type in ("integer", "float") and derive:
            problems.append(f"{col['name']}.source.derive: '{derive}' does not apply to a {src_type} column")
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
        elif derive == "month" and bins and not (bins[0][0] <= 1 and bins[-1][1] > 12):
            # Without a clip range every month 1..12 must fall in a bin, or transform fails on the private data.
            problems.append(f"{path}: the bins [{bins[0][0]}, {bins[-1][1]}) do not cover the months 1..12 (add a clip range)")
        n_bins = len(bins)
    if "labels" in alt and len(alt["labels"]) != n_bins:
        problems.append(f"{path}.labels: {len(alt['labels'])} labels for {n_bins} bins")
    if "values" in alt and len(alt["values"]) != n_bins:
        problems.append(f"{path}.values: {len(alt['values'])} values for {n_bins} bins")


def _check_constraints(key: str, items: list[dict], columns: dict[str, str], problems: list[str]) -> None:
    for i, c in enumerate(items):
        for j, (col, op, value) in enumerate(c.get("when", [])):
            where = f"{key}[{i}].when[{j}]"
            if col not in columns:
                problems.append(f"{where}: unknown column {col!r} (known: {', '.join(columns)})")
                continue
            kind = columns[col]
            numeric = kind in ("integer", "float", "released")
            if numeric and (isinstance(value, bool) or not isinstance(value, (int, float))):
                problems.append(f"{where}: column {col!r} is numeric; the value must be a number (got {value!r})")
            if kind == "boolean" and (not isinstance(value, bool) or op not in ("==", "!=")):
                problems.append(f"{where}: a boolean column takes == or != with true/false")
            if kind in ("category",) and op not in ("==", "!="):
                problems.append(f"{where}: a category column takes == or !=")
            if kind == "date" and not isinstance(value, str):
                problems.append(f"{where}: a date column compares with an ISO date string")


def semantic_problems(doc: dict) -> list[str]:
    """Everything the JSON Schema cannot check. Returns ``path: message`` lines."""
    problems: list[str] = []
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    for key, names in (("input.columns", [c["name"] for c in doc["input"]["columns"]]),
                       ("columns", [c["name"] for c in doc["columns"]]),
                       ("acceptance", [c["id"] for c in doc["acceptance"]])):
        seen = set()
        for i, n in enumerate(names):
            if n in seen:
                problems.append(f"{key}[{i}]: duplicate name {n!r}")
            seen.add(n)
    for i, c in enumerate(doc["input"]["columns"]):
        lo, hi = c.get("min"), c.get("max")
        if lo is not None and hi is not None and type(lo) is type(hi) and not hi >= lo:
            problems.append(f"input.columns[{i}]: max {hi} is below min {lo}")

    released = {c["name"]: c for c in doc["columns"]}
    for i, col in enumerate(doc["columns"]):
        src_name = col["source"]["column"]
        src = inputs.get(src_name)
        if src is None:
            problems.append(f"columns[{i}].source.column: unknown input column {src_name!r} (known: {', '.join(inputs)})")
        derive = col["source"].get("derive")
        if src and derive in ("month", "year") and src["type"] != "date":
            problems.append(f"columns[{i}].source.derive: '{derive}' needs a date column ({src_name} is {src['type']})")
        if src and derive == "boolean" and src["type"] != "boolean":
            problems.append(f"columns[{i}].source.derive: 'boolean' needs a boolean column ({src_name} is {src['type']})")
        ids = set()
        for j, alt in enumerate(col["alternatives"]):
            if alt["id"] in ids:
                problems.append(f"columns[{i}].alternatives[{j}].id: duplicate id {alt['id']!r}")
            ids.add(alt["id"])
            _check_alternative(f"columns[{i}].alternatives[{j}]", col, alt, src, problems)

    _check_constraints("raw_constraints", doc.get("raw_constraints", []), {n: c["type"] for n, c in inputs.items()}, problems)
    _check_constraints("synthetic_constraints", doc.get("synthetic_constraints", []), {n: "released" for n in released}, problems)

    groups = doc.get("group_bins", {})
    for name, g in groups.items():
        if name not in released:
            problems.append(f"group_bins.{name}: unknown released column {name!r}")
            continue
        edges = g["edges"]
        if any(not edges[k] > edges[k - 1] for k in range(1, len(edges))):
            problems.append(f"group_bins.{name}.edges: must be strictly increasing")
        if len(g["labels"]) != len(edges) + 1:
            problems.append(f"group_bins.{name}.labels: {len(edges)} edges make {len(edges) + 1} groups, got {len(g['labels'])} labels")
        for j, alt in enumerate(released[name]["alternatives"]):
            for lo, hi in _bins_of(alt) or []:
                last = hi - 1 if float(lo).is_integer() and float(hi).is_integer() else hi
                split = [e for e in edges if lo < e <= last]
                if split:
                    problems.append(f"group_bins.{name}.edges: edge {split[0]} splits the bin [{lo}, {hi}) of alternative {alt['id']!r}")

    for i, crit in enumerate(doc["acceptance"]):
        for key in ("target",):
            if key in crit and crit[key] not in released:
                problems.append(f"acceptance[{i}].{key}: unknown released column {crit[key]!r} (known: {', '.join(released)})")
        for j, b in enumerate(crit.get("by", [])):
            if b is None:
                continue
            if b not in released:
                problems.append(f"acceptance[{i}].by[{j}]: unknown released column {b!r}")
            elif b not in groups:
                problems.append(f"acceptance[{i}].by[{j}]: column {b!r} has no coarse groups in group_bins")
        for j, f in enumerate(crit.get("features", [])):
            if f not in released:
                problems.append(f"acceptance[{i}].features[{j}]: unknown released column {f!r}")
        if "bounds" in crit and not crit["bounds"][1] > crit["bounds"][0]:
            problems.append(f"acceptance[{i}].bounds: [L, U] needs U > L")
        if crit["type"] == "regression_mae_difference":
            earlier = [c for c in doc["acceptance"][:i] if c["type"] == "regression_coefficients"]
            ref = crit.get("reference")
            match = [c for c in earlier if (c["id"] == ref if ref else c.get("target") == crit.get("target"))]
            if not match:
                problems.append(f"acceptance[{i}]: a regression_mae_difference criterion needs an earlier regression_coefficients "
                                f"criterion {'with id ' + repr(ref) if ref else 'on the same target'}: its DP coefficients are the real-data model")
        if crit["type"] == "faithfulness" and "faithfulness" not in doc:
            problems.append(f"acceptance[{i}]: a faithfulness criterion needs the 'faithfulness' cost rules")
        if crit["type"] == "smoothed_ratio" and isinstance(crit["threshold"], dict):
            if crit["threshold"]["stakeholder"] > crit.get("clip", math.inf):
                problems.append(f"acceptance[{i}].threshold.stakeholder: must not exceed clip {crit.get('clip')}")

    faith = doc.get("faithfulness")
    if faith:
        listed = faith["exact"] + faith["adjacent"]
        for k in ("exact", "adjacent"):
            for j, name in enumerate(faith[k]):
                if name not in released:
                    problems.append(f"faithfulness.{k}[{j}]: unknown released column {name!r}")
        missing = [n for n in released if n not in listed]
        if missing:
            problems.append(f"faithfulness: every released column must be listed in exact or adjacent (missing: {', '.join(missing)})")
        dup = sorted(set(faith["exact"]) & set(faith["adjacent"]))
        if dup:
            problems.append(f"faithfulness: {', '.join(dup)} listed both as exact and adjacent")
        for name in faith.get("exact_if_contains", {}):
            if name not in released:
                problems.append(f"faithfulness.exact_if_contains.{name}: unknown released column {name!r}")
    for i, qi in enumerate(doc.get("face_privacy", {}).get("quasi_identifiers", [])):
        for j, name in enumerate(qi):
            if name not in released:
                problems.append(f"face_privacy.quasi_identifiers[{i}][{j}]: unknown released column {name!r}")

    from dpbundle.mechanisms.generators import generator_types

    declared = generator_types()  # each generator declares its hyperparameters (one source of truth)
    for i, gen in enumerate(doc["generators"]):
        allowed = set(declared[gen["type"]]["hyperparameters"])
        grid = gen.get("grid", {})
        for key, values in grid.items():
            if key not in allowed:
                problems.append(f"generators[{i}].grid.{key}: unknown hyperparameter for {gen['type']} (known: {', '.join(sorted(allowed)) or 'none'})")
        if gen["type"] == "privbayes":
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

    priv = doc["privacy"]
    eps_gen = float(priv["epsilon_generation"])
    eps_eval = math.fsum(float(c["epsilon"]) for c in doc["acceptance"])
    pre = math.fsum(float(p["epsilon"]) for p in priv.get("pre_selection", []))
    total = SELECTION_FACTOR * (eps_gen + eps_eval) + pre
    if total > float(priv["epsilon_cap"]) * (1 + 1e-12):
        problems.append(
            f"privacy.epsilon_cap: total epsilon {SELECTION_FACTOR} x (generation {eps_gen:g} + criteria {eps_eval:g})"
            f"{f' + pre-selection {pre:g}' if pre else ''} = {total:g} exceeds the cap {priv['epsilon_cap']:g}")
    return problems
