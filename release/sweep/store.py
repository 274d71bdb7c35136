"""The sweep directory: its file names and formats, and the records kept in it.

``runs.jsonl`` and ``utility.jsonl`` are append-only (each record fsynced as a run finishes, a
torn last line skipped when read back); the other files are rewritten atomically. The spec
fingerprint a sweep (and a narrowed list) is keyed on is :func:`spec_fingerprint`.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = [
    "FORMAT",
    "META",
    "NARROWED",
    "NARROWED_FORMAT",
    "REPORT_HTML",
    "REPORT_PDF",
    "RUNS",
    "RUNS_CSV",
    "SUMMARY_CSV",
    "SUMMARY_JSON",
    "UTILITY",
    "append_jsonl",
    "end_torn_line",
    "flatten_config",
    "now",
    "read_jsonl",
    "read_runs",
    "read_utility",
    "spec_fingerprint",
    "validate",
    "write_atomic",
]

FORMAT = "dpbundle-sweep/1"
NARROWED_FORMAT = "dpbundle-narrowed/1"
META, RUNS, RUNS_CSV, UTILITY = "sweep.json", "runs.jsonl", "runs.csv", "utility.jsonl"
SUMMARY_CSV, SUMMARY_JSON, NARROWED = "summary.csv", "summary.json", "narrowed.yaml"
REPORT_HTML, REPORT_PDF = "report.html", "report.pdf"


def spec_fingerprint(spec) -> str:
    """SHA-256 of the canonical public spec, without what does not change a sweep run: the
    private fingerprints, ``privacy.records`` (the sweep runs on public data of a public size;
    the real run's DP count moves n by a few records), and the words of the datasheet (the
    ``release`` section, and the columns' descriptions and units), so that editing a title or a
    description does not invalidate a configuration list. A categorical alternative's
    ``ordered`` is left out too: it changes only what datapackage.json tells readers
    (``categoriesOrdered``), no computation of a run.

    ``spec`` is a :class:`~dpbundle.release.spec.model.Spec` (or an already public spec dict)."""
    from dpbundle.release.spec.load import canonical_json

    doc = copy.deepcopy(spec.public_dict() if hasattr(spec, "public_dict") else spec)
    (doc.get("privacy") or {}).pop("records", None)
    doc.pop("release", None)
    for col in doc.get("columns") or []:
        if isinstance(col, dict):
            col.pop("description", None)
            col.pop("unit", None)
            for alt in col.get("alternatives") or []:
                if isinstance(alt, dict) and "categories" in alt:
                    alt.pop("ordered", None)
    return hashlib.sha256(canonical_json(doc)).hexdigest()


def now() -> str:
    """The current UTC time, to the second (``2024-05-01T12:00:00Z``)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def flatten_config(config: dict, prefix: str = "") -> dict[str, Any]:
    """``{"columns": {"parity": "unit"}, ...}`` -> ``{"columns.parity": "unit", ...}``."""
    out: dict[str, Any] = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_config(v, key + "."))
        else:
            out[key] = v
    return out


def validate(doc: Any, schema: str, what: str) -> None:
    """Check ``doc`` against the JSON schema ``schema`` (a ValueError naming ``what``)."""
    from dpbundle.release.common.jsonschemas import validate as validate_schema

    validate_schema(doc, schema, document=what)


def append_jsonl(path: Path, record: dict) -> None:
    """Append one record as a JSON line, flushed and fsynced."""
    line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def end_torn_line(path: Path) -> None:
    """After a crash mid-write the file may end inside a record: end that line so the next
    append starts a fresh one (the torn record is then skipped by the reader)."""
    if path.exists() and path.stat().st_size:
        with open(path, "rb+") as fh:
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) != b"\n":
                fh.write(b"\n")


def read_jsonl(path: Path) -> Iterator[dict]:
    """Records of a JSON-lines file; a torn last line (a crash mid-write) is skipped."""
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and "config_id" in rec and "rep" in rec:
                yield rec


def _latest(path: Path) -> dict[tuple[str, int], dict]:
    recs: dict[tuple[str, int], dict] = {}
    for rec in read_jsonl(path):
        recs[(str(rec["config_id"]), int(rec["rep"]))] = rec
    return recs


def read_runs(out: Path) -> dict[tuple[str, int], dict]:
    """The latest record of every (config_id, rep) in ``out/runs.jsonl``."""
    return _latest(Path(out) / RUNS)


def read_utility(out: Path) -> dict[tuple[str, int], dict]:
    """The latest utility record of every (config_id, rep) in ``out/utility.jsonl``."""
    return _latest(Path(out) / UTILITY)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (never a half-written file)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
