"""A selected result whose bundle could not be written, kept so that it can be written again
without a new selection (a new selection would spend the budget again).

The file is PRIVATE (it holds the private transcript and the ledger entry): written with mode
0600 into the private directory (``bundle.private_dir()``), never beside the bundle. Format
``dpbundle-pending/2``: a NumPy ``.npz`` without pickles holding

* ``codes``: the released integer codes (n x d, little-endian int64);
* ``meta``: UTF-8 JSON bytes (format tag, spec, configuration, column codings, metrics, budget,
  the transcript records, its absolute path, the absolute ledger path and the spend's entry id,
  the optional public files, further arguments of ``write_bundle``);
* ``mac``: HMAC-SHA256 of both (:func:`_mac`) with the key ``pending.key`` of the private
  directory (32 random bytes as hex, mode 0600, created on first use).

``dpbundle release --resume FILE --out DIR --key KEY`` writes the bundle from it after checking
the HMAC (a kept result edited by anyone without the key is refused, however plausible the
edit) and re-checking the result itself (:func:`recheck`: the codes against the column codings
and the configuration's face-privacy minimum, the metrics against their thresholds and against
the DP values the transcript recorded for the selected attempt).

Room: :func:`reserve` allocates the room a kept result needs in the private directory *before*
the spend (``posix_fallocate``); :func:`save_pending` writes into that reserved file, reads it
back and compares it with the bytes held in memory, and only then renames it to its final name.
A failure never leaves a partial or empty pending file.
"""
from __future__ import annotations

import base64
import datetime as _dt
import errno
import hashlib
import hmac
import io
import json
import math
import os
import re
import secrets
import stat
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbundle.mechanisms.coding import Coded, ColumnCoding
from dpbundle.release.bundle.data_csv import released_n, released_rows
from dpbundle.release.bundle.preflight import _alive
from dpbundle.release.common.safe_io import fsync_dir

if TYPE_CHECKING:
    from dpbundle.release.bundle.write import BundleContent

__all__ = ["FORMAT", "PendingError", "save_pending", "load_pending", "recheck", "reserve",
           "Reservation", "pending_key", "KEY_NAME", "clean_stale_reservations"]

FORMAT = "dpbundle-pending/2"
OLD_FORMAT = "dpbundle-pending/1"
KEY_NAME = "pending.key"
MAC_TAG = b"dpbundle-pending-mac/1"
MAX_PENDING_BYTES = 1 << 36          # 64 GiB on disk
MAX_MEMBER_BYTES = 1 << 36           # uncompressed size of one member of the .npz
_RESERVE = re.compile(r"^\.(?P<name>.+)\.pending-room-(?P<pid>\d+)-[0-9a-f]+$")


class PendingError(ValueError):
    """The pending-result file is unusable, not authentic, or cannot be written."""


# ---------------------------------------------------------------------------------- the key

def pending_key(directory: Path, *, create: bool = True) -> bytes:
    """The HMAC key of kept results: ``directory/pending.key`` (64 hex characters, mode 0600,
    owned by this user), created on first use when ``create``. PendingError if it is missing
    (and not to be created), not a regular file, readable by others, or malformed."""
    path = Path(directory) / KEY_NAME
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if not create:
                raise PendingError(f"{path}: the key that authenticates kept results is missing (was the "
                                   "result kept with another DPBUNDLE_PRIVATE_DIR?)") from None
            _create_key(path)
            continue
        except OSError as exc:
            raise PendingError(f"{path}: cannot read the key of kept results ({exc.strerror or exc}; "
                               "it must be a regular file, not a symbolic link)") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PendingError(f"{path}: the key of kept results is not a regular file")
            if hasattr(os, "geteuid") and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
                raise PendingError(f"{path}: the key of kept results must belong to you and be "
                                   f"readable by nobody else (mode {stat.S_IMODE(st.st_mode):o})")
            text = os.read(fd, 200).decode("ascii", "replace").strip()
        finally:
            os.close(fd)
        if re.fullmatch(r"[0-9a-f]{64}", text):
            return bytes.fromhex(text)
        if text == "":      # another process is creating it right now
            continue
        raise PendingError(f"{path}: not a key of kept results (64 hex characters expected)")
    raise PendingError(f"{path}: cannot create the key of kept results")


