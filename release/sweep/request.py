"""What a sweep is asked to do (:class:`SweepRequest`) and what it returns (:class:`SweepResult`).

The command line (``dpbundle sweep``) and Python (:func:`dpbundle.release.api.sweep`) both build
a :class:`SweepRequest`; :func:`dpbundle.release.sweep.run.run_sweep` carries it through the
stages plan -> execute -> summarise -> report.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "BOOTSTRAP_MESSAGE",
    "DEFAULT_MAX_REPS",
    "DEFAULT_MIN_ACCEPTANCE",
    "DEFAULT_REPS",
    "UTILITY_POLICIES",
    "SweepError",
    "SweepOptions",
    "SweepRequest",
    "SweepResult",
]

DEFAULT_REPS = 3
DEFAULT_MAX_REPS = 40
DEFAULT_MIN_ACCEPTANCE = 0.10
UTILITY_POLICIES = ("first", "all", "none")
_PATHS = ("spec_path", "data_path", "out")

BOOTSTRAP_MESSAGE = (
    "{call} was called while a worker process was starting: the script that calls it is being "
    "re-run by Python's multiprocessing (spawn), because the call is not under "
    "`if __name__ == \"__main__\":`. Nothing was run in this worker; put the call under that guard.")


class SweepError(Exception):
    """Unusable input or output directory (exit code 2); the message says what and why."""

    exit_code = 2


def _opt(default: Any, doc: str, **kw: Any) -> Any:
    return field(default=default, metadata={"doc": doc}, **kw)


@dataclass(frozen=True, kw_only=True)
class SweepOptions:
    """Every option of one sweep (the option part of a :class:`SweepRequest`, which adds SPEC,
    DATA and OUT); ``None`` means "the recorded value when resuming, else the default". From
    Python: ``sweep(spec, data, out=..., options=SweepOptions(sample=8, reps=3))``."""

    reps: int | None = _opt(None, "repetitions of each configuration in the first batch (default 3)")
    max_reps: int | None = _opt(None, "cap of the adaptive repetitions (default 40; == reps: a fixed design)")
    batch: int | None = _opt(None, "repetitions of later batches (default reps)")
    sample: int | None = _opt(None, "K configurations drawn with seed (default: the whole space)")
    seed: int | None = _opt(None, "the seed of the sample")
    configs: Path | None = _opt(None, "a narrowed configuration list to re-measure instead")
    allow_other_spec: bool = _opt(False, "accept a configuration list written for another spec")
    min_acceptance: float | None = _opt(None, "the acceptance cut-off (default 0.10)")
    workers: int | None = _opt(None, "local worker processes")
    scheduler: str | None = _opt(None, "a Dask scheduler address (instead of workers)")
    mp_context: str = _opt("spawn", "the local pool's start method")
    utility: str = _opt("first", "granular utility of accepted runs: first, all or none")
    utility_options: dict | None = _opt(None, "passed to the utility measures", compare=False)
    iteration: Callable | None = _opt(None, "replaces the real iteration (e.g. in tests)")
    prepare: Callable | None = _opt(None, "replaces the real data preparation")
    progress: bool = _opt(True, "show a progress bar on console")
    report: bool = _opt(True, "write report.html / report.pdf")
    console: Any = _opt(None, "the Rich console for progress and warnings (default: stderr)", compare=False)
    on_run: Callable[[dict], None] | None = _opt(None, "called with each saved run's record")
    ledger: Path | None = _opt(None, "the private budget ledger whose released data the sweep refuses "
                                     "(default: the release's default ledger)")


SweepOptions.__doc__ += "\n    Fields:\n\n" + "\n".join(
    f"    ``{f.name}`` (default {f.default!r}): {f.metadata['doc']}" for f in dataclasses.fields(SweepOptions)) + "\n"


@dataclass(frozen=True)
class SweepRequest(SweepOptions):
    """One sweep: SPEC (``spec_path``), DATA (``data_path``), OUT and the options (the fields of
    :class:`SweepOptions`, keyword-only; :meth:`of` builds a request from the inputs and a
    SweepOptions, :attr:`options` gives them back). ``on_run(record)`` is called after each
    saved run; ``progress`` shows a progress bar on ``console`` (default: stderr)."""

    spec_path: Path
    data_path: Path
    out: Path

    @classmethod
    def of(cls, spec_path, data_path, out, options: SweepOptions | None = None) -> SweepRequest:
        """The request of SPEC, DATA, OUT and ``options`` (default: every option's default)."""
        options = options or SweepOptions()
        return cls(spec_path, data_path, out,
                   **{f.name: getattr(options, f.name) for f in dataclasses.fields(SweepOptions)})

    @property
    def options(self) -> SweepOptions:
        """The option part of the request."""
        return SweepOptions(**{f.name: getattr(self, f.name) for f in dataclasses.fields(SweepOptions)})

    def __post_init__(self) -> None:
        for name in _PATHS:
            object.__setattr__(self, name, Path(getattr(self, name)))

    @classmethod
    def option_names(cls) -> list[str]:
        """The names of the options (every field but the three paths), sorted."""
        return sorted(f.name for f in dataclasses.fields(cls) if f.name not in _PATHS)

    @classmethod
    def from_options(cls, spec_path, data_path, out, **options: Any) -> SweepRequest:
        """A request from keyword options; TypeError naming any unknown option."""
        _reject_unknown(options)
        return cls(spec_path, data_path, out, **options)

    def with_options(self, **options: Any) -> SweepRequest:
        """A copy with some options replaced; TypeError naming any unknown option."""
        _reject_unknown(options, allowed=_PATHS)
        return dataclasses.replace(self, **options)


def _reject_unknown(options: dict, allowed: tuple[str, ...] = ()) -> None:
    unknown = sorted(set(options) - set(SweepRequest.option_names()) - set(allowed))
    if unknown:
        raise TypeError(f"unknown sweep option(s) {', '.join(unknown)}; known: "
                        f"{', '.join(SweepRequest.option_names())}")


_ACCEPTANCE_COLUMNS = ["config_id", "runs", "accepted", "errors", "acceptance", "wilson_low",
                       "wilson_high", "decision", "expected_iterations", "expected_iterations_low",
                       "expected_iterations_high", "median_seconds", "narrowed"]
_HTML_ROWS = 15   # configurations in the notebook view (the console table shows as many)


@dataclass(repr=False)
class SweepResult:
    """A finished sweep: its directory, summary (``summary.json``), the runs of this session
    (``new_runs`` in ``seconds`` on ``backend`` with ``workers``) and the files written.

    :attr:`acceptance` is the per-configuration table as a DataFrame; ``repr(result)`` is one
    short line; in a notebook the result shows the top configurations with a bar each."""

    out: Path
    summary: dict
    new_runs: int
    seconds: float
    backend: str
    workers: int
    files: dict = field(default_factory=dict)

    @property
    def runs_per_minute(self) -> float | None:
        return self.new_runs / self.seconds * 60.0 if self.new_runs and self.seconds > 0 else None

    def _configurations(self) -> list[dict]:
        """The summary's configuration rows, highest acceptance first (then by id)."""
        rows = [r for r in (self.summary or {}).get("configurations") or [] if isinstance(r, dict)]
        return sorted(rows, key=lambda r: (-(r.get("acceptance") if r.get("acceptance") is not None
                                             else -1), str(r.get("config_id"))))

    @property
    def acceptance(self):
        """The per-configuration acceptance estimates (a pandas DataFrame indexed by
        ``config_id``, highest acceptance first): runs, accepted, acceptance, its Wilson 95%
        interval, the decision, the expected iterations and whether it is in the narrowed list;
        then one ``pass_rate_<criterion>`` column per criterion."""
        import pandas as pd

        rows = self._configurations()
        crit = sorted({c for r in rows for c in (r.get("criteria_pass_rate") or {})})
        table = pd.DataFrame([{k: r.get(k) for k in _ACCEPTANCE_COLUMNS}
                              | {f"pass_rate_{c}": (r.get("criteria_pass_rate") or {}).get(c) for c in crit}
                              for r in rows], columns=_ACCEPTANCE_COLUMNS + [f"pass_rate_{c}" for c in crit])
        return table.set_index("config_id")

    def __repr__(self) -> str:
        s = self.summary or {}
        out = str(self.out)
        out = out if len(out) <= 80 else "..." + out[-77:]
        acc = s.get("acceptance")
        nar = (s.get("narrowed") or {}).get("count")
        cut = s.get("min_acceptance")
        return (f"<SweepResult {out!r} {s.get('configurations_swept', '?')} configuration(s), "
                f"{s.get('runs', '?')} run(s) ({self.new_runs} new in {self.seconds:.1f} s), acceptance "
                f"{'n/a' if acc is None else f'{acc:.2f}'}, {nar if nar is not None else '?'} listed at "
                f"cut-off {'?' if cut is None else f'{cut:g}'}>")

    def _repr_html_(self) -> str:
        from dpbundle.templates.notebook import bar_svg, esc, number, table

        s = self.summary or {}
        cut = s.get("min_acceptance")
        rows = self._configurations()
        body = [(r.get("config_id"), f"{r.get('accepted')}/{r.get('runs')}", number(r.get("acceptance"), 2),
                 "" if r.get("wilson_low") is None else
                 f"[{number(r.get('wilson_low'), 2)}, {number(r.get('wilson_high'), 2)}]",
                 bar_svg(r.get("acceptance"), r.get("wilson_low"), r.get("wilson_high"), cut),
                 r.get("decision"), "yes" if r.get("narrowed") else "")
                for r in rows[:_HTML_ROWS]]
        more = len(rows) - len(body)
        caption = (f"Acceptance on public data: {s.get('configurations_swept', len(rows))} configuration(s), "
                   f"{s.get('runs', '?')} run(s), cut-off {number(cut)} (red tick; line: Wilson 95%)"
                   + (f"; {more} more in summary.csv" if more > 0 else ""))
        return (f"<div class=\"dpbundle-sweep\"><small>{esc(self.out)}</small>"
                + table(["configuration", "passed/runs", "acceptance", "Wilson 95%", "", "decision",
                         "listed"], body, raw=(4,), caption=caption)
                + "</div>")
