"""`dpbundle sample --copies M`: m synthetic copies that carry the DP noise, from a bundle's
published DP tables (post-processing: no budget, no private data).

Copy i (``mechanisms/copies.py``): every table of dp-tables.json redrawn from its posterior
(the published counts plus a fresh discrete Laplace of the published scale), the model rebuilt by
the configuration's generator from those counts (its own estimator), the number of records redrawn
the same way under the records policy ``dp_count``, and the records drawn as the release draws
data.csv (synthetic constraints, face-privacy projection, the public sampler rule). An estimate
computed on every copy combines into an interval with the rules of docs/reading-the-data.md.

The output is a new folder: ``copy-01.csv`` ... (data.csv's format) and ``copies.json`` (schema
``schemas/copies.schema.json``: the bundle's manifest digest, the seed, every copy's file, rows
and SHA-256, the combining rule's name). It is written in a private temporary sibling and renamed
into place: on any failure nothing is left behind.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
from pathlib import Path
from typing import Callable

from .draws import MAX_ROWS, SampleError, check_rows, checked_bundle, csv_chunks, drawn, rng_for_seed

__all__ = ["write_copies", "COPIES_FORMAT", "COPIES_JSON"]

COPIES_FORMAT = "dpbundle-copies/1"
COPIES_JSON = "copies.json"
#: The rules of docs/reading-the-data.md, stated in copies.json (mechanisms/copies.py derives them).
COMBINING = {"registry": "mean(q) +- t(m - 1) sqrt((1 + 1/m) b)",
             "population": "mean(q) +- t(nu) sqrt((1 + 1/m) b + mean(u)), nu = (m - 1) (1 + mean(u) / ((1 + 1/m) b))^2"}


def _tables(doc: dict, names: list[str]):
    """The MeasuredTables of dp-tables.json (column names to indices)."""
    import numpy as np

    from dpbundle.mechanisms.measured import MeasuredTable

    return [MeasuredTable(tuple(names.index(c) for c in t["columns"]), tuple(t["merge"]), tuple(t["sizes"]),
                          np.asarray(t["counts"], dtype=np.int64), int(t["sensitivity"]), float(t["epsilon"]),
                          str(t["measurement"]))
            for t in doc["tables"]]


#: The audit's checks a bundle must pass before copies are drawn from it: the files' schemas and
#: spec.json's configuration list, the budget (the generation epsilon the tables' noise comes
#: from is the one budget.json states and spends), the tables' structure and noise re-derived.
PRE_CHECKS = ("schema", "budget", "tables")


def _audited(ctx, bundle: Path) -> None:
    """SampleError unless the bundle passes :data:`PRE_CHECKS` (after the integrity check of
    :func:`checked_bundle`): a key holder's re-signed edit of spec.json (say, a larger generation
    epsilon, which would make the copies' noise smaller than the release's) fails the budget
    check; an edited table's noise fails the tables check."""
    from dpbundle.audit.bounds import clip
    from dpbundle.audit.checks_budget import check_budget
    from dpbundle.audit.checks_schema import check_schema
    from dpbundle.audit.tables_check import check_tables

    for name, check in zip(PRE_CHECKS, (lambda: check_schema(ctx, True), lambda: check_budget(ctx),
                                        lambda: check_tables(ctx))):
        result = check()
        if result.failed:
            raise SampleError(clip(f"{bundle}: the bundle fails the audit's {name} check "
                                   f"({'; '.join(result.problems[:2])}); nothing sampled (run "
                                   "`dpbundle audit` with the publisher's key)", 2000))


def _plan(ctx, bundle: Path):
    """(view, config, generator, tables, n, count scale) from the bundle's public files, once
    the audit's :data:`PRE_CHECKS` have passed."""
    from dpbundle.audit.bounds import clip
    from dpbundle.audit.context import Missing
    from dpbundle.audit.model_check import config_generator
    from dpbundle.audit.tables_check import count_scale
    from dpbundle.mechanisms.copies import COPY_GENERATORS

    try:
        view, spec_doc = ctx.view(), ctx.json("spec.json")
        config, n = spec_doc["configuration"], ctx.declared_n()
        gen_type = (config.get("generator") or {}).get("type")
    except (Missing, KeyError, TypeError, AttributeError) as e:
        raise SampleError(clip(f"{bundle}: {e}")) from None
    if n > MAX_ROWS:          # before the checks, which read data.csv
        raise SampleError(f"{bundle}: a copy has as many records as the bundle ({n:,}), and "
                          f"`dpbundle sample` draws at most {MAX_ROWS:,} records at a time")
    if gen_type not in COPY_GENERATORS:
        raise SampleError(f"{bundle}: copies need a generator that rebuilds its model from its tables "
                          f"({', '.join(COPY_GENERATORS)}); this bundle's is {gen_type!r}")
    _audited(ctx, bundle)
    names = list(view.names)
    try:
        generator = config_generator(config, float(view.spec["privacy"]["epsilon_generation"]),
                                     view.spec, names)
        tables = _tables(ctx.json("dp-tables.json"), names)
    except (Missing, KeyError, TypeError, ValueError) as e:
        raise SampleError(clip(f"{bundle}: spec.json: the configuration's generator cannot be built ({e})")) from None
    return view, config, generator, tables, n, count_scale(view.spec)