def _create_key(path: Path) -> None:
    """Publish a fresh key atomically: a private temporary file, then a hard link (never
    replacing a key another process made first)."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.fchmod(fd, 0o600) if hasattr(os, "fchmod") else None
        os.write(fd, (secrets.token_hex(32) + "\n").encode("ascii"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def _mac(key: bytes, codes: np.ndarray, meta: bytes) -> bytes:
    """HMAC-SHA256 over a tag, the codes' shape, their little-endian int64 bytes and the meta
    JSON bytes (each part length-prefixed)."""
    h = hmac.new(key, MAC_TAG, hashlib.sha256)
    shape = json.dumps(list(codes.shape)).encode("ascii")
    body = memoryview(np.ascontiguousarray(codes, dtype="<i8").reshape(-1).view(np.uint8))
    for part in (shape, body, meta):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


# ---------------------------------------------------------------------------------- codings

def _coding_doc(c: ColumnCoding) -> dict:
    return {"name": c.name, "labels": list(c.labels), "values": np.asarray(c.values).tolist(),
            "ordered": bool(c.ordered), "lower": np.asarray(c.lower).tolist(),
            "upper": np.asarray(c.upper).tolist(),
            "categories": list(c.categories) if c.categories is not None else None,
            "integer": c.integer, "special": list(c.special) if c.special is not None else None}


def _coding(doc: dict) -> ColumnCoding:
    cats = doc.get("categories")
    return ColumnCoding(doc["name"], tuple(doc["labels"]), np.asarray(doc["values"], float),
                        bool(doc["ordered"]), np.asarray(doc["lower"], float),
                        np.asarray(doc["upper"], float), tuple(cats) if cats is not None else None,
                        doc.get("integer"), tuple(doc["special"]) if doc.get("special") else None)


# ------------------------------------------------------------------------------ the room

class Reservation:
    """Room for a kept result, allocated in the private directory before the spend: a hidden
    file ``.OUT.pending-room-PID-HEX`` (0600) of ``size`` bytes. :func:`save_pending` writes the
    result into it; :meth:`release` removes what is left."""

    def __init__(self, path: Path, size: int) -> None:
        self.path, self.size = Path(path), int(size)

    def grow(self, size: int) -> bool:
        """Make the reservation at least ``size`` bytes; False when there is no room."""
        if size <= self.size:
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        try:
            _allocate(fd, size)
        except OSError:
            return False
        finally:
            os.close(fd)
        self.size = int(size)
        return True

    def release(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass


def _allocate(fd: int, size: int) -> None:
    """Allocate ``size`` bytes of disk for ``fd`` (posix_fallocate, else zeros written)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except AttributeError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
    have = os.fstat(fd).st_size
    block = b"\0" * (1 << 20)
    os.lseek(fd, have, os.SEEK_SET)
    while have < size:
        have += os.write(fd, block[:min(len(block), size - have)])
    os.fsync(fd)


def reserve(directory: Path, out: Path, size: int) -> Reservation:
    """Allocate ``size`` bytes for a kept result in ``directory`` (before the spend); OSError
    (e.g. ENOSPC) when there is no room. Reservations of dead processes are removed first."""
    directory = Path(directory)
    try:
        pending_key(directory)        # made now too: a full directory could not take it later
    except PendingError as exc:
        raise OSError(errno.EACCES, str(exc)) from None
    clean_stale_reservations(directory)
    path = directory / f".{Path(out).name}.pending-room-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        _allocate(fd, int(size))
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return Reservation(path, size)


def clean_stale_reservations(directory: Path) -> list[str]:
    """Remove reservations left by processes that are gone (SIGKILL); returns their names."""
    removed = []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = _RESERVE.match(entry.name)
        if not m or _alive(int(m.group("pid"))):
            continue
        try:
            entry.unlink()
            removed.append(entry.name)
        except OSError:
            pass
    return removed


