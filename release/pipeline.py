"""`dpbundle release`: prepare the private data, run the private selection, write the signed bundle.

Every way out of a release states what exists (docs/faults.md): a :class:`_Run` records, as the
run goes, whether the spend is in the ledger and with which status, whether a private transcript
or a kept result was written, and whether a complete bundle is on disk; every exception that
leaves :func:`run_release` is one of :mod:`dpbundle.release.errors` with a message built from it.
Ctrl-C, SIGTERM and SIGHUP become exceptions (:class:`_Signals`), deferred while the ledger is
written and while what an interrupted write left on disk is inspected, and ignored after the
first one (the clean-up is short and must finish).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.resources import as_file, files
from pathlib import Path
from typing import Annotated, Any, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

console = Console()
err = Console(stderr=True)

from dpbundle.release.errors import (BundleNotWritten, DpbundleError, DpbundleInterrupt, Refused,  # noqa: E402
                     ReleaseFailed, ReleaseInterrupted, Terminated, UnusableInput, literal, signal_note)

CommandError = DpbundleError   # the name this module used (dpbundle 0.2)

# name -> (spec, narrowed configuration list from a public-data sweep; see docs/sweep-births-nvss160k.md)
EXAMPLES = {"births": ("births-recommended.yaml", "births-recommended-narrowed-nvss160k.yaml"),
            # see docs/sweep-persons.md (swept on a simulated copy with another seed)
            "persons": ("persons-recommended.yaml", "persons-recommended-narrowed.yaml")}

MAX_OUT_NAME = 215   # + the 40 bytes the hidden temporary names add: at most 255
MIN_EXAMPLE_ROWS = 1_000
MAX_EXAMPLE_ROWS = 1_000_000   # a simulated registry of 1e6 rows takes about 2.5 GB to make


def _fail(message: str, code: int = 2, cls: type | None = None) -> None:
    """Stop the release: :class:`Refused` (code 2, before any spend) or :class:`ReleaseFailed`
    (code 1) unless ``cls`` says otherwise; :class:`ReleaseInterrupted` for code 130. The CLI
    prints the message and exits with the code; the Python API raises it."""
    if code == 130:
        raise ReleaseInterrupted(message)
    if cls is None:
        cls = Refused if code == 2 else ReleaseFailed
    raise cls(message, code=code)


def _unusable(message: str) -> None:
    raise UnusableInput(message)


def _say(text: str, label: str | None = None, style: str | None = None) -> None:
    """Print ``text`` literally (never parsed as markup: titles, paths, beacon values and ledger
    statuses are untrusted), after an optional styled ``label``."""
    line = Text(label, style=style) if label else Text()
    line.append(literal(text))
    console.print(line, highlight=False)


def _warn(text: str) -> None:
    _say(text, "warning: ", "yellow")


@contextmanager
def example_inputs(name: str, rows: int | None) -> Iterator[tuple[Path, Path, Path]]:
    """The packaged example spec, its narrowed configuration list, and a freshly simulated
    registry (in a temporary directory)."""
    from dpbundle.release.data.example import ExampleError, write_example

    if name not in EXAMPLES:
        _unusable(f"unknown example {name!r}; available: {', '.join(EXAMPLES)}")
    spec_name, narrowed_name = EXAMPLES[name]
    with tempfile.TemporaryDirectory(prefix="dpbundle-example-") as tmp:
        data = Path(tmp) / f"{name}-simulated.csv"
        try:
            write_example(data, rows=rows, name=name)
        except ExampleError as exc:
            _unusable(f"--example {name}: {exc}; nothing was spent")
        except MemoryError:
            _fail(f"not enough memory to simulate {rows:,} rows of the {name} example; choose fewer "
                  "--example-rows; nothing was spent")
        except OSError as exc:
            _fail(f"cannot write the simulated registry in {tmp} ({exc.strerror or exc}); nothing was spent")
        examples = files("dpbundle.examples")
        with as_file(examples.joinpath(spec_name)) as spec_path, as_file(examples.joinpath(narrowed_name)) as narrowed:
            yield Path(spec_path), data, Path(narrowed)


SELECTION_LINE = ("private selection running: progress is not shown, because the number of "
                  "attempts is private; the run ends when a candidate passes every criterion"
                  "{stop}")


def _selection_line(gamma: float) -> str:
    """The one static line printed while the selection runs: no step, no time, no count (a
    recorded terminal keeps every frame of an animated display, and their number grows with the
    attempts)."""
    return SELECTION_LINE.format(stop=f" or a stop draw ends it (probability {gamma:g} after each "
                                      "failed attempt)" if gamma > 0 else "")


def cli_release(
    spec: Annotated[Optional[Path], typer.Argument(help="Release spec (YAML or JSON).", show_default=False)] = None,
    data: Annotated[Optional[Path], typer.Argument(help="The confidential registry (CSV or CSV.gz).", show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to create (must not exist unless --force).")] = ...,
    example: Annotated[Optional[str], typer.Option("--example", help="Use a built-in example (spec + simulated registry) instead of SPEC and DATA: 'births' or 'persons'.")] = None,
    key: Annotated[Optional[Path], typer.Option("--key", help="Ed25519 private key (PEM) from `dpbundle keygen`. With --example a demo key is generated next to the bundle.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option("--passphrase-file", help="File holding the key's passphrase (or set DPBUNDLE_KEY_PASSPHRASE).")] = None,
    transcript: Annotated[Optional[Path], typer.Option("--transcript", help="Where to write the PRIVATE randomness transcript (mode 0600). Default: OUT's name + time + .transcript.jsonl in the private directory $DPBUNDLE_PRIVATE_DIR, else $XDG_DATA_HOME/dpbundle/private (~/.local/share/dpbundle/private), mode 0700: never beside the bundle, where copying its folder would ship it. It must stay inside the enclave.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="Private budget ledger (default: a file in your user data directory; --example uses a throwaway one).")] = None,
    configs: Annotated[Optional[Path], typer.Option("--configs", help="Select only among these configurations (narrowed.yaml from `dpbundle sweep`).")] = None,
    allow_additional_spend: Annotated[bool, typer.Option("--allow-additional-spend", help="Allow a further release on data that the ledger shows budget was already spent on.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing bundle directory.")] = False,
    make_zip: Annotated[bool, typer.Option("--zip", help="Also write a deterministic OUT.zip.")] = False,
    stop_probability: Annotated[Optional[str], typer.Option("--stop-probability", help="Chance of stopping (releasing nothing) after each failed attempt: a number in [0, 1), or 'auto' to derive it from the --configs list's sweep estimates so that the chance of releasing nothing is 5% (the arithmetic is printed). Default: auto when the --configs list has sweep estimates (the built-in examples do), else the spec's privacy.selection.stop_probability; 0 runs until a candidate passes, and may never end. It does not change the epsilon.", show_default=False)] = None,
    allow_other_spec: Annotated[bool, typer.Option("--allow-other-spec", help="Use a --configs list whose spec_sha256 (the spec it was swept on) differs from this spec's.")] = False,
    allow_other_size: Annotated[bool, typer.Option("--allow-other-size", help="Use a --configs list measured on data more than a factor of 2 larger or smaller than DATA (refused by default: its acceptance figures may not describe the run).")] = False,
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Write the bundle of a selected result kept by a run whose bundle could not be written (the PRIVATE .pending.npz file it named): no new selection, no new spend. Needs --out and --key; --transcript gives the transcript another place.", show_default=False)] = None,
    preregistration: Annotated[Optional[Path], typer.Option("--preregistration", help="The signed record from `dpbundle preregister` (REC, with REC.sig beside it): the spec, --configs list and key must be the registered ones (refused before anything is read), and the sampling and projection seeds are derived from its committed secret and --beacon.", show_default=False)] = None,
    beacon: Annotated[Optional[str], typer.Option("--beacon", help="The public value the pre-registration record names (its beacon_source), taken after the record was published.", show_default=False)] = None,
    preregistration_secret: Annotated[Optional[Path], typer.Option("--preregistration-secret", help="The PRIVATE secret file `dpbundle preregister` wrote (default: its place in the private directory).", show_default=False)] = None,
    example_rows: Annotated[Optional[int], typer.Option("--example-rows", help=f"Rows of the simulated registry for --example (default: births 167000, persons 45000; at most {MAX_EXAMPLE_ROWS:,}).", min=MIN_EXAMPLE_ROWS, max=MAX_EXAMPLE_ROWS, show_default=False)] = None,
) -> None:
    """Produce a signed, differentially private release bundle.

    Runs the universal scheme inside the enclave: validates and prepares DATA with SPEC, records
    the privacy spend in the ledger, runs private selection (each attempt: transform, DP generator,
    synthetic constraints, face-privacy projection, DP acceptance criteria) until a candidate
    passes, and writes the bundle atomically: data.csv, metrics, budget, spec, datapackage.json,
    README.html/.pdf, manifest.json and its Ed25519 signature. The private transcript is written
    outside the bundle. Nothing about failed attempts is shown or stored in the bundle.

    Run `dpbundle sweep` on similar public data first and pass its narrowed.yaml with --configs:
    the stop probability then defaults to auto, which ends every run with a 5% chance of
    releasing nothing at the sweep's (lower) acceptance estimate, and a list measured on data
    more than a factor of 2 larger or smaller than DATA is refused (--allow-other-size). The spend
    is written to the ledger before the first attempt: an interrupted run (Ctrl-C) is outside the
    selection's guarantee and counts as spent.

    Examples:

        dpbundle release --example births --out births-bundle
        dpbundle release --example persons --out persons-bundle
        dpbundle release spec.yaml registry.csv.gz --out bundle --key steward.key \\
            --configs sweep/narrowed.yaml
        dpbundle release spec.yaml registry.csv.gz --out bundle --key steward.key \\
            --configs sweep/narrowed.yaml --stop-probability 0.05
    """
    try:
        run_release(spec=spec, data=data, out=out, example=example, key=key,
                    passphrase_file=passphrase_file, transcript=transcript, ledger=ledger,
                    configs=configs, allow_additional_spend=allow_additional_spend, force=force,
                    make_zip=make_zip, stop_probability=stop_probability, allow_other_spec=allow_other_spec,
                    allow_other_size=allow_other_size,
                    resume=resume, example_rows=example_rows, preregistration=preregistration,
                    beacon=beacon, preregistration_secret=preregistration_secret)
        signal_note(reported=True)      # a signal from now on changes nothing: the release said how it ended
    except (DpbundleError, DpbundleInterrupt) as exc:
        signal_note(reported=True)
        err.print(Text("error: ", style="bold red") + Text(literal(exc.message)), soft_wrap=True,
                  highlight=False)
        raise typer.Exit(exc.code) from None


# ----------------------------------------------------------------------------- the run's state

@dataclass
class _Run:
    """What a release has done so far: the source of every exit message."""

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
    zip_missing: bool = False
    out_note: Optional[str] = None         # what OUT holds when no new bundle is there
    throwaway: bool = False                # the ledger is --example's throwaway one
    signals: Any = None                    # the _Signals of this run
    reservation: Any = None                # room reserved for a kept result
    notes: list = field(default_factory=list)


def _state(run: _Run) -> str:
    """Sentences stating what exists on disk and in the ledger, from the run's record."""
    lines = []
    if run.entry is None:
        lines.append("no privacy budget was spent by this command" if run.resume_from else
                     "nothing was spent: the ledger is untouched")
    else:
        short = run.entry[:12]
        status = "status still 'started'" if run.status is None else f"status '{run.status}'"
        if run.status_problem:
            status += f"; {run.status_problem}"
        if run.status is None or run.status_problem:
            status += (f"; record the outcome with: dpbundle ledger mark {short} --ledger "
                       f"{run.ledger.path} --status STATUS")
        what = "the privacy spend of the kept result" if run.resume_from else "the privacy spend of this run"
        if run.throwaway:
            lines.append(f"{what} (epsilon {run.epsilon}) was recorded in the example's throwaway ledger "
                         f"(entry {short}, {status.split(';')[0]}), removed when this command ends")
        else:
            lines.append(f"{what} (epsilon {run.epsilon}) is recorded in the ledger {run.ledger.path} "
                         f"(entry {short}, {status}) and counts as spent")
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


