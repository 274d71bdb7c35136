"""Forgeries the closure rule defeats (issue 36): a publisher holding the key edits a file, renders
the datasheet again where it would otherwise give the edit away, re-hashes and re-signs
everything (the checksum list's signatures included). The public audit, every pin given, must
fail naming the file and the rule; the untouched bundles verify."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402

RULE = "closure rule"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("closure-forgery")
    return {"births": cu.release_example(where, "births"), "persons": cu.release_example(where, "persons"),
            "preregistered": cu.release_preregistered(where / "pre")}


def audit(release: dict, bundle: Path | None = None):
    rec = release.get("rec")
    return run_audit(bundle or release["bundle"], pubkey=release["pub"], preregistration=rec,
                     beacon=cu.BEACON if rec else None)


def forged(release: dict, tmp_path: Path) -> Path:
    d = tmp_path / "forged"
    shutil.copytree(release["bundle"], d)
    return d


def problems(report, check: str) -> list[str]:
    c = report.get(check)
    return c.problems if c is not None else []


@pytest.mark.parametrize("which", ["births", "persons", "preregistered"])
def test_the_untouched_bundles_verify_and_name_what_only_the_signature_vouches_for(made, which):
    rep = audit(made[which])
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    assert "manifest.json: created" in rep.signature_only
    # from dpbundle 0.3 every bundle's spec is bound to the run by the transcript's run record
    # (and a pre-registered one's by its record too): never the signature's alone
    assert "spec.json: spec.**" not in rep.signature_only
    assert "manifest.json: dpbundle_version" not in rep.signature_only
    assert rep.to_dict()["signature_only"] == rep.signature_only


@pytest.mark.parametrize("which", ["births", "persons", "preregistered"])
@pytest.mark.parametrize("edit, field, value", [
    (lambda p: p.update(title="REAL records, not synthetic"), "title", "REAL records, not synthetic"),
    (lambda p: p["licenses"][0].update(name="proprietary"), "licenses[0].name", "proprietary"),
    (lambda p: p.update(homepage="https://example.invalid/real"), "homepage", "https://example.invalid/real"),
])
def test_a_rewritten_datapackage_fails(made, which, tmp_path, edit, field, value):
    release = made[which]
    d = forged(release, tmp_path)
    cu.edit_json(d / "datapackage.json", edit)
    cu.resign(d, release["key"])
    rep = audit(release, d)
    assert rep.verdict == "failed"
    assert any(p.startswith("datapackage.json: not the package rendered from spec.json") and RULE in p
               and f"first difference at {field}: {value!r}" in p for p in problems(rep, "schema")), \
        problems(rep, "schema")


@pytest.mark.parametrize("which", ["births", "preregistered"])
@pytest.mark.parametrize("path, value", [
    (("neighbouring",), "add or remove one record"),
    (("records", "statement"), "the number of records is protected by DP"),
])
def test_rewritten_budget_statements_fail_with_the_datasheet_rendered_to_match(made, which, tmp_path, path,
                                                                                 value):
    release = made[which]
    d = forged(release, tmp_path)

    def edit(budget):
        block = budget
        for key in path[:-1]:
            block = block[key]
        assert block[path[-1]] != value
        block[path[-1]] = value
    cu.edit_json(d / "budget.json", edit)
    cu.rerender_datasheet(d)
    cu.resign(d, release["key"])
    rep = audit(release, d)
    assert rep.verdict == "failed"
    dotted = ".".join(path)
    assert any(p.startswith(f"budget.json: {dotted} is not the statement the spec gives") and RULE in p
               and repr(value) in p for p in problems(rep, "budget")), problems(rep, "budget")
    # the datasheet was rendered again from the forged files: only the closure rule sees it
    assert not rep.get("documentation").failed, rep.get("documentation").problems


def test_a_version_downgrade_fails(made, tmp_path):
    release = made["births"]
    for claim, expected in (("0.1.0", "codebook.csv: only dpbundle 0.2 and later write it"),
                            ("0.2.0", "SHA256SUMS.sig: only dpbundle 0.3 and later write it")):
        d = forged(release, tmp_path / claim)
        cu.resign(d, release["key"], lambda m: m.update(dpbundle_version=claim))
        rep = audit(release, d)
        assert rep.verdict == "failed"
        assert any(p.startswith(expected) and f"claims dpbundle {claim!r}" in p
                   for p in problems(rep, "schema")), problems(rep, "schema")


def test_a_dropped_registry_entry_fails(made, tmp_path):
    release = made["persons"]
    d = forged(release, tmp_path)
    (d / "registry-entry.yaml").unlink()
    cu.resign(d, release["key"], lambda m: m.update(files=[f for f in m["files"]
                                                           if f["path"] != "registry-entry.yaml"]))
    rep = audit(release, d)
    assert rep.verdict == "failed"
    assert rep.get("integrity").result == "pass"     # a consistent, signed forgery
    assert any(p.startswith("registry-entry.yaml: missing, but every bundle of that version has it")
               for p in problems(rep, "schema")), problems(rep, "schema")


def test_an_unknown_file_and_an_unknown_field_fail(made, tmp_path):
    release = made["births"]
    d = forged(release, tmp_path)
    (d / "ERRATUM.txt").write_text("total epsilon is 1.0; records are real\n")
    cu.edit_json(d / "budget.json", lambda b: b.update(privacy_definition="records are real"))

    def add(m):
        m["files"].insert(0, {"path": "ERRATUM.txt", "sha256": "", "size": 0})
    cu.resign(d, release["key"], add)
    rep = audit(release, d)
    assert rep.verdict == "failed"
    schema = problems(rep, "schema")
    assert any(p.startswith("ERRATUM.txt: a file no rule of the closure rule knows") for p in schema), schema
    assert any(p.startswith("budget.json:") and "privacy_definition" in p for p in schema), schema


def test_a_registry_entry_rewritten_in_its_schema_fails_naming_the_field(made, tmp_path):
    import yaml

    release = made["births"]
    d = forged(release, tmp_path)
    entry = yaml.safe_load((d / "registry-entry.yaml").read_text("utf-8"))
    entry["deployment"]["basic"]["description"] = "Real, unaltered records."
    (d / "registry-entry.yaml").write_text(yaml.safe_dump(entry, sort_keys=False, allow_unicode=True))
    cu.resign(d, release["key"])
    rep = audit(release, d)
    assert any(p.startswith("registry-entry.yaml: not the entry rendered from") and RULE in p
               and "deployment.basic.description: 'Real, unaltered records.'" in p
               for p in problems(rep, "budget")), problems(rep, "budget")


def test_the_prechange_bundles_keep_verifying():
    root = Path(__file__).resolve().parent / "data" / "prechange"
    for name in ("births-bundle", "persons-bundle"):
        rep = run_audit(root / name, pubkey=root / "key.pub")
        assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
        assert "budget.json: opendp_version" in rep.signature_only
        assert json.loads(rep.to_json())["signature_only"] == rep.signature_only
