"""Inline SVG figures for the datasheet (no plotting library; renders offline in browsers and WeasyPrint).

- :func:`distribution_chart`: bar chart of one released column (count of records per label).
- :func:`criteria_chart`: every criterion's DP value divided by its threshold, with a noise bar
  (+-1.96 noise standard deviations, also divided by the threshold) and the pass line at 1.
- :func:`glance_chart`: quality at a glance (the cover): each criterion's DP value and the true
  error its check rules out (evidence.py), as multiples of the threshold.
- :func:`budget_chart`: the privacy budget as one stacked bar, one segment per step.
- :func:`epsilon_chart`: this release's epsilon beside published releases, on a log scale.

Deterministic (no randomness, fixed number formats). Every word a chart shows is a ``<text>``
element, drawn as text in README.pdf (the audit compares README.pdf's words with the HTML's);
``<title>`` tooltips are not drawn and not compared.

Editions (:mod:`.edition`): with ``edition=1`` (the default) each chart is drawn exactly as
dpbundle 0.2.0 drew it. Edition 2 gives every figure a text alternative made from its data, as a
``<title>`` that is the ``<svg>``'s first child (WeasyPrint takes a tagged PDF figure's /Alt from
it; browsers and screen readers read it too), plots the criteria chart on the glance chart's scale
(measured from the metric's smallest value, so the same criterion sits at the same place in both),
lays out long value labels horizontally instead of cutting them, and shades the epsilon chart by
how far a 1% suspicion can grow (:func:`~.statements.suspicion_bands`).
"""
from __future__ import annotations

import math
from html import escape
from typing import Sequence

__all__ = ["distribution_chart", "criteria_chart", "glance_chart", "budget_chart", "epsilon_chart", "NOISE_Z"]

NOISE_Z = 1.96  # half-width of the noise bar in noise standard deviations

_FONT = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
_BAR = "#3b6ea5"
_PASS = "#2e7d32"
_FAIL = "#c62828"
_GRID = "#d9dde3"
_TEXT = "#222"
_BAND = "#e8a33d"
_PALETTE = ("#3b6ea5", "#7fa7d1", "#e8a33d", "#8c6bb1", "#5aa469", "#c9c9c9")


def _svg_open(cls: str, width: float, height: float, label: str, font_size: str, alt: str | None) -> str:
    """The ``<svg>`` start tag (``label``: the aria-label, already escaped) and, when ``alt`` is
    given (edition 2), its ``<title>`` text alternative as first child."""
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="{cls}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}" '
            f'font-family="{_FONT}" font-size="{font_size}">')
    return head + (f"<title>{escape(alt)}</title>" if alt else "")


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


def _label_width(text: str, size: float = 9.0) -> float:
    """How wide ``text`` is at font size ``size`` in the widest of the charts' fonts (DejaVu Sans:
    digits 0.636 em, separators 0.318 em; Liberation Sans and Arial are narrower): enough to keep
    an axis label inside its chart."""
    return sum((0.318 if ch in ",. " else 0.636) * size for ch in text)


def _tick_label(v: float) -> str:
    """An axis label for people: decimals with thousands separators, never 1e+06."""
    from .numbers import plain

    if v == 0:
        return "0"
    return plain(v, sig=4)


def _ratio_band(s: int, threshold: float, k: float) -> tuple[float, float]:
    """The real counts r with max((r+k)/(s+k), (s+k)/(r+k)) < threshold, for a synthetic count s."""
    lo = max((s + k) / threshold - k, 0.0)
    hi = threshold * (s + k) - k
    return lo, hi


def distribution_alt(title: str, labels: Sequence[str], counts: Sequence[int]) -> str:
    """A distribution chart's text alternative: every value's count and share (the largest and
    smallest five of a long list)."""
    total = sum(counts)

    def item(i: int) -> str:
        share = f"{100 * counts[i] / total:.1f}%" if total else "0%"
        return f"{labels[i]}: {counts[i]:,} ({share})"

    head = f"{title or 'Records per value'}. Bar chart of {len(labels)} values, {total:,} records"
    if len(labels) <= 16:
        return f"{head}: " + "; ".join(item(i) for i in range(len(labels))) + "."
    order = sorted(range(len(labels)), key=lambda i: (-counts[i], i))
    return (f"{head}. Most records: " + "; ".join(item(i) for i in order[:5]) + ". Fewest: "
            + "; ".join(item(i) for i in order[-5:]) + ".")


