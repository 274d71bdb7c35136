"""Split a public sample into a tuning half and a checking half (issue 25).

A sweep that chooses configurations and a re-measurement of the chosen ones on the same rows
overstate acceptance; the births <= 3 list is chosen on one half and checked on the other.
The split is a seeded permutation of the rows (header kept), so it is reproducible:

    python benchmarks/split_sample.py examples/data/nvss2019_singleton_160k.csv.gz OUTDIR [--seed 2026] [--copies 2]

writes OUTDIR/tune.csv and OUTDIR/check.csv (80,000 rows each for the 160k sample). With
``--copies 2`` every row of a half is written twice: a half then has the registry's size (160,000)
and its own empirical distribution. Several criteria depend on n (the DP noise relative to the
counts, the share of real records without a close synthetic one), so a half at half the size
would measure a harder problem than the release's.
"""
from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--copies", type=int, default=1, help="write every row of a half this many times")
    args = ap.parse_args()
    opener = gzip.open if args.data.suffix == ".gz" else open
    with opener(args.data, "rt", newline="") as f:
        header, *rows = f.read().splitlines()
    order = np.random.default_rng(args.seed).permutation(len(rows))
    half = len(rows) // 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name, idx in (("tune", np.sort(order[:half])), ("check", np.sort(order[half:]))):
        body = [rows[i] for i in idx for _ in range(args.copies)]
        (args.out / f"{name}.csv").write_text("\n".join([header, *body]) + "\n")
        print(f"{args.out / name}.csv: {len(body):,} rows ({len(idx):,} distinct rows of the sample)")


if __name__ == "__main__":
    main()
