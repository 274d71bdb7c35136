"""Issue 35: every ``projection.min_count`` the spec schema allows goes through release and audit.

``min_count: [1]`` validated and released, and then the audit failed its face-privacy check on
the unique rows that a min_count of 1 allows. The audit now checks exactly what the spec
promises: every full record (and every declared quasi-identifier combination) at least
min_count times; for 1, nothing. The schema sets no upper bound (integers >= 1), so the walk is
1, 2 and 3 on a small simulated registry; the expectations are counted from data.csv here, not
taken from the audit.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.audit.bundle_io import open_bundle
from dpbundle.audit.checks_table import check_face_privacy
from dpbundle.audit.context import AuditContext
from dpbundle.audit.runner import run_audit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

WALK = (1, 2, 3)
ROWS = 3000
SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "spec.schema.json"


def multiplicities(data_csv: bytes) -> Counter:
    """How often each full record (row of data.csv, header skipped) appears."""
    rows = list(csv.reader(io.StringIO(data_csv.decode("utf-8"))))
    return Counter(tuple(r) for r in rows[1:])


def test_the_walk_covers_the_schema():
    """The schema's min_count: integers from 1 up to a bound on the work (10^9, the hostile-input
    bound); values above the table's size are refused before any spend (the walk's last case)."""
    prop = json.loads(SCHEMA.read_text(encoding="utf-8"))
    found = _find_min_count(prop)
    assert found is not None, "projection.min_count is no longer in the spec schema"
    assert found["items"]["type"] == "integer" and found["items"]["minimum"] == min(WALK) == 1
    assert found["items"].get("maximum") == 10**9


def _find_min_count(node):
    if isinstance(node, dict):
        props = node.get("properties")
        if isinstance(props, dict) and "min_count" in props and "projection" not in props:
            return props["min_count"]
        for value in node.values():
            hit = _find_min_count(value)
            if hit is not None:
                return hit
    elif isinstance(node, list):
        for value in node:
            hit = _find_min_count(value)
            if hit is not None:
                return hit
    return None


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """One real release per min_count of the walk, on the same simulated registry and key."""
    from dpbundle.release.cli.main import app

    tmp = tmp_path_factory.mktemp("min_count")
    runner = CliRunner()
    data = fx.example_registry(tmp / "registry.csv", ROWS, 5)
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    out = {}
    for k in WALK:
        spec = fx.fast_spec(tmp / f"fast-{k}.yaml")
        doc = yaml.safe_load(spec.read_text(encoding="utf-8"))
        doc["projection"] = {"min_count": [k]}
        spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / f"B{k}"),
                                  "--key", str(tmp / "k.key"), "--ledger", str(tmp / f"ledger-{k}.jsonl"),
                                  "--transcript", str(tmp / f"t{k}.jsonl")])
        assert res.exit_code == 0, res.output
        out[k] = {"dir": tmp / f"B{k}", "transcript": tmp / f"t{k}.jsonl"}
    return {"bundles": out, "data": data, "pub": tmp / "k.pub"}


@pytest.mark.parametrize("k", WALK)
def test_a_released_bundle_passes_its_audit(releases, k):
    bundle = releases["bundles"][k]["dir"]
    configured = json.loads((bundle / "spec.json").read_text(encoding="utf-8"))["configuration"]
    assert configured["projection"]["min_count"] == k              # the release used this value
    counts = multiplicities((bundle / "data.csv").read_bytes())
    assert min(counts.values()) >= k                                 # the promise, counted here
    if k == 1:   # the premise: unique rows, which the old audit failed whatever min_count was
        assert min(counts.values()) == 1

    rep = run_audit(bundle, pubkey=releases["pub"])
    assert [(c.check, c.problems[:2]) for c in rep.checks if c.failed] == []
    assert rep.verdict == "verified"
    face = rep.get("face_privacy")
    assert face.result == "pass"
    assert face.facts["min_count"] == k                              # checked what the spec promises
    assert face.facts["distinct_records"] == len(counts)
    assert face.facts["unique_rows_allowed"] is (k == 1)
    assert ("no unique row" in face.detail) is (k >= 2)             # claims no more than that


@pytest.mark.parametrize("k", WALK)
def test_the_datasheet_claims_what_min_count_promises(releases, k):
    """min_count 1 asks for no face privacy: the datasheet must not say "No unique records"
    (the file has unique rows); 2 and more: it says so, with the number."""
    import html as html_mod
    import re

    page = (releases["bundles"][k]["dir"] / "README.html").read_text(encoding="utf-8")
    text = re.sub(r"\s+", " ", html_mod.unescape(re.sub(r"<[^>]+>", " ", page)))
    assert ("No unique records" in text) is (k >= 2)
    assert ("Unique records allowed" in text) is (k == 1)
    if k >= 2:
        assert f"Every complete record appears at least {k} times" in text
    else:
        assert "asks for no face privacy" in text and "contain no unique record" not in text
    entry = (releases["bundles"][k]["dir"] / "registry-entry.yaml").read_text(encoding="utf-8")
    assert ("no released record is unique" in entry) is (k >= 2)
    assert ("a released record may be unique" in entry) is (k == 1)


def test_the_enclave_replay_of_min_count_1(releases):
    """The projection with min_count 1 (records unchanged) replays byte for byte."""
    one = releases["bundles"][1]
    rep = run_audit(one["dir"], pubkey=releases["pub"], transcript=one["transcript"], data=releases["data"])
    assert [(c.check, c.problems[:2]) for c in rep.checks if c.failed] == []
    assert rep.get("replay").result == "pass"


# -------------------------------------------------------- the check itself, on made-up tables

def _bundle_with(tmp_path: Path, k: int, rows: list[list[str]]) -> Path:
    d = tmp_path / "bundle"
    fx.build_bundle(d, rows=rows)
    spec = json.loads((d / "spec.json").read_text(encoding="utf-8"))
    spec["configuration"]["projection"]["min_count"] = k
    (d / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    return d


def _face_privacy(d: Path):
    with open_bundle(d) as b:
        ctx = AuditContext(b)
        try:
            return check_face_privacy(ctx)
        finally:
            ctx.close()


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("unique", [False, True])
def test_the_check_fails_exactly_below_min_count(tmp_path, k, unique):
    rows = fx.make_rows(n_types=60, seed=k)        # each record 2-4 times
    if unique:
        rows = rows + [rows[0][:5] + [next(lab for lab in fx.LABELS["birth_weight"]
                                          if tuple(rows[0][:5] + [lab]) not in {tuple(r) for r in rows})]]
    counts = multiplicities(fx.csv_bytes(rows))
    assert (min(counts.values()) == 1) is unique
    result = _face_privacy(_bundle_with(tmp_path, k, rows))
    expected_pass = min(counts.values()) >= k
    assert result.failed is not expected_pass, result.problems
    if not expected_pass:
        short = sum(1 for c in counts.values() if c < k)
        assert any(p.startswith(f"{short} distinct full record(s)") and f"min_count = {k}" in p
                   for p in result.problems), result.problems
        assert any("unique" in p for p in result.problems) is unique


def test_the_schemas_largest_min_count_is_refused_before_any_spend(tmp_path):
    """The walk's last value, the schema's maximum (10^9), on a table of a few thousand records
    (n declared public): no attempt could pass, so the release is refused before the ledger
    entry, instead of selecting for ever (with stop probability 0)."""
    from dpbundle.release.cli.main import app

    runner = CliRunner()
    data = fx.example_registry(tmp_path / "registry.csv", ROWS, 5)
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    spec = fx.fast_spec(tmp_path / "fast.yaml")
    doc = yaml.safe_load(spec.read_text(encoding="utf-8"))
    doc["projection"] = {"min_count": [10**9]}
    spec.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp_path / "B"),
                              "--key", str(tmp_path / "k.key"), "--ledger", str(tmp_path / "ledger.jsonl"),
                              "--transcript", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 2, res.output
    assert "projection.min_count" in res.output and "nothing was spent" in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "ledger.jsonl").exists() and not (tmp_path / "B").exists()
