"""Issue 36, hostile inputs to the commands: the ledger on a fresh machine and a ledger that is
not there, keygen --out onto a device, a FIFO as sweep's data, example --rows against
docs/faults.md, private values in `spec validate --data` and in a failed attempt's message, and a
hostile Dask scheduler. Each: exit code 2 (where the input is unusable), a message naming the
file or option and the rule, no traceback, and no ledger entry or bundle where a spend was
possible.
"""
from __future__ import annotations

import os
import re
import socket
import stat
import struct
import threading
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.cli.main import app
from dpbundle.release.data.example import write_example

ROOT = Path(__file__).resolve().parents[1]
BIRTHS = ROOT / "examples" / "births.yaml"
runner = CliRunner()


def _invoke(*args, env: dict | None = None) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args], env={"COLUMNS": "250", **(env or {})})
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("i36cli")
    data = tmp / "R.csv"
    write_example(data, rows=300, seed=4)
    assert _invoke("keygen", "--out", tmp / "k")[0] == 0
    return tmp, data, tmp / "k.key"


# ------------------------------------------------------------------ the ledger

def test_ledger_list_of_a_missing_file_is_an_error(tmp_path):
    code, out = _invoke("ledger", "list", "--ledger", tmp_path / "nonexistent.jsonl")
    assert code == 2, out
    assert "nonexistent.jsonl" in out and "no such file" in out and "0 spend(s)" not in out


def test_ledger_list_without_the_default_ledger_says_no_spends_yet(tmp_path):
    code, out = _invoke("ledger", "list", env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    assert code == 0, out
    assert "no spends recorded yet" in out
    assert not (tmp_path / "xdg").exists()   # listing creates nothing


def test_ledger_mark_on_a_missing_ledger_is_an_error(tmp_path):
    code, out = _invoke("ledger", "mark", "abcdef123456", "--ledger", tmp_path / "none.jsonl")
    assert code == 2 and "no such file" in out, out


def test_first_release_on_a_fresh_machine_creates_the_ledger_folder(env, tmp_path, monkeypatch):
    """The default ledger's folder (~/.local/share/dpbundle) did not exist on a fresh machine:
    'no such directory (for the ledger)'. It is made, mode 0700, parents too, before the spend
    (the spend is stopped here, before anything is recorded)."""
    import dpbundle.release.pipeline.spending as spending

    _tmp, data, key = env
    xdg = tmp_path / "fresh" / "share"        # neither folder exists

    def stop(*_a, **_k):
        raise RuntimeError("stopped by the test before the spend")

    monkeypatch.setattr(spending, "spend", stop)
    monkeypatch.setenv("XDG_DATA_HOME", str(xdg))
    code, out = _invoke("release", BIRTHS, data, "--out", tmp_path / "B", "--key", key,
                        "--transcript", tmp_path / "t.jsonl")
    assert "no such directory" not in out, out
    assert "before any privacy budget was spent" in out, out
    folder = xdg / "dpbundle"
    assert folder.is_dir()
    for f in (xdg.parent, xdg, folder):
        assert stat.S_IMODE(f.stat().st_mode) == 0o700, f
    assert not (folder / "ledger.jsonl").exists() and not (tmp_path / "B").exists()


# ------------------------------------------------------------------ files named on the command line

@pytest.mark.parametrize("kind", ["device", "directory", "link", "fifo"])
def test_keygen_refuses_an_out_that_is_not_a_new_file(tmp_path, kind):
    if kind == "device":
        out = Path("/dev/null")
    elif kind == "directory":
        out = tmp_path
    elif kind == "link":
        out = tmp_path / "lnk"
        out.symlink_to(tmp_path / "elsewhere")
    else:
        out = tmp_path / "k"
        os.mkfifo(tmp_path / "k.key")
    code, text = _invoke("keygen", "--out", out)
    assert code == 2, text
    assert str(out) in text and "rule:" in text
    assert not Path(f"{out}.pub").exists() and not Path(f"{out}.allowed_signers").exists()
    if kind != "fifo":
        assert not Path(f"{out}.key").exists()


def test_sweep_names_a_fifo(env, tmp_path):
    fifo = tmp_path / "data.csv"
    os.mkfifo(fifo)
    code, out = _invoke("sweep", BIRTHS, fifo, "--out", tmp_path / "S")
    assert code == 2, out
    assert "FIFO" in out and "no such file" not in out


def test_example_rows_limit_is_the_documented_one(tmp_path):
    """docs/faults.md said 2,000,000 while issue 28 raised the limit to 10^9: the document
    now states the code's limit, and one row more is refused before anything is written."""
    from dpbundle.release.data.example import MAX_ROWS

    faults = (ROOT / "docs" / "faults.md").read_text("utf-8")
    row = next(line for line in faults.splitlines() if line.startswith("| `example` |"))
    assert f"{MAX_ROWS:,}" in row and "2,000,000" not in row
    code, out = _invoke("example", "births", "--rows", MAX_ROWS + 1, "--out", tmp_path / "x.csv")
    assert code == 2 and f"{MAX_ROWS:,}" in out, out
    assert not (tmp_path / "x.csv").exists()


# ------------------------------------------------------------------ private values

def test_validate_data_marks_every_quoted_cell_private(env, tmp_path):
    _tmp, data, _key = env
    lines = data.read_text("utf-8").splitlines()
    lines[3] = "SECRET-ID-123456789" + lines[3][lines[3].index(","):]
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines) + "\n", "utf-8")
    code, out = _invoke("spec", "validate", BIRTHS, "--data", bad)
    assert code == 2, out
    quoting = [line for line in out.splitlines() if "SECRET-ID" in line]
    assert quoting and all("PRIVATE" in line for line in quoting), quoting
    assert "line 4, column 'mother_age'" in out and "keep inside the enclave" in out


