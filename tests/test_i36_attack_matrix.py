"""The attack of issue 36 as a test: a dishonest publisher holding the signing key edits a
bundle, renders every derived file again with dpbundle's own renderers (README.html and
README.pdf, datapackage.json, registry-entry.yaml), and re-signs it (hashes, SHA256SUMS and its
two signatures, the manifest and its signature). For every forgery class of the issue, the test
asserts the verdict of each audit:

* the public audit with the publisher's key pinned (``dpbundle audit --pubkey``), and
* the enclave replay (``--transcript`` and ``--data``, inside the enclave),

and that the audit that catches it names the check and the file. docs/audit.md's table "What
each audit catches" is generated from :data:`MATRIX` (``python tests/test_i36_attack_matrix.py``
prints it) and a test requires the document to hold it: the table states only what this test
asserts.
"""
from __future__ import annotations

import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i36_closure_util as cu  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAIL, PASS = "fails", "passes"


# ------------------------------------------------------------------------------ the forger's tools

def rerender_derived(bundle: Path) -> None:
    """What a forger does after editing source files: every derived file rendered again from
    them with dpbundle's renderers (the datasheet, datapackage.json, registry-entry.yaml)."""
    from dpbundle.audit import metadata as md
    from dpbundle.audit.bundle_io import open_bundle
    from dpbundle.audit.context import AuditContext
    from dpbundle.templates.metadata import datapackage as package_mod, registry_entry as entry_mod

    cu.rerender_datasheet(bundle)
    with open_bundle(bundle) as b:
        ctx = AuditContext(b)
        view = ctx.view()
        package = package_mod.json_bytes(package_mod.datapackage(md._package_facts(ctx, view)))
        entry = entry_mod.entry_yaml(entry_mod.registry_entry_of(md._registry_facts(ctx, view)))
    (bundle / "datapackage.json").write_bytes(package)
    (bundle / entry_mod.REGISTRY_ENTRY).write_bytes(entry)


def _spec(bundle: Path, edit: Callable[[dict], None]) -> None:
    cu.edit_json(bundle / "spec.json", lambda doc: edit(doc["spec"]))


def tighten_threshold(bundle: Path, key: Path) -> None:
    metrics = json.loads((bundle / "metrics.json").read_text())
    row = metrics["criteria"][0]
    new = round(abs(row["dp_value"]) * 1.1 + 1e-9, 12)
    _spec(bundle, lambda s: next(e for e in s["acceptance"] if e["id"] == row["id"]).__setitem__("threshold", new))
    cu.edit_json(bundle / "metrics.json", lambda doc: doc["criteria"][0].__setitem__("threshold", new))
    _metrics_csv_threshold(bundle, row["id"], new)
    rerender_derived(bundle)
    cu.resign(bundle, key)


def _metrics_csv_threshold(bundle: Path, cid: str, value: float) -> None:
    """metrics.csv's threshold cell of criterion ``cid``, as metrics.csv prints numbers."""
    import csv

    rows = list(csv.reader(io.StringIO((bundle / "metrics.csv").read_text("utf-8"), newline="")))
    col = rows[0].index("threshold")
    for r in rows[1:]:
        if r[0] == cid:
            r[col] = format(value, ".6g")
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    (bundle / "metrics.csv").write_bytes(out.getvalue().encode("utf-8"))


def rewrite_description(bundle: Path, key: Path) -> None:
    _spec(bundle, lambda s: s["release"].__setitem__("description", "Real, unaltered records."))
    rerender_derived(bundle)
    cu.resign(bundle, key)


def _budget_words(path: tuple, text: str) -> Callable[[Path, Path], None]:
    def forge(bundle: Path, key: Path) -> None:
        def edit(doc):
            node = doc
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = text
        cu.edit_json(bundle / "budget.json", edit)
        rerender_derived(bundle)
        cu.resign(bundle, key)
    return forge


def _package(field: str, value) -> Callable[[Path, Path], None]:
    def forge(bundle: Path, key: Path) -> None:
        cu.edit_json(bundle / "datapackage.json", lambda doc: doc.__setitem__(field, value))
        cu.resign(bundle, key)
    return forge


def declared_input(bundle: Path, key: Path) -> None:
    """A criterion's declared sensitivity input (the n its 1/n sensitivity uses) changed."""
    def edit(doc):
        row = next(c for c in doc["criteria"] if "n" in (c.get("sensitivity_inputs") or {}))
        row["sensitivity_inputs"]["n"] = row["sensitivity_inputs"]["n"] * 10
    cu.edit_json(bundle / "metrics.json", edit)
    rerender_derived(bundle)
    cu.resign(bundle, key)


def downgrade(bundle: Path, key: Path) -> None:
    cu.resign(bundle, key, lambda m: m.__setitem__("dpbundle_version", "0.2.0"))


