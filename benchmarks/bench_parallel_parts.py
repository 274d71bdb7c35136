"""Issue 38: reading a registry given as parts, one process vs parallel local processes.

    python benchmarks/bench_parallel_parts.py PARTS_DIR [--spec examples/births.yaml]
        [--workers 1,2] [--repeats 2]

PARTS_DIR holds the registry's parts (``*.csv`` / ``*.csv.gz``, e.g. written with
``dpbundle example births --out PARTS_DIR/part-0.csv --rows 2500000 --seed 100`` and so on).
For each number of workers: the median wall time of ``prepare_parts`` (read, validate, count
the distinct records, the raw constraints), the peak resident memory of this process and of its
worker processes (``ru_maxrss``), and whether the prepared table is the same as with one worker.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("parts", type=Path)
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "births.yaml")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args(argv)
    from dpbundle.release.data.parts import prepare_parts, registry_parts
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(a.spec)
    paths = registry_parts(a.parts)
    size = sum(p.stat().st_size for p in paths)
    print(f"# {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
          f"Python {platform.python_version()}; {len(paths)} parts, {size / 1e6:,.0f} MB, spec {a.spec.name}")
    print("| workers | rows read | median s | peak RSS self MB | peak RSS one worker MB | same table |")
    print("|---|---|---|---|---|---|")
    reference = None
    for w in (int(x) for x in a.workers.split(",")):
        times, prepared = [], None
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            prepared = prepare_parts(a.parts, spec, show_values=False, workers=w)
            times.append(time.perf_counter() - t0)
        key = (prepared.n, prepared.sha256, np.asarray(prepared.index).tobytes()[:1 << 20])
        reference = reference or key
        self_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        child_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"| {w} | {prepared.rows_read:,} | {statistics.median(times):.1f} | {self_mb:,.0f} | "
              f"{child_mb:,.0f} | {'yes' if key == reference else 'NO'} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
