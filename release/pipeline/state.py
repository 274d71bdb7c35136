"""What a release has done so far (:class:`Run`), and how every way out states it.

A :class:`Run` records, as the release goes, whether the spend is in the ledger and with which
status, whether a private transcript or a kept result was written, and whether a complete bundle
is on disk; :func:`state` turns it into the sentences every exit message ends with. Ctrl-C,
SIGTERM and SIGHUP become exceptions (:class:`Signals`), deferred while the ledger is written and
while what an interrupted write left on disk is inspected, and ignored after the first one (the
clean-up is short and must finish); :func:`stated` turns whatever else stops a release into one
of :mod:`dpbundle.release.errors`.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

from dpbundle.release.errors import (DpbundleError, DpbundleInterrupt, Refused, ReleaseFailed, Terminated,
                                     literal, signal_note)
from dpbundle.release.pipeline.output import fail

__all__ = ["Run", "Signals", "stated", "state", "how", "stopped", "mark", "settle_outcome",
           "keep_private_transcript"]


@dataclass
class Run:
    """What a release has done so far: the source of every exit message (mutable, one per run)."""

    out: Path
    resume_from: Optional[Path] = None     # --resume: the kept result
    key: Optional[Path] = None
    ledger: Any = None                     # the Ledger, once known
    entry: Optional[str] = None            # the spend's entry id, once recorded
    epsilon: str = ""
    status: Optional[str] = None           # the last status recorded (None: still 'started')
    status_problem: Optional[str] = None   # why a status could not be recorded
    transcript: Optional[Path] = None      # a private transcript written for this run
    pending: Optional[Path] = None         # a kept result written by this run
    pending_problem: Optional[str] = None  # why the selected result could not be kept
    complete: bool = False                 # a complete bundle of this run is at out, verified
    bundle_transcript: Optional[Path] = None  # the PRIVATE transcript of the complete bundle
    zip_missing: bool = False
    out_note: Optional[str] = None         # what OUT holds when no new bundle is there
    throwaway: bool = False                # the ledger is --example's throwaway one
    signals: Any = None                    # the Signals of this run
    reservation: Any = None                # room reserved for a kept result
    notes: list = field(default_factory=list)


def state(run: Run) -> str:
    """Sentences stating what exists on disk and in the ledger, from the run's record."""
    lines = [_spend_state(run)]
    if run.complete:
        lines.append(f"a complete bundle is at {run.out}: its signature, its files' hashes and its "
                     "private transcript's commitment verify" +
                     (f"; {run.out}.zip was not written" if run.zip_missing else ""))
    else:
        lines.append(f"no bundle was written ({run.out_note or (str(run.out) + ' was not created')})")
    if run.transcript is not None:
        lines.append(f"the PRIVATE transcript is at {run.transcript} (keep it inside the enclave)")
    if run.pending is not None:
        lines.append(f"the selected result is kept in the PRIVATE file {run.pending} (mode 0600); write "
                     f"its bundle, with no new selection and no new spend, with:\n  dpbundle release "
                     f"--resume {run.pending} --out {run.out} --key {run.key or 'KEY'}")
    elif run.resume_from is not None and not run.complete:
        lines.append(f"the kept result {run.resume_from} is unchanged")
    elif run.pending_problem:
        lines.append(f"the selected result could not be kept ({run.pending_problem}): it is lost")
    lines.extend(run.notes)
    return "\n".join(lines)


def _spend_state(run: Run) -> str:
    """The sentence about the spend: none, or its entry, status and ledger."""
    if run.entry is None:
        return ("no privacy budget was spent by this command" if run.resume_from else
                "nothing was spent: the ledger is untouched")
    short = run.entry[:12]
    status = "status still 'started'" if run.status is None else f"status '{run.status}'"
    if run.status_problem:
        status += f"; {run.status_problem}"
    if run.status is None or run.status_problem:
        status += (f"; record the outcome with: dpbundle ledger mark {short} --ledger "
                   f"{run.ledger.path} --status STATUS")
    what = "the privacy spend of the kept result" if run.resume_from else "the privacy spend of this run"
    if run.throwaway:
        return (f"{what} (epsilon {run.epsilon}) was recorded in the example's throwaway ledger "
                f"(entry {short}, {status.split(';')[0]}), removed when this command ends")
    return (f"{what} (epsilon {run.epsilon}) is recorded in the ledger {run.ledger.path} "
            f"(entry {short}, {status}) and counts as spent")


def how(exc: BaseException) -> str:
    return f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"


def stopped(run: Run) -> str:
    name = run.signals.stopping
    return ("interrupted" if name in (None, "SIGINT") else "stopped" if name == "error"
            else f"terminated ({name})")


def mark(run: Run, status: str) -> None:
    """Record ``status`` for the run's spend (signals deferred); a failure is noted, not raised."""
    from dpbundle.release.scheme.ledger import LedgerError

    if run.entry is None:
        return
    with run.signals.critical():
        try:
            run.ledger.mark_finished(run.entry, status)
            run.status, run.status_problem = status, None
        except (LedgerError, OSError) as exc:
            run.status_problem = f"the ledger could not record '{status}' ({literal(exc)})"


