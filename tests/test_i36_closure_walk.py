"""The closure rule's classification (issue 36): every file and every field of real bundles (the
births and persons examples, a pre-registered release with ``publish: model``, the two 0.2.0
bundles of tests/data/prechange) is classified by a row of ``audit/closure.py``'s table, and
docs/audit.md's section is that table. A file or field added later without a row fails here."""
from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i36_closure_util as cu  # noqa: E402

from dpbundle.audit.closure import BINDINGS, RULES, classify, field_paths, markdown_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PRECHANGE = ROOT / "tests" / "data" / "prechange"


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("closure-walk")
    return {"births": cu.release_example(where, "births")["bundle"],
            "persons": cu.release_example(where, "persons")["bundle"],
            "preregistered": cu.release_preregistered(where / "pre")["bundle"],
            "prechange-births": PRECHANGE / "births-bundle", "prechange-persons": PRECHANGE / "persons-bundle"}


def fields_of(path: Path) -> list[str]:
    """The fields of one bundle file: JSON/YAML leaf paths, CSV ``column:NAME``; none otherwise."""
    name = path.name
    if name.endswith(".json"):
        return list(field_paths(json.loads(path.read_text("utf-8"))))
    if name.endswith(".yaml"):
        return list(field_paths(yaml.safe_load(path.read_text("utf-8"))))
    if name.endswith(".csv"):
        header = next(csv.reader(io.StringIO(path.read_text("utf-8"))))
        return [f"column:{c}" for c in header]
    return []


def unclassified(bundle: Path) -> list[str]:
    """Every file and field of ``bundle`` that no row of the table classifies."""
    out = []
    for path in sorted(bundle.iterdir()):
        if classify(path.name) is None and not any(r.file == path.name for r in RULES):
            out.append(path.name)
            continue
        out += [f"{path.name}: {f}" for f in fields_of(path) if classify(path.name, f) is None]
    return out


@pytest.mark.parametrize("which", ["births", "persons", "preregistered", "prechange-births", "prechange-persons"])
def test_every_file_and_field_is_classified(bundles, which):
    bundle = bundles[which]
    assert unclassified(bundle) == []
    # the walk is not vacuous: it saw the files and fields
    assert len([f for p in bundle.iterdir() for f in fields_of(p)]) > 100


def test_the_walk_fails_on_a_file_or_field_without_a_row(bundles, tmp_path):
    import shutil

    d = tmp_path / "b"
    shutil.copytree(bundles["births"], d)
    cu.edit_json(d / "budget.json", lambda b: b.update(privacy_definition="pure DP"))
    cu.edit_json(d / "metrics.json", lambda m: m["criteria"][0].update(note="added later"))
    (d / "notes.txt").write_text("x")
    assert unclassified(d) == ["budget.json: privacy_definition", "metrics.json: criteria[].note", "notes.txt"]


def test_every_row_has_a_known_binding_and_is_unique():
    assert all(r.binding in BINDINGS and (r.otherwise is None or r.otherwise in BINDINGS) for r in RULES)
    assert len({(r.file, r.field) for r in RULES}) == len(RULES)


def test_docs_audit_md_states_the_table():
    text = (ROOT / "docs" / "audit.md").read_text("utf-8")
    assert "## The closure rule" in text
    assert markdown_table() in text, "regenerate the table: python -m dpbundle.audit.closure"
