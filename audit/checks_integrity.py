"""Check 1, integrity: the manifest's Ed25519 signature, every file's hash and size, no missing
and no unlisted file, no unsafe names or links; from dpbundle 0.3, the signed checksum list.

Bundles made by dpbundle 0.3 and later also sign ``SHA256SUMS`` (what ``sha256sum -c`` checks)
twice, with the same key: ``SHA256SUMS.sig`` (raw Ed25519) and ``SHA256SUMS.sshsig`` (OpenSSH's
SSHSIG format, PROTOCOL.sshsig, namespace ``dpbundle``). For those bundles both are required and
verified here against the key the manifest is verified with (the pinned one when --pubkey is
given), and SHA256SUMS must list exactly the manifest's other files with the manifest's hashes.
The SSHSIG parsing and verification below is this module's own (it shares no code with the
release's writer)."""
from __future__ import annotations

import base64
import binascii
import hashlib
import re
import struct
from dataclasses import dataclass

from .bundle_io import BundleFileError, safe_name
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_integrity", "load_public_key", "PublicKeyError", "PinnedKey", "parse_pin", "HEX_PIN",
           "made_since", "SIGNED_CHECKSUMS_SINCE", "CHECKSUM_FILES", "SSHSIG_NAMESPACE", "verify_sshsig",
           "SshsigError"]

UNSIGNED = ("manifest.json", "manifest.sig")
SHA256SUMS, SHA256SUMS_SIG, SHA256SUMS_SSHSIG = "SHA256SUMS", "SHA256SUMS.sig", "SHA256SUMS.sshsig"
CHECKSUM_FILES = (SHA256SUMS, SHA256SUMS_SIG, SHA256SUMS_SSHSIG)
SIGNED_CHECKSUMS_SINCE = (0, 3)     # the dpbundle version whose bundles sign SHA256SUMS
SSHSIG_NAMESPACE = "dpbundle"
MAX_CHECKSUM_BYTES = 1024 * 1024    # SHA256SUMS and its signatures are a few hundred bytes

# 64 hex characters, optionally written "sha256:<hex>": a key's fingerprint (SHA-256 of the raw
# 32-byte Ed25519 key, as `dpbundle keygen` prints it and manifest.json records it) or the raw key
# itself in hex. Which one it is, is decided against the bundle's key (see PinnedKey).
HEX_PIN = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")


class PublicKeyError(ValueError):
    """A --pubkey file that is not an Ed25519 public key."""


@dataclass(frozen=True)
class PinnedKey:
    """What --pubkey pins: a whole public key (``key``), or 64 hex characters (``hex``, lowercase)
    that are either the key's fingerprint or the raw key in hex. Either way the signature is then
    verified with one definite key, never with whatever key the bundle carries."""

    key: object | None = None
    hex: str | None = None

    def describe(self) -> str:
        return "the pinned key" if self.key is not None else f"the pinned fingerprint {self.hex}"


def parse_pin(data: bytes) -> PinnedKey:
    """A :class:`PinnedKey` from the text of --pubkey (a fingerprint) or a key file's bytes."""
    m = HEX_PIN.fullmatch(data.strip().decode("ascii", "replace"))
    if m:
        return PinnedKey(hex=m.group(1).lower())
    return PinnedKey(key=load_public_key(data))


