"""The project stands alone: its README and docs/ never send a reader outside the repository
(a sibling ``../shared`` folder or a development machine's paths), every repository path they
name exists, and the public samples they cite are shipped."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTSIDE = re.compile(r"\.\./shared|/work/|/home/\w|/Users/\w|/tmp/pytest|C:\\\\Users")


def test_no_doc_points_outside_the_repository():
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in DOCS
            for i, line in enumerate(p.read_text("utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert hits == []


def test_repository_paths_named_in_docs_exist():
    """`examples/...`, `docs/...`, `benchmarks/...` and friends in backticks must exist."""
    pattern = re.compile(r"`((?:examples|docs|benchmarks|schemas|templates|tests|release|audit|"
                         r"mechanisms)/[\w./-]+?)`")
    missing = sorted({(p.name, m) for p in DOCS for m in pattern.findall(p.read_text("utf-8"))
                      if "<" not in m and "*" not in m and not (ROOT / m).exists()})
    assert missing == []


def test_public_samples_are_shipped_with_their_provenance():
    data = ROOT / "examples" / "data"
    for name in ("nvss2019_singleton_10k.csv", "nvss2019_singleton_160k.csv.gz"):
        assert (data / name).is_file()
    assert "National Vital Statistics System" in (data / "README.md").read_text("utf-8")
