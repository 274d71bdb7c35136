"""Opt-in stage timings of a release, for benchmarks: ``DPBUNDLE_TIMINGS=1``.

With the variable set to 1, each stage of ``dpbundle release`` prints one line to stderr when it
ends: ``dpbundle timing: <stage> <seconds> s`` (benchmarks/bench_release.py reads them). Without
it nothing is measured or printed.

The durations are PRIVATE: how long the private selection took is a proxy for its number of
attempts, and how long reading the data took, for the number of records; dpbundle publishes
neither. They are never written to a bundle, a log or a report, are printed only when asked for,
and only for a release of a built-in example (``--example``; :func:`allow`): on real data the
variable is ignored, with a warning.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

__all__ = ["ENV", "allow", "enabled", "stage", "note"]

ENV = "DPBUNDLE_TIMINGS"
_allowed = True


def allow(example: bool) -> None:
    """Honour the variable only for a release of a built-in example: every stage's duration of a
    release on real data is private (the selection's reveals its number of attempts, reading the
    data the number of records), so for one the variable is ignored, with a warning on stderr."""
    global _allowed
    _allowed = example
    if not example and os.environ.get(ENV, "").strip() == "1":
        print(f"warning: {ENV} is ignored: stage timings are printed only for a release of a built-in "
              "example (on real data the durations are private)", file=sys.stderr, flush=True)


def enabled() -> bool:
    """True when ``DPBUNDLE_TIMINGS=1`` and the release is of a built-in example."""
    return _allowed and os.environ.get(ENV, "").strip() == "1"


def note(name: str, seconds: float | None) -> None:
    """Print one timing line (when enabled and ``seconds`` is known)."""
    if seconds is not None and enabled():
        print(f"dpbundle timing: {name} {seconds:.3f} s", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the block (when enabled); the line is printed even if the block raises."""
    if not enabled():
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        note(name, time.perf_counter() - start)
