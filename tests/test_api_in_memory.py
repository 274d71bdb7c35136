"""Inputs in memory (issue 26): ``release(spec_dict_or_Spec, dataframe, out=...)`` and
``sweep(...)`` read a dict/Spec and a pandas DataFrame exactly as the files they would be."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from dpbundle.release.api import DpbundleError  # noqa: F401  (the API imports)
    from dpbundle.release.cli.main import app
    from typer.testing import CliRunner

    tmp = tmp_path_factory.mktemp("inmem")
    spec_path = fx.fast_spec(tmp / "fast.yaml")
    data_path = fx.example_registry(tmp / "registry.csv", 3000, 3)
    assert CliRunner().invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    return {"tmp": tmp, "spec": spec_path, "data": data_path, "key": tmp / "k.key", "pub": tmp / "k.pub",
            "doc": yaml.safe_load(spec_path.read_text("utf-8")),
            "frame": pd.read_csv(data_path, dtype=str, keep_default_na=False)}


@pytest.fixture(scope="module")
def released(inputs):
    """The same release twice: from the files, and from the spec dict and the DataFrame."""
    from dpbundle.release.api import release

    tmp = inputs["tmp"]
    common = {"key": inputs["key"]}
    release(inputs["spec"], inputs["data"], out=tmp / "files", ledger=tmp / "files.jsonl",
            transcript=tmp / "files.transcript.jsonl", **common)
    release(inputs["doc"], inputs["frame"], out=tmp / "memory", ledger=tmp / "memory.jsonl",
            transcript=tmp / "memory.transcript.jsonl", **common)
    return tmp


def _ledger(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def test_the_dataframe_is_prepared_as_its_file(inputs):
    from dpbundle.release.data.fingerprint import table_fingerprint
    from dpbundle.release.data.prepare import prepare, prepare_frame
    from dpbundle.release.spec.load import load_spec, spec_of

    spec = load_spec(inputs["spec"])
    assert spec_of(inputs["doc"]).document() == spec.document()
    assert spec_of(spec) is spec
    a, b = prepare(inputs["data"], spec), prepare_frame(inputs["frame"], spec)
    assert (a.n, a.rows_read, a.dropped_by) == (b.n, b.rows_read, b.dropped_by)
    assert table_fingerprint(a, spec) == table_fingerprint(b, spec)
    # the example file holds exactly the CSV the DataFrame is written as: the same SHA-256
    assert a.sha256 == b.sha256
    # columns in another order and extra columns: the same table
    shuffled = inputs["frame"][list(reversed(inputs["frame"].columns))].assign(extra="x")
    assert table_fingerprint(prepare_frame(shuffled, spec), spec) == table_fingerprint(a, spec)


def test_release_from_a_dict_and_a_dataframe_is_the_file_release(inputs, released):
    from dpbundle.release.api import audit

    files, memory = released / "files", released / "memory"
    assert (files / "spec.json").read_bytes() == (memory / "spec.json").read_bytes()
    a, b = _ledger(released / "files.jsonl")[0], _ledger(released / "memory.jsonl")[0]
    for key in ("data_fingerprint", "table_fingerprint", "spec_fingerprint", "epsilon"):
        assert a[key] == b[key], key
    # the in-memory release's transcript replays from the data FILE: the same draws on the same table
    rep = audit(memory, pubkey=inputs["pub"], transcript=released / "memory.transcript.jsonl",
                data=inputs["data"])
    assert rep.get("replay").result == "pass"
    assert rep.verdict == "verified"


def test_the_ledger_knows_the_dataframe_is_the_file(inputs, released, tmp_path):
    """A second release of the same data, given as a DataFrame and a Spec, is refused by the
    ledger of the file release (nothing spent) unless more spend is allowed."""
    from dpbundle.release.api import Refused, release
    from dpbundle.release.spec.load import load_spec

    ledger = tmp_path / "ledger.jsonl"
    ledger.write_bytes((released / "files.jsonl").read_bytes())
    with pytest.raises(Refused):
        release(load_spec(inputs["spec"]), inputs["frame"], out=tmp_path / "again", key=inputs["key"],
                ledger=ledger)
    assert len(_ledger(ledger)) == 2      # the file release's spend and its status, nothing more
    assert not (tmp_path / "again").exists()


def _release_error(inputs, tmp_path, data, spec=None):
    from dpbundle.release.api import UnusableInput, release

    with pytest.raises(UnusableInput) as err:
        release(inputs["doc"] if spec is None else spec, data, out=tmp_path / "B", key=inputs["key"],
                ledger=tmp_path / "ledger.jsonl")
    assert not (tmp_path / "B").exists() and not (tmp_path / "ledger.jsonl").exists()
    return err.value.message


def test_a_missing_column_is_named(inputs, tmp_path):
    message = _release_error(inputs, tmp_path, inputs["frame"].drop(columns=["parity"]))
    assert "<DataFrame>" in message and "missing column 'parity'" in message


def test_an_unparsable_value_names_the_row_index_and_column(inputs, tmp_path):
    frame = inputs["frame"].copy()
    frame.index = frame.index + 1000          # the DataFrame's own index, not its position
    frame.loc[1017, "mother_age"] = "old"
    frame.loc[1020, "date_of_birth"] = "2019-02-30"
    message = _release_error(inputs, tmp_path, frame)
    assert "row index 1017, column 'mother_age': not a number" in message
    assert "row index 1020, column 'date_of_birth': not a valid date" in message
    assert "line " not in message.split("\n", 1)[1].split("(cell values")[0]
    assert "old" not in message               # release() never shows a cell's value


def test_row_index_after_a_line_break_in_a_cell(inputs):
    """A cell with line breaks spans lines of the CSV text: the row index is still right."""
    from dpbundle.release.data.prepare import InputError, prepare_frame
    from dpbundle.release.spec.load import load_spec

    frame = inputs["frame"].copy()
    frame.loc[3, "mother_age"] = "3\n4\r\n5"
    frame.loc[5, "parity"] = "x"
    with pytest.raises(InputError) as err:
        prepare_frame(frame, load_spec(inputs["spec"]))
    assert "row index 3, column 'mother_age': not a number" in str(err.value)
    assert "row index 5, column 'parity'" in str(err.value)
    assert "'x'" in str(err.value)              # shown outside release()


def test_wrong_types_are_clear(inputs, tmp_path):
    from dpbundle.release.api import UnusableInput, release, sweep

    with pytest.raises(UnusableInput, match=r"data must be a path .*a pandas DataFrame.*, not list"):
        release(inputs["doc"], [[1, 2]], out=tmp_path / "B", key=inputs["key"])
    with pytest.raises(UnusableInput, match=r"spec must be a path .*, a dict or a Spec.*, not int"):
        release(3, inputs["frame"], out=tmp_path / "B", key=inputs["key"])
    with pytest.raises(UnusableInput, match=r"data must be a path .*a pandas DataFrame.*, not Series"):
        sweep(inputs["doc"], inputs["frame"]["parity"], out=tmp_path / "S")


def test_a_spec_dict_is_validated_as_a_file(inputs, tmp_path):
    doc = json.loads(json.dumps(inputs["doc"]))
    doc["privacy"]["epsilon_cap"] = "a lot"
    message = _release_error(inputs, tmp_path, inputs["frame"], spec=doc)
    assert message.startswith("<spec dict>") and "privacy.epsilon_cap" in message


def test_sweep_reads_a_dict_and_a_dataframe(inputs, tmp_path):
    from dpbundle.release.api import UnusableInput, sweep

    result = sweep(inputs["doc"], inputs["frame"], out=tmp_path / "S", reps=1, max_reps=1, report=False)
    meta = json.loads((tmp_path / "S" / "sweep.json").read_text("utf-8"))
    from dpbundle.release.data.fingerprint import file_sha256

    assert meta["data"]["sha256"] == file_sha256(inputs["data"])
    assert result is not None
    bad = inputs["frame"].copy()
    bad.loc[7, "parity"] = "many"
    with pytest.raises(UnusableInput, match="row index 7, column 'parity'"):
        sweep(inputs["doc"], bad, out=tmp_path / "S2", reps=1, max_reps=1, report=False)
