"""Transformations: clip, bin, code, labels and numbers (release/data/transform.py).

Expected labels are those of the 2024 births release; expected numbers follow DESIGN.md ("a
single-value bin is its value, a bounded bin its midpoint, an open bin its edge") and are written
out by hand here.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dpbundle.release.data.prepare import Prepared
from dpbundle.release.spec.load import Spec, semantic_problems, validate_spec
from dpbundle.release.data.transform import (codes_to_labels, code_column, codings, column_coding,
                                        labels_to_codes, transform)

WEIGHT_LABELS = ["<1500"] + [f"{a}-{a + 99}" for a in range(1500, 4500, 100)] + ["4499<"]

EXPECTED_LABELS = {
    ("birth_month", "month"): [str(m) for m in range(1, 13)],
    ("mother_age", "coarse"): ["<18", "18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"],
    ("mother_age", "coarse-37"): ["<18", "18-19", "20-24", "25-29", "30-34", "35-36", "37-39", "40-42", "43-44", "44<"],
    ("mother_age", "years"): ["<18"] + [str(a) for a in range(18, 45)] + ["44<"],
    ("parity", "coarse"): ["1", "2-3", "4-6", "7-10", "10<"],
    ("parity", "unit"): [str(p) for p in range(1, 11)] + ["10<"],
    ("gestation_week", "coarse"): ["<29", "29-31", "32-33", "34-36", "37-41", "41<"],
    ("gestation_week", "weeks"): ["<29"] + [str(w) for w in range(29, 42)] + ["41<"],
    ("birth_sex", "sex"): ["M", "F"],
    ("birth_weight", "100g"): WEIGHT_LABELS,
}

EXPECTED_VALUES = {
    ("birth_month", "month"): list(range(1, 13)),
    ("mother_age", "coarse"): [18, 18.5, 22, 27, 32, 37, 41, 43.5, 44],
    ("mother_age", "coarse-37"): [18, 18.5, 22, 27, 32, 35.5, 38, 41, 43.5, 44],
    ("mother_age", "years"): [18] + list(range(18, 45)) + [44],
    ("parity", "coarse"): [1, 2.5, 5, 8.5, 10],
    ("parity", "unit"): list(range(1, 11)) + [10],
    ("gestation_week", "coarse"): [29, 30, 32.5, 35, 39, 41],
    ("gestation_week", "weeks"): [29] + list(range(29, 42)) + [41],
    ("birth_sex", "sex"): [0, 1],
    ("birth_weight", "100g"): [1500] + [a + 49.5 for a in range(1500, 4500, 100)] + [4499],
}


def _alternatives(doc: dict) -> list[tuple[str, str]]:
    return [(c["name"], a["id"]) for c in doc["columns"] for a in c["alternatives"]]


def test_every_alternative_is_covered(births_doc):
    assert sorted(_alternatives(births_doc)) == sorted(EXPECTED_LABELS)


@pytest.mark.parametrize("name,alt", sorted(EXPECTED_LABELS))
def test_labels_match_2024_release(births_spec, name, alt):
    coding = column_coding(births_spec, name, alt)
    assert list(coding.labels) == EXPECTED_LABELS[(name, alt)]
    assert coding.size == len(EXPECTED_LABELS[(name, alt)])
    assert coding.name == name


@pytest.mark.parametrize("name,alt", sorted(EXPECTED_VALUES))
def test_numbers_of_codes(births_spec, name, alt):
    coding = column_coding(births_spec, name, alt)
    np.testing.assert_array_equal(coding.values, np.array(EXPECTED_VALUES[(name, alt)], float))


def _number_from_label(label: str) -> float:
    """DESIGN's rule applied to a label's text: "a" -> a, "a-b" -> (a+b)/2, "<b" -> b, "X<" -> X."""
    if label.startswith("<"):
        return float(label[1:])
    if label.endswith("<"):
        return float(label[:-1])
    if "-" in label:
        a, b = label.split("-")
        return (float(a) + float(b)) / 2
    return float(label)


@pytest.mark.parametrize("name,alt", sorted(k for k in EXPECTED_LABELS if k[0] != "birth_sex"))
def test_numbers_follow_from_labels(births_spec, name, alt):
    coding = column_coding(births_spec, name, alt)
    assert list(coding.values) == [_number_from_label(s) for s in coding.labels]


@pytest.mark.parametrize("name,alt", sorted(EXPECTED_LABELS))
def test_codes_labels_round_trip(births_spec, name, alt):
    coding = column_coding(births_spec, name, alt)
    codes = np.arange(coding.size, dtype=np.int64)
    labels = codes_to_labels(coding, codes)
    np.testing.assert_array_equal(labels_to_codes(coding, labels), codes)
    # and in a shuffled, repeated order
    rng = np.random.default_rng(0)
    codes = rng.integers(0, coding.size, 500)
    np.testing.assert_array_equal(labels_to_codes(coding, codes_to_labels(coding, codes)), codes)


def test_unknown_label_is_named(births_spec):
    coding = column_coding(births_spec, "parity", "coarse")
    with pytest.raises(KeyError, match="11"):
        labels_to_codes(coding, ["1", "11"])


def test_unknown_alternative(births_spec):
    with pytest.raises(KeyError, match="decades"):
        column_coding(births_spec, "mother_age", "decades")


def test_bin_edges_of_codings(births_spec):
    # Gestation below 28 and above 42 weeks is possible in the input range: both end bins are open.
    c = column_coding(births_spec, "gestation_week", "coarse")
    np.testing.assert_array_equal(c.lower, [-np.inf, 29, 32, 34, 37, 42])
    np.testing.assert_array_equal(c.upper, [29, 32, 34, 37, 42, np.inf])
    assert c.ordered
    # Parity cannot be below the clip minimum 1: its first bin is closed.
    p = column_coding(births_spec, "parity", "coarse")
    np.testing.assert_array_equal(p.lower, [1, 2, 4, 7, 11])
    np.testing.assert_array_equal(p.upper, [2, 4, 7, 11, np.inf])
    sex = column_coding(births_spec, "birth_sex", "sex")
    assert not sex.ordered
    assert np.isnan(sex.lower).all() and np.isnan(sex.upper).all()


def _first_config(doc: dict) -> dict:
    return {"columns": {c["name"]: c["alternatives"][0]["id"] for c in doc["columns"]}}


def test_domain_of_first_alternatives(births_spec, births_doc):
    cols = codings(births_spec, _first_config(births_doc))
    assert tuple(c.size for c in cols) == (12, 9, 5, 6, 2, 32)
    assert [c.name for c in cols] == [c["name"] for c in births_doc["columns"]]


def _table(**columns) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in columns.items()}


def test_clipping_sends_out_of_range_values_to_end_bins(births_spec):
    t = _table(mother_age=np.array([10, 16, 17, 18, 19, 20, 44, 45, 46, 70], float))
    codes = code_column(births_spec, "mother_age", "coarse", t)
    # <18 <18 <18 18-19 18-19 20-24 43-44 44< 44< 44<
    np.testing.assert_array_equal(codes, [0, 0, 0, 1, 1, 2, 7, 8, 8, 8])
    years = code_column(births_spec, "mother_age", "years", t)
    np.testing.assert_array_equal(years, [0, 0, 0, 1, 2, 3, 27, 28, 28, 28])

    w = _table(birth_weight=np.array([100, 1399, 1400, 1499, 1500, 2999, 3000, 4499, 4500, 4599, 10000], float))
    codes = code_column(births_spec, "birth_weight", "100g", w)
    np.testing.assert_array_equal(codes, [0, 0, 0, 0, 1, 15, 16, 30, 31, 31, 31])

    g = _table(gestation_week=np.array([10, 28, 29, 31, 32, 36, 37, 41, 42, 50], float))
    np.testing.assert_array_equal(code_column(births_spec, "gestation_week", "coarse", g),
                                  [0, 0, 1, 1, 2, 3, 4, 4, 5, 5])
    p = _table(parity=np.array([1, 2, 3, 4, 6, 7, 10, 11, 30], float))
    np.testing.assert_array_equal(code_column(births_spec, "parity", "coarse", p), [0, 1, 1, 2, 2, 3, 3, 4, 4])


def test_birth_month_from_dates(births_spec):
    dates = np.array(["2019-01-15", "2019-02-28", "2020-02-29", "2019-12-31", "2014-07-01", "1969-12-31", "1970-01-01"],
                     dtype="datetime64[D]")
    codes = code_column(births_spec, "birth_month", "month", _table(date_of_birth=dates))
    np.testing.assert_array_equal(codes, [0, 1, 1, 11, 6, 11, 0])  # code = month - 1


def test_birth_sex_from_booleans(births_spec):
    codes = code_column(births_spec, "birth_sex", "sex", _table(is_female=np.array([0.0, 1.0, 1.0, 0.0])))
    coding = column_coding(births_spec, "birth_sex", "sex")
    assert list(codes_to_labels(coding, codes)) == ["M", "F", "F", "M"]


def test_birth_sex_map_is_respected(births_doc):
    # Swap the category order: the map, not the position, decides.
    births_doc["columns"][4]["alternatives"][0]["categories"] = ["F", "M"]
    spec = validate_spec(births_doc)
    coding = column_coding(spec, "birth_sex", "sex")
    codes = code_column(spec, "birth_sex", "sex", _table(is_female=np.array([0.0, 1.0])))
    assert list(codes_to_labels(coding, codes)) == ["M", "F"]


def test_transform_whole_table(births_spec, births_doc):
    table = {
        "mother_age": np.array([16, 33, 45], float),
        "parity": np.array([1, 3, 12], float),
        "gestation_week": np.array([27, 39, 43], float),
        "is_female": np.array([1.0, 0.0, 1.0]),
        "birth_weight": np.array([900, 3490, 4800], float),
        "date_of_birth": np.array(["2019-03-15", "2019-07-15", "2019-12-15"], dtype="datetime64[D]"),
    }
    prepared = Prepared("<test>", table, 3, 3)
    coded = transform(prepared, births_spec, _first_config(births_doc))
    assert coded.domain == (12, 9, 5, 6, 2, 32)
    frame = coded.labels_frame()
    assert frame.to_dict("records") == [
        {"birth_month": "3", "mother_age": "<18", "parity": "1", "gestation_week": "<29", "birth_sex": "F", "birth_weight": "<1500"},
        {"birth_month": "7", "mother_age": "30-34", "parity": "2-3", "gestation_week": "37-41", "birth_sex": "M", "birth_weight": "3400-3499"},
        {"birth_month": "12", "mother_age": "44<", "parity": "10<", "gestation_week": "41<", "birth_sex": "F", "birth_weight": "4499<"},
    ]


# --------------------------------------------------------------------------- property test

def _one_column_spec(edges: list[int], clip: list[int], lo: int, hi: int, full_validation: bool = False):
    doc = {
        "dpbundle_spec": 1,
        "release": {"title": "t", "publisher": "p", "contact": "c", "licence": "l", "description": "d",
                    "unit_of_privacy": "u"},
        "input": {"columns": [{"name": "x", "type": "integer", "min": lo, "max": hi}]},
        "columns": [{"name": "x", "source": {"column": "x"},
                     "alternatives": [{"id": "a", "clip": clip, "edges": edges}]}],
        "generators": [{"type": "crosstab"}],
        "projection": {"min_count": [2]},
        "acceptance": [{"id": "k", "type": "kway_marginals", "threshold": 0.01, "epsilon": 0.01}],
        "privacy": {"epsilon_generation": 1.0, "epsilon_cap": 10.0},
    }
    if full_validation:
        return validate_spec(doc)
    # The JSON Schema part does not depend on the edges; the semantic checks (edges, clip) do.
    assert semantic_problems(doc) == []
    return Spec(raw=doc)


@st.composite
def _edges_clip_values(draw):
    edges = sorted(draw(st.sets(st.integers(-500, 500), min_size=2, max_size=12)))
    lo = edges[0]
    # the last bin [edges[-2], edges[-1]) holds the clip max; the spec needs max > min
    hi_lo = max(edges[-2], lo + 1)
    assume(hi_lo <= edges[-1] - 1)
    hi = draw(st.integers(hi_lo, edges[-1] - 1))
    values = draw(st.lists(st.integers(-1000, 1000), min_size=1, max_size=50))
    return edges, [lo, hi], values


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edges_clip_values())
def test_code_is_the_bin_holding_the_clipped_value(case):
    edges, clip, values = case
    spec = _one_column_spec(edges, clip, -1000, 1000)
    coding = column_coding(spec, "x", "a")
    assert coding.size == len(edges) - 1
    # The input range (-1000, 1000) is wider than the clip range: both end bins are open.
    np.testing.assert_array_equal(coding.lower, [-np.inf, *edges[1:-1]])
    np.testing.assert_array_equal(coding.upper, [*edges[1:-1], np.inf])
    codes = code_column(spec, "x", "a", {"x": np.array(values, float)})
    for v, code in zip(values, codes):
        c = min(max(v, clip[0]), clip[1])
        expected = [i for i in range(len(edges) - 1) if edges[i] <= c < edges[i + 1]]
        assert expected == [code], (v, c, edges, clip)
    # labels round-trip and are distinct
    all_codes = np.arange(coding.size)
    np.testing.assert_array_equal(labels_to_codes(coding, codes_to_labels(coding, all_codes)), all_codes)


def test_closed_range_gives_plain_labels():
    # The input range equals the clip range: no open "<b" / "X<" bins, plain "a-b" labels and midpoints.
    spec = _one_column_spec([0, 10, 20, 21], [0, 20], 0, 20, full_validation=True)
    coding = column_coding(spec, "x", "a")
    assert list(coding.labels) == ["0-9", "10-19", "20"]
    np.testing.assert_array_equal(coding.values, [4.5, 14.5, 20])


# --------------------------------------------------------------------------- synthetic constraints on coded data

from dpbundle.mechanisms.coding import Coded  # noqa: E402
from dpbundle.release.data.constraints import synthetic_violations  # noqa: E402


def _coded_from_labels(spec, config, rows: list[dict]) -> Coded:
    cols = codings(spec, config)
    codes = np.array([[labels_to_codes(c, [r[c.name]])[0] for c in cols] for r in rows], dtype=np.int64)
    return Coded(codes=codes, columns=cols)


def test_synthetic_constraints_on_whole_bins(births_spec, births_doc):
    base = {"birth_month": "1", "mother_age": "30-34", "parity": "1", "gestation_week": "37-41",
            "birth_sex": "M", "birth_weight": "3000-3099"}
    cases = [
        # (changes, violates?) -- worked out by hand: a bin meets a condition when ALL of its values do
        ({}, False),
        ({"mother_age": "20-24", "parity": "7-10"}, False),    # ages 20..24 are not all < 23
        ({"mother_age": "18-19", "parity": "7-10"}, True),     # 18..19 < 23 and 7..10 > 6
        ({"mother_age": "20-24", "parity": "4-6"}, False),     # 20..24 not all < 20
        ({"mother_age": "<18", "parity": "4-6"}, True),        # every age < 18 is < 20, and 4..6 > 3
        ({"mother_age": "18-19", "parity": "2-3"}, False),     # 2..3 not > 3
        ({"mother_age": "25-29", "parity": "10<"}, False),     # 25..29 not < 23
        ({"gestation_week": "29-31", "birth_weight": "4000-4099"}, True),   # 29..31 < 34 and 4000..4099 > 3999
        ({"gestation_week": "34-36", "birth_weight": "4499<"}, False),      # 34..36 not < 34
        ({"gestation_week": "32-33", "birth_weight": "3900-3999"}, False),  # 3900..3999 not > 3999
        ({"gestation_week": "<29", "birth_weight": "3000-3099"}, True),     # every week < 29, and 3000..3099 > 2999
        ({"gestation_week": "<29", "birth_weight": "2900-2999"}, False),    # 2900..2999 not > 2999
    ]
    coded = _coded_from_labels(births_spec, _first_config(births_doc), [{**base, **ch} for ch, _ in cases])
    bad = synthetic_violations(births_doc["synthetic_constraints"], coded)
    np.testing.assert_array_equal(bad, [v for _, v in cases])


def test_synthetic_constraints_with_unit_alternatives(births_spec, births_doc):
    config = _first_config(births_doc)
    config["columns"].update({"mother_age": "years", "parity": "unit", "gestation_week": "weeks"})
    base = {"birth_month": "5", "mother_age": "30", "parity": "1", "gestation_week": "39",
            "birth_sex": "F", "birth_weight": "3400-3499"}
    cases = [
        ({"mother_age": "22", "parity": "7"}, True),
        ({"mother_age": "23", "parity": "7"}, False),
        ({"mother_age": "19", "parity": "4"}, True),
        ({"mother_age": "20", "parity": "4"}, False),
        ({"gestation_week": "<29", "birth_weight": "3000-3099"}, True),
        ({"gestation_week": "29", "birth_weight": "3000-3099"}, False),
        ({"gestation_week": "33", "birth_weight": "4000-4099"}, True),
        ({"gestation_week": "34", "birth_weight": "4000-4099"}, False),
    ]
    coded = _coded_from_labels(births_spec, config, [{**base, **ch} for ch, _ in cases])
    bad = synthetic_violations(births_doc["synthetic_constraints"], coded)
    np.testing.assert_array_equal(bad, [v for _, v in cases])


def test_no_synthetic_constraints(births_spec, births_doc):
    coded = _coded_from_labels(births_spec, _first_config(births_doc), [
        {"birth_month": "1", "mother_age": "<18", "parity": "10<", "gestation_week": "<29",
         "birth_sex": "M", "birth_weight": "4499<"}])
    assert not synthetic_violations([], coded).any()


def test_spec_overrides_labels_and_values(births_doc):
    alt = births_doc["columns"][2]["alternatives"][0]  # parity coarse: 5 bins
    alt["labels"] = ["first", "2nd-3rd", "4th-6th", "7th-10th", "11th+"]
    alt["values"] = [1, 2, 3, 4, 5]
    spec = validate_spec(births_doc)
    coding = column_coding(spec, "parity", "coarse")
    assert list(coding.labels) == alt["labels"]
    np.testing.assert_array_equal(coding.values, [1, 2, 3, 4, 5])
    codes = code_column(spec, "parity", "coarse", {"parity": np.array([1.0, 3.0, 12.0])})
    assert list(codes_to_labels(coding, codes)) == ["first", "2nd-3rd", "11th+"]
