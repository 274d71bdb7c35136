"""National scale (issue 38): `dpbundle sweep` over a 10M-row public sample on a Dask LocalCluster.

Writes the sample (the public 160k births sample resampled with replacement to ``--rows`` rows,
as benchmarks/bench_national.py does), starts a ``distributed.LocalCluster`` of ``--workers``
single-threaded worker processes, each with a memory limit (``--memory-limit``: Dask pauses a
worker at 80% of it and restarts one above 95%), runs ``dpbundle sweep ... --scheduler ADDRESS``
on it, and reports the wall time and each worker's peak resident memory (sampled every 0.5 s
through the scheduler) and whether any worker was restarted.

    python benchmarks/bench_sweep_dask.py --rows 10000000 [--dir /tmp/sweep10m] [--keep]
        [--spec examples/births-recommended.yaml]
        [--configs examples/births-recommended-narrowed-nvss160k.yaml] [--reps 3]

Figures: docs/benchmarks.md, "National scale (issue 38)". Nothing is committed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_national import write_resampled  # noqa: E402


def _rss() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-limit", default="3GB")
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "births-recommended.yaml")
    ap.add_argument("--configs", type=Path, default=ROOT / "examples" / "births-recommended-narrowed-nvss160k.yaml")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()

    from distributed import Client, LocalCluster

    where = a.dir or Path(tempfile.mkdtemp(prefix="sweep-dask-"))
    where.mkdir(parents=True, exist_ok=True)
    data = where / f"public-{a.rows}.csv"
    if not data.exists():
        print(f"generating {data.name}: {write_resampled(data, a.rows):.1f} s", flush=True)
    out = where / "sweep"
    shutil.rmtree(out, ignore_errors=True)
    cluster = LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                           memory_limit=a.memory_limit, dashboard_address=None)
    client = Client(cluster)
    peaks: dict[str, int] = {}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            try:
                for addr, rss in client.run(_rss).items():
                    peaks[addr] = max(peaks.get(addr, 0), rss)
            except Exception:   # a worker restarting: sample again later
                pass

    pids_before = set(client.run(os.getpid).values())
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    exe = str(Path(sys.executable).parent / "dpbundle")
    t0 = time.perf_counter()
    proc = subprocess.run([exe, "sweep", str(a.spec), str(data), "--out", str(out), "--configs", str(a.configs),
                           "--allow-other-spec", "--reps", str(a.reps), "--max-reps", str(a.reps), "--no-report",
                           "--quiet", "--scheduler", cluster.scheduler_address],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "100"})
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    pids_after = set(client.run(os.getpid).values())
    client.close()
    cluster.close()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"sweep failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    runs = sum(1 for _ in (out / "runs.jsonl").open())
    print(f"sweep of {a.rows:,} rows, {runs} runs on a LocalCluster of {a.workers} workers "
          f"(memory limit {a.memory_limit} each): {wall:.1f} s")
    for addr, peak in sorted(peaks.items()):
        print(f"  worker {addr}: peak {peak / 2**20:,.0f} MB")
    print(f"  workers restarted: {'none' if pids_before == pids_after else 'yes'}")
    if not a.keep and a.dir is None:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
