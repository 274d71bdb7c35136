"""Ed25519 signing keys for release bundles.

A bundle's ``manifest.sig`` is the raw 64-byte Ed25519 signature of the exact bytes of its
``manifest.json``; anyone can check it without dpbundle::

    openssl pkeyutl -verify -pubin -inkey KEY.pub -rawin -in manifest.json -sigfile manifest.sig

From dpbundle 0.3 the checksum list ``SHA256SUMS`` (every file but the manifest and the
signatures) is signed too, twice: ``SHA256SUMS.sig`` (raw Ed25519, as above) and
``SHA256SUMS.sshsig`` (an OpenSSH signature in the SSHSIG format of OpenSSH's PROTOCOL.sshsig,
namespace :data:`SSHSIG_NAMESPACE`, hash sha512), so that the file people check with
``sha256sum -c`` is itself the signed object::

    openssl pkeyutl -verify -pubin -inkey KEY.pub -rawin -in SHA256SUMS -sigfile SHA256SUMS.sig
    ssh-keygen -Y verify -f allowed_signers -I publisher -n dpbundle -s SHA256SUMS.sshsig < SHA256SUMS

Files written by :func:`write_keypair` (``dpbundle keygen --out PATH``):

- ``PATH.key``: the private key, PKCS#8 PEM, mode 0600, optionally encrypted with a passphrase
  (read from ``--passphrase-file`` or the environment variable ``DPBUNDLE_KEY_PASSPHRASE``,
  never from a plain command-line value);
- ``PATH.pub``: the public key, SubjectPublicKeyInfo PEM;
- ``PATH.allowed_signers``: the public key as an OpenSSH ``allowed_signers`` line
  (:func:`allowed_signers_line`: principal :data:`SSHSIG_PRINCIPAL`, namespace
  :data:`SSHSIG_NAMESPACE`), the file ``ssh-keygen -Y verify -f`` reads.

The key fingerprint is the SHA-256 of the raw 32-byte public key, in hex.
"""
from __future__ import annotations

import base64
import hashlib
import os
import struct
import sys
from pathlib import Path
from typing import Union


from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

# the variable's name is also in the command line's help: a module of its own, without cryptography
from dpbundle.release.bundle.passphrase_env import PASSPHRASE_ENV

__all__ = [
    "PASSPHRASE_ENV",
    "KeyFileError",
    "generate_private_key",
    "write_keypair",
    "read_passphrase",
    "load_private_key",
    "load_public_key",
    "public_key_pem",
    "public_key_fingerprint",
    "sign",
    "verify",
    "SSHSIG_NAMESPACE",
    "SSHSIG_PRINCIPAL",
    "openssh_public_key_line",
    "allowed_signers_line",
    "sshsig_sign",
    "allowed_signers_path",
    "sign_checksum_list",
    "CHECKSUM_SIGNATURES",
]

SIGNATURE_SIZE = 64

PublicKeyLike = Union[Ed25519PublicKey, Ed25519PrivateKey, bytes, str]


class KeyFileError(Exception):
    """A key file cannot be written or read (exists, wrong type, wrong or missing passphrase)."""


def generate_private_key() -> Ed25519PrivateKey:
    """A new Ed25519 private key (from the OS CSPRNG)."""
    return Ed25519PrivateKey.generate()


def _key_paths(out: Path) -> tuple[Path, Path]:
    out = Path(out)
    return out.with_name(out.name + ".key"), out.with_name(out.name + ".pub")


def allowed_signers_path(out: Path) -> Path:
    """``PATH.allowed_signers``, written beside ``PATH.pub`` by :func:`write_keypair`."""
    out = Path(out)
    return out.with_name(out.name + ".allowed_signers")


def _as_bytes_passphrase(passphrase: bytes | str | None) -> bytes | None:
    if passphrase is None:
        return None
    if isinstance(passphrase, str):
        passphrase = passphrase.encode("utf-8")
    if not isinstance(passphrase, bytes):
        raise TypeError("passphrase must be bytes, str or None")
    if not passphrase:
        raise KeyFileError("the passphrase is empty")
    return passphrase


