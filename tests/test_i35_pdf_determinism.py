"""Issue 35: the datasheet's PDF is the same bytes for the same HTML whether or not HarfBuzz-Subset
is installed. Without it WeasyPrint subsets fonts with fontTools, which stamps each subset font
with the current time unless SOURCE_DATE_EPOCH is set; the renderer fixes that variable while it
renders, whatever the caller's environment holds, and restores it afterwards."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dpbundle.release.bundle import weasy

PAGE = ("<html lang=\"en\"><head><title>t</title><style>body { font-family: 'DejaVu Sans'; } "
        "</style></head><body><h1>Births 2014</h1><p>epsilon 9.98 <b>bold</b> <i>italic</i></p>"
        "</body></html>")
# Two instants far apart: a render that took the time from the clock or from the caller's
# SOURCE_DATE_EPOCH would stamp its fonts differently at each.
INSTANTS = ("1", "2000000000")


@pytest.fixture
def fonttools_path(monkeypatch):
    """Font subsetting by fontTools, as on a machine without libharfbuzz-subset."""
    from weasyprint.pdf import fonts

    monkeypatch.setattr(fonts, "harfbuzz_subset", None)


def _raw_render(monkeypatch, epoch: str) -> bytes:
    """WeasyPrint's own render (no fixed dates) with the caller's SOURCE_DATE_EPOCH = ``epoch``."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    return weasy.document(PAGE).write_pdf(None, **weasy.PDF_OPTIONS)


def test_fonttools_alone_stamps_the_time(monkeypatch, fonttools_path):
    """The premise (so the next test can fail): left alone, the fontTools path writes the instant
    into the PDF."""
    assert _raw_render(monkeypatch, INSTANTS[0]) != _raw_render(monkeypatch, INSTANTS[1])


def test_the_fonttools_path_gives_the_same_bytes_at_any_time(monkeypatch, fonttools_path):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    pdfs = [weasy.pdf_bytes(PAGE)]                        # the clock's time
    for epoch in INSTANTS:
        monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)    # the caller's value is not used
        pdfs.append(weasy.pdf_bytes(PAGE))
    assert pdfs[0].startswith(b"%PDF-")
    assert pdfs[1:] == [pdfs[0]] * len(INSTANTS)


def test_the_callers_environment_is_restored(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "12345")
    with weasy.fixed_font_dates():
        assert os.environ["SOURCE_DATE_EPOCH"] == weasy.FONT_DATE_EPOCH
    assert os.environ["SOURCE_DATE_EPOCH"] == "12345"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    with pytest.raises(RuntimeError):
        with weasy.fixed_font_dates():
            raise RuntimeError("a render that fails")
    assert "SOURCE_DATE_EPOCH" not in os.environ


_CHILD = """
import hashlib, sys
from dpbundle.release.bundle import weasy
if sys.argv[1] == "fonttools":
    from weasyprint.pdf import fonts
    fonts.harfbuzz_subset = None
sys.stdout.write(hashlib.sha256(weasy.pdf_bytes(sys.argv[2])).hexdigest())
"""


def _child_digest(path: str, epoch: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = epoch
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", _CHILD, path, PAGE], env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    return out.stdout


@pytest.mark.parametrize("path", ["fonttools", "harfbuzz"])
def test_fresh_processes_give_the_same_bytes(path):
    """Two fresh interpreters (the background renderer is one) with different environments."""
    if path == "harfbuzz" and not weasy.renderer_status().fast_subsetting:
        pytest.skip("libharfbuzz-subset is not installed here")
    first = _child_digest(path, None)
    assert len(first) == 64
    assert _child_digest(path, INSTANTS[1]) == first
