"""Issue 39, part 1 (its second half): a starting spec from a published data dictionary
(`dpbundle spec from-dictionary`, release/spec/dictionary.py).

- the equal-width edges obey the spec's bin rules (first edge the clip minimum, the last bin
  holding the clip maximum) for every range tried, with a round width and about the bins asked;
- NIST's ACS excerpt dictionary (examples/data): which columns are kept and how, which are left
  out and why; the spec passes `spec validate`;
- end to end: the spec of a few dictionary columns, a registry in the dictionary's format, release,
  public audit and enclave replay; data.csv speaks the dictionary's labels;
- bad dictionaries and requests: exit 2 naming the entry and the rule; nothing written.
"""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_i39_dp_tables import _audit  # noqa: E402

from dpbundle.release.spec.dictionary import (DictionaryError, dictionary_spec, equal_width_edges,  # noqa: E402
                                              read_dictionary)

ROOT = Path(__file__).resolve().parents[1]
NIST = ROOT / "examples" / "data" / "acs_excerpt_data_dictionary.json"
runner = CliRunner()


def _cli(*args):
    from dpbundle.release.cli.main import app

    return runner.invoke(app, [str(a) for a in args])


@pytest.mark.parametrize("integer", [True, False])
def test_equal_width_edges_obey_the_bin_rules(integer):
    rng = np.random.default_rng(1 if integer else 2)
    for _ in range(500):
        lo = int(rng.integers(-10_000, 10_000)) if integer else float(rng.uniform(-1e4, 1e4))
        hi = lo + (int(rng.integers(1, 10 ** int(rng.integers(1, 7)))) if integer
                   else float(rng.uniform(0.01, 10 ** float(rng.uniform(-1, 6)))))
        bins = int(rng.integers(2, 30))
        e = equal_width_edges(lo, hi, bins, integer)
        assert e[0] == lo and e[-2] <= hi < e[-1], (lo, hi, bins, e)
        assert all(b > a for a, b in zip(e, e[1:]))
        widths = np.diff(e)
        assert np.allclose(widths, widths[0], rtol=1e-6)      # edges are written to 12 digits
        assert len(e) - 1 <= bins + 1                      # about the bins asked, never many more
        if integer:
            assert all(isinstance(x, int) for x in e)
        mantissa = widths[0] / 10 ** np.floor(np.log10(widths[0]))
        assert any(np.isclose(mantissa, m) for m in (1, 2, 2.5, 5, 10)) or (integer and widths[0] == int(widths[0]))


def test_the_nist_dictionary_gives_a_valid_spec(tmp_path):
    doc, notes = dictionary_spec(read_dictionary(NIST))
    left = {n.split(":")[0]: n for n in notes}
    assert set(left) == {"INDP", "WGTP", "PWGTP"}
    assert "no codes and no range" in left["INDP"] and "weight" in left["PWGTP"] and "weight" in left["WGTP"]
    cols = {c["name"]: c for c in doc["columns"]}
    assert list(cols)[:3] == ["PUMA", "AGEP", "SEX"] and len(cols) == 21
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    # codes beside a wide range: special values (N: not applicable); POVPIP's 501 widens the range
    assert inputs["PINCP"]["special"] == [{"value": "N", "label": "N/A (less than 15 years old)",
                                           "kind": "not_applicable"}]
    assert inputs["POVPIP"]["max"] == 501 and [s["value"] for s in inputs["POVPIP"]["special"]] == ["N"]
    assert [a["id"] for a in cols["AGEP"]["alternatives"]] == ["values", "bins10"]
    assert cols["AGEP"]["alternatives"][1]["edges"] == list(range(0, 101, 10))
    sex = cols["SEX"]["alternatives"][0]
    assert sex["categories"] == ["Male", "Female"] and sex["map"] == {"1": "Male", "2": "Female"}
    noc = cols["NOC"]["alternatives"][0]          # "N", "0" and the range 1..19: 21 categories
    assert noc["categories"][:3] == ["N/A (GQ/vacant)", "No own children", "1"] and len(noc["categories"]) == 21
    assert cols["DENSITY"]["alternatives"][0]["edges"][0] == 16.3
    dictionary = json.loads(NIST.read_text())
    inputs = {c["name"]: c for c in doc["input"]["columns"]}
    assert inputs["EDU"]["categories"] == [k for k in dictionary["EDU"]["values"]]
    assert inputs["AGEP"]["type"] == "integer" and inputs["DENSITY"]["type"] == "float"
    out = tmp_path / "acs.yaml"
    res = _cli("spec", "from-dictionary", NIST, "--out", out)
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(out.read_text()) == doc
    assert out.read_text().startswith("# A starting spec written by `dpbundle spec from-dictionary`")
    res = _cli("spec", "validate", out)
    assert res.exit_code == 0 and "valid release spec" in res.output, res.output


