"""Before/after table of the command-level goals of issue 24, measured side by side in one run.

    python benchmarks/bench_commands.py --before OLD_VENV/bin/python [--after NEW_VENV/bin/python]

Runs, for each interpreter in turn (before, then after, for every benchmark), the benchmark
scripts beside this file with ``--python``: ``bench_cli_startup.py`` (``dpbundle --help`` and
``dpbundle audit --help``, median of 10), ``bench_release.py --no-stages`` (``dpbundle release
--example births`` end to end, median of 3) and ``bench_audit_speed.py`` (``dpbundle audit`` of a
160k-row bundle made once by the *after* version, median of 5), and prints one Markdown table
of the medians with the goals. The baseline is an install of the commit before the change in its
own venv, e.g.::

    git worktree add /tmp/baseline <commit> && python3 -m venv /tmp/baseline/.venv &&
    /tmp/baseline/.venv/bin/pip install -c constraints.txt /tmp/baseline
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: (row label, script and its arguments, regular expression of the median in its output, goal)
ROWS = [
    ("`dpbundle --help`", ["bench_cli_startup.py", "--runs", "10"], r"dpbundle --help\s+median ([0-9.]+) s", "<= 0.3 s"),
    ("`dpbundle audit --help`", ["bench_cli_startup.py", "--runs", "10"], r"dpbundle audit --help\s+median ([0-9.]+) s", "<= 0.3 s"),
    ("`dpbundle release --example births`", ["bench_release.py", "--runs", "3", "--no-stages"], r"wall: median ([0-9.]+) s", "<= 4 s"),
    ("`dpbundle audit` (160k-row bundle)", ["bench_audit_speed.py", "--repeats", "5", "--breakdown-runs", "1"],
     r"audit wall time: median ([0-9.]+) s", "<= 1.5 s"),
]


def run(script_args: list[str], python: Path, runner: Path) -> str:
    """The benchmark's output, run by ``runner`` (the after interpreter, whose bundle it reuses)."""
    done = subprocess.run([str(runner), str(HERE / script_args[0]), *script_args[1:], "--python", str(python)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{script_args[0]} --python {python} failed: {done.stderr.strip()[-800:]}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="the baseline venv's python")
    ap.add_argument("--after", type=Path, default=Path(sys.executable), help="the new venv's python (default: this one)")
    opts = ap.parse_args(argv)
    outputs: dict[tuple[str, str], str] = {}
    table = []
    for label, args, pattern, goal in ROWS:
        found = []
        for python in (opts.before, opts.after):
            key = (args[0], str(python))
            if key not in outputs:
                outputs[key] = run(args, python, opts.after)
            m = re.search(pattern, outputs[key])
            found.append(f"{float(m.group(1)):.2f} s" if m else "?")
        table.append(f"| {label} | {found[0]} | {found[1]} | {goal} |")
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else ["?"]
    print(f"machine: {os.cpu_count()} cores; load average after the run: {' '.join(load)}")
    print("| command | before | after | goal |\n|---|---|---|---|")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
