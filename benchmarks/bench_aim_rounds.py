"""aim_pure's rounds per column against workload error (issue 25): why the default is 2, not AIM's 16.

For the births 160k sample and the persons example data (the datasets, columns and error metric
of bench_side_by_side.py), at generation epsilon 0.5, 1 and 4, fit ``aim_pure`` with
``rounds_per_column`` 1, 2, 4 and 16 (T = that x the number of columns) and report the
largest and the mean |share difference| over all cells of all 2- and 3-way marginals
(mean of --fits fits, samples of n rows), and the fit time.

    python benchmarks/bench_aim_rounds.py [--fits 5] [--dataset births|persons|both]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_side_by_side import ROOT, datasets, environment, spec_at, workload_error  # noqa: E402

ROUNDS = (1, 2, 4, 16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz")
    ap.add_argument("--dataset", choices=("births", "persons", "both"), default="both")
    ap.add_argument("--persons-data", type=Path, default=None)
    ap.add_argument("--persons-rows", type=int, default=45_000)
    ap.add_argument("--persons-seed", type=int, default=2023)
    ap.add_argument("--epsilons", default="0.5,1,4")
    ap.add_argument("--fits", type=int, default=5)
    args = ap.parse_args()
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.data.transform import transform
    from dpbundle.release.scheme.iteration import make_config_generator

    print(f"# aim_pure: rounds per column\n\n{environment()}\n")
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec_path, data, what, columns in datasets(args, Path(tmp)):
            print(f"## {name} ({what}), {args.fits} fits each\n")
            print("| epsilon | rounds_per_column | fit s | 2-way err max / mean | 3-way err max / mean |")
            print("|---|---|---|---|---|")
            for eps in (float(e) for e in args.epsilons.split(",")):
                spec = spec_at(spec_path, eps)
                prepared = prepare(data, spec)
                for rpc in ROUNDS:
                    config = {"columns": columns, "generator": {"type": "aim_pure", "rounds_per_column": rpc},
                              "projection": {"min_count": 2}}
                    real = transform(prepared, spec, config)
                    errs, times = [], []
                    for _ in range(args.fits):
                        gen = make_config_generator(spec, config)
                        t0 = time.perf_counter()
                        model = gen.fit(real.codes, real.domain, Randomness())
                        times.append(time.perf_counter() - t0)
                        synth = model.sample(real.n, np.random.default_rng())
                        errs.append(workload_error(real.codes, synth, real.domain))
                    cell = [f"{statistics.mean(e[k][0] for e in errs):.4f} / "
                            f"{statistics.mean(e[k][1] for e in errs):.5f}" for k in (2, 3)]
                    print(f"| {eps:g} | {rpc} | {statistics.median(times):.2f} | {cell[0]} | {cell[1]} |",
                          flush=True)
            print()


if __name__ == "__main__":
    main()