def pending_bound(codes: np.ndarray, transcript_jsonl: bytes, spec: dict,
                  public_files: dict[str, bytes] | None) -> int:
    """An upper bound of a kept result's size on disk (deflate never grows data by more than
    a few bytes per 16 KiB block)."""
    cells = released_n(codes) * len(codes.columns) if isinstance(codes, Coded) else int(np.asarray(codes).size)
    raw = cells * 8 + len(transcript_jsonl) * 2 + 2 * len(json.dumps(spec, default=str))
    raw += sum(len(v) * 2 for v in (public_files or {}).values())
    return raw + raw // 100 + (4 << 20)


# --------------------------------------------------------------------------- save and load

def save_pending(directory: Path, out: Path, content: "BundleContent | None" = None, *,
                 transcript_path: Path, ledger_path: Path, ledger_entry: str,
                 ledger_throwaway: bool = False, reservation: Reservation | None = None,
                 **fields: Any) -> Path:
    """Write the pending result (0600, authenticated, never overwriting) and return its path.

    ``content``: the bundle's content (:class:`dpbundle.release.bundle.write.BundleContent`;
    its ``ledger`` and ``extra`` are kept as further arguments of ``write_bundle``). The form
    before 0.3 gives the content's fields as keywords instead (``transcript_jsonl`` for
    ``transcript_records_jsonl``; ``extra_args``: further arguments of ``write_bundle``).
    The bytes are built in memory, written (into ``reservation`` when given), read back and
    compared before the file gets its final name; PendingError (or OSError) when that fails,
    and then no file is left behind but the reservation."""
    directory = Path(directory)
    content, extra_args = _kept_content(content, fields)
    key = pending_key(directory)
    meta = _meta(out, content, transcript_path, (ledger_path, ledger_entry, ledger_throwaway), extra_args)
    meta_bytes = json.dumps(meta, allow_nan=True, ensure_ascii=False).encode("utf-8")
    codes = np.ascontiguousarray(released_rows(content.codes), dtype="<i8")
    mac = _mac(key, codes, meta_bytes)
    buf = io.BytesIO()
    np.savez_compressed(buf, codes=codes, meta=np.frombuffer(meta_bytes, dtype=np.uint8),
                        mac=np.frombuffer(mac, dtype=np.uint8))
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    final = directory / f"{Path(out).name}.{stamp}-{secrets.token_hex(3)}.pending.npz"
    _write_verified(directory, final, buf.getvalue(), reservation)
    fsync_dir(directory)
    return final


def _kept_content(content: "BundleContent | None", fields: dict[str, Any]) -> tuple["BundleContent", dict]:
    """(the content, the further write_bundle arguments to keep) of save_pending's arguments."""
    from dpbundle.release.bundle.write import content_from

    fields = dict(fields)
    extra_args = fields.pop("extra_args", None)
    if "transcript_jsonl" in fields:
        fields["transcript_records_jsonl"] = fields.pop("transcript_jsonl")
    if content is None:
        return content_from(None, fields), dict(extra_args or {})
    content = content_from(content, fields)
    if extra_args is None:
        extra_args = {"ledger": content.ledger} | ({"extra": content.extra} if content.extra else {})
    return content, dict(extra_args)


def _meta(out: Path, content: "BundleContent", transcript_path: Path, ledger: tuple[Path, str, bool],
          extra_args: dict) -> dict:
    """The ``meta`` member: everything but the codes, as plain JSON types."""
    from dpbundle.release.bundle.write import _jsonable

    ledger_path, ledger_entry, ledger_throwaway = ledger
    return {"format": FORMAT, "out": str(Path(out).absolute()), "spec": _jsonable(content.spec, "spec"),
            "configuration": content.configuration, "configuration_id": content.configuration_id,
            "columns": [_coding_doc(c) for c in content.columns],
            "metrics": _jsonable(content.metrics, "metrics"), "budget": _jsonable(content.budget, "budget"),
            "transcript_jsonl": bytes(content.transcript_records_jsonl).decode("utf-8"),
            "transcript_path": str(Path(transcript_path).absolute()),
            "ledger_path": str(Path(ledger_path).absolute()),
            "ledger_entry": ledger_entry, "ledger_throwaway": bool(ledger_throwaway),
            "public_files": {k: base64.b64encode(bytes(v)).decode("ascii")
                             for k, v in (content.public_files or {}).items()},
            "extra_args": _jsonable(extra_args or {}, "extra_args")}


