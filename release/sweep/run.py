"""``dpbundle sweep``: estimate every configuration's acceptance probability on PUBLIC data.

Before the private run, each configuration of the spec's space (or a seeded random sample of K
of them, or a given list: ``--configs``) is tried on similar public data, exactly as the private run would try it: the
real iteration (transform, DP fit, sample, constrain, project, DP criteria) with the same DP
noise, from a fresh recording ``Randomness`` per run whose transcript is discarded. The data are
public, so the sweep spends no budget and never touches the budget ledger; it refuses to run on
a file whose SHA-256 the spec lists in ``privacy.private_data_sha256``.

Repetitions are adaptive (:class:`~.sweep_exec.AdaptivePlan`): a first batch of ``--reps`` runs
per configuration, then batches until the Wilson 95% interval of its acceptance lies above or
below ``--min-acceptance`` (:func:`~.sweep_exec.decide`) or it has ``--max-reps`` runs; one
still straddling the cut-off then is decided by its point estimate and flagged ``undecided``.

Output directory (DIR):

- ``sweep.json``      what was swept: spec and data fingerprints, sample seed, reps, sessions
- ``runs.jsonl``      one JSON record per run, appended (and fsynced) as runs finish
                      (schema ``sweep-run``); ``runs.csv`` is the same table, flat, rewritten at the end
- ``utility.jsonl``   granular utility of accepted candidates (schema ``sweep-utility``)
- ``summary.csv``, ``summary.json``  per configuration: runs, acceptance, Wilson 95% interval,
                      decision, expected private iterations 1/p with [1/high, 1/low]; per
                      dimension and per criterion; the criteria failing most (schema ``sweep-summary``)
- ``narrowed.yaml``   the configurations with acceptance >= ``--min-acceptance`` (read by
                      ``dpbundle release --configs`` and ``dpbundle sweep --configs``; see
                      :func:`load_narrowed`); NOT written when no configuration qualifies (an
                      old one is removed, and the CLI exits 1)
- ``report.html``, ``report.pdf``

Running again with the same DIR resumes: finished runs (key: config id + rep index) are
kept (runs.jsonl is append-only) and the adaptive decisions continue from them; a different
spec or data fingerprint is refused.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import secrets
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, Optional

import typer

from dpbundle.release.data.fingerprint import file_sha256
from dpbundle.release.sweep.execute import (ABOVE, BELOW, UNDECIDED, WILSON_Z, AdaptivePlan, Task, decide, execute, jsonable,
                         wilson_interval)


__all__ = [
    "SweepError", "SweepResult", "run_sweep", "wilson_interval", "load_narrowed", "read_runs",
    "select_configs", "flatten_config", "cli_sweep", "WILSON_Z", "read_config_list", "decide",
    "expected_iterations",
]

FORMAT = "dpbundle-sweep/1"
NARROWED_FORMAT = "dpbundle-narrowed/1"
META, RUNS, RUNS_CSV, UTILITY = "sweep.json", "runs.jsonl", "runs.csv", "utility.jsonl"
SUMMARY_CSV, SUMMARY_JSON, NARROWED = "summary.csv", "summary.json", "narrowed.yaml"
REPORT_HTML, REPORT_PDF = "report.html", "report.pdf"


BOOTSTRAP_MESSAGE = (
    "{call} was called while a worker process was starting: the script that calls it is being "
    "re-run by Python's multiprocessing (spawn), because the call is not under "
    "`if __name__ == \"__main__\":`. Nothing was run in this worker; put the call under that guard.")


class SweepError(Exception):
    """Unusable input or output directory (exit code 2); the message says what and why."""

    exit_code = 2


@dataclass
class SweepResult:
    out: Path
    summary: dict
    new_runs: int
    seconds: float
    backend: str
    workers: int
    files: dict = field(default_factory=dict)

    @property
    def runs_per_minute(self) -> float | None:
        return self.new_runs / self.seconds * 60.0 if self.new_runs and self.seconds > 0 else None


# --------------------------------------------------------------------------- small helpers

def _spec_fingerprint(spec) -> str:
    """SHA-256 of the canonical public spec, without what does not change a sweep run: the
    private fingerprints, ``privacy.records`` (the sweep runs on public data of a public size;
    the real run's DP count moves n by a few records), and the words of the datasheet (the
    ``release`` section, and the columns' descriptions and units), so that editing a title or a
    description does not invalidate a configuration list."""
    import copy

    from dpbundle.release.spec.load import canonical_json

    doc = spec.public_dict() if hasattr(spec, "public_dict") else getattr(spec, "raw", spec)
    doc = copy.deepcopy(doc)
    (doc.get("privacy") or {}).pop("records", None)
    doc.pop("release", None)
    for col in doc.get("columns") or []:
        if isinstance(col, dict):
            col.pop("description", None)
            col.pop("unit", None)
    return hashlib.sha256(canonical_json(doc)).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def flatten_config(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"columns": {"parity": "unit"}, ...}`` -> ``{"columns.parity": "unit", ...}``."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_config(v, key + "."))
        else:
            out[key] = v
    return out


def select_configs(ids: list[str], sample: int | None, seed: int) -> list[str]:
    """All ``ids`` (sample None) or the first ``sample`` of a permutation seeded with ``seed``.

    Samples are nested: a larger K with the same seed extends a smaller one.
    """
    if sample is None or sample >= len(ids):
        return list(ids)
    import numpy as np

    perm = np.random.Generator(np.random.PCG64(int(seed))).permutation(len(ids))
    return [ids[int(i)] for i in perm[: int(sample)]]


def _validate(doc: Any, schema: str, what: str) -> None:
    from dpbundle.release.common.jsonschemas import validate

    validate(doc, schema, document=what)


def _append_jsonl(path: Path, record: dict) -> None:
    line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def _end_torn_line(path: Path) -> None:
    """After a crash mid-write the file may end inside a record: end that line so the next
    append starts a fresh one (the torn record is then skipped by the reader)."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")


def _read_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSON-lines file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "config_id" in rec and "rep" in rec:
                yield rec


def read_runs(out: Path) -> dict[tuple[str, int], dict]:
    """The latest record of every (config_id, rep) in ``out/runs.jsonl``."""
    runs: dict[tuple[str, int], dict] = {}
    for rec in _read_jsonl(Path(out) / RUNS):
        runs[(str(rec["config_id"]), int(rec["rep"]))] = rec
    return runs


def read_utility(out: Path) -> dict[tuple[str, int], dict]:
    recs: dict[tuple[str, int], dict] = {}
    for rec in _read_jsonl(Path(out) / UTILITY):
        recs[(str(rec["config_id"]), int(rec["rep"]))] = rec
    return recs


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


