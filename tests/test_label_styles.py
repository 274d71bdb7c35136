"""Label styles of open bins (spec ``label_style``; docs/spec.md "Labels of open bins").

``office`` ("under 18" / "45 and over"), ``plus`` ("<18" / "45+") and ``births-2024`` ("<18" /
"44<"): the release (release/data/transform.py) and the audit (audit/labels.py) label and number them
identically; a ``dpbundle_spec: 1`` spec keeps the 2024 labels (examples/births.yaml as
published), a ``dpbundle_spec: 2`` spec without the field gets the office style; a release in
each style passes its public audit and the enclave replay; ``spec validate`` warns about an
overridden open-bin label that shows another number than the one the bin counts as."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import audit_fixtures as fx
from dpbundle.audit.labels import SpecViewError, build_view, label_number
from dpbundle.audit.runner import run_audit
from dpbundle.release.cli.main import app
from dpbundle.release.spec.load import SpecError, load_spec, read_spec_document, validate_spec
from dpbundle.release.spec.criteria_checks import criteria_warnings, label_numbers
from dpbundle.release.data.transform import column_coding

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"
runner = CliRunner()


def births(version: int = 1, style: str | None = None, **column_styles: str) -> dict:
    """examples/births.yaml as a document, with a format version and label styles."""
    doc = read_spec_document(BIRTHS)
    doc["dpbundle_spec"] = version
    if style is not None:
        doc["label_style"] = style
    for col in doc["columns"]:
        if col["name"] in column_styles:
            col["label_style"] = column_styles[col["name"]]
    return doc


def float_column_doc(version: int, style: str | None = None) -> dict:
    """A float (linear) source with an open bin at each end: income in thousands, 0..300."""
    doc = births(version, style)
    doc["input"]["columns"].append({"name": "income", "type": "integer", "min": 0, "max": 3000})
    doc["columns"].append({"name": "income_k", "source": {"column": "income", "derive": "linear", "scale": 0.1},
                           "alternatives": [{"id": "k", "clip": [2.5, 200], "edges": [2.5, 25, 50, 100, 200.5]}]})
    doc["faithfulness"]["exact"].append("income_k")
    return doc


def view_of(doc: dict, name: str, alternative: str):
    """The audit's reading of one column under one alternative (the others: their first)."""
    config = {"columns": {c["name"]: (alternative if c["name"] == name else c["alternatives"][0]["id"])
                          for c in doc["columns"]}}
    view = build_view({"spec": doc, "configuration": config, "configuration_id": ""})
    return view.columns[view.index(name)]


def coding(doc: dict, name: str, alternative: str):
    return column_coding(validate_spec(doc), name, alternative)


# ----------------------------------------------------------------------------- the labels

AGE_MIDDLE = ["18-19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44"]
AGE_NUMBERS_MIDDLE = [18.5, 22, 27, 32, 37, 41, 43.5]

EXPECTED = {
    # style: (mother_age coarse, its open-bin numbers, parity coarse's last bin, birth_weight's ends)
    "office": (["under 18", *AGE_MIDDLE, "45 and over"], (18, 45), ("11 and over", 11),
               ("under 1500", "4500 and over", 4500)),
    "plus": (["<18", *AGE_MIDDLE, "45+"], (18, 45), ("11+", 11), ("<1500", "4500+", 4500)),
    "births-2024": (["<18", *AGE_MIDDLE, "44<"], (18, 44), ("10<", 10), ("<1500", "4499<", 4499)),
}


@pytest.mark.parametrize("style", sorted(EXPECTED))
def test_each_style_labels_and_numbers(style):
    ages, (below, above), (parity_label, parity_number), (w_below, w_above, w_number) = EXPECTED[style]
    doc = births(2, style)
    age = coding(doc, "mother_age", "coarse")
    assert list(age.labels) == ages
    assert list(age.values) == [below, *AGE_NUMBERS_MIDDLE, above]  # the number in the label
    years = coding(doc, "mother_age", "years")
    assert years.labels[0] == ages[0] and years.labels[-1] == ages[-1] and years.labels[1:3] == ("18", "19")
    assert (years.values[0], years.values[-1]) == (below, above)
    parity = coding(doc, "parity", "coarse")
    assert parity.labels[:4] == ("1", "2-3", "4-6", "7-10")  # not open below: the input starts at 1
    assert (parity.labels[-1], parity.values[-1]) == (parity_label, parity_number)
    weight = coding(doc, "birth_weight", "100g")
    assert (weight.labels[0], weight.labels[-1], weight.values[-1]) == (w_below, w_above, w_number)
    # columns without open bins look the same in every style
    assert coding(doc, "birth_month", "month").labels == tuple(str(m) for m in range(1, 13))
    assert coding(doc, "birth_sex", "sex").labels == ("M", "F")


