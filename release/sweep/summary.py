"""The sweep summary (``summary.json``, schema ``sweep-summary``) and its flat tables.

:func:`summarise` is deterministic given the run records: per configuration (acceptance, Wilson
95% interval, decision, expected private iterations), per dimension value (runs pooled over the
configurations sharing it), per criterion (pass rate, DP value against the threshold), the
narrowed list's expected private run, and the utility of the first accepted run of each
configuration. :func:`summary_csv` and :func:`runs_csv` are the same, flat.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from typing import Any

from dpbundle.release.sweep.execute import (
    ABOVE,
    BELOW,
    UNDECIDED,
    decide,
    jsonable,
    wilson_interval,
)
from dpbundle.release.sweep.store import FORMAT, flatten_config

__all__ = ["dimension_keys", "expected_iterations", "runs_csv", "summarise", "summary_csv", "utility_row"]

_ADAPTIVE_RULE = (
    "repetitions are added in batches until the Wilson 95% interval of a configuration's "
    "acceptance lies above (wilson_low >= min_acceptance) or below (wilson_high < "
    "min_acceptance) the cut-off, or it has max_reps runs; a configuration still "
    "straddling the cut-off is decided by its point estimate and flagged 'undecided'")
_NARROWED_NOTE = (
    "The private run draws uniformly from the narrowed list, so its expected number of "
    "iterations is 1 / mean acceptance, with the interval [1 / mean Wilson high, "
    "1 / mean Wilson low] (null: unbounded); times are measured on the public data here.")


def expected_iterations(p: float | None, low: float | None, high: float | None) -> dict:
    """Expected private iterations 1/p (geometric number of trials until the first pass) with the
    interval [1/high, 1/low] from p's Wilson bounds; None stands for infinity (p or low = 0)."""
    def inv(x: float | None) -> float | None:
        return 1.0 / x if x else None

    return {"expected_iterations": inv(p), "expected_iterations_low": inv(high),
            "expected_iterations_high": inv(low)}


def dimension_keys(all_configs: list[dict]) -> list[str]:
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
    mine = _by_config(ok_runs)
    errors = _by_config(err_runs)
    rows = [_config_row(cid, mine.get(cid, []), len(errors.get(cid, [])), configs_by_id[cid],
                        dimension_keys, min_acceptance) for cid in selected]
    criteria = _criteria_rows(ok_runs.values())
    all_secs = [float(r["seconds"]) for r in ok_runs.values()]
    n_acc, n_runs = sum(r["accepted"] for r in rows), sum(r["runs"] for r in rows)
    return jsonable({
        **_header(meta),
        "adaptive": _adaptive(meta, rows),
        "configurations_from": (meta.get("configs") or {}).get("path"),
        "configurations_swept": len(selected),
        "runs": n_runs,
        "accepted": n_acc,
        "errors": len(err_runs),
        "acceptance": n_acc / n_runs if n_runs else None,
        "median_iteration_seconds": statistics.median(all_secs) if all_secs else None,
        "min_acceptance": float(min_acceptance),
        "narrowed": _narrowed(rows, mine, all_secs),
        "criteria": criteria,
        "failing_criteria": _failing_criteria(criteria),
        "dimensions": [_dimension(key, rows) for key in dimension_keys],
        "configurations": rows,
        "utility": _utility_summary(_first_utility(utility, selected)),
    })


def _by_config(runs: dict) -> dict[str, list[dict]]:
    """Run records grouped by configuration id (in the records' order)."""
    out: dict[str, list[dict]] = {}
    for (cid, _), rec in runs.items():
        out.setdefault(cid, []).append(rec)
    return out


def _header(meta: dict) -> dict:
    return {"format": FORMAT, "spec_sha256": meta["spec"]["sha256"], "data_sha256": meta["data"]["sha256"],
            "n": meta["data"].get("n"), "rows": meta["data"].get("rows"), "space_size": meta["space_size"],
            "sample": meta.get("sample"), "seed": meta.get("seed"), "reps": meta["reps"]}