# --------------------------------------------------------------------------- narrowed list

def load_narrowed(path: Path | str, spec=None) -> list[dict]:
    """The configurations of a ``narrowed.yaml`` written by ``dpbundle sweep``.

    Returns a list of ``{"id", "config", "acceptance", "wilson_low", "wilson_high", "runs"}``.
    Raises ``ValueError`` (naming the file and entry) if the file is malformed, an id does not
    match its configuration, or (with ``spec``) a configuration is not in the spec's space.
    """
    path = Path(path)
    doc = read_list_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("configurations"), list):
        raise ValueError(f"{path}: expected a mapping with a 'configurations:' list")
    _validate(doc, "narrowed", str(path))  # SchemaValidationError (a ValueError) naming the JSON path
    from dpbundle.release.scheme.space import config_id

    out = []
    for i, entry in enumerate(doc["configurations"]):
        where = f"{path}: configurations[{i}]"
        if config_id(entry["config"]) != str(entry["id"]):
            raise ValueError(f"{where}: id {entry['id']!r} does not match its configuration "
                             f"(which has id {config_id(entry['config'])!r}); was the file edited?")
        if spec is not None:
            from dpbundle.release.scheme.space import check_config

            problems = check_config(spec, entry["config"])
            if problems:
                raise ValueError(f"{where}: not a configuration of the spec: " + "; ".join(problems))
        out.append({
            "id": str(entry["id"]), "config": entry["config"],
            "acceptance": entry.get("acceptance"), "wilson_low": entry.get("wilson_low"),
            "wilson_high": entry.get("wilson_high"), "runs": entry.get("runs"),
        })
    return out


MAX_LIST_BYTES = 20_000_000


def read_list_document(path: Path) -> Any:
    """A narrowed list parsed with the spec's hardened YAML reader (alias, depth, duplicate-key
    and size limits): it is input too. ValueError naming the file, line and column."""
    from dpbundle.release.spec.yaml_text import SpecTextError, load_yaml

    try:
        if path.stat().st_size > MAX_LIST_BYTES:
            raise ValueError(f"{path}: larger than {MAX_LIST_BYTES:,} bytes; not a narrowed list")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the narrowed configuration list: {exc}") from None
    try:
        return load_yaml(text)[0]
    except SpecTextError as exc:
        raise ValueError(f"{path}: cannot read the narrowed configuration list: "
                         f"{str(exc).replace('(file): ', '')}") from None


def read_config_list(path: Path | str, spec, spec_sha: str, space_ids: set[str], *,
                     allow_other_spec: bool = False) -> list[str]:
    """The configuration ids of a list to re-measure (``--configs``), in file order, duplicates dropped.

    The file must be a narrowed list (schema ``narrowed``); every id must match its
    configuration and be a configuration of ``spec``'s space; a list written for another spec
    (``spec_sha256`` != ``spec_sha``) is refused unless ``allow_other_spec``. Raises
    :class:`SweepError` (exit 2) naming the file and the entry.
    """
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"{path}: no such file (--configs)")
    try:
        entries = load_narrowed(path, spec)
    except ValueError as exc:
        raise SweepError(f"--configs: {exc}") from None
    listed_sha = (read_list_document(path) or {}).get("spec_sha256")
    if listed_sha is not None and listed_sha != spec_sha and not allow_other_spec:
        raise SweepError(
            f"{path}: this configuration list was written for another spec:\n"
            f"  list spec_sha256: {listed_sha}\n  this spec:        {spec_sha}\n"
            "Its acceptance figures do not describe this spec. Re-measuring it is still possible: pass "
            "--allow-other-spec (every configuration must still belong to this spec's space).")
    if not entries:
        raise SweepError(f"{path}: lists no configurations; nothing to re-measure")
    ids: list[str] = []
    for i, e in enumerate(entries):
        if e["id"] not in space_ids:  # check_config passed, so this means the id scheme differs
            raise SweepError(f"{path}: configurations[{i}]: id {e['id']} is not a configuration id of this "
                             "spec's space")
        if e["id"] not in ids:
            ids.append(e["id"])
    return ids


def expected_iterations(p: float | None, low: float | None, high: float | None) -> dict:
    """Expected private iterations 1/p (geometric number of trials until the first pass) with the
    interval [1/high, 1/low] from p's Wilson bounds; None stands for infinity (p or low = 0)."""
    def inv(x: float | None) -> float | None:
        return 1.0 / x if x else None

    return {"expected_iterations": inv(p), "expected_iterations_low": inv(high),
            "expected_iterations_high": inv(low)}


def _narrowed_yaml(summary: dict, configs_by_id: dict[str, dict], where: str = NARROWED) -> str:
    import yaml

    nar = summary["narrowed"]
    doc = {
        "format": NARROWED_FORMAT,
        "spec_sha256": summary["spec_sha256"],
        "data_sha256": summary["data_sha256"],
        "measured_on": {"n": summary["n"]} | ({"rows": summary["rows"]} if summary.get("rows") else {}),
        "min_acceptance": summary["min_acceptance"],
        "expected_private_iterations": nar["expected_private_iterations"],
        "expected_private_iterations_low": nar["expected_private_iterations_low"],
        "expected_private_iterations_high": nar["expected_private_iterations_high"],
        "expected_private_seconds": nar["expected_private_seconds"],
        "undecided": nar["undecided"],
        "configurations": [
            {"id": c["config_id"], "config": configs_by_id[c["config_id"]],
             "acceptance": c["acceptance"], "wilson_low": c["wilson_low"],
             "wilson_high": c["wilson_high"], "runs": c["runs"], "decision": c["decision"],
             "expected_iterations": c["expected_iterations"],
             "expected_iterations_low": c["expected_iterations_low"],
             "expected_iterations_high": c["expected_iterations_high"]}
            for c in summary["configurations"] if c["narrowed"]
        ],
    }
    doc = jsonable(doc)
    _validate(doc, "narrowed", where)
    head = ("# Configurations whose acceptance probability on public data is at least "
            f"{summary['min_acceptance']:g} (dpbundle sweep).\n"
            "# Use: dpbundle release SPEC DATA --configs narrowed.yaml (the private run draws uniformly from this list).\n"
            "# decision: 'above' = the Wilson 95% interval lies above the cut-off; 'undecided' = it still straddles\n"
            "# the cut-off after --max-reps runs and the point estimate decided (re-measure with a larger --max-reps).\n"
            "# expected_iterations: 1/acceptance, interval [1/wilson_high, 1/wilson_low] (null: unbounded).\n")
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=120)