def read_passphrase(passphrase_file: Path | None = None, *, env: dict | None = None) -> bytes | None:
    """The key passphrase: the first line of ``passphrase_file`` if given, else the environment
    variable ``DPBUNDLE_KEY_PASSPHRASE`` if set, else None (no passphrase)."""
    if passphrase_file is not None:
        try:
            text = Path(passphrase_file).read_bytes()
        except OSError as exc:
            raise KeyFileError(f"{passphrase_file}: cannot read the passphrase file: {exc.strerror}") from exc
        line = text.splitlines()[0] if text.splitlines() else b""
        if not line:
            raise KeyFileError(f"{passphrase_file}: the passphrase file is empty")
        return line
    env = os.environ if env is None else env
    value = env.get(PASSPHRASE_ENV)
    if value is None:
        return None
    if not value:
        raise KeyFileError(f"{PASSPHRASE_ENV} is set but empty")
    return value.encode("utf-8")


def _write_new(path: Path, data: bytes, mode: int) -> None:
    # O_EXCL: never overwrite; the mode is applied at creation (and again, against a umask).
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fd = -1
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        if fd >= 0:
            os.close(fd)


def write_keypair(out: Path, passphrase: bytes | str | None = None,
                  key: Ed25519PrivateKey | None = None) -> tuple[Path, Path]:
    """Write ``out.key`` (PKCS#8 PEM, 0600, encrypted if ``passphrase``), ``out.pub`` and
    ``out.allowed_signers`` (:func:`allowed_signers_line`, for ``ssh-keygen -Y verify``).

    Refuses (:class:`KeyFileError`) if either file exists; nothing is written then.
    Returns ``(key_path, pub_path)``.
    """
    key_path, pub_path = _key_paths(out)
    signers_path = allowed_signers_path(out)
    for p in (key_path, pub_path, signers_path):
        if p.exists() or p.is_symlink():
            raise KeyFileError(f"{p}: already exists; refusing to overwrite a key")
    if not key_path.parent.is_dir():
        raise KeyFileError(f"{key_path.parent}: no such directory")
    passphrase = _as_bytes_passphrase(passphrase)
    key = key or generate_private_key()
    encryption = (serialization.BestAvailableEncryption(passphrase) if passphrase
                  else serialization.NoEncryption())
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    _write_new(key_path, private_pem, 0o600)
    try:
        _write_new(pub_path, public_key_pem(key).encode("ascii"), 0o644)
        _write_new(signers_path, (allowed_signers_line(key) + "\n").encode("ascii"), 0o644)
    except BaseException:
        for p in (key_path, pub_path):
            p.unlink(missing_ok=True)
        raise
    return key_path, pub_path


