"""README.pdf's page texts as the documentation check extracts them: the parts shared by the
audit and its helper process (:mod:`.pdf_helper`). Only the standard library and pypdf are
imported here, so that the helper can run this file as a script.

:func:`shared_fonts`: pypdf parses a page's fonts again for the page and for every form XObject
it draws (a WeasyPrint datasheet: 5 fonts, 156 times over 13 pages, about a quarter of the
extraction). Within ``with shared_fonts():`` each font dictionary is parsed once and the parsed
font is reused; a font is a function of its dictionary, and the only attribute the extraction
sets on it (``space_width``, to the same value every time) does not change, so every page's text
is the same; pypdf's log records of the parse are emitted again at each reuse.

As a script (the helper process): ``python -P pdf_extract.py PYPDF_DIR SIZE MAX_PAGES
MAX_CHARS``; its standard input is the PDF (SIZE bytes), then, when the audit starts extracting,
one line: how many more frames the audit's stack may hold where it calls ``extract_text`` (the
worker extracts under the same headroom, so that a deeply nested PDF fails here where it fails
in the audit). It puts ``PYPDF_DIR`` (the audit's copy of pypdf) first on the path, extracts each
page's text with ``page.extract_text()`` as the audit does, from the last page towards the
first, and writes one JSON line per page, ``{"page": i, "text": ...}`` or ``{"page": i,
"error": [type name, message]}`` (with ``"logs"``: pypdf's log records of level ERROR and above
that the page emitted, which the audit emits again when it uses the page), as soon as it has
it. It stops after an error, once the text it has written is longer than ``MAX_CHARS`` (what the
audit allows for the whole PDF) or when its input ends before the line, and writes nothing when
the PDF cannot be opened, is encrypted or has more than ``MAX_PAGES`` pages: the audit itself
reports those. Nothing here decides anything.
"""
from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import threading
import time

__all__ = ["stack_depth", "shared_fonts", "MAX_SHARED_FONTS"]

MAX_SHARED_FONTS = 1024      # parsed fonts kept at once (a datasheet has 5)
_state = threading.local()   # .fonts: {id: (dictionary, font, log records)}; .capture: a list


def stack_depth() -> int:
    """The number of frames on the stack, the caller's included."""
    depth, frame = 0, sys._getframe(1)
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    return depth


class _Capture(logging.Handler):
    """On the "pypdf" logger while fonts are shared (one for the process): keeps the records a
    font's parse emits (in the thread that parses), and stands in for logging's last-resort
    handler, which a logger hierarchy with a handler no longer calls, so that what is shown does
    not change."""

    users = 0

    def __init__(self):
        super().__init__(logging.NOTSET)

    def emit(self, record: logging.LogRecord) -> None:
        capture = getattr(_state, "capture", None)
        if capture is not None:
            capture.append(record)
        if self._others(record) == 0:
            last = logging.lastResort
            if last is not None and record.levelno >= last.level:
                last.handle(record)

    def _others(self, record: logging.LogRecord) -> int:
        c, found = logging.getLogger(record.name), 0
        while c:
            found += sum(1 for h in c.handlers if h is not self)
            c = c.parent if c.propagate else None
        return found


_lock = threading.Lock()
_capture = _Capture()


def _emit_again(records: list) -> None:
    """Emit a reused font's log records again, as its parse did (with the time of now)."""
    for record in records:
        again = logging.makeLogRecord(record.__dict__)
        again.created = time.time()
        again.msecs = (again.created - int(again.created)) * 1000
        logging.getLogger(record.name).handle(again)


def _parse_once(parse, pdf_font_dict, fonts: dict):
    """``parse(pdf_font_dict)``, or the font parsed before from the same dictionary."""
    hit = fonts.get(id(pdf_font_dict))
    if hit is not None and hit[0] is pdf_font_dict:
        _emit_again(hit[2])
        return hit[1]
    outer = getattr(_state, "capture", None)
    _state.capture = records = []
    try:
        parsed = parse(pdf_font_dict)
    finally:
        _state.capture = outer
        if outer is not None:
            outer.extend(records)
    if len(fonts) < MAX_SHARED_FONTS:
        fonts[id(pdf_font_dict)] = (pdf_font_dict, parsed, records)
    return parsed


