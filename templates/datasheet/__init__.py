"""The bundle's datasheet, rendered from its public files: shared by the release (which writes
README.html and README.pdf) and the public audit (which renders README.html again and requires
the same bytes, and the same words in README.pdf).

    public = read_public_files(read, has, meta_from_manifest(manifest))
    html = datasheet_html(public)
"""
from __future__ import annotations

from .context import build_context
from .public import (DatasheetInputError, Meta, PublicFiles, meta_from_manifest, parse_data_csv,
                     read_public_files)
from .render import render_html

__all__ = ["build_context", "render_html", "datasheet_html", "Meta", "PublicFiles", "read_public_files",
           "meta_from_manifest", "parse_data_csv", "DatasheetInputError"]


def datasheet_html(public: PublicFiles) -> str:
    """README.html's text for these public files."""
    return render_html(build_context(public))