def drop_registry_entry(bundle: Path, key: Path) -> None:
    (bundle / "registry-entry.yaml").unlink()
    cu.resign(bundle, key, lambda m: m.__setitem__(
        "files", [f for f in m["files"] if f["path"] != "registry-entry.yaml"]))


def lower_spends(bundle: Path, key: Path) -> None:
    def edit(m):
        earlier = m["ledger"]["earlier_epsilons"]
        m["ledger"].update(spends_on_registry=1, earlier_epsilons=[],
                           composed_epsilon=m["ledger"]["composed_epsilon"] - sum(earlier))
    cu.resign(bundle, key, edit)
    rerender_derived(bundle)
    cu.resign(bundle, key)


def exchange_two_rows(bundle: Path) -> None:
    """data.csv's first row exchanged with the first row that differs from it."""
    lines = (bundle / "data.csv").read_text().splitlines(keepends=True)
    i = next(k for k in range(2, len(lines)) if lines[k] != lines[1])
    lines[1], lines[i] = lines[i], lines[1]
    (bundle / "data.csv").write_text("".join(lines))


def regenerate_checksums(bundle: Path) -> None:
    """SHA256SUMS recomputed over the files it lists (its signatures left as they were)."""
    import hashlib

    sums = (bundle / "SHA256SUMS").read_text().splitlines()
    (bundle / "SHA256SUMS").write_text("".join(
        f"{hashlib.sha256((bundle / line[66:]).read_bytes()).hexdigest()}  {line[66:]}\n" for line in sums))


def swap_rows(bundle: Path, key: Path) -> None:
    exchange_two_rows(bundle)
    rerender_derived(bundle)
    cu.resign(bundle, key)


def _pdf(edit_writer: Callable) -> Callable[[Path, Path], None]:
    def forge(bundle: Path, key: Path) -> None:
        from pypdf import PdfReader, PdfWriter

        writer = PdfWriter(clone_from=PdfReader(bundle / "README.pdf"))
        edit_writer(writer)
        buf = io.BytesIO()
        writer.write(buf)
        (bundle / "README.pdf").write_bytes(buf.getvalue())
        cu.resign(bundle, key)
    return forge


def _freetext(writer) -> None:
    from pypdf.annotations import FreeText

    writer.add_annotation(page_number=0, annotation=FreeText(
        text="ERRATUM: total epsilon is 1.0; records are real", rect=(60, 500, 500, 540)))
    writer.add_metadata({"/Title": "VERIFIED"})


def _white_not(writer) -> None:
    """'... is published exactly and is not protected' -> '... is protected', the 'not' drawn
    elsewhere on the page in 0.75-pt white text (the issue's attack; tests/test_i36_pdf_forgery.py
    has the content-stream tools)."""
    import test_i36_pdf_forgery as pf

    page, m, font, codes = pf.find_pages(writer, " not protected")
    text = page.decode(font, codes)
    k = text.index(" not protected")
    kept = codes[:k + 1] + codes[k + 5:]
    assert page.decode(font, kept).endswith(" protected" + text[k + len(" not protected"):])
    page.text = page.text[:m.start()] + "[" + "".join(f"<{c:04x}>0" for c in kept) + "] TJ" + page.text[m.end():]
    page.text += f"\nq 1 1 1 rg BT 1 0 0 -1 300 700 Tm /{font} 0.75 Tf [{page.encode(font, 'not')}] TJ ET Q\n"
    page.save()


def unsigned_checksums(bundle: Path, key: Path) -> None:
    """An edited data.csv with SHA256SUMS regenerated but not signed (the standard-tool attack)."""
    exchange_two_rows(bundle)
    regenerate_checksums(bundle)


# ------------------------------------------------------------------------------ the matrix

@dataclass(frozen=True)
class Forgery:
    name: str                 # the forgery class, in the words
    forge: Callable[[Path, Path], None]
    public: str               # FAIL or PASS: the public audit with the key pinned
    enclave: str              # FAIL or PASS: the enclave replay
    caught_by: str            # "check: file" of the first audit that fails it
    bundle: str = "first"     # which release of the fixture it edits


