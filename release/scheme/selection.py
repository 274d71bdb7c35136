"""Private selection (Liu & Talwar 2019, known threshold), run by dpbundle with OpenDP's
exact samplers; OpenDP's own combinator is the cross-check of the accounting.

One candidate = one iteration with a configuration drawn uniformly (CSPRNG) from the space or a
narrowed list; its privacy map is eps_gen + eps_eval per unit of change-one distance. With
``privacy.selection.retries: resample`` the configuration is drawn and the generator fitted once,
before the loop (eps_gen, spent once), and a candidate is a new sample of that model with its
criteria: its map is eps_eval, and the total is eps_gen + 2 x eps_eval (sequential composition of
the fit and the selection over candidates that read the data only through the criteria). The loop
(:class:`dpbundle.mechanisms.private_selection.KnownThresholdSelection`) repeats it until a
candidate scores 1 (every DP metric below its threshold) or, after a failed candidate, a stop
draw (probability gamma, exact) ends it; the total is 2 x (eps_gen + eps_eval) for d_in = 1 for
any gamma, checked against OpenDP's ``make_select_private_candidate`` map. dpbundle does not
*run* that combinator because OpenDP 0.16 draws its number of attempts from the wrong
distribution (see mechanisms/private_selection.py and docs/opendp-stop-probability.md).

Nothing about failed attempts (how many, their scores or configurations, the stop draws) leaves
this module except into the private transcript.
"""
from __future__ import annotations

import copy
from fractions import Fraction

import math
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from dpbundle.mechanisms import exact
from dpbundle.mechanisms.failures import AttemptFailure
from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.mechanisms.private_selection import (KnownThresholdSelection, StopRule,
                                                   opendp_selection_map)

from dpbundle.release.scheme.iteration import (FIT_END_MARK, FittedModel, IterationResult, fit_once,
                                               run_iteration, run_resampled)
from dpbundle.release.data.prepare import Prepared
from dpbundle.release.scheme.space import config_id, draw_config
from dpbundle.release.spec.load import Spec

THRESHOLD = 1.0


class NothingSelected(RuntimeError):
    """The selection stopped (stop_probability > 0) before any candidate passed."""


class SelectionAborted(RuntimeError):
    """An attempt raised something other than an :class:`AttemptFailure`: the release stops.
    The message is generic (the exception may carry private values); the details were recorded
    in the private transcript (mark "attempt error")."""

    def __init__(self, index: int, kind: str) -> None:
        super().__init__("an attempt of the private selection failed with an internal error "
                         f"({kind}); the details are in the private transcript only")
        self.index = index
        self.kind = kind


@dataclass
class Selection:
    result: IterationResult
    selected_index: int               # private: position in the transcript, never published
    total_epsilon_opendp: float       # OpenDP's privacy map of the whole selection (+ pre-selection)
    total_epsilon_ours: float         # our own arithmetic from the spec


def count_epsilon_opendp(spec: Spec) -> float:
    """OpenDP's privacy map (at distance 1) of the DP count of records (0 if n is declared public)."""
    if spec.records_policy != "dp_count":
        return 0.0
    from dpbundle.mechanisms.noise import calibrated_laplace_scale, laplace_measurement

    scale = calibrated_laplace_scale(1, spec.epsilon_count, integer=True)
    return float(laplace_measurement(scale, vector=False, integer=True).map(1))


def opendp_total_epsilon(spec: Spec, stop_probability: float | None = None) -> float:
    """Total epsilon of a release according to OpenDP's privacy maps, the exact sum rounded up
    to a float: the count of records (if DP) + the selection combinator's map over a candidate
    of eps_gen + eps_eval ("refit"; "resample": eps_gen once + the map over a candidate of
    eps_eval) + the pre-selection epsilons."""
    per_candidate = spec.epsilon_per_candidate
    gamma = spec.stop_probability if stop_probability is None else stop_probability
    selection = opendp_selection_map(per_candidate, gamma, THRESHOLD)
    if spec.definition == "zcdp":
        return _opendp_zcdp_total(spec, selection)
    once = exact.dec(spec.epsilon_generation) if spec.retries == "resample" else 0
    pre = exact.total(p.epsilon for p in spec.model.privacy.pre_selection_items)
    return exact.float_up(exact.binary(count_epsilon_opendp(spec)) + edges_epsilon_opendp(spec) + once
                          + exact.binary(selection) + pre)