def _how(exc: BaseException) -> str:
    return f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"


def _stopped(run: _Run) -> str:
    name = run.signals.stopping
    return ("interrupted" if name in (None, "SIGINT") else "stopped" if name == "error"
            else f"terminated ({name})")


def _mark(run: _Run, status: str) -> None:
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


class _Signals:
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

    def __enter__(self) -> "_Signals":
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
def _stated(run: _Run) -> Iterator[None]:
    """Whatever ends the release, the exception that leaves states what exists (:func:`_state`):
    an interrupt (130), running out of memory, a system error, an internal error (1). The
    spend, if recorded and still without an outcome, is marked."""
    try:
        yield
    except (DpbundleError, DpbundleInterrupt):
        raise
    except KeyboardInterrupt as exc:
        run.signals.stop(exc)
        if run.entry is None and not run.complete:
            if run.resume_from is not None:
                _fail(f"{_how(exc)}: no bundle was written and no budget was spent; the kept result "
                      f"{run.resume_from} is unchanged", code=130)
            _fail(f"{_how(exc)} before any privacy budget was spent: the ledger is untouched and no "
                  "bundle was written", code=130)
        _settle_outcome(run, "interrupted")
        _fail(f"{_how(exc)}{' after the bundle was complete' if run.complete else ''}.\n" + _state(run),
              code=130)
    except Exception as exc:  # noqa: BLE001 - every exit states what exists
        run.signals.stop()
        if isinstance(exc, MemoryError):
            what, code = "not enough memory", 1
        elif isinstance(exc, OSError):
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            what, code = f"a system error: {where}{exc.strerror or exc}", 2
        else:   # the message may hold private values: the type only
            what, code = f"an internal error ({type(exc).__name__})", 1
        if run.entry is None and not run.complete:
            _fail(f"the release stopped with {what} before any privacy budget was spent.\n" + _state(run),
                  code=code, cls=DpbundleError if code == 1 else Refused)
        _settle_outcome(run, "failed")
        _fail(f"the release stopped with {what}.\n" + _state(run), code=code, cls=ReleaseFailed)


def _settle_outcome(run: _Run, otherwise: str) -> None:
    """Record the outcome of a run stopped by an unexpected exception: 'released' when its bundle
    is complete (and a kept result it was written from is removed), else ``otherwise`` when the
    spend has no outcome yet."""
    if run.complete:
        if run.entry is not None and run.status != "released":
            _mark(run, "released")
        if run.resume_from is not None:
            with run.signals.critical():
                try:
                    run.resume_from.unlink(missing_ok=True)
                    run.resume_from = None
                except OSError as exc:
                    run.notes.append(f"the kept result {run.resume_from} could not be removed "
                                     f"({exc.strerror}); remove it by hand")
    elif run.entry is not None and run.status is None and run.resume_from is None:
        _mark(run, otherwise)


