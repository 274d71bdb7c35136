"""The audit checks the words (issue 21): a dishonest publisher who holds the key edits the
datasheet (a number, a policy word, a sentence of prose; in README.html or README.pdf) or the
codebook and re-signs the bundle; the public audit fails the named check `documentation`, with
the first differing sentence. The untouched bundle verifies."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpbundle.audit.runner import run_audit
from dpbundle.release.bundle import keys
from dpbundle.release.cli.main import app


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A persons release (dp_count: n is a DP count) and its demo key."""
    d = tmp_path_factory.mktemp("sheet")
    res = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", str(d / "b"),
                                   "--ledger", str(d / "ledger.jsonl"), "--transcript", str(d / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return d / "b", d / "b.demo-key.key", d / "b.demo-key.pub"


def resign(bundle: Path, key_path: Path) -> None:
    """What a publisher with the key does after an edit: new hashes in the manifest and in
    SHA256SUMS, a new signature."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    names = [f["path"] for f in manifest["files"]]
    sums = "".join(f"{hashlib.sha256((bundle / f).read_bytes()).hexdigest()}  {f}\n"
                   for f in sorted(n for n in names if not n.startswith("SHA256SUMS")))
    (bundle / "SHA256SUMS").write_text(sums)
    for name, sig in keys.sign_checksum_list(keys.load_private_key(key_path), sums.encode()).items():
        if name in names:       # the checksum list is signed from dpbundle 0.3
            (bundle / name).write_bytes(sig)
    for f in manifest["files"]:
        data = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(data).hexdigest(), len(data)
    raw = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    key = keys.load_private_key(key_path)
    (bundle / "manifest.sig").write_bytes(keys.sign(key, raw))


@pytest.fixture
def copy(released, tmp_path):
    bundle, key, pub = released
    d = tmp_path / "b"
    shutil.copytree(bundle, d)
    return d, key, pub


def failed(d: Path, pub: Path) -> dict[str, list[str]]:
    rep = run_audit(d, pubkey=pub)
    return {c.check: c.problems for c in rep.checks if c.failed}


def test_the_untouched_bundle_verifies(released):
    bundle, _key, pub = released
    assert failed(bundle, pub) == {}


def test_resigning_alone_changes_nothing(copy):
    d, key, pub = copy
    resign(d, key)
    assert failed(d, pub) == {}


def _edit_html(d: Path, old: str, new: str) -> None:
    html = (d / "README.html").read_text(encoding="utf-8")
    assert old in html, old
    (d / "README.html").write_text(html.replace(old, new, 1), encoding="utf-8")


def test_a_changed_number_fails_documentation(copy):
    d, key, pub = copy
    n = json.loads((d / "manifest.json").read_text())["n"]
    _edit_html(d, f"{n:,}", f"{n + 1000:,}")
    resign(d, key)
    problems = failed(d, pub)
    assert set(problems) == {"documentation"}, problems
    text = " ".join(problems["documentation"])
    assert f"{n + 1000:,}" in text and "first differing sentence" in text


def test_a_changed_policy_word_fails_documentation(copy):
    """The DP count called an exact count (the forgery that verified before issue 21)."""
    d, key, pub = copy
    html = (d / "README.html").read_text(encoding="utf-8")
    m = re.search(r"a differentially private count", html)
    assert m, "the dp_count datasheet names the count a differentially private count"
    _edit_html(d, "a differentially private count", "an exact count")
    resign(d, key)
    problems = failed(d, pub)
    assert set(problems) == {"documentation"}
    assert "exact count" in " ".join(problems["documentation"])


def test_a_changed_sentence_of_prose_fails_documentation(copy):
    d, key, pub = copy
    _edit_html(d, "The row order is random and carries no information.",
               "The row order follows the registry.")
    resign(d, key)
    problems = failed(d, pub)
    assert set(problems) == {"documentation"}
    assert "The row order follows the registry." in " ".join(problems["documentation"])


def test_a_pdf_with_other_words_fails_documentation(copy):
    """README.pdf rendered from an edited HTML (README.html left as released)."""
    from dpbundle.release.bundle.datasheet import render_pdf_bytes

    d, key, pub = copy
    html = (d / "README.html").read_text(encoding="utf-8")
    edited = html.replace("The row order is random and carries no information.",
                          "The row order is random and carries no private information.", 1)
    assert edited != html
    (d / "README.pdf").write_bytes(render_pdf_bytes(edited))
    resign(d, key)
    problems = failed(d, pub)
    assert set(problems) == {"documentation"}
    assert "'private'" in " ".join(problems["documentation"])


def test_a_pdf_rendered_from_the_same_html_passes(copy):
    """Fonts and PDF bytes may differ: the words are what is compared."""
    from dpbundle.release.bundle.datasheet import render_pdf_bytes

    d, key, pub = copy
    again = render_pdf_bytes((d / "README.html").read_text(encoding="utf-8"))
    (d / "README.pdf").write_bytes(again)
    resign(d, key)
    assert failed(d, pub) == {}


def test_a_changed_codebook_number_fails_documentation(copy):
    d, key, pub = copy
    lines = (d / "codebook.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    i = header.index("number")
    row = lines[1].rstrip("\n").split(",")
    row[i] = str(float(row[i]) + 0.5)
    lines[1] = ",".join(row) + "\n"
    (d / "codebook.csv").write_text("".join(lines), encoding="utf-8")
    resign(d, key)
    problems = failed(d, pub)
    assert "documentation" in problems
    assert "codebook.csv" in " ".join(problems["documentation"])
