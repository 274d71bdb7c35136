"""What a release prints, and how it stops: the consoles (:data:`console`, :data:`err`; the
Python API points them at a buffer unless ``echo=True``), untrusted text printed literally, and
:func:`fail` / :func:`unusable`, which raise one of :mod:`dpbundle.release.errors`."""
from __future__ import annotations

from typing import NoReturn

from rich.console import Console
from rich.text import Text

from dpbundle.release.errors import Refused, ReleaseFailed, ReleaseInterrupted, UnusableInput, literal

__all__ = ["console", "err", "fail", "unusable", "say", "warn", "SELECTION_LINE", "selection_line"]

console = Console()
err = Console(stderr=True)


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
