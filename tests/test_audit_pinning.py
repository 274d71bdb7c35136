"""dpbundle audit: key pinning and verdicts (exit codes 0/1/2/3), --pubkey as a fingerprint,
bounded reads of the files named on the command line, --spec (pre-registered spec), progress,
--json -, and an audit that runs without WeasyPrint."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import typer
import yaml
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402
from audit_fixtures import copy, original  # noqa: E402,F401  (a signed bundle and a fresh copy)

from dpbundle.audit.preregistration import (MAX_DEPTH, canonical_sha256,  # noqa: E402
                                            load_preregistered)
from dpbundle.audit.report import CHECK_NAMES, VERDICT_TEXT  # noqa: E402
from dpbundle.audit.runner import AuditInputError, run_audit  # noqa: E402
from dpbundle.audit.schema_util import validate  # noqa: E402

NOT_PINNED_TEXT = ("NOT VERIFIED (key not pinned): every check passed against the key embedded in the "
                   "bundle, which anyone could have re-signed with; pass --pubkey FILE (the "
                   "publisher's published key) to verify")


def cli(*args):
    from dpbundle.audit.cli import cli_audit

    app = typer.Typer()
    app.command("audit")(cli_audit)
    return CliRunner().invoke(app, [str(a) for a in args])


def no_traceback(res, code: int) -> None:
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output


def raw_of(key) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(key) -> str:
    return hashlib.sha256(raw_of(key)).hexdigest()


def resign_with_other_key(d: Path):
    """The attack: a complete, self-consistent manifest under someone else's key."""
    other = fx.new_key()
    fx.sign_bundle(d, other)
    return other


# ------------------------------------------------------------------------------ verdicts

def test_resigned_bundle_without_pubkey_is_not_verified(copy):
    d, _, _ = copy
    resign_with_other_key(d)
    rep = run_audit(d)
    assert rep.passed                                   # every check passes against its own key
    assert rep.verdict == "not_verified_key_not_pinned"
    assert rep.exit_code == 3
    res = cli(d)
    no_traceback(res, 3)
    assert NOT_PINNED_TEXT in " ".join(res.output.split())
    assert "all checks passed" not in res.output


def test_resigned_bundle_with_pubkey_fails(copy):
    d, _, pub = copy
    resign_with_other_key(d)
    res = cli(d, "--pubkey", pub)
    no_traceback(res, 1)
    assert "audit FAILED" in res.output and "integrity" in res.output


def test_verdict_text_is_the_documented_one():
    assert VERDICT_TEXT["not_verified_key_not_pinned"] == NOT_PINNED_TEXT


@pytest.mark.parametrize("pinned,tamper,verdict,code", [
    (True, False, "verified", 0),
    (False, False, "not_verified_key_not_pinned", 3),
    (True, True, "failed", 1),
    (False, True, "failed", 1),
])
def test_json_verdict_and_exit_code(copy, tmp_path, pinned, tamper, verdict, code):
    d, _, pub = copy
    if tamper:
        (d / "extra.txt").write_text("not in the manifest")
    rj = tmp_path / "r.json"
    res = cli(d, *(["--pubkey", pub] if pinned else []), "--json", rj)
    no_traceback(res, code)
    doc = json.loads(rj.read_text())
    assert validate(doc, "audit-report") == []
    assert doc["verdict"] == verdict
    assert doc["key_pinned"] is pinned
    assert [c["check"] for c in doc["checks"]] == list(CHECK_NAMES)


def test_html_report_of_an_unpinned_audit_says_not_verified(original, tmp_path):
    d, _, _ = original
    rh = tmp_path / "r.html"
    no_traceback(cli(d, "--html", rh), 3)
    text = rh.read_text()
    assert "NOT VERIFIED (key not pinned)" in text and "all checks passed" not in text


def test_verified_output(original):
    d, _, pub = original
    res = cli(d, "--pubkey", pub)
    no_traceback(res, 0)
    assert "VERIFIED: all checks passed" in res.output and "NOT VERIFIED" not in res.output


