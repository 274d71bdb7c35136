"""Private, append-only budget ledger (kept by the data steward, never part of a bundle).

Every private release appends a *spend* line before it touches the data (status "started") and a
*status* line when it ends. A spend counts whether or not it finished, so a crash leaves the
ledger truthful. A spend carries two keys of the data it was made on:

* ``table_fingerprint``: the canonical fingerprint of the prepared table
  (:func:`dpbundle.release.data.fingerprint.table_fingerprint`): the same records give the same value
  whatever the file's column order, row order, quoting, whitespace or compression;
* ``data_fingerprint``: the SHA-256 of the data file's bytes (the only key of spends written
  before the table fingerprint existed; a release with another spec on the same file, which
  reads other columns or drops other rows, still matches by it).

The spends on "the same data" are those that share a key with the new release, closed
transitively (a spend sharing a key with such a spend counts too). The spec fingerprint (SHA-256
of the canonical spec JSON) is recorded beside them. Budget sums and comparisons are exact
(:mod:`dpbundle.mechanisms.exact`: each epsilon is the decimal it was written as). Neither
fingerprint is ever printed: they are derived from the private data.

File format: UTF-8 JSON lines, one object per line, never rewritten:
    {"kind": "spend", "id", "timestamp", "data_fingerprint", ["table_fingerprint",]
     "spec_fingerprint", "epsilon", "description", "status": "started"}
    {"kind": "status", "id", "timestamp", "status"}
The ledger is a regular file named by an absolute path (a relative one is made absolute when the
:class:`Ledger` is made, so that a kept result records where the spend really is); a symbolic
link, a FIFO or a device is refused, never opened for writing, and dpbundle changes the mode only
of the ledger file it created (or of a valid ledger of this user's). A failed append (disk full,
read-only file system) is cut back to the previous end of the file and raises
:class:`LedgerError`.

Reads and appends are made under an exclusive lock (release/common/filelock.py: the `filelock`
package's FileLock on the companion file ``<ledger>.lock``, mode 0600), appends then flushed and
fsync'ed; the file is 0600. Waiting for the lock is bounded (``lock_timeout``, default
:data:`~dpbundle.release.common.filelock.DEFAULT_TIMEOUT` = 60 s): a lock held longer raises
:class:`LedgerLocked` (a :class:`LedgerError`) instead of hanging.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import stat
from contextlib import contextmanager
from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator


from dpbundle.mechanisms import exact

from dpbundle.release.common import filelock
from dpbundle.release.common.safe_io import fsync_dir
from dpbundle.release.data.fingerprint import table_fingerprint
from dpbundle.release.data.fingerprint import file_sha256
from dpbundle.release.spec.load import canonical_json
# the statuses the command line names live in a module of their own (cheap to import for help)
from dpbundle.release.scheme.ledger_status import NEVER_RELEASED, UNFINISHED

__all__ = ["Ledger", "LedgerError", "LedgerLocked", "LedgerRefusal", "data_fingerprint",
           "spec_fingerprint", "fingerprint", "table_fingerprint"]

FILE_MODE = 0o600
SCHEMA = "ledger-entry"  # schemas/ledger-entry.schema.json: the structure of one line


class LedgerError(ValueError):
    """The ledger file is unreadable or corrupt, or a call is invalid."""


class LedgerLocked(LedgerError):
    """The ledger's lock was not obtained within the timeout (another process holds it)."""


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
    from dpbundle.release.common.jsonschemas import iter_errors

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


def _positive(value: Any, name: str) -> Fraction:
    """The declared value of an epsilon argument (exact); LedgerError unless finite and > 0."""
    try:
        if isinstance(value, bool) or isinstance(value, str):
            raise TypeError
        q = exact.dec(value)
    except (TypeError, ValueError, ArithmeticError):
        raise LedgerError(f"{name} must be a finite number > 0, got {value!r}") from None
    if q <= 0:
        raise LedgerError(f"{name} must be a finite number > 0, got {value!r}")
    return q