def _write_verified(directory: Path, final: Path, data: bytes, reservation: Reservation | None) -> None:
    """Write ``data`` (into the reservation, else a new hidden file), read it back, compare, and
    rename it to ``final``; nothing is left behind on failure but the reservation."""
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if reservation is not None:
        target = reservation.path
        fd = os.open(target, os.O_RDWR | nofollow)
    else:
        target = directory / f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL | nofollow, 0o600)
    try:
        try:
            back = _write_and_read_back(fd, data)
        finally:
            os.close(fd)
        if back != data:
            raise PendingError(f"{target}: the kept result read back differs from what was written")
        if final.exists() or final.is_symlink():
            raise PendingError(f"{final}: exists")
        os.rename(target, final)
    except BaseException:
        if reservation is None:
            target.unlink(missing_ok=True)
        raise


def _write_and_read_back(fd: int, data: bytes) -> bytes:
    """Write ``data`` at the start of ``fd`` (mode 0600, truncated to it, synced); what reads back."""
    if hasattr(os, "fchmod"):
        os.fchmod(fd, 0o600)
    view, offset = memoryview(data), 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:offset + (1 << 24)], offset)
    os.ftruncate(fd, len(data))
    os.fsync(fd)
    back, offset = [], 0
    while offset < len(data):
        block = os.pread(fd, min(1 << 24, len(data) - offset), offset)
        if not block:
            break
        back.append(block)
        offset += len(block)
    return b"".join(back)


def _member_sizes(path: Path) -> dict[str, int]:
    """The members of the .npz and their uncompressed sizes (bounded before np.load reads)."""
    try:
        with zipfile.ZipFile(path) as zf:
            return {i.filename: i.file_size for i in zf.infolist()}
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PendingError(f"{path}: not a pending dpbundle result ({exc})") from None


def load_pending(path: Path, key_directory: Path | None = None) -> dict[str, Any]:
    """The pending result as write_bundle's arguments (+ out, transcript, ledger), after its
    HMAC verified with the key of ``key_directory`` (default: the private directory). Never
    the key beside the file: a forged file would bring its own."""
    path = Path(path)
    codes, meta_bytes, mac = _read_members(path)
    if key_directory is None:
        from dpbundle.release.bundle.write import private_dir

        key_directory = private_dir()
    key = pending_key(key_directory, create=False)
    if not hmac.compare_digest(mac, _mac(key, codes, meta_bytes)):
        raise PendingError(f"{path}: the kept result is not authentic (its HMAC does not verify with "
                           f"the key {Path(key_directory) / KEY_NAME}): it was changed after it was "
                           "kept, or kept by another installation; nothing is signed")
    meta = _parse_meta(path, meta_bytes)
    meta["codes"] = codes
    return meta


