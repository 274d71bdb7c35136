"""dpbundle from Python: release, sweep and audit with the same options as the command line.

    >>> from dpbundle.release.api import release, sweep, audit
    >>> b = release(example="births", out="births-bundle")          # a ReleasedBundle
    >>> b.data.head(); b.metrics; b.budget["total_epsilon"]
    >>> audit("births-bundle", pubkey="births-bundle.demo-key.pub").verdict
    >>> s = sweep("examples/births.yaml", "public.csv.gz", out="sweep", sample=8, reps=3)
    >>> copies("persons-bundle", 10, out="persons-copies")           # publish: tables; intervals

``release`` is the release itself: ``dpbundle release`` is a thin layer over the same function
(``pipeline.run_release``) that prints the exception's message and exits with its code. The
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
import logging
import os
import sys
from pathlib import Path
from typing import Any, Iterator

__all__ = ["ReleaseOptions", "SweepOptions", "DpbundleError", "CommandError", "UnusableInput", "Refused", "ReleaseFailed",
           "BundleNotWritten", "DpbundleInterrupt", "ReleaseInterrupted", "DPBUNDLE_ERRORS",
           "DpbundleWarning", "release", "sweep", "audit", "copies"]

PathLike = str | os.PathLike

# The exception hierarchy lives in release/errors.py (no heavy imports); see its docstring.
from dpbundle.release.errors import (DPBUNDLE_ERRORS, BundleNotWritten, CommandError, DpbundleError,  # noqa: E402
                     DpbundleInterrupt, Refused, ReleaseFailed, ReleaseInterrupted, UnusableInput)


def __getattr__(name: str) -> Any:
    """ReleaseOptions and SweepOptions, imported on first use (importing this module stays cheap)."""
    if name == "ReleaseOptions":
        from dpbundle.release.pipeline.request import ReleaseOptions
        return ReleaseOptions
    if name == "SweepOptions":
        from dpbundle.release.sweep.request import SweepOptions
        return SweepOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The library logs to "dpbundle" (children "dpbundle.release", ...) and prints nothing by default.
if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger("dpbundle").handlers):
    logging.getLogger("dpbundle").addHandler(logging.NullHandler())


def _check_args(call: str, **kinds: tuple[Any, str]) -> None:
    """UnusableInput (code 2) naming the argument when one has the wrong type: ``kinds`` maps a
    name to (value, kind), kind one of "path" (str or os.PathLike), "bool", "int" (not a
    bool), "str", "number" (str, int or float), "spec" (a path, a dict or a Spec), "table" (a
    path or a pandas DataFrame); a trailing "?" also allows None."""
    for name, (value, kind) in kinds.items():
        optional = kind.endswith("?")
        base = kind.rstrip("?")
        if value is None and optional:
            continue
        is_path = isinstance(value, (str, os.PathLike))
        ok = {"path": is_path,
              "bool": isinstance(value, bool),
              "int": isinstance(value, int) and not isinstance(value, bool),
              "str": isinstance(value, str),
              "number": isinstance(value, (str, int, float)) and not isinstance(value, bool),
              "spec": is_path or isinstance(value, dict) or _is_spec(value),
              "table": is_path or _is_frame(value)}[base]
        if not ok:
            want = {"path": "a path (str or os.PathLike)", "bool": "True or False",
                    "int": "a whole number", "str": "a string", "number": "a number or a string",
                    "spec": "a path (str or os.PathLike), a dict or a Spec",
                    "table": "a path (str or os.PathLike) or a pandas DataFrame"}[base]
            raise UnusableInput(f"{call}: {name} must be {want}{' or None' if optional else ''}, "
                                f"not {type(value).__name__}")


def _is_spec(value: Any) -> bool:
    """A validated :class:`dpbundle.release.spec.model.Spec`."""
    from dpbundle.release.spec.model import Spec

    return isinstance(value, Spec)


def _is_frame(value: Any) -> bool:
    """A pandas DataFrame (pandas is not imported for this: no DataFrame exists without it)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.DataFrame)


