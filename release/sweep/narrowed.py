"""``narrowed.yaml``: the configurations a sweep found acceptable, and lists read back.

A sweep writes the list (:func:`narrowed_yaml`); ``dpbundle release --configs`` reads it
(:func:`load_narrowed`), and ``dpbundle sweep --configs`` re-measures one
(:func:`read_config_list`). Every list is read with the spec's hardened YAML reader.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from dpbundle.release.sweep.execute import jsonable
from dpbundle.release.sweep.request import SweepError
from dpbundle.release.sweep.store import NARROWED, NARROWED_FORMAT, validate

__all__ = ["MAX_LIST_BYTES", "load_narrowed", "narrowed_yaml", "read_config_list", "read_list_document"]

MAX_LIST_BYTES = 20_000_000


def read_list_document(path: Path) -> Any:
    """A narrowed list parsed with the spec's hardened YAML reader (alias, depth, duplicate-key
    and size limits): it is input too. ValueError naming the file, line and column."""
    from dpbundle.release.spec.yaml_text import SpecTextError, load_yaml

    try:
        if path.stat().st_size > MAX_LIST_BYTES:
            raise ValueError(f"{path}: larger than {MAX_LIST_BYTES:,} bytes; not a narrowed list")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the narrowed configuration list: {exc}") from None
    try:
        return load_yaml(text)[0]
    except SpecTextError as exc:
        raise ValueError(f"{path}: cannot read the narrowed configuration list: "
                         f"{str(exc).replace('(file): ', '')}") from None


def _entry(path: Path, i: int, entry: dict, spec) -> dict:
    """One checked entry of a narrowed list (ValueError naming the file and the entry)."""
    from dpbundle.release.scheme.space import check_config, config_id

    where = f"{path}: configurations[{i}]"
    if config_id(entry["config"]) != str(entry["id"]):
        raise ValueError(f"{where}: id {entry['id']!r} does not match its configuration "
                         f"(which has id {config_id(entry['config'])!r}); was the file edited?")
    if spec is not None:
        problems = check_config(spec, entry["config"])
        if problems:
            raise ValueError(f"{where}: not a configuration of the spec: " + "; ".join(problems))
    return {"id": str(entry["id"]), "config": entry["config"],
            "acceptance": entry.get("acceptance"), "wilson_low": entry.get("wilson_low"),
            "wilson_high": entry.get("wilson_high"), "runs": entry.get("runs")}


def load_narrowed(path: Path | str, spec=None) -> list[dict]:
    """The configurations of a ``narrowed.yaml`` written by ``dpbundle sweep``.

    Returns a list of ``{"id", "config", "acceptance", "wilson_low", "wilson_high", "runs"}``.
    Raises ``ValueError`` (naming the file and entry) if the file is malformed, an id does not
    match its configuration, or (with ``spec``) a configuration is not in the spec's space.
    """
    path = Path(path)
    doc = read_list_document(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("configurations"), list):
        raise ValueError(f"{path}: expected a mapping with a 'configurations:' list")
    validate(doc, "narrowed", str(path))  # SchemaValidationError (a ValueError) naming the JSON path
    return [_entry(path, i, entry, spec) for i, entry in enumerate(doc["configurations"])]


def _check_list_spec(path: Path, spec_sha: str, allow_other_spec: bool) -> None:
    listed_sha = (read_list_document(path) or {}).get("spec_sha256")
    if listed_sha is not None and listed_sha != spec_sha and not allow_other_spec:
        raise SweepError(
            f"{path}: this configuration list was written for another spec:\n"
            f"  list spec_sha256: {listed_sha}\n  this spec:        {spec_sha}\n"
            "Its acceptance figures do not describe this spec. Re-measuring it is still possible: pass "
            "--allow-other-spec (every configuration must still belong to this spec's space).")


def read_config_list(path: Path | str, spec, spec_sha: str, space_ids: set[str], *,
                     allow_other_spec: bool = False) -> list[str]:
    """The configuration ids of a list to re-measure (``--configs``), in file order, duplicates dropped.

    The file must be a narrowed list (schema ``narrowed``); every id must match its
    configuration and be a configuration of ``spec``'s space; a list written for another spec
    (``spec_sha256`` != ``spec_sha``) is refused unless ``allow_other_spec``. Raises
    :class:`SweepError` (exit 2) naming the file and the entry.
    """
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"{path}: no such file (--configs)")
    try:
        entries = load_narrowed(path, spec)
    except ValueError as exc:
        raise SweepError(f"--configs: {exc}") from None
    _check_list_spec(path, spec_sha, allow_other_spec)
    if not entries:
        raise SweepError(f"{path}: lists no configurations; nothing to re-measure")
    ids: list[str] = []
    for i, e in enumerate(entries):
        if e["id"] not in space_ids:  # check_config passed, so this means the id scheme differs
            raise SweepError(f"{path}: configurations[{i}]: id {e['id']} is not a configuration id of this "
                             "spec's space")
        if e["id"] not in ids:
            ids.append(e["id"])
    return ids


_HEAD = (
    "# Configurations whose acceptance probability on public data is at least {cut:g} (dpbundle sweep).\n"
    "# Use: dpbundle release SPEC DATA --configs narrowed.yaml (the private run draws uniformly from this list).\n"
    "# decision: 'above' = the Wilson 95% interval lies above the cut-off; 'undecided' = it still straddles\n"
    "# the cut-off after --max-reps runs and the point estimate decided (re-measure with a larger --max-reps).\n"
    "# expected_iterations: 1/acceptance, interval [1/wilson_high, 1/wilson_low] (null: unbounded).\n")

_ENTRY_KEYS = ("acceptance", "wilson_low", "wilson_high", "runs", "decision", "expected_iterations",
               "expected_iterations_low", "expected_iterations_high")
_LIST_KEYS = ("expected_private_iterations", "expected_private_iterations_low",
              "expected_private_iterations_high", "expected_private_seconds", "undecided")


def narrowed_yaml(summary: dict, configs_by_id: dict[str, dict], where: str = NARROWED) -> str:
    """The text of ``narrowed.yaml`` for a sweep summary (checked against schema ``narrowed``)."""
    import yaml

    nar = summary["narrowed"]
    measured = {"n": summary["n"]} | ({"rows": summary["rows"]} if summary.get("rows") else {})
    doc = {"format": NARROWED_FORMAT, "spec_sha256": summary["spec_sha256"],
           "data_sha256": summary["data_sha256"], "measured_on": measured,
           "min_acceptance": summary["min_acceptance"]}
    doc.update({k: nar[k] for k in _LIST_KEYS})
    doc["configurations"] = [
        {"id": c["config_id"], "config": configs_by_id[c["config_id"]]} | {k: c[k] for k in _ENTRY_KEYS}
        for c in summary["configurations"] if c["narrowed"]]
    doc = jsonable(doc)
    validate(doc, "narrowed", where)
    return (_HEAD.format(cut=summary["min_acceptance"])
            + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=120))
