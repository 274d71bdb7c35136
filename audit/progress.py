"""Progress of a long audit (a 10-million-row data.csv takes tens of seconds to hash and read).

:class:`AuditProgress` is the interface the runner calls and does nothing; :class:`RichProgress`
draws a Rich progress display on a (stderr) console: one step per check, and a bar of bytes
while ``data.csv`` is hashed or read. Everything it shows is public: the check names and the
byte counts of the *bundle's* data.csv. The enclave replay is one step with a fixed label: no
count, size or row of the private data or the transcript is ever passed to it.
"""
from __future__ import annotations

__all__ = ["AuditProgress", "RichProgress", "STEP_LABELS"]

# The label of each check's step (fixed texts: nothing computed from any file).
STEP_LABELS = {
    "integrity": "integrity: signature, SHA-256 of every file",
    "schema": "schema: JSON schemas, data.csv labels",
    "size": "size",
    "face_privacy": "face privacy",
    "constraints": "synthetic constraints",
    "budget": "budget: sensitivities and thresholds recomputed",
    "acceptance": "acceptance",
    "documentation": "documentation: datasheet numbers",
    "preregistration": "pre-registered spec",
    "replay": "replay (enclave)",
}

# Only the public data.csv of the bundle gets a byte bar.
BAR_FILES = ("data.csv",)


class AuditProgress:
    """No progress shown (the default: not a terminal, tests, --json -)."""

    def start(self, steps: int) -> None:
        """The audit starts; ``steps`` checks will run."""

    def step(self, check: str) -> None:
        """The check ``check`` starts (the previous one is done)."""

    def file_bytes(self, action: str, name: str, done: int, total: int) -> None:
        """``done`` of ``total`` bytes of the bundle's file ``name`` were hashed or read."""

    def close(self) -> None:
        """The audit is over: remove the display."""


class RichProgress(AuditProgress):
    """A transient Rich display on ``console`` (give it a stderr console): the current check
    with "k/N checks", and below it, while data.csv is hashed or read, a bar of its bytes."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.fields[amount]}"), TimeElapsedColumn(),
                                  console=console, transient=True)
        self._overall = None
        self._bar = None
        self._bar_key: tuple[str, str] | None = None
        self._done = 0
        self._steps = 0
        self._current: str | None = None

    def start(self, steps: int) -> None:
        self._steps, self._done, self._current = steps, 0, None
        self._progress.start()
        self._overall = self._progress.add_task("audit", total=steps, amount=f"0/{steps} checks")

    def step(self, check: str) -> None:
        if self._overall is None:
            return
        self._drop_bar()
        if self._current is not None:
            self._done += 1
        self._current = check
        label = STEP_LABELS.get(check, check)
        self._progress.update(self._overall, description=f"audit: {label}", completed=self._done,
                              amount=f"{self._done}/{self._steps} checks")

    def file_bytes(self, action: str, name: str, done: int, total: int) -> None:
        if self._overall is None or name not in BAR_FILES:
            return
        from rich.filesize import decimal

        total = max(total, 1)
        if self._bar_key != (action, name):
            self._drop_bar()
            self._bar = self._progress.add_task(f"  {action} {name}", total=total, amount="")
            self._bar_key = (action, name)
        done = min(done, total)
        self._progress.update(self._bar, completed=done, amount=f"{decimal(done)}/{decimal(total)}")

    def _drop_bar(self) -> None:
        if self._bar is not None:
            self._progress.remove_task(self._bar)
            self._bar, self._bar_key = None, None

    def close(self) -> None:
        if self._overall is not None:
            self._drop_bar()
            self._progress.stop()
            self._overall = None
