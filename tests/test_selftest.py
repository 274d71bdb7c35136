"""`dpbundle selftest`: the frozen randomness mode, the pairing, the neighbours, the coupled
resize, and the command on both built-in examples and on a spec with every criterion and
generator type; a halved sensitivity and data-dependent control flow must make it fail."""
from __future__ import annotations

import csv
import datetime as dt
import json
import re

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from dpbundle.mechanisms.generators import generator_types
from dpbundle.mechanisms.noise import PathDivergence, Randomness
from dpbundle.mechanisms.records import ResizePlan
from dpbundle.release.cli.main import app
from dpbundle.release.data.prepare import prepare
from dpbundle.release.selftest import (Change, Neighbours, choose_configs, coupled_plan, distance,
                                       run_selftest, tolerance)
from dpbundle.release.spec.load import load_spec

runner = CliRunner()


# --------------------------------------------------------------------------- frozen mode


def _record_run(rand: Randomness, true_scale: float = 1.0) -> tuple[float, np.ndarray, int, int]:
    a = rand.laplace(10.0 * true_scale, sensitivity=1.0, epsilon=0.5, purpose="scalar")
    b = rand.laplace(np.arange(4) * true_scale, sensitivity=2.0, epsilon=0.5, purpose="vector")
    c = rand.exponential(np.array([0.0, 1.0, 2.0]) * true_scale, sensitivity=1.0, epsilon=0.5,
                         purpose="choice")
    d = int(rand.rng("post").integers(1 << 30))
    rand.mark("end", note=str(true_scale))
    return a, b, c, d


def test_frozen_returns_recorded_outputs_and_records_own_values():
    rec = Randomness()
    out = _record_run(rec)
    frozen = Randomness.frozen(rec.transcript)
    again = _record_run(frozen, true_scale=2.0)
    assert again[0] == out[0] and np.array_equal(again[1], out[1]) and again[2:] == out[2:]
    frozen.check_finished()
    mine = frozen.transcript.records
    assert mine[0]["true"] == 20.0 and rec.transcript.records[0]["true"] == 10.0
    assert mine[1]["true"] == [0.0, 2.0, 4.0, 6.0] and mine[1]["noisy"] == rec.transcript.records[1]["noisy"]
    assert mine[2]["true"] == [0.0, 2.0, 4.0] and mine[2]["noisy"] == rec.transcript.records[2]["noisy"]
    assert mine[4]["note"] == "2.0"   # marks are followed by name, their fields are the run's own
    assert frozen.following and not frozen.replaying


@pytest.mark.parametrize("call,field", [
    (lambda r: r.laplace(1.0, sensitivity=1.0, epsilon=0.5, purpose="other"), "purpose"),
    (lambda r: r.laplace(1.0, sensitivity=1.0, epsilon=0.25, purpose="scalar"), "epsilon"),
    (lambda r: r.laplace(np.ones(2), sensitivity=1.0, epsilon=0.5, purpose="scalar"), "shape"),
    (lambda r: r.rng("scalar"), "kind"),
])
def test_frozen_mode_reports_where_the_path_diverges(call, field):
    rec = Randomness()
    rec.laplace(1.0, sensitivity=1.0, epsilon=0.5, purpose="scalar")
    with pytest.raises(PathDivergence) as err:
        call(Randomness.frozen(rec.transcript))
    assert err.value.field == field and err.value.index == 0
    assert err.value.recorded == ("laplace", "scalar")


def test_frozen_mode_catches_fewer_and_more_calls():
    rec = Randomness()
    rec.laplace(1.0, sensitivity=1.0, epsilon=0.5, purpose="a")
    rec.laplace(1.0, sensitivity=1.0, epsilon=0.5, purpose="b")
    short = Randomness.frozen(rec.transcript)
    short.laplace(3.0, sensitivity=1.0, epsilon=0.5, purpose="a")
    with pytest.raises(PathDivergence, match="ended earlier") as err:
        short.check_finished()
    assert err.value.index == 1 and err.value.asked is None
    long = Randomness.frozen(rec.transcript.records[:1])
    long.laplace(3.0, sensitivity=1.0, epsilon=0.5, purpose="a")
    with pytest.raises(PathDivergence, match="asked for another") as err:
        long.laplace(3.0, sensitivity=1.0, epsilon=0.5, purpose="b")
    assert err.value.recorded is None and err.value.asked == ("laplace", "b")


