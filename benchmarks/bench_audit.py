"""Benchmark: `dpbundle audit` (public checks) of a bundle with 160,000 rows.

Builds a signed, valid bundle of ~160k rows with the test fixture (tests/audit_fixtures.py) unless
--bundle is given, audits it --repeats times and prints the median wall time (goal: <= 5 s on
2 cores).

    python benchmarks/bench_audit.py [--bundle B --pubkey K.pub] [--rows 160000] [--repeats 5]

The fixture's datasheet is a one-page PDF; a real datasheet (weasyprint, ~10 pages) adds up to
~1 s of text extraction, so also run it with --bundle on a real release of the 160k sample, e.g.
``dpbundle release spec.yaml nvss2019_singleton_160k.csv.gz --out B --key K.key``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def build(rows: int, where: Path) -> tuple[Path, Path]:
    import audit_fixtures as fx

    # about 3 copies per record type on average
    n_types = max(rows // 3, 10)
    out = fx.make_rows(n_types=n_types, seed=7)
    out = out[:rows] if len(out) >= rows else out
    # keep every record at least twice after truncation: drop record types left with one row
    counts: dict[tuple, int] = {}
    for r in out:
        counts[tuple(r)] = counts.get(tuple(r), 0) + 1
    out = [r for r in out if counts[tuple(r)] >= 2]
    d = where / "bundle"
    key = fx.build_bundle(d, rows=out)
    pub = where / "publisher.pub"
    pub.write_bytes(fx.pub_pem(key))
    return d, pub


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, help="audit this bundle instead of building one")
    ap.add_argument("--pubkey", type=Path)
    ap.add_argument("--rows", type=int, default=160_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)

    from dpbundle.audit.runner import run_audit

    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        if args.bundle is None:
            t0 = time.perf_counter()
            bundle, pub = build(args.rows, Path(tmp))
            print(f"built a bundle in {time.perf_counter() - t0:.1f} s")
        else:
            bundle, pub = args.bundle, args.pubkey
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            rep = run_audit(bundle, pubkey=pub)
            times.append(time.perf_counter() - t0)
        rows = rep.get("size").facts.get("rows")
        failed = [c.check for c in rep.checks if c.failed]
        print(f"rows: {rows}; checks failed: {failed or 'none'}")
        print("per check (last run): " + ", ".join(f"{c.check} {c.result}" for c in rep.checks))
        print(f"audit wall time over {args.repeats} runs: median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f} s, max {max(times):.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
