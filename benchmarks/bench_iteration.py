"""Benchmark one iteration of the scheme (issues 4, 13 and 24): per-phase time and peak memory.

    python benchmarks/bench_iteration.py [--data PATH] [--repeats 7] [--scale-rows 3600000]
                                         [--scale-repeats 3] [--profile 25] [--sampler 1|2]

Runs the births spec's iteration (PrivBayes theta=30, epsilon_split=0.25, min_count 2, the
first binning alternative of every column, all eight criteria) on the 160k NVSS sample, then on
the data resampled to --scale-rows rows (with replacement, seeded), to show how the cost grows
with n. At each size the first iteration bins T (a release bins it once per binning; later
iterations with the same binning reuse it), the next --repeats iterations are timed. Per phase
(transform, fit, sample + synthetic constraints, project, each criterion) the table gives the
median and largest wall time, the median CPU time of the process (less sensitive to other jobs
on the machine) and the peak resident memory reached during the phase (Linux: VmHWM, reset at
each phase; '-' elsewhere). ``--profile N`` adds the N functions with the most own time
(cProfile) over one more iteration at each size. Goals on the 2-core machine (issue 13): one
iteration <= 0.25 s at 160k rows, <= 3 s and <= 1 GB peak at 3.6M rows; issue 24: the one at
3.6M rows <= 6 x the one at 160k rows. ``--sampler`` picks the sampler version
(``mechanisms/sampling.py``: 2 = counts of record types, the default of new releases; 1 = rows,
the sampler of earlier bundles); the last line compares the two sizes.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import resource
import statistics
import time
from pathlib import Path

import numpy as np

from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.release.scheme.iteration import run_iteration
from dpbundle.release.data.prepare import prepare
from dpbundle.release.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {
    "columns": {"birth_month": "month", "mother_age": "coarse", "parity": "coarse",
                "gestation_week": "coarse", "birth_sex": "sex", "birth_weight": "100g"},
    "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
    "projection": {"min_count": 2},
}


_PEAK = [0.0]  # largest VmHWM read before any reset (the resets also lower ru_maxrss)


def peak_rss_mb() -> float:
    """Peak resident memory of the process so far (MB)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, _PEAK[0], _hwm_mb() or 0.0)


def _hwm_mb() -> float | None:
    """VmHWM (peak resident memory since the last reset) in MB, or None off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    mb = int(line.split()[1]) / 1024.0
                    _PEAK[0] = max(_PEAK[0], mb)
                    return mb
    except OSError:
        return None
    return None


def _reset_hwm() -> None:
    """Restart VmHWM from the current resident size (Linux >= 4.0; a no-op elsewhere)."""
    _hwm_mb()
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


class PhaseMeter:
    """run_iteration's ``phase`` callback: wall and CPU time and peak memory of every phase."""

    sampler: int | None = None   # the sampler version (None: the iteration's default)

    def __init__(self) -> None:
        self.rows: dict[str, tuple[float, float, float | None]] = {}
        self._name: str | None = None

    def __call__(self, name: str) -> None:
        self._close()
        self._name, self._wall, self._cpu = name, time.perf_counter(), time.process_time()
        _reset_hwm()

    def _close(self) -> None:
        if self._name is not None:
            self.rows[self._name] = (time.perf_counter() - self._wall,
                                     time.process_time() - self._cpu, _hwm_mb())
            self._name = None

    def run(self, prepared, spec) -> tuple[dict, tuple[float, float], bool]:
        """One iteration -> (per-phase rows, whole (wall, CPU) time, passed)."""
        t0, c0 = time.perf_counter(), time.process_time()
        result = run_iteration(prepared, spec, CONFIG, Randomness(Transcript()), phase=self,
                               sampler=self.sampler)
        self._close()
        return self.rows, (time.perf_counter() - t0, time.process_time() - c0), bool(result.passed)


def time_iterations(prepared, spec, repeats: int) -> tuple[dict, list, int, dict, tuple]:
    """The first iteration (bins T) and ``repeats`` more -> (phase -> list of (wall, cpu, peak)),
    whole (wall, CPU) times, number passed, the first iteration's phases, its (wall, CPU)). No
    result is kept while the next iteration runs."""
    first, first_total, _ = PhaseMeter().run(prepared, spec)
    phases: dict[str, list] = {}
    totals, passed = [], 0
    for _ in range(repeats):
        rows, total, ok = PhaseMeter().run(prepared, spec)
        totals.append(total)
        passed += ok
        for name, row in rows.items():
            phases.setdefault(name, []).append(row)
    return phases, totals, passed, first, first_total


