"""Small, safe pieces for the notebook views (``__repr__`` / ``_repr_html_``) of a released
bundle, an audit report and a sweep result.

Every text that reaches the HTML goes through :func:`esc` (bundle contents are untrusted:
titles, labels and messages may carry markup), every text of a ``repr`` through :func:`short`
(one line, clipped), so a hostile or very large bundle gives a short, inert view.
"""
from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

__all__ = ["MAX_REPR_TEXT", "STYLE", "bar_svg", "count", "esc", "number", "short", "table", "criteria_noise"]

MAX_REPR_TEXT = 80       # characters of one text (a title, a path) in a repr
MAX_CELL_TEXT = 4000     # characters of one cell of an HTML table (3 audit messages fit)

STYLE = ("border-collapse:collapse;font-size:90%;margin:0.3em 0")


def short(value: object, limit: int = MAX_REPR_TEXT) -> str:
    """``value`` as text on one line, at most ``limit`` characters (control characters shown
    as escapes, as ``repr`` does)."""
    text = str(value)[: limit + 1]
    text = "".join(ch if 32 <= ord(ch) != 127 else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def esc(value: object, limit: int = MAX_CELL_TEXT) -> str:
    """``value`` as HTML-escaped text (clipped to ``limit`` characters first)."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return html.escape(text, quote=True)


def number(value: object, digits: int = 3) -> str:
    """A number for people: ``0.123``, ``9.98``, ``1.2e-05``; other values as short text."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) < 10**18 else short(value, 24)
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return short(value, 24)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    return f"{f:.{digits}g}" if f != 0 and (abs(f) < 1e-3 or abs(f) >= 1e6) else f"{round(f, digits):g}"


def count(value: object) -> str:
    """A whole number with thousands separators, else short text."""
    try:
        return f"{int(value):,}" if not isinstance(value, bool) and abs(int(value)) < 10**18 \
            else short(value, 24)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return short(value, 24)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, raw: Sequence[int] = (),
          caption: str = "") -> str:
    """An HTML table; cells are escaped except the columns in ``raw`` (markup made here)."""
    cell = "padding:0.1em 0.6em;border-bottom:1px solid #ddd;text-align:left"
    head = "".join(f"<th style=\"{cell}\">{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td style=\"{cell}\">{v if i in raw else esc(v)}</td>"
                         for i, v in enumerate(r)) + "</tr>"
        for r in rows)
    cap = f"<caption style=\"text-align:left\">{esc(caption)}</caption>" if caption else ""
    return f"<table style=\"{STYLE}\">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def bar_svg(fraction: float | None, low: float | None = None, high: float | None = None,
            cut: float | None = None, width: int = 120, height: int = 12) -> str:
    """A tiny inline SVG bar: ``fraction`` of ``width`` filled, the interval ``low``..``high``
    as a line, ``cut`` as a red tick. Empty for no value."""
    if fraction is None:
        return ""

    def x(v: float) -> str:
        return f"{max(0.0, min(1.0, float(v))) * width:.1f}"

    parts = [f"<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#eee\"/>",
             f"<rect x=\"0\" y=\"2\" width=\"{x(fraction)}\" height=\"{height - 4}\" fill=\"#4c78a8\"/>"]
    if low is not None and high is not None:
        parts.append(f"<line x1=\"{x(low)}\" x2=\"{x(high)}\" y1=\"{height / 2}\" y2=\"{height / 2}\" "
                     "stroke=\"#222\" stroke-width=\"1\"/>")
    if cut is not None:
        parts.append(f"<line x1=\"{x(cut)}\" x2=\"{x(cut)}\" y1=\"0\" y2=\"{height}\" "
                     "stroke=\"#d62728\" stroke-width=\"1.5\"/>")
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" "
            f"role=\"img\">{''.join(parts)}</svg>")


def _finite(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def criteria_noise(rows: Iterable[dict]) -> list[dict]:
    """For a chart or a table of the acceptance criteria (rows of metrics.csv, or of metrics.json
    merged with metrics.csv's ``value_noise_std``): each criterion's DP value and the noise *on
    that value* as multiples of its threshold, and whether the evidence is weak by the datasheet's
    rule (the value's noise std at least half the threshold; for a ratio, half the threshold's
    distance above 1).

    The noise on the value is ``value_noise_std``: for the Laplace mechanism it is ``noise_std``;
    for a criterion whose noise is inside a fit (``noise_on`` "inside_fit") ``noise_std`` is the
    noise on the fit's loss coefficients (in the loss's scaled units, 161 for the births
    regression), not on the value (about 4.5 there), and a row without ``value_noise_std`` gets
    no noise (``noise`` None) rather than the wrong one."""
    out = []
    for r in rows:
        t = _finite(r.get("threshold"))
        v = _finite(r.get("dp_value"))
        vstd = _finite(r.get("value_noise_std"))
        if vstd is None and r.get("noise_on", "value") == "value" and str(r.get("mechanism", "laplace")) == "laplace":
            vstd = _finite(r.get("noise_std"))
        ok = t is not None and t > 0
        # the datasheet's weak rule measures a ratio's threshold from 1, its smallest value
        span = (t - 1.0) if ok and r.get("type") == "smoothed_ratio" else t
        out.append({"id": r.get("id"), "value": v / t if ok and v is not None else None,
                    "noise": vstd / t if ok and vstd is not None else None,
                    "weak": bool(ok and span and span > 0 and vstd is not None and vstd >= 0.5 * span),
                    "passed": r.get("passed") in (True, "true")})
    return out