def load_private_key(path: Path, passphrase: bytes | str | None = None) -> Ed25519PrivateKey:
    """Read an Ed25519 private key (PKCS#8 PEM) written by :func:`write_keypair`."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KeyFileError(f"{path}: cannot read the private key: {exc.strerror}") from exc
    if b"PUBLIC KEY-----" in data and b"PRIVATE KEY-----" not in data:
        raise KeyFileError(f"{path}: this is a public key; the private key is the .key file")
    pw = _as_bytes_passphrase(passphrase)
    try:
        key = serialization.load_pem_private_key(data, password=pw)
    except TypeError as exc:
        if pw is None:
            raise KeyFileError(
                f"{path}: the private key is passphrase-protected; give --passphrase-file or set {PASSPHRASE_ENV}"
            ) from exc
        raise KeyFileError(f"{path}: the private key is not encrypted; do not give a passphrase") from exc
    except ValueError as exc:
        raise KeyFileError(f"{path}: cannot load the private key (wrong passphrase or not a PEM key)") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: not an Ed25519 private key ({type(key).__name__})")
    if os.name == "posix" and path.stat().st_mode & 0o077:
        print(f"warning: {path}: the private key is readable by other users (chmod 600 it)", file=sys.stderr)
    return key


def load_public_key(source: Path | bytes | str) -> Ed25519PublicKey:
    """An Ed25519 public key from a PEM file path or PEM text/bytes."""
    if isinstance(source, Path) or (isinstance(source, str) and "-----BEGIN" not in source):
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise KeyFileError(f"{source}: cannot read the public key: {exc.strerror}") from exc
    else:
        data = source.encode("ascii") if isinstance(source, str) else source
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as exc:
        raise KeyFileError("not a PEM public key") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"not an Ed25519 public key ({type(key).__name__})")
    return key


def _public(key: PublicKeyLike) -> Ed25519PublicKey:
    if isinstance(key, Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, Ed25519PublicKey):
        return key
    if isinstance(key, (bytes, str)):
        return load_public_key(key if isinstance(key, bytes) else key)
    raise TypeError(f"expected an Ed25519 key or PEM, got {type(key).__name__}")


def public_key_pem(key: PublicKeyLike) -> str:
    """SubjectPublicKeyInfo PEM of the (public half of the) key."""
    return _public(key).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode("ascii")


def public_key_fingerprint(pub: PublicKeyLike) -> str:
    """SHA-256 of the raw 32-byte Ed25519 public key, lowercase hex (64 characters)."""
    raw = _public(pub).public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def sign(private_key: Ed25519PrivateKey, data: bytes) -> bytes:
    """Raw 64-byte Ed25519 signature of ``data`` (the exact bytes, e.g. of manifest.json)."""
    if not isinstance(private_key, Ed25519PrivateKey):
        raise TypeError("sign() needs an Ed25519PrivateKey (see load_private_key)")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError("sign() signs bytes; encode text first (the signature covers exact bytes)")
    return private_key.sign(bytes(data))


def verify(pub: PublicKeyLike, data: bytes, sig: bytes) -> bool:
    """True iff ``sig`` is a valid Ed25519 signature of ``data`` under ``pub``; never raises for a bad signature."""
    if not isinstance(data, (bytes, bytearray, memoryview)) or not isinstance(sig, (bytes, bytearray, memoryview)):
        raise TypeError("verify() takes bytes for data and signature")
    if isinstance(pub, Ed25519PrivateKey):
        raise TypeError("verify() takes the public key")
    if len(sig) != SIGNATURE_SIZE:
        return False
    try:
        _public(pub).verify(bytes(sig), bytes(data))
    except InvalidSignature:
        return False
    return True


# ------------------------------------------------------------------ OpenSSH signatures (SSHSIG)

SSHSIG_NAMESPACE = "dpbundle"     # ssh-keygen -Y verify -n dpbundle: a signature made for nothing else
SSHSIG_PRINCIPAL = "publisher"    # the identity (-I) the allowed_signers line written by keygen names
SSHSIG_HASH = "sha512"
_SSHSIG_MAGIC = b"SSHSIG"
_SSHSIG_VERSION = 1
_SSH_ED25519 = b"ssh-ed25519"
_ARMOR_BEGIN, _ARMOR_END = "-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----"
_ARMOR_WIDTH = 70                 # ssh-keygen's line width


def _ssh_string(data: bytes) -> bytes:
    """An SSH wire ``string`` (RFC 4251): a 4-byte big-endian length, then the bytes."""
    return struct.pack(">I", len(data)) + data


def _ssh_public_blob(key: PublicKeyLike) -> bytes:
    """The SSH wire encoding of an Ed25519 public key: string "ssh-ed25519", string key (32 bytes)."""
    raw = _public(key).public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return _ssh_string(_SSH_ED25519) + _ssh_string(raw)


def openssh_public_key_line(key: PublicKeyLike) -> str:
    """The public key as OpenSSH writes it (``ssh-ed25519 AAAA...``), without a comment."""
    return f"{_SSH_ED25519.decode()} {base64.b64encode(_ssh_public_blob(key)).decode('ascii')}"


def allowed_signers_line(key: PublicKeyLike, principal: str = SSHSIG_PRINCIPAL) -> str:
    """The ``allowed_signers`` line (ssh-keygen(1), ALLOWED SIGNERS) that pins ``key`` as
    ``principal`` for dpbundle's namespace only:
    ``publisher namespaces="dpbundle" ssh-ed25519 AAAA...``."""
    if not principal or any(c.isspace() or c in '",*?!' for c in principal):
        raise ValueError(f"principal {principal!r}: no spaces, quotes, commas or patterns")
    return f'{principal} namespaces="{SSHSIG_NAMESPACE}" {openssh_public_key_line(key)}'


def _sshsig_signed_data(message: bytes, namespace: str) -> bytes:
    """What an SSHSIG signature signs (PROTOCOL.sshsig): MAGIC, namespace, reserved (empty),
    the hash algorithm and the message's hash."""
    return (_SSHSIG_MAGIC + _ssh_string(namespace.encode("utf-8")) + _ssh_string(b"")
            + _ssh_string(SSHSIG_HASH.encode()) + _ssh_string(hashlib.sha512(message).digest()))


