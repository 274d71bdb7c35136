"""A whole-file advisory lock that works on POSIX (fcntl.flock) and Windows (msvcrt.locking on
the first byte). Windows has no shared locks: a shared request takes the exclusive lock there."""
from __future__ import annotations

import os

try:  # POSIX
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    _fcntl = None
    import msvcrt as _msvcrt

__all__ = ["lock", "unlock"]


def lock(fd: int, exclusive: bool = True) -> None:
    """Block until ``fd`` holds the lock."""
    if _fcntl is not None:
        _fcntl.flock(fd, _fcntl.LOCK_EX if exclusive else _fcntl.LOCK_SH)
        return
    pos = os.lseek(fd, 0, os.SEEK_CUR)  # pragma: no cover - Windows
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        while True:
            try:
                _msvcrt.locking(fd, _msvcrt.LK_LOCK, 1)  # retries for ~10 s, then raises
                break
            except OSError:
                continue
    finally:
        os.lseek(fd, pos, os.SEEK_SET)


def unlock(fd: int) -> None:
    if _fcntl is not None:
        _fcntl.flock(fd, _fcntl.LOCK_UN)
        return
    pos = os.lseek(fd, 0, os.SEEK_CUR)  # pragma: no cover - Windows
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        _msvcrt.locking(fd, _msvcrt.LK_UNLCK, 1)
    finally:
        os.lseek(fd, pos, os.SEEK_SET)