def _config_row(cid: str, mine: list[dict], errors: int, config: dict, keys: list[str], cut: float) -> dict:
    """One configuration: its runs, acceptance, Wilson interval, decision, expected iterations."""
    n, k = len(mine), sum(1 for r in mine if r["passed"])
    lo, hi = wilson_interval(k, n)
    crit: dict[str, list] = {}
    for r in mine:
        for cr in r.get("criteria", []):
            crit.setdefault(cr["id"], []).append(bool(cr["passed"]))
    secs = [float(r["seconds"]) for r in mine]
    acc = k / n if n else None
    flat = flatten_config(config)
    return {
        "config_id": cid, "runs": n, "accepted": k, "errors": errors, "acceptance": acc,
        "wilson_low": lo if n else None, "wilson_high": hi if n else None,
        "decision": decide(k, n, cut),
        **expected_iterations(acc, lo if n else None, hi if n else None),
        "median_seconds": statistics.median(secs) if secs else None,
        "narrowed": bool(n and k / n >= cut),
        "criteria_pass_rate": {cid_: sum(v) / len(v) for cid_, v in crit.items()},
        "dimensions": {key: flat.get(key) for key in keys},
    }


def _adaptive(meta: dict, rows: list[dict]) -> dict:
    undecided = [r["config_id"] for r in rows if r["decision"] == UNDECIDED]
    return {
        "first_batch": meta["reps"],
        "max_reps": int(meta.get("max_reps") or meta["reps"]),
        "batch": int(meta.get("batch") or meta["reps"]),
        "rule": _ADAPTIVE_RULE,
        "decided_above": sum(1 for r in rows if r["decision"] == ABOVE),
        "decided_below": sum(1 for r in rows if r["decision"] == BELOW),
        "undecided": len(undecided),
        "undecided_ids": undecided,
    }


def _dimension(key: str, rows: list[dict]) -> dict:
    """Acceptance per value of one dimension (runs pooled over the configurations sharing it)."""
    groups: dict[str, dict] = {}
    for row in rows:
        v = row["dimensions"].get(key)
        g = groups.setdefault(json.dumps(v, sort_keys=True),
                              {"value": v, "configurations": 0, "runs": 0, "accepted": 0})
        g["configurations"] += 1
        g["runs"] += row["runs"]
        g["accepted"] += row["accepted"]
    values = list(groups.values())
    for g in values:
        lo, hi = wilson_interval(g["accepted"], g["runs"])
        g.update(acceptance=g["accepted"] / g["runs"] if g["runs"] else None,
                 wilson_low=lo if g["runs"] else None, wilson_high=hi if g["runs"] else None)
    try:
        values.sort(key=lambda g: (g["value"] is None, g["value"]))
    except TypeError:
        values.sort(key=lambda g: str(g["value"]))
    return {"name": key, "values": values}


def _quantiles(xs: list[float]) -> dict:
    import numpy as np

    if not xs:
        return {"min": None, "q25": None, "median": None, "q75": None, "max": None}
    q = np.quantile(np.asarray(xs, dtype=float), [0, 0.25, 0.5, 0.75, 1.0])
    return dict(zip(["min", "q25", "median", "q75", "max"], (float(v) for v in q)))


def _criteria_rows(ok_runs) -> list[dict]:
    """Per criterion, over every successful run: pass rate, median DP value, DP value / threshold."""
    acc: dict[str, dict] = {}
    for r in ok_runs:
        for cr in r.get("criteria", []):
            c = acc.setdefault(cr["id"], {"id": cr["id"], "threshold": cr["threshold"], "runs": 0,
                                          "passed": 0, "_ratios": [], "_values": []})
            c["runs"] += 1
            c["passed"] += int(bool(cr["passed"]))
            if cr.get("dp_value") is not None and cr.get("threshold"):
                c["_ratios"].append(float(cr["dp_value"]) / float(cr["threshold"]))
            if cr.get("dp_value") is not None:
                c["_values"].append(float(cr["dp_value"]))
    for c in acc.values():
        ratios, values = c.pop("_ratios"), c.pop("_values")
        c["pass_rate"] = c["passed"] / c["runs"] if c["runs"] else None
        c["fail_share"] = 1.0 - c["pass_rate"] if c["runs"] else None
        c["median_dp_value"] = statistics.median(values) if values else None
        c["ratio_to_threshold"] = _quantiles(ratios)
    return list(acc.values())


