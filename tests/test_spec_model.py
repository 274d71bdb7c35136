"""The typed spec (release/spec/typed.py) and the JSON Schema (schemas/spec.schema.json) agree.

* every property of the schema, nested (``$defs``, ``oneOf``/``anyOf``/``allOf``/``if``/``then``
  branches included), is a field of the typed model, and every field a property; the keys an
  object requires are the fields without a default;
* every spec that validates (the examples, the test fixtures, hand-made variants) builds a model
  that gives its document back, key for key and in order;
* the model's views agree with the document functions they replace.
"""
from __future__ import annotations

import copy
import json
import pickle
from dataclasses import MISSING, FrozenInstanceError, fields
from pathlib import Path

import pytest

from dpbundle.release.spec import columns as doc_columns
from dpbundle.release.spec.coding import label_style as doc_label_style
from dpbundle.mechanisms import exact
from dpbundle.release.spec.load import (SpecError, budget_formula, budget_total, read_spec_document,
                                        records_settings, schema_problems, validate_spec)
from dpbundle.release.spec.typed import (Constraint, Criterion, DerivedThreshold, FrozenMap, GroupBins,
                                         Node, SpecModel, SpecModelError, as_constraint)

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "schemas" / "spec.schema.json").read_text("utf-8"))

_BRANCHES = ("oneOf", "anyOf", "allOf")
_CONDITIONS = ("if", "then", "else", "not")


# --------------------------------------------------------------------------- schema and model paths


def schema_paths(schema: dict) -> tuple[set[str], set[str]]:
    """(every property path, the paths an object requires unconditionally) of a JSON Schema.

    A path names keys with ``.``, array items with ``[]`` and the values of an object of free
    keys (``additionalProperties``) with ``{}``: ``columns[].alternatives[].map``,
    ``group_bins{}.per_alternative{}.edges``. ``$ref`` goes to ``$defs``."""
    defs = schema.get("$defs", {})
    paths: set[str] = set()

    def resolve(node):
        while isinstance(node, dict) and "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        return node if isinstance(node, dict) else {}

    required: set[str] = set()

    def walk(node, path: str, direct: bool, depth: int = 0) -> None:
        assert depth < 50, f"schema too deep at {path}"
        if not isinstance(node, dict):
            return
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            walk(defs[name], path, direct, depth + 1)
        for key, sub in node.get("properties", {}).items():
            p = f"{path}.{key}" if path else key
            paths.add(p)
            walk(sub, p, True, depth + 1)
        if direct:
            required.update(f"{path}.{k}" if path else k for k in node.get("required", []))
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], path + "{}", True, depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]", True, depth + 1)
        for sub in node.get("prefixItems", []):
            walk(sub, path + "[]", True, depth + 1)
        for key in _BRANCHES:
            forms = node.get(key, [])
            objects = [sub for sub in forms if "properties" in resolve(sub)]
            for sub in forms:
                # a branch that is the only object form (threshold: a number or {derive, ...})
                # requires its keys as an object would; several object forms are one union
                walk(sub, path, len(objects) == 1 and sub is objects[0], depth + 1)
        for key in _CONDITIONS:
            walk(node.get(key), path, False, depth + 1)

    walk(schema, "", True)
    return paths, required


_SHAPE = {"one": "", "many": "[]", "map": "{}"}


def model_paths(cls: type, path: str = "") -> tuple[set[str], set[str]]:
    """(every field path, the paths of the fields without a default) of a typed spec class,
    in the notation of :func:`schema_paths`."""
    paths: set[str] = set()
    required: set[str] = set()
    for f in fields(cls):
        if f.name == "key_order":
            continue
        p = f"{path}.{f.name}" if path else f.name
        paths.add(p)
        if f.default is MISSING and f.default_factory is MISSING:
            required.add(p)
        node = f.metadata.get("node")
        if node is not None:
            sub_paths, sub_required = model_paths(node, p + _SHAPE[f.metadata["shape"]])
            paths |= sub_paths
            required |= sub_required
    return paths, required


def present_paths(value, path: str = "") -> set[str]:
    """The field paths of a built model that hold a value (not None)."""
    out: set[str] = set()
    if isinstance(value, Node):
        for f in fields(value):
            if f.name == "key_order" or getattr(value, f.name) is None:
                continue
            p = f"{path}.{f.name}" if path else f.name
            out.add(p)
            if f.metadata.get("node") is not None:
                shape = _SHAPE[f.metadata["shape"]]
                inner = getattr(value, f.name)
                items = (inner.values() if shape == "{}" else inner if shape == "[]" else [inner])
                for item in items:
                    out |= present_paths(item, p + shape)
    return out


