"""Reading and replacing the files named on release-side command lines (release, preregister,
sample, ledger, spec): devices, FIFOs and oversized files are refused before they are read.

The audit has its own reader (``audit/safe_read.py``) and imports nothing from ``release/``;
this module follows the same rules without sharing code:

* a path is checked with ``os.stat`` to be a regular file of at most ``limit`` bytes *before* it
  is opened (``/dev/zero`` never ends, a FIFO blocks until a writer appears, ``/dev/stdin`` may
  be either);
* :func:`read_bounded` opens with ``O_NONBLOCK`` (a FIFO swapped in after the check cannot hang)
  and checks the open descriptor again, then reads at most ``limit + 1`` bytes;
* :func:`replace_problem` says whether an existing output may be replaced (``--force``): only a
  regular file (never a device node, a FIFO, a socket, a directory or a symbolic link);
* :func:`text_problem` says whether a string can be written as UTF-8 (a command-line argument
  with undecodable bytes carries lone surrogates, which every later ``encode`` refuses).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["fsync_dir", "InputFileError", "KEY_BYTES", "PASSPHRASE_BYTES", "LIST_BYTES", "LEDGER_BYTES",
           "kind_of", "regular_file_problem", "require_regular_file", "read_bounded",
           "open_regular", "replace_problem", "text_problem"]

KEY_BYTES = 64 * 1024            # a PEM key (Ed25519: a few hundred bytes)
PASSPHRASE_BYTES = 64 * 1024     # a passphrase file
LIST_BYTES = 16 * 1024 * 1024    # a narrowed configuration list (sweep/narrowed.yaml)
LEDGER_BYTES = 1 << 30           # the budget ledger (a million spends is ~400 MB)


class InputFileError(ValueError):
    """A file named on the command line cannot be used (the message names it and the rule)."""


def kind_of(mode: int) -> str:
    """A short name of a file type that is not a regular file."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _problem(path, what: str, st: os.stat_result, limit: int | None) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return (f"{path}: the {what} must be a regular file, and this is {kind_of(st.st_mode)} "
                "(devices, FIFOs and directories are refused: they may never end or block)")
    if limit is not None and st.st_size > limit:
        return f"{path}: the {what} is larger than the limit of {limit:,} bytes"
    return None


def regular_file_problem(path: str | os.PathLike, what: str, limit: int | None = None) -> str | None:
    """None when ``path`` is a regular file (a symbolic link to one is followed) of at most
    ``limit`` bytes; else why not, naming the file. A missing file is a problem too."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return f"{path}: cannot read the {what} ({exc.strerror or exc})"
    return _problem(path, what, st, limit)


def require_regular_file(path: str | os.PathLike, what: str, limit: int | None = None) -> None:
    """:class:`InputFileError` unless :func:`regular_file_problem` is None."""
    problem = regular_file_problem(path, what, limit)
    if problem:
        raise InputFileError(problem)


def open_regular(path: str | os.PathLike, what: str, limit: int | None = None, *,
                 follow: bool = True) -> int:
    """A read-only descriptor of ``path`` after checking, before and after opening, that it is a
    regular file of at most ``limit`` bytes (``follow=False``: a symbolic link is refused)."""
    if follow:
        require_regular_file(path, what, limit)
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0) | (0 if follow else getattr(os, "O_NOFOLLOW", 0)))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow and os.path.islink(path):
            raise InputFileError(f"{path}: the {what} is a symbolic link; give the file itself") from None
        raise InputFileError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        problem = _problem(path, what, os.fstat(fd), limit)
        if problem:
            raise InputFileError(problem)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bounded(path: str | os.PathLike, what: str, limit: int, *, follow: bool = True) -> bytes:
    """All bytes of a small regular file, reading at most ``limit + 1`` whatever its size claims
    (a file that grows while it is read is refused too)."""
    fd = open_regular(path, what, limit, follow=follow)
    chunks, total = [], 0
    try:
        while total <= limit:
            block = os.read(fd, min(1 << 20, limit + 1 - total))
            if not block:
                break
            chunks.append(block)
            total += len(block)
    except OSError as exc:
        raise InputFileError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    if total > limit:
        raise InputFileError(f"{path}: the {what} is more than the limit of {limit:,} bytes")
    return b"".join(chunks)


def replace_problem(path: str | os.PathLike, what: str) -> str | None:
    """None when ``path`` does not exist or is a regular file (``--force`` may replace it); else
    why it must not be replaced: a device node, FIFO, socket, directory or symbolic link is never
    replaced (as root, replacing ``/dev/null`` or ``/dev/full`` would break the system)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: cannot check {what} ({exc.strerror or exc})"
    if stat.S_ISREG(st.st_mode):
        return None
    return (f"{path}: exists and is {kind_of(st.st_mode)}; dpbundle replaces only a regular file "
            f"(for {what}), even with --force")


def text_problem(value: object, what: str) -> str | None:
    """None when ``value`` (a str or a path) can be written as UTF-8 text; else why not. A
    command-line argument with bytes that are not UTF-8 holds lone surrogates."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else value
    if not isinstance(text, str):
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"{what} is not valid UTF-8 text (an undecodable byte at character {exc.start + 1}); "
                "dpbundle records and publishes its inputs as UTF-8")
    if "\x00" in text:
        return f"{what} contains a NUL character"
    return None


def path_text(path: Path) -> str:
    """A path as printable text (undecodable bytes shown as escapes)."""
    from dpbundle.release.errors import literal

    return literal(os.fspath(path))


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a directory's entries durable (a file just created or renamed in it); a no-op where
    directories cannot be opened (Windows) or synced."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
