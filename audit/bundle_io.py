"""Safe, read-only access to an untrusted bundle (a directory or a zip file).

Nothing here trusts the bundle: every name is checked before it is used (no absolute paths,
no ``..``, no links, no device files), every read has a size limit, and a zip is inspected
(entry count, declared sizes, compression ratios, entry types) before anything is extracted
into a private temporary directory under a byte budget, with the bytes actually written
counted (declared sizes are not trusted either).

:class:`BundleError` means the input is unusable (the CLI exits with code 2); problems that an
integrity check should report (a link inside a directory bundle, say) are collected in
:attr:`Bundle.problems` instead.
"""
from __future__ import annotations

import hashlib
import dataclasses
import io
import json
import os
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .bounds import MAX_JSON_DEPTH, clip, json_depth_over

__all__ = [
    "BundleError",
    "BundleFileError",
    "Bundle",
    "open_bundle",
    "safe_name",
    "LIMITS",
]

MB = 1024 * 1024
GB = 1024 * MB


@dataclass(frozen=True)
class Limits:
    data_csv: int = 2 * GB          # data.csv
    json: int = 10 * MB             # any *.json
    csv: int = 100 * MB             # any other *.csv (metrics.csv)
    other: int = 200 * MB           # README.pdf, README.html, anything else
    signature: int = 1024           # manifest.sig
    total: int = 3 * GB             # the whole bundle (extracted)
    max_files: int = 1000           # number of entries / files
    max_depth: int = 8              # directory depth
    max_ratio: float = 200.0        # zip: uncompressed / compressed for one entry
    ratio_floor: int = 1 * MB       # zip: the ratio is checked for entries larger than this

    def for_name(self, name: str) -> int:
        base = name.rsplit("/", 1)[-1]
        if name == "data.csv":
            return self.data_csv
        if name == "manifest.sig":
            return self.signature
        if base.endswith(".json"):
            return self.json
        if base.endswith(".csv"):
            return self.csv
        return self.other


LIMITS = Limits()

#: Bytes a data.csv row may take when the limits grow with the manifest's n (a bundle of hundreds
#: of millions of records: the default 2 GB would refuse a bundle that ``release`` signed).
ROW_BYTES = 1024


def scaled_limits(limits: Limits, n: object) -> Limits:
    """``limits`` with data.csv's limit raised to ``n`` rows of :data:`ROW_BYTES` (plus 1 MB for
    the header) when that is larger, and the total raised as much; unchanged for a missing or
    unusable ``n``. The limits stop a hostile bundle from taking the audit's disk or time without
    end: a bundle claiming more rows than it has fails the size check afterwards, and one that
    has them is read as a stream (memory of its distinct lines, not of its size)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return limits
    data = n * ROW_BYTES + MB
    if data <= limits.data_csv:
        return limits
    return dataclasses.replace(limits, data_csv=data, total=limits.total + (data - limits.data_csv))


def _declared_n(raw: bytes) -> object:
    """manifest.json's ``n`` (None when it does not parse)."""
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return doc.get("n") if isinstance(doc, dict) else None


class BundleError(Exception):
    """The bundle cannot be used at all (exit code 2)."""


class BundleFileError(Exception):
    """One file of the bundle cannot be read (missing, unsafe name, too large, malformed)."""


def safe_name(name: object) -> str:
    """Return ``name`` if it is a safe relative POSIX path inside the bundle, else raise.

    Rejected: non-strings, empty names, NUL or control characters, backslashes, absolute paths,
    drive letters, ``.``/``..`` components, empty components, over-long names.
    """
    if not isinstance(name, str):
        raise BundleFileError(f"file name {name!r} is not a string")
    if not name or len(name) > 255:
        raise BundleFileError(f"file name {name!r} is empty or too long")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise BundleFileError(f"file name {name!r} contains control characters")
    if "\\" in name:
        raise BundleFileError(f"file name {name!r} contains a backslash")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise BundleFileError(f"file name {name!r} is an absolute path")
    parts = name.split("/")
    for p in parts:
        if p in ("", ".", ".."):
            raise BundleFileError(f"file name {name!r} has an unsafe path component {p!r}")
    return name