def _shared_font_class():
    """pypdf 7's ``pypdf._page.Font`` with a ``from_font_resource`` that shares parsed fonts in
    a thread within :func:`shared_fonts` (installed once; outside, it is pypdf's own); None for
    a pypdf this was not checked against."""
    try:
        import pypdf
        import pypdf._page as page_module
    except ImportError:
        return None
    with _lock:
        font = getattr(page_module, "Font", None)
        if getattr(font, "_dpbundle_shared", False):
            return font
        if font is None or not hasattr(font, "from_font_resource") or not pypdf.__version__.startswith("7."):
            return None
        parse = font.from_font_resource

        class SharedFont(font):
            _dpbundle_shared = True

            @classmethod
            def from_font_resource(cls, pdf_font_dict):
                fonts = getattr(_state, "fonts", None)
                if fonts is None:
                    return parse(pdf_font_dict)
                return _parse_once(parse, pdf_font_dict, fonts)

        SharedFont.__name__ = SharedFont.__qualname__ = font.__name__
        page_module.Font = SharedFont
        return SharedFont


@contextlib.contextmanager
def shared_fonts():
    """Parse each font dictionary once in this thread (see the module's text)."""
    if _shared_font_class() is None or getattr(_state, "fonts", None) is not None:
        yield
        return
    with _lock:
        if _Capture.users == 0:
            logging.getLogger("pypdf").addHandler(_capture)
        _Capture.users += 1
    _state.fonts = {}
    try:
        yield
    finally:
        _state.fonts = None
        with _lock:
            _Capture.users -= 1
            if _Capture.users == 0:
                logging.getLogger("pypdf").removeHandler(_capture)


# -- the helper process --------------------------------------------------------------------


class _Records(logging.Handler):
    """The log records (logger name, level, message) of one page's extraction."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.records.append([record.name, record.levelno, record.getMessage()])
        except Exception:  # noqa: BLE001 - a record that cannot be formatted is left out
            pass


def _write(out, record) -> bool:
    try:
        out.write(json.dumps(record, ensure_ascii=True) + "\n")
        out.flush()
        return True
    except (OSError, ValueError):    # the audit is done with the pages (or gone)
        return False


def _pages(data: bytes, max_pages: int):
    from pypdf import PdfReader

    logger = logging.getLogger("pypdf")
    logger.setLevel(logging.ERROR)
    logger.propagate = False      # nothing on this process's standard error
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted or len(reader.pages) > max_pages:
            return None
        return reader.pages
    except Exception:  # noqa: BLE001 - the audit reports what is wrong with the PDF
        return None


def _extract(pages, max_chars: int, headroom: int, out) -> None:
    sys.setrecursionlimit(max(headroom + stack_depth(), 100))
    logs = _Records()
    logging.getLogger("pypdf").addHandler(logs)
    total = 0
    for i in range(len(pages) - 1, -1, -1):
        logs.records = []
        try:
            text = pages[i].extract_text() or ""
        except Exception as e:  # noqa: BLE001 - reported by the audit as it reports its own
            try:
                error = [type(e).__name__, str(e)]
            except Exception:  # noqa: BLE001 - the audit extracts this page itself
                return
            _write(out, {"page": i, "error": error, "logs": logs.records})
            return
        if not _write(out, {"page": i, "text": text, "logs": logs.records}):
            return
        total += len(text)
        if total > max_chars:
            return


def main(argv: list[str]) -> int:
    pypdf_dir, size, max_pages, max_chars = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    if pypdf_dir:
        sys.path.insert(0, pypdf_dir)
    data = sys.stdin.buffer.read(size)
    try:
        pages = _pages(data, max_pages)
    except ImportError:
        return 0
    if pages is None:
        return 0
    line = sys.stdin.buffer.readline()      # the audit has started on the pages
    if not line.strip():
        return 0
    with shared_fonts():
        _extract(pages, max_chars, int(line), sys.stdout)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        raise SystemExit(1) from None
