"""Issue 36: README.pdf's structure check on hostile PDFs keeps the audit's bounds (pages,
content-stream tokens, texts and drawings per page, form nesting, map sizes) and its rule of
no traceback: every malformed or oversized PDF is a problem naming README.pdf, found quickly."""
from __future__ import annotations

import io
import time

import pytest

pytest.importorskip("pypdf")
from pypdf import PdfWriter  # noqa: E402
from pypdf.generic import (ArrayObject, DecodedStreamObject, DictionaryObject, FloatObject,  # noqa: E402
                           NameObject, NumberObject)

from dpbundle.audit import pdf_content, pdf_structure  # noqa: E402
from dpbundle.audit.pdf_structure import check_pdf  # noqa: E402

HTML = ("<!DOCTYPE html><html lang=\"en\"><head><title>t</title></head><body><h1>T</h1>"
        "<p>Hello</p></body></html>")


def _pdf(content: bytes, resources: dict | None = None, pages: int = 1) -> bytes:
    w = PdfWriter()
    for _ in range(pages):
        page = w.add_blank_page(595, 842)
        stream = DecodedStreamObject()
        stream.set_data(content)
        page[NameObject("/Contents")] = w._add_object(stream)
        if resources is not None:
            page[NameObject("/Resources")] = DictionaryObject(resources)
    buf = io.BytesIO()
    w.write(buf)
    return buf.getvalue()


def _problems(data: bytes, html: str = HTML) -> list[str]:
    start = time.perf_counter()
    out = check_pdf(data, html)
    assert time.perf_counter() - start < 20
    assert out and all(p.startswith("README.pdf") for p in out), out
    return out


@pytest.mark.parametrize("data", [b"", b"%PDF-1.7\n", b"%PDF-1.7\n1 0 obj << /Type /Catalog", b"\x00" * 1000,
                                  b"not a pdf at all"])
def test_garbage_is_a_problem_not_a_traceback(data):
    _problems(data)


def test_a_truncated_pdf_is_a_problem():
    data = _pdf(b"BT ET")
    _problems(data[: len(data) // 2])


@pytest.mark.parametrize("content, rule", [
    (b"BT /F1 12 Tf (x) Tj ET", "the font /F1 is not among the page's resources"),
    (b"BI /W 1 /H 1 ID \x00\xff EI", "an inline image"),
    (b"q 1 0 0 1 0 0 cm 0 0 m 1 1 l (unclosed", "a string is not closed"),
    (b"[1 2 3", "an array or dictionary is not closed"),
    (b"1e999 0 0 1 0 0 cm", "the operator"),
    (b"/P0 sh", "a shading operator"),
    (b"Tj", "text shown outside BT ... ET"),
    (b"BT (x) Tj ET", "text shown before a font is chosen"),
    (b"BX /Foo 1 frob EX", "the operator 'BX'"),
])
def test_content_the_renderer_does_not_write_is_named(content, rule):
    out = " ".join(_problems(_pdf(content)))
    assert rule in out, out


def test_a_simple_font_is_refused():
    font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"),
                             NameObject("/BaseFont"): NameObject("/Helvetica")})
    out = " ".join(_problems(_pdf(b"BT /F1 12 Tf 1 0 0 1 50 50 Tm (records are real) Tj ET",
                                  {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})))
    assert "a font of type /Type1 with encoding None (the renderer embeds Type0 fonts" in out


def test_a_form_that_draws_itself_stops_at_the_nesting_bound():
    w = PdfWriter()
    page = w.add_blank_page(595, 842)
    form = DecodedStreamObject()
    form.set_data(b"/X0 Do")
    form.update({NameObject("/Type"): NameObject("/XObject"), NameObject("/Subtype"): NameObject("/Form"),
                 NameObject("/BBox"): ArrayObject([NumberObject(0)] * 2 + [NumberObject(10)] * 2)})
    ref = w._add_object(form)
    form[NameObject("/Resources")] = DictionaryObject({NameObject("/XObject"): DictionaryObject({NameObject("/X0"): ref})})
    content = DecodedStreamObject()
    content.set_data(b"/X0 Do")
    page[NameObject("/Contents")] = w._add_object(content)
    page[NameObject("/Resources")] = form["/Resources"]
    buf = io.BytesIO()
    w.write(buf)
    out = " ".join(_problems(buf.getvalue()))
    assert f"forms nested more than {pdf_content.MAX_DEPTH} deep" in out


