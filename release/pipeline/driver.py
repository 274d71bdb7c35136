"""The release's driver: :func:`run_release` checks the request's options, then runs the stages
``plan -> spend -> select -> write`` (or ``--resume``), under the signal handling and the exit
statements of :mod:`dpbundle.release.pipeline.state`."""
from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Optional

from dpbundle.release.bundle import timings
from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.checks import check_out, check_text_inputs
from dpbundle.release.pipeline.output import fail, unusable
from dpbundle.release.pipeline.request import EXAMPLES, MAX_EXAMPLE_ROWS, MIN_EXAMPLE_ROWS, ReleaseRequest
from dpbundle.release.pipeline.state import Run, Signals, stated

__all__ = ["run_release", "release_stages"]


def run_release(request: ReleaseRequest) -> Optional[Path]:
    """The release itself (``dpbundle release`` and :func:`dpbundle.release.api.release`):
    returns the path of the written bundle's PRIVATE transcript (None if it is not known);
    raises one of :mod:`dpbundle.release.errors` (exit code and message) when it stops; every
    such message states what exists on disk and in the ledger."""
    from dpbundle.release.sweep.execute import bootstrapping
    from dpbundle.release.sweep.run import BOOTSTRAP_MESSAGE

    if bootstrapping():    # never a second release from a worker that re-runs the caller's script
        fail(BOOTSTRAP_MESSAGE.format(call="release()") + " Nothing was read or spent here.")
    check_text_inputs(request)
    timings.allow(request.is_example)
    run = Run(out=Path(request.out), resume_from=request.resume, key=request.key)
    with Signals() as signals:
        run.signals = signals
        try:
            with stated(run):
                _dispatch(request, run)
        finally:
            if run.reservation is not None:
                run.reservation.release()
    return run.bundle_transcript


def _dispatch(request: ReleaseRequest, run: Run) -> None:
    """The options that go together, then --resume, --example, or SPEC and DATA."""
    from dpbundle.release.bundle.datasheet import background_renderer

    if (request.preregistration is None) != (request.beacon is None):
        unusable("--preregistration and --beacon go together: the record fixes the release, the "
                 "beacon value (public, taken after the record was published) binds its seeds")
    rows = request.example_rows
    if rows is not None:
        if request.example is None:
            unusable("--example-rows goes with --example")
        if isinstance(rows, bool) or not isinstance(rows, int) or not MIN_EXAMPLE_ROWS <= rows <= MAX_EXAMPLE_ROWS:
            unusable(f"--example-rows must be a whole number from {MIN_EXAMPLE_ROWS:,} to "
                     f"{MAX_EXAMPLE_ROWS:,}, not {rows!r}; nothing was spent")
    if request.resume is None and request.example is None:
        if request.spec is None or request.data is None:
            unusable("give SPEC and DATA (or --example births); see `dpbundle release --help`")
        if request.key is None:
            unusable("--key is required to sign the bundle; create one with `dpbundle keygen --out steward`")
    # The datasheet's renderer starts now in a child process, which imports WeasyPrint and checks
    # the renderer and fonts while this one reads and selects; it only ever receives README.html.
    with background_renderer():
        if request.resume is not None:
            _resume(request, run)
        elif request.example is not None:
            _release_example(request, run)
        else:
            release_stages(request, run)


def _resume(request: ReleaseRequest, run: Run) -> None:
    from dpbundle.release.pipeline.resume import resume

    if request.preregistration is not None:
        unusable("--resume writes a kept result, which keeps its pre-registration: do not give "
                 "--preregistration again")
    if request.spec is not None or request.data is not None or request.example is not None:
        unusable("--resume writes a kept result: give it with --out and --key (and --transcript, --force, --zip) only")
    if request.key is None:
        unusable("--resume needs --key to sign the bundle")
    resume(request, run)


def _release_example(request: ReleaseRequest, run: Run) -> None:
    """A built-in example: checked before the registry is simulated; a demo key beside the
    bundle unless --key, a throwaway ledger unless --ledger, the example's list unless --configs."""
    from dpbundle.release.pipeline.example import check_example_size, demo_key, example_inputs

    example, out = request.example, request.out
    if request.spec is not None or request.data is not None:
        unusable("give either --example or SPEC and DATA, not both")
    if example not in EXAMPLES:
        unusable(f"unknown example {example!r}; available: {', '.join(EXAMPLES)}")
    check_out(out, request.force)  # before simulating the registry and writing a demo key next to OUT
    rows = request.example_rows
    if rows is None:
        from dpbundle.release.data.example import example_defaults

        rows = example_defaults(example)[0]
    check_example_size(example, rows, request.configs, request.allow_other_size)
    with example_inputs(example, rows) as (spec_path, data_path, narrowed):
        with tempfile.TemporaryDirectory(prefix="dpbundle-ledger-") as tmp:
            if request.ledger is None:
                run.throwaway = True
            key = request.key if request.key is not None else demo_key(out)
            configs = request.configs
            if configs is None:
                configs = narrowed
                output.console.print(f"selecting among the configurations that passed {list_cut_off(narrowed)} "
                                     f"in the public-data sweep shipped with the example ({narrowed.name}); "
                                     f"pass --configs to choose another list", highlight=False, markup=False)
            output.console.print(f"simulated {example} registry: {rows:,} rows (SIMULATED, no real person)",
                                 highlight=False, markup=False)
            release_stages(dataclasses.replace(request, spec=spec_path, data=data_path, key=key, configs=configs,
                                               ledger=request.ledger or Path(tmp) / "ledger.jsonl",
                                               example_rows=rows), run)


def list_cut_off(path: Path) -> str:
    """How often a configuration of the narrowed list at ``path`` passed, in words, from the
    list's own ``min_acceptance`` ("at least 50% of the time"); without a readable cut-off, words
    that claim no number."""
    from dpbundle.release.sweep.run import read_list_document

    try:
        cut = (read_list_document(Path(path)) or {}).get("min_acceptance")
    except (OSError, ValueError):
        cut = None
    if isinstance(cut, bool) or not isinstance(cut, (int, float)) or not 0 <= cut <= 1:
        return "the list's acceptance cut-off"
    return f"at least {float(cut) * 100:g}% of the time"


def release_stages(request: ReleaseRequest, run: Run) -> Path:
    """plan -> spend -> select -> write: the release of SPEC and DATA (an example's filled in);
    returns the bundle's path."""
    from dpbundle.release.pipeline.planning import plan
    from dpbundle.release.pipeline.selecting import select
    from dpbundle.release.pipeline.spending import spend
    from dpbundle.release.pipeline.writing import write

    run.key = request.key
    with timings.stage("plan"):
        planned = plan(request, run)
    with timings.stage("spend"):
        spent = spend(planned, run)
    with timings.stage("select"):       # PRIVATE: the selection's duration (timings.py)
        selected = select(planned, spent, run)
    with timings.stage("write"):
        return write(planned, spent, selected, run)