# --------------------------------------------------------------------------- summary

def _quantiles(xs: list[float]) -> dict:
    import numpy as np

    if not xs:
        return {"min": None, "q25": None, "median": None, "q75": None, "max": None}
    a = np.asarray(xs, dtype=float)
    q = np.quantile(a, [0, 0.25, 0.5, 0.75, 1.0])
    return dict(zip(["min", "q25", "median", "q75", "max"], (float(v) for v in q)))


def _dimension_keys(all_configs: list[dict]) -> list[str]:
    """Flattened configuration keys whose value varies over the space (in first-seen order)."""
    flats = [flatten_config(cfg) for cfg in all_configs]
    keys: dict[str, None] = {}
    for flat in flats:
        for k in flat:
            keys.setdefault(k, None)
    return [k for k in keys if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]


def summarise(*, meta: dict, selected: list[str], configs_by_id: dict[str, dict],
              dimension_keys: list[str], runs: dict, utility: dict, min_acceptance: float) -> dict:
    """The sweep summary (deterministic given the records)."""
    sel = set(selected)
    ok_runs = {k: r for k, r in runs.items() if k[0] in sel and not r.get("error")}
    err_runs = {k: r for k, r in runs.items() if k[0] in sel and r.get("error")}
    rows = []
    for cid in selected:
        mine = [r for (c, _), r in ok_runs.items() if c == cid]
        n, k = len(mine), sum(1 for r in mine if r["passed"])
        lo, hi = wilson_interval(k, n)
        crit: dict[str, list] = {}
        for r in mine:
            for cr in r.get("criteria", []):
                crit.setdefault(cr["id"], []).append(bool(cr["passed"]))
        secs = [float(r["seconds"]) for r in mine]
        acc = k / n if n else None
        rows.append({
            "config_id": cid,
            "runs": n, "accepted": k,
            "errors": sum(1 for (c, _) in err_runs if c == cid),
            "acceptance": acc,
            "wilson_low": lo if n else None, "wilson_high": hi if n else None,
            "decision": decide(k, n, min_acceptance),
            **expected_iterations(acc, lo if n else None, hi if n else None),
            "median_seconds": statistics.median(secs) if secs else None,
            "narrowed": bool(n and k / n >= min_acceptance),
            "criteria_pass_rate": {cid_: sum(v) / len(v) for cid_, v in crit.items()},
            "dimensions": {key: flatten_config(configs_by_id[cid]).get(key) for key in dimension_keys},
        })

    # per dimension value (runs pooled over the configurations sharing it)
    dims = []
    for key in dimension_keys:
        groups: dict[str, dict] = {}
        for row in rows:
            v = row["dimensions"].get(key)
            g = groups.setdefault(json.dumps(v, sort_keys=True), {"value": v, "configurations": 0, "runs": 0, "accepted": 0})
            g["configurations"] += 1
            g["runs"] += row["runs"]
            g["accepted"] += row["accepted"]
        values = []
        for g in groups.values():
            lo, hi = wilson_interval(g["accepted"], g["runs"])
            g.update(acceptance=g["accepted"] / g["runs"] if g["runs"] else None,
                     wilson_low=lo if g["runs"] else None, wilson_high=hi if g["runs"] else None)
            values.append(g)
        try:
            values.sort(key=lambda g: (g["value"] is None, g["value"]))
        except TypeError:
            values.sort(key=lambda g: str(g["value"]))
        dims.append({"name": key, "values": values})

    # per criterion, over every run
    crit_rows: dict[str, dict] = {}
    for r in ok_runs.values():
        for cr in r.get("criteria", []):
            c = crit_rows.setdefault(cr["id"], {"id": cr["id"], "threshold": cr["threshold"], "runs": 0, "passed": 0, "_ratios": [], "_values": []})
            c["runs"] += 1
            c["passed"] += int(bool(cr["passed"]))
            if cr.get("dp_value") is not None and cr.get("threshold"):
                c["_ratios"].append(float(cr["dp_value"]) / float(cr["threshold"]))
            if cr.get("dp_value") is not None:
                c["_values"].append(float(cr["dp_value"]))
    criteria = []
    for c in crit_rows.values():
        ratios, values = c.pop("_ratios"), c.pop("_values")
        c["pass_rate"] = c["passed"] / c["runs"] if c["runs"] else None
        c["fail_share"] = 1.0 - c["pass_rate"] if c["runs"] else None
        c["median_dp_value"] = statistics.median(values) if values else None
        c["ratio_to_threshold"] = _quantiles(ratios)
        criteria.append(c)

    narrowed = [r for r in rows if r["narrowed"]]
    nar_secs = [float(r["seconds"]) for (c, _), r in ok_runs.items() if c in {x["config_id"] for x in narrowed}]
    all_secs = [float(r["seconds"]) for r in ok_runs.values()]
    mean_acc = statistics.fmean(r["acceptance"] for r in narrowed) if narrowed else None
    med_secs = statistics.median(nar_secs or all_secs) if (nar_secs or all_secs) else None
    # the private run draws uniformly from the list: per-iteration acceptance = mean p; its
    # interval from the mean of the configurations' Wilson bounds
    mean_lo = statistics.fmean(r["wilson_low"] for r in narrowed) if narrowed else None
    mean_hi = statistics.fmean(r["wilson_high"] for r in narrowed) if narrowed else None
    exp = expected_iterations(mean_acc, mean_lo, mean_hi)
    exp_iter = exp["expected_iterations"]
    undecided = [r["config_id"] for r in rows if r["decision"] == UNDECIDED]
    n_acc = sum(r["accepted"] for r in rows)
    n_runs = sum(r["runs"] for r in rows)

    # utility: the first evaluated accepted run of each configuration
    first_util: dict[str, dict] = {}
    for (cid, rep), rec in sorted(utility.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if cid in sel and cid not in first_util and rec.get("utility"):
            first_util[cid] = rec
    util_summary = _utility_summary([first_util[c] for c in selected if c in first_util])

    return jsonable({
        "format": FORMAT,
        "spec_sha256": meta["spec"]["sha256"],
        "data_sha256": meta["data"]["sha256"],
        "n": meta["data"].get("n"),
        "rows": meta["data"].get("rows"),
        "space_size": meta["space_size"],
        "sample": meta.get("sample"),
        "seed": meta.get("seed"),
        "reps": meta["reps"],
        "adaptive": {
            "first_batch": meta["reps"],
            "max_reps": int(meta.get("max_reps") or meta["reps"]),
            "batch": int(meta.get("batch") or meta["reps"]),
            "rule": ("repetitions are added in batches until the Wilson 95% interval of a configuration's "
                     "acceptance lies above (wilson_low >= min_acceptance) or below (wilson_high < "
                     "min_acceptance) the cut-off, or it has max_reps runs; a configuration still "
                     "straddling the cut-off is decided by its point estimate and flagged 'undecided'"),
            "decided_above": sum(1 for r in rows if r["decision"] == ABOVE),
            "decided_below": sum(1 for r in rows if r["decision"] == BELOW),
            "undecided": len(undecided),
            "undecided_ids": undecided,
        },
        "configurations_from": (meta.get("configs") or {}).get("path"),
        "configurations_swept": len(selected),
        "runs": n_runs,
        "accepted": n_acc,
        "errors": len(err_runs),
        "acceptance": n_acc / n_runs if n_runs else None,
        "median_iteration_seconds": statistics.median(all_secs) if all_secs else None,
        "min_acceptance": float(min_acceptance),
        "narrowed": {
            "count": len(narrowed),
            "mean_acceptance": mean_acc,
            "mean_wilson_low": mean_lo,
            "mean_wilson_high": mean_hi,
            "expected_private_iterations": exp_iter,
            "expected_private_iterations_low": exp["expected_iterations_low"],
            "expected_private_iterations_high": exp["expected_iterations_high"],
            "undecided": sum(1 for r in narrowed if r["decision"] == UNDECIDED),
            "median_iteration_seconds": med_secs,
            "expected_private_seconds": exp_iter * med_secs if (exp_iter and med_secs is not None) else None,
            "note": ("The private run draws uniformly from the narrowed list, so its expected number of "
                     "iterations is 1 / mean acceptance, with the interval [1 / mean Wilson high, "
                     "1 / mean Wilson low] (null: unbounded); times are measured on the public data here."),
        },
        "criteria": criteria,
        "failing_criteria": _failing_criteria(criteria),
        "dimensions": dims,
        "configurations": rows,
        "utility": util_summary,
    })


def _failing_criteria(criteria: list[dict]) -> list[dict]:
    """The criteria that failed in any run, most often failed first: share of runs failing, and
    the median DP value against the threshold (what to relax, and by how much)."""
    rows = [{"id": c["id"], "fail_share": c["fail_share"], "failed": c["runs"] - c["passed"], "runs": c["runs"],
             "median_dp_value": c["median_dp_value"], "threshold": c["threshold"],
             "median_ratio_to_threshold": c["ratio_to_threshold"]["median"]}
            for c in criteria if c["runs"] and c["passed"] < c["runs"]]
    return sorted(rows, key=lambda r: (-r["fail_share"], -(r["median_ratio_to_threshold"] or 0.0), r["id"]))


_UTILITY_KEYS = [
    ("pmse_ratio", ("propensity", "pmse_ratio")),
    ("specks", ("propensity", "specks")),
    ("s_pmse_2way_mean", ("s_pmse", "2", "mean")),
    ("s_pmse_3way_mean", ("s_pmse", "3", "mean")),
    ("tvd_2way_max", ("marginals", "2", "max_tvd")),
    ("tvd_3way_max", ("marginals", "3", "max_tvd")),
    ("cell_error_3way_max", ("marginals", "3", "max_abs_error")),
    ("correlation_max_abs_diff", ("correlations", "max_abs_diff")),
]


def _dig(d: Any, path: tuple) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def utility_row(rec: dict) -> dict:
    """The headline utility numbers of one utility record (flat)."""
    u = rec.get("utility") or {}
    row = {"config_id": rec["config_id"], "rep": rec["rep"]}
    for name, path in _UTILITY_KEYS:
        row[name] = _dig(u, path)
    for target, s in ((u.get("groups") or {}).get("summary") or {}).items():
        row[f"mean_diff_{target}"] = s.get("max_abs_mean_diff")
        row[f"median_diff_{target}"] = s.get("max_abs_median_diff")
    return row


def _utility_summary(records: list[dict]) -> dict:
    rows = [utility_row(r) for r in records]
    medians = {}
    for key in (rows[0].keys() if rows else []):
        if key in ("config_id", "rep"):
            continue
        vals = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
        medians[key] = statistics.median(vals) if vals else None
    return {"evaluated_configurations": len(rows), "policy": "first accepted run of each configuration",
            "median": medians, "rows": rows}


def _summary_csv(summary: dict, configs_by_id: dict) -> str:
    crit_ids = [c["id"] for c in summary["criteria"]]
    dim_keys = [d["name"] for d in summary["dimensions"]]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["config_id", "runs", "accepted", "errors", "acceptance", "wilson_low", "wilson_high",
                "decision", "expected_iterations", "expected_iterations_low", "expected_iterations_high",
                "median_seconds", "narrowed"] + [f"pass_rate_{c}" for c in crit_ids] + dim_keys + ["config"])
    for r in summary["configurations"]:
        w.writerow([r["config_id"], r["runs"], r["accepted"], r["errors"], _fmt(r["acceptance"]),
                    _fmt(r["wilson_low"]), _fmt(r["wilson_high"]), r["decision"],
                    _fmt(r["expected_iterations"]), _fmt(r["expected_iterations_low"]),
                    _fmt(r["expected_iterations_high"]), _fmt(r["median_seconds"]), r["narrowed"]]
                   + [_fmt(r["criteria_pass_rate"].get(c)) for c in crit_ids]
                   + [r["dimensions"].get(k) for k in dim_keys]
                   + [json.dumps(configs_by_id[r["config_id"]], sort_keys=True)])
    return buf.getvalue()


