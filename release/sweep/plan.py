"""Planning a sweep: every check before any run starts, and the plan the runs follow.

:func:`plan_sweep` checks the request's options, loads the spec, refuses confidential data
(a file whose SHA-256 the spec lists in ``privacy.private_data_sha256``, or data the budget
ledger records a spend on, by the file's SHA-256 or the prepared table's fingerprint), opens the output
directory (new, or a sweep of the same spec and data to resume), settles the design (reps, cap,
batch, cut-off: given, else recorded, else the defaults), selects the configurations, reads the
finished runs back, prepares the public data and writes ``sweep.json``. Any problem is a
:class:`~dpbundle.release.sweep.request.SweepError` (exit 2) raised before a run starts.
"""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpbundle.release.data.fingerprint import file_sha256
from dpbundle.release.sweep.execute import AdaptivePlan
from dpbundle.release.sweep.narrowed import read_config_list
from dpbundle.release.sweep.request import (
    BOOTSTRAP_MESSAGE,
    DEFAULT_MAX_REPS,
    DEFAULT_MIN_ACCEPTANCE,
    DEFAULT_REPS,
    UTILITY_POLICIES,
    SweepError,
    SweepRequest,
)
from dpbundle.release.sweep.store import (
    FORMAT,
    META,
    now,
    read_runs,
    spec_fingerprint,
    validate,
    write_atomic,
)

__all__ = [
    "Checked",
    "Design",
    "Selection",
    "SweepPlan",
    "check_request",
    "plan_sweep",
    "select_configs",
]


@dataclass(frozen=True)
class Checked:
    """The inputs after their checks: the spec, the fingerprints, the sweep resumed (or None)."""

    spec: Any
    spec_sha: str
    data_sha: str
    old_meta: dict | None


@dataclass(frozen=True)
class Design:
    """The adaptive design: first batch, cap, later batches, cut-off."""

    reps: int
    max_reps: int
    batch: int
    min_acceptance: float


@dataclass(frozen=True)
class Selection:
    """The space (``all_configs``, ``configs_by_id``) and the configurations swept."""

    all_configs: list
    configs_by_id: dict
    selected: list
    sample: int | None
    seed: int
    configs_meta: dict | None


@dataclass
class SweepPlan:
    """Everything the later stages need: the request, the checked inputs, the design, the
    selection, the runs finished before (``runs``, updated as runs finish), the adaptive plan,
    the prepared public data (None when nothing is left to run) and ``meta`` (sweep.json)."""

    request: SweepRequest
    checked: Checked
    design: Design
    selection: Selection
    runs: dict
    adaptive: AdaptivePlan
    prepared: Any
    meta: dict

    @property
    def out(self) -> Path:
        return self.request.out

    @property
    def spec(self) -> Any:
        return self.checked.spec


def plan_sweep(request: SweepRequest) -> SweepPlan:
    """Check everything and plan the runs (see the module docstring)."""
    check_request(request)
    checked = _check_inputs(request)
    design = _design(request, checked.old_meta)
    selection = _select(request, checked)
    runs = read_runs(request.out) if checked.old_meta else {}
    adaptive = _adaptive_plan(request, design, selection, runs)
    prepared, size = _prepare_data(request, checked, adaptive)
    checked = _with_edges(request, checked, prepared)
    meta = _meta(request, checked, design, selection, size)
    request.out.mkdir(parents=True, exist_ok=True)
    validate(meta, "sweep-meta", str(request.out / META))
    write_atomic(request.out / META, json.dumps(meta, indent=1) + "\n")
    return SweepPlan(request=request, checked=checked, design=design, selection=selection, runs=runs,
                     adaptive=adaptive, prepared=prepared, meta=meta)


def check_request(request: SweepRequest) -> None:
    """The options alone (no file read): SweepError naming the option. A call made while a
    worker process is starting (a script re-run by multiprocessing) is refused first."""
    from dpbundle.release.sweep.execute import bootstrapping

    r = request
    if bootstrapping():
        raise SweepError(BOOTSTRAP_MESSAGE.format(call="sweep()"))
    for value, option in ((r.reps, "--reps"), (r.sample, "--sample"), (r.max_reps, "--max-reps"),
                          (r.batch, "--batch")):
        if value is not None and value < 1:
            raise SweepError(f"{option} must be at least 1")
    if r.configs is not None and (r.sample is not None or r.seed is not None):
        raise SweepError("give either --configs (re-measure a list) or --sample/--seed (draw from the space), not both")
    if r.workers is not None and r.scheduler:
        raise SweepError("give either --workers (local process pool) or --scheduler (Dask), not both")
    if r.scheduler is not None:
        from dpbundle.release.data.cluster import SchedulerError, parse_address

        try:
            parse_address(r.scheduler)   # the form only; the server is probed when the runs start
        except SchedulerError as exc:
            raise SweepError(str(exc)) from None
    if r.utility not in UTILITY_POLICIES:
        raise SweepError("--utility must be one of first, all, none")
    if r.min_acceptance is not None and not 0.0 <= r.min_acceptance <= 1.0:
        raise SweepError("--min-acceptance must lie in [0, 1]")


