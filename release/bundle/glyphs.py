"""Can the fonts of this machine show every character of a text? (Before rendering a PDF.)

WeasyPrint (through Pango and fontconfig) draws a character with the first font of the CSS font
stack that has it, else with any installed font that has it; when no installed font has it, the
PDF shows an empty box ("tofu") and no error is raised. A title in Hebrew or a label in Chinese
on a machine with Latin fonts only would so become a row of boxes in a signed datasheet. This
module finds such characters first, so that ``release`` can refuse before any budget is spent
(``preflight.renderer_problem``) and the datasheet renderer refuses instead of writing boxes.

Coverage comes from fontconfig, which Pango uses: one ``fc-list`` call lists every font's
character set as hexadecimal ranges. Without ``fc-list`` (the Debian package ``fontconfig``),
the font files under the usual font folders are read with fontTools (a WeasyPrint dependency).
The union of all ranges is computed once per process; a character's answer is cached.
"""
from __future__ import annotations

import bisect
import functools
import os
import shutil
import subprocess
import unicodedata
from pathlib import Path
from typing import Any, Iterable

__all__ = ["MissingGlyphs", "covered", "missing_characters", "glyph_problem", "spec_texts",
           "character_name", "INSTALL_HINT"]

INSTALL_HINT = ("install fonts that cover them, e.g. on Debian or Ubuntu: apt-get install fonts-noto-core "
                "(Hebrew, Arabic, Cyrillic, Greek, Indic and many more scripts) fonts-noto-cjk (Chinese, "
                "Japanese, Korean); then `fc-list ':charset=XXXX'` (XXXX the hexadecimal code point) "
                "lists the fonts that have a character")
# Characters that are not drawn (controls, format marks such as the right-to-left mark, separators).
_INVISIBLE = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_FONT_DIRS = ("/usr/share/fonts", "/usr/local/share/fonts", "~/.local/share/fonts", "~/.fonts",
              "/Library/Fonts", "/System/Library/Fonts", "C:/Windows/Fonts")
_FONT_SUFFIXES = (".ttf", ".otf", ".ttc", ".otc", ".woff", ".woff2")


class MissingGlyphs(ValueError):
    """Raised when no installed font has some characters of a text that must be rendered."""

    def __init__(self, missing: list[str], where: dict[str, str] | None = None) -> None:
        self.missing = missing
        self.where = where or {}
        super().__init__(_message(missing, self.where))


def character_name(ch: str) -> str:
    kind = {"Co": "private-use character", "Cn": "unassigned code point"}.get(unicodedata.category(ch))
    return unicodedata.name(ch, kind or "unnamed character")


def _message(missing: list[str], where: dict[str, str]) -> str:
    shown = []
    for ch in missing[:12]:
        place = f", in {where[ch]}" if ch in where else ""
        shown.append(f"U+{ord(ch):04X} {character_name(ch)} ({ch!r}{place})")
    more = f" and {len(missing) - 12} more" if len(missing) > 12 else ""
    return (f"no installed font has {len(missing)} character(s) of the datasheet's text, which would be "
            f"printed as empty boxes: {'; '.join(shown)}{more}; {INSTALL_HINT}")


