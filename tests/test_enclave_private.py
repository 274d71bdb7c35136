"""Issue 11, item 2: nothing private in enclave outputs.

An enclave audit (``--transcript`` + ``--data``) against a *neighbouring* registry (one record
changed) must fail the replay and say where, but none of the transcript's recorded true values
(nor the private n) may appear in its console output or its reports; the reports are private
(mode 0600, marked PRIVATE in their first line), the console says PRIVATE. The transcript's
default location is a private directory (0700) away from the bundle's folder, the file 0600.
"""
from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit.report import PRIVATE_NOTE, AuditReport, CheckResult  # noqa: E402
from dpbundle.audit.schema_util import validate  # noqa: E402
from dpbundle.mechanisms.noise import (  # noqa: E402
    Randomness, ReplayMismatch, Transcript, read_transcript_file, write_transcript_file)

ROWS = 6000
LOOSE = fx.LOOSE

release_runner = CliRunner()


def _audit_app():
    from dpbundle.audit.cli import cli_audit

    app = typer.Typer()
    app.command("audit")(cli_audit)
    return app


def _fast_spec(path: Path, policy: str) -> Path:
    return fx.fast_spec(path, policy)


def _registry(path: Path) -> Path:
    return fx.example_registry(path, ROWS, 11)


def _neighbour(data: Path, out: Path, how: str) -> Path:
    """One record of ``data`` changed: ``weight`` +300 g (still plausible), or ``implausible``
    (a weight above the 5500 g rule, so the count of plausible records drops by one)."""
    lines = data.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    iw = header.index("birth_weight")
    for i in range(1, len(lines)):
        cells = lines[i].rstrip("\n").split(",")
        if cells[iw].isdigit() and 2600 <= int(cells[iw]) <= 3400 and "NA" not in cells:
            cells[iw] = str(int(cells[iw]) + 300) if how == "weight" else "6000"
            lines[i] = ",".join(cells) + "\n"
            break
    else:  # pragma: no cover
        raise AssertionError("no record to change")
    out.write_text("".join(lines))
    return out


@pytest.fixture(scope="module", params=["declared_public", "dp_count"])
def released(request, tmp_path_factory):
    """A real `dpbundle release` without --transcript: the default (private) location is used."""
    from dpbundle.release.cli.main import app

    tmp = tmp_path_factory.mktemp(f"enclave-{request.param}")
    private = tmp_path_factory.mktemp("private") / "not-yet" / "private"
    spec = _fast_spec(tmp / "fast.yaml", request.param)
    data = _registry(tmp / "registry.csv")
    assert release_runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPBUNDLE_PRIVATE_DIR", str(private))
        res = release_runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"),
                                          "--key", str(tmp / "k.key"), "--ledger", str(tmp / "ledger.jsonl")])
    assert res.exit_code == 0, res.output
    # wherever the default put it (test_default_transcript_is_private_and_away_from_the_bundle
    # checks where that is)
    transcripts = list(private.glob("*.transcript.jsonl")) or list(tmp.glob("*.transcript.jsonl"))
    assert len(transcripts) == 1, (transcripts, res.output)
    return {"tmp": tmp, "data": data, "transcript": transcripts[0], "private": private,
            "policy": request.param}


# ------------------------------------------------------------------------------ forbidden strings


def _numbers(x):
    if isinstance(x, bool) or x is None:
        return
    if isinstance(x, (int, float)):
        yield x
    elif isinstance(x, list):
        for v in x:
            yield from _numbers(v)


def _renderings(v) -> set[str]:
    """The ways a number may be printed: repr, :g, 4-6 significant digits, rounded to 4-6 places."""
    if isinstance(v, int) or float(v).is_integer():
        return {str(int(v))}
    v = float(v)
    out = {repr(v), str(v), f"{v:g}", f"{v:.4g}", f"{v:.5g}", f"{v:.6g}", f"{v:.4f}", f"{v:.5f}",
           f"{v:.6f}", repr(round(v, 4)), repr(round(v, 5)), repr(round(v, 6)),
           repr(float(np.float32(v))), f"{v:.3e}", f"{v:.4e}"}
    return out


def _distinctive(s: str) -> bool:
    """Long enough that seeing it is not a coincidence: at least 4 significant digits for an
    integer (counts of 1000 and more), 3 for a float."""
    if "." not in s and "e" not in s:
        return len(s.lstrip("-")) >= 4
    digits = re.sub(r"[^0-9]", "", s.split("e")[0]).strip("0")
    return len(digits) >= 3


