"""Issue 38: reading a registry given as parts, one process vs parallel local processes.

    python benchmarks/bench_parallel_parts.py PARTS_DIR [--spec examples/births.yaml]
        [--workers 1,2] [--repeats 2]

PARTS_DIR holds the registry's parts (``*.csv`` / ``*.csv.gz``, e.g. written with
``dpbundle example births --out PARTS_DIR/part-0.csv --rows 2500000 --seed 100`` and so on).
For each number of workers, in a fresh process: the median wall time of ``prepare_parts`` (read,
validate, count the distinct records, the raw constraints), the peak resident memory of that
process (the steward's) and of its largest worker process (``ru_maxrss``), and whether the
prepared table is the same as with the first number of workers.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _one(parts: Path, spec_path: Path, workers: int, repeats: int) -> None:
    """Measured in a fresh process (its peak memory is this run's only): prints one JSON line."""
    import json

    from dpbundle.release.data.parts import prepare_parts
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(spec_path)
    times, prepared = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        prepared = prepare_parts(parts, spec, show_values=False, workers=workers)
        times.append(time.perf_counter() - t0)
    digest = __import__("hashlib").sha256(np.asarray(prepared.index).tobytes()).hexdigest()
    print(json.dumps({"rows": prepared.rows_read, "median": statistics.median(times),
                      "self_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "child_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                      "table": f"{prepared.n}:{prepared.sha256}:{digest}"}))


def main(argv: list[str] | None = None) -> int:
    import json
    import subprocess

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", type=Path)
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "births.yaml")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one is not None:
        _one(a.parts, a.spec, a.one, a.repeats)
        return 0
    from dpbundle.release.data.parts import registry_parts

    paths = registry_parts(a.parts)
    size = sum(p.stat().st_size for p in paths)
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}; {len(paths)} parts, {size / 1e6:,.0f} MB, spec {a.spec.name}")
    print("| workers | rows read | median s | peak RSS steward MB | peak RSS largest worker MB | same table |")
    print("|---|---|---|---|---|---|")
    reference = None
    for w in (int(x) for x in a.workers.split(",")):
        out = subprocess.run([sys.executable, __file__, str(a.parts), "--spec", str(a.spec), "--repeats",
                              str(a.repeats), "--one", str(w)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        reference = reference or r["table"]
        print(f"| {w} | {r['rows']:,} | {r['median']:.1f} | {r['self_mb']:,.0f} | "
              f"{r['child_mb'] if w > 1 else 0:,.0f} | {'yes' if r['table'] == reference else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
