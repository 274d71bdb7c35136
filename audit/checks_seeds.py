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

* the time the beacon value names (a drand round, an ISO time) is not before the record's
  ``created`` and not after the bundle's day (:mod:`.beacon`);
* the configuration list: the bundle publishes the list its record registered
  (``configurations.yaml``'s SHA-256 is the record's ``configs_sha256``; no list when the record
  registered none), and the ``schema`` check finds the selected configuration in it.

What nobody can check with the bundle alone: that the beacon value is what the record's
``beacon_source`` published, and that the record was published before the run (its ``created``
time is the publisher's word). The auditor pins both: ``--preregistration REC`` (the record,
with ``REC.sig``, archived when it was published: the bundle's must be that one, byte for
byte) and ``--beacon VALUE`` (the value the auditor fetched: seeds.json's must be it). Without
them the check passes against the bundle's own word, and the verdict says NOT VERIFIED
(pre-registration not pinned, beacon not checked; ``report.py``). A pin given for a bundle that
carries no pre-registration fails: its pre-registration files were removed.

This module re-implements the derivation (it must not import ``dpbundle.release``).
"""
from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass

from .edges_check import declared_spec
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_seeds", "derive_seed", "RECORD", "RECORD_SIG", "SEEDS", "SeedPins"]

RECORD, RECORD_SIG, SEEDS = "preregistration.json", "preregistration.json.sig", "seeds.json"
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SeedPins:
    """What the auditor pins: the archived record (its bytes and its signature's, and where
    they came from) and the beacon value they fetched; None for what was not given."""

    record: bytes | None = None
    record_sig: bytes | None = None
    record_source: str = "--preregistration"
    beacon: str | None = None


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


def check_seeds(ctx: AuditContext, pins: SeedPins | None = None) -> CheckResult:
    """See the module docstring; skipped for a bundle that was not pre-registered (unless a
    pin says it was)."""
    r = CheckResult("seeds")
    pins = pins or SeedPins()
    present = [f for f in (RECORD, RECORD_SIG, SEEDS) if ctx.bundle.has(f)]
    if not present:
        if pins.record is not None:
            r.fail(f"{pins.record_source}: the auditor's pre-registration record names a "
                   f"pre-registered release, but the bundle carries no {RECORD}: its "
                   "pre-registration files are missing (removed after the fact?)")
        if pins.beacon is not None:
            r.fail(f"--beacon: the bundle carries no {SEEDS}, so its seeds are bound to no beacon")
        if not r.failed:
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
    _check_configurations(ctx, r, record)
    _check_beacon_time(ctx, r, record, seeds)
    pinned = _check_pins(r, pins, record, record_bytes, seeds)
    r.facts.update({"preregistration_pinned": pinned[0], "beacon_checked": pinned[1]})
    if not r.failed:
        beacon = seeds["beacon"]
        r.facts.update({
            "spec_sha256": record["spec_sha256"], "record_created": record["created"],
            "seed_commitment": record["seed_commitment"]["value"],
            "configs_sha256": record.get("configs_sha256"),
            "beacon_value": beacon["value"], "beacon_source": beacon["source"],
            "projection_seed": f"{derive_seed(seeds['secret'], beacon['value'], 'projection', 0):064x}",
        })
        said = ["pre-registered: the record's signature, key, spec and configuration list agree "
                "with the bundle and the published secret opens its seed commitment"]
        said.append("the record is the one pinned with --preregistration" if pinned[0] else
                    "NOT PINNED: the record was checked only against itself (pass "
                    "--preregistration REC, the record archived when it was published)")
        said.append(f"the beacon value {beacon['value']!r} is the one given with --beacon" if pinned[1]
                    else f"BEACON NOT CHECKED: look up what {beacon['source']!r} published, after "
                         f"the record's date ({record['created']}), and pass it with --beacon VALUE")
        r.detail = "; ".join(said)
    return r


def _check_pins(r: CheckResult, pins: SeedPins, record: dict, record_bytes: bytes,
                seeds: dict) -> tuple[bool, bool]:
    """(pre-registration pinned, beacon checked): the bundle's record must be the auditor's
    archived one, byte for byte (whose own signature must verify with the key it names), and
    seeds.json's beacon value the auditor's."""
    record_ok = beacon_ok = False
    if pins.record is not None:
        if pins.record != record_bytes:
            r.fail(f"{RECORD} is not the pre-registration record you archived ({pins.record_source}): "
                   "the bundle's record was made or changed after the one published")
        else:
            record_ok = _archived_signature_ok(r, pins, record)
    if pins.beacon is not None:
        if seeds["beacon"]["value"] != pins.beacon:
            r.fail(f"{SEEDS}: the beacon value {seeds['beacon']['value']!r} is not the one given with "
                   f"--beacon ({pins.beacon!r}): the seeds are bound to another value")
        else:
            beacon_ok = True
    return record_ok, beacon_ok


def _archived_signature_ok(r: CheckResult, pins: SeedPins, record: dict) -> bool:
    from cryptography.exceptions import InvalidSignature

    from .checks_integrity import PublicKeyError, load_public_key

    try:
        key = load_public_key(record["public_key"]["pem"].encode("ascii"))
        key.verify(pins.record_sig or b"", pins.record)
    except (PublicKeyError, UnicodeEncodeError, InvalidSignature, ValueError):
        r.fail(f"{pins.record_source}: the archived record's signature (.sig) does not verify with "
               "the key the record names: the archived copy cannot be trusted")
        return False
    return True


def _check_configurations(ctx: AuditContext, r: CheckResult, record: dict) -> None:
    """The bundle publishes the configuration list its record registered (or none)."""
    from .configurations import CONFIGURATIONS, configurations_sha256

    registered = record.get("configs_sha256")
    published = configurations_sha256(ctx)
    if registered is None and published is not None:
        r.fail(f"the record registered no configuration list (the spec's whole space), but the "
               f"bundle publishes {CONFIGURATIONS}")
    elif registered is not None and published is None:
        r.fail(f"the record registered a configuration list (SHA-256 {registered}), which the "
               f"bundle does not publish ({CONFIGURATIONS}): the selected configuration cannot be "
               "checked against it")
    elif registered != published:
        r.fail(f"{CONFIGURATIONS}: SHA-256 {published}, the record registered {registered}: the "
               "release drew from another list than the registered one")


def _check_beacon_time(ctx: AuditContext, r: CheckResult, record: dict, seeds: dict) -> None:
    from .beacon import beacon_time_problems

    try:
        made = ctx.json("manifest.json").get("created")
    except (Missing, AttributeError):
        made = None
    problems, notes, when = beacon_time_problems(seeds["beacon"]["value"], seeds["beacon"]["source"],
                                                 record.get("created"), made)
    for p in problems:
        r.fail(p)
    for n in notes:
        r.warn(n)
    r.facts["beacon_time"] = when


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
        bundle_sha = canonical_sha256(declared_spec(spec))
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
