"""Reading the files named on the audit's command line (--pubkey, --spec, --transcript, --data).

These are the user's own paths, but they may still be a device (``/dev/zero`` never ends), a
FIFO (opening it blocks until a writer appears) or far too large. Every path is checked with
``os.stat`` to be a regular file *before* it is opened, opened with ``O_NONBLOCK`` (so that a
FIFO swapped in after the check cannot hang the audit) and checked again with ``os.fstat`` on
the open descriptor; small files are read with a byte limit (``read(limit + 1)``), never
``read()`` to the end.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["InputFileError", "require_regular_file", "open_regular_file", "read_small_file"]


class InputFileError(Exception):
    """A file named on the command line cannot be used (the message names the file and the rule)."""


def _kind(mode: int) -> str:
    """A short name for a non-regular file type."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def require_regular_file(path: str | os.PathLike, what: str, limit: int | None = None) -> os.stat_result:
    """``os.stat`` of ``path``; InputFileError unless it is a regular file (of at most ``limit`` bytes)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise InputFileError(f"{path}: cannot read the {what} ({e.strerror})") from None
    _check(path, what, st, limit)
    return st


def _check(path, what: str, st: os.stat_result, limit: int | None) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(f"{path}: the {what} must be a regular file, and this is {_kind(st.st_mode)} "
                             f"(rule: devices, FIFOs and directories are refused; they may never end or "
                             f"block the audit)")
    if limit is not None and st.st_size > limit:
        # (its size is not shown: the size of a private file says something about its content)
        raise InputFileError(f"{path}: the {what} is larger than the limit of {limit:,} bytes")


def open_regular_file(path: str | os.PathLike, what: str, limit: int | None = None) -> BinaryIO:
    """Open ``path`` for binary reading after checking (before and after opening) that it is a
    regular file of at most ``limit`` bytes. A symbolic link on the command line is followed
    (it is the user's choice); what it points to must be a regular file."""
    require_regular_file(path, what, limit)
    nonblock = getattr(os, "O_NONBLOCK", 0)
    flags = os.O_RDONLY | nonblock | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(Path(path), flags)
    except OSError as e:
        raise InputFileError(f"{path}: cannot read the {what} ({e.strerror})") from None
    try:
        _check(path, what, os.fstat(fd), limit)     # the file opened is the file checked
        if nonblock:
            os.set_blocking(fd, True)               # a regular file: ordinary reads from here on
    except OSError as e:
        os.close(fd)
        raise InputFileError(f"{path}: cannot read the {what} ({e.strerror})") from None
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_small_file(path: str | os.PathLike, what: str, limit: int) -> bytes:
    """All bytes of a small regular file, reading at most ``limit + 1`` bytes whatever its size
    claims to be (a file that grows while it is read is refused too)."""
    with open_regular_file(path, what, limit) as f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise InputFileError(f"{path}: cannot read the {what} ({e.strerror})") from None
    if len(data) > limit:
        raise InputFileError(f"{path}: the {what} is more than the limit of {limit:,} bytes")
    return data
