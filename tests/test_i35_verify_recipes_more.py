"""Issue 35 (review): the two documented standard-tool checks that had no tampered-bundle test.

* The manifest line (the recipe's last line, and the only line for a bundle of dpbundle 0.2):
  an edited manifest.json that was not signed again fails it.
* README's fallback for a dpbundle 0.2 bundle (the manifest's signature, then each file's
  ``sha256sum`` against the hash manifest.json lists): an edited data.csv is found, on a copy of
  a real 0.2.0 bundle (tests/data/prechange)."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_i35_verify_recipes as vr  # noqa: E402

copy = vr.copy            # the module's bundle copy, KEY.pub and allowed_signers beside it
released = vr.released
PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def _manifest_line() -> str:
    (line,) = [x for x in vr.recipe() if "manifest.json" in x and x.startswith("openssl")]
    return line


def test_an_edited_manifest_not_signed_again_fails_the_manifest_line(copy):
    line = _manifest_line()
    assert vr.run(line, copy).returncode == 0
    doc = json.loads((copy / "manifest.json").read_text())
    doc["created"] = "2000-01-01"
    (copy / "manifest.json").write_text(json.dumps(doc, indent=2) + "\n")
    assert vr.run(line, copy).returncode != 0


def _hashes_match_manifest(bundle: Path) -> bool:
    """The README's manual step, done as a user would with sha256sum for each listed file."""
    files = json.loads((bundle / "manifest.json").read_text())["files"]
    for f in files:
        out = subprocess.run(["sha256sum", f["path"]], cwd=bundle, capture_output=True, text=True, check=True)
        if out.stdout.split()[0] != f["sha256"]:
            return False
    return True


@pytest.mark.skipif(shutil.which("sha256sum") is None or shutil.which("openssl") is None,
                    reason="needs sha256sum and openssl")
def test_the_0_2_fallback_finds_an_edited_file(tmp_path):
    bundle = tmp_path / "B"
    shutil.copytree(PRECHANGE / "births-bundle", bundle)
    shutil.copy(PRECHANGE / "key.pub", tmp_path / "KEY.pub")
    line = _manifest_line()
    assert vr.run(line, bundle).returncode == 0 and _hashes_match_manifest(bundle)
    rows = (bundle / "data.csv").read_text().splitlines(keepends=True)
    i = next(k for k in range(2, len(rows)) if rows[k] != rows[1])
    rows[1], rows[i] = rows[i], rows[1]
    (bundle / "data.csv").write_text("".join(rows))
    sums = "".join(f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}\n"
                   for n in sorted(p.name for p in bundle.iterdir() if p.name not in ("manifest.json", "manifest.sig", "SHA256SUMS")))
    (bundle / "SHA256SUMS").write_text(sums)            # the unsigned list a forger regenerates
    assert vr.run("sha256sum -c SHA256SUMS", bundle).returncode == 0   # proves nothing for 0.2
    assert vr.run(line, bundle).returncode == 0          # the manifest is untouched ...
    assert not _hashes_match_manifest(bundle)            # ... and names data.csv's old hash