def load_public_key(data: bytes):
    """An Ed25519 public key from PEM, OpenSSH, raw 32 bytes, or 64 hex characters."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    text = data.strip()
    try:
        if text.startswith(b"-----BEGIN"):
            key = serialization.load_pem_public_key(text)
        elif text.startswith(b"ssh-ed25519"):
            key = serialization.load_ssh_public_key(text)
        elif len(data) == 32:
            key = Ed25519PublicKey.from_public_bytes(data)
        elif re.fullmatch(rb"[0-9a-fA-F]{64}", text):
            key = Ed25519PublicKey.from_public_bytes(bytes.fromhex(text.decode()))
        else:
            try:
                raw = base64.b64decode(text, validate=True)
            except ValueError:
                raw = b""
            if len(raw) == 32:
                key = Ed25519PublicKey.from_public_bytes(raw)
            else:
                key = serialization.load_der_public_key(data)
    except (ValueError, TypeError) as e:
        raise PublicKeyError(f"not a readable public key ({e})") from None
    except Exception as e:  # cryptography's UnsupportedAlgorithm etc.
        raise PublicKeyError(f"not a readable public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise PublicKeyError(f"not an Ed25519 public key ({type(key).__name__})")
    return key


def made_since(manifest, version: tuple[int, int]) -> bool:
    """Whether manifest.json's ``dpbundle_version`` is ``version`` (major, minor) or later. A
    version that does not parse counts as later (the newest rules apply to it)."""
    made = manifest.get("dpbundle_version") if isinstance(manifest, dict) else None
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?", str(made)) if made is not None else None
    if not m:
        return True
    return (int(m.group(1)), int(m.group(2) or 0)) >= version


def _raw(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check_integrity(ctx: AuditContext, pinned_key=None) -> CheckResult:
    """``pinned_key``: a :class:`PinnedKey` (or an Ed25519PublicKey) from --pubkey, or None (then
    the manifest's own key is used and a warning says the key was not pinned)."""
    r = CheckResult("integrity")
    pin = pinned_key if pinned_key is None or isinstance(pinned_key, PinnedKey) else PinnedKey(key=pinned_key)
    b = ctx.bundle
    for p in b.problems:
        r.fail(p)
    # -- manifest and signature ----------------------------------------------------------
    try:
        manifest_bytes = b.read_bytes("manifest.json")
    except BundleFileError as e:
        r.fail(f"manifest.json: {e}")
        r.detail = "no usable manifest"
        return r
    manifest, sig_ok, key = _check_signature(ctx, manifest_bytes, pin, r)
    # -- files ---------------------------------------------------------------------------
    if not isinstance(manifest, dict):
        r.detail = "manifest unusable"
        return r
    files = manifest.get("files")
    if not isinstance(files, list):
        r.fail("manifest.json: 'files' is missing or not a list")
        return r
    listed: set[str] = set()
    checked = 0
    for i, entry in enumerate(files):
        listing = _manifest_entry(i, entry, listed, r)
        if listing is not None and _file_matches(b, *listing, r):
            checked += 1
    for name in sorted(b.files):
        if name not in listed and name not in UNSIGNED:
            r.fail(f"{name}: in the bundle but not listed in the manifest")
    signed_sums = made_since(manifest, SIGNED_CHECKSUMS_SINCE)
    if signed_sums:
        _check_signed_checksums(b, key, files, r)
    r.facts.update({"files_checked": checked, "signature_valid": sig_ok})
    if not r.failed:
        pinned = "pinned key" if pin is not None else "key in the manifest (key not pinned)"
        r.detail = f"signature valid ({pinned}); {checked} files match their SHA-256 and size"
        if signed_sums:
            r.detail += "; SHA256SUMS lists them and its Ed25519 and OpenSSH signatures are valid"
    return r


def _check_signature(ctx: AuditContext, manifest_bytes: bytes, pin: PinnedKey | None,
                     r: CheckResult) -> tuple[object, bool, object]:
    """(manifest.json's data or None, whether manifest.sig is a valid signature of its bytes,
    the key it was verified with or None)."""
    try:
        manifest = ctx.json("manifest.json")
    except Missing as e:
        manifest = None
        r.fail(str(e))
    try:
        sig = ctx.bundle.read_bytes("manifest.sig")
    except BundleFileError as e:
        sig = None
        r.fail(f"manifest.sig: {e}")
    embedded = _embedded_key(manifest, r, required=pin is None)
    key = _choose_key(pin, embedded, r)
    sig_ok = _verify(key, sig, manifest_bytes, pin, r)
    if key is not None:
        _check_declared_key(manifest, key, pin, r)
    return manifest, sig_ok, key


def _manifest_entry(i: int, entry, listed: set[str], r: CheckResult) -> tuple[str, str, int] | None:
    """(path, sha256, size) of the manifest's i-th file entry, if well-formed and listed once."""
    if not isinstance(entry, dict):
        r.fail(f"manifest.json: files[{i}] is not an object")
        return None
    path = entry.get("path")
    try:
        safe_name(path)
    except BundleFileError as e:
        r.fail(f"manifest.json: files[{i}].path: unsafe name ({e})")
        return None
    if path in UNSIGNED:
        r.fail(f"manifest.json: files[{i}] lists {path}, which cannot be in its own manifest")
        return None
    if path in listed:
        r.fail(f"manifest.json: {path} listed twice")
        return None
    listed.add(path)
    sha, size = entry.get("sha256"), entry.get("size")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        r.fail(f"manifest.json: {path}: sha256 is not 64 lowercase hex characters")
        return None
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        r.fail(f"manifest.json: {path}: size is not a non-negative integer")
        return None
    return path, sha, size


def _file_matches(b, path: str, sha: str, size: int, r: CheckResult) -> bool:
    """Whether the bundle's file has the listed size and SHA-256 (failing the check otherwise)."""
    if not b.has(path):
        r.fail(f"{path}: listed in the manifest but missing from the bundle")
        return False
    if b.files[path] != size:
        r.fail(f"{path}: size {b.files[path]} bytes, the manifest says {size}")
        return False
    try:
        got, real_size = b.digest(path)
    except BundleFileError as e:
        r.fail(f"{path}: {e}")
        return False
    if real_size != size:
        r.fail(f"{path}: size {real_size} bytes, the manifest says {size}")
    elif got != sha:
        r.fail(f"{path}: SHA-256 {got[:16]}... differs from the manifest's {sha[:16]}...")
    else:
        return True
    return False


def _embedded_key(manifest, r: CheckResult, required: bool):
    """The key written in manifest.json (public_key.pem), or None. A missing pem fails the
    check only when nothing was pinned (the signature then has no key at all)."""
    pem = None
    if isinstance(manifest, dict) and isinstance(manifest.get("public_key"), dict):
        pem = manifest["public_key"].get("pem")
    if not isinstance(pem, str):
        if required:
            r.fail("manifest.json: no public_key.pem to verify the signature with (and no --pubkey)")
        return None
    try:
        return load_public_key(pem.encode("utf-8"))
    except PublicKeyError as e:
        r.fail(f"manifest.json: public_key.pem: {e}")
        return None


def _choose_key(pin: PinnedKey | None, embedded, r: CheckResult):
    """The key the signature is verified with: the pinned one, or (not pinned) the manifest's."""
    if pin is None:
        if embedded is not None:
            r.warn("key not pinned: the signature was checked against the key inside the manifest, "
                   "which anyone could have re-signed the bundle with; pass --pubkey with the "
                   "publisher's key (or its fingerprint) to pin it")
        r.facts["key_pinned"] = False
        return embedded
    r.facts["key_pinned"] = True
    if pin.key is not None:
        r.facts["pinned_by"] = "key"
        return pin.key
    if embedded is not None:
        raw = _raw(embedded)
        fp = hashlib.sha256(raw).hexdigest()
        if pin.hex == fp:
            r.facts["pinned_by"] = "fingerprint"
            return embedded
        if pin.hex == raw.hex():
            r.facts["pinned_by"] = "raw key (hex)"
            return embedded
        r.fail(f"manifest.json: the bundle's public key (fingerprint {fp}) is not the pinned key "
               f"{pin.hex} (neither its SHA-256 fingerprint nor its raw bytes in hex)")
        return None
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    r.facts["pinned_by"] = "raw key (hex)"
    try:   # no key in the manifest to compare a fingerprint with: the hex can only be the key
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(pin.hex))
    except ValueError:
        r.fail(f"--pubkey {pin.hex}: the manifest has no public key to compare this fingerprint with")
        return None


