"""Issue 35, item "Verify with standard tools": the documented recipes, run with the real tools.

The commands are read from the documents themselves (README's "Verifying a bundle without
dpbundle" and docs/audit.md's "Verifying with standard tools"), not copied here, and run with
bash, openssl, ssh-keygen and sha256sum against a real release and tampered copies of it:

* an untouched bundle passes every line;
* a row of data.csv edited and SHA256SUMS regenerated (the attack the issue reports: both old
  commands passed) fails both signature lines, so each alternative recipe fails;
* a row edited without regenerating fails ``sha256sum -c``; an added file fails the ``diff``;
* a bundle re-signed with another key fails against the pinned key and allowed_signers line;
* a removed signature fails its line.

The audit's integrity check is held to the same cases, and the SSHSIG encoding is checked both
ways against ``ssh-keygen -Y sign`` / ``-Y verify``. A test whose tool is absent is skipped.
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.release.bundle import keys  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = {"openssl": "openssl", "ssh-keygen": "ssh-keygen", "sha256sum": "sha256sum", "diff": "diff",
         "printf": "bash"}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^#{1,3} ", text[start + len(heading):], re.MULTILINE)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def _blocks(section: str) -> list[list[str]]:
    """The lines of each fenced code block of a document section."""
    return [[line for line in b.splitlines() if line.strip()]
            for b in re.findall(r"^```[a-z]*\n(.*?)^```", section, re.MULTILINE | re.DOTALL)]


def documented() -> dict[str, list[list[str]]]:
    return {"README.md": _blocks(_section((ROOT / "README.md").read_text("utf-8"),
                                          "## Verifying a bundle without dpbundle")),
            "docs/audit.md": _blocks(_section((ROOT / "docs" / "audit.md").read_text("utf-8"),
                                              "## Verifying with standard tools"))}


def recipe() -> list[str]:
    """The checking lines (the first block of README's section); docs/audit.md states the same."""
    docs = documented()
    lines = docs["README.md"][0]
    assert docs["docs/audit.md"][0] == lines, "README.md and docs/audit.md state different recipes"
    return lines


def derive_line() -> str:
    """The documented command that writes allowed_signers from KEY.pub with openssl."""
    docs = documented()
    (line,) = docs["README.md"][1]
    assert docs["docs/audit.md"][1] == [line]
    return line


def step(lines: list[str], tool: str) -> str:
    """The recipe's line that starts with ``tool`` (and, for openssl, signs ``what``)."""
    hits = [line for line in lines if line.split()[0] == tool]
    assert hits, f"the recipe has no {tool} line"
    return hits[0]


def needs(line: str) -> None:
    tool = TOOLS.get(line.split()[0], line.split()[0])
    for t in {tool, "bash"} | ({"openssl"} if "openssl" in line else set()):
        if shutil.which(t) is None:
            pytest.skip(f"{t} is not installed: the documented line cannot be run here")


def run(line: str, bundle: Path) -> subprocess.CompletedProcess:
    """One documented line, run by bash in the bundle's folder (KEY.pub and allowed_signers beside it)."""
    needs(line)
    return subprocess.run(["bash", "-c", line], cwd=bundle, capture_output=True, text=True, timeout=60)


def results(bundle: Path) -> dict[str, int]:
    return {line: run(line, bundle).returncode for line in recipe()}


# ----------------------------------------------------------------------------- the bundle


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    t = tmp_path_factory.mktemp("i35-recipes")
    runner = CliRunner()
    res = runner.invoke(app, ["keygen", "--out", str(t / "k")])
    assert res.exit_code == 0, res.output
    spec = fx.fast_spec(t / "fast.yaml")
    data = fx.example_registry(t / "registry.csv", 3000, 5)
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(t / "B"), "--key", str(t / "k.key"),
                              "--ledger", str(t / "ledger.jsonl"), "--transcript", str(t / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return {"bundle": t / "B", "key": t / "k.key", "pub": t / "k.pub", "signers": t / "k.allowed_signers"}


@pytest.fixture
def copy(released, tmp_path) -> Path:
    """A copy of the bundle in its own folder, the publisher's KEY.pub and allowed_signers beside it."""
    shutil.copytree(released["bundle"], tmp_path / "B")
    shutil.copy(released["pub"], tmp_path / "KEY.pub")
    shutil.copy(released["signers"], tmp_path / "allowed_signers")
    return tmp_path / "B"


def edit_a_row(bundle: Path) -> None:
    lines = (bundle / "data.csv").read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    if lines[1] == lines[2]:
        lines[1] = lines[3]
    (bundle / "data.csv").write_text("".join(lines))


def regenerate_sums(bundle: Path) -> bytes:
    """What the issue's attacker does: SHA256SUMS computed again for the files it lists."""
    names = [line.split("  ", 1)[1] for line in (bundle / "SHA256SUMS").read_text().splitlines()]
    sums = "".join(f"{hashlib.sha256((bundle / n).read_bytes()).hexdigest()}  {n}\n" for n in names).encode()
    (bundle / "SHA256SUMS").write_bytes(sums)
    return sums


def pinned_audit(released, bundle: Path):
    return run_audit(bundle, pubkey=released["pub"])


# ----------------------------------------------------------------------------- the recipes


def test_the_documents_state_the_recipe_lines():
    lines = recipe()
    assert [line.split()[0] for line in lines] == ["openssl", "ssh-keygen", "sha256sum", "diff", "openssl"]
    assert "-in SHA256SUMS -sigfile SHA256SUMS.sig" in lines[0]
    assert "-n dpbundle -s SHA256SUMS.sshsig < SHA256SUMS" in lines[1]
    assert "-in manifest.json -sigfile manifest.sig" in lines[4]


def test_an_untouched_bundle_passes_every_line(copy):
    for line, code in results(copy).items():
        assert code == 0, line
    assert "Signature Verified Successfully" in run(recipe()[0], copy).stdout
    assert 'Good "dpbundle" signature for publisher' in run(recipe()[1], copy).stderr + run(recipe()[1], copy).stdout


def test_an_edited_row_with_regenerated_checksums_fails_both_signature_lines(copy, released):
    edit_a_row(copy)
    regenerate_sums(copy)
    got = results(copy)
    lines = recipe()
    assert got[step(lines, "sha256sum")] == 0          # the old recipe's check alone passes: the attack
    assert got[lines[0]] != 0, "openssl accepted a regenerated SHA256SUMS"
    assert got[step(lines, "ssh-keygen")] != 0, "ssh-keygen accepted a regenerated SHA256SUMS"
    integrity = pinned_audit(released, copy).get("integrity")
    assert integrity.failed
    assert any(p.startswith("SHA256SUMS.sig:") for p in integrity.problems), integrity.problems
    assert any(p.startswith("SHA256SUMS.sshsig:") for p in integrity.problems), integrity.problems


def test_an_edited_row_without_new_checksums_fails_sha256sum(copy):
    edit_a_row(copy)
    got = results(copy)
    assert got[step(recipe(), "sha256sum")] != 0
    assert got[recipe()[0]] == 0 and got[step(recipe(), "ssh-keygen")] == 0   # the list itself is intact


def test_an_added_file_fails_the_listing_line(copy, released):
    (copy / "notes.csv").write_text("a,b\n1,2\n")
    got = results(copy)
    assert got[step(recipe(), "diff")] != 0
    assert all(code == 0 for line, code in got.items() if not line.startswith("diff")), got
    assert "notes.csv" in run(step(recipe(), "diff"), copy).stdout
    assert pinned_audit(released, copy).get("integrity").failed


def test_a_bundle_signed_again_with_another_key_fails_against_the_pinned_key(copy, released, tmp_path):
    """The attacker edits a row and signs everything again with a key of their own."""
    edit_a_row(copy)
    sums = regenerate_sums(copy)
    other = keys.generate_private_key()
    (copy / "SHA256SUMS.sig").write_bytes(keys.sign(other, sums))
    (copy / "SHA256SUMS.sshsig").write_bytes(keys.sshsig_sign(other, sums))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["public_key"] = {"algorithm": "Ed25519", "pem": keys.public_key_pem(other),
                              "fingerprint": keys.public_key_fingerprint(other)}
    for f in manifest["files"]:
        raw = (copy / f["path"]).read_bytes()
        f["sha256"], f["size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    (copy / "manifest.json").write_bytes(raw)
    (copy / "manifest.sig").write_bytes(keys.sign(other, raw))
    got = results(copy)
    lines = recipe()
    for line in (lines[0], lines[1], lines[4]):
        assert got[line] != 0, line
    assert got[step(lines, "sha256sum")] == 0 and got[step(lines, "diff")] == 0
    assert pinned_audit(released, copy).get("integrity").failed


@pytest.mark.parametrize("name", ["SHA256SUMS.sig", "SHA256SUMS.sshsig"])
def test_a_removed_signature_fails_its_line_and_the_audit(copy, released, name):
    (copy / name).unlink()
    line = recipe()[0] if name.endswith(".sig") else step(recipe(), "ssh-keygen")
    assert run(line, copy).returncode != 0
    integrity = pinned_audit(released, copy).get("integrity")
    assert integrity.failed and any(name in p for p in integrity.problems), integrity.problems


def test_the_allowed_signers_line_made_with_openssl_is_keygens(copy, released):
    line = derive_line()
    assert run(line, copy.parent).returncode == 0
    made = (copy.parent / "allowed_signers").read_text()
    assert made == released["signers"].read_text()
    pub = keys.load_public_key(released["pub"])
    assert made == keys.allowed_signers_line(pub) + "\n"
    assert made.startswith('publisher namespaces="dpbundle" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI')


# ----------------------------------------------------------------------------- the audit alone


def _resign_manifest(bundle: Path, key_path: Path, edit) -> None:
    """The publisher (who has the key) rewrites the manifest and signs it again."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    edit(manifest)
    raw = (json.dumps(manifest, indent=2) + "\n").encode()
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key_path), raw))


def test_a_03_bundle_without_its_signed_checksums_fails_even_when_re_signed(copy, released):
    for name in ("SHA256SUMS.sig", "SHA256SUMS.sshsig"):
        (copy / name).unlink()
    _resign_manifest(copy, released["key"], lambda m: m.update(
        files=[f for f in m["files"] if f["path"] not in ("SHA256SUMS.sig", "SHA256SUMS.sshsig")]))
    integrity = pinned_audit(released, copy).get("integrity")
    assert integrity.failed
    assert any("SHA256SUMS.sig is not listed" in p for p in integrity.problems), integrity.problems


def test_a_checksum_list_that_leaves_out_a_file_fails_even_when_signed(copy, released):
    """The key's owner signs a SHA256SUMS without data.csv: standard tools would not look at
    data.csv; the audit requires the list to name every file the manifest lists."""
    key = keys.load_private_key(released["key"])
    sums = b"".join(line + b"\n" for line in (copy / "SHA256SUMS").read_bytes().splitlines()
                    if not line.endswith(b"  data.csv"))
    (copy / "SHA256SUMS").write_bytes(sums)
    (copy / "SHA256SUMS.sig").write_bytes(keys.sign(key, sums))
    (copy / "SHA256SUMS.sshsig").write_bytes(keys.sshsig_sign(key, sums))

    def rehash(m):
        for f in m["files"]:
            raw = (copy / f["path"]).read_bytes()
            f["sha256"], f["size"] = hashlib.sha256(raw).hexdigest(), len(raw)
    _resign_manifest(copy, released["key"], rehash)
    integrity = pinned_audit(released, copy).get("integrity")
    assert integrity.problems == ["SHA256SUMS: does not list data.csv, which the manifest lists"]


def test_the_untouched_bundle_passes_integrity_with_its_checksum_signatures(released):
    integrity = pinned_audit(released, released["bundle"]).get("integrity")
    assert integrity.result == "pass", integrity.problems
    assert "Ed25519 and OpenSSH signatures are valid" in integrity.detail
    listed = [f["path"] for f in json.loads((released["bundle"] / "manifest.json").read_text())["files"]]
    assert listed[-3:] == ["SHA256SUMS", "SHA256SUMS.sig", "SHA256SUMS.sshsig"]


# ----------------------------------------------------------------------------- SSHSIG both ways


def _openssh_private(tmp_path: Path, key) -> Path:
    from cryptography.hazmat.primitives import serialization

    path = tmp_path / "id_ed25519"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return path


def test_sshsig_is_byte_for_byte_what_ssh_keygen_signs(tmp_path):
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    key = keys.generate_private_key()
    msg = tmp_path / "SHA256SUMS"
    msg.write_bytes(b"0" * 64 + b"  data.csv\n")
    done = subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(_openssh_private(tmp_path, key)), "-n", "dpbundle",
                           str(msg)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert keys.sshsig_sign(key, msg.read_bytes()) == (tmp_path / "SHA256SUMS.sig").read_bytes()


def test_the_audit_verifies_ssh_keygens_signatures_and_nothing_else(tmp_path):
    from dpbundle.audit.checks_integrity import SshsigError, verify_sshsig

    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    key = keys.generate_private_key()
    msg = tmp_path / "m"
    msg.write_bytes(b"the list\n")
    for ns in ("dpbundle", "file"):
        subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(_openssh_private(tmp_path, key)), "-n", ns, str(msg)],
                       capture_output=True, check=True, timeout=60)
        (tmp_path / f"m.{ns}.sig").write_bytes((tmp_path / "m.sig").read_bytes())
        (tmp_path / "m.sig").unlink()
        (tmp_path / "id_ed25519").unlink()
    good = (tmp_path / "m.dpbundle.sig").read_bytes()
    verify_sshsig(key.public_key(), good, b"the list\n", "dpbundle")
    with pytest.raises(SshsigError, match="not valid"):
        verify_sshsig(key.public_key(), good, b"the list!\n", "dpbundle")
    with pytest.raises(SshsigError, match="another key"):
        verify_sshsig(keys.generate_private_key().public_key(), good, b"the list\n", "dpbundle")
    with pytest.raises(SshsigError, match="namespace 'file'"):
        verify_sshsig(key.public_key(), (tmp_path / "m.file.sig").read_bytes(), b"the list\n", "dpbundle")
    with pytest.raises(SshsigError):
        verify_sshsig(key.public_key(), good.replace(b"SSH SIGNATURE", b"PGP SIGNATURE"), b"the list\n", "dpbundle")


def test_keygen_writes_an_allowed_signers_file_ssh_keygen_accepts(tmp_path):
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    runner = CliRunner()
    res = runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")])
    assert res.exit_code == 0, res.output
    line = (tmp_path / "k.allowed_signers").read_text()
    assert f"allowed_signers line: {line.strip()}" in res.output
    key = keys.load_private_key(tmp_path / "k.key")
    (tmp_path / "m").write_bytes(b"x\n")
    (tmp_path / "m.sshsig").write_bytes(keys.sshsig_sign(key, b"x\n"))
    done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(tmp_path / "k.allowed_signers"), "-I", "publisher",
                           "-n", "dpbundle", "-s", str(tmp_path / "m.sshsig")], input=b"x\n", capture_output=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    shown = runner.invoke(app, ["keygen", "--from-public", str(tmp_path / "k.pub")])
    assert shown.exit_code == 0 and line.strip() in shown.output
    assert not (tmp_path / "k2.key").exists()
    refused = runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")])
    assert refused.exit_code == 2 and "already exists" in refused.output
