"""Check 8, documentation: the datasheet (README.pdf, and README.html when present) prints the
total epsilon and every criterion's DP value as in metrics.json / budget.json (numbers are
printed with ``format(x, ".6g")``)."""
from __future__ import annotations

import html as html_mod
import io
import re

from .bundle_io import BundleFileError
from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_documentation", "number_forms", "pdf_text"]

MAX_PAGES = 200


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


def pdf_text(data: bytes) -> str:
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    reader = PdfReader(io.BytesIO(data), strict=False)
    if reader.is_encrypted:
        raise ValueError("the PDF is encrypted")
    pages = reader.pages
    if len(pages) > MAX_PAGES:
        raise ValueError(f"{len(pages)} pages, more than {MAX_PAGES}")
    return "\n".join((p.extract_text() or "") for p in pages)


def _html_text(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    text = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", text)
    text = re.sub(r"(?s)<[^>]*>", " ", text)
    return html_mod.unescape(text)


def check_documentation(ctx: AuditContext) -> CheckResult:
    r = CheckResult("documentation")
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
            docs.append(("README.pdf", pdf_text(ctx.bundle.read_bytes("README.pdf"))))
        except BundleFileError as e:
            r.fail(f"README.pdf: {e}")
        except Exception as e:  # pypdf raises many types on malformed files
            r.fail(f"README.pdf: text cannot be extracted ({type(e).__name__}: {e})")
    if ctx.bundle.has("README.html"):
        try:
            docs.append(("README.html", _html_text(ctx.bundle.read_bytes("README.html"))))
        except BundleFileError as e:
            r.fail(f"README.html: {e}")
    for name, text in docs:
        flat = _squash(text)
        missing = [f"{what} {format(x, '.6g')}" for what, x in numbers
                   if not any(f in flat for f in number_forms(x))]
        for m in missing:
            r.fail(f"{name}: does not show the {m} of the metrics")
    if not r.failed:
        r.detail = (f"{', '.join(n for n, _ in docs)} show the total epsilon and the "
                    f"{len(numbers) - 1} DP values")
    return r
