"""The audit's faster paths (issue 24) give exactly what the plain ones give.

- data.csv: the plain-text reader (audit/data_csv.py ``_read_clean``) gives the codes and row
  count of the csv-module reader, and any file it does not accept goes to that reader, so every
  problem is reported as before (a fuzz over malformed files, at several chunk sizes);
- face privacy in the datasheet: the smallest multiplicity by integer row keys is np.unique's;
- README.pdf: shared fonts (audit/pdf_extract.py) and the helper process (audit/pdf_helper.py)
  give each page's text, errors and pypdf log output as extracting page by page does.
"""
from __future__ import annotations

import io
import json
import logging
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

from dpbundle.audit import data_csv, pdf_helper  # noqa: E402
from dpbundle.audit.bundle_io import open_bundle  # noqa: E402
from dpbundle.audit.checks_docs import MAX_PAGES, MAX_PDF_TEXT_CHARS, pdf_pages  # noqa: E402
from dpbundle.audit.context import AuditContext  # noqa: E402
from dpbundle.audit.pdf_extract import shared_fonts  # noqa: E402

# ------------------------------------------------------------------------------ data.csv


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("csv") / "bundle"
    fx.build_bundle(d)
    return d, (d / "data.csv").read_bytes()


@pytest.fixture
def csv_bundle(built):
    """The bundle with its own data.csv (tests write theirs into it)."""
    d, data = built
    (d / "data.csv").write_bytes(data)
    return d


def _read_both(d: Path, content: bytes):
    (d / "data.csv").write_bytes(content)
    with open_bundle(d) as b:
        view = AuditContext(b).view()
        fast = data_csv.read_data_csv(b, view)
        lookups = [{lab: k for k, lab in enumerate(c.labels)} for c in view.columns]
        slow = data_csv._read_checked(b, view, "data.csv", view.names, lookups)
    return fast, slow


def _same(fast, slow) -> None:
    assert (fast.header, fast.rows, fast.problems, fast.bad_rows) == \
        (slow.header, slow.rows, slow.problems, slow.bad_rows)
    if slow.data is None:
        assert fast.data is None
        return
    # the same distinct rows, counts and first positions (each reader lists them in its own order)
    a, b = _canon(fast.data), _canon(slow.data)
    assert all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))
    assert fast.codes.shape == slow.codes.shape


def _canon(data):
    order = np.lexsort(data.rows.T[::-1]) if data.rows.size else np.arange(len(data.counts))
    return data.rows[order], data.counts[order], data.first[order]


def _variants(base: bytes) -> list[bytes]:
    header, rest = base.split(b"\n", 1)
    lines = rest.split(b"\n")[:-1]
    first = lines[0].split(b",")
    return [
        base, base[:-1], base + b"\n", base.replace(b"\n", b"\r\n"), base.replace(b"\n", b"\r"),
        header + b"\n", header, b"", b"\n", b"\xef\xbb\xbf" + base,
        header + b"\n" + b'"' + first[0] + b'",' + b",".join(first[1:]) + b"\n" + rest,
        header + b"\n" + lines[0] + b",x\n" + rest,
        header + b"\n" + b",".join(first[:-1]) + b"\n" + rest,
        header + b"\n" + b"," + b",".join(first[1:]) + b"\n" + rest,
        header + b"\n" + b"nope," + b",".join(first[1:]) + b"\n" + rest,
        header + b"\n" + lines[0] + b"\x00\n" + rest,
        base + b"\xff\xfe\n",
        header + b"\n" + lines[0] + b"\n\n" + b"\n".join(lines[1:]) + b"\n",
        header + b"\n" + b"," * 100_000 + b"\n" + rest,
        header.replace(b"birth_month", b"month") + b"\n" + rest,
        header + b"\n" + header + b"\n" + rest,
        header + b"\n" + lines[0] + b" \n" + rest,
        header + b" \n" + rest,
    ]


