"""The spec reference (docs/spec.md), the metadata table (release/spec/explain.py) and
`dpbundle spec explain` stay complete: a new schema field, criterion type, criterion parameter or
generator hyperparameter that is not documented makes these tests fail."""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.mechanisms.criteria import base as criteria_base
from dpbundle.mechanisms.generators import _REGISTRY as GENERATOR_REGISTRY
from dpbundle.mechanisms.generators import generator_types
from dpbundle.release.spec import explain as spec_docs
from dpbundle.release.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "schemas" / "spec.schema.json").read_text(encoding="utf-8"))
DOC = (ROOT / "docs" / "spec.md").read_text(encoding="utf-8")
BIRTHS = ROOT / "examples" / "births.yaml"
COMMON = {p.name for p in spec_docs.COMMON_CRITERION}


def _property_names(node, path="") -> dict[str, str]:
    """Every key of every `properties` object anywhere in the schema -> one JSON path of it."""
    out: dict[str, str] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    out.setdefault(name, f"{path}.{name}")
                    out.update({k: v for k, v in _property_names(sub, f"{path}.{name}").items()
                                if k not in out})
            else:
                out.update({k: v for k, v in _property_names(value, f"{path}/{key}").items()
                            if k not in out})
    elif isinstance(node, list):
        for i, item in enumerate(node):
            out.update({k: v for k, v in _property_names(item, f"{path}[{i}]").items()
                        if k not in out})
    return out


def _acceptance_item() -> dict:
    return SCHEMA["properties"]["acceptance"]["items"]


def _acceptance_types() -> list[str]:
    return list(_acceptance_item()["properties"]["type"]["enum"])


def _type_rules(ctype: str) -> list[dict]:
    """The `then` parts of the acceptance item's if/then rules that apply to `ctype`."""
    out = []
    for rule in _acceptance_item().get("allOf", []):
        cond = rule.get("if", {}).get("properties", {}).get("type", {})
        if cond.get("const") == ctype or ctype in cond.get("enum", []):
            out.append(rule.get("then", {}))
    return out


# ---------------------------------------------------------------- (a) docs/spec.md is complete


def test_property_walk_finds_nested_fields():
    names = _property_names(SCHEMA)
    # a top-level, a nested and a $defs field: the walk must reach all three kinds
    for expected in ("dpbundle_spec", "unit_bins", "any_missing", "assumed_min_count", "stop_probability"):
        assert expected in names


@pytest.mark.parametrize("name", sorted(_property_names(SCHEMA)))
def test_every_schema_field_is_documented(name):
    where = _property_names(SCHEMA)[name]
    # as a code span of its own (`name`) or as the last part of a dotted one (`privacy.name`)
    assert re.search(r"`(?:[\w.]+\.)?" + re.escape(name) + "`", DOC), (f"schema field {name!r} ({where}) is not documented in "
                                "docs/spec.md (write it as `" + name + "` with its meaning)")


def test_every_enum_value_of_types_is_documented():
    gen_types = SCHEMA["properties"]["generators"]["items"]["properties"]["type"]["enum"]
    for t in _acceptance_types() + list(gen_types):
        assert f"`{t}`" in DOC, f"type {t!r} is not documented in docs/spec.md"


def _doc_section(code: str) -> str:
    """The text under the first heading that holds `code` (up to the next heading)."""
    m = re.search(r"^#+ .*`" + re.escape(code) + r"`.*$", DOC, re.M)
    assert m, f"docs/spec.md has no heading with `{code}`"
    rest = DOC[m.end():]
    nxt = re.search(r"^#+ ", rest, re.M)
    return rest[:nxt.start()] if nxt else rest


@pytest.mark.parametrize("kind,name", [("criterion", t) for t in spec_docs.CRITERIA]
                         + [("generator", t) for t in spec_docs.GENERATORS])
def test_each_type_has_a_doc_section_listing_its_parameters(kind, name):
    doc = (spec_docs.CRITERIA if kind == "criterion" else spec_docs.GENERATORS)[name]
    section = _doc_section(name)
    for p in doc.params:
        assert f"`{p.name}`" in section, f"docs/spec.md, section `{name}`: parameter {p.name!r} missing"