def test_labels_that_repeat_fall_back_to_the_codes(tmp_path):
    d = {"A": {"description": "a", "values": {"1": "Yes", "2": "Yes", "3": "No"}},
         "B": {"description": "b", "values": {"x": "one", "y": "two"}}}
    doc, notes = dictionary_spec(d)
    alts = {c["name"]: c["alternatives"][0] for c in doc["columns"]}
    assert alts["A"]["categories"] == ["1", "2", "3"] and alts["B"]["categories"] == ["one", "two"]
    assert notes == []


def _registry(path: Path, dictionary: dict, keys: list[str], rows: int, seed: int) -> None:
    """A registry in the dictionary's format: each cell a listed code or an integer of the range
    (floats: a value of the range), with some dependence between the first two columns."""
    rng = np.random.default_rng(seed)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(keys)
    for _ in range(rows):
        row = []
        for k in keys:
            v = dictionary[k]["values"]
            codes = [c for c in v if c not in ("min", "max")]
            if "min" in v and (not codes or rng.random() < 0.8):
                lo, hi = v["min"], v["max"]
                row.append(int(rng.integers(lo, hi + 1)) if isinstance(lo, int) else round(float(rng.uniform(lo, hi)), 1))
            else:
                row.append(codes[int(rng.integers(len(codes)))])
        w.writerow(row)
    path.write_text(out.getvalue())


def test_a_dictionary_spec_releases_and_audits(tmp_path):
    keys = ["AGEP", "SEX", "MSP", "NOC", "EDU", "DENSITY"]
    dictionary = read_dictionary(NIST)
    spec = tmp_path / "spec.yaml"
    res = _cli("spec", "from-dictionary", NIST, "--columns", ",".join(keys), "--bins", "5", "--out", spec,
               "--title", "Census persons from the dictionary (test)")
    assert res.exit_code == 0, res.output
    _registry(tmp_path / "reg.csv", dictionary, keys, 3000, 5)
    assert _cli("keygen", "--out", tmp_path / "k").exit_code == 0
    (tmp_path / "private").mkdir(mode=0o700)
    args = ("release", spec, tmp_path / "reg.csv", "--out", tmp_path / "B", "--key", tmp_path / "k.key",
            "--ledger", tmp_path / "ledger.jsonl", "--transcript", tmp_path / "private" / "t.jsonl")
    # the placeholders left: refused before anything is read or spent
    res = _cli(*args)
    text = " ".join(res.output.split())
    assert res.exit_code == 2 and "release.publisher, release.contact, release.description" in text, text
    assert "release.title" not in text and "nothing was read or spent" in text   # --title set it
    assert not (tmp_path / "B").exists() and not (tmp_path / "ledger.jsonl").exists()
    res = _cli("spec", "validate", spec)
    assert res.exit_code == 0 and 'still say "CHANGE ME"' in " ".join(res.output.split())
    doc = yaml.safe_load(spec.read_text())
    doc["release"].update(publisher="Statistics office (test)", contact="open-data@example.org",
                          description="Synthetic census persons (test).", unit_of_privacy="one person")
    doc["acceptance"][0]["threshold"] = 1.0      # every candidate passes: no stop draw ends the run
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = _cli(*args)
    assert res.exit_code == 0, res.output
    code, checks = _audit(tmp_path / "B", "--pubkey", tmp_path / "k.pub", "--transcript",
                          tmp_path / "private" / "t.jsonl", "--data", tmp_path / "reg.csv")
    assert code == 0 and checks["replay"]["result"] == "pass", {k: v["result"] for k, v in checks.items()}
    rows = list(csv.DictReader(io.StringIO((tmp_path / "B" / "data.csv").read_text())))
    assert list(rows[0]) == keys
    assert {r["SEX"] for r in rows} <= {"Male", "Female"}
    assert {r["NOC"] for r in rows} <= {"N/A (GQ/vacant)", "No own children", *map(str, range(1, 20))}
    # --bins 5 over 16.3..52864.7: the round width 20,000 (10,570 rounded up), 3 bins
    assert {r["DENSITY"] for r in rows} <= {"16.3-20016.3", "20016.3-40016.3", "40016.3-60016.3"}
    chosen = json.loads((tmp_path / "B" / "spec.json").read_text())["configuration"]["columns"]["AGEP"]
    ages = {"values": {str(a) for a in range(100)},                 # one bin per value, or 20 years a bin
            "bins5": {f"{a}-{a + 19}" for a in range(0, 100, 20)}}[chosen]
    assert {r["AGEP"] for r in rows} <= ages



