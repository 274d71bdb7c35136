"""`dpbundle preregister`: a signed record, published *before* the private run, that fixes the
spec, the signing key, the tool version and a commitment to a secret post-processing seed.

Files:
  REC          public JSON (``schemas/preregistration.schema.json``): spec_sha256 (the canonical
               public spec, as ``audit --spec`` computes it), configs_sha256 (the narrowed list, if
               any), the public key and its fingerprint, the dpbundle version, the seed commitment
               (:mod:`dpbundle.mechanisms.seeds`) and where the beacon value will come from;
  REC.sig      raw Ed25519 signature of REC's bytes (``openssl pkeyutl -verify -rawin``);
  SECRET       PRIVATE (0600, in the private directory by default): the secret and its salt.

``release --preregistration REC --beacon VALUE`` refuses a spec, list or key that differs from
the record, before anything is read or spent; the bundle then carries the record, its signature
and, in ``seeds.json``, the secret, the salt and the beacon value, so that anyone can check the
commitment and re-derive the seeds. ``configs_sha256`` is the SHA-256 of the list file's bytes:
the bundle publishes those bytes as ``configurations.yaml`` (``bundle.configurations_file``),
and the audit requires its SHA-256 to be the registered one and the selected configuration to be
in it.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


#: why a ``retries: resample`` spec cannot be pre-registered (yet)
RESAMPLE_NOT_PREREGISTERED = (
    "privacy.selection.retries: resample cannot be pre-registered yet: the beacon-bound seeds are "
    "the same at every attempt, so each attempt would redraw the same sample of the one model and "
    "only the criteria's noise would change; pre-register a refit spec, or release without "
    "pre-registration")


from dpbundle.mechanisms.seeds import SeedBinding, commitment, new_secret

from dpbundle.release.common import jsonschemas
from dpbundle.release.bundle import keys

__all__ = ["PREREG_FORMAT", "PreregistrationError", "Preregistration", "write_preregistration",
           "load_preregistration", "spec_sha256", "file_sha256", "seeds_document"]

PREREG_FORMAT = "dpbundle-preregistration/1"
SECRET_FORMAT = "dpbundle-preregistration-secret/1"
MAX_RECORD_BYTES = 256 * 1024


class PreregistrationError(Exception):
    """A pre-registration that cannot be written or does not match (message names the file)."""


def spec_sha256(spec: Any) -> str:
    """SHA-256 of the canonical JSON of the public spec (without private_data_sha256): the same
    number for the spec file, for ``audit --spec`` and for the bundle released from it."""
    from dpbundle.release.spec.load import canonical_json

    return hashlib.sha256(canonical_json(spec.public_dict())).hexdigest()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def configs_problem(spec: Any, configs: Path, allow_other_spec: bool = False) -> str | None:
    """Why ``configs`` cannot be registered with ``spec`` (None: it can), the checks ``release
    --configs`` makes: a regular file of at most the list size limit, a narrowed list of
    ``dpbundle sweep`` (schema, ids matching their configurations), every configuration in the
    spec's space, and swept on this spec (its ``spec_sha256``) unless ``allow_other_spec``."""
    from dpbundle.release.common.safe_io import LIST_BYTES, regular_file_problem
    from dpbundle.release.sweep.run import _spec_fingerprint, load_narrowed, read_list_document

    configs = Path(configs)
    problem = regular_file_problem(configs, "configuration list (--configs)", LIST_BYTES)
    if problem:
        return problem
    try:
        entries = load_narrowed(configs, spec)
    except ValueError as exc:
        return str(exc) if str(exc).startswith(str(configs)) else f"{configs}: {exc}"
    if not entries:
        return f"{configs}: lists no configurations"
    listed = (read_list_document(configs) or {}).get("spec_sha256")
    mine = _spec_fingerprint(spec)
    if listed is not None and listed != mine and not allow_other_spec:
        return (f"{configs}: this configuration list was swept on another version of the spec "
                f"(list spec_sha256 {listed}, this spec {mine}); a release would refuse it without "
                "--allow-other-spec. Re-run the sweep, or pass --allow-other-spec to register it anyway")
    return None


