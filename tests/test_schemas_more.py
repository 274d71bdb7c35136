"""Schemas of the private and sweep files: transcript records, ledger lines, narrowed.yaml, sweep.json.

Each schema must accept what the code really writes and reject broken examples with a message
naming the file and the JSON path; every schema shipped must be a valid 2020-12 schema.
"""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import small_births_doc
from jsonschema import Draft202012Validator

from dpbundle.audit.replay import TranscriptError, check_records, read_transcript
from dpbundle.mechanisms.noise import Randomness, Transcript
from dpbundle.release.bundle import write as bundle
from dpbundle.release.common.jsonschemas import SchemaValidationError, iter_errors, validate
from dpbundle.release.scheme.ledger import Ledger, LedgerError
from dpbundle.release.sweep.run import SweepError, load_narrowed, run_sweep

NEW = ["transcript-record", "ledger-entry", "narrowed", "sweep-meta"]


# --------------------------------------------------------------------------- every schema

def test_every_schema_is_valid_2020_12():
    paths = sorted(p for p in files("dpbundle.schemas").iterdir() if p.name.endswith(".schema.json"))
    names = {p.name[: -len(".schema.json")] for p in paths}
    assert set(NEW) <= names
    for p in paths:
        schema = json.loads(p.read_text("utf-8"))
        assert schema.get("$schema") == "https://json-schema.org/draft/2020-12/schema", p.name
        Draft202012Validator.check_schema(schema)


# --------------------------------------------------------------------------- transcript records

def real_transcript() -> Transcript:
    """Every kind of record Randomness writes (and the marks of selection.py and mbi.py)."""
    t = Transcript()
    rand = Randomness(t)
    config = {"columns": {"mother_age": "coarse"}, "generator": {"type": "privbayes"}, "projection": {"min_count": 2}}
    rand.mark("iteration", index=0, config=config, config_id="0123456789abcdef")
    rand.laplace(3.5, sensitivity=1.0, epsilon=0.5, purpose="scalar")
    rand.laplace(np.linspace(0, 1, 2000), sensitivity=2.0, epsilon=0.5, purpose="vector")
    rand.laplace(np.ones((3, 4)), sensitivity=1.0, epsilon=1.0, purpose="matrix")
    rand.laplace(7, sensitivity=1, epsilon=0.5, purpose="count", integer=True)
    rand.laplace(np.arange(500), sensitivity=1, epsilon=0.5, purpose="counts", integer=True)
    rand.exponential(np.array([0.1, 0.5, 0.2]), sensitivity=1.0, epsilon=1.0, purpose="structure")
    rand.rng("projection").integers(0, 10)
    # the record mechanisms/mbi.py writes after an OpenDP AIM/MST fit (needs the mbi extra to run)
    rand.mark("opaque_release", generator="mst", epsilon=1.0, opendp_map=1.0,
              hyperparameters={"max_cells": 100000, "iters": 1000, "measure_split": 0.9, "num_selections": None},
              model_sha256="ab" * 32, note="noise drawn inside OpenDP (not recorded per draw; not replayable)")
    rand.mark("iteration end", index=0, passed=True)
    rand.mark("selected", index=0)
    return t


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records).encode()


def test_transcript_records_accepted_written_and_read_back(tmp_path):
    t = real_transcript()
    kinds = {(r["kind"], r.get("mark")) for r in t.records}
    assert {("laplace", None), ("exponential", None), ("seed", None), ("mark", "opaque_release")} <= kinds
    assert any("shape" in r for r in t.records)
    for r in t.records:
        validate(r, "transcript-record")
    path = tmp_path / "t.jsonl"
    bundle.write_transcript(path, t.to_jsonl(), secrets.token_bytes(32))
    _salt, _raw, records = read_transcript(path)
    assert records == t.records
    check_records(path, records)


def _laplace_vector(records):
    return next(i for i, r in enumerate(records) if r.get("purpose") == "vector")


@pytest.mark.parametrize("change, path, words", [
    (lambda r: r.pop("noisy"), "$", "'noisy' is a required property"),
    (lambda r: r["noisy"].__setitem__(1234, "x"), "$.noisy[1234]", "is not of type 'number'"),
    (lambda r: r["true"].__setitem__(5, True), "$.true[5]", "is not of type 'number'"),
    (lambda r: r.update(kind="cauchy"), "$.kind", "'cauchy' is not one of"),
    (lambda r: r.update(epsilon=0), "$.epsilon", "less than or equal to the minimum"),
    (lambda r: r.update(extra=1), "$", "'extra' was unexpected"),
])
def test_transcript_record_rejected_at_write(tmp_path, change, path, words):
    records = [dict(r) for r in real_transcript().records]
    i = _laplace_vector(records)
    records[i]["noisy"], records[i]["true"] = list(records[i]["noisy"]), list(records[i]["true"])
    change(records[i])
    out = tmp_path / "t.jsonl"
    with pytest.raises(SchemaValidationError) as err:
        bundle.write_transcript(out, _jsonl(records), secrets.token_bytes(32))
    msg = str(err.value)
    assert f"{out} line {i + 2}" in msg and f"{path}: " in msg and words in msg
    assert not out.exists()