def _check_inputs(request: SweepRequest) -> Checked:
    """The spec loads, the data file exists and is not confidential, the output directory is
    new (or empty) or a sweep of the same spec and data."""
    from dpbundle.release.spec.load import SpecError, load_spec

    try:
        spec = load_spec(request.spec_path)
    except SpecError as exc:
        raise SweepError(str(exc)) from None
    data_path = request.data_path
    if not data_path.exists():
        raise SweepError(f"{data_path}: no such file")
    from dpbundle.release.common.safe_io import regular_file_problem

    problem = regular_file_problem(data_path, "data file")   # a FIFO, device or directory
    if problem:
        raise SweepError(problem)
    data_sha = file_sha256(data_path)
    if data_sha in {str(f).lower() for f in spec.private_fingerprints}:
        raise SweepError(
            f"{data_path}: refusing to sweep: this file's SHA-256 ({data_sha}) is listed in the spec's "
            f"privacy.private_data_sha256, i.e. it is confidential data. The sweep runs many "
            f"iterations with no privacy accounting and writes their results in the clear; run it "
            f"on public data only.")
    spec_sha = spec_fingerprint(spec)
    return Checked(spec, spec_sha, data_sha, _resumable_meta(request, spec_sha, data_sha))


def _read_meta(meta_path: Path) -> dict:
    """``sweep.json`` of an earlier session, read and checked against its schema."""
    try:
        old = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SweepError(f"{meta_path}: cannot read the sweep record ({exc}); use another --out") from None
    if not isinstance(old, dict) or old.get("format") != FORMAT:
        raise SweepError(f"{meta_path}: not a {FORMAT} sweep directory; use another --out")
    try:
        validate(old, "sweep-meta", str(meta_path))
    except ValueError as exc:
        raise SweepError(f"{exc}\nThe sweep record is damaged; restore it or use another --out") from None
    return old


def _resumable_meta(request: SweepRequest, spec_sha: str, data_sha: str) -> dict | None:
    """The record of the sweep to resume (None: a new sweep); SweepError if it is another's."""
    out, meta_path = request.out, request.out / META
    if not meta_path.exists():
        if out.exists() and any(out.iterdir()):
            raise SweepError(f"{out}: exists, is not empty and holds no {META}; use a new or empty --out directory")
        return None
    old = _read_meta(meta_path)
    if old["spec"]["sha256"] != spec_sha:
        raise SweepError(
            f"{out}: cannot resume: this directory holds a sweep of a different spec "
            f"(spec fingerprint {old['spec']['sha256'][:16]}..., from {old['spec'].get('path')}; "
            f"{request.spec_path} has {spec_sha[:16]}...). Use another --out, or restore the spec.")
    if old["data"]["sha256"] != data_sha:
        raise SweepError(
            f"{out}: cannot resume: this directory holds a sweep of different data "
            f"(data SHA-256 {old['data']['sha256'][:16]}..., from {old['data'].get('path')}; "
            f"{request.data_path} has {data_sha[:16]}...). Use another --out, or the same data file.")
    seed = request.seed
    if seed is not None and old.get("seed") is not None and int(seed) != int(old["seed"]):
        raise SweepError(f"{out}: cannot resume with --seed {seed}: the sweep was sampled with seed "
                         f"{old['seed']}. Omit --seed to resume the same sample.")
    return old


