"""The last stage of a release: :func:`write` writes the signed bundle and the private
transcript, atomically; if that fails, the selected result is kept privately (``--resume``
writes it later with no new spend). Then the spend is marked released and a summary printed."""
from __future__ import annotations

from pathlib import Path

from dpbundle.release.errors import BundleNotWritten, ReleaseFailed, literal
from dpbundle.release.pipeline.output import fail, warn
from dpbundle.release.pipeline.planning import Plan
from dpbundle.release.pipeline.selecting import Selected
from dpbundle.release.pipeline.settle import BundleJob, write_and_settle
from dpbundle.release.pipeline.spending import Spend
from dpbundle.release.pipeline.state import Run, how, mark, state, stopped

__all__ = ["write", "write_failure"]


def write(plan: Plan, spend: Spend, selected: Selected, run: Run) -> Path:
    """Write the bundle (room for a kept result grown first); on failure keep the selected
    result and stop with what exists (BundleNotWritten); else mark the spend 'released' and
    print the summary. Returns the bundle's path."""
    from dpbundle.release.bundle.write import BundleError
    from dpbundle.release.pipeline.outcome import summary_safely

    request = plan.request
    job = BundleJob(out=plan.out, content=selected.content, transcript_path=plan.transcript_path,
                    private_key=plan.private_key, force=request.force, make_zip=request.make_zip)
    _ensure_pending_room(run, selected.content)
    failure = write_and_settle(run, job)
    if failure is not None:
        # the budget is spent and a candidate passed: keep it, privately, to write it again
        interrupted = isinstance(failure, KeyboardInterrupt)
        mark(run, "interrupted while writing the bundle" if interrupted else "failed while writing the bundle")
        _keep_pending(run, plan, selected.content)
        written = isinstance(failure, (BundleError, OSError))
        fail(f"the bundle could not be written: {write_failure(failure)}; nothing was released.\n"
             + state(run), code=130 if interrupted else 2 if written else 1,
             cls=BundleNotWritten if written else ReleaseFailed)
    mark(run, "released")
    if run.signals.stopping:      # a signal came while the bundle was being put in place
        fail(f"{stopped(run)} after the bundle was complete.\n{state(run)}", code=130)
    if run.status_problem:
        warn(run.status_problem + f"; record it with: dpbundle ledger mark {spend.entry[:12]} --ledger "
             f"{plan.ledger.path} --status released")
    summary_safely(plan.out, selected.result, selected.budget, plan.transcript_path, request.key)
    return plan.out


def write_failure(exc: BaseException) -> str:
    """Why a bundle could not be written, without private values."""
    from dpbundle.release.bundle.write import BundleError

    if isinstance(exc, KeyboardInterrupt):
        return how(exc)
    if isinstance(exc, BundleError):
        return literal(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return f"{where}{exc.strerror or exc}"
    if isinstance(exc, MemoryError):
        return "not enough memory"
    return f"internal error ({type(exc).__name__})"


def _ensure_pending_room(run: Run, content) -> None:
    """After the selection: grow the reservation to the kept result's real bound, or warn."""
    from dpbundle.release.bundle.pending import pending_bound

    if run.reservation is None:
        return
    try:
        bound = pending_bound(content.codes, content.transcript_records_jsonl, content.spec,
                              content.public_files)
        grown = run.reservation.grow(bound)
    except Exception:  # noqa: BLE001 - only a precaution: never stop a release that has spent here
        return
    if not grown:
        warn(f"the private directory has no room for {bound / 1e6:,.1f} MB: if the bundle cannot be "
             "written, the selected result may not be kept")


def _keep_pending(run: Run, plan: Plan, content) -> None:
    """Keep the selected result (signals deferred), into the room reserved before the spend."""
    from dpbundle.release.bundle.pending import save_pending
    from dpbundle.release.bundle.write import private_dir

    with run.signals.critical():
        try:
            run.pending = save_pending(private_dir(), plan.out, content, transcript_path=plan.transcript_path,
                                       ledger_path=plan.ledger.path, ledger_entry=run.entry,
                                       ledger_throwaway=run.throwaway, reservation=run.reservation)
            run.reservation = None          # it is the kept result now
        except Exception as exc:  # noqa: BLE001
            run.pending_problem = (f"{exc.strerror}" if isinstance(exc, OSError) and exc.strerror
                                   else f"{type(exc).__name__}: {literal(exc)}")
