"""Ed25519 keys: keygen files and modes, passphrases, refusal to overwrite, sign/verify, openssl interop."""
from __future__ import annotations

import hashlib
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from dpbundle.release.bundle import keys
from dpbundle.release.cli.keygen import cli_keygen


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_write_keypair_modes_and_formats(tmp_path):
    key_path, pub_path = keys.write_keypair(tmp_path / "release")
    assert key_path == tmp_path / "release.key" and pub_path == tmp_path / "release.pub"
    assert _mode(key_path) == 0o600
    assert key_path.read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, unencrypted
    assert pub_path.read_text().startswith("-----BEGIN PUBLIC KEY-----")  # SubjectPublicKeyInfo
    key = keys.load_private_key(key_path)
    pub = keys.load_public_key(pub_path)
    raw = pub.public_bytes(keys.serialization.Encoding.Raw, keys.serialization.PublicFormat.Raw)
    assert len(raw) == 32
    assert keys.public_key_fingerprint(pub) == hashlib.sha256(raw).hexdigest()
    assert keys.public_key_fingerprint(key) == keys.public_key_fingerprint(pub_path.read_text())
    assert keys.public_key_pem(key) == pub_path.read_text()


def test_passphrase_protected_key(tmp_path):
    key_path, _ = keys.write_keypair(tmp_path / "k", passphrase="correct horse")
    assert _mode(key_path) == 0o600
    assert key_path.read_text().startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----")
    with pytest.raises(keys.KeyFileError, match="passphrase-protected"):
        keys.load_private_key(key_path)
    with pytest.raises(keys.KeyFileError, match="wrong passphrase"):
        keys.load_private_key(key_path, "battery staple")
    key = keys.load_private_key(key_path, b"correct horse")
    assert keys.verify(key.public_key(), b"m", keys.sign(key, b"m"))
    with pytest.raises(keys.KeyFileError, match="empty"):
        keys.write_keypair(tmp_path / "k2", passphrase="")


def test_unencrypted_key_with_passphrase_is_an_error(tmp_path):
    key_path, pub_path = keys.write_keypair(tmp_path / "k")
    with pytest.raises(keys.KeyFileError, match="not encrypted"):
        keys.load_private_key(key_path, "x")
    with pytest.raises(keys.KeyFileError, match="public key"):
        keys.load_private_key(pub_path)


def test_refuses_to_overwrite(tmp_path):
    key_path, pub_path = keys.write_keypair(tmp_path / "k")
    before = key_path.read_bytes()
    with pytest.raises(keys.KeyFileError, match="already exists"):
        keys.write_keypair(tmp_path / "k")
    assert key_path.read_bytes() == before
    # an existing .pub alone is enough to refuse, and no .key is created
    (tmp_path / "other.pub").write_text("x")
    with pytest.raises(keys.KeyFileError, match="already exists"):
        keys.write_keypair(tmp_path / "other")
    assert not (tmp_path / "other.key").exists()


def test_sign_verify_hard_to_misuse(tmp_path):
    key = keys.generate_private_key()
    pub = key.public_key()
    sig = keys.sign(key, b"manifest bytes")
    assert len(sig) == 64
    assert keys.verify(pub, b"manifest bytes", sig)
    assert not keys.verify(pub, b"manifest bytez", sig)
    assert not keys.verify(pub, b"manifest bytes", sig[:-1])
    assert not keys.verify(pub, b"manifest bytes", bytes(64))
    assert not keys.verify(keys.generate_private_key().public_key(), b"manifest bytes", sig)
    with pytest.raises(TypeError):
        keys.sign(key, "text is not bytes")
    with pytest.raises(TypeError):
        keys.sign(pub, b"x")
    with pytest.raises(TypeError):
        keys.verify(key, b"x", sig)  # the private key is not a verification key


