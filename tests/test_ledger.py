"""Tests of the private budget ledger (release/ledger.py)."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import stat
from pathlib import Path

import pytest

from dpbundle.release.ledger import (Ledger, LedgerError, LedgerRefusal, data_fingerprint,
                                     fingerprint, spec_fingerprint)

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
