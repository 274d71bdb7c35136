"""Issue 35 (review): the datasheet's cover (banner, the release in brief, quality at a glance and
both parts of the contents) keeps to page 1, and Part 1 starts on page 2, for both built-in
examples: the persons cover used to spill its last contents line onto a nearly empty page 2."""
from __future__ import annotations

import io
import os

import pytest
from typer.testing import CliRunner

from dpbundle.release.cli.main import app


@pytest.mark.parametrize("example", ["births", "persons"])
def test_the_cover_keeps_to_page_1(example, tmp_path, monkeypatch):
    from pypdf import PdfReader

    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(tmp_path / "private"))
    out = tmp_path / example
    res = CliRunner().invoke(app, ["release", "--example", example, "--out", str(out), "--stop-probability", "0",
                                   "--ledger", str(tmp_path / "ledger.jsonl")])
    assert res.exit_code == 0, res.output
    pages = PdfReader(io.BytesIO((out / "README.pdf").read_bytes())).pages
    first, second = (" ".join(pages[i].extract_text().split()) for i in (0, 1))
    assert "Part 2 – technical:" in first and "How to verify this release" in first
    assert "Part 1 — For data subjects and data users" in second
    assert "How to verify this release" not in second.split("Part 1 — For data subjects")[0]
    assert os.path.getsize(out / "README.pdf") > 0
