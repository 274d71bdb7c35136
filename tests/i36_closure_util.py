"""Bundles for the closure-rule tests (issue 36): the births and persons examples and a
pre-registered ``publish: model`` release, each made once by the real commands; and a re-signer
that does what a publisher holding the key can do after editing files (the datasheet rendered
again, every hash, SHA256SUMS and its signatures, the manifest and its signature)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))

BEACON = "drand quicknet randomness 5c1e..."   # names no time


def release_example(where: Path, example: str) -> dict:
    """``dpbundle release --example EXAMPLE``: {bundle, key, pub}."""
    from dpbundle.release.cli.main import app

    out = where / example
    res = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", example, "--out", str(out),
                                   "--ledger", str(where / f"{example}.ledger.jsonl")])
    assert res.exit_code == 0, res.output
    return {"bundle": out, "key": where / f"{example}.demo-key.key", "pub": where / f"{example}.demo-key.pub"}


def release_preregistered(where: Path) -> dict:
    """A pre-registered release with ``publish: model`` (tests/hostile_bundles.py): {bundle, key, pub, rec}."""
    import hostile_bundles as hb

    return hb.release_base(where, "privsyn")


def rerender_datasheet(bundle: Path) -> None:
    """README.html and README.pdf rendered again from the bundle's (edited) public files."""
    from dpbundle.release.bundle.datasheet import render_pdf_bytes
    from dpbundle.templates.datasheet import datasheet_html, meta_from_manifest, read_public_files

    meta = meta_from_manifest(json.loads((bundle / "manifest.json").read_text()))
    public = read_public_files(lambda n: (bundle / n).read_bytes(), lambda n: (bundle / n).is_file(), meta)
    html = datasheet_html(public)
    (bundle / "README.html").write_bytes(html.encode("utf-8"))
    (bundle / "README.pdf").write_bytes(render_pdf_bytes(html))


def resign(bundle: Path, key_path: Path, edit_manifest=None) -> None:
    """Every listed file's hash and size into manifest.json (``edit_manifest(manifest)`` first),
    SHA256SUMS over the manifest's other files with its two signatures, and manifest.sig."""
    from dpbundle.release.bundle import keys

    key = keys.load_private_key(key_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    if edit_manifest is not None:
        edit_manifest(manifest)
    checksum = ("SHA256SUMS", "SHA256SUMS.sig", "SHA256SUMS.sshsig")
    names = sorted(f["path"] for f in manifest["files"] if f["path"] not in checksum)
    if (bundle / "SHA256SUMS").exists():
        sums = "".join(f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}\n" for n in names)
        (bundle / "SHA256SUMS").write_text(sums)
        for name, sig in keys.sign_checksum_list(key, sums.encode()).items():
            if (bundle / name).exists():
                (bundle / name).write_bytes(sig)
    for f in manifest["files"]:
        data = (bundle / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(data).hexdigest(), len(data)
    raw = (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(key, raw))


def edit_json(path: Path, edit) -> None:
    """Parse a bundle JSON file, apply ``edit``, write it back in the bundle's format."""
    doc = json.loads(path.read_text("utf-8"))
    edit(doc)
    path.write_bytes((json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
