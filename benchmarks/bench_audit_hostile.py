"""Benchmark: `dpbundle audit` and `dpbundle sample` on bundles with hostile sizes (issue 27, 2).

Builds real pre-registered `publish: model` releases of the example registry (privsyn and
PrivBayes raked to one-way shares), makes every hostile case of tests/hostile_bundles.py from
them (each re-signed with the publisher's key: only the size is hostile), and runs

    dpbundle audit B --pubkey K.pub --json OUT        and        dpbundle sample B --rows 1000

on each in a fresh process, printing the wall time, the process's peak resident memory
(``ru_maxrss`` of ``os.wait4``, of a child of a small interpreter; the imports alone take about
100 MB), the
exit code and the failed checks. A run still going after --timeout seconds is killed.

Then the worst cases the bounds admit (docs/audit.md, "Bounds"): a PrivSyn model over every
pair of columns with the largest gum_rounds the caps allow (1000 rounds, 15,006 work units a
row, on the small bundle; on a --rows bundle the largest the work bound of 64 units per byte
admits), and the honest audit of the --rows bundle, to state time and memory per MB.

    python benchmarks/bench_audit_hostile.py [--rows 200000] [--timeout 120]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
DPBUNDLE = Path(sys.executable).with_name("dpbundle")


# Runs the command as the child of a small fresh interpreter and writes the child's peak RSS:
# a child forked straight from this (large) process would inherit its memory high-water mark.
_WRAPPER = ("import os, subprocess, sys\n"
            "p = subprocess.Popen(sys.argv[2:])\n"
            "_, status, usage = os.wait4(p.pid, 0)\n"
            "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
            "sys.exit(os.waitstatus_to_exitcode(status) & 255)\n")


def measure(args: list, timeout: float, out: Path) -> dict:
    """Run ``args`` (stdout and stderr to ``out``); wall s, peak RSS MB, exit code (None: killed)."""
    rss = out.with_suffix(".rss")
    rss.unlink(missing_ok=True)
    start = time.perf_counter()
    with open(out, "wb") as fh:
        p = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(rss), *[str(a) for a in args]],
                             stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            code = None
    took = time.perf_counter() - start
    mb = int(rss.read_text()) / 1024 if rss.exists() else float("nan")
    return {"s": took, "mb": mb, "code": code}


def bundle_mb(b: Path) -> float:
    return sum(p.stat().st_size for p in b.rglob("*") if p.is_file()) / 1e6


def failed_checks(report: Path) -> str:
    try:
        rep = json.loads(report.read_text())
    except (OSError, ValueError):
        return ""
    return ", ".join(c["check"] for c in rep["checks"] if c["result"] == "fail")


def run_case(name: str, what: str, b: Path, pub: Path, work: Path, timeout: float) -> dict:
    report = work / f"{name}.audit.json"
    report.unlink(missing_ok=True)
    a = measure([DPBUNDLE, "audit", b, "--pubkey", pub, "--json", report], timeout, work / f"{name}.audit.log")
    s = measure([DPBUNDLE, "sample", b, "--rows", 1000, "--out", work / f"{name}.sample.csv", "--force"],
                timeout, work / f"{name}.sample.log")
    row = {"case": name, "what": what, "bundle_mb": bundle_mb(b), "audit": a, "sample": s,
           "failed": failed_checks(report) if a["code"] is not None else "(killed)"}
    _print_row(row)
    return row


def _cell(m: dict) -> str:
    code = "killed" if m["code"] is None else m["code"]
    return f"{m['s']:.2f} | {m['mb']:.0f} | {code}"


def _print_row(row: dict) -> None:
    print(f"| {row['what']} | {row['bundle_mb']:.2f} | {_cell(row['audit'])} | {row['failed']} | "
          f"{_cell(row['sample'])} |", flush=True)


def all_pairs_model(b: Path, rounds: int) -> dict:
    """Make b's PrivSyn model cover every pair of columns (uniform tables for the pairs it did
    not select) with ``rounds`` GUM rounds, in model.json and the configuration; re-signing is
    the caller's. Returns the manifest fields to set."""
    import hostile_bundles as hb

    doc = json.loads((b / "model.json").read_text())
    dom = doc["domain"]
    have = {tuple(sorted(m["columns"])) for m in doc["marginals"]}
    for i in range(len(dom)):
        for j in range(i + 1, len(dom)):
            if (i, j) not in have:
                cells = dom[i] * dom[j]
                doc["marginals"].append({"columns": [i, j], "p": [1.0 / cells] * cells})
                doc["selected"].append([i, j])
    doc["gum_rounds"] = rounds
    doc["generator"] = dict(doc["generator"], gum_rounds=rounds)
    (b / "model.json").write_text(json.dumps(doc))
    return hb._set_config(b, lambda c: c["generator"].update(gum_rounds=rounds))


