"""Issue 35: ``sweep`` refuses data the budget ledger knows as released, by the prepared table's
fingerprint as the ledger matches spends (a .csv.gz copy, a DataFrame read from the file), from
the command line and from Python."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example
from dpbundle.release.data.fingerprint import file_sha256
from dpbundle.release.data.prepare import prepare
from dpbundle.release.scheme.ledger import Ledger, table_fingerprint
from dpbundle.release.spec.load import load_spec

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "persons.yaml"


@pytest.fixture(scope="module")
def released(tmp_path_factory) -> tuple[Path, Path]:
    """A registry and a ledger recording a spend on it, keyed as a release keys it (the file's
    SHA-256 and the prepared table's fingerprint)."""
    d = tmp_path_factory.mktemp("i35-sweep-ledger")
    data = d / "confidential.csv"
    write_example(data, rows=3_000, seed=11, name="persons")
    spec = load_spec(SPEC)
    prepared = prepare(data, spec)
    ledger = Ledger(d / "ledger.jsonl")
    ledger.record(file_sha256(data), spec.fingerprint, 9.62, "a release", status="released",
                  table_fp=table_fingerprint(prepared, spec))
    return data, ledger.path


def _gz_copy(src: Path, dst: Path) -> Path:
    with open(src, "rb") as f, gzip.open(dst, "wb") as g:
        shutil.copyfileobj(f, g)
    return dst


def test_cli_sweep_refuses_a_gzip_copy_of_released_data(released, tmp_path):
    data, ledger = released
    copy = _gz_copy(data, tmp_path / "copy.csv.gz")
    assert file_sha256(copy) != file_sha256(data)       # the byte hash alone would not see it
    r = CliRunner().invoke(app, ["sweep", str(SPEC), str(copy), "--out", str(tmp_path / "s"), "--ledger",
                                 str(ledger), "--sample", "1", "--reps", "1", "--quiet", "--no-report"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "refusing to sweep" in text and "confidential" in text
    assert not (tmp_path / "s" / "sweep.json").exists()
    assert table_fingerprint(prepare(data, load_spec(SPEC)), load_spec(SPEC)) not in r.output  # stays private


def test_python_sweep_refuses_a_dataframe_of_released_data(released, tmp_path):
    import pandas as pd

    from dpbundle.release.api import UnusableInput, sweep

    data, ledger = released
    for frame in (pd.read_csv(data), pd.read_csv(data, dtype=str, keep_default_na=False)):
        with pytest.raises(UnusableInput, match="refusing to sweep"):
            sweep(SPEC, frame, out=tmp_path / "s", ledger=ledger, sample=1, reps=1, report=False)
        assert not (tmp_path / "s" / "sweep.json").exists()


def test_other_data_is_not_refused(released, tmp_path):
    """Different records (another seed) are not in the ledger: the check lets them through."""
    from dpbundle.release.sweep.plan import Checked, _refuse_released
    from dpbundle.release.sweep.request import SweepRequest

    _data, ledger = released
    other = tmp_path / "public.csv"
    write_example(other, rows=3_000, seed=12, name="persons")
    spec = load_spec(SPEC)
    request = SweepRequest(SPEC, other, tmp_path / "s", ledger=ledger)
    checked = Checked(spec, "x", file_sha256(other), None)
    _refuse_released(request, checked, prepare(other, spec))      # no exception
    missing = SweepRequest(SPEC, other, tmp_path / "s", ledger=tmp_path / "no-ledger.jsonl")
    _refuse_released(missing, checked, prepare(other, spec))