def test_every_schema_property_is_a_model_field_and_back():
    s_paths, _ = schema_paths(SCHEMA)
    m_paths, _ = model_paths(SpecModel)
    assert sorted(s_paths - m_paths) == [], "schema properties without a field of the typed model"
    assert sorted(m_paths - s_paths) == [], "fields of the typed model that the schema does not have"
    assert len(s_paths) > 100  # the walk reached the nested objects


def test_required_keys_are_the_fields_without_a_default():
    _, s_required = schema_paths(SCHEMA)
    _, m_required = model_paths(SpecModel)
    assert s_required == m_required


def test_the_agreement_check_sees_a_new_schema_property():
    """Adding a property to the schema (nested, in a $def or in a oneOf branch) without a model
    field makes the check fail."""
    m_paths, _ = model_paths(SpecModel)
    for where in (("properties", "privacy", "properties"),
                  ("$defs", "group_cut", "properties"),
                  ("properties", "acceptance", "items", "properties", "threshold", "oneOf", 1, "properties"),
                  ("properties", "columns", "items", "properties", "alternatives", "items", "properties")):
        schema = copy.deepcopy(SCHEMA)
        node = schema
        for key in where:
            node = node[key]
        node["brand_new"] = {"type": "string"}
        s_paths, _ = schema_paths(schema)
        assert len(s_paths - m_paths) >= 1, where


# --------------------------------------------------------------------------- specs that validate


def _spec_documents() -> list[tuple[str, dict]]:
    """Every spec file of examples/ and tests/ (YAML or JSON; a bundle's spec.json gives its spec)."""
    out = []
    for base in (ROOT / "examples", ROOT / "tests"):
        for path in sorted(base.rglob("*")):
            if path.suffix.lower() not in (".yaml", ".yml", ".json") or not path.is_file():
                continue
            if path.stat().st_size > 2_000_000:
                continue
            try:
                doc = read_spec_document(path)
            except SpecError:
                continue
            if isinstance(doc.get("spec"), dict) and "dpbundle_spec" in doc["spec"]:
                doc = doc["spec"]
            if "dpbundle_spec" in doc:
                out.append((str(path.relative_to(ROOT)), doc))
    return out


SPEC_FILES = _spec_documents()


def test_the_spec_files_are_found():
    names = [n for n, _ in SPEC_FILES]
    assert "examples/births.yaml" in names and "examples/persons.yaml" in names
    assert any(n.startswith("tests/") for n in names)


def _round_trips(doc: dict) -> SpecModel:
    model = SpecModel.from_document(doc)
    back = model.to_document()
    assert back == doc
    assert json.dumps(back) == json.dumps(doc)  # key order and value types (1 vs 1.0) as written
    assert SpecModel.from_document(back) == model
    assert pickle.loads(pickle.dumps(model)) == model
    return model


@pytest.mark.parametrize("name, doc", SPEC_FILES, ids=[n for n, _ in SPEC_FILES])
def test_a_spec_file_that_validates_builds_its_model(name, doc):
    try:
        spec = validate_spec(copy.deepcopy(doc), source=name)
    except SpecError:
        assert not name.startswith("examples/"), f"{name}: an example does not validate"
        pytest.skip(f"{name} does not validate (a fixture of another kind)")
    assert isinstance(spec.model, SpecModel)
    model = _round_trips(doc)
    assert spec.model == model
    _views_agree(spec.raw, model)


