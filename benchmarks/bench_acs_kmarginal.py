"""Issue 37: a census table at total epsilon 1 (and 10), scored as NIST's CRC scores its peers.

For each ACS excerpt (DATA_DIR/acs_excerpt_<state>2019.csv, NIST's data dictionary beside it)
and each total epsilon, ``--reps`` full releases with examples/acs-excerpt-eps<TOTAL>.yaml (or
the epsilon-1 spec; the generation epsilon set to total - count - 2 x criteria, the cap to the
total): DP count,
generator, criterion and private selection all included, through the Python API
(``dpbundle.release.api.release``, a fresh key and ledger per release). Each bundle's data.csv
is scored with SDNist's 2-way k-marginal (benchmarks/kmarginal.py) on the ten demographic-
focused features against the whole excerpt.

``--what release-zcdp``: the same under zero-concentrated DP with
examples/acs-excerpt-zcdp-eps<TOTAL>.yaml (or examples/acs-excerpt-zcdp.yaml),
its generation rho set so that the total rho is that of (epsilon = the total, delta = 1e-9) by
the conversion AIM and OpenDP use (Canonne, Kamath & Steinke 2020).

Side by side (``--what aim,aim-zcdp``, needs the ``mbi`` extra): OpenDP's AIM
(``opendp.extras.mbi``) at epsilon = the total under pure DP (dpbundle's ``aim`` generator), and
under zCDP at that rho; generator only (no count, criteria or selection: the peers' figures are
the generator's), fitted on the same integer codes and sampled with the excerpt's number of rows.

    python benchmarks/bench_acs_kmarginal.py DATA_DIR [--states ma,tx] [--totals 1,10]
        [--reps 3] [--what release,release-zcdp,aim,aim-zcdp] [--spec FILE]

Prints one markdown table (mean, min and max of the reps, seconds per release; a run that
released nothing is counted beside the releases and replaced, at most --reps such runs) and the
command's environment; nothing private is printed (the excerpts are public).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from kmarginal import DEMOGRAPHIC_FEATURES, kmarginal  # noqa: E402

DEFAULT_FEATURES = list(DEMOGRAPHIC_FEATURES)

COUNT_EPSILON = 0.02


def _load(data_dir: Path, state: str):
    import pandas as pd

    table = pd.read_csv(data_dir / f"acs_excerpt_{state}2019.csv", dtype=str, keep_default_na=False)
    dictionary = json.loads((data_dir / "acs_excerpt_data_dictionary.json").read_text())
    return table, dictionary


def _spec_for(spec_path: Path, total: float) -> dict:
    """The example spec with its generation epsilon set so that the total is ``total``."""
    import yaml

    spec = yaml.safe_load(spec_path.read_text())
    criteria = sum(float(c["epsilon"]) for c in spec["acceptance"])
    count = float(spec["privacy"]["records"]["epsilon"])
    resample = spec["privacy"].get("selection", {}).get("retries") == "resample"
    gen = (total - count - 2 * criteria) if resample else (total - count) / 2 - criteria
    spec["privacy"]["epsilon_generation"] = round(gen, 10)
    spec["privacy"]["epsilon_cap"] = total
    return spec


def _zcdp_spec_for(spec_path: Path, total: float, rho: float) -> dict:
    """The zCDP example with its generation rho set so that the total rho is at most ``rho``
    (the rho whose (epsilon, 1e-9) is ``total``), rounded down to 6 decimals, the cap the total."""
    import yaml

    spec = yaml.safe_load(spec_path.read_text())
    criteria = sum(float(c["epsilon"]) for c in spec["acceptance"])
    count = float(spec["privacy"]["records"]["epsilon"])
    gen = rho - count ** 2 / 2 - (2 * criteria) ** 2 / 2
    spec["privacy"]["rho_generation"] = math.floor(gen * 1e6) / 1e6
    spec["privacy"]["epsilon_cap"] = total
    return spec


def _default_spec(total: float) -> Path:
    """examples/acs-excerpt-eps<total>.yaml when it exists, else the epsilon-1 spec."""
    own = ROOT / "examples" / f"acs-excerpt-eps{total:g}.yaml"
    return own if own.exists() else ROOT / "examples" / "acs-excerpt-eps1.yaml"


def release_scores(spec: dict, data: Path, target, dictionary, reps: int) -> tuple[list[float], list[float], int]:
    """(k-marginal of each release's data.csv, seconds of each run, runs that released
    nothing): ``reps`` releases are made; a run that releases nothing (its stop draw ended the
    selection) is counted and another run is made, at most ``reps`` such runs in all."""
    import pandas as pd

    from dpbundle.release.api import DpbundleWarning, release
    from dpbundle.release.bundle import keys
    from dpbundle.release.errors import ReleaseFailed

    scores, times, nothing = [], [], 0
    while len(scores) < reps and nothing < reps:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            keys.write_keypair(tmp / "k")
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DpbundleWarning)
                    release(spec, data, out=tmp / "b", key=tmp / "k.key", ledger=tmp / "ledger.jsonl",
                            transcript=tmp / "t.jsonl")
            except ReleaseFailed:
                nothing += 1
                continue
            times.append(time.perf_counter() - t0)
            synth = pd.read_csv(tmp / "b" / "data.csv", dtype=str, keep_default_na=False)
            scores.append(kmarginal(target, synth, DEFAULT_FEATURES, {"AGEP": dictionary["AGEP"]}))
    return scores, times, nothing


def _codes(target, dictionary):
    import pandas as pd

    domains = {}
    for f in DEFAULT_FEATURES:
        v = dictionary[f]["values"]
        domains[f] = [str(a) for a in range(v["min"], v["max"] + 1)] if "min" in v else list(v)
    codes = np.stack([pd.Categorical(target[f], categories=domains[f]).codes for f in DEFAULT_FEATURES],
                     axis=1).astype(np.int64)
    if (codes < 0).any():
        raise SystemExit("a value of the excerpt is not in the data dictionary")
    return codes, domains


def aim_scores(target, dictionary, epsilon: float, reps: int) -> tuple[list[float], list[float]]:
    """OpenDP's AIM (pure DP) at ``epsilon``, generator only."""
    import pandas as pd

    from dpbundle.mechanisms.generators import make_generator
    from dpbundle.mechanisms.noise import Randomness

    codes, domains = _codes(target, dictionary)
    sizes = [len(domains[f]) for f in DEFAULT_FEATURES]
    scores, times = [], []
    for _ in range(reps):
        rand = Randomness()
        t0 = time.perf_counter()
        model = make_generator("aim", epsilon).fit(codes, sizes, rand)
        rows = model.sample(len(target), rand.rng("benchmark sample"))
        times.append(time.perf_counter() - t0)
        synth = pd.DataFrame({f: np.asarray(domains[f])[rows[:, j]] for j, f in enumerate(DEFAULT_FEATURES)})
        scores.append(kmarginal(target, synth, DEFAULT_FEATURES, {"AGEP": dictionary["AGEP"]}))
    return scores, times