@pytest.mark.parametrize("style,labels", [
    ("office", ("under 25", "25-50", "50-100", "100 and over")),
    ("plus", ("<25", "25-50", "50-100", "100+")),
    ("births-2024", ("<25", "25-50", "50-100", "100<")),
])
def test_float_source_open_bins(style, labels):
    """A float source: the bin above, from a, is a in every style (no "a - 1")."""
    doc = float_column_doc(2, style)
    cc = coding(doc, "income_k", "k")
    assert cc.labels == labels
    assert list(cc.values) == [25, 37.5, 75, 100]
    vc = view_of(doc, "income_k", "k")
    assert vc.labels == cc.labels and list(vc.numbers) == list(cc.values)


@pytest.mark.parametrize("version,style,columns", [
    (1, None, {}), (2, None, {}), (1, "office", {}), (1, "plus", {}), (2, "births-2024", {}),
    (2, "plus", {"mother_age": "office", "birth_weight": "births-2024"}),
    (1, None, {"parity": "plus"}),
])
def test_release_and_audit_agree_on_every_alternative(version, style, columns):
    """release/data/transform.py and audit/labels.py: the same labels, numbers and bounds."""
    doc = births(version, style, **columns)
    spec = validate_spec(doc)
    for col in doc["columns"]:
        for alt in col["alternatives"]:
            cc = column_coding(spec, col["name"], alt["id"])
            vc = view_of(doc, col["name"], alt["id"])
            assert vc.labels == cc.labels, (col["name"], alt["id"])
            assert list(vc.numbers) == list(cc.values), (col["name"], alt["id"])
            if vc.ordered:
                assert list(vc.lower) == list(cc.lower) and list(vc.upper) == list(cc.upper)


def test_column_style_overrides_the_spec_style():
    doc = births(1, "plus", mother_age="office")
    assert coding(doc, "mother_age", "coarse").labels[-1] == "45 and over"
    assert coding(doc, "parity", "coarse").labels[-1] == "11+"
    assert coding(births(2, None, parity="births-2024"), "parity", "coarse").labels[-1] == "10<"


def test_labels_override_keeps_the_style_numbers():
    """`labels` replaces the texts, not the numbers: an open bin keeps its style's number."""
    for style, number in (("office", 45), ("births-2024", 44)):
        doc = births(2, style)
        doc["columns"][1]["alternatives"][0]["labels"] = [f"L{k}" for k in range(9)]
        assert coding(doc, "mother_age", "coarse").values[-1] == number
        assert view_of(doc, "mother_age", "coarse").numbers[-1] == number


# ----------------------------------------------------------------------------- defaults

def test_births_yaml_keeps_the_2024_labels():
    """examples/births.yaml is the 2024 release as published: format version 1, no label_style,
    its labels '<18' ... '44<' (and numbers 18 ... 44) unchanged."""
    raw = read_spec_document(BIRTHS)
    assert raw["dpbundle_spec"] == 1 and "label_style" not in raw
    assert all("label_style" not in c for c in raw["columns"])
    spec = load_spec(BIRTHS)
    assert column_coding(spec, "mother_age", "coarse").labels == tuple(fx.LABELS["mother_age"])
    assert list(column_coding(spec, "mother_age", "coarse").values) == fx.NUMBERS["mother_age"]
    for name in ("parity", "gestation_week", "birth_weight"):
        alt = {"parity": "coarse", "gestation_week": "coarse", "birth_weight": "100g"}[name]
        assert column_coding(spec, name, alt).labels == tuple(fx.LABELS[name])
        assert list(column_coding(spec, name, alt).values) == fx.NUMBERS[name]
    years = column_coding(spec, "mother_age", "years")
    assert (years.labels[0], years.labels[-1]) == ("<18", "44<")


@pytest.mark.parametrize("name", ["births.yaml", "births-recommended.yaml", "births-eps5.yaml",
                                  "births-eps3.yaml", "persons.yaml", "persons-recommended.yaml",
                                  "persons-eps2.yaml"])
def test_example_specs_are_version_1(name):
    """The examples keep their labels (and so their spec_sha256 and narrowed lists)."""
    raw = read_spec_document(ROOT / "examples" / name)
    assert raw["dpbundle_spec"] == 1 and "label_style" not in raw