def _in_memory(value: Any) -> bool:
    return value is not None and not isinstance(value, (str, os.PathLike))


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


def _merge_options(call: str, options: Any, cls_name: str, given: dict, rename: dict | None = None) -> dict:
    """``given`` (keyword options) and the fields of ``options`` (a ReleaseOptions or
    SweepOptions, or None) that differ from their defaults, as one dict of keywords (``rename``:
    a field's keyword name); UnusableInput when an option is given both ways."""
    import dataclasses

    if options is None:
        return dict(given)
    if type(options).__name__ != cls_name or not dataclasses.is_dataclass(options):
        raise UnusableInput(f"{call}: options must be a {cls_name}, not {type(options).__name__}")
    rename = rename or {}
    merged = {}
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        if value is not f.default and value != f.default:
            merged[rename.get(f.name, f.name)] = value
    both = sorted(set(merged) & set(given))
    if both:
        raise UnusableInput(f"{call}: {', '.join(both)} given both in options and as a keyword argument")
    return merged | given


from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:
    import pandas as pd

    from dpbundle.release.pipeline.request import ReleaseOptions, ReleaseRequest
    from dpbundle.release.spec.model import Spec
    from dpbundle.audit.api import ReleasedBundle
    from dpbundle.audit.report import AuditReport
    from dpbundle.release.sweep.request import SweepOptions, SweepResult

#: release()'s keywords besides SPEC and DATA, in the order their types are checked, with their
#: kinds (see _check_args); each is the ReleaseRequest field of that name, ``zip`` is ``make_zip``.
_RELEASE_OPTIONS = {"out": "path", "example": "str?", "key": "path?", "passphrase_file": "path?",
                    "transcript": "path?", "ledger": "path?", "configs": "path?",
                    "allow_additional_spend": "bool", "force": "bool", "zip": "bool",
                    "stop_probability": "number?", "allow_other_spec": "bool", "allow_other_size": "bool",
                    "resume": "path?", "example_rows": "int?", "preregistration": "path?", "beacon": "str?",
                    "preregistration_secret": "path?", "scheduler": "str?"}


def release(spec: "PathLike | dict | Spec | None" = None, data: "PathLike | pd.DataFrame | None" = None, *,
            request: "ReleaseRequest | None" = None, options: "ReleaseOptions | None" = None,
            echo: bool = False, **kwargs: Any) -> "ReleasedBundle":
    """``dpbundle release`` (see its ``--help`` for every option); returns the written bundle,
    opened (:class:`dpbundle.audit.api.ReleasedBundle`). Raises :class:`UnusableInput` or
    :class:`Refused` (nothing spent), :class:`ReleaseFailed` / :class:`BundleNotWritten` (spent,
    nothing released; the message says what is kept) or :class:`ReleaseInterrupted`.

    SPEC is a spec file, a dict (validated exactly as a spec file's document, named
    ``<spec dict>`` in messages) or a validated :class:`dpbundle.release.spec.model.Spec`. DATA
    is a CSV file or a :class:`pandas.DataFrame`, written in memory as the CSV file it would be
    (the spec's input columns in the spec's order, values as ``DataFrame.to_csv`` writes them,
    NaN/None as empty cells) and read with the same checks; its problems name the DataFrame's
    row index ("row index 17") instead of a file line. The ledger keys on the prepared table's
    canonical fingerprint as for a file; the data's "file SHA-256" is the SHA-256 of the
    serialised CSV bytes (the same as a file's when the file holds exactly those bytes).

    Give either ``request`` (a :class:`dpbundle.release.pipeline.ReleaseRequest`) or SPEC, DATA
    and the options as keywords, named as the request's fields (``out`` required; ``zip`` for
    ``make_zip``): ``release(spec, data, out=..., key=..., ledger=..., zip=True)``. An unknown
    keyword is a TypeError, as for any call. ``options`` (a :class:`ReleaseOptions`) gives the
    options as one object; keywords may add others, but an option given both ways (set in
    ``options`` to other than its default, and as a keyword) is an UnusableInput.

    Quiet unless ``echo=True``: nothing is written to stdout or stderr (nor shown in a Jupyter
    cell); the progress output is logged at INFO and the warnings at WARNING to the
    ``dpbundle.release`` logger (which shows nothing unless logging is configured). What the
    user must see, the release's warnings (the PRIVATE transcript's location first among them),
    is also issued once each through Python's :mod:`warnings` as a :class:`DpbundleWarning`
    (filter them with ``warnings.simplefilter("ignore", DpbundleWarning)``). The returned
    bundle also has ``transcript_path`` (the PRIVATE transcript's path: keep it inside the
    enclave) and ``warnings`` (the warning messages, in order)."""
    from dpbundle.release.pipeline import output, run_release

    if request is not None:
        if options is not None:
            raise UnusableInput("release(): give either request or options, not both")
        spec, data, kwargs = _request_options(spec, data, kwargs, request)
    kwargs = _merge_options("release()", options, "ReleaseOptions", kwargs, {"make_zip": "zip"})
    options = kwargs
    request = _release_request(spec, data, options, echo)
    if echo:
        transcript_path, warnings = run_release(request), []
    else:
        with output.logged(on_warning=_issue_now) as route:
            transcript_path = run_release(request)
        warnings = route.warnings
    try:
        from dpbundle.audit import open_bundle

        bundle = open_bundle(options["out"])
        bundle.transcript_path = transcript_path
        bundle.warnings = tuple(warnings)
        return bundle
    except Exception as exc:  # noqa: BLE001 - the bundle is written: say so
        raise DpbundleError(1, f"the bundle {options['out']} was written and the ledger records it as "
                               f"released, but it cannot be opened here ({type(exc).__name__}: {exc})") from None


