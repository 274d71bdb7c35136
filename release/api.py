"""dpbundle from Python: release, sweep and audit with the same options as the command line.

    >>> from dpbundle.release.api import release, sweep, audit
    >>> b = release(example="births", out="births-bundle")          # a ReleasedBundle
    >>> b.data.head(); b.metrics; b.budget["total_epsilon"]
    >>> audit("births-bundle", pubkey="births-bundle.demo-key.pub").verdict
    >>> s = sweep("examples/births.yaml", "public.csv.gz", out="sweep", sample=8, reps=3)

``release`` is the release itself: ``dpbundle release`` is a thin layer over the same function
(``release_cmd.run_release``) that prints the exception's message and exits with its code. The
same checks before any budget is spent, the same ledger, the same private transcript; progress
output stays quiet unless ``echo=True``. ``sweep`` is :func:`dpbundle.release.sweep.run.run_sweep`;
``audit`` is :func:`dpbundle.audit.runner.run_audit`. Reading a bundle:
:func:`dpbundle.audit.open_bundle`.

Exceptions (``dpbundle.release.errors``; every one has ``code``, the command line's exit code,
and ``message``)::

    DpbundleError (= CommandError)   UnusableInput (2), Refused (2), ReleaseFailed (1),
                                     BundleNotWritten (2, a ReleaseFailed: result kept for --resume)
    DpbundleInterrupt (a KeyboardInterrupt, 130)   ReleaseInterrupted

Nothing else escapes these functions on purpose: a wrong argument type is an ``UnusableInput``,
running out of memory or a system error a ``DpbundleError`` whose message states what exists.
Interrupts are not ``Exception``s: ``except DpbundleError`` does not catch Ctrl-C; catch
``DPBUNDLE_ERRORS`` for both.
"""
from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any, Iterator

__all__ = ["DpbundleError", "CommandError", "UnusableInput", "Refused", "ReleaseFailed",
           "BundleNotWritten", "DpbundleInterrupt", "ReleaseInterrupted", "DPBUNDLE_ERRORS",
           "release", "sweep", "audit"]

PathLike = str | os.PathLike

# The exception hierarchy lives in release/errors.py (no heavy imports); see its docstring.
from dpbundle.release.errors import (DPBUNDLE_ERRORS, BundleNotWritten, CommandError, DpbundleError,  # noqa: E402
                     DpbundleInterrupt, Refused, ReleaseFailed, ReleaseInterrupted, UnusableInput)


def _check_args(call: str, **kinds: tuple[Any, str]) -> None:
    """UnusableInput (code 2) naming the argument when one has the wrong type: ``kinds`` maps a
    name to (value, kind), kind one of "path" (str or os.PathLike), "bool", "int" (not a
    bool), "str", "number" (str, int or float); a trailing "?" also allows None."""
    for name, (value, kind) in kinds.items():
        optional = kind.endswith("?")
        base = kind.rstrip("?")
        if value is None and optional:
            continue
        ok = {"path": isinstance(value, (str, os.PathLike)),
              "bool": isinstance(value, bool),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "str": isinstance(value, str),
              "number": isinstance(value, (str, int, float)) and not isinstance(value, bool)}[base]
        if not ok:
            want = {"path": "a path (str or os.PathLike)", "bool": "True or False",
                    "int": "a whole number", "str": "a string", "number": "a number or a string"}[base]
            raise UnusableInput(f"{call}: {name} must be {want}{' or None' if optional else ''}, "
                                f"not {type(value).__name__}")


