"""`dpbundle audit`: verify a bundle independently of the code that produced it."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

__all__ = ["cli_audit"]


def _write_private(path: Path, text: str, private: bool = False) -> None:
    """Write a report. ``private`` (an enclave audit): created with mode 0600 before any content
    is written (a fresh sibling, ``O_CREAT | O_EXCL``, mode forced whatever the umask), then
    renamed over ``path`` atomically, so that no other user can read it at any moment."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not private:
        path.write_text(text, encoding="utf-8")
        return
    import os
    import secrets

    tmp = path.with_name(f".{path.name}.tmp-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def cli_audit(
    bundle: Annotated[Path, typer.Argument(help="The bundle: a directory or a .zip file (untrusted input).")],
    pubkey: Annotated[Optional[Path], typer.Option(
        "--pubkey", help="The publisher's Ed25519 public key (PEM) to pin; without it the key inside "
                         "the manifest is used and the report says 'key not pinned'.")] = None,
    json_report: Annotated[Optional[Path], typer.Option(
        "--json", help="Write the report as JSON (schema: schemas/audit-report.schema.json).")] = None,
    html_report: Annotated[Optional[Path], typer.Option(
        "--html", help="Write the report as a standalone HTML page.")] = None,
    transcript: Annotated[Optional[Path], typer.Option(
        "--transcript", help="The private randomness transcript (enclave only); with --data, replays "
                             "the selected iteration. The console output and the reports are then "
                             "PRIVATE (marked so; reports written with mode 0600).")] = None,
    data: Annotated[Optional[Path], typer.Option(
        "--data", help="The private input CSV(.gz) (enclave only); with --transcript.")] = None,
) -> None:
    """Verify a release bundle independently of the code that produced it.

    Checks: integrity and signature, schemas, size, face privacy, synthetic constraints, budget
    arithmetic (sensitivities and thresholds recomputed from the public bundle), acceptance,
    the datasheet's numbers, and (with --transcript and --data, inside the enclave) a byte-for-byte
    replay of the selected iteration. An enclave audit's output is private: the console says
    PRIVATE, the JSON report's first key is "PRIVATE", the HTML's first line too, and both are
    written with mode 0600. Replay problems say where (record, mechanism, purpose, field),
    never a true value, a count or n.

    Exit code 0 if every check passed, 1 if any failed, 2 for unusable input.

    Example: dpbundle audit births-bundle.zip --pubkey publisher.pub --json audit.json
    """
    from rich.console import Console

    from .runner import AuditInputError, run_audit

    console = Console()
    err = Console(stderr=True)
    try:
        report = run_audit(bundle, pubkey=pubkey, transcript=transcript, data=data)
    except AuditInputError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(code=2)
    report.render(console)
    try:
        if json_report is not None:
            report.validate()
            _write_private(json_report, report.to_json(), report.private)
        if html_report is not None:
            _write_private(html_report, report.to_html(), report.private)
        if report.private:
            for p in (json_report, html_report):
                if p is not None:
                    console.print(f"[bold red]PRIVATE[/bold red] report (mode 0600): {escape(str(p))}",
                                  highlight=False, soft_wrap=True)
    except (OSError, ValueError) as e:
        err.print(f"[red]error[/red]: cannot write the report: {e}", highlight=False)
        raise typer.Exit(code=2)
    raise typer.Exit(code=report.exit_code())


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - convenience entry point
    app = typer.Typer(add_completion=False)
    app.command("audit")(cli_audit)
    try:
        app(args=argv if argv is not None else sys.argv[1:], standalone_mode=False)
    except typer.Exit as e:
        return e.exit_code
    return 0
