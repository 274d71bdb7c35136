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
