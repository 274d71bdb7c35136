"""Issue 21: the datasheet's words and pictures.

Section 2 of the issue lists statements that were false; each has a test here that fails on the
datasheet as it was before this change (noted in each test's docstring):

1. under ``records.policy: dp_count`` every sentence about n says that n is a DP count (the
   production process said "The number of remaining records, N, is public");
2. the faithfulness section states the whole matching rule (nominal columns, ``max_nominal``,
   ``max_differing`` were left out);
3. a 0/1 target names the category numbered 1 ("the share of records whose income is >50K");
4. no "stakeholders" and no "registry" unless the spec says so (``release.source_kind``,
   ``release.thresholds_set_by``); the unit of privacy is not "each one person";
5. every check states the error it rules out, and a check whose noise is large against its
   threshold is called weak evidence; ``spec validate`` and ``sweep`` warn before any private run;
6. negative DP values are explained once, beside the table.

Section 3: units, numbers for people, column provenance, one version, layout, pictures and the
missing Datasheets-for-Datasets parts; the census walkthrough of docs/spec.md end to end.
"""
from __future__ import annotations

import copy
import io
import json
import math
import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from dpbundle.release.bundle import datasheet
from dpbundle.release.cli.main import app
from dpbundle.templates.datasheet import charts, evidence as ev
from dpbundle.templates.datasheet.context import faithfulness_rule_text, one_category, query_family
from dpbundle.templates.datasheet.numbers import noisy, plain, std_text, with_unit
from dpbundle.templates.datasheet.provenance import provenance_text
from dpbundle.templates.datasheet.words import sentences, visible_text

from census_util import census_spec, census_spec_text, simulate_census
from datasheet_util import context_of
from test_bundle import fake_release
from test_datasheet_text import BIRTHS_WORDS

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
runner = CliRunner()
SCIENTIFIC = r"\b\d(?:\.\d+)?[eE][+\u2212-]\d+\b"  # 1.2e-05, 1.23457e+06 (hashes aside)


# --------------------------------------------------------------------------- helpers

def _rel(**changes) -> dict:
    """The fake births release (tests/test_bundle.py) with its spec/metrics/budget changed by
    functions."""
    rel = copy.deepcopy(fake_release())
    for key, fn in changes.items():
        fn(rel[key])
    return rel


def _html(rel: dict) -> str:
    return datasheet.render_html(context_of(rel, files=["data.csv", "metrics.csv"]))


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", visible_text(html).replace("\u00a0", " ")).strip()


def _dp_count(budget: dict) -> None:
    """budget.json as release/scheme/budget.py writes it under dp_count."""
    from dpbundle.mechanisms.records import guarantee_text

    budget["neighbouring"] = guarantee_text("dp_count")["neighbouring"]
    budget["records"] = {"policy": "dp_count", "epsilon": 0.1, "released_n": 200, "sensitivity": 1,
                         "noise_scale": 10.0,
                         "statement": "the number of records is a differentially private count of the "
                                      "plausible records (its epsilon is part of the total); the table was "
                                      "resized to that count before the synthesis"}


_N_SENTENCE = re.compile(r"number of (remaining |plausible )?(records|rows)|remaining records|^records\b", re.I)
_N_PUBLIC = re.compile(r"\bis public\b|published exactly|equal(s)? (to )?the number|not protected|declares it public",
                       re.I)


def n_sentences(html: str, n: int) -> list[str]:
    """The sentences of the visible text that speak of the number of records."""
    return [s for s in sentences(visible_text(html).replace("\u00a0", " "))
            if f"{n:,}" in s or _N_SENTENCE.search(s)]


def assert_n_follows_dp_count(html: str, n: int) -> None:
    said = n_sentences(html, n)
    assert said, "no sentence speaks of the number of records"
    wrong = [s for s in said if _N_PUBLIC.search(s)]
    assert not wrong, f"under dp_count these sentences call n public: {wrong}"
    text = _text(html)
    assert f"{n:,} (a differentially private count of the records" in text
    assert "counted with differential privacy" in text and "the exact number of remaining records is not published" in text
    assert "The exact number is not published." in text


# --------------------------------------------------------------------------- 2.1 n follows the policy

