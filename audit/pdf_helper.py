"""A second process for README.pdf's text: extracting it is the audit's largest cost (pypdf, pure
Python, ~0.6 s for the 13-page demo datasheet), and it splits by page.

:class:`PdfHelper` runs :mod:`.pdf_extract` as a script with the PDF's bytes, as soon as the
integrity check passed (audit/runner.py), so that its start-up (interpreter, pypdf, the PDF's
page tree) overlaps the next checks; it extracts nothing until the documentation check reaches
the pages and calls :meth:`PdfHelper.go`. :func:`.checks_docs.pdf_pages` then extracts pages
from the first up, taking a page from the worker (which goes from the last page down) whenever
the worker has already written it. A page's text is the same either way (``page.extract_text()``
of the same pypdf, under the same recursion headroom), and pdf_pages goes through the pages in
order with the same checks, so the result, every error and every pypdf log line are those of
extracting alone. If the worker cannot start, is slow or stops, the audit extracts the
remaining pages itself: the helper only ever saves time. It is stopped when the check ends (or
the audit does: AuditContext.close).

It starts only when a core is free (:func:`spare_core`) and for a PDF of at least
:data:`MIN_BYTES` (one page of text extracts faster than a process starts).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

__all__ = ["PdfHelper", "MIN_BYTES"]

MIN_BYTES = 64 * 1024          # a datasheet of several pages (the demo one: 170 KB, 13 pages)
WORKER = Path(__file__).with_name("pdf_extract.py")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def spare_core() -> bool:
    """Whether a core is free for the worker: two or more cores, and fewer processes running
    than cores (this one included; Linux: now, from /proc/loadavg; elsewhere the load average
    over the last minute). On a busy machine a second process only slows the audit down."""
    cores = _cores()
    if cores < 2:
        return False
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0]) < cores
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.getloadavg()[0] < cores - 1
    except (AttributeError, OSError):
        return True


class PdfHelper:
    """The worker process and what it has written so far (:meth:`page`)."""

    def __init__(self, proc: subprocess.Popen, data: bytes):
        self._proc = proc
        self._pages: dict[int, tuple] = {}
        self._lock = threading.Lock()
        self._go = threading.Event()
        self._headroom: int | None = None
        self._threads = [threading.Thread(target=self._read, daemon=True),
                         threading.Thread(target=self._send, args=(data,), daemon=True)]
        for t in self._threads:
            t.start()

    @classmethod
    def start(cls, data: bytes, max_pages: int, max_chars: int) -> "PdfHelper | None":
        """A running helper for these bytes, or None (a small PDF, no spare core, no
        interpreter, no pypdf, or the process cannot start)."""
        if len(data) < MIN_BYTES or not sys.executable or not WORKER.is_file() or not spare_core():
            return None
        try:
            import pypdf
        except ImportError:
            return None
        pypdf_dir = str(Path(pypdf.__file__).resolve().parent.parent)
        args = [sys.executable, "-P", str(WORKER), pypdf_dir, str(len(data)), str(max_pages),
                str(max_chars)]
        try:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, close_fds=True)
        except (OSError, ValueError, subprocess.SubprocessError):
            return None
        return cls(proc, data)

    def _send(self, data: bytes) -> None:
        """The PDF, then (after :meth:`go`) the headroom line; the input ends either way."""
        try:
            self._proc.stdin.write(data)
            self._proc.stdin.flush()
            self._go.wait()
            if self._headroom is not None:
                self._proc.stdin.write(f"{self._headroom}\n".encode("ascii"))
        except (OSError, ValueError):
            pass
        finally:
            try:
                self._proc.stdin.close()
            except (OSError, ValueError):
                pass

    def _read(self) -> None:
        try:
            for line in self._proc.stdout:
                record = json.loads(line)
                logs = [(str(n), int(lv), str(m)) for n, lv, m in record.get("logs", [])]
                if "error" in record:
                    name, message = record["error"]
                    entry = ("error", str(name), str(message), logs)
                else:
                    entry = ("text", str(record["text"]), logs)
                with self._lock:
                    self._pages[int(record["page"])] = entry
        except (OSError, ValueError, KeyError, TypeError):
            pass      # the pages it has not written are extracted by the audit

    def go(self, headroom: int) -> None:
        """Start extracting, ``headroom`` frames below the recursion limit (as the audit does)."""
        self._headroom = int(headroom)
        self._go.set()

    def page(self, i: int) -> tuple | None:
        """What the worker wrote for page ``i``, or None (not yet, or never): ("text", text,
        logs) or ("error", type name, message, logs); logs: the pypdf log records (logger name,
        level, message) of ERROR and above that the page's extraction emitted."""
        with self._lock:
            return self._pages.get(i)

    def close(self) -> None:
        """Stop the worker (it may still be extracting pages nobody needs)."""
        self._go.set()
        try:
            self._proc.kill()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for t in self._threads:
            t.join(timeout=10)
        try:
            self._proc.stdout.close()
        except (OSError, ValueError):
            pass
