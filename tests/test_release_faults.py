"""Fault injection around `dpbundle release`: nothing is spent on a run that a check made before
the selection could have refused, nothing of the user's is lost, and a kept result can be
written again without a new spend."""
from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

import dpbundle.release.bundle.preflight as preflight
import dpbundle.release.scheme.selection as selection_mod
from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    data = tmp / "R.csv"
    write_example(data, rows=1500, seed=9)
    spec = tmp / "births.yaml"
    spec.write_text((ROOT / "examples" / "births.yaml").read_text())
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    return SimpleNamespace(tmp=tmp, data=data, spec=spec, key=tmp / "k.key")


def _args(env, out: Path, name: str, *extra: str) -> list[str]:
    return ["release", str(env.spec), str(env.data), "--out", str(out), "--key", str(env.key),
            "--ledger", str(env.tmp / f"{name}.ledger.jsonl"),
            "--transcript", str(env.tmp / f"{name}.tr.jsonl"), *extra]


def _ledger_lines(env, name: str) -> list[str]:
    p = env.tmp / f"{name}.ledger.jsonl"
    return [x for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def _no_selection(monkeypatch):
    """Fail loudly if a test reaches the selection (i.e. would spend)."""
    def boom(*_a, **_k):
        raise AssertionError("the selection ran: budget would have been spent")
    monkeypatch.setattr(selection_mod, "run_iteration", boom)


def test_force_onto_a_folder_that_is_not_a_bundle_touches_nothing(env, monkeypatch):
    """A web-app folder with a file called manifest.json is not a bundle: --force refuses it
    before anything is spent, and app.js survives."""
    _no_selection(monkeypatch)
    victim = env.tmp / "webapp"
    victim.mkdir()
    (victim / "manifest.json").write_text('{"name": "my app"}')
    (victim / "app.js").write_text("console.log('mine')")
    res = runner.invoke(app, _args(env, victim, "victim", "--force"))
    assert res.exit_code == 2, res.output
    assert "not a dpbundle manifest" in res.output and "nothing was spent" in res.output
    assert "Traceback" not in res.output
    assert (victim / "app.js").read_text() == "console.log('mine')"
    assert _ledger_lines(env, "victim") == []


def test_replaceable_bundle_checks(tmp_path):
    d = tmp_path / "b"
    d.mkdir()
    assert preflight.replaceable_bundle_problem(d) is None  # empty: fine
    (d / "data.csv").write_text("a\n1\n")
    import hashlib

    digest = hashlib.sha256(b"a\n1\n").hexdigest()
    manifest = {"format": "dpbundle-bundle/1", "files": [{"path": "data.csv", "sha256": digest, "size": 4}]}
    (d / "manifest.json").write_text(json.dumps(manifest))
    (d / "manifest.sig").write_bytes(b"x")
    assert preflight.replaceable_bundle_problem(d) is None
    (d / "notes.txt").write_text("mine")
    assert "does not list" in preflight.replaceable_bundle_problem(d)
    (d / "notes.txt").unlink()
    (d / "data.csv").write_text("a\n2\n")
    assert "does not match" in preflight.replaceable_bundle_problem(d)
    (d / "data.csv").unlink()
    assert "lacks" in preflight.replaceable_bundle_problem(d)


def test_unwritable_output_folder_is_refused_before_the_ledger(env, monkeypatch):
    """A read-only --out folder (simulated: creating a file there fails with EROFS, which also
    works when the tests run as root) is refused with exit 2 and no ledger entry."""
    _no_selection(monkeypatch)
    ro = env.tmp / "ro"
    ro.mkdir()
    real_open = os.open

    def fake_open(path, flags, mode=0o777, *a, **k):
        if str(path).startswith(str(ro)) and ".dpbundle-probe-" in str(path):
            raise OSError(30, "Read-only file system")
        return real_open(path, flags, mode, *a, **k)

    monkeypatch.setattr(preflight.os, "open", fake_open)
    res = runner.invoke(app, _args(env, ro / "B", "ro"))
    assert res.exit_code == 2, res.output
    assert "Read-only file system" in res.output and str(ro) in res.output.replace("\n", "")
    assert _ledger_lines(env, "ro") == []


def test_full_disk_is_refused_before_the_ledger(env, monkeypatch):
    _no_selection(monkeypatch)
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda _p: SimpleNamespace(free=10_000, total=1, used=1))
    res = runner.invoke(app, _args(env, env.tmp / "full", "full"))
    assert res.exit_code == 2, res.output
    assert "MB free" in res.output and "nothing was spent" in res.output
    assert _ledger_lines(env, "full") == []


