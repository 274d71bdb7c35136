"""Execution backends of ``dpbundle sweep``: a local process pool (default) and a Dask cluster.

Both run :func:`run_task` (one full iteration on the public data, plus optional utility
measures) with a *payload* shipped once per worker: the prepared public data, the spec, the
iteration function and the utility options.

- :class:`LocalBackend`: ``concurrent.futures.ProcessPoolExecutor``; the payload is pickled once in
  the parent and handed to every worker process by the pool's initializer. The workers are
  started and checked before the first run, without re-running the caller's main script.
- :class:`InProcessBackend`: one worker, the runs in the calling process (``workers=1``).
- :class:`DaskBackend`: ``distributed.Client(address)``; the payload is scattered once to every
  worker (``broadcast=True``) and every task refers to it by its future.

:func:`execute` drives either backend with a bounded number of runs in flight (so that decisions
such as "does this run still need a utility evaluation?" are made late, and an interrupt loses
at most the running runs) and hands every finished run to a callback as soon as it finishes.
"""
from __future__ import annotations

import math
import os
import pickle
import socket
import sys
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor
from concurrent.futures import wait as cf_wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Iterator

__all__ = ["Task", "run_task", "LocalBackend", "InProcessBackend", "WorkerStartError", "bootstrapping",
           "DaskBackend", "execute", "jsonable", "wilson_interval",
           "decide", "AdaptivePlan", "WILSON_Z", "ABOVE", "BELOW", "UNDECIDED"]

WILSON_Z = 1.959963984540054  # Phi^-1(0.975)
ABOVE, BELOW, UNDECIDED = "above", "below", "undecided"


@dataclass(frozen=True)
class Task:
    """One run of the sweep: configuration ``config_id`` (``config``), repetition ``rep``."""

    config_id: str
    rep: int
    config: dict
    utility: bool = False


