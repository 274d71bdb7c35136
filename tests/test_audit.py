"""dpbundle audit: a fresh bundle passes every check; CLI, reports, label parsing, thresholds;
end-to-end on a real `dpbundle release` with the enclave replay (slow)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.labels import label_number  # noqa: E402
from dpbundle.audit.report import CHECK_NAMES  # noqa: E402
from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.audit.schema_util import validate  # noqa: E402
from dpbundle.audit.sensitivity import derive_threshold, ratio_delta  # noqa: E402


def _app():
    from dpbundle.audit.cli import cli_audit

    app = typer.Typer()
    app.command("audit")(cli_audit)
    return app


def cli(*args):
    return CliRunner().invoke(_app(), [str(a) for a in args])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    d = tmp_path_factory.mktemp("b") / "bundle"
    key = fx.build_bundle(d)
    pub = d.parent / "publisher.pub"
    pub.write_bytes(fx.pub_pem(key))
    return d, pub


def test_fresh_bundle_passes_every_check(bundle):
    d, pub = bundle
    rep = run_audit(d, pubkey=pub)
    assert [c.check for c in rep.checks] == list(CHECK_NAMES)
    for c in rep.checks:
        assert c.result in ("pass", "skipped"), (c.check, c.problems)
    assert rep.get("replay").result == "skipped"
    assert rep.passed and rep.exit_code == 0
    assert rep.key_pinned
    assert not rep.get("integrity").warnings


def test_key_not_pinned_is_a_warning(bundle):
    d, _ = bundle
    rep = run_audit(d)
    integ = rep.get("integrity")
    assert integ.result == "pass"
    assert any("key not pinned" in w for w in integ.warnings)
    assert "key not pinned" in integ.detail
    assert rep.to_dict()["key_pinned"] is False


def test_zip_bundle_passes(bundle, tmp_path):
    d, pub = bundle
    z = tmp_path / "bundle.zip"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(d.iterdir()):
            zf.write(p, p.name)
    rep = run_audit(z, pubkey=pub)
    assert rep.passed, [(c.check, c.problems) for c in rep.checks if c.failed]
    # a zip of the directory itself (one top-level folder) works too
    z2 = tmp_path / "bundle2.zip"
    with zipfile.ZipFile(z2, "w") as zf:
        for p in sorted(d.iterdir()):
            zf.write(p, f"bundle/{p.name}")
    assert run_audit(z2, pubkey=pub).passed


def test_cli_exit_codes_and_reports(bundle, tmp_path):
    d, pub = bundle
    rj, rh = tmp_path / "r.json", tmp_path / "r.html"
    res = cli(d, "--pubkey", pub, "--json", rj, "--html", rh)
    assert res.exit_code == 0, res.output
    assert "all checks passed" in res.output
    doc = json.loads(rj.read_text())
    assert validate(doc, "audit-report") == []
    assert doc["passed"] is True and doc["key_pinned"] is True
    assert [c["check"] for c in doc["checks"]] == list(CHECK_NAMES)
    assert "integrity" in rh.read_text()
    res = cli(d)                                      # not pinned: not verified (exit 3)
    assert res.exit_code == 3
    assert "key not pinned" in res.output
    assert "all checks passed" not in res.output
    res = cli(tmp_path / "nope")
    assert res.exit_code == 2
    bad = tmp_path / "junk.txt"
    bad.write_text("hello")
    assert cli(bad).exit_code == 2
    assert cli(d, "--pubkey", bad).exit_code == 2
    assert cli(d, "--transcript", bad).exit_code == 2      # --data missing


def test_cli_docstring_ends_with_example():
    from dpbundle.audit.cli import cli_audit

    paras = [p.strip() for p in cli_audit.__doc__.strip().split("\n\n")]
    examples = paras[paras.index("Examples:") + 1:]
    assert examples and all(e.startswith("dpbundle audit ") for e in examples)
    for e in examples:                     # copyable: short lines, continued with a backslash
        lines = [line.strip() for line in e.splitlines()]
        assert all(len(line) <= 76 for line in lines), e
        assert all(line.endswith(" \\") for line in lines[:-1]), e


def test_failed_check_exit_1(bundle, tmp_path):
    d, pub = bundle
    t = tmp_path / "t"
    shutil.copytree(d, t)
    (t / "extra.txt").write_text("x")
    res = cli(t, "--pubkey", pub)
    assert res.exit_code == 1
    assert "FAIL" in res.output


@pytest.mark.parametrize("label,num", [("<18", 18), ("18-19", 18.5), ("44<", 44), ("7", 7),
                                       ("1500-1599", 1549.5), ("4499<", 4499), ("<1500", 1500)])
def test_label_numbers(label, num):
    assert label_number(label) == num


def test_label_number_rejects_words():
    with pytest.raises(ValueError):
        label_number("M")


def test_derived_ratio_threshold_is_1_41():
    spec = fx.load_spec()
    entry = next(e for e in spec["acceptance"] if e["type"] == "smoothed_ratio")
    thr, stake, facts = derive_threshold(entry)
    assert stake == 2.0
    assert round(thr, 2) == 1.41
    assert facts["assumed_sensitivity"] == pytest.approx(ratio_delta(50, 2.0))


def test_view_labels_match_spec_rules(bundle):
    from dpbundle.audit.labels import build_view

    d, _ = bundle
    view = build_view(json.loads((d / "spec.json").read_text()))
    for col in view.columns:
        assert list(col.labels) == fx.LABELS[col.name]
        assert list(col.numbers) == [float(x) for x in fx.NUMBERS[col.name]]
    assert view.min_count == 2


# --------------------------------------------------------------------- end to end (real release)

SAMPLE_10K = Path(__file__).resolve().parents[1] / "examples" / "data" / "nvss2019_singleton_10k.csv"
LOOSE = {"kway_marginals": 0.5, "smoothed_ratio": 10, "conditional_means": 1e6,
         "regression_coefficients": 1e12, "regression_mae_difference": 1e9, "faithfulness": 10}


def _fast_spec(path: Path) -> Path:
    """The births spec with one configuration and loose thresholds: the first iteration passes."""
    import yaml

    spec = fx.load_spec()
    for col in spec["columns"]:
        col["alternatives"] = col["alternatives"][:1]
    spec["generators"] = [{"type": "privbayes", "flavour": "theta",
                           "grid": {"epsilon_split": [0.5], "theta": [4]}}]
    spec["projection"] = {"min_count": [2]}
    for e in spec["acceptance"]:
        e["threshold"] = LOOSE[e["type"]]
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _run(args: list[str], cwd: Path, timeout: int = 900):
    exe = Path(sys.executable).parent / "dpbundle"
    try:
        return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.skip(f"dpbundle {args[0]} took too long")


@pytest.fixture(scope="module")
def real_release(tmp_path_factory):
    """A real `dpbundle release` of the 10k public sample with a fast spec (skips if unusable)."""
    if not SAMPLE_10K.exists():
        pytest.skip("the 10k sample is not available")
    tmp = tmp_path_factory.mktemp("real")
    spec = _fast_spec(tmp / "fast.yaml")
    p = _run(["keygen", "--out", str(tmp / "k")], tmp)
    if p.returncode != 0:
        pytest.skip(f"dpbundle keygen is not usable: {p.stderr[-300:]}")
    p = _run(["release", str(spec), str(SAMPLE_10K), "--out", str(tmp / "B"), "--key", str(tmp / "k.key"),
              "--ledger", str(tmp / "ledger.jsonl"), "--transcript", str(tmp / "T.jsonl"), "--zip"], tmp)
    if p.returncode != 0 or not (tmp / "B" / "manifest.json").exists():
        pytest.skip(f"dpbundle release is not usable yet (exit {p.returncode}): {p.stderr[-500:]}")
    return tmp


@pytest.mark.slow
def test_real_release_passes_public_checks(real_release):
    tmp = real_release
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub")
    failed = [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
    assert not failed, failed
    assert rep.get("replay").result == "skipped"
    assert (tmp / "B.zip").exists(), "release --zip writes OUT.zip"
    rep = run_audit(tmp / "B.zip", pubkey=tmp / "k.pub")
    assert rep.passed, [(c.check, c.problems[:3]) for c in rep.checks if c.failed]
    res = cli(tmp / "B", "--pubkey", tmp / "k.pub")
    assert res.exit_code == 0, res.output


@pytest.mark.slow
def test_real_release_replay(real_release):
    tmp = real_release
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub", transcript=tmp / "T.jsonl", data=SAMPLE_10K)
    replay = rep.get("replay")
    assert replay.result == "pass", replay.problems
    assert rep.passed


@pytest.mark.slow
def test_real_release_replay_fails_on_one_changed_record(real_release, tmp_path):
    tmp = real_release
    lines = SAMPLE_10K.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    iw = header.index("birth_weight")
    for i in range(1, len(lines)):
        cells = lines[i].rstrip("\n").split(",")
        if cells[iw].isdigit() and 2600 <= int(cells[iw]) <= 3400:
            cells[iw] = str(int(cells[iw]) + 300)       # one record, still plausible
            lines[i] = ",".join(cells) + "\n"
            break
    changed = tmp_path / "changed.csv"
    changed.write_text("".join(lines))
    rep = run_audit(tmp / "B", pubkey=tmp / "k.pub", transcript=tmp / "T.jsonl", data=changed)
    assert rep.get("replay").result == "fail"
    assert rep.exit_code == 1


@pytest.mark.slow
def test_real_release_replay_fails_on_edited_transcript(real_release, tmp_path):
    tmp = real_release
    lines = (tmp / "T.jsonl").read_bytes().split(b"\n")
    rec = json.loads(lines[3])
    rec["tampered"] = True
    lines[3] = json.dumps(rec, sort_keys=True, separators=(",", ":")).encode()
    t2 = tmp_path / "T2.jsonl"
    t2.write_bytes(b"\n".join(lines))
    rep = run_audit(tmp / "B", transcript=t2, data=SAMPLE_10K)
    assert rep.get("replay").result == "fail"
    assert "commitment" in rep.get("replay").problems[0]


def test_html_report_escapes(bundle, tmp_path):
    d, pub = bundle
    rep = run_audit(d, pubkey=pub)
    rep.checks[0].problems.append("<script>alert(1)</script>")
    html = rep.to_html()
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert "all checks passed" in html or "FAILED" in html


# --------------------------------------------------------------------- synthetic constraints on bins

@pytest.mark.parametrize("column,label,op,value,expected", [
    ("gestation_week", "<29", "<", 29, True),       # every week of "<29" is below 29
    ("gestation_week", "29-31", "<", 29, False),
    ("gestation_week", "29-31", "<", 32, True),
    ("mother_age", "20-24", "<", 23, False),        # 23 and 24 are not below 23
    ("mother_age", "18-19", "<", 20, True),
    ("mother_age", "<18", "<", 18, True),
    ("parity", "7-10", ">", 6, True),
    ("parity", "4-6", ">", 3, True),
    ("parity", "2-3", ">", 3, False),
    ("parity", "10<", ">", 6, True),
    ("birth_weight", "3000-3099", ">", 2999, True),
    ("birth_weight", "2900-2999", ">", 2999, False),
    ("birth_weight", "4499<", ">=", 4500, True),
    ("parity", "1", "==", 1, True),
    ("parity", "2-3", "==", 2, False),
    ("parity", "2-3", "!=", 5, True),
    ("parity", "2-3", "!=", 3, False),
    ("parity", "2-3", "<=", 3, True),
    ("birth_sex", "F", "==", 1, True),
    ("birth_sex", "M", "!=", 1, True),
])
def test_bin_condition_whole_bins(bundle, column, label, op, value, expected):
    from dpbundle.audit.constraints import bin_condition
    from dpbundle.audit.labels import build_view

    d, _ = bundle
    view = build_view(json.loads((d / "spec.json").read_text()))
    col = view.columns[view.index(column)]
    k = col.labels.index(label)
    assert bool(bin_condition(col, op, value)[k]) is expected


# --------------------------------------------------------------------- independence (THE RULE)

def test_audit_never_imports_release(bundle):
    """audit/ is a second implementation: it must not import the code in release/ (only the
    shared schemas). Checked statically and at run time in a fresh interpreter."""
    import ast

    audit_dir = Path(__file__).resolve().parents[1] / "audit"
    for f in audit_dir.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            mods = []
            if isinstance(node, ast.Import):
                mods = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                mods = [("." * node.level) + (node.module or "")]
            for m in mods:
                assert "release" not in m.split("."), f"{f.name} imports {m}"
                assert not m.startswith(".."), f"{f.name} imports {m}"
    d, pub = bundle
    code = ("import sys; from dpbundle.audit.runner import run_audit; "
            f"r = run_audit({str(d)!r}, pubkey={str(pub)!r}); assert r.passed; "
            "bad = [m for m in sys.modules if m.startswith('dpbundle.release') "
            "and m != 'dpbundle.release.common.jsonschemas']; print(bad); assert not bad, bad")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


def test_sensitivities_agree_with_the_criteria(bundle):
    """Cross-check (tests only): the audit's recomputation equals each criterion's own
    sensitivity and threshold on the same public data."""
    from dpbundle.audit.labels import build_view
    from dpbundle.audit.sensitivity import recompute_sensitivity
    from dpbundle.mechanisms.coding import Coded, ColumnCoding
    from dpbundle.mechanisms.criteria import EvalContext, make_criterion

    d, _ = bundle
    view = build_view(json.loads((d / "spec.json").read_text()))
    codes = fx.codes_of(fx.make_rows())
    cols = tuple(ColumnCoding(c.name, c.labels, c.numbers, c.ordered, c.lower, c.upper)
                 for c in view.columns)
    coded = Coded(codes=codes, columns=cols)
    ctx = EvalContext(real=coded, synth=coded, spec=view.spec)
    for entry in view.spec["acceptance"]:
        crit = make_criterion(entry)
        theirs, inputs = crit.sensitivity(ctx)
        ours, _ = recompute_sensitivity(entry, {"sensitivity_inputs": inputs}, view, codes, len(codes))
        assert ours == pytest.approx(theirs, rel=1e-12), entry["id"]
        thr, stake, _ = crit.threshold()
        assert derive_threshold(entry)[0] == pytest.approx(thr, rel=1e-12)
