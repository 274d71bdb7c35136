"""Issue 35, the datasheet's words (edition 2): simulated data said as such, the composed privacy
loss over every recorded run, what a mean over bins measures, the noise test as a test, and no
raw machine text. Each test renders a datasheet from the public files of a real bundle."""
from __future__ import annotations

import json
import math
import re

import pytest

from dpbundle.mechanisms.coding import ColumnCoding  # noqa: F401  (the codings the tests read)
from i35_datasheet_util import PRECHANGE, context_of, cover_of, html_of, public_of, section_text, text_of

SPEND_ID = "0" * 32


def _total(name: str) -> float:
    return json.loads((PRECHANGE / f"{name}-bundle" / "budget.json").read_text())["total_epsilon"]


# --------------------------------------------------------------------------- simulated data

def _count_published(budget: dict) -> None:
    """budget.json as a release whose spec declares the number of records public."""
    budget.pop("records", None)


@pytest.mark.parametrize("flag", [True, False])
def test_simulated_data_is_said_on_page_one_iff_the_spec_says_so(flag):
    html = html_of("births", release={"simulated": flag}, patch={"budget.json": _count_published})
    cover, text = cover_of(html), text_of(html)
    assert ("SIMULATED DATA" in cover) is flag
    assert ("simulated registry" in text) is flag
    # the description's "from the national registry" is reframed on the cover when simulated
    if flag:
        desc = cover[cover.index("Simulated example"):]
        assert desc.index("Simulated example:") < desc.index("national registry")
        assert "The number of records equals the simulated registry\u2019s count" in text
        assert "equals the real count" not in text
        assert "confidential registry" not in text
    else:
        assert "The number of records equals the real count" in text
        assert "simulated" not in text.lower()


def test_a_flag_that_is_not_true_is_not_simulated():
    for value in ("true", 1, None):
        assert "SIMULATED" not in cover_of(html_of("births", release={"simulated": value}))


def test_edition_1_never_says_simulated():
    assert "SIMULATED" not in html_of("births", version="0.2.0", release={"simulated": True})


# --------------------------------------------------------------------------- composed spends

def _ledger(earlier: list[float], name: str = "births") -> dict:
    return {"spends_on_registry": len(earlier) + 1, "spend_id": SPEND_ID, "earlier_epsilons": earlier,
            "composed_epsilon": round(_total(name) + sum(earlier), 10)}


def test_the_seventh_run_states_the_composed_loss_and_the_cap_does_not_claim_to_bound_it():
    earlier = [1.5, 0.25, 2, 0.0, 3, 0.75]
    composed = _total("births") + sum(earlier)
    html = html_of("births", ledger=_ledger(earlier))
    privacy, budget = section_text(html, "privacy"), section_text(html, "budget")
    shown = f"{composed:.6g}"
    for part in (privacy, budget, cover_of(html)):
        assert shown in part, part[:300]
    assert "7th recorded run" in privacy and "7th run" in budget
    assert "bounds this release\u2019s total only" in privacy
    assert "it does not bound that sum" in budget
    assert "the total is bounded by the cap" not in privacy
    # the earlier runs' epsilons are listed, runs that released nothing (epsilon 0 here too) included
    assert "1.5, 0.25, 2, 0, 3, 0.75" in budget
    # the e^epsilon reading of the composed loss
    assert f"{math.exp(composed) / 1e6:.3g} million" in privacy


def test_the_only_recorded_run_says_so():
    html = html_of("births", ledger=_ledger([]))
    assert "This is the only run on the registry" in section_text(html, "privacy")
    assert "only one on the registry" in section_text(html, "budget")
    assert "recorded runs" not in text_of(html)


def test_a_bundle_without_ledger_says_nothing_is_stated():
    text = section_text(html_of("births"), "budget")
    assert "states no budget ledger record" in text


def test_the_composed_row_joins_the_epsilon_table():
    ctx = context_of("births", ledger=_ledger([2.5, 1]))
    rows = {r["name"]: r for r in ctx["epsilon_scale"]["rows"]}
    assert rows["All 3 recorded runs on these people"]["value"] == pytest.approx(_total("births") + 3.5)


