"""Every spec-language feature of issue 10 walked through `release` and then `audit` (public
checks and the enclave replay): a bundle that release signs must pass its own audit.

The spec below uses: an input `header` with special characters, per-column `missing` markers,
integer-coded categories, `map` + `default`, a `labels` override on a categorical alternative,
`age` and `linear` derivations, and `in` / `not in` in raw and synthetic constraints (raw on
integer categories, synthetic by category name). Thresholds are loose (this checks the plumbing,
not utility); the data are simulated here."""
from __future__ import annotations

import csv
import datetime as dt
import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.audit.runner import run_audit
from dpbundle.release.cli.main import app

runner = CliRunner()
REFERENCE = dt.date(2024, 1, 1)
HEADERS = ["date of birth (Y-M-D)", "sex, 1=m 2=f", "region>code", "status", "income ($100s)", "note"]
REGIONS = ["north", "south", "east", "west", "abroad"]


def feature_spec() -> dict:
    return {
        "dpbundle_spec": 1,
        "release": {"title": "Feature walk", "publisher": "tests", "contact": "nobody@example.org",
                    "licence": "CC0-1.0", "description": "Simulated persons for the feature walk.",
                    "unit_of_privacy": "one person"},
        "input": {
            "missing_values": ["NA"],
            "columns": [
                {"name": "dob", "header": HEADERS[0], "type": "date", "min": "1940-01-01", "max": "2005-12-31"},
                {"name": "sex", "header": HEADERS[1], "type": "category", "categories": [1, 2]},
                {"name": "region", "header": HEADERS[2], "type": "category", "categories": REGIONS},
                {"name": "status", "header": HEADERS[3], "type": "category", "categories": [1, 2, 3, 4], "missing": ["9"]},
                {"name": "income", "header": HEADERS[4], "type": "integer", "min": 0, "max": 3000, "missing": ["-1"]},
            ],
        },
        "raw_constraints": [
            {"name": "missing value", "any_missing": True},
            {"name": "young, status 3 or 4", "when": [["status", "in", [3, 4]], ["dob", ">", "2000-01-01"]]},
            {"name": "abroad, status not 1 or 2", "when": [["region", "==", "abroad"], ["status", "not in", [1, 2]]]},
        ],
        "columns": [
            {"name": "age", "description": "Age in whole years on 2024-01-01",
             "source": {"column": "dob", "derive": "age", "reference": "2024-01-01"},
             "alternatives": [{"id": "bands", "edges": [18, 30, 45, 65, 85]}]},
            {"name": "sex", "source": {"column": "sex", "derive": "category"},
             "alternatives": [{"id": "sex", "categories": ["m", "f"], "map": {"1": "m", "2": "f"}, "values": [0, 1]}]},
            {"name": "region", "source": {"column": "region", "derive": "category"},
             "alternatives": [{"id": "three", "categories": ["north", "south", "other"],
                               "map": {"north": "north", "south": "south"}, "default": "other",
                               "labels": ["North", "South", "Elsewhere"]}]},
            {"name": "status", "source": {"column": "status", "derive": "category"},
             "alternatives": [{"id": "two", "categories": ["single", "other"], "map": {"1": "single"}, "default": "other"}]},
            {"name": "income", "description": "Income in thousands",
             "source": {"column": "income", "derive": "linear", "scale": 0.1, "offset": 0},
             "alternatives": [{"id": "k", "clip": [0, 200], "edges": [0, 25, 50, 100, 200.5]}]},
        ],
        "synthetic_constraints": [
            {"name": "under 30, other status, elsewhere",
             "when": [["age", "<", 30], ["status", "in", ["other"]], ["region", "not in", ["north", "south"]]]},
            {"name": "over 64 with income 100k+", "when": [["age", ">=", 65], ["income", ">=", 100]]},
        ],
        "generators": [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [8]}}],
        "projection": {"min_count": [2]},
        "acceptance": [
            {"id": "kway", "type": "kway_marginals", "threshold": 1.0, "epsilon": 0.1},
            {"id": "ratio", "type": "smoothed_ratio", "clip": 20.0, "threshold": 20.0, "epsilon": 0.1},
            {"id": "mean_income", "type": "conditional_means", "target": "income", "by": [None],
             "bounds": [0, 200], "threshold": 1000.0, "epsilon": 0.1},
            # classification on a categorical target named by its category (the label differs),
            # one-hot features; then the accuracy report against the DP model
            {"id": "region_model", "type": "classification", "target": "region", "positive": "south",
             "report": "coefficients", "threshold": 1e6, "epsilon": 0.2},
            {"id": "region_accuracy", "type": "classification", "target": "region", "positive": "south",
             "report": "accuracy", "threshold": 2.0, "epsilon": 0.1},
            {"id": "median_income", "type": "quantile", "target": "income", "quantiles": [0.25, 0.5],
             "by": [None, ["sex", "status"]], "threshold": 1000.0, "epsilon": 0.1},
        ],
        "face_privacy": {"quasi_identifiers": [["age", "sex", "region"]]},
        "privacy": {"epsilon_generation": 2.0, "epsilon_cap": 10.0,
                    "records": {"policy": "dp_count", "epsilon": 1.0}},
    }


