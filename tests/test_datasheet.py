"""The datasheet: number formatting, content from the spec/metrics/budget, offline rendering, SVG charts."""
from __future__ import annotations

import csv
import http.server
import io
import re
import threading
import xml.etree.ElementTree as ET

import pytest

from dpbundle.templates.datasheet import charts
from dpbundle.release.bundle import datasheet
from dpbundle.release.bundle import keys
from datasheet_util import context_of
from test_bundle import fake_release

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def context():
    rel = fake_release()
    return rel, context_of(rel)


@pytest.fixture(scope="module")
def html(context):
    return datasheet.render_html(context[1])


def test_format_number():
    f = datasheet.format_number
    assert f(9.98) == "9.98" == format(9.98, ".6g")
    assert f(0.0073451923) == "0.00734519"
    assert f(-0.01234567) == "-0.0123457"
    assert f(1234567.0) == "1.23457e+06"
    assert f(30) == "30" and f(True) == "true" and f(None) == ""
    assert datasheet.NUMBER_FORMAT_DOC == "format(x, '.6g')"


def test_html_content(context, html):
    rel, ctx = context
    text = re.sub(r"\s+", " ", html)
    assert "These records are synthetic." in text
    assert "Part 1" in text and "Part 2" in text
    from markupsafe import escape

    for m, row in zip(rel["metrics"], ctx["criteria"]):
        # rounded to what the noise supports (issue 21), with the column's unit
        assert f">{escape(row['dp_value'])}<" in html, m["id"]
        assert f"<code>{m['id']}</code>" in html
    assert ">9.98<" in html
    for name, col in zip([c.name for c in rel["columns"]], rel["columns"]):
        assert name in html
        assert ", ".join(col.labels).replace("<", "&lt;") in html  # every possible value, in order
    assert datasheet.openssl_verify_command("KEY.pub") in html
    assert "dpbundle audit BUNDLE --pubkey KEY.pub" in html
    assert ctx["fingerprint"] in html
    assert "c" * 64 in html
    assert "open-data@example.org" in html
    assert "one live birth" in text
    assert "private selection" in text
    assert "Record linkage" in text and "Rare subgroups" in text


def test_intended_uses_come_from_the_criteria(context):
    rel, ctx = context
    ids = [u["id"] for u in ctx["uses"]]
    assert ids == [m["id"] for m in rel["metrics"] if m["type"] != "faithfulness"]
    by_id = {u["id"]: u["text"] for u in ctx["uses"]}
    assert "1 to 6 columns" in by_id["kway"]
    assert "mother age (<25, 25-29, 30-34, 35+)" in by_id["mean_parity"]
    assert "linear regression of birth weight" in by_id["regression"]


def test_html_is_self_contained(html):
    stripped = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http://" not in stripped and "https://" not in stripped
    assert "<link" not in html and "<script" not in html and "@import" not in html
    assert "url(" not in html
    assert "<svg" in html


def test_face_privacy_counts_from_the_data(context):
    rel, ctx = context
    assert ctx["min_count"] == 2  # from the configuration
    assert ctx["qi_rows"][0]["min"] >= 4  # every fake record is repeated 4 times
    assert len(ctx["qi_rows"]) == 1 + len(rel["spec"]["face_privacy"]["quasi_identifiers"])


def test_budget_rows(context):
    rows = context[1]["budget_rows"]
    assert rows[-1] == {"step": "Total", "epsilon": "9.98", "kind": "total"}
    assert any(r["step"].startswith("Private selection: factor 2") and r["epsilon"] == "9.98" for r in rows)


def test_distribution_chart_svg():
    svg = charts.distribution_chart(["a", "<b", "c&d"], [3, 0, 7], title="x")
    root = ET.fromstring(svg)
    rects = root.findall(f"{SVG}rect")
    assert len(rects) == 3
    heights = [float(r.get("height")) for r in rects]
    assert heights[1] == 0 and heights[2] > heights[0] > 0
    assert "&lt;b" in svg and "c&amp;d" in svg
    with pytest.raises(ValueError):
        charts.distribution_chart(["a"], [1, 2])


def test_criteria_chart_svg(context):
    rel, _ = context
    svg = charts.criteria_chart(rel["metrics"])
    root = ET.fromstring(svg)
    circles = root.findall(f"{SVG}circle")
    assert len(circles) == len(rel["metrics"])
    failing = dict(rel["metrics"][0], dp_value=0.02, passed=False)
    svg2 = charts.criteria_chart([failing])
    assert "#c62828" in ET.tostring(ET.fromstring(svg2).find(f"{SVG}circle")).decode()


