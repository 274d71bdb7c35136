"""Tests of the private budget ledger (release/scheme/ledger.py)."""
from __future__ import annotations

import copy
import csv
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import re
import stat
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from dpbundle.release.scheme.ledger import (Ledger, LedgerError, LedgerRefusal, data_fingerprint,
                                     fingerprint, spec_fingerprint, table_fingerprint)

SPEC = {"dpbundle_spec": 1, "privacy": {"epsilon_generation": 4.0}, "title": "births"}


@pytest.fixture
def data(tmp_path) -> Path:
    p = tmp_path / "registry.csv"
    p.write_bytes(b"mother_age,parity\n30,1\n")
    return p


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "private" / "ledger.jsonl")


def test_fingerprints(data):
    assert data_fingerprint(data) == hashlib.sha256(data.read_bytes()).hexdigest()
    canonical = b'{"dpbundle_spec":1,"privacy":{"epsilon_generation":4.0},"title":"births"}'
    assert spec_fingerprint(SPEC) == hashlib.sha256(canonical).hexdigest()
    reordered = {"title": "births", "privacy": {"epsilon_generation": 4.0}, "dpbundle_spec": 1}
    assert spec_fingerprint(reordered) == spec_fingerprint(SPEC)
    assert fingerprint(data, SPEC) != fingerprint(data, {**SPEC, "title": "other"})
    assert len(fingerprint(data, SPEC)) == 64


def test_default_path():
    p = Ledger.default_path()
    assert p.name == "ledger.jsonl" and "dpbundle" in str(p.parent)


def test_empty_ledger(ledger):
    assert ledger.spent("x") == 0.0 and ledger.entries("x") == []
    assert ledger.check_allowed("x", 9.98, allow_additional_spend=False) == pytest.approx(9.98)
    assert not ledger.path.exists()  # reading never creates it


def test_refusal_on_second_release(ledger, data):
    dfp = data_fingerprint(data)
    eid = ledger.record(dfp, spec_fingerprint(SPEC), 9.98, "births 2014 release")
    ledger.mark_finished(eid, "finished")
    with pytest.raises(LedgerRefusal) as err:
        ledger.check_allowed(dfp, 1.5, allow_additional_spend=False)
    msg = str(err.value)
    assert "9.98" in msg and "11.48" in msg and "births 2014 release" in msg
    assert ledger.entries(dfp)[0]["timestamp"] in msg
    with pytest.raises(LedgerRefusal):
        ledger.reserve(dfp, spec_fingerprint(SPEC), 1.5, "again", allow_additional_spend=False)
    assert len(ledger.entries(dfp)) == 1  # a refused reservation writes nothing


def test_allowed_with_flag_composes(ledger, data):
    dfp, sfp = data_fingerprint(data), spec_fingerprint(SPEC)
    ledger.mark_finished(ledger.record(dfp, sfp, 9.98, "first"), "finished")
    assert ledger.check_allowed(dfp, 1.5, allow_additional_spend=True) == pytest.approx(11.48)
    eid, total = ledger.reserve(dfp, sfp, 1.5, "second", allow_additional_spend=True)
    assert total == pytest.approx(11.48)
    assert ledger.spent(dfp) == pytest.approx(11.48)
    assert ledger.check_allowed(dfp, 0.5, allow_additional_spend=True) == pytest.approx(11.98)
    assert [e["description"] for e in ledger.entries(dfp)] == ["first", "second"]
    assert ledger.entries(dfp)[1]["id"] == eid


def test_truthful_after_crash(ledger, data):
    dfp = data_fingerprint(data)
    ledger.record(dfp, spec_fingerprint(SPEC), 9.98, "crashed run")  # no mark_finished
    fresh = Ledger(ledger.path)  # a later process
    assert fresh.spent(dfp) == pytest.approx(9.98)
    (entry,) = fresh.entries(dfp)
    assert entry["status"] == "started"
    with pytest.raises(LedgerRefusal, match="started"):
        fresh.check_allowed(dfp, 1.0, allow_additional_spend=False)


