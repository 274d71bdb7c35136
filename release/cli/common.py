"""What every command of the CLI shares: the consoles, the exit codes, printing an input error
and exiting 2, loading a spec named on the command line."""
from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

__all__ = ["EXIT_FAILED", "EXIT_INPUT", "EXIT_OK", "console", "err_console", "fail_input", "load_spec_or_exit"]

console = Console()


err_console = Console(stderr=True)


EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


def fail_input(message: str, code: int = EXIT_INPUT) -> None:
    """Print an error to stderr, literally (file names, titles and values are untrusted: never
    parsed as markup, control characters shown as escapes), and exit with ``code`` (2)."""
    from dpbundle.release.errors import literal

    err_console.print(Text("error: ", style="bold red") + Text(literal(message)), highlight=False,
                      soft_wrap=True)
    raise typer.Exit(code)


def load_spec_or_exit(path: Path):
    from dpbundle.release.common.safe_io import regular_file_problem
    from dpbundle.release.spec.load import MAX_SPEC_BYTES, SpecError, load_spec

    if path.exists():
        problem = regular_file_problem(path, "spec", MAX_SPEC_BYTES)
        if problem:
            fail_input(problem)
    try:
        return load_spec(path)
    except SpecError as exc:
        fail_input(str(exc))
