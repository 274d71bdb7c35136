"""docs/claims.md, the claims register (issue 35): every section of the datasheet template and
every field of the registry entry has a row, and every test the register names exists."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REGISTER = (ROOT / "docs" / "claims.md").read_text(encoding="utf-8")
TEMPLATE = (ROOT / "templates" / "datasheet.html.j2").read_text(encoding="utf-8")


def _rows(heading: str) -> list[str]:
    part = REGISTER.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    return [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("|---")][1:]


def test_every_section_of_the_datasheet_template_has_a_row():
    ids = set(re.findall(r'<h[1-3] id="([a-z-]+)"', TEMPLATE))
    assert len(ids) >= 18
    listed = {row.split("|")[1].strip().split(" ")[0] for row in _rows("Datasheet")}
    assert ids - listed == set(), sorted(ids - listed)
    assert "cover" in listed


def test_every_field_of_the_registry_entry_has_a_row():
    from i35_datasheet_util import PRECHANGE

    entry = yaml.safe_load((PRECHANGE / "births-bundle" / "registry-entry.yaml").read_text(encoding="utf-8"))
    fields = set()
    for section, body in entry["deployment"].items():
        for key in body:
            fields.add(f"{section}.{key}")
    text = "\n".join(r.split("|")[1] for r in _rows("registry-entry.yaml"))
    for f in sorted(fields):
        section, key = f.split(".")
        if key == "registry_authors":
            assert "registry_authors" in text
            continue
        assert f in text or (key in text and section in text) or re.search(rf"\b{section}\.\*", text), f


def test_every_test_the_register_names_exists():
    named = set(re.findall(r"`(test_[a-z0-9_]+\.py)(?:::(test_[a-z0-9_]+))?`", REGISTER))
    assert named
    for path, func in named:
        source = (ROOT / "tests" / path)
        assert source.is_file(), path
        if func:
            assert re.search(rf"^def {func}\(", source.read_text(encoding="utf-8"), re.M), f"{path}::{func}"
