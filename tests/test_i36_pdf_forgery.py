"""Issue 36: README.pdf is re-derived, not word-matched. A publisher who holds the key edits
README.pdf (with pypdf or by editing its content streams, as the attack did), re-signs the
bundle, and `dpbundle audit` with the pinned key must fail the documentation check with a
message naming README.pdf and the rule it breaks. The untouched bundle, and the same PDF merely
rewritten by pypdf, still verify (so each forgery fails for its own change)."""
from __future__ import annotations

import io
import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_bundles import resign  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

pypdf = pytest.importorskip("pypdf")
from pypdf import PdfReader, PdfWriter  # noqa: E402
from pypdf.generic import (ArrayObject, DictionaryObject, NameObject, NumberObject,  # noqa: E402
                           TextStringObject)


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A persons release (its datasheet says "the exact count is not published") and its key."""
    d = tmp_path_factory.mktemp("pdf")
    res = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out",
                                   str(d / "b"), "--ledger", str(d / "ledger.jsonl"), "--transcript",
                                   str(d / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return d / "b", d / "b.demo-key.key", d / "b.demo-key.pub"


@pytest.fixture
def copy(released, tmp_path):
    bundle, key, pub = released
    d = tmp_path / "b"
    shutil.copytree(bundle, d)
    return d, key, pub


def docs_problems(d: Path, pub: Path) -> list[str]:
    """The documentation check's problems (the other checks must pass)."""
    rep = run_audit(d, pubkey=pub)
    failed = {c.check: c.problems for c in rep.checks if c.failed}
    assert set(failed) <= {"documentation"}, failed
    return failed.get("documentation", [])


def rewrite(d: Path, key: Path, edit) -> None:
    """README.pdf through pypdf with ``edit(writer)``, then the bundle re-signed."""
    writer = PdfWriter(clone_from=PdfReader(d / "README.pdf"))
    edit(writer)
    buf = io.BytesIO()
    writer.write(buf)
    (d / "README.pdf").write_bytes(buf.getvalue())
    resign(d, key)


# ---------------------------------------------------------------- content-stream editing

def _to_unicode(font) -> dict[int, str]:
    """A ToUnicode map's bfchar and bfrange entries (enough for the fonts WeasyPrint embeds)."""
    data = font["/ToUnicode"].get_object().get_data().decode("latin-1")
    out: dict[int, str] = {}
    for block in re.findall(r"beginbfchar(.*?)endbfchar", data, re.S):
        for src, dst in re.findall(r"<([0-9a-fA-F]+)>\s*<([0-9a-fA-F]+)>", block):
            out[int(src, 16)] = bytes.fromhex(dst).decode("utf-16-be")
    for block in re.findall(r"beginbfrange(.*?)endbfrange", data, re.S):
        for lo, hi, dst in re.findall(r"<([0-9a-fA-F]+)>\s*<([0-9a-fA-F]+)>\s*<([0-9a-fA-F]+)>", block):
            for j in range(int(hi, 16) - int(lo, 16) + 1):
                out[int(lo, 16) + j] = chr(int(dst, 16) + j)
    return out


class Page:
    """A page's content stream as text, its TJ arrays decoded."""

    def __init__(self, writer: PdfWriter, index: int):
        self.page = writer.pages[index]
        self.stream = self.page["/Contents"].get_object()
        self.text = self.stream.get_data().decode("latin-1")
        fonts = self.page["/Resources"]["/Font"]
        self.maps = {str(k)[1:]: _to_unicode(fonts[k].get_object()) for k in fonts}

    def arrays(self):
        """(match of the TJ array, its font's name, its glyph codes) in stream order."""
        font = None
        for m in re.finditer(r"/(\w+) [\d.]+ Tf|\[([^\]]*)\] TJ", self.text):
            if m.group(1):
                font = m.group(1)
            else:
                yield m, font, [int(h, 16) for h in re.findall(r"<([0-9a-fA-F]{4})>", m.group(2))]

    def decode(self, font: str, codes: list[int]) -> str:
        return "".join(self.maps[font].get(c, "?") for c in codes)

    def encode(self, font: str, text: str) -> str:
        back = {v: k for k, v in self.maps[font].items()}
        return "".join(f"<{back[ch]:04x}>0" for ch in text)

    def save(self) -> None:
        self.stream.set_data(self.text.encode("latin-1"))


