"""The general criteria walked through `release` and then `audit` (public checks and the enclave
replay): joint groups, a categorical group-by without group_bins, per-alternative group bins, a
k-way subset with max_k, a regression with one-hot categorical features (and its MAE), nominal
faithfulness. Thresholds are loose but inside each metric's range (this checks the plumbing);
the data are simulated here."""
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
REGIONS = ["north", "south", "east", "west"]


def general_spec() -> dict:
    per_alt = {"k4": {"edges": [50], "labels": ["under 50k", "50k+"]},
               "k6": {"edges": [25, 75], "labels": ["under 25k", "25k-75k", "75k+"]}}
    return {
        "dpbundle_spec": 1,
        "release": {"title": "General criteria walk", "publisher": "tests", "contact": "nobody@example.org",
                    "licence": "CC0-1.0", "description": "Simulated persons.", "unit_of_privacy": "one person"},
        "input": {"columns": [
            {"name": "dob", "type": "date", "min": "1940-01-01", "max": "2005-12-31"},
            {"name": "sex", "type": "category", "categories": [1, 2]},
            {"name": "region", "type": "category", "categories": REGIONS},
            {"name": "status", "type": "category", "categories": [1, 2, 3]},
            {"name": "income", "type": "integer", "min": 0, "max": 3000},
        ]},
        "columns": [
            {"name": "age", "source": {"column": "dob", "derive": "age", "reference": "2024-01-01"},
             "alternatives": [{"id": "bands", "edges": [18, 30, 45, 65, 85]}]},
            {"name": "sex", "source": {"column": "sex", "derive": "category"},
             "alternatives": [{"id": "sex", "categories": ["m", "f"], "map": {"1": "m", "2": "f"}, "values": [0, 1]}]},
            {"name": "region", "source": {"column": "region", "derive": "category"},
             "alternatives": [{"id": "three", "categories": ["north", "south", "other"],
                               "map": {"north": "north", "south": "south"}, "default": "other"}]},
            {"name": "status", "source": {"column": "status", "derive": "category"},
             "alternatives": [{"id": "s", "categories": ["single", "couple", "other"],
                               "map": {"1": "single", "2": "couple", "3": "other"}}]},
            {"name": "income", "source": {"column": "income", "derive": "linear", "scale": 0.1},
             "alternatives": [{"id": "k4", "clip": [0, 200], "edges": [0, 25, 50, 100, 200.5]},
                              {"id": "k6", "clip": [0, 200], "edges": [0, 10, 25, 50, 75, 100, 200.5]}]},
        ],
        "generators": [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [8]}}],
        "projection": {"min_count": [2]},
        "group_bins": {"income": {"per_alternative": per_alt}},
        "acceptance": [
            {"id": "kway", "type": "kway_marginals", "columns": ["age", "sex", "region"], "max_k": 2,
             "threshold": 1.0, "epsilon": 0.1},
            {"id": "mean_income", "type": "conditional_means", "target": "income", "bounds": [0, 200],
             "by": [None, ["sex", "age"], "region"], "threshold": 200, "epsilon": 0.5},
            {"id": "share_female", "type": "conditional_means", "target": "sex", "bounds": [0, 1],
             "by": ["income", "status"], "threshold": 1.0, "epsilon": 0.5},
            {"id": "regression", "type": "regression_coefficients", "target": "income", "bounds": [0, 200],
             "threshold": 1e12, "epsilon": 0.3},
            {"id": "mae", "type": "regression_mae_difference", "target": "income", "bounds": [0, 200],
             "threshold": 200, "epsilon": 0.1},
            {"id": "faithfulness", "type": "faithfulness", "threshold": 1.0, "epsilon": 0.1},
        ],
        "faithfulness": {"exact": ["sex"], "adjacent": ["age", "income"], "nominal": ["region", "status"],
                         "max_adjacent": 1, "max_nominal": 1, "max_differing": 2},
        "face_privacy": {"quasi_identifiers": [["age", "sex", "region"]]},
        "privacy": {"epsilon_generation": 2.0, "epsilon_cap": 10.0},
    }


def simulate(n: int, seed: int = 11) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    start, end = dt.date(1940, 1, 1).toordinal(), dt.date(2005, 12, 31).toordinal()
    rows = []
    for _ in range(n):
        dob = dt.date.fromordinal(int(rng.integers(start, end + 1))).isoformat()
        sex = int(rng.integers(1, 3))
        region = REGIONS[int(rng.choice(4, p=[0.4, 0.3, 0.2, 0.1]))]
        status = int(rng.choice([1, 2, 3], p=[0.4, 0.45, 0.15]))
        income = int(np.clip(rng.gamma(2.0, 300.0) + 150 * (sex == 1), 0, 3000))
        rows.append([dob, str(sex), region, str(status), str(income)])
    return rows


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("general")
    data = tmp / "registry.csv"
    with open(data, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["dob", "sex", "region", "status", "income"])
        w.writerows(simulate(4000))
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(general_spec(), sort_keys=False), "utf-8")
    res = runner.invoke(app, ["spec", "validate", str(spec)])
    assert res.exit_code == 0, res.output
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"), "--key", str(tmp / "k.key"),
                              "--ledger", str(tmp / "ledger.jsonl"), "--transcript", str(tmp / "T.jsonl")])
    assert res.exit_code == 0, res.output
    return {"tmp": tmp, "data": data}


def test_release_metrics_use_the_general_features(walked):
    metrics = json.loads((walked["tmp"] / "B" / "metrics.json").read_text())
    rows = {r["id"]: r for r in metrics["criteria"]}
    assert rows["kway"]["sensitivity_inputs"]["columns"] == ["age", "sex", "region"]
    assert rows["kway"]["sensitivity_inputs"]["max_k"] == 2
    sizes = rows["mean_income"]["sensitivity_inputs"]["synthetic_group_sizes"]
    assert set(sizes["region"]) == {"north", "south", "other"}          # each category a group
    assert len(sizes["sex x age"]) == 8                                 # joint groups 2 x 4
    alt = json.loads((walked["tmp"] / "B" / "spec.json").read_text())["configuration"]["columns"]["income"]
    want = {"k4": {"under 50k", "50k+"}, "k6": {"under 25k", "25k-75k", "75k+"}}[alt]
    assert set(rows["share_female"]["sensitivity_inputs"]["synthetic_group_sizes"]["income"]) == want
    feats = rows["regression"]["sensitivity_inputs"]["features"]
    assert {"sex=f", "region=south", "region=other", "status=couple", "status=other"} <= set(feats)
    assert "region" not in feats and "status" not in feats
    assert rows["regression"]["sensitivity_inputs"]["d"] == len(feats) + 1


def test_audit_passes_public_checks_and_enclave_replay(walked):
    tmp = walked["tmp"]
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub")
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub", transcript=tmp / "T.jsonl", data=walked["data"])
    assert rep.get("replay").result == "pass", rep.get("replay").problems
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