class _Counter(http.server.BaseHTTPRequestHandler):
    hits = 0

    def do_GET(self):  # noqa: N802
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/css")
        self.end_headers()
        self.wfile.write(b"body { color: red }")

    def log_message(self, *args):
        pass


def test_pdf_rendering_never_fetches_urls(tmp_path):
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        html = (f'<html><head><link rel="stylesheet" href="{url}/a.css"><style>@import url("{url}/b.css");</style>'
                f'</head><body><p>offline</p><img src="{url}/c.png"></body></html>')
        datasheet.render_pdf(html, tmp_path / "x.pdf")
    finally:
        server.shutdown()
    assert _Counter.hits == 0
    assert (tmp_path / "x.pdf").read_bytes().startswith(b"%PDF")


# --------------------------------------------------------------------------- issue 15, item 6: datasheet quality

def _pdf(html: str):
    import io

    from pypdf import PdfReader

    return PdfReader(io.BytesIO(datasheet.render_pdf_bytes(html)))


def _context_with(context, **changes):
    """A copy of the fake release's context, rebuilt with spec/metrics/budget changes."""
    import copy

    rel = copy.deepcopy(context[0])
    for key, fn in changes.items():
        fn(rel[key])
    return rel, context_of(rel, files=["data.csv", "metrics.csv", "README.html", "README.pdf",
                                       "datapackage.json"])


@pytest.fixture(scope="module")
def rendered(context):
    _, ctx = _context_with(context)
    html = datasheet.render_html(ctx)
    return ctx, html, _pdf(html)


def test_pdf_is_tagged_with_language_and_title(rendered):
    ctx, html, reader = rendered
    root = reader.trailer["/Root"]
    assert bool(root["/MarkInfo"]["/Marked"])  # tagged PDF
    assert "/StructTreeRoot" in root  # with a structure tree (PDF/UA-1)
    assert root["/Lang"] == "en" and '<html lang="en">' in html
    assert reader.metadata["/Title"].startswith(ctx["title"])
    assert bool(root["/ViewerPreferences"]["/DisplayDocTitle"])


def test_document_language_follows_the_spec(context):
    _, ctx = _context_with(context, spec=lambda s: s["release"].update(language="he"))
    assert ctx["lang"] == "he"
    assert '<html lang="he">' in datasheet.render_html(ctx)


def test_toc_links_to_every_section(rendered):
    _, html, reader = rendered
    toc = html[html.index('<nav class="toc"'):html.index("</nav>")]
    targets = re.findall(r'<a href="#([\w-]+)">', toc)
    ctx = rendered[0]
    assert len(targets) == len(ctx["sections"]) + 1  # every numbered section and "Feedback"
    for t in targets:
        assert f'id="{t}"' in html, t
    # the links survive into the PDF: one link annotation per entry on the cover page
    links = [a.get_object() for a in reader.pages[0].get("/Annots") or []]
    assert sum(1 for a in links if a.get("/Subtype") == "/Link") == len(targets)


def test_file_names_are_never_broken(rendered):
    _, html, reader = rendered
    css = datasheet._read_resource("datasheet.css")
    # only opaque hashes may break anywhere; nothing is hyphenated automatically
    assert re.findall(r"([\w.# -]+)\{[^}]*break-all", css) == ["code.hash "]
    assert "hyphens: manual" in css
    for name in ("README.html", "README.pdf", "datapackage.json", "manifest.json", "manifest.sig"):
        assert f'<code class="file">{name}</code>' in html
    text = "\n".join(p.extract_text() for p in reader.pages)
    for name in ("README.html", "README.pdf", "datapackage.json", "manifest.json", "manifest.sig"):
        assert name in text, name  # on one line, not "RE" / "ADME.html"


def test_epsilon_is_explained_on_a_readable_scale(rendered):
    ctx, html, _ = rendered
    import html as html_mod

    text = re.sub(r"\s+", " ", html_mod.unescape(re.sub(r"<[^>]+>", "", html)))
    assert "e\u03b5 = e9.98 \u2248 21,590" in text  # e^9.98 = 21,590.5
    assert "1% chance" in text and "at most 99.5% certainty" in text
    # the published releases, with their sources named
    assert "Israel's 2024 release of its national birth registry" in text and "Hod & Canetti 2024" in text
    assert "17.14" in text and "US Census Bureau" in text and "Abowd et al. 2022" in text
    assert "is the same as the 9.98 of Israel" in text and "smaller than the 17.14" in text


