"""The sweep report: ``DIR/report.html`` and ``DIR/report.pdf`` (WeasyPrint) with inline SVG plots.

Plots (no plotting library; plain SVG that browsers and WeasyPrint render offline):

- acceptance probability by each dimension of the space (runs pooled over the configurations that
  share a value), with Wilson 95% intervals and the ``--min-acceptance`` line;
- acceptance probability of every swept configuration, with its interval;
- each criterion's DP value divided by its threshold across runs (strip plot + quartile box; a run
  passes a criterion left of the line at 1);
- the propensity-score utility (pMSE ratio, SPECKS) of the evaluated accepted candidates.
"""
from __future__ import annotations

import json
import math
from html import escape
from importlib import resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["write_report", "render_html", "interval_chart", "strip_chart"]

_FONT = "DejaVu Sans, Liberation Sans, Arial, Helvetica, sans-serif"
_BLUE, _PASS, _FAIL, _GRID, _TEXT, _LINE = "#3b6ea5", "#2e7d32", "#c62828", "#d9dde3", "#222", "#888"


def _n(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def _nice_ticks(lo: float, hi: float, target: int = 5) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    step = next((m * mag for m in (1, 2, 2.5, 5, 10) if raw <= m * mag), 10 * mag)
    start = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], start
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _tick(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.3g}"


def _svg_open(width: int, height: int, label: str) -> list[str]:
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
            f'font-family="{_FONT}" font-size="11">',
            f"<title>{escape(label)}</title>"]


@dataclass(frozen=True)
class _Frame:
    """The plot area of a chart: its left edge and width, and its top and bottom."""

    left: float
    plot_w: float
    top: int
    bottom: float


def _axes(frame: _Frame, X: Callable[[float], float], ticks: list[float], title: str,
          value_label: str) -> list[str]:
    """The title, the vertical grid lines with their tick labels, and the axis label."""
    f = frame
    out = [f'<text x="{_n(f.left)}" y="14" font-weight="bold" fill="{_TEXT}">{escape(title)}</text>']
    for t in ticks:
        out.append(f'<line x1="{_n(X(t))}" x2="{_n(X(t))}" y1="{f.top - 4}" y2="{_n(f.bottom)}" stroke="{_GRID}"/>')
        out.append(f'<text x="{_n(X(t))}" y="{_n(f.bottom + 14)}" text-anchor="middle" fill="{_TEXT}">{_tick(t)}</text>')
    out.append(f'<text x="{_n(f.left + f.plot_w / 2)}" y="{_n(f.bottom + 28)}" text-anchor="middle" '
               f'fill="{_TEXT}">{escape(value_label)}</text>')
    return out


def interval_chart(rows: Sequence[dict], *, title: str, x_max: float = 1.0, line: float | None = None,
                   line_label: str = "", width: int = 640, value_label: str = "acceptance probability",
                   note_width: int = 70) -> str:
    """Horizontal dot-and-interval chart: one row per ``{"label", "value", "low", "high", "note"}``.

    Values and interval ends in [0, x_max]; ``line`` draws a dashed vertical reference line.
    """
    rows = list(rows)
    longest = max((len(str(r["label"])) for r in rows), default=4)
    left = min(12 + 6.5 * longest, 280)
    right, top, row_h = note_width, 28, 18
    height = int(top + row_h * max(len(rows), 1) + 34)
    plot_w = width - left - right

    def X(v: float) -> float:
        return left + plot_w * min(max(v / x_max, 0.0), 1.0)

    frame = _Frame(left, plot_w, top, top + row_h * max(len(rows), 1))
    out = _svg_open(width, height, title) + _axes(frame, X, _nice_ticks(0.0, x_max), title, value_label)
    if line is not None:
        out.append(f'<line x1="{_n(X(line))}" x2="{_n(X(line))}" y1="{top - 8}" y2="{_n(frame.bottom)}" stroke="{_FAIL}" stroke-dasharray="4 3"/>')
        if line_label:
            out.append(f'<text x="{_n(X(line) + 3)}" y="{top - 10 + 8}" fill="{_FAIL}" font-size="9">{escape(line_label)}</text>')
    for i, r in enumerate(rows):
        out += _interval_row(r, X, left, top + row_h * i + row_h / 2, width - right)
    out.append("</svg>")
    return "".join(out)


