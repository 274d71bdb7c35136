"""The bundle's datasheet as a PDF, and the names the release uses for it.

The datasheet's content is built from the bundle's public files by
:mod:`dpbundle.templates.datasheet` (shared with the public audit, which renders README.html again
and requires the same bytes); this module renders that HTML to README.pdf (WeasyPrint, tagged
PDF/UA-1, offline: inline CSS and SVG, local fonts, no URL fetched; :mod:`.weasy`) after checking
that the installed fonts have every character.

Within :func:`background_renderer` (a release) the PDF is rendered by a child process started at
the beginning (:mod:`.pdf_worker`), which has imported WeasyPrint and checked the renderer while
the release was busy; :func:`prefetch_pdf` hands it README.html as soon as it exists, and
:func:`render_pdf` then only waits for the bytes. Without it, or if it fails, the PDF is rendered
in this process: the same bytes either way.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from dpbundle.templates.datasheet import build_context, render_html  # noqa: F401  (the release's names)
from dpbundle.templates.datasheet.context import (PUBLISHED_EPSILONS, epsilon_scale,  # noqa: F401
                                                  openssl_verify_command, query_family)
from dpbundle.templates.datasheet.numbers import NUMBER_FORMAT, NUMBER_FORMAT_DOC, format_number  # noqa: F401
from dpbundle.templates.datasheet.render import check_templates  # noqa: F401
from dpbundle.templates.datasheet.render import read_resource as _read_resource  # noqa: F401

from dpbundle.release.bundle import glyphs
from dpbundle.release.bundle.weasy import PDF_OPTIONS, RendererStatus, renderer_status
from dpbundle.release.bundle.weasy import document as _document  # noqa: F401  (the name before 0.3)
from dpbundle.release.bundle.weasy import url_fetcher as _url_fetcher  # noqa: F401

__all__ = ["NUMBER_FORMAT", "NUMBER_FORMAT_DOC", "format_number", "build_context", "render_html", "render_pdf",
           "render_pdf_bytes", "openssl_verify_command", "query_family", "PUBLISHED_EPSILONS", "PDF_OPTIONS",
           "epsilon_scale", "check_templates", "check_renderer", "background_renderer", "prefetch_pdf",
           "RendererStatus"]

_worker = None        # the background renderer of the release under way (a PdfWorker), if any


def _visible_text(html: str) -> str:
    """The text of an HTML page that will be drawn (markup, CSS and character references resolved)."""
    import html as html_mod
    import re

    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", html)
    return html_mod.unescape(re.sub(r"(?s)<[^>]*>", " ", text))


def _write_pdf(html: str, target=None):
    glyphs.check_text(_visible_text(html), "the datasheet")  # empty boxes are an error, not a PDF
    if _worker is not None:
        from dpbundle.release.bundle.pdf_worker import WorkerGone

        try:
            pdf = _worker.render(html)
        except WorkerGone:
            pass                  # render here: the same bytes, or the renderer's own error
        else:
            if target is None:
                return pdf
            Path(target).write_bytes(pdf)
            return None
    from dpbundle.release.bundle.weasy import pdf_bytes

    return pdf_bytes(html, target)


def render_pdf(html: str, path: Path) -> None:
    """Render the HTML datasheet to an A4 tagged PDF (PDF/UA-1) with WeasyPrint, offline. Raises
    :class:`glyphs.MissingGlyphs` when no installed font has some character of the text."""
    _write_pdf(html, str(path))


def render_pdf_bytes(html: str) -> bytes:
    """The same, in memory."""
    return _write_pdf(html)


def prefetch_pdf(html: str) -> None:
    """Start rendering ``html`` in the background renderer, if there is one, so that a later
    :func:`render_pdf` of the same HTML only waits for the bytes. Never raises."""
    if _worker is None:
        return
    from dpbundle.release.bundle.pdf_worker import WorkerGone

    try:
        if not _worker.pending(html):
            _worker.submit(html)
    except WorkerGone:
        pass


def check_renderer() -> RendererStatus:
    """The pre-flight check of the renderer and the fonts (:func:`.weasy.renderer_status`, no page
    rendered): the background renderer's answer when there is one, else made in this process."""
    if _worker is not None:
        from dpbundle.release.bundle.pdf_worker import WorkerGone

        try:
            status = RendererStatus.from_json(_worker.status())
        except WorkerGone:
            pass
        else:
            return status
    return renderer_status()


@contextlib.contextmanager
def background_renderer() -> Iterator[None]:
    """Within this block, PDFs are rendered by a child process started now (see the module's
    docstring); it is ended on the way out. Nested blocks share the outer one's."""
    global _worker
    if _worker is not None:
        yield
        return
    from dpbundle.release.bundle.pdf_worker import PdfWorker

    worker = PdfWorker.start()
    _worker = worker
    try:
        yield
    finally:
        _worker = None
        if worker is not None:
            worker.close()
