"""Issue 39, part 2: special values (not applicable, unknown) of number columns as values of their own.

- the spec's rules (what would compute with a special value's number is refused before any spend);
- reading: a special cell is neither a number nor missing (CSV and Parquet), raw constraints never
  hold on it, it is coded after the bins, and the release's and the audit's codings agree;
- conditional_means with ``special: exclude``: the value against a loop reference and the
  sensitivity on neighbouring datasets (records moved between a special and a number included),
  the worst case reached; kway_marginals leaves the special cells out;
- end to end on a persons registry (hours "-4" = hours vary) and a census table in the NIST
  dictionary's format (PINCP, POVPIP "N"): release, public audit, enclave replay, codebook,
  datapackage (Frictionless), datasheet, and the readers (pandas recipe, R program);
- forgeries re-signed by the key holder fail the named check.
"""
from __future__ import annotations

import bisect
import csv
import io
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
from criteria_util import int_coding, neighbours  # noqa: E402
from test_criteria_condmeans import order_keys  # noqa: E402
from test_i39_dictionary import NIST, _registry  # noqa: E402
from test_i39_dp_edges_release import _forged, _problems  # noqa: E402
from test_i39_dp_tables import _audit, _released  # noqa: E402

from dpbundle.mechanisms.coding import ColumnCoding  # noqa: E402
from dpbundle.mechanisms.criteria import EvalContext, make_criterion  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
HOURS_VARY = {"value": "-4", "label": "hours vary", "kind": "unknown"}


def _persons_doc(**change) -> dict:
    doc = yaml.safe_load((ROOT / "examples" / "persons.yaml").read_text())
    hours = next(c for c in doc["input"]["columns"] if c["name"] == "hours")
    hours.pop("missing")
    hours["special"] = [dict(HOURS_VARY)]
    for c in doc["columns"]:
        c["alternatives"] = c["alternatives"][:1]
    doc["acceptance"] = [a for a in doc["acceptance"]
                         if a["id"] not in ("income_model", "income_accuracy", "median_hours")]
    for a in doc["acceptance"]:
        if a["id"] in ("mean_hours", "kway", "share_female"):
            a["special"] = "exclude"
        if a["id"] == "share_female":     # a joint grouping of a column with group bins and hours
            a["by"] = a["by"] + [["age", "hours"]]
        if isinstance(a.get("threshold"), (int, float)):
            a["threshold"] = 1e9
    doc["generators"] = [{"type": "privbayes", "flavour": "theta", "grid": {"epsilon_split": [0.25], "theta": [8]}}]
    doc["projection"] = {"min_count": [1]}
    doc["privacy"]["epsilon_cap"] = 20
    doc["privacy"].pop("selection", None)
    doc.update(change)
    return doc


def _hours(doc: dict) -> dict:
    return next(c for c in doc["input"]["columns"] if c["name"] == "hours")


def _column_doc(doc: dict, name: str) -> dict:
    return next(c for c in doc["columns"] if c["name"] == name)


def _criterion(doc: dict, cid: str) -> dict:
    return next(a for a in doc["acceptance"] if a["id"] == cid)


# ------------------------------------------------------------------ the spec's rules


def test_the_persons_spec_with_special_hours_is_valid():
    assert _problems(_persons_doc()) == ""