@dataclass
class Bundle:
    """A bundle opened for reading.

    ``root`` is a directory (the bundle itself, or a private extraction of a zip);
    ``files`` maps each regular file's relative POSIX path to its size; ``problems`` lists
    entries that were not regular files (links, devices, ...) and were never read.
    """

    root: Path
    source: str
    kind: str                       # "directory" or "zip"
    files: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    limits: Limits = LIMITS
    # Progress of long reads: on_read(action, name, bytes done, bytes in all), action "hashing"
    # (digest) or "reading" (open_text). Sizes of public bundle files only.
    on_read: Callable[[str, str, int, int], None] | None = None
    _tmp: str | None = None
    _cache: dict = field(default_factory=dict)

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> "Bundle":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------
    def has(self, name: str) -> bool:
        return name in self.files

    def _open(self, name: str):
        safe_name(name)
        if name not in self.files:
            raise BundleFileError(f"{name}: not in the bundle")
        size = self.files[name]
        limit = self.limits.for_name(name)
        if size > limit:
            raise BundleFileError(f"{name}: {size} bytes, more than the limit of {limit} bytes")
        path = self.root.joinpath(*name.split("/"))
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags)
        except OSError as e:
            raise BundleFileError(f"{name}: cannot open ({e.strerror})") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise BundleFileError(f"{name}: not a regular file")
        return os.fdopen(fd, "rb"), limit

    def read_bytes(self, name: str, cache: bool = True) -> bytes:
        """All bytes of ``name`` (size-limited); kept for the next call when ``cache``."""
        key = ("bytes", name)
        if key in self._cache:
            return self._cache[key]
        f, limit = self._open(name)
        with f:
            # read in chunks: f.read(limit + 1) would allocate the whole limit (GBs) up front
            parts, size = [], 0
            while size <= limit:
                chunk = f.read(min(4 * MB, limit + 1 - size))
                if not chunk:
                    break
                parts.append(chunk)
                size += len(chunk)
            data = b"".join(parts)
        if len(data) > limit:
            raise BundleFileError(f"{name}: larger than the limit of {limit} bytes")
        if cache and len(data) <= 64 * MB:
            self._cache[key] = data
        return data

    def digest(self, name: str) -> tuple[str, int]:
        """(sha256 hex, size in bytes) of ``name``, streamed."""
        key = ("digest", name)
        if key in self._cache:
            return self._cache[key]
        f, limit = self._open(name)
        h = hashlib.sha256()
        size = 0
        with f:
            while True:
                chunk = f.read(4 * MB)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise BundleFileError(f"{name}: larger than the limit of {limit} bytes")
                h.update(chunk)
                if self.on_read is not None:
                    self.on_read("hashing", name, size, self.files[name])
        self._cache[key] = (h.hexdigest(), size)
        return self._cache[key]

    def read_json(self, name: str, cache: bool = True):
        """Parsed JSON of ``name``; BundleFileError with a clear message if it is malformed.
        ``cache=False``: parsed and not kept (a file no check reads again: a bundle may hold
        hundreds of 10 MB JSON files, and parsed JSON takes up to ~20 times its bytes)."""
        key = ("json", name)
        if key in self._cache:
            return self._cache[key]
        data = self.read_bytes(name, cache=cache)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise BundleFileError(f"{name}: not UTF-8 ({e.reason} at byte {e.start})") from None

        try:
            obj = json.loads(text, parse_constant=_no_constants, parse_float=_finite_float,
                             object_pairs_hook=_no_duplicate_keys)
        except RecursionError:
            raise BundleFileError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError as e:
            raise BundleFileError(f"{name}: malformed JSON ({clip(str(e), 300)})") from None
        if json_depth_over(obj, MAX_JSON_DEPTH):
            # every reader after this one may recurse (schemas, canonical JSON, comparisons)
            raise BundleFileError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if cache:
            self._cache[key] = obj
        return obj

    def open_text(self, name: str):
        """A text stream (UTF-8, strict, newline='') over ``name`` (size-limited by the walk)."""
        f, _ = self._open(name)
        if self.on_read is not None:
            report = self.on_read
            total = self.files[name]
            f = io.BufferedReader(_CountingReader(f.detach(), lambda done: report("reading", name, done, total)),
                                  buffer_size=1 * MB)
        return io.TextIOWrapper(f, encoding="utf-8", errors="strict", newline="")


def _no_constants(c: str):
    raise ValueError(f"non-standard JSON constant {c}")


def _finite_float(text: str) -> float:
    """A JSON number as a float; one too large for a float (``1e400``, which Python reads as
    infinity) is refused like NaN and Infinity."""
    x = float(text)
    if x in (float("inf"), float("-inf")):
        raise ValueError(f"the number {clip(text, 40)} is too large for a float (rule: finite numbers only)")
    return x