def _recorded(q: Fraction) -> float:
    """The float written for an epsilon: it reads back (as a decimal) as ``q``, or, when ``q`` has
    more digits than a float holds, as the nearest decimal above it (never under-records)."""
    f = float(q)
    while exact.dec(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def _same_data(spends: list[dict], data_fp: str, table_fp: str | None) -> list[dict]:
    """The spends that share a key (file SHA-256 or table fingerprint) with the data, closed
    transitively through the keys of the spends found (oldest first)."""
    files, tables = {data_fp}, ({table_fp} if table_fp else set())
    mine = [False] * len(spends)
    grown = True
    while grown:
        grown = False
        for i, e in enumerate(spends):
            if not mine[i] and (e["data_fingerprint"] in files or e.get("table_fingerprint") in tables):
                mine[i] = grown = True
                files.add(e["data_fingerprint"])
                if e.get("table_fingerprint"):
                    tables.add(e["table_fingerprint"])
    return [e for e, m in zip(spends, mine) if m]


class Ledger:
    """An append-only JSON-lines ledger of epsilon spent per private dataset."""

    def __init__(self, path: Path, lock_timeout: float = filelock.DEFAULT_TIMEOUT) -> None:
        self.path = Path(path).absolute()
        lock_timeout = float(lock_timeout)
        if not lock_timeout > 0:
            raise LedgerError(f"lock_timeout must be > 0 seconds, got {lock_timeout!r}")
        self.lock_timeout = lock_timeout

    @contextmanager
    def _lock(self) -> Iterator[None]:
        """The ledger's exclusive lock (its directory must exist); LedgerLocked on timeout,
        LedgerError when the lock file cannot be made (read-only file system, ...)."""
        from contextlib import ExitStack

        stack = ExitStack()
        try:
            stack.enter_context(filelock.locked(self.path, self.lock_timeout))
        except filelock.LockTimeout as exc:
            raise LedgerLocked(f"the budget ledger {self.path} is locked: {exc}") from None
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot lock the ledger ({exc.strerror or exc})") from None
        with stack:
            yield

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

    def path_problem(self) -> str | None:
        """None when the ledger path may be used: absent (a new ledger is created there), or a
        regular file (not a symbolic link, FIFO, device or directory) of at most
        :data:`~dpbundle.release.common.safe_io.LEDGER_BYTES` bytes; else why not."""
        from dpbundle.release.common.safe_io import LEDGER_BYTES, kind_of

        lock = filelock.lock_path(self.path)
        if lock.is_symlink():
            return f"{lock}: the ledger's lock file is a symbolic link; remove it"
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            return f"{self.path}: cannot check the ledger ({exc.strerror or exc})"
        if stat.S_ISLNK(st.st_mode):
            return (f"{self.path}: the ledger path is a symbolic link; give the ledger file itself "
                    "(dpbundle never writes a ledger through a link)")
        if not stat.S_ISREG(st.st_mode):
            return f"{self.path}: the ledger must be a regular file, and this is {kind_of(st.st_mode)}"
        if st.st_size > LEDGER_BYTES:
            return f"{self.path}: the ledger is larger than the limit of {LEDGER_BYTES:,} bytes"
        return None

    def _open_existing(self, flags: int) -> int | None:
        """An open descriptor of the existing ledger (None when there is none), after checking it
        is a regular file, not a link (O_NOFOLLOW, O_NONBLOCK: a FIFO cannot hang the open)."""
        problem = self.path_problem()
        if problem:
            raise LedgerError(problem)
        try:
            fd = os.open(self.path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                         | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot open the ledger ({exc.strerror or exc})") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise LedgerError(f"{self.path}: the ledger must be a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return fd

    def _read_fd(self, fd: int) -> bytes:
        from dpbundle.release.common.safe_io import LEDGER_BYTES

        chunks, total = [], 0
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            while block := os.read(fd, 1 << 20):
                chunks.append(block)
                total += len(block)
                if total > LEDGER_BYTES:
                    raise LedgerError(f"{self.path}: the ledger is larger than the limit of {LEDGER_BYTES:,} bytes")
        except OSError as exc:
            raise LedgerError(f"{self.path}: cannot read the ledger ({exc.strerror or exc})") from None
        return b"".join(chunks)

    def _read(self) -> list[dict]:
        if not self.path.exists() and not self.path.is_symlink():
            return []  # no ledger yet (and no lock file is created for it)
        problem = self.path_problem()
        if problem:
            raise LedgerError(problem)
        with self._lock():
            fd = self._open_existing(os.O_RDONLY)
            if fd is None:
                return []
            try:
                data = self._read_fd(fd)
            finally:
                os.close(fd)
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

    def entries(self, data_fp: str, table_fp: str | None = None) -> list[dict]:
        """Spends on the same data, oldest first, each with its latest status: the data file's
        SHA-256 ``data_fp`` and the prepared table's fingerprint ``table_fp`` (optional) are its
        keys; a spend sharing either (directly or through another such spend) is on the same data."""
        return _same_data(self._merge(self._read()), data_fp, table_fp)

    def spent(self, data_fp: str, table_fp: str | None = None) -> Fraction:
        """Total epsilon spent on the data, exact (every spend counts, finished or not)."""
        return exact.total(e["epsilon"] for e in self.entries(data_fp, table_fp))

    # -- checking ----------------------------------------------------------------------------
    @staticmethod
    def _check(entries: list[dict], new_epsilon: Any, allow_additional_spend: bool,
               cap: Any = None) -> Fraction:
        new = _positive(new_epsilon, "new_epsilon")
        limit = None if cap is None else _positive(cap, "cap")
        before = exact.total(e["epsilon"] for e in entries)
        total = before + new
        lines = [f"  - epsilon {exact.show(exact.dec(e['epsilon']))} at {e['timestamp']} "
                 f"({e['status']}): {e['description']}" for e in entries]
        recorded = (f"this data already has {len(entries)} recorded release(s) spending epsilon "
                    f"{exact.show(before)} in total:\n" + "\n".join(lines) + "\n") if entries else ""
        if limit is not None and total > limit:
            raise LedgerRefusal(
                f"{recorded}A release of epsilon {exact.show(new)} would bring the composed total "
                f"spent on this data to {exact.show(total)}, above its cap {exact.show(limit)} "
                "(sequential composition). Refused; --allow-additional-spend does not lift the cap.")
        if entries and not allow_additional_spend:
            raise LedgerRefusal(
                f"{recorded}Another release of epsilon {exact.show(new)} would bring the composed "
                f"total to {exact.show(total)} (sequential composition). Refused; pass "
                "--allow-additional-spend to accept that total.")
        return total

    def check_allowed(self, data_fp: str, new_epsilon: Any, allow_additional_spend: bool,
                      table_fp: str | None = None, cap: Any = None) -> Fraction:
        """Return the exact composed total epsilon after a new spend on the data; LedgerRefusal
        if the data has spends and ``allow_additional_spend`` is false, or if the total would
        exceed ``cap`` (a lifetime budget of the data, compared exactly; None: no cap)."""
        return self._check(self.entries(data_fp, table_fp), new_epsilon, allow_additional_spend, cap)

    # -- writing -----------------------------------------------------------------------------
    def _open_locked(self, create: bool = True) -> tuple[int, bool]:
        """Open the ledger for appending, creating it (O_EXCL, mode 0600) when ``create`` and it
        does not exist; the caller holds the lock. (descriptor, created)."""
        rw = os.O_RDWR | os.O_APPEND
        fd = self._open_existing(rw)
        created = False
        if fd is None:
            if not create:
                raise LedgerError(f"{self.path}: no ledger there (it is never created to record the "
                                  "outcome of a spend)")
            try:
                fd = os.open(self.path, rw | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                             | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
            except FileExistsError:
                raise LedgerError(f"{self.path}: the ledger appeared while it was being created; "
                                  "try again") from None
            except OSError as exc:
                raise LedgerError(f"{self.path}: cannot create the ledger ({exc.strerror or exc})") from None
            created = True
            if hasattr(os, "fchmod"):
                os.fchmod(fd, FILE_MODE)  # whatever the umask: the file dpbundle just created
            fsync_dir(self.path.parent)   # make the new directory entry durable
        return fd, created

    def _tighten(self, fd: int, records: list[dict]) -> None:
        """Narrow a looser mode to 0600, only on a valid ledger (at least one spend line) that
        belongs to this user: never on some other file a path was pointed at."""
        if not hasattr(os, "fchmod") or not records:
            return
        st = os.fstat(fd)
        if stat.S_IMODE(st.st_mode) != FILE_MODE and (not hasattr(os, "geteuid") or st.st_uid == os.geteuid()):
            try:
                os.fchmod(fd, FILE_MODE)
            except OSError:
                pass

    def _locked_records(self, fd: int) -> list[dict]:
        try:
            return self._parse(self._read_fd(fd).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise LedgerError(f"{self.path}: not UTF-8 text (byte {exc.start})") from None

    def _append(self, fd: int, rec: dict) -> None:
        """Append one line durably; on a failure (disk full, read-only file system, I/O error)
        cut the file back to where it ended, so that no partial line is left, and raise
        LedgerError with the system's reason."""
        _check_schema(rec, f"{self.path} (new line)")
        try:
            data = json.dumps(rec, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8") + b"\n"
        except UnicodeEncodeError:
            raise LedgerError(f"{self.path}: a ledger line must be UTF-8 text (an undecodable "
                              "character in a description or status)") from None
        end = os.lseek(fd, 0, os.SEEK_END)
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException as exc:   # an interrupt too: never leave half a line
            try:
                os.ftruncate(fd, end)
                os.fsync(fd)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise LedgerError(f"{self.path}: cannot write to the ledger ({exc.strerror or exc})") from None
            raise

    @contextmanager
    def _locked(self, create: bool = True) -> Iterator[tuple[int, list[dict]]]:
        """The open ledger under the exclusive lock, with its parsed records."""
        problem = self.path_problem()
        if problem:
            raise LedgerError(problem)
        if create:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise LedgerError(f"{self.path}: cannot create the ledger's directory ({exc.strerror})") from None
        elif not self.path.is_file():
            raise LedgerError(f"{self.path}: no ledger there")
        with self._lock():
            fd, _created = self._open_locked(create)
            try:
                records = self._locked_records(fd)
                self._tighten(fd, records)
                yield fd, records
            finally:
                os.close(fd)

    def record(self, data_fp: str, spec_fp: str, epsilon: Any, description: str,
               status: str = "started", table_fp: str | None = None) -> str:
        """Append a spend (durably, before the first iteration) and return its entry id."""
        entry_id, _ = self._record(data_fp, spec_fp, epsilon, description, status, check=None,
                                   table_fp=table_fp)
        return entry_id

    def reserve(self, data_fp: str, spec_fp: str, epsilon: Any, description: str,
                allow_additional_spend: bool, table_fp: str | None = None,
                cap: Any = None) -> tuple[str, Fraction]:
        """check_allowed + record under one lock (no race between two releases); (id, exact total)."""
        return self._record(data_fp, spec_fp, epsilon, description, "started",
                            check=allow_additional_spend, table_fp=table_fp, cap=cap)

    def _record(self, data_fp: str, spec_fp: str, epsilon: Any, description: str, status: str,
                check: bool | None, table_fp: str | None = None,
                cap: Any = None) -> tuple[str, Fraction]:
        for name, value in (("data_fp", data_fp), ("spec_fp", spec_fp), ("table_fp", table_fp)):
            if (value is not None or name != "table_fp") and (not isinstance(value, str) or not value):
                raise LedgerError(f"{name} must be a non-empty string")
        eps = _positive(epsilon, "epsilon")
        if not isinstance(status, str) or not status:
            raise LedgerError("status must be a non-empty string")
        with self._locked() as (fd, records):
            mine = _same_data(self._merge(records), data_fp, table_fp)
            total = exact.total(e["epsilon"] for e in mine) + eps
            if check is not None:
                total = self._check(mine, eps, check, cap)
            entry_id = secrets.token_hex(16)
            keys = {"data_fingerprint": data_fp}
            if table_fp is not None:
                keys["table_fingerprint"] = table_fp
            self._append(fd, {"kind": "spend", "id": entry_id, "timestamp": _now(), **keys,
                              "spec_fingerprint": spec_fp, "epsilon": _recorded(eps),
                              "description": str(description), "status": status})
        return entry_id, total

    def mark_finished(self, entry_id: str, status: str = "finished") -> None:
        """Append a status line for a spend (history is never rewritten; the spend still counts)."""
        if not isinstance(status, str) or not status:
            raise LedgerError("status must be a non-empty string")
        if not self.path.exists() and not self.path.is_symlink():
            raise LedgerError(f"{self.path}: no spend with id {entry_id!r}: there is no ledger at this "
                              "path (it is never created to record an outcome)")
        with self._locked(create=False) as (fd, records):
            if not any(r["kind"] == "spend" and r["id"] == entry_id for r in records):
                raise LedgerError(f"{self.path}: no spend with id {entry_id!r}")
            self._append(fd, {"kind": "status", "id": entry_id, "timestamp": _now(), "status": status})

    # -- runs that never finished ------------------------------------------------------------
    def all_entries(self) -> list[dict]:
        """Every spend with its latest status, oldest first."""
        return self._merge(self._read())

    def resolve_id(self, prefix: str) -> str:
        """The full id of the spend whose id starts with ``prefix`` (at least 6 characters)."""
        if not isinstance(prefix, str) or len(prefix) < 6:
            raise LedgerError("give at least the first 6 characters of the entry id")
        hits = [e["id"] for e in self.all_entries() if e["id"].startswith(prefix)]
        if len(hits) != 1:
            raise LedgerError(f"{self.path}: {'no' if not hits else 'more than one'} spend with an "
                              f"id starting {prefix!r}")
        return hits[0]


def make_private_dirs(directory: Path) -> None:
    """Create ``directory`` and every missing parent with mode 0700 (whatever the umask), so that
    the default ledger's folder exists before the first release on a fresh machine; folders that
    already exist are left as they are. LedgerError naming the folder when one cannot be made."""
    missing: list[Path] = []
    at = Path(directory).absolute()
    while not at.exists() and not at.is_symlink() and at != at.parent:
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700)
            os.chmod(folder, 0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            raise LedgerError(f"{folder}: cannot create the ledger's folder ({exc.strerror or exc})") from None


def unfinished_note(entries: list[dict]) -> str | None:
    """A console note on spends of these data whose run never finished (killed: status still
    'started'); they count as spent. None if there are none."""
    stale = [e for e in entries if e.get("status") == UNFINISHED]
    if not stale:
        return None
    lines = [f"  {e['id'][:12]}  {e['timestamp']}  epsilon {exact.show(exact.dec(e['epsilon']))}: "
             f"{e['description']}" for e in stale]
    return (f"{len(stale)} earlier run(s) on these data never finished (killed before they could "
            "record an outcome); their budget counts as spent:\n" + "\n".join(lines) +
            f"\n  mark one once you know what happened: dpbundle ledger mark ID "
            f"(status '{NEVER_RELEASED}' by default)")


def _ledger_path(path: Path | None) -> Path:
    return Path(path) if path is not None else Ledger.default_path()