def _parse_ranges(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split():
        lo, _, hi = part.partition("-")
        try:
            a = int(lo, 16)
            b = int(hi, 16) if hi else a
        except ValueError:
            continue
        out.append((a, b))
    return out


def _fc_list_ranges() -> list[tuple[int, int]] | None:
    exe = shutil.which("fc-list")
    if not exe:
        return None
    try:
        proc = subprocess.run([exe, "--format", "%{charset}\\n"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    ranges: set[tuple[int, int]] = set()
    for line in set(proc.stdout.splitlines()):   # many fonts share a character set (the styles of a family)
        ranges.update(_parse_ranges(line))
    return list(ranges) or None


def _font_files() -> list[Path]:
    files = []
    for d in _FONT_DIRS:
        root = Path(os.path.expanduser(d))
        if root.is_dir():
            files += [p for p in root.rglob("*") if p.suffix.lower() in _FONT_SUFFIXES and p.is_file()]
    return files


def _fonttools_cmaps() -> Iterable[set[int]]:
    """The code points of each installed font file (read lazily, one font at a time)."""
    from fontTools.ttLib import TTCollection, TTFont

    for path in _font_files():
        try:
            if path.suffix.lower() in (".ttc", ".otc"):
                fonts = TTCollection(str(path), lazy=True).fonts
            else:
                fonts = [TTFont(str(path), lazy=True)]
            for font in fonts:
                yield set((font["cmap"].getBestCmap() or {}).keys())
        except Exception:  # noqa: BLE001 - an unreadable font file covers nothing
            continue


@functools.lru_cache(maxsize=1)
def _coverage() -> tuple[list[int], list[int]] | None:
    """Sorted, merged (starts, ends) of every code point some installed font has, from
    fontconfig; None without ``fc-list`` (then fonts are read one by one, see :func:`_resolve`)."""
    ranges = _fc_list_ranges()
    if ranges is None:
        return None
    ranges.sort()
    starts: list[int] = []
    ends: list[int] = []
    for a, b in ranges:
        if starts and a <= ends[-1] + 1:
            ends[-1] = max(ends[-1], b)
        else:
            starts.append(a)
            ends.append(b)
    return starts, ends


_KNOWN: dict[str, bool] = {}  # character -> some installed font has it (cached per process)


def _needs_glyph(ch: str) -> bool:
    return not (ch.isspace() or unicodedata.category(ch) in _INVISIBLE)


def _resolve(chars: set[str]) -> None:
    """Fill _KNOWN for ``chars``: from fontconfig's ranges, else from the font files, stopping
    as soon as every character has been found in some font."""
    todo = {ch for ch in chars if ch not in _KNOWN}
    for ch in list(todo):
        if not _needs_glyph(ch):
            _KNOWN[ch] = True
            todo.discard(ch)
    if not todo:
        return
    cov = _coverage()
    if cov is not None:
        starts, ends = cov
        for ch in todo:
            i = bisect.bisect_right(starts, ord(ch)) - 1
            _KNOWN[ch] = i >= 0 and ord(ch) <= ends[i]
        return
    left = {ord(ch) for ch in todo}
    for cps in _fonttools_cmaps():
        left -= cps
        if not left:
            break
    for ch in todo:
        _KNOWN[ch] = ord(ch) not in left


def covered(ch: str) -> bool:
    """True when ``ch`` needs no glyph (a control or format mark, whitespace) or some installed font has it."""
    _resolve({ch})
    return _KNOWN[ch]


def missing_characters(texts: Iterable[str]) -> list[str]:
    """The distinct characters of ``texts`` that no installed font has, by code point."""
    texts = list(texts)
    chars: set[str] = set()
    for text in texts:
        chars |= set(text)
    _resolve(chars)
    return sorted((ch for ch in chars if not _KNOWN[ch]), key=ord)


def _strings(obj: Any, path: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(obj, str):
        yield path or "text", obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{path}.{k}" if path else str(k)
            yield key, str(k)
            yield from _strings(v, key)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _strings(v, f"{path}[{i}]")


def spec_texts(spec: dict) -> list[tuple[str, str]]:
    """Every text of a spec (titles, descriptions, column names, category labels, ...), with where it is."""
    return list(_strings(spec))


def glyph_problem(texts: Iterable[tuple[str, str]] | Iterable[str]) -> str | None:
    """None when every character of ``texts`` (strings, or (where, string) pairs) can be drawn; else
    a message naming each missing character (code point and Unicode name, and where it occurs)
    and how to install fonts."""
    pairs = [t if isinstance(t, tuple) else ("", t) for t in texts]
    missing = missing_characters(text for _, text in pairs)
    if not missing:
        return None
    where: dict[str, str] = {}
    for place, text in pairs:
        for ch in missing:
            if place and ch not in where and ch in text:
                where[ch] = place
    return str(MissingGlyphs(missing, where))


def check_text(text: str, what: str = "the datasheet") -> None:
    """Raise :class:`MissingGlyphs` when some character of ``text`` has no installed font."""
    missing = missing_characters([text])
    if missing:
        raise MissingGlyphs(missing, {ch: what for ch in missing})
