"""The `dpbundle` command line (Typer). Command bodies live in the modules that own them."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from . import __version__
from .cli_style import StyledCommand, add_command

app = typer.Typer(
    name="dpbundle",
    help=(
        "Auditable differentially private open-data releases.\n\n"
        "Produce a signed release bundle from a confidential registry (`release`), verify one "
        "independently (`audit`), and study which configurations pass on public data (`sweep`).\n\n"
        "Quick start:\n\n"
        "    dpbundle release --example births --out births-bundle\n"
        "    dpbundle audit births-bundle --pubkey births-bundle.demo-key.pub"
    ),
    no_args_is_help=True,
    add_completion=False,
    # Never print local variables in a traceback: they hold private data (typer < 0.13 showed them by default).
    pretty_exceptions_show_locals=False,
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
spec_app = typer.Typer(help="Check a release spec and inspect its configuration space.\n\n"
                       "Example:\n\n    dpbundle spec validate examples/births.yaml",
                       no_args_is_help=True)
app.add_typer(spec_app, name="spec")

console = Console()
err_console = Console(stderr=True)

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


def _version(value: bool) -> None:
    if value:
        console.print(f"dpbundle {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    """Auditable differentially private open-data releases."""


def fail_input(message: str, code: int = EXIT_INPUT) -> None:
    """Print an error to stderr, literally (file names, titles and values are untrusted: never
    parsed as markup, control characters shown as escapes), and exit with ``code`` (2)."""
    from .errors import literal

    err_console.print(Text("error: ", style="bold red") + Text(literal(message)), highlight=False,
                      soft_wrap=True)
    raise typer.Exit(code)


def load_spec_or_exit(path: Path):
    from .safe_io import regular_file_problem
    from .spec import MAX_SPEC_BYTES, SpecError, load_spec

    if path.exists():
        problem = regular_file_problem(path, "spec", MAX_SPEC_BYTES)
        if problem:
            fail_input(problem)
    try:
        return load_spec(path)
    except SpecError as exc:
        fail_input(str(exc))


@spec_app.command("validate", cls=StyledCommand)
def spec_validate(
    spec: Annotated[Path, typer.Argument(help="Release spec (YAML or JSON).")],
    data: Annotated[Optional[Path], typer.Option("--data", help="Also load this CSV/CSV.gz, validate it, apply the raw constraints and count the plausible records each synthetic constraint would remove (run inside the enclave: every count is private).")] = None,
) -> None:
    """Validate a release spec, and optionally prepare a data file with it.

    Checks the spec against its JSON Schema and what a schema cannot check (bin edges, column
    references, the privacy budget against the cap). With --data, reads the file exactly as a
    release would: types, ranges, missing values, then the raw-data constraints, and prints the
    rows read, the rows each raw constraint drops and the resulting n; then evaluates every
    synthetic constraint on the plausible records, binned with each alternative of the columns
    it names, and prints how many (and what share) it would remove: a rule that removes real
    records is probably wrong. These counts are private (the steward's console inside the
    enclave); `release` never prints them.

    Example:

        dpbundle spec validate examples/births.yaml --data registry.csv.gz
    """
    s = load_spec_or_exit(spec)
    from .spec import budget_formula

    console.print(f"[green]ok[/] {spec}: valid release spec; total epsilon "
                  f"{budget_formula(s.raw)} <= cap {s.epsilon_cap:g}")
    policy_line = {"dp_count": f"n is released as a DP count (epsilon {s.epsilon_count:g})",
                   "declared_public": "n is declared public: the count of plausible records is "
                                      "published exactly (the guarantee covers registries with the "
                                      "same number of plausible records)"}[s.records_policy]
    console.print(f"records policy {s.records_policy}: {policy_line}", highlight=False)
    from .spec_criteria import criteria_warnings

    for line in criteria_warnings(s.raw):
        console.print(f"[yellow]warning[/] {line}", markup=True, highlight=False)
    _warn_missing_generators(s)
    from .spec_noise import noise_notes, noise_warnings_on_data

    if data is None:
        notes = noise_notes(s.raw)
        if notes:
            console.print("noise against thresholds: a pass is weak evidence when the noise std is at least "
                          "half the threshold; with this spec's epsilons that happens when", highlight=False)
            for line in notes:
                console.print(Text(f"  {line}"), highlight=False)
        return
    from .prepare import InputError, prepare

    try:
        prepared = prepare(data, s)
    except InputError as exc:
        fail_input(str(exc))
    table = Table(title=f"Preparation of {data}", show_lines=False)
    table.add_column("step")
    table.add_column("rows", justify="right")
    table.add_row("rows read", f"{prepared.rows_read:,}")
    for name, count in prepared.dropped_by:
        table.add_row(f"  matching raw constraint: {name}", f"{count:,}")
    table.add_row("rows dropped (any constraint)", f"{prepared.dropped_total:,}")
    if s.records_policy == "declared_public":
        table.add_row("[bold]n (plausible records, declared public)[/]", f"[bold]{prepared.n:,}[/]")
    else:
        table.add_row("[bold]plausible records (PRIVATE: a release publishes a DP count)[/]",
                      f"[bold]{prepared.n:,}[/]")
    console.print(table)
    console.print(f"n = {prepared.n:,}" + ("" if s.records_policy == "declared_public" else
                                           " plausible records (private; run inside the enclave)"))
    _print_synthetic_hits(prepared, s)
    for line in noise_warnings_on_data(s, prepared):  # on the registry: private, like the counts above
        console.print(Text("warning ", style="yellow") + Text(line + " (computed on this data: private)"),
                      highlight=False)


def _print_synthetic_hits(prepared, s) -> None:
    """``spec validate --data`` only: the plausible records each synthetic constraint would remove
    under each binning of its columns (private counts; ``release`` never prints them)."""
    from rich.markup import escape

    from .transform import MAX_LISTED_BINNINGS, synthetic_constraint_hits

    hits = synthetic_constraint_hits(prepared, s)
    if not hits:
        return
    table = Table(title="Synthetic constraints on the real plausible records (PRIVATE: steward's "
                  "console only; a release never prints these)", show_lines=False)
    table.add_column("synthetic constraint")
    table.add_column("binning (column: alternative)")
    table.add_column("records it would remove", justify="right")
    table.add_column("share", justify="right")

    def row(h, name: str, binning: str | None = None) -> None:
        text = binning if binning is not None else ", ".join(f"{c}: {a}" for c, a in h.binning)
        table.add_row(escape(name), escape(text), f"{h.removed:,}", f"{h.share:.2%}")

    for index in dict.fromkeys(h.index for h in hits):
        group = [h for h in hits if h.index == index]
        name = f"[{index}] {group[0].name}"
        if len(group) <= MAX_LISTED_BINNINGS:
            for k, h in enumerate(group):
                row(h, name if k == 0 else "")
            continue
        fewest = min(group, key=lambda h: h.removed)
        most = max(group, key=lambda h: h.removed)
        row(fewest, name, "fewest: " + ", ".join(f"{c}: {a}" for c, a in fewest.binning))
        row(most, "", "most: " + ", ".join(f"{c}: {a}" for c, a in most.binning))
        evaluated = (f"{len(group)} binnings in all" if len(group) == group[0].binnings else
                     f"the first {len(group)} of {group[0].binnings:,} binnings")
        table.add_row("", f"({evaluated})", "", "")
    console.print(table)
    if any(h.removed for h in hits):
        console.print("[yellow]note[/] a synthetic constraint should remove only combinations that "
                      "cannot occur; one that matches real plausible records is probably wrong (or "
                      "those records are implausible, and a raw constraint should drop them)",
                      markup=True, highlight=False)


def _warn_missing_generators(s) -> None:
    """A valid spec may name a generator whose optional extra is not installed here: say so now
    (a release on this machine would refuse it before reading the data)."""
    from rich.markup import escape

    from dpbundle.mechanisms.generators import generator_types

    available = generator_types()
    for gtype in sorted({g["type"] for g in s.raw["generators"]}):
        if not available[gtype]["available"]:
            console.print(f"[yellow]warning[/] generator {gtype!r} is not installed here: "
                          f"{escape(available[gtype]['reason'])}; a release on this machine would refuse "
                          "the spec", markup=True, highlight=False)


@spec_app.command("space", cls=StyledCommand)
def spec_space(
    spec: Annotated[Path, typer.Argument(help="Release spec (YAML or JSON).")],
) -> None:
    """Print the size of the configuration space, per dimension and in total.

    The space is the Cartesian product of every column's alternatives, each generator's
    hyperparameter grid and the projection's min_count values. Private selection draws from it
    uniformly (or from a narrowed list produced by `dpbundle sweep`).

    Example:

        dpbundle spec space examples/births.yaml
    """
    from .space import dimensions, space_size

    s = load_spec_or_exit(spec)
    table = Table(title=f"Configuration space of {spec}")
    table.add_column("dimension")
    table.add_column("size", justify="right")
    table.add_column("values")
    for name, values in dimensions(s):
        shown = ", ".join(v if isinstance(v, str) else _short(v) for v in values[:6])
        table.add_row(name, str(len(values)), shown + (" ..." if len(values) > 6 else ""))
    total = space_size(s)
    table.add_row("[bold]total[/]", f"[bold]{total:,}[/]", " x ".join(str(len(v)) for _, v in dimensions(s)))
    console.print(table)
    console.print(f"configurations: {total:,}")


def _short(value) -> str:
    if isinstance(value, dict):
        return "/".join(f"{k}={v}" for k, v in value.items() if k != "type") or value.get("type", "")
    return str(value)


def _register() -> None:
    from .release_cmd import cli_release

    add_command(app, "release", cli_release)
    from dpbundle.audit.cli import cli_audit

    add_command(app, "audit", cli_audit)
    from .sweep import cli_sweep

    add_command(app, "sweep", cli_sweep)
    from .ledger import cli_ledger_list, cli_ledger_mark

    ledger_app = typer.Typer(help="The private budget ledger: what was spent on which data.",
                             no_args_is_help=True)
    add_command(ledger_app, "list", cli_ledger_list)
    add_command(ledger_app, "mark", cli_ledger_mark)
    app.add_typer(ledger_app, name="ledger")
    from .preregister import cli_preregister
    from .sample_cmd import cli_sample

    add_command(app, "sample", cli_sample)

    add_command(app, "preregister", cli_preregister)
    from .keys import cli_keygen

    add_command(app, "keygen", cli_keygen)
    from .example import cli_example

    add_command(app, "example", cli_example)
    from .spec_docs import cli_spec_explain

    add_command(spec_app, "explain", cli_spec_explain)
    from .selftest import cli_selftest

    add_command(app, "selftest", cli_selftest)


_register()


def _stop_message(name: str) -> str:
    how = "interrupted (Ctrl-C)" if name == "SIGINT" else f"terminated ({name})"
    return (f"{how}: dpbundle stopped before the command finished (a release's privacy spend, "
            "once recorded, stays in the ledger: see `dpbundle ledger list`)")


def main() -> None:
    """Console-script entry point. SIGTERM and SIGHUP stop a command as Ctrl-C does (an
    exception, so that its clean-up runs), and a command stopped by a signal always says so:
    never a silent exit 143 (a release states what exists itself)."""
    import signal

    from .errors import Terminated, signal_note

    signal_note(reset=True)

    def handler(signum, _frame):
        name = signal.Signals(signum).name
        if signal_note()[1]:
            return            # the command has already said how it ended: nothing to stop
        first = signal_note(name)[0] == name
        if name == "SIGINT":
            raise KeyboardInterrupt
        if first:
            raise Terminated(name)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if not hasattr(signal, name):
            continue
        sig = getattr(signal, name)
        if name == "SIGINT" and signal.getsignal(sig) in (signal.SIG_IGN, None):
            continue
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # pragma: no cover - not the main thread
            pass
    code = 0
    try:
        try:
            app()
        except SystemExit as exc:
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt as exc:
        signal_note(str(exc) if isinstance(exc, Terminated) else "SIGINT")
        code = 130
    finally:
        # The command has ended: a signal from here on is ignored (the interpreter's teardown
        # puts back the default action of every signal with a Python handler, and a SIGTERM then
        # would end the process silently with 143 after, say, a complete release; an ignored
        # signal stays ignored, in every thread).
        for n in ("SIGINT", "SIGTERM", "SIGHUP"):
            if hasattr(signal, n):
                try:
                    signal.signal(getattr(signal, n), signal.SIG_IGN)
                except (ValueError, OSError):  # pragma: no cover
                    pass
    name, reported = signal_note()
    if name is not None and not reported:
        try:
            err_console.print(Text(_stop_message(name)), highlight=False, soft_wrap=True)
        except Exception:  # noqa: BLE001 - stderr gone: the exit code still says it
            pass
        code = code or 130
    sys.exit(code)
