"""aim_pure end to end: spec validation, the published ``adaptive_gum`` model (round trip), a
pre-registered `publish: model` release of the built-in births example that passes the public
audit (re-derivation included) and the enclave replay, and hostile model.json files (re-signed
by the publisher) that the audit refuses, naming the rule."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx
from dpbundle.mechanisms.aim import AdaptiveMarginals, criteria_workload
from dpbundle.mechanisms.noise import Randomness
from dpbundle.mechanisms.published import (
    PUBLISHABLE_GENERATORS,
    PublishError,
    model_document,
    model_from_document,
)
from hostile_bundles import resign

runner = CliRunner()
BEACON = "drand quicknet randomness 7d2a..."   # names no time
GENERATOR = {"type": "aim_pure", "grid": {"rounds_per_column": [4], "estimate_rows": [2000]}}


# ------------------------------------------------------------------ (c) the published kind


def _fitted(seed: int = 0, eps: float = 3.0):
    rng = np.random.default_rng(seed)
    domain = (4, 3, 5, 2, 1)
    codes = np.stack([rng.integers(k, size=600) for k in domain], axis=1)
    codes[:, 1] = (codes[:, 0] + rng.integers(2, size=600)) % 3      # a dependence to find
    gen = AdaptiveMarginals(eps, rounds_per_column=3, estimate_rows=500)
    return gen, gen.fit(codes, domain, Randomness()), domain


def _document(model, eps: float = 3.0) -> dict:
    doc = model_document(model, generator={"type": "aim_pure"}, epsilon=eps,
                         columns=["a", "b", "c", "d", "e"])
    return json.loads(json.dumps(doc))      # as written to and read from model.json


def test_round_trip_samples_identically():
    from dpbundle.audit.schema_util import validate

    gen, model, domain = _fitted()
    doc = _document(model)
    assert doc["kind"] == "adaptive_gum" and "aim_pure" in PUBLISHABLE_GENERATORS
    assert validate(doc, "model") == []
    assert doc["epsilon_1way"] == gen.epsilon_1 and len(doc["rounds"]) == len(model.rounds) >= 1
    assert {tuple(r["columns"]) for r in doc["rounds"]} == {tuple(m["columns"]) for m in doc["marginals"]}
    again = model_from_document(doc)
    assert type(again).__name__ == "AdaptiveModel" and again.rounds == model.rounds
    assert again.epsilon_1way == model.epsilon_1way
    a = model.sample(3000, np.random.default_rng(7))
    b = again.sample(3000, np.random.default_rng(7))
    assert a.shape == (3000, len(domain)) and np.array_equal(a, b)
    assert _document(again) == doc       # and it writes the same document


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["rounds"][0].update(columns=[0]), r"rounds\[0\]: columns must be 2\.\.6 distinct"),
    (lambda d: d["rounds"][0].update(epsilon_measure=-1.0), r"rounds\[0\]: epsilon_select and epsilon_measure"),
    (lambda d: d["marginals"].append(dict(d["marginals"][0])), r"has more than one marginal"),
    (lambda d: d["marginals"][0].update(p=[0.5, 0.5]), r"marginals\[0\]: p over columns"),
    (lambda d: d.update(epsilon_1way=0), r"epsilon_1way must be a finite number > 0"),
    (lambda d: d.update(gum_rounds=10 ** 9), r"gum_rounds must be an integer in 0\.\.1000"),
])
def test_unusable_documents_are_refused_with_the_rule(edit, message):
    _, model, _ = _fitted()
    doc = _document(model)
    edit(doc)
    with pytest.raises(PublishError, match=message):
        model_from_document(doc)


def test_noise_plan_lists_the_one_ways_and_every_round():
    from dpbundle.audit.model_check import model_structure_problems

    gen, model, domain = _fitted()
    doc = _document(model)
    spec = {"acceptance": []}                                 # no criteria: the all-pairs workload
    config = {"generator": {"type": "aim_pure", "rounds_per_column": 3, "estimate_rows": 500}}
    problems, plan = model_structure_problems(doc, config, 3.0, 600, spec, list("abcde"))
    assert problems == []
    assert [p["measurement"] for p in plan] == ["1-way marginals"] + [
        f"round {t}: {len(r.columns)}-way marginal of columns {list(r.columns)}" for t, r in enumerate(model.rounds)]
    assert plan[0]["cells"] == sum(domain) and plan[0]["sensitivity"] == 10.0      # 2 d
    assert plan[0]["epsilon"] == gen.epsilon_1
    assert all(p["sensitivity"] == 2.0 and p["epsilon"] == r.epsilon_measure
               for p, r in zip(plan[1:], model.rounds))
    # a workload that never names the rounds' columns: the rounds are not its candidates
    problems, _ = model_structure_problems(doc, config, 3.0, 600,
                                           {"acceptance": [{"type": "smoothed_ratio", "columns": ["a"]}]},
                                           list("abcde"))
    assert any("are not a candidate marginal of the workload" in p for p in problems), problems
    # a configuration that brings its own workload is not one the release makes
    own = {"generator": dict(config["generator"], workload=[[[0, 1, 2, 3, 4]]])}
    problems, plan = model_structure_problems(doc, own, 3.0, 600, spec, list("abcde"))
    assert plan == [] and problems[0].startswith("spec.json: the configuration sets aim_pure's workload")


# ------------------------------------------------------------------ spec validation


def test_a_spec_may_not_set_the_workload(tmp_path):
    from dpbundle.release.spec.load import semantic_problems

    doc = yaml.safe_load(fx.fast_spec(tmp_path / "s.yaml").read_text())
    doc["generators"] = [{"type": "aim_pure", "grid": {"max_size": [2, 3], "split_1way": [0.1]}}]
    assert [p for p in semantic_problems(doc) if "generators" in p] == []
    doc["generators"] = [{"type": "aim_pure", "grid": {"workload": [[[[0, 1]]]], "max_size": [7],
                                                       "measure_split": [1.0]}}]
    probs = [p for p in semantic_problems(doc) if "generators" in p]
    assert any(p.startswith("generators[0].grid.workload: aim_pure's workload is set by the release")
               for p in probs), probs
    assert any(p.startswith("generators[0].grid.max_size[0]: ") for p in probs), probs
    assert any(p.startswith("generators[0].grid.measure_split[0]: ") for p in probs), probs


# ------------------------------------------------------------------ (a) release and audits


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A pre-registered `publish: model` release of the births example (4,000 simulated rows)
    with one aim_pure configuration, its transcript kept for the enclave replay."""
    from dpbundle.release.cli.main import app

    t = tmp_path_factory.mktemp("aim-pure")

    def run(*args):
        res = runner.invoke(app, [str(a) for a in args])
        assert res.exit_code == 0, res.output

    spec = fx.fast_spec(t / "spec.yaml")
    doc = yaml.safe_load(spec.read_text())
    doc["publish"] = "model"
    doc["generators"] = [GENERATOR]
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    data = fx.example_registry(t / "registry.csv", 4000, 5)
    run("keygen", "--out", t / "k")
    run("preregister", spec, "--key", t / "k.key", "--out", t / "rec.json",
        "--beacon-source", "drand quicknet, first round after the record", "--secret-out", t / "s.json")
    (t / "private").mkdir(mode=0o700)
    run("release", spec, data, "--out", t / "B", "--key", t / "k.key", "--ledger", t / "ledger.jsonl",
        "--transcript", t / "private" / "t.jsonl", "--preregistration", t / "rec.json",
        "--beacon", BEACON, "--preregistration-secret", t / "s.json")
    return {"tmp": t, "bundle": t / "B", "key": t / "k.key", "pub": t / "k.pub", "rec": t / "rec.json",
            "data": data, "transcript": t / "private" / "t.jsonl", "spec": doc}