class DpbundleWarning(UserWarning):
    """A warning of a release run from Python (the command line prints the same text)."""


def _issue_now(message: str) -> None:
    """One warning of a running release, issued at once through Python's ``warnings`` (a run
    that may take long, e.g. with stop probability 0, says so before it starts), attributed to
    the first caller outside dpbundle."""
    import sys
    import warnings as _warnings

    level, frame, caller = 1, sys._getframe(0), 2
    while frame is not None:          # the caller of the outermost release() on the stack
        if frame.f_code is release.__code__:
            caller = level + 1
        frame, level = frame.f_back, level + 1
    from dpbundle.release.pipeline.output import unrouted

    with unrouted():     # the warning's display goes to the real stderr, not back into the run's
        _warnings.warn(DpbundleWarning(message), stacklevel=caller)


def _request_options(spec: Any, data: Any, options: dict, request: Any) -> tuple[Any, Any, dict]:
    """(SPEC, DATA, options) of ``release(request=...)``, checked as keywords would be."""
    from dpbundle.release.pipeline.request import ReleaseRequest

    if spec is not None or data is not None or options:
        raise UnusableInput("release(): give either request or SPEC, DATA and the options, not both")
    if not isinstance(request, ReleaseRequest):
        raise UnusableInput(f"release(): request must be a ReleaseRequest, not {type(request).__name__}")
    return request.spec, request.data, {name: getattr(request, "make_zip" if name == "zip" else name)
                                        for name in _RELEASE_OPTIONS}


def _release_request(spec: Any, data: Any, options: dict, echo: Any) -> "ReleaseRequest":
    """The ReleaseRequest of release()'s arguments: a TypeError for an unknown keyword or a
    missing ``out`` (as for any call), an UnusableInput naming an argument of the wrong type;
    paths as Path, the stop probability as text."""
    from dpbundle.release.pipeline.request import ReleaseRequest

    unknown = [name for name in options if name not in _RELEASE_OPTIONS]
    if unknown:
        raise TypeError(f"release() got an unexpected keyword argument {unknown[0]!r}")
    if "out" not in options:
        raise TypeError("release() missing 1 required keyword-only argument: 'out'")
    values = {name: options.get(name, False if kind == "bool" else None) for name, kind in _RELEASE_OPTIONS.items()}
    _check_args("release()", spec=(spec, "spec?"), data=(data, "table?"),
                **{name: (values[name], kind) for name, kind in _RELEASE_OPTIONS.items()}, echo=(echo, "bool"))
    fields = {("make_zip" if name == "zip" else name):
              (None if value is None else Path(value)) if _RELEASE_OPTIONS[name].startswith("path") else value
              for name, value in values.items()}
    if fields["stop_probability"] is not None:
        fields["stop_probability"] = str(fields["stop_probability"])
    return ReleaseRequest(spec=spec if spec is None or _in_memory(spec) else Path(spec),
                          data=data if data is None or _in_memory(data) else Path(data), **fields)