def test_failed_run_still_counts_and_history_is_kept(ledger, data):
    dfp = data_fingerprint(data)
    eid = ledger.record(dfp, "s", 2.0, "run")
    before = ledger.path.read_bytes()
    ledger.mark_finished(eid, "failed")
    after = ledger.path.read_bytes()
    assert after.startswith(before)  # append-only
    assert ledger.spent(dfp) == pytest.approx(2.0)
    (entry,) = ledger.entries(dfp)
    assert entry["status"] == "failed"
    assert [h["status"] for h in entry["history"]] == ["started", "failed"]
    lines = [json.loads(x) for x in after.decode().splitlines()]
    assert all("timestamp" in x for x in lines) and len(lines) == 2


def test_different_spec_same_data_detected(ledger, data, tmp_path):
    dfp = data_fingerprint(data)
    ledger.record(dfp, spec_fingerprint(SPEC), 3.0, "spec A")
    other = {**SPEC, "privacy": {"epsilon_generation": 1.0}}
    assert spec_fingerprint(other) != spec_fingerprint(SPEC)
    with pytest.raises(LedgerRefusal):
        ledger.reserve(data_fingerprint(data), spec_fingerprint(other), 1.0, "spec B", False)
    # other data is independent
    other_data = tmp_path / "other.csv"
    other_data.write_bytes(b"mother_age,parity\n31,2\n")
    assert ledger.check_allowed(data_fingerprint(other_data), 1.0, False) == pytest.approx(1.0)


def test_file_permissions(ledger, data):
    ledger.record(data_fingerprint(data), "s", 1.0, "x")
    assert stat.S_IMODE(os.stat(ledger.path).st_mode) == 0o600
    os.chmod(ledger.path, 0o644)
    ledger.record(data_fingerprint(data), "s", 1.0, "y", status="started")
    assert stat.S_IMODE(os.stat(ledger.path).st_mode) == 0o600


def test_corrupt_line_names_file_and_line(ledger, data):
    dfp = data_fingerprint(data)
    ledger.record(dfp, "s", 1.0, "x")
    with open(ledger.path, "a") as fh:
        fh.write("{not json\n")
    with pytest.raises(LedgerError, match=re.escape(f"{ledger.path}:2: not valid JSON")):
        ledger.spent(dfp)
    with pytest.raises(LedgerError, match=":2:"):
        ledger.record(dfp, "s", 1.0, "more")  # no write on top of a corrupt ledger
    assert len(ledger.path.read_text().splitlines()) == 2


@pytest.mark.parametrize("line, rule", [
    ('{"kind": "spend", "id": "a"}', "field 'timestamp'"),
    ('{"kind": "other"}', "unknown kind"),
    ('[1, 2]', "JSON object"),
    ('{"kind": "status", "id": "zz", "timestamp": "t", "status": "finished"}', "unknown spend id"),
])
def test_invalid_lines(tmp_path, line, rule):
    p = tmp_path / "l.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(LedgerError, match=rule) as err:
        Ledger(p).spent("x")
    assert f"{p}:1" in str(err.value)


def test_cut_last_line_is_an_error(tmp_path):
    p = tmp_path / "l.jsonl"
    p.write_text('{"kind": "spend", "id": "a", "timest')
    with pytest.raises(LedgerError, match="incomplete last line"):
        Ledger(p).spent("x")


def test_bad_arguments(ledger):
    with pytest.raises(LedgerError, match="epsilon"):
        ledger.record("d", "s", 0.0, "x")
    with pytest.raises(LedgerError, match="epsilon"):
        ledger.record("d", "s", float("nan"), "x")
    with pytest.raises(LedgerError, match="new_epsilon"):
        ledger.check_allowed("d", -1.0, True)
    with pytest.raises(LedgerError, match="no spend"):
        ledger.mark_finished("nope", "finished")


def _worker(path: str, i: int) -> None:
    Ledger(Path(path)).record("same-data", "s", 0.5, f"worker {i}")


def test_concurrent_appends_are_not_lost(ledger):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(ledger.path), i)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert ledger.spent("same-data") == pytest.approx(4.0)
    assert len(ledger.entries("same-data")) == 8