def edges_epsilon_opendp(spec: Spec) -> Fraction:
    """The ``dp_edges`` draws' epsilon as handed to OpenDP: for each alternative, its k - 1 draws
    at ``exact.even_split(epsilon, k - 1)`` each (:func:`dpbundle.mechanisms.edges.dp_edges`)."""
    out = Fraction(0)
    for col in spec.model.columns:
        for alt in col.alternatives:
            if alt.dp_edges is not None:
                k = int(alt.dp_edges.bins) - 1
                out += k * exact.binary(exact.even_split(alt.dp_edges.epsilon, k))
    return out


def _opendp_zcdp_total(spec: Spec, selection: float) -> float:
    """A zCDP release's epsilon at its delta from OpenDP's maps: the count's and the selection's
    pure maps as rho (eps^2/2), the generator's rho and the pre-selection's, summed, then
    OpenDP's zCDP -> (epsilon, delta) conversion."""
    from dpbundle.mechanisms import zcdp

    rho = (zcdp.pure_to_rho(exact.binary(count_epsilon_opendp(spec))) + exact.dec(spec.rho_generation)
           + zcdp.pure_to_rho(exact.binary(selection))
           + sum((zcdp.pure_to_rho(exact.dec(p.epsilon)) for p in spec.model.privacy.pre_selection_items),
                 Fraction(0)))
    return zcdp.epsilon_at_delta(rho, spec.delta)


def check_accounting(spec: Spec, stop_probability: float | None = None) -> tuple[float, float]:
    """(OpenDP's total, ours); raises if they disagree (beyond OpenDP's own float rounding of
    its maps, which round up)."""
    theirs, ours = opendp_total_epsilon(spec, stop_probability), spec.total_epsilon
    if not math.isclose(theirs, ours, rel_tol=1e-9, abs_tol=1e-12):
        raise RuntimeError(f"privacy accounting mismatch: OpenDP gives {theirs!r}, our arithmetic "
                           f"gives {ours!r}")
    return theirs, ours


def run_binding(*, version: str, spec_document: dict, public_files: dict, key_fingerprint: str,
                stop_source: str, ledger: dict | None) -> dict:
    """What shaped the run besides the private data, for the transcript's ``selection`` mark
    (``run``; schemas/transcript-record.schema.json ``run_binding``): the version, the SHA-256 of
    the canonical public spec, of the configuration list and of the pre-registration record as
    the bundle will carry them (``public_files``: name -> bytes), the key's fingerprint, where
    the stop probability came from ("spec", "option" or "auto") and the manifest's ledger
    statement. The transcript's commitment binds them; the enclave replay requires each to be
    the bundle's (audit/run_binding.py), so a bundle changed after the run fails there."""
    import hashlib

    from dpbundle.release.spec.load import canonical_json

    public = copy.deepcopy(spec_document)
    if isinstance(public.get("privacy"), dict):
        public["privacy"].pop("private_data_sha256", None)

    def sha(name: str) -> str | None:
        data = public_files.get(name)
        return hashlib.sha256(data).hexdigest() if data is not None else None

    return {"dpbundle_version": version, "spec_sha256": hashlib.sha256(canonical_json(public)).hexdigest(),
            "configurations_sha256": sha("configurations.yaml"), "key_fingerprint": key_fingerprint,
            "preregistration_sha256": sha("preregistration.json"),
            "stop_probability_source": stop_source.split(":", 1)[0], "ledger": ledger_statement(ledger)}


#: the ledger statement's fields a run binds (composed_epsilon is their arithmetic with the total)
LEDGER_BOUND = ("spends_on_registry", "spend_id", "earlier_epsilons")