def test_a_new_spec_without_the_field_gets_the_office_style():
    doc = births(2)
    assert "label_style" not in doc
    assert coding(doc, "mother_age", "coarse").labels[0] == "under 18"
    assert coding(doc, "mother_age", "coarse").labels[-1] == "45 and over"
    assert view_of(doc, "mother_age", "coarse").labels[-1] == "45 and over"


def test_the_walkthrough_spec_of_the_docs_is_new_and_office():
    import re

    text = (ROOT / "docs" / "spec.md").read_text("utf-8")
    block = re.search(r"```yaml\n# spec: walkthrough\n(.*?)```", text, re.S).group(1)
    doc = yaml.safe_load(block)
    assert doc["dpbundle_spec"] == 2
    cc = coding(doc, "age", "bands")
    assert cc.labels == ("0-17", "18-39", "40-64", "65-79", "80 and over")
    assert cc.values[-1] == 80


# ----------------------------------------------------------------------------- validation

def _problems(doc: dict) -> list[str]:
    with pytest.raises(SpecError) as exc:
        validate_spec(doc)
    return exc.value.problems


def test_schema_refuses_unknown_versions_and_styles():
    assert any("dpbundle_spec" in p for p in _problems(births(3)))
    assert any("label_style" in p for p in _problems(births(2, "fancy")))
    assert any("label_style" in p for p in _problems(births(2, None, parity="45 and over")))


def test_a_column_style_needs_a_binned_alternative():
    problems = _problems(births(2, None, birth_sex="office"))
    assert any(p.startswith("columns[4].label_style:") and "no binned alternative" in p for p in problems)


def test_audit_reads_the_new_label_forms():
    assert [label_number(s) for s in ("under 18", "45 and over", "45+", "<18", "44<", "under -2.5")] == \
        [18, 45, 45, 18, 44, -2.5]
    with pytest.raises(ValueError):
        label_number("45 or over")
    doc = births(1)
    doc["dpbundle_spec"] = 7
    with pytest.raises(SpecViewError, match="dpbundle_spec"):
        view_of(doc, "mother_age", "coarse")
    doc = births(2)
    doc["columns"][1]["label_style"] = "fancy"
    with pytest.raises(SpecViewError, match="label_style"):
        view_of(doc, "mother_age", "coarse")


# ----------------------------------------------------------------------------- the warning

AGE_LABELS = ["<18", *AGE_MIDDLE, "44<"]


def _age_labels(doc: dict, labels: list[str], values: list[float] | None = None) -> dict:
    alt = doc["columns"][1]["alternatives"][0]
    alt["labels"] = labels
    if values is not None:
        alt["values"] = values
    validate_spec(doc)
    return doc


def _label_warnings(doc: dict) -> list[str]:
    return [w for w in criteria_warnings(doc) if ".labels[" in w]


def test_label_numbers():
    assert label_numbers("65+") == [65]
    assert label_numbers("18-19") == [18, 19]
    assert label_numbers("under -5") == [-5]
    assert label_numbers("4,500 g and over") == [4500]
    assert label_numbers("2.5 kg or more") == [2.5]
    assert label_numbers("older") == []


def test_warning_fires_for_a_plus_label_over_the_2024_number():
    doc = _age_labels(births(1), AGE_LABELS[:-1] + ["45+"])
    (w,) = _label_warnings(doc)
    assert w.startswith("columns[1].alternatives[0].labels[8]: column 'mother_age', alternative 'coarse'")
    assert "'45+' counts as 44 in means, medians" in w and "not 45 as its label says" in w
    assert "`values: [18, 18.5, 22, 27, 32, 37, 41, 43.5, 45]`" in w
    assert "`label_style: plus`" in w


def test_warning_fires_for_an_office_label_below_and_names_the_number():
    doc = _age_labels(births(2), ["17 and under", *AGE_MIDDLE, "45 and over"])
    (w,) = _label_warnings(doc)
    assert "labels[0]" in w and "'17 and under' counts as 18" in w and "not 17" in w
    assert "label_style:" not in w  # no style writes "17 and under"
    # over the office bin, a 2024 label: counted as 45, the label says 44
    doc = _age_labels(births(2), ["under 18", *AGE_MIDDLE, "44<"])
    (w,) = _label_warnings(doc)
    assert "'44<' counts as 45" in w and "`label_style: births-2024`" in w


