"""Time the refusal of hostile spec files (issue 12, "Spec parsing is untrusted input").

Writes each hostile spec into a temporary directory and loads it with ``load_spec`` (the path of
``spec validate``, ``release`` and ``sweep``), best of --repeat runs; checks that every hostile file
is refused with a SpecError that has a line and column, and prints seconds and the message.
Also times ``dpbundle spec validate`` on the billion-laughs file as a subprocess (interpreter
start-up included) and, for comparison, loading the valid births example and the largest flat
file the size limit allows.

    python benchmarks/bench_spec_hostile.py [--repeat 5]

Goal: every refusal well under 1 s (the 1.2 MB file of 100,000 entries: bounded by its size, a
few seconds of YAML parsing; it hung before issue 36).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"


def billion_laughs(levels: int = 10, width: int = 10) -> str:
    """The classic alias bomb, about 3 KB: ``width ** levels`` lists of ten 180-character strings
    once written out (10^10 lists here, some 10^13 bytes)."""
    lines = ["dpbundle_spec: 1", "lol0: &lol0 [" + ", ".join(['"' + "lol" * 60 + '"'] * 10) + "]"]
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * width) + "]")
    lines.append(f"release: *lol{levels}")
    return "\n".join(lines) + "\n"


def hostile_files(tmp: Path) -> dict[str, Path]:
    births = BIRTHS.read_text("utf-8")
    texts = {
        "billion laughs (YAML aliases)": ("laughs.yaml", billion_laughs()),
        "100,000 nested brackets (YAML)": ("deep.yaml", "x: " + "[" * 100_000 + "]" * 100_000 + "\n"),
        "100,000 nested brackets (JSON)": ("deep.json", '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
        "recursive alias": ("self.yaml", "x: &a [1, *a]\n"),
        "duplicate privacy section": ("dup.yaml", births + "privacy:\n  epsilon_generation: 49\n  epsilon_cap: 100\n"),
        "epsilon 8e8 without acknowledgement": ("eps.yaml", births.replace(
            "epsilon_generation: 4.0", "epsilon_generation: 400000000.0").replace(
            "epsilon_cap: 10.0", "epsilon_cap: 1000000000.0")),
        # issue 36: the attack's hostile specs
        "epsilon_generation 1e-300 (issue 36)": ("tiny.yaml", births.replace(
            "epsilon_generation: 4.0", "epsilon_generation: 1.0e-300")),
        "epsilon 1e308, acknowledged (issue 36)": ("huge.yaml", births.replace(
            "epsilon_generation: 4.0", "epsilon_generation: 1.0e+308").replace(
            "epsilon_cap: 10.0", "epsilon_cap: 1.0e+308\n  acknowledge_weak_guarantee: true")),
        "100,000 bad private_data_sha256 (36)": ("sha.yaml", births.replace(
            "private_data_sha256: []", "private_data_sha256: [" + ", ".join(["bad-sha-12"] * 100_000) + "]")),
        "999,000 generator settings (issue 36)": ("grid.yaml", births.replace(
            "epsilon_split: [0.1, 0.25, 0.5, 0.75]", "epsilon_split: [" + ", ".join(
                f"0.{i:03d}" for i in range(1, 1000)) + "]").replace(
            "theta: [2, 4, 8, 16, 20, 25, 30, 35, 40, 50, 60, 100]",
            "theta: [" + ", ".join(str(t) for t in range(1, 1001)) + "]")),
        "NUL byte in a text (issue 36)": ("nul.yaml", births.replace("publisher: ", "publisher: \x00", 1)),
        "inverted period (issue 36)": ("period.yaml", births.replace(
            'period: {start: "2014-01-01", end: "2014-12-31"}', 'period: {start: "2015-01-01", end: "2014-12-31"}')),
        "lone surrogate in the title (issue 36)": ("surrogate.yaml", births.replace(
            'title: "Live', 'title: "\\udcffLive', 1)),
    }
    out = {}
    for what, (name, text) in texts.items():
        path = tmp / name
        path.write_text(text, "utf-8")
        out[what] = path
    return out


def _subprocess(path: Path, command: str) -> tuple[float, int, str]:
    """`dpbundle spec COMMAND PATH` in a fresh process: (seconds, exit code, its output)."""
    exe = Path(sys.executable).with_name("dpbundle")
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "dpbundle.release.cli.main"]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(base + ["spec", command, str(path)], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, -1, "timed out (a hang)"
    return time.perf_counter() - t0, proc.returncode, proc.stdout + proc.stderr


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    from dpbundle.release.spec.load import MAX_SPEC_BYTES, SpecError, load_spec

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        print(f"{'case':<40} {'bytes':>9} {'best s':>8}  refusal")
        for what, path in hostile_files(tmp).items():
            errors: list[SpecError] = []

            def attempt() -> None:
                try:
                    load_spec(path)
                except SpecError as exc:
                    errors.append(exc)
                else:
                    raise SystemExit(f"{what}: NOT refused")

            seconds = best_of(attempt, args.repeat)
            exc = errors[-1]
            assert exc.locations[0] is not None, f"{what}: no line and column"
            print(f"{what:<40} {path.stat().st_size:>9,} {seconds:>8.4f}  {str(exc).splitlines()[1].strip()[:110]}")

        print("\nas subprocesses (interpreter start-up included; timeout 120 s):")
        for name, command in (("laughs.yaml", "validate"), ("sha.yaml", "validate"), ("grid.yaml", "validate"),
                              ("grid.yaml", "space"), ("nul.yaml", "validate"), ("tiny.yaml", "validate"),
                              ("huge.yaml", "validate")):
            seconds, code, tail = _subprocess(tmp / name, command)
            print(f"  dpbundle spec {command:<8} {name:<14} {seconds:6.2f} s  exit {code}  "
                  f"traceback: {'YES' if 'Traceback' in tail else 'no'}")

        print("\nfor comparison (accepted):")
        print(f"{'births.yaml':<40} {BIRTHS.stat().st_size:>9,} {best_of(lambda: load_spec(BIRTHS), args.repeat):>8.4f}")
        flat = tmp / "flat.json"  # the largest flat document the size limit lets through: refused by the schema
        flat.write_text(json.dumps({"x": [0] * ((MAX_SPEC_BYTES - 20) // 3)}, separators=(",", ":")), "utf-8")

        def load_flat() -> None:
            try:
                load_spec(flat)
            except SpecError:
                pass

        print(f"{'flat list at the size limit (JSON)':<40} {flat.stat().st_size:>9,} {best_of(load_flat, 1):>8.4f}")


if __name__ == "__main__":
    main()