@pytest.mark.parametrize("purpose, change, path", [
    ("counts", lambda r: r["noisy"].__setitem__(3, 2.5), "$.noisy[3]"),           # integer Laplace
    ("structure", lambda r: r.update(noisy=-1), "$.noisy"),                        # exponential choice
    ("projection", lambda r: r.update(seed="12"), "$.seed"),                      # seed
])
def test_other_kinds_rejected(purpose, change, path):
    rec = next(dict(r) for r in real_transcript().records if r.get("purpose") == purpose)
    if isinstance(rec.get("noisy"), list):
        rec["noisy"] = list(rec["noisy"])
    change(rec)
    assert path in [p for p, _ in iter_errors(rec, "transcript-record")]


@pytest.mark.parametrize("change, path", [
    (lambda r: r.update(mark="bogus"), "$.mark"),
    (lambda r: r.pop("config_id"), "$"),
    (lambda r: r.update(index="0"), "$.index"),
])
def test_marks_rejected(change, path):
    rec = dict(real_transcript().records[0])
    assert rec["mark"] == "iteration"
    change(rec)
    assert path in [p for p, _ in iter_errors(rec, "transcript-record")]


def test_audit_rejects_bad_record_with_a_clear_message(tmp_path):
    records = [dict(r) for r in real_transcript().records]
    i = _laplace_vector(records)
    records[i]["noisy"] = list(records[i]["noisy"])
    records[i]["noisy"][17] = None
    path = tmp_path / "t.jsonl"
    with pytest.raises(TranscriptError) as err:
        check_records(path, records)
    msg = str(err.value)
    assert str(path) in msg and f"transcript record {i}" in msg and "noisy/17" in msg


# --------------------------------------------------------------------------- ledger lines