@pytest.mark.parametrize("change, rule", [
    (lambda d: _hours(d).pop("max"), "needs a max"),
    (lambda d: _hours(d)["special"][0].update(value="40"), "lies inside the column's range"),
    (lambda d: _hours(d).update(missing=["-4"]), "also a missing-value marker"),
    (lambda d: _hours(d)["special"].append(dict(HOURS_VARY, value="-5")), "its own label"),
    (lambda d: next(c for c in d["input"]["columns"] if c["name"] == "sex").update(special=[HOURS_VARY]),
     "special values are for integer and float columns"),
    (lambda d: _criterion(d, "mean_hours").pop("special"), "say special: exclude"),
    (lambda d: _criterion(d, "share_female").update(special="exclude"), ""),
    (lambda d: d["acceptance"].append({"id": "q", "type": "quantile", "target": "hours", "by": [None],
                                       "bounds": [1, 80], "threshold": 5, "epsilon": 0.05}),
     "quantile computes with the numbers of hours"),
    (lambda d: d["acceptance"].append({"id": "r", "type": "regression_coefficients", "target": "age",
                                       "features": ["sex", "hours"], "bounds": [18, 87], "threshold": 5,
                                       "epsilon": 0.05}),
     "regression_coefficients computes with the numbers of hours"),
    (lambda d: d["acceptance"].append({"id": "x", "type": "smoothed_ratio", "clip": 5, "threshold": 5,
                                       "epsilon": 0.05, "special": "exclude"}), "only kway_marginals"),
    (lambda d: d.update(group_bins={**d["group_bins"], "hours": {"edges": [40], "labels": ["a", "b"]}}),
     "group_bins.hours"),
    (lambda d: d["synthetic_constraints"].append({"name": "x", "when": [["hours", ">", 70]]}),
     "synthetic_constraints"),
    (lambda d: _hours(d)["special"][0].update(label="40"), "reads as a number or a bin's label"),
    (lambda d: (_column_doc(d, "hours")["alternatives"][0].update(labels=[f"v{i}" for i in range(8)]),
                _hours(d)["special"][0].update(label="v3")), "also the label of one of its bins"),
    (lambda d: _hours(d)["special"][0].update(label="female"), "is also a value of sex"),
    (lambda d: _hours(d)["special"][0].update(label="18-30"), "reads as a number or a bin's label"),
    (lambda d: _hours(d)["special"].append(dict(HOURS_VARY, value="-4.0", label="other")),
     "read as the same number"),
    (lambda d: d["raw_constraints"].append({"name": "vary", "when": [["hours", "==", -4]]}),
     "-4 is a special value of hours, and a condition never holds on one"),
])
def test_what_would_need_a_number_is_refused_before_any_spend(change, rule):
    doc = _persons_doc()
    change(doc)
    found = _problems(doc)
    assert (rule in found) if rule else found == "", found


# ------------------------------------------------------------------ reading and coding


def _prepared(tmp_path, rows: list[str], doc: dict | None = None):
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import validate_spec

    spec = validate_spec(doc or _persons_doc())
    head = "date of birth,sex,education,marital status,occupation group,hours per week,income band (USD/yr),country of birth"
    (tmp_path / "r.csv").write_text(head + "\n" + "\n".join(rows) + "\n")
    return spec, prepare(tmp_path / "r.csv", spec)


def test_a_special_cell_is_a_value_of_its_own(tmp_path):
    from dpbundle.release.data.binning import code_column
    from dpbundle.release.spec.coding import column_coding

    base = "1980-01-01,1,3,1,service,{h},25K-50K,United States"
    spec, prep = _prepared(tmp_path, [base.format(h=h) for h in ("-4", "40", "0", "-4", "99")])
    # any_missing does not drop it, and "employed with no hours worked" (hours < 1) does not hold on it
    assert prep.n == 4
    cc = column_coding(spec, "hours", "coarse")
    assert cc.labels[-1] == "hours vary" and cc.special_codes == (cc.size - 1,)
    assert math.isnan(cc.values[-1]) and math.isnan(cc.lower[-1]) and math.isnan(cc.upper[-1])
    codes = code_column(spec, "hours", "coarse", prep.table)
    assert sorted(codes.tolist()) == sorted([cc.size - 1, cc.size - 1, cc.labels.index("40"), cc.regular_size - 1])
    # a text that is neither a number nor the special value is still an input error
    from dpbundle.release.data.prepare import InputError
    with pytest.raises(InputError, match="not a number"):
        _prepared(tmp_path, [base.format(h="N")])


