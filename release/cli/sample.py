"""`dpbundle sample`: more synthetic rows from a bundle's published DP model, or m copies that
carry the DP noise (post-processing: no budget, no private data). The drawing is
``release/bundle/draws.py`` and ``release/bundle/copies.py``."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from dpbundle.release.bundle.draws import MAX_ROWS, SampleError, sample_bundle, sample_to_file

__all__ = ["cli_sample", "sample_bundle", "sample_to_file", "SampleError", "MAX_ROWS"]


def cli_sample(
    bundle: Annotated[Path, typer.Argument(help="A bundle (folder or .zip) made with `publish: model` "
                                                "(or `publish: tables` for --copies).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write (must not exist unless --force); "
                                                          "with --copies, a new folder.")],
    rows: Annotated[Optional[int], typer.Option("--rows", "-n", help="How many synthetic rows to draw "
                                                "(not with --copies: each copy has its own).")] = None,
    copies: Annotated[Optional[int], typer.Option("--copies", "-m", help="Draw this many copies that carry "
                                                  "the DP noise, for intervals (2 to 100; 10 is a good start).",
                                                  show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed: the same bundle, rows and seed give the same file.")] = 0,
    raw: Annotated[bool, typer.Option("--raw", help="Skip the synthetic constraints and the face-privacy projection.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT (not with --copies).")] = False,
    pubkey: Annotated[Optional[str], typer.Option("--pubkey", help="The publisher's public key (file, or its SHA-256 fingerprint): the bundle must be signed with it. Without it, the manifest's own key.", show_default=False)] = None,
) -> None:
    """Draw more synthetic rows from a bundle's published DP model, or m copies for intervals.

    Sampling a published model is post-processing: it spends no privacy budget and reads no
    private data. By default the rows go through the same synthetic constraints and
    face-privacy projection as the release (every record at least min_count times). The rows
    are NOT the released data.csv: only that file was checked by the acceptance criteria.

    With --copies M (a bundle made with `publish: tables`): M copies, each drawn from the
    model rebuilt from the DP tables redrawn around their published counts, so that the copies
    differ as much as the DP noise could have made the release differ. Run your analysis on
    every copy and combine the M estimates (docs/reading-the-data.md, "Intervals from m
    copies"): one file alone understates the uncertainty.

    Nothing is sampled from a bundle whose files do not match its signed manifest, or whose
    model is not the selected configuration's or exceeds the audit's bounds (docs/audit.md,
    "Bounds"); copies also need the audit's schema, budget and tables checks to pass. Without
    --pubkey the signature is checked with the manifest's own key, which anyone can re-sign
    with: pin the publisher's key with --pubkey (or `dpbundle audit --pubkey` first).

    Examples:

        dpbundle sample births-bundle --rows 1000000 --seed 7 --out births-1m.csv

        dpbundle sample persons-bundle --copies 10 --out copies --pubkey key.pub
    """
    from dpbundle.release.cli.common import EXIT_FAILED, fail_input

    if copies is not None:
        _cli_copies(bundle, copies, seed, out, raw=raw, rows=rows, force=force, pubkey=pubkey)
        return
    if rows is None:
        fail_input("--rows is required (how many synthetic rows to draw), or --copies M for copies")
    try:
        sample_to_file(bundle, rows, seed, out, raw=raw, force=force, pubkey=pubkey)
    except SampleError as exc:
        fail_input(str(exc))
    except MemoryError:
        fail_input(f"not enough memory to draw {rows:,} rows; ask for fewer", code=EXIT_FAILED)
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else f"{out}: "
        fail_input(f"{where}cannot write the sample ({exc.strerror or exc}); nothing was written")
    typer.echo(f"wrote {rows:,} synthetic rows to {out} (seed {seed}; no privacy budget spent)")


def _cli_copies(bundle: Path, copies: int, seed: int, out: Path, *, raw: bool, rows: int | None,
                force: bool, pubkey: str | None) -> None:
    """`dpbundle sample --copies`: write the folder, one line of progress per copy."""
    from dpbundle.release.cli.common import EXIT_FAILED, fail_input
    from dpbundle.release.bundle.copies import write_copies

    if rows is not None:
        fail_input("--rows does not go with --copies: every copy has the number of records the "
                   "bundle's count gives it (docs/reading-the-data.md)")
    if force:
        fail_input("--force does not go with --copies: copies go into a new folder")

    def progress(i: int, m: int, n: int) -> None:
        typer.echo(f"copy {i}/{m}: {n:,} rows", err=True)

    try:
        write_copies(bundle, copies, seed, out, raw=raw, progress=progress, pubkey=pubkey)
    except SampleError as exc:
        fail_input(str(exc))
    except MemoryError:
        fail_input("not enough memory to draw the copies", code=EXIT_FAILED)
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else f"{out}: "
        fail_input(f"{where}cannot write the copies ({exc.strerror or exc}); nothing was written")
    typer.echo(f"wrote {copies} copies to {out} (seed {seed}; no privacy budget spent); combine "
               "estimates with the rules of docs/reading-the-data.md")
