"""Tests of the built-in simulated births example (release/data/example.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from dpbundle.release.cli.example import cli_example
from dpbundle.release.data.example import ExampleError, load_model, simulate, write_example

SPEC = Path(__file__).resolve().parents[1] / "examples" / "births.yaml"
COLUMNS = ["mother_age", "parity", "gestation_week", "is_female", "birth_weight", "date_of_birth"]


@pytest.fixture(scope="module")
def default_csv(tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("ex") / "births.csv"
    assert write_example(out) == 167_000
    return pd.read_csv(out)


def _spec_input_ranges() -> dict[str, tuple[int, int]]:
    import yaml

    spec = yaml.safe_load(SPEC.read_text())
    return {c["name"]: (c["min"], c["max"]) for c in spec["input"]["columns"] if "min" in c}


def test_default_rows_and_columns(default_csv):
    assert len(default_csv) == 167_000
    assert list(default_csv.columns) == COLUMNS
    assert default_csv["is_female"].dtype == bool
    assert default_csv["date_of_birth"].str.fullmatch(r"2014-(0[1-9]|1[0-2])-15").all()
    assert default_csv["date_of_birth"].nunique() == 12


def test_values_within_spec_input_ranges(default_csv):
    ranges = _spec_input_ranges()
    assert set(ranges) == {"mother_age", "parity", "gestation_week", "birth_weight"}
    for name, (lo, hi) in ranges.items():
        col = default_csv[name]
        assert col.dtype.kind == "i"
        assert col.min() >= lo and col.max() <= hi, name
    assert not default_csv.isna().any().any()


def test_rows_outside_clip_ranges(default_csv):
    d = default_csv
    n = len(d)
    # clip ranges of examples/births.yaml; NVSS 2019 shares are about 0.5%, 0.15%, 1%, 1%, 2.7%
    assert 0.001 < (d.mother_age < 17).mean() < 0.02
    assert 0.0003 < (d.mother_age > 45).mean() < 0.01
    assert 0.003 < (d.birth_weight < 1400).mean() < 0.03
    assert 0.003 < (d.birth_weight > 4500).mean() < 0.03
    assert 0.01 < (d.gestation_week > 42).mean() < 0.05
    assert (d.parity > 11).sum() > 0 and n > 0


def test_some_rows_fail_raw_constraints(default_csv):
    d = default_csv
    w, g, a, p = d.birth_weight, d.gestation_week, d.mother_age, d.parity
    # raw constraints typed from examples/births.yaml (strict inequalities)
    rules = {
        "w<500": w < 500, "w>5500": w > 5500, "g<22": g < 22, "g>44": g > 44,
        "a<23&p>6": (a < 23) & (p > 6), "a<20&p>3": (a < 20) & (p > 3),
        "g<26&w>1499": (g < 26) & (w > 1499), "g<29&w>2999": (g < 29) & (w > 2999),
        "g<34&w>3999": (g < 34) & (w > 3999), "w<600&g>29": (w < 600) & (g > 29),
        "w<700&g>32": (w < 700) & (g > 32),
    }
    failing = np.zeros(len(d), bool)
    for m in rules.values():
        failing |= m.to_numpy()
    # the NVSS 2019 sample drops 0.94% of its rows
    assert 0.003 < failing.mean() < 0.03
    for name in ("w<500", "g<22", "g>44", "a<20&p>3", "g<29&w>2999"):
        assert rules[name].sum() > 0, name


def test_deterministic_for_a_seed_and_seeds_differ(tmp_path):
    a, b, c = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "c.csv"
    write_example(a, rows=2000, seed=7)
    write_example(b, rows=2000, seed=7)
    write_example(c, rows=2000, seed=8)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    assert len(pd.read_csv(a)) == 2000


def test_marginals_close_to_the_model():
    model = load_model()
    cols = simulate(rows=50_000, seed=11)
    assert abs(cols["is_female"].mean() - model["female_share"]) < 0.01
    months = np.asarray(model["month_counts"], float)
    share = np.bincount(cols["month"], minlength=13)[1:] / 50_000
    assert np.abs(share - months / months.sum()).max() < 0.01
    ages = np.asarray(model["mother_age"]["counts"], float)
    age_share = np.bincount(cols["mother_age"] - model["mother_age"]["min"], minlength=len(ages)) / 50_000
    assert np.abs(age_share - ages / ages.sum()).max() < 0.01


def test_dependencies_present():
    cols = simulate(rows=50_000, seed=3)
    w, g, f = cols["birth_weight"], cols["gestation_week"], cols["is_female"]
    means = [w[(g >= lo) & (g <= hi)].mean() for lo, hi in ((28, 33), (34, 36), (37, 38), (39, 41))]
    assert all(x + 100 < y for x, y in zip(means, means[1:])), means
    assert w[~f].mean() - w[f].mean() > 50  # boys are heavier
    a, p = cols["mother_age"], cols["parity"]
    assert p[a >= 35].mean() > p[a < 25].mean() + 0.3


def test_model_file_has_source_note_and_no_rows():
    model = load_model()
    assert "NVSS 2019" in model["source"] and "No row" in model["source"]
    text = json.dumps(model)
    assert "2019-" not in text  # no dates, hence no rows of the sample


def test_refuses_overwrite_and_bad_rows(tmp_path):
    out = tmp_path / "x.csv"
    out.write_text("keep")
    with pytest.raises(ExampleError, match="exists"):
        write_example(out, rows=10)
    assert out.read_text() == "keep"
    write_example(out, rows=10, force=True)
    assert len(pd.read_csv(out)) == 10
    with pytest.raises(ExampleError, match="--rows"):
        write_example(tmp_path / "y.csv", rows=0)
    with pytest.raises(ExampleError, match="--seed"):
        write_example(tmp_path / "y.csv", rows=10, seed=-1)
    assert not (tmp_path / "y.csv").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["x.csv"]  # no temporary file left


def _app() -> typer.Typer:
    app = typer.Typer()
    app.command("example")(cli_example)
    app.command("other")(lambda: None)  # two commands, so "example" is a subcommand as in cli.py
    return app


def test_cli(tmp_path):
    runner = CliRunner()
    out = tmp_path / "b.csv"
    r = runner.invoke(_app(), ["example", "births", "--out", str(out), "--rows", "500", "--seed", "5"])
    assert r.exit_code == 0, r.output
    assert "SIMULATED" in r.output and "500" in r.output
    assert len(pd.read_csv(out)) == 500
    r = runner.invoke(_app(), ["example", "births", "--out", str(out), "--rows", "5"])
    assert r.exit_code == 2 and "exists" in r.output
    r = runner.invoke(_app(), ["example", "deaths", "--out", str(tmp_path / "d.csv")])
    assert r.exit_code == 2 and "births" in r.output
    assert not (tmp_path / "d.csv").exists()
    r = runner.invoke(_app(), ["example", "--help"])
    assert r.exit_code == 0 and "SIMULATED" in r.output


def test_speed(tmp_path):
    import time

    t = time.process_time()  # CPU time: the test machine may be shared
    write_example(tmp_path / "s.csv")
    assert time.process_time() - t < 5.0


@pytest.mark.parametrize("name", ["births", "persons"])
def test_a_long_example_is_written_chunk_by_chunk_and_the_seed_still_fixes_it(tmp_path, monkeypatch, name):
    """Files longer than a chunk (3 chunks of 1,000 rows here): one header, every row, the same
    bytes for the same seed, other bytes for another; the first chunk is the short file's."""
    from dpbundle.release.data import example as ex

    monkeypatch.setattr(ex, "CHUNK_ROWS", 1000)
    a, b, c, short = (tmp_path / f"{x}.csv" for x in "abcs")
    assert write_example(a, rows=2_500, seed=7, name=name) == 2_500
    write_example(b, rows=2_500, seed=7, name=name)
    write_example(c, rows=2_500, seed=8, name=name)
    write_example(short, rows=1_000, seed=7, name=name)
    text = a.read_bytes()
    assert text == b.read_bytes() and text != c.read_bytes()
    lines = text.split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2_500 + 2
    assert lines.count(lines[0]) == 1                       # the header once
    assert text.startswith(short.read_bytes())             # chunk 0 is the seed's own simulation
    assert lines[1_001:2_001] != lines[1:1_001]             # chunk 1 is not chunk 0 again
    blocks = list(ex.example_blocks(name, 2_500, 7))
    assert len(blocks) == 3 and b"".join(blocks) == text


def test_example_rows_far_above_the_old_limit_are_accepted_and_checked_first(tmp_path):
    from dpbundle.release.data import example as ex

    assert ex.check_rows(50_000_000) == 50_000_000
    with pytest.raises(ExampleError, match="--rows"):
        ex.check_rows(ex.MAX_ROWS + 1)
    with pytest.raises(ExampleError, match="--seed"):
        write_example(tmp_path / "z.csv", rows=10, seed=-1)
    assert not (tmp_path / "z.csv").exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize("name, digest", [
    ("births", "8ac9c68a70d5b3cfdc81ee9edef0f7fa2b61db6867bd44cbc12c309b991427c7"),
    ("persons", "8c4bb9b630a880e4602320c826cb6d9efbd21e2b082dbcdabb15d484fe2dead6")])
def test_the_default_examples_are_the_files_written_before_streaming(tmp_path, name, digest):
    """The SHA-256 of `dpbundle example NAME` (default rows and seed) as the code before the
    chunked writer (293614c) wrote it, with the pinned numpy: one chunk is the old simulation."""
    import hashlib

    out = tmp_path / "x.csv"
    write_example(out, name=name)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
