"""Issue 36 review (a key holder's forgeries of README.pdf): the audit reads README.pdf's text
through each font's ToUnicode map, which is the PDF's word about what a glyph shows; what a
viewer shows is the glyph the font program draws.

A forger took the " not" out of "... published exactly and is not protected" in README.pdf and
drew the space before it in a copy of the font whose ToUnicode map reads that space glyph as
" not ": a viewer shows "is protected", every text extractor (the audit's included) reads "is
not protected", and the audit, key pinned, said VERIFIED. A second forger kept the map honest
but drew " not" in a copy of the font program whose n, o and t glyphs are empty. Both must fail
the documentation check naming README.pdf and the font rule; the untouched bundle passes."""
from __future__ import annotations

import io
import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.runner import run_audit  # noqa: E402

pytest.importorskip("pypdf")
from pypdf import PdfReader, PdfWriter  # noqa: E402
from pypdf.generic import DecodedStreamObject, DictionaryObject, ArrayObject, NameObject  # noqa: E402

NEEDLE = " not protected"      # "... published exactly and is not protected." (section 1)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    import audit_fixtures as fx
    from typer.testing import CliRunner

    import test_i36_run_binding as rb
    from dpbundle.release.cli.main import app

    t = tmp_path_factory.mktemp("review-pdf-fonts")
    assert CliRunner().invoke(app, ["keygen", "--out", str(t / "k")]).exit_code == 0
    fx.fast_spec(t / "fast.yaml")
    fx.example_registry(t / "registry.csv", 3000, 5)
    return dict(rb._release(t, "first", t / "ledger.jsonl"), key=t / "k.key", pub=t / "k.pub")


# ------------------------------------------------------------------------------ the forger's tools

def _to_unicode(font) -> dict[int, str]:
    import test_i36_pdf_forgery as pf

    return pf._to_unicode(font)


def _find(writer: PdfWriter):
    """(page, content text, TJ match, font name, [(code, kern)]) of the TJ holding NEEDLE."""
    for page in writer.pages:
        text = page["/Contents"].get_object().get_data().decode("latin-1")
        fonts = page["/Resources"]["/Font"]
        font = None
        for m in re.finditer(r"/(\w+) [\d.]+ Tf|\[([^\]]*)\] TJ", text):
            if m.group(1):
                font = m.group(1)
                continue
            items = [(int(h, 16), float(a or 0)) for h, a in re.findall(r"<([0-9a-fA-F]{4})>(-?[\d.]*)", m.group(2))]
            umap = _to_unicode(fonts[NameObject("/" + font)].get_object())
            if NEEDLE in "".join(umap.get(c, "?") for c, _ in items):
                return page, text, m, font, items, umap
    raise AssertionError(f"no text {NEEDLE!r} in README.pdf")


def _draw_in(writer: PdfWriter, make_font, how_many: int) -> None:
    """The TJ holding NEEDLE split in three, each placed where it was: the text before, the first
    ``how_many`` glyphs of NEEDLE in the font ``make_font(original, space_code)`` returns (added
    to the page as /FORGED), the rest; every other glyph is drawn as before."""
    from dpbundle.audit.pdf_content import load_font

    page, text, m, font, items, umap = _find(writer)
    k = "".join(umap.get(c, "?") for c, _ in items).index(NEEDLE)
    before, middle, after = items[:k], items[k:k + how_many], items[k + how_many:]
    head = text[:m.start()]
    size = float(re.findall(r"/" + font + r" ([\d.]+) Tf", head)[-1])
    x, y = (float(v) for v in re.findall(r"1 0 0 -1 ([-\d.]+) ([-\d.]+) Tm", head)[-1])
    original = page["/Resources"]["/Font"][NameObject("/" + font)].get_object()
    widths = load_font(original)

    def advance(its):
        return sum((widths.widths.get(c, widths.default_width) - a) / 1000 * size for c, a in its)

    page["/Resources"]["/Font"][NameObject("/FORGED")] = writer._add_object(make_font(writer, original, items[k][0]))

    def tj(its):
        return "[" + "".join(f"<{c:04x}>{a:g}" for c, a in its) + "] TJ"

    x1, x2 = x + advance(before), x + advance(before) + advance(middle)
    new = (tj(before) + f"\n1 0 0 -1 {x1:.6f} {y:.6f} Tm /FORGED {size} Tf " + tj(middle)
           + f"\n1 0 0 -1 {x2:.6f} {y:.6f} Tm /{font} {size} Tf " + tj(after))
    page["/Contents"].get_object().set_data((text[:m.start()] + new + text[m.end():]).encode("latin-1"))


