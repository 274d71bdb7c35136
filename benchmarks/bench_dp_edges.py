"""How close bins drawn under DP (``dp_edges``) come to the quantiles they aim at, and what a draw costs.

For each number of bins k and epsilon, ``--reps`` runs of :func:`dpbundle.mechanisms.edges.dp_edges`
(the release's own draws, through OpenDP) on one column; per run the error is

    max_j | F(q_j) - j / k |      (F(c): the share of values below c; q_j: the j-th drawn edge)

the largest miss, in shares of the records, of any inner edge. The floor is the same error of the
best edges on the candidate grid (ties: a value held by many records cannot be split). Printed:
median and 95th percentile over the runs, the floor, and the seconds a run takes.

    python benchmarks/bench_dp_edges.py                                # simulated persons hours
    python benchmarks/bench_dp_edges.py --csv ma2019.csv --column AGEP --clip 0 99
    python benchmarks/bench_dp_edges.py --csv tx2019.csv --column PINCP --clip -9000 400000 --step 1000 --skip N
"""
from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np

from dpbundle.mechanisms.edges import candidate_grid, dp_edges
from dpbundle.mechanisms.noise import Randomness


def _values(args) -> tuple[np.ndarray, str]:
    import pandas as pd

    if args.csv is None:
        from dpbundle.release.data.example import example_csv

        frame = pd.read_csv(io.BytesIO(example_csv("persons", args.rows, 3)), dtype=str, keep_default_na=False)
        cells, what = frame["hours per week"], f"simulated persons registry, hours ({args.rows:,} rows)"
    else:
        frame = pd.read_csv(args.csv, dtype=str, keep_default_na=False)
        cells, what = frame[args.column], f"{Path(args.csv).name}, {args.column}"
    cells = cells[~cells.isin(args.skip)]
    x = pd.to_numeric(cells).to_numpy(dtype=np.float64)
    return np.clip(x, args.clip[0], args.clip[1]), f"{what}, {x.size:,} values"


def _miss(x_sorted: np.ndarray, edges: list[float], k: int) -> float:
    below = np.searchsorted(x_sorted, np.asarray(edges), side="left") / x_sorted.size
    return float(np.max(np.abs(below - np.arange(1, k) / k)))


def _floor(x_sorted: np.ndarray, grid: list[float], k: int) -> float:
    """The smallest possible miss of k - 1 increasing candidates (greedy per quantile: each target
    is met by its nearest candidate; ties are what keeps it above 0)."""
    shares = np.searchsorted(x_sorted, np.asarray(grid), side="left") / x_sorted.size
    return float(max(np.min(np.abs(shares - j / k)) for j in range(1, k)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--csv", type=Path, help="a CSV with the column (default: a simulated persons registry)")
    ap.add_argument("--column", default="hours per week")
    ap.add_argument("--clip", type=float, nargs=2, default=[1, 80])
    ap.add_argument("--step", type=float, default=None)
    ap.add_argument("--skip", nargs="*", default=["-4"], help="cell texts left out (not-applicable codes)")
    ap.add_argument("--rows", type=int, default=40_000, help="rows of the simulated registry")
    ap.add_argument("--bins", type=int, nargs="*", default=[4, 6, 10])
    ap.add_argument("--epsilons", type=float, nargs="*", default=[0.01, 0.05, 0.1, 0.5])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    x, what = _values(args)
    xs = np.sort(x)
    grid = candidate_grid(args.clip, args.step)
    values, counts = np.unique(x, return_counts=True)
    print(f"{what}; {len(grid)} candidates; {args.reps} runs per setting")
    print(f"{'bins':>4} {'epsilon':>8} {'miss median':>12} {'miss 95%':>9} {'floor':>7} {'s/run':>7}")
    for k in args.bins:
        floor = _floor(xs, grid, k)
        for eps in args.epsilons:
            misses, t0 = [], time.perf_counter()
            for r in range(args.reps):
                edges = dp_edges(values, grid, k, eps, Randomness(), purpose=f"bench {r}", counts=counts)
                misses.append(_miss(xs, edges, k))
            secs = (time.perf_counter() - t0) / args.reps
            print(f"{k:>4} {eps:>8g} {np.median(misses):>12.3f} {np.quantile(misses, 0.95):>9.3f} "
                  f"{floor:>7.3f} {secs:>7.4f}")


if __name__ == "__main__":
    main()
