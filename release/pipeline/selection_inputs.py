"""What the private selection draws from and how it may stop, fixed before any spend: the
--configs list (:func:`load_configs`), the stop probability (:func:`choose_stop`) and the seeds
a pre-registration binds (:func:`bind_preregistration`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from dpbundle.release.errors import literal
from dpbundle.release.pipeline.output import fail, say, unusable, warn
from dpbundle.release.pipeline.request import ReleaseRequest

__all__ = ["load_configs", "choose_stop", "bind_preregistration"]


def load_configs(path: Path, spec, check_config, allow_other_spec: bool = False):
    """(configurations, sweep estimates or None, measured_on) of the --configs list; refused when
    unreadable, empty, outside the spec's space, or swept on another spec (unless allowed)."""
    from dpbundle.release.sweep.run import load_narrowed

    try:
        entries = load_narrowed(path)
    except (OSError, ValueError) as exc:
        unusable(str(exc) if str(exc).startswith(str(path)) else f"{path}: cannot read the configuration list: {exc}")
    configs = [e["config"] for e in entries]
    if not configs:
        unusable(f"{path}: lists no configurations; rerun the sweep with a lower --min-acceptance")
    for i, c in enumerate(configs):
        problems = check_config(spec, c)
        if problems:
            unusable(f"{path}: configurations[{i}] is not in the spec's space: {'; '.join(problems)}")
    _check_list_spec(path, spec, allow_other_spec)
    from dpbundle.release.sweep.run import read_list_document

    measured = (read_list_document(path) or {}).get("measured_on")
    acc = [e.get("acceptance") for e in entries]
    if not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in acc):
        return configs, None, measured
    return configs, (acc, [e.get("wilson_low") for e in entries]), measured


def _check_list_spec(path: Path, spec, allow_other_spec: bool) -> None:
    """The list's spec_sha256 is this spec's, or --allow-other-spec (then a warning)."""
    from dpbundle.release.sweep.run import _spec_fingerprint, read_list_document

    listed = (read_list_document(path) or {}).get("spec_sha256")
    mine = _spec_fingerprint(spec)
    if listed is not None and listed != mine:
        if not allow_other_spec:
            fail(f"{path}: this configuration list was swept on another version of the spec:\n"
                 f"  list spec_sha256: {listed}\n  this spec:        {mine}\n"
                 "Its acceptance figures may not describe this spec. Re-run the sweep (or `dpbundle "
                 "sweep --configs` to re-measure the list), or pass --allow-other-spec to use it anyway.")
        warn(f"{path} was swept on another spec (spec_sha256 {str(listed)[:16]}..., this spec "
             f"{mine[:16]}...); used because of --allow-other-spec")


def choose_stop(spec, option: Optional[str], estimates):
    """The stop plan (:class:`StopPlan`) from --stop-probability (a number or auto), printed
    with its arithmetic; warnings before anything is spent when the acceptance is unknown or low
    or the run may never end. A list with sweep estimates makes ``auto`` the default (unless the
    spec sets a stop probability above 0); 0 then needs ``--stop-probability 0``."""
    from dpbundle.release.scheme.stopping import LOW_ACCEPTANCE, plan_stop

    acc, lows = estimates if estimates else (None, None)
    if option is None and acc is not None and spec.stop_probability == 0:
        option = "auto"
    try:
        plan = plan_stop(option, spec.stop_probability, acc, lows)
    except ValueError as exc:
        unusable(str(exc))
    if spec.retries == "resample" and plan.gamma == 0:
        unusable("privacy.selection.retries: resample fits the generator once and samples from it until "
                 "a candidate passes: the stop probability must be above 0 so that every run ends (this "
                 "run's is 0, from " + plan.source.split(":", 1)[0] + "); nothing was read or spent")
    for line in plan.lines():
        say(line)
    if plan.gamma == 0:
        warn("stop probability 0: the selection runs until a candidate passes, and may never end if "
             "none can" + (" (the list's sweep estimates allow --stop-probability auto, which ends "
                           "every run)" if acc is not None else
                           "; pass --configs with the narrowed.yaml of `dpbundle sweep` and "
                           "--stop-probability auto, or a stop probability above 0 (e.g. 0.01: about "
                           "100 attempts expected if nothing can pass), which ends every run at no "
                           "extra epsilon"))
    if plan.p_mean is None:
        warn("no sweep estimate of the acceptance for these configurations (pass --configs with the "
             "narrowed.yaml of `dpbundle sweep`): the run may take many attempts")
    elif plan.p_mean < LOW_ACCEPTANCE:
        warn(f"the configurations pass only {plan.p_mean:.1%} of the time on public data (below "
             f"{LOW_ACCEPTANCE:.0%}): expect many attempts")
    return plan


def bind_preregistration(request: ReleaseRequest, spec, private_key):
    """(SeedBinding, public files for the bundle) of ``--preregistration REC --beacon VALUE``, or
    (None, {}). Everything is checked here, before the data are read or anything is spent."""
    rec_path, beacon = request.preregistration, request.beacon
    if rec_path is None:
        return None, {}
    if spec.retries == "resample":
        from dpbundle.release.preregistration import RESAMPLE_NOT_PREREGISTERED

        unusable(f"{rec_path}: {RESAMPLE_NOT_PREREGISTERED}; nothing was read or spent")
    from dpbundle.mechanisms.seeds import SeedBinding

    from dpbundle.release.preregistration import (PreregistrationError, check_against, default_secret_path,
                                                     load_preregistration, load_secret, seeds_document)

    try:
        rec = load_preregistration(rec_path)
        problems = check_against(rec, spec, private_key, request.configs)
        if problems:
            fail(f"{rec_path}: this release is not the pre-registered one: " + "; ".join(problems)
                 + "; nothing was read or spent")
        secret, salt = load_secret(request.preregistration_secret or default_secret_path(rec_path), rec)
        binding = SeedBinding(secret, beacon)
        binding.seed("projection", 0)     # the derivation works on this beacon value (UTF-8 text)
    except (PreregistrationError, ValueError, UnicodeError) as exc:
        unusable(f"{literal(exc)}; nothing was read or spent")
    from dpbundle.release import __version__

    if rec.doc["dpbundle_version"] != __version__:
        warn(f"the record was made with dpbundle {rec.doc['dpbundle_version']}, this is {__version__}")
    seeds = seeds_document(rec, secret, salt, beacon)
    files = {"preregistration.json": rec.record_bytes,   # the signed record as published
             "preregistration.json.sig": rec.signature,
             "seeds.json": (json.dumps(seeds, indent=2) + "\n").encode("utf-8")}
    say(f"pre-registered ({rec_path.name}): spec, list and key match; seeds bound to the beacon "
        f"value {beacon!r}")
    return binding, files