def forbidden(transcript: Path, private_ns: list[int]) -> set[str]:
    """Every distinctive rendering of every true value (and the private n) of the transcript."""
    _salt, t = read_transcript_file(transcript)
    values = []
    for rec in t.records:
        for key in ("true", "count", "n", "n_plausible", "private_n"):
            if key in rec:
                values.extend(_numbers(rec[key]))
    values.extend(private_ns)
    assert values, "the transcript has no true values"
    return {s for v in values if math.isfinite(float(v)) for s in _renderings(v) if _distinctive(s)}


def leaks(text: str, strings: set[str], public: str) -> list[str]:
    """The forbidden strings found in ``text`` as whole numbers, except those the public audit of
    the same bundle prints too (public numbers that happen to coincide)."""
    found = []
    for s in strings:
        pat = re.compile(r"(?<![0-9.])" + re.escape(s) + r"(?![0-9])")
        if pat.search(text) and not pat.search(public):
            found.append(s)
    return sorted(found)


def _plausible_n(data: Path) -> int:
    from dpbundle.audit.private_data import load_private

    return load_private(data, fx.load_spec()).n


# ------------------------------------------------------------------------------ the acceptance test


@pytest.mark.slow
@pytest.mark.parametrize("how", ["weight", "implausible"])
def test_enclave_audit_of_a_neighbour_prints_no_private_value(released, how, tmp_path):
    tmp, transcript = released["tmp"], released["transcript"]
    changed = _neighbour(released["data"], tmp_path / "neighbour.csv", how)
    runner = CliRunner()
    pub = runner.invoke(_audit_app(), [str(tmp / "B"), "--pubkey", str(tmp / "k.pub"),
                                       "--json", str(tmp_path / "public.json")])
    assert pub.exit_code == 0, pub.output
    assert "PRIVATE" not in pub.output
    public_json = json.loads((tmp_path / "public.json").read_text())
    assert "PRIVATE" not in public_json
    public_text = pub.output + json.dumps(public_json)

    rj, rh = tmp_path / "enclave.json", tmp_path / "enclave.html"
    old_umask = os.umask(0o022)
    try:
        res = runner.invoke(_audit_app(), [str(tmp / "B"), "--pubkey", str(tmp / "k.pub"),
                                           "--transcript", str(transcript), "--data", str(changed),
                                           "--json", str(rj), "--html", str(rh)])
    finally:
        os.umask(old_umask)
    console = res.output + res.stderr
    doc = json.loads(rj.read_text())
    replay = next(c for c in doc["checks"] if c["check"] == "replay")
    if res.exit_code == 0 and released["policy"] == "dp_count" and how == "weight":
        # the DP count fell below n and the resize left out the changed record (p ~ 1e-3)
        pytest.skip("the changed record is not among the resized records of this release")
    assert res.exit_code == 1, console

    assert replay["result"] == "fail", replay

    # nothing private in the console or in the reports
    strings = forbidden(transcript, [_plausible_n(released["data"]), _plausible_n(changed)])
    assert strings
    report = dict(doc)
    report.pop("created", None)
    for name, text in (("console", console), ("JSON report", json.dumps(report)),
                       ("HTML report", rh.read_text())):
        found = leaks(text, strings, public_text)
        assert not found, f"{name} shows private values {found[:5]}:\n{text[:3000]}"

    # ... and still says where the replay failed
    problems = " ".join(replay["problems"])
    if how == "weight" or released["policy"] == "dp_count":
        assert re.search(r"record \d+", problems) and "field 'true'" in problems, problems
    else:   # declared public n, one record fewer: the count differs (no number printed)
        assert "public n" in problems, problems

    # the reports are private: 0600, PRIVATE first; the console says so
    for p in (rj, rh):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, (p, oct(p.stat().st_mode))
    first = rj.read_text().splitlines()
    assert first[0] == "{" and first[1].strip().startswith('"PRIVATE":'), first[:2]
    assert next(iter(doc)) == "PRIVATE" and doc["PRIVATE"] == PRIVATE_NOTE
    assert validate(doc, "audit-report") == []
    assert rh.read_text().splitlines()[0].startswith("<!-- PRIVATE")
    assert "PRIVATE" in console.split("dpbundle audit")[0], console[:500]   # a banner before the table