def sweep(spec: "PathLike | dict | Spec", data: "PathLike | pd.DataFrame", *, out: PathLike,
          options: "SweepOptions | None" = None, echo: bool = False, **kwargs: Any) -> "SweepResult":
    """``dpbundle sweep``: runs a :class:`~dpbundle.release.sweep.request.SweepRequest` with
    :func:`dpbundle.release.sweep.run.run_sweep` (options: the request's fields, e.g. reps,
    sample, seed, workers, scheduler, min_acceptance, max_reps, batch, configs,
    allow_other_spec, report, progress, ...); returns its SweepResult. :class:`UnusableInput`
    (code 2) for unusable input or an unknown option, :class:`DpbundleInterrupt` on Ctrl-C.

    SPEC may be a dict or a Spec and DATA (the public data) a pandas DataFrame, as for
    :func:`release`. The sweep records its inputs by path: an in-memory one is written, for the
    sweep's duration, to a temporary file (``spec-dict.json``; ``DataFrame.csv``, the CSV bytes
    :func:`release` reads, so a resumed sweep of the same DataFrame has the same data SHA-256),
    and that path is what sweep.json names; the DataFrame itself is read, its problems naming
    its row index.

    ``options`` (a :class:`SweepOptions`) gives the options as one object; keywords may add
    others (an option given both ways is an UnusableInput). Quiet unless ``echo=True`` (which
    also shows the progress bar, unless ``progress=False``): the sweep's messages go to the
    ``dpbundle.release`` logger (warnings at WARNING) unless a ``console`` is given."""
    from dpbundle.release.pipeline import output
    from dpbundle.release.sweep.request import SweepError, SweepRequest
    from dpbundle.release.sweep.run import run_sweep

    _check_args("sweep()", spec=(spec, "spec"), data=(data, "table"), out=(out, "path"), echo=(echo, "bool"))
    known = SweepRequest.option_names()
    unknown = sorted(set(kwargs) - set(known))
    if unknown:
        raise UnusableInput(f"sweep(): unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
    options = _merge_options("sweep()", options, "SweepOptions", kwargs)
    options.setdefault("progress", echo)
    if not echo:
        options.setdefault("console", output.log_console(output.LOG, logging.WARNING))
    try:
        with _sweep_inputs(spec, data, options) as (spec_path, data_path):
            return run_sweep(SweepRequest(spec_path, data_path, Path(out), **options))
    except SweepError as exc:
        raise UnusableInput(str(exc), code=getattr(exc, "exit_code", 2)) from None
    except DPBUNDLE_ERRORS:
        raise
    except KeyboardInterrupt:
        raise DpbundleInterrupt(f"sweep interrupted: the finished runs are saved in {out}; run the "
                                "same call to resume") from None
    except Exception as exc:  # noqa: BLE001
        raise _unexpected("sweep()", exc) from None


@contextlib.contextmanager
def _sweep_inputs(spec: Any, data: Any, options: dict) -> Iterator[tuple[Path, Path]]:
    """(spec path, data path) of sweep()'s SPEC and DATA: a path as given; a dict or Spec
    validated and written as JSON, a DataFrame written as its CSV bytes, in a temporary folder
    removed afterwards; a DataFrame's own rows are what the sweep prepares (``options["prepare"]``,
    unless given)."""
    if not (_in_memory(spec) or _in_memory(data)):
        yield Path(spec), Path(data)
        return
    import functools
    import json
    import tempfile

    from dpbundle.release.data.prepare import InputError, frame_csv
    from dpbundle.release.spec.load import SpecError, load_spec, spec_of

    try:
        loaded = spec_of(spec) if _in_memory(spec) else load_spec(spec) if _in_memory(data) else None
        content = frame_csv(data, loaded)[0] if _in_memory(data) else None
    except (SpecError, InputError) as exc:
        raise UnusableInput(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="dpbundle-sweep-inputs-") as tmp:
        spec_path = Path(tmp) / "spec-dict.json" if _in_memory(spec) else Path(spec)
        data_path = Path(tmp) / "DataFrame.csv" if _in_memory(data) else Path(data)
        if _in_memory(spec):
            spec_path.write_text(json.dumps(loaded.document(), ensure_ascii=False), encoding="utf-8")
        if _in_memory(data):
            data_path.write_bytes(content)
            options.setdefault("prepare", functools.partial(_prepare_frame, data))
        yield spec_path, data_path


def _prepare_frame(frame: Any, path: Path, spec: Any) -> Any:
    """The sweep's data preparation of a DataFrame (``path``, its CSV written out, is not read)."""
    from dpbundle.release.data.prepare import prepare_frame

    return prepare_frame(frame, spec)


def audit(bundle: PathLike, pubkey: PathLike | str | None = None, *, spec: PathLike | str | None = None,
          transcript: PathLike | None = None, data: PathLike | None = None,
          preregistration: PathLike | None = None, beacon: str | None = None,
          ledger: PathLike | None = None) -> "AuditReport":
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

    with _api_errors("audit()", AuditInputError, "audit interrupted: no report was written"):
        return run_audit(bundle, pubkey=pubkey, transcript=transcript, data=data, spec=spec,
                         preregistration=preregistration, beacon=beacon, ledger=ledger)


@contextlib.contextmanager
def _api_errors(call: str, unusable: type[Exception], interrupted: str) -> Iterator[None]:
    """``unusable`` -> UnusableInput, an interrupt -> DpbundleInterrupt(``interrupted``), our
    own errors as they are, anything else -> a DpbundleError naming ``call``."""
    try:
        yield
    except unusable as exc:
        raise UnusableInput(str(exc)) from None
    except DPBUNDLE_ERRORS:
        raise
    except KeyboardInterrupt:
        raise DpbundleInterrupt(interrupted) from None
    except Exception as exc:  # noqa: BLE001
        raise _unexpected(call, exc) from None


def copies(bundle: PathLike, m: int, *, out: PathLike, seed: int = 0, raw: bool = False,
           pubkey: PathLike | str | None = None) -> dict:
    """``dpbundle sample BUNDLE --copies M --out OUT``: m synthetic copies that carry the DP noise
    (a bundle made with ``publish: tables``), written into the new folder ``out``; returns
    copies.json's document (each copy's ``file``, ``rows``, ``sha256``). Combine an estimate
    computed on every copy with :func:`dpbundle.mechanisms.copies.combine`
    (docs/reading-the-data.md). :class:`UnusableInput` (code 2) when the request or the bundle
    is unusable; nothing is left behind. ``pubkey``: the publisher's key (file or fingerprint)
    the bundle must be signed with."""
    _check_args("copies()", bundle=(bundle, "path"), out=(out, "path"), pubkey=(pubkey, "path?"))
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise UnusableInput(f"copies(): seed must be an integer, got {type(seed).__name__}")
    from dpbundle.release.bundle.copies import write_copies
    from dpbundle.release.bundle.draws import SampleError

    with _api_errors("copies()", SampleError, "copies interrupted: nothing was written"):
        try:
            return write_copies(Path(bundle), m, seed, Path(out), raw=bool(raw), pubkey=pubkey)
        except OSError as exc:
            raise DpbundleError(f"{out}: cannot write the copies ({exc.strerror or exc}); nothing "
                                "was written") from None