def run_release(*, spec: Optional[Path], data: Optional[Path], out: Path, example: Optional[str],
                key: Optional[Path], passphrase_file: Optional[Path], transcript: Optional[Path],
                ledger: Optional[Path], configs: Optional[Path], allow_additional_spend: bool,
                force: bool, make_zip: bool, stop_probability: Optional[str], allow_other_spec: bool,
                allow_other_size: bool = False,
                resume: Optional[Path], example_rows: Optional[int], preregistration: Optional[Path],
                beacon: Optional[str], preregistration_secret: Optional[Path]) -> None:
    """The release itself (``dpbundle release`` and :func:`dpbundle.release.api.release`):
    raises one of :mod:`dpbundle.release.errors` (exit code and message) when it stops."""
    from dpbundle.release.sweep.run import BOOTSTRAP_MESSAGE
    from dpbundle.release.sweep.execute import bootstrapping

    if bootstrapping():    # never a second release from a worker that re-runs the caller's script
        _fail(BOOTSTRAP_MESSAGE.format(call="release()") + " Nothing was read or spent here.")
    _check_text_inputs(spec=spec, data=data, out=out, example=example, key=key,
                       passphrase_file=passphrase_file, transcript=transcript, ledger=ledger,
                       configs=configs, resume=resume, preregistration=preregistration,
                       beacon=beacon, preregistration_secret=preregistration_secret,
                       stop_probability=stop_probability)
    run = _Run(out=Path(out), resume_from=resume, key=key)
    with _Signals() as signals:
        run.signals = signals
        try:
            with _stated(run):
                prereg = (preregistration, beacon, preregistration_secret)
                _dispatch(spec, data, out, example, key, passphrase_file, transcript, ledger, configs,
                          allow_additional_spend, force, make_zip, stop_probability, resume, example_rows,
                          (allow_other_spec, allow_other_size), prereg, run=run)
        finally:
            if run.reservation is not None:
                run.reservation.release()


def _check_text_inputs(**values: Any) -> None:
    """Every path and text option can be recorded and published as UTF-8 (an argument with
    undecodable bytes would otherwise fail after the spend, e.g. a beacon value in the seed
    derivation)."""
    from dpbundle.release.common.safe_io import text_problem

    for name, value in values.items():
        if value is None:
            continue
        option = "--" + name.replace("_", "-") if name not in ("spec", "data") else name.upper()
        problem = text_problem(value, option)
        if problem:
            _unusable(f"{problem}; nothing was read or spent")


def _dispatch(spec, data, out, example, key, passphrase_file, transcript, ledger, configs,
              allow_additional_spend, force, make_zip, stop_probability, resume, example_rows,
              allow_other=(False, False), prereg=(None, None, None), run: _Run | None = None) -> None:
    if (prereg[0] is None) != (prereg[1] is None):
        _unusable("--preregistration and --beacon go together: the record fixes the release, the "
                  "beacon value (public, taken after the record was published) binds its seeds")
    if example_rows is not None:
        if example is None:
            _unusable("--example-rows goes with --example")
        if isinstance(example_rows, bool) or not isinstance(example_rows, int) or \
                not MIN_EXAMPLE_ROWS <= example_rows <= MAX_EXAMPLE_ROWS:
            _unusable(f"--example-rows must be a whole number from {MIN_EXAMPLE_ROWS:,} to "
                      f"{MAX_EXAMPLE_ROWS:,}, not {example_rows!r}; nothing was spent")
    if resume is not None:
        if prereg[0] is not None:
            _unusable("--resume writes a kept result, which keeps its pre-registration: do not give "
                      "--preregistration again")
        if spec is not None or data is not None or example is not None:
            _unusable("--resume writes a kept result: give it with --out and --key (and --transcript, --force, --zip) only")
        if key is None:
            _unusable("--resume needs --key to sign the bundle")
        _resume(resume, out, key, passphrase_file, force, make_zip, run, transcript=transcript)
        return
    if example is not None:
        if spec is not None or data is not None:
            _unusable("give either --example or SPEC and DATA, not both")
        if example not in EXAMPLES:
            _unusable(f"unknown example {example!r}; available: {', '.join(EXAMPLES)}")
        _check_out(out, force)  # before simulating the registry and writing a demo key next to OUT
        if example_rows is None:
            from dpbundle.release.data.example import example_defaults

            example_rows = example_defaults(example)[0]
        _check_example_size(example, example_rows, configs, allow_other[1])
        with example_inputs(example, example_rows) as (spec_path, data_path, narrowed):
            with tempfile.TemporaryDirectory(prefix="dpbundle-ledger-") as tmp:
                if run is not None and ledger is None:
                    run.throwaway = True
                demo_key = key
                if demo_key is None:
                    demo_key = _demo_key(out)
                if configs is None:
                    configs = narrowed
                    console.print(f"selecting among the configurations that passed at least 10% of the time in the "
                                  f"public-data sweep shipped with the example ({narrowed.name}); "
                                  f"pass --configs to choose another list", highlight=False, markup=False)
                console.print(f"simulated {example} registry: {example_rows:,} rows (SIMULATED, no real person)",
                              highlight=False, markup=False)
                _release(spec_path, data_path, out, demo_key, passphrase_file, transcript,
                         ledger or Path(tmp) / "ledger.jsonl", configs, allow_additional_spend, force, make_zip,
                         example_note=True, stop_option=stop_probability, allow_other=allow_other,
                         prereg=prereg, run=run)
        return
    if spec is None or data is None:
        _unusable("give SPEC and DATA (or --example births); see `dpbundle release --help`")
    if key is None:
        _unusable("--key is required to sign the bundle; create one with `dpbundle keygen --out steward`")
    _release(spec, data, out, key, passphrase_file, transcript, ledger, configs, allow_additional_spend, force,
             make_zip, example_note=False, stop_option=stop_probability, allow_other=allow_other,
             prereg=prereg, run=run)


def _check_example_size(example: str, rows: int, configs: Optional[Path], allow: bool) -> None:
    """Before the registry is simulated: a number of rows far from the size the example's list
    was measured on is refused now (the same rule as after preparation, on the rows: simulating
    first could take minutes and gigabytes, only to be refused)."""
    if allow or configs is not None:
        return
    from dpbundle.release.sweep.run import read_list_document

    with as_file(files("dpbundle.examples").joinpath(EXAMPLES[example][1])) as narrowed:
        try:
            measured = (read_list_document(Path(narrowed)) or {}).get("measured_on") or {}
        except (OSError, ValueError):
            return
    theirs = measured.get("rows") or measured.get("n")
    if not isinstance(theirs, int) or theirs < 1 or max(rows, theirs) <= SIZE_FACTOR * min(rows, theirs):
        return
    _fail(f"--example-rows {rows:,}: the example's configuration list was measured on {theirs:,} rows, "
          f"more than a factor of {SIZE_FACTOR:g} {'fewer' if rows > theirs else 'more'}. Its "
          "acceptance figures (and the stop probability derived from them) may not describe this run, "
          "which could take very many attempts.\nchoose --example-rows within that factor of the "
          "list's size, or pass --allow-other-size; nothing was simulated and nothing was spent")


def _demo_key(out: Path) -> Path:
    from dpbundle.release.bundle.keys import write_keypair

    base = out.parent / f"{out.name}.demo-key"
    keyfile = base.with_name(base.name + ".key")
    if not keyfile.exists() and not keyfile.is_symlink():
        write_keypair(base)
        _say(f"generated a demo signing key {keyfile} (public key {base}.pub) outside the bundle; a "
             "real release uses the steward's own key (`dpbundle keygen`).", "note: ", "yellow")
    return keyfile


