"""Check 1, integrity: the manifest's Ed25519 signature, every file's hash and size, no missing
and no unlisted file, no unsafe names or links."""
from __future__ import annotations

import base64
import hashlib
import re

from .bundle_io import BundleFileError, safe_name
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_integrity", "load_public_key", "PublicKeyError"]

UNSIGNED = ("manifest.json", "manifest.sig")


class PublicKeyError(ValueError):
    """A --pubkey file that is not an Ed25519 public key."""


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


def _raw(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def check_integrity(ctx: AuditContext, pinned_key=None) -> CheckResult:
    """``pinned_key``: an Ed25519PublicKey from --pubkey, or None (then the manifest's key is
    used and a warning says the key was not pinned)."""
    r = CheckResult("integrity")
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
    try:
        manifest = ctx.json("manifest.json")
    except Missing as e:
        manifest = None
        r.fail(str(e))
    try:
        sig = b.read_bytes("manifest.sig")
    except BundleFileError as e:
        sig = None
        r.fail(f"manifest.sig: {e}")
    key = pinned_key
    if key is None:
        pem = None
        if isinstance(manifest, dict) and isinstance(manifest.get("public_key"), dict):
            pem = manifest["public_key"].get("pem")
        if not isinstance(pem, str):
            r.fail("manifest.json: no public_key.pem to verify the signature with (and no --pubkey)")
        else:
            try:
                key = load_public_key(pem.encode("utf-8"))
            except PublicKeyError as e:
                r.fail(f"manifest.json: public_key.pem: {e}")
        if key is not None:
            r.warn("key not pinned: the signature was checked against the key inside the manifest; "
                   "pass --pubkey with the publisher's key to pin it")
            r.facts["key_pinned"] = False
    else:
        r.facts["key_pinned"] = True
    sig_ok = False
    if key is not None and sig is not None:
        from cryptography.exceptions import InvalidSignature

        if len(sig) != 64:
            r.fail(f"manifest.sig: {len(sig)} bytes, an Ed25519 signature has 64")
        else:
            try:
                key.verify(sig, manifest_bytes)
                sig_ok = True
            except InvalidSignature:
                r.fail("manifest.sig: the signature of manifest.json is not valid"
                       + (" for the pinned key" if pinned_key is not None else ""))
    if key is not None:
        raw = _raw(key)
        fp = hashlib.sha256(raw).hexdigest()
        r.facts["key_fingerprint"] = fp
        if isinstance(manifest, dict) and isinstance(manifest.get("public_key"), dict):
            declared = manifest["public_key"].get("fingerprint")
            pem = manifest["public_key"].get("pem")
            if isinstance(declared, str) and declared.lower() != fp:
                if pinned_key is not None:
                    r.fail(f"manifest.json: public_key.fingerprint {declared} is not the pinned key's {fp}")
                else:
                    r.fail(f"manifest.json: public_key.fingerprint {declared} does not match its own pem ({fp})")
            if pinned_key is not None and isinstance(pem, str):
                try:
                    if _raw(load_public_key(pem.encode())) != raw:
                        r.fail("manifest.json: public_key.pem is not the pinned key")
                except PublicKeyError as e:
                    r.fail(f"manifest.json: public_key.pem: {e}")
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
        if not isinstance(entry, dict):
            r.fail(f"manifest.json: files[{i}] is not an object")
            continue
        path = entry.get("path")
        try:
            safe_name(path)
        except BundleFileError as e:
            r.fail(f"manifest.json: files[{i}].path: unsafe name ({e})")
            continue
        if path in UNSIGNED:
            r.fail(f"manifest.json: files[{i}] lists {path}, which cannot be in its own manifest")
            continue
        if path in listed:
            r.fail(f"manifest.json: {path} listed twice")
            continue
        listed.add(path)
        sha, size = entry.get("sha256"), entry.get("size")
        if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            r.fail(f"manifest.json: {path}: sha256 is not 64 lowercase hex characters")
            continue
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            r.fail(f"manifest.json: {path}: size is not a non-negative integer")
            continue
        if not b.has(path):
            r.fail(f"{path}: listed in the manifest but missing from the bundle")
            continue
        if b.files[path] != size:
            r.fail(f"{path}: size {b.files[path]} bytes, the manifest says {size}")
            continue
        try:
            got, real_size = b.digest(path)
        except BundleFileError as e:
            r.fail(f"{path}: {e}")
            continue
        if real_size != size:
            r.fail(f"{path}: size {real_size} bytes, the manifest says {size}")
        elif got != sha:
            r.fail(f"{path}: SHA-256 {got[:16]}... differs from the manifest's {sha[:16]}...")
        else:
            checked += 1
    for name in sorted(b.files):
        if name not in listed and name not in UNSIGNED:
            r.fail(f"{name}: in the bundle but not listed in the manifest")
    r.facts.update({"files_checked": checked, "signature_valid": sig_ok})
    if not r.failed:
        pinned = "pinned key" if pinned_key is not None else "key in the manifest (key not pinned)"
        r.detail = f"signature valid ({pinned}); {checked} files match their SHA-256 and size"
    return r
