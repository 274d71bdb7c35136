"""Rich results (issue 26): short reprs and escaped notebook views of a released bundle, an
audit report and a sweep result; AuditReport.exit_code is a property."""
from __future__ import annotations

import json
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx
from dpbundle.audit import open_bundle
from dpbundle.audit.report import FAIL, PASS, SKIP, AuditReport, CheckResult
from dpbundle.audit.runner import run_audit
from dpbundle.release.sweep.request import SweepResult

HOSTILE = "<script>alert('x')</script> & <b>bold</b>"


class _Tags(HTMLParser):
    """Collects start tags and text; fails on nothing (html.parser is lenient) but lets the
    tests check that no hostile tag came through."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> _Tags:
    assert isinstance(page, str) and page
    p = _Tags()
    p.feed(page)
    p.close()
    return p


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("rich") / "bundle"
    key = fx.build_bundle(d)
    pub = d.parent / "publisher.pub"
    pub.write_bytes(fx.pub_pem(key))
    return d, pub


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A real release of the built-in example registry (a fast one-configuration spec)."""
    from dpbundle.release.cli.main import app

    runner = CliRunner()
    tmp = tmp_path_factory.mktemp("rich-real")
    spec = fx.fast_spec(tmp / "fast.yaml")
    data = fx.example_registry(tmp / "registry.csv", 4000, 3)
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"),
                              "--key", str(tmp / "k.key"), "--ledger", str(tmp / "ledger.jsonl")])
    assert res.exit_code == 0, res.output
    return tmp / "B", tmp / "k.pub"


# --------------------------------------------------------------------------- ReleasedBundle

def test_bundle_repr_is_short_and_says_what_it_is(released):
    d, _ = released
    with open_bundle(d) as b:
        text = repr(b)
        assert len(text) < 1000, len(text)
        title = json.loads((d / "datapackage.json").read_text())["title"]
        assert text.startswith(f"<ReleasedBundle {title!r} {b.n:,} rows x {len(b.fields)} columns")
        assert "epsilon" in text and "criteria passed" in text


def test_bundle_html_shows_title_size_metrics_and_budget(built):
    d, _ = built
    with open_bundle(d) as b:
        page = b._repr_html_()
        parsed = parse(page)
        text = " ".join(parsed.text)
        assert "table" in parsed.tags
        assert b.datapackage["title"] in text and f"{b.n:,}" in text
        for f in b.fields:
            assert f["name"] in text
        for cid in b.metrics["id"]:
            assert cid in text
        assert "pass" in text and "total_epsilon" in text
        assert "threshold" in text and "DP value" in text


def test_hostile_title_is_escaped(built, tmp_path):
    import shutil

    d = tmp_path / "hostile"
    shutil.copytree(built[0], d)
    doc = json.loads((d / "datapackage.json").read_text())
    doc["title"] = HOSTILE + "x" * 5000 + "\x1b[2J"
    doc["resources"][0]["schema"]["fields"][0]["name"] = "<img src=x onerror=alert(1)>"
    (d / "datapackage.json").write_text(json.dumps(doc))
    metrics = json.loads((d / "metrics.json").read_text())
    metrics["criteria"][0]["id"] = "<script>bad()</script>"
    (d / "metrics.json").write_text(json.dumps(metrics))
    with open_bundle(d) as b:
        text = repr(b)
        assert len(text) < 1000 and "\x1b" not in text
        page = b._repr_html_()
        tags = parse(page).tags
        assert "script" not in tags and "img" not in tags and "b" not in tags
        assert "&lt;script&gt;" in page and "<script>" not in page


def test_bundle_repr_never_raises(built, tmp_path):
    import shutil

    d = tmp_path / "broken"
    shutil.copytree(built[0], d)
    (d / "metrics.json").write_text("[1, 2")
    (d / "budget.json").write_text("{\"total_epsilon\": \"<b>\"}")
    with open_bundle(d) as b:
        assert repr(b).startswith("<ReleasedBundle ")
        parse(b._repr_html_())
    assert repr(b).startswith("<ReleasedBundle ")     # closed


# --------------------------------------------------------------------------- AuditReport

def test_audit_report_repr_html_and_exit_code(built):
    d, pub = built
    rep = run_audit(d, pubkey=pub)
    assert rep.verdict == "verified" and rep.exit_code == 0 and isinstance(rep.exit_code, int)
    text = repr(rep)
    assert len(text) < 1000 and "'verified'" in text and "0 failed" in text
    page = rep._repr_html_()
    parsed = parse(page)
    shown = " ".join(parsed.text)
    assert rep.verdict_text() in shown
    for c in rep.checks:
        assert c.check in shown
    assert "table" in parsed.tags
    unpinned = run_audit(d)
    assert unpinned.exit_code == 3 and "NOT VERIFIED" in unpinned._repr_html_()


