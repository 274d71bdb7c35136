"""Datasheet editions: which wording a bundle's datasheet has, from the dpbundle version that made it.

The public audit renders README.html again from a bundle's public files and requires the same
bytes. A bundle made by an older dpbundle must keep verifying after the wording changes, so the
renderer keeps every wording it ever published, as an *edition*, chosen from manifest.json's
``dpbundle_version`` (:attr:`~.public.Meta.dpbundle_version`):

- edition 1: bundles made by dpbundle before 0.3 (0.2.x). FROZEN: it reproduces the 0.2.0 output
  byte for byte. Its template is ``datasheet-1.html.j2`` and its stylesheet ``datasheet-1.css``
  (copies of the 0.2.0 ones, never edited) and the Python code that builds the context keeps the 0.2.0 behaviour behind
  ``edition == 1`` branches wherever a later edition changed a value, a chart or a sentence.
  tests/test_prechange_replay.py audits two 0.2.0 bundles with it.
- edition 2: bundles made by dpbundle 0.3 and later (``datasheet.html.j2``).

A change of a published sentence in a new version adds an edition; it never edits an old one.
"""
from __future__ import annotations

import re

__all__ = ["edition_of", "template_name", "stylesheet_name", "LATEST_EDITION", "EDITION_TEMPLATES",
           "EDITION_STYLESHEETS"]

LATEST_EDITION = 2

#: edition -> its template (a resource of the dpbundle.templates package)
EDITION_TEMPLATES = {1: "datasheet-1.html.j2", 2: "datasheet.html.j2"}
#: edition -> its stylesheet (inlined in README.html, so frozen with the edition)
EDITION_STYLESHEETS = {1: "datasheet-1.css", 2: "datasheet.css"}


def _version_tuple(version: str) -> tuple[int, ...] | None:
    """(major, minor, ...) of a version string such as "0.2.0" or "0.3.0.dev1"; None if it has none."""
    m = re.match(r"\s*v?(\d+)(?:\.(\d+))?", str(version))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2) or 0)


def edition_of(dpbundle_version: str) -> int:
    """The datasheet edition of a bundle made by this dpbundle version: 1 before 0.3, else the
    latest (a version that does not parse gets the latest edition)."""
    parsed = _version_tuple(dpbundle_version)
    if parsed is not None and parsed < (0, 3):
        return 1
    return LATEST_EDITION


def template_name(edition: int) -> str:
    """The template resource of an edition."""
    return EDITION_TEMPLATES[edition]


def stylesheet_name(edition: int) -> str:
    """The stylesheet resource of an edition."""
    return EDITION_STYLESHEETS[edition]
