"""Drawing from a published bundle (``dpbundle sample``): more synthetic rows from its DP model,
through the audit's reader and integrity check (post-processing: no budget, no private data).
The m copies of ``--copies`` are in :mod:`.copies`."""
from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Iterator


if TYPE_CHECKING:  # numpy is imported when rows are drawn, never to print help
    import numpy as np

    from dpbundle.audit.context import AuditContext

__all__ = ["sample_bundle", "sample_to_file", "SampleError", "MAX_ROWS", "checked_bundle", "drawn",
           "csv_chunks", "rng_for_seed", "check_rows"]

MAX_ROWS = 10_000_000          # at most ~2 GB of memory for a table of ~10 columns
BYTES_PER_CELL = 48            # peak memory per drawn cell while sampling and projecting (measured: 33)
CHUNK_ROWS = 250_000           # data.csv is written this many rows at a time


class SampleError(ValueError):
    """The bundle has no usable model, or the request is unusable."""


def rng_for_seed(seed: int | str):
    """purpose -> Generator(PCG64(SHA-256(seed | purpose | k))): reproducible from the seed (a
    copy of ``--copies`` passes ``"seed\x1fcopy i"``)."""
    import numpy as np

    uses: dict[str, int] = {}

    def rng_for(purpose: str) -> np.random.Generator:
        k = uses.get(purpose, 0)
        uses[purpose] = k + 1
        digest = hashlib.sha256(f"dpbundle-sample/1\x1f{seed}\x1f{purpose}\x1f{k}".encode()).digest()
        return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))

    return rng_for