def _fmt(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _runs_csv(runs: dict, selected: list[str]) -> str:
    recs = sorted(runs.values(), key=lambda r: (r["config_id"], r["rep"]))
    crit_ids: list[str] = []
    for r in recs:
        for cr in r.get("criteria", []):
            if cr["id"] not in crit_ids:
                crit_ids.append(cr["id"])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["config_id", "rep", "passed", "seconds", "finished", "worker", "error"]
               + [f"{c}_{x}" for c in crit_ids for x in ("dp_value", "threshold", "passed")])
    for r in recs:
        by = {cr["id"]: cr for cr in r.get("criteria", [])}
        row = [r["config_id"], r["rep"], r["passed"], _fmt(r.get("seconds")), r.get("finished", ""),
               r.get("worker") or "", r.get("error") or ""]
        for c in crit_ids:
            cr = by.get(c, {})
            row += [_fmt(cr.get("dp_value")), _fmt(cr.get("threshold")), cr.get("passed", "")]
        w.writerow(row)
    return buf.getvalue()


# --------------------------------------------------------------------------- the sweep

def _warn_weak_evidence(spec, prepared, console) -> None:
    """Before the runs: the criteria whose noise std on this (public) data is at least half their
    threshold, so that a pass would be weak evidence (release/scheme/weak_evidence.py)."""
    from dpbundle.release.scheme.weak_evidence import noise_warnings_on_data

    try:
        lines = noise_warnings_on_data(spec, prepared)
    except Exception:  # noqa: BLE001 - a warning must never stop a sweep
        return
    if not lines:
        return
    from rich.console import Console
    from rich.text import Text

    out = console or Console(stderr=True)
    for line in lines:
        out.print(Text("warning ", style="yellow") + Text(line), highlight=False)