# --------------------------------------------------------------------------- table fingerprint

REPO = Path(__file__).resolve().parents[1]
HOURS = "hours per week"


@pytest.fixture(scope="module")
def persons():
    """The persons spec (categories, headers with spaces, missing markers) and a small registry."""
    from dpbundle.release.data.example_persons import example_bytes
    from dpbundle.release.spec.load import load_spec

    return load_spec(REPO / "examples" / "persons.yaml"), example_bytes(rows=400, seed=7)


def _frame(raw: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(raw), dtype=str, keep_default_na=False, na_filter=False)


def _write(frame: pd.DataFrame, path: Path, **to_csv) -> Path:
    data = frame.to_csv(index=False, **to_csv).encode("utf-8")
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def _reexport(raw: bytes, path: Path, seed: int = 0) -> Path:
    """The same registry exported again: columns reversed, rows shuffled, every field quoted,
    CRLF line ends, integers written as 40.0 (and gzip-compressed for a .gz path)."""
    frame = _frame(raw)
    frame = frame.iloc[np.random.default_rng(seed).permutation(len(frame))]
    frame = frame[list(reversed(frame.columns))].copy()
    frame[HOURS] = [f"{h}.0" if h.isdigit() else h for h in frame[HOURS]]
    return _write(frame, path, quoting=csv.QUOTE_ALL, lineterminator="\r\n")


def _keys(path: Path, spec) -> tuple[str, str]:
    """(file SHA-256, table fingerprint), as `dpbundle release` computes them."""
    from dpbundle.release.data.prepare import prepare

    prepared = prepare(path, spec, show_values=False)
    assert prepared.sha256 == data_fingerprint(path)
    return prepared.sha256, table_fingerprint(prepared, spec)


def test_table_fingerprint_ignores_the_export_format(persons, tmp_path):
    spec, raw = persons
    original = tmp_path / "registry.csv"
    original.write_bytes(raw)
    file_a, table_a = _keys(original, spec)
    assert re.fullmatch(r"[0-9a-f]{64}", table_a) and table_a != file_a
    for name, seed in (("copy.csv", 1), ("copy.csv.gz", 2)):
        copy_path = _reexport(raw, tmp_path / name, seed)
        file_b, table_b = _keys(copy_path, spec)
        assert file_b != file_a  # other bytes ...
        assert table_b == table_a  # ... same records


def test_table_fingerprint_does_not_depend_on_the_category_order(persons, tmp_path):
    from dpbundle.release.spec.load import validate_spec

    spec, raw = persons
    doc = copy.deepcopy(spec.raw)
    for column in doc["input"]["columns"]:
        if column["name"] == "education":
            column["categories"] = list(reversed(column["categories"]))
    other = validate_spec(doc)
    path = tmp_path / "registry.csv"
    path.write_bytes(raw)
    assert _keys(path, other)[1] == _keys(path, spec)[1]


def test_a_one_record_change_is_another_registry(persons, tmp_path):
    spec, raw = persons
    original = tmp_path / "registry.csv"
    original.write_bytes(raw)
    base = _keys(original, spec)[1]
    frame = _frame(raw)
    i = next(k for k, h in enumerate(frame[HOURS]) if h.isdigit() and 0 < int(h) < 99)
    changed = frame.copy()
    changed.loc[i, HOURS] = str(int(frame.loc[i, HOURS]) + 1)  # one value of one record
    assert _keys(_write(changed, tmp_path / "one-value.csv"), spec)[1] != base
    changed = frame.copy()
    changed.loc[i, "education"] = "9" if frame.loc[i, "education"] != "9" else "1"
    assert _keys(_write(changed, tmp_path / "one-category.csv"), spec)[1] != base
    # Two records exchange their occupation: every column keeps its values, the records change.
    occ = frame["occupation group"]
    j = next(k for k in range(len(frame)) if occ[k] != occ[i] and
             (frame.drop(columns="occupation group").loc[k] != frame.drop(columns="occupation group").loc[i]).any())
    changed = frame.copy()
    changed.loc[[i, j], "occupation group"] = [occ[j], occ[i]]
    assert _keys(_write(changed, tmp_path / "swapped.csv"), spec)[1] != base
    # A dropped record is a change too.
    assert _keys(_write(frame.drop(index=i), tmp_path / "fewer.csv"), spec)[1] != base