def test_parquet_numbers_equal_to_a_special_value_are_special(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from dpbundle.release.data.binning import code_column
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import validate_spec

    spec = validate_spec(_persons_doc())
    cols = {"date of birth": ["1980-01-01"] * 3, "sex": ["1"] * 3, "education": ["3"] * 3,
            "marital status": ["1"] * 3, "occupation group": ["service"] * 3,
            "hours per week": pa.array([-4, 40, 12], pa.int64()), "income band (USD/yr)": ["25K-50K"] * 3,
            "country of birth": ["United States"] * 3}
    pq.write_table(pa.table(cols), tmp_path / "r.parquet")
    prep = prepare(tmp_path / "r.parquet", spec)
    codes = code_column(spec, "hours", "coarse", prep.table)
    assert prep.n == 3 and int(codes.max()) == 8 and (codes == 8).sum() == 1


def test_the_release_and_the_audit_code_special_values_alike():
    from dpbundle.audit.labels import build_view
    from dpbundle.release.spec.coding import column_coding
    from dpbundle.release.spec.load import validate_spec

    doc = _persons_doc()
    _hours(doc)["special"].append({"value": "NA-job", "label": "no job", "kind": "not_applicable"})
    doc["input"]["missing_values"] = ["NA"]
    spec = validate_spec(doc)
    for alt in ("coarse",):
        mine = column_coding(spec, "hours", alt)
        view = build_view({"spec": spec.public_dict(), "configuration": {"columns": {"hours": alt}},
                           "configuration_id": "x"})
        theirs = view.columns[view.index("hours")]
        assert tuple(theirs.labels) == mine.labels and theirs.special == mine.special
        assert np.array_equal(np.isnan(theirs.numbers), np.isnan(mine.values))
        assert np.allclose(theirs.numbers[:mine.regular_size], mine.values[:mine.regular_size])


# ------------------------------------------------------------------ the criteria


def _with_specials(col: ColumnCoding, kinds: list[str]) -> ColumnCoding:
    nan = [np.nan] * len(kinds)
    return ColumnCoding(col.name, col.labels + tuple(f"special {k}" for k in range(len(kinds))),
                        np.concatenate([col.values, nan]), True, np.concatenate([col.lower, nan]),
                        np.concatenate([col.upper, nan]), special=("",) * col.size + tuple(kinds))


@st.composite
def special_columns(draw):
    cols = []
    for j in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, 4))
        edges = list(np.cumsum([draw(st.integers(-3, 5))] + draw(st.lists(st.integers(1, 3), min_size=k, max_size=k))))
        col = int_coding(f"c{j}", [int(e) for e in edges])
        s = draw(st.integers(0, 2))
        cols.append(_with_specials(col, draw(st.lists(st.sampled_from(["not_applicable", "unknown"]),
                                                      min_size=s, max_size=s))) if s else col)
    if not any(c.special_codes for c in cols):       # at least the target has special values
        cols[0] = _with_specials(cols[0], ["unknown"])
    return tuple(cols)


def reference(t, c, target, by, L, U, keys, margin_share):
    """Loops: records whose target is special in no group; the overall mean resized like a group;
    the groups of a special value of a by column left out (keys=None: expected subsample mean)."""
    n = t.n
    jt = t.column(target)
    special_t = set(t.columns[jt].special_codes)
    y = lambda D: [min(max(float(D.columns[jt].values[r[jt]]), L), U) if r[jt] not in special_t else None
                   for r in D.codes]
    yt, yc = y(t), y(c)
    mid, margin, err = (L + U) / 2, math.ceil(margin_share * n) + 1, 0.0
    sizes = []
    for col in by:
        if col is None:
            gt, gc, groups = [0] * n, [0] * n, [0]
        else:
            j = t.column(col)
            gt, gc = [int(r[j]) for r in t.codes], [int(r[j]) for r in c.codes]
            groups = [g for g in range(t.columns[j].size) if g not in t.columns[j].special_codes]
        for g in groups:
            cy = [yc[i] for i in range(n) if gc[i] == g and yc[i] is not None]
            m = max(len(cy) - margin, 1)
            sizes.append(m)
            rows = [i for i in range(n) if gt[i] == g and yt[i] is not None]
            if keys is None and len(rows) > m:
                mean_t = sum(yt[i] for i in rows) / len(rows)
            else:
                if keys is not None:
                    rows = sorted(rows, key=lambda i: (keys[i], i))[:m]
                mean_t = (sum(yt[i] for i in rows) + (m - len(rows)) * mid) / m
            mean_c = sum(cy) / len(cy) if cy else mid
            err = max(err, abs(mean_t - mean_c))
    return err, (min(sizes) if sizes else n)