def _verify(key, sig: bytes | None, manifest_bytes: bytes, pin: PinnedKey | None, r: CheckResult) -> bool:
    """Verify the Ed25519 signature of the manifest's exact bytes."""
    if key is None or sig is None:
        return False
    from cryptography.exceptions import InvalidSignature

    if len(sig) != 64:
        r.fail(f"manifest.sig: {len(sig)} bytes, an Ed25519 signature has 64")
        return False
    try:
        key.verify(sig, manifest_bytes)
        return True
    except InvalidSignature:
        r.fail("manifest.sig: the signature of manifest.json is not valid"
               + (f" for {pin.describe()}" if pin is not None else ""))
        return False


def _check_declared_key(manifest, key, pin: PinnedKey | None, r: CheckResult) -> None:
    """manifest.json's public_key (fingerprint, pem) agrees with the key that verified it."""
    raw = _raw(key)
    fp = hashlib.sha256(raw).hexdigest()
    r.facts["key_fingerprint"] = fp
    if not (isinstance(manifest, dict) and isinstance(manifest.get("public_key"), dict)):
        return
    declared = manifest["public_key"].get("fingerprint")
    pem = manifest["public_key"].get("pem")
    if isinstance(declared, str) and declared.lower() != fp:
        if pin is not None:
            r.fail(f"manifest.json: public_key.fingerprint {declared} is not the pinned key's {fp}")
        else:
            r.fail(f"manifest.json: public_key.fingerprint {declared} does not match its own pem ({fp})")
    if pin is not None and isinstance(pem, str):
        try:
            if _raw(load_public_key(pem.encode())) != raw:
                r.fail("manifest.json: public_key.pem is not the pinned key")
        except PublicKeyError:
            pass   # already reported by _embedded_key