def test_dp_count_every_sentence_about_n_follows_the_policy():
    """Before: section 10 said "The number of remaining records, 200, is public." under dp_count."""
    def spec(s):
        s["privacy"]["records"] = {"policy": "dp_count", "epsilon": 0.1}
        s["release"]["description"] = "Synthetic records of live births, one row per birth."

    html = _html(_rel(budget=_dp_count, spec=spec))
    assert_n_follows_dp_count(html, 200)


def test_declared_public_says_n_is_published_exactly():
    html = _html(_rel())  # the births fake: declared_public (no records entry)
    text = _text(html)
    assert "The number of remaining records, 200, is published exactly (the specification declares it public)." in text
    assert "differentially private count" not in text


@pytest.mark.slow
def test_persons_example_under_dp_count_says_n_is_a_dp_count(tmp_path):
    """The persons example (records.policy dp_count) end to end: README.html's n sentences."""
    out = tmp_path / "P"
    res = runner.invoke(app, ["release", "--stop-probability", "0", "--example", "persons", "--out", str(out), "--ledger",
                              str(tmp_path / "l.jsonl"), "--transcript", str(tmp_path / "t.jsonl")])
    assert res.exit_code == 0, res.output
    budget = json.loads((out / "budget.json").read_text())
    assert budget["records"]["policy"] == "dp_count"
    n = json.loads((out / "manifest.json").read_text())["n"]
    html = (out / "README.html").read_text(encoding="utf-8")
    assert_n_follows_dp_count(html, n)
    # the example spec's own description no longer says that the rows equal the count
    assert "equals the number of persons" not in html


# --------------------------------------------------------------------------- 2.2 faithfulness rule

NOMINAL_RULE = {"exact": ["birth_month", "parity"], "adjacent": ["mother_age", "gestation_week", "birth_weight"],
                "nominal": ["birth_sex"], "max_adjacent": 1, "max_nominal": 1, "max_differing": 1,
                "exact_if_contains": {"mother_age": [37]}}


def test_faithfulness_states_the_whole_rule():
    """Before: only the exact and adjacent columns were named; nominal columns, max_nominal and
    max_differing were left out."""
    html = _html(_rel(spec=lambda s: s.update(faithfulness=NOMINAL_RULE)))
    text = _text(html)
    section = text[text.index("Faithfulness measures"):text.index("Production process", text.index("Faithfulness measures"))]
    assert "equal in birth month, parity" in section
    assert "at most 1 of mother age, gestation week, birth weight differs, each by one adjacent bin" in section
    assert "at most 1 of birth sex differs, to any other category" in section
    assert "at most 1 column differs in all" in section
    assert "strictly inside must match exactly (mother age: 37)" in section


def test_faithfulness_rule_text_covers_every_field():
    assert faithfulness_rule_text({"exact": ["a"], "adjacent": ["b", "c"], "max_adjacent": 0}) == \
        "they are equal in a; they are equal in b, c"
    two = faithfulness_rule_text({"exact": [], "adjacent": ["b", "c"], "nominal": ["d", "e"], "max_adjacent": 2,
                                  "max_nominal": 2, "max_differing": 3})
    assert "at most 2 of b, c differ" in two and "at most 2 of d, e differ" in two and "at most 3 columns differ in all" in two
    # no nominal column: max_differing says nothing more than max_adjacent, so it is not repeated
    assert "in all" not in faithfulness_rule_text({"exact": ["a"], "adjacent": ["b"], "max_adjacent": 1,
                                                  "max_differing": 1})


# --------------------------------------------------------------------------- 2.3 the category numbered 1

INCOME = {"name": "income", "alternatives": [{"id": "i", "categories": ["<=50K", ">50K"], "values": [0, 1]}]}
SEX = {"name": "sex", "alternatives": [{"id": "s", "categories": ["male", "female"], "values": [0, 1]}]}
EDU = {"name": "schooling", "alternatives": [{"id": "e", "clip": [1, 16], "edges": [1, 9, 13, 17]}]}