def jsonable(x: Any) -> Any:
    """JSON-able copy: numpy scalars -> Python, non-finite floats -> None, tuples -> lists."""
    import numpy as np

    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def wilson_interval(k: int, n: int, z: float = WILSON_Z) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n (default 95%); (0, 1) when n = 0.

    (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), p = k/n.
    """
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def decide(k: int, n: int, cut: float) -> str:
    """Where the Wilson 95% interval [lo, hi] of k/n lies relative to the cut-off:
    ``ABOVE`` if lo >= cut, ``BELOW`` if hi < cut, else ``UNDECIDED`` (it straddles the cut-off,
    or n = 0). E.g. 0 passes need n >= 35 runs before hi < 0.10."""
    if n <= 0:
        return UNDECIDED
    lo, hi = wilson_interval(k, n)
    if lo >= cut:
        return ABOVE
    if hi < cut:
        return BELOW
    return UNDECIDED


class AdaptivePlan:
    """Which runs to start next, decided per configuration as its runs finish.

    Each configuration first gets ``first`` runs (rep-major: every configuration gets rep 0
    before any gets rep 1); whenever all its runs in flight have finished and its Wilson
    interval still straddles ``cut`` (:func:`decide`), it gets another batch, until it is
    decided or has ``cap`` successful runs. A batch is ``batch`` runs, enlarged to
    ceil(workers / configurations still open) so that the workers stay busy when few remain.
    Rep indices are the smallest unused ones in ``range(cap)``; a run that failed with an
    error does not count and its index is not retried in this session (it is on resume), so
    every configuration ends after at most ``cap`` attempts.

    ``done`` maps a configuration id to its finished runs ``{rep: passed}`` (errors excluded),
    e.g. read back from runs.jsonl when resuming. :meth:`tasks` yields the next task, ``None``
    when nothing can start until a run in flight finishes, and stops when all are settled;
    :meth:`record` must be called with each finished run.
    """

    def __init__(self, configs: dict[str, dict], done: dict[str, dict[int, bool]], *, first: int, cap: int,
                 batch: int, cut: float, workers: int = 1):
        self.configs = dict(configs)
        self.first, self.cap, self.batch, self.cut = int(first), max(int(cap), int(first)), int(batch), float(cut)
        self.workers = max(int(workers), 1)
        self.results: dict[str, dict[int, bool]] = {c: dict(done.get(c, {})) for c in self.configs}
        self.tried: dict[str, set[int]] = {c: set() for c in self.configs}   # attempted this session
        self.in_flight: dict[str, int] = {c: 0 for c in self.configs}
        self.closed: set[str] = set()
        self.planned = 0
        from collections import deque

        self._queue: deque[Task] = deque()
        firsts = {c: self._next_reps(c, self._want(c)) for c in self.configs}
        for i in range(max((len(v) for v in firsts.values()), default=0)):
            for c, reps in firsts.items():
                if i < len(reps):
                    self._enqueue(c, reps[i])
        for c, reps in firsts.items():
            if not reps:
                self.closed.add(c)

    # -- the rule
    def counts(self, cid: str) -> tuple[int, int]:
        """(passed, successful runs) of a configuration so far."""
        res = self.results[cid]
        return sum(1 for v in res.values() if v), len(res)

    def decision(self, cid: str) -> str:
        k, n = self.counts(cid)
        return decide(k, n, self.cut)

    def _want(self, cid: str) -> int:
        """How many more runs the configuration needs now (0: settled)."""
        k, n = self.counts(cid)
        if n < self.first:
            return self.first - n
        if n >= self.cap or decide(k, n, self.cut) != UNDECIDED:
            return 0
        open_ = max(len(self.configs) - len(self.closed), 1)
        size = max(self.batch, math.ceil(self.workers / open_))
        return min(size, self.cap - n)

    def _next_reps(self, cid: str, count: int) -> list[int]:
        used = set(self.results[cid]) | self.tried[cid]
        free = [r for r in range(self.cap) if r not in used]
        return free[:max(count, 0)]

    def _enqueue(self, cid: str, rep: int) -> None:
        self.tried[cid].add(rep)
        self.in_flight[cid] += 1
        self.planned += 1
        self._queue.append(Task(cid, rep, self.configs[cid]))

    # -- driving
    def record(self, task: Task, passed: bool | None) -> None:
        """A run finished (``passed`` None: it failed with an error). Plans the next batch."""
        cid = task.config_id
        self.in_flight[cid] -= 1
        if passed is not None:
            self.results[cid][int(task.rep)] = bool(passed)
        if self.in_flight[cid] == 0:
            reps = self._next_reps(cid, self._want(cid))
            for r in reps:
                self._enqueue(cid, r)
            if not reps:
                self.closed.add(cid)

    def has_work(self) -> bool:
        return bool(self._queue)

    def potential(self) -> int:
        """Most runs this plan may still start (for sizing a pool)."""
        return len(self._queue) + sum(max(self.cap - len(self.results[c]) - len(self.tried[c]), 0)
                                      for c in self.configs if c not in self.closed)

    def tasks(self) -> Iterator[Task | None]:
        while True:
            if self._queue:
                yield self._queue.popleft()
            elif any(self.in_flight.values()):
                yield None
            else:
                return


def _criterion_row(r: Any) -> dict:
    get = (lambda k: r.get(k)) if isinstance(r, dict) else (lambda k: getattr(r, k, None))
    return jsonable({"id": get("id"), "dp_value": get("dp_value"), "threshold": get("threshold"),
                     "passed": bool(get("passed"))})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def run_task(payload: dict, task: Task) -> dict:
    """Run one iteration of ``task`` on the payload's public data; return the run record.

    A fresh recording ``Randomness`` is used per run (the same DP noise as the private run); its
    transcript is discarded (the data are public). An exception in the iteration becomes a
    record with ``error`` set (such runs are retried when the sweep is resumed).
    """
    from dpbundle.mechanisms.noise import Randomness

    iteration = payload["iteration"]
    prepared, spec = payload["prepared"], payload["spec"]
    record: dict = {"config_id": task.config_id, "rep": int(task.rep),
                    "worker": f"{socket.gethostname()}:{os.getpid()}"}
    t0 = time.perf_counter()
    try:
        result = iteration(prepared, spec, task.config, Randomness())
    except Exception as exc:  # noqa: BLE001 - recorded, the sweep goes on
        record.update(passed=False, criteria=[], seconds=time.perf_counter() - t0, finished=_now(),
                      error=f"{type(exc).__name__}: {exc}"[:2000],
                      traceback="".join(traceback.format_exc(limit=6))[-4000:])
        return jsonable(record)
    record.update(passed=bool(result.passed),
                  criteria=[_criterion_row(r) for r in result.results],
                  seconds=time.perf_counter() - t0, finished=_now(), error=None)
    note = getattr(result, "note", "")
    if note:
        record["note"] = str(note)[:2000]
    timings = getattr(result, "timings", None)
    if timings:
        record["timings"] = {str(k): float(v) for k, v in timings.items()}
    if task.utility and result.passed:
        _add_utility(record, payload, task, result)
    return jsonable(record)


def _group_bins(spec: Any) -> dict:
    """The spec's coarse group-by bins (``group_bins``), all the utility measures read of it."""
    if isinstance(spec, dict):
        return dict(spec.get("group_bins") or {})
    return spec.group_bins


