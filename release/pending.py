"""A selected result whose bundle could not be written, kept so that it can be written again
without a new selection (a new selection would spend the budget again).

The file is PRIVATE (it holds the private transcript and the ledger entry): written with mode
0600 into the private directory (``bundle.private_dir()``), never beside the bundle. Format: a
NumPy ``.npz`` without pickles: ``codes`` (the released integer codes, n x d) and ``meta`` (a
JSON text: format tag, spec, configuration, column codings, metrics, budget, the transcript
records, its path, the ledger and its entry). ``dpbundle release --resume FILE --out DIR --key
KEY`` writes the bundle from it.
"""
from __future__ import annotations

import base64
import datetime as _dt
import json
import os
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from dpbundle.mechanisms.coding import ColumnCoding

__all__ = ["FORMAT", "PendingError", "save_pending", "load_pending"]

FORMAT = "dpbundle-pending/1"


class PendingError(ValueError):
    """The pending-result file is unusable."""


def _coding_doc(c: ColumnCoding) -> dict:
    return {"name": c.name, "labels": list(c.labels), "values": np.asarray(c.values).tolist(),
            "ordered": bool(c.ordered), "lower": np.asarray(c.lower).tolist(),
            "upper": np.asarray(c.upper).tolist(),
            "categories": list(c.categories) if c.categories is not None else None,
            "integer": c.integer}


def _coding(doc: dict) -> ColumnCoding:
    cats = doc.get("categories")
    return ColumnCoding(doc["name"], tuple(doc["labels"]), np.asarray(doc["values"], float),
                        bool(doc["ordered"]), np.asarray(doc["lower"], float),
                        np.asarray(doc["upper"], float), tuple(cats) if cats is not None else None,
                        doc.get("integer"))


def save_pending(directory: Path, out: Path, *, spec: dict, configuration: dict,
                 configuration_id: str, columns: list[ColumnCoding], codes: np.ndarray,
                 metrics: list[dict], budget: dict, transcript_jsonl: bytes, transcript_path: Path,
                 ledger_path: Path, ledger_entry: str,
                 public_files: dict[str, bytes] | None = None) -> Path:
    """Write the pending result (0600, never overwriting) and return its path."""
    from .bundle import _jsonable

    meta = {"format": FORMAT, "out": str(out), "spec": spec, "configuration": configuration,
            "configuration_id": configuration_id, "columns": [_coding_doc(c) for c in columns],
            "metrics": _jsonable(metrics, "metrics"), "budget": _jsonable(budget, "budget"),
            "transcript_jsonl": bytes(transcript_jsonl).decode("utf-8"),
            "transcript_path": str(transcript_path), "ledger_path": str(ledger_path),
            "ledger_entry": ledger_entry,
            "public_files": {k: base64.b64encode(bytes(v)).decode("ascii")
                             for k, v in (public_files or {}).items()}}
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = Path(directory) / f"{Path(out).name}.{stamp}-{secrets.token_hex(3)}.pending.npz"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as fh:
        os.fchmod(fh.fileno(), 0o600)
        np.savez_compressed(fh, codes=np.asarray(codes, dtype=np.int64),
                            meta=np.array(json.dumps(meta, allow_nan=True)))
        fh.flush()
        os.fsync(fh.fileno())
    return path


def load_pending(path: Path) -> dict[str, Any]:
    """The pending result as write_bundle's arguments (+ out, transcript, ledger)."""
    path = Path(path)
    if not path.is_file():
        raise PendingError(f"{path}: no such file (--resume)")
    try:
        with np.load(path, allow_pickle=False) as z:
            codes = np.asarray(z["codes"], dtype=np.int64)
            meta = json.loads(str(z["meta"][()]))
    except (OSError, ValueError, KeyError) as exc:
        raise PendingError(f"{path}: not a pending dpbundle result ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise PendingError(f"{path}: not a pending dpbundle result (format {meta.get('format') if isinstance(meta, dict) else None!r})")
    try:
        meta["columns"] = [_coding(c) for c in meta["columns"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PendingError(f"{path}: unusable column codings ({exc})") from None
    try:
        meta["public_files"] = {k: base64.b64decode(v, validate=True)
                                for k, v in (meta.get("public_files") or {}).items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise PendingError(f"{path}: unusable public files ({exc})") from None
    meta["codes"] = codes
    return meta