def test_zero_one_target_names_the_category_numbered_1():
    """Before: "The share of records with income" / "with sex"."""
    spec = {"columns": [INCOME, SEX, EDU], "acceptance": []}
    for target, one in (("income", ">50K"), ("sex", "female")):
        entry = {"id": "s", "type": "conditional_means", "threshold": 0.05, "target": target, "by": [None],
                 "bounds": [0, 1]}
        text = query_family({"id": "s", "type": entry["type"], "threshold": 0.05}, entry, spec, d=3)
        assert text.startswith(f"The share of records whose {target} is {one},"), text
        assert f"share of records with {target}" not in text


def test_the_released_coding_decides_the_category_numbered_1():
    from dpbundle.mechanisms.coding import ColumnCoding

    col = ColumnCoding(name="sex", labels=("F", "M"), values=np.array([1.0, 0.0]), ordered=False,
                       lower=np.array([math.nan, math.nan]), upper=np.array([math.nan, math.nan]))
    assert one_category({"target": "sex"}, {"columns": [SEX]}, [col]) == "F"
    # alternatives that disagree and no coding: not named rather than guessed
    two = {"name": "sex", "alternatives": [{"id": "a", "categories": ["m", "f"], "values": [0, 1]},
                                          {"id": "b", "categories": ["f", "m"], "values": [0, 1]}]}
    assert one_category({"target": "sex"}, {"columns": [two]}) == ""


def test_pattern_example_names_the_category():
    share = {"id": "share_f", "type": "conditional_means", "target": "birth_sex", "by": [None],
             "bounds": [0, 1], "threshold": 0.05, "epsilon": 0.1}
    rel = _rel(spec=lambda s: s.update(acceptance=[share] + s["acceptance"]))
    rel["metrics"].insert(0, dict(rel["metrics"][0], id="share_f", type="conditional_means", threshold=0.05))
    text = _text(_html(rel))
    assert "for example the share of records whose birth sex is F" in text


# --------------------------------------------------------------------------- 2.4 words from the spec

def _neutral(spec: dict) -> None:
    rel = spec["release"]
    rel.pop("source_kind", None)
    rel.pop("thresholds_set_by", None)
    rel.update(description="Synthetic records, one row per birth.", unit_of_privacy="one live birth")


def test_no_stakeholders_and_no_registry_unless_the_spec_says_so():
    """Before: "criteria agreed with the stakeholders", "Stakeholders required that ...",
    "a confidential registry" and "protects each one live birth" in every datasheet."""
    rel = _rel(spec=_neutral, budget=lambda b: b.update(unit_of_privacy="one live birth"))
    text = _text(_html(rel))
    assert "stakeholders" not in text.lower()
    # the only registry left is in the name of another release, in the comparison of epsilons
    assert text.count("registry") == text.count("national birth registry") + text.count("2024 registry release")
    assert "confidential source data" in text
    assert "thresholds are fixed in the public specification" in text
    assert "The specification requires that the published table contain no unique record" in text
    assert "protects each" not in text
    assert "The unit of privacy, what the guarantee protects, is one live birth." in text


def test_source_kind_and_thresholds_set_by_are_used():
    def census(spec):
        _neutral(spec)
        spec["release"].update(source_kind="census", thresholds_set_by="the office's methodology unit")

    text = _text(_html(_rel(spec=census)))
    assert "trained with differential privacy on a confidential census" in text
    assert "whose thresholds were set by the office's methodology unit" in text
    assert "number of records in the confidential census after plausibility checks" in text


