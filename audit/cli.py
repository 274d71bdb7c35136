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


# The command's argument and options (their help is the command's --help).
_BundleArg = Annotated[Path, typer.Argument(
    metavar="BUNDLE", help="The bundle: a directory or a .zip file (untrusted input).")]
_PubkeyOpt = Annotated[Optional[str], typer.Option(
    "--pubkey", metavar="<file|fingerprint>",
    help="The publisher's public key file (PEM or OpenSSH) or its fingerprint (64 hex), "
         "obtained from the publisher, never from the bundle. Without it the verdict is at best "
         "NOT VERIFIED (exit code 3).")]
_SpecOpt = Annotated[Optional[str], typer.Option(
    "--spec", metavar="<file|sha256>",
    help="The pre-registered spec file (YAML or JSON) or its SHA-256 (64 hex): the bundle's "
         "spec must be this one.")]
_JsonOpt = Annotated[Optional[str], typer.Option(
    "--json", metavar="<file|->",
    help="Write the report as JSON (schemas/audit-report.schema.json) to this file, or to "
         "standard output with '-' (the table then goes to standard error).")]
_HtmlOpt = Annotated[Optional[str], typer.Option(
    "--html", metavar="<file|->",
    help="Write the report as a standalone HTML page to this file, or to standard output with "
         "'-' (the table then goes to standard error).")]
_TranscriptOpt = Annotated[Optional[Path], typer.Option(
    "--transcript", help="The private randomness transcript (enclave only); with --data, replays "
                         "the selected iteration. The console output and the reports are then "
                         "PRIVATE (marked so; reports written with mode 0600).")]
_DataOpt = Annotated[Optional[Path], typer.Option(
    "--data", help="The private input CSV(.gz), or the directory of its parts (enclave only); with --transcript.")]
_PreregistrationOpt = Annotated[Optional[Path], typer.Option(
    "--preregistration", metavar="REC",
    help="The pre-registration record you archived when it was published (REC, with REC.sig "
         "beside it): the bundle's preregistration.json must be this one, byte for byte. "
         "Without it a pre-registered bundle is at best NOT VERIFIED (pre-registration not "
         "pinned, exit code 3).")]
_BeaconOpt = Annotated[Optional[str], typer.Option(
    "--beacon", metavar="VALUE",
    help="The beacon value you looked up at the source the record names: the bundle's seeds "
         "must be bound to it. Without it a pre-registered bundle is at best NOT VERIFIED "
         "(beacon not checked, exit code 3).")]
_LedgerOpt = Annotated[Optional[Path], typer.Option(
    "--ledger", metavar="LEDGER",
    help="The private budget ledger (enclave only): the number of spends on this registry "
         "that the bundle states is checked against it. The output is then PRIVATE.")]