def test_distance_in_each_mechanisms_metric_and_tolerance():
    assert distance("laplace", 1.0, 3.5)[:2] == ("abs", 2.5)
    assert distance("laplace", [1, 2, 3], [2, 2, 1])[:2] == ("L1", 3.0)
    assert distance("exponential", [1, 2, 3], [2, 2, 1])[:2] == ("Linf", 2.0)
    # tiny: far below any factor error of a sensitivity, above float noise of the values
    assert 0 < tolerance(1e-3, 1.0) < 1e-11
    assert tolerance(2.0, 0.0) == pytest.approx(2e-9)


# --------------------------------------------------------------------------- coupled resize


@given(n=st.integers(2, 30), m_minus_n=st.integers(-25, 10), seed=st.integers(0, 2**32),
       kind=st.sampled_from(["change", "add", "remove"]))
def test_coupled_resize_keeps_neighbours_at_distance_one(n, m_minus_n, seed, kind):
    """The resized tables of a table and its neighbour differ in at most one position, for
    every case of the derivation (subsample or pads, record added, removed or changed)."""
    m = max(1, n + m_minus_n)
    rng = np.random.default_rng(seed)
    from dpbundle.mechanisms.records import resize_plan

    plan = resize_plan(n, m, 1, rng)
    codes = np.arange(n, dtype=np.int64).reshape(-1, 1) + 100     # record j has code 100 + j
    row = int(plan.keep[rng.integers(plan.keep.size)])
    change = Change(kind, "test", None if kind == "add" else row)
    other = codes.copy()
    if kind == "change":
        other[row] = 999
    elif kind == "add":
        other = np.vstack([codes, [[999]]])
    else:
        other = np.delete(codes, row, axis=0)
    nplan = coupled_plan(plan, change, rng)
    assert isinstance(nplan, ResizePlan) and nplan.m == m and nplan.n_in == other.shape[0]
    assert sorted(nplan.order.tolist()) == list(range(m))
    a = plan.apply(codes, [1000]).reshape(-1)
    b = nplan.apply(other, [1000]).reshape(-1)
    assert (a != b).sum() <= 1


# --------------------------------------------------------------------------- neighbours


def _example(tmp_path, name: str, rows: int = 1500):
    from importlib.resources import files

    from dpbundle.release.data.example import write_example

    data = tmp_path / f"{name}.csv"
    write_example(data, rows=rows, name=name)
    spec = load_spec(files("dpbundle.examples").joinpath(f"{name}-recommended.yaml"))
    return spec, prepare(data, spec)


@pytest.mark.parametrize("name", ["births", "persons"])
def test_neighbours_follow_the_records_policy_and_the_input_schema(tmp_path, name):
    spec, prepared = _example(tmp_path, name)
    nb = Neighbours(spec, prepared, np.random.default_rng(3))
    seen = set()
    for kind, strategy in nb.schedule(14):
        other, change = nb.draw(kind, strategy)
        seen.add(kind)
        assert other.rows == prepared.rows + {"change": 0, "add": 1, "remove": -1}[kind]
        if kind == "change":      # exactly one record differs, and it stays plausible
            differs = np.zeros(prepared.rows, dtype=bool)
            for col, values in prepared.table.items():
                differs |= other.table[col] != values
            assert np.flatnonzero(differs).tolist() in ([change.row], [])
        if kind != "remove":
            i = change.row if kind == "change" else -1
            record = {c: v[i] for c, v in other.table.items()}
            assert nb.plausible(record)
            for col, dom in nb.domains.items():
                assert dom.low <= record[col] <= dom.high
    expected = {"declared_public": {"change"}, "dp_count": {"change", "add", "remove"}}
    assert seen == expected[spec.records_policy]


def test_edge_records_reach_the_domain_edges(tmp_path):
    spec, prepared = _example(tmp_path, "births")
    nb = Neighbours(spec, prepared, np.random.default_rng(1))
    high = nb.record("edge-max")
    low = nb.record("edge-min")
    assert high["mother_age"] == 70 and high["parity"] == 30     # the input range's maximum
    assert high["birth_weight"] == 5500 and high["gestation_week"] == 44   # the raw rules' edge
    assert low["birth_weight"] == 500 and low["mother_age"] == 10