def _ratio_bands(counts: Sequence[int], ratio_band: dict | None) -> list[tuple[float, float]] | None:
    t = float((ratio_band or {}).get("threshold", 0) or 0)
    smooth = float((ratio_band or {}).get("smoothing", 1) or 1)
    if 1 < t < 1e6 and 0 < smooth < 1e12:  # a threshold a spec can hold (a hostile bundle's is not drawn)
        return [_ratio_band(c, t, smooth) for c in counts]
    return None


def _horizontal_distribution(labels: list[str], counts: list[int], title: str, width: int,
                             ratio_band: dict | None) -> str:
    """Edition 2's distribution chart for long value labels: one row per value, the whole label
    at its left (wrapped at 38 characters), bars to the right."""
    band = _ratio_bands(counts, ratio_band)
    total = sum(counts)
    lines = [_wrap(lab, 38) for lab in labels]
    longest = max((len(x) for ls in lines for x in ls), default=1)
    left = min(12 + 4.6 * longest, 0.45 * width)
    right, top, bottom = 60, 26 if title else 10, 22
    row_h = [max(13, 10 * len(ls) + 3) for ls in lines]
    ph = sum(row_h)
    height = top + ph + bottom
    pw = width - left - right
    xmax = max(counts + [1] + ([hi for _, hi in band] if band else []))
    step = _nice_step(xmax)
    xtop = step * math.ceil(xmax / step)
    out = [_svg_open("chart", width, height, escape(title or "distribution"), "9",
                     distribution_alt(title, labels, counts))]
    if title:
        out.append(f'<text x="10" y="14" font-size="11" font-weight="bold" fill="{_TEXT}">{escape(title)}</text>')
    if band:
        out.append(f'<rect x="{width - 160}" y="6" width="10" height="7" fill="{_BAND}" fill-opacity="0.45"/>')
        out.append(f'<text x="{width - 146}" y="13" fill="{_TEXT}" font-size="8">ratio band (see the text above)</text>')
    v = 0.0
    while v <= xtop + 1e-9:
        x = left + pw * v / xtop
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{top + ph}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{_n(x)}" y="{top + ph + 12}" text-anchor="middle" fill="{_TEXT}">{_tick_label(v)}</text>')
        v += step
    y = top
    for i, (ls, c) in enumerate(zip(lines, counts)):
        h = row_h[i]
        w = pw * c / xtop
        out.append(f'<rect x="{_n(left)}" y="{_n(y + 2)}" width="{_n(w)}" height="{_n(h - 4)}" fill="{_BAR}"/>')
        if band:
            lo, hi = band[i]
            out.append(f'<rect x="{_n(left + pw * lo / xtop)}" y="{_n(y + h / 2 - 2)}" '
                       f'width="{_n(max(pw * (hi - lo) / xtop, 0.4))}" height="4" fill="{_BAND}" fill-opacity="0.45" '
                       f'stroke="{_BAND}" stroke-width="0.6"/>')
        share = f"{100 * c / total:.1f}%" if total else "0%"
        out.append(f'<text x="{_n(left + w + 4)}" y="{_n(y + h / 2 + 3)}" fill="{_TEXT}" font-size="8">{share}</text>')
        for j, part in enumerate(ls):
            ty = y + h / 2 + 3 - 5 * (len(ls) - 1) + 10 * j
            out.append(f'<text x="{_n(left - 4)}" y="{_n(ty)}" text-anchor="end" fill="{_TEXT}" font-size="8">'
                       f'{escape(part)}</text>')
        y += h
    out.append(f'<line x1="{_n(left)}" y1="{top}" x2="{_n(left)}" y2="{top + ph}" stroke="#555" stroke-width="0.8"/>')
    out.append("</svg>")
    return "".join(out)