MATRIX: tuple[Forgery, ...] = (
    Forgery("a criterion's threshold tightened in spec.json and metrics.json (datasheet re-rendered)",
            tighten_threshold, PASS, FAIL, "replay: spec.json"),
    Forgery("the spec's description rewritten to \"Real, unaltered records.\" (every derived file re-rendered)",
            rewrite_description, PASS, FAIL, "replay: spec.json"),
    Forgery("budget.json's neighbouring relation rewritten to \"add or remove one record\" (re-rendered)",
            _budget_words(("neighbouring",), "add or remove one record"), FAIL, FAIL, "budget: budget.json"),
    Forgery("budget.json's records statement rewritten to \"the number of records is protected by DP\"",
            _budget_words(("records", "statement"), "the number of records is protected by DP"),
            FAIL, FAIL, "budget: budget.json"),
    Forgery("datapackage.json's title \"REAL records, not synthetic\"",
            _package("title", "REAL records, not synthetic"), FAIL, FAIL, "schema: datapackage.json"),
    Forgery("datapackage.json's licence \"proprietary\"",
            _package("licenses", [{"name": "proprietary"}]), FAIL, FAIL, "schema: datapackage.json"),
    Forgery("metrics.json: a criterion's declared sensitivity input n multiplied by 10 (re-rendered)",
            declared_input, FAIL, FAIL, "budget: sensitivity_inputs.n"),
    Forgery("manifest.json's dpbundle_version lowered to 0.2.0", downgrade, FAIL, FAIL, "schema: manifest.json"),
    Forgery("registry-entry.yaml dropped", drop_registry_entry, FAIL, FAIL, "schema: registry-entry.yaml"),
    Forgery("the spends on the registry lowered in manifest.json's ledger statement (arithmetic kept)",
            lower_spends, PASS, FAIL, "replay: manifest.json", bundle="second"),
    Forgery("two rows of data.csv exchanged (every derived file re-rendered)", swap_rows, PASS, FAIL,
            "replay: data.csv"),
    Forgery("README.pdf: \"not\" moved into 1-px white text", _pdf(_white_not), FAIL, FAIL,
            "documentation: README.pdf"),
    Forgery("README.pdf: a visible FreeText erratum and an edited /Title", _pdf(_freetext), FAIL, FAIL,
            "documentation: README.pdf"),
    Forgery("data.csv edited and SHA256SUMS regenerated without its signatures", unsigned_checksums, FAIL, FAIL,
            "integrity: SHA256SUMS"),
)


def matrix_markdown() -> str:
    """docs/audit.md's table, from :data:`MATRIX`."""
    lines = ["| forgery (re-signed with the publisher's key) | public audit, key pinned | enclave replay | caught by |",
             "|---|---|---|---|"]
    for f in MATRIX:
        lines.append(f"| {f.name} | {f.public} | {f.enclave} | `{f.caught_by.split(':')[0]}` ({f.caught_by.split(': ')[1]}) |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ the runs

@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Two releases on one registry and ledger (the second is its second recorded spend), with
    their transcripts, the registry and the key."""
    import audit_fixtures as fx
    from typer.testing import CliRunner

    import test_i36_run_binding as rb
    from dpbundle.release.cli.main import app

    t = tmp_path_factory.mktemp("attack-matrix")
    assert CliRunner().invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    fx.fast_spec(t / "fast.yaml")
    fx.example_registry(t / "registry.csv", 3000, 5)
    ledger = t / "ledger.jsonl"
    return {"first": rb._release(t, "first", ledger), "second": rb._release(t, "second", ledger),
            "data": t / "registry.csv", "key": t / "k.key", "pub": t / "k.pub"}


def _audits(runs: dict, bundle: Path, run: dict):
    from dpbundle.audit.runner import run_audit

    public = run_audit(bundle, pubkey=runs["pub"])
    enclave = run_audit(bundle, pubkey=runs["pub"], transcript=run["transcript"], data=runs["data"])
    return public, enclave


def _failed(report) -> dict[str, list[str]]:
    return {c.check: list(c.problems) for c in report.checks if c.failed}


def test_the_untouched_bundles_pass_both_audits(runs):
    for name in ("first", "second"):
        public, enclave = _audits(runs, runs[name]["bundle"], runs[name])
        assert public.verdict == "verified" and enclave.verdict == "verified", (_failed(public), _failed(enclave))


@pytest.mark.parametrize("forgery", MATRIX, ids=[f.name[:60] for f in MATRIX])
def test_each_forgery_gets_the_verdict_the_table_states(runs, tmp_path, forgery):
    run = runs[forgery.bundle]
    bundle = tmp_path / "B"
    shutil.copytree(run["bundle"], bundle)
    forgery.forge(bundle, runs["key"])
    public, enclave = _audits(runs, bundle, run)
    assert (FAIL if public.verdict == "failed" else PASS) == forgery.public, _failed(public)
    assert (FAIL if enclave.verdict == "failed" else PASS) == forgery.enclave, _failed(enclave)
    check, file = forgery.caught_by.split(": ")
    first = public if forgery.public == FAIL else enclave
    problems = _failed(first).get(check, [])
    assert any(file in p for p in problems), (check, _failed(first))


def test_docs_audit_md_states_the_table():
    text = (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")
    assert matrix_markdown() in text, "regenerate: python tests/test_i36_attack_matrix.py"


if __name__ == "__main__":  # pragma: no cover - prints docs/audit.md's table
    print(matrix_markdown(), end="")
