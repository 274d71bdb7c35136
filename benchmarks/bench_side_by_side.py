"""Generators side by side on the births 160k sample and the persons example (issues 13, 25).

For each dataset (--dataset births|persons|both) and each generation epsilon (--epsilons,
default 0.5, 1 and 4; the spec's privacy.epsilon_generation is replaced, everything else of the
spec is kept), each generator of CONFIGS that is installed: PrivBayes (as in 2024), PrivBayes
with one-way raking, PrivSyn, MST (native, pure DP), the native adaptive generator aim_pure
and, when the `mbi` extra is installed, OpenDP's mbi MST and AIM (also pure DP: OpenDP's
MaxDivergence measure, checked and printed in the "accounting" column):

- fit and sample time (sample = 1.1 n rows, as an iteration draws; the median of the untraced
  timing reps, or of the one traced rep, marked *, when --timing-reps is 1);
- memory of the first timing rep (fit + sample): the tracemalloc peak (Python and numpy
  allocations) and the growth of the process's peak resident set (VmHWM, reset before the
  rep through /proc/self/clear_refs; ru_maxrss growth where that is not possible, which
  then shows 0 when an earlier generator already set a higher peak). JAX (mbi) allocates
  outside tracemalloc: only the RSS column sees it;
- workload error: max and mean absolute error in the cell SHARES of every 1-, 2- and 3-way
  marginal of the released columns, the raw synthetic sample (before the synthetic
  constraints and the projection) vs the real table T, for each k; the mean is over all
  cells of all k-way tables; both averaged over the timing reps;
- acceptance of the spec's criteria over --reps full iterations (run_iteration: DP noise of
  generator and criteria included), and the criteria that failed, with their counts.

Datasets. births: examples/data/nvss2019_singleton_160k.csv.gz, spec examples/births.yaml,
the COARSE bins (the best configuration of the births sweep, docs/sweep-births-nvss160k.md).
persons: `dpbundle example persons` data (release/data/example_persons.py, 45,000 rows,
seed 2023, or --persons-data FILE), spec examples/persons.yaml, the first alternative of every
column. Both with projection min_count 2.

Time limit: --max-fit-seconds S (default 1200): once one fit of a generator has taken longer,
its remaining timing reps and its acceptance iterations at that epsilon are skipped. A running
fit is NOT interrupted: a SIGALRM exception raised inside OpenDP's Rust -> Python callbacks (the
mbi algorithms run as such callbacks) is swallowed there and then aborts the process
("free(): invalid pointer"), so an interrupt is not safe.

    python benchmarks/bench_side_by_side.py [--dataset both] [--epsilons 0.5,1,4] [--reps 20]
        [--timing-reps 5] [--only privsyn,aim_pure] [--max-fit-seconds 1200]
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
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
    "aim_pure": {"type": "aim_pure"},
    "mbi mst": {"type": "mst"},
    "mbi aim": {"type": "aim"},
}
VERSIONS = ("dpbundle", "numpy", "scipy", "opendp", "mbi", "jax", "jaxlib", "polars", "pyarrow",
            "scikit-learn")
K_MAX = 3


# ---------------------------------------------------------------------------- memory

def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_peak_start() -> tuple[str, int]:
    """Start a peak-RSS measurement: ("hwm", current RSS KiB) after resetting VmHWM, else
    ("maxrss", ru_maxrss KiB)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")   # resets the peak resident set size (VmHWM), Linux >= 4.0
        rss = _status_kib("VmRSS")
        if rss is not None:
            return "hwm", rss
    except OSError:
        pass
    return "maxrss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss_peak_growth_mib(start: tuple[str, int]) -> str:
    kind, base = start
    if kind == "hwm":
        hwm = _status_kib("VmHWM")
        return f"{(hwm - base) / 1024:.0f}" if hwm is not None else "?"
    return f"{(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024:.0f} (maxrss)"


# ---------------------------------------------------------------------------- metrics

def workload_error(real: np.ndarray, synth: np.ndarray, domain: tuple[int, ...],
                   k_max: int = K_MAX) -> dict[int, tuple[float, float]]:
    """k -> (max, mean) over all cells of all k-way marginals of |share_real - share_synth|."""
    out = {}
    for k in range(1, min(k_max, len(domain)) + 1):
        worst, total, cells = 0.0, 0.0, 0
        for cols in itertools.combinations(range(len(domain)), k):
            shape = tuple(domain[c] for c in cols)
            size = int(np.prod(shape))
            a = np.bincount(np.ravel_multi_index(tuple(real[:, c] for c in cols), shape),
                            minlength=size) / real.shape[0]
            b = np.bincount(np.ravel_multi_index(tuple(synth[:, c] for c in cols), shape),
                            minlength=size) / max(synth.shape[0], 1)
            err = np.abs(a - b)
            worst = max(worst, float(err.max()))
            total += float(err.sum())
            cells += size
        out[k] = (worst, total / cells)
    return out