@st.composite
def exclude_case(draw):
    cols = draw(special_columns())
    t, t2, c = draw(neighbours(columns=cols, max_n=30))
    target = cols[0].name
    others = [x.name for x in cols[1:]]
    by = draw(st.lists(st.sampled_from(others + [None]), min_size=1, max_size=3, unique=True))
    L = draw(st.integers(-6, 4))
    return t, t2, c, target, by, float(L), float(L + draw(st.integers(1, 12))), draw(st.sampled_from([0.0, 0.1]))


@settings(max_examples=300, deadline=None)
@given(exclude_case(), st.integers(0, 2**32 - 1))
def test_excluded_special_values_keep_the_declared_sensitivity_on_neighbours(cs, seed):
    """Change one record (between two special values, a special value and a number, or two
    numbers; in or out of groups): with the proof's coupling (the same priority keys) the value
    moves by at most (U - L) / min m_g, min over the compared groups with the overall mean's m_0."""
    t, t2, c, target, by, L, U, share = cs
    crit = make_criterion({"id": "m", "type": "conditional_means", "target": target, "by": by,
                           "bounds": [L, U], "threshold": 1.0, "epsilon": 0.1, "margin_share": share,
                           "special": "exclude"})
    ctx, ctx2 = EvalContext(t, c, {}), EvalContext(t2, c, {})
    keys = order_keys(crit, ctx, t, np.random.Generator(np.random.PCG64(seed)))
    v, min_m = reference(t, c, target, by, L, U, keys, share)
    assert crit.value(ctx, np.random.Generator(np.random.PCG64(seed))) == pytest.approx(v, abs=1e-9)
    assert crit.value(ctx) == pytest.approx(reference(t, c, target, by, L, U, None, share)[0], abs=1e-9)
    sens, inputs = crit.sensitivity(ctx)
    assert inputs["min_group_size"] == min_m and sens == pytest.approx((U - L) / min_m)
    v2, _ = reference(t2, c, target, by, L, U, keys, share)
    assert abs(v - v2) <= sens + 1e-9


def test_the_worst_case_is_reached_by_a_record_becoming_special():
    """C: one record with the number U in a group of size m = 1; T: the same record becomes special,
    so the group is padded with (L + U)/2 ... against a record at L: the full (U - L) / 1."""
    col = _with_specials(int_coding("y", [0, 1, 2]), ["not_applicable"])
    c = [[1]] + [[2]] * 9
    t1, t2 = [[0]] + [[2]] * 9, [[1]] + [[2]] * 9
    from dpbundle.mechanisms.coding import Coded

    crit = make_criterion({"id": "m", "type": "conditional_means", "target": "y", "by": [None],
                           "bounds": [0, 1], "threshold": 1, "epsilon": 1, "margin_share": 0.0,
                           "margin_plus": 0, "special": "exclude"})
    mk = lambda rows: Coded(codes=np.asarray(rows, dtype=np.int64), columns=(col,))  # noqa: E731
    sens, inputs = crit.sensitivity(EvalContext(mk(t1), mk(c), {}))
    assert inputs["min_group_size"] == 1 and sens == 1.0
    assert abs(crit.value(EvalContext(mk(t1), mk(c), {})) - crit.value(EvalContext(mk(t2), mk(c), {}))) == pytest.approx(1.0)


@settings(max_examples=300, deadline=None)
@given(special_columns().flatmap(lambda cols: neighbours(columns=cols, max_n=30)), st.integers(1, 3))
def test_kway_exclude_keeps_its_sensitivity_on_neighbours(cs, max_k):
    """Change one record (into or out of a special value included): the largest share error over
    the cells compared moves by at most 1/n, the declared sensitivity."""
    t, t2, c = cs
    crit = make_criterion({"id": "k", "type": "kway_marginals", "max_k": max_k, "special": "exclude",
                           "threshold": 1, "epsilon": 1})
    sens, _ = crit.sensitivity(EvalContext(t, c, {}))
    assert sens == pytest.approx(1 / t.n)
    assert abs(crit.value(EvalContext(t, c, {})) - crit.value(EvalContext(t2, c, {}))) <= sens + 1e-12


