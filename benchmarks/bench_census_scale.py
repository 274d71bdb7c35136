"""A country's census on one machine (issue 38): release, audit and replay of N records (331M).

Steps, each timed with its peak resident memory (``os.wait4`` of the process and the children it
waited for; on the LocalCluster also each worker's peak, sampled every 0.5 s):

1. ``dpbundle example births --rows N`` writes the simulated registry (one CSV file; its records
   are nearly all distinct), or with ``--source nvss`` the public 160k sample is resampled to N
   rows (records repeat, as in a real registry);
2. the file is split into ``--parts`` CSV parts (the same records in the same order, each with
   the header) and each part converted to Parquet (``pyarrow``: row groups of a million rows);
3. ``dpbundle release`` of the single CSV file, in one process (births spec, its narrowed list,
   declared_public, ``--allow-other-size``, stop probability 0), then its public audit;
4. the same release from the Parquet parts, in one process;
5. the same release from the CSV parts on a ``distributed.LocalCluster`` of ``--workers``
   single-threaded workers (``--scheduler``), then its public audit and the enclave replay
   **from the single CSV file** (the bundle of the parts is the bundle of the file).

    python benchmarks/bench_census_scale.py --rows 331000000 --dir /tmp/census [--keep]
        [--source example|nvss] [--skip single,parquet,cluster,replay] [--parts 8] [--workers 2]

Files go to --dir (about 10 GB of CSV at 331M rows, as much again for the CSV parts, 2 GB of
Parquet); nothing is committed. Figures: docs/benchmarks.md, "National scale (issue 38)".
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_national import run, write_resampled  # noqa: E402

SPEC = ROOT / "examples" / "births.yaml"
CONFIGS = ROOT / "examples" / "births-narrowed-nvss160k.yaml"


def split_csv(src: Path, parts_dir: Path, parts: int, rows: int) -> float:
    """``parts`` CSV parts of ``src`` (consecutive lines, each part with the header); seconds."""
    t0 = time.perf_counter()
    parts_dir.mkdir(parents=True, exist_ok=True)
    per = -(-rows // parts)
    with open(src, "rb") as f:
        header = f.readline()
        for k in range(parts):
            with open(parts_dir / f"part-{k:03d}.csv", "wb") as out:
                out.write(header)
                left = per
                while left > 0:
                    lines = f.readlines(min(left, 1_000_000) * 32)
                    if not lines:
                        break
                    if len(lines) > left:
                        f.seek(-sum(len(x) for x in lines[left:]), os.SEEK_CUR)
                        lines = lines[:left]
                    out.writelines(lines)
                    left -= len(lines)
    return time.perf_counter() - t0


def to_parquet(csv_dir: Path, pq_dir: Path) -> float:
    """Each CSV part as a Parquet file (row groups of a million rows, the columns' natural types:
    integers, a date, booleans as written); seconds."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    pq_dir.mkdir(parents=True, exist_ok=True)
    for part in sorted(csv_dir.glob("*.csv")):
        reader = pcsv.open_csv(part, read_options=pcsv.ReadOptions(block_size=64 << 20),
                               convert_options=pcsv.ConvertOptions(strings_can_be_null=False))
        with pq.ParquetWriter(pq_dir / (part.stem + ".parquet"), reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch, row_group_size=1_000_000)
    return time.perf_counter() - t0


def release(exe: str, data: Path, bundle: Path, where: Path, env: dict, extra: list[str] = ()) -> tuple:
    shutil.rmtree(bundle, ignore_errors=True)
    transcript = where / "private" / f"{bundle.name}.transcript.jsonl"
    transcript.unlink(missing_ok=True)
    (where / f"{bundle.name}.ledger.json").unlink(missing_ok=True)
    wall, rss, _ = run([exe, "release", str(SPEC), str(data), "--out", str(bundle), "--key", str(where / "bench.key"),
                        "--configs", str(CONFIGS), "--allow-other-size", "--stop-probability", "0",
                        "--transcript", str(transcript), "--ledger", str(where / f"{bundle.name}.ledger.json"),
                        *extra], env)
    return wall, rss, transcript


def audit(exe: str, bundle: Path, where: Path, env: dict, transcript: Path | None = None,
          data: Path | None = None) -> tuple[float, float]:
    argv = [exe, "audit", str(bundle), "--pubkey", str(where / "bench.pub")]
    if transcript is not None:
        argv += ["--transcript", str(transcript), "--data", str(data)]
    wall, rss, _ = run(argv, env)
    return wall, rss


