"""Throughput of `dpbundle sweep` (runs per minute) with 1 and 2 local workers (and optionally Dask).

Runs the REAL iteration on public data: the same --sample configurations (fixed seed) and --reps
for every worker count, each in a fresh output directory, without the report (which is not part
of the throughput). Prints one line per setting, e.g.

    workers=1  runs=36  wall=20.1s  runs/min=107.5  steady-state runs/min=131.0  (median iteration ...)
    workers=2  runs=36  wall=13.0s  runs/min=166.2  steady-state runs/min=240.3  ...  steady-state speed-up x1.83

"runs/min" is over the whole call (data loading and worker start-up included); "steady-state"
counts from the first finished run to the last.

Usage:
    python benchmarks/bench_sweep.py [--data examples/data/nvss2019_singleton_10k.csv]
        [--spec examples/births.yaml] [--sample 12] [--reps 3] [--workers 1 2] [--scheduler tcp://...]
        [--local-cluster]   # also start a Dask LocalCluster with 2 single-threaded workers and time it
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(spec: Path, data: Path, *, sample: int, reps: int, seed: int, workers: int | None = None,
          scheduler: str | None = None) -> dict:
    from dpbundle.release.sweep.run import read_runs, run_sweep

    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        out = Path(tmp) / "S"
        stamps: list[float] = []
        t0 = time.perf_counter()
        res = run_sweep(spec, data, out, reps=reps, sample=sample, seed=seed, workers=workers,
                        scheduler=scheduler, progress=False, report=False, utility="none",
                        on_run=lambda _rec: stamps.append(time.perf_counter()))
        wall = time.perf_counter() - t0
        runs = read_runs(out)
        secs = [r["seconds"] for r in runs.values() if not r.get("error")]
        errors = sum(1 for r in runs.values() if r.get("error"))
    return {"runs": res.new_runs, "wall": wall, "sweep_seconds": res.seconds,
            "runs_per_minute": res.new_runs / wall * 60.0 if wall > 0 else float("nan"),
            # steady state: from the first finished run to the last (no worker start-up, no data loading)
            "steady_runs_per_minute": ((len(stamps) - 1) / (stamps[-1] - stamps[0]) * 60.0
                                       if len(stamps) > 2 and stamps[-1] > stamps[0] else float("nan")),
            "median_iteration": statistics.median(secs) if secs else float("nan"),
            "accepted": res.summary["accepted"], "errors": errors, "workers": res.workers, "backend": res.backend}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "births.yaml")
    ap.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "nvss2019_singleton_10k.csv")
    ap.add_argument("--sample", type=int, default=12)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20240501)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--scheduler", default=None, help="also time a Dask cluster at this address")
    ap.add_argument("--local-cluster", action="store_true", help="also time a Dask LocalCluster (2 workers x 1 thread)")
    args = ap.parse_args(argv)
    if not args.data.is_file():
        print(f"no data file {args.data}", file=sys.stderr)
        return 2
    print(f"sweep throughput: {args.spec.name} on {args.data.name}, {args.sample} configuration(s) x {args.reps} rep(s), "
          f"real iteration, no report", flush=True)
    base = None
    for w in args.workers:
        r = bench(args.spec, args.data, sample=args.sample, reps=args.reps, seed=args.seed, workers=w)
        base = base or r["steady_runs_per_minute"]
        speed = (f"  steady-state speed-up x{r['steady_runs_per_minute'] / base:.2f}"
                 if base and w != args.workers[0] else "")
        print(f"workers={w}  runs={r['runs']}  wall={r['wall']:.1f}s  runs/min={r['runs_per_minute']:.1f}  "
              f"steady-state runs/min={r['steady_runs_per_minute']:.1f}  "
              f"(median iteration {r['median_iteration']:.2f} s, accepted {r['accepted']}, errors {r['errors']}){speed}",
              flush=True)
    schedulers = [args.scheduler] if args.scheduler else []
    cluster = None
    if args.local_cluster:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                               host="127.0.0.1")
        schedulers.append(cluster.scheduler_address)
    try:
        for address in schedulers:
            r = bench(args.spec, args.data, sample=args.sample, reps=args.reps, seed=args.seed, scheduler=address)
            print(f"dask {address} ({r['workers']} worker thread(s))  runs={r['runs']}  wall={r['wall']:.1f}s  "
                  f"runs/min={r['runs_per_minute']:.1f}  steady-state runs/min={r['steady_runs_per_minute']:.1f}  "
                  f"(median iteration {r['median_iteration']:.2f} s)", flush=True)
    finally:
        if cluster is not None:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
