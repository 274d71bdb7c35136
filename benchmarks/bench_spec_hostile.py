"""Time the refusal of hostile spec files (issue 12, "Spec parsing is untrusted input").

Writes each hostile spec into a temporary directory and loads it with ``load_spec`` (the path of
``spec validate``, ``release`` and ``sweep``), best of --repeat runs; checks that every hostile file
is refused with a SpecError that has a line and column, and prints seconds and the message.
Also times ``dpbundle spec validate`` on the billion-laughs file as a subprocess (interpreter
start-up included) and, for comparison, loading the valid births example and the largest flat
file the size limit allows.

    python benchmarks/bench_spec_hostile.py [--repeat 5]

Goal: every refusal well under 1 s.
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
    }
    out = {}
    for what, (name, text) in texts.items():
        path = tmp / name
        path.write_text(text, "utf-8")
        out[what] = path
    return out


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

        laughs = tmp / "laughs.yaml"
        exe = Path(sys.executable).with_name("dpbundle")
        cmd = [str(exe), "spec", "validate", str(laughs)] if exe.exists() else \
            [sys.executable, "-m", "dpbundle.release.cli.main", "spec", "validate", str(laughs)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        print(f"\n`dpbundle spec validate` on the billion laughs (subprocess, start-up included): "
              f"{time.perf_counter() - t0:.2f} s, exit code {proc.returncode}")

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
