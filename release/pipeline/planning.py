"""The first stage of a release: :func:`plan` makes every check that needs no privacy budget and
returns a :class:`Plan`, what the later stages need. No budget is spent before it returns."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from dpbundle.release.bundle import timings
from dpbundle.release.errors import literal
from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.checks import (check_input_file, check_list_size, check_out, check_private_outputs,
                                              inside, preflight_after_prepare, rows_for_room, spec_text_problem)
from dpbundle.release.pipeline.output import fail, say, unusable
from dpbundle.release.pipeline.request import ReleaseRequest, in_memory
from dpbundle.release.pipeline.state import Run

__all__ = ["Plan", "plan", "load_key"]


@dataclass(frozen=True, eq=False)
class Plan:
    """A release that passed every check made before its spend: the request (with the example's
    spec, data, key, ledger and list filled in), the loaded spec and key, the prepared data,
    where the transcript goes, the ledger, the configurations and seeds the selection draws from,
    its stop plan, and the public files the bundle will carry besides its own."""

    request: ReleaseRequest
    spec: Any
    private_key: Any
    transcript_path: Path
    ledger: Any
    prepared: Any
    configs: Optional[list]
    binding: Any
    stop: Any
    public_files: dict

    @property
    def out(self) -> Path:
        return self.request.out


def plan(request: ReleaseRequest, run: Run) -> Plan:
    """Check, in this order: the output location and the transcript's, the ledger's path, the
    spec, the key, the --configs list, the pre-registration, the stop probability, the
    generators; then prepare the data and check the list's size, room for a kept result (reserved
    in ``run``), room for the bundle, the ledger, the renderer and the public files. Every
    refusal says that nothing was spent; no budget is spent before this returns."""
    transcript_path, ledger = _outputs(request)
    with timings.stage("plan.spec"):
        spec = _load_spec(request)
    private_key = load_key(request.key, request.passphrase_file)
    with timings.stage("plan.configs"):
        choice = _selection_inputs(request, spec, private_key)
    with timings.stage("plan.prepare"):
        prepared = _prepare(request, spec)
    if request.configs is not None:
        check_list_size(request.configs, choice.measured, prepared, spec, request.allow_other_size,
                        request.is_example)
    _face_privacy_reachable(spec, prepared, choice.configs)
    _room(request, spec, prepared, ledger, run)
    try:   # the public files the bundle will carry, checked now as write_bundle will check them
        from dpbundle.release.bundle.write import BundleError, check_public_files

        check_public_files(choice.public_files)
    except (BundleError, ValueError) as exc:
        unusable(f"{literal(exc)}; nothing was spent")
    return Plan(request=request, spec=spec, private_key=private_key, transcript_path=transcript_path,
                ledger=ledger, prepared=prepared, configs=choice.configs, binding=choice.binding,
                stop=choice.stop, public_files=choice.public_files)


@dataclass(frozen=True, eq=False)
class _Choice:
    """What the selection draws from: the list's configurations and size, the seeds, the stop."""

    configs: Optional[list]
    measured: Optional[dict]
    binding: Any
    public_files: dict
    stop: Any


def _outputs(request: ReleaseRequest):
    """(transcript path, Ledger): the bundle's place, the transcript's (absolute, private, not
    inside the bundle), the zip's, and the ledger's path."""
    from dpbundle.release.bundle.preflight import writable_dir_problem
    from dpbundle.release.bundle.write import default_transcript_path
    from dpbundle.release.scheme.ledger import Ledger

    out = request.out
    check_out(out, request.force)
    transcript_path = (request.transcript or default_transcript_path(out)).absolute()
    if inside(transcript_path, out):
        fail(f"the transcript {transcript_path} must not be inside the bundle {out}: it is private")
    if not transcript_path.parent.is_dir():
        fail(f"{transcript_path.parent}: no such directory (for the transcript {transcript_path})")
    problem = writable_dir_problem(transcript_path.parent, "the private transcript")
    if problem:
        fail(f"{problem}; nothing was spent")
    check_private_outputs(out, transcript_path, request.make_zip, request.force)
    ledger = Ledger(request.ledger or Ledger.default_path())   # an absolute path from here on
    if request.ledger is None:   # the default ledger's folder is made on the first release (0700)
        from dpbundle.release.scheme.ledger import LedgerError, make_private_dirs

        try:
            make_private_dirs(ledger.path.parent)
        except LedgerError as exc:
            unusable(f"{exc}; nothing was read or spent")
    problem = ledger.path_problem()
    if problem:
        unusable(f"{problem}; nothing was read or spent")
    return transcript_path, ledger


