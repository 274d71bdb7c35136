"""Run every named check on a bundle and collect an :class:`AuditReport`."""
from __future__ import annotations

import os
from pathlib import Path

from .bundle_io import BundleError, open_bundle
from .checks_budget import check_acceptance, check_budget
from .checks_docs import check_documentation
from .checks_integrity import PublicKeyError, check_integrity, load_public_key
from .checks_schema import check_schema
from .checks_table import check_constraints, check_face_privacy, check_size
from .context import AuditContext
from .report import FAIL, AuditReport, CheckResult

__all__ = ["run_audit", "AuditInputError"]

MAX_KEY_BYTES = 64 * 1024


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


def read_public_key(path: str | os.PathLike):
    p = Path(path)
    try:
        if p.stat().st_size > MAX_KEY_BYTES:
            raise AuditInputError(f"{path}: too large to be a public key")
        data = p.read_bytes()
    except OSError as e:
        raise AuditInputError(f"{path}: cannot read the public key ({e.strerror})") from None
    try:
        return load_public_key(data)
    except PublicKeyError as e:
        raise AuditInputError(f"{path}: {e}") from None


def run_audit(bundle_path: str | os.PathLike, pubkey: str | os.PathLike | None = None,
              transcript: str | os.PathLike | None = None,
              data: str | os.PathLike | None = None) -> AuditReport:
    """Audit a bundle; AuditInputError for unusable input (exit 2)."""
    if (transcript is None) != (data is None):
        raise AuditInputError("--transcript and --data must be given together (the replay needs both)")
    key = read_public_key(pubkey) if pubkey is not None else None
    for p, what in ((transcript, "transcript"), (data, "private data")):
        if p is not None and not Path(p).is_file():
            raise AuditInputError(f"{p}: the {what} file does not exist or is not a file")
    try:
        bundle = open_bundle(bundle_path)
    except BundleError as e:
        raise AuditInputError(str(e)) from None
    if not any(bundle.has(name) for name in ("manifest.json", "manifest.sig", "data.csv", "spec.json")):
        bundle.close()
        raise AuditInputError(f"{bundle_path}: not a dpbundle bundle (no manifest.json, manifest.sig, "
                              f"data.csv or spec.json)")
    report = AuditReport(bundle=str(bundle_path), key_pinned=key is not None, tool_version=_version(),
                         private=transcript is not None or data is not None)
    with bundle:
        ctx = AuditContext(bundle)
        report.checks.append(_guard("integrity", check_integrity, ctx, key))
        report.checks.append(_guard("schema", check_schema, ctx))
        report.checks.append(_guard("size", check_size, ctx))
        report.checks.append(_guard("face_privacy", check_face_privacy, ctx))
        report.checks.append(_guard("constraints", check_constraints, ctx))
        report.checks.append(_guard("budget", check_budget, ctx))
        report.checks.append(_guard("acceptance", check_acceptance, ctx))
        report.checks.append(_guard("documentation", check_documentation, ctx))
        if transcript is not None:
            from .replay import check_replay

            report.checks.append(_guard("replay", check_replay, ctx, Path(transcript), Path(data),
                                        private=True))
        else:
            r = CheckResult("replay")
            r.skip("not requested (needs --transcript and --data, inside the enclave)")
            report.checks.append(r)
    for c in report.checks:
        if c.result == FAIL and not c.problems:  # pragma: no cover - defensive
            c.problems.append("failed")
    return report
