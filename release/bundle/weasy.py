"""WeasyPrint, behind three functions: the only module of the release that imports it.

* :func:`pdf_bytes` renders an HTML page to a tagged PDF (PDF/UA-1), offline (inline CSS and
  SVG, ``data:`` URLs only, local fonts), deterministically: the same HTML, fonts and libraries
  give the same bytes, with HarfBuzz-Subset or without it (see :data:`FONT_DATE_EPOCH`);
* :func:`renderer_status` is the cheap pre-flight check of the renderer and the fonts (no page is
  rendered): WeasyPrint imports (so Pango, HarfBuzz, fontconfig and GObject load), Pango's font
  map builds on fontconfig's configuration, fontconfig lists at least one font; and whether fonts
  are subset by HarfBuzz-Subset (about 5 ms per datasheet) or, where that library is missing, by
  fontTools (about 0.3 s of CPU for the births example's datasheet);
* :func:`warm_up` lays out a small page with the datasheet's stylesheet, so that a later render
  in the same process finds the fonts loaded.

Used in the release's process or in its background renderer (:mod:`.pdf_worker`), which renders
the public datasheet while the release does other work.
"""
from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
from dataclasses import dataclass
from typing import Iterator

__all__ = ["PDF_OPTIONS", "RendererStatus", "pdf_bytes", "renderer_status", "warm_up", "url_fetcher",
           "document", "FONT_HINT", "SUBSET_HINT", "FONT_DATE_EPOCH", "fixed_font_dates"]

# Tagged PDF (PDF/UA-1: structure tree, /MarkInfo, document language and title from the HTML).
PDF_OPTIONS = {"pdf_variant": "pdf/ua-1", "pdf_tags": True}
FONT_HINT = "install fonts, e.g. the Debian package fonts-dejavu-core"
SUBSET_HINT = ("WeasyPrint subsets the datasheet's fonts with fontTools here, which adds some tenths of a "
               "second: install HarfBuzz-Subset 4.1 or newer (Debian/Ubuntu: apt-get install "
               "libharfbuzz-subset0; Fedora: harfbuzz; macOS: brew install harfbuzz) to make it milliseconds")

# Without HarfBuzz-Subset, WeasyPrint subsets each embedded font with fontTools, which stamps the
# subset's ``head.modified`` with the time of the render - so every render made different bytes -
# unless SOURCE_DATE_EPOCH is set (https://reproducible-builds.org/specs/source-date-epoch/).
# A render sets it to this fixed value (1970-01-01T00:00:00Z, whatever the caller's environment
# says), so the PDF depends on its HTML, the fonts and the libraries only. HarfBuzz-Subset keeps
# the font's own dates. Nothing else in the PDF varies: WeasyPrint writes /CreationDate and
# /ModDate only from ``dcterms.created``/``dcterms.modified`` meta elements, and PDF/UA-1 has no
# random document ID.
FONT_DATE_EPOCH = "0"
_SDE = "SOURCE_DATE_EPOCH"
_env_lock = threading.Lock()


@contextlib.contextmanager
def fixed_font_dates() -> Iterator[None]:
    """Within this block SOURCE_DATE_EPOCH is :data:`FONT_DATE_EPOCH`; the caller's value (or its
    absence) is restored on the way out. One block at a time in a process."""
    with _env_lock:
        before = os.environ.get(_SDE)
        os.environ[_SDE] = FONT_DATE_EPOCH
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(_SDE, None)
            else:
                os.environ[_SDE] = before


@dataclass(frozen=True)
class RendererStatus:
    """The pre-flight's answer: ``problem`` (None when the datasheet can be rendered here) and
    whether fonts are subset by HarfBuzz-Subset (``fast_subsetting``; False: fontTools, slower)."""

    problem: str | None
    fast_subsetting: bool = True

    def to_json(self) -> dict:
        return {"problem": self.problem, "fast_subsetting": self.fast_subsetting}

    @classmethod
    def from_json(cls, doc: dict) -> "RendererStatus":
        problem = doc.get("problem")
        return cls(problem=str(problem) if problem else None, fast_subsetting=bool(doc.get("fast_subsetting", True)))