def test_reexported_copy_is_refused_as_already_spent(persons, tmp_path, ledger):
    spec, raw = persons
    original = tmp_path / "registry.csv"
    original.write_bytes(raw)
    file_a, table_a = _keys(original, spec)
    ledger.mark_finished(ledger.reserve(file_a, "s", 2.5, "first release", False, table_fp=table_a)[0])
    copy_path = _reexport(raw, tmp_path / "copy.csv.gz", seed=3)
    file_b, table_b = _keys(copy_path, spec)
    assert [e["description"] for e in ledger.entries(file_b, table_b)] == ["first release"]
    assert ledger.spent(file_b, table_b) == Fraction(5, 2)
    with pytest.raises(LedgerRefusal, match="already has 1 recorded release") as err:
        ledger.reserve(file_b, "s", 1.0, "again", False, table_fp=table_b)
    assert table_a not in str(err.value) and file_a not in str(err.value) and file_b not in str(err.value)
    assert len(ledger.path.read_text().splitlines()) == 2  # the refused reservation wrote nothing
    # The file hash stays a key: the same file read by another spec (another table) still matches.
    assert ledger.spent(file_a, "another table") == Fraction(5, 2)
    # Another registry (one record changed) is independent.
    frame = _frame(raw)
    frame.loc[0, "sex"] = "1" if frame.loc[0, "sex"] == "2" else "2"
    file_c, table_c = _keys(_write(frame, tmp_path / "other.csv"), spec)
    assert ledger.entries(file_c, table_c) == []
    assert ledger.check_allowed(file_c, 1.0, False, table_fp=table_c) == 1


def test_spend_lines_carry_both_keys(ledger):
    ledger.record("f" * 64, "s", 1.0, "x", table_fp="t" * 64)
    (line,) = [json.loads(x) for x in ledger.path.read_text().splitlines()]
    assert line["data_fingerprint"] == "f" * 64 and line["table_fingerprint"] == "t" * 64
    with pytest.raises(LedgerError, match="table_fp must be a non-empty string"):
        ledger.record("f" * 64, "s", 1.0, "x", table_fp="")


def test_old_format_entries_still_count(persons, tmp_path, ledger):
    spec, raw = persons
    original = tmp_path / "registry.csv"
    original.write_bytes(raw)
    file_a, table_a = _keys(original, spec)
    old = {"kind": "spend", "id": "0" * 32, "timestamp": "2025-01-01T00:00:00.000000Z",
           "data_fingerprint": file_a, "spec_fingerprint": "s" * 64, "epsilon": 9.98,
           "description": "release before table fingerprints", "status": "started"}
    ledger.path.parent.mkdir(parents=True)
    ledger.path.write_text(json.dumps(old) + "\n" + json.dumps(
        {"kind": "status", "id": "0" * 32, "timestamp": "2025-01-01T00:01:00.000000Z", "status": "released"}) + "\n")
    assert ledger.spent(file_a, table_a) == Fraction("9.98")
    with pytest.raises(LedgerRefusal, match="9.98"):
        ledger.reserve(file_a, "s", 1.0, "second", False, table_fp=table_a)
    # Allowed with the flag: the new spend has both keys, and links the old one to the table, so
    # that a re-exported copy (which shares no key with the old line) still sees both spends.
    _, total = ledger.reserve(file_a, "s", 1.0, "second", True, table_fp=table_a)
    assert total == Fraction("10.98")
    file_b, table_b = _keys(_reexport(raw, tmp_path / "copy.csv"), spec)
    assert ledger.spent(file_b, table_b) == Fraction("10.98")
    assert [e["description"] for e in ledger.entries(file_b, table_b)] == [
        "release before table fingerprints", "second"]


