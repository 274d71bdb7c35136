"""Check ``seeds``: a pre-registered release (``dpbundle preregister``) kept its promises.

A bundle made with ``release --preregistration REC --beacon VALUE`` carries the record
(``preregistration.json``), its signature (``preregistration.json.sig``) and the opened seed
commitment (``seeds.json``). Anyone can check, with public information only:

* the record's signature (raw Ed25519 over its bytes) with the key it names, and that this key
  is the bundle's signing key (the manifest's, as verified by the integrity check);
* the bundle's spec is the registered one (canonical SHA-256, as ``audit --spec`` computes it);
* ``SHA-256("dpbundle-seed-commitment/1" || salt || secret)`` equals the registered commitment;
* the seeds of the sampling rounds and of the projection are
  ``HMAC-SHA256(secret, "dpbundle-seed/1" 0x1f beacon 0x1f purpose 0x1f k)`` (re-derived here);
  with a published model the ``rederivation`` check then rebuilds data.csv from them.

What nobody can check with the bundle alone: that the beacon value is what the record's
``beacon_source`` published (look it up there), and that the record was published before the
run (its ``created`` time is the publisher's word; a public archive of the record settles it).

This module re-implements the derivation (it must not import ``dpbundle.release``).
"""
from __future__ import annotations

import hashlib
import hmac
import re

from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_seeds", "derive_seed", "RECORD", "RECORD_SIG", "SEEDS"]

RECORD, RECORD_SIG, SEEDS = "preregistration.json", "preregistration.json.sig", "seeds.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")


def derive_seed(secret_hex: str, beacon: str, purpose: str, k: int) -> int:
    """The bound seed of the ``k``-th request of ``purpose`` (see the module docstring)."""
    msg = b"\x1f".join([b"dpbundle-seed/1", beacon.encode("utf-8"), purpose.encode("utf-8"),
                        str(int(k)).encode("ascii")])
    return int.from_bytes(hmac.new(bytes.fromhex(secret_hex), msg, hashlib.sha256).digest(), "big")


def _commitment(secret_hex: str, salt_hex: str) -> str:
    return hashlib.sha256(b"dpbundle-seed-commitment/1" + bytes.fromhex(salt_hex)
                          + bytes.fromhex(secret_hex)).hexdigest()


def _schema_problems(doc, name: str) -> list[str]:
    from .schema_util import validate

    return validate(doc, name)


def check_seeds(ctx: AuditContext) -> CheckResult:
    """See the module docstring; skipped for a bundle that was not pre-registered."""
    r = CheckResult("seeds")
    present = [f for f in (RECORD, RECORD_SIG, SEEDS) if ctx.bundle.has(f)]
    if not present:
        r.skip("the bundle was not pre-registered (no preregistration.json / seeds.json)")
        return r
    if len(present) < 3:
        missing = sorted({RECORD, RECORD_SIG, SEEDS} - set(present))
        r.fail(f"a pre-registered bundle needs {RECORD}, {RECORD_SIG} and {SEEDS}; missing: {missing}")
        return r
    try:
        record_bytes = ctx.bundle.read_bytes(RECORD)
        record, seeds = ctx.json(RECORD), ctx.json(SEEDS)
        signature = ctx.bundle.read_bytes(RECORD_SIG)
    except Exception as e:  # noqa: BLE001 - bundle_io errors carry a clear message
        r.fail(f"cannot read the pre-registration files: {e}")
        return r
    for name, doc, schema in ((RECORD, record, "preregistration"), (SEEDS, seeds, "seeds")):
        for p in _schema_problems(doc, schema)[:5]:
            r.fail(f"{name}: {p}")
    if r.failed:
        return r
    _check_record(ctx, r, record, record_bytes, signature)
    _check_commitment(r, record, seeds)
    if not r.failed:
        beacon = seeds["beacon"]
        r.facts.update({
            "spec_sha256": record["spec_sha256"], "record_created": record["created"],
            "seed_commitment": record["seed_commitment"]["value"],
            "beacon_value": beacon["value"], "beacon_source": beacon["source"],
            "projection_seed": f"{derive_seed(seeds['secret'], beacon['value'], 'projection', 0):064x}",
        })
        r.detail = ("pre-registered: the record's signature, key and spec agree with the bundle and "
                    "the published secret opens its seed commitment. Check by hand that the beacon "
                    f"value {beacon['value']!r} is what {beacon['source']!r} published, after the "
                    f"record's date ({record['created']})")
    return r


def _check_record(ctx: AuditContext, r: CheckResult, record: dict, raw: bytes, sig: bytes) -> None:
    from .checks_integrity import PublicKeyError, load_public_key

    try:
        key = load_public_key(record["public_key"]["pem"].encode("ascii"))
    except (PublicKeyError, UnicodeEncodeError) as e:
        r.fail(f"{RECORD}: its public key is unusable ({e})")
        return
    from cryptography.exceptions import InvalidSignature

    try:
        key.verify(sig, raw)
    except InvalidSignature:
        r.fail(f"{RECORD_SIG} does not verify {RECORD} with the key the record names")
    raw_key = key.public_bytes_raw()
    if hashlib.sha256(raw_key).hexdigest() != record["public_key"]["fingerprint"]:
        r.fail(f"{RECORD}: the fingerprint does not belong to its public key")
    try:
        manifest_fp = ctx.json("manifest.json")["public_key"]["fingerprint"]
    except (Missing, KeyError, TypeError):
        manifest_fp = None
    if manifest_fp != record["public_key"]["fingerprint"]:
        r.fail(f"the bundle is signed with key {manifest_fp}, the record registered "
               f"{record['public_key']['fingerprint']}")
    from .preregistration import canonical_sha256

    try:
        spec = ctx.json("spec.json")["spec"]
        bundle_sha = canonical_sha256(spec)
    except (Missing, KeyError, TypeError, ValueError) as e:
        r.fail(f"the bundle's spec cannot be compared with the record: {e}")
        return
    if bundle_sha != record["spec_sha256"]:
        r.fail(f"spec SHA-256: registered {record['spec_sha256']}, bundle {bundle_sha}")
    try:
        made = ctx.json("manifest.json").get("dpbundle_version")
    except (Missing, AttributeError):
        made = None
    if made is not None and made != record["dpbundle_version"]:
        r.warn(f"registered with dpbundle {record['dpbundle_version']}, released with {made}")


def _check_commitment(r: CheckResult, record: dict, seeds: dict) -> None:
    registered = record["seed_commitment"]["value"]
    if seeds["commitment"] != registered:
        r.fail(f"{SEEDS}: commitment {seeds['commitment']} is not the registered {registered}")
    if _commitment(seeds["secret"], seeds["salt"]) != registered:
        r.fail(f"{SEEDS}: the published secret and salt do not open the registered commitment")
    if seeds["beacon"]["source"] != record["beacon_source"]:
        r.fail(f"{SEEDS}: beacon source {seeds['beacon']['source']!r} is not the registered "
               f"{record['beacon_source']!r}")
