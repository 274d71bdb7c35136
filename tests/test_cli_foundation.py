"""The foundation commands of the CLI: `dpbundle spec validate`, `dpbundle spec space`, and the
exit code 2 (nothing written) for unusable input, also through `dpbundle release` when present."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

HEADER = "mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth"
GOOD_ROW = "30,1,39,True,3400,2019-01-15"


@pytest.fixture(scope="module")
def app():
    from dpbundle.release.cli.main import app

    return app


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    return CliRunner()


def _run(runner, app, *args: str):
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def _flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return re.sub(r"\s+", " ", text)


def _write_spec(tmp_path: Path, doc: dict, name: str = "spec.json") -> Path:
    """A modified copy of the example (JSON by default: fast to write and parse; .yaml writes YAML)."""
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(doc), "utf-8")
    else:
        path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return path


# --------------------------------------------------------------------------- spec validate

def test_validate_births_example(runner, app, births_spec_path):
    result = _run(runner, app, "spec", "validate", births_spec_path)
    assert result.exit_code == 0, result.output
    out = _flat(result.output)
    assert "valid release spec" in out
    assert "9.98" in out


def test_validate_entry_point_subprocess(births_spec_path):
    exe = Path(sys.executable).with_name("dpbundle")
    if not exe.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    proc = subprocess.run([str(exe), "spec", "validate", str(births_spec_path)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "9.98" in proc.stdout


@pytest.mark.parametrize("mutate,path_text", [
    (lambda d: d["acceptance"][3].__setitem__("epsilon", -0.17), "acceptance[3].epsilon: must be > 0"),
    (lambda d: d["columns"][1]["alternatives"][0].__setitem__("edges", [17, 20, 18, 25, 30, 35, 40, 43, 45, 46]),
     "columns[1].alternatives[0].edges: must be strictly increasing"),
    (lambda d: d["privacy"].__setitem__("epsilon_generation", 5.0), "privacy.epsilon_cap: total epsilon"),
    (lambda d: d["raw_constraints"][4]["when"][0].__setitem__(0, "gestation"), "raw_constraints[4].when[0]: unknown column"),
    (lambda d: d["privacy"].__setitem__("budget", 3), "privacy: unknown field 'budget'"),
    (lambda d: d["release"].pop("licence"), "release: missing required field 'licence'"),
    (lambda d: d["columns"][2]["alternatives"][0].__setitem__("edges", [1, 2, 4, 7, 11, 12, 13]),
     "columns[2].alternatives[0].edges: bin edges must lie inside the clip range"),
    (lambda d: d["acceptance"][4]["by"].__setitem__(0, "parity_group"), "acceptance[4].by[0]: unknown released column"),
    (lambda d: d["group_bins"]["birth_weight"].__setitem__("edges", [2550, 4000]),
     "group_bins.birth_weight.edges: edge 2550 splits the bin"),
])
def test_validate_broken_copy_exits_2_and_names_path(runner, app, tmp_path, births_doc, mutate, path_text):
    mutate(births_doc)
    spec = _write_spec(tmp_path, births_doc, "broken.yaml" if "acceptance[3]" in path_text else "broken.json")
    result = _run(runner, app, "spec", "validate", spec)
    assert result.exit_code == 2
    err = _flat(result.stderr)
    assert path_text in err
    assert str(spec) in err
    assert "valid release spec" not in result.stdout


def test_validate_malformed_yaml_exits_2(runner, app, tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("release: [unclosed\n", "utf-8")
    result = _run(runner, app, "spec", "validate", spec)
    assert result.exit_code == 2
    assert "not valid YAML" in _flat(result.stderr)


def test_validate_python_tag_exits_2_without_running_it(runner, app, tmp_path):
    marker = tmp_path / "pwned"
    spec = tmp_path / "evil.yaml"
    spec.write_text(f'dpbundle_spec: !!python/object/apply:os.system ["touch {marker}"]\n', "utf-8")
    result = _run(runner, app, "spec", "validate", spec)
    assert result.exit_code == 2
    assert not marker.exists()


def test_validate_json_spec(runner, app, tmp_path, births_doc):
    spec = tmp_path / "births.json"
    spec.write_text(json.dumps(births_doc), "utf-8")
    result = _run(runner, app, "spec", "validate", spec)
    assert result.exit_code == 0, result.output


# --------------------------------------------------------------------------- spec space

def test_space_reports_1152(runner, app, births_spec_path, births_doc):
    expected = math.prod(len(c["alternatives"]) for c in births_doc["columns"])
    expected *= sum(math.prod(len(v) for v in g["grid"].values()) for g in births_doc["generators"])
    expected *= len(births_doc["projection"]["min_count"])
    assert expected == 3 * 2 * 2 * 1 * 48 * 2 == 1152
    result = _run(runner, app, "spec", "space", births_spec_path)
    assert result.exit_code == 0, result.output
    assert "configurations: 1,152" in result.output


def test_space_of_a_smaller_spec(runner, app, tmp_path, births_doc):
    births_doc["columns"][1]["alternatives"] = births_doc["columns"][1]["alternatives"][:1]
    births_doc["generators"][0]["grid"]["theta"] = [2, 4, 8]
    births_doc["projection"]["min_count"] = [2]
    result = _run(runner, app, "spec", "space", _write_spec(tmp_path, births_doc))
    assert result.exit_code == 0, result.output
    assert "configurations: 48" in result.output  # 1x1x2x2x1x1 x (4x3) x 1


def test_space_broken_spec_exits_2(runner, app, tmp_path, births_doc):
    del births_doc["projection"]
    result = _run(runner, app, "spec", "space", _write_spec(tmp_path, births_doc))
    assert result.exit_code == 2
    assert "missing required field 'projection'" in _flat(result.stderr)


# --------------------------------------------------------------------------- spec validate --data

def test_validate_data_160k_reports_n(runner, app, births_spec_path, nvss_160k_path, nvss_160k_frame):
    df = nvss_160k_frame
    a, p, g, w = df["mother_age"], df["parity"], df["gestation_week"], df["birth_weight"]
    # DESIGN.md's raw constraints (drop if true), written independently of release/data/constraints.py
    drop = (df.isna().any(axis=1)
            | (w < 500) | (w > 5500) | (g < 22) | (g > 44)
            | ((a < 23) & (p > 6)) | ((a < 20) & (p > 3))
            | ((g < 26) & (w > 1499)) | ((g < 29) & (w > 2999)) | ((g < 34) & (w > 3999))
            | ((w < 600) & (g > 29)) | ((w < 700) & (g > 32)))
    n = int((~drop).sum())
    assert len(df) == 160_000
    assert n == 158_500
    result = _run(runner, app, "spec", "validate", births_spec_path, "--data", nvss_160k_path)
    assert result.exit_code == 0, result.output
    assert f"n = {n:,}" in result.output
    assert "rows read" in result.output and "160,000" in result.output


def _bad_csvs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, text the error message must contain)."""
    def write(name, rows, header=HEADER):
        path = tmp_path / f"{name}.csv"
        path.write_text(header + "\n" + "\n".join(rows) + "\n", "utf-8")
        return path

    good = [GOOD_ROW] * 5
    return {
        "missing-column": (write("missing-column", ["30,39,True,3400,2019-01-15"],
                                 header="mother_age,gestation_week,is_female,birth_weight,date_of_birth"),
                           "line 1 (header): missing column 'parity'"),
        "non-numeric": (write("non-numeric", good[:2] + ["30,1,39,True,heavy,2019-01-15"]),
                        "line 4, column 'birth_weight': not a number"),
        "empty": (write("empty", good[:1] + ["30,1,,True,3400,2019-01-15"]),
                  "line 3, column 'gestation_week': empty cell"),
        "impossible-date": (write("impossible-date", good[:4] + ["30,1,39,True,3400,2019-02-30"]),
                            "line 6, column 'date_of_birth': not a valid date"),
        "out-of-range": (write("out-of-range", ["9,1,39,True,3400,2019-01-15"]),
                         "line 2, column 'mother_age': below the allowed minimum 10"),
        "non-boolean": (write("non-boolean", good[:3] + ["30,1,39,yes please,3400,2019-01-15"]),
                        "line 5, column 'is_female': not a boolean"),
    }