def _add_utility(record: dict, payload: dict, task: Task, result: Any) -> None:
    """Granular utility of an accepted run (``utility``, or ``utility_error``, and the seconds)."""
    t1 = time.perf_counter()
    try:
        from dpbundle.release.sweep.utility import evaluate_utility

        prepared, spec = payload["prepared"], payload["spec"]
        real = getattr(result, "real", None)
        if real is None:
            real = getattr(result, "coded_real", None)
        if real is None:
            from dpbundle.release.data.transform import transform

            real = transform(prepared, spec, task.config)
        options = payload.get("utility_options") or {}
        record["utility"] = evaluate_utility(real, result.candidate, {"group_bins": _group_bins(spec)}, **options)
    except Exception as exc:  # noqa: BLE001
        record["utility_error"] = f"{type(exc).__name__}: {exc}"[:2000]
    record["utility_seconds"] = time.perf_counter() - t1


# --------------------------------------------------------------------------- local process pool

_WORKER_PAYLOAD: dict | None = None


def _init_worker(blob: bytes) -> None:
    global _WORKER_PAYLOAD
    _WORKER_PAYLOAD = pickle.loads(blob)


def _pool_task(task: Task) -> dict:
    if _WORKER_PAYLOAD is None:  # pragma: no cover - initializer failed
        raise RuntimeError("sweep worker has no payload (initializer did not run)")
    return run_task(_WORKER_PAYLOAD, task)


WORKER_START_SECONDS = 60.0   # every worker process must answer a first task within this time


class WorkerStartError(RuntimeError):
    """The local process pool's workers could not start (message for the user)."""


class WorkerLostError(RuntimeError):
    """A Dask worker holding the sweep's data was lost (e.g. restarted above its memory limit):
    every run still to come would be cancelled, so the sweep stops (message for the user)."""


def _ping() -> bool:
    return _WORKER_PAYLOAD is not None


def bootstrapping() -> bool:
    """True while this process is a multiprocessing child still importing its parent's main
    module (spawn/forkserver): a script without ``if __name__ == "__main__":`` is being re-run."""
    import multiprocessing

    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


@contextmanager
def _main_module_not_rerun(blob: bytes) -> Iterator[None]:
    """While worker processes start, hide the parent's ``__main__`` file and module name from
    multiprocessing, so that a spawned worker does not re-run the user's script (a plain script
    that calls ``sweep()`` at top level would otherwise start the sweep again in every worker,
    and a ``release()`` above it would run again). The workers need nothing from ``__main__``:
    the payload is checked to hold no reference to it (if it does, nothing is hidden)."""
    main = sys.modules.get("__main__")
    if main is None or b"__main__" in blob:
        yield
        return
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    try:
        main.__dict__.pop("__file__", None)
        main.__dict__["__spec__"] = None
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


class InProcessBackend:
    """One worker: the runs execute in this process, one at a time (no pool to start)."""

    name = "in-process"
    workers = 1

    def __init__(self, payload: dict):
        self._payload = payload

    @property
    def description(self) -> str:
        return "in this process, 1 worker"

    def submit(self, task: Task):
        fut: Future = Future()
        try:
            fut.set_result(run_task(self._payload, task))
        except Exception as exc:  # noqa: BLE001 - reported as the run's error, as a pool would
            fut.set_exception(exc)
        return fut

    @staticmethod
    def wait(futures: set):
        return set(futures), set()

    @staticmethod
    def outcome(future) -> dict:
        return future.result()

    def close(self, cancel: bool = False) -> None:
        pass