@pytest.mark.parametrize("chunk", [None, 1, 7, 64])
def test_data_csv_readers_agree(csv_bundle, monkeypatch, chunk):
    if chunk is not None:
        monkeypatch.setattr(data_csv, "CLEAN_CHUNK_CHARS", chunk)
    base = (csv_bundle / "data.csv").read_bytes()
    if chunk is not None:   # a short file for the small chunks
        base = b"\n".join(base.split(b"\n")[:41]) + b"\n"
    for i, content in enumerate(_variants(base)):
        fast, slow = _read_both(csv_bundle, content)
        try:
            _same(fast, slow)
        except AssertionError:
            pytest.fail(f"variant {i} (chunk {chunk}): {content[:120]!r}")


def _edit(lines: list[bytes], labels: list[list[bytes]], rng: random.Random) -> list[bytes]:
    """One edit that keeps the file valid: another declared label in a cell, a row deleted or
    repeated."""
    i = rng.randrange(1, len(lines))
    kind = rng.random()
    if kind < 0.6:
        cells = lines[i].split(b",")
        j = rng.randrange(len(cells))
        cells[j] = rng.choice(labels[j])
        return lines[:i] + [b",".join(cells)] + lines[i + 1:]
    if kind < 0.8 and len(lines) > 2:
        return lines[:i] + lines[i + 1:]
    return lines[:i] + [lines[i]] + lines[i:]


def test_data_csv_readers_agree_on_mutated_files(csv_bundle, monkeypatch):
    base = (csv_bundle / "data.csv").read_bytes().split(b"\n")[:31]
    with open_bundle(csv_bundle) as b:
        labels = [[lab.encode() for lab in c.labels] for c in AuditContext(b).view().columns]
    seen = {"clean": 0, "checked": 0}
    clean = data_csv._read_clean

    def counted(*args):
        got = clean(*args)
        seen["clean" if got is not None else "checked"] += 1
        return got

    monkeypatch.setattr(data_csv, "_read_clean", counted)
    rng = random.Random(24)
    pieces = [b",", b"\n", b"\r", b'"', b"\x00", b" ", b"x", b"<18", b"M", b"12", b"\xc3", b"\r\n", b'""']
    for case in range(400):
        monkeypatch.setattr(data_csv, "CLEAN_CHUNK_CHARS", rng.choice([5, 16, 1 << 20]))
        lines = list(base)
        for _ in range(rng.randint(1, 4)):
            lines = _edit(lines, labels, rng)
        content = bytearray(b"\n".join(lines) + rng.choice([b"\n", b""]))
        for _ in range(rng.choice([0, 0, 1, 2])):     # and sometimes something else
            at = rng.randrange(len(content) + 1)
            if rng.random() < 0.3 and at < len(content):
                del content[at:at + rng.randint(1, 4)]
            else:
                content[at:at] = rng.choice(pieces)
        fast, slow = _read_both(csv_bundle, bytes(content))
        try:
            _same(fast, slow)
        except AssertionError:
            pytest.fail(f"case {case}: {bytes(content)!r}")
    assert seen["clean"] > 100 and seen["checked"] > 100, seen


def test_a_clean_data_csv_is_read_without_the_csv_module(csv_bundle, monkeypatch):
    content = fx.csv_bytes(fx.make_rows())
    (csv_bundle / "data.csv").write_bytes(content)
    monkeypatch.setattr(data_csv, "CLEAN_CHUNK_CHARS", 1000)     # many chunks
    monkeypatch.setattr(data_csv, "_read_checked", lambda *a: pytest.fail("the csv reader ran"))
    with open_bundle(csv_bundle) as b:
        table = data_csv.read_data_csv(b, AuditContext(b).view())
    assert table.ok and table.rows == content.count(b"\n") - 1 == len(table.codes)


# ------------------------------------------------------------------------------ datasheet