def _report(private: bool = False) -> AuditReport:
    checks = [CheckResult("integrity"), CheckResult("schema", result=SKIP, detail="skipped here"),
              CheckResult("budget")]
    checks[2].fail(HOSTILE)
    checks[0].warn("<i>warned</i>")
    for i in range(200):
        checks[2].fail(f"problem {i} " + "y" * 900)
    return AuditReport(bundle=HOSTILE, checks=checks, key_pinned=True, private=private)


def test_audit_report_escapes_and_stays_short():
    rep = _report()
    assert rep.verdict == "failed" and rep.exit_code == 1
    assert len(repr(rep)) < 1000 and "1 failed" in repr(rep)
    page = rep._repr_html_()
    tags = parse(page).tags
    assert "script" not in tags and "i" not in tags and "b" not in tags
    assert "&lt;script&gt;" in page and "FAIL" in page
    assert rep.get("budget").summary()[:200] in " ".join(parse(page).text)


def test_private_report_says_private_and_only_the_console_texts():
    rep = _report(private=True)
    assert repr(rep).startswith("<PRIVATE AuditReport")
    page = rep._repr_html_()
    assert "PRIVATE" in page and "keep inside the enclave" in page
    # the facts of a check (which may hold private numbers) are never shown
    rep.get("integrity").facts["true_value"] = "SECRET-12345"
    assert "SECRET-12345" not in rep._repr_html_() and "SECRET-12345" not in repr(rep)


@pytest.mark.parametrize("results,pinned,code", [
    ((PASS, PASS), True, 0), ((PASS, FAIL), True, 1), ((PASS, SKIP), False, 3), ((FAIL,), False, 1)])
def test_exit_code_is_a_property(results, pinned, code):
    rep = AuditReport(bundle="b", checks=[CheckResult(f"c{i}", result=r) for i, r in enumerate(results)],
                      key_pinned=pinned)
    assert rep.exit_code == code
    assert isinstance(type(rep).__dict__["exit_code"], property)


# --------------------------------------------------------------------------- SweepResult

def _config(i: int, runs: int, accepted: int) -> dict:
    acc = accepted / runs if runs else None
    return {"config_id": f"cfg{i:03d}<x>", "runs": runs, "accepted": accepted, "errors": 0,
            "acceptance": acc, "wilson_low": None if acc is None else max(0.0, acc - 0.2),
            "wilson_high": None if acc is None else min(1.0, acc + 0.2),
            "decision": "above" if acc and acc >= 0.5 else "below",
            "expected_iterations": None if not acc else 1 / acc,
            "expected_iterations_low": None, "expected_iterations_high": None,
            "median_seconds": 0.1, "narrowed": bool(acc and acc >= 0.5),
            "criteria_pass_rate": {"alpha": acc or 0.0, "beta": 1.0},
            "dimensions": {"columns.mother_age": "coarse"}}


@pytest.fixture
def sweep_result(tmp_path):
    rows = [_config(i, 4, i % 5) for i in range(40)] + [_config(99, 0, 0)]
    summary = {"configurations_swept": len(rows), "runs": sum(r["runs"] for r in rows),
               "accepted": sum(r["accepted"] for r in rows), "acceptance": 0.45, "min_acceptance": 0.5,
               "narrowed": {"count": sum(r["narrowed"] for r in rows)}, "configurations": rows}
    return SweepResult(out=tmp_path / "S", summary=summary, new_runs=160, seconds=12.5,
                       backend="local", workers=2)


def test_sweep_result_repr_and_acceptance(sweep_result):
    text = repr(sweep_result)
    assert len(text) < 1000 and "41 configuration(s)" in text and "160 new" in text
    table = sweep_result.acceptance
    assert isinstance(table, pd.DataFrame) and len(table) == 41
    assert table.index.name == "config_id"
    assert list(table["acceptance"].iloc[:8]) == [1.0] * 8         # top configurations first
    assert pd.isna(table["acceptance"].iloc[-1])                   # never run: last
    assert {"runs", "accepted", "wilson_low", "wilson_high", "decision", "narrowed",
            "pass_rate_alpha", "pass_rate_beta"} <= set(table.columns)


def test_sweep_result_html(sweep_result):
    page = sweep_result._repr_html_()
    parsed = parse(page)
    assert "svg" in parsed.tags and "rect" in parsed.tags
    assert "x" not in parsed.tags and "&lt;x&gt;" in page
    assert parsed.tags.count("tr") == 1 + 15                       # header + the top 15
    assert "26 more" in page and "4/4" in page
