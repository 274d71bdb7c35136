"""dpbundle from Python: release, sweep and audit with the same options as the command line.

    >>> from dpbundle.release.api import release, sweep, audit
    >>> b = release(example="births", out="births-bundle")          # a ReleasedBundle
    >>> b.data.head(); b.metrics; b.budget["total_epsilon"]
    >>> audit("births-bundle", pubkey="births-bundle.demo-key.pub").verdict
    >>> s = sweep("examples/births.yaml", "public.csv.gz", out="sweep", sample=8, reps=3)

``release`` is the release itself: ``dpbundle release`` is a thin layer over the same function
(``release_cmd.run_release``) that prints a :class:`CommandError` and exits with its code. The
same checks before any budget is spent, the same ledger, the same private transcript; progress
output stays quiet unless ``echo=True``; a refusal raises :class:`CommandError`. ``sweep`` is :func:`dpbundle.release.sweep.run_sweep`; ``audit`` is
:func:`dpbundle.audit.runner.run_audit`. Reading a bundle: :func:`dpbundle.audit.open_bundle`.
"""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any, Iterator

__all__ = ["CommandError", "ReleaseInterrupted", "release", "sweep", "audit"]

PathLike = str | os.PathLike


class CommandError(Exception):
    """A command refused or failed: ``code`` is the CLI's exit code (2 input, 1 nothing
    released), ``message`` what it printed."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message or f"exit code {code}")
        self.code, self.message = code, message


class ReleaseInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) during a release, after the clean-up: what exists on disk and in the
    ledger is in ``message``; the CLI exits with ``code`` 130. A ``KeyboardInterrupt``, so that
    ``except Exception`` does not swallow it."""

    def __init__(self, message: str, code: int = 130) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@contextlib.contextmanager
def _consoles(module: Any, echo: bool) -> Iterator[io.StringIO]:
    """Point ``module``'s Rich consoles at a buffer unless ``echo`` (quiet progress output)."""
    from rich.console import Console

    buffer = io.StringIO()
    saved = {name: getattr(module, name) for name in ("console", "err") if hasattr(module, name)}
    if not echo:
        for name in saved:
            setattr(module, name, Console(file=buffer, width=100, color_system=None))
    try:
        yield buffer
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def release(spec: PathLike | None = None, data: PathLike | None = None, *, out: PathLike,
            example: str | None = None, key: PathLike | None = None,
            passphrase_file: PathLike | None = None, transcript: PathLike | None = None,
            ledger: PathLike | None = None, configs: PathLike | None = None,
            allow_additional_spend: bool = False, force: bool = False, zip: bool = False,
            stop_probability: str | float | None = None, allow_other_spec: bool = False,
            allow_other_size: bool = False,
            resume: PathLike | None = None, example_rows: int | None = None,
            preregistration: PathLike | None = None, beacon: str | None = None,
            preregistration_secret: PathLike | None = None, echo: bool = False):
    """``dpbundle release`` (see its ``--help`` for every option); returns the written bundle,
    opened (:class:`dpbundle.audit.api.ReleasedBundle`)."""
    from dpbundle.audit import open_bundle

    from . import release_cmd

    p = lambda v: Path(v) if v is not None else None  # noqa: E731
    with _consoles(release_cmd, echo):
        release_cmd.run_release(
            spec=p(spec), data=p(data), out=Path(out), example=example, key=p(key),
            passphrase_file=p(passphrase_file), transcript=p(transcript), ledger=p(ledger),
            configs=p(configs), allow_additional_spend=allow_additional_spend, force=force,
            make_zip=zip, stop_probability=None if stop_probability is None else str(stop_probability),
            allow_other_spec=allow_other_spec, allow_other_size=allow_other_size, resume=p(resume), example_rows=example_rows,
            preregistration=p(preregistration), beacon=beacon,
            preregistration_secret=p(preregistration_secret))
    return open_bundle(out)


def sweep(spec: PathLike, data: PathLike, *, out: PathLike, **options: Any):
    """``dpbundle sweep``: :func:`dpbundle.release.sweep.run_sweep` (options: reps, sample,
    seed, workers, scheduler, min_acceptance, max_reps, batch, configs, allow_other_spec,
    report, progress, ...); returns its SweepResult. :class:`CommandError` (code 2) for
    unusable input."""
    from .sweep import SweepError, run_sweep

    options.setdefault("progress", False)
    try:
        return run_sweep(spec, data, out, **options)
    except SweepError as exc:
        raise CommandError(2, str(exc)) from None


def audit(bundle: PathLike, pubkey: PathLike | str | None = None, *, spec: PathLike | str | None = None,
          transcript: PathLike | None = None, data: PathLike | None = None):
    """``dpbundle audit``: the report (``.verdict``, ``.checks``, ``.to_json()``);
    :class:`CommandError` (code 2) for unusable input."""
    from dpbundle.audit.runner import AuditInputError, run_audit

    try:
        return run_audit(bundle, pubkey=pubkey, transcript=transcript, data=data, spec=spec)
    except AuditInputError as exc:
        raise CommandError(2, str(exc)) from None