def _no_duplicate_keys(pairs: list) -> dict:
    """A JSON object; a key written twice is refused (closure rule, docs/audit.md): parsers
    disagree on which value counts (Python and most keep the last, others the first or fail), so
    a reader of the file could see another value than the audit checks."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"the key {clip(repr(k), 80)} appears twice in one object (rule: no duplicate "
                             "keys, each reader could see another value)")
        out[k] = v
    return out


class _CountingReader(io.RawIOBase):
    """A raw reader that reports the bytes read so far (at most every 4 MB) to ``report``."""

    STEP = 4 * MB

    def __init__(self, raw, report: Callable[[int], None]):
        super().__init__()
        self._raw, self._report = raw, report
        self._done = 0
        self._last = -1        # bytes at the last report

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self._raw.readinto(buf)
        self._done += n or 0
        if self._done - self._last >= self.STEP or (not n and self._done != self._last):
            self._report(self._done)            # every STEP bytes, and once at the end
            self._last = self._done
        return n

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


# -- opening ---------------------------------------------------------------------------


def open_bundle(path: str | os.PathLike, limits: Limits = LIMITS) -> Bundle:
    """Open a bundle directory or zip file; raise :class:`BundleError` if it is unusable."""
    p = Path(path)
    try:
        st = os.lstat(p)
    except OSError as e:
        raise BundleError(f"{path}: cannot access ({e.strerror})") from None
    if stat.S_ISLNK(st.st_mode):
        # A link given on the command line is the user's choice; resolve it once.
        p = p.resolve()
        try:
            st = os.stat(p)
        except OSError as e:
            raise BundleError(f"{path}: cannot access ({e.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        b = Bundle(root=p, source=str(path), kind="directory", limits=limits)
        total = _walk_directory(b)
        if b.files.get("manifest.json", limits.json + 1) <= limits.json:
            try:
                b.limits = scaled_limits(limits, _declared_n((p / "manifest.json").read_bytes()))
            except OSError:
                pass
        if total > b.limits.total:
            raise BundleError(
                f"{b.source}: {total} bytes in all, more than the limit of {b.limits.total} bytes"
            )
        return b
    if stat.S_ISREG(st.st_mode):
        if not zipfile.is_zipfile(p):
            raise BundleError(f"{path}: neither a directory nor a zip file")
        return _open_zip(p, str(path), limits)
    raise BundleError(f"{path}: neither a directory nor a zip file")


def _walk_directory(b: Bundle) -> int:
    """Every regular file of the directory into ``b.files``; the bytes they hold in all."""
    total = 0
    stack: list[tuple[Path, str, int]] = [(b.root, "", 0)]
    while stack:
        d, prefix, depth = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError as e:
            raise BundleError(f"{b.source}: cannot list {prefix or '.'} ({e.strerror})") from None
        for e in entries:
            rel = prefix + e.name
            if len(b.files) + len(b.problems) > b.limits.max_files:
                raise BundleError(f"{b.source}: more than {b.limits.max_files} entries")
            try:
                safe_name(rel)
            except BundleFileError as err:
                b.problems.append(f"unsafe entry name: {err}")
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError as err:
                b.problems.append(f"{rel}: cannot be inspected ({err.strerror})")
                continue
            if stat.S_ISLNK(st.st_mode):
                b.problems.append(f"{rel}: is a symbolic link (not followed)")
            elif stat.S_ISDIR(st.st_mode):
                if depth + 1 > b.limits.max_depth:
                    b.problems.append(f"{rel}: directory nested too deeply (not read)")
                else:
                    stack.append((Path(e.path), rel + "/", depth + 1))
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    b.problems.append(f"{rel}: has {st.st_nlink} hard links (not read)")
                    continue
                b.files[rel] = st.st_size
                total += st.st_size
            else:
                b.problems.append(f"{rel}: not a regular file (not read)")
    return total


def _open_zip(p: Path, source: str, limits: Limits) -> Bundle:
    """Open a zip bundle: check its entries' names, kinds and sizes, then extract them."""
    try:
        zf = zipfile.ZipFile(p)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise BundleError(f"{source}: unreadable zip file ({e})") from None
    with zf:
        names, declared_total = _zip_entries(zf, source, limits)
        strip = _zip_prefix(names)
        limits = scaled_limits(limits, _zip_manifest_n(zf, names, strip, limits))
        _check_zip_sizes(names, strip, declared_total, source, limits)
        return _extract_zip(zf, names, strip, source, limits)


def _zip_manifest_n(zf: zipfile.ZipFile, names: list[tuple[zipfile.ZipInfo, str]], strip: str,
                    limits: Limits) -> object:
    """The zip's manifest.json ``n``, read within the JSON limit (None otherwise)."""
    for info, raw in names:
        if raw[len(strip):] == "manifest.json" and info.file_size <= limits.json:
            try:
                with zf.open(info) as f:
                    return _declared_n(f.read(limits.json + 1)[:limits.json])
            except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, EOFError):
                return None
    return None


