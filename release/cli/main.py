"""The `dpbundle` command line (Typer). Command bodies live in the modules that own them."""
from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer
from rich.text import Text

from dpbundle.release import __version__
from dpbundle.release.cli.common import (  # noqa: F401  (also importable from here)
    EXIT_FAILED, EXIT_INPUT, EXIT_OK, console, err_console, fail_input, load_spec_or_exit)
from dpbundle.release.cli.spec import spec_app
from dpbundle.release.cli.style import add_command

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
app.add_typer(spec_app, name="spec")


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


def _register() -> None:
    from dpbundle.release.cli.release import cli_release

    add_command(app, "release", cli_release)
    from dpbundle.audit.cli import cli_audit

    add_command(app, "audit", cli_audit)
    from dpbundle.release.cli.sweep import cli_sweep

    add_command(app, "sweep", cli_sweep)
    from dpbundle.release.cli.ledger import cli_ledger_list, cli_ledger_mark

    ledger_app = typer.Typer(help="The private budget ledger: what was spent on which data.",
                             no_args_is_help=True)
    add_command(ledger_app, "list", cli_ledger_list)
    add_command(ledger_app, "mark", cli_ledger_mark)
    app.add_typer(ledger_app, name="ledger")
    from dpbundle.release.cli.preregister import cli_preregister
    from dpbundle.release.cli.sample import cli_sample

    add_command(app, "sample", cli_sample)

    add_command(app, "preregister", cli_preregister)
    from dpbundle.release.cli.keygen import cli_keygen

    add_command(app, "keygen", cli_keygen)
    from dpbundle.release.cli.example import cli_example

    add_command(app, "example", cli_example)
    from dpbundle.release.cli.selftest import cli_selftest

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

    from dpbundle.release.errors import Terminated, signal_note

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