def _read_members(path: Path) -> tuple[np.ndarray, bytes, bytes]:
    """(codes, meta bytes, mac) of a kept result: a regular file of bounded size, an .npz of
    exactly these members, each of bounded size, with n x d little-endian int64 codes."""
    from dpbundle.release.common.safe_io import InputFileError, require_regular_file

    if not path.exists() and not path.is_symlink():
        raise PendingError(f"{path}: no such file (--resume)")
    try:
        require_regular_file(path, "kept result (--resume)", MAX_PENDING_BYTES)
    except InputFileError as exc:
        raise PendingError(str(exc)) from None
    members = _member_sizes(path)
    if set(members) == {"codes.npy", "meta.npy"}:
        raise PendingError(f"{path}: a kept result of an older dpbundle ({OLD_FORMAT}) carries no "
                           "authentication and cannot be checked; it is not written. Its spend stays "
                           "recorded in the ledger")
    if set(members) != {"codes.npy", "meta.npy", "mac.npy"}:
        raise PendingError(f"{path}: not a pending dpbundle result (members {sorted(members)})")
    if any(size > MAX_MEMBER_BYTES for size in members.values()):
        raise PendingError(f"{path}: a member of the kept result is larger than {MAX_MEMBER_BYTES:,} bytes")
    try:
        with np.load(path, allow_pickle=False) as z:
            codes = np.asarray(z["codes"])
            meta_bytes = np.asarray(z["meta"]).tobytes()
            mac = np.asarray(z["mac"]).tobytes()
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        raise PendingError(f"{path}: not a pending dpbundle result ({exc})") from None
    if codes.dtype != np.dtype("<i8") or codes.ndim != 2:
        raise PendingError(f"{path}: not a pending dpbundle result (codes {codes.dtype}, {codes.ndim}-d)")
    return codes, meta_bytes, mac