def test_broken_pdf_renderer_is_refused_before_the_ledger(env, monkeypatch):
    _no_selection(monkeypatch)
    from dpbundle.release.bundle import datasheet

    def broken():
        raise OSError("cannot load library 'libpango-1.0-0'")

    monkeypatch.setattr(datasheet, "check_renderer", broken)
    res = runner.invoke(app, _args(env, env.tmp / "nopdf", "nopdf"))
    assert res.exit_code == 2, res.output
    assert "datasheet cannot be rendered" in res.output and "libpango" in res.output
    assert _ledger_lines(env, "nopdf") == []


def test_renderer_check_passes_here():
    assert preflight.renderer_problem() is None


def test_stale_temporary_folders_of_dead_runs_are_removed(env, monkeypatch):
    _no_selection(monkeypatch)
    out = env.tmp / "stale"
    dead = env.tmp / ".stale.tmp-999999999-abcd"
    dead.mkdir()
    (dead / "data.csv").write_text("unsigned")
    alive = env.tmp / f".stale.tmp-{os.getpid()}-abcd"
    alive.mkdir()
    other = env.tmp / ".otherbundle.tmp-999999999-abcd"
    other.mkdir()
    res = runner.invoke(app, [*_args(env, out, "stale")[:-2], "--transcript", "/nonexistent/t.jsonl"])
    assert res.exit_code == 2  # stops at the transcript check, after the clean-up
    assert not dead.exists() and alive.exists() and other.exists()
    assert ".stale.tmp-999999999-abcd" in res.output


def test_sigterm_while_writing_leaves_no_temporary_folder(env, tmp_path, monkeypatch):
    """SIGTERM during the PDF rendering: the handler turns it into an exception, the hidden
    .OUT.tmp-* folder is removed, the result is kept for --resume and the ledger says so;
    --resume then writes a bundle that passes the audit, with no new ledger spend."""
    from dpbundle.release.bundle import datasheet

    real_render = datasheet.render_pdf
    state = {"n": 0}

    def render_then_sigterm(html, path):
        state["n"] += 1
        if state["n"] == 1:
            os.kill(os.getpid(), signal.SIGTERM)
        return real_render(html, path)

    monkeypatch.setattr(datasheet, "render_pdf", render_then_sigterm)
    out = tmp_path / "B"
    spec = tmp_path / "loose.yaml"
    doc = yaml.safe_load(env.spec.read_text())
    for e in doc["acceptance"]:
        e["threshold"] = 1e12 if e["type"] != "smoothed_ratio" else 1e6
        if e["type"] == "smoothed_ratio":
            e["clip"] = 1e6
        e.pop("clip", None) if e["type"] != "smoothed_ratio" else None
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    args = ["release", str(spec), str(env.data), "--out", str(out), "--key", str(env.key),
            "--ledger", str(tmp_path / "l.jsonl"), "--transcript", str(tmp_path / "t.jsonl")]
    res = runner.invoke(app, args)
    assert res.exit_code == 130, res.output
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".B.tmp-")]
    assert "--resume" in res.output
    pending = Path(next(w for w in res.output.replace("\n", " ").split() if w.endswith(".pending.npz")))
    assert stat.S_IMODE(pending.stat().st_mode) == 0o600
    lines = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert any("interrupted while writing" in json.dumps(x) for x in lines)
    n_lines = len(lines)
    monkeypatch.setattr(datasheet, "render_pdf", real_render)
    res = runner.invoke(app, ["release", "--resume", str(pending), "--out", str(out), "--key", str(env.key)])
    assert res.exit_code == 0, res.output
    assert not pending.exists()
    from dpbundle.audit.runner import run_audit

    rep = run_audit(out, pubkey=env.tmp / "k.pub")
    assert rep.passed, [(c.check, c.problems) for c in rep.checks if c.failed]
    lines = [json.loads(x) for x in (tmp_path / "l.jsonl").read_text().splitlines()]
    assert len(lines) == n_lines + 1 and "released" in json.dumps(lines[-1])  # a status line, no spend


