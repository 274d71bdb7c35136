"""`dpbundle release`: prepare the private data, run the private selection, write the signed bundle."""
from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

console = Console()
err = Console(stderr=True)

from .api import CommandError, ReleaseInterrupted  # noqa: E402  (api imports this module only inside functions)

# name -> (spec, narrowed configuration list from a public-data sweep; see docs/sweep-births-nvss160k.md)
EXAMPLES = {"births": ("births-recommended.yaml", "births-recommended-narrowed-nvss160k.yaml"),
            # see docs/sweep-persons.md (swept on a simulated copy with another seed)
            "persons": ("persons-recommended.yaml", "persons-recommended-narrowed.yaml")}


def _fail(message: str, code: int = 2) -> None:
    """Stop the release: :class:`CommandError` (the CLI prints it and exits with ``code``; the
    Python API raises it), or :class:`ReleaseInterrupted` for code 130 (Ctrl-C, SIGTERM)."""
    if code == 130:
        raise ReleaseInterrupted(message)
    raise CommandError(code, message)


@contextmanager
def example_inputs(name: str, rows: int | None) -> Iterator[tuple[Path, Path, Path]]:
    """The packaged example spec, its narrowed configuration list, and a freshly simulated
    registry (in a temporary directory)."""
    from .example import write_example

    if name not in EXAMPLES:
        _fail(f"unknown example {name!r}; available: {', '.join(EXAMPLES)}")
    spec_name, narrowed_name = EXAMPLES[name]
    with tempfile.TemporaryDirectory(prefix="dpbundle-example-") as tmp:
        data = Path(tmp) / f"{name}-simulated.csv"
        write_example(data, rows=rows, name=name)
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
    resume: Annotated[Optional[Path], typer.Option("--resume", help="Write the bundle of a selected result kept by a run whose bundle could not be written (the PRIVATE .pending.npz file it named): no new selection, no new spend. Needs --out and --key.", show_default=False)] = None,
    preregistration: Annotated[Optional[Path], typer.Option("--preregistration", help="The signed record from `dpbundle preregister` (REC, with REC.sig beside it): the spec, --configs list and key must be the registered ones (refused before anything is read), and the sampling and projection seeds are derived from its committed secret and --beacon.", show_default=False)] = None,
    beacon: Annotated[Optional[str], typer.Option("--beacon", help="The public value the pre-registration record names (its beacon_source), taken after the record was published.", show_default=False)] = None,
    preregistration_secret: Annotated[Optional[Path], typer.Option("--preregistration-secret", help="The PRIVATE secret file `dpbundle preregister` wrote (default: its place in the private directory).", show_default=False)] = None,
    example_rows: Annotated[Optional[int], typer.Option("--example-rows", help="Rows of the simulated registry for --example (default: births 167000, persons 45000).", min=1000, show_default=False)] = None,
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
    except (CommandError, ReleaseInterrupted) as exc:
        err.print(Text("error: ", style="bold red") + Text(exc.message), soft_wrap=True)
        raise typer.Exit(exc.code) from None


def run_release(*, spec: Optional[Path], data: Optional[Path], out: Path, example: Optional[str],
                key: Optional[Path], passphrase_file: Optional[Path], transcript: Optional[Path],
                ledger: Optional[Path], configs: Optional[Path], allow_additional_spend: bool,
                force: bool, make_zip: bool, stop_probability: Optional[str], allow_other_spec: bool,
                allow_other_size: bool = False,
                resume: Optional[Path], example_rows: Optional[int], preregistration: Optional[Path],
                beacon: Optional[str], preregistration_secret: Optional[Path]) -> None:
    """The release itself (``dpbundle release`` and :func:`dpbundle.release.api.release`):
    raises :class:`CommandError` (exit code and message) when it stops."""
    from .sweep import BOOTSTRAP_MESSAGE
    from .sweep_exec import bootstrapping

    if bootstrapping():    # never a second release from a worker that re-runs the caller's script
        _fail(BOOTSTRAP_MESSAGE.format(call="release()") + " Nothing was read or spent here.")
    with _signals_as_interrupt(), _interrupt_before_spend():
        prereg = (preregistration, beacon, preregistration_secret)
        _dispatch(spec, data, out, example, key, passphrase_file, transcript, ledger, configs,
                  allow_additional_spend, force, make_zip, stop_probability, resume, example_rows,
                  (allow_other_spec, allow_other_size), prereg)