def _wrap(text: str, limit: int) -> list[str]:
    """``text`` in lines of at most ``limit`` characters, broken at spaces (a longer word alone)."""
    lines: list[str] = []
    for word in text.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= limit:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def distribution_chart(labels: Sequence[str], counts: Sequence[int], *, title: str = "",
                       width: int = 640, height: int = 170, ratio_band: dict | None = None,
                       edition: int = 1) -> str:
    """An SVG bar chart: one bar per label, in label order, with a count axis. ``ratio_band``
    ({"threshold", "smoothing"}): around each bar, the band of real counts within which the
    smoothed-ratio criterion's ratio (r+k)/(s+k) stays below its threshold (public: the
    released counts and the spec's threshold). Edition 2: a text alternative, and labels longer
    than 12 characters that would be slanted are laid out in rows instead (never cut)."""
    labels = [str(x) for x in labels]
    counts = [int(c) for c in counts]
    if len(labels) != len(counts):
        raise ValueError("labels and counts differ in length")
    if edition >= 2:
        longest = max((len(x) for x in labels), default=1)
        if longest > 12 and (len(labels) > 14 or longest * len(labels) > 90):
            return _horizontal_distribution(labels, counts, title, width, ratio_band)
    band = None
    t = float((ratio_band or {}).get("threshold", 0) or 0)
    smooth = float((ratio_band or {}).get("smoothing", 1) or 1)
    if 1 < t < 1e6 and 0 < smooth < 1e12:  # a threshold a spec can hold (a hostile bundle's is not drawn)
        band = [_ratio_band(c, t, smooth) for c in counts]
    k = max(len(labels), 1)
    total = sum(counts)
    longest = max((len(x) for x in labels), default=1)
    rotate = k > 14 or longest * k > 90
    ymax = max(counts + [1] + ([hi for _, hi in band] if band else []))
    step = _nice_step(ymax)
    ytop = step * math.ceil(ymax / step)
    # the count axis' labels right-aligned 4 units left of the axis: 52 units for labels of up to
    # 10 characters ("50,000,000", as every datasheet before); longer ones (hundreds of millions of
    # records) widen the margin to their width instead of having their first digits cut away
    label = _tick_label(ytop)
    left = 52 if len(label) <= 10 else max(52, math.ceil(_label_width(label) + 6))
    right, top = 10, 26 if title else 10
    bottom = (14 + 5.5 * min(longest, 12)) if rotate else 22
    pw, ph = width - left - right, height - top - bottom
    out = [_svg_open("chart", width, height, escape(title or "distribution"), "9",
                     distribution_alt(title, labels, counts) if edition >= 2 else None)]
    if title:
        out.append(f'<text x="{left}" y="14" font-size="11" font-weight="bold" fill="{_TEXT}">{escape(title)}</text>')
    if band:
        out.append(f'<rect x="{width - right - 150}" y="6" width="10" height="7" fill="{_BAND}" fill-opacity="0.45"/>')
        out.append(f'<text x="{width - right - 136}" y="13" fill="{_TEXT}" font-size="8">ratio band (see the text above)</text>')
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
        if band:
            lo, hi = band[i]
            y0, y1 = top + ph - ph * lo / ytop, top + ph - ph * hi / ytop
            bx, bwid = x + bw * 0.3, bw * 0.4
            out.append(f'<rect x="{_n(bx)}" y="{_n(y1)}" width="{_n(bwid)}" height="{_n(max(y0 - y1, 0.4))}" '
                       f'fill="{_BAND}" fill-opacity="0.45" stroke="{_BAND}" stroke-width="0.6">'
                       f'<title>{escape(lab)}: real counts {lo:,.0f} to {hi:,.0f}</title></rect>')
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


