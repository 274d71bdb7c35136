"""What the user asked for: :class:`ReleaseRequest`, built by ``dpbundle release`` and by
:func:`dpbundle.release.api.release`, and the limits of its options."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dpbundle.release.spec.model import Spec

__all__ = ["ReleaseRequest", "ReleaseOptions", "in_memory", "EXAMPLES", "MAX_OUT_NAME", "MIN_EXAMPLE_ROWS", "MAX_EXAMPLE_ROWS",
           "TEXT_OPTIONS"]

# name -> (spec, narrowed configuration list from a public-data sweep; see docs/sweep-births-nvss160k.md)
EXAMPLES = {"births": ("births-recommended.yaml", "births-recommended-narrowed-nvss160k.yaml"),
            # see docs/sweep-persons.md (swept on a simulated copy with another seed)
            "persons": ("persons-recommended.yaml", "persons-recommended-narrowed.yaml")}

MAX_OUT_NAME = 215   # + the 40 bytes the hidden temporary names add: at most 255
MIN_EXAMPLE_ROWS = 1_000
MAX_EXAMPLE_ROWS = 1_000_000   # a simulated registry of 1e6 rows takes about 2.5 GB to make

#: The path and text options checked as UTF-8 before anything is read, in this order.
TEXT_OPTIONS = ("spec", "data", "out", "example", "key", "passphrase_file", "transcript", "ledger",
                "configs", "resume", "preregistration", "beacon", "preregistration_secret",
                "stop_probability")


def _documented(cls: type) -> type:
    """``cls`` with a "Fields" section in its docstring, from each field's ``metadata["doc"]``
    (so that ``help()`` lists every option with its default)."""
    lines = [f"    ``{f.name}`` (default {f.default!r}): {f.metadata['doc']}"
             for f in dataclasses.fields(cls) if "doc" in f.metadata]
    cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n\n    Fields:\n\n" + "\n".join(lines) + "\n"
    return cls


def _opt(default: Any, doc: str) -> Any:
    return dataclasses.field(default=default, metadata={"doc": doc})


@_documented
@dataclass(frozen=True, kw_only=True)
class ReleaseOptions:
    """The options of a release (``dpbundle release --help``), every one with its default: the
    option part of a :class:`ReleaseRequest` (which adds OUT, SPEC and DATA). From Python:
    ``release(spec, data, out=..., options=ReleaseOptions(key=..., ledger=...))``."""

    example: Optional[str] = _opt(None, "release a built-in example (births, persons) on simulated data "
                                        "instead of SPEC and DATA")
    example_rows: Optional[int] = _opt(None, "rows of the simulated example registry")
    key: Optional[Path] = _opt(None, "the steward's Ed25519 private key that signs the bundle")
    passphrase_file: Optional[Path] = _opt(None, "a file holding the private key's passphrase")
    transcript: Optional[Path] = _opt(None, "where the PRIVATE randomness transcript is written "
                                            "(default: in the private directory, outside the bundle)")
    ledger: Optional[Path] = _opt(None, "the privacy-budget ledger (default: the private directory's)")
    configs: Optional[Path] = _opt(None, "a narrowed configuration list from a sweep on public data")
    allow_additional_spend: bool = _opt(False, "spend again on data and a spec the ledger already has")
    force: bool = _opt(False, "replace an existing bundle at OUT")
    make_zip: bool = _opt(False, "also write OUT.zip (``zip=True`` as a keyword of release())")
    stop_probability: Optional[str] = _opt(None, "the stop draw's probability after each failed attempt")
    allow_other_spec: bool = _opt(False, "accept a configuration list written for another spec")
    allow_other_size: bool = _opt(False, "accept a configuration list swept on data of another size")
    resume: Optional[Path] = _opt(None, "a kept result to write the bundle from (spends nothing)")
    preregistration: Optional[Path] = _opt(None, "the published pre-registration record")
    beacon: Optional[str] = _opt(None, "the public beacon value that binds a pre-registered release's seeds")
    preregistration_secret: Optional[Path] = _opt(None, "the pre-registration's secret file")
    scheduler: Optional[str] = _opt(None, "a Dask scheduler address: the parts of DATA (a directory of CSV "
                                          "files) are read and counted on the cluster's workers")


@dataclass(frozen=True)
class ReleaseRequest(ReleaseOptions):
    """The arguments and options of ``dpbundle release``, as given (nothing is checked here;
    :func:`dpbundle.release.pipeline.run_release` checks them). ``spec`` and ``data`` are
    SPEC and DATA; ``make_zip`` is ``--zip``; every other field is the option of that name (the
    options are the fields of :class:`ReleaseOptions`, keyword-only; :meth:`of` builds a request
    from the inputs and a ReleaseOptions, :attr:`options` gives them back).

    From Python (not the command line), ``spec`` may also be held in memory, a dict (validated
    as a spec file's document) or a validated :class:`~dpbundle.release.spec.model.Spec`, and
    ``data`` a :class:`pandas.DataFrame` (read as the CSV file it would be written to; see
    :func:`dpbundle.release.data.prepare.prepare_frame`)."""

    out: Path
    spec: Optional[Union[Path, dict, "Spec"]] = None
    data: Optional[Union[Path, "pd.DataFrame"]] = None

    @classmethod
    def of(cls, out: Path, spec: Any = None, data: Any = None,
           options: Optional[ReleaseOptions] = None) -> "ReleaseRequest":
        """The request of OUT, SPEC, DATA and ``options`` (default: every option's default)."""
        options = options or ReleaseOptions()
        return cls(out, spec, data, **{f.name: getattr(options, f.name) for f in dataclasses.fields(ReleaseOptions)})

    @property
    def options(self) -> ReleaseOptions:
        """The option part of the request."""
        return ReleaseOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(ReleaseOptions)})

    @property
    def is_example(self) -> bool:
        """A release of a built-in example (``--example``): shorter names in messages."""
        return self.example is not None


def in_memory(value: Any) -> bool:
    """True when SPEC or DATA is held in memory (a dict, Spec or DataFrame), not a path."""
    return value is not None and not isinstance(value, (str, os.PathLike))