def _check_data_files(request: ReleaseRequest) -> None:
    """DATA is a regular file, or a directory of regular CSV files (its parts); --scheduler
    needs data on a path (the workers read the parts)."""
    from dpbundle.release.data.parts import registry_parts
    from dpbundle.release.data.prepare import InputError

    data = Path(request.data)
    if not data.is_dir():
        check_input_file(data, "data file", None)
        return
    try:
        for part in registry_parts(data):
            check_input_file(part, "data file", None)
    except InputError as exc:
        unusable(f"{exc}; nothing was read or spent")


def _load_spec(request: ReleaseRequest):
    """The spec and data files are regular files; the validated spec, its every string writable
    as UTF-8. A spec in memory (dict or Spec) is validated as a file's document would be. A
    built-in example's spec gets ``release.simulated: true``."""
    from dpbundle.release.spec.load import MAX_SPEC_BYTES, SpecError, load_spec, spec_of

    if not in_memory(request.spec):
        check_input_file(request.spec, "spec", MAX_SPEC_BYTES)
    if not in_memory(request.data):
        _check_data_files(request)
    try:
        spec = spec_of(request.spec) if in_memory(request.spec) else load_spec(request.spec)
    except SpecError as exc:
        unusable(str(exc))
    except TypeError as exc:
        unusable(f"{exc}; nothing was read or spent")
    where = spec.source if in_memory(request.spec) else request.spec
    problem = spec_text_problem(spec.document())
    if problem:
        unusable(f"{where}: {problem}; nothing was read or spent")
    from dpbundle.release.spec.dictionary import placeholder_fields

    unfilled = placeholder_fields(spec.document())
    if unfilled:
        unusable(f"{where}: {', '.join(unfilled)} still say \"CHANGE ME\" (placeholders of `spec "
                 "from-dictionary`; the datasheet prints them): write the release's own text; nothing "
                 "was read or spent")
    if request.is_example:       # a built-in example's registry is simulated: the public spec says so
        from dpbundle.release.spec.load import as_simulated

        spec = as_simulated(spec)
    return spec


def load_key(key_path: Path, passphrase_file: Optional[Path]):
    """The Ed25519 private key (its passphrase from the file or the environment)."""
    from dpbundle.release.bundle.keys import KeyFileError, load_private_key, read_passphrase
    from dpbundle.release.common.safe_io import KEY_BYTES, PASSPHRASE_BYTES

    check_input_file(key_path, "signing key", KEY_BYTES)
    if passphrase_file is not None:
        check_input_file(passphrase_file, "passphrase file", PASSPHRASE_BYTES)
    try:
        return load_private_key(key_path, read_passphrase(passphrase_file))
    except KeyFileError as exc:
        unusable(f"cannot load the signing key: {exc}")


def _selection_inputs(request: ReleaseRequest, spec, private_key) -> _Choice:
    """The --configs list, the pre-registration, the list as a public file, the stop
    probability; every generator they use available here."""
    from dpbundle.release.bundle.write import BundleError
    from dpbundle.release.common.safe_io import LIST_BYTES
    from dpbundle.release.pipeline.selection_inputs import bind_preregistration, choose_stop, load_configs
    from dpbundle.release.scheme.space import check_config

    configs, estimates, measured, configs_path = None, None, None, request.configs
    if configs_path is not None:
        check_input_file(configs_path, "configuration list", LIST_BYTES)
        configs, estimates, measured = load_configs(configs_path, spec, check_config, request.allow_other_spec)
    binding, public_files = bind_preregistration(request, spec, private_key)
    if configs_path is not None:     # the list the selection draws from is published verbatim
        from dpbundle.release.bundle.write import configurations_file

        try:
            public_files = public_files | configurations_file(configs_path)
        except BundleError as exc:
            unusable(f"{literal(exc)}; nothing was spent")
    stop = choose_stop(spec, request.stop_probability, estimates)
    from dpbundle.mechanisms.generators import generator_types

    available = generator_types()
    used = {c["generator"]["type"] for c in configs} if configs else set(spec.generator_types)
    for gtype in sorted(used):
        if not available[gtype]["available"]:
            fail(f"generator {gtype!r} is not available here: {available[gtype]['reason']}")
    return _Choice(configs=configs, measured=measured, binding=binding, public_files=public_files, stop=stop)


