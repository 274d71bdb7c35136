"""Baseline for the SDNist k-marginal (issue 37): random sub-samples of the real data.

For the ACS Massachusetts and Texas 2019 excerpts (NIST CRC Diverse Communities Data Excerpts),
scores random 10% and 50% sub-samples (without replacement, seeds 0-4) against the full excerpt
on the 10 demographic-focused features, and prints mean and range per excerpt and fraction.

    python benchmarks/bench_kmarginal_subsample.py DATA_DIR [--seeds 5]

DATA_DIR holds acs_excerpt_ma2019.csv, acs_excerpt_tx2019.csv and
acs_excerpt_data_dictionary.json (published by usnistgov/SDNist). The national excerpts are not
used. Figures: docs/kmarginal.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kmarginal import DEMOGRAPHIC_FEATURES, kmarginal, numeric_from_dictionary, read_table  # noqa: E402

EXCERPTS = {"MA": "acs_excerpt_ma2019.csv", "TX": "acs_excerpt_tx2019.csv"}
DICTIONARY = "acs_excerpt_data_dictionary.json"
FRACTIONS = (0.1, 0.5)


def subsample_scores(path: Path, numeric: dict, fraction: float, seeds: int) -> list[float]:
    """k-marginal of ``seeds`` random sub-samples (``fraction`` of the rows) against the whole."""
    table = read_table(path)
    features = list(DEMOGRAPHIC_FEATURES)
    size = round(fraction * len(table))
    scores = []
    for seed in range(seeds):
        rows = np.random.default_rng(seed).choice(len(table), size=size, replace=False)
        scores.append(kmarginal(table, table.iloc[rows], features, numeric))
    return scores


def main(argv: list[str] | None = None) -> int:
    """Print one line per excerpt and fraction: rows, mean, min, max."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", type=Path, nargs="?")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args(argv)
    if args.data_dir is None:
        parser.print_usage(sys.stderr)
        print("bench_kmarginal_subsample: error: give the folder of the ACS excerpts",
              file=sys.stderr)
        return 2
    dictionary = json.loads((args.data_dir / DICTIONARY).read_text("utf-8"))
    numeric = numeric_from_dictionary(dictionary, DEMOGRAPHIC_FEATURES)
    print(f"features: {', '.join(DEMOGRAPHIC_FEATURES)}; percentile-binned: {', '.join(numeric)}")
    print("excerpt  fraction  rows   mean    min     max     (seeds 0-%d)" % (args.seeds - 1))
    for name, file in EXCERPTS.items():
        for fraction in FRACTIONS:
            s = subsample_scores(args.data_dir / file, numeric, fraction, args.seeds)
            rows = round(fraction * len(read_table(args.data_dir / file)))
            print(f"{name:<8} {fraction:<9.0%} {rows:<6} {np.mean(s):<7.1f} {min(s):<7.1f} "
                  f"{max(s):<7.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