@pytest.mark.slow
def test_enclave_audit_on_the_right_data_passes_and_is_still_private(released, tmp_path):
    tmp = released["tmp"]
    rj = tmp_path / "r.json"
    rj.write_text("stale, world-readable\n")
    rj.chmod(0o644)
    res = CliRunner().invoke(_audit_app(), [str(tmp / "B"), "--pubkey", str(tmp / "k.pub"),
                                            "--transcript", str(released["transcript"]),
                                            "--data", str(released["data"]), "--json", str(rj)])
    assert res.exit_code == 0, res.output
    assert "PRIVATE" in res.output
    doc = json.loads(rj.read_text())
    assert next(iter(doc)) == "PRIVATE" and doc["passed"] is True
    assert stat.S_IMODE(rj.stat().st_mode) == 0o600


@pytest.mark.slow
def test_default_transcript_is_private_and_away_from_the_bundle(released):
    tmp, t = released["tmp"], released["transcript"]
    bundle_parent = (tmp / "B").resolve().parent
    assert not t.resolve().is_relative_to(bundle_parent)
    assert not list(bundle_parent.glob("*transcript*"))
    assert t.name.startswith("B.") and t.name.endswith(".transcript.jsonl")
    assert stat.S_IMODE(t.stat().st_mode) == 0o600
    assert stat.S_IMODE(released["private"].stat().st_mode) == 0o700


# ------------------------------------------------------------------------------ units (fast)