def url_fetcher():
    """A URL fetcher that serves ``data:`` URLs only: the datasheet renders offline."""
    from weasyprint import urls

    if hasattr(urls, "URLFetcher"):  # WeasyPrint >= 66
        return urls.URLFetcher(allowed_protocols=["data"], fail_on_errors=False)

    def fetch(url: str):  # older WeasyPrint: a function returning a dict
        if url.startswith("data:"):
            return urls.default_url_fetcher(url)
        raise ValueError(f"refusing to fetch {url!r}: the datasheet renders offline")
    return fetch


def document(html: str):
    """The WeasyPrint document of ``html`` (not rendered yet); its warnings silenced."""
    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    return weasyprint.HTML(string=html, base_url=None, url_fetcher=url_fetcher())


def pdf_bytes(html: str, target=None, *, pause_gc: bool = False):
    """Render ``html`` to a tagged PDF: its bytes, or written to ``target`` (a path or file); the
    same bytes for the same HTML (:func:`fixed_font_dates`). ``pause_gc``: no garbage collection while rendering (a render makes some hundred thousand
    objects and no lasting cycles; collecting during it costs about a tenth of its time) - for a
    process that renders and nothing else (the background renderer)."""
    paused = pause_gc and gc.isenabled()
    if paused:
        gc.disable()
    try:
        with fixed_font_dates():
            return document(html).write_pdf(target, **PDF_OPTIONS)
    finally:
        if paused:
            gc.enable()


def _fast_subsetting(ffi_module) -> bool:
    subset = getattr(ffi_module, "harfbuzz_subset", None)
    harfbuzz = getattr(ffi_module, "harfbuzz", None)
    try:
        return bool(subset) and bool(harfbuzz.hb_version_atleast(4, 1, 0))
    except Exception:  # noqa: BLE001 - an older WeasyPrint without these bindings: fontTools
        return False


def _font_count(ffi_module) -> int | None:
    """How many fonts fontconfig lists (None when this WeasyPrint does not expose it)."""
    fc, ffi = getattr(ffi_module, "fontconfig", None), getattr(ffi_module, "ffi", None)
    if fc is None or ffi is None or not hasattr(fc, "FcConfigGetFonts"):
        return None
    config = ffi.gc(fc.FcInitLoadConfigAndFonts(), fc.FcConfigDestroy)
    fonts = fc.FcConfigGetFonts(config, fc.FcSetSystem)
    return 0 if fonts == ffi.NULL else int(fonts.nfont)


def renderer_status() -> RendererStatus:
    """The cheap pre-flight check (see the module's docstring); a failure is a problem, never an
    exception."""
    try:
        import weasyprint  # noqa: F401 - loads Pango, HarfBuzz, fontconfig, GObject
        from weasyprint.text import ffi as ffi_module
        from weasyprint.text.fonts import FontConfiguration

        FontConfiguration()          # Pango's font map on fontconfig's configuration
        fonts = _font_count(ffi_module)
    except Exception as exc:  # noqa: BLE001 - any failure means the datasheet could not be rendered
        return RendererStatus(problem=f"the datasheet cannot be rendered here: {type(exc).__name__}: {exc}")
    if fonts == 0:
        return RendererStatus(problem=f"the datasheet cannot be rendered here: fontconfig finds no font ({FONT_HINT})")
    return RendererStatus(problem=None, fast_subsetting=_fast_subsetting(ffi_module))


def warm_up(css: str) -> None:
    """Render a small page with the stylesheet ``css`` (the fonts of its families loaded, its rules
    parsed once); errors are ignored (the real render reports them)."""
    page = (f"<html lang=\"en\"><head><title>warm-up</title><style>{css}</style></head><body><h1>dpbundle</h1>"
            "<h2>renderer <em>warm-up</em></h2><p>Births 0123456789 <b>bold</b> <i>italic</i> "
            "<code>code 0.25</code> <span class=\"num\">1,234</span></p><table><tr><th>a</th><td>1</td></tr>"
            "</table></body></html>")
    try:
        pdf_bytes(page)
    except Exception:  # noqa: BLE001
        pass