def test_kway_exclude_leaves_the_special_cells_out():
    from dpbundle.mechanisms.coding import Coded

    col = _with_specials(int_coding("y", [0, 1, 2]), ["unknown"])
    t = Coded(codes=np.array([[2]] * 5 + [[0]] * 5), columns=(col,))
    c = Coded(codes=np.array([[0]] * 5 + [[1]] * 5), columns=(col,))
    base = {"id": "k", "type": "kway_marginals", "threshold": 1, "epsilon": 1}
    include = make_criterion(base).value(EvalContext(t, c, {}))
    exclude = make_criterion(base | {"special": "exclude"}).value(EvalContext(t, c, {}))
    assert include == pytest.approx(0.5) and exclude == pytest.approx(0.5)      # cell "1" differs by 5 too
    c2 = Coded(codes=np.array([[0]] * 5 + [[0]] * 5), columns=(col,))
    assert make_criterion(base).value(EvalContext(t, c2, {})) == pytest.approx(0.5)   # the special cell
    assert make_criterion(base | {"special": "exclude"}).value(EvalContext(t, c2, {})) == pytest.approx(0.5)
    t3 = Coded(codes=np.array([[2]] * 5 + [[0]] * 5), columns=(col,))
    c3 = Coded(codes=np.array([[0]] * 10), columns=(col,))
    assert make_criterion(base | {"special": "exclude"}).value(EvalContext(t3, c3, {})) == pytest.approx(0.5)
    t4 = Coded(codes=np.array([[2]] * 5 + [[1]] * 5), columns=(col,))
    c4 = Coded(codes=np.array([[1]] * 10), columns=(col,))
    assert make_criterion(base).value(EvalContext(t4, c4, {})) == pytest.approx(0.5)
    assert make_criterion(base | {"special": "exclude"}).value(EvalContext(t4, c4, {})) == pytest.approx(0.5)
    t5 = Coded(codes=np.array([[2]] * 3 + [[1]] * 7), columns=(col,))
    c5 = Coded(codes=np.array([[1]] * 7 + [[0]] * 3), columns=(col,))
    assert make_criterion(base).value(EvalContext(t5, c5, {})) == pytest.approx(0.3)
    # the cell "0" (+3) and the special cell (-3) differ: excluding the special cell keeps 0.3
    t6 = Coded(codes=np.array([[2]] * 4 + [[1]] * 6), columns=(col,))
    c6 = Coded(codes=np.array([[1]] * 8 + [[0]] * 2), columns=(col,))
    assert make_criterion(base).value(EvalContext(t6, c6, {})) == pytest.approx(0.4)
    assert make_criterion(base | {"special": "exclude"}).value(EvalContext(t6, c6, {})) == pytest.approx(0.2)


# ------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def persons(tmp_path_factory):
    from dpbundle.release.data.example import example_csv

    t = tmp_path_factory.mktemp("i39-special")
    (t / "reg.csv").write_bytes(example_csv("persons", 6000, 3))
    assert ",-4," in (t / "reg.csv").read_text()
    (t / "spec.yaml").write_text(yaml.safe_dump(_persons_doc(), sort_keys=False))
    return _released(t, t / "spec.yaml", t / "reg.csv")


