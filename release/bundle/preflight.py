"""Checks made before any privacy budget is spent: everything a release needs that does not
depend on the selection's result. A problem found here exits with code 2 and leaves the ledger
untouched; the same problem found after the selection would waste the whole budget.

* the output: ``--out`` absent, or (with ``--force``) a complete dpbundle bundle (its manifest
  lists exactly its files and their hashes verify); its folder writable with room for the
  bundle (estimated from n and the longest labels, plus the datasheet);
* the private locations: the transcript's and the ledger's folders writable;
* the datasheet: templates present, WeasyPrint loading with its libraries and fontconfig listing a
  font (no page is rendered: the check is cheap), and an installed font for every character of the
  spec's texts and labels (else empty boxes);
* leftovers of killed runs: hidden ``.OUT.tmp-PID-*`` folders of dead processes are removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from pathlib import Path

__all__ = ["replaceable_bundle_problem", "writable_dir_problem", "room_problem",
           "renderer_problem", "renderer_note", "clean_stale", "estimate_bundle_bytes", "MAX_MANIFEST_BYTES"]

MAX_MANIFEST_BYTES = 16 * 1024 * 1024
DATASHEET_BYTES = 8 * 1024 * 1024      # README.pdf + README.html + JSON files, generously
_last_status = None                    # the renderer's status found by the last renderer_problem()
_BUNDLE_FORMAT = "dpbundle-bundle/1"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def replaceable_bundle_problem(out: Path) -> str | None:
    """None when ``out`` may be replaced by ``--force``: a directory (not a symlink) holding a
    complete dpbundle bundle, i.e. a manifest of this format that lists exactly the directory's
    files (plus manifest.json and manifest.sig), each with the listed size and SHA-256. Else
    why not. (An empty directory may be replaced too.)"""
    if out.is_symlink() or not out.is_dir():
        return f"{out}: exists and is not a directory"
    entries = list(out.iterdir())
    if not entries:
        return None
    manifest = out / "manifest.json"
    if not manifest.is_file() or manifest.is_symlink():
        return f"{out}: not a dpbundle bundle (no manifest.json)"
    try:
        if manifest.stat().st_size > MAX_MANIFEST_BYTES:
            return f"{out}: manifest.json is too large to be a dpbundle manifest"
        doc = json.loads(manifest.read_bytes())
        listed = {f["path"]: (f["sha256"], f["size"]) for f in doc["files"]}
        fmt = doc.get("format")
    except (OSError, ValueError, KeyError, TypeError):
        return f"{out}: manifest.json is not a dpbundle manifest"
    if fmt != _BUNDLE_FORMAT:
        return f"{out}: manifest.json is not a dpbundle manifest (format {fmt!r})"
    present = set()
    for e in entries:
        if e.is_symlink() or not e.is_file():
            return f"{out}: holds {e.name!r}, which is not a file of a bundle"
        present.add(e.name)
    expected = set(listed) | {"manifest.json", "manifest.sig"}
    extra = sorted(present - expected)
    if extra:
        return f"{out}: holds files its manifest does not list ({', '.join(extra[:5])})"
    missing = sorted(expected - present)
    if missing:
        return f"{out}: lacks files of a bundle ({', '.join(missing[:5])})"
    for name, (sha, size) in listed.items():
        path = out / name
        if path.stat().st_size != size or _sha256(path) != sha:
            return f"{out}: {name} does not match its manifest entry"
    return None


def writable_dir_problem(directory: Path, what: str) -> str | None:
    """None when a file can be created (and removed) in ``directory``; else why not."""
    if not directory.is_dir():
        return f"{directory}: no such directory (for {what})"
    probe = directory / f".dpbundle-probe-{secrets.token_hex(6)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        return f"{directory}: cannot write {what} there ({exc.strerror or exc})"
    return None


def estimate_bundle_bytes(n: int, longest_labels: list[int]) -> int:
    """Upper estimate of a bundle's size: data.csv (n rows of the longest labels, commas and a
    newline), a zip copy of it if asked, and the datasheet and JSON files."""
    row = sum(longest_labels) + len(longest_labels)
    return n * row + DATASHEET_BYTES


def room_problem(directory: Path, need: int, what: str) -> str | None:
    """None when the filesystem of ``directory`` has ``need`` bytes free."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError as exc:
        return f"{directory}: cannot check the free space ({exc.strerror or exc})"
    if free < need:
        return (f"{directory}: {free / 1e6:,.1f} MB free, but {what} needs about "
                f"{need / 1e6:,.1f} MB")
    return None


def renderer_problem(spec: dict | None = None) -> str | None:
    """None when the datasheet templates load, WeasyPrint loads with its libraries and fontconfig
    lists a font (:func:`datasheet.check_renderer`: a cheap check, no page is rendered; the
    background renderer's answer during a release), and (given the release ``spec``) some
    installed font has every character of the spec's texts and labels and of the datasheet
    template."""
    global _last_status
    _last_status = None
    try:
        from dpbundle.release.bundle import datasheet

        datasheet.check_templates()
        status = datasheet.check_renderer()
    except Exception as exc:  # noqa: BLE001 - any failure means the bundle could not be written
        return f"the datasheet cannot be rendered here: {type(exc).__name__}: {exc}"
    _last_status = status
    if status.problem:
        return status.problem
    if spec is not None:
        from dpbundle.release.bundle.glyphs import glyph_problem, spec_texts

        template = [("the datasheet template", datasheet._read_resource("datasheet.html.j2")),
                    ("the datasheet's comparison table", repr(datasheet.PUBLISHED_EPSILONS))]
        problem = glyph_problem(spec_texts(spec) + template)
        if problem:
            return f"the datasheet cannot be rendered here: {problem}"
    return None


def renderer_note() -> str | None:
    """After :func:`renderer_problem`: a note when the datasheet's fonts will be subset slowly
    (fontTools, no HarfBuzz-Subset here), else None."""
    from dpbundle.release.bundle.weasy import SUBSET_HINT

    status = _last_status
    return SUBSET_HINT if status is not None and status.problem is None and not status.fast_subsetting else None


_TMP = re.compile(r"^\.(?P<name>.+)\.tmp-(?P<pid>\d+)-")


def _alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process there: keep the folder
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(out: Path) -> list[str]:
    """Remove the hidden temporary folders/files of ``out`` left by killed runs (their PID is in
    the name and no longer alive). Returns what was removed. A moved-aside old bundle
    (``.OUT.old-*``) is never removed here: it may be the only copy."""
    removed = []
    parent = out.parent
    if not parent.is_dir():
        return removed
    for entry in parent.iterdir():
        m = _TMP.match(entry.name)
        if not m or m.group("name") not in (out.name, f"{out.name}.zip"):
            continue
        if _alive(int(m.group("pid"))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry.name)
    return removed
