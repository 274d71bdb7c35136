"""Issue 36, hostile specs: numbers out of range, 100,000 wrong entries, huge grids.

Each case is refused by `spec validate` (and, where budget could be spent, by `release` before the
ledger entry) with exit code 2, a message naming the file, line, column and rule, and no
traceback. The inputs are small but of the same kind as the attack's (the hang is tested with a
timeout: the work is bounded, not merely fast on a small file).
"""
from __future__ import annotations

import copy
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.spec.load import (MAX_GENERATOR_SETTINGS, MAX_PROBLEMS, MIN_EPSILON, SpecError,
                                        load_spec)
from dpbundle.release.spec.yaml_text import load_yaml

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def doc() -> dict:
    return yaml.safe_load(BIRTHS.read_text("utf-8"))


def _write(tmp_path: Path, name: str, document: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(document, sort_keys=False), "utf-8")
    return path


def _invoke(*args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "250"})
    return result.exit_code, result.output


def _refused(path: Path, *words: str, command: str = "validate") -> str:
    code, out = _invoke("spec", command, path)
    assert code == 2, out
    assert "Traceback" not in out
    assert path.name in out and "line " in out and "column " in out, out
    for w in words:
        assert w in out, out
    return out


@pytest.mark.parametrize("value", [1e-300, 1e308, 10 ** 400])
def test_epsilon_generation_out_of_range_is_refused(tmp_path, doc, value):
    d = copy.deepcopy(doc)
    d["privacy"]["epsilon_generation"] = value
    d["privacy"]["epsilon_cap"] = 1e308 if value != 1e-300 else 10.0
    d["privacy"]["acknowledge_weak_guarantee"] = True
    out = _refused(_write(tmp_path, "eps.yaml", d), "privacy.epsilon_generation", "Ranges of numbers")
    assert "OverflowError" not in out and "ZeroDivisionError" not in out


def test_epsilon_below_the_minimum_is_refused(tmp_path, doc):
    """1e-9 is a plain number (inside the general range) but too small an epsilon."""
    d = copy.deepcopy(doc)
    d["acceptance"][2]["epsilon"] = 1e-9
    _refused(_write(tmp_path, "eps.yaml", d), f"acceptance[2].epsilon: must be >= {MIN_EPSILON:g}")


@pytest.mark.parametrize("where", ["threshold", "bounds", "stop", "margin", "min_count", "edge"])
def test_every_number_is_range_checked(tmp_path, doc, where):
    d = copy.deepcopy(doc)
    expect = {"threshold": "acceptance[0].threshold", "bounds": "acceptance[2].bounds[1]",
              "stop": "privacy.selection.stop_probability", "margin": "acceptance[2].margin_share",
              "min_count": "projection.min_count[0]", "edge": "columns[1].alternatives[0].edges[1]"}[where]
    if where == "threshold":
        d["acceptance"][0]["threshold"] = 1e-320
    elif where == "bounds":
        d["acceptance"][2]["bounds"] = [1, 1e300]
    elif where == "stop":
        d["privacy"]["selection"]["stop_probability"] = 1e-200
    elif where == "margin":
        d["acceptance"][2]["margin_share"] = 1e6   # a resize margin of a million times n
    elif where == "min_count":
        d["projection"]["min_count"] = [10 ** 12]
    else:
        d["columns"][1]["alternatives"][0]["edges"][1] = 1e-200
    _refused(_write(tmp_path, "n.yaml", d), expect)


def test_release_refuses_tiny_epsilon_before_the_ledger(tmp_path, doc):
    """The attack's 1e-300 spent 1.98 and then stopped with ZeroDivisionError: now the release
    refuses it with the spec's problems, and the ledger and bundle are never made."""
    from dpbundle.release.data.example import write_example

    d = copy.deepcopy(doc)
    d["privacy"]["epsilon_generation"] = 1e-300
    spec = _write(tmp_path, "eps.yaml", d)
    data = tmp_path / "r.csv"
    write_example(data, rows=200, seed=3)
    assert _invoke("keygen", "--out", tmp_path / "k")[0] == 0
    ledger, out = tmp_path / "ledger.jsonl", tmp_path / "bundle"
    code, text = _invoke("release", spec, data, "--out", out, "--key", tmp_path / "k.key",
                         "--ledger", ledger, "--transcript", tmp_path / "t.jsonl")
    assert code == 2, text
    assert "Traceback" not in text and "privacy.epsilon_generation" in text
    assert not ledger.exists() and not out.exists()


def _many_bad_fingerprints(n: int) -> str:
    text = BIRTHS.read_text("utf-8")
    assert "private_data_sha256: []" in text
    return text.replace("private_data_sha256: []",
                        "private_data_sha256: [" + ", ".join(["bad-sha-12"] * n) + "]")


def test_many_bad_entries_are_reported_bounded(tmp_path):
    """100,000 wrong private_data_sha256 entries hung validate (a quadratic location search):
    at most MAX_PROBLEMS are reported, with a line that says more were left out."""
    path = tmp_path / "many.yaml"
    path.write_text(_many_bad_fingerprints(5_000), "utf-8")
    t0 = time.perf_counter()
    out = _refused(path, "private_data_sha256: must have at most 1000 item(s)", "(more)")
    assert time.perf_counter() - t0 < 20
    assert f"more than {MAX_PROBLEMS} problems" in out
    assert out.count("must match") < MAX_PROBLEMS