class Signals:
    """Ctrl-C, SIGTERM and SIGHUP as exceptions (KeyboardInterrupt, :class:`Terminated`) for the
    length of a release, so that the clean-up runs and the exit states what exists; never a
    silent exit 143. Inside :meth:`critical` (ledger appends, the inspection of an interrupted
    write) a signal is held until the block ends; after the first one, later signals are ignored
    so that the clean-up finishes."""

    NAMES = ("SIGINT", "SIGTERM", "SIGHUP")

    def __init__(self) -> None:
        self.depth = 0
        self.deferred: Optional[str] = None
        self.stopping: Optional[str] = None
        self._old: dict = {}

    def __enter__(self) -> "Signals":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            for name in self.NAMES:
                if not hasattr(signal, name):
                    continue
                sig = getattr(signal, name)
                current = signal.getsignal(sig)
                if name == "SIGINT" and current in (signal.SIG_IGN, None):
                    continue          # a background job whose Ctrl-C is ignored stays so
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()

    def _raise(self, name: str) -> None:
        self.stopping = name
        if name == "SIGINT":
            raise KeyboardInterrupt
        raise Terminated(name)

    def _handler(self, signum, _frame) -> None:
        import signal

        name = signal.Signals(signum).name
        signal_note(name)
        if self.depth or self.stopping:
            self.deferred = self.deferred or name
            return
        self._raise(name)

    def stop(self, exc: BaseException | None = None) -> None:
        """A stop (``exc``: the interrupt, or None for an error) is being handled: ignore
        further signals, so that the clean-up finishes."""
        if self.stopping is None:
            self.stopping = (str(exc) if isinstance(exc, Terminated) else
                             "SIGINT" if isinstance(exc, KeyboardInterrupt) else "error")

    @contextmanager
    def critical(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if self.depth == 0 and self.deferred and not self.stopping:
            name, self.deferred = self.deferred, None
            self._raise(name)


@contextmanager
def stated(run: Run) -> Iterator[None]:
    """Whatever ends the release, the exception that leaves states what exists (:func:`state`):
    an interrupt (130), running out of memory, a system error, an internal error (1). The
    spend, if recorded and still without an outcome, is marked."""
    try:
        yield
    except (DpbundleError, DpbundleInterrupt):
        raise
    except KeyboardInterrupt as exc:
        _interrupted(run, exc)
    except Exception as exc:  # noqa: BLE001 - every exit states what exists
        _broken(run, exc)


def _interrupted(run: Run, exc: KeyboardInterrupt) -> None:
    run.signals.stop(exc)
    if run.entry is None and not run.complete:
        if run.resume_from is not None:
            fail(f"{how(exc)}: no bundle was written and no budget was spent; the kept result "
                 f"{run.resume_from} is unchanged", code=130)
        fail(f"{how(exc)} before any privacy budget was spent: the ledger is untouched and no "
             "bundle was written", code=130)
    settle_outcome(run, "interrupted")
    fail(f"{how(exc)}{' after the bundle was complete' if run.complete else ''}.\n" + state(run),
         code=130)


def _broken(run: Run, exc: Exception) -> None:
    run.signals.stop()
    if isinstance(exc, MemoryError):
        what, code = "not enough memory", 1
    elif isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        what, code = f"a system error: {where}{exc.strerror or exc}", 2
    else:   # the message may hold private values: the type only
        what, code = f"an internal error ({type(exc).__name__})", 1
    if run.entry is None and not run.complete:
        fail(f"the release stopped with {what} before any privacy budget was spent.\n" + state(run),
             code=code, cls=DpbundleError if code == 1 else Refused)
    settle_outcome(run, "failed")
    fail(f"the release stopped with {what}.\n" + state(run), code=code, cls=ReleaseFailed)


def settle_outcome(run: Run, otherwise: str) -> None:
    """Record the outcome of a run stopped by an unexpected exception: 'released' when its bundle
    is complete (and a kept result it was written from is removed), else ``otherwise`` when the
    spend has no outcome yet."""
    if run.complete:
        if run.entry is not None and run.status != "released":
            mark(run, "released")
        if run.resume_from is not None:
            with run.signals.critical():
                try:
                    run.resume_from.unlink(missing_ok=True)
                    run.resume_from = None
                except OSError as exc:
                    run.notes.append(f"the kept result {run.resume_from} could not be removed "
                                     f"({exc.strerror}); remove it by hand")
    elif run.entry is not None and run.status is None and run.resume_from is None:
        mark(run, otherwise)


def keep_private_transcript(transcript, path: Path, error: BaseException | None = None,
                            run: Run | None = None) -> str:
    """Write the transcript of a run that released nothing to its private path (mode 0600),
    with the traceback of ``error`` as a last mark (signals deferred); records it in ``run``.
    Returns a sentence naming the file but no detail ("" when it could not be written)."""
    import secrets
    import traceback

    from dpbundle.mechanisms.noise import Randomness, write_transcript_file

    guard = run.signals.critical() if run is not None and run.signals is not None else _nothing()
    with guard:
        try:
            if error is not None:
                Randomness(transcript).mark("attempt error", error=type(error).__name__,
                                            traceback="".join(traceback.format_exception(error)))
            write_transcript_file(path, transcript, secrets.token_bytes(32))
        except Exception as exc:  # noqa: BLE001 - best effort: never mask the original failure
            if run is not None:
                run.notes.append(f"the PRIVATE transcript could not be written to {path} "
                                 f"({exc.strerror if isinstance(exc, OSError) else type(exc).__name__})")
            return ""
    if run is not None:
        run.transcript = path
    return f"\nthe details are in the PRIVATE transcript {path} (keep it inside the enclave)"


@contextmanager
def _nothing() -> Iterator[None]:
    yield
