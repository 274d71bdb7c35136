"""Issue 21, section 5: spec language found rough on the census table.

1. A category that a raw constraint always removes (one single ``==`` / ``in`` condition on its
   column) need not be mapped by any alternative; release, enclave replay and ``spec explain``
   agree. Any other unmapped category is refused with the value, the columns, the alternative
   and both clean routes.
2. ``group_bins`` edges written as labels: the message says that edges must be numbers, at the
   JSON path and line/column of the first label.
3. ``spec validate --data`` prints how many plausible records each synthetic constraint would
   remove, per binning of its columns; ``release`` never does.
"""
from __future__ import annotations

import copy
import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.audit.labels import build_view
from dpbundle.audit.private_data import PrivateDataError, PrivateTable, always_removed, bin_private, load_private
from dpbundle.release.cli.main import app
from dpbundle.release.data.prepare import prepare
from dpbundle.release.spec.load import SpecError, load_spec, removed_categories, validate_spec
from dpbundle.release.data.transform import code_column, synthetic_constraint_hits, transform

ROOT = Path(__file__).resolve().parents[1]

CONFIG = {"columns": {"age": "years", "origin": "two", "sex": "sex"},
          "generator": {"type": "privbayes", "flavour": "theta", "epsilon_split": 0.5, "theta": 4},
          "projection": {"min_count": 2}}


def census_doc() -> dict:
    """A census-like spec: origin has an 'unknown' category that a raw constraint removes."""
    return {
        "dpbundle_spec": 1,
        "release": {"title": "t", "publisher": "p", "contact": "c", "licence": "CC0",
                    "description": "d", "unit_of_privacy": "one person"},
        "input": {"columns": [
            {"name": "age", "type": "integer", "min": 0, "max": 99},
            {"name": "origin", "type": "category", "categories": ["home", "abroad", "unknown"]},
            {"name": "sex", "type": "category", "categories": [1, 2, 9]},
        ]},
        "raw_constraints": [
            {"name": "origin unknown", "when": [["origin", "==", "unknown"]]},
            {"name": "sex not stated", "when": [["sex", "in", [9]]]},
        ],
        "columns": [
            {"name": "age", "source": {"column": "age"},
             "alternatives": [{"id": "years", "clip": [15, 30], "unit_bins": [15, 30]},
                              {"id": "bands", "clip": [15, 30], "edges": [15, 20, 25, 31]}]},
            {"name": "origin", "source": {"column": "origin", "derive": "category"},
             "alternatives": [{"id": "two", "categories": ["home", "abroad"]},
                              {"id": "mapped", "categories": ["home", "abroad"], "labels": ["domestic", "foreign"],
                               "map": {"home": "home", "abroad": "abroad"}}]},
            {"name": "sex", "source": {"column": "sex", "derive": "category"},
             "alternatives": [{"id": "sex", "categories": ["m", "f"], "map": {"1": "m", "2": "f"}}]},
        ],
        "synthetic_constraints": [
            {"name": "under 18 and abroad", "when": [["age", "<", 18], ["origin", "==", "abroad"]]},
            {"name": "under 23, female", "when": [["age", "<", 23], ["sex", "==", "f"]]},
        ],
        "generators": [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.5], "theta": [4]}}],
        "projection": {"min_count": [2]},
        "acceptance": [{"id": "kway", "type": "kway_marginals", "threshold": 1.0, "epsilon": 0.1}],
        "privacy": {"epsilon_generation": 1.0, "epsilon_cap": 10.0, "records": {"policy": "declared_public"}},
    }