@pytest.fixture(scope="module")
def census(tmp_path_factory):
    t = tmp_path_factory.mktemp("i39-special-census")
    keys = ["AGEP", "SEX", "PINCP", "POVPIP", "EDU"]
    res = runner.invoke(_app(), ["spec", "from-dictionary", str(NIST), "--columns", ",".join(keys), "--bins", "6",
                                 "--dp-edges", "0.05", "--out", str(t / "spec.yaml"), "--title", "Census (test)"])
    assert res.exit_code == 0, res.output
    doc = yaml.safe_load((t / "spec.yaml").read_text())
    doc["release"].update(publisher="Statistics office (test)", contact="open-data@example.org",
                          description="Synthetic census persons (test).", unit_of_privacy="one person")
    (t / "spec.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    _registry(t / "reg.csv", json.loads(NIST.read_text()), keys, 3000, 7)
    return _released(t, t / "spec.yaml", t / "reg.csv")


def _app():
    from dpbundle.release.cli.main import app

    return app


@pytest.mark.parametrize("which", ["persons", "census"])
def test_the_release_passes_the_public_audit_and_the_enclave_replay(which, request):
    rel = request.getfixturevalue(which)
    code, checks = _audit(rel["bundle"], "--pubkey", rel["pub"], "--transcript", rel["transcript"],
                          "--data", rel["data"])
    assert code == 0, {k: (v["result"], v["problems"][:2]) for k, v in checks.items() if v["result"] == "fail"}
    assert checks["replay"]["result"] == "pass"


def _book(b: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((b / "codebook.csv").read_text())))


def test_the_persons_bundle_says_what_a_special_value_is(persons):
    b = persons["bundle"]
    rows = [r for r in _book(b) if r["column"] == "hours"]
    assert rows[-1] == {**rows[-1], "label": "hours vary", "special": "unknown", "number": "", "lower": "", "upper": ""}
    assert all(r["special"] == "" and r["number"] != "" for r in rows[:-1])
    data = list(csv.DictReader(io.StringIO((b / "data.csv").read_text())))
    assert 0 < sum(r["hours"] == "hours vary" for r in data) < len(data) / 10
    package = json.loads((b / "datapackage.json").read_text())
    res = package["resources"][0]["schema"]
    assert res["missingValues"] == [{"value": "hours vary", "label": "unknown: hours vary"}]
    hours = next(f for f in res["fields"] if f["name"] == "hours")
    assert "hours vary" not in hours["constraints"]["enum"] and hours["constraints"]["required"] is False
    text = " ".join(re.sub(r"<[^>]+>", " ", (b / "README.html").read_text()).split())
    assert "a special value (not a number): “hours vary” (unknown, recorded -4)" in text
    assert "Left out: the records whose hours is a special value (“hours vary”)." in text
    assert "The cells of special values (“hours vary”) are not compared." in text
    metrics = json.loads((b / "metrics.json").read_text())
    mean = next(c for c in metrics["criteria"] if c["id"] == "mean_hours")
    assert mean["sensitivity_inputs"]["special"] == "exclude"
    from test_i36_closure_walk import unclassified     # every field of the bundle has a closure rule
    assert unclassified(b) == []


@pytest.mark.parametrize("which, column", [("persons", "hours"), ("census", "PINCP"), ("census", "POVPIP")])
def test_frictionless_reads_special_values_as_missing(which, column, request):
    frictionless = pytest.importorskip("frictionless")
    b = request.getfixturevalue(which)["bundle"]
    report = frictionless.validate(str(b / "datapackage.json"))
    assert report.valid, report.flatten(["rowNumber", "fieldName", "type", "note"])[:5]
    package = frictionless.Package(str(b / "datapackage.json"))
    rows = package.get_resource("data").read_rows()
    special = {r["label"] for r in _book(b) if r["column"] == column and r["special"]}
    assert any(r[column] is None for r in rows) and not any(r[column] in special for r in rows)


PANDAS = re.search(r"```python\n(# special values\n.*?)```", (ROOT / "docs" / "reading-the-data.md").read_text(), re.S)


def test_the_documented_pandas_recipe_reads_special_values(persons, monkeypatch):
    import pandas as pd

    assert PANDAS, "docs/reading-the-data.md has no '# special values' recipe"
    monkeypatch.chdir(persons["bundle"])
    scope: dict = {}
    exec(compile(PANDAS.group(1), "reading-the-data.md", "exec"), scope)
    data = scope["data"]
    raw = pd.read_csv("data.csv", dtype=str, keep_default_na=False)
    vary = raw["hours"] == "hours vary"
    assert data["hours"].isna().equals(vary) and (data.loc[vary, "hours_special"] == "hours vary").all()
    assert data.loc[~vary, "hours_special"].isna().all()
    assert list(data["hours"].cat.categories) == [r["label"] for r in _book(persons["bundle"])
                                                  if r["column"] == "hours" and not r["special"]]
    assert data["hours"].cat.ordered and not data["sex"].isna().any()