def _default_iteration():
    from dpbundle.release.scheme.iteration import run_iteration

    return run_iteration


def _default_prepare(path: Path, spec):
    from dpbundle.release.data.prepare import prepare

    return prepare(path, spec)


DEFAULT_REPS = 3
DEFAULT_MAX_REPS = 40
DEFAULT_MIN_ACCEPTANCE = 0.10


def run_sweep(spec_path: Path | str, data_path: Path | str, out: Path | str, *, reps: int | None = None,
              sample: int | None = None, seed: int | None = None, workers: int | None = None,
              scheduler: str | None = None, min_acceptance: float | None = None, utility: str = "first",
              iteration: Callable | None = None, prepare: Callable | None = None,
              progress: bool = True, report: bool = True, mp_context: str = "spawn",
              utility_options: dict | None = None, console=None,
              on_run: Callable[[dict], None] | None = None, max_reps: int | None = None,
              batch: int | None = None, configs: Path | str | None = None,
              allow_other_spec: bool = False) -> SweepResult:
    """Run (or resume) a sweep; see the module docstring. Raises :class:`SweepError` (exit 2).

    ``reps`` (the first batch), ``max_reps`` (the cap of the adaptive repetitions), ``batch``
    (later batches) and ``sample`` default to the values recorded in ``out`` (resume) or to 3,
    40, ``reps`` and the whole space (new sweep); ``max_reps == reps`` is a fixed design.
    ``configs`` (a narrowed list, see :func:`read_config_list`) re-measures those configurations
    instead of sampling; a resumed sweep keeps its recorded list. ``iteration`` (default ``release.iteration.run_iteration``) and
    ``prepare`` (default ``release.prepare.prepare``) can be injected, e.g. by tests;
    ``on_run(record)`` is called after each finished run is saved (e.g. by benchmarks).
    """
    from dpbundle.release.spec.load import SpecError, load_spec
    from dpbundle.release.scheme.space import config_id, enumerate_configs

    from dpbundle.release.sweep.execute import bootstrapping

    if bootstrapping():
        raise SweepError(BOOTSTRAP_MESSAGE.format(call="sweep()"))
    spec_path, data_path, out = Path(spec_path), Path(data_path), Path(out)
    if reps is not None and reps < 1:
        raise SweepError("--reps must be at least 1")
    if sample is not None and sample < 1:
        raise SweepError("--sample must be at least 1")
    if max_reps is not None and max_reps < 1:
        raise SweepError("--max-reps must be at least 1")
    if batch is not None and batch < 1:
        raise SweepError("--batch must be at least 1")
    if configs is not None and (sample is not None or seed is not None):
        raise SweepError("give either --configs (re-measure a list) or --sample/--seed (draw from the space), not both")
    if workers is not None and scheduler:
        raise SweepError("give either --workers (local process pool) or --scheduler (Dask), not both")
    if utility not in ("first", "all", "none"):
        raise SweepError("--utility must be one of first, all, none")
    if min_acceptance is not None and not 0.0 <= min_acceptance <= 1.0:
        raise SweepError("--min-acceptance must lie in [0, 1]")
    try:
        spec = load_spec(spec_path)
    except SpecError as exc:
        raise SweepError(str(exc)) from None
    if not data_path.is_file():
        raise SweepError(f"{data_path}: no such file")

    # 1. the data must be public
    data_sha = file_sha256(data_path)
    private = {str(f).lower() for f in getattr(spec, "private_fingerprints", [])}
    if data_sha in private:
        raise SweepError(
            f"{data_path}: refusing to sweep: this file's SHA-256 ({data_sha}) is listed in the spec's "
            f"privacy.private_data_sha256, i.e. it is confidential data. The sweep runs many "
            f"iterations with no privacy accounting and writes their results in the clear; run it "
            f"on public data only.")
    spec_sha = _spec_fingerprint(spec)

    # 2. the output directory: new, or a sweep of the same spec and data
    meta_path = out / META
    old_meta = None
    if meta_path.exists():
        try:
            old_meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise SweepError(f"{meta_path}: cannot read the sweep record ({exc}); use another --out") from None
        if not isinstance(old_meta, dict) or old_meta.get("format") != FORMAT:
            raise SweepError(f"{meta_path}: not a {FORMAT} sweep directory; use another --out")
        try:
            _validate(old_meta, "sweep-meta", str(meta_path))
        except ValueError as exc:
            raise SweepError(f"{exc}\nThe sweep record is damaged; restore it or use another --out") from None
        if old_meta["spec"]["sha256"] != spec_sha:
            raise SweepError(
                f"{out}: cannot resume: this directory holds a sweep of a different spec "
                f"(spec fingerprint {old_meta['spec']['sha256'][:16]}..., from {old_meta['spec'].get('path')}; "
                f"{spec_path} has {spec_sha[:16]}...). Use another --out, or restore the spec.")
        if old_meta["data"]["sha256"] != data_sha:
            raise SweepError(
                f"{out}: cannot resume: this directory holds a sweep of different data "
                f"(data SHA-256 {old_meta['data']['sha256'][:16]}..., from {old_meta['data'].get('path')}; "
                f"{data_path} has {data_sha[:16]}...). Use another --out, or the same data file.")
        if seed is not None and old_meta.get("seed") is not None and int(seed) != int(old_meta["seed"]):
            raise SweepError(f"{out}: cannot resume with --seed {seed}: the sweep was sampled with seed "
                             f"{old_meta['seed']}. Omit --seed to resume the same sample.")
    elif out.exists() and any(out.iterdir()):
        raise SweepError(f"{out}: exists, is not empty and holds no {META}; use a new or empty --out directory")

    if old_meta is not None:
        reps = reps if reps is not None else int(old_meta.get("reps") or DEFAULT_REPS)
        sample = sample if sample is not None else old_meta.get("sample")
        # an old (fixed-design) sweep has no max_reps: its cap was its reps
        max_reps = max_reps if max_reps is not None else int(old_meta.get("max_reps") or old_meta["reps"])
        batch = batch if batch is not None else old_meta.get("batch")
        if min_acceptance is None and old_meta.get("min_acceptance") is not None:
            min_acceptance = float(old_meta["min_acceptance"])
    min_acceptance = DEFAULT_MIN_ACCEPTANCE if min_acceptance is None else float(min_acceptance)
    reps = reps if reps is not None else DEFAULT_REPS
    max_reps = max(int(max_reps if max_reps is not None else DEFAULT_MAX_REPS), reps)
    batch = int(batch if batch is not None else reps)

    all_configs = list(enumerate_configs(spec))
    ids = [config_id(c) for c in all_configs]
    configs_by_id = dict(zip(ids, all_configs))
    configs_meta = None
    if configs is not None:
        selected = read_config_list(configs, spec, spec_sha, set(ids), allow_other_spec=allow_other_spec)
        configs_meta = {"path": str(configs), "sha256": file_sha256(Path(configs))}
        sample = None
    elif old_meta is not None and old_meta.get("configs") and sample is None:
        selected = [c for c in old_meta["selected"] if c in configs_by_id]  # same spec: all are
        configs_meta = old_meta["configs"]
    if seed is None:
        seed = int(old_meta["seed"]) if old_meta and old_meta.get("seed") is not None else secrets.randbits(63)
    if configs_meta is None:
        selected = select_configs(ids, sample, seed)

    # the runs still to do: a first batch of `reps` per configuration, then adaptive batches
    runs = read_runs(out) if old_meta else {}
    done: dict[str, dict[int, bool]] = {}
    for (cid, r), rec in runs.items():
        if not rec.get("error"):
            done.setdefault(cid, {})[r] = bool(rec["passed"])
    n_workers_guess = 1 if scheduler else int(workers or os.cpu_count() or 1)
    plan = AdaptivePlan({c: configs_by_id[c] for c in selected}, done, first=reps, cap=max_reps,
                        batch=batch, cut=min_acceptance, workers=n_workers_guess)

    prepared = None
    if plan.has_work() or not (old_meta and old_meta["data"].get("n")):
        try:
            prepared = (prepare or _default_prepare)(data_path, spec)
        except ValueError as exc:  # InputError
            raise SweepError(str(exc)) from None
    n = int(getattr(prepared, "n", 0)) if prepared is not None else int(old_meta["data"]["n"])
    rows = int(getattr(prepared, "rows_read", 0) or 0) if prepared is not None \
        else old_meta["data"].get("rows")
    if prepared is not None and hasattr(prepared, "table"):
        _warn_weak_evidence(spec, prepared, console)

    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "created": old_meta["created"] if old_meta else _now(),
        "spec": {"path": str(spec_path), "sha256": spec_sha},
        "data": {"path": str(data_path), "sha256": data_sha, "n": n}
        | ({"rows": int(rows)} if isinstance(rows, int) and rows > 0 else {}),
        "space_size": len(ids),
        "sample": sample,
        "seed": int(seed),
        "reps": int(reps),
        "max_reps": int(max_reps),
        "batch": int(batch),
        "min_acceptance": float(min_acceptance),
        "configs": configs_meta,
        "selected": selected,
        "note": "public data: the sweep spends no privacy budget and its outputs are not DP",
        "sessions": list(old_meta.get("sessions", [])) if old_meta else [],
    }
    _validate(meta, "sweep-meta", str(meta_path))
    _write_atomic(meta_path, json.dumps(meta, indent=1) + "\n")

    # 3. run them
    util = read_utility(out)
    have_util = {cid for (cid, _), rec in util.items() if rec.get("utility")}
    util_in_flight: set[str] = set()

    def prepare_task(task: Task) -> Task:
        want = utility == "all" or (utility == "first" and task.config_id not in have_util
                                    and task.config_id not in util_in_flight)
        if want and utility == "first":
            util_in_flight.add(task.config_id)
        return Task(task.config_id, task.rep, task.config, want)

    runs_path, util_path = out / RUNS, out / UTILITY
    _end_torn_line(runs_path)
    _end_torn_line(util_path)
    backend_name, n_workers = "none", 0
    t0 = time.perf_counter()
    new_runs = 0
    if plan.has_work():
        payload = {"prepared": prepared, "spec": spec, "iteration": iteration or _default_iteration(),
                   "utility_options": utility_options or {}}
        from dpbundle.release.sweep.execute import DaskBackend, InProcessBackend, LocalBackend, WorkerStartError

        n_local = min(workers or os.cpu_count() or 1, max(plan.potential(), 1))
        try:
            backend = (DaskBackend(payload, scheduler) if scheduler
                       else InProcessBackend(payload) if n_local == 1
                       else LocalBackend(payload, n_local, mp_context=mp_context))
        except WorkerStartError as exc:
            raise SweepError(str(exc)) from None
        except (OSError, TimeoutError) as exc:
            raise SweepError(f"cannot start the {'Dask client for ' + scheduler if scheduler else 'process pool'}: {exc}") from None
        backend_name, n_workers = backend.name, backend.workers
        plan.workers = max(int(n_workers), 1)

        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        console = console or Console(stderr=True)
        columns = [TextColumn("[bold]sweep[/]"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[accepted]} accepted"), TextColumn("elapsed"),
                   TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn()]
        with Progress(*columns, console=console, disable=not progress, transient=False) as bar:
            tid = bar.add_task("sweep", total=plan.planned, accepted=0)
            accepted = 0

            def on_result(task: Task, record: dict) -> None:
                nonlocal accepted, new_runs
                u = record.pop("utility", None)
                u_err = record.pop("utility_error", None)
                u_secs = record.pop("utility_seconds", None)
                record.pop("traceback", None) if record.get("error") is None else None
                if u is not None or u_err is not None:
                    urec = jsonable({"config_id": task.config_id, "rep": task.rep, "utility": u,
                                     "error": u_err, "seconds": u_secs})
                    _validate(urec, "sweep-utility", str(util_path))
                    _append_jsonl(util_path, urec)
                    if u is not None:
                        have_util.add(task.config_id)
                if task.utility and utility == "first":
                    util_in_flight.discard(task.config_id)
                record = jsonable(record)
                _validate(record, "sweep-run", str(runs_path))
                _append_jsonl(runs_path, record)
                runs[(task.config_id, task.rep)] = record
                new_runs += 1
                accepted += int(bool(record.get("passed")))
                plan.record(task, None if record.get("error") else bool(record.get("passed")))
                bar.update(tid, advance=1, accepted=accepted, total=plan.planned)
                if on_run is not None:
                    on_run(record)

            interrupted = False
            try:
                execute(backend, plan.tasks(), on_result, prepare_task=prepare_task)
            except KeyboardInterrupt:
                interrupted = True
            finally:
                backend.close(cancel=True)
        if interrupted:
            raise KeyboardInterrupt
    seconds = time.perf_counter() - t0

    # 4. tables, summary, narrowed list, report
    if new_runs:
        meta["sessions"].append({"finished": _now(), "backend": backend_name, "workers": n_workers,
                                 "runs": new_runs, "seconds": round(seconds, 3),
                                 "runs_per_minute": round(new_runs / seconds * 60, 3) if seconds > 0 else None})
        _validate(meta, "sweep-meta", str(meta_path))
        _write_atomic(meta_path, json.dumps(meta, indent=1) + "\n")
    util = read_utility(out)
    summary = summarise(meta=meta, selected=selected, configs_by_id=configs_by_id,
                        dimension_keys=_dimension_keys(all_configs), runs=runs, utility=util,
                        min_acceptance=min_acceptance)
    _validate(summary, "sweep-summary", str(out / SUMMARY_JSON))
    summary_text = json.dumps(summary, indent=1, sort_keys=False) + "\n"
    old_summary = (out / SUMMARY_JSON).read_text(encoding="utf-8") if (out / SUMMARY_JSON).exists() else None
    changed = summary_text != old_summary
    if changed or not (out / RUNS_CSV).exists():
        _write_atomic(out / SUMMARY_JSON, summary_text)
        _write_atomic(out / SUMMARY_CSV, _summary_csv(summary, configs_by_id))
        _write_atomic(out / RUNS_CSV, _runs_csv(runs, selected))
        if summary["narrowed"]["count"]:
            _write_atomic(out / NARROWED, _narrowed_yaml(summary, configs_by_id, str(out / NARROWED)))
        elif (out / NARROWED).exists():
            (out / NARROWED).unlink()  # a list from an earlier session no longer holds: nothing passes
    if summary["narrowed"]["count"] and not (out / NARROWED).exists():
        _write_atomic(out / NARROWED, _narrowed_yaml(summary, configs_by_id, str(out / NARROWED)))
    files = {k: out / v for k, v in [("meta", META), ("runs", RUNS), ("runs_csv", RUNS_CSV),
                                     ("utility", UTILITY), ("summary_csv", SUMMARY_CSV),
                                     ("summary_json", SUMMARY_JSON), ("narrowed", NARROWED)]}
    if report:
        html_path, pdf_path = out / REPORT_HTML, out / REPORT_PDF
        if changed or not html_path.exists() or not pdf_path.exists():
            from dpbundle.release.sweep.report import write_report

            write_report(out, summary, runs=runs, utility=util, spec=spec, configs_by_id=configs_by_id,
                         meta=meta)
        files.update(report_html=html_path, report_pdf=pdf_path)
    return SweepResult(out=out, summary=summary, new_runs=new_runs, seconds=seconds,
                       backend=backend_name, workers=n_workers, files=files)


