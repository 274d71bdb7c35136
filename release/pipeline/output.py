"""What a release prints, and how it stops: the consoles (:data:`console`, :data:`err`),
untrusted text printed literally, and :func:`fail` / :func:`unusable`, which raise one of
:mod:`dpbundle.release.errors`.

The consoles print to the terminal (the command line). Inside :func:`logged` (the Python API
unless ``echo=True``) they, and what the layers below print to ``sys.stderr`` (e.g. the PRIVATE
transcript's location), go to the ``dpbundle.release`` logger instead: progress at INFO, warnings
at WARNING. The switch is per thread (a :class:`contextvars.ContextVar`): a release in another
thread, or the command line, still prints. The ``dpbundle`` logger has a
:class:`logging.NullHandler`, so nothing is shown unless the application configures logging."""
from __future__ import annotations

import contextlib
import io
import logging
import sys
import threading
from contextvars import ContextVar
from typing import Any, Callable, Iterator, NoReturn, Optional

from rich.console import Console
from rich.text import Text

from dpbundle.release.errors import Refused, ReleaseFailed, ReleaseInterrupted, UnusableInput, literal

__all__ = ["console", "err", "fail", "unusable", "say", "warn", "SELECTION_LINE", "selection_line",
           "LOG", "logged", "LogRoute", "log_console"]

if not any(isinstance(h, logging.NullHandler) for h in logging.getLogger("dpbundle").handlers):
    logging.getLogger("dpbundle").addHandler(logging.NullHandler())
LOG = logging.getLogger("dpbundle.release")


class _LogWriter(io.TextIOBase):
    """A text stream whose writes become log records (one per write, blank ones dropped; a
    leading ``warning: `` is dropped from WARNING records); WARNING texts are also kept in
    ``kept``."""

    def __init__(self, logger: logging.Logger, level: int, kept: Optional[list] = None):
        super().__init__()
        self._log, self._level, self._kept = logger, level, kept

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        message = text.rstrip()
        if message.strip():
            if self._level >= logging.WARNING and message.startswith("warning: "):
                message = message[len("warning: "):]
            self._log.log(self._level, message)
            if self._kept is not None and self._level >= logging.WARNING:
                self._kept.append(message)
        return len(text)


def log_console(logger: logging.Logger = LOG, level: int = logging.INFO, kept: Optional[list] = None) -> Console:
    """A Rich console whose output goes to ``logger`` at ``level`` (no colour, no terminal, and
    never Jupyter's display: in a notebook Rich would otherwise show its tables and live status
    lines in the cell, with an 'install ipywidgets' warning for each, instead of writing to
    ``file``)."""
    return Console(file=_LogWriter(logger, level, kept), width=120, color_system=None,
                   force_terminal=False, force_interactive=False, force_jupyter=False)


class _Kept(list):
    """The WARNING messages of a run, in order; ``hook`` is told each one as it is kept (the
    Python API issues it at once, so that a long run's warnings show before it ends)."""

    def __init__(self, hook: Optional[Callable[[str], None]] = None):
        super().__init__()
        self.hook = hook

    def append(self, message: str) -> None:
        super().append(message)
        if self.hook is not None:
            self.hook(message)


class LogRoute:
    """Where a :func:`logged` run's output goes: ``console`` (INFO), ``stderr`` (WARNING) and
    the WARNING messages, in order (``warnings``)."""

    def __init__(self, logger: logging.Logger = LOG, on_warning: Optional[Callable[[str], None]] = None):
        self.logger = logger
        self.warnings: list[str] = _Kept(on_warning)
        self.console = log_console(logger)
        self.stderr = _LogWriter(logger, logging.WARNING, self.warnings)


_ROUTE: ContextVar[Optional[LogRoute]] = ContextVar("dpbundle_release_log_route", default=None)


