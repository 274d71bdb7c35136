"""The number of records: dp_count (DP count + resize) and declared_public, from the mechanism's
coupling to the words of a released bundle, on neighbouring registries (one record moved across
a plausibility rule)."""
from __future__ import annotations

import csv
import itertools
import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.optimize import linprog
from typer.testing import CliRunner

from dpbundle.mechanisms.exact import dec
from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.mechanisms.records import (COUNT_PURPOSE, RESIZE_PURPOSE, ResizePlan,
                                         dp_record_count, guarantee_text, resize_plan)
from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.records import release_records
from dpbundle.release.spec.load import Spec, SpecError, load_spec, validate_spec
from dpbundle.release.data.transform import transform

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ the resize, exactly


def resize_distribution(records: list[int], m: int, K: int, rule: str = "uniform") -> dict:
    """Exact distribution of the resized multiset (sorted tuple) of one-column records with K
    codes: uniform m-subset of the records, plus m - n pads uniform over the K codes.
    ``rule="copy"`` (a wrong resize, for the negative control) pads with copies of the first
    record instead of data-independent pads."""
    n = len(records)
    out: Counter = Counter()
    subsets = list(itertools.combinations(range(n), min(m, n)))
    pads = (list(itertools.product(range(K), repeat=max(m - n, 0))) if rule == "uniform"
            else [tuple(records[:1] * max(m - n, 0))])
    w = Fraction(1, len(subsets) * len(pads))
    for sub in subsets:
        for pad in pads:
            out[tuple(sorted([records[i] for i in sub] + list(pad)))] += w
    return out


def coupled(p: dict, q: dict) -> bool:
    """Is there a coupling of p and q supported on pairs of multisets at change-one distance
    <= 1 (same size, at most one element differs)? A feasibility LP."""
    A, B = list(p), list(q)
    pairs = [(i, j) for i, a in enumerate(A) for j, b in enumerate(B)
             if sum((Counter(a) - Counter(b)).values()) <= 1]
    if not pairs:
        return False
    rows = []
    rhs = []
    for i in range(len(A)):
        rows.append([1.0 if a == i else 0.0 for a, _ in pairs]); rhs.append(float(p[A[i]]))
    for j in range(len(B)):
        rows.append([1.0 if b == j else 0.0 for _, b in pairs]); rhs.append(float(q[B[j]]))
    res = linprog(np.zeros(len(pairs)), A_eq=np.array(rows), b_eq=np.array(rhs),
                  bounds=[(0, None)] * len(pairs), method="highs")
    return res.status == 0


CASES = [([0, 1, 1], 2), ([0, 1, 1], 3), ([0, 1, 1], 4), ([0, 1, 1], 5), ([2, 0], 1), ([2], 3),
         ([0, 1, 2], 2), ([], 2)]


@pytest.mark.parametrize("F,m", CASES)
@pytest.mark.parametrize("x", [0, 2])
def test_resize_of_neighbours_couples_at_change_one(F, m, x):
    """F' = F + {x} (a record moved across a plausibility rule) and F with one record changed:
    for every public m, resize(F) and resize(F') are at change-one distance 1 under a coupling,
    which is what makes M o resize as private as M (mechanisms/records.py)."""
    K = 3
    assert coupled(resize_distribution(F, m, K), resize_distribution(F + [x], m, K))
    if F:
        changed = [x] + F[1:]
        assert coupled(resize_distribution(F, m, K), resize_distribution(changed, m, K))


def test_a_wrong_resize_fails_the_coupling_test():
    """Negative control: padding with copies of a real record is not stable: one added record
    changes every pad."""
    assert not coupled(resize_distribution([0], 3, 3, "copy"), resize_distribution([2, 0], 3, 3, "copy"))
    assert coupled(resize_distribution([0], 3, 3), resize_distribution([2, 0], 3, 3))


