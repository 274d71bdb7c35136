"""Private, append-only budget ledger (kept by the data steward, never part of a bundle).

Every private release appends a *spend* line before it touches the data (status "started") and a
*status* line when it ends. A spend counts whether or not it finished, so a crash leaves the
ledger truthful. Spends are keyed by the fingerprint of the data file (SHA-256 of its bytes), so
a second release on the same data is detected even with a different spec; the spec fingerprint
(SHA-256 of the canonical spec JSON) is recorded beside it.

File format: UTF-8 JSON lines, one object per line, never rewritten:
    {"kind": "spend", "id", "timestamp", "data_fingerprint", "spec_fingerprint", "epsilon",
     "description", "status": "started"}
    {"kind": "status", "id", "timestamp", "status"}
Appends are made under an exclusive fcntl.flock, then flushed and fsync'ed; the file is 0600.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import secrets
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from .prepare import file_sha256
from .spec import canonical_json

__all__ = ["Ledger", "LedgerError", "LedgerRefusal", "data_fingerprint", "spec_fingerprint",
           "fingerprint"]

FILE_MODE = 0o600
SCHEMA = "ledger-entry"  # schemas/ledger-entry.schema.json: the structure of one line


class LedgerError(ValueError):
    """The ledger file is unreadable or corrupt, or a call is invalid."""


class LedgerRefusal(RuntimeError):
    """A new spend on data that already has spends, without permission to spend more."""


def data_fingerprint(data_path: Path) -> str:
    """SHA-256 (hex) of the data file's bytes."""
    return file_sha256(data_path)


