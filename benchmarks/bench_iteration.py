"""Benchmark one iteration of the scheme (issue 4): per-phase wall time and peak memory.

    python benchmarks/bench_iteration.py [--data PATH] [--repeats 5] [--scale-rows 1600000]

Runs the births spec's iteration (PrivBayes theta=30, epsilon_split=0.25, min_count 2, the
first binning alternative of every column, all eight criteria) on the 160k NVSS sample and
prints the median of each phase (transform, fit, sample, constrain+sample, project, each
criterion) and of the whole iteration, plus the peak resident memory. Then it resamples the data
to --scale-rows rows (with replacement, seeded) and times the same iteration there, to show how
the cost grows with n. Goals on the 2-core machine: median <= 10 s, faithfulness <= 1 s, peak
memory <= 1 GB at 160k rows.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.release.iteration import run_iteration
from dpbundle.release.prepare import prepare
from dpbundle.release.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {
    "columns": {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
                "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"},
    "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
    "projection": {"min_count": 2},
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def time_iterations(prepared, spec, repeats: int) -> tuple[dict[str, list[float]], list[float], int]:
    phases: dict[str, list[float]] = {}
    totals = []
    passed = 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run_iteration(prepared, spec, CONFIG, Randomness(Transcript()))
        totals.append(time.perf_counter() - t0)
        passed += result.passed
        for name, seconds in result.timings.items():
            phases.setdefault(name, []).append(seconds)
    return phases, totals, passed


def report(title: str, phases: dict[str, list[float]], totals: list[float]) -> None:
    print(f"\n{title}")
    print(f"{'phase':<28}{'median s':>10}{'max s':>10}")
    for name, values in phases.items():
        print(f"{name:<28}{statistics.median(values):>10.3f}{max(values):>10.3f}")
    print(f"{'whole iteration':<28}{statistics.median(totals):>10.3f}{max(totals):>10.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/nvss2019_singleton_160k.csv.gz")
    parser.add_argument("--spec", type=Path, default=ROOT / "examples/births.yaml")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scale-rows", type=int, default=1_600_000, help="0 to skip the scaling run")
    parser.add_argument("--scale-repeats", type=int, default=2)
    args = parser.parse_args()

    spec = load_spec(args.spec)
    t0 = time.perf_counter()
    prepared = prepare(args.data, spec)
    print(f"data: {args.data} -> n = {prepared.n:,} (preparation {time.perf_counter() - t0:.2f} s)")
    phases, totals, passed = time_iterations(prepared, spec, args.repeats)
    report(f"one iteration at n = {prepared.n:,} ({args.repeats} runs; {passed} passed)", phases, totals)
    print(f"peak resident memory so far: {peak_rss_mb():,.0f} MB")

    if args.scale_rows:
        rng = np.random.Generator(np.random.PCG64(20241122))
        big = prepared.subset(rng.integers(0, prepared.n, size=args.scale_rows))
        phases, totals, passed = time_iterations(big, spec, args.scale_repeats)
        report(f"one iteration at n = {big.n:,} (resampled; {args.scale_repeats} runs)", phases, totals)
        print(f"peak resident memory: {peak_rss_mb():,.0f} MB")


if __name__ == "__main__":
    main()