# ------------------------------------------------------------------------------ --pubkey forms

def test_pubkey_as_fingerprint(original):
    d, key, _ = original
    fp = fingerprint(key)
    for form in (fp, fp.upper(), f"sha256:{fp}"):
        res = cli(d, "--pubkey", form)
        no_traceback(res, 0)
        assert "VERIFIED" in res.output
    rep = run_audit(d, pubkey=fp)
    assert rep.get("integrity").facts["pinned_by"] == "fingerprint"


def test_pubkey_as_raw_key_hex(original):
    d, key, _ = original
    rep = run_audit(d, pubkey=raw_of(key).hex())
    assert rep.verdict == "verified" and rep.get("integrity").facts["pinned_by"] == "raw key (hex)"


def test_pubkey_file_holding_the_fingerprint(original, tmp_path):
    d, key, _ = original
    f = tmp_path / "publisher.fingerprint"
    f.write_text(fingerprint(key) + "\n")
    assert run_audit(d, pubkey=f).verdict == "verified"


def test_fingerprint_is_the_one_keygen_prints(original, tmp_path):
    """The same notion as release/bundle/keys.py (SHA-256 of the raw key) and manifest.json's."""
    from dpbundle.release.bundle import keys

    d, key, pub = original
    assert keys.public_key_fingerprint(keys.load_public_key(pub)) == fingerprint(key)
    assert json.loads((d / "manifest.json").read_text())["public_key"]["fingerprint"] == fingerprint(key)


def test_resigned_bundle_against_the_publisher_fingerprint(copy):
    d, key, _ = copy
    other = resign_with_other_key(d)
    rep = run_audit(d, pubkey=fingerprint(key))
    assert rep.verdict == "failed"
    problems = " ".join(rep.get("integrity").problems)
    assert "is not the pinned key" in problems and fingerprint(other) in problems


def test_unknown_fingerprint_fails(original):
    d, _, _ = original
    res = cli(d, "--pubkey", "0" * 64)
    no_traceback(res, 1)


def test_a_file_named_like_a_fingerprint_is_read_with_dot_slash(original, tmp_path, monkeypatch):
    d, key, _ = original
    name = "a" * 64
    (tmp_path / name).write_bytes(fx.pub_pem(key))
    monkeypatch.chdir(tmp_path)
    assert cli(d, "--pubkey", f"./{name}").exit_code == 0
    assert cli(d, "--pubkey", name).exit_code == 1       # read as a fingerprint: not this key


# ------------------------------------------------------------------------------ bounded reads

CLI_MAIN = "import sys; from dpbundle.audit.cli import main; sys.exit(main(sys.argv[1:]))"


def _limited():
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * 1024**3, 3 * 1024**3))