def _parse_meta(path: Path, meta_bytes: bytes) -> dict[str, Any]:
    """The authenticated meta member, parsed: its format, column codings, public files, absolute
    transcript and ledger paths, ledger entry and further arguments checked."""
    try:
        meta = json.loads(meta_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PendingError(f"{path}: not a pending dpbundle result ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise PendingError(f"{path}: not a pending dpbundle result (format "
                           f"{meta.get('format') if isinstance(meta, dict) else None!r})")
    try:
        meta["columns"] = [_coding(c) for c in meta["columns"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PendingError(f"{path}: unusable column codings ({exc})") from None
    try:
        meta["public_files"] = {k: base64.b64decode(v, validate=True)
                                for k, v in (meta.get("public_files") or {}).items()}
    except (TypeError, ValueError, AttributeError) as exc:
        raise PendingError(f"{path}: unusable public files ({exc})") from None
    for field in ("transcript_path", "ledger_path"):
        value = meta.get(field)
        if not isinstance(value, str) or not os.path.isabs(value):
            raise PendingError(f"{path}: {field} is not an absolute path")
    if not isinstance(meta.get("ledger_entry"), str) or not isinstance(meta.get("extra_args", {}), dict):
        raise PendingError(f"{path}: not a pending dpbundle result (ledger entry)")
    return meta


# ------------------------------------------------------------------------------- re-check

def _records(jsonl: str) -> list[dict]:
    out = []
    for line in jsonl.splitlines():
        if line.strip():
            rec = json.loads(line)
            if not isinstance(rec, dict):
                raise ValueError("a transcript record is not an object")
            out.append(rec)
    return out


def recheck(p: dict) -> list[str]:
    """What is wrong with a loaded kept result (empty: nothing found), before it is signed:

    * the codes: n x d with d the column codings, every code a label of its column, every
      record occurring at least the configuration's ``projection.min_count`` times;
    * the budget's released n is the number of rows;
    * every criterion passed: ``dp_value < threshold``;
    * the transcript ends with the selected attempt, whose configuration is this one, which
      passed, and whose recorded DP value of each scalar Laplace criterion is the metric's
      ``dp_value`` (and its sensitivity the metric's)."""
    codes, columns = p["codes"], p["columns"]
    n = int(codes.shape[0])
    if n < 1 or codes.shape[1] != len(columns):
        return [f"the codes have shape {codes.shape} for {len(columns)} columns"]
    problems = _codes_problems(codes, columns, p["configuration"])
    records_doc = (p.get("budget") or {}).get("records")
    if isinstance(records_doc, dict) and records_doc.get("released_n") not in (None, n):
        problems.append(f"budget.json's released n ({records_doc.get('released_n')}) is not the "
                        f"number of rows ({n})")
    metrics = p.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        return problems + ["no metrics"]
    for m in metrics:
        try:
            if not (m["passed"] is True and float(m["dp_value"]) < float(m["threshold"])):
                problems.append(f"criterion {m['id']}: does not pass (dp_value {m['dp_value']!r}, "
                                f"threshold {m['threshold']!r})")
        except (KeyError, TypeError, ValueError):
            problems.append("a criterion without id, dp_value, threshold or passed")
    return problems + _transcript_problems(p, metrics)


def _codes_problems(codes: np.ndarray, columns: list, configuration: Any) -> list[str]:
    """Every code a label of its column; every record at least ``projection.min_count`` times."""
    problems = []
    for j, col in enumerate(columns):
        lo, hi = int(codes[:, j].min()), int(codes[:, j].max())
        if lo < 0 or hi >= len(col.labels):
            problems.append(f"column {col.name}: codes {lo}..{hi} outside its {len(col.labels)} labels")
    try:
        min_count = int((configuration.get("projection") or {}).get("min_count") or 1)
    except (AttributeError, TypeError, ValueError):
        min_count = 1
    if min_count > 1 and not problems:
        _rows, counts = np.unique(codes, axis=0, return_counts=True)
        if counts.min() < min_count:
            problems.append(f"some records occur fewer than the configuration's min_count "
                            f"({min_count}) times: not the face-privacy projection's output")
    return problems


def _transcript_problems(p: dict, metrics: list) -> list[str]:
    """The transcript ends with the selected attempt: this configuration, passed, and the DP
    values (and sensitivities) the metrics state."""
    try:
        records = _records(p["transcript_jsonl"])
    except (ValueError, TypeError) as exc:
        return [f"the transcript is unreadable ({exc})"]
    if not records or records[-1].get("mark") != "selected":
        return ["the transcript does not end with the selection of an attempt"]
    index = records[-1].get("index")
    starts = [i for i, r in enumerate(records) if r.get("kind") == "mark" and r.get("mark") == "iteration"
              and r.get("index") == index]
    ends = [i for i, r in enumerate(records) if r.get("kind") == "mark" and r.get("mark") == "iteration end"
            and r.get("index") == index]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        return ["the transcript does not hold the selected attempt"]
    start, end = starts[0], ends[0]
    problems = []
    if records[start].get("config") != p.get("configuration") or \
            records[start].get("config_id") != p.get("configuration_id"):
        problems.append("the selected attempt's configuration in the transcript is not the kept one")
    if records[end].get("passed") is not True:
        problems.append("the transcript's selected attempt did not pass")
    in_attempt = [r for r in records[start:end] if isinstance(r.get("purpose"), str) and "noisy" in r]
    for m in metrics:
        problems.extend(_criterion_problems(m, in_attempt))
    return problems


def _criterion_problems(m: dict, in_attempt: list[dict]) -> list[str]:
    """A criterion's DP value in the selected attempt: present; for a single scalar Laplace
    release, equal to the metric's dp_value, with the metric's sensitivity."""
    rid = m.get("id")
    exact = f"criterion {rid}"
    rs = [r for r in in_attempt if r["purpose"] == exact or r["purpose"].startswith(exact + " ")]
    if not rs:
        return [f"criterion {rid}: no DP value of it in the selected attempt's transcript"]
    problems = []
    last = rs[-1]
    noisy = last.get("noisy")
    if (len(rs) == 1 and last["purpose"] == exact and last.get("kind") == "laplace"
            and isinstance(noisy, (int, float)) and not isinstance(noisy, bool)
            and isinstance(m.get("dp_value"), (int, float))):
        if not (math.isfinite(float(noisy)) and float(noisy) == float(m["dp_value"])):
            problems.append(f"criterion {rid}: its dp_value is not the DP value the transcript recorded")
        if isinstance(last.get("sensitivity"), (int, float)) and \
                float(last["sensitivity"]) != float(m.get("sensitivity", math.nan)):
            problems.append(f"criterion {rid}: its sensitivity is not the transcript's")
    return problems
