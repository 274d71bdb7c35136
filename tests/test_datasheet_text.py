"""The datasheet says only what the spec says (issue 10, wrong result 4)."""
from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.bundle.datasheet import query_family

# "birth" alone is fair in a persons table (date or place of birth); these are the births release's own words.
BIRTHS_WORDS = ("births", "live birth", "birth weight", "weight", "gestation", "parity", "mother", "newborn",
                "&lt;18", "44&lt;")


def _spec(columns, acceptance):
    return {"columns": columns, "acceptance": acceptance}


SEX = {"name": "sex", "alternatives": [{"id": "s", "categories": ["M", "F"], "values": [0, 1]}]}
AGE = {"name": "age", "alternatives": [{"id": "a", "clip": [18, 80], "edges": [18, 30, 50, 81]}]}
REGION = {"name": "region", "alternatives": [{"id": "r", "categories": ["n", "s", "e"]}]}
HOURS = {"name": "hours", "alternatives": [{"id": "h", "clip": [1, 80], "edges": [1, 20, 40, 81]}]}


def _metric(entry):
    return {"id": entry["id"], "type": entry["type"], "threshold": entry["threshold"]}


def test_kway_sentence_states_max_k_and_columns():
    entry = {"id": "k", "type": "kway_marginals", "threshold": 0.01, "max_k": 3, "columns": ["sex", "age", "hours", "region"]}
    text = query_family(_metric(entry), entry, _spec([SEX, AGE, HOURS, REGION], [entry]), d=4)
    assert "1 to 3 columns" in text and "1 to 4" not in text
    assert "sex, age, hours, region" in text


def test_regression_sentence_names_the_declared_features():
    entry = {"id": "r", "type": "regression_coefficients", "threshold": 3, "target": "hours", "features": ["sex", "age"]}
    text = query_family(_metric(entry), entry, _spec([SEX, AGE, HOURS, REGION], [entry]), d=4)
    assert "the columns sex, age" in text and "other columns" not in text
    default = dict(entry)
    default.pop("features")
    text = query_family(_metric(default), default, _spec([SEX, AGE, HOURS, REGION], [default]), d=4)
    assert "other columns (sex, age, region)" in text


def test_zero_one_target_is_a_share_not_a_mean():
    share = {"id": "f", "type": "conditional_means", "threshold": 0.04, "target": "sex", "by": ["region"], "bounds": [0, 1]}
    text = query_family(_metric(share), share, _spec([SEX, REGION], [share]), d=2)
    # the category numbered 1 is named (issue 21: "the share of records with sex" said nothing)
    assert text.startswith("The share of records whose sex is F") and "mean" not in text
    mean = {"id": "m", "type": "conditional_means", "threshold": 2, "target": "hours", "by": [None, ["sex", "region"]], "bounds": [1, 80]}
    text = query_family(_metric(mean), mean, _spec([SEX, REGION, HOURS], [mean]), d=3)
    assert text.startswith("The mean hours") and "sex x region" in text


def test_classification_sentences_name_the_positive_class_and_the_report():
    coef = {"id": "c", "type": "classification", "threshold": 1.5, "target": "region", "positive": ["n", "s"],
            "features": ["sex", "age"]}
    text = query_family(_metric(coef), coef, _spec([SEX, AGE, REGION], [coef]), d=3)
    assert "Predicting whether region is n or s from the columns sex, age with a logistic regression:" in text and "the columns sex, age" in text
    assert "L1 distance of 1.5" in text and "accuracy" not in text
    acc = dict(coef, id="a", report="accuracy", threshold=0.02)
    text = query_family(_metric(acc), acc, _spec([SEX, AGE, REGION], [coef, acc]), d=3)
    assert "accuracy on the real data be within 0.02 (2\u00a0percentage points)" in text


def test_quantile_sentence_names_levels_and_groups():
    q = {"id": "q", "type": "quantile", "threshold": 5, "target": "hours", "quantiles": [0.25, 0.5],
         "by": [None, "sex"]}
    text = query_family(_metric(q), q, _spec([SEX, HOURS], [q]), d=2)
    assert text.startswith("The 25th percentile and median of hours by group: all records; sex")
    assert "the check asks for an error below 5 in every group" in text and "mean" not in text
    default = {"id": "m", "type": "quantile", "threshold": 3, "target": "hours"}
    assert query_family(_metric(default), default, _spec([HOURS], [default]), d=1).startswith(
        "The median of hours by group: all records;")


@pytest.mark.slow
def test_non_births_datasheet_has_no_births_words(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", "B"])
    assert r.exit_code == 0, r.output
    html = (tmp_path / "B" / "README.html").read_text("utf-8")
    html = re.sub(r"<style.*?</style>", " ", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", html).lower()
    found = [w for w in BIRTHS_WORDS if w.lower() in text]
    assert not found, f"births words in the persons datasheet: {found}"
    assert "1 to 3 columns" in text  # persons.yaml: kway max_k 3
    assert "share of records whose sex is female" in text  # share_female: a 0/1 target, 1 = female
    assert "whether income is 50k+ from the columns age, sex, education, hours with a logistic" in text  # income_model, income_accuracy
    assert "the median of hours by group" in text  # median_hours
