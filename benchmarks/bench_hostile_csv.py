"""Benchmark hostile CSV input (issue 12, "CSV input"): time and peak memory of preparation.

    python benchmarks/bench_hostile_csv.py [--big-mib 64] [--huge-mib 512] [--data PATH] [--keep DIR]

Builds inputs in a temporary directory from the births example (`dpbundle example births`) and
prepares each in a fresh subprocess (examples/births.yaml, as `dpbundle spec validate` does),
printing the wall time of prepare(), the process's peak resident memory (VmHWM), the peak after
the imports (so the difference is what reading cost) and the first line of the error. Cases:

* one --big-mib MiB cell (plain, gzip, and quoted with a line break every 80 characters);
* one --huge-mib MiB cell (memory must not grow with the cell);
* a 20 KB cell in 10,000 rows (accepted length; the echoed value is cut);
* a trailing comma on every one of 1,000,000 rows (one grouped message, reading stops);
* the 160k NVSS sample (--data), a normal file: median of 5 runs (and its rows ten times over,
  median of 3), to compare with the old reader.

Also (``--issue36-only`` for these alone) issue 36's hostile command lines: release and sweep
``--scheduler`` at a server that announces 2^64 - 1 bytes, a FIFO as sweep's data, a secret cell in
``spec validate --data``, ``ledger list`` of a missing ledger, ``keygen --out /dev/null``,
``example --rows 1,000,000,001``: exit code, seconds, traceback, what was left behind.

Goals: the 64 MiB cell in under 5 s with peak memory under 500 MB; normal files not slower.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "births.yaml"
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "nvss2019_singleton_160k.csv.gz"

# Peak memory of the process itself: VmHWM (this process image's high-water mark). ru_maxrss is
# no good here: after fork/vfork + exec, Linux starts it at the parent's resident size.
PEAK = r"""
import resource
def peak_mb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
"""

WORKER = PEAK + r"""
import json, sys, time
from dpbundle.release.data.prepare import InputError, prepare
from dpbundle.release.spec.load import load_spec
spec = load_spec(sys.argv[1])
base = peak_mb()
times, message = [], ""
for _ in range(int(sys.argv[3])):
    t = time.perf_counter()
    try:
        prepare(sys.argv[2], spec)
    except InputError as exc:
        message = "\n".join(str(exc).splitlines()[1:2])
    times.append(time.perf_counter() - t)
print(json.dumps({"times": times, "peak": peak_mb(), "base": base, "message": message}))
"""

CLI_WORKER = PEAK + r"""
import json, sys
from dpbundle.release.cli import main
out = sys.argv.pop(1)
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
with open(out, "w") as f:
    json.dump({"peak": peak_mb(), "code": code}, f)