def _design(request: SweepRequest, old: dict | None) -> Design:
    """The options given, else the values recorded in the sweep resumed, else the defaults."""
    reps, max_reps, batch, cut = request.reps, request.max_reps, request.batch, request.min_acceptance
    if old is not None:
        reps = reps if reps is not None else int(old.get("reps") or DEFAULT_REPS)
        # an old (fixed-design) sweep has no max_reps: its cap was its reps
        max_reps = max_reps if max_reps is not None else int(old.get("max_reps") or old["reps"])
        batch = batch if batch is not None else old.get("batch")
        if cut is None and old.get("min_acceptance") is not None:
            cut = float(old["min_acceptance"])
    reps = reps if reps is not None else DEFAULT_REPS
    return Design(reps=reps, max_reps=max(int(max_reps if max_reps is not None else DEFAULT_MAX_REPS), reps),
                  batch=int(batch if batch is not None else reps),
                  min_acceptance=DEFAULT_MIN_ACCEPTANCE if cut is None else float(cut))


# A sweep enumerates its spec's whole configuration space (ids, sampling, --configs checks).
MAX_SWEEP_CONFIGURATIONS = 1_000_000


def select_configs(ids: list[str], sample: int | None, seed: int) -> list[str]:
    """All ``ids`` (sample None) or the first ``sample`` of a permutation seeded with ``seed``.

    Samples are nested: a larger K with the same seed extends a smaller one.
    """
    if sample is None or sample >= len(ids):
        return list(ids)
    import numpy as np

    perm = np.random.Generator(np.random.PCG64(int(seed))).permutation(len(ids))
    return [ids[int(i)] for i in perm[: int(sample)]]


def _select(request: SweepRequest, checked: Checked) -> Selection:
    """A given list (``--configs``), the list of the sweep resumed, or a seeded sample."""
    from dpbundle.release.scheme.space import config_id, enumerate_configs, space_size

    old = checked.old_meta
    size = space_size(checked.spec)   # a product: nothing enumerated yet
    if size > MAX_SWEEP_CONFIGURATIONS:
        raise SweepError(f"{request.spec_path}: the configuration space has {size:,} configurations; "
                         f"a sweep lists them all (to sample from them and to check a --configs "
                         f"list), and refuses more than {MAX_SWEEP_CONFIGURATIONS:,} (docs/spec.md, "
                         "'Ranges of numbers'): give fewer alternatives, grid values or min_count values")
    all_configs = list(enumerate_configs(checked.spec))
    ids = [config_id(c) for c in all_configs]
    configs_by_id = dict(zip(ids, all_configs))
    sample = request.sample if request.sample is not None else (old or {}).get("sample")
    selected, configs_meta = None, None
    if request.configs is not None:
        selected = read_config_list(request.configs, checked.spec, checked.spec_sha, set(ids),
                                    allow_other_spec=request.allow_other_spec)
        configs_meta = {"path": str(request.configs), "sha256": file_sha256(Path(request.configs))}
        sample = None
    elif old is not None and old.get("configs") and sample is None:
        selected = [c for c in old["selected"] if c in configs_by_id]  # same spec: all are
        configs_meta = old["configs"]
    seed = request.seed
    if seed is None:
        seed = int(old["seed"]) if old and old.get("seed") is not None else secrets.randbits(63)
    if configs_meta is None:
        selected = select_configs(ids, sample, seed)
    return Selection(all_configs=all_configs, configs_by_id=configs_by_id, selected=selected,
                     sample=sample, seed=int(seed), configs_meta=configs_meta)


def _adaptive_plan(request: SweepRequest, design: Design, selection: Selection, runs: dict) -> AdaptivePlan:
    """The runs still to do: a first batch of ``reps`` per configuration, then adaptive batches,
    counting the runs already finished (errors are retried)."""
    done: dict[str, dict[int, bool]] = {}
    for (cid, r), rec in runs.items():
        if not rec.get("error"):
            done.setdefault(cid, {})[r] = bool(rec["passed"])
    n_workers_guess = 1 if request.scheduler else int(request.workers or os.cpu_count() or 1)
    by_id = selection.configs_by_id
    return AdaptivePlan({c: by_id[c] for c in selection.selected}, done, first=design.reps,
                        cap=design.max_reps, batch=design.batch, cut=design.min_acceptance,
                        workers=n_workers_guess)


def _with_edges(request: SweepRequest, checked: Checked, prepared: Any) -> Checked:
    """The spec's ``dp_edges`` alternatives drawn once on the public data, as the release draws
    them (same mechanism and epsilon); every run of the sweep bins with these edges."""
    import dataclasses

    from dpbundle.mechanisms.noise import Randomness, Transcript
    from dpbundle.release.scheme.edges import release_edges

    if prepared is None or not hasattr(prepared, "distinct") or not checked.spec.undrawn_edges:
        return checked
    spec = release_edges(prepared, checked.spec, Randomness(Transcript()))
    for (column, alt), edges in spec.drawn_edges().items():
        request.console.print(f"bin edges of {column} ({alt}) drawn under DP on the public data: "
                              + ", ".join(f"{e:.15g}" for e in edges), highlight=False, markup=False)
    return dataclasses.replace(checked, spec=spec)