class _Routed:
    """A console that is ``default`` unless this thread runs inside :func:`logged`."""

    def __init__(self, default: Console):
        self._default = default

    def __getattr__(self, name: str) -> Any:
        route = _ROUTE.get()
        return getattr(route.console if route is not None else self._default, name)


class _StderrSwitch:
    """``sys.stderr`` while some thread runs inside :func:`logged`: that thread's writes go to
    its route, every other thread's to the stream it replaced."""

    def __init__(self, original: Any):
        self.original = original

    def write(self, text: str) -> int:
        route = _ROUTE.get()
        return route.stderr.write(text) if route is not None else self.original.write(text)

    def flush(self) -> None:
        if _ROUTE.get() is None:
            self.original.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


@contextlib.contextmanager
def unrouted() -> Iterator[None]:
    """Inside, this thread writes to the real ``sys.stderr`` again (Python's warning display,
    when the API issues a release's warning, must not come back as one more warning)."""
    token = _ROUTE.set(None)
    try:
        yield
    finally:
        _ROUTE.reset(token)


_switch_lock = threading.Lock()
_switch_users = 0


@contextlib.contextmanager
def logged(logger: logging.Logger = LOG,
           on_warning: Optional[Callable[[str], None]] = None) -> Iterator[LogRoute]:
    """Inside, this thread's release output (the consoles, ``say``/``warn`` and what is printed
    to ``sys.stderr``) goes to ``logger``; yields the :class:`LogRoute` (its ``warnings``, each
    also handed to ``on_warning`` as it comes)."""
    global _switch_users
    route = LogRoute(logger, on_warning)
    token = _ROUTE.set(route)
    with _switch_lock:
        if _switch_users == 0 and not isinstance(sys.stderr, _StderrSwitch):
            sys.stderr = _StderrSwitch(sys.stderr)
        _switch_users += 1
    try:
        yield route
    finally:
        _ROUTE.reset(token)
        with _switch_lock:
            _switch_users -= 1
            if _switch_users == 0 and isinstance(sys.stderr, _StderrSwitch):
                sys.stderr = sys.stderr.original


console = _Routed(Console())
err = _Routed(Console(stderr=True))


def fail(message: str, code: int = 2, cls: type | None = None) -> NoReturn:
    """Stop the release: :class:`Refused` (code 2, before any spend) or :class:`ReleaseFailed`
    (code 1) unless ``cls`` says otherwise; :class:`ReleaseInterrupted` for code 130. The CLI
    prints the message and exits with the code; the Python API raises it."""
    if code == 130:
        raise ReleaseInterrupted(message)
    if cls is None:
        cls = Refused if code == 2 else ReleaseFailed
    raise cls(message, code=code)


def unusable(message: str) -> NoReturn:
    raise UnusableInput(message)


def say(text: str, label: str | None = None, style: str | None = None) -> None:
    """Print ``text`` literally (never parsed as markup: titles, paths, beacon values and ledger
    statuses are untrusted), after an optional styled ``label``."""
    route = _ROUTE.get()
    if route is not None:
        level = logging.WARNING if label == "warning: " else logging.INFO
        message = literal(text) if level == logging.WARNING else f"{label or ''}{literal(text)}"
        route.logger.log(level, message)
        if level == logging.WARNING:
            route.warnings.append(message)
        return
    line = Text(label, style=style) if label else Text()
    line.append(literal(text))
    console.print(line, highlight=False)


def warn(text: str) -> None:
    say(text, "warning: ", "yellow")


SELECTION_LINE = ("private selection running: progress is not shown, because the number of "
                  "attempts is private; the run ends when a candidate passes every criterion"
                  "{stop}")


def selection_line(gamma: float) -> str:
    """The one static line printed while the selection runs: no step, no time, no count (a
    recorded terminal keeps every frame of an animated display, and their number grows with the
    attempts)."""
    return SELECTION_LINE.format(stop=f" or a stop draw ends it (probability {gamma:g} after each "
                                      "failed attempt)" if gamma > 0 else "")