def test_min_multiplicity_by_row_keys_is_numpys():
    from dpbundle.templates.datasheet.context import _min_multiplicity, _row_keys

    rng = np.random.default_rng(24)
    for trial in range(200):
        n, d, hi = int(rng.integers(1, 500)), int(rng.integers(1, 6)), int(rng.integers(1, 7))
        codes = rng.integers(0, hi, size=(n, d)).astype([np.int64, np.int32, np.uint8, np.uint64][trial % 4])
        cols = None if trial % 3 == 0 else [int(c) for c in rng.choice(d, size=int(rng.integers(1, d + 1)),
                                                                         replace=False)]
        sub = codes if cols is None else codes[:, cols]
        # the rows as record types that repeat (count 1 each, or a row's count split in two)
        assert _min_multiplicity(_as_types(codes), cols) == int(np.unique(sub, axis=0, return_counts=True)[1].min())
        split = _as_types(np.concatenate([codes, codes]))
        assert _min_multiplicity(split, cols) == 2 * int(np.unique(sub, axis=0, return_counts=True)[1].min())
    assert _row_keys(np.array([[2 ** 40, 2 ** 40], [1, 1]])) is None          # keys would overflow
    assert _row_keys(np.array([[-1, 0], [0, 0]])) is None                       # not codes
    assert _min_multiplicity(_as_types(np.array([[2 ** 40, 2 ** 40], [2 ** 40, 2 ** 40], [1, 1]]))) == 1


def _as_types(rows: np.ndarray):
    """Rows as (not necessarily distinct) record types of count 1: what _min_multiplicity reads."""
    from types import SimpleNamespace

    counts = np.ones(len(rows), dtype=np.int64)
    return SimpleNamespace(table=SimpleNamespace(codes=rows), counts=counts, weights=counts.astype(float))


# ------------------------------------------------------------------------------ README.pdf


def build_pdf(pages: list[list[str]], font_extra: bytes = b"") -> bytes:
    """Pages of text in one shared font, each drawing one shared form XObject that uses the
    font too (as WeasyPrint's datasheets do); ``font_extra``: more entries of the font."""
    def esc(s):
        return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    objs = {1: b"<< /Type /Catalog /Pages 2 0 R >>",
            2: b"<< /Type /Pages /Kids [" + " ".join(f"{10 + 2 * i} 0 R" for i in range(len(pages))).encode()
               + b"] /Count %d >>" % len(pages),
            3: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica" + font_extra + b" >>"}
    form = b"BT /F1 9 Tf 40 40 Td (form text here) Tj ET"
    objs[4] = (b"<< /Type /XObject /Subtype /Form /BBox [0 0 595 842] /Resources << /Font << /F1 3 0 R >> >> "
               b"/Length %d >>\nstream\n" % len(form) + form + b"\nendstream")
    for i, lines in enumerate(pages):
        content = ("BT /F1 9 Tf 40 800 Td 11 TL\n" + "".join(f"({esc(s)}) Tj T*\n" for s in lines)
                   + "ET\n/X1 Do").encode()
        objs[10 + 2 * i] = (b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font "
                            b"<< /F1 3 0 R >> /XObject << /X1 4 0 R >> >> /Contents %d 0 R >>" % (11 + 2 * i))
        objs[11 + 2 * i] = b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream"
    out, offsets = bytearray(b"%PDF-1.4\n"), {}
    for k in sorted(objs):
        offsets[k] = len(out)
        out += b"%d 0 obj\n" % k + objs[k] + b"\nendobj\n"
    size, xref = max(objs) + 1, len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for k in range(1, size):
        out += (b"%010d 00000 n \n" % offsets[k]) if k in offsets else b"0000000000 65535 f \n"
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref)
    return bytes(out)


PAGES = [[f"page {p} line {i} words {p * i}" for i in range(30)] for p in range(9)]
# an encoding pypdf does not know: every parse of the font logs an ERROR record
ODD_FONT = b" /Encoding /Odd-Encoding"