def run_main(*args, timeout: int = 60) -> subprocess.CompletedProcess:
    """The audit in a fresh interpreter, with a time and a memory limit (an unbounded read of
    /dev/zero or a FIFO must not take the test machine down with it)."""
    try:
        return subprocess.run([sys.executable, "-c", CLI_MAIN, *map(str, args)], capture_output=True,
                              text=True, timeout=timeout, preexec_fn=_limited if os.name == "posix" else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the audit hung on {args}")


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
@pytest.mark.parametrize("option", ["--pubkey", "--spec"])
def test_dev_zero_is_refused(original, option):
    d, _, _ = original
    p = run_main(d, option, "/dev/zero")
    assert p.returncode == 2, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    assert "/dev/zero" in p.stderr and "regular file" in p.stderr and "character device" in p.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize("option", ["--pubkey", "--spec", "--transcript", "--data"])
def test_fifo_is_refused_without_hanging(original, tmp_path, option):
    d, _, _ = original
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    other = tmp_path / "other.txt"
    other.write_text("x\n")
    extra = {"--transcript": ["--data", other], "--data": ["--transcript", other]}.get(option, [])
    p = run_main(d, option, fifo, *extra, timeout=30)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "FIFO" in p.stderr and str(fifo) in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("option", ["--pubkey", "--spec", "--transcript"])
def test_directory_is_refused(original, tmp_path, option):
    d, _, pub = original
    extra = ["--data", pub] if option == "--transcript" else []
    res = cli(d, option, tmp_path, *extra)
    no_traceback(res, 2)
    assert "directory" in res.output


def test_oversized_pubkey_file(original, tmp_path):
    d, key, _ = original
    big = tmp_path / "big.pub"
    big.write_bytes(fx.pub_pem(key) + b"\n" * (70 * 1024))
    res = cli(d, "--pubkey", big)
    no_traceback(res, 2)
    assert "big.pub" in res.output and "limit" in res.output


def test_small_file_reader_never_reads_past_its_limit(tmp_path):
    from dpbundle.audit.safe_read import InputFileError, read_small_file

    f = tmp_path / "f"
    f.write_bytes(b"x" * 100)
    assert read_small_file(f, "test file", 100) == b"x" * 100
    with pytest.raises(InputFileError, match="limit"):
        read_small_file(f, "test file", 99)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_replay_readers_refuse_a_fifo_themselves(tmp_path):
    """Behind the runner's check too: the transcript and private-data readers never block."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code = textwrap.dedent(f"""
        from pathlib import Path
        from dpbundle.audit.private_data import PrivateDataError, _open
        from dpbundle.audit.replay import TranscriptError, read_transcript
        for fn, err in ((read_transcript, TranscriptError), (_open, PrivateDataError)):
            try:
                fn(Path({str(fifo)!r}))
            except err as e:
                assert "FIFO" in str(e), e
            else:
                raise SystemExit("not refused")
    """)
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a reader blocked on a FIFO")
    assert p.returncode == 0, p.stderr[-2000:]


def test_private_data_reader_reads_gzip(tmp_path):
    import gzip

    from dpbundle.audit.private_data import _open

    f = tmp_path / "d.csv.gz"
    f.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    with _open(f) as text:
        assert text.read() == "a,b\n1,2\n"


# ------------------------------------------------------------------------------ --spec

SPEC_FILE = fx.SPEC_PATH          # the fixture bundle's spec is examples/births.yaml


def spec_text(**replace) -> str:
    """examples/births.yaml with some YAML lines replaced (old -> new, exactly once each)."""
    text = SPEC_FILE.read_text()
    for old, new in replace.values():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    return text


def test_spec_file_matches(original):
    d, _, pub = original
    res = cli(d, "--pubkey", pub, "--spec", SPEC_FILE)
    no_traceback(res, 0)
    rep = run_audit(d, pubkey=pub, spec=SPEC_FILE)
    pre = rep.get("preregistration")
    assert pre.result == "pass"
    assert pre.facts["bundle_spec_sha256"] == pre.facts["preregistered_spec_sha256"]


def test_spec_hash_matches(original):
    d, _, pub = original
    sha = load_preregistered(str(SPEC_FILE), path_only=True).sha256
    for form in (sha, sha.upper(), f"sha256:{sha}"):
        no_traceback(cli(d, "--pubkey", pub, "--spec", form), 0)
    res = cli(d, "--pubkey", pub, "--spec", "f" * 64)
    no_traceback(res, 1)
    assert "preregistration" in res.output


def test_spec_hash_is_the_release_side_fingerprint_of_the_public_spec():
    """The canonical SHA-256 is the release's canonical JSON of the public spec (cross-check)."""
    from dpbundle.release.spec.load import canonical_json, load_spec

    s = load_spec(SPEC_FILE)
    want = hashlib.sha256(canonical_json(s.public_dict())).hexdigest()
    assert load_preregistered(str(SPEC_FILE), path_only=True).sha256 == want
    assert canonical_sha256(s.public_dict()) == want


def test_spec_field_differences_are_named_with_both_values(original, tmp_path):
    d, _, pub = original
    f = tmp_path / "prereg.yaml"
    f.write_text(spec_text(cap=("epsilon_cap: 10.0", "epsilon_cap: 12.0"),
                           kway=("    threshold: 0.01\n    epsilon: 0.01", "    threshold: 0.02\n    epsilon: 0.01"),
                           ratio=("stakeholder: 2.0", "stakeholder: 2.5")))
    rep = run_audit(d, pubkey=pub, spec=f)
    assert rep.verdict == "failed" and rep.exit_code == 1
    problems = rep.get("preregistration").problems
    assert "privacy.epsilon_cap: pre-registered 12.0, bundle 10.0" in problems
    assert "acceptance[kway].threshold: pre-registered 0.02, bundle 0.01" in problems
    assert "acceptance[ratio].threshold.stakeholder: pre-registered 2.5, bundle 2.0" in problems
    assert any(p.startswith("spec SHA-256 (canonical JSON): pre-registered") for p in problems)
    assert [c.check for c in rep.checks if c.failed] == ["preregistration"]


def test_spec_epsilon_and_total_difference(original, tmp_path):
    d, _, pub = original
    f = tmp_path / "prereg.yaml"
    f.write_text(spec_text(gen=("epsilon_generation: 4.0", "epsilon_generation: 3.5")))
    problems = run_audit(d, pubkey=pub, spec=f).get("preregistration").problems
    assert "privacy.epsilon_generation: pre-registered 3.5, bundle 4.0" in problems
    assert any(p.startswith("total epsilon") and "pre-registered 8.98, bundle 9.98" in p for p in problems)


def test_spec_other_field_differs_only_in_hash(original, tmp_path):
    d, _, pub = original
    f = tmp_path / "prereg.yaml"
    f.write_text(spec_text(title=('title: "Live births, one year', 'title: "Live Births, one year')))
    pre = run_audit(d, pubkey=pub, spec=f).get("preregistration")
    assert pre.failed and len(pre.problems) == 1
    assert "another field differs" in pre.problems[0]
    assert pre.facts["differing_paths"] == ["release.title"]


def test_spec_formatting_and_private_fingerprints_do_not_matter(original, tmp_path):
    """Comments, key order, JSON instead of YAML, privacy.private_data_sha256: same spec."""
    d, _, pub = original
    spec = yaml.safe_load(SPEC_FILE.read_text().replace("2014-01-01", "X").replace("2014-12-31", "Y"))
    spec = json.loads(json.dumps(spec).replace('"X"', '"2014-01-01"').replace('"Y"', '"2014-12-31"'))
    spec["privacy"]["private_data_sha256"] = ["ab" * 32]
    f = tmp_path / "prereg.json"
    f.write_text(json.dumps(dict(reversed(list(spec.items()))), indent=1))
    assert run_audit(d, pubkey=pub, spec=f).get("preregistration").result == "pass"


def test_spec_not_given_reports_the_bundle_hash(original):
    d, _, pub = original
    pre = run_audit(d, pubkey=pub).get("preregistration")
    assert pre.result == "skipped" and pre.facts["bundle_spec_sha256"] in pre.detail


HOSTILE_SPECS = {
    "alias": ("a: &x 1\nb: *x\n", "anchor"),
    "alias only": ("a: [1]\nb: *x\n", "alias"),
    "duplicate": ("a: 1\nb: 2\na: 3\n", "appears twice"),
    "duplicate int and str": ("1: a\n'1': b\n", "appears twice"),
    "merge": ("a: {x: 1}\nb:\n  <<: {y: 2}\n", "merge key"),
    "deep": ("a: " + "[" * (MAX_DEPTH + 2) + "]" * (MAX_DEPTH + 2) + "\n", "nesting deeper"),
    "not a mapping": ("- 1\n- 2\n", "not a mapping"),
    "not yaml": ("a: [1, 2\n", "not valid YAML"),
    "nan": ("a: .nan\n", "finite"),
    "binary": ("a: !!binary aGVsbG8=\n", "bytes"),
    "huge int": ("a: " + "9" * 5000 + "\n", "cannot be read"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_SPECS))
def test_hostile_spec_files_are_refused(original, tmp_path, case):
    d, _, pub = original
    text, rule = HOSTILE_SPECS[case]
    f = tmp_path / "prereg.yaml"
    f.write_text(text)
    with pytest.raises(AuditInputError, match=rule):
        run_audit(d, pubkey=pub, spec=f)
    res = cli(d, "--pubkey", pub, "--spec", f)
    no_traceback(res, 2)
    assert "prereg.yaml" in res.output


def test_hostile_json_spec(original, tmp_path):
    d, _, pub = original
    for text, rule in (('{"a": 1, "a": 2}', "appears twice"), ('{"a": NaN}', "finite"),
                       ("[" * 100000 + "]" * 100000, "nesting deeper")):
        f = tmp_path / "prereg.json"
        f.write_text(text)
        with pytest.raises(AuditInputError, match=rule):
            run_audit(d, pubkey=pub, spec=f)


def test_spec_file_too_large_or_not_utf8(original, tmp_path):
    d, _, pub = original
    f = tmp_path / "big.yaml"
    f.write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    with pytest.raises(AuditInputError, match="limit"):
        run_audit(d, pubkey=pub, spec=f)
    f.write_bytes(b"a: \xff\n")
    with pytest.raises(AuditInputError, match="UTF-8"):
        run_audit(d, pubkey=pub, spec=f)
    no_traceback(cli(d, "--spec", tmp_path / "missing.yaml"), 2)


def test_preregistration_command_prints_the_hash(capsys):
    from dpbundle.audit.preregistration import main

    assert main([str(SPEC_FILE)]) == 0
    out = capsys.readouterr().out
    assert out.split()[0] == load_preregistered(str(SPEC_FILE), path_only=True).sha256


# ------------------------------------------------------------------------------ --json -

def test_json_to_stdout(original, tmp_path, monkeypatch):
    d, _, pub = original
    monkeypatch.chdir(tmp_path)
    res = cli(d, "--pubkey", pub, "--json", "-")
    no_traceback(res, 0)
    doc = json.loads(res.stdout)                     # stdout is the JSON report alone
    assert doc["verdict"] == "verified" and validate(doc, "audit-report") == []
    assert "VERIFIED" in res.stderr                   # the table and verdict go to stderr
    assert not (tmp_path / "-").exists()
    res = cli(d, "--json", "-")
    no_traceback(res, 3)
    assert json.loads(res.stdout)["verdict"] == "not_verified_key_not_pinned"


def test_html_to_stdout_and_not_both(original, tmp_path, monkeypatch):
    d, _, pub = original
    monkeypatch.chdir(tmp_path)
    res = cli(d, "--pubkey", pub, "--html", "-")
    no_traceback(res, 0)
    assert res.stdout.lstrip().lower().startswith("<!doctype html") and "VERIFIED" in res.stderr
    assert not (tmp_path / "-").exists()
    res = cli(d, "--pubkey", pub, "--html", "-", "--json", "-")
    no_traceback(res, 2)
    assert "both write to standard output" in res.stderr


def test_json_dot_slash_dash_is_a_file(original, tmp_path, monkeypatch):
    d, _, pub = original
    monkeypatch.chdir(tmp_path)
    res = cli(d, "--pubkey", pub, "--json", "./-")
    no_traceback(res, 0)
    assert json.loads((tmp_path / "-").read_text())["verdict"] == "verified"


# ------------------------------------------------------------------------------ progress

class Recorder:
    """An AuditProgress that records its calls."""

    def __init__(self):
        self.events = []

    def start(self, steps):
        self.events.append(("start", steps))

    def step(self, check):
        self.events.append(("step", check))

    def file_bytes(self, action, name, done, total):
        self.events.append(("bytes", action, name, done, total))

    def close(self):
        self.events.append(("close",))


def test_progress_steps_and_data_csv_bytes(original):
    d, _, pub = original
    rec = Recorder()
    run_audit(d, pubkey=pub, progress=rec)
    steps = [e[1] for e in rec.events if e[0] == "step"]
    assert steps == list(CHECK_NAMES)
    assert rec.events[0] == ("start", len(CHECK_NAMES)) and rec.events[-1] == ("close",)
    size = (d / "data.csv").stat().st_size
    for action in ("hashing", "reading"):
        ev = [e for e in rec.events if e[0] == "bytes" and e[1] == action and e[2] == "data.csv"]
        assert ev and ev[-1][3:] == (size, size), action


def test_progress_in_an_enclave_audit_sees_no_private_file(original, tmp_path):
    """The replay is one step: no byte count, size or name of the transcript or private data."""
    d, _, pub = original
    t = tmp_path / "T.jsonl"
    t.write_text('{"kind":"header","format":"dpbundle-transcript/1","salt":"' + "0" * 64 + '"}\n')
    data = tmp_path / "private.csv"
    data.write_text("mother_age,parity\n" + "30,1\n" * 5000)
    rec = Recorder()
    run_audit(d, pubkey=pub, transcript=t, data=data, progress=rec)
    files = {e[2] for e in rec.events if e[0] == "bytes"}
    assert "T.jsonl" not in files and "private.csv" not in files
    assert all(str(tmp_path) not in str(e) for e in rec.events)
    assert ("step", "replay") in rec.events


def test_rich_progress_renders_public_labels_only():
    from rich.console import Console

    from dpbundle.audit.progress import RichProgress

    out = io.StringIO()
    rp = RichProgress(Console(file=out, force_terminal=True, width=120))
    rp.start(len(CHECK_NAMES))
    rp.step("integrity")
    rp.file_bytes("hashing", "data.csv", 5_000_000, 10_000_000)
    rp.file_bytes("hashing", "metrics.json", 10, 20)         # only data.csv gets a bar
    shot = Console(file=io.StringIO(), width=120, record=True)
    shot.print(rp._progress.get_renderable())
    text = shot.export_text()
    assert "integrity" in text and "hashing data.csv" in text and "5.0 MB/10.0 MB" in text
    assert "metrics.json" not in text
    rp.step("replay")
    rp.close()


def test_progress_only_on_a_terminal_and_never_with_json_to_stdout(monkeypatch):
    from rich.console import Console

    monkeypatch.setenv("TERM", "xterm")       # TERM=dumb (some CI shells) turns progress off

    from dpbundle.audit.cli import _progress

    tty = Console(file=io.StringIO(), force_terminal=True)
    assert _progress(tty, json_to_stdout=False) is not None
    assert _progress(tty, json_to_stdout=True) is None
    assert _progress(Console(file=io.StringIO()), json_to_stdout=False) is None


# ------------------------------------------------------------------------------ no PDF stack

NO_WEASYPRINT = textwrap.dedent("""
    import sys

    tried = []

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name == "weasyprint" or name.startswith("weasyprint."):
                tried.append(name)
                raise ImportError("weasyprint is blocked in this test")
            return None

    sys.meta_path.insert(0, Block())
    which, args = sys.argv[1], sys.argv[2:]
    if which == "audit":
        from dpbundle.audit.cli import main
        code = main(args)
    else:
        from dpbundle.release.cli.main import app
        try:
            app(args=["audit", *args], prog_name="dpbundle")
            code = 0
        except SystemExit as e:
            code = e.code
    print("weasyprint imports tried:", tried, file=sys.stderr)
    assert not tried, tried
    assert "weasyprint" not in sys.modules
    sys.exit(code)
""")


@pytest.mark.parametrize("entry", ["audit", "dpbundle"])
def test_audit_runs_without_weasyprint(original, entry):
    d, _, pub = original
    p = subprocess.run([sys.executable, "-c", NO_WEASYPRINT, entry, str(d), "--pubkey", str(pub)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "VERIFIED" in p.stdout and "weasyprint imports tried: []" in p.stderr