def _views_agree(doc: dict, model: SpecModel) -> None:
    """The model's views give what the document functions give."""
    policy, eps_count = records_settings(doc)
    assert model.privacy.records_policy == policy
    assert model.privacy.epsilon_count_exact == eps_count
    assert model.privacy.stop_probability == float(doc["privacy"].get("selection", {}).get("stop_probability", 0.0))
    privacy = model.privacy
    if privacy.definition == "zcdp":    # its total: tests/test_i37_zcdp.py
        assert privacy.epsilon_generation is None and privacy.rho_generation > 0
        return
    gen, ev = exact.dec(privacy.epsilon_generation), model.epsilon_evaluation_exact
    resample = privacy.selection is not None and privacy.selection.retries == "resample"
    selected = gen + 2 * ev if resample else 2 * (gen + ev)     # fitted once, or at every attempt
    assert (privacy.epsilon_count_exact + selected
            + exact.total(p.epsilon for p in privacy.pre_selection_items)) == budget_total(doc)
    assert dict(model.removed_categories) == doc_columns.removed_categories(doc)
    for col, typed in zip(doc["columns"], model.columns):
        assert model.label_style_of(typed) == doc_label_style(doc, col)
        assert typed.alternative_ids == [a["id"] for a in col["alternatives"]]
        for alt, talt in zip(col["alternatives"], typed.alternatives):
            assert talt.bins() == doc_columns._bins_of(alt)
    for meta, typed in zip(doc["input"]["columns"], model.input.columns):
        assert list(typed.category_texts) == doc_columns.input_categories(meta)
        assert model.input.missing_markers(typed) == doc_columns.missing_markers(doc["input"], meta)
        assert typed.csv_header == str(meta.get("header", meta["name"]))
    assert [c.to_document() for c in model.acceptance] == doc["acceptance"]
    assert model.publish_items == tuple(doc_columns_publish(doc))


def doc_columns_publish(doc: dict) -> list[str]:
    from dpbundle.release.spec.model import _publish_items

    return _publish_items(doc)


@pytest.fixture
def births() -> dict:
    return read_spec_document(ROOT / "examples" / "births.yaml")


def _variants(births: dict) -> list[dict]:
    """Valid variants of the births spec that use the optional fields the examples leave out."""
    out = []
    d = copy.deepcopy(births)
    d["dpbundle_spec"] = 2
    d["label_style"] = "plus"
    d["release"].update(version="1.0", thresholds_set_by="the users' panel", motivation="why",
                        mandate="the law", maintenance="the office", citation="cite me")
    d["input"]["columns"][0]["header"] = "MotherAge"
    d["columns"][1]["label_style"] = "office"
    d["publish"] = "model"
    d["privacy"].update(epsilon_cap=20, records={"policy": "dp_count", "epsilon": 0.2},
                        pre_selection=[{"purpose": "a first look", "epsilon": 0.05}],
                        selection={"stop_probability": 0.1}, private_data_sha256=["a" * 64],
                        acknowledge_weak_guarantee=True)
    out.append(d)
    d = copy.deepcopy(births)
    d["publish"] = ["model"]
    d["privacy"]["records"] = {}
    d["privacy"]["epsilon_cap"] = 11
    del d["privacy"]["selection"]
    d["group_bins"]["mother_age"] = {"per_alternative": {
        "coarse": {"edges": [25, 30, 35], "labels": ["<25", "25-29", "30-34", "35+"]}}}
    d["acceptance"].append({"id": "q", "type": "quantile", "target": "birth_weight",
                            "quantiles": [0.25, 0.5], "by": [None, "parity", ["parity", "birth_sex"]],
                            "threshold": 500, "epsilon": 0.01})
    d["acceptance"].append({"id": "cls", "type": "classification", "target": "birth_sex",
                            "positive": "F", "features": ["parity", "mother_age"],
                            "include_intercept": True, "threshold": 50, "epsilon": 0.01})
    d["faithfulness"].update(max_differing=1)
    out.append(d)
    return out


def test_hand_made_variants_validate_and_round_trip(births):
    for doc in _variants(births):
        spec = validate_spec(copy.deepcopy(doc))
        model = _round_trips(doc)
        assert spec.model == model
        _views_agree(doc, model)


