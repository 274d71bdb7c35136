"""The sweep's outputs after a session: the summary, its tables, ``narrowed.yaml``, the report.

Files are rewritten only when the summary changed (or one is missing), so resuming a finished
sweep leaves them as they are. ``narrowed.yaml`` is written only when some configuration reached
the cut-off; an old one that no longer holds is removed.
"""
from __future__ import annotations

import json
from pathlib import Path

from dpbundle.release.sweep.narrowed import narrowed_yaml
from dpbundle.release.sweep.plan import SweepPlan
from dpbundle.release.sweep.store import (
    META,
    NARROWED,
    REPORT_HTML,
    REPORT_PDF,
    RUNS,
    RUNS_CSV,
    SUMMARY_CSV,
    SUMMARY_JSON,
    UTILITY,
    validate,
    write_atomic,
)
from dpbundle.release.sweep.summary import (
    dimension_keys,
    runs_csv,
    summarise,
    summary_csv,
)

__all__ = ["output_files", "summarise_plan", "write_sweep_report", "write_tables"]


def summarise_plan(plan: SweepPlan, utility: dict) -> dict:
    """The summary of every run of the plan's selection (checked against ``sweep-summary``)."""
    sel = plan.selection
    summary = summarise(meta=plan.meta, selected=sel.selected, configs_by_id=sel.configs_by_id,
                        dimension_keys=dimension_keys(sel.all_configs), runs=plan.runs, utility=utility,
                        min_acceptance=plan.design.min_acceptance)
    validate(summary, "sweep-summary", str(plan.out / SUMMARY_JSON))
    return summary


def write_tables(plan: SweepPlan, summary: dict) -> bool:
    """summary.json, summary.csv, runs.csv and narrowed.yaml; True if the summary changed."""
    out, by_id = plan.out, plan.selection.configs_by_id
    text = json.dumps(summary, indent=1, sort_keys=False) + "\n"
    old = (out / SUMMARY_JSON).read_text(encoding="utf-8") if (out / SUMMARY_JSON).exists() else None
    changed = text != old
    has_list = bool(summary["narrowed"]["count"])
    if changed or not (out / RUNS_CSV).exists():
        write_atomic(out / SUMMARY_JSON, text)
        write_atomic(out / SUMMARY_CSV, summary_csv(summary, by_id))
        write_atomic(out / RUNS_CSV, runs_csv(plan.runs, plan.selection.selected))
        if has_list:
            write_atomic(out / NARROWED, narrowed_yaml(summary, by_id, str(out / NARROWED)))
        elif (out / NARROWED).exists():
            (out / NARROWED).unlink()  # a list from an earlier session no longer holds: nothing passes
    if has_list and not (out / NARROWED).exists():
        write_atomic(out / NARROWED, narrowed_yaml(summary, by_id, str(out / NARROWED)))
    return changed


def write_sweep_report(plan: SweepPlan, summary: dict, utility: dict, changed: bool) -> dict[str, Path]:
    """report.html and report.pdf (again only if the summary changed or one is missing)."""
    out = plan.out
    html_path, pdf_path = out / REPORT_HTML, out / REPORT_PDF
    if changed or not html_path.exists() or not pdf_path.exists():
        from dpbundle.release.sweep.report import write_report

        write_report(out, summary, runs=plan.runs, utility=utility, spec=plan.spec,
                     configs_by_id=plan.selection.configs_by_id, meta=plan.meta)
    return {"report_html": html_path, "report_pdf": pdf_path}


def output_files(out: Path) -> dict[str, Path]:
    """The sweep's files by key (``meta``, ``runs``, ... ``narrowed``); some may not exist."""
    return {k: out / v for k, v in [("meta", META), ("runs", RUNS), ("runs_csv", RUNS_CSV),
                                    ("utility", UTILITY), ("summary_csv", SUMMARY_CSV),
                                    ("summary_json", SUMMARY_JSON), ("narrowed", NARROWED)]}
