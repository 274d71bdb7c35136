"""Public re-derivation of data.csv from a published model (issue 14): time and peak memory.

Makes a pre-registered `publish: model` release of the public NVSS 160k sample (births spec
with loose thresholds, so that the first attempt passes: this measures the audit, not the
selection), then times the audit's `rederivation` check and the whole public audit.

    python benchmarks/bench_rederive.py [--data examples/data/nvss2019_singleton_160k.csv.gz]
                                        [--generators privbayes,mst_pure,privsyn] [--reps 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

GENERATORS = {
    "privbayes": {"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.25], "theta": [30]}},
    "privbayes+oneway": {"type": "privbayes", "flavour": "theta",
                         "grid": {"epsilon_split": [0.25], "theta": [30], "oneway": ["measure"]}},
    "mst_pure": {"type": "mst_pure"},
    "privsyn": {"type": "privsyn"},
}


def _release(tmp: Path, data: Path, gen: str) -> Path:
    import audit_fixtures as fx
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    run = CliRunner().invoke
    spec_path = fx.fast_spec(tmp / "spec.yaml")
    doc = yaml.safe_load(spec_path.read_text())
    doc["publish"] = "model"
    doc["generators"] = [GENERATORS[gen]]
    spec_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert run(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = run(app, ["preregister", str(spec_path), "--key", str(tmp / "k.key"), "--out", str(tmp / "rec.json"),
                    "--beacon-source", "benchmark", "--secret-out", str(tmp / "s.json")])
    assert res.exit_code == 0, res.output
    res = run(app, ["release", str(spec_path), str(data), "--out", str(tmp / "B"), "--key", str(tmp / "k.key"),
                    "--ledger", str(tmp / "l.jsonl"), "--transcript", str(tmp / "t.jsonl"),
                    "--preregistration", str(tmp / "rec.json"), "--beacon", "benchmark beacon",
                    "--preregistration-secret", str(tmp / "s.json")])
    assert res.exit_code == 0, res.output
    return tmp / "B"


def _time_rederivation(bundle: Path) -> tuple[float, float, str]:
    from dpbundle.audit.bundle_io import open_bundle
    from dpbundle.audit.context import AuditContext
    from dpbundle.audit.rederive import check_rederivation

    with open_bundle(bundle) as b:
        ctx = AuditContext(b)
        ctx.view()  # parse the spec outside the timing: the audit has it from earlier checks
        tracemalloc.start()
        t = time.perf_counter()
        r = check_rederivation(ctx)
        elapsed = time.perf_counter() - t
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return elapsed, peak, r.result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz")
    ap.add_argument("--generators", default="privbayes,privbayes+oneway,mst_pure,privsyn")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data}: not found")
    from dpbundle.audit.runner import run_audit

    print(f"| generator | rows | re-derivation s (median of {args.reps}) | peak MiB (tracemalloc) | whole public audit s | result |")
    print("|---|---|---|---|---|---|")
    for gen in args.generators.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            bundle = _release(Path(tmp), args.data, gen)
            runs = [_time_rederivation(bundle) for _ in range(args.reps)]
            t = time.perf_counter()
            rep = run_audit(bundle, pubkey=Path(tmp) / "k.pub")
            whole = time.perf_counter() - t
            rows = sum(1 for _ in (bundle / "data.csv").open()) - 1
            print(f"| {gen} | {rows:,} | {statistics.median(r[0] for r in runs):.2f} | "
                  f"{max(r[1] for r in runs):.0f} | {whole:.1f} | {runs[0][2]} / verdict {rep.verdict} |")


if __name__ == "__main__":
    main()