def _lying_map(writer, original, space: int):
    """The font with a ToUnicode map that reads the space glyph as " not "."""
    cmap = original["/ToUnicode"].get_object().get_data().decode("latin-1")
    lie = " not ".encode("utf-16-be").hex()
    cmap = cmap.replace("endcmap", f"1 beginbfchar\n<{space:04x}> <{lie}>\nendbfchar\nendcmap")
    stream = DecodedStreamObject()
    stream.set_data(cmap.encode("latin-1"))
    font = DictionaryObject(dict(original.items()))
    font[NameObject("/ToUnicode")] = writer._add_object(stream)
    return font


def _empty_glyphs(writer, original, space: int):
    """The font with the same ToUnicode map, its program's n, o and t glyphs emptied."""
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont

    cid = original["/DescendantFonts"][0].get_object()
    descriptor = cid["/FontDescriptor"].get_object()
    program = TTFont(io.BytesIO(descriptor["/FontFile2"].get_object().get_data()))
    cmap = program.getBestCmap()
    for ch in "not":
        program["glyf"][cmap[ord(ch)]] = TTGlyphPen(None).glyph()
    out = io.BytesIO()
    program.save(out)
    stream = DecodedStreamObject()
    stream.set_data(out.getvalue())
    new_descriptor = DictionaryObject(dict(descriptor.items()))
    new_descriptor[NameObject("/FontFile2")] = writer._add_object(stream)
    new_cid = DictionaryObject(dict(cid.items()))
    new_cid[NameObject("/FontDescriptor")] = writer._add_object(new_descriptor)
    font = DictionaryObject(dict(original.items()))
    font[NameObject("/DescendantFonts")] = ArrayObject([writer._add_object(new_cid)])
    return font


def _forge(run: dict, tmp_path: Path, make_font, how_many: int) -> list[str]:
    bundle = tmp_path / "B"
    shutil.copytree(run["bundle"], bundle)
    writer = PdfWriter(clone_from=PdfReader(bundle / "README.pdf"))
    _draw_in(writer, make_font, how_many)
    buf = io.BytesIO()
    writer.write(buf)
    (bundle / "README.pdf").write_bytes(buf.getvalue())
    cu.resign(bundle, run["key"])
    report = run_audit(bundle, pubkey=run["pub"])
    assert report.verdict == "failed"
    failed = {c.check: c.problems for c in report.checks if c.failed}
    assert set(failed) == {"documentation"}, failed
    return failed["documentation"]


def test_a_tounicode_map_that_lies_fails(run, tmp_path):
    problems = _forge(run, tmp_path, _lying_map, 1)        # the space glyph alone, read as " not "
    assert any(p.startswith("README.pdf: ") and "ToUnicode map reads glyph" in p and "' not '" in p
               for p in problems), problems


def test_glyphs_drawn_empty_fail(run, tmp_path):
    problems = _forge(run, tmp_path, _empty_glyphs, 4)     # " not" in the emptied copy
    assert any(p.startswith("README.pdf: ") and "draws nothing" in p for p in problems), problems


def test_the_untouched_bundle_passes(run):
    report = run_audit(run["bundle"], pubkey=run["pub"])
    assert report.verdict == "verified", [(c.check, c.problems) for c in report.checks if c.failed]