def test_ledger_lines_accepted(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    a = ledger.record("d" * 64, "s" * 64, 1.5, "first release")
    ledger.mark_finished(a)
    ledger.record("d" * 64, "s" * 64, 0.5, "second", status="started")
    lines = [json.loads(x) for x in ledger.path.read_text().splitlines()]
    assert [x["kind"] for x in lines] == ["spend", "status", "spend"]
    for x in lines:
        validate(x, "ledger-entry")
    assert ledger.spent("d" * 64) == 2.0


@pytest.mark.parametrize("line, words", [
    ({"kind": "spend", "id": "a", "timestamp": "t", "data_fingerprint": "d", "spec_fingerprint": "s",
      "epsilon": 1.0, "description": "x"}, "needs field 'status'"),
    ({"kind": "spend", "id": "a", "timestamp": "t", "data_fingerprint": "d", "spec_fingerprint": "s",
      "epsilon": "1.0", "description": "x", "status": "started"}, "$.epsilon: '1.0' is not of type 'number'"),
    ({"kind": "spend", "id": "a", "timestamp": "t", "data_fingerprint": "d", "spec_fingerprint": "s",
      "epsilon": True, "description": "x", "status": "started"}, "$.epsilon: True is not of type 'number'"),
    ({"kind": "status", "id": "a", "timestamp": "t", "status": "finished", "note": 1}, "'note' was unexpected"),
    ({"kind": "refund", "id": "a"}, "unknown kind 'refund'"),
])
def test_ledger_lines_rejected_naming_file_and_line(tmp_path, line, words):
    p = tmp_path / "l.jsonl"
    good = {"kind": "spend", "id": "a", "timestamp": "t", "data_fingerprint": "d", "spec_fingerprint": "s",
            "epsilon": 1.0, "description": "x", "status": "started"}
    if line.get("kind") == "status":
        line = {**line}
        p.write_text(json.dumps(good) + "\n" + json.dumps(line) + "\n")
        lineno = 2
    else:
        p.write_text(json.dumps(line) + "\n")
        lineno = 1
    with pytest.raises(LedgerError) as err:
        Ledger(p).spent("d")
    assert f"{p}:{lineno}: " in str(err.value) and words in str(err.value)


def test_ledger_append_is_validated(tmp_path, monkeypatch):
    import dpbundle.release.scheme.ledger as ledger_mod

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.record("d", "s", 1.0, "ok")
    monkeypatch.setattr(ledger_mod, "_now", lambda: 20260101)  # not a string
    with pytest.raises(LedgerError, match=r"\(new line\): spend line does not match schema ledger-entry: "
                                          r"\$\.timestamp: 20260101 is not of type 'string'"):
        ledger.record("d", "s", 1.0, "bad")
    assert len(ledger.path.read_text().splitlines()) == 1  # nothing written


# --------------------------------------------------------------------------- sweep: sweep.json, narrowed.yaml

@dataclass
class _Crit:
    id: str
    dp_value: float
    threshold: float
    passed: bool


@dataclass
class _Result:
    config: dict
    real: object
    candidate: object
    results: list = field(default_factory=list)
    passed: bool = False


class CheapIteration:
    """Transform only; passes for the 'coarse' mother_age coding (module level: picklable)."""

    def __call__(self, prepared, spec, config, rand):
        from dpbundle.release.data.transform import transform

        real = transform(prepared, spec, config)
        rand.rng("stand-in")
        passed = config["columns"]["mother_age"] == "coarse"
        return _Result(config, real, real, [_Crit("alpha", 0.5 if passed else 1.5, 1.0, passed)], passed)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    from dpbundle.release.data.example import write_example

    tmp = tmp_path_factory.mktemp("sweep")
    data = tmp / "public.csv"
    write_example(data, rows=600, seed=11)
    doc = small_births_doc([0.25])
    spec = tmp / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    out = tmp / "S"
    kw = dict(workers=1, progress=False, report=False, utility="none", mp_context="fork")
    run_sweep(spec, data, out, reps=2, iteration=CheapIteration(), **kw)
    return spec, data, out, kw


def test_sweep_files_accepted(sweep_dir):
    _spec, _data, out, _kw = sweep_dir
    meta = json.loads((out / "sweep.json").read_text())
    validate(meta, "sweep-meta")
    assert meta["sessions"] and meta["reps"] == 2
    doc = yaml.safe_load((out / "narrowed.yaml").read_text())
    validate(doc, "narrowed")
    entries = load_narrowed(out / "narrowed.yaml")
    assert entries and all(e["config"]["columns"]["mother_age"] == "coarse" and e["acceptance"] == 1.0
                           for e in entries)


def test_sweep_resume_accepts_its_own_record(sweep_dir):
    spec, data, out, kw = sweep_dir
    res = run_sweep(spec, data, out, iteration=CheapIteration(), **kw)
    assert res.new_runs == 0


@pytest.mark.parametrize("change, path", [
    (lambda d: d["configurations"][0].update(id=12345), "$.configurations[0].id"),
    (lambda d: d["configurations"][0].pop("config"), "$.configurations[0]"),
    (lambda d: d["configurations"][0].update(runs="5"), "$.configurations[0].runs"),
    (lambda d: d.update(format="dpbundle-narrowed/9"), "$.format"),
    (lambda d: d.update(comment="hi"), "$"),
])
def test_narrowed_rejected_on_read(sweep_dir, tmp_path, change, path):
    _spec, _data, out, _kw = sweep_dir
    doc = yaml.safe_load((out / "narrowed.yaml").read_text())
    change(doc)
    bad = tmp_path / "narrowed.yaml"
    bad.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ValueError) as err:
        load_narrowed(bad)
    assert str(bad) in str(err.value) and f"  {path}: " in str(err.value)


def test_sweep_meta_rejected_on_resume(sweep_dir, tmp_path):
    import shutil

    spec, data, out, kw = sweep_dir
    copy = tmp_path / "S"
    shutil.copytree(out, copy)
    meta = json.loads((copy / "sweep.json").read_text())
    meta["reps"] = "2"
    meta["sessions"][0].pop("backend")
    (copy / "sweep.json").write_text(json.dumps(meta))
    with pytest.raises(SweepError) as err:
        run_sweep(spec, data, copy, iteration=CheapIteration(), **kw)
    msg = str(err.value)
    assert str(copy / "sweep.json") in msg and "$.reps: '2' is not of type 'integer'" in msg
    assert "$.sessions[0]: 'backend' is a required property" in msg


def test_sweep_meta_validated_before_writing(sweep_dir, tmp_path):
    spec, data, _out, kw = sweep_dir

    class Odd:  # a prepared table whose n is impossible
        n = -1

    with pytest.raises(ValueError, match=r"\$\.data\.n: -1 is less than the minimum of 0"):
        run_sweep(spec, data, tmp_path / "S", reps=1, iteration=CheapIteration(),
                  prepare=lambda path, s: Odd(), **kw)
    assert not (tmp_path / "S" / "sweep.json").exists()