# ------------------------------------------------------------- the signed checksum list (>= 0.3)

def _check_signed_checksums(b, key, files: list, r: CheckResult) -> None:
    """SHA256SUMS, SHA256SUMS.sig and SHA256SUMS.sshsig: present, listed in the manifest, both
    signatures valid for ``key`` (the manifest's verifying key), and SHA256SUMS listing exactly
    the manifest's other files with the manifest's hashes."""
    listed = {e.get("path"): e.get("sha256") for e in files if isinstance(e, dict)}
    contents = {name: _checksum_file(b, name, name in listed, r) for name in CHECKSUM_FILES}
    sums = contents[SHA256SUMS]
    if sums is None:
        return
    _check_sums_listing(sums, {p: h for p, h in listed.items() if p not in CHECKSUM_FILES}, r)
    if key is None:
        return
    sig = contents[SHA256SUMS_SIG]
    if sig is not None and not _ed25519_ok(key, sig, sums):
        r.fail(f"{SHA256SUMS_SIG}: not a valid Ed25519 signature of SHA256SUMS by the bundle's key")
    armored = contents[SHA256SUMS_SSHSIG]
    if armored is not None:
        try:
            verify_sshsig(key, armored, sums, SSHSIG_NAMESPACE)
        except SshsigError as e:
            r.fail(f"{SHA256SUMS_SSHSIG}: {e}")


def _checksum_file(b, name: str, in_manifest: bool, r: CheckResult) -> bytes | None:
    """The bytes of SHA256SUMS or one of its signatures, or None (failing the check: a bundle
    made by dpbundle 0.3 or later has all three, listed in its manifest)."""
    why = "a bundle made by dpbundle 0.3 or later signs its checksum list"
    if not in_manifest:
        r.fail(f"manifest.json: {name} is not listed ({why})")
    if not b.has(name):
        if in_manifest:
            return None            # "listed in the manifest but missing" is already reported
        r.fail(f"{name}: missing ({why})")
        return None
    if b.files[name] > MAX_CHECKSUM_BYTES:
        r.fail(f"{name}: {b.files[name]} bytes, more than the {MAX_CHECKSUM_BYTES} of a checksum list")
        return None
    try:
        return b.read_bytes(name)
    except BundleFileError as e:
        r.fail(f"{name}: {e}")
        return None