def test_a_failed_attempt_prints_neither_its_error_type_nor_its_index(env, tmp_path, monkeypatch):
    """An attempt's internal error (its type depends on the private data) is named only in the
    private transcript; the console says that an attempt failed, not which nor how."""
    import dpbundle.release.scheme.selection as selection

    _tmp, data, key = env
    calls = {"n": 0}

    def boom(*_a, **_k):
        calls["n"] += 1
        if calls["n"] < 3:
            from dpbundle.mechanisms.failures import AttemptFailure

            raise AttemptFailure("a failed attempt")
        raise ZeroDivisionError("secret 0.0139536871")

    monkeypatch.setattr(selection, "run_iteration", boom)
    code, out = _invoke("release", BIRTHS, data, "--out", tmp_path / "B", "--key", key,
                        "--ledger", tmp_path / "l.jsonl", "--transcript", tmp_path / "t.jsonl")
    assert code == 1, out
    assert "internal error" in out and "PRIVATE transcript" in out
    assert "ZeroDivisionError" not in out and "0.0139536871" not in out
    assert not re.search(r"attempt\s+#?3\b", out)
    assert "ZeroDivisionError" in (tmp_path / "t.jsonl").read_text("utf-8")
    assert not (tmp_path / "B").exists()


# ------------------------------------------------------------------ a hostile scheduler

class _Server:
    """A TCP server on 127.0.0.1 that answers every connection with ``reply``."""

    def __init__(self, reply: bytes):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.reply = reply
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                conn.sendall(self.reply)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def hostile():
    server = _Server(b"\xff" * 64)     # announces 2^64 - 1 bytes (the attack's 3.07 EiB)
    yield server
    server.close()


def test_probe_refuses_a_hostile_length_and_accepts_a_handshake_shape():
    from dpbundle.release.data.cluster import MAX_HANDSHAKE_BYTES, SchedulerError, check_scheduler

    bad = _Server(struct.pack("<Q", MAX_HANDSHAKE_BYTES + 1))
    try:
        with pytest.raises(SchedulerError, match="announces 1,048,577 bytes"):
            check_scheduler(bad.address, timeout=5)
    finally:
        bad.close()
    payload = b"\x81\xa2op\xa9handshake"
    body = struct.pack("<QQ", 1, len(payload)) + payload
    good = _Server(struct.pack("<Q", len(body)) + body)
    try:
        assert check_scheduler(good.address, timeout=5) == good.address
    finally:
        good.close()


@pytest.mark.parametrize("address", ["tcp://evil host:1", "http://127.0.0.1:8786", "tcp://h:99999",
                                     "tcp://127.0.0.1", "x" * 400])
def test_scheduler_address_form_is_checked(address):
    from dpbundle.release.data.cluster import SchedulerError, parse_address

    with pytest.raises(SchedulerError, match="rule: --scheduler"):
        parse_address(address)


def test_release_with_a_hostile_scheduler_spends_nothing(env, tmp_path, hostile):
    pytest.importorskip("distributed")
    _tmp, data, key = env
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "a.csv").write_bytes(data.read_bytes())
    ledger, out = tmp_path / "l.jsonl", tmp_path / "B"
    code, text = _invoke("release", BIRTHS, parts, "--out", out, "--key", key, "--ledger", ledger,
                         "--transcript", tmp_path / "t.jsonl", "--scheduler", hostile.address)
    assert code == 2, text
    assert hostile.address in text and "18,446,744,073,709,551,615 bytes" in text
    assert "nothing was spent" in text and "MemoryError" not in text and "ValueError" not in text
    assert not ledger.exists() and not out.exists()


def test_sweep_with_a_hostile_scheduler_is_a_clear_error(env, tmp_path, hostile):
    pytest.importorskip("distributed")
    spec = tmp_path / "small.yaml"
    doc = yaml.safe_load(BIRTHS.read_text("utf-8"))
    doc["generators"][0]["grid"] = {"epsilon_split": [0.5], "theta": [4]}
    spec.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    _tmp, data, _key = env
    code, text = _invoke("sweep", spec, data, "--out", tmp_path / "S", "--scheduler", hostile.address,
                         "--reps", 1, "--max-reps", 1)
    assert code == 2, text
    assert hostile.address in text and "cannot use the Dask cluster" in text
    code, text = _invoke("sweep", spec, data, "--out", tmp_path / "S2", "--scheduler", "tcp://evil host:1")
    assert code == 2 and "tcp://HOST:PORT" in text, text