def test_new_release_fields_validate_and_are_documented(births_doc):
    from dpbundle.release.spec.load import SpecError, validate_spec

    births_doc["release"].update(source_kind="census", thresholds_set_by="x", motivation="m", mandate="a",
                                 maintenance="e", citation="c", version="2.1")
    births_doc["columns"][1]["unit"] = "years"
    validate_spec(births_doc)
    births_doc["release"]["source_kind"] = "stakeholders"
    with pytest.raises(SpecError, match="source_kind"):
        validate_spec(births_doc)
    births_doc["release"]["source_kind"] = "census"
    births_doc["release"]["version"] = 2.1  # a number: refused (1.10 would become 1.1)
    with pytest.raises(SpecError, match="version"):
        validate_spec(births_doc)
    r = runner.invoke(app, ["spec", "explain", str(ROOT / "examples" / "persons-recommended.yaml")],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "source_kind" in r.output and "thresholds_set_by" in r.output
    assert "hours (unit: hours)" in r.output


# --------------------------------------------------------------------------- 2.5 the strength of a check

def _weak_and_strong(metrics: list[dict]) -> None:
    for m in metrics:
        if m["id"] == "kway":      # strong: std 0.0014 against 0.01
            m.update(noise_scale=0.001, noise_std=math.sqrt(2) * 0.001, dp_value=0.004)
        if m["id"] == "mean_parity":  # weak: std 0.28 against 0.3
            m.update(noise_scale=0.2, noise_std=math.sqrt(2) * 0.2, dp_value=0.05)


def test_laplace_ruled_out_is_the_95_percent_point():
    for t, b in ((0.3, 0.2), (100.0, 1.03), (1.41, 0.066)):
        e = ev.laplace_ruled_out(t, b)
        assert e == pytest.approx(t + b * math.log(10))
        # P(e + Z >= t) for Z ~ Laplace(b): 1 - exp((t - e)/b)/2
        assert 1 - 0.5 * math.exp((t - e) / b) == pytest.approx(0.95)
    # the weak rule: noise std >= half the threshold, the same as ruled_out >= 1.81 x threshold
    for std in (0.1, 0.149, 0.15, 0.151, 0.3):
        row = {"type": "kway_marginals", "threshold": 0.3, "mechanism": "laplace",
               "noise_scale": std / math.sqrt(2), "noise_std": std}
        got = ev.evidence(row)
        assert got.weak == (std >= 0.15)
        assert (got.factor >= ev.WEAK_FACTOR - 1e-12) == got.weak
    ratio = ev.evidence({"type": "smoothed_ratio", "threshold": 1.41, "mechanism": "laplace",
                         "noise_scale": 0.066, "noise_std": 0.0933})
    assert ratio.floor == 1 and not ratio.weak and ratio.ruled_out == pytest.approx(1.41 + 0.066 * math.log(10))
    assert ev.evidence({"type": "quantile", "threshold": 5, "mechanism": "exponential_mechanism",
                        "noise_scale": 200}).ruled_out is None
    assert ev.evidence({"type": "quantile", "threshold": 5, "mechanism": "exponential_mechanism"},
                       {"q95": 2.0}).ruled_out == 7.0


def test_every_check_states_what_it_rules_out_and_weak_ones_are_named():
    """Before: "within 0.3 of the real value in every group" for a criterion whose noise std
    (0.28) is about its threshold, with nothing about the strength of the check."""
    rel = _rel(metrics=_weak_and_strong)
    ctx = context_of(rel)
    html = datasheet.render_html(ctx)
    text = _text(html)
    uses = {u["id"]: u for u in ctx["uses"]}
    assert uses["mean_parity"]["weak"] and not uses["kway"]["weak"]
    # mean_parity: t + b ln 10 = 0.3 + 0.2 x 2.3026 = 0.76 children, 2.5 times the threshold
    assert ("Weak evidence: the noise is large against the threshold, and only a true error above 0.76 children "
            "(2.5 times the threshold) would have failed this check with probability at least 95%.") in text
    # kway: 0.01 + 0.001 ln 10 = 0.0123, in percentage points
    assert "A true error above 1.23 percentage points would have failed this check with probability at least 95%." in text
    assert "the check asks for an error below 0.3 children in every group" in text
    assert "within 0.3 of the real value" not in text
    # named on the cover and in the quality table
    cover = _text(html[:html.index('<nav class="toc"')])
    assert "the evidence is weak for" in cover and "mean_parity" in cover
    assert "pass; weak evidence" in html  # the glance chart's word for it


def test_spec_validate_states_the_weak_evidence_conditions(births_spec_path):
    """Before: spec validate said nothing about noise against thresholds."""
    r = runner.invoke(app, ["spec", "validate", str(births_spec_path)], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "acceptance[0] (kway): weak evidence when n is 28,284 records or fewer" in out
    assert "acceptance[2] (mean_parity): weak evidence when its smallest group holds 9,428 records or fewer" in out
    assert "acceptance[1] (ratio): weak evidence when some value of some column has 90 or fewer synthetic records" in out
    assert "(regression)" not in out  # the noise is inside the fit: no rule


@pytest.fixture(scope="module")
def small_births_csv(tmp_path_factory):
    from dpbundle.release.data.example import write_example

    path = tmp_path_factory.mktemp("data") / "births_small.csv"
    write_example(path, rows=1200, seed=7)
    return path


def test_spec_validate_with_data_warns_of_weak_evidence(births_spec_path, small_births_csv):
    """1,200 records: kway's noise std sqrt(2)/(0.01 n) = 0.12 against 0.01."""
    r = runner.invoke(app, ["spec", "validate", str(births_spec_path), "--data", str(small_births_csv)],
                      env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    assert "warning acceptance[0] (kway): noise std" in out and "a pass would be weak evidence" in out
    assert "(computed on this data: private)" in out


def test_sweep_warns_of_weak_evidence_before_its_runs(tmp_path, small_births_csv):
    from rich.console import Console

    from conftest import small_births_doc
    from dpbundle.release.sweep.run import run_sweep
    from test_sweep import StandIn

    spec = tmp_path / "small.yaml"
    spec.write_text(yaml.safe_dump(small_births_doc([0.25]), sort_keys=False), "utf-8")
    buf = io.StringIO()
    run_sweep(spec, small_births_csv, tmp_path / "S", reps=1, max_reps=1, sample=1, workers=1,
              iteration=StandIn(), progress=False, report=False, utility="none",
              console=Console(file=buf, width=300))
    out = " ".join(buf.getvalue().split())
    assert "warning acceptance[0] (kway): noise std" in out and "weak evidence" in out


# --------------------------------------------------------------------------- 2.6 negative DP values

def test_negative_dp_values_are_explained_once():
    """Before: the fake's mean_parity (-0.0123) was printed without a word."""
    html = _html(_rel())
    text = _text(html)
    assert text.count("Negative DP values.") == 1
    assert "The DP value of mean_parity (\u22120.0123 children) is below the smallest value the exact error can take" in text
    assert "not that an error is negative" in text

    def positive(metrics):
        for m in metrics:
            m["dp_value"] = abs(m["dp_value"])
    assert "Negative DP values" not in _text(_html(_rel(metrics=positive)))


# --------------------------------------------------------------------------- 3: readable by the public

def test_numbers_for_people():
    assert noisy(9.15364, 1.75) == "9.2"            # to the second significant digit of the noise
    assert noisy(0.00424453, 0.000856) == "0.00424"
    assert noisy(-0.100935, 2.26) == "\u22120.1"
    assert noisy(1597.3, 1500) == "1,600"
    assert std_text(161.155) == "160" and std_text(0.000856) == "0.00086"
    assert plain(2.2791503327559487e-05) == "0.0000227915"   # never 2.27915e-05
    assert plain(0.7600000000000001) == "0.76" and plain(21590.4) == "21,590.4" and plain(1234567) == "1,234,567"
    assert with_unit("100", "g") == "100\u00a0g" and with_unit("1", "weeks") == "1\u00a0week"
    assert with_unit("1", "hours") == "1\u00a0hour" and with_unit("2", "hours") == "2\u00a0hours"


def test_units_and_plain_numbers_in_the_datasheet():
    rel = _rel(metrics=_weak_and_strong)
    html = _html(rel)
    text = _text(html)
    # births.yaml's units: g, weeks, children (parity), years
    assert "an error below 100 g in every group" in text
    assert "an error below 1 week in every group" in text
    assert "within 5 g of that of a regression fitted on the real data" in text
    assert not re.search(SCIENTIFIC, text), re.search(r".{40}\d[eE][+-]?\d.{20}", text)
    assert "format(x" not in text
    # a DP value is rounded to what its noise supports: kway 0.004 with std 0.0014 -> "0.0040";
    # faithfulness 0.0312358 with std 0.71 -> "0.03" (metrics.csv keeps 0.0312358)
    assert ">0.0040<" in html and ">0.03<" in html and "0.0312358" not in html


def test_column_provenance_in_words():
    spec = census_spec()
    cfg = {"columns": {c["name"]: c["alternatives"][0]["id"] for c in spec["columns"]}}
    assert provenance_text(spec, cfg, "age", "years") == (
        "age = \u201cage code\u201d + 16 (input column \u201cage code\u201d), clipped to the range 17 to "
        "75\u00a0years, in the bins listed")
    assert provenance_text(spec, cfg, "sex") == "input column \u201csex\u201d, recoded: Male \u2192 male; Female \u2192 female"
    text = _text(_html(_rel()))
    assert "Source: input column \u201cbirth_weight\u201d, clipped to the range 1,400 to 4,500 g, in the bins listed." in text
    assert "Source: the month (1 to 12) of the input column \u201cdate_of_birth\u201d" in text
    assert "from date_of_birth (month)" not in text  # the internal form of before


def test_one_version_everywhere():
    from dpbundle.release import __version__

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == version
    r = runner.invoke(app, ["--version"])
    assert r.output.strip() == f"dpbundle {version}"
    assert f"dpbundle {version}" in (ROOT / "README.md").read_text(encoding="utf-8")
    ctx = context_of(_rel(), version=version)
    assert f"with dpbundle {version}" in _text(datasheet.render_html(ctx))


def test_datasheet_parts_motivation_maintenance_citation_version():
    def full(spec):
        spec["release"].update(motivation="To let researchers study birth outcomes.",
                               mandate="Statistics Act, section 12.", maintenance="Errata at example.org/errata.",
                               citation="Office (2026). Births, v2.", version="2.0")

    text = _text(_html(_rel(spec=full)))
    for words in ("Why this release exists", "Motivation. To let researchers study birth outcomes.",
                  "Mandate. Statistics Act, section 12.", "Errata at example.org/errata.",
                  "Office (2026). Births, v2.", "Release version 2.0", "This is version 2.0 of the release."):
        assert words in text, words
    bare = _text(_html(_rel(spec=lambda s: [s["release"].pop(k, None) for k in ("version", "citation")])))
    assert "Why this release exists" not in bare and "Release version" not in bare
    assert "the specification states no maintenance plan" in bare
    assert "National statistics office (example) (2026). Live births, one year" in bare  # made from the files


def test_pictures_are_svg_with_their_words():
    rel = _rel()
    ctx = context_of(rel)
    for key in ("glance_chart", "budget_chart", "epsilon_chart", "criteria_chart"):
        root = ET.fromstring(ctx[key])
        assert root.get("role") == "img" and root.get("aria-label"), key
    budget = ET.fromstring(ctx["budget_chart"])
    legend = [t.text for t in budget.iter(f"{SVG}text")]
    assert any(t.startswith("generator (privbayes), 2 \u00d7 4") for t in legend)
    assert any(t.startswith("acceptance criteria, 2 \u00d7 0.99") for t in legend)
    assert any(t == "cap 10" for t in legend)
    eps = [t.text for t in ET.fromstring(ctx["epsilon_chart"]).iter(f"{SVG}text")]
    assert {"0.1", "1", "10", "100"} <= set(eps) and "This release" in eps
    # the ratio criterion's band on every one-way bar (public: released counts and the threshold)
    first = ET.fromstring(ctx["columns"][0]["chart"])
    bands = [r for r in first.iter(f"{SVG}rect") if r.get("fill") == charts._BAND]
    assert len(bands) == 1 + len(ctx["columns"][0]["labels"])  # the legend's swatch and one per bar
    assert charts._ratio_band(99, 2.0, 1.0) == (49.0, 199.0)
    # quality at a glance sits on the cover
    html = datasheet.render_html(ctx)
    assert html.index("Quality at a glance") < html.index('<nav class="toc"')


def _page_fills(html: str) -> list[float]:
    """The share of each page's content height that holds text, a row or a picture."""
    from weasyprint import HTML

    leaf = ("LineBox", "TableRowBox")
    fills = []
    for page in HTML(string=html).render().pages:
        box = page._page_box
        top, bottom = box.content_box_y(), box.content_box_y()

        def walk(b):
            nonlocal bottom
            for c in getattr(b, "children", None) or []:
                name = type(c).__name__
                if name == "MarginBox":
                    continue
                if name in leaf or "Replaced" in name:
                    bottom = max(bottom, c.position_y + c.margin_height())
                if name != "LineBox":
                    walk(c)
        walk(box)
        fills.append((bottom - top) / box.height)
    return fills


def test_no_page_is_left_a_third_empty():
    fills = _page_fills(_html(_rel()))
    assert all(f >= 2 / 3 for f in fills[:-1]), [round(f, 2) for f in fills]


def test_the_pdf_draws_every_word_of_the_html():
    """The audit's word comparison, on a datasheet with every picture and part."""
    from dpbundle.audit.checks_docs import pdf_pages
    from dpbundle.templates.datasheet.words import compare_pdf_words

    def full(spec):
        spec["release"].update(motivation="Why.", maintenance="Errata.", version="1.0")

    html = _html(_rel(spec=full, metrics=_weak_and_strong))
    pages = pdf_pages(datasheet.render_pdf_bytes(html))
    assert compare_pdf_words(pages, html, "Live births, one year (differentially private synthetic records)") == []


# --------------------------------------------------------------------------- the examples end to end

@pytest.fixture(scope="module")
def births_release(tmp_path_factory):
    d = tmp_path_factory.mktemp("births")
    res = runner.invoke(app, ["release", "--stop-probability", "0", "--example", "births", "--out", str(d / "B"), "--ledger",
                              str(d / "l.jsonl"), "--transcript", str(d / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return d / "B"


@pytest.mark.slow
def test_births_example_verifies_and_keeps_its_pages_full(births_release):
    from dpbundle.audit.runner import run_audit

    rep = run_audit(births_release, pubkey=births_release.parent / "B.demo-key.pub")
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    html = (births_release / "README.html").read_text(encoding="utf-8")
    fills = _page_fills(html)
    assert all(f >= 2 / 3 for f in fills[:-1]), [round(f, 2) for f in fills]
    text = _text(html)
    assert "an error below 100 g in every group" in text and "an error below 1 week in every group" in text
    # births.yaml says source_kind: registry; --example marks it simulated (issue 35)
    assert "a simulated registry" in text and "confidential registry" not in text


@pytest.fixture(scope="module")
def census_release(tmp_path_factory):
    d = tmp_path_factory.mktemp("census")
    spec = d / "census.yaml"
    spec.write_text(census_spec_text(), encoding="utf-8")
    data = simulate_census(d / "census.csv")
    assert runner.invoke(app, ["keygen", "--out", str(d / "k")]).exit_code == 0
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(d / "B"), "--key", str(d / "k.key"),
                              "--ledger", str(d / "l.jsonl"), "--transcript", str(d / "t.jsonl")])
    assert res.exit_code == 0, res.output
    return d


@pytest.mark.slow
def test_census_walkthrough_datasheet(census_release):
    """docs/spec.md's census walkthrough: units, plain numbers, weak checks named, no births or
    stakeholder wording, n as a DP count; the public audit verifies it."""
    from dpbundle.audit.runner import run_audit

    d = census_release
    rep = run_audit(d / "B", pubkey=d / "k.pub")
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    html = (d / "B" / "README.html").read_text(encoding="utf-8")
    text = _text(html)
    assert "an error below 1.5 hours in every group" in text
    # the number's decimals follow its noise's std (two significant digits), which follows the
    # smallest group of the (random) released table: one or two decimals, or none
    assert re.search(r"noisy measurement \u2212?\d+(\.\d+)? hours against the threshold 1\.5 hours", text)
    cover = _text(html[:html.index('<nav class="toc"')])
    assert "Weak evidence" in text and "the evidence is weak for 1 of them (mean_hours)" in cover
    assert "The share of records whose income is >50K, by group" in text
    assert not re.search(SCIENTIFIC, text)
    lowered = text.lower()
    assert "stakeholder" not in lowered
    assert not [w for w in BIRTHS_WORDS if w.lower() in visible_text(html).lower()]
    assert "a confidential census" in text and "set by the statistics office's methodology unit" in text
    assert "age = \u201cage code\u201d + 16" in text
    n = json.loads((d / "B" / "manifest.json").read_text())["n"]
    assert_n_follows_dp_count(html, n)