# --------------------------------------------------------------------------- what a mean measures

def _open_bins(public, column: str) -> list[tuple[str, float]]:
    col = next(c for c in public.columns if c.name == column)
    return [(lab, float(v)) for lab, v, lo, up in zip(col.labels, col.values, col.lower, col.upper)
            if math.isinf(lo) or math.isinf(up)]


@pytest.mark.parametrize("name, crit, column", [("persons", "mean_hours", "hours"),
                                               ("births", "mean_weight", "birth_weight")])
def test_a_mean_says_it_is_of_the_codebook_numbers_and_names_the_open_bins(name, crit, column):
    public = public_of(name)
    ctx = context_of(name)
    sentence = next(u["text"] for u in ctx["uses"] if u["id"] == crit)
    assert "codebook.csv" in sentence
    opens = _open_bins(public, column)
    assert opens, "the example has open bins"
    for label, number in opens:
        assert f"\u201c{label}\u201d counts as {number:,.6g}" in sentence


def test_edition_1_keeps_its_mean_sentence():
    ctx = context_of("persons", version="0.2.0")
    sentence = next(u["text"] for u in ctx["uses"] if u["id"] == "mean_hours")
    assert "codebook.csv" not in sentence


# --------------------------------------------------------------------------- the noise test, the ledger claim

def test_the_enclave_noise_check_is_a_test_with_a_false_alarm_rate():
    ctx = context_of("births", ledger=_ledger([1]))
    enclave = " ".join(ctx["verification"]["enclave"])
    assert "statistical test" in enclave and "10\u207b\u2076 per audit" in enclave
    assert "has the declared distributions" not in enclave
    assert "the bundle states is the private budget ledger's" not in enclave
    assert "budget ledger records what this bundle states: 2 recorded runs" in enclave


# --------------------------------------------------------------------------- raw machine text

RAW = [r"\ba aim_pure\b", r"\baim_pure\b", r"\bprivsyn\b", r"\bprivbayes\b", r"\bmst_pure\b", r"derive =",
       r"laplace_false_positive", r"\(from \d", r"Roughly"]


@pytest.mark.parametrize("name", ["births", "persons"])
def test_no_raw_machine_text_in_the_visible_text(name):
    html = html_of(name, patch={"metrics.json": _derived_ratio} if name == "births" else None)
    # the R and Stata programs and the configuration's keys are code; the rest is for people
    text = text_of(re.sub(r"(?s)<pre class=\"code\">.*?</pre>", " ", html))
    for pattern in RAW:
        found = re.findall(pattern, text)
        assert not found, (pattern, found[:3])


# a derived threshold as metrics.json of an example release states it (the prechange bundle's is given)
DERIVED = {"threshold": 1.4095938918, "stakeholder_threshold": 2,
           "threshold_inputs": {"derive": "laplace_false_positive", "stakeholder": 2, "false_positive": 0.05,
                                "epsilon": 0.3, "assumed_min_count": 50, "clip": 2,
                                "assumed_sensitivity": 0.0769230769, "scale": 0.2564102564,
                                "laplace_quantile": 0.5904061082,
                                "formula": "stakeholder - F^-1_Laplace(1 - false_positive; assumed_sensitivity / epsilon)"}}


def _derived_ratio(metrics: dict) -> None:
    m = next(r for r in metrics["criteria"] if r["id"] == "ratio")
    m.update(DERIVED, dp_value=1.2)


def test_the_derived_threshold_is_a_sentence_that_gives_the_rounded_threshold():
    ctx = context_of("births", patch={"metrics.json": _derived_ratio})
    ratio = next(c for c in ctx["criteria"] if c["id"] == "ratio")
    m = DERIVED
    # rounded like the DP value it is compared with: to the second significant digit of its noise's std
    metrics = json.loads((PRECHANGE / "births-bundle" / "metrics.json").read_text())["criteria"]
    std = next(r for r in metrics if r["id"] == "ratio")["noise_std"]
    d = 1 - math.floor(math.log10(std))
    assert ratio["threshold"] == f"{round(m['threshold'], d):.{d}f}" == ratio["threshold_people"]
    assert f"less than {ratio['threshold']} " in ratio["text"] and "1.40959" not in ratio["text"]
    assert "(derived from 2)" in section_text(html_of("births", patch={"metrics.json": _derived_ratio}), "quality")
    inputs = m["threshold_inputs"]
    words = ratio["threshold_derivation"]
    assert words.startswith("Derived from the stakeholders\u2019 2:")
    assert f"{100 * inputs['false_positive']:g}%" in words
    assert f"2 \u2212 {inputs['laplace_quantile']:.3g}".rstrip("0") in words
    assert f"= {m['threshold']:.3g}" in words


