"""The ledger's lock (release/common/filelock.py over the `filelock` package): bounded waiting, a held
lock gives LedgerLocked instead of hanging, appends from threads and processes are not lost."""
from __future__ import annotations

import multiprocessing
import os
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from dpbundle.release.common import filelock as fl
from dpbundle.release.scheme.ledger import Ledger, LedgerError, LedgerLocked


def _hold(path: str, held, release, seconds: float) -> None:
    """Child process: hold the ledger's lock until told to release (or ``seconds`` pass)."""
    with fl.locked(path, timeout=5):
        held.set()
        release.wait(seconds)


@pytest.fixture
def holder(tmp_path):
    """Start a process holding the lock of tmp_path/ledger.jsonl; yields (path, release event)."""
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    path = tmp_path / "ledger.jsonl"
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(path), held, release, 30.0))
    proc.start()
    assert held.wait(20), "the child process did not take the lock"
    yield path, release
    release.set()
    proc.join(20)
    assert proc.exitcode == 0


def test_defaults():
    assert fl.DEFAULT_TIMEOUT == 60.0
    assert Ledger(Path("x.jsonl")).lock_timeout == 60.0
    assert fl.lock_path("/a/b/ledger.jsonl") == Path("/a/b/ledger.jsonl.lock")
    for bad in (0, -1, float("nan")):
        with pytest.raises(LedgerError, match="lock_timeout"):
            Ledger(Path("x.jsonl"), lock_timeout=bad)
        with pytest.raises(ValueError, match="timeout"):
            with fl.locked("x.jsonl", timeout=bad):
                pass


def test_a_held_lock_times_out_on_append(holder):
    path, _ = holder
    ledger = Ledger(path, lock_timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises(LedgerLocked, match="locked") as info:
        ledger.record("data", "spec", 1.0, "blocked")
    waited = time.monotonic() - t0
    assert 0.4 <= waited < 10
    assert isinstance(info.value, LedgerError)  # callers that catch LedgerError see it
    assert str(path) + ".lock" in str(info.value)
    assert not path.exists() or path.read_bytes() == b""  # nothing was written


def test_a_held_lock_times_out_on_read_then_works_after_release(tmp_path):
    path = tmp_path / "ledger.jsonl"
    Ledger(path).record("data", "spec", 1.0, "first")
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(path), held, release, 30.0))
    proc.start()
    try:
        assert held.wait(20)
        with pytest.raises(LedgerLocked):
            Ledger(path, lock_timeout=0.3).entries("data")
        with pytest.raises(LedgerLocked):
            Ledger(path, lock_timeout=0.3).mark_finished("x" * 32)
    finally:
        release.set()
        proc.join(20)
    # the holder is gone: the same calls go through
    ledger = Ledger(path, lock_timeout=5)
    assert len(ledger.entries("data")) == 1
    ledger.record("data", "spec", 0.5, "second")
    assert len(ledger.entries("data")) == 2


def test_a_waiter_gets_the_lock_when_the_holder_releases(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(path), held, release, 1.0))  # lets go after 1 s
    proc.start()
    try:
        assert held.wait(20)
        t0 = time.monotonic()
        Ledger(path, lock_timeout=20).record("data", "spec", 1.0, "waited")
        assert time.monotonic() - t0 >= 0.2   # it did wait for the holder
    finally:
        release.set()
        proc.join(20)
    assert len(Ledger(path).entries("data")) == 1


def test_a_killed_holder_releases_the_lock(tmp_path):
    """The operating system drops the lock of a dead process (no stale marker)."""
    path = tmp_path / "ledger.jsonl"
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    held, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold, args=(str(path), held, release, 60.0))
    proc.start()
    assert held.wait(20)
    proc.kill()
    proc.join(20)
    Ledger(path, lock_timeout=5).record("data", "spec", 1.0, "after a crash")
    assert len(Ledger(path).entries("data")) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_lock_file_is_private_and_reads_create_none(tmp_path):
    path = tmp_path / "private" / "ledger.jsonl"
    assert Ledger(path).all_entries() == []          # no ledger: nothing created
    assert not path.parent.exists()
    Ledger(path).record("data", "spec", 1.0, "x")
    mode = stat.S_IMODE(os.stat(fl.lock_path(path)).st_mode)
    assert mode & 0o077 == 0, oct(mode)
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700


def test_threads_append_without_loss(tmp_path):
    """Threads of one process exclude each other too (each call opens its own lock)."""
    path = tmp_path / "ledger.jsonl"
    errors = []

    def work(i):
        try:
            Ledger(path, lock_timeout=30).record("same", "s", 0.25, f"thread {i}")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len(Ledger(path).entries("same")) == 12
    lines = path.read_bytes().splitlines()
    assert len(lines) == 12 and all(line.startswith(b"{") for line in lines)


def _reserve(path: str, i: int, out) -> None:
    from dpbundle.release.scheme.ledger import LedgerRefusal

    try:
        Ledger(Path(path), lock_timeout=30).reserve("one-data", "s", 1.0, f"p{i}",
                                                  allow_additional_spend=False)
        out.put("ok")
    except LedgerRefusal:
        out.put("refused")


def test_check_and_reserve_is_atomic_across_processes(tmp_path):
    """Of 6 processes reserving on the same data without --allow-additional-spend, exactly one
    gets it: the check and the append happen under one lock."""
    ctx = multiprocessing.get_context("fork" if sys.platform != "win32" else "spawn")
    out = ctx.Queue()
    path = tmp_path / "ledger.jsonl"
    procs = [ctx.Process(target=_reserve, args=(str(path), i, out)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    results = sorted(out.get(timeout=10) for _ in procs)
    assert results == ["ok"] + ["refused"] * 5
    assert len(Ledger(path).entries("one-data")) == 1