def _memory_available() -> int | None:
    """Bytes of memory available now (Linux: MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh.read(1 << 16).decode("ascii", "replace").splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_rows(rows: int, columns: int) -> None:
    """SampleError unless ``rows`` is between 1 and MAX_ROWS and its estimated memory fits."""
    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_ROWS:
        raise SampleError(f"--rows must be a whole number from 1 to {MAX_ROWS:,} (draw more with "
                          "several seeds)")
    need = rows * max(columns, 1) * BYTES_PER_CELL + (256 << 20)
    free = _memory_available()
    if free is not None and need > free:
        raise SampleError(f"--rows {rows:,}: drawing them needs about {need / 1e9:,.1f} GB of memory and "
                          f"{free / 1e9:,.1f} GB is available; ask for fewer rows (several seeds give "
                          "more rows)")


@contextlib.contextmanager
def checked_bundle(bundle: Path, needs: str, what: str, noun: str,
                   pubkey: "Path | str | None" = None) -> Iterator["AuditContext"]:
    """The audit's context of ``bundle`` once its files match the signed manifest (the audit's
    integrity check, signature by the manifest's own key); SampleError if the bundle cannot be
    opened, lacks the file ``needs`` (``noun``, published by the spec's ``publish: what``), or
    fails the check. ``pubkey``: the publisher's key (a file, or its fingerprint) the signature
    must be made with; without it the manifest's own key is used (anyone can re-sign)."""
    from dpbundle.audit.bounds import clip
    from dpbundle.audit.bundle_io import BundleError, open_bundle
    from dpbundle.audit.checks_integrity import check_integrity
    from dpbundle.audit.context import AuditContext
    from dpbundle.audit.runner import AuditInputError, read_pin

    try:
        pin = read_pin(pubkey) if pubkey is not None else None
    except AuditInputError as e:
        raise SampleError(str(e)) from None
    try:
        guarded = open_bundle(bundle)
    except BundleError as e:
        raise SampleError(str(e)) from None
    with guarded:
        if not guarded.has(needs):
            raise SampleError(f"{bundle}: the bundle publishes no {noun} (its spec did not say "
                              f"`publish: {what}`), so there is nothing to sample from")
        ctx = AuditContext(guarded)
        integrity = check_integrity(ctx, pin)
        if integrity.failed:
            raise SampleError(clip(f"{bundle}: the bundle's files do not match its signed manifest "
                                   f"({'; '.join(integrity.problems[:2])}); nothing sampled"
                                   + ("" if pin is not None else " (run `dpbundle audit` with the "
                                      "publisher's key)"), 2000))
        yield ctx


def _draw(bundle: Path, rows: int, seed: int, raw: bool, pubkey=None):
    """(view, codes) of ``rows`` rows drawn from ``bundle``'s model (see :func:`sample_bundle`)."""
    from dpbundle.audit.bounds import clip, model_problems
    from dpbundle.audit.context import Missing
    from dpbundle.mechanisms.published import PublishError, model_from_document

    if isinstance(rows, bool) or not isinstance(rows, int) or not 1 <= rows <= MAX_ROWS:
        raise SampleError(f"--rows must be a whole number from 1 to {MAX_ROWS:,} (draw more with "
                          "several seeds)")
    with checked_bundle(bundle, "model.json", "model", "model", pubkey) as ctx:
        try:
            doc = ctx.json("model.json")
            view, config = ctx.view(), ctx.json("spec.json")["configuration"]
        except (Missing, KeyError, TypeError) as e:
            raise SampleError(clip(f"{bundle}: {e}")) from None
        check_rows(rows, len(view.columns))
        problems = model_problems(doc, view, config)
        if problems:
            raise SampleError(clip(f"{bundle}: {'; '.join(problems[:2])}", 2000))
        try:
            model = model_from_document(doc)
        except PublishError as e:
            raise SampleError(clip(f"{bundle}: {e}")) from None
        codes = drawn(model, rows, config, view, rng_for_seed(seed), bundle, raw=raw)
        return view, codes


def drawn(model, rows: int, config: dict, view, rng_for, bundle: Path, *, raw: bool = False,
          sampler: int | None = None) -> np.ndarray:
    """``rows`` codes drawn from ``model`` as the release draws data.csv (the synthetic
    constraints and the projection of ``config``; ``sampler``: the sampler version, default the
    model's), or its raw draws; SampleError naming what failed."""
    import numpy as np

    from dpbundle.audit.bounds import clip, max_drawn
    from dpbundle.audit.replay import DrawLimit, TranscriptError, sample_and_project

    try:
        if raw:
            return np.asarray(model.sample(rows, rng_for("sample round 0")))
        try:
            return sample_and_project(model, rows, config, view, rng_for, max_rows=max_drawn(rows),
                                      sampler=sampler)
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
    except MemoryError:
        raise SampleError(f"not enough memory to draw {rows:,} rows; ask for fewer (several seeds "
                          "give more rows)") from None


def csv_chunks(view, codes: np.ndarray):
    """data.csv's bytes (as the release writes it) in pieces of CHUNK_ROWS rows: the same bytes
    as one ``csv_bytes(view, codes)``, without holding every row's text at once."""
    from dpbundle.audit.replay import csv_bytes

    header = csv_bytes(view, codes[:0])
    yield header
    for start in range(0, len(codes), CHUNK_ROWS):
        piece = csv_bytes(view, codes[start:start + CHUNK_ROWS])
        if not piece.startswith(header):   # pragma: no cover - csv_bytes writes the header first
            raise SampleError("internal: the CSV header changed between pieces")
        yield piece[len(header):]


def sample_bundle(bundle: Path, rows: int, seed: int, *, raw: bool = False, pubkey=None) -> bytes:
    """CSV bytes of ``rows`` synthetic rows drawn from ``bundle``'s model.json with ``seed``:
    the bundle's synthetic constraints and face-privacy projection (its min_count) applied as in
    the release, unless ``raw`` (the model's draws as they come).

    Before anything is sampled: the bundle's files must match the SHA-256 and sizes its
    manifest signs, with a valid signature by the manifest's own key (the audit's integrity
    check; pin the publisher's key with ``dpbundle audit``), and the model must be the selected
    configuration's, within the audit's bounds (``dpbundle.audit.bounds``: its gum_rounds the
    configuration's, at most 20,000 work units a row, ...). The rounds draw at most 4 x rows +
    128 rows in all. ``rows`` is at most :data:`MAX_ROWS`, and refused when the memory it needs
    is not available (SampleError)."""
    view, codes = _draw(bundle, rows, seed, raw, pubkey)
    return b"".join(csv_chunks(view, codes))


def sample_to_file(bundle: Path, rows: int, seed: int, out: Path, *, raw: bool = False,
                   force: bool = False, pubkey=None) -> Path:
    """Draw as :func:`sample_bundle` and write the CSV to ``out`` in pieces, through a private
    temporary sibling renamed into place; ``out`` may be replaced (``force``) only when it is a
    regular file, never a device node, FIFO, socket, directory or link. SampleError when the
    request or ``out`` is unusable; OSError (e.g. disk full) when writing fails, after removing
    the temporary file."""
    import secrets

    from dpbundle.release.common.safe_io import replace_problem

    out = Path(out)
    if out.exists() or out.is_symlink():
        if not force:
            raise SampleError(f"{out}: exists (use --force to overwrite)")
        problem = replace_problem(out, "the sample")
        if problem:
            raise SampleError(problem)
    if not out.parent.is_dir():
        raise SampleError(f"{out.parent}: no such directory")
    view, codes = _draw(bundle, rows, seed, raw, pubkey)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            for piece in csv_chunks(view, codes):
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        problem = replace_problem(out, "the sample") if (out.exists() or out.is_symlink()) else None
        if problem:                      # something else appeared there meanwhile
            raise SampleError(problem)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return out
