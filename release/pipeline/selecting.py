"""The third stage of a release: :func:`select` runs the private selection (after the records
policy's DP count) and builds the bundle's content. A selection that releases nothing marks the
spend, keeps the private transcript and stops with a message that states what exists."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, NoReturn

from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.output import fail, say, selection_line
from dpbundle.release.pipeline.planning import Plan
from dpbundle.release.pipeline.spending import Spend
from dpbundle.release.pipeline.state import Run, how, keep_private_transcript, mark, state

__all__ = ["Selected", "select"]


@dataclass(frozen=True, eq=False)
class Selected:
    """The candidate that passed every criterion: the selection's result (for the summary), its
    privacy budget (budget.json), and the content of its bundle."""

    result: Any
    budget: dict
    content: Any          # dpbundle.release.bundle.write.BundleContent


def select(plan: Plan, spend: Spend, run: Run) -> Selected:
    """The records policy (a DP count under dp_count), the ``dp_edges`` alternatives' edges (the
    spec resolved with them is what the selection and the bundle use), then the private selection
    with one static line on screen; then the budget and, with ``publish: model``, model.json. Nothing
    about failed attempts is shown or kept outside the private transcript."""
    from dpbundle.mechanisms.noise import Randomness, Transcript

    from dpbundle.release.scheme.edges import release_edges
    from dpbundle.release.scheme.records import release_records
    from dpbundle.release.scheme.selection import select as private_selection

    transcript = Transcript()
    try:
        rand = Randomness(transcript)
        released = release_records(plan.prepared, plan.spec, rand)
        if plan.spec.records_policy == "dp_count":
            say(f"n = {released.n:,} records (DP count; the table is resized to it)")
        binding = _run_binding(plan, spend)           # of the spec as declared
        plan = dataclasses.replace(plan, spec=release_edges(plan.prepared, plan.spec, rand))
        _say_edges(plan.spec)
        output.console.print(selection_line(plan.stop.gamma), highlight=False, markup=False)
        selection = private_selection(released, plan.spec, transcript, plan.configs, seeds=plan.binding,
                                      stop_probability=plan.stop.gamma, run=binding)
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - each kind is stated below
        _nothing_released(exc, plan, transcript, run)
    result = selection.result
    # No duration here: the time the selection took is a proxy for the number of attempts, which
    # is private.
    output.console.print("private selection finished: a candidate passed every criterion", highlight=False)
    budget, public_files = _budget_and_model(plan, selection, released, transcript, run)
    return Selected(result=result, budget=budget, content=_content(plan, spend, result, budget,
                                                                   transcript, public_files))


def _say_edges(spec) -> None:
    """The drawn edges (public: spec.json carries them), one line per ``dp_edges`` alternative."""
    for (column, alt), edges in spec.drawn_edges().items():
        shown = ", ".join(f"{e:.15g}" for e in edges)
        say(f"bin edges of {column} ({alt}) drawn under DP: {shown}")


def _run_binding(plan: Plan, spend: Spend) -> dict:
    """The run's binding for the transcript (release/scheme/selection.run_binding)."""
    from dpbundle import __version__
    from dpbundle.release.bundle.keys import public_key_fingerprint
    from dpbundle.release.scheme.selection import run_binding

    return run_binding(version=__version__, spec_document=plan.spec.document(),
                       public_files=plan.public_files,
                       key_fingerprint=public_key_fingerprint(plan.private_key.public_key()),
                       stop_source=plan.stop.source, ledger=spend.ledger_info)