def on_cluster(workers: int, fn):
    """``fn(address)`` with a LocalCluster of ``workers`` single-threaded workers; (its result,
    each worker's peak resident memory in MB)."""
    from distributed import Client, LocalCluster

    def rss() -> int:
        import psutil

        return psutil.Process().memory_info().rss

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      memory_limit=0) as cluster, Client(cluster) as client:
        peaks: dict[str, int] = {}
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.5):
                try:
                    for addr, value in client.run(rss).items():
                        peaks[addr] = max(peaks.get(addr, 0), value)
                except Exception:   # noqa: BLE001
                    pass

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            out = fn(cluster.scheduler_address)
        finally:
            stop.set()
            t.join()
    return out, [p / 2**20 for p in peaks.values()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=331_000_000)
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--parts", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip", default="", help="comma-separated: single, parquet, cluster, replay")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--source", choices=["example", "nvss"], default="example",
                    help="the registry: `dpbundle example births` (records nearly all distinct) or the "
                         "public 160k NVSS sample resampled to N rows (records repeat, as a real registry's do)")
    a = ap.parse_args()
    skip = set(a.skip.split(","))
    where = a.dir
    where.mkdir(parents=True, exist_ok=True)
    (where / "private").mkdir(mode=0o700, exist_ok=True)
    exe = str(Path(sys.executable).parent / "dpbundle")
    env = {**os.environ, "COLUMNS": "100", "DPBUNDLE_PRIVATE_DIR": str(where / "private")}
    if not (where / "bench.key").exists():
        subprocess.run([exe, "keygen", "--out", str(where / "bench")], check=True, stdout=subprocess.DEVNULL, env=env)
    data = where / f"births-{a.source}-{a.rows}.csv"
    if not data.exists() and a.source == "nvss":
        print(f"the NVSS 160k sample resampled to {a.rows:,} rows: {write_resampled(data, a.rows):.1f} s, "
              f"{data.stat().st_size / 1e9:.2f} GB", flush=True)
    elif not data.exists():
        wall, rss, _ = run([exe, "example", "births", "--rows", str(a.rows), "--out", str(data)], env)
        print(f"dpbundle example births --rows {a.rows:,}: {wall:.1f} s, peak {rss:,.0f} MB, "
              f"{data.stat().st_size / 1e9:.2f} GB", flush=True)
    csv_parts, pq_parts = where / "csv-parts", where / "parquet-parts"
    if not csv_parts.exists() and not {"parquet", "cluster"} <= skip:
        print(f"split into {a.parts} CSV parts: {split_csv(data, csv_parts, a.parts, a.rows):.1f} s", flush=True)
    if not pq_parts.exists() and "parquet" not in skip:
        size = sum(p.stat().st_size for p in csv_parts.glob("*.csv"))
        secs = to_parquet(csv_parts, pq_parts)
        pq_size = sum(p.stat().st_size for p in pq_parts.glob("*.parquet"))
        print(f"CSV parts ({size / 1e9:.2f} GB) to Parquet ({pq_size / 1e9:.2f} GB): {secs:.1f} s", flush=True)
    try:
        if "single" not in skip:
            wall, rss, _ = release(exe, data, where / "bundle-file", where, env)
            print(f"release of the single CSV file, one process: {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
            wall, rss = audit(exe, where / "bundle-file", where, env)
            print(f"  public audit: {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
            shutil.rmtree(where / "bundle-file", ignore_errors=True)      # 9.6 GB at 331M: room
        if "parquet" not in skip:
            wall, rss, _ = release(exe, pq_parts, where / "bundle-parquet", where, env)
            print(f"release of the Parquet parts, one process: {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
            shutil.rmtree(where / "bundle-parquet", ignore_errors=True)
        if "cluster" not in skip:
            (wall, rss, transcript), peaks = on_cluster(
                a.workers, lambda address: release(exe, csv_parts, where / "bundle-cluster", where, env,
                                                   ["--scheduler", address]))
            print(f"release of the CSV parts on a LocalCluster of {a.workers} workers: {wall:.1f} s, steward peak "
                  f"{rss:,.0f} MB, worker peaks {', '.join(f'{p:,.0f}' for p in sorted(peaks))} MB", flush=True)
            wall, rss = audit(exe, where / "bundle-cluster", where, env)
            print(f"  public audit: {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
            if "replay" not in skip:
                wall, rss = audit(exe, where / "bundle-cluster", where, env, transcript, data)
                print(f"  enclave replay of the cluster's bundle from the single CSV file: {wall:.1f} s, "
                      f"peak {rss:,.0f} MB (verified)", flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
