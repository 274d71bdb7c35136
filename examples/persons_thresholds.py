"""What a bootstrap resample of the persons data achieves on each acceptance criterion.

A synthetic data set can at best be like another sample from the same population. So the exact
(noise-free) value of each criterion of examples/persons.yaml between the data T and a bootstrap
resample B of T (n rows drawn with replacement) is a floor for a threshold: a threshold below what
B achieves would reject good candidates. The thresholds of the spec are chosen above the 95th
percentile of these values plus room for the criterion's DP noise (docs/sweep-persons.md).

Runs on a freshly SIMULATED public-like copy (`dpbundle example persons`, default seed 7, not the
release example's seed), for every combination of the spec's column alternatives.

Usage:
  python examples/persons_thresholds.py [--rows 45000] [--seed 7] [--reps 20] [--json out.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria.base import EvalContext, make_criterion
from dpbundle.release.data.example import write_example
from dpbundle.release.data.prepare import prepare
from dpbundle.release.spec.load import load_spec
from dpbundle.release.data.transform import transform

SPEC = Path(__file__).resolve().with_name("persons.yaml")


def column_configs(spec) -> list[dict]:
    """Every combination of the released columns' alternatives (the generator does not matter here)."""
    names = [c["name"] for c in spec.columns]
    choices = [[a["id"] for a in c["alternatives"]] for c in spec.columns]
    return [{"columns": dict(zip(names, combo))} for combo in itertools.product(*choices)]


def resample_values(real: Coded, spec_dict: dict, criteria: list, reps: int,
                    rng: np.random.Generator) -> dict[str, list[float]]:
    """Exact criterion values between T and `reps` bootstrap resamples of T."""
    out: dict[str, list[float]] = {c.id: [] for c in criteria}
    n = real.codes.shape[0]
    for _ in range(reps):
        boot = Coded(real.codes[rng.integers(0, n, size=n)], real.columns)
        for crit in criteria:
            ctx = EvalContext(real=real, synth=boot, spec=spec_dict)
            out[crit.id].append(float(crit.value(ctx)))
    return out


def summarise(values: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Median, 95th percentile and maximum of each criterion's resample values."""
    return {k: {"median": float(np.median(v)), "p95": float(np.quantile(v, 0.95)), "max": float(np.max(v))}
            for k, v in values.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=45_000)
    ap.add_argument("--seed", type=int, default=7, help="seed of the simulated public-like copy")
    ap.add_argument("--reps", type=int, default=20, help="bootstrap resamples per configuration")
    ap.add_argument("--configs", type=int, default=0, help="measure only the first K column configurations (0 = all)")
    ap.add_argument("--json", type=Path, help="write the per-configuration figures here")
    ap.add_argument("--spec", type=Path, default=SPEC, help="spec (default: examples/persons.yaml)")
    ap.add_argument("--data", type=Path, help="measure on this CSV instead of a simulated copy")
    args = ap.parse_args(argv)

    spec = load_spec(args.spec)
    criteria = [make_criterion(entry) for entry in spec.criteria]
    rng = np.random.Generator(np.random.PCG64(args.seed + 1))
    started = time.time()
    if args.data is not None:
        prepared = prepare(args.data, spec)
        print(f"{args.data}: n = {prepared.n:,} after the raw constraints")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp) / "persons.csv"
            write_example(data, rows=args.rows, seed=args.seed, name="persons")
            prepared = prepare(data, spec)
        print(f"simulated persons copy: seed {args.seed}, {args.rows:,} rows, n = {prepared.n:,} after the raw constraints")
    configs = column_configs(spec)
    if args.configs:
        configs = configs[:args.configs]
    per_config = []
    pooled: dict[str, list[float]] = {c.id: [] for c in criteria}
    for config in configs:
        real = transform(prepared, spec, config)
        values = resample_values(real, spec.raw, criteria, args.reps, rng)
        for k, v in values.items():
            pooled[k].extend(v)
        per_config.append({"columns": config["columns"], "summary": summarise(values)})
    overall = summarise(pooled)
    worst = {k: max(pc["summary"][k]["p95"] for pc in per_config) for k in pooled}
    print(f"{len(configs)} column configurations x {args.reps} resamples, {time.time() - started:.0f} s")
    print(f"{'criterion':<16} {'median':>10} {'p95':>10} {'max':>10} {'worst p95':>10}  threshold")
    for crit in criteria:
        s = overall[crit.id]
        print(f"{crit.id:<16} {s['median']:>10.4g} {s['p95']:>10.4g} {s['max']:>10.4g} {worst[crit.id]:>10.4g}  "
              f"{crit.threshold()[0]:.4g}")
    if args.json:
        args.json.write_text(json.dumps({"seed": args.seed, "rows": args.rows, "n": prepared.n, "reps": args.reps,
                                         "overall": overall, "worst_config_p95": worst,
                                         "per_config": per_config}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