def _nothing_released(exc: BaseException, plan: Plan, transcript, run: Run) -> NoReturn:
    """The selection stopped without a candidate: mark the spend, keep the transcript, and stop
    with what exists (a stop draw, an interrupt, an abort, an internal error)."""
    from dpbundle.release.scheme.selection import NothingSelected, SelectionAborted

    path = plan.transcript_path
    if isinstance(exc, NothingSelected):
        mark(run, "nothing released")
        keep_private_transcript(transcript, path, run=run)
        fail(f"{exc}\n" + state(run), code=1)
    if isinstance(exc, KeyboardInterrupt):
        run.signals.stop(exc)
        mark(run, "interrupted")
        keep_private_transcript(transcript, path, run=run)
        fail(f"{how(exc)}: nothing was released. An interrupted run is outside the private "
             "selection's guarantee (when it was stopped is a choice made while watching it), so "
             f"its whole budget (epsilon {run.epsilon}) stays recorded as spent.\n" + state(run),
             code=130)
    if isinstance(exc, SelectionAborted):
        mark(run, "failed")
        keep_private_transcript(transcript, path, run=run)
        # neither which attempt nor the error's type is printed: both depend on the private
        # data (the attempt's index is the number of attempts; the type, e.g. a singular matrix,
        # on what the records hold)
        fail("the release stopped: an attempt of the private selection failed with an internal "
             "error; which attempt and what error are in the PRIVATE transcript only. Nothing was "
             "released.\n" + state(run), code=1)
    run.signals.stop()     # the message and its type may depend on private values: neither
    mark(run, "failed")
    keep_private_transcript(transcript, path, error=exc, run=run)
    fail("the release stopped with an internal error during the private selection; the details "
         "are in the PRIVATE transcript only. Nothing was released.\n" + state(run), code=1)


def _budget_and_model(plan: Plan, selection, released, transcript, run: Run) -> tuple[dict, dict]:
    """(budget, public files): the budget of the selected candidate and, with ``publish:
    model``, model.json (with ``publish: tables``, dp-tables.json) added to the public files."""
    from dpbundle.release.scheme.budget import build_budget

    spec, public_files = plan.spec, plan.public_files
    try:
        budget = build_budget(spec, selection.result.generator, selection.total_epsilon_opendp, released.n,
                              stop=plan.stop)
        if spec.publish_model:
            public_files = public_files | {"model.json": _model_file(spec, selection.result)}
        if spec.publish_tables:
            public_files = public_files | {"dp-tables.json": _tables_file(spec, selection.result)}
    except Exception as exc:  # noqa: BLE001 - the message may carry private values
        run.signals.stop()
        mark(run, "failed")
        keep_private_transcript(transcript, plan.transcript_path, error=exc, run=run)
        fail("the release stopped with an internal error after the selection; the details (the "
             "error's type too) are in the PRIVATE transcript only. Nothing was released.\n"
             + state(run), code=1)
    return budget, public_files


def _model_file(spec, result) -> bytes:
    """model.json of ``publish: model``: the selected candidate's fitted DP model."""
    from dpbundle.mechanisms.published import model_document

    doc = model_document(result.model, generator=result.config["generator"],
                         epsilon=spec.epsilon_generation, columns=list(spec.column_names))
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def _tables_file(spec, result) -> bytes:
    """dp-tables.json of ``publish: tables``: the noisy count tables the selected candidate's
    generator measured (mechanisms/measured.py)."""
    from dpbundle.mechanisms.measured import measured_of, tables_document
    from dpbundle.mechanisms.noise import calibrated_laplace_scale

    count_scale = (calibrated_laplace_scale(1, spec.epsilon_count, integer=True)
                   if spec.records_policy == "dp_count" else None)     # the table was resized
    doc = tables_document(measured_of(result.model), list(spec.column_names), count_scale)
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def _content(plan: Plan, spend: Spend, result, budget: dict, transcript, public_files: dict):
    """The bundle's content (:class:`BundleContent`) of the selected candidate."""
    from dpbundle.release.bundle.write import BundleContent

    return BundleContent(spec=plan.spec.document(), configuration=result.config,
                         configuration_id=result.config_id, columns=list(result.candidate.columns),
                         codes=result.candidate, metrics=result.metrics(), budget=budget,
                         transcript_records_jsonl=transcript.to_jsonl(), public_files=public_files,
                         ledger=spend.ledger_info)