#: A schema-valid document that gives every property of the schema a value (not semantically
#: valid: it is the shape that is checked here).
EVERY_FIELD = {
    "dpbundle_spec": 2, "label_style": "office",
    "release": {"title": "t", "publisher": "p", "contact": "c", "licence": "l", "description": "d",
                "unit_of_privacy": "u", "period": {"start": "2020-01-01", "end": "2020-12-31"},
                "feedback": "f", "version": "1", "source_kind": "census", "thresholds_set_by": "s",
                "motivation": "m", "mandate": "m", "maintenance": "m", "citation": "c",
                "simulated": True},
    "input": {"missing_values": ["NA"], "columns": [
        {"name": "a", "type": "integer", "min": 0, "max": 9, "header": "A", "missing": ["-1", 99],
         "special": [{"value": "N", "label": "not applicable", "kind": "not_applicable"}],
         "description": "a number"},
        {"name": "c", "type": "category", "categories": ["x", 2], "missing": []},
        {"name": "d", "type": "date", "min": "2000-01-01", "max": "2020-12-31"}]},
    "raw_constraints": [{"name": "m", "any_missing": True},
                        {"name": "w", "when": [["a", "<", 1], ["c", "in", ["x", 2]]]}],
    "synthetic_constraints": [{"name": "s", "when": [["b", "not in", [1, 2]]]},
                              {"name": "s2", "any_missing": True}],
    "columns": [
        {"name": "b", "description": "b", "unit": "g", "label_style": "plus",
         "source": {"column": "a", "derive": "linear", "scale": 2, "offset": 0.5},
         "alternatives": [{"id": "e", "clip": [0, 9], "edges": [0, 5, 10], "labels": ["lo", "hi"],
                           "values": [1, 2]},
                          {"id": "u", "unit_bins": [0, 9]}]},
        {"name": "k", "source": {"column": "c", "derive": "category"},
         "alternatives": [{"id": "k", "categories": ["X", "Y"], "map": {"x": "X"}, "default": "Y",
                           "ordered": True}]},
        {"name": "y", "source": {"column": "d", "derive": "age", "reference": "2021-01-01"},
         "alternatives": [{"id": "y", "unit_bins": [0, 21]},
                          {"id": "yq", "clip": [0, 21], "dp_edges": {"bins": 3, "epsilon": 0.1, "step": 2}}]}],
    "generators": [{"type": "privbayes", "flavour": "degree",
                    "grid": {"epsilon_split": [0.5], "degree": [1, 2]}},
                   {"type": "marginals", "grid": {"marginals": [[[0, 1]], "all-2way"]}}],
    "projection": {"min_count": [1, 2]},
    "group_bins": {"b": {"edges": [5], "labels": ["<5", "5+"]},
                   "y": {"per_alternative": {"y": {"edges": [18], "labels": ["minor", "adult"]}}}},
    "acceptance": [
        {"id": "kw", "type": "kway_marginals", "description": "d", "columns": ["b", "k"], "max_k": 2,
         "special": "exclude", "threshold": 0.1, "epsilon": 0.1},
        {"id": "r", "type": "smoothed_ratio", "clip": 2, "smoothing": 1,
         "threshold": {"derive": "laplace_false_positive", "stakeholder": 2, "false_positive": 0.05,
                       "assumed_min_count": 50}, "epsilon": 0.1},
        {"id": "cm", "type": "conditional_means", "target": "b", "by": [None, "k", ["k", "y"]],
         "bounds": [0, 20], "margin_share": 0.01, "margin_plus": 1, "threshold": 1, "epsilon": 0.1},
        {"id": "rc", "type": "regression_coefficients", "target": "b", "bounds": [0, 20],
         "features": ["y"], "fit": "sufficient_statistics", "include_intercept": False,
         "threshold": 1, "epsilon": 0.1},
        {"id": "mae", "type": "regression_mae_difference", "target": "b", "bounds": [0, 20],
         "reference": "rc", "threshold": 1, "epsilon": 0.1},
        {"id": "cl", "type": "classification", "target": "k", "positive": ["X", 3],
         "report": "accuracy", "threshold": 1, "epsilon": 0.1},
        {"id": "q", "type": "quantile", "target": "b", "quantiles": [0.5], "threshold": 1, "epsilon": 0.1},
        {"id": "f", "type": "faithfulness", "threshold": 0.1, "epsilon": 0.1}],
    "faithfulness": {"exact": ["y"], "adjacent": ["b"], "max_adjacent": 1, "nominal": ["k"],
                     "max_nominal": 1, "max_differing": 2, "exact_if_contains": {"b": [3.5]}},
    "face_privacy": {"quasi_identifiers": [["b", "k"]]},
    "publish": ["model"],
    "privacy": {"epsilon_generation": 1, "epsilon_cap": 30,
                "records": {"policy": "dp_count", "epsilon": 0.1},
                "pre_selection": [{"purpose": "p", "epsilon": 0.1}],
                "selection": {"stop_probability": 0.2, "retries": "resample"},
                "private_data_sha256": ["0" * 64], "acknowledge_weak_guarantee": True},
}


