"""Run every named check on a bundle and collect an :class:`AuditReport`."""
from __future__ import annotations

import os
from pathlib import Path

from .bundle_io import BundleError, open_bundle
from .checks_budget import check_acceptance, check_budget
from .checks_docs import check_documentation
from .checks_integrity import HEX_PIN, PinnedKey, PublicKeyError, check_integrity, parse_pin
from .checks_schema import check_schema
from .checks_seeds import SeedPins, check_seeds
from .rederive import check_rederivation
from .tables_check import check_tables
from .checks_table import check_constraints, check_face_privacy, check_size
from .bounds import spec_count_problems
from .context import AuditContext, Missing
from .preregistration import Preregistered, PreregistrationError, check_preregistration, load_preregistered
from .progress import AuditProgress
from .report import CHECK_NAMES, FAIL, AuditReport, CheckResult
from .safe_read import InputFileError, read_small_file, require_regular_file

__all__ = ["run_audit", "AuditInputError", "read_pin", "MAX_KEY_BYTES"]

MAX_KEY_BYTES = 64 * 1024   # a public key file is under 1 KB
MAX_RECORD_BYTES = 256 * 1024   # a pre-registration record (the release's own limit)
MAX_RECORD_SIG_BYTES = 1024     # its raw Ed25519 signature has 64 bytes
MAX_BEACON_CHARS = 4096         # the release's limit on a beacon value


class AuditInputError(Exception):
    """Unusable input (exit code 2): the bundle, the key, the transcript or the data."""


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("dpbundle")
    except Exception:  # pragma: no cover
        return "unknown"


def _guard(name: str, fn, *args, private: bool = False) -> CheckResult:
    """Run one check; an unexpected exception becomes a failed check, never a traceback.

    ``private``: the check reads confidential data, and an exception's message may hold a
    private value (a true value, a count, n, a data cell): only its type and where it was raised
    (module and line) are reported."""
    try:
        return fn(*args)
    except (MemoryError, RecursionError) as e:
        r = CheckResult(name)
        r.fail(f"the check could not complete ({type(e).__name__})")
        return r
    except Exception as e:  # noqa: BLE001 - hostile input must not produce a traceback
        r = CheckResult(name)
        if private:
            r.fail(f"the check could not complete on this input ({type(e).__name__} raised in "
                   f"{_raised_in(e)}; the message is withheld: it may hold private values)")
        else:
            r.fail(f"the check could not complete on this input ({type(e).__name__}: {e})")
        return r


