"""Spec parsing is untrusted input (issue 12): alias bombs, duplicate keys, deep nesting, line and
column in every error, and an epsilon ceiling with a plain-words datasheet.

Every refusal goes through ``load_spec`` (the path of ``spec validate``, ``release`` and
``sweep``) and through the CLI: exit code 2, one paragraph naming the file, line, column and the
rule, no traceback. The time of the refusals is measured by benchmarks/bench_spec_hostile.py,
not here.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.spec.load import EPSILON_CEILING, SpecError, load_spec, validate_spec
from dpbundle.release.spec.yaml_text import MAX_ALIAS_NODES, MAX_DEPTH, load_json, load_yaml

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"
PERSONS = ROOT / "examples" / "persons.yaml"


@pytest.fixture(scope="module")
def app():
    from dpbundle.release.cli.main import app

    return app


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def _births_text() -> str:
    return BIRTHS.read_text("utf-8")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _refused(runner, app, *args) -> str:
    """Run the CLI; it must exit 2 with a one-paragraph message and no traceback. Returns stderr, flattened."""
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an uncaught exception
    err = result.stderr
    assert "Traceback" not in err and "Traceback" not in result.stdout
    assert "\n\n" not in err.strip(), err  # one paragraph
    return _flat(err)


def _location_of(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """(line, column) from 1 of the occurrence-th ``needle`` in ``text``."""
    at = -1
    for _ in range(occurrence):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def billion_laughs(levels: int = 10, width: int = 10) -> str:
    lines = ["dpbundle_spec: 1", 'lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels + 1):
        lines.append(f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * width) + "]")
    lines.append(f"release: *lol{levels}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- aliases


def test_billion_laughs_is_refused_by_the_alias_rule(tmp_path, runner, app):
    text = billion_laughs()
    path = _write(tmp_path, "laughs.yaml", text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert "alias" in problem and f"{MAX_ALIAS_NODES:,}" in problem
    # lol0 is 11 nodes, lol1 111, lol2 1,111: aliases add 110 + 1,110 for lol1 and lol2, then
    # 1,111 per *lol2 inside lol3, so its 8th *lol2 (line 5) crosses 10,000
    line, column = info.value.locations[0]
    assert line == 5 and text.splitlines()[4].startswith("lol3: &lol3 [")
    assert column == len("lol3: &lol3 [") + 1 + 7 * len("*lol2, ")
    assert text.splitlines()[line - 1][column - 1:].startswith("*lol2")
    err = _refused(runner, app, "spec", "validate", path)
    assert str(path) in err and f"line {line}, column {column}" in err and "alias" in err


def test_billion_laughs_in_a_subprocess_is_refused_not_left_running(tmp_path):
    """The real thing through the console script: exit 2 and no traceback. The timeout is a guard
    against the old behaviour (minutes at full CPU), not a speed test (see the benchmark)."""
    exe = Path(sys.executable).with_name("dpbundle")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-c", "from dpbundle.release.cli import main; main()"]
    path = _write(tmp_path, "laughs.yaml", billion_laughs())
    proc = subprocess.run(cmd + ["spec", "validate", str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "alias" in proc.stderr


def test_a_moderate_alias_bomb_is_refused_before_validation(tmp_path):
    # 5 levels of 10: 111,110 nodes once written out; the old loader built it and the schema
    # walked every node (and reported unknown fields instead)
    path = _write(tmp_path, "bomb.yaml", billion_laughs(levels=5))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert len(info.value.problems) == 1 and "alias" in info.value.problems[0]


def test_recursive_alias_is_refused(tmp_path, runner, app):
    path = _write(tmp_path, "self.yaml", "dpbundle_spec: 1\nrelease: &r [1, *r]\n")
    err = _refused(runner, app, "spec", "validate", path)
    assert "line 2, column 17" in err and "recursive" in err  # the *r


def test_small_aliases_are_allowed_and_mean_the_written_out_values(tmp_path):
    text = _births_text()
    for example in (BIRTHS, PERSONS):  # the examples use no anchors or aliases
        events = list(yaml.parse(example.read_text("utf-8")))
        assert not any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) for e in events)
    anchored = text.replace("\nprivacy:\n", "\nprivacy: &priv\n", 1)
    anchored += "x_unused_check: *priv\n"
    doc, _ = load_yaml(anchored)
    assert doc["x_unused_check"] == doc["privacy"] == yaml.safe_load(text)["privacy"]


def test_alias_budget_counts_written_out_nodes():
    items = MAX_ALIAS_NODES // 2 - 1  # a list of `items` scalars is items + 1 nodes
    base = "a: &a [" + ", ".join(["0"] * items) + "]\n"
    doc, _ = load_yaml(base + "b: *a\nc: *a\n")  # 2 x (items + 1) = MAX_ALIAS_NODES: allowed
    assert len(doc["c"]) == items
    with pytest.raises(ValueError, match="alias"):
        load_yaml(base + "b: *a\nc: *a\nd: [*a]\n")


def test_merge_keys_are_refused(tmp_path, runner, app):
    path = _write(tmp_path, "merge.yaml", "base: &b {epsilon_cap: 10}\nprivacy:\n  <<: *b\n  epsilon_cap: 100\n")
    err = _refused(runner, app, "spec", "validate", path)
    assert "line 3, column 3" in err and "merge key" in err


# --------------------------------------------------------------------------- duplicate keys


def test_appended_privacy_section_is_refused_with_both_lines(tmp_path, runner, app):
    text = _births_text()
    first = _location_of(text, "\nprivacy:")[0] + 1
    appended = text + "privacy:\n  epsilon_generation: 49\n  epsilon_cap: 100\n"
    second = appended.count("\n", 0, appended.rindex("\nprivacy:") + 1) + 1
    path = _write(tmp_path, "dup.yaml", appended)
    # the old loader kept the second section: a valid spec with total 99.98 under the cap of 100
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.locations == [(second, 1)]
    assert f"first given at line {first}, column 1" in info.value.problems[0]
    err = _refused(runner, app, "spec", "validate", path)
    assert f"{path}" in err and f"line {second}, column 1: privacy: duplicate key 'privacy'" in err
    assert "each key may appear only once" in err


def test_nested_duplicate_key_is_refused(tmp_path):
    text = _births_text().replace("  epsilon_cap: 10.0\n", "  epsilon_cap: 10.0\n  epsilon_cap: 100.0\n", 1)
    path = _write(tmp_path, "dup2.yaml", text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.problems[0].startswith("privacy.epsilon_cap: duplicate key 'epsilon_cap'")
    assert info.value.locations[0] == _location_of(text, "epsilon_cap: 100.0")


def test_duplicate_in_a_flow_mapping_and_keys_equal_as_json(tmp_path):
    with pytest.raises(ValueError, match="duplicate key"):
        load_yaml("a: {x: 1, y: 2, x: 3}\n")
    with pytest.raises(ValueError, match="duplicate key"):
        load_yaml('map: {1: a, "1": b}\n')  # both become "1" in spec.json


def test_duplicate_key_in_json_is_refused(tmp_path, runner, app, births_doc):
    text = json.dumps(births_doc, indent=1)
    text = text.replace('"epsilon_cap": 10.0', '"epsilon_cap": 10.0,\n  "epsilon_cap": 100.0', 1)
    path = _write(tmp_path, "dup.json", text)
    err = _refused(runner, app, "spec", "validate", path)
    line, column = _location_of(text, '"epsilon_cap": 100.0')
    assert f"line {line}, column {column}: privacy.epsilon_cap: duplicate key" in err


# --------------------------------------------------------------------------- nesting depth


@pytest.mark.parametrize("name,text", [
    ("deep.yaml", "dpbundle_spec: 1\nrelease: " + "[" * 100_000 + "]" * 100_000 + "\n"),
    ("deep.json", '{"dpbundle_spec": 1, "release": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
    ("deep-block.yaml", "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "v: 1\n"),
])
def test_deep_nesting_is_refused_without_recursion_error(tmp_path, runner, app, name, text):
    path = _write(tmp_path, name, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "nesting deeper than" in info.value.problems[0]
    assert info.value.locations[0] is not None
    err = _refused(runner, app, "spec", "validate", path)
    assert f"nesting deeper than {MAX_DEPTH} levels" in err and str(path) in err and "line" in err


def test_depth_limit_is_exact():
    def nested(levels: int) -> str:  # the root mapping is level 1, its value level 2, ...
        return "x: " + "[" * (levels - 2) + "0" + "]" * (levels - 2) + "\n"

    load_yaml(nested(MAX_DEPTH))
    load_json(json.dumps(yaml.safe_load(nested(MAX_DEPTH))))
    with pytest.raises(ValueError, match="nesting"):
        load_yaml(nested(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nesting"):
        load_json(json.dumps(yaml.safe_load(nested(MAX_DEPTH + 1))))


def test_huge_integer_is_an_input_error(tmp_path, runner, app):
    path = _write(tmp_path, "int.yaml", "dpbundle_spec: " + "1" * 5000 + "\n")
    err = _refused(runner, app, "spec", "validate", path)
    assert "line 1, column 16" in err and "integer" in err


# --------------------------------------------------------------------------- line and column


def test_semantic_error_has_line_and_column(tmp_path, runner, app):
    text = _births_text()
    entry = text.index("id: mean_weight")
    at = text.index("by: [birth_sex", entry) + len("by: [")
    text = text[:at] + "sexx" + text[at + len("birth_sex"):]
    path = _write(tmp_path, "typo.yaml", text)
    err = _refused(runner, app, "spec", "validate", path)
    line, column = _location_of(text, "sexx")
    assert f"line {line}, column {column}: acceptance[3].by[0]: unknown released column 'sexx'" in err


def test_schema_errors_point_at_the_value_the_key_or_the_mapping(tmp_path):
    text = _births_text()
    text = text.replace("epsilon_generation: 4.0", "epsilon_generation: -4.0", 1)
    text = text.replace("  licence:", "  license:", 1)
    path = _write(tmp_path, "schema.yaml", text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    where = dict(zip(info.value.problems, info.value.locations))
    eps = next(p for p in where if p.startswith("privacy.epsilon_generation:"))
    line, column = _location_of(text, "epsilon_generation: -4.0")
    assert where[eps] == (line, column + len("epsilon_generation: "))  # a value on its key's line: the value
    release = [p for p in where if p.startswith("release:")]
    assert release and all(where[p] == _location_of(text, "release:") for p in release)  # a block: its key
    rendered = str(info.value)
    assert rendered.startswith(f"{path}: invalid release spec")
    assert f"line {line}, column {column + len('epsilon_generation: ')}: privacy.epsilon_generation:" in rendered


def test_json_spec_errors_have_line_and_column(tmp_path, births_doc):
    births_doc["acceptance"][2]["threshold"] = -1
    text = json.dumps(births_doc, indent=1)
    path = _write(tmp_path, "t.json", text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = [p for p in info.value.problems if p.startswith("acceptance[2].threshold")]
    assert text.count('"threshold": -1') == 1
    # a JSON object member is located at its key
    assert info.value.locations[info.value.problems.index(problem)] == _location_of(text, '"threshold": -1')


def test_syntax_error_has_line_and_column(tmp_path, runner, app):
    path = _write(tmp_path, "bad.yaml", "dpbundle_spec: 1\nrelease: {title: [unclosed\n")
    err = _refused(runner, app, "spec", "validate", path)
    assert re.search(r"line \d+, column \d+: \(file\): not valid YAML", err)


def test_validating_a_dict_still_works_without_locations(births_doc):
    births_doc["privacy"]["epsilon_generation"] = 0
    with pytest.raises(SpecError) as info:
        validate_spec(births_doc)
    assert all(at is None for at in info.value.locations)
    assert "line" not in str(info.value).split("\n", 1)[1].split(":", 1)[0]


# --------------------------------------------------------------------------- epsilon ceiling


def _huge_epsilon_text() -> str:
    text = _births_text()
    assert "epsilon_generation: 4.0" in text and "epsilon_cap: 10.0" in text
    return text.replace("epsilon_generation: 4.0", "epsilon_generation: 400000000.0").replace(
        "epsilon_cap: 10.0", "epsilon_cap: 1000000000.0")


def test_epsilon_8e8_is_refused_without_acknowledgement(tmp_path, runner, app):
    text = _huge_epsilon_text()
    path = _write(tmp_path, "eps.yaml", text)
    err = _refused(runner, app, "spec", "validate", path)
    line = _location_of(text, "\nprivacy:")[0] + 1
    assert f"line {line}, column 1: privacy: total epsilon" in err
    assert "800000001.98" in err and f"ceiling of {EPSILON_CEILING}" in err
    assert "acknowledge_weak_guarantee: true" in err


def test_epsilon_above_the_ceiling_is_accepted_when_acknowledged(tmp_path):
    text = _huge_epsilon_text().replace("epsilon_cap: 1000000000.0",
                                        "epsilon_cap: 1000000000.0\n  acknowledge_weak_guarantee: true")
    spec = load_spec(_write(tmp_path, "ack.yaml", text))
    assert spec.total_epsilon == pytest.approx(800000001.98)


def test_ceiling_boundary(births_doc):
    births_doc["privacy"]["epsilon_cap"] = 30
    births_doc["privacy"]["records"] = {"policy": "declared_public"}
    births_doc["privacy"]["epsilon_generation"] = 9.01  # 2 x (9.01 + 0.99) = 20 exactly: allowed
    assert validate_spec(births_doc).total_epsilon == pytest.approx(20)
    births_doc["privacy"]["epsilon_generation"] = 9.02  # 20.02
    with pytest.raises(SpecError) as info:
        validate_spec(births_doc)
    assert info.value.problems[0].startswith("privacy: total epsilon") and "ceiling" in info.value.problems[0]
    births_doc["privacy"]["acknowledge_weak_guarantee"] = False  # only true acknowledges
    with pytest.raises(SpecError):
        validate_spec(births_doc)


@pytest.mark.parametrize("path", [BIRTHS, PERSONS])
def test_examples_validate_below_the_weak_threshold(path):
    from dpbundle.release.spec.load import WEAK_GUARANTEE_EPSILON

    spec = load_spec(path)
    assert spec.total_epsilon <= WEAK_GUARANTEE_EPSILON


def _datasheet_html(total: float, acknowledged: bool = False) -> str:
    from dpbundle.release.bundle import datasheet
    from dpbundle.release.bundle import keys
    from test_bundle import fake_release

    rel = fake_release()
    budget = dict(rel["budget"], total_epsilon=total)
    spec = json.loads(json.dumps(rel["spec"]))
    if acknowledged:
        spec.setdefault("privacy", {})["acknowledge_weak_guarantee"] = True
    from datasheet_util import context_of

    context = context_of(rel, spec=spec, budget=budget, files=["data.csv"])
    return _flat(re.sub(r"<[^>]+>", "", datasheet.render_html(context)))


def test_datasheet_says_plainly_when_the_guarantee_is_weak():
    weak = _datasheet_html(800000001.98, acknowledged=True)
    assert "Weak protection: ε is above 10" in weak.replace("&epsilon;", "ε")
    assert "The protection is weak." in weak
    assert "acknowledges the weak guarantee" in weak
    assert "hardly depends on any single record" not in weak
    assert "So what anyone can learn about you from the release is limited" not in weak
    assert "acknowledges" not in _datasheet_html(12.5)  # above 10 without acknowledgement: weak, not acknowledged
    assert "The protection is weak." in _datasheet_html(12.5)


def test_datasheet_of_a_normal_budget_is_unchanged():
    normal = _datasheet_html(9.98)
    assert "The protection is weak" not in normal and "Weak protection" not in normal
    assert "hardly depends on any single record" in normal


# --------------------------------------------------------------------------- every command, one loader


def test_release_and_sweep_refuse_through_the_same_loader(tmp_path, runner, app):
    appended = _births_text() + "privacy:\n  epsilon_generation: 49\n  epsilon_cap: 100\n"
    spec = _write(tmp_path, "dup.yaml", appended)
    data = _write(tmp_path, "public.csv", "mother_age\n30\n")
    err = _refused(runner, app, "release", spec, data, "--out", tmp_path / "bundle", "--key", tmp_path / "nokey")
    assert "duplicate key 'privacy'" in err and "line" in err
    assert not (tmp_path / "bundle").exists()
    err = _refused(runner, app, "sweep", spec, data, "--out", tmp_path / "sweep")
    assert "duplicate key 'privacy'" in err and "line" in err
    laughs = _write(tmp_path, "laughs.yaml", billion_laughs())
    for args in (("release", laughs, data, "--out", tmp_path / "b2", "--key", tmp_path / "nokey"),
                 ("sweep", laughs, data, "--out", tmp_path / "s2"),
                 ("spec", "explain", laughs), ("spec", "space", laughs)):
        assert "alias" in _refused(runner, app, *args)
