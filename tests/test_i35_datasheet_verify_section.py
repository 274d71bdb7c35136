"""Issue 35: the datasheet's "How to verify this release" (edition 2) gives the signed-checksum
recipe of README.md, and its own text works: the allowed_signers line it prints is the one
`dpbundle keygen` writes for the key, and its commands, copied from README.html and run with the
real tools, pass on the bundle and fail on a copy whose data.csv was edited and SHA256SUMS
regenerated (the attack the issue reports)."""
from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import test_i35_verify_recipes as recipes
import test_i36_attack_matrix as am
from dpbundle.templates.datasheet.context import STANDARD_TOOL_COMMANDS, allowed_signers_line

released = recipes.released          # the module-scoped release (a fast spec, its own key)
NEEDED = ("bash", "openssl", "ssh-keygen", "sha256sum", "diff")


def _verify_section(bundle: Path) -> tuple[str, list[str]]:
    text = (bundle / "README.html").read_text("utf-8")
    section = text[text.index('id="verify"'):]
    blocks = [html.unescape(b) for b in re.findall(r'<pre class="cmd">(.*?)</pre>', section, re.S)]
    return blocks[0].strip(), [line for line in blocks[1].splitlines() if line.strip()]


def test_the_datasheet_states_readmes_recipe(released):
    _signers, commands = _verify_section(released["bundle"])
    assert commands == list(STANDARD_TOOL_COMMANDS) == recipes.recipe()


def test_the_printed_allowed_signers_line_is_the_keys(released):
    signers, _ = _verify_section(released["bundle"])
    assert signers == released["signers"].read_text().strip()
    assert signers == allowed_signers_line(released["pub"].read_text())
    assert allowed_signers_line("not a key") == ""


@pytest.mark.skipif(any(shutil.which(t) is None for t in NEEDED), reason=f"needs {', '.join(NEEDED)}")
def test_the_datasheets_commands_pass_on_the_bundle_and_fail_on_a_regenerated_list(released, tmp_path):
    signers, commands = _verify_section(released["bundle"])
    shutil.copy(released["pub"], tmp_path / "KEY.pub")
    (tmp_path / "allowed_signers").write_text(signers + "\n")
    script = "set -e\n" + "\n".join(commands) + "\n"

    def run(bundle: Path, only: str | None = None) -> int:
        lines = [c for c in commands if only is None or c.startswith(only)]
        return subprocess.run(["bash", "-c", "set -e\n" + "\n".join(lines)], cwd=bundle,
                              capture_output=True).returncode

    good = tmp_path / "good"
    shutil.copytree(released["bundle"], good)
    assert subprocess.run(["bash", "-c", script], cwd=good, capture_output=True).returncode == 0

    bad = tmp_path / "bad"
    shutil.copytree(released["bundle"], bad)
    am.exchange_two_rows(bad)
    am.regenerate_checksums(bad)
    assert run(bad, "sha256sum") == 0                 # the regenerated list agrees with the edit ...
    assert run(bad, "openssl pkeyutl -verify -pubin -inkey ../KEY.pub -rawin -in SHA256SUMS") != 0
    assert run(bad, "ssh-keygen") != 0                # ... but neither signature covers it
    assert subprocess.run(["bash", "-c", script], cwd=bad, capture_output=True).returncode != 0
