"""The bundle's datasheet as a PDF, and the names the release uses for it.

The datasheet's content is built from the bundle's public files by
:mod:`dpbundle.templates.datasheet` (shared with the public audit, which renders README.html again
and requires the same bytes); this module renders that HTML to README.pdf (WeasyPrint, tagged
PDF/UA-1, offline: inline CSS and SVG, local fonts, no URL fetched) after checking that the
installed fonts have every character.
"""
from __future__ import annotations

from pathlib import Path

from dpbundle.templates.datasheet import build_context, render_html  # noqa: F401  (the release's names)
from dpbundle.templates.datasheet.context import (PUBLISHED_EPSILONS, epsilon_scale,  # noqa: F401
                                                  openssl_verify_command, query_family)
from dpbundle.templates.datasheet.numbers import NUMBER_FORMAT, NUMBER_FORMAT_DOC, format_number  # noqa: F401
from dpbundle.templates.datasheet.render import check_templates  # noqa: F401
from dpbundle.templates.datasheet.render import read_resource as _read_resource  # noqa: F401

from dpbundle.release.bundle import glyphs

__all__ = ["NUMBER_FORMAT", "NUMBER_FORMAT_DOC", "format_number", "build_context", "render_html", "render_pdf",
           "render_pdf_bytes", "openssl_verify_command", "query_family", "PUBLISHED_EPSILONS", "PDF_OPTIONS",
           "epsilon_scale", "check_templates"]

# Tagged PDF (PDF/UA-1: structure tree, /MarkInfo, document language and title from the HTML).
PDF_OPTIONS = {"pdf_variant": "pdf/ua-1", "pdf_tags": True}


def _url_fetcher():
    from weasyprint import urls

    if hasattr(urls, "URLFetcher"):  # WeasyPrint >= 66
        return urls.URLFetcher(allowed_protocols=["data"], fail_on_errors=False)

    def fetch(url: str):  # older WeasyPrint: a function returning a dict
        if url.startswith("data:"):
            return urls.default_url_fetcher(url)
        raise ValueError(f"refusing to fetch {url!r}: the datasheet renders offline")
    return fetch


def _document(html: str):
    import logging

    import weasyprint

    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    logging.getLogger("fontTools").setLevel(logging.ERROR)
    return weasyprint.HTML(string=html, base_url=None, url_fetcher=_url_fetcher())


def _visible_text(html: str) -> str:
    """The text of an HTML page that will be drawn (markup, CSS and character references resolved)."""
    import html as html_mod
    import re

    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", html)
    return html_mod.unescape(re.sub(r"(?s)<[^>]*>", " ", text))


def _write_pdf(html: str, target=None):
    glyphs.check_text(_visible_text(html), "the datasheet")  # empty boxes are an error, not a PDF
    return _document(html).write_pdf(target, **PDF_OPTIONS)


def render_pdf(html: str, path: Path) -> None:
    """Render the HTML datasheet to an A4 tagged PDF (PDF/UA-1) with WeasyPrint, offline. Raises
    :class:`glyphs.MissingGlyphs` when no installed font has some character of the text."""
    _write_pdf(html, str(path))


def render_pdf_bytes(html: str) -> bytes:
    """The same, in memory (used by the pre-flight check of ``release``)."""
    return _write_pdf(html)


