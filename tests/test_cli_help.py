"""Every command's help, rendered as a user sees it at 80 columns: examples that can be copied
(never wrapped mid-command), one usage style (arguments in capitals, optional ones in
brackets), no value type shown for flags."""
from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from dpbundle.release.cli.main import app

COMMANDS = [["release"], ["audit"], ["sweep"], ["keygen"], ["example"], ["ledger", "list"],
            ["ledger", "mark"], ["spec", "validate"], ["spec", "space"], ["spec", "explain"],
            ["preregister"], ["sample"], ["selftest"]]
WIDTH = 80


def _help(*args: str) -> str:
    res = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(WIDTH), "TERM": "dumb"},
                             terminal_width=WIDTH)
    assert res.exit_code == 0, res.output
    return res.output


def _example_lines(doc: str) -> list[str]:
    """The lines of the code blocks (indented by 8 spaces in a docstring, 4 in a help string)
    that belong to a `dpbundle ...` command, continuation lines included."""
    out, inside = [], False
    for line in doc.splitlines():
        text = line.strip()
        if text.startswith("dpbundle "):
            inside = True
        if inside and text:
            out.append(text)
        if not text.endswith("\\"):
            inside = False
    return out


def _command(path: list[str]):
    import typer.main

    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]
    return cmd


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_examples_fit_in_80_columns_and_are_not_wrapped(path):
    doc = _command(path).help or ""
    examples = _example_lines(doc)
    assert examples, f"`dpbundle {' '.join(path)} --help` has no example"
    rendered = {line.strip() for line in _help(*path).splitlines()}
    for line in examples:
        assert len(line) <= WIDTH - 4, f"example longer than {WIDTH - 4} characters: {line}"
        assert line in rendered, f"example wrapped or reflowed at {WIDTH} columns: {line}"


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_one_usage_style_and_no_type_on_flags(path):
    text = _help(*path)
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    args = usage.split("[OPTIONS]", 1)[1].split()
    for arg in args:
        assert re.fullmatch(r"\[?[A-Z][A-Z_]*(\.\.\.)?\]?", arg), f"usage argument {arg!r}: {usage}"
    assert "<bool>" not in text


def test_top_level_help_quick_start_is_copyable():
    rendered = {line.strip() for line in _help().splitlines()}
    assert "dpbundle release --example births --out births-bundle" in rendered
    assert "dpbundle audit births-bundle --pubkey births-bundle.demo-key.pub" in rendered