def spec_fingerprint(spec: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of the spec."""
    return hashlib.sha256(canonical_json(spec)).hexdigest()


def fingerprint(data_path: Path, spec: dict) -> str:
    """Fingerprint of data + spec: SHA-256 of "<data sha256>:<spec sha256>".

    Spends are keyed by `data_fingerprint` (data only) so that a release with another spec on
    the same data is still detected; this combined value identifies one (data, spec) pair.
    """
    return hashlib.sha256(f"{data_fingerprint(data_path)}:{spec_fingerprint(spec)}".encode()).hexdigest()


def _check_schema(rec: dict, where: str) -> None:
    """LedgerError ``where: <kind> line ...`` if ``rec`` does not match the ledger-entry schema."""
    from .jsonschemas import iter_errors

    errors = iter_errors(rec, SCHEMA)
    if errors:
        problems = []
        for path, message in errors:
            missing = re.fullmatch(r"'(.+)' is a required property", message)
            problems.append(f"needs field {missing.group(1)!r}" if missing and path == "$"
                            else f"{path}: {message}")
        raise LedgerError(f"{where}: {rec.get('kind')} line does not match schema {SCHEMA}: "
                          + "; ".join(problems))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


class Ledger:
    """An append-only JSON-lines ledger of epsilon spent per private dataset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @staticmethod
    def default_path() -> Path:
        """The per-user ledger: <platformdirs user data dir>/dpbundle/ledger.jsonl."""
        import platformdirs

        return Path(platformdirs.user_data_dir("dpbundle")) / "ledger.jsonl"

    # -- reading -----------------------------------------------------------------------------
    def _parse(self, text: str) -> list[dict]:
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        elif lines:
            raise LedgerError(f"{self.path}:{len(lines)}: incomplete last line (no newline); "
                              "the ledger may have been cut by a crash while writing; "
                              "inspect and repair it by hand")
        records: list[dict] = []
        known: set[str] = set()
        for no, line in enumerate(lines, start=1):
            where = f"{self.path}:{no}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LedgerError(f"{where}: not valid JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise LedgerError(f"{where}: each line must be a JSON object")
            kind = rec.get("kind")
            if kind not in ("spend", "status"):
                raise LedgerError(f"{where}: unknown kind {kind!r} (expected 'spend' or 'status')")
            _check_schema(rec, where)
            if kind == "spend":
                eps = float(rec["epsilon"])
                if not (math.isfinite(eps) and eps >= 0):
                    raise LedgerError(f"{where}: epsilon must be a finite number >= 0")
                if rec["id"] in known:
                    raise LedgerError(f"{where}: duplicate spend id {rec['id']!r}")
                known.add(rec["id"])
            elif rec["id"] not in known:
                raise LedgerError(f"{where}: status line for unknown spend id {rec['id']!r}")
            records.append(rec)
        return records

    def _read(self) -> list[dict]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot read the ledger ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                data = fh.read()
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        try:
            return self._parse(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise LedgerError(f"{self.path}: not UTF-8 text (byte {exc.start})") from None

    @staticmethod
    def _merge(records: list[dict]) -> list[dict]:
        """Spend entries with their latest status and the history of status lines."""
        spends: dict[str, dict] = {}
        for rec in records:
            if rec["kind"] == "spend":
                entry = dict(rec)
                entry["history"] = [{"timestamp": rec["timestamp"], "status": rec["status"]}]
                spends[rec["id"]] = entry
            else:
                entry = spends[rec["id"]]
                entry["status"] = rec["status"]
                entry["history"].append({"timestamp": rec["timestamp"], "status": rec["status"]})
        return list(spends.values())

    def entries(self, data_fp: str) -> list[dict]:
        """Spends on the data with this fingerprint, oldest first, each with its latest status."""
        return [e for e in self._merge(self._read()) if e["data_fingerprint"] == data_fp]

    def spent(self, data_fp: str) -> float:
        """Total epsilon spent on the data (every spend counts, finished or not)."""
        return math.fsum(float(e["epsilon"]) for e in self.entries(data_fp))

    # -- checking ----------------------------------------------------------------------------
    @staticmethod
    def _check(entries: list[dict], new_epsilon: float, allow_additional_spend: bool) -> float:
        if isinstance(new_epsilon, bool) or not isinstance(new_epsilon, (int, float)) \
                or not math.isfinite(new_epsilon) or new_epsilon <= 0:
            raise LedgerError(f"new_epsilon must be a finite number > 0, got {new_epsilon!r}")
        before = math.fsum(float(e["epsilon"]) for e in entries)
        total = before + float(new_epsilon)
        if entries and not allow_additional_spend:
            lines = [f"  - epsilon {e['epsilon']:g} at {e['timestamp']} ({e['status']}): "
                     f"{e['description']}" for e in entries]
            raise LedgerRefusal(
                f"this data already has {len(entries)} recorded release(s) spending epsilon "
                f"{before:g} in total:\n" + "\n".join(lines) +
                f"\nAnother release of epsilon {float(new_epsilon):g} would bring the composed "
                f"total to {total:g} (sequential composition). Refused; pass "
                "--allow-additional-spend to accept that total.")
        return total

    def check_allowed(self, data_fp: str, new_epsilon: float, allow_additional_spend: bool) -> float:
        """Return the composed total epsilon after a new spend; LedgerRefusal if not allowed."""
        return self._check(self.entries(data_fp), new_epsilon, allow_additional_spend)

    # -- writing -----------------------------------------------------------------------------
    def _open_locked(self) -> int:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        created = not self.path.exists()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger for writing ({exc.strerror})") from None
        os.fchmod(fd, FILE_MODE)  # also tightens a ledger created with a looser mode
        fcntl.flock(fd, fcntl.LOCK_EX)
        if created:
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return fd

    def _locked_records(self, fd: int) -> list[dict]:
        chunks = []
        os.lseek(fd, 0, os.SEEK_SET)
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        try:
            return self._parse(b"".join(chunks).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise LedgerError(f"{self.path}: not UTF-8 text (byte {exc.start})") from None

    def _append(self, fd: int, rec: dict) -> None:
        _check_schema(rec, f"{self.path} (new line)")
        data = json.dumps(rec, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)

    @contextmanager
    def _locked(self) -> Iterator[tuple[int, list[dict]]]:
        """The open ledger under an exclusive lock, with its parsed records."""
        fd = self._open_locked()
        try:
            yield fd, self._locked_records(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def record(self, data_fp: str, spec_fp: str, epsilon: float, description: str,
               status: str = "started") -> str:
        """Append a spend (durably, before the first iteration) and return its entry id."""
        entry_id, _ = self._record(data_fp, spec_fp, epsilon, description, status, check=None)
        return entry_id

    def reserve(self, data_fp: str, spec_fp: str, epsilon: float, description: str,
                allow_additional_spend: bool) -> tuple[str, float]:
        """check_allowed + record under one lock (no race between two releases); (id, total)."""
        return self._record(data_fp, spec_fp, epsilon, description, "started",
                            check=allow_additional_spend)

    def _record(self, data_fp: str, spec_fp: str, epsilon: float, description: str, status: str,
                check: bool | None) -> tuple[str, float]:
        for name, value in (("data_fp", data_fp), ("spec_fp", spec_fp)):
            if not isinstance(value, str) or not value:
                raise LedgerError(f"{name} must be a non-empty string")
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) \
                or not math.isfinite(epsilon) or epsilon <= 0:
            raise LedgerError(f"epsilon must be a finite number > 0, got {epsilon!r}")
        if not isinstance(status, str) or not status:
            raise LedgerError("status must be a non-empty string")
        with self._locked() as (fd, records):
            mine = [e for e in self._merge(records) if e["data_fingerprint"] == data_fp]
            total = math.fsum(float(e["epsilon"]) for e in mine) + float(epsilon)
            if check is not None:
                total = self._check(mine, epsilon, check)
            entry_id = secrets.token_hex(16)
            self._append(fd, {"kind": "spend", "id": entry_id, "timestamp": _now(),
                              "data_fingerprint": data_fp, "spec_fingerprint": spec_fp,
                              "epsilon": float(epsilon), "description": str(description),
                              "status": status})
        return entry_id, total

    def mark_finished(self, entry_id: str, status: str = "finished") -> None:
        """Append a status line for a spend (history is never rewritten; the spend still counts)."""
        if not isinstance(status, str) or not status:
            raise LedgerError("status must be a non-empty string")
        with self._locked() as (fd, records):
            if not any(r["kind"] == "spend" and r["id"] == entry_id for r in records):
                raise LedgerError(f"{self.path}: no spend with id {entry_id!r}")
            self._append(fd, {"kind": "status", "id": entry_id, "timestamp": _now(), "status": status})
