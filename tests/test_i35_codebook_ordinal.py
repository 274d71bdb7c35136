"""Ordinal categories (a categorical alternative's ``ordered: true``, datapackage.json's
``categoriesOrdered``) are read back from codebook.csv as categories, as the release codes them:
the datasheet's re-render then rebuilds the same criterion designs and the same value-noise
estimates (a fit over education as one number would silently drop the classification's)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys

import pytest

from dpbundle.templates.datasheet.codebook import read_codebook

HEADER = "column,order,label,lower,upper,number,unit,description\n"


def _codebook(rows: list[str]) -> bytes:
    return (HEADER + "".join(r + "\n" for r in rows)).encode()


def test_an_ordinal_category_column_stays_a_category_and_a_binned_one_stays_binned():
    data = _codebook(["education,1,basic,,,1,,Education", "education,2,graduate,,,2,,Education",
                      "age,1,<30,,30,25,years,Age", "age,2,30+,30,,30,years,Age"])
    cols, _, _ = read_codebook(data, ["education", "age"], {"education": True, "age": True})
    by = {c.name: c for c in cols}
    assert by["education"].ordered is False      # categoriesOrdered alone does not make it binned
    assert by["age"].ordered is True


@pytest.mark.slow
def test_the_persons_example_datasheet_keeps_the_classification_noise_estimate(tmp_path):
    out = tmp_path / "persons"
    code = ("import sys; from dpbundle.release.cli import main; sys.argv = ['dpbundle', 'release', "
            f"'--example', 'persons', '--out', {str(out)!r}, '--ledger', {str(tmp_path / 'ledger.jsonl')!r}]; main()")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={**os.environ, "DPBUNDLE_PRIVATE_DIR": str(tmp_path / "private")})
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    package = json.loads((out / "datapackage.json").read_text())
    fields = {f["name"]: f for f in package["resources"][0]["schema"]["fields"]}
    assert fields["education"]["categoriesOrdered"] is True
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO((out / "metrics.csv").read_text()))}
    fits = [i for i, r in rows.items() if r["noise_on"] == "inside_fit"]
    assert fits, "the persons example has a criterion with noise inside a fit"
    html = (out / "README.html").read_text()
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&#39;", "'")
    for i in fits:
        assert rows[i]["value_noise_std"] != ""
        # the datasheet gives the fit's effect on the value ("the noise alone adds about ...")
        assert re.search(rf"{i} : noisy measurement [^;\]]*; the noise is inside the fit and alone adds about", text), i
    # the audit re-renders the datasheet from the public files: the same bytes
    audit = subprocess.run([sys.executable, "-m", "dpbundle.audit", str(out), "--pubkey",
                            str(tmp_path / "persons.demo-key.pub")], capture_output=True, text=True)
    assert audit.returncode == 0, audit.stdout[-3000:]


def test_the_stop_arithmetic_says_its_acceptance_figures_are_in_sample():
    """Issue 35: the 'auto' stop probability's chance of releasing nothing assumes the rate of
    the sample that chose the list; the console says so beside the arithmetic."""
    from dpbundle.release.scheme.stopping import nothing_chance, plan_stop

    plan = plan_stop("auto", 0.0, [0.87, 0.87], [0.84, 0.84])
    lines = plan.lines()
    assert any("in-sample" in line and "lower" in line for line in lines)
    # the number printed for the held-out rate is worse than the in-sample one
    assert nothing_chance(0.52, plan.gamma) > nothing_chance(0.84, plan.gamma)
    assert not any("in-sample" in line for line in plan_stop(None, 0.1, None, None).lines())
