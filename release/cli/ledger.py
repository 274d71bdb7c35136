"""``dpbundle ledger list`` and ``ledger mark``: read the private budget ledger, mark a spend."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpbundle.release.scheme.ledger_status import NEVER_RELEASED, UNFINISHED


def cli_ledger_list(
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The ledger (default: the per-user ledger).", show_default=False)] = None,
    unfinished: Annotated[bool, typer.Option("--unfinished", help="Only runs that never recorded an outcome (status 'started').")] = False,
) -> None:
    """List the spends recorded in the private budget ledger (run inside the enclave).

    Every spend counts towards the data's composed epsilon, whatever its status. A run killed
    before it could record an outcome keeps the status 'started'; mark it with `dpbundle ledger
    mark`.

    Example:

        dpbundle ledger list --unfinished
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from dpbundle.mechanisms import exact
    from dpbundle.release.errors import literal
    from dpbundle.release.scheme.ledger import Ledger, LedgerError, _ledger_path

    console = Console()
    book = Ledger(_ledger_path(ledger))
    if not book.path.exists() and not book.path.is_symlink():
        if ledger is not None:   # a ledger named on the command line must be there
            console.print(Text("error: ", style="red") + Text(literal(
                f"--ledger {ledger}: no such file (no ledger there; only the default ledger may be "
                f"absent, before the first release)")), highlight=False)
            raise typer.Exit(2)
        console.print(Text(literal(f"no spends recorded yet: the default ledger {book.path} does not "
                                   "exist (the first release creates it)")), highlight=False)
        return
    try:
        entries = book.all_entries()
    except LedgerError as exc:
        console.print(Text("error: ", style="red") + Text(literal(exc)), highlight=False)
        raise typer.Exit(2)
    if unfinished:
        entries = [e for e in entries if e.get("status") == UNFINISHED]
    # every cell is untrusted text (titles, paths, statuses typed by hand): printed literally,
    # never parsed as Rich markup nor passed to the terminal as control characters
    table = Table(title=Text(literal(f"Ledger {book.path}")))
    for col in ("id", "started", "epsilon", "status", "description"):
        table.add_column(col, justify="right" if col == "epsilon" else "left")
    for e in entries:
        table.add_row(*(Text(literal(v)) for v in (e["id"][:12], e["timestamp"],
                                                  exact.show(exact.dec(e["epsilon"])), e["status"],
                                                  e["description"])))
    console.print(table)
    console.print(f"{len(entries)} spend(s)", highlight=False)


def cli_ledger_mark(
    entry: Annotated[str, typer.Argument(help="The spend's id (at least its first 6 characters, as `ledger list` shows).")],
    status: Annotated[str, typer.Option("--status", help="The outcome to record.")] = NEVER_RELEASED,
    ledger: Annotated[Optional[Path], typer.Option("--ledger", help="The ledger (default: the per-user ledger).", show_default=False)] = None,
) -> None:
    """Record the outcome of a run that never finished (appends a status line; the spend still
    counts: history is never rewritten).

    Example:

        dpbundle ledger mark 3f9a1c2b7d4e --status "spent, never released"
    """
    from rich.console import Console
    from rich.text import Text

    from dpbundle.release.common.safe_io import text_problem
    from dpbundle.release.errors import literal
    from dpbundle.release.scheme.ledger import Ledger, LedgerError, _ledger_path

    console = Console()
    problem = text_problem(status, "--status")
    if problem:
        console.print(Text("error: ", style="red") + Text(literal(problem)), highlight=False)
        raise typer.Exit(2)
    try:
        book = Ledger(_ledger_path(ledger))
        if not book.path.exists() and not book.path.is_symlink():
            raise LedgerError(f"{book.path}: no such file (no ledger there: nothing to mark)")
        full = book.resolve_id(entry)
        book.mark_finished(full, status)
    except LedgerError as exc:
        console.print(Text("error: ", style="red") + Text(literal(exc)), highlight=False)
        raise typer.Exit(2)
    console.print(Text(literal(f"marked {full[:12]}: {status} (its epsilon still counts as spent)")),
                  highlight=False)
