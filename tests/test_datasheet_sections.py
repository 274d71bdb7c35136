"""Issue 23: the datasheet's context is the composition of one function per part of the
datasheet, and each key of the context (each statement) is built in exactly one of them. The
datasheet re-rendered from a bundle made before the split is the bundle's README.html, byte for
byte (tests/data/prechange)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpbundle.templates.datasheet import context, datasheet_html, meta_from_manifest, read_public_files

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def _public(name: str):
    d = PRECHANGE / f"{name}-bundle"
    meta = meta_from_manifest(json.loads((d / "manifest.json").read_text("utf-8")))
    return d, read_public_files(lambda n: (d / n).read_bytes(), lambda n: (d / n).is_file(), meta)


def test_each_key_of_the_context_is_built_by_one_section():
    _, public = _public("births")
    facts = context._facts(public)
    quality = context._section_quality(facts)
    parts = {name: (getattr(context, name)(facts) if name != "_section_faithfulness"
                    else context._section_faithfulness(facts, quality["criteria"]))
             for name in sorted(vars(context)) if name.startswith("_section_")}
    assert len(parts) >= 10
    owner: dict[str, str] = {}
    for name, part in parts.items():
        for key in part:
            assert key not in owner, f"{key!r} built by {owner.get(key)} and {name}"
            owner[key] = name
    assert set(owner) == set(context.build_context(public))


@pytest.mark.parametrize("name", ["births", "persons"])
def test_the_datasheet_of_a_bundle_made_before_the_split_renders_to_the_same_bytes(name):
    d, public = _public(name)
    assert datasheet_html(public).encode("utf-8") == (d / "README.html").read_bytes()
