"""The R programs dpbundle publishes, run by R on released bundles (skipped where Rscript or the
readr package is missing; CI installs both: .ci/run).

- the datasheet's R program for data.csv (templates/datasheet/snippets.py): every column a factor
  with the codebook's labels in order, ordered where datapackage.json says so, and ``number_of``
  the codebook's numbers;
- docs/reading-the-data.md's R recipes: the DP count tables (one group per table, its columns)
  and the combining rules of m copies (the library's intervals to 1e-12).
"""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_i39_copies import _copies, census, persons, recipe_intervals  # noqa: E402,F401 - fixtures

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "reading-the-data.md").read_text()


def _rscript() -> str:
    exe = shutil.which("Rscript")
    if exe is None:
        pytest.skip("Rscript is not installed (Debian: r-base-core r-cran-readr)")
    probe = subprocess.run([exe, "-e", "library(readr)"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip("the R package readr is not installed (Debian: r-cran-readr)")
    return exe


def _run_r(program: str, cwd: Path) -> list[str]:
    res = subprocess.run([_rscript(), "-e", program], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return [line.strip(" ") for line in res.stdout.splitlines() if line.strip()]


def _recipe(marker: str) -> str:
    return re.search(r"```r\n(" + re.escape(marker) + r"\n.*?)```", DOC, re.S).group(1)


def test_the_datasheets_r_program_reads_data_csv_as_the_codebook_says(persons):
    from types import SimpleNamespace

    from dpbundle.templates.datasheet.snippets import r_snippet

    b = persons["bundle"]
    package = json.loads((b / "datapackage.json").read_text())
    fields = next(r for r in package["resources"] if r["path"] == "data.csv")["schema"]["fields"]
    cols = [SimpleNamespace(name=f["name"], ordered=f.get("categoriesOrdered", False)) for f in fields]
    program = r_snippet(cols) + """
for (column in names(data)) {
  cat(column, is.ordered(data[[column]]), paste(levels(data[[column]]), collapse = "|"),
      sprintf("%.17g", sum(number_of(column))), sep = "\\t")
  cat("\\n")
}
"""
    lines = _run_r(program, b)
    book = list(csv.DictReader(io.StringIO((b / "codebook.csv").read_text())))
    rows = list(csv.DictReader(io.StringIO((b / "data.csv").read_text())))
    assert len(lines) == len(cols)
    for line, col in zip(lines, cols):
        name, ordered, levels, total = line.split("\t")
        mine = [r for r in book if r["column"] == col.name]
        mine.sort(key=lambda r: int(r["order"]))
        assert name == col.name and (ordered == "TRUE") == bool(col.ordered)
        assert levels == "|".join(r["label"] for r in mine)
        number = {r["label"]: float(r["number"]) for r in mine}
        assert float(total) == pytest.approx(sum(number[r[col.name]] for r in rows), rel=1e-12)


def test_the_r_recipe_reads_every_dp_table(census):
    b = census["bundle"]
    lines = _run_r(_recipe("# dp-tables"), b)
    doc = json.loads((b / "dp-tables.json").read_text())
    want = [f"{t['id']} {' '.join(c for c in _csv_columns(b) if c in t['columns'])} {len(t['counts'])} cells"
            for t in doc["tables"]]
    assert sorted(lines) == sorted(want)


def _csv_columns(b: Path) -> list[str]:
    header = (b / "dp-tables.csv").read_text().splitlines()[0].split(",")
    return [c for c in header if c not in ("table", "dp_count", "lower_95", "upper_95")]


def test_the_r_recipe_of_the_combining_rules_gives_the_library_numbers(persons):
    out = _copies(persons, "copies-r", m=5)
    recipe = _recipe("# copies")
    assert 'folder <- "copies"' in recipe
    lines = _run_r(recipe.replace('folder <- "copies"', f'folder <- "{out.as_posix()}"'), out)
    want = recipe_intervals(out)
    assert len(lines) == 2
    for line, c in zip(lines, want):
        got = [float(x) for x in line.split()]
        assert got == pytest.approx([c.estimate, c.lower, c.upper], rel=1e-12)
