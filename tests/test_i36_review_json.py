"""Issue 36 review (a key holder's forgeries): the bundle's JSON files are read one way by the
audit and possibly another way by their readers.

A JSON object with a key written twice is parsed by Python (and so by the audit and the
datasheet renderer) as its last value; other parsers keep the first or refuse the file, and a
person reading the file sees both. A forger put a false statement first and the true one
second, re-signed, and both audits said VERIFIED while budget.json (or spec.json) showed
"add or remove one record" (or "Real, unaltered records.") to its readers. A number too large
for a float (``1e400``) is read as infinity by Python but is refused as NaN and Infinity are.
Each must fail both audits, naming the file and the rule."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    """A release with its transcript, the registry and the key (tests/test_i36_run_binding.py's)."""
    import audit_fixtures as fx
    from typer.testing import CliRunner

    import test_i36_run_binding as rb
    from dpbundle.release.cli.main import app

    t = tmp_path_factory.mktemp("review-json")
    assert CliRunner().invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    fx.fast_spec(t / "fast.yaml")
    fx.example_registry(t / "registry.csv", 3000, 5)
    first = rb._release(t, "first", t / "ledger.jsonl")
    return dict(first, data=t / "registry.csv", key=t / "k.key", pub=t / "k.pub")


def _insert_before(path: Path, key: str, line: str) -> None:
    """``line`` (a ``"key": value,`` member) written just before the first ``"key"`` of the file."""
    raw = path.read_text("utf-8")
    i = raw.index(f'"{key}"')
    path.write_text(raw[:i] + line + "\n" + raw[i - raw[:i][::-1].index("\n"):i] + raw[i:], "utf-8")


def _verdicts(run: dict, bundle: Path):
    public = run_audit(bundle, pubkey=run["pub"])
    enclave = run_audit(bundle, pubkey=run["pub"], transcript=run["transcript"], data=run["data"])
    return public, enclave


def _problems(report) -> list[str]:
    return [p for c in report.checks if c.failed for p in c.problems]


@pytest.mark.parametrize("file, key, line", [
    ("budget.json", "neighbouring", '"neighbouring": "add or remove one record",'),
    ("spec.json", "description", '"description": "Real, unaltered records.",'),
    ("metrics.json", "criteria", '"criteria": [],'),
], ids=["budget-neighbouring", "spec-description", "metrics-criteria"])
def test_a_key_written_twice_fails_both_audits(run, tmp_path, file, key, line):
    bundle = tmp_path / "B"
    shutil.copytree(run["bundle"], bundle)
    _insert_before(bundle / file, key, line)
    cu.resign(bundle, run["key"])
    public, enclave = _verdicts(run, bundle)
    for report in (public, enclave):
        assert report.verdict == "failed"
        assert any(p.startswith(f"{file}: ") and "appears twice" in p and "duplicate keys" in p
                   for p in _problems(report)), _problems(report)


def test_a_number_too_large_for_a_float_fails(run, tmp_path):
    bundle = tmp_path / "B"
    shutil.copytree(run["bundle"], bundle)
    _insert_before(bundle / "metrics.json", "criteria", '"unused": 1e400,')
    cu.resign(bundle, run["key"])
    report = run_audit(bundle, pubkey=run["pub"])
    assert report.verdict == "failed"
    assert any(p.startswith("metrics.json: ") and "too large for a float" in p for p in _problems(report))


def test_the_untouched_bundle_passes(run):
    public, enclave = _verdicts(run, run["bundle"])
    assert public.verdict == "verified" and enclave.verdict == "verified", (_problems(public), _problems(enclave))
