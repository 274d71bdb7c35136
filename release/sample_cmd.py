"""`dpbundle sample`: more synthetic rows from a bundle's published DP model (post-processing:
no budget, no private data)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

__all__ = ["cli_sample", "sample_bundle", "SampleError"]

MAX_ROWS = 100_000_000


class SampleError(ValueError):
    """The bundle has no usable model, or the request is unusable."""


def _rng_for(seed: int):
    """purpose -> Generator(PCG64(SHA-256(seed | purpose | k))): reproducible from the seed."""
    uses: dict[str, int] = {}

    def rng_for(purpose: str) -> np.random.Generator:
        k = uses.get(purpose, 0)
        uses[purpose] = k + 1
        digest = hashlib.sha256(f"dpbundle-sample/1\x1f{seed}\x1f{purpose}\x1f{k}".encode()).digest()
        return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))

    return rng_for


def sample_bundle(bundle: Path, rows: int, seed: int, *, raw: bool = False) -> bytes:
    """CSV bytes of ``rows`` synthetic rows drawn from ``bundle``'s model.json with ``seed``:
    the bundle's synthetic constraints and face-privacy projection (its min_count) applied as in
    the release, unless ``raw`` (the model's draws as they come).

    Before anything is sampled: the bundle's files must match the SHA-256 and sizes its
    manifest signs, with a valid signature by the manifest's own key (the audit's integrity
    check; pin the publisher's key with ``dpbundle audit``), and the model must be the selected
    configuration's, within the audit's bounds (``dpbundle.audit.bounds``: its gum_rounds the
    configuration's, at most 20,000 work units a row, ...). The rounds draw at most 4 x rows +
    128 rows in all."""
    from dpbundle.audit.bounds import clip, max_drawn, model_problems
    from dpbundle.audit.bundle_io import BundleError, open_bundle
    from dpbundle.audit.checks_integrity import check_integrity
    from dpbundle.audit.context import AuditContext, Missing
    from dpbundle.audit.replay import DrawLimit, TranscriptError, csv_bytes, sample_and_project
    from dpbundle.mechanisms.published import PublishError, model_from_document

    if not 1 <= rows <= MAX_ROWS:
        raise SampleError(f"--rows must be between 1 and {MAX_ROWS:,}")
    try:
        guarded = open_bundle(bundle)
    except BundleError as e:
        raise SampleError(str(e)) from None
    with guarded:
        if not guarded.has("model.json"):
            raise SampleError(f"{bundle}: the bundle publishes no model (its spec did not say "
                              "`publish: model`), so there is nothing to sample from")
        ctx = AuditContext(guarded)
        integrity = check_integrity(ctx, None)
        if integrity.failed:
            raise SampleError(clip(f"{bundle}: the bundle's files do not match its signed manifest "
                                   f"({'; '.join(integrity.problems[:2])}); nothing sampled (run "
                                   "`dpbundle audit` with the publisher's key)", 2000))
        try:
            doc = ctx.json("model.json")
            view, config = ctx.view(), ctx.json("spec.json")["configuration"]
        except (Missing, KeyError, TypeError) as e:
            raise SampleError(clip(f"{bundle}: {e}")) from None
        problems = model_problems(doc, view, config)
        if problems:
            raise SampleError(clip(f"{bundle}: {'; '.join(problems[:2])}", 2000))
        try:
            model = model_from_document(doc)
        except PublishError as e:
            raise SampleError(clip(f"{bundle}: {e}")) from None
        if raw:
            codes = np.asarray(model.sample(rows, _rng_for(seed)("sample round 0")))
        else:
            try:
                codes = sample_and_project(model, rows, config, view, _rng_for(seed),
                                           max_rows=max_drawn(rows))
            except (KeyError, TypeError) as e:
                raise SampleError(clip(f"{bundle}: spec.json: the configuration has no usable "
                                       f"projection ({type(e).__name__}: {e})")) from None
            except DrawLimit:
                raise SampleError("the model's samples fail the synthetic constraints so often that "
                                  f"keeping {rows:,} rows would draw more than {max_drawn(rows):,} "
                                  "rows in all; try --raw") from None
            except TranscriptError:
                raise SampleError("the model's samples fail the synthetic constraints too often to "
                                  f"keep {rows:,} rows; try --raw") from None
            except ValueError as e:   # the projection (e.g. fewer rows than min_count), the constraints
                raise SampleError(clip(f"{bundle}: {e}")) from None
        return csv_bytes(view, codes)


def cli_sample(
    bundle: Annotated[Path, typer.Argument(help="A bundle (folder or .zip) made with `publish: model`.")],
    rows: Annotated[int, typer.Option("--rows", "-n", help="How many synthetic rows to draw.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="CSV file to write (must not exist unless --force).")],
    seed: Annotated[int, typer.Option("--seed", "-s", help="Seed: the same bundle, rows and seed give the same file.")] = 0,
    raw: Annotated[bool, typer.Option("--raw", help="Skip the synthetic constraints and the face-privacy projection.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite OUT.")] = False,
) -> None:
    """Draw more synthetic rows from a bundle's published DP model.

    Sampling a published model is post-processing: it spends no privacy budget and reads no
    private data. By default the rows go through the same synthetic constraints and
    face-privacy projection as the release (every record at least min_count times). The rows
    are NOT the released data.csv: only that file was checked by the acceptance criteria.

    Nothing is sampled from a bundle whose files do not match its signed manifest, or whose
    model is not the selected configuration's or exceeds the audit's bounds (docs/audit.md,
    "Bounds"); pin the publisher's key with `dpbundle audit` first.

    Example:

        dpbundle sample births-bundle --rows 1000000 --seed 7 --out births-1m.csv
    """
    from .cli import fail_input

    if (out.exists() or out.is_symlink()) and not force:
        fail_input(f"{out}: exists (use --force to overwrite)")
    if not out.parent.is_dir():
        fail_input(f"{out.parent}: no such directory")
    try:
        data = sample_bundle(bundle, rows, seed, raw=raw)
    except SampleError as exc:
        fail_input(str(exc))
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, out)
    typer.echo(f"wrote {rows:,} synthetic rows to {out} (seed {seed}; no privacy budget spent)")
