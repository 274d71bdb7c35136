"""The Python API, used as in a notebook: open a real bundle, look at its data with its meaning,
its metrics and budget, verify it, and see a tampered copy fail."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

runner = CliRunner()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    from dpbundle.release.cli.main import app

    tmp = tmp_path_factory.mktemp("api")
    spec = fx.fast_spec(tmp / "fast.yaml")
    data = fx.example_registry(tmp / "registry.csv", 4000, 3)
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"), "--zip",
                              "--key", str(tmp / "k.key"), "--ledger", str(tmp / "ledger.jsonl"),
                              "--transcript", str(tmp / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return {"dir": tmp / "B", "zip": tmp / "B.zip", "pub": tmp / "k.pub", "tmp": tmp}


@pytest.mark.parametrize("kind", ["dir", "zip"])
def test_notebook_session(bundle, kind):
    from dpbundle.audit import open_bundle

    with open_bundle(bundle[kind]) as b:
        df = b.data
        fields = {f["name"]: f for f in json.loads((bundle["dir"] / "datapackage.json").read_text())
                  ["resources"][0]["schema"]["fields"]}
        assert list(df.columns) == list(fields)
        assert len(df) == b.n
        for name, f in fields.items():
            dtype = df[name].dtype
            assert isinstance(dtype, pd.CategoricalDtype)
            assert list(dtype.categories) == f["constraints"]["enum"]
            assert dtype.ordered is f["categoriesOrdered"]
        # binned numbers are ordered: comparisons and sorting follow the bins, not the text
        age = df["mother_age"]
        assert age.dtype.ordered
        assert age.min() == age.dtype.categories[age.cat.codes.min()]
        # the metrics table and the budget
        assert {"id", "dp_value", "threshold", "passed", "noise_scale"} <= set(b.metrics.columns)
        assert len(b.metrics) == len(json.loads((bundle["dir"] / "metrics.json").read_text())["criteria"])
        assert b.budget == json.loads((bundle["dir"] / "budget.json").read_text())
        pdf = b.datasheet
        assert pdf is not None and pdf.read_bytes()[:5] == b"%PDF-"
        assert b.verify(bundle["pub"]).passed


def test_data_matches_the_csv_text(bundle):
    """The categoricals hold exactly the text of data.csv (nothing turned into a missing value)."""
    from dpbundle.audit import open_bundle

    raw = pd.read_csv(bundle["dir"] / "data.csv", dtype=str, keep_default_na=False)
    with open_bundle(bundle["dir"]) as b:
        df = b.data
        assert not df.isna().any().any()
        pd.testing.assert_frame_equal(df.astype(str), raw)


def test_verify_fails_a_tampered_copy(bundle, tmp_path):
    from dpbundle.audit import open_bundle

    copy = tmp_path / "B"
    shutil.copytree(bundle["dir"], copy)
    lines = (copy / "data.csv").read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    if lines[1] == lines[2]:  # pragma: no cover - swap identical rows: change a label instead
        pytest.skip("first two rows identical")
    (copy / "data.csv").write_text("".join(lines))
    with open_bundle(copy) as b:
        report = b.verify(bundle["pub"])
        assert not report.passed
        assert report.get("integrity").failed


def test_a_label_outside_the_categories_is_an_error_not_a_missing_value(bundle, tmp_path):
    from dpbundle.audit import BundleReadError, open_bundle

    copy = tmp_path / "B"
    shutil.copytree(bundle["dir"], copy)
    lines = (copy / "data.csv").read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[3].rstrip("\n").split(",")
    cells[header.index("mother_age")] = "not-a-bin"
    lines[3] = ",".join(cells) + "\n"
    (copy / "data.csv").write_text("".join(lines))
    with open_bundle(copy) as b, pytest.raises(BundleReadError, match=r"line 4, column 'mother_age'"):
        b.data


def test_open_refuses_what_is_not_a_bundle(tmp_path):
    from dpbundle.audit import BundleReadError, open_bundle

    (tmp_path / "x.txt").write_text("hello")
    with pytest.raises(BundleReadError, match="not a dpbundle bundle"):
        open_bundle(tmp_path)
    with pytest.raises(BundleReadError, match="neither a directory nor a zip"):
        open_bundle(tmp_path / "x.txt")


def test_the_readme_example_runs(bundle, capsys):
    """The README's notebook example, run on a real bundle (paths substituted)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    code = (code.replace('"births-bundle.demo-key.pub"', repr(str(bundle["pub"])))
                .replace('"births-bundle"', repr(str(bundle["dir"]))))
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "verified"
    assert "README.pdf" in out


def test_verify_without_a_pinned_key_is_not_verified(bundle):
    from dpbundle.audit import open_bundle

    with open_bundle(bundle["dir"]) as b:
        report = b.verify()
    assert report.passed and report.verdict == "not_verified_key_not_pinned"


# ------------------------------------------------------------------ release, sweep, audit from Python


def test_release_and_audit_from_python(tmp_path):
    from dpbundle.release.api import audit, release

    spec = fx.fast_spec(tmp_path / "fast.yaml")
    data = fx.example_registry(tmp_path / "registry.csv", 3000, 9)
    from dpbundle.release.bundle import keys

    keys.write_keypair(tmp_path / "k")
    with release(spec, data, out=tmp_path / "B", key=tmp_path / "k.key",
                 ledger=tmp_path / "ledger.jsonl", transcript=tmp_path / "t.jsonl") as b:
        assert len(b.data) == b.n and b.budget["total_epsilon"] > 0
    assert audit(tmp_path / "B", pubkey=tmp_path / "k.pub").verdict == "verified"


def test_a_refusal_raises_with_the_exit_code_and_message(tmp_path):
    from dpbundle.release.api import CommandError, release

    spec = fx.fast_spec(tmp_path / "fast.yaml")
    with pytest.raises(CommandError) as info:
        release(spec, tmp_path / "missing.csv", out=tmp_path / "nodir" / "B", key=tmp_path / "k.key")
    assert info.value.code == 2 and "no such directory" in info.value.message


def test_audit_from_python_refuses_a_missing_bundle(tmp_path):
    from dpbundle.release.api import CommandError, audit

    with pytest.raises(CommandError) as info:
        audit(tmp_path / "nothing")
    assert info.value.code == 2
