"""``dpbundle sweep``: estimate every configuration's acceptance probability on PUBLIC data.

Before the private run, each configuration of the spec's space (or a seeded random sample of K
of them, or a given list: ``--configs``) is tried on similar public data, exactly as the private run would try it: the
real iteration (transform, DP fit, sample, constrain, project, DP criteria) with the same DP
noise, from a fresh recording ``Randomness`` per run whose transcript is discarded. The data are
public, so the sweep spends no budget and never touches the budget ledger; it refuses to run on
a file whose SHA-256 the spec lists in ``privacy.private_data_sha256``.

Repetitions are adaptive (:class:`~.execute.AdaptivePlan`): a first batch of ``--reps`` runs
per configuration, then batches until the Wilson 95% interval of its acceptance lies above or
below ``--min-acceptance`` (:func:`~.execute.decide`) or it has ``--max-reps`` runs; one
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

The sweep is a pipeline of stages, each its own module: a :class:`~.request.SweepRequest` (every
option) -> :func:`~.plan.plan_sweep` (every check before a run starts) ->
:func:`~.session.run_session` (the runs, on a backend of :mod:`~.execute`) ->
:func:`~.outputs.summarise_plan` (:mod:`~.summary`) -> :func:`~.outputs.write_tables` and
:func:`~.outputs.write_sweep_report` (:mod:`~.report`). :func:`run_sweep` composes them; this
module also keeps the names other modules imported from it before the split.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

from dpbundle.release.sweep.execute import (ABOVE, BELOW, UNDECIDED, WILSON_Z, AdaptivePlan, Task, decide,
                                            execute, jsonable, wilson_interval)
from dpbundle.release.sweep.narrowed import (MAX_LIST_BYTES, load_narrowed, narrowed_yaml, read_config_list,
                                             read_list_document)
from dpbundle.release.sweep.outputs import output_files, summarise_plan, write_sweep_report, write_tables
from dpbundle.release.sweep.plan import SweepPlan, plan_sweep, select_configs
from dpbundle.release.sweep.request import (BOOTSTRAP_MESSAGE, DEFAULT_MAX_REPS, DEFAULT_MIN_ACCEPTANCE,
                                            DEFAULT_REPS, SweepError, SweepRequest, SweepResult)
from dpbundle.release.sweep.session import record_session, run_session
from dpbundle.release.sweep.store import (FORMAT, META, NARROWED, NARROWED_FORMAT, REPORT_HTML, REPORT_PDF,
                                          RUNS, RUNS_CSV, SUMMARY_CSV, SUMMARY_JSON, UTILITY, flatten_config,
                                          read_runs, read_utility, spec_fingerprint)
from dpbundle.release.sweep.summary import expected_iterations, summarise, utility_row

# The sweep's own names, then the names other modules imported from here before the stages had
# modules of their own (still importable from here: the file names, the adaptive rule, the
# narrowed list, the summary).
__all__ = [
    "SweepError", "SweepRequest", "SweepResult", "run_sweep", "wilson_interval", "load_narrowed", "read_runs",
    "select_configs", "flatten_config", "WILSON_Z", "read_config_list", "decide", "expected_iterations",
    # kept importable
    "ABOVE", "BELOW", "UNDECIDED", "AdaptivePlan", "Task", "execute", "jsonable", "MAX_LIST_BYTES",
    "narrowed_yaml", "read_list_document", "SweepPlan", "plan_sweep", "BOOTSTRAP_MESSAGE", "DEFAULT_REPS",
    "DEFAULT_MAX_REPS", "DEFAULT_MIN_ACCEPTANCE", "FORMAT", "META", "NARROWED", "NARROWED_FORMAT",
    "REPORT_HTML", "REPORT_PDF", "RUNS", "RUNS_CSV", "SUMMARY_CSV", "SUMMARY_JSON", "UTILITY", "read_utility",
    "summarise", "utility_row",
]

# ``cli_sweep`` is importable from here too (see ``__getattr__`` below).
_spec_fingerprint = spec_fingerprint  # the name release/pipeline.py and scheme/preregister.py import


def run_sweep(request: SweepRequest | str | os.PathLike, data: str | os.PathLike | None = None,
              out: str | os.PathLike | None = None, **options: Any) -> SweepResult:
    """Run (or resume) a sweep; see the module docstring. Raises :class:`SweepError` (exit 2).

    ``run_sweep(request)`` runs a :class:`SweepRequest`; ``run_sweep(request, **options)`` a copy
    with those options replaced. ``run_sweep(spec_path, data_path, out, **options)`` (the form
    before requests) builds the request from the keywords, the fields of :class:`SweepRequest`:
    ``reps``, ``max_reps``, ``batch``, ``sample``, ``seed``, ``configs``, ``allow_other_spec``,
    ``min_acceptance``, ``workers``, ``scheduler``, ``mp_context``, ``utility``,
    ``utility_options``, ``iteration``, ``prepare``, ``progress``, ``report``, ``console``,
    ``on_run``. An unknown keyword is a TypeError naming it.
    """
    request = _as_request(request, data, out, options)
    plan = plan_sweep(request)
    outcome = run_session(plan)
    record_session(plan, outcome)
    utility = read_utility(plan.out)
    summary = summarise_plan(plan, utility)
    changed = write_tables(plan, summary)
    files = output_files(plan.out)
    if request.report:
        files.update(write_sweep_report(plan, summary, utility, changed))
    return SweepResult(out=plan.out, summary=summary, new_runs=outcome.new_runs, seconds=outcome.seconds,
                       backend=outcome.backend, workers=outcome.workers, files=files)


def _as_request(request: Any, data: Any, out: Any, options: dict) -> SweepRequest:
    if isinstance(request, SweepRequest):
        if data is not None or out is not None:
            raise TypeError("run_sweep(request): the data and output paths belong in the request")
        return request.with_options(**options) if options else request
    if data is None or out is None:
        raise TypeError("run_sweep(spec_path, data_path, out, **options): data_path and out are required")
    return SweepRequest.from_options(request, data, out, **options)


def __getattr__(name: str) -> Any:
    """``cli_sweep``, the ``dpbundle sweep`` command, lives in :mod:`dpbundle.release.cli.sweep`;
    it is looked up when asked for, so that the sweep itself does not depend on the CLI."""
    if name == "cli_sweep":
        return importlib.import_module("dpbundle.release.cli.sweep").cli_sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