def _prepare(request: ReleaseRequest, spec):
    """The private data, read and validated (errors name file, line, column and rule, never a
    cell's value)."""
    import pandas as pd   # imported by prepare already

    from dpbundle.release.data.prepare import InputError, prepare, prepare_frame

    with output.console.status("reading and validating the data"):
        frame = in_memory(request.data)
        if frame and not isinstance(request.data, pd.DataFrame):
            unusable(f"data must be a path or a pandas DataFrame, not {type(request.data).__name__}; "
                     "nothing was read or spent")
        try:
            if frame:
                if request.scheduler:
                    unusable("--scheduler reads DATA's files on the cluster: give a path, not a DataFrame; "
                             "nothing was read or spent")
                prepared = prepare_frame(request.data, spec, show_values=False)
            elif request.scheduler or Path(request.data).is_dir():
                prepared = _prepare_parts(request, spec)
            else:
                prepared = prepare(request.data, spec, show_values=False)
        except InputError as exc:
            see = ("dpbundle.release.data.prepare.prepare_frame(DATA, spec)" if frame else
                   "`dpbundle spec validate SPEC --data DATA`")
            unusable(f"{exc}\n  (cell values are not shown here; run {see} inside the enclave to see them)")
    shown = ("the DataFrame" if in_memory(request.data) else
             request.data.name if request.is_example else request.data)
    if spec.records_policy == "declared_public":
        say(f"prepared {shown}: n = {prepared.n:,} plausible records (declared public by the spec's "
            "records policy)")
    else:
        say(f"prepared {shown}: the number of plausible records will be released as a DP count "
            f"(epsilon {spec.epsilon_count:g})")
    return prepared


def _prepare_parts(request: ReleaseRequest, spec):
    """DATA's parts read and counted (on the cluster with --scheduler) and gathered here."""
    from dpbundle.release.data.cluster import SchedulerError
    from dpbundle.release.data.parts import prepare_parts

    try:
        return prepare_parts(request.data, spec, show_values=False, scheduler=request.scheduler)
    except (OSError, TimeoutError) as exc:
        if not request.scheduler:
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            unusable(f"{where}cannot read a part of {request.data} ({exc.strerror or type(exc).__name__}); "
                     "nothing was spent")
        unusable(f"--scheduler {request.scheduler}: cannot use the Dask cluster ({type(exc).__name__}: "
                 f"{exc}); nothing was spent")
    except SchedulerError as exc:    # the address, or the server there: names both itself
        unusable(f"{exc}; nothing was spent")
    except RuntimeError as exc:
        unusable(f"--scheduler {request.scheduler}: {exc}; nothing was spent")


def _face_privacy_reachable(spec, prepared, configs: Optional[list]) -> None:
    """Every record appears at least min_count times, so a table of n records needs n >= min_count.
    With n declared public, a release whose every min_count exceeds n could never pass an attempt
    (with stop probability 0 it would select for ever): refused before any spend. (Under dp_count,
    n is the DP count's output, not known here; the schema bounds min_count.)"""
    if spec.records_policy != "declared_public":
        return
    if configs:
        counts = [(c.get("projection") or {}).get("min_count") for c in configs]
    else:
        counts = list(spec.model.projection.min_count)
    counts = [k for k in counts if isinstance(k, int) and not isinstance(k, bool)]
    if counts and min(counts) > prepared.n:
        unusable(f"projection.min_count: every value ({', '.join(map(str, sorted(set(counts))))}) exceeds the "
                 f"public number of records, {prepared.n:,}: no table of that size has every record "
                 f"{min(counts)} times or more, so no attempt could pass; nothing was spent")


def _room(request: ReleaseRequest, spec, prepared, ledger, run: Run) -> None:
    """Room for a kept result in the private directory (reserved in ``run``, before the bundle's
    room is measured), then room for the bundle, a writable ledger and a working renderer."""
    from dpbundle.release.bundle.write import private_dir

    try:
        from dpbundle.release.bundle.pending import reserve

        run.reservation = reserve(private_dir(), request.out, _pending_room(prepared, spec))
    except OSError as exc:
        fail(f"{private_dir()}: cannot reserve room there to keep the selected result should its "
             f"bundle fail to be written ({exc.strerror or exc}); nothing was spent (checked before "
             "the ledger entry)")
    preflight_after_prepare(request.out, spec, rows_for_room(prepared, spec), request.make_zip, ledger.path)


def _pending_room(prepared, spec) -> int:
    """Room to reserve, before the spend, for a kept result: the codes (8 bytes a cell, an upper
    bound of their compressed size), the spec, and 16 MiB for the transcript and public files;
    grown after the selection if the transcript is larger."""
    rows = rows_for_room(prepared, spec)
    return rows * len(spec.released_columns) * 8 + 2 * len(json.dumps(spec.document(), default=str)) + (16 << 20)