"""

CHUNK = 1 << 20


def write_rows(path: Path, header: str, rows: list[str], opener=open) -> None:
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        f.write(header + "\n")
        for r in rows:
            f.write(r + "\n")


def write_big_cell(path: Path, header: str, rows: list[str], mib: int, *, quoted_lines: bool = False,
                   opener=open) -> None:
    """rows[:4], then row 5 with a `mib` MiB birth_weight cell, then the rest."""
    with opener(path, "wt", encoding="utf-8", newline="") as f:
        f.write(header + "\n")
        for r in rows[:4]:
            f.write(r + "\n")
        cells = rows[4].split(",")
        f.write(",".join(cells[:4]) + ",")
        if quoted_lines:
            f.write('"')
            line = "9" * 79 + "\n"
            for _ in range((mib << 20) // len(line)):
                f.write(line)
            f.write('"')
        else:
            block = "9" * CHUNK
            for _ in range(mib):
                f.write(block)
        f.write("," + cells[5] + "\n")
        for r in rows[5:]:
            f.write(r + "\n")


def run(path: Path, repeats: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", WORKER, str(SPEC), str(path), str(repeats)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def run_cli(path: Path, work: Path) -> tuple[float, float, int]:
    """(wall s, peak MB, exit code) of `dpbundle spec validate SPEC --data path` as a whole
    (interpreter start-up included)."""
    out = work / "cli.json"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", CLI_WORKER, str(out), "spec", "validate", str(SPEC), "--data", str(path)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    r = json.loads(out.read_text())
    return wall, r["peak"], r["code"]


def _command(args: list[str], env: dict | None = None, timeout: float = 120) -> tuple[float, int, str]:
    """``dpbundle ARGS`` in a fresh process: (seconds, exit code, its output)."""
    exe = Path(sys.executable).with_name("dpbundle")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "dpbundle.release.cli.main"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(base + [str(a) for a in args], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "COLUMNS": "250", **(env or {})})
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, -1, "timed out (a hang)"
    return time.perf_counter() - t0, proc.returncode, proc.stdout + proc.stderr


def _hostile_scheduler() -> tuple[str, object]:
    """A TCP server answering every connection with 0xff bytes (a length of 2^64 - 1)."""
    import socket
    import threading

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            try:
                conn.sendall(b"\xff" * 64)
            except OSError:
                pass
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{sock.getsockname()[1]}", sock


def issue36_commands(work: Path, sample: Path) -> None:
    """Issue 36's hostile command lines: exit code, seconds, traceback or not, and what was left
    (ledger, bundle, key files)."""
    spec = SPEC
    bad = work / "secret.csv"
    lines = sample.read_text("utf-8").splitlines()
    lines[3] = "SECRET-ID-123456789" + lines[3][lines[3].index(","):]
    bad.write_text("\n".join(lines[:2000]) + "\n", "utf-8")
    fifo = work / "fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    parts = work / "parts"
    parts.mkdir(exist_ok=True)
    (parts / "a.csv").write_text("\n".join(lines[:2000]) + "\n", "utf-8")
    key = work / "bench-key"
    if not Path(f"{key}.key").exists():
        _command(["keygen", "--out", key])
    address, server = _hostile_scheduler()
    ledger, bundle = work / "i36-ledger.jsonl", work / "i36-bundle"
    cases = [
        ("release --scheduler at a hostile server", ["release", spec, parts, "--out", bundle, "--key",
                                                     f"{key}.key", "--ledger", ledger, "--transcript",
                                                     work / "t.jsonl", "--scheduler", address], None),
        ("sweep --scheduler at a hostile server", ["sweep", spec, sample, "--out", work / "sw",
                                                   "--scheduler", address], None),
        ("sweep on a FIFO", ["sweep", spec, fifo, "--out", work / "sw2"], None),
        ("spec validate --data with a secret cell", ["spec", "validate", spec, "--data", bad], None),
        ("ledger list --ledger /nonexistent", ["ledger", "list", "--ledger", work / "nonexistent"], None),
        ("ledger list, no default ledger yet", ["ledger", "list"], {"XDG_DATA_HOME": str(work / "xdg")}),
        ("keygen --out /dev/null", ["keygen", "--out", "/dev/null"], None),
        ("example --rows 1,000,000,001", ["example", "births", "--rows", "1000000001", "--out",
                                          work / "x.csv"], None),
    ]
    print(f"\nissue 36, hostile command lines (fresh processes, timeout 120 s):\n"
          f"{'case':<44}{'s':>7}{'exit':>6}  traceback  notes")
    for name, args, env in cases:
        seconds, code, out = _command(args, env)
        notes = []
        if "SECRET-ID" in out:
            notes.append("secret quoted only on PRIVATE lines" if all(
                "PRIVATE" in line for line in out.splitlines() if "SECRET-ID" in line) else "SECRET UNMARKED")
        if "release" in args:
            notes.append(f"ledger {'WRITTEN' if ledger.exists() else 'untouched'}, bundle "
                         f"{'WRITTEN' if bundle.exists() else 'absent'}")
        if "keygen" in args:
            notes.append("/dev/null.key " + ("WRITTEN" if Path("/dev/null.key").exists() else "not written"))
        print(f"{name:<44}{seconds:>7.2f}{code:>6}  {'YES' if 'Traceback' in out else 'no':<9}  "
              f"{'; '.join(notes)}")
    server.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--big-mib", type=int, default=64)
    ap.add_argument("--huge-mib", type=int, default=512)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--keep", type=Path, help="write the inputs here instead of a temporary directory")
    ap.add_argument("--issue36-only", action="store_true",
                    help="only issue 36's hostile command lines (FIFO, scheduler, ledger, keygen, ...)")
    args = ap.parse_args()

    from dpbundle.release.data.example import write_example

    tmp = tempfile.TemporaryDirectory()
    work = args.keep or Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    sample = work / "sample.csv"
    write_example(sample, rows=10_000, force=True)   # = dpbundle example births --rows 10000
    lines = sample.read_text("utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    if args.issue36_only:
        issue36_commands(work, sample)
        tmp.cleanup()
        return

    cases: list[tuple[str, Path, int]] = []
    p = work / "big.csv"
    write_big_cell(p, header, rows[:500], args.big_mib)
    cases.append((f"one {args.big_mib} MiB cell", p, 1))
    p = work / "big.csv.gz"
    write_big_cell(p, header, rows[:500], args.big_mib, opener=lambda q, m, **kw: gzip.open(q, m, compresslevel=1, **kw))
    cases.append((f"one {args.big_mib} MiB cell, gzip", p, 1))
    p = work / "big_quoted.csv"
    write_big_cell(p, header, rows[:500], args.big_mib, quoted_lines=True)
    cases.append((f"one {args.big_mib} MiB quoted cell, 80-character lines", p, 1))
    p = work / "huge.csv"
    write_big_cell(p, header, rows[:500], args.huge_mib)
    cases.append((f"one {args.huge_mib} MiB cell", p, 1))
    p = work / "wide.csv"
    wide = list(rows)
    cells = wide[7].split(",")
    cells[3] = "x" * 20_000
    wide[7] = ",".join(cells)
    write_rows(p, header, wide)
    cases.append(("a 20 KB cell in 10,000 rows", p, 3))
    p = work / "trailing.csv"
    write_rows(p, header, [rows[i % len(rows)] + "," for i in range(1_000_000)])
    cases.append(("trailing comma on 1,000,000 rows", p, 1))
    if args.data.is_file():
        cases.append((f"normal file: {args.data.name}", args.data, 5))
        p = work / "normal_x10.csv"
        with gzip.open(args.data, "rt", encoding="utf-8", newline="") as f:
            data = f.read().splitlines()
        write_rows(p, data[0], data[1:] * 10)
        cases.append((f"normal file x 10 ({10 * (len(data) - 1):,} rows)", p, 3))

    print(f"{'case':<48}{'file MB':>9}{'prepare s':>11}{'peak MB':>9}{'after imports MB':>18}")
    for name, path, repeats in cases:
        r = run(path, repeats)
        size = os.path.getsize(path) / 1e6
        t = statistics.median(r["times"])
        print(f"{name:<48}{size:>9.1f}{t:>11.3f}{r['peak']:>9.0f}{r['base']:>18.0f}")
        if r["message"]:
            print(f"    {r['message'].strip()[:150]}")
    wall, peak, code = run_cli(work / "big.csv", work)
    print(f"\nwhole command `dpbundle spec validate` on the {args.big_mib} MiB cell: {wall:.2f} s, "
          f"peak {peak:.0f} MB, exit code {code}")
    issue36_commands(work, sample)
    tmp.cleanup()


if __name__ == "__main__":
    main()