# --------------------------------------------------------------------------- CLI

def _iters_text(lo: float | None, mid: float | None, hi: float | None) -> str:
    """'2.6 [1.4,7.1]'; an unbounded end prints as 'inf'."""
    f = lambda x: "inf" if x is None else f"{x:.1f}"  # noqa: E731
    return "" if mid is None else f"{f(mid)} [{f(lo)},{f(hi)}]"


def _print_result(res: SweepResult, console) -> None:
    from rich import box
    from rich.table import Table

    s = res.summary
    ad = s["adaptive"]
    if res.new_runs:
        console.print(f"{res.new_runs} run(s) in {res.seconds:.1f} s on {res.backend} "
                      f"({res.workers} worker(s)): [bold]{res.runs_per_minute:.1f} runs/min[/]")
    else:
        console.print("Nothing to run: every configuration of this sweep is already decided or at its cap "
                      f"(runs in {res.out / RUNS}; resumed).")
    table = Table(title=f"Acceptance on public data ({s['configurations_swept']} configuration(s), "
                        f"{ad['first_batch']} to {ad['max_reps']} rep(s) each, cut-off {s['min_acceptance']:g})")
    table.box, table.pad_edge = box.SIMPLE_HEAD, False
    table.add_column("configuration", no_wrap=True)
    table.add_column("acceptance\npassed/runs\n[Wilson 95%]", justify="right", no_wrap=True)
    table.add_column("decision", no_wrap=True)
    table.add_column("expected\niterations\n[95%]", justify="right", no_wrap=True)
    table.add_column("listed", no_wrap=True)
    rows = sorted(s["configurations"], key=lambda r: -(r["acceptance"] or 0))
    for r in rows[:15]:
        acc = f"{r['accepted']}/{r['runs']}" + ("" if r["acceptance"] is None
                                                else f" [{r['wilson_low']:.2f},{r['wilson_high']:.2f}]")
        table.add_row(r["config_id"], acc,
                      r["decision"] if r["decision"] != UNDECIDED else "[yellow]undecided[/]",
                      _iters_text(r["expected_iterations_low"], r["expected_iterations"], r["expected_iterations_high"]),
                      "yes" if r["narrowed"] else "")
    if len(rows) > 15:
        table.caption = f"... {len(rows) - 15} more in summary.csv"
    console.print(table)
    nar = s["narrowed"]
    if nar["count"]:
        console.print(f"Narrowed: {nar['count']} configuration(s) with acceptance >= {s['min_acceptance']:g}; "
                      f"expected private iterations "
                      f"{_iters_text(nar['expected_private_iterations_low'], nar['expected_private_iterations'], nar['expected_private_iterations_high'])}, "
                      f"expected run time {nar['expected_private_seconds']:.1f} s "
                      f"(median iteration {nar['median_iteration_seconds']:.2f} s on the public data).")
    if ad["undecided"]:
        console.print(f"[yellow]{ad['undecided']} configuration(s) undecided[/]: their Wilson interval still "
                      f"straddles {s['min_acceptance']:g} after the runs they had (cap --max-reps {ad['max_reps']}); "
                      f"decided by the point estimate ({nar['undecided']} of them narrowed). Resume with a larger "
                      "--max-reps to decide them.")
    if not nar["count"]:
        _print_nothing_passes(s, console)
    if s["errors"]:
        console.print(f"[yellow]{s['errors']} run(s) failed with an error (see runs.jsonl); they are retried on resume.[/]")
    for key, path in res.files.items():
        if key in ("narrowed", "summary_csv", "report_html", "report_pdf") and Path(path).exists():
            console.print(f"  {key}: {path}")


