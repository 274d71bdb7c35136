"""Writing a bundle and settling what a failed write left on disk (:func:`write_and_settle`),
shared by a release and by ``--resume``."""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.state import Run

__all__ = ["BundleJob", "write_and_settle"]


@dataclass(frozen=True, eq=False)
class BundleJob:
    """One call of ``write_bundle``: where (``out``, the transcript's path), what (``content``),
    signed with ``private_key``; ``overrides``: further keywords a kept result carries."""

    out: Path
    content: Any           # dpbundle.release.bundle.write.BundleContent
    transcript_path: Path
    private_key: Any
    force: bool = False
    make_zip: bool = False
    overrides: dict = field(default_factory=dict)


def write_and_settle(run: Run, job: BundleJob) -> Optional[BaseException]:
    """write_bundle; None when the bundle is complete (``run.complete``), else the exception,
    after what it left was inspected: a complete bundle of this run that only lacked its zip is
    completed; one that lost its private transcript (a stop between the two renames) is removed
    and the previous bundle put back, so that the result can be kept and written again."""
    from dpbundle.release.bundle import write as bundle_mod

    out, transcript_path = job.out, Path(job.transcript_path)
    before = (_identity(out), _identity(transcript_path), _identity(_zip_path(out)), _olds(out))
    run.out_note = (f"{out} holds the previous bundle, unchanged" if before[0] is not None
                    else f"{out} was not created")
    try:
        with output.console.status("writing the bundle: data.csv, metrics, datasheet (HTML and PDF), signature"):
            bundle_mod.write_bundle(out, content=job.content, transcript_path=job.transcript_path,
                                    private_key=job.private_key, force=job.force, make_zip=job.make_zip,
                                    **job.overrides)
        run.complete = True
        run.bundle_transcript = transcript_path
        return None
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included: inspect the disk
        if isinstance(exc, KeyboardInterrupt):
            run.signals.stop(exc)
        failure = exc
    with run.signals.critical():
        _settle(run, job, before)
    return None if run.complete else failure


def _settle(run: Run, job: BundleJob, before: tuple) -> None:
    """What a failed write left: nothing new (write_bundle put everything back); a complete
    bundle of this run (completed: its zip, the replaced bundle removed; ``run.complete``); or
    an unfinished one, taken away with the previous bundle put back."""
    out, transcript_path = job.out, Path(job.transcript_path)
    now = _identity(out)
    if now is None or now == before[0]:
        return                                   # write_bundle put everything back
    new_transcript = _identity(transcript_path) not in (None, before[1])
    problem = _bundle_problem(out, job.private_key.public_key(), transcript_path) if new_transcript else \
        "its private transcript was not put in place"
    new_olds = sorted(_olds(out) - before[3])
    if problem is None:
        _complete(run, job, before[2], new_olds)
        return
    # ours, but not complete: take it away and put the previous bundle back
    aside = out.with_name(f".{out.name}.tmp-{os.getpid()}-unfinished")
    try:
        os.rename(out, aside)
        shutil.rmtree(aside, ignore_errors=True)
        if len(new_olds) == 1:
            os.rename(out.parent / new_olds[0], out)
            run.out_note = f"{out} holds the previous bundle, unchanged"
        else:
            run.out_note = f"{out} was not created"
    except OSError as exc:
        run.out_note = (f"{out} holds an unfinished bundle of this run ({problem}) that could not "
                        f"be removed ({exc.strerror or exc}); do not publish it")


def _complete(run: Run, job: BundleJob, zip_before, new_olds: list[str]) -> None:
    """A complete bundle of this run is in place: write its missing zip, remove the bundle it
    replaced (moved aside by write_bundle)."""
    from dpbundle.release.bundle import write as bundle_mod

    run.bundle_transcript = Path(job.transcript_path)
    out = job.out
    zip_path = _zip_path(out)
    if job.make_zip and _identity(zip_path) in (None, zip_before):
        tmp = zip_path.with_name(f".{zip_path.name}.tmp-{os.getpid()}-settle")
        try:
            bundle_mod.write_zip(out, tmp, root=out.name)
            os.replace(tmp, zip_path)
        except OSError:
            run.zip_missing = True
            tmp.unlink(missing_ok=True)
    for name in new_olds:
        shutil.rmtree(out.parent / name, ignore_errors=True)
    run.complete = True


def _zip_path(out: Path) -> Path:
    return out.with_name(out.name + ".zip")


def _identity(path: Path) -> Optional[tuple[int, int]]:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _olds(out: Path) -> set[str]:
    """The moved-aside old bundles (``.OUT.old-*``) present now."""
    try:
        return {p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.old-")}
    except OSError:
        return set()


def _bundle_problem(out: Path, public_key, transcript_path: Path) -> Optional[str]:
    """None when ``out`` is a complete bundle: its manifest lists exactly its files and their
    hashes match, its signature verifies with ``public_key``, and the transcript at
    ``transcript_path`` opens its commitment."""
    from dpbundle.mechanisms.noise import commitment_of

    from dpbundle.release.bundle import keys
    from dpbundle.release.bundle.preflight import replaceable_bundle_problem

    problem = replaceable_bundle_problem(out)
    if problem:
        return problem
    try:
        manifest = (out / "manifest.json").read_bytes()
        if not keys.verify(public_key, manifest, (out / "manifest.sig").read_bytes()):
            return "its signature does not verify"
        value = json.loads(manifest)["transcript_commitment"]["value"]
        with open(transcript_path, "rb") as fh:
            header = json.loads(fh.readline())
            records = fh.read()
        if commitment_of(bytes.fromhex(header["salt"]), records) != value:
            return "its private transcript does not open its commitment"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"it cannot be checked ({type(exc).__name__})"
    return None
