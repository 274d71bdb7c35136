"""The spec language of issue 10: input headers, per-column missing markers, integer-coded
categories, map + default, label overrides on categories, age / linear / year derivations, the
`in` / `not in` ops, and category semantics of raw and synthetic constraints. Release side
(spec, prepare, transform, constraints) and audit side (labels, constraints, private_data),
each checked against values worked out by hand here."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from dpbundle.audit.constraints import ConstraintError, violations
from dpbundle.audit.labels import build_view
from dpbundle.audit.private_data import bin_private, load_private
from dpbundle.mechanisms.coding import Coded
from dpbundle.release.data.constraints import bin_condition, synthetic_violations
from dpbundle.release.data.prepare import prepare
from dpbundle.release.spec.load import SpecError, validate_spec
from dpbundle.release.data.transform import codings, transform

CONFIG = {"columns": {"age": "bands", "sex": "sex", "region": "three", "status": "two", "income": "k"},
          "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.5, "theta": 4},
          "projection": {"min_count": 2}}


def base_doc() -> dict:
    """A small spec using every new input / column feature (public values only)."""
    return {
        "dpbundle_spec": 1,
        "release": {"title": "t", "publisher": "p", "contact": "c", "licence": "CC0", "description": "d",
                    "unit_of_privacy": "one person"},
        "input": {
            "missing_values": ["NA"],
            "columns": [
                {"name": "dob", "header": "date of birth (Y-M-D)", "type": "date", "min": "1940-01-01", "max": "2005-12-31"},
                {"name": "sex", "header": "sex, 1=m 2=f", "type": "category", "categories": [1, 2]},
                {"name": "region", "header": "region>code", "type": "category",
                 "categories": ["north", "south", "east", "west", "abroad"]},
                {"name": "status", "type": "category", "categories": [1, 2, 3, 4], "missing": ["9"]},
                {"name": "income", "header": "income ($100s)", "type": "integer", "min": 0, "max": 3000, "missing": [-1]},
            ],
        },
        "raw_constraints": [
            {"name": "missing value", "any_missing": True},
            {"name": "young and status 3 or 4", "when": [["status", "in", [3, 4]], ["dob", ">", "2000-01-01"]]},
            {"name": "abroad women", "when": [["region", "not in", ["north", "south", "east", "west"]], ["sex", "==", 2]]},
        ],
        "columns": [
            {"name": "age", "source": {"column": "dob", "derive": "age", "reference": "2024-01-01"},
             "alternatives": [{"id": "bands", "edges": [18, 30, 45, 65, 85]}]},
            {"name": "sex", "source": {"column": "sex", "derive": "category"},
             "alternatives": [{"id": "sex", "categories": ["m", "f"], "map": {"1": "m", "2": "f"}, "values": [0, 1]}]},
            {"name": "region", "source": {"column": "region", "derive": "category"},
             "alternatives": [{"id": "three", "categories": ["north", "south", "other"], "default": "other",
                               "map": {"north": "north", "south": "south"},
                               "labels": ["North", "South", "Elsewhere"]}]},
            {"name": "status", "source": {"column": "status", "derive": "category"},
             "alternatives": [{"id": "two", "categories": ["single", "other"], "map": {"1": "single"}, "default": "other"}]},
            {"name": "income", "source": {"column": "income", "derive": "linear", "scale": 0.1, "offset": 0},
             "alternatives": [{"id": "k", "clip": [0, 200], "edges": [0, 25, 50, 100, 200.5]}]},
        ],
        "synthetic_constraints": [
            {"name": "young and other status", "when": [["age", "<", 30], ["status", "in", ["other"]]]},
            {"name": "elsewhere, high income", "when": [["region", "not in", ["north", "south"]], ["income", ">=", 100]]},
        ],
        "generators": [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [4]}}],
        "projection": {"min_count": [2]},
        "acceptance": [{"id": "kway", "type": "kway_marginals", "threshold": 1.0, "epsilon": 0.1}],
        "privacy": {"epsilon_generation": 1.0, "epsilon_cap": 10.0},
    }


def problems_of(doc: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_spec(doc)
    return info.value.problems


def has(problems: list[str], path: str, *words: str) -> bool:
    return any(p.startswith(path) and all(w in p for w in words) for p in problems)


def test_base_spec_is_valid():
    validate_spec(base_doc())


def test_births_spec_still_valid(births_spec):
    assert births_spec.column_names[0] == "birth_month"


# ----------------------------------------------------------------- wrong result 1 (validation)

@pytest.mark.parametrize("value", [8, "8", "typo"])
def test_raw_constraint_value_not_a_declared_category_is_refused(value):
    """Regression: the old validator accepted any value on a category column."""
    doc = base_doc()
    doc["raw_constraints"].append({"name": "bad", "when": [["status", "==", value]]})
    assert has(problems_of(doc), "raw_constraints[3].when[0]:", "not a declared category", "status")


def test_raw_in_list_checks_every_item():
    doc = base_doc()
    doc["raw_constraints"][1]["when"][0] = ["status", "in", [3, 5]]
    probs = problems_of(doc)
    assert has(probs, "raw_constraints[1].when[0]:", "5", "not a declared category")
    assert not has(probs, "raw_constraints[1].when[0]:", "3 is")


def test_raw_category_order_op_is_refused():
    doc = base_doc()
    doc["raw_constraints"].append({"name": "bad", "when": [["status", "<", 3]]})
    assert has(problems_of(doc), "raw_constraints[3].when[0]:", "==, !=, in or not in")


def test_raw_value_types_checked():
    doc = base_doc()
    doc["raw_constraints"].append({"name": "bad", "when": [["income", "in", [1, "x"]], ["dob", "<", "2001-02-30"]]})
    probs = problems_of(doc)
    assert has(probs, "raw_constraints[3].when[0]:", "numeric")
    assert has(probs, "raw_constraints[3].when[1]:", "ISO date")


def test_set_op_needs_a_list_and_scalar_op_a_scalar():
    doc = base_doc()
    doc["raw_constraints"].append({"name": "bad", "when": [["status", "in", 3]]})
    assert any(p.startswith("raw_constraints[3].when[0]") for p in problems_of(doc))
    doc = base_doc()
    doc["raw_constraints"].append({"name": "bad", "when": [["status", "==", [3]]]})
    assert any(p.startswith("raw_constraints[3].when[0]") for p in problems_of(doc))


def test_synthetic_category_name_checked_against_every_alternative():
    doc = base_doc()
    doc["columns"][3]["alternatives"].append({"id": "three", "categories": ["single", "married", "rest"],
                                              "map": {"1": "single", "2": "married"}, "default": "rest"})
    # "other" is a category of alternative 'two' but not of 'three'
    assert has(problems_of(doc), "synthetic_constraints[0].when[1]:", "'other'", "'three'")


def test_synthetic_labels_are_not_category_names():
    doc = base_doc()
    doc["synthetic_constraints"][1]["when"][0] = ["region", "==", "Elsewhere"]
    assert has(problems_of(doc), "synthetic_constraints[1].when[0]:", "not a category")


def test_synthetic_numbers_on_categories_need_values():
    doc = base_doc()
    doc["synthetic_constraints"].append({"name": "x", "when": [["status", "==", 1]]})
    assert has(problems_of(doc), "synthetic_constraints[2].when[0]:", "values")
    doc = base_doc()
    doc["synthetic_constraints"].append({"name": "x", "when": [["sex", "==", 1]]})  # sex declares values
    validate_spec(doc)


def test_synthetic_string_on_binned_column_is_refused():
    doc = base_doc()
    doc["synthetic_constraints"].append({"name": "x", "when": [["age", "==", "18-29"]]})
    assert has(problems_of(doc), "synthetic_constraints[2].when[0]:", "binned")


# ----------------------------------------------------------------- the other validation rules

def test_map_key_not_an_input_category_is_refused():
    doc = base_doc()
    doc["columns"][2]["alternatives"][0]["map"]["nort"] = "north"
    assert has(problems_of(doc), "columns[2].alternatives[0].map.nort:", "not a declared category")


def test_without_default_every_input_category_must_land():
    doc = base_doc()
    del doc["columns"][2]["alternatives"][0]["default"]
    assert has(problems_of(doc), "columns[2].alternatives[0]:", "'east'", "default")


def test_default_must_be_a_category():
    doc = base_doc()
    doc["columns"][2]["alternatives"][0]["default"] = "others"
    assert has(problems_of(doc), "columns[2].alternatives[0].default:", "'others'")


def test_category_that_is_also_a_missing_marker_is_refused():
    doc = base_doc()
    doc["input"]["columns"][3]["missing"] = [4]
    assert has(problems_of(doc), "input.columns[3]:", "'4'", "missing")


def test_categories_equal_by_text_are_duplicates():
    doc = base_doc()
    doc["input"]["columns"][3]["categories"] = [1, "1", 2]
    assert has(problems_of(doc), "input.columns[3].categories:", "twice")


def test_age_needs_reference_and_a_date_source():
    doc = base_doc()
    del doc["columns"][0]["source"]["reference"]
    assert any(p.startswith("columns[0].source") for p in problems_of(doc))
    doc = base_doc()
    doc["columns"][0]["source"]["column"] = "income"
    assert has(problems_of(doc), "columns[0].source.derive:", "'age' needs a date")


def test_unclipped_age_bins_must_cover_the_ages_the_input_range_allows():
    doc = base_doc()
    # dob 1940-01-01 .. 2005-12-31 at 2024-01-01: ages 18 .. 84; bins [18, 80) miss 80..84
    doc["columns"][0]["alternatives"][0]["edges"] = [18, 30, 45, 65, 80]
    assert has(problems_of(doc), "columns[0].alternatives[0]:", "18..84")
    doc["input"]["columns"][0]["min"] = "1944-01-02"  # oldest now 79
    validate_spec(doc)


def test_unclipped_age_without_input_range_is_refused():
    doc = base_doc()
    del doc["input"]["columns"][0]["min"]
    assert has(problems_of(doc), "columns[0].alternatives[0].clip:", "age")
    doc["columns"][0]["alternatives"][0].update(clip=[18, 84])
    validate_spec(doc)


def test_year_needs_clip_or_input_range():
    doc = base_doc()
    doc["columns"].append({"name": "birth_year", "source": {"column": "dob", "derive": "year"},
                           "alternatives": [{"id": "decades", "edges": [1940, 1960, 1980, 2006]}]})
    validate_spec(doc)  # input min/max: years 1940..2005, covered
    doc["columns"][-1]["alternatives"][0]["edges"] = [1950, 1960, 1980, 2006]
    assert has(problems_of(doc), "columns[5].alternatives[0]:", "1940..2005")
    del doc["input"]["columns"][0]["max"]
    assert has(problems_of(doc), "columns[5].alternatives[0].clip:", "year")


def test_linear_needs_numeric_source_scale_and_clip():
    doc = base_doc()
    doc["columns"][4]["source"]["scale"] = 0
    assert has(problems_of(doc), "columns[4].source.scale:", "not be 0")
    doc = base_doc()
    del doc["columns"][4]["source"]["scale"]
    assert any(p.startswith("columns[4].source") for p in problems_of(doc))
    doc = base_doc()
    del doc["columns"][4]["alternatives"][0]["clip"]
    assert has(problems_of(doc), "columns[4].alternatives[0].clip:", "clip")
    doc = base_doc()
    doc["columns"][4]["source"] = {"column": "region", "derive": "linear", "scale": 2}
    assert has(problems_of(doc), "columns[4].source.derive:", "'linear' needs")


def test_scale_without_linear_is_refused():
    doc = base_doc()
    doc["columns"][0]["source"]["scale"] = 2
    assert any(p.startswith("columns[0].source") for p in problems_of(doc))


# ----------------------------------------------------------------- loading and coding

ROWS = [
    # dob, sex, region, status, income ($100s)
    ("1990-06-15", "1", "north", "1", "250"),    # kept
    ("2003-05-01", "2", "east", "3", "1200"),    # young + status 3: dropped
    ("1950-01-01", "2", "abroad", "2", "90"),    # abroad woman: dropped
    ("1950-01-02", "1", "abroad", "4", "3000"),  # kept (a man); status 4 -> other
    ("NA", "1", "north", "1", "10"),             # missing: dropped
    ("1980-02-29", "2", "west", "9", "10"),      # status 9 = missing (its own marker): dropped
    ("1980-02-29", "2", "west", "2", "-1"),      # income -1 = missing: dropped
    ("2005-12-31", "2", "south", "2", "499"),    # kept: age 18; 2005 > 2000 but status 2
    ("1944-01-01", "1", "south", "1", "0"),      # kept: age 80 on 2024-01-01
    ("1944-01-02", "2", "west", "3", "2000"),    # kept: age 79
]
HEADER = ["date of birth (Y-M-D)", "sex, 1=m 2=f", "region>code", "status", "income ($100s)", "ignored"]


def write_csv(path, rows=ROWS) -> None:
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(HEADER)
        for r in rows:
            w.writerow(list(r) + ["x"])


def test_prepare_reads_headers_markers_integer_categories_and_in_constraints(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path)
    spec = validate_spec(base_doc())
    prep = prepare(path, spec)
    assert prep.n == 5  # rows 0, 3, 7, 8, 9 above
    assert dict(prep.dropped_by)["young and status 3 or 4"] == 1
    assert dict(prep.dropped_by)["abroad women"] == 1
    coded = transform(prep, spec, CONFIG)
    frame = coded.labels_frame()
    assert list(frame["age"]) == ["30-44", "65-84", "18-29", "65-84", "65-84"]
    assert list(frame["sex"]) == ["m", "m", "f", "m", "f"]
    assert list(frame["region"]) == ["North", "Elsewhere", "South", "South", "Elsewhere"]
    assert list(frame["status"]) == ["single", "other", "other", "single", "other"]
    # income: 25.0 (an edge: left-closed), 300 -> clip 200, 49.9, 0.0, 200.0 (thousands, float bins)
    assert list(frame["income"]) == ["25-50", "100<", "25-50", "0-25", "100<"]


def test_audit_loader_agrees_with_release_on_the_same_file(tmp_path):
    path = tmp_path / "d.csv"
    write_csv(path)
    doc = base_doc()
    spec = validate_spec(doc)
    coded = transform(prepare(path, spec), spec, CONFIG)
    view = build_view({"spec": doc, "configuration": CONFIG, "configuration_id": ""})
    table = load_private(path, doc)
    codes, _ = bin_private(table, view)
    assert table.n == 5
    np.testing.assert_array_equal(codes, coded.codes)
    assert [c.labels for c in view.columns] == [c.labels for c in coded.columns]
    for a, c in zip(view.columns, coded.columns):
        np.testing.assert_array_equal(a.numbers, c.values)


def test_integer_value_matches_a_string_category_by_text(tmp_path):
    """Regression (wrong result 1): `8` against the categories "0".."8" matched no row, so `!=` matched all."""
    doc = base_doc()
    doc["input"]["columns"][3]["categories"] = [str(k) for k in range(9)]
    doc["input"]["columns"][3]["missing"] = ["9"]
    doc["columns"][3]["alternatives"][0]["map"] = {"1": "single"}
    doc["raw_constraints"] = [{"name": "missing value", "any_missing": True},
                              {"name": "status 1", "when": [["status", "==", 1]]}]
    spec = validate_spec(doc)
    path = tmp_path / "d.csv"
    write_csv(path)
    prep = prepare(path, spec)
    assert dict(prep.dropped_by)["status 1"] == 3  # rows 0, 4, 8 (ROWS is indexed from 0)
    assert prep.n == 5  # drops rows {0, 4, 8} | missing {4 (NA), 5 (status 9), 6 (income -1)}
    assert load_private(path, doc).n == 5
    doc["raw_constraints"][1]["when"][0] = ["status", "!=", 1]
    prep = prepare(path, validate_spec(doc))
    assert dict(prep.dropped_by)["status 1"] == 6  # rows 1, 2, 3, 6, 7, 9; row 5 (status 9 = missing) never matches
    assert prep.n == 2  # rows 0 and 8
    assert load_private(path, doc).n == 2


def test_missing_header_names_the_header(tmp_path):
    from dpbundle.release.data.prepare import InputError

    path = tmp_path / "d.csv"
    path.write_text("dob,sex\n2000-01-01,1\n")
    with pytest.raises(InputError) as info:
        prepare(path, validate_spec(base_doc()))
    assert "'date of birth (Y-M-D)'" in str(info.value)


def test_per_column_missing_marker_is_not_missing_elsewhere(tmp_path):
    """'9' is missing in status only; in income it is a number (900 $ = 0.9 k)."""
    from dpbundle.release.data.prepare import read_typed

    path = tmp_path / "d.csv"
    write_csv(path, [("1990-06-15", "1", "north", "9", "9")])
    table, _ = read_typed(path, validate_spec(base_doc()))
    assert table["status"][0] == -1 and table["income"][0] == 9.0


def test_age_counts_completed_years_including_29_february(tmp_path):
    from dpbundle.release.data.transform import _age

    dates = np.array(["2000-02-29", "2000-03-01", "2000-02-28", "1999-12-31"], dtype="datetime64[D]")
    # reference 2023-02-28 (common year): the 29 February birthday has not come yet
    np.testing.assert_array_equal(_age(dates, "2023-02-28"), [22, 22, 23, 23])
    np.testing.assert_array_equal(_age(dates, "2023-03-01"), [23, 23, 23, 23])


# ----------------------------------------------------------------- synthetic constraints by name

def _coded(doc: dict, rows: list[list[str]]):
    spec = validate_spec(doc)
    cols = codings(spec, CONFIG)
    look = [{lab: k for k, lab in enumerate(c.labels)} for c in cols]
    return Coded(np.array([[look[j][v] for j, v in enumerate(r)] for r in rows]), cols)


SYN = [["18-29", "m", "North", "other", "0-25"],      # young + other: violates #0
       ["18-29", "m", "North", "single", "0-25"],
       ["45-64", "f", "Elsewhere", "single", "100<"],  # elsewhere + income >= 100: violates #1
       ["45-64", "f", "South", "single", "100<"],
       ["30-44", "f", "Elsewhere", "other", "50-100"]]
SYN_BAD = [True, False, True, False, False]


def test_release_synthetic_constraints_by_category_name():
    doc = base_doc()
    coded = _coded(doc, SYN)
    assert list(synthetic_violations(doc["synthetic_constraints"], coded)) == SYN_BAD


def test_audit_synthetic_constraints_by_category_name():
    doc = base_doc()
    coded = _coded(doc, SYN)
    view = build_view({"spec": doc, "configuration": CONFIG, "configuration_id": ""})
    masks = violations(doc["synthetic_constraints"], view.columns, coded.codes, view.names)
    assert list(masks[0][1] | masks[1][1]) == SYN_BAD
    with pytest.raises(ConstraintError):
        violations([{"name": "x", "when": [["region", "==", "Elsewhere"]]}], view.columns, coded.codes, view.names)


@pytest.mark.parametrize("op,value,expected", [
    ("in", [18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29], [True, False, False, False]),
    ("in", list(range(18, 29)), [False, False, False, False]),  # 29 missing: the bin is not inside
    ("not in", [50], [True, True, False, True]),
    ("not in", [29.5, 100], [True, True, True, True]),
    ("!=", 29.5, [True, True, True, True]),  # no integer bin holds 29.5
])
def test_set_ops_on_integer_bins_release_and_audit(op, value, expected):
    doc = base_doc()
    spec = validate_spec(doc)
    age = codings(spec, CONFIG)[0]
    assert list(bin_condition(age, op, value)) == expected
    from dpbundle.audit.constraints import bin_condition as audit_bin_condition

    view = build_view({"spec": doc, "configuration": CONFIG, "configuration_id": ""})
    assert list(audit_bin_condition(view.columns[0], op, value)) == expected


def test_float_bins_are_real_intervals():
    """income (0.1 x an integer) holds real values: [0, 25) does not meet x <= 24."""
    doc = base_doc()
    income = codings(validate_spec(doc), CONFIG)[4]
    assert list(bin_condition(income, "<=", 24)) == [False, False, False, False]
    assert list(bin_condition(income, "<=", 25)) == [True, False, False, False]


# ----------------------------------------------------------------- wrong result 2: labels on categories

def test_category_label_override_reaches_the_audit_view():
    """Regression (wrong result 2): the audit read a categorical column's labels from its
    categories, so a bundle with a label override failed its own audit."""
    doc = base_doc()
    view = build_view({"spec": doc, "configuration": CONFIG, "configuration_id": ""})
    region = view.columns[view.index("region")]
    assert region.labels == ("North", "South", "Elsewhere")
    assert region.categories == ("north", "south", "other")
    release = codings(validate_spec(doc), CONFIG)[2]
    assert release.labels == region.labels and release.categories == region.categories


def test_label_override_count_must_match_categories():
    doc = base_doc()
    doc["columns"][2]["alternatives"][0]["labels"] = ["North", "South"]
    assert has(problems_of(doc), "columns[2].alternatives[0].labels:", "2 labels for 3")


def test_spec_json_of_the_base_spec_validates_in_the_audit_schema():
    from dpbundle.audit.schema_util import validate

    assert validate(json.loads(json.dumps(base_doc())), "spec") == []


def test_old_spec_without_new_fields_is_unchanged(births_doc):
    doc = copy.deepcopy(births_doc)
    validate_spec(doc)
    assert doc == births_doc


# ----------------------------------------------------------------- regressions on old-style specs

def _old_style_doc(births_doc: dict) -> dict:
    """births.yaml plus a string-coded category input column "0".."8" (features the old code accepted)."""
    doc = copy.deepcopy(births_doc)
    doc["input"]["columns"].append({"name": "plurality", "type": "category", "categories": [str(k) for k in range(9)]})
    return doc


def test_regression_undeclared_category_value_refused_on_old_style_spec(births_doc):
    doc = _old_style_doc(births_doc)
    doc["raw_constraints"].append({"name": "typo", "when": [["plurality", "!=", "one"]]})
    assert has(problems_of(doc), f"raw_constraints[{len(doc['raw_constraints']) - 1}].when[0]:", "'one'", "not a declared category")


def test_regression_integer_value_against_string_categories(births_doc, tmp_path):
    """`!=` 8 against the categories "0".."8" used to drop every row (8 != "8")."""
    doc = _old_style_doc(births_doc)
    doc["raw_constraints"] = [{"name": "missing value", "any_missing": True},
                              {"name": "not 8", "when": [["plurality", "!=", 8]]}]
    path = tmp_path / "d.csv"
    path.write_text("mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth,plurality\n"
                    "30,1,39,true,3000,2014-01-01,8\n30,1,39,false,3100,2014-02-01,1\n30,2,40,true,3200,2014-03-01,8\n")
    prep = prepare(path, validate_spec(doc))
    assert prep.n == 2 and dict(prep.dropped_by)["not 8"] == 1


def test_regression_category_labels_override_in_audit_view(births_doc):
    doc = copy.deepcopy(births_doc)
    doc["columns"][4]["alternatives"][0]["labels"] = ["male", "female"]
    spec = validate_spec(doc)
    config = {"columns": {c["name"]: c["alternatives"][0]["id"] for c in doc["columns"]}}
    release_labels = [c.labels for c in codings(spec, config)]
    view = build_view({"spec": doc, "configuration": config, "configuration_id": ""})
    assert [c.labels for c in view.columns] == release_labels
    assert view.columns[4].labels == ("male", "female")


# ----------------------------------------------------------------- classification and quantile criteria

def _with(*entries) -> dict:
    doc = base_doc()
    doc["acceptance"] += list(entries)
    return doc


COEF = {"id": "m", "type": "classification", "target": "region", "positive": "south", "threshold": 2, "epsilon": 0.1}


@pytest.mark.parametrize("positive", ["south", "South", ["north", "south"]])
def test_classification_positive_by_category_or_label_is_valid(positive):
    validate_spec(_with(dict(COEF, positive=positive)))


def test_classification_positive_not_a_category_is_refused():
    assert has(problems_of(_with(dict(COEF, positive="sout"))), "acceptance[1].positive", "'sout'", "North")


def test_classification_every_category_positive_is_refused():
    doc = _with(dict(COEF, positive=["north", "south", "other"]))
    assert has(problems_of(doc), "acceptance[1].positive", "leave at least one negative")


def test_classification_accuracy_needs_an_earlier_coefficients_report():
    acc = dict(COEF, id="a", report="accuracy", threshold=0.05)
    assert has(problems_of(_with(acc)), "acceptance[1]", "report: coefficients")
    assert has(problems_of(_with(acc, COEF)), "acceptance[1]", "report: coefficients")  # listed after it
    validate_spec(_with(COEF, acc))
    assert has(problems_of(_with(COEF, dict(acc, positive="north"))), "acceptance[2]", "same target and positive")


def test_classification_report_specific_fields_are_refused_elsewhere():
    assert has(problems_of(_with(dict(COEF, reference="x"))), "acceptance[1]", "reference", "only for report: accuracy")
    assert any("positive" in p for p in problems_of(_with({k: v for k, v in COEF.items() if k != "positive"})))


def test_quantile_needs_a_target_with_numbers():
    q = {"id": "q", "type": "quantile", "target": "income", "by": [None, "sex"], "threshold": 10, "epsilon": 0.1}
    validate_spec(_with(q))
    assert has(problems_of(_with(dict(q, target="region"))), "acceptance[1].target", "no numbers", "values")
    assert problems_of(_with(dict(q, quantiles=[0.5, 1.0])))
    assert problems_of(_with(dict(q, threshold=0)))  # a threshold no value can get under
