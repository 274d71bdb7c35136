"""Benchmark the DP generators on the births transformation of the 160k NVSS sample.

Usage: python benchmarks/bench_generators.py [--data PATH] [--repeats 5] [--rows 176000]
       [--alternatives first|finest]

For each available generator: fit on the coded data (births spec, first alternative of every
column) and sample ``--rows`` rows; prints the median wall time of fit, sample and total over
``--repeats`` runs, the tracemalloc peak (Python/numpy allocations, in a separate run) and the
process's ru_maxrss. Noise comes from a recording ``Randomness`` (OpenDP), as in a release.
"""
from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "nvss2019_singleton_160k.csv.gz"
SPEC = REPO / "examples" / "births.yaml"


def _code_with_transform(path: Path, alternative: str):
    """The project's own pipeline: release.prepare (raw constraints) + release.transform."""
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.data.transform import transform
    spec = load_spec(SPEC)
    pick = 0 if alternative == "first" else -1
    config = {"columns": {c["name"]: c["alternatives"][pick]["id"] for c in spec.columns}}
    coded = transform(prepare(path, spec), spec, config)
    return (np.asarray(coded.codes, dtype=np.int64), tuple(coded.domain),
            f"release.prepare + release.transform, {alternative} alternatives {config['columns']}")


def _code_fallback(df) -> tuple[np.ndarray, tuple[int, ...], str]:
    """Births transformation by hand: raw constraints, clip, first-alternative bin edges."""
    a = df["mother_age"].to_numpy(np.int64)
    p = df["parity"].to_numpy(np.int64)
    g = df["gestation_week"].to_numpy(np.int64)
    w = df["birth_weight"].to_numpy(np.int64)
    f = df["is_female"].astype(str).str.lower().eq("true").to_numpy()
    month = df["date_of_birth"].astype(str).str.slice(5, 7).astype(np.int64).to_numpy()
    drop = ((w < 500) | (w > 5500) | (g < 22) | (g > 44) | ((a < 23) & (p > 6)) | ((a < 20) & (p > 3))
            | ((g < 26) & (w > 1499)) | ((g < 29) & (w > 2999)) | ((g < 34) & (w > 3999))
            | ((w < 600) & (g > 29)) | ((w < 700) & (g > 32)))
    keep = ~drop

    def binned(v, lo, hi, edges):
        v = np.clip(v[keep], lo, hi)
        return np.searchsorted(np.asarray(edges), v, side="right") - 1

    cols = [
        (month[keep] - 1, 12),
        (binned(a, 17, 45, [17, 18, 20, 25, 30, 35, 40, 43, 45, 46]), 9),
        (binned(p, 1, 11, [1, 2, 4, 7, 11, 12]), 5),
        (binned(g, 28, 42, [28, 29, 32, 34, 37, 42, 43]), 6),
        (f[keep].astype(np.int64), 2),
        (binned(w, 1400, 4500, list(range(1400, 4700, 100))), 32),
    ]
    codes = np.stack([c for c, _ in cols], axis=1).astype(np.int64)
    return codes, tuple(k for _, k in cols), "fallback binning in bench_generators.py"


def load_codes(path: Path, alternative: str) -> tuple[np.ndarray, tuple[int, ...], str]:
    try:
        return _code_with_transform(path, alternative)
    except ImportError as e:  # transform.py not there: bin here (first alternatives only)
        if alternative != "first":
            raise
        print(f"note: release.transform not usable ({e}); binning here", file=sys.stderr)
        import pandas as pd
        return _code_fallback(pd.read_csv(path))


def generators(epsilon: float, which: set[str]) -> list[tuple[str, Callable[[], Any]]]:
    out: list[tuple[str, Callable[[], Any]]] = []
    from dpbundle.mechanisms.privbayes import PrivBayes
    if "privbayes" in which:
        out.append(("privbayes theta=30 split=0.25",
                    lambda: PrivBayes(epsilon, epsilon_split=0.25, theta=30)))
    if "privbayes-degree" in which:
        out.append(("privbayes degree=2 split=0.25",
                    lambda: PrivBayes(epsilon, epsilon_split=0.25, degree=2)))
    if "mst_pure" in which:
        from dpbundle.mechanisms.mst import PureMST
        out.append(("mst_pure splits=1/3,1/3", lambda: PureMST(epsilon)))
    if "privsyn" in which:
        from dpbundle.mechanisms.privsyn import PrivSyn
        out.append(("privsyn split=0.1 densemarg", lambda: PrivSyn(epsilon)))
    try:
        from dpbundle.mechanisms import marginals  # type: ignore
    except ImportError:
        return out
    for key, cls_name in (("marginals", "NoisyMarginals"), ("crosstab", "NoisyCrossTab")):
        cls = getattr(marginals, cls_name, None)
        if cls is not None and key in which:
            out.append((cls_name, lambda cls=cls: cls(epsilon)))
    return out


def run_once(make, codes, domain, rows: int) -> tuple[float, float, np.ndarray]:
    from dpbundle.mechanisms.noise import Randomness
    rand = Randomness()
    gen = make()
    t0 = time.perf_counter()
    model = gen.fit(codes, domain, rand)
    t1 = time.perf_counter()
    synth = model.sample(rows, rand.rng("benchmark sample"))
    t2 = time.perf_counter()
    assert synth.shape == (rows, len(domain)) and synth.dtype == np.int64
    assert np.all((synth >= 0) & (synth < np.asarray(domain)))
    return t1 - t0, t2 - t1, synth


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", type=int, default=176_000)
    ap.add_argument("--epsilon", type=float, default=4.0)
    ap.add_argument("--alternatives", choices=["first", "finest"], default="first",
                    help="births column alternatives: the first of each column (default) or the last (finest)")
    ap.add_argument("--generators", default="privbayes,privbayes-degree,mst_pure,privsyn,marginals,crosstab",
                    help="comma-separated subset of privbayes,privbayes-degree,mst_pure,privsyn,marginals,crosstab")
    args = ap.parse_args(argv)

    codes, domain, how = load_codes(args.data, args.alternatives)
    print(f"data: {args.data.resolve()}  n={codes.shape[0]}  domain={domain}  ({how})")
    print(f"epsilon={args.epsilon}  rows sampled={args.rows}  repeats={args.repeats}")
    rows_out = []
    for name, make in generators(args.epsilon, set(args.generators.split(","))):
        try:
            fits, samples, totals = [], [], []
            for _ in range(args.repeats):
                gc.collect()
                f, s, _ = run_once(make, codes, domain, args.rows)
                fits.append(f); samples.append(s); totals.append(f + s)
            gc.collect()
            tracemalloc.start()
            run_once(make, codes, domain, args.rows)
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB (Linux)
            rows_out.append((name, statistics.median(fits), statistics.median(samples),
                             statistics.median(totals), peak / 2**20, rss))
        except Exception as e:  # report and continue with the next generator
            rows_out.append((name, float("nan"), float("nan"), float("nan"), float("nan"), float("nan")))
            print(f"{name}: failed: {type(e).__name__}: {e}", file=sys.stderr)
    hdr = f"{'generator':34s} {'fit s':>8s} {'sample s':>9s} {'total s':>8s} {'tracemalloc MiB':>16s} {'maxrss MiB':>11s}"
    print(hdr)
    print("-" * len(hdr))
    for name, f, s, t, p, r in rows_out:
        print(f"{name:34s} {f:8.3f} {s:9.3f} {t:8.3f} {p:16.1f} {r:11.1f}")
    print("(maxrss is the whole process so far, cumulative over the rows above)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
