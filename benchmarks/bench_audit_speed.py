"""Benchmark (issue 24): wall time of ``dpbundle audit`` on a 160k-row bundle, documentation
check included (README.html rendered again byte for byte, README.pdf's words compared).

Makes the bundle once with ``dpbundle release --example births`` (165,272 rows with the
example's default 167,000-row registry; ``--rows N`` for another size) in ``--workdir`` and
reuses it on later runs; times ``dpbundle audit BUNDLE --pubkey BUNDLE.demo-key.pub`` as a
subprocess ``--repeats`` times (after one warm-up run) and prints the median, then a per-check
breakdown measured in-process (the report carries no timings: the audit runs with a progress
hook that notes when each check starts), the median of ``--breakdown-runs`` runs.

    python benchmarks/bench_audit_speed.py [--repeats 5] [--python PATH] [--rows N]
        [--bundle B --pubkey K] [--workdir DIR] [--rebuild] [--goal 1.5]

``--python PATH``: time the dpbundle of another interpreter (another venv's ``bin/python``,
or a wrapper script setting PYTHONPATH to another checkout); its ``dpbundle`` console script is
used when it sits beside it, else ``PATH -c 'from dpbundle.release.cli.main import main;
main()'``. The bundle is always made by this interpreter's dpbundle, so that two versions are
timed on the same bundle.

The machine's load matters on 2 cores: the audit extracts README.pdf's text in a second
process only when a core is free (audit/pdf_helper.py), so the load (runnable processes, from
/proc/loadavg) is printed before and after, and the CPU time (user + system of the audit and
its helper, Unix) beside the wall time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_S = 1.5
MAIN = "from dpbundle.release.cli.main import main; main()"

# Runs under the interpreter being timed: the audit in-process, each check's wall time.
BREAKDOWN = r"""
import json, sys, time
t0 = time.perf_counter()
from dpbundle.audit.runner import run_audit
from dpbundle.audit.progress import AuditProgress
imported = time.perf_counter() - t0

class Timer(AuditProgress):
    def __init__(self):
        self.times, self.current, self.started = {}, None, None
    def step(self, check):
        self._stop()
        self.current, self.started = check, time.perf_counter()
    def close(self):
        self._stop()
    def _stop(self):
        if self.current is not None:
            self.times[self.current] = time.perf_counter() - self.started
            self.current = None

timer = Timer()
t0 = time.perf_counter()
report = run_audit(sys.argv[1], pubkey=sys.argv[2], progress=timer)
total = time.perf_counter() - t0
results = {c.check: c.result for c in report.checks}
print(json.dumps({"import_s": imported, "audit_s": total, "checks": timer.times,
                  "results": results}))
"""


def dpbundle_command(python: str) -> list[str]:
    """How to run the dpbundle CLI of ``python``."""
    script = Path(python).parent / ("dpbundle.exe" if os.name == "nt" else "dpbundle")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [python, "-c", MAIN]


def running() -> str:
    """Runnable processes / all, from /proc/loadavg (Linux), else the load average."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            fields = f.read().split()
        return f"{fields[3]} runnable/all (load {fields[0]})"
    except (OSError, IndexError):
        try:
            return f"load {os.getloadavg()[0]:.2f}"
        except (AttributeError, OSError):
            return "unknown"


def make_bundle(workdir: Path, rows: int | None, rebuild: bool) -> tuple[Path, Path]:
    """The births example bundle in ``workdir`` (made by this interpreter), reused when present."""
    name = "births-bundle" if rows is None else f"births-{rows}-bundle"
    bundle = workdir / name
    pub = workdir / f"{name}.demo-key.pub"
    if not rebuild and (bundle / "manifest.json").is_file() and pub.is_file():
        return bundle, pub
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", MAIN, "release", "--example", "births", "--out", str(bundle), "--force"]
    if rows is not None:
        cmd += ["--example-rows", str(rows)]
    t0 = time.perf_counter()
    env = dict(os.environ, DPBUNDLE_PRIVATE_DIR=str(workdir / "private"))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"could not make the bundle (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(f"made {bundle} in {time.perf_counter() - t0:.1f} s")
    return bundle, pub