def plain_pages(data: bytes) -> list[str]:
    from pypdf import PdfReader

    return [p.extract_text() or "" for p in PdfReader(io.BytesIO(data), strict=False).pages]


def _messages(caplog) -> list[tuple[str, int, str]]:
    return [(r.name, r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith("pypdf")]


def test_shared_fonts_give_the_same_text_and_log_records(caplog):
    data = build_pdf(PAGES, ODD_FONT)
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    with caplog.at_level(logging.ERROR, logger="pypdf"):
        want = plain_pages(data)
        want_logs = _messages(caplog)
        caplog.clear()
        got = pdf_pages(data)
        got_logs = _messages(caplog)
    assert got == want and len(want) == 9
    assert got_logs == want_logs and len(want_logs) == 18     # 9 pages, each with its form


def test_shared_fonts_parse_each_font_once(monkeypatch):
    import pypdf.generic._font as font_module

    data = build_pdf(PAGES)
    calls = []
    parse = font_module.get_encoding
    monkeypatch.setattr(font_module, "get_encoding", lambda d: calls.append(1) or parse(d))
    want = plain_pages(data)
    assert len(calls) == 18          # each page and each form parses the font again
    calls.clear()
    assert pdf_pages(data) == want and len(calls) == 1
    calls.clear()
    with shared_fonts():
        with shared_fonts():
            assert plain_pages(data) == want
    assert len(calls) == 1
    calls.clear()
    assert plain_pages(data) == want and len(calls) == 18     # outside: pypdf's own


STDERR_SCRIPT = r"""
import io, sys
sys.path.insert(0, sys.argv[2])
from test_audit_speed import ODD_FONT, PAGES, build_pdf, plain_pages
from dpbundle.audit.checks_docs import pdf_pages
import logging
logging.getLogger("pypdf").setLevel(logging.ERROR)
data = build_pdf(PAGES, ODD_FONT)
if sys.argv[1] == "plain":
    plain_pages(data)
else:
    pdf_pages(data)
"""


def test_without_logging_configured_stderr_is_the_same():
    """pypdf's ERROR records reach standard error through logging's last resort: shared fonts
    keep every one of them."""
    here = str(Path(__file__).resolve().parent)
    out = {how: subprocess.run([sys.executable, "-c", STDERR_SCRIPT, how, here], capture_output=True,
                               text=True) for how in ("plain", "shared")}
    assert out["plain"].returncode == out["shared"].returncode == 0, out["shared"].stderr
    assert out["plain"].stderr == out["shared"].stderr
    assert out["plain"].stderr.count("Odd-Encoding") == 18


@pytest.fixture
def helper_on(monkeypatch):
    monkeypatch.setattr(pdf_helper, "spare_core", lambda: True)
    monkeypatch.setattr(pdf_helper, "MIN_BYTES", 0)


def _wait_for(helper, pages: int, timeout: float = 30) -> None:
    helper.go(sys.getrecursionlimit() - 50)
    end = time.monotonic() + timeout
    while time.monotonic() < end and sum(helper.page(i) is not None for i in range(pages)) < pages:
        time.sleep(0.02)


def test_pages_from_the_helper_are_the_same(helper_on, caplog):
    data = build_pdf(PAGES, ODD_FONT)
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    with caplog.at_level(logging.ERROR, logger="pypdf"):
        want = plain_pages(data)
        want_logs = _messages(caplog)
        caplog.clear()
        helper = pdf_helper.PdfHelper.start(data, MAX_PAGES, MAX_PDF_TEXT_CHARS)
        assert helper is not None
        try:
            _wait_for(helper, len(PAGES))
            assert all(helper.page(i) is not None for i in range(len(PAGES)))
            got = pdf_pages(data, helper)
        finally:
            helper.close()
        got_logs = [(n, lv, m) for n, lv, m in _messages(caplog)]
    assert got == want
    assert [m for _, _, m in got_logs] == [m for _, _, m in want_logs]


def test_a_helper_that_stops_leaves_the_pages_to_the_audit(helper_on):
    data = build_pdf(PAGES)
    helper = pdf_helper.PdfHelper.start(data, MAX_PAGES, MAX_PDF_TEXT_CHARS)
    assert helper is not None
    try:
        helper._proc.kill()
        assert pdf_pages(data, helper) == plain_pages(data)
    finally:
        helper.close()


class FakeHelper:
    def __init__(self, pages: dict):
        self.pages, self.headroom = pages, None

    def go(self, headroom):
        self.headroom = headroom

    def page(self, i):
        return self.pages.get(i)


def test_an_error_from_the_helper_is_the_same_error(caplog):
    data = build_pdf(PAGES)
    fake = FakeHelper({1: ("error", "PdfReadError", "bad page", [["pypdf._page", 40, "said so"]])})
    with caplog.at_level(logging.ERROR, logger="pypdf"):
        with pytest.raises(Exception) as got:
            pdf_pages(data, fake)
    assert type(got.value).__name__ == "PdfReadError" and str(got.value) == "bad page"
    assert ("pypdf._page", 40, "said so") in _messages(caplog)
    assert 100 < fake.headroom < sys.getrecursionlimit()


def test_pages_are_taken_in_order_with_the_same_limits():
    data = build_pdf(PAGES)
    huge = "x" * (MAX_PDF_TEXT_CHARS + 1)
    # page 0 is over the limit: that is the error, not page 1's
    fake = FakeHelper({0: ("text", huge, []), 1: ("error", "PdfReadError", "bad page", [])})
    with pytest.raises(ValueError, match="characters of text"):
        pdf_pages(data, fake)
    fake = FakeHelper({3: ("text", "from the helper", [])})
    want = plain_pages(data)
    assert pdf_pages(data, fake) == want[:3] + ["from the helper"] + want[4:]


def test_the_worker_writes_nothing_for_an_unreadable_pdf():
    from dpbundle.audit import pdf_extract

    garbage = b"%PDF-1.4\n" + bytes(range(256)) * 8
    done = subprocess.run([sys.executable, "-P", pdf_extract.__file__, "", str(len(garbage)), "200",
                           "1000"], input=garbage + b"900\n", capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout == b""
    data = build_pdf(PAGES[:3])
    done = subprocess.run([sys.executable, "-P", pdf_extract.__file__, "", str(len(data)), "200",
                           "1000000"], input=data + b"900\n", capture_output=True, timeout=60)
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x["page"] for x in lines] == [2, 1, 0]
    assert [x["text"] for x in reversed(lines)] == plain_pages(data)
    done = subprocess.run([sys.executable, "-P", pdf_extract.__file__, "", str(len(data)), "200",
                           "1000000"], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout == b""     # no go: nothing extracted


def test_the_audit_reports_the_same_with_and_without_the_helper(copy, monkeypatch):
    """A changed word in README.pdf: the documentation check says the same either way."""
    from dpbundle.audit.runner import run_audit

    d, key, pub = copy
    lines = ["Live births (test datasheet)", "a word that the datasheet does not have"]
    (d / "README.pdf").write_bytes(fx.minimal_pdf(lines))
    fx.sign_bundle(d, key)
    reports = {}
    for on in (False, True):
        monkeypatch.setattr(pdf_helper, "spare_core", lambda on=on: on)
        monkeypatch.setattr(pdf_helper, "MIN_BYTES", 0)
        rep = run_audit(d, pubkey=pub)
        reports[on] = [(c.check, c.result, c.problems, c.warnings, c.detail) for c in rep.checks]
    assert reports[True] == reports[False]
    assert dict((c, r) for c, r, *_ in reports[True])["documentation"] == "fail"


from audit_fixtures import copy, original  # noqa: E402,F401  (a signed bundle and a fresh copy)