def largest_rounds(b: Path) -> int:
    """The most GUM rounds of b's model (already over every pair) that the audit's bounds admit:
    at most 1000 (the generator's range), at most MAX_ROW_COST units a row, and the first
    sampling round within the re-derivation's work bound for b's size."""
    from dpbundle.audit.bounds import MAX_ROW_COST, first_round_rows, sampling_cost, work_budget
    from dpbundle.audit.bundle_io import open_bundle
    from dpbundle.audit.context import AuditContext
    from dpbundle.mechanisms.published import MAX_GUM_ROUNDS

    with open_bundle(b) as opened:
        ctx = AuditContext(opened)
        doc, view, n = ctx.json("model.json"), ctx.view(), ctx.json("metrics.json")["n"]
        size = sum(opened.files.values())
    budget, first = work_budget(size), first_round_rows(n)

    def fits(rounds: int) -> bool:
        cost = sampling_cost(dict(doc, gum_rounds=rounds), view)
        return cost <= MAX_ROW_COST and first * cost <= budget

    lo, hi = 1, MAX_GUM_ROUNDS
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="rows of the large honest bundle")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is killed")
    ap.add_argument("--work", type=Path, default=None, help="folder for the bundles (default: a temporary one)")
    args = ap.parse_args()
    import hostile_bundles as hb

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-audit-hostile-"))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    bases = {kind: hb.release_base(work / f"base-{kind}", kind) for kind in ("privsyn", "oneway")}
    print(f"(base releases made in {time.perf_counter() - t0:.1f} s, in {work})\n")
    print("| case | bundle MB | audit s | audit peak MB | audit exit | failed checks | "
          "sample s | sample peak MB | sample exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for kind, base in bases.items():
        rows.append(run_case(f"honest-{kind}", f"honest ({kind}, 3,955 rows)", base["bundle"], base["pub"],
                             work, args.timeout))
    for case in hb.CASES:
        base = bases[case.base]
        b = hb.make_case(case, base, work / f"case-{case.name}")
        rows.append(run_case(case.name, case.what, b, base["pub"], work, args.timeout))

    # -- the worst cases the bounds admit ----------------------------------------------------
    base = bases["privsyn"]
    d = len(json.loads((base["bundle"] / "model.json").read_text())["domain"])
    b = hb.make_case(hb.Case("w", "privsyn", lambda p: {}, "", "", "", 0, sign=False), base, work / "worst-small")
    fields = all_pairs_model(b, 1000)
    hb.resign(b, base["key"], **fields)
    rows.append(run_case("worst-small", f"all {d * (d - 1) // 2} pairs, gum_rounds 1000 (the largest the caps admit)",
                         b, base["pub"], work, args.timeout))

    big = hb.release_base(work / "base-big", "privsyn", rows=args.rows)
    n = json.loads((big["bundle"] / "metrics.json").read_text())["n"]
    rows.append(run_case("honest-big", f"honest (privsyn, {n:,} rows)", big["bundle"], big["pub"], work,
                         args.timeout))
    b = hb.make_case(hb.Case("w", "privsyn", lambda p: {}, "", "", "", 0, sign=False), big, work / "worst-big")
    all_pairs_model(b, 1)
    rounds = largest_rounds(b)
    fields = all_pairs_model(b, rounds)
    hb.resign(b, big["key"], **fields)
    rows.append(run_case("worst-big", f"{n:,} rows, all pairs, gum_rounds {rounds} (at the work bound)",
                         b, big["pub"], work, args.timeout))
    (work / "results.json").write_text(json.dumps(rows, indent=2))
    print(f"\n(results in {work / 'results.json'}; {time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