def sshsig_sign(private_key: Ed25519PrivateKey, message: bytes, namespace: str = SSHSIG_NAMESPACE) -> bytes:
    """An armored OpenSSH signature of ``message`` (what ``ssh-keygen -Y sign -n NAMESPACE``
    writes for an Ed25519 key; ``ssh-keygen -Y verify`` checks it, OpenSSH >= 8.1)."""
    if not isinstance(private_key, Ed25519PrivateKey):
        raise TypeError("sshsig_sign() needs an Ed25519PrivateKey (see load_private_key)")
    if not namespace:
        raise ValueError("an SSHSIG namespace is never empty")
    signature = private_key.sign(_sshsig_signed_data(bytes(message), namespace))
    blob = (_SSHSIG_MAGIC + struct.pack(">I", _SSHSIG_VERSION) + _ssh_string(_ssh_public_blob(private_key))
            + _ssh_string(namespace.encode("utf-8")) + _ssh_string(b"") + _ssh_string(SSHSIG_HASH.encode())
            + _ssh_string(_ssh_string(_SSH_ED25519) + _ssh_string(signature)))
    text = base64.b64encode(blob).decode("ascii")
    lines = [_ARMOR_BEGIN, *(text[i:i + _ARMOR_WIDTH] for i in range(0, len(text), _ARMOR_WIDTH)), _ARMOR_END]
    return ("\n".join(lines) + "\n").encode("ascii")


CHECKSUM_SIGNATURES = ("SHA256SUMS.sig", "SHA256SUMS.sshsig")


def sign_checksum_list(private_key: Ed25519PrivateKey, sums: bytes) -> dict[str, bytes]:
    """The two signatures of a bundle's ``SHA256SUMS`` bytes, by file name:
    ``SHA256SUMS.sig`` (raw Ed25519, :func:`sign`) and ``SHA256SUMS.sshsig`` (:func:`sshsig_sign`)."""
    return {"SHA256SUMS.sig": sign(private_key, sums), "SHA256SUMS.sshsig": sshsig_sign(private_key, sums)}


def _make_key_directory(folder: Path) -> Path | None:
    """Create the missing folder for a new key pair (0700: it will hold a private key);
    returns the folder it created, or None if it existed. KeyFileError if it cannot."""
    if folder.is_dir():
        return None
    if folder.exists():
        raise KeyFileError(f"{folder}: exists and is not a directory")
    try:
        folder.mkdir(parents=True, mode=0o700)
    except OSError as exc:
        raise KeyFileError(f"{folder}: cannot create the directory for the keys: {exc.strerror}") from exc
    return folder