def test_the_faithfulness_share_is_rounded_to_its_noise():
    ctx = context_of("births")
    metrics = json.loads((PRECHANGE / "births-bundle" / "metrics.json").read_text())["criteria"]
    m = next(r for r in metrics if r["id"] == "faithfulness")
    share = ctx["faithfulness"]["share_pct"]
    decimals = len(share.split(".")[1]) if "." in share else 0
    std = 100 * m["noise_std"]
    # the datasheet's rule: to the second significant digit of the noise's standard deviation
    assert 10 ** -decimals <= std < 10 ** (2 - decimals)
    assert ctx["faithfulness"]["share_std"] in section_text(html_of("births"), "faithfulness")


def test_the_generator_has_its_human_name():
    text = text_of(html_of("persons"))
    assert "the PrivSyn generator was trained" in text
    text = text_of(html_of("births"))
    assert "the PrivBayes generator was trained" in text


def test_the_r_program_is_kept_with_its_heading():
    html = html_of("births")
    assert re.search(r'<div class="code-block">\s*<p class="code-label"><strong>R</strong> \(package readr\):</p>\s*'
                     r'<pre class="code">', html)
    from dpbundle.templates.datasheet.render import read_resource

    css = read_resource("datasheet.css")
    assert re.search(r"div\.code-block\s*\{[^}]*break-inside:\s*avoid", css)


# --------------------------------------------------------------------------- charts

def _alt(svg: str) -> str:
    m = re.match(r"(?s)<svg\b[^>]*><title>(.*?)</title>", svg)
    assert m, svg[:200]
    import html as html_mod

    return html_mod.unescape(m.group(1))


def test_the_epsilon_chart_shades_by_what_the_page_says():
    ctx = context_of("births", ledger=_ledger([2.5, 1]))
    svg = ctx["epsilon_chart"]
    assert "weak protection above" not in svg
    alt = _alt(svg)
    for row in ctx["epsilon_scale"]["rows"]:
        band = re.search(re.escape(row["short"]) + r": \u03b5 = [\d.,]+, a 1% suspicion can become (up to|above) "
                         r"([\d.]+)%", alt)
        assert band, (row["short"], alt)
        page = row["posterior"]            # the table's "a 1% suspicion can become at most ..."
        p = 99.95 if page.startswith("more than") else float(page.rstrip("%"))
        level = float(band.group(2))
        assert (p <= level) if band.group(1) == "up to" else (p > level), (row["short"], page, band.group(0))
    # 9.98 (the Israeli release) is in the darkest band, as the page's 99.5% says
    assert re.search(r"Israel 2024 registry release: \u03b5 = 9\.98, a 1% suspicion can become above 99%", alt)


def test_both_criteria_charts_put_a_criterion_at_the_same_place():
    ctx = context_of("births", patch={"metrics.json": _derived_ratio})
    crit = dict(re.findall(r"(\w+) (\u2212?[\d.]+)(?: \u00b1 [\d.]+)? \((?:pass|fail)\)", _alt(ctx["criteria_chart"])))
    glance = dict(re.findall(r"(\w+): value (\u2212?[\d.]+)", _alt(ctx["glance_chart"])))
    assert crit and crit == glance
    # the ratio measured from its smallest value, 1: (1.2 - 1) / (1.40959 - 1)
    assert float(crit["ratio"]) == pytest.approx((1.2 - 1) / (DERIVED["threshold"] - 1), abs=0.01)
    assert "from the smallest possible value" in ctx["criteria_chart"]