def criteria_chart(criteria: Sequence[dict], *, width: int = 640, z: float = NOISE_Z, edition: int = 1) -> str:
    """An SVG dot plot: for each criterion, dp_value / threshold with a +-z*noise_std/threshold bar.

    ``criteria`` are metrics.json rows (id, dp_value, threshold, noise_std, passed, mechanism), with
    optionally ``value_noise_std``: the noise of the reported value (None: unknown, no bar). A
    criterion passes when its point is left of the line at 1 (the threshold). Without
    ``value_noise_std``, criteria whose noise is inside a fit (mechanism other than "laplace") get no bar.
    Edition 2: values are measured from the metric's smallest value (a row's ``floor``: 0, or 1 for
    a ratio), (dp_value - floor) / (threshold - floor), as on the glance chart, and the axis says so.
    """
    rows = []
    for c in criteria:
        floor = float(c.get("floor", 0.0)) if edition >= 2 else 0.0
        t = float(c["threshold"]) - floor
        if t > 0 and math.isfinite(t):
            v = (float(c["dp_value"]) - floor) / t
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

    alt = None
    if edition >= 2:
        alt = ("Each acceptance criterion’s DP value as a multiple of its threshold, measured from the "
               "metric’s smallest possible value (1 for a ratio, else 0); below 1 passes: "
               + "; ".join(f"{cid} {_plain(val, 2)}" + (f" ± {_plain(err, 2)}" if err else "")
                           + (" (pass)" if passed else " (fail)") if math.isfinite(val) else f"{cid} not shown"
                           for cid, val, err, passed in rows) + ".")
    out = [_svg_open("chart", width, height, "DP value of each criterion relative to its threshold", "9", alt)]
    ybase = top + row_h * len(rows)
    out.append(f'<rect x="{_n(X(1.0))}" y="{top}" width="{_n(X(hi) - X(1.0))}" height="{row_h * len(rows)}" fill="#fbeaea"/>')
    v = lo
    while v <= hi + 1e-9:
        x = X(v)
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{ybase}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{_n(x)}" y="{ybase + 12}" text-anchor="middle" fill="{_TEXT}">{_tick_label(round(v, 10))}</text>')
        v += step
    out.append(f'<line x1="{_n(X(1.0))}" y1="{top - 4}" x2="{_n(X(1.0))}" y2="{ybase}" stroke="{_FAIL}" stroke-width="1.2" stroke-dasharray="4 2"/>')
    if edition >= 2:
        height_note = ("DP value in multiples of the threshold, from the smallest possible value "
                       f"(pass: left of 1); bars: \u00b1{z:g} noise std")
    else:
        height_note = f"DP value / threshold (pass: left of 1); bars: \u00b1{z:g} noise standard deviations"
    out.append(
        f'<text x="{_n(left + pw / 2)}" y="{ybase + 27}" text-anchor="middle" fill="{_TEXT}">'
        f'{height_note}</text>'
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


def _plain(x: float, sig: int = 3) -> str:
    from .numbers import plain

    return plain(x, sig=sig)


def glance_chart(rows: Sequence[dict], *, width: int = 640, xmax_cap: float = 5.0, edition: int = 1) -> str:
    """Quality at a glance: per criterion (``id, passed, dp_value, threshold, floor, ruled_out,
    weak``), on an axis in multiples of the threshold measured from the metric's smallest value
    (``floor``: 0, or 1 for a ratio): the DP value (a dot) and a bar from 0 to the smallest
    true error the check would have caught with probability >= 95% (``ruled_out``; no bar when
    it is not known). A bar that ends near 1 is strong evidence; one far right of 1, weak."""
    items = []
    for r in rows:
        t, f = float(r["threshold"]), float(r.get("floor", 0.0))
        span = t - f
        if not (span > 0 and math.isfinite(span)):
            items.append((str(r["id"]), math.nan, None, bool(r["passed"]), False))
            continue
        v = (float(r["dp_value"]) - f) / span
        e = None if r.get("ruled_out") is None else (float(r["ruled_out"]) - f) / span
        items.append((str(r["id"]), v, e, bool(r["passed"]), bool(r.get("weak"))))
    finite = [x for _, v, e, _, _ in items for x in (v, e) if x is not None and math.isfinite(x)]
    hi = min(max([2.0] + finite), xmax_cap)
    hi = math.ceil(hi)
    lo = min([0.0] + [v for _, v, _, _, _ in items if math.isfinite(v)])
    lo = max(math.floor(2 * lo) / 2, -1.0)  # a DP value below the smallest value: half a step of room
    # edition 2: tighter rows, so that the cover (banner, facts, this chart, contents) keeps to one page
    row_h, top, bottom, left, right = (15, 8, 26, 110, 130) if edition == 1 else (12, 6, 24, 110, 130)
    height = top + row_h * len(items) + bottom
    pw = width - left - right

    def X(val: float) -> float:
        return left + pw * (min(max(val, lo), hi) - lo) / (hi - lo)

    alt = None
    if edition >= 2:
        alt = ("Quality at a glance: each acceptance criterion’s DP value and the smallest true error its "
               "check would have caught with probability at least 95%, both as multiples of the threshold "
               "measured from the metric’s smallest possible value: "
               + "; ".join((f"{cid}: value {_plain(v, 2)}" + (f", catches errors from {_plain(e, 2)}" if e is not None
                                                              and math.isfinite(e) else ", strength not stated")
                            + (", pass" if passed else ", fail") + (", weak evidence" if weak else ""))
                           if math.isfinite(v) else f"{cid}: not shown" for cid, v, e, passed, weak in items) + ".")
    out = [_svg_open("chart glance", width, height, "Quality at a glance: each criterion&#8217;s DP value and the "
                     "error its check rules out, in multiples of the threshold", "8.5", alt)]
    ybase = top + row_h * len(items)
    for tick in range(math.ceil(lo), int(hi) + 1):
        x = X(tick)
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{ybase}" stroke="{_GRID}" stroke-width="0.6"/>')
        label = "threshold" if tick == 1 else f"{tick}\u00d7" if tick > 1 else str(tick)
        out.append(f'<text x="{_n(x)}" y="{ybase + 11}" text-anchor="middle" fill="{_TEXT}">{label}</text>')
    out.append(f'<line x1="{_n(X(1.0))}" y1="{top - 3}" x2="{_n(X(1.0))}" y2="{ybase}" stroke="{_FAIL}" '
               f'stroke-width="1.1" stroke-dasharray="4 2"/>')
    note = "dot: DP value; bar: errors up to this size could have passed (95%)"
    if edition >= 2:
        note = ("multiples of the threshold, from the smallest possible value; dot: DP value; "
                "bar: errors up to this size could have passed (95%)")
    out.append(f'<text x="{_n(left + pw / 2)}" y="{ybase + 23}" text-anchor="middle" fill="{_TEXT}">'
               f'{note}</text>')
    for i, (cid, v, e, passed, weak) in enumerate(items):
        y = top + row_h * i + row_h / 2
        out.append(f'<text x="{left - 6}" y="{_n(y + 3)}" text-anchor="end" fill="{_TEXT}">{escape(cid)}</text>')
        if not math.isfinite(v):
            out.append(f'<text x="{left + 4}" y="{_n(y + 3)}" fill="#777">not shown</text>')
            continue
        colour = _PASS if passed else _FAIL
        if e is not None and math.isfinite(e):
            bar = "#e9b8b4" if weak else "#cfe3cf"
            out.append(f'<rect x="{_n(X(max(lo, 0.0)))}" y="{_n(y - 3.5)}" width="{_n(max(X(e) - X(max(lo, 0.0)), 0.5))}" '
                       f'height="7" fill="{bar}"/>')
            if e > hi:
                out.append(f'<path d="M{_n(X(hi))} {_n(y)} l-6 -3.5 v7 z" fill="{bar}"/>')
        out.append(f'<circle cx="{_n(X(v))}" cy="{_n(y)}" r="3.2" fill="{colour}"/>')
        verdict = ("pass" if passed else "fail") + ("; weak evidence" if weak else "" if e is not None
                                                    else "; strength not stated")
        out.append(f'<text x="{left + pw + 6}" y="{_n(y + 3)}" fill="{colour if not weak else _FAIL}">{verdict}</text>')
    out.append("</svg>")
    return "".join(out)


def budget_chart(segments: Sequence[dict], *, total: float, cap: float | None, weak: float | None = None,
                 width: int = 640, edition: int = 1, unit: str = "\u03b5") -> str:
    """The privacy budget as one stacked horizontal bar (``segments``: {label, value}, in the
    order they add up), on an epsilon axis that shows the cap; a legend row per segment.
    ``unit``: the axis's unit (\u03c1 for a zCDP release, whose cap, on epsilon, is not drawn:
    ``cap=None``)."""
    segs = [(str(s["label"]), float(s["value"])) for s in segments if float(s["value"]) > 0]
    top, bar_h, left, right = 8, 22, 12, 12
    legend_h = 13 * len(segs)
    height = top + bar_h + 30 + legend_h + 6
    pw = width - left - right
    xmax = max(float(total), float(cap if cap is not None else 0)) * 1.04 or 1.0

    def X(val: float) -> float:
        return left + pw * val / xmax

    alt = None
    if edition >= 2:
        against = f", against the cap of {_plain(cap)}" if cap is not None else ""
        alt = (f"How the total {unit} of {_plain(total)} is made up{against}: "
               + "; ".join(f"{label}: {unit} = {_plain(val)} ({100 * val / total if total > 0 else 0:.0f}%)"
                           for label, val in segs) + ".")
    title = "How the total epsilon is made up, step by step" if unit == "\u03b5" else \
        "How the total rho is made up, step by step"
    out = [_svg_open("chart budget", width, height, title, "8.5", alt)]
    step = _nice_step(xmax, 8)
    v = 0.0
    while v <= xmax + 1e-9:
        x = X(v)
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{top + bar_h + 4}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{_n(x)}" y="{top + bar_h + 14}" text-anchor="middle" fill="{_TEXT}">{_tick_label(round(v, 10))}</text>')
        v += step
    acc = 0.0
    for i, (label, val) in enumerate(segs):
        colour = _PALETTE[i % len(_PALETTE)]
        out.append(f'<rect x="{_n(X(acc))}" y="{top}" width="{_n(max(X(acc + val) - X(acc), 0.4))}" height="{bar_h}" '
                   f'fill="{colour}" stroke="#fff" stroke-width="0.6"><title>{escape(label)}</title></rect>')
        acc += val
    if cap is not None:
        xc = X(float(cap))
        out.append(f'<line x1="{_n(xc)}" y1="{top - 4}" x2="{_n(xc)}" y2="{top + bar_h + 4}" stroke="{_FAIL}" '
                   f'stroke-width="1.2" stroke-dasharray="4 2"/>')
        out.append(f'<text x="{_n(xc - 3)}" y="{top + bar_h + 24}" text-anchor="end" fill="{_FAIL}">'
                   f'cap {_plain(cap)}</text>')
    out.append(f'<text x="{left}" y="{top + bar_h + 24}" fill="{_TEXT}">total {unit} = {_plain(total)}</text>')
    y = top + bar_h + 38
    for i, (label, val) in enumerate(segs):
        colour = _PALETTE[i % len(_PALETTE)]
        share = 100 * val / total if total > 0 else 0.0
        out.append(f'<rect x="{left}" y="{_n(y - 7)}" width="9" height="8" fill="{colour}"/>')
        out.append(f'<text x="{left + 14}" y="{_n(y)}" fill="{_TEXT}">{escape(label)}: {unit} = {_plain(val)} '
                   f'({share:.0f}%)</text>')
        y += 13
    out.append("</svg>")
    return "".join(out)


_SHADES = ("#ffffff", "#fdf3e7", "#fbe3cc", "#f6c9a9", "#ef9f8c", "#e07a73")


def _suspicion_shading(bands, lo, hi, X, top, ybase, prior_pct) -> list[str]:
    """Edition 2's shading of the epsilon chart: one rectangle per band within the axis, its
    label above it ("up to 10%"), and the legend's words at the left."""
    out = []
    for i, (a, b, label) in enumerate(bands):
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            continue
        x0, x1 = X(a), X(b)
        out.append(f'<rect x="{_n(x0)}" y="{top}" width="{_n(x1 - x0)}" height="{_n(ybase - top)}" '
                   f'fill="{_SHADES[min(i, len(_SHADES) - 1)]}"/>')
        if x1 - x0 >= 34:
            out.append(f'<text x="{_n((x0 + x1) / 2)}" y="{top - 3}" text-anchor="middle" font-size="7.5" '
                       f'fill="{_TEXT}">{escape(label)}</text>')
    out.append(f'<text x="{_n(X(lo))}" y="{top - 13}" font-size="7.5" fill="{_TEXT}">shading: how far a '
               f'{escape(prior_pct)}% suspicion about one record can grow at each \u03b5</text>')
    return out


def _suspicion_legend(bands, x: float, y: float) -> list[str]:
    """Edition 2: every band's shade and words in one row below the axis (a narrow band has no
    room for its words above it, so each is named here)."""
    out = []
    for i, (_a, _b, label) in enumerate(bands):
        out.append(f'<rect x="{_n(x)}" y="{_n(y - 8)}" width="10" height="9" fill="{_SHADES[min(i, len(_SHADES) - 1)]}" '
                   f'stroke="#999" stroke-width="0.5"/>')
        out.append(f'<text x="{_n(x + 13)}" y="{_n(y)}" font-size="7.5" fill="{_TEXT}">{escape(label)}</text>')
        x += 13 + 4.3 * len(label) + 12
    return out


def epsilon_chart(rows: Sequence[tuple[str, float, bool]], *, weak: float | None = None,
                  width: int = 640, bands: Sequence[tuple[float, float, str]] | None = None,
                  prior_pct: str = "1") -> str:
    """Epsilons on a log scale: one row per release (``(name, epsilon, this)``), this release
    highlighted; the region above ``weak`` shaded (edition 1). Edition 2 gives ``bands``
    (:func:`~.statements.suspicion_bands`: epsilon from, to, label): each range of epsilon shaded
    by how far a ``prior_pct``% suspicion can grow there, darker as it grows, with a text
    alternative."""
    vals = [float(e) for _, e, _ in rows if float(e) > 0 and math.isfinite(float(e))]
    lo = 10.0 ** min([-1] + [math.floor(math.log10(v)) for v in vals])
    hi = 10.0 ** max([2] + [math.ceil(math.log10(v)) for v in vals])
    row_h, top, bottom, left, right = 18, 10, 30, 150, 20
    height = top + row_h * len(rows) + bottom
    pw = width - left - right

    def X(val: float) -> float:
        return left + pw * (math.log10(val) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    if bands is not None:
        height += 28
        top += 14
    alt = None
    if bands is not None:
        def band_of(eps: float) -> str:
            return next((label for a, b, label in bands if a <= eps < b), bands[-1][2])

        alt = (f"\u03b5 on a logarithmic scale, shaded by how far a {prior_pct}% suspicion about one record can "
               "grow: " + "; ".join(f"{name}: \u03b5 = {_plain(float(eps), 6)}, a {prior_pct}% suspicion can become "
                                    f"{band_of(float(eps))}" for name, eps, _ in rows) + ".")
    out = [_svg_open("chart epsilon", width, height, "This release&#8217;s epsilon and published releases&#8217; "
                     "epsilons on a logarithmic scale", "8.5", alt)]
    ybase = top + row_h * len(rows)
    if bands is not None:
        out.extend(_suspicion_shading(bands, lo, hi, X, top, ybase, prior_pct))
    elif weak is not None and lo < weak < hi:
        out.append(f'<rect x="{_n(X(weak))}" y="{top}" width="{_n(X(hi) - X(weak))}" height="{row_h * len(rows)}" '
                   f'fill="#fbeaea"/>')
        out.append(f'<text x="{_n(X(hi) - 3)}" y="{top + 9}" text-anchor="end" fill="{_FAIL}">'
                   f'weak protection above {_plain(weak)}</text>')
    e = math.log10(lo)
    while e <= math.log10(hi) + 1e-9:
        v = 10.0 ** e
        x = X(v)
        out.append(f'<line x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{ybase}" stroke="{_GRID}" stroke-width="0.6"/>')
        out.append(f'<text x="{_n(x)}" y="{ybase + 11}" text-anchor="middle" fill="{_TEXT}">{_plain(v)}</text>')
        for m in range(2, 10):
            xm = X(v * m)
            if v * m < hi:
                out.append(f'<line x1="{_n(xm)}" y1="{ybase - 3}" x2="{_n(xm)}" y2="{ybase}" stroke="#999" stroke-width="0.5"/>')
        e += 1
    out.append(f'<text x="{_n(left + pw / 2)}" y="{ybase + 24}" text-anchor="middle" fill="{_TEXT}">'
               f'total \u03b5 (logarithmic scale: each step is ten times larger)</text>')
    if bands is not None:
        out.extend(_suspicion_legend(bands, left, ybase + 36))
    for i, (name, eps, this) in enumerate(rows):
        y = top + row_h * i + row_h / 2
        weight = ' font-weight="bold"' if this else ""
        out.append(f'<text x="{left - 8}" y="{_n(y + 3)}" text-anchor="end" fill="{_TEXT}"{weight}>{escape(name)}</text>')
        eps = float(eps)
        if not (eps > 0 and math.isfinite(eps)):
            continue
        colour = _BAR if this else "#777"
        out.append(f'<circle cx="{_n(X(eps))}" cy="{_n(y)}" r="{4 if this else 3.2}" fill="{colour}"/>')
        out.append(f'<text x="{_n(X(eps) + 7)}" y="{_n(y + 3)}" fill="{_TEXT}"{weight}>{_plain(eps, 6)}</text>')
    out.append("</svg>")
    return "".join(out)