def _interval_row(r: dict, X: Callable[[float], float], left: float, y: float, note_x: float) -> list[str]:
    """One row of an interval chart: label, interval with end ticks, point, note."""
    out = [f'<text x="{_n(left - 6)}" y="{_n(y + 4)}" text-anchor="end" fill="{_TEXT}">{escape(str(r["label"]))}</text>']
    if r.get("value") is None:
        out.append(f'<text x="{_n(left + 4)}" y="{_n(y + 4)}" fill="{_LINE}">no runs</text>')
        return out
    lo, hi = r.get("low"), r.get("high")
    if lo is not None and hi is not None:
        out.append(f'<line x1="{_n(X(lo))}" x2="{_n(X(hi))}" y1="{_n(y)}" y2="{_n(y)}" stroke="{_BLUE}" stroke-width="2"/>')
        for e in (lo, hi):
            out.append(f'<line x1="{_n(X(e))}" x2="{_n(X(e))}" y1="{_n(y - 4)}" y2="{_n(y + 4)}" stroke="{_BLUE}" stroke-width="1.5"/>')
    colour = r.get("colour", _BLUE)
    out.append(f'<circle class="point" cx="{_n(X(r["value"]))}" cy="{_n(y)}" r="4" fill="{colour}"/>')
    if r.get("note"):
        out.append(f'<text x="{note_x + 6}" y="{_n(y + 4)}" fill="{_TEXT}" font-size="10">{escape(str(r["note"]))}</text>')
    return out


def strip_chart(groups: Sequence[dict], *, title: str, line: float = 1.0, width: int = 640,
                value_label: str = "DP value / threshold (pass: left of the red line)", clip: float = 4.0) -> str:
    """Strip plot with a quartile box per group: ``{"label", "values": [...], "passed": [...]}``.

    Values beyond ``[min(0, smallest), clip]`` are drawn at the edge as open marks.
    """
    groups = list(groups)
    all_vals = [v for g in groups for v in g["values"] if v is not None and math.isfinite(v)]
    lo = max(min([0.0] + all_vals), -clip)
    hi = min(max([line * 1.5] + all_vals), clip)
    longest = max((len(str(g["label"])) for g in groups), default=4)
    left = min(12 + 6.5 * longest, 220)
    right, top, row_h = 20, 28, 26
    height = int(top + row_h * max(len(groups), 1) + 34)
    plot_w = width - left - right

    def X(v: float) -> float:
        return left + plot_w * (min(max(v, lo), hi) - lo) / (hi - lo if hi > lo else 1.0)

    frame = _Frame(left, plot_w, top, top + row_h * max(len(groups), 1))
    out = _svg_open(width, height, title) + _axes(frame, X, _nice_ticks(lo, hi), title, value_label)
    out.append(f'<line x1="{_n(X(line))}" x2="{_n(X(line))}" y1="{top - 8}" y2="{_n(frame.bottom)}" stroke="{_FAIL}" stroke-width="1.5"/>')
    for i, g in enumerate(groups):
        y = top + row_h * i + row_h / 2
        out.append(f'<text x="{_n(left - 6)}" y="{_n(y + 4)}" text-anchor="end" fill="{_TEXT}">{escape(str(g["label"]))}</text>')
        out += _quartile_box([v for v in g["values"] if v is not None and math.isfinite(v)], X, y)
        out += _strip_points(g, X, y, (lo, hi))
    out.append("</svg>")
    return "".join(out)


def _quartile_box(vals: list[float], X: Callable[[float], float], y: float) -> list[str]:
    """The box from the first to the third quartile, and the median (none without values)."""
    if not vals:
        return []
    s = sorted(vals)

    def q(p: float) -> float:
        k = (len(s) - 1) * p
        f = math.floor(k)
        c = min(f + 1, len(s) - 1)
        return s[f] + (s[c] - s[f]) * (k - f)

    q1, q2, q3 = q(0.25), q(0.5), q(0.75)
    return [f'<rect x="{_n(X(q1))}" y="{_n(y - 8)}" width="{_n(max(X(q3) - X(q1), 1))}" height="16" fill="none" stroke="{_LINE}"/>',
            f'<line x1="{_n(X(q2))}" x2="{_n(X(q2))}" y1="{_n(y - 8)}" y2="{_n(y + 8)}" stroke="{_TEXT}" stroke-width="2"/>']