def _failing_criteria(criteria: list[dict]) -> list[dict]:
    """The criteria that failed in any run, most often failed first: share of runs failing, and
    the median DP value against the threshold (what to relax, and by how much)."""
    rows = [{"id": c["id"], "fail_share": c["fail_share"], "failed": c["runs"] - c["passed"], "runs": c["runs"],
             "median_dp_value": c["median_dp_value"], "threshold": c["threshold"],
             "median_ratio_to_threshold": c["ratio_to_threshold"]["median"]}
            for c in criteria if c["runs"] and c["passed"] < c["runs"]]
    return sorted(rows, key=lambda r: (-r["fail_share"], -(r["median_ratio_to_threshold"] or 0.0), r["id"]))


def _narrowed(rows: list[dict], mine: dict[str, list[dict]], all_secs: list[float]) -> dict:
    """The narrowed list's expected private run: the private run draws uniformly from the list,
    so its per-iteration acceptance is the mean p, with the mean of the Wilson bounds."""
    narrowed = [r for r in rows if r["narrowed"]]
    nar_secs = [float(rec["seconds"]) for r in narrowed for rec in mine.get(r["config_id"], [])]
    mean = (lambda key: statistics.fmean(r[key] for r in narrowed) if narrowed else None)
    mean_acc, mean_lo, mean_hi = mean("acceptance"), mean("wilson_low"), mean("wilson_high")
    med_secs = statistics.median(nar_secs or all_secs) if (nar_secs or all_secs) else None
    exp = expected_iterations(mean_acc, mean_lo, mean_hi)
    exp_iter = exp["expected_iterations"]
    return {
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
        "note": _NARROWED_NOTE,
    }


# --------------------------------------------------------------------------- utility

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


def _first_utility(utility: dict, selected: list[str]) -> list[dict]:
    """The first evaluated accepted run of each selected configuration, in selection order."""
    sel = set(selected)
    first: dict[str, dict] = {}
    for (cid, _rep), rec in sorted(utility.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        if cid in sel and cid not in first and rec.get("utility"):
            first[cid] = rec
    return [first[c] for c in selected if c in first]


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


# --------------------------------------------------------------------------- flat tables

def _fmt(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


_SUMMARY_COLUMNS = ["config_id", "runs", "accepted", "errors", "acceptance", "wilson_low", "wilson_high",
                    "decision", "expected_iterations", "expected_iterations_low", "expected_iterations_high",
                    "median_seconds", "narrowed"]


def summary_csv(summary: dict, configs_by_id: dict) -> str:
    """``summary.csv``: one row per configuration (criteria pass rates, dimensions, configuration)."""
    crit_ids = [c["id"] for c in summary["criteria"]]
    dim_keys = [d["name"] for d in summary["dimensions"]]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_SUMMARY_COLUMNS + [f"pass_rate_{c}" for c in crit_ids] + dim_keys + ["config"])
    for r in summary["configurations"]:
        cells = [r[k] if k in ("config_id", "runs", "accepted", "errors", "decision", "narrowed") else _fmt(r[k])
                 for k in _SUMMARY_COLUMNS]
        w.writerow(cells + [_fmt(r["criteria_pass_rate"].get(c)) for c in crit_ids]
                   + [r["dimensions"].get(k) for k in dim_keys]
                   + [json.dumps(configs_by_id[r["config_id"]], sort_keys=True)])
    return buf.getvalue()


def runs_csv(runs: dict, selected: list[str]) -> str:
    """``runs.csv``: one row per run, every criterion's DP value, threshold and verdict."""
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