def test_default_transcript_path_env_xdg_home(tmp_path, monkeypatch):
    from dpbundle.release.bundle.write import default_transcript_path

    out = tmp_path / "work" / "births-bundle"
    out.parent.mkdir()
    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(tmp_path / "p" / "q"))
    a, b = default_transcript_path(out), default_transcript_path(out)
    assert a.parent == tmp_path / "p" / "q" and a != b           # two releases never collide
    assert a.name.startswith("births-bundle.") and a.name.endswith(".transcript.jsonl")
    assert stat.S_IMODE(a.parent.stat().st_mode) == 0o700
    assert not a.is_relative_to(out.parent) and list(out.parent.iterdir()) == []
    monkeypatch.delenv("DPBUNDLE_PRIVATE_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_transcript_path(out).parent == tmp_path / "xdg" / "dpbundle" / "private"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    d = default_transcript_path(out).parent
    assert d == tmp_path / "home" / ".local" / "share" / "dpbundle" / "private"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700


def test_existing_private_dir_is_narrowed(tmp_path, monkeypatch, capsys):
    from dpbundle.release.bundle.write import default_transcript_path

    # the default directory (ours) is narrowed to 0700
    d = tmp_path / "xdg" / "dpbundle" / "private"
    d.mkdir(parents=True)
    d.chmod(0o755)
    monkeypatch.delenv("DPBUNDLE_PRIVATE_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_transcript_path(tmp_path / "x" / "B").parent == d
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    # a directory the user named is left alone, with a warning
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(shared))
    assert default_transcript_path(tmp_path / "x" / "B").parent == shared
    assert stat.S_IMODE(shared.stat().st_mode) == 0o755
    assert "may be read by other users" in capsys.readouterr().err


def test_write_transcript_file_is_0600_whatever_the_umask(tmp_path):
    rand = Randomness()
    rand.laplace(0.0139536123, sensitivity=1.0, epsilon=1.0, purpose="p")
    path = tmp_path / "t.jsonl"
    path.write_text("old")
    path.chmod(0o644)
    old = os.umask(0)
    try:
        write_transcript_file(path, rand.transcript, b"\x01" * 32)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_transcript_file(path)[1].records == rand.transcript.records
    assert [p.name for p in tmp_path.iterdir()] == ["t.jsonl"]     # no temporary file left


@pytest.mark.parametrize("true, changed, integer", [
    (0.013953612345678, 0.0139536999, False),
    ([0.25, 3.14159265, 2.71828182], [0.25, 3.14159265, 2.7182999], False),
    (7993, 7992, True),
    ([1234, 5678, 9012], [1234, 5679, 9012], True),
])
def test_replay_mismatch_names_where_not_what(true, changed, integer):
    rand = Randomness()
    arg = np.asarray(true) if isinstance(true, list) else true
    rand.laplace(arg, sensitivity=1.0, epsilon=0.5, purpose="secret stat", integer=integer)
    rec = rand.transcript.records[0]
    rp = Randomness.replay(rand.transcript.records)
    with pytest.raises(ReplayMismatch) as exc:
        rp.laplace(np.asarray(changed) if isinstance(changed, list) else changed, sensitivity=1.0,
                   epsilon=0.5, purpose="secret stat", integer=integer)
    msg = str(exc.value)
    assert "record 0" in msg and "'secret stat'" in msg and "'true'" in msg and "make_laplace" in msg
    assert exc.value.index == 0 and exc.value.field == "true"
    values = list(_numbers(rec["true"])) + list(_numbers(rec["noisy"])) + list(_numbers(changed))
    for v in values:
        for s in _renderings(v):
            if _distinctive(s):
                assert not re.search(r"(?<![0-9.])" + re.escape(s) + r"(?![0-9])", msg), (s, msg)


@pytest.mark.parametrize("field, change", [("sensitivity", dict(sensitivity=1.2345678)),
                                           ("epsilon", dict(epsilon=0.4321987))])
def test_replay_parameter_mismatch_prints_no_number(field, change):
    rand = Randomness()
    rand.laplace(0.0139536123, sensitivity=1.0, epsilon=0.5, purpose="p")
    args = dict(sensitivity=1.0, epsilon=0.5, purpose="p") | change
    with pytest.raises(ReplayMismatch) as exc:
        Randomness.replay(rand.transcript.records).laplace(0.0139536123, **args)
    msg = str(exc.value)
    assert exc.value.field == field and f"'{field}'" in msg
    assert "1.2345678" not in msg and "0.4321987" not in msg and "0.01395" not in msg


def test_mark_mismatch_prints_no_field_value():
    rand = Randomness()
    rand.mark("iteration", index=3, secret=98765.4321)
    with pytest.raises(ReplayMismatch) as exc:
        Randomness.replay(rand.transcript.records).mark("iteration", index=3, secret=12345.6789)
    assert "secret" in str(exc.value) and "98765" not in str(exc.value) and "12345" not in str(exc.value)


def test_private_data_errors_do_not_quote_cells(tmp_path):
    from dpbundle.audit.private_data import PrivateDataError, load_private

    spec = fx.load_spec()
    rows = ["mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth",
            "31,2,39,true,3321,2019-05-01", "29,1,40,false,98765431,2019-06-01",
            "27,1,38,maybe-4711,3100,2019-07-01"]
    p = tmp_path / "d.csv"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(PrivateDataError) as exc:
        load_private(p, spec)
    msg = str(exc.value)
    assert "line 3" in msg and "birth_weight" in msg and "line 4" in msg
    assert "98765431" not in msg and "4711" not in msg
    p.write_bytes(b"mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth\n"
                  b"31,2,39,true,33\xe9\xff21,2019-05-01\n")
    with pytest.raises(PrivateDataError) as exc:
        load_private(p, spec)
    assert "0xe9" not in str(exc.value) and "UnicodeDecodeError" in str(exc.value)


def test_replay_crash_message_is_withheld():
    from dpbundle.audit.runner import _guard

    def boom():
        raise ValueError("laplace 'x': the true value 0.0139536123 is not an integer")

    r = _guard("replay", boom, private=True)
    assert r.failed and "ValueError" in r.problems[0] and "0.0139536123" not in r.problems[0]
    assert "0.0139536123" in _guard("budget", boom).problems[0]    # public checks: unchanged


def test_report_private_marking_and_schema():
    rep = AuditReport(bundle="b", private=True)
    r = CheckResult("replay")
    r.fail("transcript record 4 (laplace 'kway' via opendp.make_laplace), field 'true': differs")
    rep.checks.append(r)
    doc = rep.to_dict()
    assert list(doc)[0] == "PRIVATE" and validate(doc, "audit-report") == []
    assert rep.to_json().splitlines()[1].strip().startswith('"PRIVATE"')
    assert rep.to_html().startswith("<!-- PRIVATE")
    assert "PRIVATE" in rep.private_banner()
    # a report of a replay that ran must be marked
    unmarked = {k: v for k, v in doc.items() if k != "PRIVATE"}
    assert validate(unmarked, "audit-report") != []
    pub = AuditReport(bundle="b")
    s = CheckResult("replay")
    s.skip("not requested")
    pub.checks.append(s)
    assert "PRIVATE" not in pub.to_dict() and validate(pub.to_dict(), "audit-report") == []
    assert not pub.to_html().startswith("<!--") and pub.private_banner() == ""