def _ed25519_ok(key, sig: bytes, data: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    if len(sig) != 64:
        return False
    try:
        key.verify(sig, data)
    except InvalidSignature:
        return False
    return True


_SUM_LINE = re.compile(r"([0-9a-f]{64})  ([A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*)")


def _check_sums_listing(sums: bytes, expected: dict, r: CheckResult) -> None:
    """SHA256SUMS lists each of ``expected`` (name -> the manifest's SHA-256) once, with that
    hash, and nothing else."""
    try:
        text = sums.decode("ascii")
    except UnicodeDecodeError:
        r.fail("SHA256SUMS: not ASCII text")
        return
    seen: dict[str, str] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        m = _SUM_LINE.fullmatch(line)
        if not m:
            r.fail(f"SHA256SUMS line {no}: not '<64 lowercase hex>  <file name>'")
            return
        if m.group(2) in seen:
            r.fail(f"SHA256SUMS line {no}: {m.group(2)} listed twice")
            return
        seen[m.group(2)] = m.group(1)
    if text and not text.endswith("\n"):
        r.fail("SHA256SUMS: the last line has no newline")
    for name in sorted(set(expected) - set(seen)):
        r.fail(f"SHA256SUMS: does not list {name}, which the manifest lists")
    for name in sorted(set(seen) - set(expected)):
        r.fail(f"SHA256SUMS: lists {name}, which the manifest does not list (or lists as a signature)")
    for name in sorted(set(seen) & set(expected)):
        if seen[name] != expected[name]:
            r.fail(f"SHA256SUMS: {name}'s SHA-256 differs from the manifest's")


class SshsigError(ValueError):
    """An SSHSIG signature that is malformed or does not verify (the message says which part)."""


class _SshReader:
    """Reads SSH wire types (RFC 4251) from bytes; SshsigError when they run out."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def raw(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise SshsigError("truncated")
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def uint32(self) -> int:
        return struct.unpack(">I", self.raw(4))[0]

    def string(self) -> bytes:
        return self.raw(self.uint32())

    def done(self) -> bool:
        return self.at == len(self.data)


def _dearmor(armored: bytes) -> bytes:
    """The SSHSIG blob inside '-----BEGIN SSH SIGNATURE-----' ... '-----END SSH SIGNATURE-----'."""
    try:
        lines = armored.decode("ascii").strip().splitlines()
    except UnicodeDecodeError:
        raise SshsigError("not ASCII text") from None
    if len(lines) < 3 or lines[0].strip() != "-----BEGIN SSH SIGNATURE-----" \
            or lines[-1].strip() != "-----END SSH SIGNATURE-----":
        raise SshsigError("not an armored SSH signature (BEGIN/END SSH SIGNATURE lines)")
    try:
        return base64.b64decode("".join(x.strip() for x in lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        raise SshsigError("the armored signature is not base64") from None


def verify_sshsig(key, armored: bytes, message: bytes, namespace: str) -> None:
    """Verify an armored SSHSIG signature (OpenSSH PROTOCOL.sshsig, version 1, Ed25519) of
    ``message`` by the Ed25519 public ``key`` in ``namespace``; SshsigError says why not."""
    rd = _SshReader(_dearmor(armored))
    if rd.raw(6) != b"SSHSIG":
        raise SshsigError("no SSHSIG magic")
    if rd.uint32() != 1:
        raise SshsigError("not SSHSIG version 1")
    pub, ns, reserved, hash_alg, sig_blob = (rd.string() for _ in range(5))
    if not rd.done():
        raise SshsigError("trailing bytes after the signature")
    pk = _SshReader(pub)
    if pk.string() != b"ssh-ed25519" or pk.string() != _raw(key) or not pk.done():
        raise SshsigError("signed by another key than the bundle's (or not an ssh-ed25519 key)")
    if ns != namespace.encode():
        raise SshsigError(f"namespace {ns.decode('utf-8', 'replace')!r}, not {namespace!r}")
    hashes = {b"sha512": hashlib.sha512, b"sha256": hashlib.sha256}
    if hash_alg not in hashes:
        raise SshsigError(f"hash algorithm {hash_alg.decode('ascii', 'replace')!r}, not sha512 or sha256")
    sg = _SshReader(sig_blob)
    if sg.string() != b"ssh-ed25519":
        raise SshsigError("not an ssh-ed25519 signature")
    sig = sg.string()
    if not sg.done():
        raise SshsigError("trailing bytes after the Ed25519 signature")

    def ssh_string(x: bytes) -> bytes:
        return struct.pack(">I", len(x)) + x

    signed = (b"SSHSIG" + ssh_string(ns) + ssh_string(reserved) + ssh_string(hash_alg)
              + ssh_string(hashes[hash_alg](message).digest()))
    if not _ed25519_ok(key, sig, signed):
        raise SshsigError("the OpenSSH signature of SHA256SUMS is not valid for the bundle's key")