def test_plan_is_a_uniform_subsample_with_uniform_pads():
    """The implementation draws what the derivation assumes: every 2-subset of 4 records about
    equally often, pads uniform over the bins, the order a permutation."""
    rng = np.random.default_rng(11)
    seen: Counter = Counter()
    for _ in range(6000):
        plan = resize_plan(4, 2, 1, rng)
        seen[tuple(sorted(plan.keep.tolist()))] += 1
        assert sorted(plan.order.tolist()) == [0, 1]
    assert len(seen) == 6 and min(seen.values()) > 850 and max(seen.values()) < 1150
    plan = resize_plan(3, 3003, 2, rng)
    codes = np.array([[0, 1], [1, 0], [1, 1]])
    rows = plan.apply(codes, [2, 5])
    assert rows.shape == (3003, 2) and plan.pads == 3000
    assert rows[:, 0].max() <= 1 and rows[:, 1].max() <= 4 and rows.min() >= 0
    pad_counts = np.bincount(rows[:, 1], minlength=5)
    assert pad_counts.min() > 500  # uniform over the 5 bins (600 expected each)
    assert Counter(map(tuple, rows.tolist()))[(0, 1)] >= 1  # the real records are all kept


def test_plan_refuses_a_mismatched_table():
    plan = resize_plan(5, 4, 2, np.random.default_rng(1))
    with pytest.raises(ValueError, match="for 5 records"):
        plan.apply(np.zeros((4, 2), dtype=np.int64), [2, 2])
    with pytest.raises(ValueError, match="columns"):
        plan.apply(np.zeros((5, 3), dtype=np.int64), [2, 2, 2])
    with pytest.raises(ValueError):
        resize_plan(5, 0, 2, np.random.default_rng(1))


def test_count_goes_through_opendp_with_sensitivity_one():
    t = Transcript()
    m = dp_record_count(1000, 0.5, Randomness(t))
    rec = t.records[0]
    assert rec["kind"] == "laplace" and rec["purpose"] == COUNT_PURPOSE
    assert rec["sensitivity"] == 1 and rec["epsilon"] == 0.5
    assert m >= 1 and isinstance(m, int)
    # the replay of the same record with another true count diverges (the count is checked)
    from dpbundle.mechanisms.noise import ReplayMismatch

    with pytest.raises(ReplayMismatch):
        dp_record_count(1001, 0.5, Randomness.replay(t.records))
    assert dp_record_count(1000, 0.5, Randomness.replay(t.records)) == m


# ------------------------------------------------------------------ registries


def births_doc(policy: dict | None) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "births.yaml").read_text("utf-8"))
    if policy is None:
        doc["privacy"].pop("records", None)
    else:
        doc["privacy"]["records"] = policy
    return doc