def _raised_in(e: BaseException) -> str:
    """'module.py:line' of the innermost frame of an exception's traceback."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:  # pragma: no cover
        return "unknown"
    return f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"


def read_pin(pubkey: str | os.PathLike) -> PinnedKey:
    """--pubkey: a string of 64 hex characters (optionally ``sha256:``) is the key's fingerprint
    (or the raw key in hex); anything else is a key file (PEM, OpenSSH, raw 32 bytes, hex or
    base64), read only if it is a regular file, at most MAX_KEY_BYTES. AuditInputError otherwise."""
    if isinstance(pubkey, str) and HEX_PIN.fullmatch(pubkey.strip()):
        return parse_pin(pubkey.encode("ascii"))
    try:
        data = read_small_file(pubkey, "public key (--pubkey)", MAX_KEY_BYTES)
        return parse_pin(data)
    except InputFileError as e:
        raise AuditInputError(str(e)) from None
    except PublicKeyError as e:
        raise AuditInputError(f"{pubkey}: the public key (--pubkey) is {e}; rule: an Ed25519 public "
                              f"key (PEM as written by dpbundle keygen, OpenSSH, or its 64-hex "
                              f"fingerprint)") from None


def read_pins(preregistration, beacon) -> SeedPins:
    """--preregistration REC (REC and REC.sig beside it, regular files within their limits) and
    --beacon VALUE (non-empty text of at most 4096 characters); AuditInputError otherwise."""
    record = record_sig = None
    source = "--preregistration"
    if preregistration is not None:
        rec = Path(preregistration)
        sig = rec.with_name(rec.name + ".sig")
        source = f"--preregistration {rec}"
        try:
            record = read_small_file(rec, "pre-registration record (--preregistration)", MAX_RECORD_BYTES)
            record_sig = read_small_file(sig, "pre-registration record's signature (REC.sig, beside "
                                              "--preregistration REC)", MAX_RECORD_SIG_BYTES)
        except InputFileError as e:
            raise AuditInputError(str(e)) from None
    if beacon is not None:
        if not isinstance(beacon, str) or not beacon.strip() or len(beacon) > MAX_BEACON_CHARS:
            raise AuditInputError(f"--beacon: the beacon value must be non-empty text of at most "
                                  f"{MAX_BEACON_CHARS} characters (as the release takes it)")
    return SeedPins(record=record, record_sig=record_sig, record_source=source, beacon=beacon)


def _check_inputs(transcript, data, spec, ledger=None) -> Preregistered | None:
    """The enclave files must be regular files; --spec is read and parsed (AuditInputError)."""
    if (transcript is None) != (data is None):
        raise AuditInputError("--transcript and --data must be given together (the replay needs both)")
    files = [(transcript, "transcript (--transcript)"), (ledger, "budget ledger (--ledger)")]
    if data is not None:
        from .private_data import PrivateDataError, private_parts

        try:       # a file, or a directory of the registry's parts: each a regular file
            files += [(part, "private data (--data)") for part in private_parts(Path(data))]
        except PrivateDataError as e:
            raise AuditInputError(str(e)) from None
    for p, what in files:
        if p is not None:
            try:
                require_regular_file(p, what)
            except InputFileError as e:
                raise AuditInputError(str(e)) from None
    if spec is None:
        return None
    try:
        if isinstance(spec, str):
            return load_preregistered(spec)
        return load_preregistered(os.fspath(spec), path_only=True)
    except PreregistrationError as e:
        raise AuditInputError(str(e)) from None


def run_audit(bundle_path: str | os.PathLike, pubkey: str | os.PathLike | None = None,
              transcript: str | os.PathLike | None = None,
              data: str | os.PathLike | None = None,
              spec: str | os.PathLike | None = None,
              progress: AuditProgress | None = None,
              preregistration: str | os.PathLike | None = None,
              beacon: str | None = None,
              ledger: str | os.PathLike | None = None) -> AuditReport:
    """Audit a bundle; AuditInputError for unusable input (exit 2).

    ``pubkey``: the publisher's key file, or (a str) its fingerprint; ``spec``: a pre-registered
    spec file or (a str of 64 hex) its SHA-256; ``preregistration``: the pre-registration record
    the auditor archived (``REC``, with ``REC.sig`` beside it): the bundle's must be it;
    ``beacon``: the beacon value the auditor looked up: the bundle's seeds must be bound to it;
    ``ledger``: the private budget ledger (enclave): the spends the bundle states are checked;
    ``progress``: shown while the checks run."""
    pre = _check_inputs(transcript, data, spec, ledger)
    pins = read_pins(preregistration, beacon)
    pin = read_pin(pubkey) if pubkey is not None else None
    try:
        bundle = open_bundle(bundle_path)
    except BundleError as e:
        raise AuditInputError(str(e)) from None
    if not any(bundle.has(name) for name in ("manifest.json", "manifest.sig", "data.csv", "spec.json")):
        bundle.close()
        raise AuditInputError(f"{bundle_path}: not a dpbundle bundle (no manifest.json, manifest.sig, "
                              f"data.csv or spec.json)")
    report = AuditReport(bundle=str(bundle_path), key_pinned=pin is not None, tool_version=_version(),
                         private=transcript is not None or data is not None or ledger is not None)
    progress = progress or AuditProgress()
    bundle.on_read = progress.file_bytes
    progress.start(len(CHECK_NAMES))
    ctx = AuditContext(bundle)
    try:
        with bundle:
            _run_checks(report, ctx, pin, pre, transcript, data, progress, pins, ledger)
    finally:
        ctx.close()
        progress.close()
    seeds = report.get("seeds")
    if seeds is not None:
        if seeds.facts.get("preregistration_pinned") is False:
            report.unpinned.append("preregistration_not_pinned")
        if seeds.facts.get("beacon_checked") is False:
            report.unpinned.append("beacon_not_checked")
    for c in report.checks:
        if c.result == FAIL and not c.problems:  # pragma: no cover - defensive
            c.problems.append("failed")
    return report


# Checks that cost more than reading the bundle's files: passes over every row (face privacy,
# constraints, the sensitivities), the datasheet's PDF parsed, the model sampled, the enclave
# replay. They run only when the integrity check passed: the signature verified (with the pinned
# key, or without --pubkey with the manifest's own key) and every file matches the size and
# SHA-256 the manifest signs. Otherwise they are skipped, saying why (the verdict is "failed"
# anyway): nobody can make the audit do expensive work with files the signature does not cover.
EXPENSIVE = ("face_privacy", "constraints", "budget", "documentation", "rederivation", "replay",
             "ledger")
SKIPPED_UNVERIFIED = ("not run: the integrity check failed (signature, sizes or SHA-256), and "
                      "checks that cost more than reading the files run only on a bundle whose "
                      "files the signed manifest covers")


def _spec_over_bounds(ctx: AuditContext) -> bool:
    """Whether spec.json's lists (columns, constraint conditions, quasi-identifier sets,
    criteria) are over their caps (audit/bounds.py)."""
    try:
        spec = ctx.json("spec.json").get("spec")
    except (Missing, AttributeError):
        return False
    return bool(spec_count_problems(spec))


def _run_checks(report: AuditReport, ctx: AuditContext, pin, pre, transcript, data,
                progress: AuditProgress, pins: SeedPins | None = None, ledger=None) -> None:
    """Every named check, in the order of CHECK_NAMES; the EXPENSIVE ones only after the
    integrity check passed."""
    public = {"integrity": (check_integrity, ctx, pin), "schema": (check_schema, ctx),
              "size": (check_size, ctx), "face_privacy": (check_face_privacy, ctx),
              "constraints": (check_constraints, ctx), "budget": (check_budget, ctx),
              "acceptance": (check_acceptance, ctx), "documentation": (check_documentation, ctx),
              "preregistration": (check_preregistration, ctx, pre),
              "seeds": (check_seeds, ctx, pins), "rederivation": (check_rederivation, ctx),
              "tables": (check_tables, ctx)}
    verified = False
    for name in CHECK_NAMES:
        progress.step(name)
        if name in EXPENSIVE and not verified:
            r = CheckResult(name)
            r.skip(SKIPPED_UNVERIFIED)
            report.checks.append(r)
            continue
        if name == "documentation" and _spec_over_bounds(ctx):
            # the datasheet renders the spec's lists: not with more entries than the bounds allow
            r = CheckResult(name)
            r.skip("not run: spec.json is over the audit's bounds (see the schema check), and the "
                   "datasheet renders its lists")
            report.checks.append(r)
            continue
        if name in public:
            fn, *args = public[name]
            if name == "schema":   # JSON schema validation costs more than reading the files
                args = [ctx, verified]
            report.checks.append(_guard(name, fn, *args))
            if name == "integrity":
                verified = report.checks[-1].result == "pass"
        elif name == "ledger":
            if ledger is not None:
                from .checks_ledger import check_ledger

                report.checks.append(_guard("ledger", check_ledger, ctx, Path(ledger),
                                            Path(data) if data is not None else None, private=True))
            else:
                r = CheckResult("ledger")
                r.skip("not requested (needs --ledger LEDGER, the private budget ledger, inside "
                       "the enclave)")
                report.checks.append(r)
        elif transcript is not None:
            from .replay import check_replay

            report.checks.append(_guard("replay", check_replay, ctx, Path(transcript), Path(data),
                                        private=True))
        else:
            r = CheckResult("replay")
            r.skip("not requested (needs --transcript and --data, inside the enclave)")
            report.checks.append(r)