def test_warning_through_spec_validate(tmp_path):
    doc = _age_labels(births(1), AGE_LABELS[:-1] + ["45+"])
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    r = runner.invoke(app, ["spec", "validate", str(path)], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning columns[1].alternatives[0].labels[8]" in text and "counts as 44" in text


@pytest.mark.parametrize("version,labels,values", [
    (1, AGE_LABELS, None),                                     # the generated labels themselves
    (1, ["under 18", *AGE_MIDDLE, "44<"], None),               # the office text of the bin below: 18
    (2, ["<18", *AGE_MIDDLE, "45+"], None),                    # office numbers: '45+' is 45
    (2, ["under 18", *AGE_MIDDLE, "45 and over"], None),
    (1, ["young", *AGE_MIDDLE, "older"], None),                # no number shown
    (1, ["<18", *AGE_MIDDLE, "45+"], [18, 18.5, 22, 27, 32, 37, 41, 43.5, 45]),  # numbers declared
    (1, ["<18", *AGE_MIDDLE, "45+"], [18, 18.5, 22, 27, 32, 37, 41, 43.5, 44]),  # declared, even if 44
    (1, ["<18", "18 to 19", "20-24", "25-29", "30-34", "35-39", "40-42", "43-44", "44<"], None),  # bounded bin
])
def test_warning_does_not_fire(version, labels, values):
    assert _label_warnings(_age_labels(births(version), labels, values)) == []


def test_no_warning_for_the_examples():
    for name in ("births.yaml", "births-recommended.yaml", "births-eps5.yaml", "births-eps3.yaml",
                 "persons.yaml", "persons-recommended.yaml", "persons-eps2.yaml"):
        assert _label_warnings(read_spec_document(ROOT / "examples" / name)) == [], name


# ----------------------------------------------------------------------------- end to end

STYLES = {
    # name: (dpbundle_spec, label_style, column styles, the mother_age labels of codebook.csv)
    "v1-default": (1, None, {}, AGE_LABELS),
    "v2-default": (2, None, {}, ["under 18", *AGE_MIDDLE, "45 and over"]),
    "plus": (2, "plus", {}, ["<18", *AGE_MIDDLE, "45+"]),
    "mixed": (1, None, {"mother_age": "office", "birth_weight": "plus"},
              ["under 18", *AGE_MIDDLE, "45 and over"]),
}


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    return fx.example_registry(tmp_path_factory.mktemp("registry") / "births.csv", rows=3000)


@pytest.mark.parametrize("name", sorted(STYLES))
def test_release_audit_and_replay_in_each_style(name, registry, tmp_path):
    """A release in each style: data.csv and codebook.csv carry the style's labels, and the
    public audit (codebook and datasheet checks included) and the enclave replay (data.csv byte
    for byte) pass."""
    version, style, columns, age_labels = STYLES[name]
    spec_path = fx.fast_spec(tmp_path / "spec.yaml")
    doc = yaml.safe_load(spec_path.read_text())
    doc["dpbundle_spec"] = version
    if style:
        doc["label_style"] = style
    for col in doc["columns"]:
        if col["name"] in columns:
            col["label_style"] = columns[col["name"]]
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    r = runner.invoke(app, ["spec", "validate", str(spec_path)])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    r = runner.invoke(app, ["release", str(spec_path), str(registry), "--out", str(tmp_path / "B"),
                            "--key", str(tmp_path / "k.key"), "--ledger", str(tmp_path / "ledger.jsonl"),
                            "--transcript", str(tmp_path / "T.jsonl")])
    assert r.exit_code == 0, r.output
    bundle = tmp_path / "B"
    book = list(csv.DictReader(io.StringIO((bundle / "codebook.csv").read_text("utf-8"))))
    assert [row["label"] for row in book if row["column"] == "mother_age"] == age_labels
    spec = validate_spec(doc)
    chosen = json.loads((bundle / "spec.json").read_text())["configuration"]["columns"]
    with open(bundle / "data.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for col in ("mother_age", "parity", "gestation_week", "birth_weight"):
        allowed = set(column_coding(spec, col, chosen[col]).labels)
        seen = {row[col] for row in rows}
        assert seen <= allowed, (col, sorted(seen - allowed)[:3])
    fields = json.loads((bundle / "datapackage.json").read_text())["resources"][0]["schema"]["fields"]
    assert next(f for f in fields if f["name"] == "mother_age")["constraints"]["enum"] == age_labels
    rep = run_audit(bundle, pubkey=tmp_path / "k.pub")
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
    rep = run_audit(bundle, pubkey=tmp_path / "k.pub", transcript=tmp_path / "T.jsonl", data=registry)
    assert rep.get("replay").result == "pass", rep.get("replay").problems
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]