def ledger_statement(ledger: dict | None) -> dict | None:
    """The part of manifest.json's ledger statement known when the budget is reserved."""
    if ledger is None:
        return None
    return {k: (list(map(float, ledger[k])) if k == "earlier_epsilons" else ledger[k])
            for k in LEDGER_BOUND if k in ledger}


def select(prepared: Prepared, spec: Spec, transcript: Transcript, configs: list[dict] | None = None,
           phase: Callable[[str], None] | None = None, seeds: Any = None,
           stop_probability: float | None = None, run: dict | None = None) -> Selection:
    """Run the private selection; every attempt and stop draw is recorded into ``transcript``
    (private). ``seeds``: a :class:`dpbundle.mechanisms.seeds.SeedBinding` of a pre-registered
    release (the post-processing seeds of every attempt are then derived from it), or None.
    ``stop_probability``: the one chosen for this run (default: the spec's). ``run``: the run's
    binding (:func:`run_binding`), recorded in the 'selection' mark."""
    gamma = spec.stop_probability if stop_probability is None else stop_probability
    if spec.retries == "resample" and gamma <= 0:
        raise ValueError("retries: resample needs a stop probability above 0")
    theirs, ours = check_accounting(spec, gamma)
    stop = StopRule(gamma)
    loop = KnownThresholdSelection(spec.epsilon_per_candidate, stop, THRESHOLD)
    resample = {"retries": "resample"} if spec.retries == "resample" else {}
    Randomness(transcript).mark("selection", **stop.describe(), threshold=THRESHOLD, **resample,
                                **({"run": run} if run is not None else {}))
    fitted = _fit_once(prepared, spec, transcript, configs, phase, seeds) if resample else None

    def candidate(index: int) -> tuple[float, Any]:
        rand = Randomness(transcript, seeds=seeds)
        try:
            config = draw_config(spec, configs) if fitted is None else fitted.config
            rand.mark("iteration", index=index, config=config, config_id=config_id(config))
            result = (run_iteration(prepared, spec, config, rand, phase=phase) if fitted is None
                      else run_resampled(fitted, spec, rand, phase=phase))
            rand.mark("iteration end", index=index, passed=result.passed)
            return (1.0 if result.passed else 0.0, result)
        except AttemptFailure as exc:
            # a function of this attempt's DP outputs only: a failed attempt (score 0)
            rand.mark("iteration end", index=index, passed=False,
                      failure=f"{type(exc).__name__}: {exc}")
            return (0.0, None)
        except Exception as exc:  # noqa: BLE001 - private details to the transcript only
            rand.mark("attempt error", index=index, error=type(exc).__name__,
                      traceback="".join(traceback.format_exception(exc)))
            raise SelectionAborted(index, type(exc).__name__) from None

    def record_stop_draw(index: int, stopped: bool) -> None:
        Randomness(transcript).mark("stop draw", index=index, stop=stopped)

    out = loop.run(candidate, on_stop_draw=record_stop_draw) if fitted is not False else None
    if out is None:
        raise NothingSelected("the private selection stopped before a candidate passed every criterion; nothing is released")
    index, result = out
    Randomness(transcript).mark("selected", index=index)
    return Selection(result, index, theirs, ours)


def _fit_once(prepared: Prepared, spec: Spec, transcript: Transcript, configs: list[dict] | None,
              phase: Callable[[str], None] | None, seeds: Any) -> "FittedModel | bool":
    """The one fit of a ``retries: resample`` selection (configuration drawn as for an attempt),
    or False when the generator fails (an :class:`AttemptFailure`, a function of its DP outputs:
    nothing can be sampled, the run releases nothing; the reason goes to the transcript only)."""
    rand = Randomness(transcript, seeds=seeds)
    config = draw_config(spec, configs)
    try:
        return fit_once(prepared, spec, config, rand, phase=phase)
    except AttemptFailure as exc:
        rand.mark(FIT_END_MARK, failure=f"{type(exc).__name__}: {exc}")
        return False
    except Exception as exc:  # noqa: BLE001 - private details to the transcript only
        rand.mark("attempt error", error=type(exc).__name__,
                  traceback="".join(traceback.format_exception(exc)))
        raise SelectionAborted(-1, type(exc).__name__) from None