def test_doc_has_unit_system_and_walkthrough_sections():
    assert re.search(r"^## One unit system", DOC, re.M)
    assert re.search(r"^## Your own registry in 10 minutes", DOC, re.M)


def test_readme_links_the_reference():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Writing a spec", 1)[1].split("\n## ", 1)[0]
    assert "docs/spec.md" in section


# ---------------------------------------------------------------- (b) the metadata table is complete


def test_every_acceptance_type_has_an_entry():
    missing = sorted(set(_acceptance_types()) - set(spec_docs.CRITERIA))
    assert not missing, f"acceptance types without an entry in release/spec/explain.py: {missing}"
    extra = sorted(set(spec_docs.CRITERIA) - set(_acceptance_types()))
    assert not extra, f"release/spec/explain.py documents types the schema does not allow: {extra}"


def test_every_schema_criterion_parameter_is_listed():
    documented = set().union(*({p.name for p in d.params} for d in spec_docs.CRITERIA.values()))
    allowed = set(_acceptance_item()["properties"]) - COMMON
    assert not sorted(allowed - documented), \
        f"criterion parameters in the schema but in no type's entry: {sorted(allowed - documented)}"
    assert not sorted(documented - allowed), \
        f"documented parameters the schema does not allow: {sorted(documented - allowed)}"
    assert COMMON <= set(_acceptance_item()["properties"])


@pytest.mark.parametrize("ctype", sorted(spec_docs.CRITERIA))
def test_per_type_schema_rules_are_in_the_table(ctype):
    doc = spec_docs.CRITERIA[ctype]
    names = {p.name for p in doc.params}
    for then in _type_rules(ctype):
        for req in then.get("required", []):
            if req in COMMON:
                continue
            assert req in names, f"{ctype}: schema requires {req!r}, not in the table"
            assert doc.param(req).required, f"{ctype}.{req}: required by the schema, table says optional"
        for prop in then.get("properties", {}):
            assert prop in names | COMMON, f"{ctype}: schema allows {prop!r}, not in the table"


@pytest.mark.parametrize("ctype", sorted(spec_docs.CRITERIA))
def test_table_matches_the_criterion_implementation(ctype):
    """The criterion class declares the keys it accepts (`parameters`): same set as the table."""
    cls = criteria_base._REGISTRY.get(ctype)
    if cls is None:
        pytest.skip(f"criterion type {ctype!r} is not implemented (registered) yet")
    assert set(cls.parameters) == {p.name for p in spec_docs.CRITERIA[ctype].params}


def test_threshold_derivation_fields():
    t = _acceptance_item()["properties"]["threshold"]
    derived = next(f for f in t["oneOf"] if f.get("type") == "object")
    assert set(derived["properties"]) == {p.name for p in spec_docs.THRESHOLD_DERIVE}


def test_every_generator_type_has_an_entry():
    gen_enum = SCHEMA["properties"]["generators"]["items"]["properties"]["type"]["enum"]
    types = set(gen_enum) | set(generator_types())
    assert types == set(spec_docs.GENERATORS)
    item = SCHEMA["properties"]["generators"]["items"]["properties"]
    assert set(item) == {p.name for p in spec_docs.GENERATOR_KEYS}


@pytest.mark.parametrize("gtype", sorted(spec_docs.GENERATORS))
def test_generator_hyperparameters_and_defaults(gtype):
    declared = generator_types()[gtype]["hyperparameters"]
    doc = spec_docs.GENERATORS[gtype]
    assert declared, f"{gtype}: no declared hyperparameters (is its module importable?)"
    assert [p.name for p in doc.params] == list(declared)
    target = GENERATOR_REGISTRY[gtype]
    if isinstance(target, str):
        import importlib

        mod, _, attr = target.partition(":")
        target = getattr(importlib.import_module(mod), attr)
    sig = inspect.signature(target.__init__)
    for p in doc.params:
        code_default = sig.parameters[p.name].default
        if code_default is inspect.Parameter.empty:
            assert p.required, f"{gtype}.{p.name}: no default in the code, table has one"
        else:
            assert not p.required and p.default == code_default, \
                f"{gtype}.{p.name}: table default {p.default!r} != code default {code_default!r}"


