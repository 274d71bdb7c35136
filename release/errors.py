"""dpbundle's exceptions: one hierarchy for every command and for the Python API.

::

    DpbundleError(Exception)          .code (the CLI's exit code), .message (what it printed)
    ├── UnusableInput      code 2     an input (file, option, argument type) cannot be used;
    │                                 nothing was read past it, nothing spent
    ├── Refused            code 2     a check made before any privacy budget was spent refused
    │                                 the run (ledger, --out, the list, room, renderer, ...)
    └── ReleaseFailed      code 1     the run stopped after its spend was recorded: nothing was
        │                             released (a stop draw, an internal error)
        └── BundleNotWritten  code 2  a candidate passed but its bundle could not be written;
                                      the selected result is kept for ``release --resume``

    DpbundleInterrupt(KeyboardInterrupt)   code 130   Ctrl-C, SIGTERM or SIGHUP, after the
    └── ReleaseInterrupted                            clean-up; .message says what exists

``CommandError`` (the name dpbundle 0.2 documented) is :class:`DpbundleError` itself, and
``CommandError(code, message)`` still constructs one.

Interrupts are deliberately *not* ``DpbundleError`` (nor ``Exception``): a script's ``except
Exception`` (or ``except DpbundleError``) must not swallow Ctrl-C. Catch both with
``except (DpbundleError, DpbundleInterrupt)`` or ``except DPBUNDLE_ERRORS``; both carry
``code`` and ``message``.

Every message states, for a release, what exists on disk and in the ledger; untrusted text in
it (titles, paths, beacon values, ledger statuses) is printed literally (:func:`literal`).
"""
from __future__ import annotations

__all__ = ["DpbundleError", "CommandError", "UnusableInput", "Refused", "ReleaseFailed",
           "BundleNotWritten", "DpbundleInterrupt", "ReleaseInterrupted", "Terminated",
           "DPBUNDLE_ERRORS", "literal", "signal_note"]


class DpbundleError(Exception):
    """A dpbundle command refused or failed. ``code``: the command line's exit code (2 unusable
    input or a refusal before spending, 1 nothing released); ``message``: what it printed.

    ``DpbundleError(message)``, ``DpbundleError(message, code=c)`` or, as ``CommandError`` was
    called before, ``DpbundleError(code, message)``."""

    code: int = 1

    def __init__(self, *args, code: int | None = None, message: str | None = None) -> None:
        if len(args) == 2 and isinstance(args[0], int) and not isinstance(args[0], bool):
            code, message = args            # CommandError(code, message)
        elif len(args) == 1:
            message = args[0]
        elif args:
            raise TypeError(f"{type(self).__name__}(message) or {type(self).__name__}(code, message)")
        message = "" if message is None else str(message)
        super().__init__(message or f"exit code {code if code is not None else self.code}")
        if code is not None:
            self.code = int(code)
        self.message = message

    def __reduce__(self):  # picklable (sweep workers, multiprocessing)
        return (type(self), (self.code, self.message))


#: The name dpbundle 0.2 documented and users catch: the base of the hierarchy.
CommandError = DpbundleError


class UnusableInput(DpbundleError):
    """An input cannot be used: a file that cannot be read or parsed, a device or FIFO where a
    file was expected, an option out of range, an argument of the wrong type. Exit code 2."""

    code = 2


class Refused(DpbundleError):
    """A check made before any privacy budget was spent refused the run (the ledger, an
    existing --out, a list for another spec or size, no room, no renderer). Exit code 2."""

    code = 2


class ReleaseFailed(DpbundleError):
    """The release stopped after its spend was recorded and released nothing (a stop draw, an
    internal error). Exit code 1."""

    code = 1


class BundleNotWritten(ReleaseFailed):
    """A candidate passed but its bundle could not be written (disk full, folder removed, ...):
    the selected result is kept for ``dpbundle release --resume``. Exit code 2."""

    code = 2


class DpbundleInterrupt(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped a command, after its clean-up. ``message`` states what
    exists; exit code 130. A ``KeyboardInterrupt`` (not an ``Exception``), so that ``except
    Exception`` does not swallow it."""

    code = 130

    def __init__(self, message: str = "", code: int = 130) -> None:
        super().__init__(message)
        self.code, self.message = int(code), str(message)

    def __reduce__(self):
        return (type(self), (self.message, self.code))


class ReleaseInterrupted(DpbundleInterrupt):
    """Ctrl-C (or SIGTERM, SIGHUP) during a release, after the clean-up: what exists on disk and
    in the ledger is in ``message``; the CLI exits with ``code`` 130."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, turned into an exception so that the same clean-up runs as for Ctrl-C;
    its argument is the signal's name."""


#: Everything dpbundle raises on purpose: ``except DPBUNDLE_ERRORS as e: print(e.message); sys.exit(e.code)``.
DPBUNDLE_ERRORS = (DpbundleError, DpbundleInterrupt)


def literal(value: object) -> str:
    """``value`` as text that prints as itself: control characters (C0 but newline and tab,
    DEL, C1), which could move the cursor, recolour or clear the terminal, are shown as
    ``\\xNN`` escapes, and text that is not valid Unicode (lone surrogates from undecodable
    bytes) as ``\\udcNN``. Combine with ``rich.text.Text`` so that Rich markup is not parsed."""
    text = str(value)
    if text.isprintable() and text.isascii():
        return text
    out = []
    for ch in text:
        o = ord(ch)
        if ch in "\n\t":
            out.append(ch)
        elif o < 0x20 or 0x7F <= o < 0xA0:
            out.append(f"\\x{o:02x}")
        elif 0xD800 <= o <= 0xDFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


# -- process-wide signal bookkeeping (dpbundle's console entry point) -------------------------
_signal_received: list[str] = []    # names of the signals that stopped the command
_signal_reported: list[bool] = []   # a command already printed what its stop left behind


def signal_note(name: str | None = None, reported: bool | None = None,
                reset: bool = False) -> tuple[str | None, bool]:
    """Record (``name``) that a signal stopped the command, or (``reported``) that the command
    printed how it ended; returns (first signal name, reported). ``reset``: a new command."""
    if reset:
        _signal_received.clear()
        _signal_reported.clear()
    if name is not None and not _signal_received:
        _signal_received.append(name)
    if reported:
        _signal_reported.append(True)
    return (_signal_received[0] if _signal_received else None), bool(_signal_reported)