def cks_rho(epsilon: float, delta: float) -> float:
    """The largest rho whose zCDP -> (epsilon, delta) conversion (Canonne, Kamath & Steinke 2020:
    delta = inf over a > 1 of exp((a - 1)(a rho - epsilon)) (1 - 1/a)^a / (a - 1)) gives at
    most ``delta`` at ``epsilon`` (bisection; the inner infimum by golden-section search)."""
    def log_delta(rho: float) -> float:
        f = lambda a: (a - 1) * (a * rho - epsilon) + a * math.log1p(-1 / a) - math.log(a - 1)  # noqa: E731
        lo, hi = 1.0 + 1e-9, 1e6
        for _ in range(300):
            m1, m2 = lo + (hi - lo) * 0.382, lo + (hi - lo) * 0.618
            lo, hi = (lo, m2) if f(m1) < f(m2) else (m1, hi)
        return f((lo + hi) / 2)

    lo, hi = 0.0, epsilon
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if log_delta(mid) <= math.log(delta) else (lo, mid)
    return lo


def aim_zcdp_scores(target, dictionary, rho: float, reps: int) -> tuple[list[float], list[float]]:
    """OpenDP's AIM under zCDP at ``rho`` (contingency_table with dp.mbi.AIM), generator only."""
    import opendp.prelude as dp
    import pandas as pd
    import polars as pl

    from dpbundle.mechanisms.mbi import MbiModel, _conditional_tables

    dp.enable_features("contrib")
    codes, domains = _codes(target, dictionary)
    names = [f"c{j}" for j in range(codes.shape[1])]
    sizes = tuple(len(domains[f]) for f in DEFAULT_FEATURES)
    frame = pl.LazyFrame({nm: codes[:, j] for j, nm in enumerate(names)})
    schema = dp.lazyframe_domain([dp.series_domain(nm, dp.atom_domain(T="i64")) for nm in names])
    keys = {nm: pl.Series(nm, list(range(k)), dtype=pl.Int64) for nm, k in zip(names, sizes)}
    scores, times = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        context = dp.Context.compositor(data=frame, privacy_unit=dp.unit_of(changes=1),
                                        privacy_loss=dp.loss_of(rho=rho), split_evenly_over=1,
                                        domain=schema)
        table = context.query().contingency_table(keys=keys, algorithm=dp.mbi.AIM()).release()
        model = MbiModel(sizes, _conditional_tables(table, sizes, names, 10_000_000, "aim"))
        rows = model.sample(len(target), np.random.default_rng())
        times.append(time.perf_counter() - t0)
        synth = pd.DataFrame({f: np.asarray(domains[f])[rows[:, j]] for j, f in enumerate(DEFAULT_FEATURES)})
        scores.append(kmarginal(target, synth, DEFAULT_FEATURES, {"AGEP": dictionary["AGEP"]}))
    return scores, times