def _strip_points(g: dict, X: Callable[[float], float], y: float, bounds: tuple[float, float]) -> list[str]:
    """One jittered mark per value: green passed, red failed, open if outside ``bounds``."""
    lo, hi = bounds
    passed = list(g.get("passed") or [None] * len(g["values"]))
    out = []
    for j, v in enumerate(g["values"]):
        if v is None or not math.isfinite(v):
            continue
        jitter = ((j * 7919) % 13 - 6) * 0.9
        colour = _PASS if passed[j] else (_FAIL if passed[j] is False else _BLUE)
        fill = "none" if (v > hi or v < lo) else colour
        out.append(f'<circle class="point" cx="{_n(X(v))}" cy="{_n(y + jitter)}" r="2.6" fill="{fill}" '
                   f'stroke="{colour}" stroke-width="0.8" fill-opacity="0.75"/>')
    return out


# --------------------------------------------------------------------------- the report

def _value_label(v: Any) -> str:
    if v is None:
        return "(none)"
    if isinstance(v, float) and v.is_integer():
        return str(int(v)) if abs(v) >= 1 else str(v)
    return str(v)


def _dim_title(name: str) -> str:
    if name.startswith("columns."):
        return f"column {name[len('columns.'):]}: binning alternative"
    if name.startswith("generator."):
        key = name[len("generator."):]
        return "generator" if key == "type" else f"generator hyperparameter {key}"
    if name == "projection.min_count":
        return "projection min_count"
    return name


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "–"
        if x != 0 and (abs(x) < 10 ** -(digits) or abs(x) >= 1e6):
            return f"{x:.{digits}g}"
        return f"{x:.{digits}f}".rstrip("0").rstrip(".") if abs(x) < 1000 else f"{x:,.0f}"
    return str(x)


def _iters_text(r: dict) -> str:
    """Expected private iterations 1/p with [1/Wilson high, 1/Wilson low]; unbounded -> infinity."""
    if r.get("expected_iterations") is None:
        return "–"
    hi = r.get("expected_iterations_high")
    return (f"{_fmt(r['expected_iterations'], 2)} [{_fmt(r.get('expected_iterations_low'), 2)}, "
            f"{'∞' if hi is None else _fmt(hi, 2)}]")


def _config_text(cfg: dict) -> str:
    cols = ", ".join(f"{k}={v}" for k, v in cfg.get("columns", {}).items())
    gen = ", ".join(f"{k}={v}" for k, v in cfg.get("generator", {}).items())
    proj = ", ".join(f"{k}={v}" for k, v in cfg.get("projection", {}).items())
    return "; ".join(x for x in (gen, proj, cols) if x) or json.dumps(cfg, sort_keys=True)


def build_context(summary: dict, *, runs: dict, utility: dict, spec=None, configs_by_id: dict | None = None,
                  meta: dict | None = None) -> dict:
    """Everything the report template shows: charts (SVG), tables, the narrowed list, sessions."""
    configs_by_id = configs_by_id or {}
    meta = meta or {}
    conf_rows = sorted(summary["configurations"], key=lambda r: (-(r["acceptance"] or -1), r["config_id"]))
    util = summary.get("utility") or {}
    configurations = [dict(r, config_text=_config_text(configs_by_id.get(r["config_id"], {})),
                           iters_text=_iters_text(r)) for r in conf_rows]
    return {
        "s": summary, "meta": meta, "title": _title(spec), "fmt": _fmt,
        "dim_charts": _dimension_charts(summary), "config_chart": _config_chart(conf_rows, summary),
        "criteria_chart": _criteria_chart(summary, runs), "util_chart": _utility_chart(util.get("rows") or []),
        "util": util, "detail": _utility_detail(util.get("rows") or [], utility),
        "narrowed": [r for r in configurations if r["narrowed"]],
        "configurations": configurations,
        "sessions": meta.get("sessions", []),
    }


def _title(spec) -> str:
    """The release title of the spec (``release.title``), or ''."""
    if spec is None:
        return ""
    if isinstance(spec, dict):
        return (spec.get("release") or {}).get("title", "")
    return spec.release_title


def _dimension_charts(summary: dict) -> list[dict]:
    min_acc = summary["min_acceptance"]
    charts = []
    for dim in summary["dimensions"]:
        rows = [{"label": _value_label(v["value"]), "value": v["acceptance"], "low": v["wilson_low"],
                 "high": v["wilson_high"], "note": f"{v['accepted']}/{v['runs']}"} for v in dim["values"]]
        charts.append({"name": dim["name"], "title": _dim_title(dim["name"]),
                       "svg": interval_chart(rows, title=f"Acceptance by {_dim_title(dim['name'])}",
                                             line=min_acc, line_label=f"min {min_acc:g}")})
    return charts


