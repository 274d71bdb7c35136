"""The datasheet: number formatting, content from the spec/metrics/budget, offline rendering, SVG charts."""
from __future__ import annotations

import http.server
import re
import threading
import xml.etree.ElementTree as ET

import pytest

from dpbundle.release import charts, datasheet, keys
from test_bundle import fake_release

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def context():
    rel = fake_release()
    key = keys.generate_private_key()
    return rel, datasheet.build_context(
        spec=rel["spec"], configuration=rel["configuration"], configuration_id=rel["configuration_id"],
        columns=rel["columns"], codes=rel["codes"], metrics=rel["metrics"], budget=rel["budget"],
        created="2026-11-22T10:00:00Z", dpbundle_version="0.1.0", fingerprint=keys.public_key_fingerprint(key),
        public_key_pem=keys.public_key_pem(key), commitment="c" * 64, files=["data.csv", "metrics.csv"])


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
    for m in rel["metrics"]:
        assert f">{format(m['dp_value'], '.6g')}<" in html, m["id"]
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
