"""``dpbundle release --resume``: write the bundle of a selected result kept by a run whose bundle
could not be written. No selection, no new spend: the kept result must be authentic and pass its
re-check, and its ledger must hold the spend it names."""
from __future__ import annotations

import json
from pathlib import Path

from dpbundle.release.errors import BundleNotWritten, ReleaseFailed, literal
from dpbundle.release.pipeline.checks import check_out, check_private_outputs, inside
from dpbundle.release.pipeline.output import fail, say, unusable, warn
from dpbundle.release.pipeline.planning import load_key
from dpbundle.release.pipeline.request import ReleaseRequest
from dpbundle.release.pipeline.settle import BundleJob, write_and_settle
from dpbundle.release.pipeline.state import Run, how, settle_outcome, state, stopped

__all__ = ["resume"]


def resume(request: ReleaseRequest, run: Run) -> None:
    """Write the bundle of the kept result ``request.resume``. The kept result must be authentic
    (its HMAC, with the private directory's key) and pass :func:`dpbundle.release.bundle.pending.recheck`;
    its ledger must be the regular file it names, with the spend it names, of the budget's
    epsilon (an example's throwaway ledger is gone: nothing to check)."""
    from dpbundle.release.bundle.pending import PendingError, load_pending, recheck

    pending_path = request.resume
    try:
        p = load_pending(pending_path)
    except PendingError as exc:
        unusable(str(exc) if "nothing is signed" in str(exc) else f"{exc}; nothing was signed")
    problems = recheck(p)
    if problems:
        fail(f"{pending_path}: the kept result fails its re-check, so it is not signed: "
             + "; ".join(problems[:5]))
    ledger = None if p.get("ledger_throwaway") else _kept_ledger(run, p, pending_path)
    _resume_write(request, run, p, ledger)


def _kept_ledger(run: Run, p: dict, pending_path: Path):
    """The kept result's ledger, holding its spend with at least its total epsilon; recorded in
    ``run`` (entry, epsilon, status)."""
    from dpbundle.mechanisms import exact

    from dpbundle.release.scheme.ledger import Ledger, LedgerError

    ledger = Ledger(Path(p["ledger_path"]))
    problem = ledger.path_problem()
    if problem or not ledger.path.is_file():
        fail(f"{pending_path}: its ledger {ledger.path} is unusable ({problem or 'no such file'}); "
             "nothing was signed")
    try:
        entry = next((e for e in ledger.all_entries() if e["id"] == p["ledger_entry"]), None)
    except LedgerError as exc:
        fail(f"{literal(exc)}; nothing was signed")
    if entry is None:
        fail(f"{pending_path}: the ledger {ledger.path} has no spend {p['ledger_entry'][:12]}, which "
             "the kept result names; nothing was signed")
    try:
        spent_ok = exact.dec(entry["epsilon"]) >= exact.dec(p["budget"]["total_epsilon"])
    except (KeyError, TypeError, ValueError, ArithmeticError):
        spent_ok = False
    if not spent_ok:
        fail(f"{pending_path}: the ledger's spend {entry['id'][:12]} (epsilon {entry['epsilon']}) does "
             "not cover the kept result's total epsilon; nothing was signed")
    run.ledger, run.entry, run.epsilon = ledger, entry["id"], str(entry["epsilon"])
    run.status = entry.get("status")
    return ledger


def _resume_write(request: ReleaseRequest, run: Run, p: dict, ledger) -> None:
    """The part of ``--resume`` after the kept result and its ledger were checked."""
    from dpbundle.release.bundle.write import BundleContent, BundleError

    out = request.out
    transcript_path, private_key = _resume_checks(request, p)
    content = BundleContent(spec=p["spec"], configuration=p["configuration"],
                            configuration_id=p["configuration_id"], columns=p["columns"], codes=p["codes"],
                            metrics=p["metrics"], budget=p["budget"],
                            transcript_records_jsonl=p["transcript_jsonl"].encode("utf-8"),
                            public_files=p.get("public_files") or {})
    failure = write_and_settle(run, BundleJob(out=out, content=content, transcript_path=transcript_path,
                                              private_key=private_key, force=request.force,
                                              make_zip=request.make_zip,
                                              overrides=dict(p.get("extra_args") or {})))
    if failure is not None:
        if isinstance(failure, KeyboardInterrupt):
            fail(f"{how(failure)}: the bundle was not written.\n" + state(run), code=130)
        from dpbundle.release.pipeline.writing import write_failure

        written = isinstance(failure, (BundleError, OSError))
        fail(f"the bundle could not be written: {write_failure(failure)}.\n" + state(run),
             code=2 if written else 1, cls=BundleNotWritten if written else ReleaseFailed)
    settle_outcome(run, "released")
    if run.signals.stopping:
        fail(f"{stopped(run)} after the bundle was complete.\n{state(run)}", code=130)
    if run.status_problem and ledger is not None:
        warn(run.status_problem + f"; record it with: dpbundle ledger mark {run.entry[:12]} --ledger "
             f"{ledger.path} --status released")
    for note in run.notes:
        warn(note)
    say(f"{out} (from the kept result; no new spend)", "bundle written: ", "bold green")
    say(str(transcript_path), "private transcript: ", "bold yellow")


def _resume_checks(request: ReleaseRequest, p: dict):
    """(transcript path, private key): the output location, the transcript's place (the kept
    one, unless --transcript gives another), the key, and that it is the pre-registered one."""
    from dpbundle.release.bundle.keys import public_key_fingerprint

    out, transcript = request.out, request.transcript
    transcript_path = (transcript or Path(p["transcript_path"])).absolute()
    check_out(out, request.force)
    if not transcript_path.parent.is_dir():
        fail(f"{transcript_path.parent}: no such directory (for the kept result's transcript "
             f"{transcript_path}); give another place with --transcript")
    if inside(transcript_path, out):
        fail(f"the transcript {transcript_path} must not be inside the bundle {out}: it is private")
    if transcript is None and (transcript_path.exists() or transcript_path.is_symlink()):
        fail(f"{transcript_path}: the kept result's transcript path is taken (by another run's "
             "transcript?); give another place with --transcript; nothing was signed")
    check_private_outputs(out, transcript_path, request.make_zip, request.force)
    private_key = load_key(request.key, request.passphrase_file)
    record = (p.get("public_files") or {}).get("preregistration.json")
    if record is not None:
        try:
            registered = json.loads(record)["public_key"]["fingerprint"]
        except (ValueError, KeyError, TypeError):
            registered = None
        if registered != public_key_fingerprint(private_key.public_key()):
            fail(f"{request.key}: not the key the kept result's pre-registration registered; nothing "
                 "was signed")
    return transcript_path, private_key