def problems_of(doc: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_spec(doc)
    return info.value.problems


# ----------------------------------------------------------------- 1. removed categories

def test_a_category_a_raw_constraint_removes_needs_no_map():
    """Old code: "input category 'unknown' maps to 'unknown', which is not among the categories"."""
    spec = validate_spec(census_doc())
    assert removed_categories(spec.raw) == {"origin": frozenset({"unknown"}), "sex": frozenset({"9"})}


def test_in_removes_every_listed_category():
    doc = census_doc()
    doc["raw_constraints"][0]["when"] = [["origin", "in", ["unknown", "abroad"]]]
    doc["columns"][1]["alternatives"] = [{"id": "home", "categories": ["home"]}]
    doc["synthetic_constraints"] = doc["synthetic_constraints"][1:]
    validate_spec(doc)
    assert removed_categories(doc)["origin"] == {"unknown", "abroad"}


def _unmapped_problem(doc: dict) -> str:
    found = [p for p in problems_of(doc) if "'unknown'" in p and "no released category" in p]
    assert len(found) == 2, problems_of(doc)  # both alternatives of origin
    return found[0]


@pytest.mark.parametrize("when", [
    [["origin", "==", "unknown"], ["age", "<", 18]],   # conjunction: keeps the adults with 'unknown'
    [["origin", "not in", ["home", "abroad"]]],          # names the values it keeps
    [["origin", "!=", "home"]],
])
def test_only_a_single_eq_or_in_condition_counts_as_removing(when):
    doc = census_doc()
    doc["raw_constraints"][0]["when"] = when
    assert "origin" not in removed_categories(doc)
    assert "origin" not in always_removed(doc)
    problem = _unmapped_problem(doc)
    # the value, the input column, the released column and the alternative
    assert problem.startswith("columns[1].alternatives[0]: input category 'unknown' of input column 'origin'")
    assert "alternative 'two' of column 'origin'" in problem
    # both routes: map it, or a missing marker dropped by any_missing
    assert "map it" in problem and "default" in problem
    assert "missing: ['unknown']" in problem and "{name: missing value, any_missing: true}" in problem


def test_unmapped_category_error_names_line_and_column(tmp_path):
    doc = census_doc()
    doc["raw_constraints"] = doc["raw_constraints"][1:]
    text = yaml.safe_dump(doc, sort_keys=False)
    path = tmp_path / "census.yaml"
    path.write_text(text, "utf-8")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    first = next(i for i, p in enumerate(info.value.problems) if "'unknown'" in p)
    line, column = info.value.locations[first]
    assert "id: two" in text.splitlines()[line - 1]
    assert "alternative 'mapped' of column 'origin'" in info.value.problems[first + 1]


def test_release_and_enclave_replay_agree_on_removed_categories(tmp_path):
    """Old code: validation refused the spec; the audit's own lookup raised on 'unknown'."""
    rows = [("17", "home", "1"), ("20", "unknown", "2"), ("22", "abroad", "2"), ("29", "home", "9"),
            ("16", "abroad", "1"), ("40", "home", "2")]
    path = tmp_path / "census.csv"
    _write(path, rows)
    doc = census_doc()
    spec = validate_spec(doc)
    for alternative in ("two", "mapped"):
        config = copy.deepcopy(CONFIG)
        config["columns"]["origin"] = alternative
        prepared = prepare(path, spec)
        assert prepared.n == 4 and dict(prepared.dropped_by) == {"origin unknown": 1, "sex not stated": 1}
        coded = transform(prepared, spec, config)
        table = load_private(path, doc)
        view = build_view({"spec": doc, "configuration": config, "configuration_id": ""})
        codes, _ = bin_private(table, view)
        np.testing.assert_array_equal(codes, coded.codes)
        assert [c.labels for c in view.columns] == [c.labels for c in coded.columns]
    assert list(coded.labels_frame()["origin"]) == ["domestic", "foreign", "foreign", "domestic"]


def test_a_removed_category_that_reaches_the_map_is_an_error_on_both_sides():
    """Never on prepared data; a table built by hand must not be coded silently."""
    spec = validate_spec(census_doc())
    table = {"age": np.array([20.0, 21.0]), "origin": np.array([0, 2]), "sex": np.array([0, 1])}
    with pytest.raises(ValueError, match="raw constraint removes") as info:
        code_column(spec, "origin", "two", table)
    assert "unknown" not in str(info.value)  # no private value named
    doc = census_doc()
    view = build_view({"spec": doc, "configuration": CONFIG, "configuration_id": ""})
    private = PrivateTable(values={"age": np.array([20.0, 21.0]), "origin": np.array([0.0, 2.0]),
                                   "sex": np.array([0.0, 1.0])},
                           months={}, years={}, days={}, kinds={"age": "integer", "origin": "category",
                                                                "sex": "category"}, n=2, rows_read=2)
    with pytest.raises(PrivateDataError, match="raw constraint removes"):
        bin_private(private, view)


def test_a_dummy_mapping_still_validates_and_is_used():
    """Specs that mapped the removed category (the old workaround) keep working unchanged."""
    doc = census_doc()
    doc["columns"][1]["alternatives"][0]["map"] = {"unknown": "home"}
    spec = validate_spec(doc)
    table = {"age": np.array([20.0]), "origin": np.array([2]), "sex": np.array([0])}
    assert list(code_column(spec, "origin", "two", table)) == [0]


def test_spec_explain_says_removed_categories_need_no_map(tmp_path):
    path = tmp_path / "census.yaml"
    path.write_text(yaml.safe_dump(census_doc()), "utf-8")
    r = CliRunner().invoke(app, ["spec", "explain", str(path)], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "input categories [unknown] are removed by raw constraints and need no map" in out
    assert "input categories [9] are removed by raw constraints and need no map" in out


# ----------------------------------------------------------------- 2. group_bins edges

def _births_with_group_bins(tmp_path: Path, line: str) -> tuple[Path, str]:
    text = (ROOT / "examples" / "births.yaml").read_text("utf-8")
    old = '  mother_age: {edges: [25, 30, 35], labels: ["<25", "25-29", "30-34", "35+"]}'
    assert old in text
    text = text.replace(old, line)
    path = tmp_path / "births.yaml"
    path.write_text(text, "utf-8")
    return path, text


def _refusal(path: Path) -> tuple[str, tuple[int, int]]:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert len(info.value.problems) == 1, info.value.problems
    return info.value.problems[0], info.value.locations[0]


@pytest.mark.parametrize("line,path_,first", [
    ('  mother_age: {edges: ["<25", "25-29", "30-34"], labels: ["<25", "25-29", "30-34", "35+"]}',
     "group_bins.mother_age.edges[0]", '"<25", "25-29", "30-34"]'),
    ('  mother_age: {edges: [25, "30", 35], labels: ["<25", "25-29", "30-34", "35+"]}',
     "group_bins.mother_age.edges[1]", '"30", 35]'),
    ('  mother_age: {per_alternative: {coarse: {edges: ["<25"], labels: ["<25", "25+"]}}}',
     "group_bins.mother_age.per_alternative.coarse.edges[0]", '"<25"], labels'),
])
def test_group_bins_edges_written_as_labels(tmp_path, line, path_, first):
    """Old message: 'group_bins.mother_age: unknown field 'edges', 'labels' (allowed: per_alternative)'."""
    path, text = _births_with_group_bins(tmp_path, line)
    problem, (ln, col) = _refusal(path)
    assert problem.startswith(path_ + ": group_bins edges must be numbers"), problem
    assert "unknown field" not in problem
    written = text.splitlines()[ln - 1]
    assert written == line and written[col - 1:].startswith(first), (ln, col)


def test_group_bins_edges_not_a_list(tmp_path):
    path, _ = _births_with_group_bins(tmp_path, '  mother_age: {edges: "25, 30", labels: [a, b, c]}')
    problem, _ = _refusal(path)
    assert problem.startswith("group_bins.mother_age.edges: group_bins edges must be numbers"), problem


def test_group_bins_labels_without_edges(tmp_path):
    path, _ = _births_with_group_bins(tmp_path, '  mother_age: {labels: ["<25", "25-29", "30-34", "35+"]}')
    problem, _ = _refusal(path)
    assert problem.startswith("group_bins.mother_age: missing required field 'edges'"), problem
    assert "edges must be numbers" in problem


def test_group_bins_edges_in_a_json_spec(tmp_path):
    doc = yaml.safe_load((ROOT / "examples" / "births.yaml").read_text("utf-8"))
    doc["group_bins"]["parity"]["edges"] = ["2-3", "4+"]
    text = json.dumps(doc, indent=1)
    path = tmp_path / "births.json"
    path.write_text(text, "utf-8")
    problem, (ln, col) = _refusal(path)
    assert problem.startswith("group_bins.parity.edges[0]: group_bins edges must be numbers"), problem
    assert text.splitlines()[ln - 1][col - 1:].startswith('"2-3"')


def test_other_oneof_messages_keep_their_meaning():
    """The branch choice only changes the report when one branch fits the instance's fields."""
    doc = census_doc()
    doc["raw_constraints"][0] = {"name": "x"}
    assert any(p.startswith("raw_constraints[0]: missing required field") for p in problems_of(doc))
    doc = census_doc()
    doc["acceptance"][0]["threshold"] = "0.1"
    assert any(p.startswith("acceptance[0].threshold:") for p in problems_of(doc))


# ----------------------------------------------------------------- 3. spec validate --data

def _write(path: Path, rows) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["age", "origin", "sex"])
        w.writerows(rows)


# #0 "under 18 and abroad": under 'years' the bins '<16', '16', '17' lie below 18; under 'bands'
# the first bin '<20' also holds 18 and 19, so no bin does. #1 "under 23, female": 'years' up to
# '22'; 'bands' only '<20' ('20-24' holds 23 and 24).
HIT_ROWS = [("16", "abroad", "1"),   # #0 under years
            ("17", "abroad", "2"),   # #0 under years; #1 under both
            ("19", "home", "2"),     # #1 under both
            ("22", "home", "2"),     # #1 under years only
            ("25", "abroad", "2"),   # neither
            ("28", "unknown", "2"),  # removed by the raw constraints
            ("14", "abroad", "9")]   # removed by the raw constraints


def test_synthetic_constraint_hits_per_binning(tmp_path):
    path = tmp_path / "census.csv"
    _write(path, HIT_ROWS)
    spec = validate_spec(census_doc())
    prepared = prepare(path, spec)
    assert prepared.n == 5
    hits = {(h.index, h.binning): h.removed for h in synthetic_constraint_hits(prepared, spec)}
    assert hits == {
        (0, (("age", "years"), ("origin", "two"))): 2,
        (0, (("age", "years"), ("origin", "mapped"))): 2,
        (0, (("age", "bands"), ("origin", "two"))): 0,
        (0, (("age", "bands"), ("origin", "mapped"))): 0,
        (1, (("age", "years"), ("sex", "sex"))): 3,
        (1, (("age", "bands"), ("sex", "sex"))): 2,
    }


def test_spec_validate_data_prints_the_synthetic_constraint_table(tmp_path):
    doc = census_doc()
    doc["synthetic_constraints"] = doc["synthetic_constraints"][1:]  # names sex only: one alternative
    spec_path = tmp_path / "census.yaml"
    spec_path.write_text(yaml.safe_dump(doc), "utf-8")
    data = tmp_path / "census.csv"
    _write(data, HIT_ROWS)
    r = CliRunner().invoke(app, ["spec", "validate", str(spec_path), "--data", str(data)],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    out = r.output
    assert "Synthetic constraints on the real plausible records" in out and "PRIVATE" in out
    years = next(ln for ln in out.splitlines() if "age: years, sex: sex" in ln)
    bands = next(ln for ln in out.splitlines() if "age: bands, sex: sex" in ln)
    assert "[0] under 23, female" in years
    assert re.search(r"│\s+3 │\s+60\.00% │", years), years
    assert re.search(r"│\s+2 │\s+40\.00% │", bands), bands
    assert "probably wrong" in " ".join(out.split())
    r = CliRunner().invoke(app, ["spec", "validate", str(spec_path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "Synthetic constraints on the real" not in r.output


def test_spec_validate_help_mentions_the_synthetic_counts():
    r = CliRunner().invoke(app, ["spec", "validate", "--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0
    assert "synthetic constraint" in " ".join(r.output.split())


def test_only_spec_validate_computes_the_synthetic_counts():
    """`release` must not print these private counts: nothing but the spec validate command
    (release/cli/spec.py) calls the function."""
    users = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "release").rglob("*.py"))
             if "synthetic_constraint_hits" in p.read_text("utf-8")]
    assert users == ["release/cli/spec.py", "release/data/transform.py"]
    cli = (ROOT / "release" / "cli" / "spec.py").read_text("utf-8")
    assert cli.count("_print_synthetic_hits(") == 2  # its definition and the call in spec_validate
    call = cli.index("    _print_synthetic_hits(prepared, s)")
    assert cli[cli.rfind("\ndef ", 0, call):].startswith("\ndef spec_validate(")


def test_many_binnings_are_summarised(tmp_path, monkeypatch):
    from dpbundle.release.data import transform as transform_module

    spec_path = tmp_path / "census.yaml"
    spec_path.write_text(yaml.safe_dump(census_doc()), "utf-8")
    data = tmp_path / "census.csv"
    _write(data, HIT_ROWS)
    monkeypatch.setattr(transform_module, "MAX_LISTED_BINNINGS", 1)
    # the table's rows are read below: a console wide enough that no cell wraps, whatever the
    # width the CLI's console found when it was created (80 in a pytest-xdist worker)
    from rich.console import Console

    from dpbundle.release.cli import spec as cli_spec

    monkeypatch.setattr(cli_spec, "console", Console(width=200))
    r = CliRunner().invoke(app, ["spec", "validate", str(spec_path), "--data", str(data)],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    fewest = next(ln for ln in lines if "[0] under 18 and abroad" in ln)
    assert "fewest: age: bands, origin: two" in fewest and re.search(r"│\s+0 │\s+0\.00% │", fewest)
    most = lines[lines.index(fewest) + 1]
    assert "most: age: years, origin: two" in most and re.search(r"│\s+2 │\s+40\.00% │", most)
    assert "(4 binnings in all)" in lines[lines.index(fewest) + 2]
    monkeypatch.setattr(transform_module, "MAX_EVALUATED_BINNINGS", 3)
    r = CliRunner().invoke(app, ["spec", "validate", str(spec_path), "--data", str(data)],
                           env={"COLUMNS": "200"})
    assert "(the first 3 of 4 binnings)" in r.output


# ------------------------------------------------------------------ the audit's size bounds


def test_a_spec_beyond_the_audits_bounds_is_refused_before_release():
    """A bundle beyond audit/bounds.py would fail its own public audit: the spec is refused."""
    import copy

    import yaml

    from dpbundle.release.spec.load import SIZE_LIMITS, SpecError, validate_spec

    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    doc = yaml.safe_load((root / "examples" / "births.yaml").read_text("utf-8"))
    validate_spec(copy.deepcopy(doc))
    wide = copy.deepcopy(doc)
    wide["columns"][1]["alternatives"].append({"id": "huge", "clip": [17, 45],
                                               "unit_bins": [0, SIZE_LIMITS["bins per alternative"] + 5]})
    with pytest.raises(SpecError, match="bins, more than the limit"):
        validate_spec(wide)
    many = copy.deepcopy(doc)
    many["face_privacy"] = {"quasi_identifiers": [["mother_age", "parity"]] * 101}
    with pytest.raises(SpecError, match="quasi-identifier sets: 101"):
        validate_spec(many)


def test_the_release_draws_no_more_rows_than_the_audit_allows():
    """An attempt whose samples mostly fail the synthetic constraints ends as a failed attempt
    before drawing more than 4 n + 128 rows (the audit's re-derivation bound)."""
    import numpy as np

    from dpbundle.mechanisms.noise import Randomness
    from dpbundle.release.scheme.iteration import ConstraintShortfall, _sample_rounds, max_drawn

    drawn = []

    class Model:
        def sample(self, m, rng):
            drawn.append(m)
            return np.zeros((m, 1), dtype=np.int64)

    def keep(rows):            # one row in a hundred satisfies the constraints
        return rows[::100]

    with pytest.raises(ConstraintShortfall, match="beyond"):
        _sample_rounds(Model(), 1000, Randomness(), keep)
    assert sum(drawn) <= max_drawn(1000)
