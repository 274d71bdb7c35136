"""Check 8, documentation: what the bundle says in words is what its public files say.

- ``codebook.csv``: every released column's values, bounds and numbers, as the audit derives
  them from the spec and the selected configuration (audit/labels.py, independent of release/);
- ``README.html``: rendered again from the bundle's public files by the datasheet renderer
  (:mod:`dpbundle.templates.datasheet`, shared with the release) and required byte for byte; a
  difference is reported with the first differing sentence;
- ``README.pdf``: read as a viewer shows it (:mod:`.pdf_structure`, docs/pdf-check.md): its text,
  in order, is the rendered datasheet's; all of it visible (no invisible render mode, tiny,
  transparent, background-coloured, clipped, covered or off-page text); no annotations but the
  datasheet's links, no scripts, actions, embedded files, forms or optional content; its
  metadata (document information and XMP) the datasheet's title and meta elements;
- ``metrics.csv``: one row per criterion of metrics.json, numbers as ``format(x, ".6g")``.

Bundles made before dpbundle 0.2 have no codebook and were not rendered from their public files:
for them, the datasheet is only searched for the total epsilon and every DP value (with a warning).
"""
from __future__ import annotations

import html as html_mod
import io
import re
import sys

from .bundle_io import BundleFileError
from .context import AuditContext, Missing
from .pdf_helper import PdfHelper
from .pdf_extract import shared_fonts, stack_depth
from .report import CheckResult

__all__ = ["check_documentation", "number_forms", "pdf_text", "pdf_pages"]

MAX_PAGES = 200
MAX_PDF_TEXT_CHARS = 8_000_000   # the text of README.pdf (a datasheet has about 50,000 characters)


def number_forms(x: float) -> set[str]:
    """The ways a number printed with ``format(x, '.6g')`` may appear in extracted text."""
    s = format(float(x), ".6g")
    forms = {s}
    if s.startswith("-"):
        forms |= {"\u2212" + s[1:], "\u2013" + s[1:]}
    if "e" in s:
        mant, exp = s.split("e")
        forms.add(f"{mant}e{int(exp)}")
        forms.add(f"{mant}\u00d710{int(exp)}")
    return forms


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def pdf_text(data: bytes, wanted: list[set[str]] | None = None) -> str:
    """Text of the PDF; with ``wanted`` (sets of accepted forms), stop at the first page after
    which every wanted number has been seen (the rest is not needed)."""
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise ValueError("the PDF is encrypted")
    pages = reader.pages
    if len(pages) > MAX_PAGES:
        raise ValueError(f"{len(pages)} pages, more than {MAX_PAGES}")
    parts: list[str] = []
    for page in pages:
        parts.append(page.extract_text() or "")
        if wanted:
            flat = _squash("\n".join(parts))
            if all(any(f in flat for f in forms) for forms in wanted):
                break
    return "\n".join(parts)


def _html_text(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text)
    text = re.sub(r"(?s)<[^>]*>", " ", text)
    return html_mod.unescape(text)


def _legacy_numbers(ctx: AuditContext, r: CheckResult) -> CheckResult:
    """Bundles before dpbundle 0.2: the datasheet shows the total epsilon and every DP value."""
    try:
        metrics = ctx.json("metrics.json")
        budget = ctx.json("budget.json")
    except Missing as e:
        r.fail(str(e))
        return r
    numbers: list[tuple[str, float]] = []
    total = budget.get("total_epsilon") if isinstance(budget, dict) else None
    if isinstance(total, (int, float)) and not isinstance(total, bool):
        numbers.append(("total epsilon", float(total)))
    else:
        r.fail("budget.json: no numeric total_epsilon to look for")
    rows = metrics.get("criteria") if isinstance(metrics, dict) else None
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict) and isinstance(row.get("dp_value"), (int, float)):
            numbers.append((f"DP value of {row.get('id')}", float(row["dp_value"])))
        else:
            r.fail(f"metrics.json: a criterion without a numeric dp_value ({row!r:.80})")
    docs = []
    if not ctx.bundle.has("README.pdf"):
        r.fail("README.pdf: missing from the bundle")
    else:
        try:
            wanted = [number_forms(x) for _, x in numbers]
            docs.append(("README.pdf", pdf_text(ctx.bundle.read_bytes("README.pdf"), wanted)))
        except BundleFileError as e:
            r.fail(f"README.pdf: {e}")
        except Exception as e:  # pypdf raises many types on malformed files
            r.fail(f"README.pdf: text cannot be extracted ({type(e).__name__}: {e})")
    if ctx.bundle.has("README.html"):
        try:
            docs.append(("README.html", _html_text(ctx.bundle.read_bytes("README.html"))))
        except BundleFileError as e:
            r.fail(f"README.html: {e}")
    if ctx.bundle.has("metrics.csv") and isinstance(rows, list):
        _metrics_csv(ctx, rows, r)
    for name, text in docs:
        flat = _squash(text)
        missing = [f"{what} {format(x, '.6g')}" for what, x in numbers
                   if not any(f in flat for f in number_forms(x))]
        for m in missing:
            r.fail(f"{name}: does not show the {m} of the metrics")
    if not r.failed:
        r.detail = (f"{', '.join(n for n, _ in docs)} show the total epsilon and the "
                    f"{len(numbers) - 1} DP values; metrics.csv agrees with metrics.json")
    return r