def test_epsilon_scale_comes_from_the_bundle_budget():
    scale = datasheet.epsilon_scale(1.0)
    assert scale["factor"] == "2.7" and scale["posterior"] == "2.67%"
    assert [c["word"] for c in scale["comparisons"]] == ["smaller than", "smaller than"]
    assert [r["epsilon"] for r in scale["rows"]] == ["1", "9.98", "17.14"]
    big = datasheet.epsilon_scale(25.0)
    assert big["factor"] == "72 billion" and big["posterior"] == "more than 99.9%"
    assert all(c["word"] == "larger than" for c in big["comparisons"])


def test_quality_checks_are_described_as_noisy(rendered):
    ctx, html, _ = rendered
    text = re.sub(r"\s+", " ", html)
    assert "with random noise added" in text and "not exact guarantees" in text
    # kway: DP value 0.00734519 below 0.01 by less than 2 noise std (0.707): flagged as close
    kway = next(u for u in ctx["uses"] if u["id"] == "kway")
    assert kway["close"] and "close to its threshold" in text


def _fit_metric(rel):
    for m in rel:
        if m["id"] == "regression":
            m.update(mechanism="functional_mechanism", noise_scale=113.953, noise_std=161.155, sensitivity=49.0)


def test_fit_noise_is_not_shown_as_noise_of_the_value(context, monkeypatch):
    from dpbundle.release.bundle import write as bundle
    from dpbundle.templates.datasheet import value_noise
    from dpbundle.templates.datasheet import value_noise as shared_noise

    monkeypatch.setattr(shared_noise, "estimate", lambda *a, **k: {})     # no estimate
    rel, ctx = _context_with(context, metrics=_fit_metric)
    html = datasheet.render_html(ctx)
    row = html[html.index("<code>regression</code></td><td class=\"desc\">"):]
    row = row[:row.index("</tr>")]
    assert "inside the fit" in row and "160" not in row
    # explained in the note (the per-coefficient std, 161.155, to two significant digits)
    assert "noise is added <em>inside the fit</em>" in html and "deviation 160 (in the loss" in html
    # with an estimate (as write_bundle computes it from the released data): shown with its method
    est = {"regression": {"mean": 9.43763, "std": 4.49084, "draws": 200, "method": "simulated"}}
    monkeypatch.setattr(shared_noise, "estimate", lambda *a, **k: est)
    ctx2 = context_of(rel)
    html2 = datasheet.render_html(ctx2)
    assert "&asymp;&nbsp;4.5" in html2 and "running the same mechanism 200 times on the released data" in html2
    # metrics.csv: the mechanism's noise_std stays, and where it goes and the value's noise are added
    rows = list(csv.DictReader(io.StringIO(bundle.metrics_csv_bytes(rel["metrics"], est).decode())))
    reg = next(r for r in rows if r["id"] == "regression")
    assert reg["noise_std"] == "161.155" and reg["noise_on"] == "inside_fit"
    assert reg["value_noise_std"] == "4.49084" and reg["value_noise_mean"] == "9.43763"
    kway = next(r for r in rows if r["id"] == "kway")
    assert kway["noise_on"] == "value" and kway["value_noise_std"] == kway["noise_std"]
    plain = list(csv.DictReader(io.StringIO(bundle.metrics_csv_bytes(rel["metrics"]).decode())))
    assert next(r for r in plain if r["id"] == "regression")["value_noise_std"] == ""
    assert value_noise.noise_on("exponential_mechanism") == "selection_scores"


# --------------------------------------------------------------------------- text in any script

SCRIPTS = {"Hebrew": "לידות חי", "Arabic": "المواليد الأحياء", "Chinese": "活产婴儿", "Cyrillic": "Живорождения"}


