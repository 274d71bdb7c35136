"""Tests of the built-in simulated persons example (release/data/example_persons.py, examples/persons.yaml)."""
from __future__ import annotations

import io
import json
import math
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example
from dpbundle.release.data.example_persons import DEFAULT_ROWS, HEADERS, example_bytes, load_model

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "persons.yaml"
NARROWED = ROOT / "examples" / "persons-narrowed.yaml"
REFERENCE = date(2023, 3, 15)
runner = CliRunner()


def _spec_doc() -> dict:
    return yaml.safe_load(SPEC.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    """The default example (45,000 rows, default seed) read as text cells."""
    return pd.read_csv(io.BytesIO(example_bytes()), dtype=str, keep_default_na=False)


def _within(observed: float, expected: float, n: int, k: float = 4.0) -> None:
    """|observed - expected| within k binomial standard errors of a share over n rows."""
    se = math.sqrt(expected * (1 - expected) / n)
    assert abs(observed - expected) <= k * se, (observed, expected, k * se)


def _ages(dates: pd.Series) -> np.ndarray:
    """Whole years completed at the reference date, computed from ISO date strings."""
    parts = dates.str.split("-", expand=True).astype(int)
    y, m, d = parts[0].to_numpy(), parts[1].to_numpy(), parts[2].to_numpy()
    before = (m > REFERENCE.month) | ((m == REFERENCE.month) & (d > REFERENCE.day))
    return REFERENCE.year - y - before.astype(int)


def test_deterministic_for_a_seed_and_different_for_another():
    a, b, c = example_bytes(3000, 11), example_bytes(3000, 11), example_bytes(3000, 12)
    assert a == b and a != c
    assert len(a.decode().splitlines()) == 3001


def test_header_matches_the_spec_input_headers(frame):
    spec_headers = [c.get("header", c["name"]) for c in _spec_doc()["input"]["columns"]]
    assert list(frame.columns) == list(HEADERS) == spec_headers
    assert len(frame) == DEFAULT_ROWS
    assert any(" " in h for h in HEADERS) and any(c in h for h in HEADERS for c in "()/")


def test_cells_are_declared_categories_markers_or_in_range(frame):
    for col in _spec_doc()["input"]["columns"]:
        cells = frame[col.get("header", col["name"])]
        allowed_missing = set(col.get("missing", []))
        present = cells[~cells.isin(allowed_missing)]
        if col["type"] == "category":
            assert set(present) <= {str(c) for c in col["categories"]}, col["name"]
        elif col["type"] == "integer":
            v = present.astype(int)
            assert v.min() >= col["min"] and v.max() <= col["max"], col["name"]
        elif col["type"] == "date":
            assert present.str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
            assert present.min() >= col["min"] and present.max() <= col["max"]
    # integer-coded categories with a per-column unknown code; a numeric column with its own marker
    assert set(frame["marital status"]) == {"1", "2", "3", "4", "5", "9"}
    assert set(frame["education"]) == {str(i) for i in range(1, 10)}
    assert "-4" in set(frame["hours per week"])
    assert frame["country of birth"].nunique() >= 30


def test_shares_match_the_model_within_sampling_error(frame):
    m = load_model()
    n = len(frame)
    _within((frame["sex"] == "2").mean(), m["female_share"], n)
    _within((frame["marital status"] == "9").mean(), m["marital_status"]["unknown_rate"], n)
    _within((frame["hours per week"] == "-4").mean(), m["hours"]["vary_rate"], n)
    # share of each age group, from the group counts of the model (uniform years within a group)
    ages = _ages(frame["date of birth"])
    groups, counts = m["age"]["groups"], np.asarray(m["age"]["counts"], float)
    for (lo, hi), p in zip(groups, counts / counts.sum()):
        _within(((ages >= lo) & (ages <= hi)).mean(), p, n)
    # foreign born: sum over years of P(year) * foreign share of the year's band
    starts = m["age_bands"]["starts"]
    expected = 0.0
    for (lo, hi), p in zip(groups, counts / counts.sum()):
        for year in range(lo, hi + 1):
            band = max(i for i, s in enumerate(starts) if s <= year)
            expected += p / (hi - lo + 1) * m["birthplace"]["foreign_share_by_age_band"][band]
    _within((frame["country of birth"] != "United States").mean(), expected, n)


def test_roughly_the_published_aggregates(frame):
    """Margins within a few points of the published figures the model was calibrated to (the
    conditional tables are hand-calibrated approximations, so the tolerance is wider than the
    sampling error of about 0.3 points)."""
    men = frame[frame["sex"] == "1"]
    women = frame[frame["sex"] == "2"]
    groups = load_model()["occupation"]["groups"]
    # BLS CPS table 10, 2022 annual averages, percent of employed men / women
    published = {"1": [19.2, 20.0, 13.0, 14.0, 16.0, 17.9], "2": [17.8, 29.6, 19.6, 25.2, 1.1, 6.8]}
    for sex, rows in (("1", men), ("2", women)):
        shares = rows["occupation group"].value_counts(normalize=True)
        for g, pct in zip(groups, published[sex]):
            assert abs(100 * shares.get(g, 0.0) - pct) < 2.5, (sex, g)
    # foreign born about 18.6% of workers (BLS 2023); part-time (< 35 h) about 11% of men, 24% of women
    assert abs((frame["country of birth"] != "United States").mean() - 0.186) < 0.02
    for rows, pct in ((men, 0.11), (women, 0.24)):
        h = rows["hours per week"].astype(int)
        h = h[h > 0]
        assert abs((h < 35).mean() - pct) < 0.025
    # usual weekly hours heap on multiples of 5 (reported hours), and 40 is the mode
    h = frame["hours per week"].astype(int)
    assert h.mode().iloc[0] == 40
    assert (h[(h > 40) & (h < 60)] % 5 == 0).mean() > 0.3


def test_a_few_rows_fail_each_raw_constraint(frame):
    n = len(frame)
    ages = _ages(frame["date of birth"])
    hours = frame["hours per week"].astype(int)
    edu = frame["education"].astype(int)
    mar = frame["marital status"].astype(int)
    failing = {
        "no hours": hours == 0,
        "graduate degree under 22": edu.isin([7, 8, 9]).to_numpy() & (ages < 22),
        "previously married under 20": mar.isin([2, 3, 4]).to_numpy() & (ages < 20),
    }
    for name, mask in failing.items():
        assert 0 < mask.sum() < 0.03 * n, name
    assert ages.min() >= 18 and ages.max() <= 87  # the spec's input date range


def test_sources_name_published_aggregates_only():
    m = load_model()
    assert len(m["sources"]) >= 5
    for s in m["sources"]:
        assert s["publisher"].startswith(("US Bureau of Labor Statistics", "US Census Bureau"))
        assert s["url"].startswith("https://")
    text = json.dumps(m).lower()
    assert "approximate" in text
    assert "uci" not in text.replace("no microdata, no uci adult data", "")


def test_spec_validates():
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(SPEC)
    assert [c["name"] for c in spec.columns] == ["age", "sex", "education", "marital", "occupation", "hours",
                                                  "income", "birthplace"]
    types = {c["type"] for c in spec.criteria}
    assert {"kway_marginals", "conditional_means", "classification", "quantile", "faithfulness"} <= types
    assert next(c for c in spec.criteria if c["type"] == "kway_marginals")["max_k"] == 3
    headers = {c["name"]: c.get("header") for c in spec.raw["input"]["columns"]}
    assert headers["hours"] == "hours per week" and headers["income"] == "income band (USD/yr)"


def test_example_cli_writes_persons(tmp_path):
    out = tmp_path / "p.csv"
    r = runner.invoke(app, ["example", "persons", "--out", str(out), "--rows", "800", "--seed", "5"])
    assert r.exit_code == 0, r.output
    assert "SIMULATED person" in r.output
    assert out.read_bytes() == example_bytes(800, 5)
    assert write_example(tmp_path / "q.csv", rows=800, seed=5, name="persons") == 800
    assert (tmp_path / "q.csv").read_bytes() == out.read_bytes()


@pytest.mark.slow
def test_release_example_persons_then_audit_passes(tmp_path):
    out = tmp_path / "persons-bundle"
    r = runner.invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "persons-recommended-narrowed.yaml" in r.output
    header = (out / "data.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "age,sex,education,marital,occupation,hours,income,birthplace"
    selected = json.loads((out / "spec.json").read_text())["configuration"]
    recommended = ROOT / "examples" / "persons-recommended-narrowed.yaml"
    narrowed = [c["config"] for c in yaml.safe_load(recommended.read_text())["configurations"]]
    assert selected in narrowed
    a = runner.invoke(app, ["audit", str(out), "--pubkey", str(tmp_path / "persons-bundle.demo-key.pub")])
    assert a.exit_code == 0, a.output
