"""`dpbundle release`: prepare the private data, run the private selection, write the signed bundle."""
from __future__ import annotations

import shutil
import tempfile
import time
from contextlib import contextmanager
from importlib.resources import as_file, files
from pathlib import Path
from typing import Annotated, Iterator, Optional

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

console = Console()
err = Console(stderr=True)

# name -> (spec, narrowed configuration list from a public-data sweep; see docs/sweep-births-nvss160k.md)
EXAMPLES = {"births": ("births.yaml", "births-narrowed-nvss160k.yaml"),
            # see docs/sweep-persons.md (swept on a simulated copy with another seed)
            "persons": ("persons.yaml", "persons-narrowed.yaml")}


def _fail(message: str, code: int = 2) -> None:
    err.print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)
    raise typer.Exit(code)


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


class _Phase:
    """A transient one-line progress display that shows only that the selection is running.

    Neither the current step nor the elapsed time is shown: a recorded terminal (script, tmux
    logging, a CI log) keeps every frame, and the cycle of steps or the time would reveal the
    number of attempts, which is private."""

    TEXT = Text.assemble(("private selection ", "bold"), "running (progress is not shown: the number of attempts is private)")

    def __init__(self, live: Live, started: float):
        self.live, self.started, self.name = live, started, "starting"

    def __call__(self, name: str) -> None:
        self.name = name  # kept for debugging in the enclave; never displayed

    def refresh(self) -> None:
        self.live.update(self.TEXT)


