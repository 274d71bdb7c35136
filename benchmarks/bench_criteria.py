"""Time every acceptance criterion of the births spec on the 160k NVSS sample.

T = the births transformation (first alternative of every column) of
examples/data/nvss2019_singleton_160k.csv.gz; C = T with a share of rows (default 5%)
perturbed: each chosen row moves one random column by +-1 code (clipped to the domain) and then
C is shuffled. Prints one row per criterion: exact value (the transcript's true value; for the
regression the non-private OLS-vs-OLS distance), DP value, threshold, sensitivity, noise std,
seconds (best of --repeat runs of evaluate: value + sensitivity + DP release).

    python benchmarks/bench_criteria.py [--data PATH] [--perturb 0.05] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz"


def load_coded(data: Path, which: int = 0):
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.data.transform import transform

    spec = load_spec(ROOT / "examples" / "births.yaml")
    config = {"columns": {c["name"]: c["alternatives"][min(which, len(c["alternatives"]) - 1) if which >= 0 else -1]["id"] for c in spec.columns}}
    prepared = prepare(data, spec)
    return spec, transform(prepared, spec, config)


def perturb(real, share: float, rng: np.random.Generator):
    codes = real.codes.copy()
    n, d = codes.shape
    rows = rng.choice(n, size=int(share * n), replace=False)
    cols = rng.integers(0, d, size=rows.size)
    steps = rng.choice([-1, 1], size=rows.size)
    dom = np.asarray(real.domain)
    codes[rows, cols] = np.clip(codes[rows, cols] + steps, 0, dom[cols] - 1)
    return real.with_codes(codes[rng.permutation(n)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--perturb", type=float, default=0.05)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--alternative", type=int, default=0,
                    help="index of every column's alternative (0 = first, -1 = last: finest bins)")
    args = ap.parse_args()

    from dpbundle.mechanisms.criteria import EvalContext, make_criterion
    from dpbundle.mechanisms.noise import Randomness

    t0 = time.perf_counter()
    spec, real = load_coded(args.data, args.alternative)
    print(f"loaded + transformed n={real.n} domain={real.domain} in {time.perf_counter() - t0:.1f} s")
    synth = perturb(real, args.perturb, np.random.default_rng(12345))  # benchmark input only
    rows = []
    total = 0.0
    best_times: dict[str, float] = {}
    for rep in range(args.repeat):
        ctx = EvalContext(real=real, synth=synth, spec=spec.raw)
        rand = Randomness()
        for entry in spec.criteria:
            crit = make_criterion(entry)
            t = time.perf_counter()
            res = crit.evaluate(ctx, rand)
            dt = time.perf_counter() - t
            best_times[crit.id] = min(dt, best_times.get(crit.id, np.inf))
            if rep == 0:
                rec = rand.transcript.records[-1]
                exact = rec["true"] if isinstance(rec["true"], float) else crit.value(ctx)
                rows.append((crit, res, exact))
    print(f"\n{'criterion':<15}{'type':<27}{'exact':>10}{'DP':>10}{'thresh':>9}"
          f"{'sens':>11}{'noise sd':>10}{'pass':>6}{'sec':>8}")
    for crit, res, exact in rows:
        total += best_times[crit.id]
        print(f"{crit.id:<15}{crit.type:<27}{exact:>10.4g}{res.dp_value:>10.4g}{res.threshold:>9.4g}"
              f"{res.sensitivity:>11.3g}{res.noise_std:>10.3g}{str(res.passed):>6}"
              f"{best_times[crit.id]:>8.3f}")
    print(f"{'total':<15}{'':<27}{'':>10}{'':>10}{'':>9}{'':>11}{'':>10}{'':>6}{total:>8.3f}")


if __name__ == "__main__":
    main()
