"""Release spec: schema + semantic checks (release/spec/load.py, schemas/spec.schema.json)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from dpbundle.release.spec.load import SpecError, load_spec, validate_spec


def _write_yaml(tmp_path: Path, doc: dict, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return path


def _problems(tmp_path: Path, doc: dict, via_file: bool = False) -> list[str]:
    """Validate doc (or write it as YAML and load it) and return the reported problems (it must fail)."""
    with pytest.raises(SpecError) as info:
        if via_file:
            path = _write_yaml(tmp_path, doc)
            load_spec(path)
        else:
            validate_spec(doc, source="copy-of-births")
    assert info.value.problems, "a SpecError must list at least one problem"
    # The source is named in the exception text.
    assert (str(path) if via_file else "copy-of-births") in str(info.value)
    return info.value.problems


def _has(problems: list[str], prefix: str, *fragments: str) -> bool:
    return any(p.startswith(prefix) and all(f in p for f in fragments) for p in problems)


# --------------------------------------------------------------------------- the valid example

def test_births_example_is_valid(births_spec, births_doc):
    assert births_spec.raw == births_doc
    assert births_spec.column_names == [
        "birth_month", "mother_age", "parity", "gestation_week", "birth_sex", "birth_weight"]


def test_births_total_epsilon_is_9_98(births_spec, births_doc):
    # Independently from the YAML: 2 x (eps_gen + sum of the criteria's epsilons).
    eps_gen = births_doc["privacy"]["epsilon_generation"]
    eps_eval = math.fsum(c["epsilon"] for c in births_doc["acceptance"])
    assert eps_gen == 4.0
    assert eps_eval == pytest.approx(0.99, abs=1e-12)
    assert 2 * (eps_gen + eps_eval) == pytest.approx(9.98, abs=1e-12)
    assert births_spec.epsilon_generation == 4.0
    assert births_spec.epsilon_evaluation == pytest.approx(0.99, abs=1e-12)
    assert births_spec.total_epsilon == pytest.approx(9.98, abs=1e-12)
    assert births_spec.total_epsilon <= births_spec.epsilon_cap == 10.0


def test_pre_selection_adds_to_total(births_doc):
    births_doc["privacy"]["pre_selection"] = [{"purpose": "n", "epsilon": 0.01}]
    spec = validate_spec(births_doc)
    assert spec.total_epsilon == pytest.approx(9.99, abs=1e-12)


def test_public_dict_drops_private_fingerprints(births_doc):
    births_doc["privacy"]["private_data_sha256"] = ["a" * 64]
    spec = validate_spec(births_doc)
    assert "private_data_sha256" not in spec.public_dict()["privacy"]
    assert spec.raw["privacy"]["private_data_sha256"] == ["a" * 64]


# --------------------------------------------------------------------------- one error each

def test_negative_epsilon_names_path(tmp_path, births_doc):
    births_doc["acceptance"][3]["epsilon"] = -0.17
    problems = _problems(tmp_path, births_doc, via_file=True)
    assert _has(problems, "acceptance[3].epsilon: must be > 0")


def test_zero_generation_epsilon(tmp_path, births_doc):
    births_doc["privacy"]["epsilon_generation"] = 0
    assert _has(_problems(tmp_path, births_doc), "privacy.epsilon_generation: must be > 0")


def test_non_increasing_edges(tmp_path, births_doc):
    # mother_age, alternative "coarse": 25 then 25
    births_doc["columns"][1]["alternatives"][0]["edges"] = [17, 18, 20, 25, 25, 35, 40, 43, 45, 46]
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "columns[1].alternatives[0].edges:", "strictly increasing")


def test_decreasing_edges(tmp_path, births_doc):
    births_doc["columns"][2]["alternatives"][0]["edges"] = [1, 4, 2, 7, 11, 12]
    assert _has(_problems(tmp_path, births_doc), "columns[2].alternatives[0].edges:", "strictly increasing")


def test_unknown_column_in_raw_constraint(tmp_path, births_doc):
    births_doc["raw_constraints"][1]["when"][0][0] = "birth_wieght"
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "raw_constraints[1].when[0]:", "unknown column", "birth_wieght")


def test_unknown_column_in_synthetic_constraint(tmp_path, births_doc):
    # 'is_female' is an input column but not a released one: synthetic constraints see released columns only.
    births_doc["synthetic_constraints"][2]["when"][1][0] = "is_female"
    assert _has(_problems(tmp_path, births_doc), "synthetic_constraints[2].when[1]:", "unknown column", "is_female")


def test_total_epsilon_over_cap(tmp_path, births_doc):
    births_doc["privacy"]["epsilon_generation"] = 4.1  # 2 x (4.1 + 0.99) = 10.18 > 10
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "privacy.epsilon_cap:", "exceeds the cap")
    assert any("10.18" in p for p in problems)


def test_total_epsilon_exactly_at_cap_is_accepted(births_doc):
    births_doc["privacy"]["epsilon_cap"] = 9.98
    assert validate_spec(births_doc).total_epsilon == pytest.approx(9.98)


def test_unknown_field(tmp_path, births_doc):
    births_doc["release"]["colour"] = "blue"
    problems = _problems(tmp_path, births_doc, via_file=True)
    assert _has(problems, "release:", "unknown field", "colour")


def test_unknown_top_level_field(tmp_path, births_doc):
    births_doc["extras"] = {}
    assert _has(_problems(tmp_path, births_doc), "(root):", "unknown field", "extras")


def test_missing_required_field(tmp_path, births_doc):
    del births_doc["release"]["title"]
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "release:", "missing required field", "title")


def test_missing_required_criterion_field(tmp_path, births_doc):
    del births_doc["acceptance"][5]["bounds"]  # a regression criterion needs bounds
    assert _has(_problems(tmp_path, births_doc), "acceptance[5]:", "missing required field", "bounds")


def test_edge_outside_clip_range(tmp_path, births_doc):
    # gestation_week coarse, clip [28, 42]: an extra bin starting at 43 lies outside the clip range
    births_doc["columns"][3]["alternatives"][0]["edges"] = [28, 29, 32, 34, 37, 42, 43, 44]
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "columns[3].alternatives[0]", "clip")
    assert _has(problems, "columns[3].alternatives[0].edges:", "inside the clip range", "43")


def test_first_edge_below_clip_minimum(tmp_path, births_doc):
    births_doc["columns"][1]["alternatives"][0]["edges"] = [16, 18, 20, 25, 30, 35, 40, 43, 45, 46]
    assert _has(_problems(tmp_path, births_doc), "columns[1].alternatives[0]:", "clip minimum 17")


def test_criterion_with_unknown_target(tmp_path, births_doc):
    births_doc["acceptance"][2]["target"] = "parities"
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "acceptance[2].target:", "unknown released column", "parities")


def test_criterion_with_unknown_group_by(tmp_path, births_doc):
    births_doc["acceptance"][3]["by"][1] = "birth_order"
    assert _has(_problems(tmp_path, births_doc), "acceptance[3].by[1]:", "unknown released column", "birth_order")


def test_group_bins_edge_splitting_a_bin(tmp_path, births_doc):
    # 37 lies strictly inside mother_age's coarse bin [35, 40)
    births_doc["group_bins"]["mother_age"] = {"edges": [25, 30, 37], "labels": ["<25", "25-29", "30-36", "37+"]}
    problems = _problems(tmp_path, births_doc, via_file=True)
    assert _has(problems, "group_bins.mother_age.edges:", "37", "splits", "coarse")


def test_group_bins_edge_on_a_bin_boundary_is_fine(births_doc):
    # 35 and 40 are edges of every mother_age alternative
    births_doc["group_bins"]["mother_age"] = {"edges": [35, 40], "labels": ["<35", "35-39", "40+"]}
    validate_spec(births_doc)


def test_group_bins_label_count(tmp_path, births_doc):
    births_doc["group_bins"]["parity"]["labels"] = ["1", "2+"]
    assert _has(_problems(tmp_path, births_doc), "group_bins.parity.labels:")


def test_all_problems_are_listed(tmp_path, births_doc):
    births_doc["release"]["colour"] = "blue"
    births_doc["acceptance"][0]["epsilon"] = -1
    problems = _problems(tmp_path, births_doc)
    assert _has(problems, "release:", "colour")
    assert _has(problems, "acceptance[0].epsilon:")


# --------------------------------------------------------------------------- file formats

def test_json_spec_accepted(tmp_path, births_doc):
    path = tmp_path / "births.json"
    path.write_text(json.dumps(births_doc, indent=1), "utf-8")
    spec = load_spec(path)
    assert spec.raw == births_doc
    assert spec.total_epsilon == pytest.approx(9.98)


def test_broken_json_spec(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"dpbundle_spec": 1,', "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "not valid JSON" in str(info.value)


def test_json_spec_with_error_names_path(tmp_path, births_doc):
    births_doc["acceptance"][3]["epsilon"] = -1
    path = tmp_path / "births.json"
    path.write_text(json.dumps(births_doc), "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert _has(info.value.problems, "acceptance[3].epsilon: must be > 0")


def test_malformed_yaml(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("dpbundle_spec: 1\nrelease: {title: [unclosed\n  x: : :\n", "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "not valid YAML" in msg
    assert str(path) in msg
    assert "line" in msg  # the YAML parser's location is passed on


def test_yaml_list_at_root(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n", "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.problems == ["(root): must be a mapping of fields"]


def test_yaml_python_object_tag_is_rejected_and_not_executed(tmp_path, births_spec_path):
    marker = tmp_path / "pwned"
    text = births_spec_path.read_text("utf-8")
    text = text.replace(
        'contact: "open-data@example.org"',
        f'contact: !!python/object/apply:os.system ["touch {marker}"]', 1)
    assert "!!python/object/apply:os.system" in text
    path = tmp_path / "evil.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "not valid YAML" in str(info.value)
    assert not marker.exists(), "the YAML tag was executed"


def test_yaml_python_name_tag_is_rejected(tmp_path):
    path = tmp_path / "evil2.yaml"
    path.write_text("dpbundle_spec: !!python/name:os.system\n", "utf-8")
    with pytest.raises(SpecError):
        load_spec(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert "cannot read" in str(info.value)


def test_iso_dates_stay_strings(tmp_path, births_doc):
    # An unquoted YAML date must not become a datetime.date (the schema expects ISO strings).
    text = yaml.safe_dump(births_doc, sort_keys=False).replace("'2014-01-01'", "2014-01-01")
    assert "start: 2014-01-01" in text
    path = tmp_path / "dates.yaml"
    path.write_text(text, "utf-8")
    assert load_spec(path).raw["release"]["period"]["start"] == "2014-01-01"


def test_fingerprint_independent_of_key_order(births_doc):
    a = validate_spec(births_doc)
    reordered = dict(reversed(list(births_doc.items())))
    b = validate_spec(reordered)
    assert a.fingerprint == b.fingerprint
    births_doc["privacy"]["epsilon_cap"] = 11.0
    assert validate_spec(births_doc).fingerprint != a.fingerprint


@pytest.mark.parametrize("yaml_value", [".inf", ".nan", "-.inf"])
def test_non_finite_numbers_rejected_in_yaml(tmp_path, births_spec_path, yaml_value):
    # NaN and infinities slip through numeric schema checks (NaN > 0 is False, inf > 0 is True) and
    # would make the budget check meaningless: 2 x (inf + 0.99) <= inf.
    text = births_spec_path.read_text("utf-8")
    text = text.replace("epsilon_generation: 4.0", f"epsilon_generation: {yaml_value}").replace(
        "epsilon_cap: 10.0", "epsilon_cap: .inf")
    path = tmp_path / "inf.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert _has(info.value.problems, "privacy.epsilon_cap: must be a finite number")
    assert _has(info.value.problems, "privacy.epsilon_generation: must be a finite number")


def test_nan_criterion_epsilon_rejected_in_json(tmp_path, births_doc):
    births_doc["acceptance"][1]["epsilon"] = float("nan")
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(births_doc), "utf-8")  # json writes NaN, json.loads accepts it
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.problems == ["acceptance[1].epsilon: must be a finite number (got nan)"]


def test_non_utf8_spec(tmp_path, births_spec_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(births_spec_path.read_bytes().replace(b"(example)", b"(\xe9xample)"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "not UTF-8" in str(info.value)


def test_directory_instead_of_spec(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path)
    assert "cannot read" in str(info.value)


def test_month_bins_must_cover_the_year(births_doc):
    births_doc["columns"][0]["alternatives"][0]["unit_bins"] = [1, 6]
    with pytest.raises(SpecError) as info:
        validate_spec(births_doc)
    assert _has(info.value.problems, "columns[0].alternatives[0]:", "months 1..12")
    # with a clip range the same bins are fine (months 7..12 go to the last bin)
    births_doc["columns"][0]["alternatives"][0]["clip"] = [1, 6]
    validate_spec(births_doc)