def _check_out(out: Path, force: bool) -> None:
    """The output location, before anything is spent: absent, or (with --force) a complete
    dpbundle bundle; its folder writable. Leftovers of killed runs are removed."""
    from dpbundle.release.bundle.preflight import clean_stale, replaceable_bundle_problem, writable_dir_problem

    if len(os.fsencode(out.name)) > MAX_OUT_NAME:
        _unusable(f"{out.name[:40]}...: the bundle's name is longer than {MAX_OUT_NAME} bytes (its hidden "
                  "temporary folder, transcript and kept result add up to 40 bytes to it, and a file "
                  "name has at most 255); nothing was spent")
    if (out.exists() or out.is_symlink()) and not force:
        _fail(f"{out} already exists; choose another --out or pass --force to replace it")
    if (out.exists() or out.is_symlink()) and force:
        problem = replaceable_bundle_problem(out)
        if problem:
            _fail(f"{problem}. --force replaces only a complete dpbundle bundle (its manifest lists "
                  "exactly its files and they verify); nothing was touched and nothing was spent")
    if not out.parent.is_dir():
        _fail(f"{out.parent}: no such directory (for the bundle {out}); create it first")
    problem = writable_dir_problem(out.parent, f"the bundle {out.name}")
    if problem:
        _fail(f"{problem}; nothing was spent")
    for name in clean_stale(out):
        _say(f"removed {out.parent / name}, left behind by an interrupted run")


def _check_private_outputs(out: Path, transcript_path: Path, make_zip: bool, force: bool) -> None:
    """The transcript's and the zip's paths: absent, or (with --force) a regular file; never a
    device node, FIFO, socket, directory or link."""
    from dpbundle.release.common.safe_io import replace_problem

    zip_path = out.with_name(out.name + ".zip")
    for path, what in ((transcript_path, "the transcript"), (zip_path if make_zip else None, "the zip")):
        if path is None or not (path.exists() or path.is_symlink()):
            continue
        if not force:
            _fail(f"{path} ({what}) already exists; choose another --out, move it away, or pass --force")
        problem = replace_problem(path, what)
        if problem:
            _fail(f"{problem}; nothing was touched and nothing was spent")


def _check_input_file(path: Path, what: str, limit: int | None) -> None:
    """A file the release reads: a regular file of at most ``limit`` bytes (never a device, a
    FIFO or a directory, which may never end or block), checked before it is read."""
    from dpbundle.release.common.safe_io import regular_file_problem

    if not path.exists():
        return            # the loader says so in its own words
    problem = regular_file_problem(path, what, limit)
    if problem:
        _unusable(f"{problem}; nothing was read or spent")


def _preflight_after_prepare(out: Path, spec, n: int, make_zip: bool, ledger_path: Path) -> None:
    """Room for the bundle, a writable ledger, a working PDF renderer: before the ledger entry."""
    from dpbundle.release.bundle.preflight import estimate_bundle_bytes, renderer_problem, room_problem, writable_dir_problem
    from dpbundle.release.data.transform import column_coding

    longest = []
    for col in spec.raw["columns"]:
        lens = [max(len(lab) for lab in column_coding(spec, col["name"], str(alt["id"])).labels)
                for alt in col["alternatives"]]
        longest.append(max(lens))
    need = estimate_bundle_bytes(n, longest) * (2 if make_zip else 1)
    problems = [room_problem(out.parent, need, "the bundle"),
                writable_dir_problem(ledger_path.parent, "the ledger")]
    if ledger_path.exists() and not os.access(ledger_path, os.W_OK):
        problems.append(f"{ledger_path}: the ledger is not writable")
    with console.status("checking the datasheet renderer"):
        problems.append(renderer_problem(spec.raw))
    problems = [p for p in problems if p]
    if problems:
        _fail("; ".join(problems) + "\nnothing was spent (checked before the ledger entry)")


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


def _spec_text_problem(obj: Any, where: str = "") -> str | None:
    """The first string of the spec that cannot be written as UTF-8 (a YAML escape such as
    "\\udcff" gives a lone surrogate), else None: the bundle's files are UTF-8."""
    stack = [(obj, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{at or '(root)'}: not valid Unicode text (a lone surrogate)"
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, at))
                stack.append((v, f"{at}.{k}" if at else str(k)))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(value))
    return None


def _pending_room(prepared, spec) -> int:
    """Room to reserve, before the spend, for a kept result: the codes (8 bytes a cell, an upper
    bound of their compressed size), the spec, and 16 MiB for the transcript and public files;
    grown after the selection if the transcript is larger."""
    rows = _rows_for_room(prepared, spec)
    return rows * len(spec.raw["columns"]) * 8 + 2 * len(json.dumps(spec.raw, default=str)) + (16 << 20)