def report(title: str, phases: dict, totals: list, first: dict, first_total: tuple) -> None:
    print(f"\n{title}")
    print(f"{'phase':<28}{'median s':>10}{'max s':>10}{'CPU s':>10}{'peak MB':>10}")
    for name, rows in phases.items():
        wall = [r[0] for r in rows]
        peaks = [r[2] for r in rows if r[2] is not None]
        peak = f"{max(peaks):>10,.0f}" if peaks else f"{'-':>10}"
        print(f"{name:<28}{statistics.median(wall):>10.3f}{max(wall):>10.3f}"
              f"{statistics.median(r[1] for r in rows):>10.3f}{peak}")
    wall = [w for w, _ in totals]
    print(f"{'whole iteration':<28}{statistics.median(wall):>10.3f}{max(wall):>10.3f}"
          f"{statistics.median(c for _, c in totals):>10.3f}")
    cold = first.get("transform", (0.0, 0.0, None))
    print(f"{'first iteration (bins T)':<28}{first_total[0]:>10.3f}{'':>10}{first_total[1]:>10.3f}"
          f"{'' if cold[2] is None else f'{cold[2]:>10,.0f}'}   (transform {cold[0]:.3f} s)")


def profile(prepared, spec, top: int) -> None:
    """cProfile of one iteration: the ``top`` functions with the most own time."""
    prof = cProfile.Profile()
    prof.enable()
    run_iteration(prepared, spec, CONFIG, Randomness(Transcript()), sampler=PhaseMeter.sampler)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def time_rows(prepared, spec) -> None:
    """The rows of one more iteration's C (its final shuffle): with the count sampler they are
    written only for the released candidate, when data.csv is written, so they are not part of
    an iteration; shown here once."""
    result = run_iteration(prepared, spec, CONFIG, Randomness(Transcript()), sampler=PhaseMeter.sampler)
    if result.candidate is None or getattr(result.candidate, "written", True):
        return
    _reset_hwm()
    t0, c0 = time.perf_counter(), time.process_time()
    rows = result.candidate.codes
    wall, cpu, peak = time.perf_counter() - t0, time.process_time() - c0, _hwm_mb()
    print(f"{'rows of C (released only)':<28}{wall:>10.3f}{'':>10}{cpu:>10.3f}"
          f"{'' if peak is None else f'{peak:>10,.0f}'}   ({rows.shape[0]:,} rows, once per release)")


def run_size(title: str, prepared, spec, repeats: int, top: int) -> tuple[float, float]:
    """Report one size; returns the median whole iteration (wall, CPU)."""
    phases, totals, passed, first, first_total = time_iterations(prepared, spec, repeats)
    report(f"{title} ({repeats} runs after the first; {passed} passed)", phases, totals, first, first_total)
    time_rows(prepared, spec)
    print(f"peak resident memory of the process so far: {peak_rss_mb():,.0f} MB")
    if top:
        profile(prepared, spec, top)
    return statistics.median(w for w, _ in totals), statistics.median(c for _, c in totals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared/data/nvss2019_singleton_160k.csv.gz")
    parser.add_argument("--spec", type=Path, default=ROOT / "examples/births.yaml")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--scale-rows", type=int, default=3_600_000, help="0 to skip the scaling run")
    parser.add_argument("--scale-repeats", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print the N functions with the most own time (cProfile) at each size")
    parser.add_argument("--sampler", type=int, choices=(1, 2), default=None,
                        help="sampler version (default: the iteration's, 2 = counts)")
    args = parser.parse_args()
    PhaseMeter.sampler = args.sampler

    spec = load_spec(args.spec)
    t0 = time.perf_counter()
    prepared = prepare(args.data, spec)
    print(f"data: {args.data} -> n = {prepared.n:,} (preparation {time.perf_counter() - t0:.2f} s)")
    small = run_size(f"one iteration at n = {prepared.n:,}", prepared, spec, args.repeats, args.profile)

    if args.scale_rows:
        rng = np.random.Generator(np.random.PCG64(20241122))
        big = prepared.subset(rng.integers(0, prepared.n, size=args.scale_rows))
        del prepared
        large = run_size(f"one iteration at n = {big.n:,} (resampled)", big, spec, args.scale_repeats,
                         args.profile)
        print(f"\n{big.n:,} rows / small sample: {large[0] / small[0]:.1f} x wall, "
              f"{large[1] / small[1]:.1f} x CPU (issue 24: <= 6 x)")


if __name__ == "__main__":
    main()