def accounting(generator, domain: tuple[int, ...]) -> str:
    """What the generator's privacy map says at change-one distance 1, and under which measure."""
    if getattr(generator, "type", "") in ("aim", "mst") and hasattr(generator, "measurement"):
        _, meas = generator.measurement(domain)          # public: no data (empty frame)
        measure = str(meas.output_measure)
        measure = "MaxDivergence" if "MaxDivergence" in measure else measure
        return f"pure ε-DP (OpenDP {measure}, δ=0; map(1)={float(meas.map(1)):.6g})"
    return f"pure ε-DP (native; map(1)={generator.privacy_map(1):.6g})"


# ---------------------------------------------------------------------------- setup

def environment() -> str:
    from importlib import metadata

    vers = []
    for name in VERSIONS:
        try:
            vers.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            vers.append(f"{name} -")
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        commit = f"{head}{' + uncommitted changes' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        commit = "?"
    return (f"{datetime.datetime.now().astimezone().isoformat(timespec='seconds')}; "
            f"Python {platform.python_version()} ({sys.executable}); {os.cpu_count()} CPUs; "
            f"commit {commit}\n\n{', '.join(vers)}")


def spec_at(path: Path, epsilon: float):
    """The spec of `path` with privacy.epsilon_generation = epsilon (validated like a file)."""
    from dpbundle.release.spec.load import read_spec_document, spec_of

    doc = read_spec_document(path)
    doc["privacy"]["epsilon_generation"] = float(epsilon)
    return spec_of(doc, source=f"{path} (epsilon_generation {epsilon:g})")


def first_alternatives(spec) -> dict[str, str]:
    return {c["name"]: c["alternatives"][0]["id"] for c in spec.raw["columns"]}


def datasets(args, tmp: Path) -> list[tuple[str, Path, Path, str, dict]]:
    """(name, spec path, data path, data description, columns) of the datasets asked for."""
    from dpbundle.release.spec.load import load_spec

    out = []
    if args.dataset in ("births", "both"):
        if not args.data.is_file():
            sys.exit(f"{args.data}: not found")
        out.append(("births", ROOT / "examples" / "births.yaml", args.data, args.data.name, dict(COARSE)))
    if args.dataset in ("persons", "both"):
        spec_path = ROOT / "examples" / "persons.yaml"
        data, what = args.persons_data, str(args.persons_data)
        if data is None:
            what = (f"`dpbundle example persons` data ({args.persons_rows:,} rows simulated, "
                    f"seed {args.persons_seed})")
            from dpbundle.release.data.example_persons import example_bytes

            data = tmp / "persons.csv"
            data.write_bytes(example_bytes(args.persons_rows, args.persons_seed))
        elif not data.is_file():
            sys.exit(f"{data}: not found")
        out.append(("persons", spec_path, data, what, first_alternatives(load_spec(spec_path))))
    return out


# ---------------------------------------------------------------------------- one generator

def run_generator(name: str, gen: dict, prepared, spec, columns: dict, args) -> str:
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.data.transform import transform
    from dpbundle.release.scheme.iteration import make_config_generator, run_iteration

    config = {"columns": dict(columns), "generator": gen, "projection": {"min_count": args.min_count}}
    real = transform(prepared, spec, config)
    m = int(round(1.1 * real.n))
    acct = accounting(make_config_generator(spec, config), real.domain)
    fits, samples, errs = [], [], []
    traced_fit, traced_sample, peak, rss = None, None, "?", "?"
    stopped = ""
    for rep in range(args.timing_reps):
        generator = make_config_generator(spec, config)
        traced = rep == 0
        if traced:
            rss_start = rss_peak_start()
            tracemalloc.start()
        t0 = time.perf_counter()
        model = generator.fit(real.codes, real.domain, Randomness())
        t1 = time.perf_counter()
        rows = model.sample(m, np.random.default_rng())
        t2 = time.perf_counter()
        if traced:
            peak = f"{tracemalloc.get_traced_memory()[1] / 2**20:.0f}"
            tracemalloc.stop()
            rss = rss_peak_growth_mib(rss_start)
            traced_fit, traced_sample = t1 - t0, t2 - t1
        else:
            fits.append(t1 - t0)
            samples.append(t2 - t1)
        errs.append(workload_error(real.codes, rows, real.domain))
        del model, rows
        if 0 < args.max_fit_seconds < t1 - t0:
            stopped = f"a fit took {t1 - t0:.3g} s > --max-fit-seconds {args.max_fit_seconds:g}"
            break
    star = "" if fits else "*"
    fit_s = statistics.median(fits) if fits else traced_fit
    sample_s = statistics.median(samples) if samples else traced_sample
    err_cells = []
    for k in range(1, K_MAX + 1):
        if k in errs[0]:
            err_cells.append(f"{statistics.mean(e[k][0] for e in errs):.4f} / "
                             f"{statistics.mean(e[k][1] for e in errs):.5f}")
        else:
            err_cells.append("-")
    if stopped:
        acceptance, failed = "skipped", stopped + f" ({len(errs)} timing rep(s) done)"
    else:
        passed, done, fails = 0, 0, Counter()
        for _ in range(args.reps):
            res = run_iteration(prepared, spec, config, Randomness())
            done += 1
            passed += res.passed
            if res.note:
                fails[res.note[:40]] += 1
            for r in res.results:
                if not r.passed:
                    fails[r.id] += 1
            if 0 < args.max_fit_seconds < res.timings.get("fit", 0.0):
                fails[f"stopped: a fit took {res.timings['fit']:.3g} s"] += 1
                break
        acceptance = f"{passed}/{done}" + ("" if done == args.reps else f" (of {args.reps})")
        failed = ", ".join(f"{k} {v}" for k, v in fails.most_common()) or "-"
    return (f"| {name} | {acct} | {fit_s:.2f}{star} | {sample_s:.2f}{star} | {peak} | {rss} | "
            f"{' | '.join(err_cells)} | {acceptance} | {failed} |")


