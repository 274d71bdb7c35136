"""Faults and hostile input on the new surfaces (issue 27, section 3).

One block per item of the issue:

1. every input of a release is validated before its ledger entry (a beacon or a spec text that
   is not UTF-8 costs nothing);
2. every exit of a release states truthfully what exists (signals near the end, SIGTERM never a
   silent 143);
3. a private directory that fills after the spend still gets the selected result (room reserved
   before the spend; never a 0-byte kept result);
4. ``--resume`` signs only an authentic, re-checked kept result; its ledger path is absolute and
   never a link or another file (no chmod of anything else);
5. Rich markup and control characters in titles, beacons and ledger statuses print literally;
6. a full disk while writing exits 2; a ledger that turns read-only after the bundle is a warning;
7. devices, FIFOs and oversized files are refused before they are read; --force and
   ``sample --out`` never replace a device node;
8. ``sample --rows`` and ``--example-rows`` are bounded before any work;
9. the Python API raises one hierarchy (DpbundleError / DpbundleInterrupt);
10. ``preregister`` refuses a list that is not one, or was swept for another spec.

No output of any of these holds a traceback; the exit codes are the documented ones
(docs/faults.md).
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

import dpbundle.release.scheme.selection as selection_mod  # noqa: E402
from dpbundle.release.cli.main import app  # noqa: E402

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("newfaults")
    spec = fx.fast_spec(tmp / "fast.yaml")
    data = fx.example_registry(tmp / "registry.csv", 2000, 5)
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    private = tmp / "private"
    private.mkdir(mode=0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPBUNDLE_PRIVATE_DIR", str(private))
        yield SimpleNamespace(tmp=tmp, spec=spec, data=data, key=tmp / "k.key", pub=tmp / "k.pub",
                              private=private)


@pytest.fixture(autouse=True)
def _private_dir(env, monkeypatch):
    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(env.private))


def _invoke(*args, wide: bool = False):
    res = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "400"} if wide else None)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def _text(res) -> str:
    return " ".join(res.output.split())


def _release(env, d: Path, *extra, out: Path | None = None, spec: Path | None = None):
    d.mkdir(parents=True, exist_ok=True)
    return _invoke("release", spec or env.spec, env.data, "--out", out or d / "B", "--key", env.key,
                   "--ledger", d / "ledger.jsonl", "--transcript", d / "t.jsonl", *extra)


def _ledger(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _statuses(path: Path) -> list[str]:
    return [r["status"] for r in _ledger(path)]


def _pending_from(res) -> Path:
    return Path(next(w for w in res.output.replace("\n", " ").split() if w.endswith(".pending.npz")))


def _no_selection(monkeypatch):
    def boom(*_a, **_k):
        raise AssertionError("the selection ran: budget would have been spent")
    monkeypatch.setattr(selection_mod, "run_iteration", boom)


def _fire_once(sig=signal.SIGTERM):
    """A function that sends ``sig`` to this process the first time it is called."""
    state = {"done": False}

    def fire():
        if not state["done"]:
            state["done"] = True
            os.kill(os.getpid(), sig)
    return fire


@contextlib.contextmanager
def _deadline(seconds: int):
    """Fail (instead of hanging) when the block takes longer than ``seconds``."""
    def alarm(_s, _f):
        raise AssertionError(f"took more than {seconds} s (a hang?)")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _write_fails_with(monkeypatch, err: int = errno.ENOSPC):
    """write_bundle fails while rendering the PDF, as on a full disk."""
    from dpbundle.release.bundle import datasheet

    def full(_html, _path):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(datasheet, "render_pdf", full)


@pytest.fixture(scope="module")
def kept(env, tmp_path_factory):
    """A kept result (.pending.npz) of a run whose bundle could not be written (disk full)."""
    d = tmp_path_factory.mktemp("kept")
    from dpbundle.release.bundle import datasheet

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPBUNDLE_PRIVATE_DIR", str(env.private))

        def full(_html, _path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        mp.setattr(datasheet, "render_pdf", full)
        res = _release(env, d)
    assert res.exit_code == 2, res.output
    pending = _pending_from(res)
    keep = d / "kept.pending.npz"           # a pristine copy; tests work on copies
    shutil.copy2(pending, keep)
    pending.unlink()
    return SimpleNamespace(dir=d, pending=keep, ledger=d / "ledger.jsonl", output=res.output)


def _copy_kept(kept, env, name: str) -> Path:
    p = env.private / f"{name}.pending.npz"
    shutil.copy2(kept.pending, p)
    return p


# ------------------------------------------------------ 1. every input before the ledger entry

@pytest.fixture(scope="module")
def prereg(env):
    d = env.tmp / "prereg"
    d.mkdir()
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", d / "rec.json",
                  "--beacon-source", "the lottery's first draw after the record",
                  "--secret-out", d / "rec.secret.json")
    assert res.exit_code == 0, res.output
    return SimpleNamespace(rec=d / "rec.json", secret=d / "rec.secret.json")


@pytest.mark.parametrize("beacon", ["\udcff\udcfe", "draw 4 8 15 \udc80"])
def test_a_beacon_that_is_not_utf8_costs_nothing(env, prereg, tmp_path, beacon, monkeypatch):
    _no_selection(monkeypatch)
    res = _release(env, tmp_path, "--preregistration", prereg.rec, "--beacon", beacon,
                   "--preregistration-secret", prereg.secret)
    assert res.exit_code == 2, res.output
    assert "not valid UTF-8" in _text(res) and "nothing was read or spent" in _text(res)
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_beacon_with_markup_prints_literally_and_releases(env, prereg, tmp_path):
    beacon = "draw [/] [bold red]4 8 15[/bold red] \x1b[31m"
    res = _release(env, tmp_path, "--preregistration", prereg.rec, "--beacon", beacon,
                   "--preregistration-secret", prereg.secret)
    assert res.exit_code == 0, res.output
    assert "[/] [bold red]4 8 15[/bold red]" in res.output and "\x1b" not in res.output
    seeds = json.loads((tmp_path / "B" / "seeds.json").read_text())
    assert seeds["beacon"]["value"] == beacon


def test_a_spec_text_that_is_not_unicode_costs_nothing(env, tmp_path, monkeypatch):
    _no_selection(monkeypatch)
    spec = tmp_path / "s.yaml"
    text = env.spec.read_text().replace("title: ", 'title: "bad \\udcff" #', 1)
    spec.write_text(text)
    res = _release(env, tmp_path, spec=spec)
    assert res.exit_code == 2, res.output
    assert "lone surrogate" in _text(res) and not (tmp_path / "ledger.jsonl").exists()


def test_an_out_path_that_is_not_utf8_costs_nothing(env, tmp_path, monkeypatch):
    _no_selection(monkeypatch)
    res = _release(env, tmp_path, out=tmp_path / "bundle-\udcff")
    assert res.exit_code == 2 and "--out is not valid UTF-8" in _text(res), res.output
    assert not (tmp_path / "ledger.jsonl").exists()


def test_an_out_name_too_long_for_the_temporary_names_costs_nothing(env, tmp_path, monkeypatch):
    _no_selection(monkeypatch)
    res = _release(env, tmp_path, out=tmp_path / ("b" * 230))
    assert res.exit_code == 2 and "longer than 215 bytes" in _text(res), res.output
    assert not (tmp_path / "ledger.jsonl").exists()


# ---------------------------------------------------- 2. every exit states what exists

def _sigterm_at(monkeypatch, where: str, out: Path, transcript: Path):
    """Send SIGTERM at a point near the end of a release."""
    fire = _fire_once()
    if where == "after the bundle's rename":        # before its transcript is in place
        real = os.rename

        def rename(a, b, *k, **kw):
            r = real(a, b, *k, **kw)
            if Path(b) == out and ".tmp-" in Path(a).name:
                fire()
            return r
        monkeypatch.setattr(os, "rename", rename)
    elif where == "after the transcript's rename":  # before the zip is in place
        real = os.replace

        def replace(a, b, *k, **kw):
            r = real(a, b, *k, **kw)
            if Path(b) == transcript:
                fire()
            return r
        monkeypatch.setattr(os, "replace", replace)
    elif where == "while the ledger is marked":
        from dpbundle.release.scheme.ledger import Ledger

        real = Ledger.mark_finished

        def mark(self, entry, status="finished"):
            if status == "released":
                fire()
            return real(self, entry, status)
        monkeypatch.setattr(Ledger, "mark_finished", mark)
    elif where == "during the summary":
        import dpbundle.release.pipeline.outcome as rc

        real = rc.summary

        def summary(*a, **k):
            fire()
            return real(*a, **k)
        monkeypatch.setattr(rc, "summary", summary)
    elif where == "while the spend is appended":
        from dpbundle.release.scheme.ledger import Ledger

        real = Ledger._append

        def append(self, fd, rec):
            if rec["kind"] == "spend":
                fire()
            return real(self, fd, rec)
        monkeypatch.setattr(Ledger, "_append", append)
    else:  # pragma: no cover
        raise ValueError(where)


@pytest.mark.parametrize("where", ["after the transcript's rename", "while the ledger is marked",
                                   "during the summary"])
def test_a_signal_after_the_bundle_is_complete_says_so(env, tmp_path, monkeypatch, where):
    out, transcript = tmp_path / "B", tmp_path / "t.jsonl"
    _sigterm_at(monkeypatch, where, out, transcript)
    res = _release(env, tmp_path, "--zip")
    text = _text(res)
    assert res.exit_code == 130, res.output
    assert "terminated (SIGTERM) after the bundle was complete" in text
    assert "a complete bundle is at" in text and "status 'released'" in text
    assert "nothing was released" not in text and "untouched" not in text
    assert _statuses(tmp_path / "ledger.jsonl")[-1] == "released"
    assert (tmp_path / "B.zip").is_file()         # completed if the stop came before it
    from dpbundle.audit.runner import run_audit

    assert run_audit(out, pubkey=env.pub).passed
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name]


def test_a_signal_between_the_bundle_and_its_transcript_keeps_the_result(env, tmp_path, monkeypatch):
    """The bundle was renamed into place but its transcript was not: it could never be audited
    inside the enclave, so it is taken away and the result kept for --resume."""
    out, transcript = tmp_path / "B", tmp_path / "t.jsonl"
    _sigterm_at(monkeypatch, "after the bundle's rename", out, transcript)
    res = _release(env, tmp_path)
    text = _text(res)
    assert res.exit_code == 130, res.output
    assert "no bundle was written" in text and "--resume" in text
    assert "status 'interrupted while writing the bundle'" in text
    assert not out.exists()
    assert _pending_from(res).stat().st_size > 0


def test_a_signal_after_a_forced_rename_puts_the_old_bundle_back(env, tmp_path, monkeypatch):
    res = _release(env, tmp_path)
    assert res.exit_code == 0, res.output
    out = tmp_path / "B"
    before = (out / "data.csv").read_bytes()
    _sigterm_at(monkeypatch, "after the bundle's rename", out, tmp_path / "t.jsonl")
    res = _release(env, tmp_path, "--force", "--allow-additional-spend")
    assert res.exit_code == 130, res.output
    assert "holds the previous bundle, unchanged" in _text(res)
    assert (out / "data.csv").read_bytes() == before
    from dpbundle.audit.runner import run_audit

    assert run_audit(out, pubkey=env.pub).passed


def test_a_signal_while_the_spend_is_written_says_it_is_recorded(env, tmp_path, monkeypatch):
    _sigterm_at(monkeypatch, "while the spend is appended", tmp_path / "B", tmp_path / "t.jsonl")
    res = _release(env, tmp_path)
    text = _text(res)
    assert res.exit_code == 130, res.output
    assert "is recorded in the ledger" in text and "status 'interrupted'" in text
    assert "untouched" not in text
    lines = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert [json.loads(x)["status"] for x in lines] == ["started", "interrupted"]   # whole lines


def test_a_signal_before_the_spend_says_nothing_was_spent(env, tmp_path, monkeypatch):
    import dpbundle.release.data.prepare as prep

    real = prep.prepare
    fire = _fire_once(signal.SIGHUP)

    def prepare(*a, **k):
        fire()
        return real(*a, **k)
    monkeypatch.setattr(prep, "prepare", prepare)
    res = _release(env, tmp_path)
    assert res.exit_code == 130
    assert "terminated (SIGHUP) before any privacy budget was spent" in _text(res)
    assert not (tmp_path / "ledger.jsonl").exists()


def test_sigterm_never_ends_a_command_silently(tmp_path):
    """Any dpbundle command stopped by SIGTERM says so and exits 130 (never a silent 143)."""
    exe = Path(sys.executable).with_name("dpbundle")
    proc = subprocess.Popen([str(exe), "example", "births", "--rows", "50000000", "--out",
                             str(tmp_path / "x.csv")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()


# ------------------------------------------- 3. the private directory fills after the spend

def test_a_full_private_directory_after_the_spend_keeps_the_result(env, tmp_path, monkeypatch):
    """After the spend, every new file in the private directory fails with ENOSPC (and the bundle
    too): the result still goes into the room reserved before the spend, verified, never empty."""
    _write_fails_with(monkeypatch)
    real_select, real_open = selection_mod.select, os.open
    private = str(env.private)
    full = {"on": False}

    def select(*a, **k):
        full["on"] = True
        return real_select(*a, **k)

    def open_(path, flags, *a, **k):
        if full["on"] and flags & os.O_CREAT and str(path).startswith(private):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(selection_mod, "select", select)
    monkeypatch.setattr(os, "open", open_)
    before = set(env.private.iterdir())
    res = _release(env, tmp_path)
    monkeypatch.setattr(os, "open", real_open)
    assert res.exit_code == 2, res.output
    assert "No space left on device" in _text(res)
    pending = _pending_from(res)
    assert pending.stat().st_size > 0 and stat.S_IMODE(pending.stat().st_mode) == 0o600
    from dpbundle.release.bundle.pending import load_pending

    assert load_pending(pending)["ledger_entry"] == _ledger(tmp_path / "ledger.jsonl")[0]["id"]
    new = set(env.private.iterdir()) - before
    assert not [p for p in new if p.stat().st_size == 0], new
    assert not [p for p in new if "pending-room" in p.name]          # the reservation became the result


def test_no_room_for_a_kept_result_is_refused_before_the_spend(env, tmp_path, monkeypatch):
    import dpbundle.release.bundle.pending as pending_mod

    def no_room(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(pending_mod, "reserve", no_room)
    _no_selection(monkeypatch)
    res = _release(env, tmp_path)
    assert res.exit_code == 2, res.output
    assert "cannot reserve room" in _text(res) and "nothing was spent" in _text(res)
    assert not (tmp_path / "ledger.jsonl").exists()


def test_a_failed_save_leaves_no_empty_pending_file(env, tmp_path, monkeypatch):
    from dpbundle.release.bundle import pending as pending_mod

    d = tmp_path / "priv"
    d.mkdir(mode=0o700)

    def pwrite(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(pending_mod.os, "pwrite", pwrite)
    with pytest.raises(OSError):
        pending_mod.save_pending(d, tmp_path / "B", spec={}, configuration={}, configuration_id="x",
                                 columns=[], codes=np.zeros((3, 0), dtype=np.int64), metrics=[],
                                 budget={}, transcript_jsonl=b"", transcript_path=tmp_path / "t",
                                 ledger_path=tmp_path / "l", ledger_entry="e")
    assert [p.name for p in d.iterdir()] == ["pending.key"]


def _tmpfs(path: Path, size: str):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")


def test_a_really_full_private_tmpfs_after_the_spend(env, tmp_path, monkeypatch):
    """On a real 24 MB tmpfs: the release reserves room, then (after the spend) the file system
    is filled; the transcript cannot be written, the result is kept in the reserved room, and
    after freeing space --resume writes a bundle that passes the audit."""
    private = tmp_path / "tmpfs"
    _tmpfs(private, "24m")
    try:
        monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(private))
        real_select = selection_mod.select
        filler = private / "filler"

        def select(*a, **k):
            with open(filler, "wb") as fh:       # fill the file system after the spend
                with contextlib.suppress(OSError):
                    while True:
                        fh.write(b"\0" * (1 << 20))
                        fh.flush()
            return real_select(*a, **k)
        monkeypatch.setattr(selection_mod, "select", select)
        res = _invoke("release", env.spec, env.data, "--out", tmp_path / "B", "--key", env.key,
                      "--ledger", tmp_path / "ledger.jsonl")
        assert res.exit_code == 2, res.output
        assert "No space left on device" in _text(res), res.output
        assert ".pending.npz" in res.output, res.output
        pending = _pending_from(res)
        assert pending.parent == private and pending.stat().st_size > 0
        filler.unlink()
        monkeypatch.setattr(selection_mod, "select", real_select)
        res = _invoke("release", "--resume", pending, "--out", tmp_path / "B", "--key", env.key)
        assert res.exit_code == 0, res.output
        assert _statuses(tmp_path / "ledger.jsonl")[-1] == "released"
        from dpbundle.audit.runner import run_audit

        assert run_audit(tmp_path / "B", pubkey=env.pub).passed
    finally:
        subprocess.run(["umount", str(private)], capture_output=True)


# ------------------------------------------------------------- 4. --resume and forgeries

def _resave(p: dict, directory: Path, out: Path, **changes) -> Path:
    """Write a loaded kept result again (with the key of ``directory``), with ``changes``."""
    from dpbundle.release.bundle.pending import save_pending

    q = dict(p, **changes)
    return save_pending(directory, out, spec=q["spec"], configuration=q["configuration"],
                        configuration_id=q["configuration_id"], columns=q["columns"], codes=q["codes"],
                        metrics=q["metrics"], budget=q["budget"],
                        transcript_jsonl=q["transcript_jsonl"].encode(), transcript_path=Path(q["transcript_path"]),
                        ledger_path=Path(q["ledger_path"]), ledger_entry=q["ledger_entry"],
                        public_files=q["public_files"])


def test_resume_writes_an_authentic_kept_result(env, kept, tmp_path):
    p = _copy_kept(kept, env, "ok")
    n = len(_ledger(kept.ledger))
    res = _invoke("release", "--resume", p, "--out", tmp_path / "B", "--key", env.key,
                  "--transcript", tmp_path / "t.jsonl")
    assert res.exit_code == 0, res.output
    assert len(_ledger(kept.ledger)) == n + 1 and _statuses(kept.ledger)[-1] == "released"
    assert not p.exists()
    from dpbundle.audit.runner import run_audit

    assert run_audit(tmp_path / "B", pubkey=env.pub).passed


def test_a_plausible_edit_of_the_codes_is_refused(env, kept, tmp_path):
    p = _copy_kept(kept, env, "edited")
    with np.load(p) as z:
        codes, meta, mac = z["codes"].copy(), z["meta"], z["mac"]
    i = int(np.argmax(codes[:, 0] > 0))
    codes[i, 0] -= 1                                   # one record moved to the next bin
    np.savez_compressed(p, codes=codes, meta=meta, mac=mac)
    res = _invoke("release", "--resume", p, "--out", tmp_path / "B", "--key", env.key)
    assert res.exit_code == 2 and "not authentic" in _text(res), res.output
    assert not (tmp_path / "B").exists()


def test_a_kept_result_made_with_another_key_is_refused(env, kept, tmp_path):
    from dpbundle.release.bundle.pending import load_pending

    p = load_pending(kept.pending)
    other = tmp_path / "elsewhere"
    other.mkdir(mode=0o700)
    forged = _resave(p, other, tmp_path / "B")          # its own key, beside it
    res = _invoke("release", "--resume", forged, "--out", tmp_path / "B", "--key", env.key)
    assert res.exit_code == 2 and "not authentic" in _text(res), res.output


def test_a_kept_result_of_the_old_format_is_refused(env, kept, tmp_path):
    with np.load(kept.pending) as z:
        np.savez_compressed(tmp_path / "old.pending.npz", codes=z["codes"],
                            meta=np.array(z["meta"].tobytes().decode()))
    res = _invoke("release", "--resume", tmp_path / "old.pending.npz", "--out", tmp_path / "B",
                  "--key", env.key)
    assert res.exit_code == 2 and "carries no authentication" in _text(res), res.output


@pytest.mark.parametrize("what", ["dp_value", "rare record", "configuration"])
def test_a_kept_result_that_fails_its_recheck_is_not_signed(env, kept, tmp_path, what):
    """Even with the key (an insider), the kept result must agree with its own transcript and
    with the face-privacy minimum."""
    from dpbundle.release.bundle.pending import load_pending

    p = load_pending(kept.pending)
    if what == "dp_value":
        metrics = [dict(m) for m in p["metrics"]]
        metrics[0]["dp_value"] = metrics[0]["dp_value"] - 1e-3
        changes = {"metrics": metrics}
    elif what == "rare record":
        codes = p["codes"].copy()
        codes[0] = [len(c.labels) - 1 for c in p["columns"]]   # one record of its own
        changes = {"codes": codes}
    else:
        changes = {"configuration": dict(p["configuration"], projection={"min_count": 1})}
    forged = _resave(p, env.private, tmp_path / "B", **changes)
    res = _invoke("release", "--resume", forged, "--out", tmp_path / "B", "--key", env.key)
    assert res.exit_code == 2 and "fails its re-check" in _text(res), res.output
    assert not (tmp_path / "B").exists()


def test_a_redirected_ledger_path_touches_nothing(env, kept, tmp_path):
    from dpbundle.release.bundle.pending import load_pending

    victim = tmp_path / "victim.txt"
    victim.write_text("not a ledger\n")
    os.chmod(victim, 0o644)
    p = load_pending(kept.pending)
    forged = _resave(p, env.private, tmp_path / "B", ledger_path=str(victim))
    res = _invoke("release", "--resume", forged, "--out", tmp_path / "B", "--key", env.key)
    assert res.exit_code == 2, res.output
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644 and victim.read_text() == "not a ledger\n"
    assert not (tmp_path / "B").exists()


def test_the_ledger_never_chmods_or_writes_through_another_file(tmp_path):
    from dpbundle.release.scheme.ledger import Ledger, LedgerError

    victim = tmp_path / "victim.txt"
    victim.write_text("hello\n")
    os.chmod(victim, 0o644)
    with pytest.raises(LedgerError):
        Ledger(victim).mark_finished("a" * 32, "released")
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644 and victim.read_text() == "hello\n"
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(victim)
    with pytest.raises(LedgerError, match="symbolic link"):
        Ledger(link).record("d", "s", 1.0, "x")
    assert victim.read_text() == "hello\n"
    with pytest.raises(LedgerError, match="no spend"):     # never created to record an outcome
        Ledger(tmp_path / "absent.jsonl").mark_finished("a" * 32, "released")
    assert not (tmp_path / "absent.jsonl").exists()


def test_a_relative_ledger_path_still_records_released(env, tmp_path, monkeypatch):
    d = tmp_path / "run"
    d.mkdir()
    monkeypatch.chdir(d)
    _write_fails_with(monkeypatch)
    res = _invoke("release", env.spec, env.data, "--out", "B", "--key", env.key,
                  "--ledger", "rel.ledger.jsonl", "--transcript", "t.jsonl")
    assert res.exit_code == 2, res.output
    pending = _pending_from(res)
    monkeypatch.undo()
    monkeypatch.setenv("DPBUNDLE_PRIVATE_DIR", str(env.private))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = _invoke("release", "--resume", pending, "--out", tmp_path / "B", "--key", env.key)
    assert res.exit_code == 0, res.output
    assert _statuses(d / "rel.ledger.jsonl")[-1] == "released"
    assert not (elsewhere / "rel.ledger.jsonl").exists()


# ------------------------------------------------------ 5. markup prints literally

def test_markup_in_a_title_never_crashes_the_ledger_or_later_releases(env, tmp_path, monkeypatch):
    spec = tmp_path / "s.yaml"
    doc = yaml.safe_load(env.spec.read_text())
    doc["release"]["title"] = "Live births [/] one year [bold red]"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    from dpbundle.release.data.fingerprint import table_fingerprint
    from dpbundle.release.scheme.ledger import Ledger
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec

    s = load_spec(spec)
    prepared = prepare(env.data, s)
    ledger = tmp_path / "ledger.jsonl"
    eid = Ledger(ledger).record(prepared.sha256, s.fingerprint, 9.98,
                                f"dpbundle release {doc['release']['title']!r} -> killed",
                                table_fp=table_fingerprint(prepared, s))   # a killed run
    res = _invoke("ledger", "list", "--ledger", ledger, wide=True)
    assert res.exit_code == 0 and "[/] one year [bold red]" in res.output, res.output
    res = _invoke("ledger", "mark", eid[:8], "--ledger", ledger, "--status", "[/]gone\x1b[2J")
    assert res.exit_code == 0 and "[/]gone\\x1b[2J" in res.output, res.output
    res = _invoke("ledger", "list", "--ledger", ledger, wide=True)
    assert res.exit_code == 0 and "[/]gone\\x1b[2J" in res.output and "\x1b[2J" not in res.output
    Ledger(ledger).record(prepared.sha256, s.fingerprint, 1.0, "[/] killed again",
                          table_fp=table_fingerprint(prepared, s))
    _no_selection(monkeypatch)
    res = _invoke("release", spec, env.data, "--out", tmp_path / "B", "--key", env.key,
                  "--ledger", ledger, "--allow-additional-spend", wide=True)
    assert "never finished" in res.output and "[/] killed again" in res.output   # the note, literally
    assert res.exit_code == 1     # the stubbed selection: an internal error, after the spend


def test_literal_escapes_control_characters():
    from dpbundle.release.errors import literal

    assert literal("a[/]b") == "a[/]b"
    assert literal("x\x1b[31my\x07\r\n\tz\x9b\udcff") == "x\\x1b[31my\\x07\\x0d\n\tz\\x9b\\udcff"


# -------------------------------------- 6. a full disk while writing; a read-only ledger

def test_a_full_disk_while_writing_exits_2(env, tmp_path, monkeypatch):
    _write_fails_with(monkeypatch)
    res = _release(env, tmp_path)
    text = _text(res)
    assert res.exit_code == 2, res.output
    assert "No space left on device" in text and "internal error" not in text
    assert "status 'failed while writing the bundle'" in text and "--resume" in text


def test_a_full_disk_from_python_is_bundle_not_written(env, tmp_path, monkeypatch):
    from dpbundle.release.api import BundleNotWritten, DpbundleError, ReleaseFailed, release

    _write_fails_with(monkeypatch)
    with pytest.raises(BundleNotWritten) as info:
        release(env.spec, env.data, out=tmp_path / "B", key=env.key, ledger=tmp_path / "l.jsonl",
                transcript=tmp_path / "t.jsonl")
    assert isinstance(info.value, ReleaseFailed) and isinstance(info.value, DpbundleError)
    assert info.value.code == 2 and ".pending.npz" in info.value.message


def test_a_ledger_that_turns_read_only_after_the_bundle_is_a_warning(env, tmp_path, monkeypatch):
    from dpbundle.release.scheme.ledger import Ledger, LedgerError

    def read_only(self, entry, status="finished"):
        raise LedgerError(f"{self.path}: cannot open the ledger (Read-only file system)")
    monkeypatch.setattr(Ledger, "mark_finished", read_only)
    res = _release(env, tmp_path)
    text = _text(res)
    assert res.exit_code == 0, res.output
    assert "could not record 'released'" in text and "dpbundle ledger mark" in text
    assert (tmp_path / "B" / "manifest.sig").is_file()


def test_a_failed_ledger_append_leaves_no_partial_line(tmp_path, monkeypatch):
    from dpbundle.release.scheme import ledger as ledger_mod

    book = ledger_mod.Ledger(tmp_path / "l.jsonl")
    book.record("d", "s", 1.0, "first")
    before = (tmp_path / "l.jsonl").read_bytes()
    real_write = os.write

    def half(fd, data):
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(ledger_mod.os, "write", half)
    with pytest.raises(ledger_mod.LedgerError, match="No space left"):
        book.record("d", "s", 1.0, "second")
    monkeypatch.setattr(ledger_mod.os, "write", real_write)
    assert (tmp_path / "l.jsonl").read_bytes() == before
    assert len(book.all_entries()) == 1


# -------------------------------------------------- 7. devices, FIFOs, oversized files

@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


def _device(tmp_path: Path) -> Path:
    """A character device node in a temporary folder (a copy of /dev/null's numbers when we
    may mknod; /dev/null itself otherwise: never written, only checked)."""
    p = tmp_path / "null"
    try:
        os.mknod(p, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return p
    except (PermissionError, OSError):
        return Path("/dev/null")


@pytest.mark.parametrize("which", ["spec", "data", "key", "passphrase", "configs", "ledger", "resume"])
@pytest.mark.parametrize("kind", ["zero", "fifo"])
def test_release_inputs_that_never_end_are_refused(env, tmp_path, fifo, monkeypatch, which, kind):
    _no_selection(monkeypatch)
    bad = Path("/dev/zero") if kind == "zero" else fifo
    args = {"spec": env.spec, "data": env.data, "--key": env.key}
    extra = []
    if which in ("spec", "data"):
        args[which] = bad
    elif which == "key":
        args["--key"] = bad
    else:
        extra = {"passphrase": ["--passphrase-file", bad], "configs": ["--configs", bad],
                 "ledger": ["--ledger", bad], "resume": []}[which]
    with _deadline(30):
        if which == "resume":
            res = _invoke("release", "--resume", bad, "--out", tmp_path / "B", "--key", env.key)
        else:
            res = _invoke("release", args["spec"], args["data"], "--out", tmp_path / "B",
                          "--key", args["--key"], *(extra or ["--ledger", tmp_path / "l.jsonl"]))
    assert res.exit_code == 2, res.output
    assert "regular file" in _text(res)
    assert not (tmp_path / "l.jsonl").exists() and not (tmp_path / "B").exists()


@pytest.mark.parametrize("command", ["ledger list", "spec validate", "preregister spec",
                                     "preregister configs", "sample bundle"])
def test_other_commands_refuse_devices_and_fifos(env, tmp_path, fifo, command):
    with _deadline(30):
        if command == "ledger list":
            res = _invoke("ledger", "list", "--ledger", fifo)
        elif command == "spec validate":
            res = _invoke("spec", "validate", "/dev/zero")
        elif command == "preregister spec":
            res = _invoke("preregister", fifo, "--key", env.key, "--out", tmp_path / "r.json",
                          "--beacon-source", "x")
        elif command == "preregister configs":
            res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                          "--beacon-source", "x", "--configs", "/dev/zero")
        else:
            res = _invoke("sample", fifo, "--rows", "10", "--out", tmp_path / "s.csv")
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "r.json").exists()


def test_force_never_replaces_a_device_node(env, tmp_path, monkeypatch):
    _no_selection(monkeypatch)
    node = _device(tmp_path)
    before = os.lstat(node)
    res = _release(env, tmp_path, "--transcript", node, "--force")
    assert res.exit_code == 2 and "replaces only a regular file" in _text(res), res.output
    out = tmp_path / "Z"
    zip_node = tmp_path / "Z.zip"
    os.mkfifo(zip_node)
    res = _release(env, tmp_path, "--zip", "--force", out=out)
    assert res.exit_code == 2 and "replaces only a regular file" in _text(res), res.output
    assert stat.S_ISFIFO(os.lstat(zip_node).st_mode)
    res = _invoke("example", "births", "--rows", "100", "--out", node, "--force")
    assert res.exit_code == 2, res.output
    after = os.lstat(node)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)
    assert not (tmp_path / "ledger.jsonl").exists()


@pytest.fixture(scope="module")
def published(env, tmp_path_factory):
    d = tmp_path_factory.mktemp("published")
    spec = d / "m.yaml"
    doc = yaml.safe_load(env.spec.read_text())
    doc["publish"] = "model"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPBUNDLE_PRIVATE_DIR", str(env.private))
        res = _release(env, d, spec=spec)
    assert res.exit_code == 0, res.output
    return d / "B"


def test_sample_out_never_replaces_a_device_node(published, tmp_path):
    node = _device(tmp_path)
    res = _invoke("sample", published, "--rows", "10", "--out", node, "--force")
    assert res.exit_code == 2 and "replaces only a regular file" in _text(res), res.output
    assert stat.S_ISCHR(os.lstat(node).st_mode)
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "target.csv")
    res = _invoke("sample", published, "--rows", "10", "--out", link, "--force")
    assert res.exit_code == 2 and link.is_symlink() and not (tmp_path / "target.csv").exists()


# --------------------------------------------------------- 8. rows of sample and examples

def test_sample_rows_are_bounded_before_any_work(published, tmp_path, monkeypatch):
    from dpbundle.release.bundle import draws as sample_cmd   # the drawing behind `dpbundle sample`

    with _deadline(30):
        res = _invoke("sample", published, "--rows", str(10 ** 8), "--out", tmp_path / "s.csv")
    assert res.exit_code == 2 and "10,000,000" in _text(res), res.output
    monkeypatch.setattr(sample_cmd, "_memory_available", lambda: 50 << 20)
    res = _invoke("sample", published, "--rows", "2000000", "--out", tmp_path / "s.csv")
    assert res.exit_code == 2 and "GB of memory" in _text(res), res.output
    assert not (tmp_path / "s.csv").exists()


def test_sample_is_written_in_pieces_with_the_same_bytes(published, tmp_path, monkeypatch):
    from dpbundle.release.bundle import draws as sample_cmd   # the drawing behind `dpbundle sample`

    whole = sample_cmd.sample_bundle(published, 3000, 7)
    monkeypatch.setattr(sample_cmd, "CHUNK_ROWS", 700)
    res = _invoke("sample", published, "--rows", "3000", "--seed", "7", "--out", tmp_path / "s.csv")
    assert res.exit_code == 0, res.output
    assert (tmp_path / "s.csv").read_bytes() == whole


def test_sample_on_a_full_disk_leaves_nothing(published, tmp_path, monkeypatch):
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, _b):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def fdopen(fd, mode="r", *a, **k):
        f = real_fdopen(fd, mode, *a, **k)
        return Full(f) if "w" in mode else f
    monkeypatch.setattr(os, "fdopen", fdopen)
    res = _invoke("sample", published, "--rows", "100", "--out", tmp_path / "s.csv")
    monkeypatch.setattr(os, "fdopen", real_fdopen)
    assert res.exit_code == 2 and "No space left on device" in _text(res), res.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rows", ["1000", "999999"])
def test_example_rows_far_from_the_list_are_refused_before_simulating(tmp_path, rows, monkeypatch):
    import dpbundle.release.data.example as example_mod

    def never(*_a, **_k):
        raise AssertionError("simulated")
    monkeypatch.setattr(example_mod, "example_blocks", never)
    with _deadline(30):
        res = _invoke("release", "--example", "births", "--example-rows", rows, "--out", tmp_path / "b")
    assert res.exit_code == 2 and "nothing was simulated" in _text(res), res.output


def test_example_rows_out_of_range(tmp_path):
    from dpbundle.release.api import UnusableInput, release

    res = _invoke("release", "--example", "births", "--example-rows", str(10 ** 9), "--out", tmp_path / "b")
    assert res.exit_code == 2
    with _deadline(30):
        with pytest.raises(UnusableInput, match="--example-rows"):
            release(example="births", example_rows=10 ** 9, out=tmp_path / "b")
        with pytest.raises(UnusableInput, match="--example-rows"):
            release(example="births", example_rows=10, out=tmp_path / "b")
    res = _invoke("example", "births", "--rows", str(10 ** 9 + 1), "--out", tmp_path / "x.csv")
    assert res.exit_code == 2 and "1,000,000,000" in res.output
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------ 9. one exception hierarchy

def test_the_hierarchy():
    from dpbundle.release import api
    from dpbundle.release import errors

    assert api.CommandError is errors.DpbundleError is api.DpbundleError
    for cls, code in ((api.UnusableInput, 2), (api.Refused, 2), (api.ReleaseFailed, 1),
                      (api.BundleNotWritten, 2)):
        e = cls("why")
        assert isinstance(e, api.CommandError) and isinstance(e, Exception) and e.code == code
        assert e.message == "why"
    legacy = api.CommandError(2, "refused")
    assert legacy.code == 2 and legacy.message == "refused" and str(legacy) == "refused"
    stop = api.ReleaseInterrupted("what exists")
    assert isinstance(stop, KeyboardInterrupt) and isinstance(stop, api.DpbundleInterrupt)
    assert not isinstance(stop, Exception) and not isinstance(stop, api.DpbundleError)
    assert stop.code == 130 and stop.message == "what exists"
    assert set(api.DPBUNDLE_ERRORS) == {api.DpbundleError, api.DpbundleInterrupt}
    import pickle

    for e in (api.Refused("x"), api.CommandError(2, "y"), api.ReleaseInterrupted("z")):
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is type(e) and back.code == e.code and back.message == e.message


@pytest.mark.parametrize("call", ["out int", "force str", "rows str", "spec bytes", "beacon int",
                                  "audit int", "sweep option", "sweep spec"])
def test_wrong_argument_types_are_unusable_input(call, tmp_path):
    from dpbundle.release.api import UnusableInput, audit, release, sweep

    with pytest.raises(UnusableInput) as info:
        if call == "out int":
            release(example="births", out=5)
        elif call == "force str":
            release(example="births", out=tmp_path / "b", force="yes")
        elif call == "rows str":
            release(example="births", out=tmp_path / "b", example_rows="2000")
        elif call == "spec bytes":
            release(b"spec.yaml", b"data.csv", out=tmp_path / "b")
        elif call == "beacon int":
            release(example="births", out=tmp_path / "b", beacon=7)
        elif call == "audit int":
            audit(5)
        elif call == "sweep option":
            sweep(ROOT / "examples" / "births.yaml", tmp_path / "d.csv", out=tmp_path / "s", repz=3)
        else:
            sweep(None, tmp_path / "d.csv", out=tmp_path / "s")
    assert info.value.code == 2 and info.value.message
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("fault", [MemoryError, lambda: OSError(errno.EIO, "Input/output error"),
                                   lambda: RuntimeError("private 123")])
def test_unexpected_exceptions_inside_arrive_in_the_hierarchy(env, tmp_path, monkeypatch, fault):
    import dpbundle.release.data.prepare as prep
    from dpbundle.release.api import DpbundleError, release

    def broken(*_a, **_k):
        raise fault()
    monkeypatch.setattr(prep, "prepare", broken)
    with pytest.raises(DpbundleError) as info:
        release(env.spec, env.data, out=tmp_path / "B", key=env.key, ledger=tmp_path / "l.jsonl",
                transcript=tmp_path / "t.jsonl")
    assert "before any privacy budget was spent" in info.value.message
    assert "private 123" not in info.value.message
    assert info.value.code in (1, 2) and not (tmp_path / "l.jsonl").exists()


def test_an_example_error_arrives_in_the_hierarchy(tmp_path, monkeypatch):
    import dpbundle.release.data.example as example_mod
    from dpbundle.release.api import DpbundleError, release

    def no_memory(*_a, **_k):
        raise MemoryError
    monkeypatch.setattr(example_mod, "example_blocks", no_memory)
    with pytest.raises(DpbundleError) as info:
        release(example="births", out=tmp_path / "b")
    assert info.value.code == 2 and "memory" in info.value.message and "nothing was spent" in info.value.message


# ---------------------------------------------------- 10. preregister and its list

def test_preregister_refuses_a_list_that_is_not_one(env, tmp_path):
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                  "--beacon-source", "x", "--configs", env.spec)      # a spec, not a list
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "r.json").exists()


def _narrowed(env, path: Path, spec_sha: str | None, config=None) -> Path:
    from dpbundle.release.scheme.space import config_id, enumerate_configs
    from dpbundle.release.spec.load import load_spec
    from dpbundle.release.sweep.run import _spec_fingerprint

    s = load_spec(env.spec)
    c = config or next(iter(enumerate_configs(s)))
    path.write_text(yaml.safe_dump({"format": "dpbundle-narrowed/1",
                                    "spec_sha256": spec_sha or _spec_fingerprint(s),
                                    "configurations": [{"id": config_id(c), "config": c, "acceptance": 0.5,
                                                        "wilson_low": 0.3, "wilson_high": 0.7, "runs": 9}]}))
    return path


def test_preregister_refuses_a_list_swept_for_another_spec(env, tmp_path):
    lst = _narrowed(env, tmp_path / "other.yaml", "ab" * 32)
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                  "--beacon-source", "x", "--configs", lst)
    assert res.exit_code == 2 and "ab" * 32 in _text(res) and "--allow-other-spec" in _text(res)
    assert not (tmp_path / "r.json").exists()
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                  "--beacon-source", "x", "--configs", lst, "--allow-other-spec",
                  "--secret-out", tmp_path / "r.secret.json")
    assert res.exit_code == 0, res.output


def test_preregister_refuses_a_configuration_outside_the_space(env, tmp_path):
    from dpbundle.release.scheme.space import enumerate_configs
    from dpbundle.release.spec.load import load_spec

    c = dict(next(iter(enumerate_configs(load_spec(env.spec)))))
    c["projection"] = {"min_count": 97}
    lst = _narrowed(env, tmp_path / "outside.yaml", None, config=c)
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                  "--beacon-source", "x", "--configs", lst)
    assert res.exit_code == 2 and "not a configuration of the spec" in _text(res), res.output


def test_preregister_accepts_its_own_spec_s_list(env, tmp_path):
    lst = _narrowed(env, tmp_path / "mine.yaml", None)
    res = _invoke("preregister", env.spec, "--key", env.key, "--out", tmp_path / "r.json",
                  "--beacon-source", "x", "--configs", lst, "--secret-out", tmp_path / "r.secret.json")
    assert res.exit_code == 0, res.output


# --------------------------------------------------------------- the documented exit codes

@pytest.mark.parametrize("case,code", [("success", 0), ("refusal", 2), ("internal", 1),
                                       ("nothing selected", 1), ("interrupt", 130), ("full disk", 2)])
def test_every_documented_exit_code(env, tmp_path, monkeypatch, case, code):
    if case == "refusal":
        (tmp_path / "B").mkdir()
        (tmp_path / "B" / "mine.txt").write_text("x")
    elif case == "internal":
        monkeypatch.setattr(selection_mod, "run_iteration", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("x")))
    elif case == "nothing selected":
        def nothing(*_a, **_k):
            raise selection_mod.NothingSelected("the stop draw ended the selection: nothing is released")
        monkeypatch.setattr(selection_mod, "select", nothing)
    elif case == "interrupt":
        monkeypatch.setattr(selection_mod, "run_iteration", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    elif case == "full disk":
        _write_fails_with(monkeypatch)
    res = _release(env, tmp_path, *(["--force"] if case == "refusal" else []))
    assert res.exit_code == code, res.output
    if case != "success":
        assert "error:" in res.output
        spent = (tmp_path / "ledger.jsonl").exists()
        assert ("nothing was spent" in _text(res) or "nothing was touched" in _text(res)) == (not spent)