def _release(spec_path: Path, data_path: Path, out: Path, key_path: Path, passphrase_file: Optional[Path],
             transcript_path: Optional[Path], ledger_path: Optional[Path], configs_path: Optional[Path],
             allow_additional_spend: bool, force: bool, make_zip: bool, example_note: bool,
             stop_option: Optional[str] = None, allow_other: tuple[bool, bool] = (False, False),
             prereg: tuple = (None, None, None), run: _Run | None = None) -> None:
    from dpbundle.mechanisms.noise import Randomness, Transcript

    from dpbundle.release.bundle.write import BundleError, default_transcript_path, private_dir
    from dpbundle.release.bundle.keys import KeyFileError, load_private_key, read_passphrase
    from dpbundle.mechanisms import exact  # exact budget arithmetic of the ledger's totals
    from dpbundle.release.scheme.ledger import Ledger, LedgerError, LedgerRefusal, table_fingerprint, unfinished_note
    from dpbundle.release.data.prepare import InputError, prepare
    from dpbundle.release.scheme.records import release_records
    from dpbundle.release.common.safe_io import KEY_BYTES, LIST_BYTES, PASSPHRASE_BYTES
    from dpbundle.release.scheme.selection import NothingSelected, SelectionAborted, select
    from dpbundle.release.spec.load import MAX_SPEC_BYTES, SpecError, load_spec
    from dpbundle.release.scheme.budget import build_budget
    from dpbundle.release.scheme.space import check_config

    if run is None:
        run = _Run(out=out, key=key_path, signals=_Signals())
    run.key = key_path

    # 1. Everything that can be checked before touching the private data (write_bundle repeats
    # these checks, but only after the budget is spent and the selection has run).
    _check_out(out, force)
    transcript_path = (transcript_path or default_transcript_path(out)).absolute()
    if _inside(transcript_path, out):
        _fail(f"the transcript {transcript_path} must not be inside the bundle {out}: it is private")
    if not transcript_path.parent.is_dir():
        _fail(f"{transcript_path.parent}: no such directory (for the transcript {transcript_path})")
    from dpbundle.release.bundle.preflight import writable_dir_problem

    problem = writable_dir_problem(transcript_path.parent, "the private transcript")
    if problem:
        _fail(f"{problem}; nothing was spent")
    _check_private_outputs(out, transcript_path, make_zip, force)
    zip_path = out.with_name(out.name + ".zip")
    ledger = Ledger(ledger_path or Ledger.default_path())   # an absolute path from here on
    problem = ledger.path_problem()
    if problem:
        _unusable(f"{problem}; nothing was read or spent")
    _check_input_file(spec_path, "spec", MAX_SPEC_BYTES)
    _check_input_file(data_path, "data file", None)
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        _unusable(str(exc))
    problem = _spec_text_problem(spec.raw)
    if problem:
        _unusable(f"{spec_path}: {problem}; nothing was read or spent")
    _check_input_file(key_path, "signing key", KEY_BYTES)
    if passphrase_file is not None:
        _check_input_file(passphrase_file, "passphrase file", PASSPHRASE_BYTES)
    try:
        passphrase = read_passphrase(passphrase_file)
        private_key = load_private_key(key_path, passphrase)
    except KeyFileError as exc:
        _unusable(f"cannot load the signing key: {exc}")
    configs, estimates, measured = None, None, None
    if configs_path is not None:
        _check_input_file(configs_path, "configuration list", LIST_BYTES)
        configs, estimates, measured = _load_configs(configs_path, spec, check_config, allow_other[0])
    binding, public_files = _bind_preregistration(prereg, spec, private_key, configs_path)
    if configs_path is not None:     # the list the selection draws from is published verbatim
        from dpbundle.release.bundle.write import configurations_file

        try:
            public_files = public_files | configurations_file(configs_path)
        except BundleError as exc:
            _unusable(f"{literal(exc)}; nothing was spent")
    stop = _choose_stop(spec, stop_option, estimates)
    from dpbundle.mechanisms.generators import generator_types

    available = generator_types()
    used = {c["generator"]["type"] for c in configs} if configs else {g["type"] for g in spec.raw["generators"]}
    for gtype in sorted(used):
        if not available[gtype]["available"]:
            _fail(f"generator {gtype!r} is not available here: {available[gtype]['reason']}")

    # 2. Prepare the private data (errors name file, line, column and rule).
    with console.status("reading and validating the data"):
        try:
            prepared = prepare(data_path, spec, show_values=False)
        except InputError as exc:
            _unusable(f"{exc}\n  (cell values are not shown here; run `dpbundle spec validate SPEC --data DATA` "
                      "inside the enclave to see them)")
    shown = data_path.name if example_note else data_path
    if spec.records_policy == "declared_public":
        _say(f"prepared {shown}: n = {prepared.n:,} plausible records (declared public by the spec's "
             "records policy)")
    else:
        _say(f"prepared {shown}: the number of plausible records will be released as a DP count "
             f"(epsilon {spec.epsilon_count:g})")

    # 3. Everything else that could stop the bundle from being written, then the spend goes to
    # the ledger before the first iteration.
    if configs_path is not None:
        _check_list_size(configs_path, measured, prepared, spec, allow_other[1], example_note)
    try:   # room for a kept result in the private directory, taken before the bundle's room is measured
        from dpbundle.release.bundle.pending import reserve

        run.reservation = reserve(private_dir(), out, _pending_room(prepared, spec))
    except OSError as exc:
        _fail(f"{private_dir()}: cannot reserve room there to keep the selected result should its "
              f"bundle fail to be written ({exc.strerror or exc}); nothing was spent (checked before "
              "the ledger entry)")
    _preflight_after_prepare(out, spec, _rows_for_room(prepared, spec), make_zip, ledger.path)
    try:   # the public files the bundle will carry, checked now as write_bundle will check them
        from dpbundle.release.bundle.write import _check_public_files

        _check_public_files(public_files)
    except (BundleError, ValueError) as exc:
        _unusable(f"{literal(exc)}; nothing was spent")
    table_fp = table_fingerprint(prepared, spec)
    try:
        note = unfinished_note(ledger.entries(prepared.sha256, table_fp))
    except LedgerError as exc:
        _fail(str(exc))
    if note:
        _say(note, "ledger: ", "yellow")
    run.ledger, run.epsilon = ledger, exact.show(spec.total_epsilon_exact)
    try:
        with run.signals.critical():     # a signal now is held until the entry is recorded
            entry, composed = ledger.reserve(prepared.sha256, spec.fingerprint, spec.total_epsilon_exact,
                                             f"dpbundle release {spec.raw['release']['title']!r} -> {out}",
                                             allow_additional_spend, table_fp=table_fp)
            run.entry = entry
    except LedgerRefusal as exc:
        _fail(str(exc))
    except LedgerError as exc:
        _fail(f"{exc}; nothing was spent (the ledger holds no entry of this run)")
    if composed > spec.total_epsilon_exact:
        _say(f"the composed total spent on these data is now {exact.show(composed)}", "ledger: ", "yellow")
    ledger_info = _ledger_info(ledger, prepared, table_fp, entry)

    # 4. Private selection, with a transient display of the current step only.
    transcript = Transcript()
    try:
        released = release_records(prepared, spec, Randomness(transcript))
        if spec.records_policy == "dp_count":
            _say(f"n = {released.n:,} records (DP count; the table is resized to it)")
        console.print(_selection_line(stop.gamma), highlight=False, markup=False)
        selection = select(released, spec, transcript, configs, seeds=binding, stop_probability=stop.gamma)
    except NothingSelected as exc:
        _mark(run, "nothing released")
        _keep_private_transcript(transcript, transcript_path, run=run)
        _fail(f"{exc}\n" + _state(run), code=1)
    except KeyboardInterrupt as exc:
        run.signals.stop(exc)
        _mark(run, "interrupted")
        _keep_private_transcript(transcript, transcript_path, run=run)
        _fail(f"{_how(exc)}: nothing was released. An interrupted run is outside the private "
              "selection's guarantee (when it was stopped is a choice made while watching it), so "
              f"its whole budget (epsilon {run.epsilon}) stays recorded as spent.\n" + _state(run),
              code=130)
    except SelectionAborted as exc:
        _mark(run, "failed")
        _keep_private_transcript(transcript, transcript_path, run=run)
        _fail(f"the release stopped: {exc}. Nothing was released.\n" + _state(run), code=1)
    except Exception as exc:  # noqa: BLE001 - the message may carry private values
        run.signals.stop()
        _mark(run, "failed")
        _keep_private_transcript(transcript, transcript_path, error=exc, run=run)
        _fail(f"the release stopped with an internal error ({type(exc).__name__}); the details are "
              "in the PRIVATE transcript only. Nothing was released.\n" + _state(run), code=1)
    result = selection.result
    # No duration here: the time the selection took is a proxy for the number of attempts, which
    # is private.
    console.print("private selection finished: a candidate passed every criterion", highlight=False)

    # 5. The bundle (atomic) and the private transcript.
    try:
        budget = build_budget(spec, result.generator, selection.total_epsilon_opendp, released.n, stop=stop)
        if spec.publish_model:
            public_files = public_files | {"model.json": _model_file(spec, result)}
    except Exception as exc:  # noqa: BLE001 - the message may carry private values
        run.signals.stop()
        _mark(run, "failed")
        _keep_private_transcript(transcript, transcript_path, error=exc, run=run)
        _fail(f"the release stopped with an internal error ({type(exc).__name__}) after the selection; "
              "the details are in the PRIVATE transcript only. Nothing was released.\n" + _state(run),
              code=1)
    write_args = dict(spec=spec.raw, configuration=result.config, configuration_id=result.config_id,
                      columns=list(result.candidate.columns), codes=result.candidate.codes,
                      metrics=result.metrics(), budget=budget, transcript_records_jsonl=transcript.to_jsonl(),
                      transcript_path=transcript_path, private_key=private_key, force=force,
                      make_zip=make_zip, public_files=public_files, ledger=ledger_info)
    _ensure_pending_room(run, write_args)
    failure = _write_and_settle(run, out, write_args)
    if failure is not None:
        # the budget is spent and a candidate passed: keep it, privately, to write it again
        interrupted = isinstance(failure, KeyboardInterrupt)
        _mark(run, "interrupted while writing the bundle" if interrupted else "failed while writing the bundle")
        _keep_pending(run, out, ledger, write_args)
        _fail(f"the bundle could not be written: {_write_failure(failure)}; nothing was released.\n"
              + _state(run), code=130 if interrupted else 2 if isinstance(failure, (BundleError, OSError))
              else 1, cls=BundleNotWritten if isinstance(failure, (BundleError, OSError)) else ReleaseFailed)
    _mark(run, "released")
    if run.signals.stopping:      # a signal came while the bundle was being put in place
        _fail(f"{_stopped(run)} after the bundle was complete.\n{_state(run)}", code=130)
    if run.status_problem:
        _warn(run.status_problem + f"; record it with: dpbundle ledger mark {entry[:12]} --ledger "
              f"{ledger.path} --status released")
    _summary_safely(out, result, budget, transcript_path, key_path)