def _audit_cli(*args) -> tuple[int, str]:
    import typer
    from dpbundle.audit.cli import cli_audit

    audit = typer.Typer()
    audit.command("audit")(cli_audit)
    res = runner.invoke(audit, [str(a) for a in args], env={"COLUMNS": "200"})
    return res.exit_code, res.output


def test_the_release_passes_the_public_audit_and_the_enclave_replay(released):
    b = released["bundle"]
    model = json.loads((b / "model.json").read_text())
    assert model["kind"] == "adaptive_gum" and model["generator"]["type"] == "aim_pure"
    assert "workload" not in model["generator"]        # the release sets it, the spec does not
    budget = json.loads((b / "budget.json").read_text())
    assert budget["generation"]["type"] == "aim_pure"
    assert [p["purpose"] for p in budget["generation"]["parts"]] == \
        [p["purpose"] for p in AdaptiveMarginals(1.0).budget_parts()]
    report = released["tmp"] / "report.json"
    code, out = _audit_cli(b, "--pubkey", released["pub"], "--preregistration", released["rec"],
                           "--beacon", BEACON, "--transcript", released["transcript"],
                           "--data", released["data"], "--json", report)
    assert code == 0, out
    doc = json.loads(report.read_text())
    checks = {c["check"]: c for c in doc["checks"]}
    assert doc["verdict"] == "verified"
    assert checks["replay"]["result"] == "pass", checks["replay"]
    assert checks["rederivation"]["result"] == "pass", checks["rederivation"]
    noise = checks["rederivation"]["facts"]["model_noise"]
    assert noise[0]["measurement"] == "1-way marginals"
    assert len(noise) == 1 + len(model["rounds"])
    assert all(n["epsilon"] == r["epsilon_measure"] for n, r in zip(noise[1:], model["rounds"]))