def _unexpected(call: str, exc: BaseException) -> DpbundleError:
    """An exception that is not dpbundle's, as one of the hierarchy with a clear message."""
    if isinstance(exc, MemoryError):
        return ReleaseFailed(f"{call}: not enough memory ({type(exc).__name__}); ask for less "
                             "(fewer rows, a smaller sample)")
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return DpbundleError(2, f"{call}: {where}{exc.strerror or exc}")
    if isinstance(exc, (TypeError, ValueError)):
        return UnusableInput(f"{call}: {exc}")
    return ReleaseFailed(f"{call}: internal error ({type(exc).__name__}: {exc})")


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
    opened (:class:`dpbundle.audit.api.ReleasedBundle`). Raises :class:`UnusableInput` or
    :class:`Refused` (nothing spent), :class:`ReleaseFailed` / :class:`BundleNotWritten` (spent,
    nothing released; the message says what is kept) or :class:`ReleaseInterrupted`."""
    _check_args("release()", spec=(spec, "path?"), data=(data, "path?"), out=(out, "path"),
                example=(example, "str?"), key=(key, "path?"), passphrase_file=(passphrase_file, "path?"),
                transcript=(transcript, "path?"), ledger=(ledger, "path?"), configs=(configs, "path?"),
                allow_additional_spend=(allow_additional_spend, "bool"), force=(force, "bool"),
                zip=(zip, "bool"), stop_probability=(stop_probability, "number?"),
                allow_other_spec=(allow_other_spec, "bool"), allow_other_size=(allow_other_size, "bool"),
                resume=(resume, "path?"), example_rows=(example_rows, "int?"),
                preregistration=(preregistration, "path?"), beacon=(beacon, "str?"),
                preregistration_secret=(preregistration_secret, "path?"), echo=(echo, "bool"))
    from dpbundle.release import pipeline as release_cmd

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
    try:
        from dpbundle.audit import open_bundle

        return open_bundle(out)
    except Exception as exc:  # noqa: BLE001 - the bundle is written: say so
        raise DpbundleError(1, f"the bundle {out} was written and the ledger records it as released, "
                               f"but it cannot be opened here ({type(exc).__name__}: {exc})") from None


def sweep(spec: PathLike, data: PathLike, *, out: PathLike, **options: Any):
    """``dpbundle sweep``: :func:`dpbundle.release.sweep.run.run_sweep` (options: reps, sample,
    seed, workers, scheduler, min_acceptance, max_reps, batch, configs, allow_other_spec,
    report, progress, ...); returns its SweepResult. :class:`UnusableInput` (code 2) for
    unusable input or an unknown option, :class:`DpbundleInterrupt` on Ctrl-C."""
    import inspect

    from dpbundle.release.sweep.run import SweepError, run_sweep

    _check_args("sweep()", spec=(spec, "path"), data=(data, "path"), out=(out, "path"))
    known = set(inspect.signature(run_sweep).parameters) - {"spec_path", "data_path", "out"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise UnusableInput(f"sweep(): unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    options.setdefault("progress", False)
    try:
        return run_sweep(spec, data, out, **options)
    except SweepError as exc:
        raise UnusableInput(str(exc), code=getattr(exc, "exit_code", 2)) from None
    except DPBUNDLE_ERRORS:
        raise
    except KeyboardInterrupt:
        raise DpbundleInterrupt(f"sweep interrupted: the finished runs are saved in {out}; run the "
                                "same call to resume") from None
    except Exception as exc:  # noqa: BLE001
        raise _unexpected("sweep()", exc) from None


def audit(bundle: PathLike, pubkey: PathLike | str | None = None, *, spec: PathLike | str | None = None,
          transcript: PathLike | None = None, data: PathLike | None = None,
          preregistration: PathLike | None = None, beacon: str | None = None,
          ledger: PathLike | None = None):
    """``dpbundle audit``: the report (``.verdict``, ``.checks``, ``.to_json()``);
    :class:`UnusableInput` (code 2) for unusable input. ``preregistration`` (the record you
    archived) and ``beacon`` (the value you fetched) pin a pre-registered bundle; ``ledger``
    (inside the enclave) checks the bundle's spend count."""
    _check_args("audit()", bundle=(bundle, "path"), pubkey=(pubkey, "path?"), spec=(spec, "path?"),
                transcript=(transcript, "path?"), data=(data, "path?"),
                preregistration=(preregistration, "path?"), ledger=(ledger, "path?"))
    if beacon is not None and not isinstance(beacon, str):
        raise UnusableInput(f"audit(): beacon must be a string, got {type(beacon).__name__}")
    from dpbundle.audit.runner import AuditInputError, run_audit

    try:
        return run_audit(bundle, pubkey=pubkey, transcript=transcript, data=data, spec=spec,
                         preregistration=preregistration, beacon=beacon, ledger=ledger)
    except AuditInputError as exc:
        raise UnusableInput(str(exc)) from None
    except DPBUNDLE_ERRORS:
        raise
    except KeyboardInterrupt:
        raise DpbundleInterrupt("audit interrupted: no report was written") from None
    except Exception as exc:  # noqa: BLE001
        raise _unexpected("audit()", exc) from None
