"""National scale (issue 28): release, audit and enclave replay of a births registry of N rows.

Generates the registry by resampling the public 160k sample with replacement (seeded, streamed
in chunks of a million rows: the file is never held in memory), then times, each in its own
process, with its peak resident memory (``os.wait4``: the process and the children it waited
for):

1. ``dpbundle release`` (births spec, the narrowed list measured at 160k, ``--allow-other-size``,
   stop probability 0) with ``DPBUNDLE_TIMINGS=1`` (its stage times, PRIVATE in a real release:
   use only on example data);
2. ``dpbundle audit`` of the bundle (public checks);
3. ``dpbundle audit --transcript --data`` (the enclave replay).

    python benchmarks/bench_national.py --rows 50000000 [--records-policy declared_public|dp_count]
        [--dir /tmp/national] [--keep] [--skip audit,replay]
    python benchmarks/bench_national.py --rows 3600000 --phases     # each phase in one process
    python benchmarks/bench_national.py --rows 50000000 --phases \
        --generators privbayes,privbayes-raked,privsyn,mst_pure,aim_pure   # one attempt of each

The large files go to --dir (default: a temporary directory, removed unless --keep); nothing
is committed. Figures: docs/benchmarks.md, "National scale".
"""
from __future__ import annotations

import argparse
import gc
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "data" / "nvss2019_singleton_160k.csv.gz"
TIMING = re.compile(r"^dpbundle timing: (?P<stage>\S+) (?P<seconds>[0-9.]+) s$")
CHUNK = 1_000_000


def write_resampled(out: Path, rows: int, seed: int = 2028) -> float:
    """``rows`` lines drawn with replacement from the 160k sample (its header first); seconds."""
    t0 = time.perf_counter()
    lines = gzip.decompress(SAMPLE.read_bytes()).splitlines()
    header, body = lines[0], np.array(lines[1:], dtype=object)
    rng = np.random.default_rng(seed)
    with open(out, "wb") as f:
        f.write(header + b"\n")
        for start in range(0, rows, CHUNK):
            pick = rng.integers(0, len(body), size=min(CHUNK, rows - start))
            f.write(b"\n".join(body[pick]) + b"\n")
    return time.perf_counter() - t0


def run(argv: list[str], env: dict) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stderr) of one command; a failure stops the benchmark."""
    t0 = time.perf_counter()
    err_file = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err_file, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err_file.seek(0)
    err = err_file.read().decode("utf-8", errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({os.waitstatus_to_exitcode(status)}):\n{err[-3000:]}")
    return wall, usage.ru_maxrss / 1024, err


def stages(err: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for line in err.splitlines():
        m = TIMING.match(line.strip())
        if m:
            found[m["stage"]] = found.get(m["stage"], 0.0) + float(m["seconds"])
    return found


def spec_with_policy(where: Path, policy: str, source: Path = ROOT / "examples" / "births.yaml") -> Path:
    """The births spec, with its records policy set to ``policy`` (dp_count: the cap raised by
    the count's epsilon, 0.1)."""
    text = source.read_text()
    if policy != "declared_public":
        text, k = re.subn(r"policy: declared_public", f"policy: {policy}", text)
        # the DP count's epsilon (0.1) on top of the 9.98: the cap is raised to 10.1
        text, c = re.subn(r"epsilon_cap: 10\.0\b", "epsilon_cap: 10.1", text)
        if k != 1 or c != 1:
            raise SystemExit("examples/births.yaml: no 'policy: declared_public' / 'epsilon_cap: 10' line to change")
    out = where / f"{source.stem}-{policy}.yaml"
    out.write_text(text)
    return out


class PeakSampler:
    """The resident memory of this process, sampled every 20 ms: the peak of each phase."""

    def __init__(self) -> None:
        import threading

        self.peak, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def rss_mb() -> float:
        with open("/proc/self/status") as f:
            return int(f.read().split("VmRSS:")[1].split()[0]) / 1024

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.rss_mb())

    def phase(self) -> float:
        """The peak since the last call (then reset to the current RSS)."""
        peak, self.peak = max(self.peak, self.rss_mb()), self.rss_mb()
        return peak


#: --generators: the generator settings put into the list's first configuration
GENERATORS = {
    "privbayes": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30},
    "privbayes-raked": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.25, "theta": 30,
                        "oneway": "measure", "oneway_split": 0.2},
    "privsyn": {"type": "privsyn"},
    "mst_pure": {"type": "mst_pure"},
    "aim_pure": {"type": "aim_pure"},
}