def test_exact_sums_against_a_cap(ledger):
    for i in range(5):  # 5 x 0.8 = 4 exactly (in floats: 4 + 2.2e-16 before rounding)
        _, total = ledger.reserve("f", "s", 0.8, f"release {i}", True, table_fp="t", cap=4)
    assert total == 4 and ledger.spent("f", "t") == Fraction(4)
    # 4 + 1e-300 is 4.0 in floating point; exactly it is above 4 and within a cap of 4 + 1e-300.
    assert ledger.check_allowed("f", 1e-300, True, table_fp="t", cap=Fraction(4) + Fraction(1, 10 ** 300)) > 4
    with pytest.raises(LedgerRefusal, match=r"to 4\.8, above its cap 4 .*does not lift the cap"):
        ledger.reserve("f", "s", 0.8, "sixth", True, table_fp="t", cap=4)
    assert len(ledger.entries("f", "t")) == 5
    # 0.1 + 0.2 is 0.30000000000000004 in floating point (math.fsum too): exactly 0.3 here.
    ledger.reserve("g", "s", 0.1, "a", False, cap=0.3)
    _, total = ledger.reserve("g", "s", 0.2, "b", True, cap=0.3)
    assert total == Fraction(3, 10) == ledger.spent("g")
    assert ledger.check_allowed("g", 1.0, True) == Fraction(13, 10)
    with pytest.raises(LedgerRefusal, match="above its cap"):
        ledger.check_allowed("h", 0.5, True, cap=0.25)  # a single spend above the cap
    with pytest.raises(LedgerError, match="cap"):
        ledger.check_allowed("h", 0.5, True, cap=-1)


def test_recorded_epsilon_is_never_below_the_declared_one(ledger):
    declared = Fraction("0.12345678901234567890123")  # more digits than a float holds
    ledger.record("f", "s", declared, "x")
    assert ledger.spent("f") >= declared
    ledger.record("g", "s", Fraction("9.98"), "y")
    assert json.loads(ledger.path.read_text().splitlines()[-1])["epsilon"] == 9.98


def test_release_command_keys_the_ledger_on_the_table(persons, tmp_path, monkeypatch):
    """`dpbundle release` records both keys, refuses a re-exported copy, and prints neither key."""
    from typer.testing import CliRunner

    import dpbundle.release.scheme.selection as selection
    from dpbundle.release.cli.main import app

    spec, raw = persons
    runner = CliRunner()
    assert runner.invoke(app, ["keygen", "--out", str(tmp_path / "k")]).exit_code == 0
    original = tmp_path / "registry.csv"
    original.write_bytes(raw)
    file_a, table_a = _keys(original, spec)
    ledger_path = tmp_path / "ledger.jsonl"

    def nothing(*args, **kwargs):
        raise selection.NothingSelected("no candidate passed (test)")

    monkeypatch.setattr(selection, "select", nothing)
    spec_path = REPO / "examples" / "persons.yaml"
    common = ["--key", str(tmp_path / "k.key"), "--ledger", str(ledger_path)]
    first = runner.invoke(app, ["release", str(spec_path), str(original), "--out", str(tmp_path / "B1"), *common])
    assert first.exit_code == 1, first.output
    (spend,) = [json.loads(x) for x in ledger_path.read_text().splitlines() if '"spend"' in x]
    assert spend["data_fingerprint"] == file_a and spend["table_fingerprint"] == table_a
    assert Fraction(repr(spend["epsilon"])) == spec.total_epsilon_exact
    copy_path = _reexport(raw, tmp_path / "copy.csv.gz", seed=4)
    before = ledger_path.read_bytes()
    second = runner.invoke(app, ["release", str(spec_path), str(copy_path), "--out", str(tmp_path / "B2"), *common])
    assert second.exit_code == 2 and "--allow-additional-spend" in second.output
    assert ledger_path.read_bytes() == before and not (tmp_path / "B2").exists()
    for text in (first.output, second.output):
        text = "".join(text.split())  # also across wrapped lines
        assert table_a not in text and file_a not in text and data_fingerprint(copy_path) not in text
