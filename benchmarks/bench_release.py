"""Wall time of ``dpbundle release --example births`` end to end, the datasheet included (issue 24:
goal <= 4 s on two cores).

    python benchmarks/bench_release.py [--python PATH] [--runs 3] [--example births] [--no-stages]

Runs the ``dpbundle`` console script beside ``--python`` (default: the Python running this
script; give another venv's python to time another checkout) ``--runs`` times, each in a fresh
subprocess writing a fresh bundle in a temporary directory (its private transcript in a
temporary private directory too, removed afterwards), and prints the median, min and max wall
time, then the median of each stage.

The stages come from the release itself: each run is made with ``DPBUNDLE_TIMINGS=1``, which
makes ``dpbundle release`` print ``dpbundle timing: <stage> <seconds> s`` lines to stderr
(release/bundle/timings.py). That variable is opt-in and off by default because the durations
are PRIVATE: the selection's duration is a proxy for its number of attempts, which dpbundle
never publishes. Use it (and this script) only on example data and on a console that is not
published; never set it for a real release. ``--no-stages`` runs without it (total time only).
A version of dpbundle without these lines gives the total only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIMING = re.compile(r"^dpbundle timing: (?P<stage>\S+) (?P<seconds>[0-9.]+) s$")
# the stages in the order a release goes through them (others are listed after these)
ORDER = ["example.simulate", "plan", "plan.spec", "plan.configs", "plan.prepare", "plan.renderer_check",
         "renderer.ready_after_start", "spend", "select", "write", "write.documents", "write.files", "write.html",
         "write.disk", "write.transcript", "write.pdf", "write.pdf.worker_render", "write.manifest"]


def run_once(script: Path, example: str, where: Path, stages: bool) -> tuple[float, dict[str, float]]:
    """One release: (wall seconds, {stage: seconds}); a failure stops the benchmark."""
    private = where / "private"
    private.mkdir(mode=0o700)
    env = {**os.environ, "COLUMNS": "100", "DPBUNDLE_PRIVATE_DIR": str(private)}
    env.pop("DPBUNDLE_TIMINGS", None)
    if stages:
        env["DPBUNDLE_TIMINGS"] = "1"
    start = time.perf_counter()
    proc = subprocess.run([str(script), "release", "--example", example, "--out", str(where / "bundle")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, check=False)
    wall = time.perf_counter() - start
    err = proc.stderr.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{script} release exited {proc.returncode}:\n{err[-3000:]}")
    found: dict[str, float] = {}
    for line in err.splitlines():
        m = TIMING.match(line.strip())
        if m:
            found[m["stage"]] = found.get(m["stage"], 0.0) + float(m["seconds"])
    return wall, found


def _depth(name: str, names: list[str]) -> int:
    """How deep a stage is nested: ``write.pdf`` is inside ``write`` when that is a stage too."""
    parent = name.rpartition(".")[0]
    return _depth(parent, names) + 1 if parent in names else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="DPBUNDLE_TIMINGS=1 (set for each run unless --no-stages) prints "
                                            "PRIVATE stage durations to stderr (the selection's duration "
                                            "reveals its number of attempts): use it only on example data, "
                                            "on a console that is not published.")
    parser.add_argument("--python", type=Path, default=Path(sys.executable),
                        help="the Python of the venv whose dpbundle to time (default: this one)")
    parser.add_argument("--runs", "-n", type=int, default=3, help="releases to time (default 3)")
    parser.add_argument("--example", default="births", help="the built-in example (default births)")
    parser.add_argument("--no-stages", action="store_true",
                        help="do not set DPBUNDLE_TIMINGS=1 (total wall time only)")
    opts = parser.parse_args(argv)
    script = opts.python.absolute().parent / "dpbundle"   # the venv's bin, not the link's target
    if not script.exists():
        raise SystemExit(f"{script}: no dpbundle console script beside {opts.python}")
    print(f"{script} release --example {opts.example} ({opts.runs} runs)")
    walls, stages = [], []
    for i in range(opts.runs):
        where = Path(tempfile.mkdtemp(prefix="bench-release-"))
        try:
            wall, found = run_once(script, opts.example, where, not opts.no_stages)
        finally:
            shutil.rmtree(where, ignore_errors=True)
        walls.append(wall)
        stages.append(found)
        print(f"  run {i + 1}: {wall:.2f} s")
    print(f"wall: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s")
    names = sorted({k for s in stages for k in s}, key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k))
    if names:
        print("stages (median over the runs that report them; nested ones indented):")
        for name in names:
            values = [s[name] for s in stages if name in s]
            print(f"  {'  ' * _depth(name, names)}{name:<30} {statistics.median(values):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