def test_the_token_bound(monkeypatch):
    monkeypatch.setattr(pdf_content, "MAX_TOKENS", 1000)
    out = " ".join(_problems(_pdf(b"0 0 m 1 1 l S\n" * 400, pages=3)))
    assert "more than 1,000 content-stream tokens" in out


def test_the_drawings_per_page_bound(monkeypatch):
    monkeypatch.setattr(pdf_content, "MAX_ITEMS", 50)
    out = " ".join(_problems(_pdf(b"0 0 0 rg 10 10 100 100 re f\n" * 60)))
    assert "more than 50 texts or drawings on a page" in out


def test_the_page_bound(monkeypatch):
    monkeypatch.setattr(pdf_structure, "MAX_PAGES", 3)
    out = " ".join(_problems(_pdf(b"", pages=4)))
    assert "has 4 pages, more than 3" in out


def test_a_large_hostile_page_is_checked_quickly():
    """50,000 filled rectangles under 1,000 texts: the over/under test is vectorised."""
    font = _type0_font()
    content = b"0 0 0 rg " + b"1 1 1 rg 0 0 595 842 re f\n" * 20_000 + b"0 0 0 rg BT /F1 9 Tf " + \
        b"1 0 0 1 50 50 Tm <0001> Tj\n" * 1000 + b"ET"
    start = time.perf_counter()
    out = _problems(_pdf(content, {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}))
    assert time.perf_counter() - start < 15, out


def _type0_font():
    cmap = DecodedStreamObject()
    cmap.set_data(b"begincmap 1 beginbfrange <0000> <ffff> <0041> endbfrange endcmap")
    cid = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/CIDFontType2"),
                            NameObject("/W"): ArrayObject([NumberObject(0), NumberObject(65535), NumberObject(600)])})
    return DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type0"),
                             NameObject("/Encoding"): NameObject("/Identity-H"),
                             NameObject("/DescendantFonts"): ArrayObject([cid]), NameObject("/ToUnicode"): cmap})


def test_a_self_made_type0_page_is_read_and_compared():
    """A one-page PDF in the renderer's font kind: its text is read and compared with the HTML
    (so the bounds above are reached through the same reader)."""
    font = _type0_font()
    out = " ".join(_problems(_pdf(b"0 0 0 rg BT /F1 12 Tf 1 0 0 1 50 700 Tm <0001> Tj ET",
                                  {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})))
    assert "its running heads and feet are not" in out


def test_an_xmp_packet_with_entities_is_refused():
    w = PdfWriter()
    w.add_blank_page(595, 842)
    meta = DecodedStreamObject()
    meta.set_data(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaaaaaa">]><x>&a;</x>')
    w._root_object[NameObject("/Metadata")] = w._add_object(meta)
    buf = io.BytesIO()
    w.write(buf)
    out = " ".join(_problems(buf.getvalue()))
    assert "its XMP metadata cannot be read (ValueError)" in out


def test_the_text_bound(monkeypatch):
    monkeypatch.setattr(pdf_content, "MAX_TEXT_CHARS", 500)
    font = _type0_font()
    content = b"0 0 0 rg BT /F1 9 Tf " + (b"1 0 0 1 50 50 Tm <" + b"0001" * 300 + b"> Tj\n") * 3 + b"ET"
    out = " ".join(_problems(_pdf(content, {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})))
    assert "more than 500 characters of text" in out


def test_the_literal_string_bound(monkeypatch):
    monkeypatch.setattr(pdf_content, "MAX_LITERAL", 100)
    out = " ".join(_problems(_pdf(b"BT (" + b"a" * 500 + b") Tj ET")))
    assert "a string longer than 100 bytes" in out