def _print_nothing_passes(s: dict, console) -> None:
    """Why no configuration reached the cut-off: the criteria that fail most, and by how much."""
    from rich.table import Table

    console.print(f"[bold red]No configuration reached acceptance {s['min_acceptance']:g}[/]: the private run "
                  "would almost never stop. No narrowed.yaml was written. Widen the space, relax the "
                  "criteria below, or lower --min-acceptance.")
    fails = s["failing_criteria"]
    if not fails:
        console.print("No run produced criterion values (every run failed with an error or none ran).")
        return
    table = Table(title="Criteria that fail most (all runs of the swept configurations)")
    for col in ("criterion", "runs failing", "median DP value", "threshold", "median / threshold"):
        table.add_column(col)
    for f in fails:
        g = lambda x: "" if x is None else f"{x:.4g}"  # noqa: E731
        table.add_row(f["id"], f"{f['fail_share']:.0%} ({f['failed']}/{f['runs']})", g(f["median_dp_value"]),
                      g(f["threshold"]), g(f["median_ratio_to_threshold"]))
    console.print(table)




def cli_sweep(
    spec: Annotated[Path, typer.Argument(help="The release spec (YAML or JSON).", show_default=False)],
    public_data: Annotated[Path, typer.Argument(help="PUBLIC data in the spec's input format (CSV or .csv.gz). Never the confidential file.", show_default=False)],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output directory; the same directory resumes the sweep.", show_default=False)],
    reps: Annotated[Optional[int], typer.Option("--reps", "-r", min=1, help="First batch: runs every configuration gets (default 3; when resuming, the recorded value).", show_default=False)] = None,
    max_reps: Annotated[Optional[int], typer.Option("--max-reps", min=1, help="Cap of the adaptive repetitions per configuration (default 40; when resuming, the recorded value). Equal to --reps: a fixed design.", show_default=False)] = None,
    batch: Annotated[Optional[int], typer.Option("--batch", min=1, help="Runs added per later batch to an undecided configuration (default: --reps; enlarged when fewer configurations than workers remain open).", show_default=False)] = None,
    configs: Annotated[Optional[Path], typer.Option("--configs", help="Re-measure the configurations of this list (a narrowed.yaml) instead of drawing from the space. Ids must belong to the spec's space; a list written for another spec (spec_sha256) is refused unless --allow-other-spec.", show_default=False)] = None,
    allow_other_spec: Annotated[bool, typer.Option("--allow-other-spec", help="Accept a --configs list whose spec_sha256 differs from the spec's (e.g. after editing thresholds).")] = False,
    sample: Annotated[Optional[int], typer.Option("--sample", "-k", min=1, help="Sweep K configurations drawn at random (seeded; recorded in DIR) instead of the whole space. When resuming, defaults to the recorded K; a larger K extends the same sample.", show_default=False)] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="Seed of the --sample draw (default: random, recorded in DIR/sweep.json).")] = None,
    workers: Annotated[Optional[int], typer.Option("--workers", "-w", min=1, help="Local worker processes (default: every core).")] = None,
    scheduler: Annotated[Optional[str], typer.Option("--scheduler", help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (runs on the cluster instead of locally).")] = None,
    min_acceptance: Annotated[Optional[float], typer.Option("--min-acceptance", min=0.0, max=1.0, help="Cut-off: acceptance probability a configuration needs to enter narrowed.yaml, and the point the adaptive repetitions decide against (default 0.10; when resuming, the recorded value).", show_default=False)] = None,
    utility: Annotated[str, typer.Option("--utility", help="Granular utility of accepted candidates: 'first' accepted run per configuration, 'all', or 'none'.")] = "first",
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip report.html / report.pdf.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Estimate each configuration's acceptance probability on PUBLIC data (feasibility sweep).

    Runs configurations of the spec's space (all, --sample K of them, or the list given with
    --configs) through the real iteration, with the same DP noise as the private run. Repetitions
    are adaptive: each configuration first gets --reps runs, then batches of --batch more until the
    Wilson 95% interval of its acceptance lies above (low end >= --min-acceptance) or below (high
    end < --min-acceptance) the cut-off, or it has --max-reps runs. A configuration still
    straddling the cut-off at the cap is decided by its point estimate and flagged 'undecided'
    (--max-reps equal to --reps gives a fixed design). A configuration that never passes needs 35
    runs to be decided below 0.10.

    Writes runs.jsonl/runs.csv, summary.csv/summary.json (acceptance, Wilson interval, decision,
    expected private iterations 1/p with the interval [1/high, 1/low]), narrowed.yaml (the
    configurations with acceptance >= --min-acceptance, for `dpbundle release --configs`) and
    report.html/report.pdf. Spends no privacy budget; refuses files listed in the spec's
    privacy.private_data_sha256. Re-running with the same --out resumes (the runs are kept, the
    adaptive decisions continue; a larger --max-reps decides undecided configurations).

    Exit codes: 0 at least one configuration reached the cut-off; 1 none did: narrowed.yaml is then
    NOT written (an old one in DIR is removed) and the criteria that fail most are printed, with
    the share of runs failing each and its median DP value against the threshold; 2 unusable input.

    Examples (the third resumes a sweep and decides its undecided configurations):

        dpbundle sweep examples/births.yaml public.csv --sample 8 --out sweep
        dpbundle sweep examples/births.yaml public.csv --out remeasure \\
            --configs examples/births-narrowed-nvss160k.yaml
        dpbundle sweep spec.yaml public.csv --out sweep --max-reps 80
        dpbundle sweep spec.yaml public.csv --sample 64 --out sweep \\
            --scheduler tcp://10.0.0.5:8786
    """
    from rich.console import Console

    console = Console(stderr=True)
    try:
        res = run_sweep(spec, public_data, out, reps=reps, sample=sample, seed=seed, workers=workers,
                        scheduler=scheduler, min_acceptance=min_acceptance, utility=utility,
                        progress=not quiet, report=not no_report, console=console, max_reps=max_reps,
                        batch=batch, configs=configs, allow_other_spec=allow_other_spec)
    except SweepError as exc:
        from rich.text import Text

        console.print(Text("error: ", style="bold red") + Text(str(exc)), highlight=False, soft_wrap=True)
        raise typer.Exit(code=exc.exit_code) from None
    except KeyboardInterrupt:
        console.print(f"Interrupted. Finished runs are saved in {out / RUNS}; run the same command to resume.")
        raise typer.Exit(code=130) from None
    _print_result(res, Console())
    if not res.summary["narrowed"]["count"]:
        raise typer.Exit(code=1)