def test_the_release_and_the_audit_use_the_workload_of_the_spec(released):
    """Every round chose a candidate of the criteria's workload (public: the spec document)."""
    from dpbundle.mechanisms.aim import candidates

    model = json.loads((released["bundle"] / "model.json").read_text())
    spec_json = json.loads((released["bundle"] / "spec.json").read_text())
    names = [c["name"] for c in spec_json["spec"]["columns"]]
    workload = criteria_workload(spec_json["spec"], names)
    allowed = set(candidates(workload, model["domain"], 3, 100_000)[0])
    assert model["rounds"] and all(tuple(r["columns"]) in allowed for r in model["rounds"])


def _tampered(released, tmp_path, edit) -> tuple[int, dict]:
    """A copy of the bundle whose model.json ``edit`` changed, re-hashed and re-signed with the
    publisher's key; (exit code, the rederivation check) of its public audit."""
    copy = tmp_path / "B"
    shutil.copytree(released["bundle"], copy)
    doc = json.loads((copy / "model.json").read_text())
    edit(doc)
    (copy / "model.json").write_text(json.dumps(doc))
    resign(copy, released["key"])
    report = tmp_path / "report.json"
    code, _ = _audit_cli(copy, "--pubkey", released["pub"], "--preregistration", released["rec"],
                           "--beacon", BEACON, "--json", report)
    checks = {c["check"]: c for c in json.loads(report.read_text())["checks"]}
    return code, checks["rederivation"]


def test_doubled_round_epsilons_fail_the_audit(released, tmp_path):
    def double(doc):
        for r in doc["rounds"]:
            r["epsilon_select"] *= 2
            r["epsilon_measure"] *= 2

    code, red = _tampered(released, tmp_path, double)
    assert code == 1 and red["result"] == "fail"
    assert any("model.json: rounds[0] epsilons" in p and "not what the budget rule allows" in p
               for p in red["problems"]), red["problems"]


def test_a_marginal_no_round_measured_fails_the_audit(released, tmp_path):
    def extra(doc):
        chosen = {tuple(r["columns"]) for r in doc["rounds"]}
        d = len(doc["domain"])
        pair = next((a, b) for a in range(d) for b in range(a + 1, d) if (a, b) not in chosen)
        cells = doc["domain"][pair[0]] * doc["domain"][pair[1]]
        doc["marginals"].append({"columns": list(pair), "p": [1.0 / cells] * cells})

    code, red = _tampered(released, tmp_path, extra)
    assert code == 1 and red["result"] == "fail"
    # the bounds check refuses it first when every round chose a different set (more marginals
    # than rounds); otherwise the structure check does: either way the forgery is named
    rules = ("the marginals are not exactly the distinct column sets its rounds chose",
             "more than its")
    assert any(rule in p for p in red["problems"] for rule in rules), red["problems"]