def _dispatch(spec, data, out, example, key, passphrase_file, transcript, ledger, configs,
              allow_additional_spend, force, make_zip, stop_probability, resume, example_rows,
              allow_other=(False, False), prereg=(None, None, None)) -> None:
    if (prereg[0] is None) != (prereg[1] is None):
        _fail("--preregistration and --beacon go together: the record fixes the release, the "
              "beacon value (public, taken after the record was published) binds its seeds")
    if resume is not None:
        if prereg[0] is not None:
            _fail("--resume writes a kept result, which keeps its pre-registration: do not give "
                  "--preregistration again")
        if spec is not None or data is not None or example is not None:
            _fail("--resume writes a kept result: give it with --out and --key only")
        if key is None:
            _fail("--resume needs --key to sign the bundle")
        _resume(resume, out, key, passphrase_file, force, make_zip)
        return
    if example is not None:
        if spec is not None or data is not None:
            _fail("give either --example or SPEC and DATA, not both")
        _check_out(out, force)  # before simulating the registry and writing a demo key next to OUT
        if example not in EXAMPLES:
            _fail(f"unknown example {example!r}; available: {', '.join(EXAMPLES)}")
        if example_rows is None:
            from .example import example_defaults

            example_rows = example_defaults(example)[0]
        with example_inputs(example, example_rows) as (spec_path, data_path, narrowed):
            with tempfile.TemporaryDirectory(prefix="dpbundle-ledger-") as tmp:
                demo_key = key
                if demo_key is None:
                    demo_key = _demo_key(out)
                if configs is None:
                    configs = narrowed
                    console.print(f"selecting among the configurations that passed at least 10% of the time in the "
                                  f"public-data sweep shipped with the example ({narrowed.name}); "
                                  f"pass --configs to choose another list")
                console.print(f"simulated {example} registry: {example_rows:,} rows (SIMULATED, no real person)")
                _release(spec_path, data_path, out, demo_key, passphrase_file, transcript,
                         ledger or Path(tmp) / "ledger.jsonl", configs, allow_additional_spend, force, make_zip,
                         example_note=True, stop_option=stop_probability, allow_other=allow_other,
                         prereg=prereg)
        return
    if spec is None or data is None:
        _fail("give SPEC and DATA (or --example births); see `dpbundle release --help`")
    if key is None:
        _fail("--key is required to sign the bundle; create one with `dpbundle keygen --out steward`")
    _release(spec, data, out, key, passphrase_file, transcript, ledger, configs, allow_additional_spend, force,
             make_zip, example_note=False, stop_option=stop_probability, allow_other=allow_other,
             prereg=prereg)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, turned into an exception so that the same clean-up runs as for Ctrl-C
    (temporary bundle folders removed, the ledger entry marked, the transcript kept)."""


@contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise Terminated(signal.Signals(signum).name)

    names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    old = {n: signal.signal(getattr(signal, n), handler) for n in names}
    try:
        yield
    finally:
        for n, h in old.items():
            signal.signal(getattr(signal, n), h)


@contextmanager
def _interrupt_before_spend() -> Iterator[None]:
    """A Ctrl-C/SIGTERM that reaches here came before the ledger entry (later ones are handled
    where the spend is known): say so, instead of a bare exit code."""
    try:
        yield
    except ReleaseInterrupted:
        raise                     # already stated what exists (the spend is recorded)
    except KeyboardInterrupt as exc:
        how = f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"
        _fail(f"{how} before any privacy budget was spent: the ledger is untouched and no bundle "
              "was written", code=130)


def _demo_key(out: Path) -> Path:
    from .keys import write_keypair

    base = out.parent / f"{out.name}.demo-key"
    keyfile = base.with_name(base.name + ".key")
    if not keyfile.exists():
        write_keypair(base)
        console.print(f"[yellow]note:[/] generated a demo signing key {keyfile} (public key {base}.pub) "
                      "outside the bundle; a real release uses the steward's own key (`dpbundle keygen`).")
    return keyfile


def _check_out(out: Path, force: bool) -> None:
    """The output location, before anything is spent: absent, or (with --force) a complete
    dpbundle bundle; its folder writable. Leftovers of killed runs are removed."""
    from .preflight import clean_stale, replaceable_bundle_problem, writable_dir_problem

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
        console.print(f"removed {out.parent / name}, left behind by an interrupted run", highlight=False)


def _preflight_after_prepare(out: Path, spec, n: int, make_zip: bool, ledger_path: Path) -> None:
    """Room for the bundle, a writable ledger, a working PDF renderer: before the ledger entry."""
    from .preflight import estimate_bundle_bytes, renderer_problem, room_problem, writable_dir_problem
    from .transform import column_coding

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


def _release(spec_path: Path, data_path: Path, out: Path, key_path: Path, passphrase_file: Optional[Path],
             transcript_path: Optional[Path], ledger_path: Optional[Path], configs_path: Optional[Path],
             allow_additional_spend: bool, force: bool, make_zip: bool, example_note: bool,
             stop_option: Optional[str] = None, allow_other: tuple[bool, bool] = (False, False),
             prereg: tuple = (None, None, None)) -> None:
    from dpbundle.mechanisms.noise import Randomness, Transcript

    from .bundle import BundleError, default_transcript_path, write_bundle
    from .keys import KeyFileError, load_private_key, read_passphrase
    from dpbundle.mechanisms import exact  # exact budget arithmetic of the ledger's totals
    from .ledger import Ledger, LedgerError, LedgerRefusal, table_fingerprint, unfinished_note
    from .prepare import InputError, prepare
    from .records import release_records
    from .selection import NothingSelected, SelectionAborted, select
    from .spec import SpecError, load_spec
    from .budget import build_budget
    from .space import check_config

    # 1. Everything that can be checked before touching the private data (write_bundle repeats
    # these checks, but only after the budget is spent and the selection has run).
    _check_out(out, force)
    transcript_path = transcript_path or default_transcript_path(out)
    if _inside(transcript_path, out):
        _fail(f"the transcript {transcript_path} must not be inside the bundle {out}: it is private")
    if not transcript_path.parent.is_dir():
        _fail(f"{transcript_path.parent}: no such directory (for the transcript {transcript_path})")
    from .preflight import writable_dir_problem

    problem = writable_dir_problem(transcript_path.parent, "the private transcript")
    if problem:
        _fail(f"{problem}; nothing was spent")
    zip_path = out.with_name(out.name + ".zip")
    for path, what in ((transcript_path, "the transcript"), (zip_path if make_zip else None, "the zip")):
        if path is not None and (path.exists() or path.is_symlink()) and not force:
            _fail(f"{path} ({what}) already exists; choose another --out, move it away, or pass --force")
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        _fail(str(exc))
    try:
        passphrase = read_passphrase(passphrase_file)
        private_key = load_private_key(key_path, passphrase)
    except KeyFileError as exc:
        _fail(f"cannot load the signing key: {exc}")
    configs, estimates, measured = None, None, None
    if configs_path is not None:
        configs, estimates, measured = _load_configs(configs_path, spec, check_config, allow_other[0])
    binding, public_files = _bind_preregistration(prereg, spec, private_key, configs_path)
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
            _fail(f"{exc}\n  (cell values are not shown here; run `dpbundle spec validate SPEC --data DATA` "
                  "inside the enclave to see them)")
    if spec.records_policy == "declared_public":
        console.print(f"prepared {data_path.name if example_note else data_path}: n = {prepared.n:,} "
                      "plausible records (declared public by the spec's records policy)")
    else:
        console.print(f"prepared {data_path.name if example_note else data_path}: the number of "
                      f"plausible records will be released as a DP count (epsilon {spec.epsilon_count:g})")

    # 3. Everything else that could stop the bundle from being written, then the spend goes to
    # the ledger before the first iteration.
    ledger_path = ledger_path or Ledger.default_path()
    if configs_path is not None:
        _check_list_size(configs_path, measured, prepared, spec, allow_other[1], example_note)
    _preflight_after_prepare(out, spec, _rows_for_room(prepared, spec), make_zip, Path(ledger_path))
    ledger = Ledger(ledger_path)
    table_fp = table_fingerprint(prepared, spec)
    try:
        note = unfinished_note(ledger.entries(prepared.sha256, table_fp))
    except LedgerError as exc:
        _fail(str(exc))
    if note:
        console.print(f"[yellow]ledger:[/] {note}", highlight=False)
    try:
        entry, composed = ledger.reserve(prepared.sha256, spec.fingerprint, spec.total_epsilon_exact,
                                         f"dpbundle release {spec.raw['release']['title']!r} -> {out}",
                                         allow_additional_spend, table_fp=table_fp)
    except (LedgerRefusal, LedgerError) as exc:
        _fail(str(exc))
    if composed > spec.total_epsilon_exact:
        console.print(f"[yellow]ledger:[/] the composed total spent on these data is now {exact.show(composed)}")

    # 4. Private selection, with a transient display of the current step only.
    transcript = Transcript()
    try:
        released = release_records(prepared, spec, Randomness(transcript))
        if spec.records_policy == "dp_count":
            console.print(f"n = {released.n:,} records (DP count; the table is resized to it)")
        console.print(_selection_line(stop.gamma), highlight=False)
        selection = select(released, spec, transcript, configs, seeds=binding, stop_probability=stop.gamma)
    except NothingSelected as exc:
        ledger.mark_finished(entry, "nothing released")
        kept = _keep_private_transcript(transcript, transcript_path)
        _fail(f"{exc}{kept}\nthe spend of this run (epsilon {spec.total_epsilon:g}) stays recorded in the ledger",
              code=1)
    except KeyboardInterrupt as exc:
        ledger.mark_finished(entry, "interrupted")
        kept = _keep_private_transcript(transcript, transcript_path)
        how = f"terminated ({exc})" if isinstance(exc, Terminated) else "interrupted"
        _fail(f"{how}: nothing was released and no bundle was left on disk. An interrupted run is outside the private "
              "selection's guarantee (when it was stopped is a choice made while watching it), so "
              f"its whole budget (epsilon {spec.total_epsilon:g}) stays recorded as spent in the "
              f"ledger.{kept}", code=130)
    except SelectionAborted as exc:
        ledger.mark_finished(entry, "failed")
        kept = _keep_private_transcript(transcript, transcript_path)
        _fail(f"the release stopped: {exc}.{kept}\nNothing was released; the spend of this run "
              f"(epsilon {spec.total_epsilon:g}) stays recorded in the ledger.", code=1)
    except Exception as exc:  # noqa: BLE001 - the message may carry private values
        ledger.mark_finished(entry, "failed")
        kept = _keep_private_transcript(transcript, transcript_path, error=exc)
        _fail(f"the release stopped with an internal error ({type(exc).__name__}).{kept}\nNothing "
              f"was released; the spend of this run (epsilon {spec.total_epsilon:g}) stays "
              "recorded in the ledger.", code=1)
    result = selection.result
    # No duration here: the time the selection took is a proxy for the number of attempts, which
    # is private.
    console.print("private selection finished: a candidate passed every criterion")

    # 5. The bundle (atomic) and the private transcript.
    budget = build_budget(spec, result.generator, selection.total_epsilon_opendp, released.n, stop=stop)
    if spec.publish_model:
        public_files = public_files | {"model.json": _model_file(spec, result)}
    try:
        with console.status("writing the bundle: data.csv, metrics, datasheet (HTML and PDF), signature"):
            bundle = write_bundle(
                out, spec=spec.raw, configuration=result.config, configuration_id=result.config_id,
                columns=list(result.candidate.columns), codes=result.candidate.codes, metrics=result.metrics(),
                budget=budget, transcript_records_jsonl=transcript.to_jsonl(), transcript_path=transcript_path,
                private_key=private_key, force=force, make_zip=make_zip, public_files=public_files)
    except (KeyboardInterrupt, BundleError, Exception) as exc:  # noqa: BLE001
        # the budget is spent and a candidate passed: keep it, privately, to write it again
        ledger.mark_finished(entry, "interrupted while writing the bundle"
                             if isinstance(exc, KeyboardInterrupt) else "failed while writing the bundle")
        from .bundle import private_dir
        from .pending import save_pending

        try:
            kept = save_pending(private_dir(), out, spec=spec.raw, configuration=result.config,
                                configuration_id=result.config_id, columns=list(result.candidate.columns),
                                codes=result.candidate.codes, metrics=result.metrics(), budget=budget,
                                transcript_jsonl=transcript.to_jsonl(), transcript_path=transcript_path,
                                ledger_path=Path(ledger_path), ledger_entry=entry,
                                public_files=public_files)
            how = (f"\nthe selected result is kept in the PRIVATE file {kept} (mode 0600); write the "
                   f"bundle again, without a new selection or a new spend, with:\n  dpbundle release "
                   f"--resume {kept} --out {out} --key {key_path}")
        except Exception as keep_exc:  # noqa: BLE001
            how = f"\nthe selected result could not be kept either ({type(keep_exc).__name__})"
        what = (str(exc) if isinstance(exc, BundleError) else
                "interrupted" if isinstance(exc, KeyboardInterrupt) else
                f"internal error ({type(exc).__name__})")
        _fail(f"the bundle could not be written: {what}; nothing was released and the privacy spend "
              f"of this run stays recorded in the ledger.{how}", code=130 if isinstance(exc, KeyboardInterrupt) else 2
              if isinstance(exc, BundleError) else 1)
    ledger.mark_finished(entry, "released")
    _summary(bundle, result, budget, transcript_path, key_path)


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

    from .preregister import (PreregistrationError, check_against, default_secret_path,
                              load_preregistration, load_secret, seeds_document)

    try:
        rec = load_preregistration(rec_path)
        problems = check_against(rec, spec, private_key, configs_path)
        if problems:
            _fail(f"{rec_path}: this release is not the pre-registered one: " + "; ".join(problems)
                  + "; nothing was read or spent")
        secret, salt = load_secret(secret_path or default_secret_path(rec_path), rec)
        binding = SeedBinding(secret, beacon)
    except (PreregistrationError, ValueError) as exc:
        _fail(f"{exc}; nothing was read or spent")
    from . import __version__

    if rec.doc["dpbundle_version"] != __version__:
        console.print(f"[yellow]warning:[/] the record was made with dpbundle "
                      f"{rec.doc['dpbundle_version']}, this is {__version__}", highlight=False)
    seeds = seeds_document(rec, secret, salt, beacon)
    files = {"preregistration.json": rec.raw, "preregistration.json.sig": rec.signature,
             "seeds.json": (json.dumps(seeds, indent=2) + "\n").encode("utf-8")}
    console.print(f"pre-registered ({rec_path.name}): spec, list and key match; seeds bound to the "
                  f"beacon value {beacon!r}", highlight=False)
    return binding, files


def _resume(pending_path: Path, out: Path, key_path: Path, passphrase_file: Optional[Path], force: bool,
            make_zip: bool) -> None:
    """Write the bundle of a kept selected result (``--resume``): no selection, no new spend."""
    from .bundle import BundleError, write_bundle
    from .keys import KeyFileError, load_private_key, read_passphrase
    from .ledger import Ledger, LedgerError
    from .pending import PendingError, load_pending

    try:
        p = load_pending(pending_path)
    except PendingError as exc:
        _fail(str(exc))
    _check_out(out, force)
    try:
        private_key = load_private_key(key_path, read_passphrase(passphrase_file))
    except KeyFileError as exc:
        _fail(f"cannot load the signing key: {exc}")
    transcript_path = Path(p["transcript_path"])
    with console.status("writing the bundle"):
        try:
            bundle = write_bundle(
                out, spec=p["spec"], configuration=p["configuration"],
                configuration_id=p["configuration_id"], columns=p["columns"], codes=p["codes"],
                metrics=p["metrics"], budget=p["budget"], transcript_records_jsonl=p["transcript_jsonl"].encode(),
                transcript_path=transcript_path, private_key=private_key, force=force, make_zip=make_zip,
                public_files=p.get("public_files") or {})
        except BundleError as exc:
            _fail(f"the bundle could not be written: {exc}; the pending result {pending_path} is kept")
    try:
        Ledger(Path(p["ledger_path"])).mark_finished(p["ledger_entry"], "released")
    except (LedgerError, OSError) as exc:
        console.print(f"[yellow]warning:[/] the ledger entry could not be marked released ({exc})")
    pending_path.unlink(missing_ok=True)
    console.print(f"[bold green]bundle written:[/] {bundle} (from the kept result; no new spend)")
    console.print(f"[bold yellow]private transcript:[/] {transcript_path}")


def _keep_private_transcript(transcript, path: Path, error: BaseException | None = None) -> str:
    """Write the transcript of a run that released nothing to its private path (mode 0600),
    with the traceback of ``error`` as a last mark; returns a sentence for the console that
    names the file but no detail."""
    import secrets
    import traceback

    from dpbundle.mechanisms.noise import Randomness, write_transcript_file

    try:
        if error is not None:
            Randomness(transcript).mark("attempt error", error=type(error).__name__,
                                        traceback="".join(traceback.format_exception(error)))
        write_transcript_file(path, transcript, secrets.token_bytes(32))
    except Exception:  # noqa: BLE001 - best effort: never mask the original failure
        return ""
    return f"\nthe details are in the PRIVATE transcript {path} (keep it inside the enclave)"


def _load_configs(path: Path, spec, check_config, allow_other_spec: bool = False):
    from .sweep import load_narrowed

    try:
        entries = load_narrowed(path)
    except (OSError, ValueError) as exc:
        _fail(str(exc) if str(exc).startswith(str(path)) else f"{path}: cannot read the configuration list: {exc}")
    configs = [e["config"] for e in entries]
    if not configs:
        _fail(f"{path}: lists no configurations; rerun the sweep with a lower --min-acceptance")
    for i, c in enumerate(configs):
        problems = check_config(spec, c)
        if problems:
            _fail(f"{path}: configurations[{i}] is not in the spec's space: {'; '.join(problems)}")
    from .sweep import _spec_fingerprint, read_list_document

    listed = (read_list_document(path) or {}).get("spec_sha256")
    mine = _spec_fingerprint(spec)
    if listed is not None and listed != mine:
        if not allow_other_spec:
            _fail(f"{path}: this configuration list was swept on another version of the spec:\n"
                  f"  list spec_sha256: {listed}\n  this spec:        {mine}\n"
                  "Its acceptance figures may not describe this spec. Re-run the sweep (or `dpbundle "
                  "sweep --configs` to re-measure the list), or pass --allow-other-spec to use it anyway.")
        console.print(f"[yellow]warning:[/] {path} was swept on another spec (spec_sha256 {listed[:16]}..., "
                      f"this spec {mine[:16]}...); used because of --allow-other-spec", highlight=False)
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
    from .stopping import LOW_ACCEPTANCE, plan_stop

    acc, lows = estimates if estimates else (None, None)
    if option is None and acc is not None and spec.stop_probability == 0:
        option = "auto"
    try:
        plan = plan_stop(option, spec.stop_probability, acc, lows)
    except ValueError as exc:
        _fail(str(exc))
    for line in plan.lines():
        console.print(line, highlight=False)
    if plan.gamma == 0:
        console.print("[yellow]warning:[/] stop probability 0: the selection runs until a candidate "
                      "passes, and may never end if none can" + (
                          " (the list's sweep estimates allow --stop-probability auto, which ends "
                          "every run)" if acc is not None else
                          "; pass --configs with the narrowed.yaml of `dpbundle sweep` and "
                          "--stop-probability auto"), highlight=False)
    if plan.p_mean is None:
        console.print("[yellow]warning:[/] no sweep estimate of the acceptance for these configurations "
                      "(pass --configs with the narrowed.yaml of `dpbundle sweep`): the run may take "
                      "many attempts", highlight=False)
    elif plan.p_mean < LOW_ACCEPTANCE:
        console.print(f"[yellow]warning:[/] the configurations pass only {plan.p_mean:.1%} of the time "
                      f"on public data (below {LOW_ACCEPTANCE:.0%}): expect many attempts", highlight=False)
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
        console.print(f"[yellow]warning:[/] {path} does not say on how many records it was measured "
                      "(swept before dpbundle 0.2): its acceptance figures may not fit these data",
                      highlight=False)
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
        console.print(f"[yellow]warning:[/] {text} Used because of --allow-other-size.", highlight=False)
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
    from .value_noise import value_noise_text

    table = Table(title="Acceptance criteria (DP values)")
    for col in ("criterion", "DP value", "threshold", "epsilon", "noise std of the value", "pass"):
        table.add_column(col, justify="right" if col not in ("criterion",) else "left")
    noise_text = value_noise_text(bundle / "metrics.csv")
    for r in result.results:
        table.add_row(r.id, f"{r.dp_value:.6g}", f"{r.threshold:.6g}", f"{r.epsilon:g}",
                      noise_text.get(r.id, f"{r.noise_std:.3g}"), "[green]yes[/]" if r.passed else "[red]no[/]")
    console.print(table)
    if any("fit" in t or "choice" in t for t in noise_text.values()):
        console.print("fit: the noise was added inside a model fit, not to the value (≈: its estimated effect "
                      "on the value); choice: added to the scores of a choice. See README.pdf, section 6.",
                      highlight=False)
    console.print(f"n = {result.candidate.n:,} records; total epsilon {budget['total_epsilon']:.6g} "
                  f"(OpenDP: {budget['total_epsilon_opendp']:.6g}; cap {budget['epsilon_cap']:g})")
    console.print(f"[bold green]bundle written:[/] {bundle}")
    console.print(f"[bold yellow]private transcript:[/] {transcript_path} — keep it inside the enclave; "
                  "only its salted commitment is in the bundle.")
    pub = key_path.with_name(key_path.name[:-len(".key")] + ".pub") if key_path and key_path.name.endswith(".key") else None
    console.print(f"verify with: dpbundle audit {bundle} --pubkey {pub if pub and pub.is_file() else 'PUBLISHER.pub'}",
                  highlight=False)
