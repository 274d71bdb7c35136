"""What the user asked for: :class:`ReleaseRequest`, built by ``dpbundle release`` and by
:func:`dpbundle.release.api.release`, and the limits of its options."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from dpbundle.release.spec.model import Spec

__all__ = ["ReleaseRequest", "in_memory", "EXAMPLES", "MAX_OUT_NAME", "MIN_EXAMPLE_ROWS", "MAX_EXAMPLE_ROWS",
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


@dataclass(frozen=True)
class ReleaseRequest:
    """The arguments and options of ``dpbundle release``, as given (nothing is checked here;
    :func:`dpbundle.release.pipeline.run_release` checks them). ``spec`` and ``data`` are
    SPEC and DATA; ``make_zip`` is ``--zip``; every other field is the option of that name.

    From Python (not the command line), ``spec`` may also be held in memory, a dict (validated
    as a spec file's document) or a validated :class:`~dpbundle.release.spec.model.Spec`, and
    ``data`` a :class:`pandas.DataFrame` (read as the CSV file it would be written to; see
    :func:`dpbundle.release.data.prepare.prepare_frame`)."""

    out: Path
    spec: Optional[Union[Path, dict, "Spec"]] = None
    data: Optional[Union[Path, "pd.DataFrame"]] = None
    example: Optional[str] = None
    example_rows: Optional[int] = None
    key: Optional[Path] = None
    passphrase_file: Optional[Path] = None
    transcript: Optional[Path] = None
    ledger: Optional[Path] = None
    configs: Optional[Path] = None
    allow_additional_spend: bool = False
    force: bool = False
    make_zip: bool = False
    stop_probability: Optional[str] = None
    allow_other_spec: bool = False
    allow_other_size: bool = False
    resume: Optional[Path] = None
    preregistration: Optional[Path] = None
    beacon: Optional[str] = None
    preregistration_secret: Optional[Path] = None

    @property
    def is_example(self) -> bool:
        """A release of a built-in example (``--example``): shorter names in messages."""
        return self.example is not None


def in_memory(value: Any) -> bool:
    """True when SPEC or DATA is held in memory (a dict, Spec or DataFrame), not a path."""
    return value is not None and not isinstance(value, (str, os.PathLike))
