"""Issue 35: ``release.simulated`` (an example bundle says its records are simulated) and ordered
categories (``ordered: true`` on a categorical alternative: datapackage.json's
``categoriesOrdered``), through the spec, the release, the audit's view and the sweep's list."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dpbundle.release.spec.coding import categories_ordered, column_coding
from dpbundle.release.spec.load import SpecError, as_simulated, load_spec, validate_spec

ROOT = Path(__file__).resolve().parents[1]
PERSONS = ("persons.yaml", "persons-eps2.yaml", "persons-recommended.yaml")


@pytest.fixture(scope="module")
def persons_doc() -> dict:
    return load_spec(ROOT / "examples" / "persons.yaml").document()


def _alt(doc: dict, column: str, alt_id: str) -> dict:
    col = next(c for c in doc["columns"] if c["name"] == column)
    return next(a for a in col["alternatives"] if a["id"] == alt_id)


# ---- release.simulated


def test_simulated_defaults_to_false_and_is_read_from_the_spec(persons_doc):
    assert load_spec(ROOT / "examples" / "persons.yaml").simulated is False
    doc = copy.deepcopy(persons_doc)
    doc["release"]["simulated"] = True
    assert validate_spec(doc).simulated is True


def test_simulated_must_be_a_boolean(persons_doc):
    doc = copy.deepcopy(persons_doc)
    doc["release"]["simulated"] = "yes"
    with pytest.raises(SpecError) as err:
        validate_spec(doc)
    assert any(p.startswith("release.simulated:") for p in err.value.problems)


def test_as_simulated_marks_a_copy():
    spec = load_spec(ROOT / "examples" / "births.yaml")
    marked = as_simulated(spec)
    assert marked.simulated and marked.public_dict()["release"]["simulated"] is True
    assert not spec.simulated and "simulated" not in spec.document()["release"]
    assert marked.source == spec.source


@pytest.fixture(scope="module")
def persons_example(tmp_path_factory):
    """The persons example released from Python (the --example path of the pipeline)."""
    from dpbundle.release.api import release

    out = tmp_path_factory.mktemp("i35-persons") / "B"
    release(example="persons", out=out, stop_probability=0)
    return out


def test_an_example_release_says_simulated_in_spec_json(persons_example):
    doc = json.loads((persons_example / "spec.json").read_text("utf-8"))
    assert doc["spec"]["release"]["simulated"] is True


def test_an_example_bundle_with_ordered_categories_passes_its_audit(persons_example):
    from dpbundle.release.api import audit

    report = audit(persons_example, pubkey=f"{persons_example}.demo-key.pub")
    assert report.verdict == "verified", [c for c in report.checks if getattr(c, "status", "") == "FAIL"]


def test_a_real_release_of_a_file_spec_is_not_marked_simulated(tmp_path):
    """Only the example path marks the spec: the same spec given as SPEC stays unmarked."""
    from dpbundle.release.pipeline.request import ReleaseRequest

    req = ReleaseRequest(spec=ROOT / "examples" / "persons.yaml", data=tmp_path / "x.csv", out=tmp_path / "b")
    assert not req.is_example


# ---- ordered categories


@pytest.mark.parametrize("name", PERSONS)
def test_persons_examples_declare_education_and_income_ordered(name):
    spec = load_spec(ROOT / "examples" / name)
    for column, alts in (("education", ("levels5", "levels4")), ("income", ("bands3", "bands2"))):
        for alt in alts:
            assert spec.categories_ordered(column, alt), (name, column, alt)
    for column, alt in (("marital", "three"), ("occupation", "groups"), ("birthplace", "region"), ("sex", "sex")):
        assert not spec.categories_ordered(column, alt), (name, column, alt)
    assert spec.categories_ordered("hours", "coarse")          # bins always are


def test_ordered_changes_no_computation(persons_doc):
    """ColumnCoding.ordered stays 'binned': the criteria's designs and constraints treat the
    ordered categories as categories, so results do not change when a spec declares them."""
    plain = copy.deepcopy(persons_doc)
    for column, alt in (("education", "levels5"), ("income", "bands3")):
        _alt(plain, column, alt).pop("ordered")
    with_flag, without = validate_spec(copy.deepcopy(persons_doc)), validate_spec(plain)
    for column, alt in (("education", "levels5"), ("income", "bands3")):
        a, b = column_coding(with_flag, column, alt), column_coding(without, column, alt)
        assert a == b and a.ordered is False
    assert not without.categories_ordered("education", "levels5")


def test_ordered_does_not_change_the_sweep_fingerprint(persons_doc):
    """The shipped narrowed lists stay valid: ``ordered`` changes no run."""
    from dpbundle.release.sweep.run import _spec_fingerprint

    plain = copy.deepcopy(persons_doc)
    _alt(plain, "education", "levels5").pop("ordered")
    assert _spec_fingerprint(validate_spec(plain)) == _spec_fingerprint(validate_spec(copy.deepcopy(persons_doc)))
    edited = copy.deepcopy(persons_doc)
    _alt(edited, "education", "levels5")["values"] = [1, 2, 3, 4, 6]      # a real change still counts
    assert _spec_fingerprint(validate_spec(edited)) != _spec_fingerprint(validate_spec(plain))


def test_ordered_on_bins_is_refused(persons_doc):
    doc = copy.deepcopy(persons_doc)
    _alt(doc, "hours", "coarse")["ordered"] = True
    with pytest.raises(SpecError) as err:
        validate_spec(doc)
    assert any("columns[5].alternatives[0].ordered" in p and "only categories" in p for p in err.value.problems)


def test_categories_ordered_of_a_configuration(persons_doc):
    config = {"columns": {"age": "wide", "sex": "sex", "education": "levels4", "marital": "three",
                          "occupation": "groups", "hours": "fine", "income": "bands2", "birthplace": "region"}}
    flags = categories_ordered(persons_doc, config)
    assert {k for k, v in flags.items() if v} == {"age", "education", "hours", "income"}
    with pytest.raises(KeyError):
        categories_ordered(persons_doc, {"columns": {**config["columns"], "education": "nope"}})


def test_the_audit_view_states_ordered_categories(persons_doc):
    """The audit's own reading: ``categories_ordered`` for the declared columns, ``ordered``
    (binned: constraints and designs) unchanged."""
    from dpbundle.audit.labels import build_view

    config = {"columns": {"age": "wide", "sex": "sex", "education": "levels5", "marital": "three",
                          "occupation": "groups", "hours": "coarse", "income": "bands3", "birthplace": "nativity"}}
    view = build_view({"spec": persons_doc, "configuration": config, "configuration_id": "x"})
    got = {c.name: (c.ordered, c.categories_ordered) for c in view.columns}
    assert got["education"] == (False, True) and got["income"] == (False, True)
    assert got["marital"] == (False, False) and got["age"] == (True, True)
    assert categories_ordered(persons_doc, config) == {c.name: c.categories_ordered for c in view.columns}