def pdf_pages(data: bytes, helper: PdfHelper | None = None) -> list[str]:
    """The extracted text of every page of a PDF (ValueError if encrypted or too long).

    ``helper``: a :class:`.pdf_helper.PdfHelper` started on the same bytes; a page it has
    already extracted is taken from it (the same text, and an error as the same error)."""
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise ValueError("the PDF is encrypted")
    if len(reader.pages) > MAX_PAGES:
        raise ValueError(f"{len(reader.pages)} pages, more than {MAX_PAGES}")
    with shared_fonts():
        return _page_texts(reader.pages, helper)


def _page_texts(pages, helper: PdfHelper | None) -> list[str]:
    """Each page's text, from the helper when it has the page, else extracted here."""
    if helper is not None:    # the helper extracts under this frame's headroom
        helper.go(sys.getrecursionlimit() - stack_depth())
    out, total = [], 0
    for i, page in enumerate(pages):   # pypdf caps each stream's decompression (75 MB in 7.x)
        text = _helper_text(helper.page(i)) if helper is not None else None
        if text is None:
            text = page.extract_text() or ""
        total += len(text)
        if total > MAX_PDF_TEXT_CHARS:
            raise ValueError(f"more than {MAX_PDF_TEXT_CHARS:,} characters of text (a datasheet has "
                             "well under a million)")
        out.append(text)
    return out


def _helper_text(done: tuple | None) -> str | None:
    """A page the helper extracted: its text, or its error raised again (the same type name
    and message), its pypdf log records emitted again first; None if it has not (yet)."""
    import logging

    if done is None:
        return None
    if done[0] == "error":
        try:
            error = type(done[1], (Exception,), {})(done[2])
        except (TypeError, ValueError):   # not a class name: the page is extracted here
            return None
    for name, level, message in done[-1]:
        logging.getLogger(name).log(level, message)
    if done[0] == "text":
        return done[1]
    raise error


def _made_before_02(ctx: AuditContext) -> bool:
    try:
        version = str(ctx.json("manifest.json").get("dpbundle_version", ""))
    except (Missing, AttributeError):
        return False
    m = re.match(r"(\d+)\.(\d+)", version)
    return bool(m) and (int(m.group(1)), int(m.group(2))) < (0, 2)


def check_documentation(ctx: AuditContext) -> CheckResult:
    r = CheckResult("documentation")
    if _legacy(ctx):
        r.warn("a bundle made before dpbundle 0.2: its datasheet was not rendered from its public "
               "files, so only its numbers are checked")
        return _legacy_numbers(ctx, r)
    try:
        _check_codebook(ctx, r)
        want = _rendered(ctx)
    except Missing as e:
        r.fail(str(e))
        return r
    _check_html(ctx, r, want)
    _check_pdf(ctx, r, want)
    rows = None
    try:
        rows = ctx.json("metrics.json").get("criteria")
    except (Missing, AttributeError):
        pass
    if ctx.bundle.has("metrics.csv") and isinstance(rows, list):
        _metrics_csv(ctx, rows, r)
    if not r.failed:
        r.detail = ("codebook.csv agrees with the spec; README.html is the datasheet rendered from the "
                    "public files, byte for byte; README.pdf shows the datasheet's text, in order and "
                    "visible, and nothing else; metrics.csv agrees with metrics.json")
    return r


