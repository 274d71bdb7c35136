"""The background renderer: a child process that renders the (public) datasheet to PDF.

A release starts it first (:class:`PdfWorker`); it imports WeasyPrint and checks the renderer
and the fonts (:func:`.weasy.renderer_status`) on the other core while the release simulates,
reads and selects, so the pre-flight only reads its answer; it then warms up and waits. After the
selection the release sends it README.html and writes the other files and the private transcript
while the PDF renders.

What it receives is README.html only, which the bundle publishes: nothing private ever reaches
it. It is a fresh interpreter (``python -m dpbundle.release.bundle.pdf_worker``), not a fork, so
it holds none of the release's memory; its environment is the release's without the key's
passphrase; it ignores Ctrl-C (the release decides) and ends when its input closes.

The protocol, on the child's stdin and stdout: a frame is one JSON line, then ``size`` bytes.
The child first sends ``{"status": {...}}`` (:class:`.weasy.RendererStatus`); each request
``{"size": n}`` + HTML (UTF-8) gets ``{"ok": true, "size": m, "seconds": s}`` + PDF, or
``{"ok": false, "error": "..."}``. Any trouble with the child (it cannot start, dies, answers
garbage) makes the caller render in its own process instead: :class:`WorkerGone`.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import BinaryIO

from dpbundle.release.bundle import timings
from dpbundle.release.bundle.passphrase_env import PASSPHRASE_ENV

__all__ = ["PdfWorker", "WorkerGone", "serve", "worker_env"]

_MODULE = "dpbundle.release.bundle.pdf_worker"
_SECRET_ENV = (PASSPHRASE_ENV,)    # never passed to the child
_GONE = object()
STATUS_TIMEOUT = 30.0     # seconds to wait for the child's first answer (normally well under one)


class WorkerGone(RuntimeError):
    """The background renderer cannot answer (not started, exited, or a broken pipe)."""


def worker_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the release's, without the signing key's passphrase."""
    env = dict(os.environ if env is None else env)
    for name in _SECRET_ENV:
        env.pop(name, None)
    return env


def _read_frame(stream: BinaryIO) -> tuple[dict, bytes] | None:
    line = stream.readline()
    if not line:
        return None
    head = json.loads(line)
    size = int(head.get("size", 0))
    body = stream.read(size) if size else b""
    if len(body) != size:
        return None
    return head, body


def _write_frame(stream: BinaryIO, head: dict, body: bytes = b"") -> None:
    stream.write(json.dumps(dict(head, size=len(body))).encode("ascii") + b"\n" + body)
    stream.flush()