def test_choose_configs_covers_every_generator_variant(tmp_path):
    spec, _ = _example(tmp_path, "births")
    configs, skipped = choose_configs(spec, None, 1, True, np.random.default_rng(0))
    variants = {(c["generator"]["type"], c["generator"].get("oneway")) for c in configs}
    assert {("privbayes", "none"), ("privbayes", "measure"), ("privsyn", None),
            ("mst_pure", None)} <= variants and not skipped


# --------------------------------------------------------------------------- the command


def _run(*args: str):
    return runner.invoke(app, ["selftest", *args], env={"COLUMNS": "200", "TERM": "dumb"},
                         terminal_width=200)


@pytest.mark.parametrize("name", ["births", "persons"])
def test_selftest_passes_on_the_built_in_examples(tmp_path, name):
    out = tmp_path / "report.json"
    res = _run("--example", name, "--example-rows", "2000", "--pairs", "6", "--seed", "5",
               "--json", str(out))
    assert res.exit_code == 0, res.output
    assert "selftest PASS" in res.output and "not a proof of the guarantee" in res.output
    doc = json.loads(out.read_text())
    assert doc["passed"] and doc["findings"] == [] and doc["format"] == "dpbundle-selftest/1"
    calls = {c["call"] for c in doc["calls"]}
    assert {"criterion kway", "criterion faithfulness"} <= calls
    assert any(c.startswith("privbayes: network structure") for c in calls)
    assert any(c.startswith("mst_pure: tree edge") for c in calls)
    assert ("record count" in calls) == (name == "persons")   # persons: dp_count
    for c in doc["calls"]:
        assert c["pairs"] >= 6 and 0 <= c["largest_distance"] <= c["sensitivity_max"] * (1 + 1e-9)


# --------------------------------------------------------------------------- every type


REGIONS = ["north", "south", "east", "west", "abroad"]