def test_configs_swept_on_another_spec_are_refused(env, monkeypatch):
    _no_selection(monkeypatch)
    from dpbundle.release.scheme.space import config_id, enumerate_configs
    from dpbundle.release.spec.load import load_spec

    c = next(iter(enumerate_configs(load_spec(env.spec))))
    lst = env.tmp / "other.yaml"
    lst.write_text(yaml.safe_dump({"format": "dpbundle-narrowed/1", "spec_sha256": "ab" * 32,
                                   "configurations": [{"id": config_id(c), "config": c, "acceptance": 0.5,
                                                       "wilson_low": 0.3, "wilson_high": 0.7, "runs": 9}]}))
    res = runner.invoke(app, _args(env, env.tmp / "other", "other", "--configs", str(lst)))
    assert res.exit_code == 2, res.output
    text = res.output.replace("\n", " ")
    assert "ab" * 32 in text and "this spec:" in text and "--allow-other-spec" in text
    assert _ledger_lines(env, "other") == []


def test_unfinished_runs_are_reported_and_can_be_marked(env, monkeypatch):
    """A run killed after its ledger entry (status 'started') is reported by the next run on the
    same data; `dpbundle ledger mark` records its outcome, and it still counts as spent."""
    from dpbundle.release.scheme.ledger import Ledger, NEVER_RELEASED
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.data.fingerprint import table_fingerprint

    spec = load_spec(env.spec)
    prepared = prepare(env.data, spec)
    path = env.tmp / "killed.ledger.jsonl"
    book = Ledger(path)
    eid = book.record(prepared.sha256, spec.fingerprint, 9.98, "dpbundle release (killed)",
                      table_fp=table_fingerprint(prepared, spec))
    _no_selection(monkeypatch)
    res = runner.invoke(app, _args(env, env.tmp / "killed", "killed", "--allow-additional-spend"))
    # the note comes before the new spend; the stubbed selection then fails
    assert "never finished" in res.output and eid[:12] in res.output
    assert "dpbundle ledger mark" in res.output
    res = runner.invoke(app, ["ledger", "list", "--ledger", str(path), "--unfinished"])
    assert res.exit_code == 0 and eid[:12] in res.output
    res = runner.invoke(app, ["ledger", "mark", eid[:8], "--ledger", str(path)])
    assert res.exit_code == 0, res.output
    entry = next(e for e in Ledger(path).all_entries() if e["id"] == eid)
    assert entry["status"] == NEVER_RELEASED
    assert Ledger(path).spent(prepared.sha256) >= 9.98  # still counts
    res = runner.invoke(app, ["ledger", "mark", "zzzzzz", "--ledger", str(path)])
    assert res.exit_code == 2 and "no spend" in " ".join(res.output.split())


def test_ctrl_c_before_the_spend_says_nothing_was_spent(env, monkeypatch):
    import dpbundle.release.data.prepare as prep

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(prep, "prepare", interrupted)
    res = runner.invoke(app, _args(env, env.tmp / "early", "early"))
    assert res.exit_code == 130
    assert "before any privacy budget was spent" in res.output
    assert _ledger_lines(env, "early") == []