class PdfWorker:
    """The parent's handle on the background renderer (see the module's docstring)."""

    def __init__(self, proc: subprocess.Popen, started: float) -> None:
        self._proc = proc
        self.started = started
        self.ready_after: float | None = None     # seconds from the start to its status
        self._frames: queue.Queue = queue.Queue()
        self._status: dict | None = None
        self._sent: str | None = None             # the HTML of the request in flight
        self._dead = False                        # it failed once: never waited for again
        self.last_seconds: float | None = None    # how long the child took for the last PDF
        threading.Thread(target=self._read, name="dpbundle-pdf-worker", daemon=True).start()

    @classmethod
    def start(cls) -> "PdfWorker | None":
        """Start the child; None when it cannot be started (the release then renders itself)."""
        if not sys.executable:
            return None
        try:
            # -P: the current folder is not put on the import path (never a dpbundle/ found there)
            proc = subprocess.Popen([sys.executable, "-P", "-m", _MODULE], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=worker_env(),
                                    close_fds=True)
        except OSError:
            return None
        return cls(proc, time.perf_counter())

    def _read(self) -> None:
        try:
            while True:
                frame = _read_frame(self._proc.stdout)
                if frame is None:
                    break
                self._frames.put(frame)
        except (OSError, ValueError):
            pass
        self._frames.put(_GONE)

    def _next(self, timeout: float | None) -> tuple[dict, bytes]:
        """The next frame, waiting at most ``timeout`` seconds (None: while the child lives).
        After a WorkerGone every later call raises it at once."""
        if self._dead:
            raise WorkerGone("the background renderer is not available")
        try:
            frame = self._frames.get(timeout=timeout)
        except queue.Empty:
            self._dead = True
            raise WorkerGone("the background renderer did not answer in time") from None
        if frame is _GONE:
            self._dead = True
            raise WorkerGone("the background renderer exited")
        return frame

    def status(self, timeout: float = STATUS_TIMEOUT) -> dict:
        """The child's renderer status (``RendererStatus.to_json()``), waiting for it if need be.
        WorkerGone when it has none to give."""
        if self._status is None:
            head, _ = self._next(timeout)
            if not isinstance(head.get("status"), dict):
                self._dead = True
                raise WorkerGone("the background renderer answered out of turn")
            self._status = head["status"]
            self.ready_after = time.perf_counter() - self.started
            timings.note("renderer.ready_after_start", self.ready_after)
        return self._status

    def submit(self, html: str) -> None:
        """Send ``html`` to be rendered (one request at a time); WorkerGone if it cannot be sent."""
        if self._sent is not None:
            raise WorkerGone("the background renderer is busy")
        self.status()
        try:
            _write_frame(self._proc.stdin, {}, html.encode("utf-8"))
        except (OSError, ValueError) as exc:
            raise WorkerGone(f"cannot send to the background renderer ({exc})") from None
        self._sent = html

    def pending(self, html: str) -> bool:
        """True when the request in flight is this very ``html``."""
        return self._sent is not None and self._sent == html

    def result(self) -> bytes:
        """The PDF of the request in flight. WorkerGone when the child failed to make it (then
        render in this process, which raises the renderer's own error if there is one)."""
        if self._sent is None:
            raise WorkerGone("nothing was sent to the background renderer")
        head, body = self._next(None)
        self._sent = None
        if not head.get("ok"):
            raise WorkerGone(f"the background renderer failed: {head.get('error')}")
        self.last_seconds = head.get("seconds")
        timings.note("write.pdf.worker_render", self.last_seconds)
        return body

    def render(self, html: str) -> bytes:
        """Send ``html`` (unless it is already in flight) and wait for its PDF."""
        if not self.pending(html):
            if self._sent is not None:
                self.result()      # a stale request: its answer is dropped
            self.submit(html)
        return self.result()

    def close(self) -> None:
        """End the child: its input closed (it exits when idle); killed if it has not exited
        within a moment (busy with a render nobody waits for)."""
        proc = self._proc
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=0.02 if self._sent is None else 0)
        except subprocess.TimeoutExpired:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
        try:
            proc.stdout.close()
        except OSError:
            pass


# ------------------------------------------------------------------------------------ the child

def _answer(out: BinaryIO, html_bytes: bytes) -> None:
    from dpbundle.release.bundle import weasy

    start = time.perf_counter()
    try:
        pdf = weasy.pdf_bytes(html_bytes.decode("utf-8"), pause_gc=True)
    except Exception as exc:  # noqa: BLE001 - reported; the parent renders again and raises it
        _write_frame(out, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    _write_frame(out, {"ok": True, "seconds": round(time.perf_counter() - start, 3)}, pdf)


def serve(inp: BinaryIO | None = None, out: BinaryIO | None = None) -> None:
    """The child's main loop (see the module's docstring)."""
    import gc
    import signal

    from dpbundle.release.bundle import weasy

    child = out is None
    if child:              # Ctrl-C is for the release (which ends us); the protocol keeps stdout,
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # stray prints of the libraries go nowhere
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    inp = sys.stdin.buffer if inp is None else inp
    status = weasy.renderer_status()
    _write_frame(out, {"status": status.to_json()})
    if status.problem is None:
        from importlib import resources

        weasy.warm_up(resources.files("dpbundle.templates").joinpath("datasheet.css").read_text(encoding="utf-8"))
        if child:
            gc.collect()
            gc.freeze()    # what is loaded now stays: later collections skip it
    while True:
        frame = _read_frame(inp)
        if frame is None:
            return
        _answer(out, frame[1])
        gc.collect()


if __name__ == "__main__":
    serve()