@pytest.mark.parametrize("content,message", [
    ("[]", "a JSON object with one entry per column"),
    ('{"A": 3}', "entry 'A': must be an object"),
    ('{"A": {"values": []}}', "entry 'A': 'values' must be an object"),
    ('{"A": {"values": {"min": 1}}}', "entry 'A': a range needs both values.min and values.max"),
    ('{"A": {"values": {"min": 5, "max": 5}}}', "entry 'A': values.max must be larger than values.min"),
    ('{"A": {"values": {"min": true, "max": 5}}}', "entry 'A': values.min must be a number"),
    ('{"A": {"values": {"1": ["x"]}}}', "entry 'A': every code's label must be a text"),
    ("{not json", "not a JSON file"),
    ('{"W": {"description": "Person weight", "values": {"min": 1, "max": 9}}}', "no entry of the dictionary can be released"),
])
def test_bad_dictionaries_are_refused_naming_the_entry(tmp_path, content, message):
    path = tmp_path / "dict.json"
    path.write_text(content)
    res = _cli("spec", "from-dictionary", path, "--out", tmp_path / "spec.yaml")
    assert res.exit_code == 2 and message in " ".join(res.output.split()), res.output
    assert not (tmp_path / "spec.yaml").exists()


def test_unusable_requests_are_refused(tmp_path):
    out = tmp_path / "spec.yaml"
    res = _cli("spec", "from-dictionary", NIST, "--columns", "AGEP,NOPE", "--out", out)
    assert res.exit_code == 2 and "'NOPE' not in the dictionary" in " ".join(res.output.split())
    res = _cli("spec", "from-dictionary", NIST, "--bins", "1", "--out", out)
    assert res.exit_code == 2 and "--bins must be a whole number from 2" in " ".join(res.output.split())
    out.write_text("mine")
    res = _cli("spec", "from-dictionary", NIST, "--out", out)
    assert res.exit_code == 2 and "exists" in res.output and out.read_text() == "mine"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    res = _cli("spec", "from-dictionary", NIST, "--out", fifo, "--force")
    assert res.exit_code == 2 and "FIFO" in res.output
    res = _cli("spec", "from-dictionary", fifo, "--out", tmp_path / "x.yaml")
    assert res.exit_code == 2 and not (tmp_path / "x.yaml").exists()
    with pytest.raises(DictionaryError):
        dictionary_spec({"A": {"values": {"1": "a"}}}, bins=True)


def test_the_docs_example_is_what_the_command_writes(tmp_path):
    """docs/spec.md's excerpt ("--columns AGEP,SEX,NOC,DENSITY --bins 5") is the start of the
    released columns the command writes, and its DENSITY edges are the file's."""
    import re

    out = tmp_path / "acs.yaml"
    res = _cli("spec", "from-dictionary", NIST, "--columns", "AGEP,SEX,NOC,DENSITY", "--bins", "5", "--out", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    docs = (ROOT / "docs" / "spec.md").read_text()
    block = re.search(r"--bins 5` \(the start of the generated file\):\n\n```yaml\n(.*?)```", docs, re.S).group(1)
    assert text[text.index("columns:\n- name: AGEP"):].startswith(block)
    density = next(c for c in yaml.safe_load(text)["columns"] if c["name"] == "DENSITY")
    assert f"`edges: {density['alternatives'][0]['edges']}`".replace("'", "") in docs.replace("\n", " ")
