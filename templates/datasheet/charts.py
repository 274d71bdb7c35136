"""Inline SVG figures for the datasheet (no plotting library; renders offline in browsers and WeasyPrint).

- :func:`distribution_chart`: bar chart of one released column (count of records per label).
- :func:`criteria_chart`: every criterion's DP value divided by its threshold, with a noise bar
  (+-1.96 noise standard deviations, also divided by the threshold) and the pass line at 1.
"""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

__all__ = ["distribution_chart", "criteria_chart", "NOISE_Z"]

NOISE_Z = 1.96  # half-width of the noise bar in noise standard deviations

_FONT = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
_BAR = "#3b6ea5"
_PASS = "#2e7d32"
_FAIL = "#c62828"
_GRID = "#d9dde3"
_TEXT = "#222"


def _n(x: float) -> str:
    """Compact coordinate."""
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _nice_step(span: float, target: int = 5) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _tick_label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e6:
        return f"{v:.3g}"
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:.4g}"


def distribution_chart(labels: Sequence[str], counts: Sequence[int], *, title: str = "",
                       width: int = 640, height: int = 170) -> str:
    """An SVG bar chart: one bar per label, in label order, with a count axis."""
    labels = [str(x) for x in labels]
    counts = [int(c) for c in counts]
    if len(labels) != len(counts):
        raise ValueError("labels and counts differ in length")
    k = max(len(labels), 1)
    total = sum(counts)
    longest = max((len(x) for x in labels), default=1)
    rotate = k > 14 or longest * k > 90
    left, right, top = 52, 10, 26 if title else 10
    bottom = (14 + 5.5 * min(longest, 12)) if rotate else 22
    pw, ph = width - left - right, height - top - bottom
    ymax = max(counts + [1])
    step = _nice_step(ymax)
    ytop = step * math.ceil(ymax / step)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title or "distribution")}" '
        f'font-family="{_FONT}" font-size="9">'
    ]
    if title:
        out.append(f'<text x="{left}" y="14" font-size="11" font-weight="bold" fill="{_TEXT}">{escape(title)}</text>')
    # grid and y ticks
    v = 0.0
    while v <= ytop + 1e-9:
        y = top + ph - ph * v / ytop
        out.append(f'<line x1="{left}" y1="{_n(y)}" x2="{left + pw}" y2="{_n(y)}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{left - 4}" y="{_n(y + 3)}" text-anchor="end" fill="{_TEXT}">{_tick_label(v)}</text>')
        v += step
    slot = pw / k
    bw = max(slot * 0.78, 0.5)
    for i, (lab, c) in enumerate(zip(labels, counts)):
        x = left + i * slot + (slot - bw) / 2
        h = ph * c / ytop
        share = f"{100 * c / total:.1f}%" if total else "0%"
        out.append(
            f'<rect x="{_n(x)}" y="{_n(top + ph - h)}" width="{_n(bw)}" height="{_n(h)}" fill="{_BAR}">'
            f'<title>{escape(lab)}: {c:,} ({share})</title></rect>'
        )
        cx = left + i * slot + slot / 2
        if rotate:
            out.append(
                f'<text x="{_n(cx)}" y="{_n(top + ph + 8)}" text-anchor="end" fill="{_TEXT}" font-size="8" '
                f'transform="rotate(-55 {_n(cx)} {_n(top + ph + 8)})">{escape(lab)}</text>'
            )
        else:
            out.append(f'<text x="{_n(cx)}" y="{_n(top + ph + 13)}" text-anchor="middle" fill="{_TEXT}">{escape(lab)}</text>')
    out.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#555" stroke-width="0.8"/>')
    out.append("</svg>")
    return "".join(out)