def _check_codebook(ctx: AuditContext, r: CheckResult) -> None:
    """codebook.csv against the audit's own reading of the spec (labels, numbers, bounds, the
    kinds of special values)."""
    import math

    from dpbundle.templates.datasheet.codebook import CodebookError, read_codebook

    view = ctx.view()
    if not ctx.bundle.has("codebook.csv"):
        raise Missing("codebook.csv: missing from the bundle")
    try:
        cols, _units, _desc = read_codebook(ctx.bundle.read_bytes("codebook.csv"), view.names,
                                            {c.name: c.ordered for c in view.columns})
    except (CodebookError, BundleFileError) as e:
        raise Missing(str(e)) from None

    def same(a, b) -> bool:
        return len(a) == len(b) and all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b))

    for mine, theirs in zip(view.columns, cols):
        where = f"codebook.csv: column {mine.name!r}"
        if mine.labels != theirs.labels:
            r.fail(f"{where}: its values differ from the spec's")
        elif not same(list(map(float, mine.numbers)), list(theirs.values)):
            r.fail(f"{where}: the numbers the values stand for differ from the spec's")
        elif mine.lower is not None and not (same(list(mine.lower), list(theirs.lower))
                                             and same(list(mine.upper), list(theirs.upper))):
            r.fail(f"{where}: the bounds of its values differ from the spec's")
        elif (mine.special or None) != (getattr(theirs, "special", None) or None):
            r.fail(f"{where}: its special values (not applicable, unknown) differ from the spec's")


def _rendered(ctx: AuditContext) -> str:
    """The datasheet rendered from the bundle's public files."""
    from dpbundle.templates.datasheet import DatasheetInputError, datasheet_html, meta_from_manifest, read_public_files

    try:
        meta = meta_from_manifest(ctx.json("manifest.json"))
        try:
            codes = ctx.codes()
        except Missing:
            codes = None
        public = read_public_files(ctx.bundle.read_bytes, ctx.bundle.has, meta, codes=codes)
        return datasheet_html(public)
    except (DatasheetInputError, BundleFileError) as e:
        raise Missing(f"the datasheet cannot be rendered from the public files: {e}") from None


def _check_html(ctx: AuditContext, r: CheckResult, want: str) -> None:
    from dpbundle.templates.datasheet.words import first_difference

    if not ctx.bundle.has("README.html"):
        r.fail("README.html: missing from the bundle")
        return
    try:
        got = ctx.bundle.read_bytes("README.html")
    except BundleFileError as e:
        r.fail(f"README.html: {e}")
        return
    if got == want.encode("utf-8"):
        return
    text = got.decode("utf-8", errors="replace")
    diff = first_difference(text, want)
    if diff is None:
        r.fail("README.html differs from the datasheet rendered from the public files (in its markup, "
               "not in its visible text)")
    else:
        r.fail(f"README.html differs from the datasheet rendered from the public files; first "
               f"differing sentence: {_quote(diff[0])} (rendered: {_quote(diff[1])})")


def _quote(sentence: str, limit: int = 240) -> str:
    return "\u201c" + (sentence if len(sentence) <= limit else sentence[:limit] + "\u2026") + "\u201d"


def _legacy(ctx: AuditContext) -> bool:
    return not ctx.bundle.has("codebook.csv") and _made_before_02(ctx)


def _check_pdf(ctx: AuditContext, r: CheckResult, want: str) -> None:
    """README.pdf against the rendered datasheet (:mod:`.pdf_structure`): its text in order,
    visible, and nothing a viewer shows or runs beyond the datasheet; its metadata."""
    from dpbundle.templates.datasheet.edition import edition_of

    from .pdf_structure import check_pdf

    if not ctx.bundle.has("README.pdf"):
        r.fail("README.pdf: missing from the bundle")
        return
    try:
        data = ctx.bundle.read_bytes("README.pdf")
    except BundleFileError as e:
        r.fail(f"README.pdf: {e}")
        return
    try:
        version = str(ctx.json("manifest.json").get("dpbundle_version", ""))
    except (Missing, AttributeError):
        version = ""
    for problem in check_pdf(data, want, edition=edition_of(version)):
        r.fail(problem)


def _metrics_csv(ctx: AuditContext, rows: list, r: CheckResult) -> None:
    """metrics.csv: one row per criterion of metrics.json, numbers as format(x, ".6g")."""
    import csv

    try:
        text = ctx.bundle.read_bytes("metrics.csv").decode("utf-8")
        table = list(csv.DictReader(io.StringIO(text, newline="")))
    except (BundleFileError, UnicodeDecodeError, csv.Error) as e:
        r.fail(f"metrics.csv: unreadable ({e})")
        return
    by_id = {row.get("id"): row for row in rows if isinstance(row, dict)}
    ids = [t.get("id") for t in table]
    if ids != list(by_id):
        r.fail(f"metrics.csv: criteria {ids} differ from metrics.json's {list(by_id)}")
        return
    for t in table:
        j = by_id[t["id"]]
        for field in ("threshold", "dp_value", "epsilon", "sensitivity", "noise_scale", "noise_std"):
            if field not in t:
                continue
            v = j.get(field)
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if t[field] != format(float(v), ".6g"):
                r.fail(f"metrics.csv: {t['id']} {field} {t[field]!r} differs from metrics.json's "
                       f"{format(float(v), '.6g')}")