def find_pages(writer: PdfWriter, needle: str):
    """(page, TJ match, font, codes) of the first TJ whose text contains ``needle``."""
    for i in range(len(writer.pages)):
        page = Page(writer, i)
        for m, font, codes in page.arrays():
            if font and needle in page.decode(font, codes):
                return page, m, font, codes
    raise AssertionError(f"no text {needle!r} in README.pdf")


NOT_SENTENCE = " not published"     # "... the exact count is not published)" on the cover


def _move_not(writer: PdfWriter, size: str, colour: str) -> None:
    """Take the word "not" out of "is not published" and draw it elsewhere on the page."""
    page, m, font, codes = find_pages(writer, NOT_SENTENCE)
    text = page.decode(font, codes)
    k = text.index(NOT_SENTENCE)
    kept = codes[:k + 1] + codes[k + 5:]            # " published": the "not " is gone
    assert page.decode(font, kept).endswith(" published" + text[k + len(NOT_SENTENCE):])
    new_array = "[" + "".join(f"<{c:04x}>0" for c in kept) + "] TJ"
    page.text = page.text[:m.start()] + new_array + page.text[m.end():]
    page.text += (f"\nq {colour} rg BT 1 0 0 -1 300 700 Tm /{font} {size} Tf "
                  f"[{page.encode(font, 'not')}] TJ ET Q\n")
    page.save()


# ---------------------------------------------------------------- the tests


def test_the_untouched_bundle_verifies(released):
    bundle, _key, pub = released
    assert docs_problems(bundle, pub) == []


def test_a_pdf_rewritten_by_pypdf_alone_still_verifies(copy):
    d, key, pub = copy
    rewrite(d, key, lambda w: None)
    assert docs_problems(d, pub) == []


def _the_cli_fails(d: Path, pub: Path) -> str:
    """`dpbundle audit --pubkey`: not verified (exit 1), no traceback; its output, flattened."""
    res = CliRunner().invoke(app, ["audit", str(d), "--pubkey", str(pub)], terminal_width=400)
    out = " ".join(res.output.split())
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert "README.pdf" in out and "documentation" in out
    return out


def test_not_moved_into_1px_white_text_fails(copy):
    """The attack of issue 36: 'it is not protected' -> 'it is protected', the 'not' in 1-px
    white text elsewhere on the page. The old word-bag comparison accepted it."""
    d, key, pub = copy
    rewrite(d, key, lambda w: _move_not(w, "0.75", "1 1 1"))
    problems = docs_problems(d, pub)
    text = " ".join(problems)
    assert all(p.startswith("README.pdf") for p in problems)
    assert "\u201cnot\u201d is 0.75 pt high (hidden text" in text
    assert "its text differs from the datasheet's (in order)" in text and "published" in text


def test_not_moved_in_plain_sight_fails_on_the_order(copy):
    """The same move with the 'not' drawn normally, far from its sentence: visible, but out of order."""
    d, key, pub = copy
    rewrite(d, key, lambda w: _move_not(w, "9", "0 0 0"))
    problems = docs_problems(d, pub)
    assert any(p.startswith("README.pdf: its text differs from the datasheet's (in order)") for p in problems), problems