def data_rows(bundle: Path) -> int:
    with open(bundle / "data.csv", "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) - 1


def _children_cpu() -> float | None:
    """User + system CPU seconds of this process's waited-for children (Unix), else None."""
    try:
        import resource
    except ImportError:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_cli(command: list[str], bundle: Path, pub: Path, repeats: int) -> tuple[list[float], list[float], set[int]]:
    """Wall and CPU times (the audit's process and its helper) of ``dpbundle audit`` (one
    warm-up run first), and the exit codes seen."""
    args = command + ["audit", str(bundle), "--pubkey", str(pub)]
    codes, times, cpus = set(), [], []
    for i in range(repeats + 1):
        cpu0 = _children_cpu()
        t0 = time.perf_counter()
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        took = time.perf_counter() - t0
        cpu1 = _children_cpu()
        codes.add(done.returncode)
        if i:
            times.append(took)
            if cpu0 is not None:
                cpus.append(cpu1 - cpu0)
    return times, cpus, codes


def breakdown(python: str, bundle: Path, pub: Path, runs: int) -> dict | None:
    """Median import, audit and per-check times of ``runs`` in-process audits."""
    got = []
    for _ in range(runs):
        done = subprocess.run([python, "-c", BREAKDOWN, str(bundle), str(pub)], capture_output=True,
                              text=True)
        if done.returncode != 0:
            print(f"breakdown failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
            return None
        got.append(json.loads(done.stdout.strip().splitlines()[-1]))
    checks = {name: statistics.median(g["checks"].get(name, 0.0) for g in got) for name in got[0]["checks"]}
    return {"import_s": statistics.median(g["import_s"] for g in got),
            "audit_s": statistics.median(g["audit_s"] for g in got),
            "checks": checks, "results": got[-1]["results"]}


def show_breakdown(b: dict) -> None:
    print(f"in-process (median of runs): import {b['import_s']:.3f} s, run_audit {b['audit_s']:.3f} s")
    for name, took in b["checks"].items():
        print(f"  {name:16s} {took:7.3f} s  {b['results'].get(name, '')}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter whose dpbundle is timed")
    ap.add_argument("--bundle", type=Path, help="audit this bundle instead of the example one")
    ap.add_argument("--pubkey", type=Path, help="its public key (with --bundle)")
    ap.add_argument("--rows", type=int, help="--example-rows for the example bundle (default: its own)")
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "dpbundle-bench-audit-speed")
    ap.add_argument("--rebuild", action="store_true", help="make the example bundle again")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--breakdown-runs", type=int, default=3)
    ap.add_argument("--goal", type=float, default=GOAL_S)
    args = ap.parse_args(argv)

    if args.bundle is not None:
        if args.pubkey is None:
            ap.error("--bundle needs --pubkey")
        bundle, pub = args.bundle, args.pubkey
    else:
        bundle, pub = make_bundle(args.workdir, args.rows, args.rebuild)
    command = dpbundle_command(args.python)
    print(f"bundle: {bundle} ({data_rows(bundle):,} rows of data.csv)")
    print(f"timing: {' '.join(command[:1] + (['-c', '...'] if len(command) > 1 else []))} audit ... "
          f"({args.repeats} runs after a warm-up)")
    print(f"machine: {os.cpu_count()} cores; before: {running()}")
    times, cpus, codes = time_cli(command, bundle, pub, args.repeats)
    print(f"after: {running()}")
    median = statistics.median(times)
    print(f"dpbundle audit wall time: median {median:.2f} s (min {min(times):.2f}, max {max(times):.2f}; "
          f"runs: {', '.join(f'{t:.2f}' for t in times)}); exit codes {sorted(codes)}")
    if cpus:
        print(f"CPU time (user + system, with the PDF helper process): median {statistics.median(cpus):.2f} s "
              f"(on a busy machine the wall time is longer than on an idle one; the CPU time much less so)")
    b = breakdown(args.python, bundle, pub, args.breakdown_runs) if args.breakdown_runs > 0 else None
    if b is not None:
        show_breakdown(b)
    print(f"goal <= {args.goal:.2f} s: {'met' if median <= args.goal else 'NOT met'}")
    return 0 if codes == {0} else 1


if __name__ == "__main__":
    raise SystemExit(main())
