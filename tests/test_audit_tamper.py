"""Tamper suite: every modification of a valid bundle is caught by the right named check."""
from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402

FILES = ["data.csv", "metrics.csv", "metrics.json", "budget.json", "spec.json", "datapackage.json",
         "README.pdf", "README.html", "manifest.json", "manifest.sig"]


from audit_fixtures import copy, original  # noqa: E402,F401  (shared fixtures: a signed bundle and a fresh copy)


def failed(rep) -> set[str]:
    return {c.check for c in rep.checks if c.failed}


def read_rows(d: Path) -> list[list[str]]:
    return list(csv.reader(io.StringIO((d / "data.csv").read_text())))


def write_rows(d: Path, rows: list[list[str]]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    (d / "data.csv").write_text(buf.getvalue())


def test_untampered_passes(copy):
    d, _, pub = copy
    assert failed(run_audit(d, pubkey=pub)) == set()


@pytest.mark.parametrize("name", FILES)
def test_one_byte_changed_in_each_file(copy, name):
    d, _, pub = copy
    p = d / name
    data = bytearray(p.read_bytes())
    i = len(data) // 2
    data[i] ^= 0x01
    p.write_bytes(bytes(data))
    rep = run_audit(d, pubkey=pub)
    assert "integrity" in failed(rep), [(c.check, c.problems) for c in rep.checks]
    integ = rep.get("integrity")
    want = "manifest" if name.startswith("manifest") else name
    assert any(want in p for p in integ.problems), integ.problems


def test_signature_from_another_key(copy):
    d, _, pub = copy
    other = fx.new_key()
    fx.sign_bundle(d, other)              # a complete, self-consistent manifest under another key
    rep = run_audit(d, pubkey=pub)        # pinned to the publisher's key
    assert "integrity" in failed(rep)
    assert any("not valid" in p for p in rep.get("integrity").problems)
    # without pinning the bundle is self-consistent: the report says the key was not pinned
    rep = run_audit(d)
    assert rep.get("integrity").result == "pass"
    assert any("key not pinned" in w for w in rep.get("integrity").warnings)


def test_signature_replaced_keeping_the_manifest_key(copy):
    d, _, _ = copy
    other = fx.new_key()
    (d / "manifest.sig").write_bytes(other.sign((d / "manifest.json").read_bytes()))
    rep = run_audit(d)                    # even unpinned: the manifest's own key rejects it
    assert "integrity" in failed(rep)


def _edit_metric(d: Path, key, field: str, factor: float) -> None:
    doc = json.loads((d / "metrics.json").read_text())
    row = next(r for r in doc["criteria"] if r["id"] == "mean_weight")
    row[field] = row[field] * factor
    (d / "metrics.json").write_text(json.dumps(doc, indent=2))
    fx.sign_bundle(d, key)                # re-hashed and re-signed by the same key


@pytest.mark.parametrize("field,check", [("epsilon", "budget"), ("sensitivity", "budget"),
                                         ("dp_value", "documentation")])
def test_metric_edited_and_resigned(copy, field, check):
    d, key, pub = copy
    _edit_metric(d, key, field, 0.5)
    rep = run_audit(d, pubkey=pub)
    assert rep.get("integrity").result == "pass"
    assert check in failed(rep), [(c.check, c.problems) for c in rep.checks]


def test_noise_scale_edited_and_resigned(copy):
    d, key, pub = copy
    _edit_metric(d, key, "noise_scale", 0.999)
    rep = run_audit(d, pubkey=pub)
    assert "budget" in failed(rep)


def test_dp_value_above_threshold_fails_acceptance(copy):
    d, key, pub = copy
    doc = json.loads((d / "metrics.json").read_text())
    doc["criteria"][0]["dp_value"] = doc["criteria"][0]["threshold"] * 2
    (d / "metrics.json").write_text(json.dumps(doc))
    fx.sign_bundle(d, key)
    assert "acceptance" in failed(run_audit(d, pubkey=pub))


def test_budget_total_edited(copy):
    d, key, pub = copy
    doc = json.loads((d / "budget.json").read_text())
    doc["total_epsilon"] = 5.0
    doc["total_epsilon_opendp"] = 5.0
    (d / "budget.json").write_text(json.dumps(doc))
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "budget" in failed(rep)
    assert "total epsilon" in " ".join(rep.get("budget").problems)


def test_row_deleted(copy):
    d, key, pub = copy
    rows = read_rows(d)
    write_rows(d, rows[:-1])
    fx.sign_bundle(d, key)
    assert "size" in failed(run_audit(d, pubkey=pub))


def test_row_duplicated(copy):
    d, key, pub = copy
    rows = read_rows(d)
    write_rows(d, rows + [rows[5]])
    fx.sign_bundle(d, key)
    assert "size" in failed(run_audit(d, pubkey=pub))


def test_unique_row_injected(copy):
    d, key, pub = copy
    rows = read_rows(d)
    seen = {tuple(r) for r in rows[1:]}
    # a valid record not in the table, replacing one row (n unchanged)
    new = ["1", "30-34", "1", "37-41", "F", "3000-3099"]
    k = 0
    while tuple(new) in seen:
        k += 1
        new[5] = f"{3000 + 100 * (k % 10)}-{3099 + 100 * (k % 10)}"
        new[0] = str(1 + k // 10)
    counts = {}
    for r in rows[1:]:
        counts[tuple(r)] = counts.get(tuple(r), 0) + 1
    i = next(i for i, r in enumerate(rows) if i and counts[tuple(r)] >= 3)
    rows[i] = new
    write_rows(d, rows)
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "face_privacy" in failed(rep)
    assert "size" not in failed(rep)
    assert any("unique" in p for p in rep.get("face_privacy").problems)


def test_constraint_violating_rows(copy):
    d, key, pub = copy
    rows = read_rows(d)
    counts = {}
    for r in rows[1:]:
        counts[tuple(r)] = counts.get(tuple(r), 0) + 1
    bad = ["3", "<18", "7-10", "37-41", "M", "3000-3099"]      # mother under 18 with parity 7-10
    idx = [i for i, r in enumerate(rows) if i and counts[tuple(r)] >= 4][:2]
    if len(idx) < 2:
        t = next(t for t, c in counts.items() if c >= 4)
        idx = [i for i, r in enumerate(rows) if i and tuple(r) == t][:2]
    for i in idx:
        rows[i] = list(bad)
    write_rows(d, rows)
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "constraints" in failed(rep)
    assert "face_privacy" not in failed(rep)


def test_undeclared_label(copy):
    d, key, pub = copy
    rows = read_rows(d)
    rows[3][0] = "13"
    write_rows(d, rows)
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "schema" in failed(rep)
    assert any("undeclared label '13'" in p for p in rep.get("schema").problems)


def test_empty_cell(copy):
    d, key, pub = copy
    rows = read_rows(d)
    rows[3][2] = ""
    write_rows(d, rows)
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert any("empty cell" in p for p in rep.get("schema").problems)


def test_wrong_header(copy):
    d, key, pub = copy
    rows = read_rows(d)
    rows[0][1], rows[0][2] = rows[0][2], rows[0][1]
    write_rows(d, rows)
    fx.sign_bundle(d, key)
    assert "schema" in failed(run_audit(d, pubkey=pub))


def test_extra_file(copy):
    d, _, pub = copy
    (d / "notes.txt").write_text("not in the manifest")
    rep = run_audit(d, pubkey=pub)
    assert "integrity" in failed(rep)
    assert any("notes.txt" in p and "not listed" in p for p in rep.get("integrity").problems)


def test_missing_file(copy):
    d, _, pub = copy
    (d / "README.html").unlink()
    rep = run_audit(d, pubkey=pub)
    assert any("README.html" in p and "missing" in p for p in rep.get("integrity").problems)


@pytest.mark.parametrize("bad", ["../outside.txt", "/etc/passwd", "a/../../x", "..", "a\\..\\b"])
def test_path_traversal_name_in_manifest(copy, bad):
    d, key, pub = copy
    fx.sign_bundle(d, key)
    m = json.loads((d / "manifest.json").read_text())
    m["files"].append({"path": bad, "sha256": "0" * 64, "size": 1})
    mb = json.dumps(m).encode()
    (d / "manifest.json").write_bytes(mb)
    (d / "manifest.sig").write_bytes(key.sign(mb))
    rep = run_audit(d, pubkey=pub)
    assert "integrity" in failed(rep)
    assert any("unsafe name" in p for p in rep.get("integrity").problems)


def test_datapackage_disagrees_with_spec(copy):
    d, key, pub = copy
    dp = json.loads((d / "datapackage.json").read_text())
    dp["resources"][0]["schema"]["fields"][1]["constraints"]["enum"].append("99")
    (d / "datapackage.json").write_text(json.dumps(dp))
    fx.sign_bundle(d, key)
    assert "schema" in failed(run_audit(d, pubkey=pub))


def test_spec_min_count_raised(copy):
    d, key, pub = copy
    s = json.loads((d / "spec.json").read_text())
    s["configuration"]["projection"]["min_count"] = 5
    (d / "spec.json").write_text(json.dumps(s))
    fx.sign_bundle(d, key)
    assert "face_privacy" in failed(run_audit(d, pubkey=pub))


def test_schema_violation_in_json(copy):
    d, key, pub = copy
    b = json.loads((d / "budget.json").read_text())
    b["attempts"] = 3                                # unknown field (and would leak)
    (d / "budget.json").write_text(json.dumps(b))
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "schema" in failed(rep)


def test_metrics_csv_edited(copy):
    d, key, pub = copy
    text = (d / "metrics.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[1] = "0.123456"
    text[1] = ",".join(cells)
    (d / "metrics.csv").write_text("\n".join(text) + "\n")
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert "documentation" in failed(rep)
    assert any("metrics.csv" in p for p in rep.get("documentation").problems)


def test_datasheet_total_epsilon_wrong(copy):
    d, key, pub = copy
    metrics = json.loads((d / "metrics.json").read_text())["criteria"]
    budget = json.loads((d / "budget.json").read_text())
    lines = fx.datasheet_lines(metrics, dict(budget, total_epsilon=4.99))
    (d / "README.pdf").write_bytes(fx.minimal_pdf(lines))
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert any("README.pdf" in p and "total epsilon" in p for p in rep.get("documentation").problems)


@pytest.mark.parametrize("key,value", [("assumed_min_count", 10), ("false_positive", 0.2),
                                       ("assumed_sensitivity", 0.5)])
def test_derived_threshold_inputs_edited(copy, key, value):
    d, k, pub = copy
    doc = json.loads((d / "metrics.json").read_text())
    row = next(r for r in doc["criteria"] if r["id"] == "ratio")
    row["threshold_inputs"][key] = value
    (d / "metrics.json").write_text(json.dumps(doc))
    fx.sign_bundle(d, k)
    rep = run_audit(d, pubkey=pub)
    assert "budget" in failed(rep)
    assert any("threshold_inputs" in p for p in rep.get("budget").problems)


def test_derived_threshold_edited(copy):
    d, k, pub = copy
    doc = json.loads((d / "metrics.json").read_text())
    row = next(r for r in doc["criteria"] if r["id"] == "ratio")
    row["threshold"] = 1.9
    (d / "metrics.json").write_text(json.dumps(doc))
    fx.sign_bundle(d, k)
    rep = run_audit(d, pubkey=pub)
    assert "budget" in failed(rep)


def test_configuration_edited(copy):
    d, key, pub = copy
    s = json.loads((d / "spec.json").read_text())
    s["configuration"]["generator"]["theta"] = 4          # id no longer matches
    (d / "spec.json").write_text(json.dumps(s))
    fx.sign_bundle(d, key)
    rep = run_audit(d, pubkey=pub)
    assert any("configuration_id" in p for p in rep.get("schema").problems)