class LocalBackend:
    """A local process pool; ``workers`` processes (default: every core), started and checked
    before the first run (each answers a first task within ``WORKER_START_SECONDS``)."""

    name = "local"

    def __init__(self, payload: dict, workers: int | None = None, *, mp_context: str = "spawn",
                 start_timeout: float = WORKER_START_SECONDS):
        import multiprocessing

        self.workers = int(workers or os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError("--workers must be at least 1")
        blob = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
        # One process per core: keep each worker's numerical libraries single-threaded, or the
        # workers' BLAS/OpenMP threads oversubscribe the cores (children inherit the environment;
        # a value the user set is kept).
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        self._pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context(mp_context),
            initializer=_init_worker, initargs=(blob,))
        with _main_module_not_rerun(blob):
            self._start(start_timeout)

    def _start(self, timeout: float) -> None:
        """Start every worker (one ping each) and wait for all to answer; else shut the pool
        down and raise :class:`WorkerStartError`."""
        pings = {self._pool.submit(_ping) for _ in range(self.workers)}
        done, pending = cf_wait(pings, timeout=timeout)
        problem = None
        if pending:
            problem = f"the worker processes did not start within {timeout:g} s"
        else:
            for fut in done:
                try:
                    if not fut.result():
                        problem = "a worker process started without its work (initializer failed)"
                except Exception as exc:  # noqa: BLE001 - BrokenProcessPool and the like
                    problem = f"a worker process could not start ({type(exc).__name__}: {exc})"
        if problem:
            self._pool.shutdown(wait=False, cancel_futures=True)
            raise WorkerStartError(
                f"{problem}. If you call dpbundle from a script, put the call under "
                "`if __name__ == \"__main__\":`, or use workers=1 (runs in this process).")

    @property
    def description(self) -> str:
        return f"local process pool, {self.workers} worker(s)"

    def submit(self, task: Task):
        return self._pool.submit(_pool_task, task)

    def wait(self, futures: set):
        done, pending = cf_wait(futures, return_when=FIRST_COMPLETED)
        return set(done), set(pending)

    @staticmethod
    def outcome(future) -> dict:
        return future.result()

    def close(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)


# --------------------------------------------------------------------------- Dask

def _dask_task(payload: dict, task: Task) -> dict:
    return run_task(payload, task)


class DaskBackend:
    """Runs on a Dask distributed cluster at ``address`` (e.g. ``tcp://127.0.0.1:8786``)."""

    name = "dask"

    def __init__(self, payload: dict, address: str, *, timeout: float = 15.0):
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover - optional dependency
            raise RuntimeError("--scheduler needs dask.distributed: pip install 'dpbundle[dask]'") from exc
        from dpbundle.release.data.cluster import check_scheduler, client_errors

        self.address = address
        self.client = None
        # SchedulerError (exit 2): a bad address, or a server that is not a Dask scheduler
        checked = check_scheduler(address)
        try:
            self.client = Client(checked, timeout=timeout, set_as_default=False)
            info = self.client.scheduler_info()
            threads = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values())
            self.workers = max(threads, 1)
            # shipped once: every worker holds a copy, tasks refer to it by its future
            self._payload = self.client.scatter(payload, broadcast=True, hash=False)
        except client_errors() as exc:   # a broken or hostile server: never a traceback
            self._close_client()
            raise WorkerStartError(f"--scheduler {address}: the Dask cluster failed or answered with "
                                   f"something a Dask scheduler does not send ({type(exc).__name__})") from None
        self._completed = None

    def _close_client(self) -> None:
        """Close the client, if any, without waiting long on a broken server."""
        from dpbundle.release.data.cluster import close_client

        close_client(self.client)

    @property
    def description(self) -> str:
        return f"Dask cluster {self.address}, {self.workers} worker thread(s)"

    def submit(self, task: Task):
        from distributed import as_completed

        fut = self.client.submit(_dask_task, self._payload, task, pure=False,
                                 key=f"dpbundle-sweep-{task.config_id}-{task.rep}-{os.urandom(4).hex()}")
        if self._completed is None:
            self._completed = as_completed([fut], loop=self.client.loop)
        else:
            self._completed.add(fut)
        return fut

    def wait(self, futures: set):
        # every future in flight was added to the as_completed iterator when it was submitted
        done = {next(self._completed)}
        done.update(self._completed.next_batch(block=False))
        return done, set(futures) - done

    def outcome(self, future) -> dict:
        try:
            return future.result()
        except Exception:
            if self._payload_lost():
                raise WorkerLostError(
                    f"a worker of the Dask cluster {self.address} was lost while the sweep ran (a worker "
                    "above its memory limit is restarted by its nanny and loses the data the sweep sent "
                    "it; see docs/national-scale.md for the memory an attempt takes)") from None
            raise

    def _payload_lost(self) -> bool:
        """Whether a part of the scattered payload is gone (its futures no longer finished)."""
        parts = self._payload.values() if isinstance(self._payload, dict) else [self._payload]
        return any(getattr(f, "status", "finished") != "finished" for f in parts)

    def close(self, cancel: bool = False) -> None:
        parts = self._payload.values() if isinstance(self._payload, dict) else [self._payload]
        for part in parts:
            try:
                part.release()
            except Exception:  # noqa: BLE001
                pass
        self._close_client()


