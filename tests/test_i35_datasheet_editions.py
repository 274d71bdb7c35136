"""Datasheet editions (issue 35): a bundle made by dpbundle 0.2.x gets the frozen 0.2.0 wording
(edition 1), a bundle made from 0.3 on the new one (edition 2)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpbundle.templates.datasheet import datasheet_html, meta_from_manifest, read_public_files
from dpbundle.templates.datasheet.edition import edition_of
from datasheet_util import context_of
from test_bundle import fake_release

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


@pytest.mark.parametrize("version, edition", [("0.2.0", 1), ("0.2.9", 1), ("0.1.0", 1), ("0.3.0", 2),
                                              ("0.3.1.dev2", 2), ("1.0", 2), ("garbage", 2)])
def test_edition_follows_the_version_that_made_the_bundle(version, edition):
    assert edition_of(version) == edition


@pytest.mark.parametrize("name", ["births", "persons"])
def test_a_0_2_0_bundle_renders_its_readme_byte_for_byte(name):
    bundle = PRECHANGE / f"{name}-bundle"
    meta = meta_from_manifest(json.loads((bundle / "manifest.json").read_text()))
    public = read_public_files(lambda f: (bundle / f).read_bytes(), lambda f: (bundle / f).exists(), meta)
    assert datasheet_html(public) == (bundle / "README.html").read_text(encoding="utf-8")


def test_the_editions_differ_by_template():
    rel = fake_release()
    assert context_of(rel)["edition"] == 1
    assert context_of(rel, version="0.3.0")["edition"] == 2