def _config_chart(conf_rows: list[dict], summary: dict) -> str:
    min_acc = summary["min_acceptance"]
    return interval_chart(
        [{"label": r["config_id"], "value": r["acceptance"], "low": r["wilson_low"], "high": r["wilson_high"],
          "note": f"{r['accepted']}/{r['runs']}" + ("?" if r.get("decision") == "undecided" else ""),
          "colour": _PASS if r["narrowed"] else _BLUE}
         for r in conf_rows[:60]],
        title="Acceptance by configuration (green: in narrowed.yaml; ?: undecided)", line=min_acc,
        line_label=f"min {min_acc:g}")


def _criteria_chart(summary: dict, runs: dict) -> str:
    """Each criterion's DP value / threshold over the successful runs of the swept configurations."""
    sel = {r["config_id"] for r in summary["configurations"]}
    groups: dict[str, dict] = {}
    for (cid, _), rec in sorted(runs.items()):
        if cid not in sel or rec.get("error"):
            continue
        for cr in rec.get("criteria", []):
            g = groups.setdefault(cr["id"], {"label": cr["id"], "values": [], "passed": []})
            if cr.get("dp_value") is not None and cr.get("threshold"):
                g["values"].append(cr["dp_value"] / cr["threshold"])
                g["passed"].append(bool(cr["passed"]))
    return strip_chart(list(groups.values()), title="Each criterion's DP value / threshold across runs")


def _utility_chart(util_rows: list[dict]) -> str:
    if not util_rows:
        return ""
    ratio_max = max([2.0] + [r["pmse_ratio"] for r in util_rows if r.get("pmse_ratio") is not None])
    return interval_chart(
        [{"label": r["config_id"], "value": r.get("pmse_ratio"), "low": None, "high": None,
          "note": f"SPECKS {_fmt(r.get('specks'))}"} for r in util_rows[:60]],
        title="pMSE ratio, first accepted candidate per configuration",
        x_max=min(ratio_max * 1.05, 1e6), line=1.0, line_label="1 = indistinguishable",
        value_label="pMSE ratio", note_width=110)


def _utility_detail(util_rows: list[dict], utility: dict) -> dict | None:
    """The detail of the first evaluated run: worst tables and group statistics."""
    if not util_rows:
        return None
    first = util_rows[0]
    rec = utility.get((first["config_id"], first["rep"])) or {}
    u = rec.get("utility") or {}
    tables = sorted(u.get("tables", []), key=lambda t: -(t.get("tvd") or 0))[:10]
    grows = [g for g in (u.get("groups") or {}).get("rows", []) if g["by"] is None or g["n_real"] > 0]
    return {"config_id": first["config_id"], "rep": first["rep"], "tables": tables,
            "groups": grows[:80], "correlations": u.get("correlations"),
            "propensity": u.get("propensity"), "s_pmse": u.get("s_pmse"), "marginals": u.get("marginals")}


def render_html(context: dict) -> str:
    from jinja2 import Environment, StrictUndefined

    text = resources.files("dpbundle.templates").joinpath("sweep_report.html.j2").read_text(encoding="utf-8")
    env = Environment(autoescape=True, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.from_string(text).render(**context)


def write_report(out: Path, summary: dict, *, runs: dict, utility: dict, spec=None,
                 configs_by_id: dict | None = None, meta: dict | None = None,
                 pdf: bool = True) -> tuple[Path, Path | None]:
    """Write ``out/report.html`` and (with ``pdf``) ``out/report.pdf``; returns their paths."""
    out = Path(out)
    html = render_html(build_context(summary, runs=runs, utility=utility, spec=spec,
                                     configs_by_id=configs_by_id, meta=meta))
    html_path = out / "report.html"
    tmp = html_path.with_name(html_path.name + ".tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(html_path)
    pdf_path = None
    if pdf:
        from weasyprint import HTML

        pdf_path = out / "report.pdf"
        tmp = pdf_path.with_name(pdf_path.name + ".tmp")
        HTML(string=html, base_url=str(out)).write_pdf(str(tmp))
        tmp.replace(pdf_path)
    return html_path, pdf_path
