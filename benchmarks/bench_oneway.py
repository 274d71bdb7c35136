"""Benchmark PrivBayes with and without ``oneway: rake`` (issue 13, item 2) on the 160k NVSS sample.

    python benchmarks/bench_oneway.py [--data PATH] [--repeats 20]
        [--variants none,tables,measure:0.1,measure:0.2] [--config-id ID] [--no-criteria]

The configuration is the best of the births spec's narrowed list
(examples/births-narrowed-nvss160k.yaml: highest sweep acceptance, unless --config-id); every
variant runs the births iteration (release/scheme/iteration.py: fit, sample ~1.1 n rows, drop rows
failing the synthetic constraints, keep n, face-privacy projection, all eight criteria) at the
same generation epsilon (the spec's), ``--repeats`` times with fresh OpenDP noise. Variants:
``none`` (PrivBayes as published), ``tables`` (oneway: tables), ``measure:S`` (oneway: measure,
oneway_split: S) and ``reassign:S`` (oneway: measure, but the samples fixed by in-place
re-assignment only instead of raking the record weights; a comparison, not a spec option). Printed per variant: min/median/max of the synthetic count of
parity "10<" in the released candidate, of the ratio criterion's true metric (max smoothed
ratio, clip 2; its DP threshold is 1.41) and of the fit and sample times, the number of runs
passing the ratio criterion and all criteria, and the median true metric of the other criteria
where cheap (kway). Skips with a message when the data file is missing.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "nvss2019_singleton_160k.csv.gz"
SPEC = ROOT / "examples" / "births.yaml"
NARROWED = ROOT / "examples" / "births-narrowed-nvss160k.yaml"


def best_config(path: Path, config_id: str | None) -> tuple[str, dict, float]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = doc["configurations"]
    if config_id:
        entry = next((e for e in entries if e["id"] == config_id), None)
        if entry is None:
            sys.exit(f"no configuration {config_id} in {path}")
    else:
        entry = max(entries, key=lambda e: (e["acceptance"], e.get("wilson_low", 0.0)))
    return entry["id"], entry["config"], entry["acceptance"]


def variant_config(config: dict, variant: str) -> tuple[dict, str | None]:
    """(configuration, forced RakedModel method or None) of a variant name."""
    gen = dict(config["generator"])
    method = None
    kind, _, split = variant.partition(":")
    if kind in ("none", "tables") and not split:
        if kind == "tables":
            gen["oneway"] = "tables"
    elif kind in ("measure", "reassign") and split:
        gen["oneway"] = "measure"
        gen["oneway_split"] = float(split)
        method = None if kind == "measure" else "reassign"
    else:
        raise SystemExit(f"bad variant {variant!r}: none, tables, measure:SPLIT or reassign:SPLIT")
    return {**config, "generator": gen}, method


def run_variant(prepared, spec, config: dict, method: str | None, repeats: int,
                criteria: bool) -> dict[str, list]:
    from dpbundle.mechanisms import oneway as ow
    from dpbundle.mechanisms.criteria.ratio import smoothed_ratio_value
    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.scheme import iteration

    ratio_entry = next(e for e in spec.criteria if e["type"] == "smoothed_ratio")
    spec_run = spec
    if not criteria:  # only the ratio criterion (cheap); the rest of the iteration is unchanged
        spec_run = _only_ratio(spec, ratio_entry)
    out: dict[str, list] = {"rare": [], "ratio": [], "ratio_dp": [], "ratio_pass": [], "pass": [],
                            "fit": [], "sample": [], "real_rare": [], "kway": [], "failed": []}
    original = ow.RakedModel
    if method is not None:
        class Forced(original):  # the benchmark's comparison only
            def __init__(self, model, shares, **kw):
                kw["method"] = method
                super().__init__(model, shares, **kw)
        ow.RakedModel = Forced
    try:
        for _ in range(repeats):
            res = iteration.run_iteration(prepared, spec_run, config, Randomness())
            if res.candidate is None:
                print(f"  run failed: {res.note}", file=sys.stderr)
                continue
            cols = [c.name for c in res.candidate.columns]
            j = cols.index("parity")
            code = list(res.candidate.columns[j].labels).index("10<")
            out["rare"].append(int(np.sum(res.candidate.codes[:, j] == code)))
            out["real_rare"].append(int(np.sum(res.real.codes[:, j] == code)))
            out["ratio"].append(smoothed_ratio_value(res.real.codes, res.candidate.codes,
                                                     res.candidate.domain, float(ratio_entry["clip"])))
            r = next(x for x in res.results if x.id == ratio_entry["id"])
            out["ratio_dp"].append(r.dp_value)
            out["ratio_pass"].append(bool(r.passed))
            out["pass"].append(bool(res.passed))
            out["failed"].extend(x.id for x in res.results if not x.passed)
            out["fit"].append(res.timings.get("fit", float("nan")))
            out["sample"].append(res.timings.get("sample", float("nan")))
            out["kway"].append(_kway_true(res))
    finally:
        ow.RakedModel = original
    return out


def _only_ratio(spec, entry):
    import dataclasses

    return dataclasses.replace(spec, raw={**spec.raw, "acceptance": [entry]})


def _kway_true(res) -> float:
    """Largest error in the share of any cell of any 1- or 2-way table (the kway metric, k <= 2)."""
    import itertools

    real, synth, dom = res.real.codes, res.candidate.codes, res.candidate.domain
    worst = 0.0
    for k in (1, 2):
        for cols in itertools.combinations(range(len(dom)), k):
            size = int(np.prod([dom[c] for c in cols]))
            def idx(x):
                i = np.zeros(x.shape[0], dtype=np.int64)
                for c in cols:
                    i = i * dom[c] + x[:, c]
                return i
            a = np.bincount(idx(real), minlength=size) / real.shape[0]
            b = np.bincount(idx(synth), minlength=size) / synth.shape[0]
            worst = max(worst, float(np.abs(a - b).max()))
    return worst


def mmm(values: list[float], fmt: str = "{:.3f}") -> str:
    if not values:
        return "-"
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--variants", default="none,tables,measure:0.1,measure:0.2")
    parser.add_argument("--config-id", default=None)
    parser.add_argument("--no-criteria", action="store_true",
                        help="evaluate only the ratio criterion (faster; no overall acceptance)")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"SKIP: {args.data} is missing (the public NVSS 160k sample, see ../shared/data/README.md)")
        return

    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(SPEC)
    cid, config, acc = best_config(NARROWED, args.config_id)
    t0 = time.perf_counter()
    prepared = prepare(args.data, spec)
    print(f"data: {args.data.name}, n = {prepared.n:,} after the raw constraints "
          f"({time.perf_counter() - t0:.1f} s)")
    print(f"configuration {cid} (sweep acceptance {acc}): {config}")
    print(f"generation epsilon {spec.epsilon_generation} for every variant; {args.repeats} runs each\n")
    rows = []
    for variant in args.variants.split(","):
        cfg, method = variant_config(config, variant.strip())
        t0 = time.perf_counter()
        r = run_variant(prepared, spec, cfg, method, args.repeats, not args.no_criteria)
        wall = time.perf_counter() - t0
        rows.append((variant, r, wall))
        real = r["real_rare"][0] if r["real_rare"] else "?"
        print(f"{variant}: {len(r['rare'])} runs in {wall:.0f} s; real count of parity '10<' = {real}")
        print(f"  synthetic count of '10<'   min/median/max  {mmm(r['rare'], '{:.0f}')}")
        print(f"  ratio metric (true)        min/median/max  {mmm(r['ratio'])}   (DP threshold 1.41)")
        print(f"  ratio DP value             min/median/max  {mmm(r['ratio_dp'])}")
        print(f"  1-2-way share error (true) min/median/max  {mmm(r['kway'], '{:.4f}')}")
        print(f"  fit s                      min/median/max  {mmm(r['fit'], '{:.2f}')}")
        print(f"  sample s                   min/median/max  {mmm(r['sample'], '{:.2f}')}")
        print(f"  passed ratio: {sum(r['ratio_pass'])}/{len(r['ratio_pass'])}"
              + ("" if args.no_criteria else f"; passed all criteria: {sum(r['pass'])}/{len(r['pass'])}"))
        if r["failed"]:
            tally = {c: r["failed"].count(c) for c in dict.fromkeys(r["failed"])}
            print("  failures by criterion: " + ", ".join(f"{c} {k}" for c, k in tally.items()))
        print()


if __name__ == "__main__":
    main()
