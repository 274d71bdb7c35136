"""Edition-2 datasheets for the issue-35 tests: the public files of the 0.2.0 bundles of
tests/data/prechange, read as if a dpbundle 0.3 release had written them (its manifest's
version, an optional ``ledger``) and with an optional change to spec.json's ``release``."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import html as html_mod

from dpbundle.templates.datasheet import Meta, build_context, datasheet_html, meta_from_manifest, read_public_files

PRECHANGE = Path(__file__).resolve().parent / "data" / "prechange"


def public_of(name: str = "births", *, version: str = "0.3.0", ledger: dict | None = None,
              release: dict | None = None, patch: dict | None = None):
    """The PublicFiles of tests/data/prechange/<name>-bundle, with the manifest's version and
    ledger replaced, spec.json's release updated with ``release``, and each JSON file named in
    ``patch`` changed in place by its function."""
    bundle = PRECHANGE / f"{name}-bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["dpbundle_version"] = version
    if ledger is None:
        manifest.pop("ledger", None)
    else:
        manifest["ledger"] = ledger
    meta = meta_from_manifest(manifest)

    def read(f: str) -> bytes:
        data = (bundle / f).read_bytes()
        if f == "spec.json" and release:
            doc = json.loads(data)
            doc["spec"]["release"].update(release)
            data = json.dumps(doc).encode()
        if patch and f in patch:
            doc = json.loads(data)
            patch[f](doc)
            data = json.dumps(doc).encode()
        return data

    return read_public_files(read, lambda f: (bundle / f).exists(), meta)


def html_of(name: str = "births", **kw) -> str:
    return datasheet_html(public_of(name, **kw))


def context_of(name: str = "births", **kw) -> dict:
    return build_context(public_of(name, **kw))


def text_of(html: str) -> str:
    """The visible text, whitespace collapsed (SVG titles and the head left out)."""
    from dpbundle.templates.datasheet.words import visible_text

    return re.sub(r"\s+", " ", visible_text(html))


def cover_of(html: str) -> str:
    """Page 1: the cover header's visible text."""
    m = re.search(r"(?s)<header class=\"cover\">(.*?)</header>", html)
    assert m, "no cover"
    return text_of(m.group(1))


def section_text(html: str, sid: str) -> str:
    """The visible text from the heading with id ``sid`` to the next h2/h1."""
    m = re.search(rf'(?s)<h2 id="{sid}">(.*?)(?=<h2 |<h1 )', html)
    assert m, sid
    return text_of(m.group(1))


def unescape(s: str) -> str:
    return html_mod.unescape(s)