def simulate(n: int, seed: int = 7) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    start, end = dt.date(1940, 1, 1).toordinal(), dt.date(2005, 12, 31).toordinal()
    rows = []
    for _ in range(n):
        dob = dt.date.fromordinal(int(rng.integers(start, end + 1))).isoformat()
        sex = str(int(rng.integers(1, 3)))
        region = REGIONS[int(rng.choice(5, p=[0.4, 0.3, 0.1, 0.1, 0.1]))]
        status = str(int(rng.choice([1, 2, 3, 4, 9], p=[0.4, 0.35, 0.12, 0.1, 0.03])))
        income = str(int(rng.integers(0, 3001))) if rng.random() > 0.02 else "-1"
        if rng.random() < 0.01:
            dob = "NA"
        rows.append([dob, sex, region, status, income, "free text, ignored"])
    return rows


def expected_n(rows: list[list[str]]) -> int:
    """The raw constraints worked out row by row on the texts (independent of both implementations)."""
    n = 0
    for dob, _sex, region, status, income, _ in rows:
        if dob == "NA" or status == "9" or income == "-1":
            continue
        if status in ("3", "4") and dob > "2000-01-01":
            continue
        if region == "abroad" and status not in ("1", "2"):
            continue
        n += 1
    return n


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("walk")
    rows = simulate(3000)
    data = tmp / "registry.csv"
    with open(data, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(HEADERS)
        w.writerows(rows)
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(feature_spec(), sort_keys=False), "utf-8")
    res = runner.invoke(app, ["spec", "validate", str(spec)])
    assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"), "--key", str(tmp / "k.key"),
                              "--ledger", str(tmp / "ledger.jsonl"), "--transcript", str(tmp / "T.jsonl")])
    assert res.exit_code == 0, res.output
    return {"tmp": tmp, "rows": rows, "data": data}


def test_release_n_and_released_names(walked):
    tmp = walked["tmp"]
    manifest = json.loads((tmp / "B" / "manifest.json").read_text())
    # dp_count at epsilon 1: n = count + discrete Laplace(1); P(|noise| > 30) < 1e-12
    assert abs(manifest["n"] - expected_n(walked["rows"])) <= 30
    budget = json.loads((tmp / "B" / "budget.json").read_text())
    assert budget["records"]["policy"] == "dp_count" and budget["records"]["released_n"] == manifest["n"]
    from dpbundle.mechanisms.exact import dec

    assert dec(budget["total_epsilon"]) == 1 + 2 * (2 + dec(budget["evaluation"]["epsilon"]))
    with open(tmp / "B" / "data.csv", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        body = list(reader)
    assert header == ["age", "sex", "region", "status", "income"]  # safe identifiers, not the CSV headers
    assert len(body) == manifest["n"]
    assert {r[2] for r in body} <= {"North", "South", "Elsewhere"}  # the label override is what data.csv shows
    for age, _sex, region, status, income in body:
        assert not (age == "18-29" and status == "other" and region == "Elsewhere")
        assert not (age == "65-84" and income == "100<")
    fields = json.loads((tmp / "B" / "datapackage.json").read_text())["resources"][0]["schema"]["fields"]
    assert [f["name"] for f in fields] == header


def test_audit_passes_public_checks_and_enclave_replay(walked):
    tmp = walked["tmp"]
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub")
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub", transcript=tmp / "T.jsonl", data=walked["data"])
    assert rep.get("replay").result == "pass", rep.get("replay").problems
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]


@pytest.mark.parametrize("cid,edit,needle", [
    ("region_model", lambda r: r.update(sensitivity=r["sensitivity"] - 1.0), "sensitivity"),
    ("region_model", lambda r: r["sensitivity_inputs"].update(d=r["sensitivity_inputs"]["d"] - 1), "d"),
    ("region_accuracy", lambda r: r.update(sensitivity=r["sensitivity"] / 2), "sensitivity"),
    ("median_income", lambda r: r["sensitivity_inputs"].update(releases=3), "releases"),
    ("median_income", lambda r: r.update(noise_scale=r["noise_scale"] / 2, noise_std=r["noise_std"] / 2),
     "noise scale"),
    ("median_income", lambda r: r.update(noise_std=r["noise_std"] * 2 ** 0.5), "noise std"),
])
def test_audit_recomputes_classification_and_quantile_rows(walked, tmp_path, cid, edit, needle):
    """A re-signed bundle whose classification / quantile row claims less noise (or another
    sensitivity) than the public information gives fails the budget check, naming the row."""
    import shutil

    import audit_fixtures as fx
    from dpbundle.release.bundle.keys import load_private_key

    d = tmp_path / "B"
    shutil.copytree(walked["tmp"] / "B", d)
    doc = json.loads((d / "metrics.json").read_text())
    row = next(r for r in doc["criteria"] if r["id"] == cid)
    edit(row)
    (d / "metrics.json").write_text(json.dumps(doc, indent=2))
    fx.sign_bundle(d, load_private_key(walked["tmp"] / "k.key"))
    rep = run_audit(d, pubkey=walked["tmp"] / "k.pub")
    assert rep.get("integrity").result == "pass", rep.get("integrity").problems
    budget = rep.get("budget")
    assert budget.result == "fail"
    assert any(cid in p and needle in p for p in budget.problems), budget.problems