def criteria_chart(criteria: Sequence[dict], *, width: int = 640, z: float = NOISE_Z) -> str:
    """An SVG dot plot: for each criterion, dp_value / threshold with a +-z*noise_std/threshold bar.

    ``criteria`` are metrics.json rows (id, dp_value, threshold, noise_std, passed, mechanism), with
    optionally ``value_noise_std``: the noise of the reported value (None: unknown, no bar). A
    criterion passes when its point is left of the line at 1 (the threshold). Without
    ``value_noise_std``, criteria whose noise is inside a fit (mechanism other than "laplace") get no bar.
    """
    rows = []
    for c in criteria:
        t = float(c["threshold"])
        if t > 0 and math.isfinite(t):
            v = float(c["dp_value"]) / t
            # Only an additive mechanism puts its noise on the released value itself; for a fit
            # with noise inside (functional mechanism) the bar uses the estimated noise of the
            # value (``value_noise_std``, see value_noise.py) when there is one, else no bar.
            if "value_noise_std" in c:
                vstd = c["value_noise_std"]
                e = z * float(vstd) / t if vstd is not None else 0.0
            else:
                additive = str(c.get("mechanism", "laplace")) == "laplace"
                e = z * float(c["noise_std"]) / t if additive else 0.0
        else:  # cannot normalise; plot nothing but keep the row
            v = e = float("nan")
        rows.append((str(c["id"]), v, e, bool(c["passed"])))
    finite = [r for r in rows if math.isfinite(r[1])]
    lo = min([0.0] + [v - e for _, v, e, _ in finite])
    hi = max([1.25] + [v + e for _, v, e, _ in finite])
    lo, hi = max(lo, -2.0), min(hi, 4.0)
    step = _nice_step(hi - lo, 6)
    lo = step * math.floor(lo / step)
    hi = step * math.ceil(hi / step)
    row_h, top, bottom, left, right = 20, 12, 34, 110, 16
    height = top + row_h * len(rows) + bottom
    pw = width - left - right

    def X(val: float) -> float:
        return left + pw * (min(max(val, lo), hi) - lo) / (hi - lo)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="DP value of each criterion relative to its threshold" '
        f'font-family="{_FONT}" font-size="9">'
    ]
    ybase = top + row_h * len(rows)
    out.append(f'<rect x="{_n(X(1.0))}" y="{top}" width="{_n(X(hi) - X(1.0))}" height="{row_h * len(rows)}" fill="#fbeaea"/>')
    v = lo
    while v <= hi + 1e-9:
        x = X(v)
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{ybase}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{_n(x)}" y="{ybase + 12}" text-anchor="middle" fill="{_TEXT}">{_tick_label(round(v, 10))}</text>')
        v += step
    out.append(f'<line x1="{_n(X(1.0))}" y1="{top - 4}" x2="{_n(X(1.0))}" y2="{ybase}" stroke="{_FAIL}" stroke-width="1.2" stroke-dasharray="4 2"/>')
    out.append(
        f'<text x="{_n(left + pw / 2)}" y="{ybase + 27}" text-anchor="middle" fill="{_TEXT}">'
        f'DP value / threshold (pass: left of 1); bars: \u00b1{z:g} noise standard deviations</text>'
    )
    for i, (cid, val, err, passed) in enumerate(rows):
        y = top + row_h * i + row_h / 2
        out.append(f'<text x="{left - 8}" y="{_n(y + 3)}" text-anchor="end" fill="{_TEXT}">{escape(cid)}</text>')
        if not math.isfinite(val):
            out.append(f'<text x="{left + 4}" y="{_n(y + 3)}" fill="#777">(threshold not positive: not shown)</text>')
            continue
        colour = _PASS if passed else _FAIL
        x0, x1 = X(val - err), X(val + err)
        out.append(f'<line x1="{_n(x0)}" y1="{_n(y)}" x2="{_n(x1)}" y2="{_n(y)}" stroke="{colour}" stroke-width="1.4"/>')
        for xe, clipped, sign in ((x0, val - err < lo, -1), (x1, val + err > hi, 1)):
            if clipped:  # the bar runs off the axis: an arrow head instead of a cap
                out.append(f'<path d="M{_n(xe)} {_n(y)} l{_n(-6 * sign)} -3.5 v7 z" fill="{colour}"/>')
            else:
                out.append(f'<line x1="{_n(xe)}" y1="{_n(y - 4)}" x2="{_n(xe)}" y2="{_n(y + 4)}" stroke="{colour}" stroke-width="1.2"/>')
        out.append(f'<circle cx="{_n(X(val))}" cy="{_n(y)}" r="3.6" fill="{colour}"><title>{escape(cid)}: {val:.4g} of threshold</title></circle>')
    out.append("</svg>")
    return "".join(out)
