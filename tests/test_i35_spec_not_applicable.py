"""Issue 35: a value that means "not applicable" (the ACS's "N") stays a value. A small synthetic
table whose employment status is "N" for everyone under 16 and whose number of children is "N"
for men is released and audited with "N" kept as a category; the `missing` + `any_missing` route
would drop those persons."""
from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.data.prepare import prepare
from dpbundle.release.spec.load import validate_spec

ROWS = 3000

SPEC = {
    "dpbundle_spec": 2,
    "release": {"title": "Persons with not-applicable values (test)", "publisher": "Test office",
                "contact": "t@example.org", "licence": "CC-BY-4.0",
                "description": "Synthetic persons, one row per person.", "unit_of_privacy": "one person"},
    "input": {"columns": [
        {"name": "age", "type": "integer", "min": 0, "max": 99},
        {"name": "sex", "type": "category", "categories": [1, 2]},
        {"name": "esr", "type": "category", "categories": [1, 3, 6, "N"],
         "description": "Employment status: 1 employed, 3 unemployed, 6 not in labour force, N not applicable (under 16)"},
        {"name": "noc", "type": "category", "categories": [0, 1, 2, 3, "N"],
         "description": "Own children in the household (N: not applicable, men)"}]},
    "columns": [
        {"name": "age", "source": {"column": "age"},
         "alternatives": [{"id": "bands", "clip": [0, 99], "edges": [0, 16, 35, 65, 100]}]},
        {"name": "sex", "source": {"column": "sex", "derive": "category"},
         "alternatives": [{"id": "sex", "categories": ["male", "female"], "map": {"1": "male", "2": "female"}}]},
        {"name": "employment", "source": {"column": "esr", "derive": "category"},
         "alternatives": [{"id": "four", "categories": ["employed", "unemployed", "not in labour force",
                                                        "not applicable"],
                           "map": {"1": "employed", "3": "unemployed", "6": "not in labour force",
                                   "N": "not applicable"}}]},
        {"name": "children", "source": {"column": "noc", "derive": "category"},
         "alternatives": [{"id": "three", "categories": ["none", "1 or more", "not applicable"],
                           "map": {"0": "none", "N": "not applicable"}, "default": "1 or more"}]}],
    "synthetic_constraints": [
        {"name": "employment status under 16", "when": [["age", "<", 16], ["employment", "!=", "not applicable"]]}],
    "generators": [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [4]}}],
    "projection": {"min_count": [2]},
    "acceptance": [{"id": "kway", "type": "kway_marginals", "max_k": 2, "threshold": 0.2, "epsilon": 0.5}],
    "privacy": {"epsilon_generation": 2.0, "epsilon_cap": 10.0, "records": {"policy": "declared_public"}},
}


def _registry(path: Path) -> tuple[int, int]:
    """A tiny synthetic table; returns (rows, rows with an "N" cell)."""
    rng = random.Random(35)
    with_n = 0
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["age", "sex", "esr", "noc"])
        for _ in range(ROWS):
            age, sex = rng.randint(0, 99), rng.choice(["1", "2"])
            esr = "N" if age < 16 else rng.choice(["1", "1", "1", "3", "6", "6"])
            noc = "N" if sex == "1" else rng.choice(["0", "0", "1", "2", "3"])
            with_n += "N" in (esr, noc)
            w.writerow([age, sex, esr, noc])
    return ROWS, with_n


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    d = tmp_path_factory.mktemp("i35-na")
    spec_path, data = d / "spec.yaml", d / "persons.csv"
    spec_path.write_text(yaml.safe_dump(SPEC, sort_keys=False), "utf-8")
    counts = _registry(data)
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(d / "k")]).exit_code == 0
    r = runner.invoke(app, ["release", str(spec_path), str(data), "--out", str(d / "B"), "--key", str(d / "k.key"),
                            "--ledger", str(d / "ledger.jsonl"), "--stop-probability", "0",
                            "--transcript", str(d / "T.jsonl")])
    assert r.exit_code == 0, r.output
    return d, data, counts


def test_not_applicable_rows_are_kept(released):
    _d, data, (rows, with_n) = released
    assert 0 < with_n < rows
    assert prepare(data, validate_spec(SPEC)).n == rows          # nobody dropped


def test_the_missing_route_would_drop_them(released):
    """The contrast: "N" as a missing marker with an any_missing rule drops every person with an N."""
    _d, data, (rows, with_n) = released
    doc = yaml.safe_load(yaml.safe_dump(SPEC))
    for col in doc["input"]["columns"]:
        if "N" in col.get("categories", []):
            col["categories"] = [c for c in col["categories"] if c != "N"]
            col["missing"] = ["N"]
    for col in doc["columns"]:
        for alt in col["alternatives"]:
            if "not applicable" in alt.get("categories", []):
                alt["categories"].remove("not applicable")
                alt.get("map", {}).pop("N", None)
    doc["synthetic_constraints"] = []
    doc["raw_constraints"] = [{"name": "missing value", "any_missing": True}]
    assert prepare(data, validate_spec(doc)).n == rows - with_n


def test_the_bundle_carries_the_category_and_passes_its_audit(released):
    d, _data, _counts = released
    import json

    fields = {f["name"]: f for f in json.loads((d / "B" / "datapackage.json").read_text())["resources"][0]["schema"]["fields"]}
    assert "not applicable" in fields["employment"]["categories"]
    assert "not applicable" in fields["children"]["categories"]
    with open(d / "B" / "data.csv", newline="", encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert any(r["employment"] == "not applicable" for r in table)
    assert any(r["children"] == "not applicable" for r in table)
    # the synthetic constraint keeps "not applicable" exactly where it applies
    assert all(r["employment"] == "not applicable" for r in table if r["age"] == "0-15")
    r = CliRunner().invoke(app, ["audit", str(d / "B"), "--pubkey", str(d / "k.pub")])
    assert r.exit_code == 0, r.output
    assert "VERIFIED" in r.output