def _zip_entries(zf: zipfile.ZipFile, source: str,
                 limits: Limits) -> tuple[list[tuple[zipfile.ZipInfo, str]], int]:
    """The zip's file entries (safe names, regular and unencrypted) and their declared total size."""
    infos = zf.infolist()
    if len(infos) > limits.max_files:
        raise BundleError(f"{source}: {len(infos)} zip entries, more than {limits.max_files}")
    names: list[tuple[zipfile.ZipInfo, str]] = []
    declared_total = 0
    for info in infos:
        raw = info.filename
        mode = (info.external_attr >> 16) & 0xFFFF
        if raw.endswith("/") or info.is_dir():
            try:
                safe_name(raw.rstrip("/"))
            except BundleFileError as e:
                raise BundleError(f"{source}: zip entry escapes the bundle: {e}") from None
            continue
        try:
            safe_name(raw)
        except BundleFileError as e:
            raise BundleError(f"{source}: zip entry escapes the bundle: {e}") from None
        if mode and stat.S_IFMT(mode) not in (0, stat.S_IFREG):
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
            raise BundleError(f"{source}: zip entry {raw!r} is {kind}")
        if info.flag_bits & 0x1:
            raise BundleError(f"{source}: zip entry {raw!r} is encrypted")
        declared_total += info.file_size
        names.append((info, raw))
    return names, declared_total


def _zip_prefix(names: list[tuple[zipfile.ZipInfo, str]]) -> str:
    """The one prefix to strip of a zip of the bundle directory itself ("B/manifest.json", ...)."""
    plain = [n for _, n in names]
    strip = ""
    if plain and "manifest.json" not in plain:
        tops = {n.split("/", 1)[0] for n in plain}
        if len(tops) == 1 and all("/" in n for n in plain):
            strip = tops.pop() + "/"
    return strip


def _check_zip_sizes(names: list[tuple[zipfile.ZipInfo, str]], strip: str, declared_total: int,
                     source: str, limits: Limits) -> None:
    """No entry twice, each within its size limit and compression ratio, the total within the limit."""
    seen: set[str] = set()
    for info, raw in names:
        rel = raw[len(strip):]
        if rel in seen:
            raise BundleError(f"{source}: zip entry {rel!r} appears more than once")
        seen.add(rel)
        limit = limits.for_name(rel)
        if info.file_size > limit:
            raise BundleError(
                f"{source}: zip entry {rel!r} declares {info.file_size} bytes, "
                f"more than the limit of {limit} bytes"
            )
        if info.file_size > limits.ratio_floor:
            ratio = info.file_size / max(info.compress_size, 1)
            if ratio > limits.max_ratio:
                raise BundleError(
                    f"{source}: zip entry {rel!r} has compression ratio {ratio:.0f}, "
                    f"more than {limits.max_ratio:.0f} (zip bomb?)"
                )
    if declared_total > limits.total:
        raise BundleError(
            f"{source}: zip declares {declared_total} bytes in all, "
            f"more than the limit of {limits.total} bytes"
        )


def _extract_zip(zf: zipfile.ZipFile, names: list[tuple[zipfile.ZipInfo, str]], strip: str,
                 source: str, limits: Limits) -> Bundle:
    """Extract the checked entries to a fresh temporary directory, within the size budget."""
    tmp = tempfile.mkdtemp(prefix="dpbundle-audit-")
    b = Bundle(root=Path(tmp), source=source, kind="zip", limits=limits, _tmp=tmp)
    try:
        budget = limits.total
        for info, raw in names:
            rel = raw[len(strip):]
            limit = min(limits.for_name(rel), info.file_size)
            target = Path(tmp).joinpath(*rel.split("/"))
            # The target stays inside tmp: rel is a safe relative name.
            target.parent.mkdir(parents=True, exist_ok=True)
            written = _extract_entry(zf, info, target, source, rel, limit, budget)
            budget -= written
            b.files[rel] = written
    except BaseException:
        b.close()
        raise
    return b


def _extract_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, target: Path, source: str,
                   rel: str, limit: int, budget: int) -> int:
    """Copy one entry to ``target`` (a new file), stopping beyond ``limit`` or ``budget`` bytes."""
    written = 0
    try:
        with zf.open(info) as src, open(target, "xb") as dst:
            while True:
                chunk = src.read(1 * MB)
                if not chunk:
                    break
                written += len(chunk)
                if written > limit or written > budget:
                    raise BundleError(
                        f"{source}: zip entry {rel!r} expands beyond its declared "
                        f"size or the size budget (zip bomb?)"
                    )
                dst.write(chunk)
    except BundleError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError,
            NotImplementedError, RuntimeError) as e:
        raise BundleError(f"{source}: cannot extract zip entry {rel!r} ({e})") from None
    except Exception as e:  # zlib.error and friends
        raise BundleError(f"{source}: cannot extract zip entry {rel!r} ({e})") from None
    return written
