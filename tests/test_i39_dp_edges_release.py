"""Issue 39, part 1: bins chosen under DP (``dp_edges``) end to end.

- the spec's rules (what needs the edges before they exist is refused, before any spend);
- the prepared table's atoms keep every quantile score and every bin exact;
- a persons release (PrivBayes) and an ACS-like census release (PrivSyn) with ``dp_edges``:
  budget.json's ``edges`` block, spec.json's drawn edges, codebook, datasheet and registry entry,
  the public audit and the enclave replay; every dp_edges alternative spends, picked or not;
- forgeries re-signed by the key holder: a smaller noise scale, a lower epsilon, an edge that
  is no candidate, a removed block fail the public audit naming the rule; an edge moved to
  another candidate fails the enclave replay;
- the audit's own scores, quantile fractions and candidates are the mechanism's;
- sweep and selftest run the draws; ``spec from-dictionary --dp-edges`` writes a valid spec.
"""
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
from hostile_bundles import resign  # noqa: E402
from test_i39_dp_tables import _audit, _census_registry, _released  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _persons_doc(alternatives: list[dict]) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "persons.yaml").read_text())
    for c in doc["columns"]:
        c["alternatives"] = alternatives if c["name"] == "hours" else c["alternatives"][:1]
    doc["generators"] = [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.25], "theta": [8]}}]
    doc["projection"] = {"min_count": [1]}
    for e in doc["acceptance"]:
        if isinstance(e.get("threshold"), (int, float)):
            e["threshold"] = 1e9
    doc["privacy"]["epsilon_cap"] = 20
    doc["privacy"].pop("selection", None)
    return doc


DP8 = {"id": "dp8", "clip": [1, 80], "dp_edges": {"bins": 8, "epsilon": 0.1}}
DP4 = {"id": "dp4", "clip": [1, 80], "dp_edges": {"bins": 4, "epsilon": 0.05, "step": 5}}