def _write_failure(exc: BaseException) -> str:
    """Why a bundle could not be written, without private values."""
    from dpbundle.release.bundle.write import BundleError

    if isinstance(exc, KeyboardInterrupt):
        return _how(exc)
    if isinstance(exc, BundleError):
        return literal(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return f"{where}{exc.strerror or exc}"
    if isinstance(exc, MemoryError):
        return "not enough memory"
    return f"internal error ({type(exc).__name__})"


def _ledger_info(ledger, prepared, table_fp: str, entry: str) -> dict | None:
    """What the bundle states, signed, about the ledger: how many spends on these data it has
    recorded, this one included, and this spend's id (the enclave audit's ``--ledger`` checks
    both). None if the ledger cannot be read again (the bundle then says nothing about it)."""
    from dpbundle.release.scheme.ledger import LedgerError

    try:
        ids = [e["id"] for e in ledger.entries(prepared.sha256, table_fp)]
        return {"spends_on_registry": ids.index(entry) + 1, "spend_id": entry}
    except (LedgerError, OSError, KeyError, ValueError):
        return None


def _ensure_pending_room(run: _Run, write_args: dict) -> None:
    """After the selection: grow the reservation to the kept result's real bound, or warn."""
    from dpbundle.release.bundle.pending import pending_bound

    if run.reservation is None:
        return
    try:
        bound = pending_bound(write_args["codes"], write_args["transcript_records_jsonl"], write_args["spec"],
                              write_args.get("public_files"))
        grown = run.reservation.grow(bound)
    except Exception:  # noqa: BLE001 - only a precaution: never stop a release that has spent here
        return
    if not grown:
        _warn(f"the private directory has no room for {bound / 1e6:,.1f} MB: if the bundle cannot be "
              "written, the selected result may not be kept")


def _keep_pending(run: _Run, out: Path, ledger, write_args: dict) -> None:
    """Keep the selected result (signals deferred), into the room reserved before the spend."""
    from dpbundle.release.bundle.write import private_dir
    from dpbundle.release.bundle.pending import save_pending

    standard = {"spec", "configuration", "configuration_id", "columns", "codes", "metrics", "budget",
                "transcript_records_jsonl", "transcript_path", "private_key", "force", "make_zip",
                "public_files"}
    with run.signals.critical():
        try:
            run.pending = save_pending(
                private_dir(), out, spec=write_args["spec"], configuration=write_args["configuration"],
                configuration_id=write_args["configuration_id"], columns=write_args["columns"],
                codes=write_args["codes"], metrics=write_args["metrics"], budget=write_args["budget"],
                transcript_jsonl=write_args["transcript_records_jsonl"],
                transcript_path=write_args["transcript_path"], ledger_path=ledger.path,
                ledger_entry=run.entry, public_files=write_args.get("public_files"),
                ledger_throwaway=run.throwaway,
                extra_args={k: v for k, v in write_args.items() if k not in standard},
                reservation=run.reservation)
            run.reservation = None          # it is the kept result now
        except Exception as exc:  # noqa: BLE001
            run.pending_problem = (f"{exc.strerror}" if isinstance(exc, OSError) and exc.strerror
                                   else f"{type(exc).__name__}: {literal(exc)}")


# --------------------------------------------------------------- writing, and what a stop left

def _identity(path: Path) -> Optional[tuple[int, int]]:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _olds(out: Path) -> set[str]:
    """The moved-aside old bundles (``.OUT.old-*``) present now."""
    try:
        return {p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.old-")}
    except OSError:
        return set()


def _bundle_problem(out: Path, public_key, transcript_path: Path) -> Optional[str]:
    """None when ``out`` is a complete bundle: its manifest lists exactly its files and their
    hashes match, its signature verifies with ``public_key``, and the transcript at
    ``transcript_path`` opens its commitment."""
    from dpbundle.mechanisms.noise import commitment_of

    from dpbundle.release.bundle import keys
    from dpbundle.release.bundle.preflight import replaceable_bundle_problem

    problem = replaceable_bundle_problem(out)
    if problem:
        return problem
    try:
        manifest = (out / "manifest.json").read_bytes()
        if not keys.verify(public_key, manifest, (out / "manifest.sig").read_bytes()):
            return "its signature does not verify"
        value = json.loads(manifest)["transcript_commitment"]["value"]
        with open(transcript_path, "rb") as fh:
            header = json.loads(fh.readline())
            records = fh.read()
        if commitment_of(bytes.fromhex(header["salt"]), records) != value:
            return "its private transcript does not open its commitment"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"it cannot be checked ({type(exc).__name__})"
    return None


def _write_and_settle(run: _Run, out: Path, write_args: dict) -> Optional[BaseException]:
    """write_bundle; None when the bundle is complete (``run.complete``), else the exception,
    after what it left was inspected: a complete bundle of this run that only lacked its zip is
    completed; one that lost its private transcript (a stop between the two renames) is removed
    and the previous bundle put back, so that the result can be kept and written again."""
    from dpbundle.release.bundle import write as bundle_mod

    transcript_path = Path(write_args["transcript_path"])
    zip_path = out.with_name(out.name + ".zip")
    before = (_identity(out), _identity(transcript_path), _identity(zip_path), _olds(out))
    run.out_note = (f"{out} holds the previous bundle, unchanged" if before[0] is not None
                    else f"{out} was not created")
    try:
        with console.status("writing the bundle: data.csv, metrics, datasheet (HTML and PDF), signature"):
            bundle_mod.write_bundle(out, **write_args)
        run.complete = True
        return None
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included: inspect the disk
        if isinstance(exc, KeyboardInterrupt):
            run.signals.stop(exc)
        failure = exc
    with run.signals.critical():
        now = _identity(out)
        if now is None or now == before[0]:
            return failure                       # write_bundle put everything back
        public_key = write_args["private_key"].public_key()
        new_transcript = _identity(transcript_path) not in (None, before[1])
        problem = _bundle_problem(out, public_key, transcript_path) if new_transcript else \
            "its private transcript was not put in place"
        new_olds = sorted(_olds(out) - before[3])
        if problem is None:
            if write_args.get("make_zip") and _identity(zip_path) in (None, before[2]):
                tmp = zip_path.with_name(f".{zip_path.name}.tmp-{os.getpid()}-settle")
                try:
                    bundle_mod.write_zip(out, tmp, root=out.name)
                    os.replace(tmp, zip_path)
                except OSError:
                    run.zip_missing = True
                    tmp.unlink(missing_ok=True)
            for name in new_olds:       # the bundle --force replaced, moved aside by write_bundle
                shutil.rmtree(out.parent / name, ignore_errors=True)
            run.complete = True
            return None
        # ours, but not complete: take it away and put the previous bundle back
        aside = out.with_name(f".{out.name}.tmp-{os.getpid()}-unfinished")
        try:
            os.rename(out, aside)
            shutil.rmtree(aside, ignore_errors=True)
            if len(new_olds) == 1:
                os.rename(out.parent / new_olds[0], out)
                run.out_note = f"{out} holds the previous bundle, unchanged"
            else:
                run.out_note = f"{out} was not created"
        except OSError as exc:
            run.out_note = (f"{out} holds an unfinished bundle of this run ({problem}) that could not "
                            f"be removed ({exc.strerror or exc}); do not publish it")
        return failure


def _summary_safely(out: Path, result, budget: dict, transcript_path: Path, key_path: Path) -> None:
    """The summary after a complete release; a failure to print it is only a warning."""
    try:
        _summary(out, result, budget, transcript_path, key_path)
    except Exception as exc:  # noqa: BLE001 - the bundle is written and the ledger marked
        _warn(f"the summary could not be printed ({type(exc).__name__}); the bundle {out} is "
              "written and the ledger records it as released")


def _model_file(spec, result) -> bytes:
    """model.json of ``publish: model``: the selected candidate's fitted DP model."""
    from dpbundle.mechanisms.published import model_document

    doc = model_document(result.model, generator=result.config["generator"],
                         epsilon=float(spec.raw["privacy"]["epsilon_generation"]),
                         columns=list(spec.column_names))
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def _bind_preregistration(prereg: tuple, spec, private_key, configs_path: Optional[Path]):
    """(SeedBinding, public files for the bundle) of ``--preregistration REC --beacon VALUE``, or
    (None, {}). Everything is checked here, before the data are read or anything is spent."""
    rec_path, beacon, secret_path = prereg
    if rec_path is None:
        return None, {}
    from dpbundle.mechanisms.seeds import SeedBinding

    from dpbundle.release.scheme.preregister import (PreregistrationError, check_against, default_secret_path,
                              load_preregistration, load_secret, seeds_document)

    try:
        rec = load_preregistration(rec_path)
        problems = check_against(rec, spec, private_key, configs_path)
        if problems:
            _fail(f"{rec_path}: this release is not the pre-registered one: " + "; ".join(problems)
                  + "; nothing was read or spent")
        secret, salt = load_secret(secret_path or default_secret_path(rec_path), rec)
        binding = SeedBinding(secret, beacon)
        binding.seed("projection", 0)     # the derivation works on this beacon value (UTF-8 text)
    except (PreregistrationError, ValueError, UnicodeError) as exc:
        _unusable(f"{literal(exc)}; nothing was read or spent")
    from dpbundle.release import __version__

    if rec.doc["dpbundle_version"] != __version__:
        _warn(f"the record was made with dpbundle {rec.doc['dpbundle_version']}, this is {__version__}")
    seeds = seeds_document(rec, secret, salt, beacon)
    files = {"preregistration.json": rec.raw, "preregistration.json.sig": rec.signature,
             "seeds.json": (json.dumps(seeds, indent=2) + "\n").encode("utf-8")}
    _say(f"pre-registered ({rec_path.name}): spec, list and key match; seeds bound to the beacon "
         f"value {beacon!r}")
    return binding, files


def _resume(pending_path: Path, out: Path, key_path: Path, passphrase_file: Optional[Path], force: bool,
            make_zip: bool, run: _Run | None = None, transcript: Optional[Path] = None) -> None:
    """Write the bundle of a kept selected result (``--resume``): no selection, no new spend.
    The kept result must be authentic (its HMAC, with the private directory's key) and pass
    :func:`dpbundle.release.bundle.pending.recheck`; its ledger must be the regular file it names, with
    the spend it names, of the budget's epsilon."""
    from dpbundle.mechanisms import exact

    from dpbundle.release.scheme.ledger import Ledger, LedgerError
    from dpbundle.release.bundle.pending import PendingError, load_pending, recheck

    if run is None:
        run = _Run(out=out, resume_from=pending_path, key=key_path, signals=_Signals())
    try:
        p = load_pending(pending_path)
    except PendingError as exc:
        _unusable(str(exc) if "nothing is signed" in str(exc) else f"{exc}; nothing was signed")
    problems = recheck(p)
    if problems:
        _fail(f"{pending_path}: the kept result fails its re-check, so it is not signed: "
              + "; ".join(problems[:5]))
    ledger = Ledger(Path(p["ledger_path"]))
    if p.get("ledger_throwaway"):     # --example's throwaway ledger, gone with its command
        _resume_write(run, p, pending_path, out, key_path, passphrase_file, force, make_zip, transcript,
                      ledger=None)
        return
    problem = ledger.path_problem()
    if problem or not ledger.path.is_file():
        _fail(f"{pending_path}: its ledger {ledger.path} is unusable ({problem or 'no such file'}); "
              "nothing was signed")
    try:
        entry = next((e for e in ledger.all_entries() if e["id"] == p["ledger_entry"]), None)
    except LedgerError as exc:
        _fail(f"{literal(exc)}; nothing was signed")
    if entry is None:
        _fail(f"{pending_path}: the ledger {ledger.path} has no spend {p['ledger_entry'][:12]}, which "
              "the kept result names; nothing was signed")
    try:
        spent_ok = exact.dec(entry["epsilon"]) >= exact.dec(p["budget"]["total_epsilon"])
    except (KeyError, TypeError, ValueError, ArithmeticError):
        spent_ok = False
    if not spent_ok:
        _fail(f"{pending_path}: the ledger's spend {entry['id'][:12]} (epsilon {entry['epsilon']}) does "
              "not cover the kept result's total epsilon; nothing was signed")
    run.ledger, run.entry, run.epsilon = ledger, entry["id"], str(entry["epsilon"])
    run.status = entry.get("status")
    _resume_write(run, p, pending_path, out, key_path, passphrase_file, force, make_zip, transcript,
                  ledger=ledger)


def _resume_write(run: _Run, p: dict, pending_path: Path, out: Path, key_path: Path,
                  passphrase_file: Optional[Path], force: bool, make_zip: bool,
                  transcript: Optional[Path], ledger) -> None:
    """The part of ``--resume`` after the kept result and its ledger were checked."""
    from dpbundle.release.bundle.keys import KeyFileError, load_private_key, public_key_fingerprint, read_passphrase
    from dpbundle.release.common.safe_io import KEY_BYTES, PASSPHRASE_BYTES

    transcript_path = (transcript or Path(p["transcript_path"])).absolute()
    _check_out(out, force)
    if not transcript_path.parent.is_dir():
        _fail(f"{transcript_path.parent}: no such directory (for the kept result's transcript "
              f"{transcript_path}); give another place with --transcript")
    if _inside(transcript_path, out):
        _fail(f"the transcript {transcript_path} must not be inside the bundle {out}: it is private")
    if transcript is None and (transcript_path.exists() or transcript_path.is_symlink()):
        _fail(f"{transcript_path}: the kept result's transcript path is taken (by another run's "
              "transcript?); give another place with --transcript; nothing was signed")
    _check_private_outputs(out, transcript_path, make_zip, force)
    _check_input_file(key_path, "signing key", KEY_BYTES)
    if passphrase_file is not None:
        _check_input_file(passphrase_file, "passphrase file", PASSPHRASE_BYTES)
    try:
        private_key = load_private_key(key_path, read_passphrase(passphrase_file))
    except KeyFileError as exc:
        _unusable(f"cannot load the signing key: {exc}")
    record = (p.get("public_files") or {}).get("preregistration.json")
    if record is not None:
        try:
            registered = json.loads(record)["public_key"]["fingerprint"]
        except (ValueError, KeyError, TypeError):
            registered = None
        if registered != public_key_fingerprint(private_key.public_key()):
            _fail(f"{key_path}: not the key the kept result's pre-registration registered; nothing "
                  "was signed")
    write_args = dict(spec=p["spec"], configuration=p["configuration"],
                      configuration_id=p["configuration_id"], columns=p["columns"], codes=p["codes"],
                      metrics=p["metrics"], budget=p["budget"],
                      transcript_records_jsonl=p["transcript_jsonl"].encode("utf-8"),
                      transcript_path=transcript_path, private_key=private_key, force=force,
                      make_zip=make_zip, public_files=p.get("public_files") or {},
                      **(p.get("extra_args") or {}))
    failure = _write_and_settle(run, out, write_args)
    if failure is not None:
        from dpbundle.release.bundle.write import BundleError

        if isinstance(failure, KeyboardInterrupt):
            _fail(f"{_how(failure)}: the bundle was not written.\n" + _state(run), code=130)
        _fail(f"the bundle could not be written: {_write_failure(failure)}.\n" + _state(run),
              code=2 if isinstance(failure, (BundleError, OSError)) else 1,
              cls=BundleNotWritten if isinstance(failure, (BundleError, OSError)) else ReleaseFailed)
    _settle_outcome(run, "released")
    if run.signals.stopping:
        _fail(f"{_stopped(run)} after the bundle was complete.\n{_state(run)}", code=130)
    if run.status_problem and ledger is not None:
        _warn(run.status_problem + f"; record it with: dpbundle ledger mark {run.entry[:12]} --ledger "
              f"{ledger.path} --status released")
    for note in run.notes:
        _warn(note)
    _say(f"{out} (from the kept result; no new spend)", "bundle written: ", "bold green")
    _say(str(transcript_path), "private transcript: ", "bold yellow")


def _keep_private_transcript(transcript, path: Path, error: BaseException | None = None,
                             run: _Run | None = None) -> str:
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


def _load_configs(path: Path, spec, check_config, allow_other_spec: bool = False):
    from dpbundle.release.sweep.run import load_narrowed

    try:
        entries = load_narrowed(path)
    except (OSError, ValueError) as exc:
        _unusable(str(exc) if str(exc).startswith(str(path)) else f"{path}: cannot read the configuration list: {exc}")
    configs = [e["config"] for e in entries]
    if not configs:
        _unusable(f"{path}: lists no configurations; rerun the sweep with a lower --min-acceptance")
    for i, c in enumerate(configs):
        problems = check_config(spec, c)
        if problems:
            _unusable(f"{path}: configurations[{i}] is not in the spec's space: {'; '.join(problems)}")
    from dpbundle.release.sweep.run import _spec_fingerprint, read_list_document

    listed = (read_list_document(path) or {}).get("spec_sha256")
    mine = _spec_fingerprint(spec)
    if listed is not None and listed != mine:
        if not allow_other_spec:
            _fail(f"{path}: this configuration list was swept on another version of the spec:\n"
                  f"  list spec_sha256: {listed}\n  this spec:        {mine}\n"
                  "Its acceptance figures may not describe this spec. Re-run the sweep (or `dpbundle "
                  "sweep --configs` to re-measure the list), or pass --allow-other-spec to use it anyway.")
        _warn(f"{path} was swept on another spec (spec_sha256 {str(listed)[:16]}..., this spec "
              f"{mine[:16]}...); used because of --allow-other-spec")
    measured = (read_list_document(path) or {}).get("measured_on")
    acc = [e.get("acceptance") for e in entries]
    if not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in acc):
        return configs, None, measured
    return configs, (acc, [e.get("wilson_low") for e in entries]), measured


def _choose_stop(spec, option: Optional[str], estimates):
    """The stop plan (:class:`StopPlan`) from --stop-probability (a number or auto), printed
    with its arithmetic; warnings before anything is spent when the acceptance is unknown or low
    or the run may never end. A list with sweep estimates makes ``auto`` the default (unless the
    spec sets a stop probability above 0); 0 then needs ``--stop-probability 0``."""
    from dpbundle.release.scheme.stopping import LOW_ACCEPTANCE, plan_stop

    acc, lows = estimates if estimates else (None, None)
    if option is None and acc is not None and spec.stop_probability == 0:
        option = "auto"
    try:
        plan = plan_stop(option, spec.stop_probability, acc, lows)
    except ValueError as exc:
        _unusable(str(exc))
    for line in plan.lines():
        _say(line)
    if plan.gamma == 0:
        _warn("stop probability 0: the selection runs until a candidate passes, and may never end if "
              "none can" + (" (the list's sweep estimates allow --stop-probability auto, which ends "
                            "every run)" if acc is not None else
                            "; pass --configs with the narrowed.yaml of `dpbundle sweep` and "
                            "--stop-probability auto"))
    if plan.p_mean is None:
        _warn("no sweep estimate of the acceptance for these configurations (pass --configs with the "
              "narrowed.yaml of `dpbundle sweep`): the run may take many attempts")
    elif plan.p_mean < LOW_ACCEPTANCE:
        _warn(f"the configurations pass only {plan.p_mean:.1%} of the time on public data (below "
              f"{LOW_ACCEPTANCE:.0%}): expect many attempts")
    return plan


SIZE_FACTOR = 2.0   # the data and the list's sweep data may differ in size by at most this factor


def _check_list_size(path: Path, measured: dict | None, prepared, spec, allow: bool,
                     example: bool) -> None:
    """Refuse (before the ledger entry) a --configs list measured on data of another size: the
    acceptance of a configuration changes with n (the noise of the criteria scales as 1/n), so
    the list's figures, and the stop probability derived from them, may not describe this run.
    Compared: the public number of records (declared_public), else the rows of the file (the
    same for every neighbour: the plausible count is private under dp_count)."""
    if not measured:
        _warn(f"{path} does not say on how many records it was measured (swept before dpbundle 0.2): "
              "its acceptance figures may not fit these data")
        return
    if spec.records_policy == "declared_public":
        mine, theirs, what = prepared.n, measured.get("n"), "plausible records"
    else:
        mine, theirs, what = prepared.rows_read, measured.get("rows"), "rows"
    if not isinstance(theirs, int) or theirs < 1 or max(mine, theirs) <= SIZE_FACTOR * min(mine, theirs):
        return
    text = (f"{path} was measured on {theirs:,} {what}; these data have {mine:,}, more than a factor "
            f"of {SIZE_FACTOR:g} {'fewer' if mine < theirs else 'more'}. Its acceptance figures (and "
            "the stop probability derived from them) may not describe this run, which could take "
            "very many attempts.")
    if allow:
        _warn(f"{text} Used because of --allow-other-size.")
        return
    hint = ("choose --example-rows within that factor of the list's size, or run `dpbundle sweep` "
            "on public data of this size and pass its narrowed.yaml with --configs" if example else
            "run `dpbundle sweep` on public data of about this size (or `dpbundle sweep --configs "
            f"{path}` to re-measure the list), or pass --allow-other-size")
    _fail(f"{text}\n{hint}; nothing was spent")


def _rows_for_room(prepared, spec) -> int:
    """The number of rows to budget disk room for, without reading the private n under dp_count:
    the file's rows plus 20 noise scales of the DP count (exceeded with probability e^-20 / 2)."""
    if spec.records_policy == "declared_public":
        return prepared.n
    from dpbundle.mechanisms.noise import calibrated_laplace_scale

    return prepared.rows_read + int(20 * calibrated_laplace_scale(1, spec.epsilon_count, integer=True)) + 1


def _summary(bundle: Path, result, budget: dict, transcript_path: Path, key_path: Path | None = None) -> None:
    from dpbundle.templates.datasheet.value_noise import value_noise_text

    table = Table(title="Acceptance criteria (DP values)")
    for col in ("criterion", "DP value", "threshold", "epsilon", "noise std of the value", "pass"):
        table.add_column(col, justify="right" if col not in ("criterion",) else "left")
    noise_text = value_noise_text(bundle / "metrics.csv")
    for r in result.results:
        table.add_row(Text(literal(r.id)), f"{r.dp_value:.6g}", f"{r.threshold:.6g}", f"{r.epsilon:g}",
                      noise_text.get(r.id, f"{r.noise_std:.3g}"), "[green]yes[/]" if r.passed else "[red]no[/]")
    console.print(table)
    if any("fit" in t or "choice" in t for t in noise_text.values()):
        console.print("fit: the noise was added inside a model fit, not to the value (≈: its estimated effect "
                      "on the value); choice: added to the scores of a choice. See README.pdf, section 6.",
                      highlight=False)
    _say(f"n = {result.candidate.n:,} records; total epsilon {budget['total_epsilon']:.6g} "
         f"(OpenDP: {budget['total_epsilon_opendp']:.6g}; cap {budget['epsilon_cap']:g})")
    _say(str(bundle), "bundle written: ", "bold green")
    _say(f"{transcript_path} — keep it inside the enclave; only its salted commitment is in the bundle.",
         "private transcript: ", "bold yellow")
    pub = key_path.with_name(key_path.name[:-len(".key")] + ".pub") if key_path and key_path.name.endswith(".key") else None
    _say(f"verify with: dpbundle audit {bundle} --pubkey {pub if pub and pub.is_file() else 'PUBLISHER.pub'}")