@pytest.mark.parametrize("section", sorted(spec_docs.SECTIONS))
def test_sections_match_the_schema(section):
    props = SCHEMA["properties"][section]["properties"]
    assert set(props) == {p.name for p in spec_docs.SECTIONS[section]}


# ---------------------------------------------------------------- (c), (d) the command


def _run(*args: str):
    return CliRunner().invoke(app, ["spec", "explain", *args], env={"COLUMNS": "220"})


def test_explain_births():
    r = _run(str(BIRTHS))
    assert r.exit_code == 0, r.output
    spec = yaml.safe_load(BIRTHS.read_text(encoding="utf-8"))
    for c in spec["acceptance"]:
        assert c["id"] in r.output
    lines = [ln for ln in r.output.splitlines() if re.match(r"\W*margin_share\s", ln)]
    # three conditional_means criteria, none sets margin_share: the default 0.01 each time
    assert len(lines) == 3 and all("0.01 (default)" in ln for ln in lines), lines
    # max_k defaults to the number of released columns, computed from the spec
    kway = [ln for ln in r.output.splitlines() if re.match(r"\W*max_k\s", ln)]
    assert kway and f"{len(spec['columns'])} (default" in kway[0]
    # a value the spec sets is printed as such, not as a default
    by = [ln for ln in r.output.splitlines() if re.match(r"\W*by\s", ln)]
    assert any("[mother_age, null]" in ln and "default" not in ln for ln in by)
    # the released numbers of bins: "18-19" stands for 18.5, a bounded bin's integer midpoint
    assert "18-19 = 18.5" in r.output
    # the total epsilon of births (9.98) is printed with its cap
    assert "9.98" in r.output


def test_explain_persons_shows_new_criteria():
    r = _run(str(ROOT / "examples" / "persons.yaml"))
    assert r.exit_code == 0, r.output
    for word in ("max_k", "default", "mean_hours", "date of birth"):  # a CSV header that differs from the column name
        assert word in r.output, word


def test_walkthrough_spec_in_the_doc_is_valid(tmp_path):
    """The "your own registry" spec of docs/spec.md validates and explains as written."""
    block = re.search(r"```yaml\n# spec: walkthrough\n(.*?)```", DOC, re.S)
    assert block, "docs/spec.md lost its walkthrough spec"
    path = tmp_path / "stays.yaml"
    path.write_text(block.group(1), encoding="utf-8")
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.scheme.space import space_size

    spec = load_spec(path)
    assert space_size(spec) == 24  # the number the walkthrough states
    r = _run(str(path))
    assert r.exit_code == 0, r.output


def test_explain_type_conditional_means():
    r = _run("--type", "conditional_means")
    assert r.exit_code == 0, r.output
    assert "margin_share" in r.output and "0.01" in r.output and "target" in r.output


def test_explain_generator_type():
    r = _run("--type", "privbayes")
    assert r.exit_code == 0, r.output
    assert "epsilon_split" in r.output and "score" in r.output


def test_explain_overview_lists_every_type():
    r = _run()
    assert r.exit_code == 0, r.output
    for t in list(spec_docs.CRITERIA) + list(spec_docs.GENERATORS):
        assert t in r.output


def test_explain_unknown_type_exit_2():
    r = _run("--type", "median_of_everything")
    assert r.exit_code == 2
    assert "unknown type" in r.output


def test_explain_bad_spec_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dpbundle_spec: 1\n", encoding="utf-8")
    r = _run(str(bad))
    assert r.exit_code == 2


def test_spec_validate_warns_about_a_threshold_above_the_metric_range(tmp_path):
    """A faithfulness threshold of 10 can never fail (the share is at most 1): validate says so."""
    import yaml
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    doc = yaml.safe_load((ROOT / "examples" / "births.yaml").read_text("utf-8"))
    next(e for e in doc["acceptance"] if e["type"] == "faithfulness")["threshold"] = 10
    path = tmp_path / "loose.yaml"
    path.write_text(yaml.safe_dump(doc), "utf-8")
    r = CliRunner().invoke(app, ["spec", "validate", str(path)])
    assert r.exit_code == 0, r.output
    assert "warning" in r.output and "every candidate would pass" in " ".join(r.output.split())