def cli_release(
    spec: Annotated[Optional[Path], typer.Argument(help="Release spec (YAML or JSON).", show_default=False)] = None,
    data: Annotated[Optional[Path], typer.Argument(help="The confidential registry (CSV or CSV.gz).", show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to create (must not exist unless --force).")] = ...,
    example: Annotated[Optional[str], typer.Option("--example", help="Use a built-in example (spec + simulated registry) instead of SPEC and DATA: 'births' or 'persons'.")] = None,
    key: Annotated[Optional[Path], typer.Option("--key", help="Ed25519 private key (PEM) from `dpbundle keygen`. With --example a demo key is generated next to the bundle.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option("--passphrase-file", help="File holding the key's passphrase (or set DPBUNDLE_KEY_PASSPHRASE).")] = None,
    transcript: Annotated[Optional[Path], typer.Option("--transcript", help="Where to write the PRIVATE randomness transcript (default: OUT.transcript.jsonl next to the bundle). It must stay inside the enclave.")] = None,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="Private budget ledger (default: a file in your user data directory; --example uses a throwaway one).")] = None,
    configs: Annotated[Optional[Path], typer.Option("--configs", help="Select only among these configurations (narrowed.yaml from `dpbundle sweep`).")] = None,
    allow_additional_spend: Annotated[bool, typer.Option("--allow-additional-spend", help="Allow a further release on data that the ledger shows budget was already spent on.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing bundle directory.")] = False,
    make_zip: Annotated[bool, typer.Option("--zip", help="Also write a deterministic OUT.zip.")] = False,
    example_rows: Annotated[Optional[int], typer.Option("--example-rows", help="Rows of the simulated registry for --example (default: births 167000, persons 45000).", min=1000, show_default=False)] = None,
) -> None:
    """Produce a signed, differentially private release bundle.

    Runs the universal scheme inside the enclave: validates and prepares DATA with SPEC, records
    the privacy spend in the ledger, runs private selection (each attempt: transform, DP generator,
    synthetic constraints, face-privacy projection, DP acceptance criteria) until a candidate
    passes, and writes the bundle atomically: data.csv, metrics, budget, spec, datapackage.json,
    README.html/.pdf, manifest.json and its Ed25519 signature. The private transcript is written
    outside the bundle. Nothing about failed attempts is shown or stored in the bundle.

    With the spec's stop_probability 0 the selection runs until a candidate passes, so run
    `dpbundle sweep` on similar public data first and pass its narrowed.yaml with --configs.
    The spend is written to the ledger before the first attempt: an interrupted run still counts.

    Examples:

      dpbundle release --example births --out births-bundle

      dpbundle release --example persons --out persons-bundle

      dpbundle release spec.yaml registry.csv.gz --out bundle --key steward.key --configs sweep/narrowed.yaml
    """
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
                         example_note=True)
        return
    if spec is None or data is None:
        _fail("give SPEC and DATA (or --example births); see `dpbundle release --help`")
    if key is None:
        _fail("--key is required to sign the bundle; create one with `dpbundle keygen --out steward`")
    _release(spec, data, out, key, passphrase_file, transcript, ledger, configs, allow_additional_spend, force,
             make_zip, example_note=False)


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
    if (out.exists() or out.is_symlink()) and not force:
        _fail(f"{out} already exists; choose another --out or pass --force to replace it")
    if not out.parent.is_dir():
        _fail(f"{out.parent}: no such directory (for the bundle {out}); create it first")


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


def _release(spec_path: Path, data_path: Path, out: Path, key_path: Path, passphrase_file: Optional[Path],
             transcript_path: Optional[Path], ledger_path: Optional[Path], configs_path: Optional[Path],
             allow_additional_spend: bool, force: bool, make_zip: bool, example_note: bool) -> None:
    from dpbundle.mechanisms.noise import Transcript

    from .bundle import BundleError, default_transcript_path, write_bundle
    from .keys import KeyFileError, load_private_key, read_passphrase
    from .ledger import Ledger, LedgerError, LedgerRefusal
    from .prepare import InputError, prepare
    from .selection import NothingSelected, select
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
    configs = None
    if configs_path is not None:
        configs = _load_configs(configs_path, spec, check_config)
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
    console.print(f"prepared {data_path.name if example_note else data_path}: n = {prepared.n:,} records (public)")

    # 3. Write the spend to the ledger before the first iteration.
    ledger = Ledger(ledger_path or Ledger.default_path())
    try:
        entry, composed = ledger.reserve(prepared.sha256, spec.fingerprint, spec.total_epsilon,
                                         f"dpbundle release {spec.raw['release']['title']!r} -> {out}",
                                         allow_additional_spend)
    except (LedgerRefusal, LedgerError) as exc:
        _fail(str(exc))
    if composed > spec.total_epsilon * (1 + 1e-12):
        console.print(f"[yellow]ledger:[/] the composed total spent on these data is now {composed:g}")

    # 4. Private selection, with a transient display of the current step only.
    transcript = Transcript()
    started = time.monotonic()
    try:
        with Live(_Phase.TEXT, console=console, transient=True, refresh_per_second=4) as live:
            phase = _Phase(live, started)
            selection = select(prepared, spec, transcript, configs, phase=phase)
    except NothingSelected as exc:
        ledger.mark_finished(entry, "nothing released")
        _fail(str(exc), code=1)
    except KeyboardInterrupt:
        ledger.mark_finished(entry, "interrupted")
        raise
    except Exception:
        ledger.mark_finished(entry, "failed")
        raise
    result = selection.result
    # No duration here: the time the selection took is a proxy for the number of attempts, which
    # is private; only the transient live display (erased when done) showed the elapsed time.
    console.print("private selection finished: a candidate passed every criterion")

    # 5. The bundle (atomic) and the private transcript.
    budget = build_budget(spec, result.generator, selection.total_epsilon_opendp)
    try:
        bundle = write_bundle(
            out, spec=spec.raw, configuration=result.config, configuration_id=result.config_id,
            columns=list(result.candidate.columns), codes=result.candidate.codes, metrics=result.metrics(),
            budget=budget, transcript_records_jsonl=transcript.to_jsonl(), transcript_path=transcript_path,
            private_key=private_key, force=force, make_zip=make_zip)
    except KeyboardInterrupt:
        ledger.mark_finished(entry, "interrupted while writing the bundle")
        raise
    except BundleError as exc:
        ledger.mark_finished(entry, "failed while writing the bundle")
        _fail(f"{exc}\nnothing was released; the privacy spend of this run stays recorded in the ledger")
    except Exception:
        ledger.mark_finished(entry, "failed while writing the bundle")
        raise
    ledger.mark_finished(entry, "released")
    _summary(bundle, result, budget, transcript_path, key_path)


def _load_configs(path: Path, spec, check_config) -> list[dict]:
    from .sweep import load_narrowed

    try:
        entries = load_narrowed(path)
    except (OSError, ValueError) as exc:
        _fail(f"{path}: cannot read the configuration list: {exc}")
    configs = [e["config"] for e in entries]
    if not configs:
        _fail(f"{path}: lists no configurations; rerun the sweep with a lower --min-acceptance")
    for i, c in enumerate(configs):
        problems = check_config(spec, c)
        if problems:
            _fail(f"{path}: configurations[{i}] is not in the spec's space: {'; '.join(problems)}")
    return configs


def _summary(bundle: Path, result, budget: dict, transcript_path: Path, key_path: Path | None = None) -> None:
    table = Table(title="Acceptance criteria (DP values)")
    for col in ("criterion", "DP value", "threshold", "epsilon", "noise std", "pass"):
        table.add_column(col, justify="right" if col not in ("criterion",) else "left")
    for r in result.results:
        table.add_row(r.id, f"{r.dp_value:.6g}", f"{r.threshold:.6g}", f"{r.epsilon:g}", f"{r.noise_std:.3g}",
                      "[green]yes[/]" if r.passed else "[red]no[/]")
    console.print(table)
    console.print(f"n = {result.candidate.n:,} records; total epsilon {budget['total_epsilon']:.6g} "
                  f"(OpenDP: {budget['total_epsilon_opendp']:.6g}; cap {budget['epsilon_cap']:g})")
    console.print(f"[bold green]bundle written:[/] {bundle}")
    console.print(f"[bold yellow]private transcript:[/] {transcript_path} — keep it inside the enclave; "
                  "only its salted commitment is in the bundle.")
    pub = key_path.with_name(key_path.name[:-len(".key")] + ".pub") if key_path and key_path.name.endswith(".key") else None
    console.print(f"verify with: dpbundle audit {bundle} --pubkey {pub if pub and pub.is_file() else 'PUBLISHER.pub'}",
                  highlight=False)