def test_a_visible_freetext_erratum_fails(copy):
    from pypdf.annotations import FreeText

    d, key, pub = copy

    def edit(w):
        w.add_annotation(page_number=0, annotation=FreeText(
            text="ERRATUM: total epsilon is 1.0; records are real", rect=(60, 500, 500, 540)))
        w.add_metadata({"/Title": "VERIFIED"})
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: page 1: an annotation of type /FreeText ('ERRATUM: total epsilon is 1.0" in text
    assert "README.pdf: its metadata /Title is 'VERIFIED' where the datasheet's is" in text
    out = _the_cli_fails(d, pub)
    assert "FreeText" in out


def test_an_edited_title_alone_fails(copy):
    d, key, pub = copy
    rewrite(d, key, lambda w: w.add_metadata({"/Title": "VERIFIED"}))
    assert [p for p in docs_problems(d, pub)] == [
        "README.pdf: its metadata /Title is 'VERIFIED' where the datasheet's is "
        + repr(re.search(r"<title>(.*?)</title>", (d / "README.html").read_text("utf-8")).group(1))]


def test_an_edited_xmp_title_fails(copy):
    d, key, pub = copy

    def edit(w):
        meta = w._root_object["/Metadata"].get_object()
        xml = meta.get_data().decode("utf-8")
        xml2 = re.sub(r'(<dc:title><rdf:Alt><rdf:li xml:lang="x-default">)[^<]*', r"\1VERIFIED", xml)
        assert xml2 != xml
        meta.set_data(xml2.encode("utf-8"))
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: its XMP metadata title is ['VERIFIED'] where the datasheet's is" in text


def test_a_new_metadata_field_fails(copy):
    d, key, pub = copy
    rewrite(d, key, lambda w: w.add_metadata({"/CreationDate": "D:20990101000000Z"}))
    assert any("README.pdf: its metadata has /CreationDate" in p for p in docs_problems(d, pub))


def test_an_embedded_file_fails(copy):
    d, key, pub = copy
    rewrite(d, key, lambda w: w.add_attachment("erratum.txt", b"total epsilon is 1.0; records are real"))
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: its name dictionary has /EmbeddedFiles" in text
    assert "README.pdf: holds embedded files (/EmbeddedFiles)" in text


def test_javascript_and_an_open_action_fail(copy):
    d, key, pub = copy

    def edit(w):
        script = DictionaryObject({NameObject("/S"): NameObject("/JavaScript"),
                                   NameObject("/JS"): TextStringObject("app.alert('records are real');")})
        names = w._root_object["/Names"].get_object()
        names[NameObject("/JavaScript")] = DictionaryObject({
            NameObject("/Names"): ArrayObject([TextStringObject("erratum"), w._add_object(script)])})
        w._root_object[NameObject("/OpenAction")] = DictionaryObject({
            NameObject("/S"): NameObject("/JavaScript"), NameObject("/JS"): TextStringObject("app.alert(1)")})
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: its document catalog has /OpenAction" in text
    assert "README.pdf: its name dictionary has /JavaScript" in text
    assert "README.pdf: holds JavaScript" in text and "README.pdf: holds an action run on opening" in text


def test_optional_content_fails(copy):
    """A layer (optional content) that a viewer may hide: in the catalog and around page text."""
    d, key, pub = copy

    def edit(w):
        ocg = w._add_object(DictionaryObject({NameObject("/Type"): NameObject("/OCG"),
                                              NameObject("/Name"): TextStringObject("erratum")}))
        w._root_object[NameObject("/OCProperties")] = DictionaryObject({
            NameObject("/OCGs"): ArrayObject([ocg]),
            NameObject("/D"): DictionaryObject({NameObject("/OFF"): ArrayObject([ocg])})})
        page, m, font, codes = find_pages(w, NOT_SENTENCE)
        page.text = page.text[:m.start()] + "/OC /oc1 BDC " + m.group(0) + " EMC" + page.text[m.end():]
        res = page.page["/Resources"].get_object()
        res[NameObject("/Properties")] = DictionaryObject({NameObject("/oc1"): ocg})
        page.save()
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: its document catalog has /OCProperties" in text
    assert "README.pdf: holds optional content (layers)" in text
    assert "marked content with the named properties /oc1 (optional content)" in text


def _swap_two_lines(w: PdfWriter) -> None:
    """Swap the texts of two long lines of one paragraph (same font): the same words, reordered."""
    for i in range(1, len(w.pages)):
        page = Page(w, i)
        long = [(m, font) for m, font, codes in page.arrays() if len(codes) > 40]
        for (a, fa), (b, fb) in zip(long, long[1:]):
            if fa == fb and a.group(0) != b.group(0):
                t = page.text
                page.text = t[:a.start()] + b.group(0) + t[a.end():b.start()] + a.group(0) + t[b.end():]
                page.save()
                return
    raise AssertionError("no two long lines to swap")


def test_two_lines_reordered_fail_though_the_words_are_the_same(copy):
    from dpbundle.audit.checks_docs import pdf_pages
    from dpbundle.templates.datasheet.words import compare_pdf_words

    d, key, pub = copy
    rewrite(d, key, _swap_two_lines)
    # the old comparison, a bag of words, sees nothing
    title = json.loads((d / "spec.json").read_text())["spec"]["release"]["title"]
    assert compare_pdf_words(pdf_pages((d / "README.pdf").read_bytes()), (d / "README.html").read_text("utf-8"),
                             title) == []
    problems = docs_problems(d, pub)
    assert any(p.startswith("README.pdf: its text differs from the datasheet's (in order): page ")
               for p in problems), problems


def _mode_3(w: PdfWriter) -> None:
    """Draw the line that says "not published" in render mode 3 (invisible), in place."""
    page, m, _font, _codes = find_pages(w, NOT_SENTENCE)
    page.text = page.text[:m.start()] + "3 Tr " + m.group(0) + " 0 Tr" + page.text[m.end():]
    page.save()


def test_text_in_render_mode_3_fails(copy):
    d, key, pub = copy
    rewrite(d, key, _mode_3)
    text = " ".join(docs_problems(d, pub))
    assert "is drawn in render mode 3 (invisible); the renderer fills text (mode 0)" in text
    assert "not published" in text


def test_white_text_in_place_fails_on_its_contrast(copy):
    """The "not published" line drawn white on the white page, where it stands."""
    d, key, pub = copy

    def edit(w):
        page, m, _font, _codes = find_pages(w, NOT_SENTENCE)
        page.text = page.text[:m.start()] + "1 1 1 rg " + m.group(0) + page.text[m.end():]
        page.save()
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "drawn in a colour too close to what lies under it (contrast 1.00" in text


def test_text_covered_by_a_later_drawing_fails(copy):
    d, key, pub = copy

    def edit(w):
        page, m, _font, _codes = find_pages(w, NOT_SENTENCE)
        # cover the whole page's lower half with a white rectangle, drawn last
        page.text += "\nq 1 1 1 rg 0 0 600 420 re f Q\n"
        page.save()
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "covered by a drawing made after it" in text


def test_text_outside_the_page_fails(copy):
    d, key, pub = copy

    def edit(w):
        page, m, font, _codes = find_pages(w, NOT_SENTENCE)
        page.text += f"\nBT 1 0 0 -1 -400 -400 Tm /{font} 9 Tf [{page.encode(font, 'real')}] TJ ET\n"
        page.save()
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "the text \u201creal\u201d is drawn outside the page" in text


def test_a_link_to_elsewhere_fails(copy):
    from pypdf.annotations import Link

    d, key, pub = copy
    rewrite(d, key, lambda w: w.add_annotation(page_number=0, annotation=Link(
        rect=(60, 500, 300, 520), url="https://example.org/erratum")))
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: page 1: a link to 'https://example.org/erratum', which is not a link of the datasheet" in text


def test_an_incremental_update_fails(copy):
    """Bytes appended after the PDF's end (what an incremental update does)."""
    d, key, pub = copy
    data = (d / "README.pdf").read_bytes()
    (d / "README.pdf").write_bytes(data + b"\n1 0 obj\n<< >>\nendobj\nxref\n0 0\ntrailer\n<< >>\nstartxref\n0\n%%EOF\n")
    resign(d, key)
    text = " ".join(docs_problems(d, pub))
    assert "README.pdf: was changed after it was written (an incremental update" in text


def test_not_pushed_off_the_page_inside_its_line_fails(copy):
    """The "not" moved 200 em to the left and back inside its own TJ array: the line's start and
    end are where they were, its text in order is unchanged, the "not" is off the page."""
    d, key, pub = copy

    def edit(w):
        page, m, font, codes = find_pages(w, NOT_SENTENCE)
        text = page.decode(font, codes)
        k = text.index(NOT_SENTENCE) + 1
        glyphs = lambda cs: "".join(f"<{c:04x}>" for c in cs)   # noqa: E731
        array = (f"[{glyphs(codes[:k])} 200000 {glyphs(codes[k:k + 3])} -200000 {glyphs(codes[k + 3:])}] TJ")
        page.text = page.text[:m.start()] + array + page.text[m.end():]
        page.save()
    rewrite(d, key, edit)
    text = " ".join(docs_problems(d, pub))
    assert "text moved by 200 em inside its line (the renderer moves glyphs by at most 1 em)" in text
    assert "is drawn outside the page" in text


def test_text_squeezed_by_horizontal_scaling_fails(copy):
    d, key, pub = copy

    def edit(w):
        page, m, _font, _codes = find_pages(w, NOT_SENTENCE)
        page.text = page.text[:m.start()] + "1 Tz " + m.group(0) + " 100 Tz" + page.text[m.end():]
        page.save()
    rewrite(d, key, edit)
    assert "text scaled, raised or spaced by the text state (Tz, Ts, Tc, Tw)" in " ".join(docs_problems(d, pub))
