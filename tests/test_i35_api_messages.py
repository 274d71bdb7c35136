"""Issue 35: ``release --help`` says what the transcript's default name holds (a random tag, no
time), and an example release states its list's own acceptance cut-off."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.pipeline.driver import list_cut_off

ROOT = Path(__file__).resolve().parents[1]


def test_release_help_says_the_transcript_name_holds_a_random_tag():
    r = CliRunner().invoke(app, ["release", "--help"], terminal_width=1000)
    assert r.exit_code == 0
    text = " ".join(r.output.split())
    assert "random tag" in text
    assert "+ time +" not in text and "name + time" not in text


def test_the_default_transcript_name_matches_the_help(tmp_path):
    """The help's claim: OUT's name, 12 hex digits, .transcript.jsonl."""
    import re

    from dpbundle.release.bundle.write import default_transcript_path

    name = default_transcript_path(tmp_path / "my-bundle").name
    assert re.fullmatch(r"my-bundle\.[0-9a-f]{12}\.transcript\.jsonl", name)


@pytest.mark.parametrize("list_path", sorted((ROOT / "examples").glob("*narrowed*.yaml")), ids=lambda p: p.name)
def test_the_cut_off_is_the_lists_own(list_path):
    cut = yaml.safe_load(list_path.read_text("utf-8"))["min_acceptance"]
    assert list_cut_off(list_path) == f"at least {round(cut * 100)}% of the time"


def test_an_unreadable_list_claims_no_number(tmp_path):
    bad = tmp_path / "list.yaml"
    bad.write_text("format: dpbundle-narrowed/1\nconfigurations: []\n", "utf-8")
    assert "%" not in list_cut_off(bad)
    assert "%" not in list_cut_off(tmp_path / "missing.yaml")


def test_an_example_release_prints_its_lists_cut_off(tmp_path):
    from dpbundle.release.pipeline.request import EXAMPLES

    listed = yaml.safe_load((ROOT / "examples" / EXAMPLES["persons"][1]).read_text("utf-8"))["min_acceptance"]
    r = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out",
                                 str(tmp_path / "b"), "--ledger", str(tmp_path / "ledger.jsonl")],
                           terminal_width=400)
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert f"configurations that passed at least {round(listed * 100)}% of the time" in text
    if listed != 0.1:
        assert "at least 10% of the time" not in text