BAD_NAMES = ["missing-column", "non-numeric", "empty", "impossible-date", "out-of-range", "non-boolean"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_validate_bad_data_exits_2(runner, app, tmp_path, births_spec_path, name):
    path, expected = _bad_csvs(tmp_path)[name]
    result = _run(runner, app, "spec", "validate", births_spec_path, "--data", path)
    assert result.exit_code == 2
    err = _flat(result.stderr)
    assert expected in err
    assert str(path) in err
    assert "n =" not in result.stdout


def _ed25519_pem_key(path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.write_bytes(pem)
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("name", BAD_NAMES)
def test_release_bad_data_exits_2_and_writes_nothing(runner, app, tmp_path, births_spec_path, name, monkeypatch):
    commands = {c.name for c in app.registered_commands}
    if "release" not in commands:
        pytest.skip("the `release` command is not registered yet")
    monkeypatch.delenv("DPBUNDLE_KEY_PASSPHRASE", raising=False)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path, expected = _bad_csvs(data_dir)[name]
    key = _ed25519_pem_key(tmp_path / "steward.key")
    work = tmp_path / "work"
    work.mkdir()
    out = work / "bundle"
    ledger = work / "ledger.jsonl"
    transcript = work / "private.transcript.jsonl"
    result = _run(runner, app, "release", births_spec_path, path, "--out", out, "--key", key,
                  "--ledger", ledger, "--transcript", transcript)
    assert result.exit_code == 2, result.output
    err = _flat(result.stderr)
    assert expected in err
    assert not out.exists()
    assert list(work.iterdir()) == [], "nothing may be written for unusable input"


def test_validate_warns_when_a_generator_is_not_installed(runner, app, tmp_path, births_doc, monkeypatch):
    """A valid spec naming a generator whose extra is missing: 'ok' plus a warning naming it
    and how to install it (a release here would refuse it)."""
    from dpbundle.mechanisms import generators

    real = generators.generator_types

    def fake_types():
        out = real()
        out["privbayes"] = dict(out["privbayes"], available=False, reason="needs the optional "
                                "packages ['x']: install dpbundle[x]")
        return out

    monkeypatch.setattr(generators, "generator_types", fake_types)
    spec = _write_spec(tmp_path, births_doc)
    result = _run(runner, app, "spec", "validate", spec)
    assert result.exit_code == 0, result.output
    out = _flat(result.stdout)
    assert "generator 'privbayes' is not installed here" in out
    assert "install dpbundle[x]" in out