def _default_prepare(path: Path, spec):
    from dpbundle.release.data.prepare import prepare

    return prepare(path, spec)


def _prepare_data(request: SweepRequest, checked: Checked, adaptive: AdaptivePlan) -> tuple[Any, tuple]:
    """The prepared public data (None if nothing is left to run and its size is recorded) and
    its size ``(n, rows read)``; warns of criteria whose noise is large on these data."""
    old = checked.old_meta
    prepared = None
    if adaptive.has_work() or not (old and old["data"].get("n")):
        try:
            prepared = (request.prepare or _default_prepare)(request.data_path, checked.spec)
        except ValueError as exc:  # InputError
            raise SweepError(str(exc)) from None
    if prepared is None:
        return None, (int(old["data"]["n"]), old["data"].get("rows"))
    _refuse_released(request, checked, prepared)
    if hasattr(prepared, "table"):
        _warn_weak_evidence(checked.spec, prepared, request.console)
    return prepared, (int(getattr(prepared, "n", 0)), int(getattr(prepared, "rows_read", 0) or 0))


def _refuse_released(request: SweepRequest, checked: Checked, prepared: Any) -> None:
    """SweepError when the private budget ledger records a spend on these data: the file's
    SHA-256, or the prepared table's canonical fingerprint (the same records however the file
    was exported, compressed or passed: a .csv.gz copy, a DataFrame), the keys the ledger itself
    matches spends by. The fingerprint stays private: the message does not show it."""
    from dpbundle.release.scheme.ledger import Ledger, LedgerError, table_fingerprint

    if not hasattr(prepared, "distinct"):      # a test's stand-in preparation
        return
    ledger = Ledger(Path(request.ledger) if request.ledger is not None else Ledger.default_path())
    if not ledger.path.exists():
        return
    try:
        spends = ledger.entries(checked.data_sha, table_fingerprint(prepared, checked.spec))
    except (LedgerError, OSError) as exc:
        raise SweepError(f"{ledger.path}: cannot read the budget ledger ({exc}), so the sweep cannot "
                         "check that these data are not confidential; repair it or pass --ledger") from None
    if spends:
        raise SweepError(
            f"{request.data_path}: refusing to sweep: the budget ledger {ledger.path} records "
            f"{len(spends)} privacy spend(s) on these records (the same prepared table, whatever the "
            f"file's name, bytes or compression), i.e. they are confidential data. The sweep runs many "
            f"iterations with no privacy accounting and writes their results in the clear; run it on "
            f"public data only.")


def _warn_weak_evidence(spec, prepared, console) -> None:
    """Before the runs: the criteria whose noise std on this (public) data is at least half their
    threshold, so that a pass would be weak evidence (release/scheme/weak_evidence.py)."""
    from dpbundle.release.scheme.weak_evidence import noise_warnings_on_data

    try:
        lines = noise_warnings_on_data(spec, prepared)
    except Exception:
        return
    if not lines:
        return
    from rich.console import Console
    from rich.text import Text

    out = console or Console(stderr=True)
    for line in lines:
        out.print(Text("warning ", style="yellow") + Text(line), highlight=False)


def _meta(request: SweepRequest, checked: Checked, design: Design, selection: Selection,
          size: tuple) -> dict:
    """``sweep.json`` for this session (the sessions so far; this one is added at its end)."""
    old = checked.old_meta
    n, rows = size
    data = {"path": str(request.data_path), "sha256": checked.data_sha, "n": n}
    if isinstance(rows, int) and rows > 0:
        data["rows"] = int(rows)
    return {
        "format": FORMAT,
        "created": old["created"] if old else now(),
        "spec": {"path": str(request.spec_path), "sha256": checked.spec_sha},
        "data": data,
        "space_size": len(selection.all_configs),
        "sample": selection.sample,
        "seed": selection.seed,
        "reps": int(design.reps),
        "max_reps": int(design.max_reps),
        "batch": int(design.batch),
        "min_acceptance": float(design.min_acceptance),
        "configs": selection.configs_meta,
        "selected": selection.selected,
        "note": "public data: the sweep spends no privacy budget and its outputs are not DP",
        "sessions": list(old.get("sessions", [])) if old else [],
    }