def _every_field_zcdp() -> dict:
    """EVERY_FIELD under privacy.definition: zcdp (rho_generation and delta instead of
    epsilon_generation, which the schema makes exclusive)."""
    doc = copy.deepcopy(EVERY_FIELD)
    doc["privacy"].pop("epsilon_generation")
    doc["privacy"].update({"definition": "zcdp", "rho_generation": 0.01, "delta": 1e-9})
    doc["generators"] = [{"type": "privsyn"}]
    doc.pop("publish")
    return doc


def test_every_field_document_is_schema_valid_and_round_trips():
    assert schema_problems(EVERY_FIELD, "spec.schema.json") == []
    assert schema_problems(_every_field_zcdp(), "spec.schema.json") == []
    model = _round_trips(EVERY_FIELD)
    zcdp_model = _round_trips(_every_field_zcdp())
    m_paths, _ = model_paths(SpecModel)
    assert sorted(m_paths - present_paths(model) - present_paths(zcdp_model)) == [], \
        "fields the documents leave out"


def test_values_are_typed_and_immutable():
    model = SpecModel.from_document(EVERY_FIELD)
    assert isinstance(model.acceptance[1].threshold, DerivedThreshold)
    assert model.acceptance[1].threshold.stakeholder == 2
    assert model.acceptance[0].threshold == 0.1
    assert model.acceptance[2].by == (None, "k", ("k", "y"))
    assert isinstance(model.group_bins, FrozenMap) and isinstance(model.group_bins["y"], GroupBins)
    assert model.group_bins["y"].per_alternative["y"].labels == ("minor", "adult")
    assert model.columns[1].alternatives[0].map == {"x": "X"}
    assert model.raw_constraints[1].when[1] == ("c", "in", ("x", 2))
    assert model.raw_constraints[1].when[1].value == ("x", 2)
    assert model.generators[1].grid_lists() == {"marginals": [[[0, 1]], "all-2way"]}
    assert model.input.column("c").category_texts == ("x", "2")
    assert model.input.missing_markers(model.input.column("a")) == ["NA", "-1", "99"]
    assert model.privacy.records_policy == "dp_count" and model.privacy.stop_probability == 0.2
    assert model.publish_items == ("model",)
    with pytest.raises(FrozenInstanceError):
        model.columns[0].name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        model.columns[1].alternatives[0].map["x"] = "Y"  # type: ignore[index]
    with pytest.raises(AttributeError):
        model.group_bins._items = {}  # type: ignore[misc]
    assert hash(model) == hash(SpecModel.from_document(copy.deepcopy(EVERY_FIELD)))


def test_a_document_of_another_shape_is_refused():
    with pytest.raises(SpecModelError, match="unknown field"):
        Criterion.from_document({"id": "a", "type": "kway_marginals", "threshold": 1, "epsilon": 1, "k": 2})
    with pytest.raises(SpecModelError, match="missing"):
        Criterion.from_document({"id": "a", "type": "kway_marginals", "threshold": 1})
    with pytest.raises(SpecModelError):
        SpecModel.from_document([])  # type: ignore[arg-type]


def test_constraints_in_document_form_are_typed_on_the_way_in():
    c = as_constraint({"name": "w", "when": [["a", "in", [1, 2]]]})
    assert isinstance(c, Constraint) and c.when[0].value == (1, 2)
    assert as_constraint(c) is c
    assert as_constraint({"name": "m", "any_missing": True}).any_missing is True


# --------------------------------------------------------------------------- the Spec's accessors


def test_spec_accessors(births_spec):
    doc = births_spec.document()
    assert json.dumps(doc) == json.dumps(births_spec.raw) and doc is not births_spec.raw
    ev = births_spec.evaluation_document
    assert "private_data_sha256" not in ev["privacy"] and ev is births_spec.evaluation_document
    assert json.dumps({k: v for k, v in ev.items() if k != "privacy"}) == json.dumps(
        {k: v for k, v in births_spec.raw.items() if k != "privacy"})
    assert births_spec.group_bins == births_spec.raw["group_bins"]
    assert births_spec.release_title == births_spec.raw["release"]["title"]
    assert births_spec.generator_types == [g["type"] for g in births_spec.raw["generators"]]
    assert births_spec.label_style("mother_age") == "births-2024"
    assert births_spec.released_columns == births_spec.model.columns
    assert births_spec.budget_formula() == budget_formula(births_spec.raw)
    again = pickle.loads(pickle.dumps(births_spec))
    assert again.model == births_spec.model and again.fingerprint == births_spec.fingerprint
