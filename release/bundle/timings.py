"""Opt-in stage timings of a release, for benchmarks: ``DPBUNDLE_TIMINGS=1``.

With the variable set to 1, each stage of ``dpbundle release`` prints one line to stderr when it
ends: ``dpbundle timing: <stage> <seconds> s`` (benchmarks/bench_release.py reads them). Without
it nothing is measured or printed.

The durations are PRIVATE: how long the private selection took is a proxy for its number of
attempts, which dpbundle never publishes. They are never written to a bundle, a log or a report,
and are printed only when asked for; set the variable only where the console is not published
(a benchmark on example data), never for a release whose console output is shown.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

__all__ = ["ENV", "enabled", "stage", "note"]

ENV = "DPBUNDLE_TIMINGS"


def enabled() -> bool:
    """True when ``DPBUNDLE_TIMINGS=1``."""
    return os.environ.get(ENV, "").strip() == "1"


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
