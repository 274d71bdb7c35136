"""The datasheet's renderer (issue 24): a cheap pre-flight check that renders no page, a background
renderer (a child process) that makes the same PDF bytes as rendering in the release's own process
and receives README.html only, a fallback to rendering here when it is gone, and stage timings
that are printed only when asked for."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpbundle.release.bundle import datasheet, pdf_worker, preflight, timings, weasy

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

runner = CliRunner()

PAGE = ("<html lang=\"en\"><head><title>t</title><style>body { font-family: 'DejaVu Sans'; } "
        "td { border: 1px solid black; }</style></head><body><h1>Births 2014</h1><p>epsilon 9.98, "
        "n = 165,272</p><table><tr><td>a</td><td>1</td></tr></table></body></html>")


def test_the_worker_environment_has_no_passphrase():
    env = pdf_worker.worker_env({"PATH": "/bin", "DPBUNDLE_KEY_PASSPHRASE": "secret", "HOME": "/h"})
    assert env == {"PATH": "/bin", "HOME": "/h"}


def test_the_renderer_check_renders_no_page(monkeypatch):
    def no_render(*_a, **_k):
        raise AssertionError("the pre-flight rendered a page")

    monkeypatch.setattr(weasy, "document", no_render)
    monkeypatch.setattr(weasy, "pdf_bytes", no_render)
    assert preflight.renderer_problem() is None
    status = weasy.renderer_status()
    assert status.problem is None
    assert weasy.RendererStatus.from_json(json.loads(json.dumps(status.to_json()))) == status


def test_harfbuzz_subset_is_used_where_it_is_installed():
    import ctypes.util

    if ctypes.util.find_library("harfbuzz-subset") is None:
        pytest.skip("libharfbuzz-subset is not installed here")
    assert weasy.renderer_status().fast_subsetting
    assert preflight.renderer_problem() is None and preflight.renderer_note() is None


def test_a_renderer_that_cannot_load_is_a_problem(monkeypatch):
    def broken():
        raise OSError("cannot load library 'libpango-1.0-0'")

    monkeypatch.setattr(datasheet, "check_renderer", broken)
    problem = preflight.renderer_problem()
    assert problem and "cannot be rendered" in problem and "libpango" in problem


def test_the_background_renderer_makes_the_same_bytes():
    here = datasheet.render_pdf_bytes(PAGE)
    with datasheet.background_renderer():
        worker = datasheet._worker
        assert worker is not None
        assert datasheet.check_renderer().problem is None
        datasheet.prefetch_pdf(PAGE)
        assert worker.pending(PAGE)
        there = datasheet.render_pdf_bytes(PAGE)
        assert worker.last_seconds is not None and not worker.pending(PAGE)
        assert datasheet.render_pdf_bytes(PAGE) == there       # a second request, not prefetched
    assert datasheet._worker is None
    assert there == here
    assert worker._proc.poll() is not None                       # ended on the way out


def test_a_dead_worker_is_replaced_by_rendering_here():
    here = datasheet.render_pdf_bytes(PAGE)
    with datasheet.background_renderer():
        worker = datasheet._worker
        worker.status()
        worker._proc.kill()
        worker._proc.wait()
        datasheet.prefetch_pdf(PAGE)
        assert datasheet.render_pdf_bytes(PAGE) == here
        assert datasheet.check_renderer().problem is None


def test_without_a_worker_the_release_renders_itself(monkeypatch, tmp_path):
    monkeypatch.setattr(pdf_worker.PdfWorker, "start", classmethod(lambda cls: None))
    with datasheet.background_renderer():
        assert datasheet._worker is None
        datasheet.prefetch_pdf(PAGE)
        datasheet.render_pdf(PAGE, tmp_path / "x.pdf")
    assert (tmp_path / "x.pdf").read_bytes() == datasheet.render_pdf_bytes(PAGE)


def test_the_worker_protocol():
    """serve() answers its status, then one PDF per request, then ends at the end of its input."""
    html = PAGE.encode("utf-8")
    inp = io.BytesIO(json.dumps({"size": len(html)}).encode() + b"\n" + html
                     + json.dumps({"size": 3}).encode() + b"\n" + b"<p>")
    out = io.BytesIO()
    pdf_worker.serve(inp, out)
    out.seek(0)
    status, _ = pdf_worker._read_frame(out)
    assert status == {"status": {"problem": None, "fast_subsetting": status["status"]["fast_subsetting"]},
                      "size": 0}
    head, body = pdf_worker._read_frame(out)
    assert head["ok"] and body == datasheet.render_pdf_bytes(PAGE)
    head, body = pdf_worker._read_frame(out)
    assert head["ok"] and body.startswith(b"%PDF-")
    assert pdf_worker._read_frame(out) is None


def test_timings_are_printed_only_when_asked_for(monkeypatch, capsys):
    monkeypatch.setattr(timings, "_allowed", True)   # as in a release of a built-in example
    monkeypatch.delenv(timings.ENV, raising=False)
    with timings.stage("plan"):
        pass
    timings.note("select", 1.0)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(timings.ENV, "1")
    with timings.stage("plan"):
        pass
    err = capsys.readouterr().err
    assert err.startswith("dpbundle timing: plan ") and err.endswith(" s\n")


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """A release whose background renderer's requests are recorded."""
    from dpbundle.release.cli.main import app

    tmp = tmp_path_factory.mktemp("worker")
    spec = fx.fast_spec(tmp / "fast.yaml")
    data = fx.example_registry(tmp / "registry.csv", 4000, 3)
    assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    sent, answered = [], []
    submit, result = pdf_worker.PdfWorker.submit, pdf_worker.PdfWorker.result
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(timings.ENV, raising=False)
        mp.setattr(pdf_worker.PdfWorker, "submit", lambda self, html: (sent.append(html), submit(self, html))[1])
        mp.setattr(pdf_worker.PdfWorker, "result", lambda self: answered.append(result(self)) or answered[-1])
        res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"), "--key",
                                  str(tmp / "k.key"), "--ledger", str(tmp / "ledger.jsonl"),
                                  "--transcript", str(tmp / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return {"dir": tmp / "B", "sent": sent, "answered": answered, "output": res.output}


def test_the_background_renderer_receives_readme_html_only(released):
    html = (released["dir"] / "README.html").read_text(encoding="utf-8")
    assert released["sent"] == [html]
    pdf = (released["dir"] / "README.pdf").read_bytes()
    assert released["answered"] == [pdf]
    assert pdf == datasheet.render_pdf_bytes(html)    # the bytes this process would have made


def test_a_release_prints_no_timing_unless_asked(released):
    assert "dpbundle timing" not in released["output"]


def test_the_worker_never_imports_a_dpbundle_folder_of_the_current_directory(tmp_path, monkeypatch):
    """The renderer child is started with ``python -P -m``: a ``dpbundle/`` folder (say, a source
    checkout) in the folder the release runs from is not imported in place of the installed code."""
    poisoned = tmp_path / "dpbundle" / "release"
    poisoned.mkdir(parents=True)
    (poisoned / "__init__.py").write_text("raise SystemExit('another dpbundle was imported')\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    worker = pdf_worker.PdfWorker.start()
    assert worker is not None
    try:
        assert isinstance(worker.status(), dict)     # WorkerGone if the poisoned package ran
    finally:
        worker.close()


def test_stage_timings_only_for_a_built_in_example(monkeypatch, capsys):
    """DPBUNDLE_TIMINGS prints private durations: a release on real data ignores it, with a warning."""
    monkeypatch.setenv(timings.ENV, "1")
    monkeypatch.setattr(timings, "_allowed", True)
    try:
        timings.allow(False)
        assert not timings.enabled()
        with timings.stage("select"):
            pass
        err = capsys.readouterr().err
        assert "is ignored" in err and "dpbundle timing" not in err
        timings.allow(True)
        assert timings.enabled()
        with timings.stage("select"):
            pass
        assert "dpbundle timing: select" in capsys.readouterr().err
    finally:
        timings.allow(True)