@dataclass(frozen=True)
class Preregistration:
    """A loaded record: its bytes (as signed), parsed document, signature and path."""

    path: Path
    record_bytes: bytes
    doc: dict
    signature: bytes

    @property
    def raw(self) -> bytes:
        """The record's bytes: the old name of ``record_bytes`` (outside the spec package no
        module reads an attribute named raw, the name of the spec's document)."""
        return self.record_bytes

    @property
    def commitment(self) -> str:
        return self.doc["seed_commitment"]["value"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def default_secret_path(record: Path) -> Path:
    """Where the secret goes unless told: the private directory (as transcripts), named after
    the record, never beside the record that will be published."""
    from dpbundle.release.bundle.write import private_dir

    return private_dir() / f"{Path(record).name}.secret.json"


def write_preregistration(spec: Any, private_key: Any, out: Path, *, beacon_source: str,
                          configs: Path | None = None, secret_out: Path | None = None,
                          version: str | None = None,
                          allow_other_spec: bool = False) -> tuple[Path, Path, Path]:
    """Write REC, REC.sig and the private SECRET; returns their paths. Refuses to overwrite, and
    refuses a ``configs`` list that a release with this spec would refuse (:func:`configs_problem`)."""
    from dpbundle.release import __version__

    if configs is not None:
        problem = configs_problem(spec, configs, allow_other_spec)
        if problem:
            raise PreregistrationError(problem)

    out = Path(out)
    sig_path = out.with_name(out.name + ".sig")
    secret_path = Path(secret_out) if secret_out is not None else default_secret_path(out)
    for p in (out, sig_path, secret_path):
        if p.exists() or p.is_symlink():
            raise PreregistrationError(f"{p}: already exists; refusing to overwrite")
        if not p.parent.is_dir():
            raise PreregistrationError(f"{p.parent}: no such directory")
    if not isinstance(beacon_source, str) or not beacon_source.strip():
        raise PreregistrationError("--beacon-source: say where the public value will come from "
                                   "(e.g. a randomness-beacon round and its address)")
    secret, salt = new_secret()
    pub = private_key.public_key()
    doc = {
        "format": PREREG_FORMAT,
        "created": _now(),
        "dpbundle_version": version or __version__,
        "spec_sha256": spec_sha256(spec),
        "configs_sha256": file_sha256(configs) if configs is not None else None,
        "title": spec.model.release.title or "",
        "privacy": {"epsilon_cap": spec.epsilon_cap},
        "public_key": {"algorithm": "Ed25519", "pem": keys.public_key_pem(pub),
                       "fingerprint": keys.public_key_fingerprint(pub)},
        "seed_commitment": {"algorithm": "sha256",
                            "construction": 'SHA-256("dpbundle-seed-commitment/1" || salt || secret)',
                            "value": commitment(secret, salt)},
        "beacon_source": beacon_source.strip(),
    }
    jsonschemas.validate(doc, "preregistration", document=str(out))
    raw = (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    secret_doc = {"format": SECRET_FORMAT, "record_sha256": hashlib.sha256(raw).hexdigest(),
                  "secret": secret, "salt": salt, "commitment": doc["seed_commitment"]["value"]}
    _write_private(secret_path, (json.dumps(secret_doc, indent=2) + "\n").encode("utf-8"))
    try:
        out.write_bytes(raw)
        sig_path.write_bytes(keys.sign(private_key, raw))
    except BaseException:
        for p in (out, sig_path, secret_path):
            p.unlink(missing_ok=True)
        raise
    return out, sig_path, secret_path


def _read_small(path: Path, what: str) -> bytes:
    import stat

    try:
        st = os.stat(path)
    except OSError as e:
        raise PreregistrationError(f"{path}: cannot read the {what} ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        raise PreregistrationError(f"{path}: the {what} is not a regular file")
    if st.st_size > MAX_RECORD_BYTES:
        raise PreregistrationError(f"{path}: the {what} is larger than {MAX_RECORD_BYTES} bytes")
    return Path(path).read_bytes()


def load_preregistration(path: Path) -> Preregistration:
    """Read REC and REC.sig; check the schema and the signature against the record's own key."""
    path = Path(path)
    raw = _read_small(path, "pre-registration record")
    sig = _read_small(path.with_name(path.name + ".sig"), "pre-registration signature")
    try:
        doc = json.loads(raw.decode("utf-8"))
        jsonschemas.validate(doc, "preregistration", document=str(path))
    except (UnicodeDecodeError, ValueError) as e:
        raise PreregistrationError(f"{path}: not a pre-registration record ({e})") from None
    if not keys.verify(keys.load_public_key(doc["public_key"]["pem"].encode()), raw, sig):
        raise PreregistrationError(f"{path}: the signature {path.name}.sig does not verify")
    return Preregistration(path, raw, doc, sig)


def check_against(rec: Preregistration, spec: Any, private_key: Any,
                  configs: Path | None) -> list[str]:
    """What differs between the record and this release (empty when everything matches)."""
    problems = []
    mine = spec_sha256(spec)
    if mine != rec.doc["spec_sha256"]:
        problems.append(f"the spec differs from the pre-registered one (spec_sha256 "
                        f"{rec.doc['spec_sha256']} registered, {mine} given)")
    fp = keys.public_key_fingerprint(private_key.public_key())
    if fp != rec.doc["public_key"]["fingerprint"]:
        problems.append(f"the signing key differs from the pre-registered one (fingerprint "
                        f"{rec.doc['public_key']['fingerprint']} registered, {fp} given)")
    registered = rec.doc.get("configs_sha256")
    given = file_sha256(configs) if configs is not None else None
    if registered != given:
        problems.append(f"the configuration list differs from the pre-registered one "
                        f"(configs_sha256 {registered} registered, {given} given)")
    return problems


def load_secret(path: Path, rec: Preregistration) -> tuple[str, str]:
    """(secret, salt) from the private file; it must open the record's commitment."""
    raw = _read_small(Path(path), "pre-registration secret")
    try:
        doc = json.loads(raw.decode("utf-8"))
        secret, salt = doc["secret"], doc["salt"]
        ok = commitment(secret, salt) == rec.commitment
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        raise PreregistrationError(f"{path}: not a pre-registration secret file") from None
    if not ok:
        raise PreregistrationError(f"{path}: this secret does not open the commitment of {rec.path}")
    return secret, salt


def seeds_document(rec: Preregistration, secret: str, salt: str, beacon: str) -> dict:
    """seeds.json of the bundle: everything anyone needs to check the commitment and derive the
    bound seeds (schemas/seeds.schema.json)."""
    SeedBinding(secret, beacon)  # validates
    return {
        "format": "dpbundle-seeds/1",
        "commitment": rec.commitment,
        "secret": secret,
        "salt": salt,
        "beacon": {"value": beacon, "source": rec.doc["beacon_source"]},
        "derivation": 'seed(purpose, k) = HMAC-SHA256(key = secret bytes, message = "dpbundle-seed/1"'
                      ' 0x1f beacon 0x1f purpose 0x1f decimal k), as a big-endian 256-bit integer; '
                      'numpy Generator(PCG64(seed))',
        "bound_purposes": ["sample round <k>", "sample scale", "projection"],
    }