def cli_audit(
    bundle: _BundleArg,
    pubkey: _PubkeyOpt = None,
    spec: _SpecOpt = None,
    json_report: _JsonOpt = None,
    html_report: _HtmlOpt = None,
    transcript: _TranscriptOpt = None,
    data: _DataOpt = None,
    preregistration: _PreregistrationOpt = None,
    beacon: _BeaconOpt = None,
    ledger: _LedgerOpt = None,
) -> None:
    r"""Verify a release bundle independently of the code that produced it.

    Checks, in order: integrity (the manifest's Ed25519 signature, every file's SHA-256 and
    size), schemas, size, face privacy, synthetic constraints, budget arithmetic (sensitivities
    and thresholds recomputed from the public bundle), acceptance, the datasheet's numbers, the
    pre-registered spec (with --spec) and, inside the enclave with --transcript and --data, a
    byte-for-byte replay of the selected iteration.

    Pin the publisher's key with --pubkey: its key file or its fingerprint, obtained from the
    publisher, not from the bundle. Without it every check runs against the key embedded in the
    bundle, which anyone could have re-signed the bundle with: even if every check passes, the
    verdict is NOT VERIFIED (key not pinned) and the exit code is 3.

    With --spec the bundle's spec must be the pre-registered one: a spec file (thresholds,
    epsilons, cap and total compared field by field) or the SHA-256 of its canonical JSON, as
    printed by `python -m dpbundle.audit.preregistration SPEC.yaml`.

    A pre-registered bundle carries its own record and beacon value, which whoever re-signed it
    chose. Pin them: --preregistration REC (the record you archived when it was published) and
    --beacon VALUE (the value you looked up at the beacon's source). Without them the verdict is
    NOT VERIFIED (pre-registration not pinned; beacon not checked) and the exit code is 3.

    Exit codes: 0 verified (every check passed, and the key, and for a pre-registered bundle
    its record and beacon value, were pinned); 1 a check failed; 2 unusable input or usage (the
    message names the file and the rule); 3 not verified (every check passed, but something was
    checked only against the bundle's own word). The JSON report's `verdict` is `verified`,
    `failed`, `not_verified_key_not_pinned`, `not_verified_preregistration_not_pinned` or
    `not_verified_beacon_not_checked`; `not_checked` lists every reason (docs/audit.md).

    With `--json -` the JSON report goes to standard output, and the table and the verdict to
    standard error. On a terminal (and not with `--json -`), a progress display on standard error
    shows the running check and the bytes of data.csv hashed or read: public numbers only.

    An enclave audit's output is private: the console says PRIVATE, the JSON report's first key
    is "PRIVATE", the HTML's first line too, and report files are written with mode 0600.
    Replay problems say where (record, mechanism, purpose, field), never a true value, a count
    or n.

    Examples:

        dpbundle audit births-bundle --pubkey births-bundle.demo-key.pub

        dpbundle audit bundle.zip --pubkey publisher.pub --spec spec.yaml

        dpbundle audit bundle.zip --pubkey FINGERPRINT --spec SPEC_SHA256 \
            --json audit.json

        dpbundle audit bundle --pubkey publisher.pub --json - > audit.json

        dpbundle audit bundle --pubkey publisher.pub \
            --preregistration births.prereg.json --beacon VALUE

        dpbundle audit bundle --pubkey publisher.pub --transcript T.jsonl \
            --data registry.csv.gz --ledger ledger.jsonl --json private-audit.json
    """
    _audit(bundle, json_report, html_report, pubkey=pubkey, spec=spec, transcript=transcript,
           data=data, preregistration=preregistration, beacon=beacon, ledger=ledger)


def _audit(bundle: Path, json_report: str | None, html_report: str | None, **options) -> None:
    """Run the audit, print it, write the reports and exit with the verdict's code."""
    from rich.console import Console

    from .runner import AuditInputError, run_audit

    to_stdout = "-" in (json_report, html_report)
    err = Console(stderr=True)
    if json_report == "-" and html_report == "-":
        err.print("[red]error[/red]: --json - and --html - cannot both write to standard output",
                  markup=True, highlight=False)
        raise typer.Exit(code=2)
    console = err if to_stdout else Console()
    progress = _progress(err, to_stdout)
    try:
        report = run_audit(bundle, progress=progress, **options)
    except AuditInputError as e:
        err.print(f"[red]error[/red]: {escape(str(e))}", markup=True, highlight=False, soft_wrap=True)
        raise typer.Exit(code=2)
    report.render(console)
    _write_reports(report, json_report, html_report, console, err)
    raise typer.Exit(code=report.exit_code)


def _progress(err, json_to_stdout: bool):
    """A progress display on stderr: only on a real terminal, never with --json -."""
    if json_to_stdout or not err.is_terminal or err.is_dumb_terminal:
        return None
    from .progress import RichProgress

    return RichProgress(err)


def _write_reports(report, json_report: str | None, html_report: str | None, console, err) -> None:
    """--json and --html (a file, or '-' for stdout); exit 2 if one cannot be written."""
    try:
        if json_report is not None:
            report.validate()
            if json_report == "-":
                typer.echo(report.to_json(), nl=False)
            else:
                _write_private(Path(json_report), report.to_json(), report.private)
        if html_report == "-":
            typer.echo(report.to_html(), nl=False)
        elif html_report is not None:
            _write_private(Path(html_report), report.to_html(), report.private)
        if report.private:
            for p in (json_report, html_report):
                if p is not None:
                    where = "on standard output" if p == "-" else f"(mode 0600): {escape(str(p))}"
                    console.print(f"[bold red]PRIVATE[/bold red] report {where}", highlight=False,
                                  soft_wrap=True)
    except (OSError, ValueError) as e:
        err.print(f"[red]error[/red]: cannot write the report: {escape(str(e))}", highlight=False)
        raise typer.Exit(code=2)


def main(argv: list[str] | None = None) -> int:
    """Run the audit command on its own (``python -m dpbundle.audit``), without the release's
    commands; returns the exit code (0, 1, 2 or 3)."""
    app = typer.Typer(add_completion=False, rich_markup_mode="markdown",
                      pretty_exceptions_show_locals=False,
                      context_settings={"help_option_names": ["-h", "--help"]})
    app.command("audit")(cli_audit)
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="dpbundle audit")
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return 0
