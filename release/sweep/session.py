"""Executing a planned sweep: the runs of one session, on a backend, saved as they finish.

:func:`run_session` starts the backend (in this process, a local process pool, or a Dask
cluster: :mod:`dpbundle.release.sweep.execute`), feeds it the adaptive plan's tasks and hands
every finished run to a :class:`RunRecorder`, which appends it to ``runs.jsonl`` (and its
utility to ``utility.jsonl``), tells the plan, and advances the progress bar. An interrupt
stops the backend and propagates once the bar is closed; the saved runs are kept for resume.
:func:`record_session` adds the session to ``sweep.json``.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from dpbundle.release.sweep.execute import Task, execute, jsonable
from dpbundle.release.sweep.plan import SweepPlan
from dpbundle.release.sweep.request import SweepError, SweepRequest
from dpbundle.release.sweep.store import (
    META,
    RUNS,
    UTILITY,
    append_jsonl,
    end_torn_line,
    now,
    read_utility,
    validate,
    write_atomic,
)

__all__ = ["RunRecorder", "SessionOutcome", "record_session", "run_session", "start_backend"]


@dataclass(frozen=True)
class SessionOutcome:
    """What one session ran: ``new_runs`` in ``seconds`` on ``backend`` with ``workers``."""

    new_runs: int
    seconds: float
    backend: str = "none"
    workers: int = 0


class RunRecorder:
    """Saves each finished run (and its utility) and decides which runs evaluate utility:
    ``all``, or the ``first`` accepted run of each configuration (one evaluation in flight at a
    time per configuration), or ``none``."""

    def __init__(self, plan: SweepPlan, progress=None):
        self.plan, self.policy = plan, plan.request.utility
        self.runs_path, self.util_path = plan.out / RUNS, plan.out / UTILITY
        self.have_util = {cid for (cid, _), rec in read_utility(plan.out).items() if rec.get("utility")}
        self.util_in_flight: set[str] = set()
        self.progress = progress  # (rich Progress, task id) or None
        self.new_runs = self.accepted = 0

    def prepare_task(self, task: Task) -> Task:
        """The task as submitted: with ``utility`` set if its run should be evaluated."""
        cid = task.config_id
        want = self.policy == "all" or (self.policy == "first" and cid not in self.have_util
                                        and cid not in self.util_in_flight)
        if want and self.policy == "first":
            self.util_in_flight.add(cid)
        return Task(task.config_id, task.rep, task.config, want)

    def on_result(self, task: Task, record: dict) -> None:
        """A run finished: save it, tell the plan, advance the bar, call ``on_run``."""
        self._save_utility(task, record)
        record = jsonable(record)
        validate(record, "sweep-run", str(self.runs_path))
        append_jsonl(self.runs_path, record)
        self.plan.runs[(task.config_id, task.rep)] = record
        self.new_runs += 1
        self.accepted += int(bool(record.get("passed")))
        adaptive = self.plan.adaptive
        adaptive.record(task, None if record.get("error") else bool(record.get("passed")))
        if self.progress is not None:
            bar, tid = self.progress
            bar.update(tid, advance=1, accepted=self.accepted, total=adaptive.planned)
        if self.plan.request.on_run is not None:
            self.plan.request.on_run(record)

    def _save_utility(self, task: Task, record: dict) -> None:
        """Move the run's utility out of its record into ``utility.jsonl``."""
        u = record.pop("utility", None)
        u_err = record.pop("utility_error", None)
        u_secs = record.pop("utility_seconds", None)
        if record.get("error") is None:
            record.pop("traceback", None)
        if u is not None or u_err is not None:
            urec = jsonable({"config_id": task.config_id, "rep": task.rep, "utility": u,
                             "error": u_err, "seconds": u_secs})
            validate(urec, "sweep-utility", str(self.util_path))
            append_jsonl(self.util_path, urec)
            if u is not None:
                self.have_util.add(task.config_id)
        if task.utility and self.policy == "first":
            self.util_in_flight.discard(task.config_id)