def _model(generator, tables, domain: list[int], n: int, rng, view, config: dict, bundle: Path):
    """The model of one copy: the generator's estimator on one posterior draw of the tables,
    within the audit's bounds on a published model (``audit/bounds.py``: the work of a sampled
    row, GUM's rounds); SampleError naming what failed."""
    from dpbundle.audit.bounds import clip, model_problems
    from dpbundle.mechanisms.copies import posterior_model
    from dpbundle.mechanisms.published import PublishError, model_document

    try:
        model = posterior_model(generator, tables, domain, n, rng)
        doc = model_document(model, generator=config.get("generator") or {},
                             epsilon=float(view.spec["privacy"]["epsilon_generation"]),
                             columns=list(view.names))
    except (ArithmeticError, ValueError, TypeError, KeyError, IndexError, PublishError) as e:
        raise SampleError(clip(f"{bundle}: the model cannot be rebuilt from dp-tables.json "
                               f"({type(e).__name__}: {e})")) from None
    problems = model_problems(json.loads(json.dumps(doc)), view, config)   # as a file's JSON reads
    if problems:
        raise SampleError(clip(f"{bundle}: the rebuilt model is over the audit's bounds "
                               f"({'; '.join(problems[:2])})", 2000))
    return model


def _write_copy(path: Path, view, codes) -> str:
    """Write one copy (data.csv's format) and return its SHA-256."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(fd, "wb") as fh:
        for piece in csv_chunks(view, codes):
            digest.update(piece)
            fh.write(piece)
        fh.flush()
        os.fsync(fh.fileno())
    return digest.hexdigest()


def write_copies(bundle: Path, copies: int, seed: int, out: Path, *, raw: bool = False,
                 progress: Callable[[int, int, int], None] | None = None, pubkey=None) -> dict:
    """Write ``copies`` copies of ``bundle`` into the new folder ``out`` (module docstring) and
    return copies.json's document. ``progress(i, m, rows)`` after each copy. SampleError when
    the request, the bundle or ``out`` is unusable; OSError when writing fails (nothing is left).
    ``pubkey``: the publisher's key the signature must be made with (else the manifest's own:
    the checks then show that the files agree with each other, not that they are the
    publisher's)."""
    import numpy as np

    from dpbundle.mechanisms.copies import MAX_COPIES, MIN_COPIES, posterior_n
    from dpbundle.mechanisms.sampling import public_sampler
    from dpbundle.release.common.jsonschemas import validate

    if isinstance(copies, bool) or not isinstance(copies, int) or not MIN_COPIES <= copies <= MAX_COPIES:
        raise SampleError(f"--copies must be a whole number from {MIN_COPIES} to {MAX_COPIES} "
                          "(10 is a good start: docs/reading-the-data.md)")
    out = Path(out)
    if out.exists() or out.is_symlink():
        raise SampleError(f"{out}: exists; copies go into a new folder (remove it or choose another)")
    if not out.parent.is_dir():
        raise SampleError(f"{out.parent}: no such directory")
    with checked_bundle(bundle, "dp-tables.json", "tables", "DP tables", pubkey) as ctx:
        view, config, generator, tables, n, scale_n = _plan(ctx, bundle)
        check_rows(n, len(view.columns))         # the memory of one copy (one at a time)
        manifest = ctx.bundle.digest("manifest.json")[0]
        domain = [c.size for c in view.columns]
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        tmp.mkdir(mode=0o755)
        try:
            listed = []
            for i in range(1, copies + 1):
                rng_for = rng_for_seed(f"{seed}\x1fcopy {i}")
                posterior = rng_for("posterior")
                model = _model(generator, tables, domain, n, posterior, view, config, bundle)
                rows = posterior_n(n, scale_n, posterior)
                if rows > MAX_ROWS:              # n within the count's noise of the limit
                    raise SampleError(f"{bundle}: copy {i}'s redrawn number of records, {rows:,}, is "
                                      f"above the {MAX_ROWS:,} `dpbundle sample` draws at a time")
                codes = drawn(model, rows, config, view, rng_for, bundle, raw=raw,
                              sampler=public_sampler(config.get("generator"), rows, domain))
                name = f"copy-{i:0{max(2, len(str(copies)))}d}.csv"
                listed.append({"file": name, "rows": int(len(codes)),
                               "sha256": _write_copy(tmp / name, view, np.asarray(codes))})
                if progress:
                    progress(i, copies, int(len(codes)))
            doc = {"format": COPIES_FORMAT, "manifest_sha256": manifest, "seed": seed, "raw": raw,
                   "records": "dp_count" if scale_n is not None else "declared_public",
                   "combining": COMBINING,
                   "copies": listed}
            validate(doc, "copies", document=COPIES_JSON)
            (tmp / COPIES_JSON).write_text(json.dumps(doc, indent=2) + "\n")
            if out.exists() or out.is_symlink():
                raise SampleError(f"{out}: appeared while the copies were drawn; nothing written")
            os.replace(tmp, out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return doc
