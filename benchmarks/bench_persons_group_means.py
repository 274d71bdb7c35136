"""Why mean_hours fails the persons example at total epsilon 2 (issue 25): bias or noise?

For one configuration of ``examples/persons-eps2-narrowed.yaml`` on a simulated persons copy, run
--runs iterations of the scheme and report, per (sex x age group) and per occupation group, the
error of the synthetic candidate's mean weekly hours against the real one (before the
criterion's resize and DP noise): its mean (bias), its standard deviation and the share of runs
beyond the criterion's threshold (1.5 h). With ``--force-first`` the first adaptive round
measures the criterion's own table (age x sex x hours) instead of the noisy-max choice: an
EXPERIMENT (it replaces a DP selection by a fixed one, which is still DP but not the shipped
generator), to see whether choosing that table would cure the failure.

    dpbundle example persons --out check11.csv --seed 11
    python benchmarks/bench_persons_group_means.py check11.csv [--config fca2f31f05287de3] \
        [--runs 40] [--force-first] [--spec SPEC --configs LIST]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import yaml

from dpbundle.mechanisms import aim
from dpbundle.mechanisms.noise import Randomness
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.iteration import run_iteration
from dpbundle.release.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
AGE_GROUPS = [25, 45, 65]   # the spec's group_bins for age


def force_first(cols: tuple[int, ...]) -> None:
    """Make each fit's first selection return ``cols`` (experiment only)."""
    fit, cands = aim.AdaptiveMarginals.fit, aim.candidates

    def patched(self, codes, domain, rand, counts=None):
        seen: dict = {}

        def record(*a, **k):
            seen["c"] = cands(*a, **k)
            return seen["c"]
        select, calls = rand.exponential, [0]

        def first(scores, **kw):
            calls[0] += 1
            return seen["c"][0].index(cols) if calls[0] == 1 else select(scores, **kw)
        aim.candidates, rand.exponential = record, first
        try:
            return fit(self, codes, domain, rand, counts=counts)
        finally:
            aim.candidates = cands
            del rand.exponential
    aim.AdaptiveMarginals.fit = patched


def group_errors(res, names: list[str]) -> dict[tuple[str, int], float]:
    """Synthetic minus real mean hours per (sex, age group) and per occupation."""
    R, C = res.real, res.candidate
    j = {n: names.index(n) for n in ("age", "sex", "occupation", "hours")}
    hours = np.asarray(R.columns[j["hours"]].values, float)
    age_group = np.searchsorted(AGE_GROUPS, np.asarray(R.columns[j["age"]].values, float), side="right")
    out = {}
    for label, key in (("sex x age", lambda X: X[:, j["sex"]] * 10 + age_group[X[:, j["age"]]]),
                       ("occupation", lambda X: X[:, j["occupation"]])):
        kr, kc = key(R.codes), key(C.codes)
        for g in np.unique(kr):
            out[(label, int(g), int((kr == g).sum()))] = \
                float(hours[C.codes[kc == g, j["hours"]]].mean() - hours[R.codes[kr == g, j["hours"]]].mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--config", default="fca2f31f05287de3")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--force-first", action="store_true")
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "persons-eps2.yaml",
                    help="the spec (docs/sweep-persons.md's first-version figures: that file at commit 83a7486)")
    ap.add_argument("--configs", type=Path, default=ROOT / "examples" / "persons-eps2-narrowed.yaml",
                    help="the list that holds --config")
    a = ap.parse_args()
    spec = load_spec(a.spec)
    listed = yaml.safe_load(a.configs.read_text())["configurations"]
    config = next(c["config"] for c in listed if c["id"] == a.config)
    names = list(spec.column_names)
    if a.force_first:
        force_first(tuple(sorted(names.index(n) for n in ("age", "sex", "hours"))))
    prepared = prepare(a.data, spec)
    errs: dict = {}
    passed = mean_hours_failed = 0
    for _ in range(a.runs):
        res = run_iteration(prepared, spec, config, Randomness())
        passed += res.passed
        mean_hours_failed += not next(r for r in res.results if r.id == "mean_hours").passed
        for k, v in group_errors(res, names).items():
            errs.setdefault(k, []).append(v)
    print(f"config {a.config}{' (first round forced to age x sex x hours)' if a.force_first else ''}: "
          f"{passed}/{a.runs} passed, mean_hours failed {mean_hours_failed}/{a.runs}\n")
    print("| grouping | group | real records | bias (h) | sd (h) | share of runs with abs error > 1.5 h |")
    print("|---|---|---|---|---|---|")
    for (label, g, size), v in sorted(errs.items()):
        v = np.array(v)
        print(f"| {label} | {g} | {size:,} | {v.mean():+.2f} | {v.std():.2f} | {np.mean(abs(v) > 1.5):.2f} |")


if __name__ == "__main__":
    main()
