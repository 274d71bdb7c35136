"""Wall time of the CLI's help (issue 24): ``dpbundle --help`` and ``dpbundle audit --help``.

    python benchmarks/bench_cli_startup.py [--python PATH] [--runs 10]

Runs the installed console script of a virtual environment (by default the one of the Python
running this script: ``Path(sys.executable).parent / "dpbundle"``; with ``--python PATH``, the
``dpbundle`` beside that interpreter, to time another checkout's venv) ``--runs`` times per
command in a fresh subprocess, and prints the median, min and max wall time of each. The first
run of each command is timed like the others (no warm-up is discarded); run the script twice
when the file cache is cold.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["audit", "--help"])


def time_command(script: Path, args: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of ``script args`` (output discarded; a failure stops)."""
    env = {**os.environ, "COLUMNS": "100"}
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run([str(script), *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{script} {' '.join(args)} exited {proc.returncode}: "
                             f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", type=Path, default=Path(sys.executable),
                        help="the Python of the venv whose dpbundle to time (default: this one)")
    parser.add_argument("--runs", type=int, default=10, help="runs per command (default 10)")
    opts = parser.parse_args(argv)
    # the venv's bin directory, not the interpreter's resolved target (a venv's python is a link)
    script = opts.python.absolute().parent / "dpbundle"
    if not script.exists():
        raise SystemExit(f"{script}: no dpbundle console script beside {opts.python}")
    print(f"{script} ({opts.runs} runs each)")
    for args in COMMANDS:
        times = time_command(script, args, opts.runs)
        print(f"dpbundle {' '.join(args):<14} median {statistics.median(times):.3f} s  "
              f"(min {min(times):.3f}, max {max(times):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