@pytest.fixture(scope="module")
def registries(tmp_path_factory):
    """R (simulated births) and R' = R with one plausible record moved below 500 g."""
    tmp = tmp_path_factory.mktemp("registries")
    r = tmp / "R.csv"
    write_example(r, rows=3000, seed=5)
    with open(r, newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    w = header.index("birth_weight")
    i = next(k for k, row in enumerate(body) if row[w].isdigit() and 2500 <= int(row[w]) <= 4000
             and 30 <= int(row[header.index("gestation_week")]) <= 40)
    body2 = [list(row) for row in body]
    body2[i][w] = "400"
    r2 = tmp / "R2.csv"
    with open(r2, "w", newline="") as fh:
        csv.writer(fh).writerows([header, *body2])
    return tmp, r, r2


def test_filter_moves_the_count_by_one(registries):
    _, r, r2 = registries
    spec = Spec(births_doc({"policy": "declared_public"}))
    a, b = prepare(r, spec), prepare(r2, spec)
    assert a.n - b.n == 1  # the published n of declared_public reveals the moved record


def test_release_records_resizes_to_the_dp_count(registries):
    _, r, _ = registries
    spec = Spec(births_doc({"policy": "dp_count", "epsilon": 0.5}))
    prepared = prepare(r, spec)
    t = Transcript()
    out = release_records(prepared, spec, Randomness(t))
    assert [rec["purpose"] for rec in t.records] == [COUNT_PURPOSE, RESIZE_PURPOSE]
    assert t.records[0]["true"] == prepared.n and t.records[0]["sensitivity"] == 1
    assert out.resize is not None and out.resize.n_in == prepared.n and out.n == out.resize.m
    from dpbundle.release.scheme.space import enumerate_configs

    config = next(iter(enumerate_configs(spec)))
    T = transform(out, spec, config)
    assert T.n == out.n
    # declared_public: nothing drawn, the same table
    spec_pub = Spec(births_doc({"policy": "declared_public"}))
    t2 = Transcript()
    assert release_records(prepared, spec_pub, Randomness(t2)) is prepared and len(t2) == 0


def test_spec_policy_defaults_and_budget():
    """No records block: dp_count at 0.1, which pushes the births budget over its cap with a
    message naming both ways out; declared_public keeps 9.98; epsilon with declared_public is
    refused by the schema."""
    with pytest.raises(SpecError) as err:
        validate_spec(births_doc(None))
    msg = str(err.value)
    assert "privacy.epsilon_cap" in msg and "declared_public" in msg and "10.08" in msg, msg
    assert validate_spec(births_doc({"policy": "declared_public"})).total_epsilon_exact == Fraction(998, 100)
    doc = births_doc({"policy": "dp_count", "epsilon": 0.01})
    assert validate_spec(doc).total_epsilon_exact == Fraction(999, 100)
    with pytest.raises(SpecError, match="records"):
        validate_spec(births_doc({"policy": "declared_public", "epsilon": 0.1}))


def test_guarantee_texts_differ():
    pub, dp = guarantee_text("declared_public"), guarantee_text("dp_count")
    assert "same number of plausible records" in pub["neighbouring"]
    assert "published" in pub["n_statement"] and "exactly" in pub["n_statement"]
    assert "differentially private count" in dp["n_statement"]
    with pytest.raises(ValueError):
        guarantee_text("exact")


# ------------------------------------------------------------------ released bundles

LOOSE = {"kway": 0.5, "ratio": 10.0, "mean_parity": 50.0, "mean_weight": 1e5, "mean_gestation": 1e3,
         "regression": 1e12, "mae": 1e9, "faithfulness": 2.0}


def _release(tmp: Path, data: Path, policy: dict, name: str) -> Path:
    doc = births_doc(policy)
    doc["privacy"]["epsilon_cap"] = 11.0
    for entry in doc["acceptance"]:
        entry["threshold"] = LOOSE[entry["id"]]
        entry.pop("clip", None) if entry["type"] != "smoothed_ratio" else entry.update(clip=20.0)
    spec_path = tmp / f"{name}.yaml"
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    if not (tmp / "k.key").exists():
        assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    from dpbundle.release.scheme.space import config_id, enumerate_configs

    spec = load_spec(spec_path)
    configs = [c for c in enumerate_configs(spec) if c["generator"].get("theta") == 50
               and c["generator"]["epsilon_split"] == 0.25][:1]
    narrowed = tmp / f"{name}-narrowed.yaml"
    narrowed.write_text(yaml.safe_dump({"format": "dpbundle-narrowed/1", "configurations": [
        {"id": config_id(c), "config": c, "acceptance": 0.5, "wilson_low": 0.2, "wilson_high": 0.8,
         "runs": 10} for c in configs]}, sort_keys=False))
    out = tmp / name
    res = runner.invoke(app, ["release", str(spec_path), str(data), "--out", str(out), "--key",
                              str(tmp / "k.key"), "--ledger", str(tmp / f"{name}-ledger.jsonl"),
                              "--transcript", str(tmp / f"{name}.transcript.jsonl"),
                              "--configs", str(narrowed), "--stop-probability", "0"])
    # stop probability 0: a list with sweep estimates defaults to 'auto', whose stop draw ends
    # about one run in twenty with nothing released; these tests are about the records policy
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def bundles(registries):
    tmp, r, r2 = registries
    return {
        "public_R": _release(tmp, r, {"policy": "declared_public"}, "public_R"),
        "public_R2": _release(tmp, r2, {"policy": "declared_public"}, "public_R2"),
        "dp_R": _release(tmp, r, {"policy": "dp_count", "epsilon": 1.0}, "dp_R"),
        "tmp": tmp,
    }


def _json(bundle: Path, name: str) -> dict:
    return json.loads((bundle / name).read_text())


@pytest.mark.slow
def test_declared_public_states_the_narrower_guarantee(bundles):
    a, b = _json(bundles["public_R"], "manifest.json"), _json(bundles["public_R2"], "manifest.json")
    assert a["n"] - b["n"] == 1  # the exact count moves with the record: no epsilon covers it
    budget = _json(bundles["public_R"], "budget.json")
    assert budget["records"]["policy"] == "declared_public" and budget["records"]["epsilon"] == 0
    assert "same number of plausible records" in budget["neighbouring"]
    assert "published exactly" in budget["records"]["statement"]
    assert dec(budget["total_epsilon"]) == 2 * (4 + dec(budget["evaluation"]["epsilon"]))
    html = (bundles["public_R"] / "README.html").read_text()
    assert "same number of plausible records" in html
    assert "published exactly" in html
    assert "differentially private count" not in html


@pytest.mark.slow
def test_dp_count_releases_a_dp_count_in_the_budget(bundles):
    bundle = bundles["dp_R"]
    budget = _json(bundle, "budget.json")
    n = _json(bundle, "manifest.json")["n"]
    rec = budget["records"]
    assert rec["policy"] == "dp_count" and rec["epsilon"] == 1.0 and rec["sensitivity"] == 1
    assert rec["released_n"] == n
    assert dec(budget["total_epsilon"]) == 1 + 2 * (4 + dec(budget["evaluation"]["epsilon"]))
    assert abs(budget["total_epsilon_opendp"] - budget["total_epsilon"]) < 1e-9
    transcript = (bundles["tmp"] / "dp_R.transcript.jsonl").read_text().splitlines()
    first = [json.loads(x) for x in transcript[1:3]]
    assert [r["purpose"] for r in first] == [COUNT_PURPOSE, RESIZE_PURPOSE]
    assert first[0]["noisy"] == n or max(first[0]["noisy"], 1) == n
    html = (bundle / "README.html").read_text()
    assert "differentially private count" in html
    assert "even values that the plausibility checks remove" in html
    with open(bundle / "data.csv") as fh:
        assert sum(1 for _ in fh) - 1 == n


@pytest.mark.slow
def test_audit_checks_the_policy_and_the_total(bundles, tmp_path):
    """The audit passes the dp_count bundle, shows its policy, and fails a re-signed budget
    whose total leaves out the count (or claims declared_public)."""
    import shutil

    import audit_fixtures as fx
    from dpbundle.audit.runner import run_audit
    from dpbundle.release.bundle.keys import load_private_key

    key = load_private_key(bundles["tmp"] / "k.key")
    rep = run_audit(bundles["dp_R"], pubkey=bundles["tmp"] / "k.pub")
    assert rep.passed, [(c.check, c.problems) for c in rep.checks if c.failed]
    assert "DP count" in rep.get("budget").detail
    rep = run_audit(bundles["public_R"], pubkey=bundles["tmp"] / "k.pub")
    assert rep.passed and "declared public" in rep.get("budget").detail
    for edit, needle in ((lambda b: b.update(total_epsilon=b["total_epsilon"] - 1.0), "total epsilon"),
                         (lambda b: b["records"].update(policy="declared_public", epsilon=0), "policy"),
                         (lambda b: b["records"].update(released_n=b["records"]["released_n"] + 1),
                          "released_n")):
        d = tmp_path / f"B{needle.replace(' ', '_')}"
        shutil.copytree(bundles["dp_R"], d)
        doc = json.loads((d / "budget.json").read_text())
        edit(doc)
        (d / "budget.json").write_text(json.dumps(doc, indent=2))
        fx.sign_bundle(d, key)
        rep = run_audit(d, pubkey=bundles["tmp"] / "k.pub")
        assert rep.get("integrity").result == "pass", rep.get("integrity").problems
        assert rep.get("budget").result == "fail"
        assert any(needle in p for p in rep.get("budget").problems), rep.get("budget").problems


@pytest.mark.slow
def test_enclave_replay_of_the_count_on_a_neighbouring_registry_fails_without_numbers(bundles, registries):
    """Replaying the dp_count bundle against R' (one record moved across a rule) diverges at the
    count record; the failure names the record, not the private count."""
    from dpbundle.audit.runner import run_audit

    tmp, r, r2 = registries
    tr = tmp / "dp_R.transcript.jsonl"
    ok = run_audit(bundles["dp_R"], pubkey=tmp / "k.pub", transcript=tr, data=r)
    assert ok.get("replay").result == "pass", ok.get("replay").problems
    rep = run_audit(bundles["dp_R"], pubkey=tmp / "k.pub", transcript=tr, data=r2)
    replay = rep.get("replay")
    assert replay.result == "fail"
    text = " ".join(replay.problems)
    assert "count of records" in text
    true_n = json.loads(tr.read_text().splitlines()[1])["true"]
    for v in (true_n, true_n - 1):
        assert str(v) not in text