def test_openssl_verifies_our_signature(tmp_path):
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl binary not available")
    key_path, pub_path = keys.write_keypair(tmp_path / "k")
    data = b'{"format": "dpbundle-bundle/1"}\n'
    (tmp_path / "manifest.json").write_bytes(data)
    (tmp_path / "manifest.sig").write_bytes(keys.sign(keys.load_private_key(key_path), data))
    res = subprocess.run([openssl, "pkeyutl", "-verify", "-pubin", "-inkey", str(pub_path), "-rawin",
                          "-in", "manifest.json", "-sigfile", "manifest.sig"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert "Signature Verified Successfully" in res.stdout, res.stderr
    # and openssl can sign with our (encrypted) private key file: the signature verifies with dpbundle
    enc_key, enc_pub = keys.write_keypair(tmp_path / "e", passphrase="pw")
    res = subprocess.run([openssl, "pkeyutl", "-sign", "-inkey", str(enc_key), "-passin", "pass:pw", "-rawin",
                          "-in", "manifest.json", "-out", "o.sig"], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert keys.verify(keys.load_public_key(enc_pub), data, (tmp_path / "o.sig").read_bytes())


def test_read_passphrase(tmp_path):
    f = tmp_path / "pw"
    f.write_bytes(b"from file\nsecond line\n")
    assert keys.read_passphrase(f, env={keys.PASSPHRASE_ENV: "from env"}) == b"from file"
    assert keys.read_passphrase(None, env={keys.PASSPHRASE_ENV: "from env"}) == b"from env"
    assert keys.read_passphrase(None, env={}) is None
    f.write_bytes(b"\n")
    with pytest.raises(keys.KeyFileError, match="empty"):
        keys.read_passphrase(f, env={})


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("keygen")(cli_keygen)

    @app.command("noop")
    def noop() -> None:  # a second command so that "keygen" is a subcommand
        pass

    return app


def test_cli_keygen(tmp_path, monkeypatch):
    monkeypatch.delenv(keys.PASSPHRASE_ENV, raising=False)
    runner = CliRunner()
    res = runner.invoke(_app(), ["keygen", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert _mode(tmp_path / "a.key") == 0o600
    fp = keys.public_key_fingerprint(keys.load_public_key(tmp_path / "a.pub"))
    assert fp in res.output
    # refuses to overwrite: exit code 2, files unchanged
    before = (tmp_path / "a.key").read_bytes()
    res = runner.invoke(_app(), ["keygen", "--out", str(tmp_path / "a")])
    assert res.exit_code == 2
    assert (tmp_path / "a.key").read_bytes() == before
    # passphrase from a file
    (tmp_path / "pw").write_text("s3cret\n")
    res = runner.invoke(_app(), ["keygen", "--out", str(tmp_path / "b"), "--passphrase-file", str(tmp_path / "pw")])
    assert res.exit_code == 0, res.output
    keys.load_private_key(tmp_path / "b.key", "s3cret")
    # passphrase from the environment
    monkeypatch.setenv(keys.PASSPHRASE_ENV, "envpass")
    res = runner.invoke(_app(), ["keygen", "--out", str(tmp_path / "c")])
    assert res.exit_code == 0, res.output
    keys.load_private_key(tmp_path / "c.key", "envpass")
    # no plain command-line passphrase option exists
    res = runner.invoke(_app(), ["keygen", "--out", str(tmp_path / "d"), "--passphrase", "x"])
    assert res.exit_code != 0 and not (tmp_path / "d.key").exists()


def test_cli_keygen_creates_the_missing_key_folder_private(tmp_path, monkeypatch):
    monkeypatch.delenv(keys.PASSPHRASE_ENV, raising=False)
    res = CliRunner().invoke(_app(), ["keygen", "--out", str(tmp_path / "keys" / "sub" / "k")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "keys" / "sub" / "k.key").is_file()
    assert _mode(tmp_path / "keys" / "sub") == 0o700
    assert "created directory" in res.output


def test_cli_keygen_refuses_a_file_in_place_of_the_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(keys.PASSPHRASE_ENV, raising=False)
    (tmp_path / "keys").write_text("not a folder")
    res = CliRunner().invoke(_app(), ["keygen", "--out", str(tmp_path / "keys" / "k")])
    assert res.exit_code == 2
    assert "is not a directory" in res.output and "Traceback" not in res.output
