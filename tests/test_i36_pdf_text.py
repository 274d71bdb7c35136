"""Issue 36: the parts of README.pdf's check that do not need a bundle: text in reading order
(right-to-left stretches, whitespace, case), the facts taken from the rendered datasheet, the
contrast rule, and the edition rule for 0.2.0 bundles (their charts cut long labels)."""
from __future__ import annotations

from pathlib import Path

import pytest

from dpbundle.audit.pdf_structure import check_pdf, compare_in_order, contrast, datasheet_facts, logical

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def test_right_to_left_stretches_are_read_back_in_logical_order():
    hebrew = "\u05dc\u05d9\u05d3\u05d5\u05ea \u05d7\u05d9"          # "live births", logical order
    visual = hebrew[::-1]                                             # as the renderer draws it
    assert logical("Births " + visual + " 2024") == "Births " + hebrew + " 2024"
    assert logical("no right-to-left text") == "no right-to-left text"


def test_text_in_order_ignores_whitespace_case_and_compatibility_forms():
    assert compare_in_order("It is\nNOT  pro\u00adtected \ufb01ne", "it is not protected fine", str) is None


def test_a_moved_word_is_named_with_its_place():
    diff = compare_in_order("it is protected. not", "it is not protected.", lambda i: f"at {i}")
    assert diff.startswith("at 6: README.pdf has 'protected' where the datasheet has 'not'")


def test_the_datasheet_facts():
    html = ("<!DOCTYPE html><html lang=\"en\"><head><title>T &amp; t</title>"
            "<meta name=\"author\" content=\"Office\"><meta name=\"generator\" content=\"dpbundle 0.3.0\"></head>"
            "<body><h1>Births</h1><ul><li>a</li><li>b<ol><li>c</li></ol></li></ul><ol><li>d</li></ol>"
            "<h2 id=\"x\">Part <em>one</em></h2><a href=\"#x\">go</a>"
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><title>A chart</title><g><title>tip</title></g>"
            "<text>0</text><text>10</text></svg><p>after</p></body></html>")
    facts = datasheet_facts(html)
    assert facts.bullets == 2 and facts.headings == ["Births", "Part one"] and facts.doc_title == "Births"
    assert facts.meta == {"title": "T & t", "author": "Office", "generator": "dpbundle 0.3.0"}
    assert facts.chart_titles == ["A chart"] and [c.split() for c in facts.charts] == [["0", "10"]]
    assert "after" in facts.flow and "A chart" not in facts.flow and facts.links == {"#x"} and facts.lang == "en"


def test_contrast():
    assert contrast((1, 1, 1), (1, 1, 1)) == 1.0
    assert round(contrast((0, 0, 0), (1, 1, 1))) == 21


@pytest.mark.parametrize("name", ["persons", "births"])
def test_a_0_2_bundle_passes_as_edition_1_and_its_cut_chart_labels_only_there(name):
    """dpbundle 0.2.0 (edition 1) cut long chart labels at the chart's edge: accepted for edition
    1 only, inside charts only; everything else is required of both editions."""
    d = PRECHANGE / f"{name}-bundle"
    data, html = (d / "README.pdf").read_bytes(), (d / "README.html").read_text("utf-8")
    assert check_pdf(data, html, edition=1) == []
    as_new = check_pdf(data, html, edition=2)
    assert all("clipped away" in p or "more problem" in p for p in as_new)
    if name == "persons":
        assert any("clipped away" in p for p in as_new)