def test_the_datasheets_r_program_makes_special_values_na(persons):
    import subprocess

    from dpbundle.templates.datasheet.codebook import read_codebook
    from dpbundle.templates.datasheet.snippets import r_snippet

    exe = shutil.which("Rscript")
    if exe is None or subprocess.run([exe, "-e", "library(readr)"], capture_output=True).returncode:
        pytest.skip("Rscript with readr is not installed")
    b = persons["bundle"]
    names = (b / "data.csv").read_text().splitlines()[0].split(",")
    cols, _, _ = read_codebook((b / "codebook.csv").read_bytes(), names, {})
    program = r_snippet(cols) + ('cat(sum(is.na(data$hours)), sum(data$hours_special == "hours vary", na.rm = TRUE), '
                                 'sum(is.na(number_of("hours"))), nlevels(data$hours), "\\n")\n')
    res = subprocess.run([exe, "-e", program], cwd=b, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    vary = sum(r["hours"] == "hours vary" for r in csv.DictReader(io.StringIO((b / "data.csv").read_text())))
    assert res.stdout.split() == [str(vary), str(vary), str(vary), "8"]


def test_the_census_bundle_keeps_not_applicable_beside_the_bins(census):
    b = census["bundle"]
    rows = _book(b)
    for col in ("PINCP", "POVPIP"):
        mine = [r for r in rows if r["column"] == col]
        assert mine[-1]["special"] == "not_applicable" and mine[-1]["number"] == ""
        assert mine[-1]["label"].startswith("N/A")
    spec = json.loads((b / "spec.json").read_text())["spec"]
    povpip = next(c for c in spec["input"]["columns"] if c["name"] == "POVPIP")
    assert povpip["max"] == 501 and [s["value"] for s in povpip["special"]] == ["N"]


# ------------------------------------------------------------------ forgeries


def _failed(checks: dict) -> set:
    return {k for k, v in checks.items() if v["result"] == "fail"}


def test_a_special_value_given_a_number_in_the_codebook_fails(persons, tmp_path):
    def edit(b):
        text = (b / "codebook.csv").read_text().replace("hours vary,,,,", "hours vary,,,40,")
        (b / "codebook.csv").write_text(text)
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "documentation" in _failed(checks)


def test_a_special_values_kind_swapped_in_the_codebook_fails(persons, tmp_path):
    def edit(b):
        text = (b / "codebook.csv").read_text()
        assert text.count(",unknown\n") == 1
        (b / "codebook.csv").write_text(text.replace(",unknown\n", ",not_applicable\n"))
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "documentation" in _failed(checks)


def test_a_special_label_put_back_among_the_categories_fails(persons, tmp_path):
    def edit(b):
        package = json.loads((b / "datapackage.json").read_text())
        hours = next(f for f in package["resources"][0]["schema"]["fields"] if f["name"] == "hours")
        hours["constraints"]["enum"].append("hours vary")
        hours["categories"].append("hours vary")
        (b / "datapackage.json").write_text(json.dumps(package, indent=2, ensure_ascii=False) + "\n")
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "schema" in _failed(checks)


def test_a_mean_whose_sensitivity_counts_the_special_records_fails(persons, tmp_path):
    """The overall mean taken over n (as if the special records had numbers): a smaller declared
    sensitivity than the excluded records allow."""
    def edit(b):
        doc = json.loads((b / "metrics.json").read_text())
        mean = next(c for c in doc["criteria"] if c["id"] == "mean_hours")
        mean["sensitivity"] = mean["sensitivity"] / 2
        mean["sensitivity_inputs"]["min_group_size"] *= 2
        (b / "metrics.json").write_text(json.dumps(doc, indent=1) + "\n")
    code, checks = _audit(_forged(persons, tmp_path, edit), "--pubkey", persons["pub"])
    assert code != 0 and "budget" in _failed(checks)
