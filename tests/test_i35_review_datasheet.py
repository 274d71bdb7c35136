"""Issue 35, review H11: sentences of a fresh edition-2 datasheet that were still false,
misleading or unparseable. Each test renders a datasheet from the public files of a real bundle
(tests/data/prechange, read as a 0.3 release) and checks the words against those files."""
from __future__ import annotations

import csv
import io
import json
import math
import re

import pytest

from i35_datasheet_util import PRECHANGE, context_of, html_of, section_text, text_of, unescape

SPEND_ID = "0" * 32


def _doc(name: str, file: str) -> dict:
    return json.loads((PRECHANGE / f"{name}-bundle" / file).read_text("utf-8"))


# --------------------------------------------------------------------------- negative DP values

def _negative_note(html: str) -> tuple[str, dict[str, str]]:
    """The note's text, and each criterion's number in it."""
    m = re.search(r"(?s)<strong>Negative DP values\.</strong>(.*?)</p>", html)
    assert m, "no note on negative DP values"
    shown = {cid: re.match(r"[\u2212\-]?[\d.,]+", unescape(value)).group(0)
             for cid, value in re.findall(r"<code>(\w+)</code> \(([^)]*)\)", m.group(1))}
    return text_of(m.group(1)), shown


def _verify_text(html: str) -> str:
    """The last section, "How to verify this release", to the end of the page."""
    return text_of(html[html.index('<h2 id="verify">'):])


@pytest.mark.parametrize("name", ["births", "persons"])
def test_a_negative_dp_value_is_rounded_to_its_noise_as_section_6_says(name):
    """Section 6: "a number measured with noise is rounded to the second significant digit of the
    noise's standard deviation". The note on negative values printed three significant digits
    (mean_gestation -1.68 with noise std 2.6; the table says -1.7)."""
    note, shown = _negative_note(html_of(name))
    laplace = {c["id"]: c for c in _doc(name, "metrics.json")["criteria"] if c["mechanism"] == "laplace"}
    assert shown, note
    for cid, text in shown.items():
        c = laplace[cid]
        decimals = 1 - math.floor(math.log10(c["noise_std"]))   # the second significant digit of the std
        value = float(text.replace("\u2212", "-").replace(",", ""))
        assert value == pytest.approx(round(c["dp_value"], decimals)), (cid, text)
        assert len(text.partition(".")[2]) == max(decimals, 0), (cid, text)
    assert "printed as it was drawn" not in note


# --------------------------------------------------------------------------- simulated source

@pytest.mark.parametrize("flag", [True, False])
def test_a_simulated_release_does_not_address_real_people_as_if_protected(flag):
    html = html_of("births", release={"simulated": flag})
    privacy, verify = section_text(html, "privacy"), _verify_text(html)
    assert ("No real person is in the simulated registry, so this release protects and exposes no one"
            in privacy) is flag
    # "Nobody can prove ... that the simulated registry fed to the release was the real one" was nonsense
    assert ("was the real one" in verify) is not flag
    assert ("the release was made from the simulated registry it names, and from no real person" in verify) is flag


# --------------------------------------------------------------------------- the epsilon chart's shades

def test_every_shade_of_the_epsilon_chart_is_named_in_its_visible_text():
    """The chart shades six ranges of epsilon; the two narrow ones (a 1% suspicion growing to at
    most 90% and 99%) had no words, so a reader could not tell 9 (98.8%) from 9.98 (99.5%)."""
    svg = context_of("births")["epsilon_chart"]
    visible = unescape(re.sub(r"(?s)<title>.*?</title>|<desc>.*?</desc>", "", svg))
    words = re.findall(r">([^<>]+)</text>", visible)
    shades = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', visible)
    for level in ("up to 2%", "up to 10%", "up to 50%", "up to 90%", "up to 99%", "above 99%"):
        assert level in words, (level, words)
    assert len(set(shades)) >= 6


# --------------------------------------------------------------------------- the selection, section 7

def _stop(p: float):
    def patch(budget: dict) -> None:
        budget["selection"]["stop_probability"] = p
    return patch


@pytest.mark.parametrize("p, words", [(0.0, "the stop probability is 0: the selection ran until a candidate passed"),
                                      (0.5, "the selection would end there, releasing nothing, with probability 0.5")])
def test_the_budget_section_states_the_stop_probability_of_budget_json(p, words):
    budget = section_text(html_of("births", patch={"budget.json": _stop(p)}), "budget")
    assert words in budget
    # the method is no longer nested inside a parenthesis inside the sentence it interrupts
    assert "the private selection (private selection" not in budget
    assert "multiplies their sum by 2, however many candidates it tried" in budget
    process = section_text(html_of("births"), "process")
    assert "private selection algorithm (private selection" not in process


# --------------------------------------------------------------------------- open bins

def test_the_label_examples_say_what_an_open_bin_holds_from_the_codebook():
    """"<20" below the range was wrong (it is the lowest bin of the range) and "39<" was never
    explained; each example now names the codebook bound of its bin."""
    what = section_text(html_of("births"), "what")
    assert "below the range" not in what and "above it)" not in what
    rows = list(csv.DictReader(io.StringIO((PRECHANGE / "births-bundle" / "codebook.csv").read_text("utf-8"))))
    below = re.search(r"\u201c([^\u201d]+)\u201d for every value below ([\d,.]+)", what)
    above = re.search(r"\u201c([^\u201d]+)\u201d for every value of ([\d,.]+) or more", what)
    assert below and above, what
    by_label = {r["label"]: r for r in rows}
    assert by_label[below.group(1)]["lower"] == "" and \
        float(by_label[below.group(1)]["upper"]) == float(below.group(2).replace(",", ""))
    assert by_label[above.group(1)]["upper"] == "" and \
        float(by_label[above.group(1)]["lower"]) == float(above.group(2).replace(",", ""))


# --------------------------------------------------------------------------- two recorded runs

def test_two_recorded_runs_are_both_not_all_2():
    total = _doc("births", "budget.json")["total_epsilon"]
    ledger = {"spends_on_registry": 2, "spend_id": SPEND_ID, "earlier_epsilons": [1.5],
              "composed_epsilon": round(total + 1.5, 10)}
    text = text_of(html_of("births", ledger=ledger))
    assert "All 2 recorded runs" not in text
    assert "Both recorded runs on these people" in text


# --------------------------------------------------------------------------- the verify commands

def test_the_verify_section_says_the_pdf_wraps_single_line_commands():
    """README.pdf wraps the allowed_signers line (112 characters) and the diff command (150):
    copied from the PDF they break (a newline after '<', a second line of allowed_signers)."""
    verify = _verify_text(html_of("births"))
    assert "is a single line: README.pdf wraps the longer ones to fit its page" in verify
    assert "copy them from README.html" in verify