def every_type_spec(policy: str = "dp_count") -> dict:
    """Every criterion type (regression with both fits, classification with both reports) and
    every installed generator type (privbayes flavours and one-way modes)."""
    gens = [
        {"type": "privbayes", "flavour": "theta",
         "grid": {"epsilon_split": [0.5], "theta": [8], "oneway": ["none", "tables", "measure"],
                  "oneway_split": [0.2]}},
        {"type": "privbayes", "flavour": "degree", "grid": {"epsilon_split": [0.3], "degree": [2],
                                                            "score": ["MI"]}},
        {"type": "privsyn", "grid": {"select_rule": ["densemarg", "top"]}},
        {"type": "mst_pure"}, {"type": "crosstab"}, {"type": "marginals"},
        {"type": "aim_pure", "grid": {"rounds_per_column": [2], "estimate_rows": [1000]}},
    ]
    gens += [{"type": t} for t in ("aim", "mst") if generator_types()[t]["available"]]
    records = {"policy": "dp_count", "epsilon": 1.0} if policy == "dp_count" else {"policy": policy}
    return {
        "dpbundle_spec": 1,
        "release": {"title": "Every type", "publisher": "tests", "contact": "nobody@example.org",
                    "licence": "CC0-1.0", "description": "Simulated persons.", "unit_of_privacy": "one person"},
        "input": {"missing_values": ["NA"], "columns": [
            {"name": "dob", "type": "date", "min": "1940-01-01", "max": "2005-12-31"},
            {"name": "sex", "type": "category", "categories": [1, 2]},
            {"name": "region", "type": "category", "categories": REGIONS},
            {"name": "status", "type": "category", "categories": [1, 2, 3]},
            {"name": "income", "type": "integer", "min": 0, "max": 3000},
        ]},
        "raw_constraints": [
            {"name": "missing value", "any_missing": True},
            {"name": "young with status 3", "when": [["status", "==", 3], ["dob", ">", "2000-01-01"]]},
            {"name": "very high income", "when": [["income", ">", 2500]]},
        ],
        "columns": [
            {"name": "age", "source": {"column": "dob", "derive": "age", "reference": "2024-01-01"},
             "alternatives": [{"id": "bands", "edges": [18, 30, 45, 65, 85]}]},
            {"name": "sex", "source": {"column": "sex", "derive": "category"},
             "alternatives": [{"id": "sex", "categories": ["m", "f"], "map": {"1": "m", "2": "f"},
                               "values": [0, 1]}]},
            {"name": "region", "source": {"column": "region", "derive": "category"},
             "alternatives": [{"id": "three", "categories": ["north", "south", "other"],
                               "map": {"north": "north", "south": "south"}, "default": "other"}]},
            {"name": "status", "source": {"column": "status", "derive": "category"},
             "alternatives": [{"id": "s", "categories": ["single", "couple", "other"],
                               "map": {"1": "single", "2": "couple", "3": "other"}}]},
            {"name": "income", "source": {"column": "income"},
             "alternatives": [{"id": "k", "clip": [0, 2000], "edges": [0, 250, 500, 1000, 2001]}]},
        ],
        "synthetic_constraints": [
            {"name": "young and other status", "when": [["age", "<", 30], ["status", "in", ["other"]]]}],
        "generators": gens,
        "projection": {"min_count": [2]},
        "group_bins": {"income": {"edges": [500], "labels": ["low", "high"]}},
        "acceptance": [
            {"id": "kway", "type": "kway_marginals", "max_k": 2, "threshold": 1.0, "epsilon": 0.1},
            # one column's shares: every neighbour that changes a record's sex attains 1/n
            {"id": "kway_sex", "type": "kway_marginals", "columns": ["sex"], "max_k": 1,
             "threshold": 1.0, "epsilon": 0.05},
            {"id": "ratio", "type": "smoothed_ratio", "clip": 20.0, "threshold": 20.0, "epsilon": 0.1},
            {"id": "mean_income", "type": "conditional_means", "target": "income", "bounds": [0, 2000],
             "by": [None, ["sex", "age"], "region"], "threshold": 2000, "epsilon": 0.2},
            {"id": "share_female", "type": "conditional_means", "target": "sex", "bounds": [0, 1],
             "by": ["income", "status"], "threshold": 1.0, "epsilon": 0.2},
            # the overall share only: every neighbour that changes a record's sex attains the
            # sensitivity 1/n (a max over groups attains its bound only on special data)
            {"id": "share_female_all", "type": "conditional_means", "target": "sex", "bounds": [0, 1],
             "by": [None], "threshold": 1.0, "epsilon": 0.1},
            {"id": "regression", "type": "regression_coefficients", "target": "income",
             "bounds": [0, 2000], "threshold": 1e12, "epsilon": 0.3},
            {"id": "regression_ss", "type": "regression_coefficients", "target": "income",
             "bounds": [0, 2000], "fit": "sufficient_statistics", "threshold": 1e12, "epsilon": 0.3},
            {"id": "mae", "type": "regression_mae_difference", "target": "income", "bounds": [0, 2000],
             "threshold": 2000, "epsilon": 0.1},
            {"id": "south_model", "type": "classification", "target": "region", "positive": "south",
             "report": "coefficients", "threshold": 1e6, "epsilon": 0.2},
            {"id": "south_accuracy", "type": "classification", "target": "region", "positive": "south",
             "report": "accuracy", "threshold": 2.0, "epsilon": 0.1},
            {"id": "median_income", "type": "quantile", "target": "income", "quantiles": [0.25, 0.5],
             "by": [None, "sex"], "threshold": 1e6, "epsilon": 0.1},
            {"id": "faithfulness", "type": "faithfulness", "threshold": 1.0, "epsilon": 0.1},
        ],
        "faithfulness": {"exact": ["sex"], "adjacent": ["age", "income"], "nominal": ["region", "status"],
                         "max_adjacent": 1, "max_nominal": 1, "max_differing": 2},
        "face_privacy": {"quasi_identifiers": [["age", "sex", "region"]]},
        "privacy": {"epsilon_generation": 2.0, "epsilon_cap": 20.0, "records": records},
    }


def simulate(n: int, seed: int = 11, top_income: int = 2500) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    start, end = dt.date(1940, 1, 1).toordinal(), dt.date(2005, 12, 31).toordinal()
    rows = []
    for _ in range(n):
        dob = dt.date.fromordinal(int(rng.integers(start, end + 1))).isoformat()
        sex = int(rng.integers(1, 3))
        region = REGIONS[int(rng.choice(5, p=[0.35, 0.3, 0.15, 0.1, 0.1]))]
        status = int(rng.choice([1, 2, 3], p=[0.4, 0.45, 0.15]))
        income = int(np.clip(rng.gamma(2.0, 200.0) + 100 * (sex == 1), 0, top_income))
        rows.append([dob if rng.random() > 0.01 else "NA", str(sex), region, str(status), str(income)])
    return rows