def phases(data: Path, spec_path: Path, configs: Path, generator: str | None,
           generators: list[str] | None = None) -> None:
    """Each phase of a release in this process: seconds and peak resident memory. With
    ``generators``, after one read, one attempt of each (named in :data:`GENERATORS`), each with
    its own peak (the process's resident memory during that attempt, the read table included)."""
    import yaml

    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.bundle.data_csv import write_data_csv
    from dpbundle.release.data.fingerprint import table_fingerprint
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.data.transform import cached_transform
    from dpbundle.release.scheme.iteration import run_iteration
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(spec_path)
    listed = [c["config"] for c in yaml.safe_load(configs.read_text())["configurations"]]
    config = next(c for c in listed if generator in (None, c["generator"]["type"]))
    mem = PeakSampler()
    rows = []

    def timed(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        rows.append((name, time.perf_counter() - t0, mem.phase()))
        return out

    prepared = timed("read, validate, raw constraints (to atoms), ledger fingerprint", prepare, data, spec)
    timed("ledger fingerprint (kept from the reading)", table_fingerprint, prepared, spec)
    timed("binning of one configuration (T as record types)", cached_transform, prepared, spec, config)
    res = timed("one iteration (fit, sample, project, 8 criteria)", run_iteration, prepared, spec, config,
                Randomness())
    for step, sec in res.timings.items():
        rows.append((f"  of which {step}", sec, None))
    for name in generators or []:
        other = dict(config, generator=GENERATORS[name])
        gc.collect()
        mem.phase()
        got = timed(f"one attempt with {name}", run_iteration, prepared, spec, other, Randomness())
        from dpbundle.mechanisms.sampling import model_sampler

        rows[-1] = (rows[-1][0] + f", sampler version {model_sampler(got.model)}",) + rows[-1][1:]
        rows.append(("  of which " + ", ".join(f"{k} {v:.2f} s" for k, v in got.timings.items()), None, None))
        del got
    with tempfile.TemporaryDirectory() as tmp:
        timed("data.csv written (from the candidate's record types)", write_data_csv, Path(tmp) / "data.csv",
              list(res.candidate.columns), res.candidate)
    print(f"phases at {prepared.rows_read:,} rows, generator {config['generator']} (in one process; "
          "peak RSS of each phase):")
    print("| phase | seconds | peak RSS (MB) |\n|---|---|---|")
    for name, sec, peak in rows:
        print(f"| {name} | {'' if sec is None else f'{sec:.2f}'} | {'' if peak is None else f'{peak:,.0f}'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=3_600_000)
    ap.add_argument("--records-policy", default="declared_public", choices=["declared_public", "dp_count"])
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--skip", default="", help="comma-separated phases to skip: audit, replay")
    ap.add_argument("--phases", action="store_true",
                    help="time each phase of a release in this process instead (no bundle written)")
    ap.add_argument("--configs", type=Path, default=ROOT / "examples" / "births-narrowed-nvss160k.yaml",
                    help="the configuration list (--phases: its first configuration of --generator)")
    ap.add_argument("--generator", default=None, help="--phases: the first listed configuration of this type")
    ap.add_argument("--generators", default="", help="--phases: then one attempt of each of these "
                    f"(comma-separated: {', '.join(GENERATORS)}) in the first configuration")
    ap.add_argument("--spec", type=Path, default=ROOT / "examples" / "births.yaml",
                    help="the release spec (its records policy set by --records-policy)")
    a = ap.parse_args()
    where = a.dir or Path(tempfile.mkdtemp(prefix="national-"))
    where.mkdir(parents=True, exist_ok=True)
    exe = str(Path(sys.executable).parent / "dpbundle")
    private = where / "private"
    private.mkdir(mode=0o700, exist_ok=True)
    env = {**os.environ, "COLUMNS": "100", "DPBUNDLE_PRIVATE_DIR": str(private), "DPBUNDLE_TIMINGS": "1"}
    try:
        data = where / f"births-{a.rows}.csv"
        if not data.exists():
            print(f"generating {data} ({a.rows:,} rows): {write_resampled(data, a.rows):.1f} s, "
                  f"{data.stat().st_size / 1e6:,.0f} MB", flush=True)
        spec = spec_with_policy(where, a.records_policy, a.spec)
        if a.phases:
            phases(data, spec, a.configs, a.generator, [g for g in a.generators.split(",") if g])
            return
        bundle, transcript = where / "bundle", private / "run.transcript.jsonl"
        shutil.rmtree(bundle, ignore_errors=True)
        transcript.unlink(missing_ok=True)
        ledger = where / "ledger.json"
        ledger.unlink(missing_ok=True)
        key = where / "bench.key"
        if not key.exists():
            subprocess.run([exe, "keygen", "--out", str(where / "bench")], check=True,
                           stdout=subprocess.DEVNULL, env={k: v for k, v in env.items()
                                                           if k != "DPBUNDLE_KEY_PASSPHRASE"})
        wall, rss, err = run([exe, "release", str(spec), str(data), "--out", str(bundle), "--key", str(key),
                              "--configs", str(a.configs),
                              "--allow-other-size", "--allow-other-spec", "--stop-probability", "0",
                              "--transcript", str(transcript), "--ledger", str(ledger)], env)
        print(f"release ({a.records_policy}): {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
        for name, sec in stages(err).items():
            print(f"  {name:<32} {sec:8.1f} s")
        if "audit" not in a.skip:
            wall, rss, _ = run([exe, "audit", str(bundle), "--pubkey", str(where / "bench.pub")], env)
            print(f"audit (public): {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
        if "replay" not in a.skip:
            wall, rss, _ = run([exe, "audit", str(bundle), "--pubkey", str(where / "bench.pub"), "--transcript", str(transcript),
                                "--data", str(data)], env)
            print(f"audit --transcript --data (enclave replay): {wall:.1f} s, peak {rss:,.0f} MB", flush=True)
    finally:
        if not a.keep and a.dir is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
