"""The checks a release makes before its spend that are not a stage of their own: text options,
the output location, the private outputs, input files, the spec's text, the --configs list's
size against the data, and the room, ledger and renderer after the data are prepared."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dpbundle.release.pipeline import output
from dpbundle.release.pipeline.output import fail, say, unusable, warn
from dpbundle.release.pipeline.request import MAX_OUT_NAME, TEXT_OPTIONS, ReleaseRequest

__all__ = ["SIZE_FACTOR", "check_text_inputs", "check_out", "check_private_outputs", "check_input_file",
           "inside", "spec_text_problem", "check_list_size", "rows_for_room", "preflight_after_prepare"]

SIZE_FACTOR = 2.0   # the data and the list's sweep data may differ in size by at most this factor


def check_text_inputs(request: ReleaseRequest) -> None:
    """Every path and text option can be recorded and published as UTF-8 (an argument with
    undecodable bytes would otherwise fail after the spend, e.g. a beacon value in the seed
    derivation)."""
    from dpbundle.release.common.safe_io import text_problem

    for name in TEXT_OPTIONS:
        value = getattr(request, name)
        if value is None:
            continue
        option = "--" + name.replace("_", "-") if name not in ("spec", "data") else name.upper()
        problem = text_problem(value, option)
        if problem:
            unusable(f"{problem}; nothing was read or spent")


def check_out(out: Path, force: bool) -> None:
    """The output location, before anything is spent: absent, or (with --force) a complete
    dpbundle bundle; its folder writable. Leftovers of killed runs are removed."""
    from dpbundle.release.bundle.preflight import clean_stale, replaceable_bundle_problem, writable_dir_problem

    if len(os.fsencode(out.name)) > MAX_OUT_NAME:
        unusable(f"{out.name[:40]}...: the bundle's name is longer than {MAX_OUT_NAME} bytes (its hidden "
                 "temporary folder, transcript and kept result add up to 40 bytes to it, and a file "
                 "name has at most 255); nothing was spent")
    if (out.exists() or out.is_symlink()) and not force:
        fail(f"{out} already exists; choose another --out or pass --force to replace it")
    if (out.exists() or out.is_symlink()) and force:
        problem = replaceable_bundle_problem(out)
        if problem:
            fail(f"{problem}. --force replaces only a complete dpbundle bundle (its manifest lists "
                 "exactly its files and they verify); nothing was touched and nothing was spent")
    if not out.parent.is_dir():
        fail(f"{out.parent}: no such directory (for the bundle {out}); create it first")
    problem = writable_dir_problem(out.parent, f"the bundle {out.name}")
    if problem:
        fail(f"{problem}; nothing was spent")
    for name in clean_stale(out):
        say(f"removed {out.parent / name}, left behind by an interrupted run")


def check_private_outputs(out: Path, transcript_path: Path, make_zip: bool, force: bool) -> None:
    """The transcript's and the zip's paths: absent, or (with --force) a regular file; never a
    device node, FIFO, socket, directory or link."""
    from dpbundle.release.common.safe_io import replace_problem

    zip_path = out.with_name(out.name + ".zip")
    for path, what in ((transcript_path, "the transcript"), (zip_path if make_zip else None, "the zip")):
        if path is None or not (path.exists() or path.is_symlink()):
            continue
        if not force:
            fail(f"{path} ({what}) already exists; choose another --out, move it away, or pass --force")
        problem = replace_problem(path, what)
        if problem:
            fail(f"{problem}; nothing was touched and nothing was spent")


def check_input_file(path: Path, what: str, limit: int | None) -> None:
    """A file the release reads: a regular file of at most ``limit`` bytes (never a device, a
    FIFO or a directory, which may never end or block), checked before it is read."""
    from dpbundle.release.common.safe_io import regular_file_problem

    if not path.exists():
        return            # the loader says so in its own words
    problem = regular_file_problem(path, what, limit)
    if problem:
        unusable(f"{problem}; nothing was read or spent")


def inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False


def spec_text_problem(obj: Any, where: str = "") -> str | None:
    """The first string of the spec that cannot be written as UTF-8 (a YAML escape such as
    "\\udcff" gives a lone surrogate), else None: the bundle's files are UTF-8."""
    stack = [(obj, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return f"{at or '(root)'}: not valid Unicode text (a lone surrogate)"
        elif isinstance(value, dict):
            for k, v in value.items():
                stack.append((k, at))
                stack.append((v, f"{at}.{k}" if at else str(k)))
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(value))
    return None


def check_list_size(path: Path, measured: dict | None, prepared, spec, allow: bool,
                    example: bool) -> None:
    """Refuse (before the ledger entry) a --configs list measured on data of another size: the
    acceptance of a configuration changes with n (the noise of the criteria scales as 1/n), so
    the list's figures, and the stop probability derived from them, may not describe this run.
    Compared: the public number of records (declared_public), else the rows of the file (the
    same for every neighbour: the plausible count is private under dp_count)."""
    if not measured:
        warn(f"{path} does not say on how many records it was measured (swept before dpbundle 0.2): "
             "its acceptance figures may not fit these data")
        return
    if spec.records_policy == "declared_public":
        mine, theirs, what = prepared.n, measured.get("n"), "plausible records"
    else:
        mine, theirs, what = prepared.rows_read, measured.get("rows"), "rows"
    if not isinstance(theirs, int) or theirs < 1 or max(mine, theirs) <= SIZE_FACTOR * min(mine, theirs):
        return
    text = (f"{path} was measured on {theirs:,} {what}; these data have {mine:,}, more than a factor "
            f"of {SIZE_FACTOR:g} {'fewer' if mine < theirs else 'more'}. Its acceptance figures (and "
            "the stop probability derived from them) may not describe this run, which could take "
            "very many attempts.")
    if allow:
        warn(f"{text} Used because of --allow-other-size.")
        return
    hint = ("choose --example-rows within that factor of the list's size, or run `dpbundle sweep` "
            "on public data of this size and pass its narrowed.yaml with --configs" if example else
            "run `dpbundle sweep` on public data of about this size (or `dpbundle sweep --configs "
            f"{path}` to re-measure the list), or pass --allow-other-size")
    fail(f"{text}\n{hint}; nothing was spent")


def rows_for_room(prepared, spec) -> int:
    """The number of rows to budget disk room for, without reading the private n under dp_count:
    the file's rows plus 20 noise scales of the DP count (exceeded with probability e^-20 / 2)."""
    if spec.records_policy == "declared_public":
        return prepared.n
    from dpbundle.mechanisms.noise import calibrated_laplace_scale

    return prepared.rows_read + int(20 * calibrated_laplace_scale(1, spec.epsilon_count, integer=True)) + 1


def preflight_after_prepare(out: Path, spec, n: int, make_zip: bool, ledger_path: Path) -> None:
    """Room for the bundle, a writable ledger, a working PDF renderer: before the ledger entry."""
    from dpbundle.release.bundle import timings
    from dpbundle.release.bundle.preflight import (estimate_bundle_bytes, renderer_note, renderer_problem, room_problem,
                                                   writable_dir_problem)
    from dpbundle.release.data.transform import column_coding

    longest = []
    spec = spec.provisional()              # dp_edges: the longest labels their edges can give
    for col in spec.released_columns:
        lens = [max(len(lab) for lab in column_coding(spec, col.name, str(alt_id)).labels)
                for alt_id in col.alternative_ids]
        longest.append(max(lens))
    need = estimate_bundle_bytes(n, longest) * (2 if make_zip else 1)
    problems = [room_problem(out.parent, need, "the bundle"),
                writable_dir_problem(ledger_path.parent, "the ledger")]
    if ledger_path.exists() and not os.access(ledger_path, os.W_OK):
        problems.append(f"{ledger_path}: the ledger is not writable")
    with output.console.status("checking the datasheet renderer"), timings.stage("plan.renderer_check"):
        problems.append(renderer_problem(spec.document()))
    problems = [p for p in problems if p]
    if problems:
        fail("; ".join(problems) + "\nnothing was spent (checked before the ledger entry)")
    note = renderer_note()
    if note:
        say(note, "note: ", "yellow")
