"""Generators side by side on the births 160k sample, in one run (issue 13).

For PrivBayes (as in 2024), PrivBayes with one-way raking, PrivSyn, MST (native, pure DP) and,
when the `mbi` extra is installed, OpenDP's mbi MST and AIM: each on its best configuration of
the births sweep (coarse bins; docs/sweep-births-nvss160k.md), at the births spec's generation
epsilon (4.0):

- fit + sample time (sample = 1.1 n rows, as an iteration draws) and tracemalloc peak;
- mean and max total variation distance of all 2-way marginals, synthetic vs real T;
- acceptance of the eight births criteria over --reps full iterations (DP noise included).

    python benchmarks/bench_side_by_side.py [--data PATH] [--reps 20] [--only privsyn,mbi]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COARSE = {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
          "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"}
CONFIGS = {
    "privbayes (2024)": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.1, "theta": 50},
    "privbayes + oneway": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.1,
                           "theta": 30, "oneway": "measure", "oneway_split": 0.2},
    "privsyn": {"type": "privsyn"},
    "mst_pure": {"type": "mst_pure"},
    "mbi mst (zCDP)": {"type": "mst"},
    "mbi aim (zCDP)": {"type": "aim"},
}


def tvd_2way(real: np.ndarray, synth: np.ndarray, domain: tuple[int, ...]) -> tuple[float, float]:
    """Mean and max over column pairs of 1/2 sum |p_real - p_synth| of the 2-way marginal."""
    out = []
    for i, j in itertools.combinations(range(len(domain)), 2):
        k = domain[i] * domain[j]
        a = np.bincount(real[:, i] * domain[j] + real[:, j], minlength=k) / real.shape[0]
        b = np.bincount(synth[:, i] * domain[j] + synth[:, j], minlength=k) / synth.shape[0]
        out.append(0.5 * float(np.abs(a - b).sum()))
    return float(np.mean(out)), float(np.max(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--timing-reps", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated substrings of generator names to run")
    args = ap.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data}: not found")
    from dpbundle.mechanisms.generators import generator_types
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.scheme.iteration import make_config_generator, run_iteration
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.data.transform import transform

    spec = load_spec(ROOT / "examples" / "births.yaml")
    prepared = prepare(args.data, spec)
    available = generator_types()
    print(f"births spec, generation epsilon {spec.raw['privacy']['epsilon_generation']}, "
          f"n = {prepared.n:,}, coarse bins, min_count 2, {args.reps} iterations each\n")
    print("| generator | fit s | sample s | peak MiB | mean 2-way TVD | max 2-way TVD | acceptance |")
    print("|---|---|---|---|---|---|---|")
    only = [w.strip() for w in args.only.split(",") if w.strip()]
    for name, gen in CONFIGS.items():
        if only and not any(w in name for w in only):
            continue
        if not available.get(gen["type"], {}).get("available"):
            print(f"| {name} | not installed ({available.get(gen['type'], {}).get('reason', '?')[:60]}) |||||")
            continue
        config = {"columns": dict(COARSE), "generator": gen, "projection": {"min_count": 2}}
        real = transform(prepared, spec, config)
        fits, samples, tvds, peak = [], [], [], 0.0
        m = int(round(1.1 * real.n))
        for _ in range(args.timing_reps):
            generator = make_config_generator(spec, config)
            tracemalloc.start()
            t0 = time.perf_counter()
            model = generator.fit(real.codes, real.domain, Randomness())
            t1 = time.perf_counter()
            rows = model.sample(m, np.random.default_rng())
            t2 = time.perf_counter()
            peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
            tracemalloc.stop()
            fits.append(t1 - t0)
            samples.append(t2 - t1)
            tvds.append(tvd_2way(real.codes, rows, real.domain))
        passed = sum(run_iteration(prepared, spec, config, Randomness()).passed for _ in range(args.reps))
        print(f"| {name} | {statistics.median(fits):.3f} | {statistics.median(samples):.3f} | "
              f"{peak:.0f} | {statistics.mean(t[0] for t in tvds):.4f} | "
              f"{statistics.mean(t[1] for t in tvds):.4f} | {passed}/{args.reps} |")


if __name__ == "__main__":
    main()