def _row(state: str, total: float, what: str, scores: list[float], times: list[float],
         nothing: int | None = None) -> str:
    runs = f"{len(scores)}" if nothing is None else f"{len(scores)} (+{nothing} released nothing)"
    if not scores:
        return f"| {state.upper()} | {total:g} | {what} | {runs} | - | - | - | - |"
    return (f"| {state.upper()} | {total:g} | {what} | {runs} | {statistics.mean(scores):.1f} | "
            f"{min(scores):.1f} | {max(scores):.1f} | {statistics.mean(times):.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--states", default="ma,tx")
    ap.add_argument("--totals", default="1,10")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--spec", type=Path, default=None,
                    help="the spec (default: examples/acs-excerpt-eps<TOTAL>.yaml when it exists, "
                         "else examples/acs-excerpt-eps1.yaml)")
    ap.add_argument("--what", default="release",
                    help="comma-separated: release (pure DP, the example spec of each total), "
                         "release-zcdp (examples/acs-excerpt-zcdp.yaml at the rho of (total, 1e-9)), "
                         "aim (OpenDP's AIM, pure DP), aim-zcdp (OpenDP's AIM at that rho)")
    a = ap.parse_args(argv)
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, spec {a.spec.name if a.spec else 'examples/acs-excerpt-eps<TOTAL>.yaml'}")
    print("| excerpt | total epsilon | what | runs | mean k-marginal | min | max | seconds each |")
    print("|---|---|---|---|---|---|---|---|")
    for state in a.states.split(","):
        target, dictionary = _load(a.data_dir, state)
        data = a.data_dir / f"acs_excerpt_{state}2019.csv"
        for total in (float(x) for x in a.totals.split(",")):
            what = set(a.what.split(","))
            rho = cks_rho(total, 1e-9)
            if "release" in what:
                spec = _spec_for(a.spec or _default_spec(total), total)
                gen = spec["privacy"]["epsilon_generation"]
                print(_row(state, total, f"dpbundle release, pure DP (generation {gen:g})",
                           *release_scores(spec, data, target, dictionary, a.reps)), flush=True)
            if "release-zcdp" in what:
                own = ROOT / "examples" / f"acs-excerpt-zcdp-eps{total:g}.yaml"
                spec = _zcdp_spec_for(own if own.exists() else ROOT / "examples" / "acs-excerpt-zcdp.yaml",
                                      total, rho)
                print(_row(state, total, f"dpbundle release, zCDP total rho {rho:.4g} (generation rho "
                                         f"{spec['privacy']['rho_generation']:g})",
                           *release_scores(spec, data, target, dictionary, a.reps)), flush=True)
            if "aim" in what:
                print(_row(state, total, f"OpenDP AIM, pure DP, epsilon {total:g} (generator only)",
                           *aim_scores(target, dictionary, total, a.reps)), flush=True)
            if "aim-zcdp" in what:
                print(_row(state, total, f"OpenDP AIM, zCDP rho {rho:.4g} (= epsilon {total:g}, delta 1e-9; "
                                         "generator only)", *aim_zcdp_scores(target, dictionary, rho, a.reps)),
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