# ---------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="generators: " + ", ".join(CONFIGS))
    ap.add_argument("--dataset", choices=("births", "persons", "both"), default="both")
    ap.add_argument("--epsilons", default="0.5,1,4",
                    help="comma-separated generation epsilons (default 0.5,1,4)")
    ap.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz",
                    help="the births data")
    ap.add_argument("--persons-data", type=Path, default=None,
                    help="a persons CSV (default: `dpbundle example persons` data, simulated here)")
    ap.add_argument("--persons-rows", type=int, default=45_000)
    ap.add_argument("--persons-seed", type=int, default=2023)
    ap.add_argument("--min-count", type=int, default=2, help="projection min_count (default 2)")
    ap.add_argument("--reps", type=int, default=20, help="acceptance iterations per generator")
    ap.add_argument("--timing-reps", type=int, default=5,
                    help="fits timed per generator; the first is traced (memory) and left out of "
                         "the time medians unless it is the only one")
    ap.add_argument("--only", default="",
                    help="comma-separated substrings of generator names to run (default: all)")
    ap.add_argument("--max-fit-seconds", type=float, default=1200.0,
                    help="skip a generator's remaining timing reps and its acceptance iterations "
                         "once one of its fits took longer than this (0 = no limit; a running fit "
                         "is not interrupted)")
    args = ap.parse_args()
    if args.timing_reps < 1 or args.reps < 0:
        sys.exit("--timing-reps must be >= 1 and --reps >= 0")
    try:
        epsilons = [float(e) for e in args.epsilons.split(",") if e.strip()]
    except ValueError:
        sys.exit(f"--epsilons: not a list of numbers: {args.epsilons!r}")
    if not epsilons or any(not (e > 0) for e in epsilons):
        sys.exit("--epsilons: need one or more numbers > 0")

    from dpbundle.mechanisms.generators import generator_types
    from dpbundle.release.data.prepare import prepare

    only = [w.strip() for w in args.only.split(",") if w.strip()]
    chosen = {n: g for n, g in CONFIGS.items() if not only or any(w in n for w in only)}
    if not chosen:
        sys.exit(f"--only {args.only!r} matches none of: {', '.join(CONFIGS)}")
    available = generator_types()
    print(f"# Generators side by side\n\n{environment()}\n", flush=True)
    print("Accounting: every generator is pure ε-DP at the generation epsilon (change-one "
          "neighbours); the criteria's own epsilons are spent on top, the same for all.\n"
          "Times in seconds (* = the traced rep only), memory in MiB, workload error = "
          "max / mean |share difference| over all cells of all k-way marginals.\n", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_side_by_side_") as tmp:
        for ds, spec_path, data, what, columns in datasets(args, Path(tmp)):
            for eps in epsilons:
                spec = spec_at(spec_path, eps)
                prepared = prepare(data, spec)
                print(f"## {ds}, generation epsilon {eps:g}\n\n"
                      f"{spec_path.relative_to(ROOT)}, {what}, n = {prepared.n:,}, columns "
                      f"{', '.join(f'{c}={a}' for c, a in columns.items())}, min_count "
                      f"{args.min_count}; {args.timing_reps} timing reps, {args.reps} "
                      f"iterations each\n", flush=True)
                print("| generator | accounting | fit s | sample s | tracemalloc peak | RSS peak growth | "
                      "1-way err max / mean | 2-way err max / mean | 3-way err max / mean | "
                      "acceptance | failed criteria |")
                print("|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
                for name, gen in chosen.items():
                    info = available.get(gen["type"], {})
                    if not info.get("available"):
                        print(f"| {name} | not installed ({info.get('reason', 'unknown type')[:110]}) "
                              f"||||||||||", flush=True)
                        continue
                    try:
                        line = run_generator(name, gen, prepared, spec, columns, args)
                    except Exception as exc:  # noqa: BLE001 - one failing generator must not end the run
                        line = f"| {name} | error: {type(exc).__name__}: {str(exc)[:120]} ||||||||||"
                    print(line, flush=True)
                print(flush=True)


if __name__ == "__main__":
    main()
