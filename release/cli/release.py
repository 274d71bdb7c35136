"""``dpbundle release``: the command's options, as a :class:`ReleaseRequest` for the pipeline
(:func:`dpbundle.release.pipeline.run_release`), whose exception is printed with its exit code."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

# the --example-rows bounds (in the option's help); pipeline.request is light: the pipeline
# package imports its stages' heavy dependencies only when a release runs
from dpbundle.release.pipeline.request import MAX_EXAMPLE_ROWS, MIN_EXAMPLE_ROWS

__all__ = ["cli_release"]


def cli_release(
    spec: Annotated[Optional[Path], typer.Argument(help="Release spec (YAML or JSON).", show_default=False)] = None,
    data: Annotated[Optional[Path], typer.Argument(help="The confidential registry (CSV, CSV.gz or Parquet), or a directory of its parts (*.csv, *.csv.gz, *.parquet, in name order).", show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Bundle directory to create (must not exist unless --force).")] = ...,
    example: Annotated[Optional[str], typer.Option("--example", help="Use a built-in example (spec + simulated registry) instead of SPEC and DATA: 'births' or 'persons'.")] = None,
    key: Annotated[Optional[Path], typer.Option("--key", help="Ed25519 private key (PEM) from `dpbundle keygen`. With --example a demo key is generated next to the bundle.")] = None,
    passphrase_file: Annotated[Optional[Path], typer.Option("--passphrase-file", help="File holding the key's passphrase (or set DPBUNDLE_KEY_PASSPHRASE).")] = None,
    transcript: Annotated[Optional[Path], typer.Option("--transcript", help="Where to write the PRIVATE randomness transcript (mode 0600). Default: OUT's name + a random tag (12 hex digits; no time, which would reveal the run's duration) + .transcript.jsonl in the private directory $DPBUNDLE_PRIVATE_DIR, else $XDG_DATA_HOME/dpbundle/private (~/.local/share/dpbundle/private), mode 0700: never beside the bundle, where copying its folder would ship it. It must stay inside the enclave.")] = None,
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
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address inside the enclave, e.g. tcp://10.0.0.5:8786: each part of DATA is read and counted on a worker; only the parts' distinct records and counts come back (the order of the records too under the dp_count policy). Everything else runs here.", show_default=False)] = None,
    example_rows: Annotated[Optional[int], typer.Option("--example-rows", help=f"Rows of the simulated registry for --example (default: births 167000, persons 45000; at most {MAX_EXAMPLE_ROWS:,}).", min=MIN_EXAMPLE_ROWS, max=MAX_EXAMPLE_ROWS, show_default=False)] = None,
) -> None:
    """Produce a signed, differentially private release bundle.

    Runs the universal scheme inside the enclave: validates and prepares DATA with SPEC, records
    the privacy spend in the ledger, runs private selection (each attempt: transform, DP generator,
    synthetic constraints, face-privacy projection, DP acceptance criteria; with the spec's
    `selection.retries: resample` the generator is fitted once and each attempt samples it
    again) until a candidate passes, and writes the bundle atomically: data.csv, metrics, budget, spec, datapackage.json,
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
        dpbundle release spec.yaml registry-parts/ --out bundle --key steward.key \\
            --configs sweep/narrowed.yaml --scheduler tcp://10.0.0.5:8786
    """
    from rich.text import Text

    from dpbundle.release.cli.common import err_console
    from dpbundle.release.errors import DpbundleError, DpbundleInterrupt, literal, signal_note
    from dpbundle.release.pipeline import run_release
    from dpbundle.release.pipeline.request import ReleaseRequest

    request = ReleaseRequest(out=out, spec=spec, data=data, example=example, example_rows=example_rows,
                             key=key, passphrase_file=passphrase_file, transcript=transcript, ledger=ledger,
                             configs=configs, allow_additional_spend=allow_additional_spend, force=force,
                             make_zip=make_zip, stop_probability=stop_probability,
                             allow_other_spec=allow_other_spec, allow_other_size=allow_other_size,
                             resume=resume, preregistration=preregistration, beacon=beacon,
                             preregistration_secret=preregistration_secret, scheduler=scheduler)
    try:
        run_release(request)
        signal_note(reported=True)      # a signal from now on changes nothing: the release said how it ended
    except (DpbundleError, DpbundleInterrupt) as exc:
        signal_note(reported=True)
        err_console.print(Text("error: ", style="bold red") + Text(literal(exc.message)), soft_wrap=True,
                          highlight=False)
        raise typer.Exit(exc.code) from None