# --------------------------------------------------------------------------- driver

def execute(backend, tasks: Iterable[Task], on_result: Callable[[Task, dict], None], *,
            window: int | None = None, prepare_task: Callable[[Task], Task] | None = None) -> int:
    """Run ``tasks`` on ``backend``, at most ``window`` in flight (default 2 x workers).

    ``tasks`` may yield ``None``: nothing can start until a run in flight finishes (e.g.
    :meth:`AdaptivePlan.tasks`, which plans the next batch when a configuration's runs finish).
    ``prepare_task`` may adjust a task just before it is submitted (e.g. set ``utility``).
    ``on_result(task, record)`` is called in the calling process as each run finishes; a run that
    failed outside the iteration (a worker died) gets a record with ``error`` set. On an
    exception (KeyboardInterrupt included) the runs in flight are cancelled and it propagates.
    Returns the number of finished runs.
    """
    feed = _Feed(backend, tasks, int(window or 2 * backend.workers), prepare_task)
    finished = 0
    ok = False
    try:
        feed.fill()
        while feed.in_flight:
            done, _ = backend.wait(set(feed.in_flight))
            for fut in done:
                task = feed.in_flight.pop(fut)
                on_result(task, _outcome(backend, fut, task))
                finished += 1
            feed.fill()
        ok = True
    finally:
        if not ok:
            feed.cancel()
    return finished


class _Feed:
    """The runs in flight on a backend (future -> task), topped up to ``window`` from ``tasks``."""

    def __init__(self, backend, tasks: Iterable[Task | None], window: int,
                 prepare_task: Callable[[Task], Task] | None):
        self.backend, self.window, self.prepare_task = backend, window, prepare_task
        self.it: Iterator[Task | None] = iter(tasks)
        self.in_flight: dict = {}
        self.exhausted = False

    def fill(self) -> None:
        """Submit tasks until ``window`` are in flight, the source is exhausted, or it yields
        ``None`` (nothing ready until a run in flight finishes)."""
        while not self.exhausted and len(self.in_flight) < self.window:
            try:
                task = next(self.it)
            except StopIteration:
                self.exhausted = True
                return
            if task is None:
                if not self.in_flight:
                    raise RuntimeError("the task source waits for a result while nothing is in flight")
                return
            if self.prepare_task is not None:
                task = self.prepare_task(task)
            self.in_flight[self.backend.submit(task)] = task

    def cancel(self) -> None:
        for fut in self.in_flight:
            try:
                fut.cancel()
            except Exception:  # noqa: BLE001
                pass


def _outcome(backend, fut, task: Task) -> dict:
    """The run's record; a run that failed outside the iteration (a lost worker, a killed task)
    gets a record with ``error`` set. A broken process pool propagates."""
    try:
        return backend.outcome(fut)
    except Exception as exc:  # noqa: BLE001 - a lost worker, a killed task
        if type(exc).__name__ == "BrokenProcessPool" or isinstance(exc, WorkerLostError):
            raise
        return {"config_id": task.config_id, "rep": task.rep, "passed": False,
                "criteria": [], "seconds": 0.0, "finished": _now(), "worker": None,
                "error": f"{type(exc).__name__}: {exc}"[:2000]}