def _write(tmp_path, spec: dict, rows: list[list[str]]):
    data = tmp_path / "public.csv"
    with open(data, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["dob", "sex", "region", "status", "income"])
        w.writerows(rows)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), "utf-8")
    return path, data


@pytest.fixture(scope="module")
def every_type(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("every")
    path, data = _write(tmp, every_type_spec(), simulate(1500))
    spec = load_spec(path)
    return spec, prepare(data, spec), path, data


def test_every_criterion_and_generator_type_passes(every_type):
    spec, prepared, _, _ = every_type
    configs, skipped = choose_configs(spec, None, 0, True, np.random.default_rng(2))
    types = {c["generator"]["type"] for c in configs}
    assert types == {t for t in ("privbayes", "privsyn", "mst_pure", "crosstab", "marginals", "aim", "mst",
                                 "aim_pure") if generator_types()[t]["available"]} and not skipped
    assert generator_types()["aim_pure"]["available"]
    report = run_selftest(spec, prepared, configs, pairs=6, seed=4)
    assert report.passed, [f.message for f in report.findings]
    calls = {o.purpose for o in report.observations}
    for entry in spec.criteria:     # every criterion's DP calls were paired
        assert any(p == f"criterion {entry['id']}" or p.startswith(f"criterion {entry['id']} ")
                   for p in calls), entry["id"]
    assert "record count" in calls
    assert any(p.startswith("crosstab") for p in calls) and any(p.startswith("marginal") for p in calls)
    aim = {o.mechanism for o in report.observations if o.purpose.startswith("aim_pure: round ")}
    assert aim == {"discrete Laplace", "report-noisy-max"}      # every round's choice and measurement
    assert "aim_pure: 1-way marginals" in calls
    assert {o.mechanism for o in report.observations} == {"Laplace", "discrete Laplace", "report-noisy-max"}


# --------------------------------------------------------------------------- it can fail


def _halve(monkeypatch, where: str) -> str:
    """Halve one declared sensitivity; returns the purpose (start) the finding must name."""
    if where == "criterion":
        from dpbundle.mechanisms.criteria.kway import KWayMarginals

        original = KWayMarginals.sensitivity
        monkeypatch.setattr(KWayMarginals, "sensitivity",
                            lambda self, ctx: (original(self, ctx)[0] / 2, original(self, ctx)[1]))
        return "criterion kway_sex"
    if where == "conditional_means":
        from dpbundle.mechanisms.criteria.condmeans import ConditionalMeans

        original = ConditionalMeans.sensitivity
        monkeypatch.setattr(ConditionalMeans, "sensitivity",
                            lambda self, ctx: (original(self, ctx)[0] / 2, original(self, ctx)[1]))
        return "criterion share_female_all"
    if where == "privbayes":
        import dpbundle.mechanisms.privbayes as pb

        monkeypatch.setattr(pb, "count_table_sensitivity", lambda: 1)
        return "privbayes: conditional table"
    if where == "aim_pure":
        import dpbundle.mechanisms.aim as aim

        monkeypatch.setattr(aim, "COUNT_SENSITIVITY", aim.COUNT_SENSITIVITY / 2)
        return "aim_pure: round"
    import dpbundle.mechanisms.mst as mst

    monkeypatch.setattr(mst, "SCORE_SENSITIVITY", mst.SCORE_SENSITIVITY / 2)
    return "mst_pure: tree edge"


@pytest.mark.parametrize("where", ["criterion", "conditional_means", "privbayes", "mst_pure", "aim_pure"])
def test_a_halved_sensitivity_fails_naming_the_call(every_type, monkeypatch, where):
    spec, _, path, data = every_type
    name = _halve(monkeypatch, where)
    gen = {"privbayes": "privbayes", "mst_pure": "mst_pure", "aim_pure": "aim_pure"}.get(where, "crosstab")
    configs = [c for c in choose_configs(spec, None, 0, True, np.random.default_rng(2))[0]
               if c["generator"]["type"] == gen][:1]
    listed = _narrowed(path.parent / f"{where}.yaml", spec, configs)
    res = _run(str(path), str(data), "--configs", str(listed), "--draws", "1", "--drawn-only",
               "--pairs", "6", "--seed", "1")
    assert res.exit_code == 1, res.output
    assert "selftest FAIL" in res.output
    assert re.search(rf"FAIL sensitivity .*'{re.escape(name)}", res.output), res.output
    assert re.search(rf"{re.escape(name)}.*EXCEEDS", res.output), res.output


def test_a_sensitivity_computed_from_private_data_fails(every_type, monkeypatch):
    """A declared sensitivity that reads T (here: grows with the sum of T's codes) differs
    between neighbours although every DP output is frozen."""
    from dpbundle.mechanisms.criteria.faithfulness import Faithfulness

    original = Faithfulness.sensitivity

    def leaky(self, ctx):
        s, inputs = original(self, ctx)
        return s * (1 + 1e-6 * int(ctx.real.codes.sum())), inputs

    monkeypatch.setattr(Faithfulness, "sensitivity", leaky)
    spec, prepared, _, _ = every_type
    configs = [c for c in choose_configs(spec, None, 0, True, np.random.default_rng(2))[0]
               if c["generator"]["type"] == "crosstab"]
    report = run_selftest(spec, prepared, configs, pairs=3, seed=1)
    assert not report.passed
    kinds = {(f.kind, f.purpose) for f in report.findings}
    assert kinds == {("varying_sensitivity", "criterion faithfulness")}, report.findings


def _narrowed(path, spec, configs):
    """A minimal narrowed list (the format `dpbundle sweep` writes) of ``configs``."""
    from dpbundle.release.scheme.space import config_id
    from dpbundle.release.sweep.run import _spec_fingerprint

    doc = {"format": "dpbundle-narrowed/1", "spec_sha256": _spec_fingerprint(spec),
           "min_acceptance": 0.0,
           "configurations": [{"id": config_id(c), "config": c, "acceptance": 1.0, "wilson_low": 1.0,
                               "wilson_high": 1.0, "runs": 1, "decision": "above"} for c in configs]}
    path.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    return path


def test_data_dependent_control_flow_is_found(tmp_path, monkeypatch):
    """A criterion that releases one count per income bin *present in T* (the domain taken
    from the private data, known bug 8): an edge record that fills the empty top bin changes
    the sequence of calls."""
    from dpbundle.mechanisms.criteria.kway import KWayMarginals

    original = KWayMarginals.evaluate

    def leaky(self, ctx, rand):
        col = ctx.real.codes[:, ctx.real.column("income")]
        for code in np.unique(col):
            rand.laplace(int((col == code).sum()), sensitivity=1, epsilon=0.01, integer=True,
                         purpose=f"criterion kway count of income bin {code}")
        return original(self, ctx, rand)

    monkeypatch.setattr(KWayMarginals, "evaluate", leaky)
    spec = every_type_spec("declared_public")
    spec["generators"] = [{"type": "mst_pure"}]
    path, data = _write(tmp_path, spec, simulate(800, top_income=900))   # bin 1000-2000 empty
    res = _run(str(path), str(data), "--pairs", "2", "--seed", "3")
    assert res.exit_code == 1, res.output
    assert "FAIL control_flow" in res.output
    assert "criterion kway count of income bin" in res.output or "'criterion kway'" in res.output


# --------------------------------------------------------------------------- input and help


def test_bad_input_exits_2(tmp_path, every_type):
    _, _, path, data = every_type
    assert _run().exit_code == 2
    assert _run("--example", "nope").exit_code == 2
    assert _run(str(path), str(data), "--example", "births").exit_code == 2
    doc = yaml.safe_load(path.read_text())
    from dpbundle.release.data.fingerprint import file_sha256

    doc["privacy"]["private_data_sha256"] = [file_sha256(data)]
    private = tmp_path / "private.yaml"
    private.write_text(yaml.safe_dump(doc, sort_keys=False), "utf-8")
    res = _run(str(private), str(data))
    assert res.exit_code == 2 and "private_data_sha256" in res.output


def test_help_follows_the_house_style():
    import test_cli_help as h

    h.test_examples_fit_in_80_columns_and_are_not_wrapped(["selftest"])
    h.test_one_usage_style_and_no_type_on_flags(["selftest"])
