"""The second stage of a release: :func:`spend` records the privacy spend in the ledger, before
the first attempt of the selection. From here on the budget counts as spent, whatever happens."""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

from dpbundle.release.pipeline.output import fail, say
from dpbundle.release.pipeline.planning import Plan
from dpbundle.release.pipeline.state import Run

__all__ = ["Spend", "spend"]


@dataclass(frozen=True)
class Spend:
    """The spend recorded for a release: its ledger entry, the total composed on these data, and
    what the bundle states about the ledger (None if it could not be read again)."""

    entry: str
    composed: Fraction
    ledger_info: Optional[dict]


def spend(plan: Plan, run: Run) -> Spend:
    """Note unfinished spends on these data, then reserve the spec's total epsilon in the ledger
    (signals held until it is recorded; ``run.entry`` set). Refused, with nothing spent, when the
    ledger refuses it (an earlier spend on these data without --allow-additional-spend, the cap)."""
    from dpbundle.mechanisms import exact  # exact budget arithmetic of the ledger's totals
    from dpbundle.release.scheme.ledger import LedgerError, LedgerRefusal, table_fingerprint, unfinished_note

    spec, prepared, ledger = plan.spec, plan.prepared, plan.ledger
    table_fp = table_fingerprint(prepared, spec)
    try:
        note = unfinished_note(ledger.entries(prepared.sha256, table_fp))
    except LedgerError as exc:
        fail(str(exc))
    if note:
        say(note, "ledger: ", "yellow")
    run.ledger, run.epsilon = ledger, exact.show(spec.total_epsilon_exact)
    try:
        with run.signals.critical():     # a signal now is held until the entry is recorded
            entry, composed = ledger.reserve(prepared.sha256, spec.fingerprint, spec.total_epsilon_exact,
                                             f"dpbundle release {spec.release_title!r} -> {plan.out}",
                                             plan.request.allow_additional_spend, table_fp=table_fp)
            run.entry = entry
    except LedgerRefusal as exc:
        fail(str(exc))
    except LedgerError as exc:
        fail(f"{exc}; nothing was spent (the ledger holds no entry of this run)")
    if composed > spec.total_epsilon_exact:
        say(f"the composed total spent on these data is now {exact.show(composed)}", "ledger: ", "yellow")
    return Spend(entry=entry, composed=composed, ledger_info=_ledger_info(ledger, prepared, table_fp, entry,
                                                                              spec.total_epsilon_exact))


def _ledger_info(ledger, prepared, table_fp: str, entry: str, total_epsilon: Fraction) -> dict | None:
    """What the bundle states, signed, about the ledger: how many spends on these data it has
    recorded, this one included, this spend's id, the earlier spends' epsilons as the ledger
    records them (in ledger order; runs that released nothing included) and the composed epsilon
    (``total_epsilon`` plus theirs, summed exactly, then the nearest float). The enclave audit's
    ``--ledger`` checks them against the ledger. None if the ledger cannot be read again (the
    bundle then says nothing about it)."""
    from dpbundle.mechanisms import exact
    from dpbundle.release.scheme.ledger import LedgerError

    try:
        entries = ledger.entries(prepared.sha256, table_fp)
        at = [e["id"] for e in entries].index(entry)
        earlier = [float(e["epsilon"]) for e in entries[:at]]
        composed = total_epsilon + exact.total(earlier)
    except (LedgerError, OSError, KeyError, ValueError, TypeError, ArithmeticError):
        return None
    return {"spends_on_registry": at + 1, "spend_id": entry, "earlier_epsilons": earlier,
            "composed_epsilon": float(composed)}