def _default_iteration():
    from dpbundle.release.scheme.iteration import run_iteration

    return run_iteration


def start_backend(plan: SweepPlan):
    """The backend for this session's runs: Dask (``scheduler``), or in this process (one
    worker), or a local process pool. SweepError if it cannot start."""
    from dpbundle.release.sweep.execute import (
        DaskBackend,
        InProcessBackend,
        LocalBackend,
        WorkerStartError,
    )

    from dpbundle.release.data.cluster import SchedulerError

    r: SweepRequest = plan.request
    payload = {"prepared": plan.prepared, "spec": plan.spec, "iteration": r.iteration or _default_iteration(),
               "utility_options": r.utility_options or {}}
    n_local = min(r.workers or os.cpu_count() or 1, max(plan.adaptive.potential(), 1))
    try:
        if r.scheduler:
            return DaskBackend(payload, r.scheduler)
        if n_local == 1:
            return InProcessBackend(payload)
        return LocalBackend(payload, n_local, mp_context=r.mp_context)
    except (WorkerStartError, SchedulerError) as exc:
        raise SweepError(str(exc)) from None
    except (OSError, TimeoutError) as exc:
        what = "Dask client for " + r.scheduler if r.scheduler else "process pool"
        raise SweepError(f"cannot start the {what}: {exc}") from None


def _progress_bar(request: SweepRequest):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = [TextColumn("[bold]sweep[/]"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[accepted]} accepted"), TextColumn("elapsed"),
               TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
    return Progress(*columns, console=request.console or Console(stderr=True), disable=not request.progress,
                    transient=False)


def run_session(plan: SweepPlan) -> SessionOutcome:
    """Run what the plan still needs; KeyboardInterrupt propagates after the backend stopped; a
    lost Dask worker (its scattered data gone) stops the session with a SweepError (exit 2), the
    runs finished until then kept for a resume."""
    from dpbundle.release.sweep.execute import WorkerLostError

    end_torn_line(plan.out / RUNS)
    end_torn_line(plan.out / UTILITY)
    t0 = time.perf_counter()
    if not plan.adaptive.has_work():
        return SessionOutcome(new_runs=0, seconds=time.perf_counter() - t0)
    backend = start_backend(plan)
    plan.adaptive.workers = max(int(backend.workers), 1)
    interrupted = False
    with _progress_bar(plan.request) as bar:
        recorder = RunRecorder(plan, (bar, bar.add_task("sweep", total=plan.adaptive.planned, accepted=0)))
        try:
            execute(backend, plan.adaptive.tasks(), recorder.on_result, prepare_task=recorder.prepare_task)
        except KeyboardInterrupt:
            interrupted = True
        except WorkerLostError as exc:
            raise SweepError(f"{exc}. The {recorder.new_runs} run(s) finished before are kept in {plan.out / RUNS}; "
                             "run the same command again to resume (with more memory per worker, or fewer "
                             "threads per worker)") from None
        finally:
            backend.close(cancel=True)
    if interrupted:
        raise KeyboardInterrupt
    return SessionOutcome(new_runs=recorder.new_runs, seconds=time.perf_counter() - t0,
                          backend=backend.name, workers=backend.workers)


def record_session(plan: SweepPlan, outcome: SessionOutcome) -> None:
    """Add a session that ran something to ``sweep.json`` (rewritten atomically)."""
    if not outcome.new_runs:
        return
    n, secs = outcome.new_runs, outcome.seconds
    plan.meta["sessions"].append({"finished": now(), "backend": outcome.backend, "workers": outcome.workers,
                                  "runs": n, "seconds": round(secs, 3),
                                  "runs_per_minute": round(n / secs * 60, 3) if secs > 0 else None})
    meta_path = plan.out / META
    validate(plan.meta, "sweep-meta", str(meta_path))
    write_atomic(meta_path, json.dumps(plan.meta, indent=1) + "\n")
