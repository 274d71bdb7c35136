"""Issue 35: ``spec validate`` warns when a conditional_means target has an open bin, naming the
column, the bin's label and the number it counts as in the means."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpbundle.audit.labels import label_number
from dpbundle.release.cli.main import app
from dpbundle.release.spec.criteria_checks import open_bin_warnings, open_bins
from dpbundle.release.spec.load import load_spec, validate_spec

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def persons_doc() -> dict:
    return load_spec(ROOT / "examples" / "persons.yaml").document()


def test_open_bins_of_the_persons_hours(persons_doc):
    """hours: input 0..99, clip [1, 80]: each alternative has an open first and last bin; the
    number each counts as is the one the audit parses from its label (independently)."""
    found = open_bins(validate_spec(persons_doc), "hours")
    assert {alt for alt, _label, _number in found} == {"coarse", "fine"}
    assert len(found) == 4
    for _alt, label, number in found:
        assert number == label_number(label)
    assert open_bins(validate_spec(persons_doc), "sex") == []           # categories: never open


def test_the_warning_names_column_label_and_number(persons_doc):
    spec = validate_spec(persons_doc)
    lines = open_bin_warnings(spec)
    i = next(k for k, c in enumerate(persons_doc["acceptance"]) if c["id"] == "mean_hours")
    assert len(lines) == 1 and lines[0].startswith(f"acceptance[{i}] (mean_hours)")
    line = lines[0]
    assert "'hours'" in line
    for alt, label, number in open_bins(spec, "hours"):
        assert f"{label!r} counts as {number:g} (alternative {alt})" in line


def test_no_warning_when_the_clip_range_holds_every_value(persons_doc):
    hours = next(c for c in persons_doc["input"]["columns"] if c["name"] == "hours")
    hours["min"], hours["max"] = 1, 80          # the clip range [1, 80] now holds every value
    assert open_bin_warnings(validate_spec(persons_doc)) == []


def test_only_conditional_means_targets_are_warned_about(persons_doc):
    doc = copy.deepcopy(persons_doc)
    doc["acceptance"] = [c for c in doc["acceptance"] if c["type"] != "conditional_means"]
    assert any(c.get("target") == "hours" for c in doc["acceptance"])    # the median still uses hours
    assert open_bin_warnings(validate_spec(doc)) == []


def test_spec_validate_prints_it(tmp_path):
    r = CliRunner().invoke(app, ["spec", "validate", str(ROOT / "examples" / "persons.yaml")],
                           terminal_width=400)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "warning acceptance[1] (mean_hours): the target column 'hours' has open bins" in text
    assert "counts as 59 (alternative coarse)" in text