@pytest.fixture(scope="module")
def persons(tmp_path_factory):
    from dpbundle.release.data.example import example_csv

    t = tmp_path_factory.mktemp("i39-dp-edges")
    (t / "reg.csv").write_bytes(example_csv("persons", 6000, 3))
    (t / "spec.yaml").write_text(yaml.safe_dump(_persons_doc([DP8, DP4]), sort_keys=False))
    return _released(t, t / "spec.yaml", t / "reg.csv")


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    t = tmp_path_factory.mktemp("i39-dp-edges-census")
    doc = yaml.safe_load((ROOT / "examples" / "acs-excerpt-eps1.yaml").read_text())
    keep = {"AGEP", "SEX", "MSP", "RAC1P", "EDU"}
    doc["columns"] = [c for c in doc["columns"] if c["name"] in keep]
    for c in doc["columns"]:
        c["alternatives"] = c["alternatives"][:1]
        if c["name"] == "AGEP":
            c["alternatives"] = [{"id": "dp6", "clip": [0, 99], "dp_edges": {"bins": 6, "epsilon": 0.05}}]
    doc["input"]["columns"] = [c for c in doc["input"]["columns"]
                               if c["name"] in keep or c["name"] in {"HOUSING_TYPE", "OWN_RENT", "PINCP_DECILE", "DVET", "DEYE"}]
    doc["synthetic_constraints"] = []
    doc["privacy"]["epsilon_cap"] = 1.05
    doc["publish"] = "tables"
    (t / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return _released(t, t / "spec.yaml", _census_registry(t / "reg.csv"))


# ------------------------------------------------------------------ the spec's rules


def _problems(doc: dict) -> str:
    from dpbundle.release.spec.load import SpecError, validate_spec

    try:
        validate_spec(doc)
    except SpecError as exc:
        return str(exc)
    return ""


def test_a_valid_spec_counts_the_draws_in_its_total():
    from dpbundle.release.spec.load import validate_spec

    spec = validate_spec(_persons_doc([DP8, DP4]))
    plain = validate_spec(_persons_doc([{"id": "fixed", "clip": [1, 80], "edges": [1, 20, 40, 81]}]))
    assert spec.total_epsilon_exact - plain.total_epsilon_exact == spec.epsilon_edges
    assert float(spec.epsilon_edges) == pytest.approx(0.15)
    assert "edges 0.15" in spec.budget_formula()


@pytest.mark.parametrize("change, rule", [
    (lambda d, a: a.update(edges=[1, 40, 81]), "remove `edges`"),
    (lambda d, a: a["dp_edges"].update(bins=90), "candidate edges"),
    (lambda d, a: a["dp_edges"].update(step=50), "candidate edges"),
    (lambda d, a: d.update(group_bins={**d["group_bins"], "hours": {"edges": [40], "labels": ["a", "b"]}}),
     "group_bins.hours"),
    (lambda d, a: d["synthetic_constraints"].append({"name": "x", "when": [["hours", "in", ["40"]]]}),
     "synthetic_constraints"),
    (lambda d, a: a.pop("clip"), "clip"),
    (lambda d, a: a.update(labels=["a"] * 8), "labels"),
    (lambda d, a: a["dp_edges"].update(step=0.5), "needs a whole step and whole clip ends"),
    (lambda d, a: a.update(clip=[0.5, 80]), "needs a whole step and whole clip ends"),
])
def test_what_needs_the_edges_before_they_exist_is_refused(change, rule):
    doc = _persons_doc([dict(DP8, dp_edges=dict(DP8["dp_edges"]))])
    change(doc, doc["columns"][[c["name"] for c in doc["columns"]].index("hours")]["alternatives"][0])
    assert rule in _problems(doc)


def test_candidates_that_would_be_labelled_alike_are_refused():
    doc = _persons_doc([{"id": "dp4", "clip": [10000, 10001], "dp_edges": {"bins": 4, "epsilon": 0.1, "step": 0.01}}])
    hours = next(c for c in doc["input"]["columns"] if c["name"] == "hours")
    hours.update(type="float", min=0, max=20000)
    assert "would be labelled alike" in _problems(doc)


def test_a_float_column_needs_a_step_and_the_cap_counts_the_draws():
    doc = _persons_doc([dict(DP8)])
    hours = next(c for c in doc["input"]["columns"] if c["name"] == "hours")
    hours["type"] = "float"
    assert "dp_edges.step: needed for a float column" in _problems(doc)
    doc = _persons_doc([{"id": "dp8", "clip": [1, 80], "dp_edges": {"bins": 8, "epsilon": 11}}])
    assert "exceeds the cap" in _problems(doc) and "edges 11" in _problems(doc)


# ------------------------------------------------------------------ atoms


def test_atoms_keep_the_scores_and_the_bins_exact(tmp_path):
    """A registry read to atoms (one row per class of values the spec cannot tell apart) gives the
    scores of the raw values for every candidate set and quantile, and the codes of the raw
    values for edges drawn anywhere among the candidates."""
    import pandas as pd

    from dpbundle.mechanisms.edges import alpha_fraction, candidate_grid, full_edges, quantile_scores
    from dpbundle.release.data.binning import clipped_values, code_column
    from dpbundle.release.data.example import example_csv
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import validate_spec

    (tmp_path / "reg.csv").write_bytes(example_csv("persons", 4000, 7))
    spec = validate_spec(_persons_doc([DP8, DP4]))
    prepared = prepare(tmp_path / "reg.csv", spec)
    assert prepared.atomized and len(prepared.counts) < prepared.n
    raw = pd.read_csv(tmp_path / "reg.csv", dtype=str, keep_default_na=False)
    rng = np.random.default_rng(3)
    for alt in (DP8, DP4):
        grid = candidate_grid(alt["clip"], alt["dp_edges"].get("step"))
        x = clipped_values(spec, "hours", alt["id"], prepared.distinct)
        # the raw plausible values: the atom representatives weighted by their counts, expanded
        raw_hours = np.repeat(x, prepared.counts)
        full = np.clip(pd.to_numeric(raw["hours per week"]).to_numpy(), 1, 80)
        assert raw_hours.size == prepared.n and set(np.unique(raw_hours)) <= set(np.unique(full))
        for k in (2, 5, 8):
            lo = int(rng.integers(0, len(grid) - 3))
            cands = grid[lo: lo + 3 + int(rng.integers(0, len(grid) - lo - 3))]
            for j in range(1, k):
                a = alpha_fraction(j / k)
                assert np.array_equal(quantile_scores(x, cands, a, counts=prepared.counts),
                                      quantile_scores(raw_hours, cands, a))
        inner = sorted(rng.choice(grid, size=alt["dp_edges"]["bins"] - 1, replace=False).tolist())
        resolved = spec.with_edges({("hours", a["id"]): full_edges(a["clip"], a["dp_edges"].get("step"), inner)
                                    if a is alt else full_edges(a["clip"], a["dp_edges"].get("step"),
                                                                candidate_grid(a["clip"], a["dp_edges"].get("step"))[:a["dp_edges"]["bins"] - 1])
                                    for a in (DP8, DP4)})
        codes = code_column(resolved, "hours", alt["id"], prepared.distinct)
        edges = np.asarray(full_edges(alt["clip"], alt["dp_edges"].get("step"), inner))
        want = np.searchsorted(edges, x, side="right") - 1
        assert np.array_equal(codes, want)


# ------------------------------------------------------------------ end to end


def _json(b: Path, name: str) -> dict:
    return json.loads((b / name).read_text())


def test_the_persons_bundle_publishes_its_edges_and_passes_the_audit_and_the_replay(persons):
    from dpbundle.mechanisms.edges import candidate_grid, declared_document

    b = persons["bundle"]
    budget, spec = _json(b, "budget.json"), _json(b, "spec.json")
    hours = next(c for c in spec["spec"]["columns"] if c["name"] == "hours")
    block = {a["alternative"]: a for a in budget["edges"]["alternatives"]}
    assert set(block) == {"dp8", "dp4"}                      # both draw, one is used
    assert budget["edges"]["epsilon"] == 0.15
    for alt in hours["alternatives"]:
        e = alt["edges"]
        grid = set(candidate_grid(alt["clip"], alt["dp_edges"].get("step")))
        assert len(e) == alt["dp_edges"]["bins"] + 1 and e[0] == 1 and e[-1] == 81
        assert all(x in grid for x in e[1:-1]) and e == sorted(set(e))
        assert block[alt["id"]]["edges"] == e
        assert [d["sensitivity"] for d in block[alt["id"]]["draws"]] == [d["quantile"][1] for d in block[alt["id"]]["draws"]]
    # the total: count + edges + 2 x (generation + criteria)
    want = 0.1 + 0.15 + 2 * (budget["generation"]["epsilon"] + budget["evaluation"]["epsilon"])
    assert budget["total_epsilon"] == pytest.approx(want)
    # codebook.csv's bins are the selected alternative's drawn edges
    used = spec["configuration"]["columns"]["hours"]
    edges = next(a["edges"] for a in hours["alternatives"] if a["id"] == used)
    rows = [r for r in (b / "codebook.csv").read_text().splitlines()[1:] if r.startswith("hours,")]
    assert len(rows) == len(edges) - 1
    lowers = [r.split(",")[3] for r in rows]
    assert [float(x) for x in lowers[1:]] == edges[1:-1]
    html = (b / "README.html").read_text()
    assert "chosen under differential privacy" in html and "Bin edges of hours (dp8)" in html
    entry = " ".join((b / "registry-entry.yaml").read_text().split())
    assert "bin edges 0.15" in entry
    assert "except the bin edges of hours (dp8), hours (dp4), which are DP quantiles of the data" in entry
    assert "drawn under DP as quantiles of the data (epsilon 0.15 in the total)" in entry
    assert "never from the data" not in entry
    text = " ".join(html.split())
    assert "The bin edges of hours (dp8), hours (dp4) were then drawn with differential privacy" in text
    # the declared spec (what the run binding holds) has no drawn edges
    assert all("edges" not in a for a in next(c for c in declared_document(spec["spec"])["columns"]
                                              if c["name"] == "hours")["alternatives"])
    from test_i36_closure_walk import unclassified     # every field of the bundle has a closure rule
    assert unclassified(b) == []
    code, checks = _audit(b, "--pubkey", persons["pub"], "--transcript", persons["transcript"],
                          "--data", persons["data"])
    assert code == 0, {k: v["detail"] for k, v in checks.items() if v["result"] == "fail"}
    assert checks["replay"]["result"] == "pass" and checks["budget"]["result"] == "pass"


def test_the_census_bundle_passes_the_audit_and_the_replay(census):
    b = census["bundle"]
    spec = _json(b, "spec.json")
    agep = next(c for c in spec["spec"]["columns"] if c["name"] == "AGEP")["alternatives"][0]
    assert len(agep["edges"]) == 7 and agep["edges"][0] == 0 and agep["edges"][-1] == 100
    tables = _json(b, "dp-tables.json")
    assert tables["tables"]
    code, checks = _audit(b, "--pubkey", census["pub"], "--transcript", census["transcript"],
                          "--data", census["data"])
    assert code == 0, {k: v["detail"] for k, v in checks.items() if v["result"] == "fail"}


# ------------------------------------------------------------------ forgeries


def _said(check: dict) -> str:
    """A check's detail and problems, as one text."""
    return " ".join([check.get("detail") or "", *check.get("problems", [])])


def _forged(rel: dict, tmp: Path, edit) -> Path:
    b = tmp / "forged"
    shutil.copytree(rel["bundle"], b)
    edit(b)
    resign(b, rel["key"])
    return b


def _edit(b: Path, name: str, change) -> None:
    doc = _json(b, name)
    change(doc)
    (b / name).write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def _dp8(doc: dict) -> dict:
    return next(a for a in doc["edges"]["alternatives"] if a["alternative"] == "dp8")


def _spec_dp8(doc: dict) -> dict:
    hours = next(c for c in doc["spec"]["columns"] if c["name"] == "hours")
    return next(a for a in hours["alternatives"] if a["id"] == "dp8")


def test_a_smaller_noise_scale_fails_the_public_audit(persons, tmp_path):
    b = _forged(persons, tmp_path, lambda b: _edit(b, "budget.json", lambda d: _dp8(d)["draws"][0].update(
        noise_scale=_dp8(d)["draws"][0]["noise_scale"] / 2)))
    code, checks = _audit(b, "--pubkey", persons["pub"])
    assert code != 0 and checks["budget"]["result"] == "fail"
    assert "draw 1/8: noise scale" in _said(checks["budget"])


def test_a_lower_epsilon_fails_the_public_audit(persons, tmp_path):
    def edit(b):
        _edit(b, "spec.json", lambda d: _spec_dp8(d)["dp_edges"].update(epsilon=0.01))
        _edit(b, "budget.json", lambda d: (_dp8(d).update(epsilon=0.01), d["edges"].update(epsilon=0.06),
                                            d.update(total_epsilon=round(d["total_epsilon"] - 0.09, 10))))
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and checks["budget"]["result"] == "fail"
    assert "is not 0.01 split over 7 draws" in _said(checks["budget"])


def test_an_edge_that_is_no_candidate_fails_the_public_audit(persons, tmp_path):
    def move(d, block):
        a = _dp8(d) if block else _spec_dp8(d)
        a["edges"][1] = a["edges"][1] + 0.5
    def edit(b):
        _edit(b, "spec.json", lambda d: move(d, False))
        _edit(b, "budget.json", lambda d: move(d, True))
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "an inner edge is not one of the candidates" in _said(checks["budget"])


def test_edges_written_as_integers_fail_the_public_audit(persons, tmp_path):
    """1 instead of 1.0: the same numbers, another byte sequence for the same run."""
    def ints(a):
        a["edges"] = [int(e) for e in a["edges"]]
    def edit(b):
        _edit(b, "spec.json", lambda d: ints(_spec_dp8(d)))
        _edit(b, "budget.json", lambda d: ints(_dp8(d)))
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "must be written as the release writes them" in _said(checks["budget"])


def test_a_removed_edges_block_fails_the_public_audit(persons, tmp_path):
    b = _forged(persons, tmp_path, lambda b: _edit(b, "budget.json", lambda d: d.pop("edges")))
    code, checks = _audit(b, "--pubkey", persons["pub"])
    assert code != 0 and checks["budget"]["result"] == "fail"


def test_an_edge_moved_to_another_candidate_fails_the_replay(persons, tmp_path):
    """Still a candidate, still increasing: the public budget check cannot tell; the replay
    recomputes the scores from the registry and the recorded draw gives the true edge."""
    from dpbundle.audit.edges_check import check_edges
    from dpbundle.audit.report import CheckResult

    def move(a):
        e = a["edges"]
        i = next(i for i in range(1, len(e) - 1) if e[i] + 1 < e[i + 1])
        e[i] += 1

    def edit(b):
        _edit(b, "spec.json", lambda d: move(_spec_dp8(d)))
        _edit(b, "budget.json", lambda d: move(_dp8(d)))
    b = _forged(persons, tmp_path, edit)
    r = CheckResult("budget")
    check_edges(_json(b, "budget.json"), _json(b, "spec.json")["spec"], r)
    assert not r.failed                                      # public: a valid set of edges
    code, checks = _audit(b, "--pubkey", persons["pub"], "--transcript", persons["transcript"],
                          "--data", persons["data"])
    assert code != 0 and checks["replay"]["result"] == "fail"
    assert "edges of hours (dp8) replayed from the registry differ" in _said(checks["replay"])


# ------------------------------------------------------------------ the audit's own arithmetic


def test_the_audits_scores_fractions_and_candidates_are_the_mechanisms():
    from dpbundle.audit.edges_check import grid_of, quantile_fraction
    from dpbundle.audit.edges_replay import _scores
    from dpbundle.mechanisms.edges import alpha_fraction, candidate_grid, quantile_scores

    for k in range(2, 1001):
        for j in (1, k // 3 or 1, k - 1):
            assert quantile_fraction(j, k) == alpha_fraction(j / k)
    rng = np.random.default_rng(11)
    for _ in range(50):
        x = rng.integers(0, 50, size=300).astype(float)
        cands = sorted(set(rng.integers(-3, 55, size=20).tolist()))
        num, den = alpha_fraction(float(rng.choice([0.25, 1 / 3, 0.5, 0.7, 6 / 7])))
        order = np.argsort(x)
        cum = np.concatenate([[0], np.cumsum(np.ones(x.size, dtype=np.int64))])
        assert np.array_equal(_scores(x[order], cum, cands, num, den), quantile_scores(x, cands, (num, den)))
    for clip, step in (([1, 80], None), ([0, 1], 0.1), ([16.3, 52864.7], 1000.0), ([-5, 5], 0.25)):
        alt = {"clip": clip, "dp_edges": {"bins": 2, "epsilon": 1} | ({"step": step} if step else {})}
        assert grid_of(alt) == candidate_grid(clip, step)


# ------------------------------------------------------------------ sweep, selftest, dictionary


def test_sweep_and_selftest_draw_the_edges(persons, tmp_path):
    from dpbundle.release.cli.main import app

    spec, data = persons["tmp"] / "spec.yaml", persons["data"]
    res = runner.invoke(app, ["sweep", str(spec), str(data), "--out", str(tmp_path / "sw"), "--reps", "1",
                              "--ledger", str(tmp_path / "l.jsonl"), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "bin edges of hours (dp8) drawn under DP on the public data" in res.output
    res = runner.invoke(app, ["selftest", str(spec), str(data), "--pairs", "6", "--json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "s.json").read_text())
    assert report["passed"] and not report["findings"]
    rows = [r for r in report["calls"] if r["call"].startswith("edges hours")]
    assert len(rows) == 7 + 3 and all(r["pairs"] == 6 for r in rows)
    assert all(0 < r["largest_distance"] <= r["sensitivity_max"] for r in rows)


def test_from_dictionary_writes_dp_edges_that_validate(tmp_path):
    from dpbundle.release.cli.main import app
    from dpbundle.release.spec.load import load_spec

    out = tmp_path / "acs.yaml"
    res = runner.invoke(app, ["spec", "from-dictionary", str(ROOT / "examples" / "data" / "acs_excerpt_data_dictionary.json"),
                              "--out", str(out), "--columns", "AGEP,SEX,DENSITY", "--bins", "6", "--dp-edges", "0.05"])
    assert res.exit_code == 0, res.output
    spec = load_spec(out)
    drawn = {c.name: a.dp_edges for c in spec.model.columns for a in c.alternatives if a.dp_edges is not None}
    assert set(drawn) == {"AGEP", "DENSITY"} and drawn["DENSITY"].step == 1000.0
    assert spec.epsilon_cap == pytest.approx(1.1) and spec.total_epsilon <= spec.epsilon_cap


def test_the_pre_registered_spec_is_the_declared_one(persons, tmp_path):
    """`audit --spec` compares the spec as declared (the drawn edges are not in it): the spec file
    the release ran passes; the same file with an alternative's epsilon changed fails."""
    spec = persons["tmp"] / "spec.yaml"
    code, checks = _audit(persons["bundle"], "--pubkey", persons["pub"], "--spec", spec)
    assert code == 0 and checks["preregistration"]["result"] == "pass"
    doc = yaml.safe_load(spec.read_text())
    hours = next(c for c in doc["columns"] if c["name"] == "hours")
    hours["alternatives"][0]["dp_edges"]["epsilon"] = 0.2
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    code, checks = _audit(persons["bundle"], "--pubkey", persons["pub"], "--spec", tmp_path / "other.yaml")
    assert code != 0 and checks["preregistration"]["result"] == "fail"
    assert "columns[hours].alternatives[dp8].dp_edges.epsilon: pre-registered 0.2, bundle 0.1" in _said(
        checks["preregistration"])