def test_locating_many_problems_is_linear():
    """Marks.resolve looks each step up in a table: 20,000 problems in a 20,000-item list are
    located quickly (the old search compared each with every item: 4 x 10^8 steps)."""
    text = "x: [" + ", ".join(["a"] * 20_000) + "]\n"
    _doc, marks = load_yaml(text)
    t0 = time.perf_counter()
    where = [marks.locate(f"x[{i}]: bad") for i in range(20_000)]
    assert time.perf_counter() - t0 < 5
    assert where[0] == (1, 5) and where[1] == (1, 8) and len(set(where)) == 20_000


def test_spec_error_caps_its_problems():
    exc = SpecError("s.yaml", [f"a[{i}]: bad" for i in range(1000)])
    assert len(exc.problems) == MAX_PROBLEMS + 1 and exc.problems[-1].startswith("(more)")


def _big_grid(doc: dict) -> dict:
    d = copy.deepcopy(doc)
    d["generators"] = [{"type": "aim", "grid": {
        "max_cells": list(range(1000, 1100)), "iters": list(range(10, 110)), "degree": [1, 2],
        "rounds": list(range(1, 101)), "max_model_size": list(range(10, 110))}}]
    return d


@pytest.mark.parametrize("command", ["validate", "space"])
def test_huge_grid_is_refused_arithmetically(tmp_path, doc, command):
    """2 x 10^8 generator settings: counted as a product, never enumerated."""
    path = _write(tmp_path, "grid.yaml", _big_grid(doc))
    t0 = time.perf_counter()
    _refused(path, "generators: the grids make 200,000,000 generator settings",
             f"{MAX_GENERATOR_SETTINGS:,}", command=command)
    assert time.perf_counter() - t0 < 20


def test_grid_at_the_limit_lists_quickly(tmp_path, doc):
    """A privbayes grid whose oneway_split values collapse (oneway none): the duplicates are
    removed with a set (the old list search was quadratic)."""
    from dpbundle.release.scheme.space import generator_configs

    d = copy.deepcopy(doc)
    d["generators"][0]["grid"] = {"epsilon_split": [0.1, 0.5], "theta": list(range(1, 21)),
                                  "oneway": ["none", "measure"],
                                  "oneway_split": [round(0.001 * i, 3) for i in range(1, 1000)]}
    spec = load_spec(_write(tmp_path, "g.yaml", d))
    t0 = time.perf_counter()
    settings = generator_configs(spec)
    assert time.perf_counter() - t0 < 20
    assert len(settings) == 2 * 20 * 999 + 2 * 20  # measure x each split, none once


def test_sweep_refuses_a_space_it_would_have_to_list(tmp_path, doc):
    from dpbundle.release.data.example import write_example
    from dpbundle.release.sweep.plan import MAX_SWEEP_CONFIGURATIONS

    d = copy.deepcopy(doc)
    d["generators"] = [{"type": "aim", "grid": {"max_cells": list(range(1000, 1100)),
                                                "iters": list(range(10, 110)), "degree": [1, 2],
                                                "rounds": [1, 2, 3, 4, 5]}}]
    spec = _write(tmp_path, "space.yaml", d)
    assert load_spec(spec)   # valid: 100,000 settings, 2.4 x 10^6 configurations
    data = tmp_path / "public.csv"
    write_example(data, rows=200, seed=5)
    code, out = _invoke("sweep", spec, data, "--out", tmp_path / "sw")
    assert code == 2, out
    assert "Traceback" not in out and "space.yaml" in out and f"{MAX_SWEEP_CONFIGURATIONS:,}" in out


def _spec_text(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, "utf-8", errors="surrogatepass")
    return path


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_control_character_in_a_spec_names_line_and_column(tmp_path, char):
    """A NUL byte raised YAML's ReaderError as a traceback (exit 1)."""
    text = BIRTHS.read_text("utf-8").replace("publisher: ", "publisher: " + char, 1)
    line = text[:text.index(char)].count("\n") + 1
    out = _refused(_spec_text(tmp_path, "nul.yaml", text), f"U+{ord(char):04X}", "not allowed")
    assert f"line {line}, column " in out and "ReaderError" not in out


@pytest.mark.parametrize("period, words", [
    ({"start": "2015-01-01", "end": "2014-01-01"}, "release.period: start 2015-01-01 is after end"),
    ({"start": "2014-01-01", "end": "2014-13-45"}, "release.period.end: not a valid date")])
def test_period_must_be_real_dates_in_order(tmp_path, doc, period, words):
    d = copy.deepcopy(doc)
    d["release"]["period"] = period
    _refused(_write(tmp_path, "p.yaml", d), words)


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_lone_surrogate_is_refused_by_validate_as_by_release(tmp_path, suffix):
    """validate refuses exactly the text release refuses (a YAML or JSON escape giving a lone
    surrogate, which cannot be written as UTF-8)."""
    text = BIRTHS.read_text("utf-8")
    if suffix == ".json":
        import json

        d = yaml.safe_load(text)
        d["release"]["title"] = "T\ud800"
        text = json.dumps(d)           # written as the escape \ud800
    else:
        text = text.replace('title: "Live', 'title: "\\udcffLive', 1)
    out = _refused(_spec_text(tmp_path, "s" + suffix, text), "release.title: not valid Unicode text")
    assert "lone surrogate" in out