def test_text_in_any_script_renders(context):
    from dpbundle.release.bundle import glyphs

    text = " / ".join(SCRIPTS.values())
    missing = glyphs.missing_characters([text])
    if missing:
        pytest.skip(f"fonts missing on this machine for {len(missing)} characters (CI installs fonts-noto-core "
                    f"and fonts-noto-cjk): {glyphs.MissingGlyphs(missing)}")
    _, ctx = _context_with(context, spec=lambda s: s["release"].update(title="Births " + text))
    reader = _pdf(datasheet.render_html(ctx))
    extracted = reader.pages[0].extract_text()
    for script, sample in SCRIPTS.items():
        letters = {ch for ch in sample if not ch.isspace()}
        assert letters <= set(extracted), f"{script}: {sorted(letters - set(extracted))} not in the PDF"
    fonts = {str(f.get_object().get("/BaseFont")) for f in reader.pages[0]["/Resources"]["/Font"].values()}
    assert len(fonts) >= 2  # DejaVu and at least one fallback font for the other scripts


def test_a_character_without_font_fails_clearly(context):
    from dpbundle.release.bundle import glyphs

    _, ctx = _context_with(context, spec=lambda s: s["release"].update(title="Births \ue000\U0010fffd"))
    html = datasheet.render_html(ctx)
    with pytest.raises(glyphs.MissingGlyphs) as err:
        datasheet.render_pdf_bytes(html)
    msg = str(err.value)
    assert "U+E000 private-use character" in msg and "U+10FFFD" in msg
    assert "empty boxes" in msg and "fonts-noto-core" in msg and "fc-list" in msg
    assert glyphs.missing_characters(["Births, ε ≈ 9.98 × 2 — “ok”"]) == []


def test_preflight_refuses_a_spec_text_without_font(context):
    """The glyph check runs in release's pre-flight, before the ledger entry (nothing spent)."""
    from dpbundle.release.bundle import preflight

    spec = dict(context[0]["spec"])
    assert preflight.renderer_problem(spec) is None
    spec["columns"] = [dict(c) for c in spec["columns"]]
    spec["columns"][0]["description"] = "Month \ue001"
    problem = preflight.renderer_problem(spec)
    assert problem and "U+E001" in problem and "columns[0].description" in problem


# --------------------------------------------------------------------------- the births example's datasheet

@pytest.fixture(scope="module")
def births_bundle(tmp_path_factory):
    import os

    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    d = tmp_path_factory.mktemp("births")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        r = CliRunner().invoke(app, ["release", "--stop-probability", "0", "--example", "births", "--out", "B"], terminal_width=200)
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0, r.output
    return d / "B", r.output


@pytest.mark.slow
def test_births_datasheet_has_no_nearly_empty_page(births_bundle):
    from pypdf import PdfReader

    reader = PdfReader(str(births_bundle[0] / "README.pdf"))
    lengths = [len("".join((p.extract_text() or "").split())) for p in reader.pages]
    mean = sum(lengths) / len(lengths)
    assert len(lengths) >= 5
    # a page of charts holds about a third of an average page's text; the page that held only the
    # "Feedback" paragraph before Part 2's forced page break held 15%
    for i, n in enumerate(lengths[:-1], 1):
        assert n >= 0.25 * mean, f"page {i} of {len(lengths)} holds {n} characters, the average page {mean:.0f}: {lengths}"
    root = reader.trailer["/Root"]
    assert bool(root["/MarkInfo"]["/Marked"]) and "/StructTreeRoot" in root and root["/Lang"] == "en"


@pytest.mark.slow
def test_births_regression_noise_of_the_value(births_bundle):
    out, output = births_bundle
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO((out / "metrics.csv").read_text("utf-8")))}
    reg = rows["regression"]
    assert reg["mechanism"] == "functional_mechanism" and reg["noise_on"] == "inside_fit"
    # the estimated noise of the reported distance, far below the per-coefficient noise of the fit
    assert 0 < float(reg["value_noise_std"]) < float(reg["noise_std"]) / 5
    assert 0 < float(reg["value_noise_mean"]) < float(reg["threshold"])
    assert all(r["noise_on"] == "value" and r["value_noise_std"] == r["noise_std"]
               for k, r in rows.items() if r["mechanism"] == "laplace")
    # the CLI summary shows the same, marked, not the per-coefficient 161
    line = next(x for x in output.splitlines() if x.startswith("│ regression"))
    assert f"≈{float(reg['value_noise_std']):.3g} (fit)" in line
    assert f"{float(reg['noise_std']):.3g}" not in line
    html = (out / "README.html").read_text("utf-8")
    from dpbundle.templates.datasheet.numbers import std_text

    assert f"&asymp;&nbsp;{std_text(float(reg['value_noise_std']))}" in html
