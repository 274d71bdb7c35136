"""The ledger's lock: a thin layer over the `filelock` package (PyPI), which replaced the
hand-written flock / msvcrt lock (its Windows branch could retry forever).

``locked(path)`` holds ``filelock.FileLock`` on the companion file ``<path>.lock`` (created with
mode 0600 beside the file it guards, never removed on Unix so that waiters share one inode) for
the duration of a ``with`` block: fcntl.flock on POSIX, LockFileEx on Windows, both released by
the operating system when the holder dies. The soft (marker-file) fallback that filelock offers
on file systems without flock is switched off: a marker left by a killed process would block
every later run, so such a file system raises, as it did before.

Waiting is bounded: a lock not obtained within ``timeout`` seconds (default
:data:`DEFAULT_TIMEOUT`) raises :class:`LockTimeout`, naming the lock file, instead of hanging.
The ledger holds the lock for one read, or one read + append + fsync (milliseconds), so a minute
of waiting means a stuck process or a broken (network) file system, not a busy ledger.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import filelock as _filelock  # the PyPI package (absolute import), not this module

__all__ = ["DEFAULT_TIMEOUT", "LOCK_MODE", "LockTimeout", "lock_path", "locked"]

#: Seconds to wait for the lock before :class:`LockTimeout`.
DEFAULT_TIMEOUT = 60.0

#: Mode of a new lock file (the ledger itself is 0600 in a 0700 directory).
LOCK_MODE = 0o600


class LockTimeout(TimeoutError):
    """The lock was not obtained within the timeout (another process holds it)."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = Path(path)
        self.timeout = float(timeout)
        super().__init__(
            f"{self.path}: not locked within {self.timeout:g} s; another process holds the lock "
            "(a dpbundle command still running, or a stuck one). Try again when it has ended.")


def lock_path(path: str | Path) -> Path:
    """The companion lock file of ``path``: ``<path>.lock`` in the same directory."""
    p = Path(path)
    return p.with_name(p.name + ".lock")


@contextmanager
def locked(path: str | Path, timeout: float = DEFAULT_TIMEOUT) -> Iterator[Path]:
    """Hold the exclusive lock of ``path`` (its ``<path>.lock`` file) inside the block; yields
    the lock file's path. ``timeout`` > 0 seconds; :class:`LockTimeout` when it runs out. The
    directory of ``path`` must exist (the caller creates it with the mode it wants)."""
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError(f"lock timeout must be > 0 seconds, got {timeout!r}")
    lp = lock_path(path)
    lock = _filelock.FileLock(str(lp), timeout=timeout, mode=LOCK_MODE, fallback_to_soft=False)
    try:
        lock.acquire()
    except _filelock.Timeout:
        raise LockTimeout(lp, timeout) from None
    try:
        yield lp
    finally:
        lock.release()
