"""Issue 36 (review): manifest.json's free-form ``extra`` is vouched for by the signature alone;
the datasheet that shows it says so (edition 2), and the audit report names it."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from i35_datasheet_util import public_of, text_of  # noqa: E402

from dpbundle.templates.datasheet import datasheet_html  # noqa: E402


def _with_extra(version: str):
    public = public_of("births", version=version)
    return dataclasses.replace(public, meta=dataclasses.replace(public.meta, extra={"approved by": "the board"}))


def test_the_datasheet_says_extra_is_not_checked():
    text = text_of(datasheet_html(_with_extra("0.3.0")))
    assert "the board" in text
    assert "signed but not checked by the audit" in text


def test_edition_1_keeps_its_words():
    text = text_of(datasheet_html(_with_extra("0.2.0")))
    assert "the board" in text and "not checked by the audit" not in text
