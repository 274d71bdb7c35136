"""Criteria for any registry (issue 10): joint groups, categorical group-by without group bins,
per-alternative group bins, k-way subsets, one-hot regression features, nominal faithfulness;
spec validation of group_bins / acceptance / faithfulness (wrong results 3, 5, 6); the audit's
independent recomputation of the sensitivities."""
from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import cat_coding, int_coding, neighbours
from dpbundle.audit.labels import AuditColumn, SpecView
from dpbundle.audit.sensitivity import recompute_sensitivity
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import CriterionError, EvalContext, make_criterion
from dpbundle.mechanisms.criteria.regression import RegressionDesign, fm_vector, ols, ss_vector
from dpbundle.release.spec.load import SpecError, read_spec_document, validate_spec
from dpbundle.release.spec.criteria_checks import criteria_problems, criteria_warnings

BIRTHS = Path(__file__).resolve().parents[1] / "examples" / "births.yaml"


@pytest.fixture()
def births_doc() -> dict:
    return copy.deepcopy(read_spec_document(BIRTHS))


def _problems(doc: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_spec(doc)
    return info.value.problems


# ------------------------------------------------------------------ wrong result 3 (unit system)

def _with_valued_age_alternative(doc: dict) -> dict:
    """mother_age gains an alternative with the bin [24, 29) whose declared number is 26."""
    doc["columns"][1]["alternatives"].append(
        {"id": "shifted", "clip": [17, 45], "edges": [17, 18, 20, 24, 29, 35, 40, 43, 45, 46],
         "values": [17, 19, 22, 26, 32, 37, 41, 44, 45]})
    return doc


def test_values_override_does_not_reject_valid_group_bins(births_doc):
    """Wrong result 3: group edge 25 lies inside the bin [24, 29), but that bin's released number
    is 26, so it falls in the group "25-29"; the old check compared edges with bin edges."""
    doc = _with_valued_age_alternative(births_doc)
    assert not any("group_bins" in p for p in criteria_problems(doc))
    validate_spec(doc)


def test_criterion_groups_the_valued_bin_by_its_number():
    age = int_coding("age", [17, 18, 20, 24, 29, 35], values=[17, 19, 22, 26, 32])
    w = int_coding("w", [0, 10, 20])
    real = Coded(codes=np.array([[3, 0], [2, 1], [4, 1], [3, 1]]), columns=(age, w))
    spec = {"group_bins": {"age": {"edges": [25, 30], "labels": ["<25", "25-29", "30+"]}}}
    crit = make_criterion({"id": "m", "type": "conditional_means", "target": "w", "by": ["age"],
                           "bounds": [0, 20], "threshold": 5, "epsilon": 1, "margin_share": 0,
                           "margin_plus": 0})
    _, inputs = crit.sensitivity(EvalContext(real, real, spec))
    # bin [24, 29) (number 26) is in "25-29" with... itself: codes 3, 3 -> 2 records
    assert inputs["synthetic_group_sizes"]["age"] == {"<25": 1, "25-29": 2, "30+": 1}


def test_edge_inside_a_bin_without_values_is_still_refused(births_doc):
    births_doc["group_bins"]["mother_age"] = {"edges": [25, 30, 37], "labels": ["a", "b", "c", "d"]}
    assert any("splits the bin [35, 40)" in p for p in _problems(births_doc))


def test_group_that_holds_no_number_of_an_alternative_does_not_fit(births_doc):
    # parity coarse numbers: 1, 2.5, 5, 8.5 and 10 ("10<"); no edge splits a bin, but no number
    # is >= 11, so the group "11+" can never hold a record under this alternative
    births_doc["columns"][2]["alternatives"] = [{"id": "coarse", "clip": [1, 11], "edges": [1, 2, 4, 7, 11, 12]}]
    births_doc["group_bins"]["parity"] = {"edges": [7, 11], "labels": ["1-6", "7-10", "11+"]}
    problems = [p for p in _problems(births_doc) if p.startswith("group_bins.parity")]
    assert len(problems) == 1
    assert "'11+'" in problems[0] and "numbers >= 11" in problems[0] and "'coarse'" in problems[0] \
        and "do not fit" in problems[0]


def test_per_alternative_group_bins_validate(births_doc):
    births_doc["group_bins"]["mother_age"] = {"per_alternative": {
        "coarse": {"edges": [25, 35], "labels": ["<25", "25-34", "35+"]},
        "years": {"edges": [30], "labels": ["<30", "30+"]}}}
    validate_spec(births_doc)
    births_doc["group_bins"]["mother_age"]["per_alternative"]["nope"] = {"edges": [30], "labels": ["a", "b"]}
    assert any(p.startswith("group_bins.mother_age.per_alternative.nope: column 'mother_age' has no alternative")
               for p in _problems(births_doc))
    del births_doc["group_bins"]["mother_age"]["per_alternative"]["nope"]
    births_doc["group_bins"]["mother_age"]["per_alternative"]["years"] = {"edges": [10], "labels": ["a", "b"]}
    problems = _problems(births_doc)
    assert any(p.startswith("group_bins.mother_age.per_alternative.years: group 'a'") and "do not fit" in p
               for p in problems)


def test_group_bins_on_a_categorical_column_need_values(births_doc):
    del births_doc["columns"][4]["alternatives"][0]["values"]
    births_doc["columns"][4]["alternatives"][0]["categories"] = ["M", "F"]
    assert any(p.startswith("group_bins.birth_sex:") and "values" in p for p in _problems(births_doc))


# ------------------------------------------------------------------ wrong result 5 (adjacent categories)

def test_categorical_column_under_adjacent_is_refused(births_doc):
    faith = births_doc["faithfulness"]
    faith["exact"].remove("birth_sex")
    faith["adjacent"].append("birth_sex")
    problems = _problems(births_doc)
    assert any(p.startswith("faithfulness.adjacent[3]: column 'birth_sex' is categorical") for p in problems)


def test_criterion_refuses_a_categorical_adjacent_column():
    cols = (int_coding("a", [0, 1, 2]), cat_coding("c", ["x", "y", "z"], [0, 1, 2]))
    t = Coded(codes=np.zeros((3, 2), dtype=np.int64), columns=cols)
    crit = make_criterion({"id": "f", "type": "faithfulness", "threshold": 0.5, "epsilon": 1})
    with pytest.raises(CriterionError, match="categorical"):
        crit.value(EvalContext(t, t, {"faithfulness": {"exact": ["a"], "adjacent": ["c"], "max_adjacent": 1}}))


def test_nominal_rules_validate(births_doc):
    faith = births_doc["faithfulness"]
    faith["exact"].remove("birth_sex")
    faith.update(nominal=["birth_sex"], max_nominal=1, max_differing=1)
    validate_spec(births_doc)
    faith["nominal"].append("parity")
    assert any("parity listed both as exact and nominal" in p for p in _problems(births_doc))


# ------------------------------------------------------------------ wrong result 6 (threshold range)

def test_derived_ratio_threshold_below_one_is_refused(births_doc):
    """At epsilon 0.15 the births ratio threshold comes out 2 - 1.18 = 0.82 < 1 = the metric's minimum."""
    ratio = next(e for e in births_doc["acceptance"] if e["id"] == "ratio")
    ratio["epsilon"] = 0.15
    # the numbers, written out: Delta = c^2/(c + m) = 4/52; scale = Delta/eps; q = -scale ln(2 * 0.05)
    delta = 4 / 52
    q = -(delta / 0.15) * math.log(0.1)
    thr = 2 - q
    assert thr == pytest.approx(0.819, abs=1e-3)
    problems = _problems(births_doc)
    hit = [p for p in problems if p.startswith("acceptance[1].threshold:")]
    assert hit, problems
    assert "0.8" in hit[0] and "[1, 2]" in hit[0] and "never" in hit[0] and "epsilon 0.15" in hit[0]


@pytest.mark.parametrize("cid,value,range_text", [
    ("kway", 0.0, "[0, 1]"), ("faithfulness", -0.1, "[0, 1]"), ("mean_parity", 0.0, "[0, 10]"),
    ("regression", 0.0, "[0, inf]")])
def test_typed_threshold_at_or_below_the_minimum_is_refused(births_doc, cid, value, range_text):
    i = next(k for k, e in enumerate(births_doc["acceptance"]) if e["id"] == cid)
    births_doc["acceptance"][i]["threshold"] = value
    hit = [p for p in _problems(births_doc) if p.startswith(f"acceptance[{i}].threshold:")]
    assert hit and range_text in hit[0]


def test_threshold_above_the_maximum_is_a_warning_not_an_error(births_doc):
    births_doc["acceptance"][7]["threshold"] = 2.0  # faithfulness, a share
    validate_spec(births_doc)
    warnings = criteria_warnings(births_doc)
    assert len(warnings) == 1 and warnings[0].startswith("acceptance[7].threshold:") and "every candidate" in warnings[0]


def test_births_spec_has_no_threshold_problem_or_warning(births_doc):
    assert criteria_problems(births_doc) == [] and criteria_warnings(births_doc) == []


def test_bounds_far_wider_than_the_targets_numbers_are_a_warning_with_the_bounds_that_would_do(births_doc):
    """mean_gestation's numbers are 29..41 under every alternative: [28, 43] uses 12/15 of its
    range (no warning), [20, 50] 12/30; the suggested bounds validate without the warning."""
    i = next(k for k, e in enumerate(births_doc["acceptance"]) if e["id"] == "mean_gestation")
    births_doc["acceptance"][i]["bounds"] = [20, 50]
    validate_spec(births_doc)
    hit = [w for w in criteria_warnings(births_doc) if w.startswith(f"acceptance[{i}].bounds:")]
    assert len(hit) == 1 and "[20, 50]" in hit[0] and "29 to 41" in hit[0] and "0.4 of its size" in hit[0]
    births_doc["acceptance"][i]["bounds"] = [29, 41]
    validate_spec(births_doc)
    assert criteria_warnings(births_doc) == []


# ------------------------------------------------------------------ acceptance references

def test_acceptance_paths_for_by_columns_features(births_doc):
    mp = births_doc["acceptance"][2]
    mp["by"] = [["mother_age", "nope"], ["mother_age", "mother_age"], "parity"]
    births_doc["acceptance"][0].update(columns=["parity", "zzz"], max_k=3)
    births_doc["acceptance"][5]["features"] = ["birth_weight"]
    problems = _problems(births_doc)
    assert any(p.startswith("acceptance[2].by[0][1]: unknown released column 'nope'") for p in problems)
    assert any(p.startswith("acceptance[2].by[1]: a column is listed twice") for p in problems)
    assert any(p.startswith("acceptance[2].by[2]: the target 'parity' cannot group itself") for p in problems)
    assert any(p.startswith("acceptance[0].columns[1]: unknown released column 'zzz'") for p in problems)
    assert any(p.startswith("acceptance[0].max_k: 3 exceeds the 2") for p in problems)
    assert any(p.startswith("acceptance[5].features[0]: the target 'birth_weight' cannot be a feature") for p in problems)


def test_joint_and_ungrouped_by_validate(births_doc):
    births_doc["acceptance"][3]["by"] = [["birth_sex", "mother_age"], "birth_month", None]
    births_doc["acceptance"][0].update(columns=["birth_month", "parity", "birth_sex"], max_k=2)
    validate_spec(births_doc)


# ------------------------------------------------------------------ conditional means: groups

def _group_of_code(coded: Coded, col: str, code: int, spec: dict, alternatives: dict) -> int:
    """Group of one code of one column, written out with bisect on its number."""
    import bisect

    cc = coded.columns[coded.column(col)]
    gb = spec.get("group_bins", {}).get(col)
    if gb and "per_alternative" in gb:
        gb = gb["per_alternative"].get(alternatives.get(col))
    return bisect.bisect_right(gb["edges"], cc.values[code]) if gb else int(code)


def _brute_groups(coded: Coded, cols: list[str], spec: dict, alternatives: dict) -> list[tuple]:
    return [tuple(_group_of_code(coded, c, row[coded.column(c)], spec, alternatives) for c in cols)
            for row in coded.codes]


@st.composite
def joint_case(draw):
    cols = (int_coding("a", [0, 2, 5, 6, 9]), cat_coding("s", ["m", "f"], [0, 1]),
            cat_coding("r", ["n", "s", "e", "w"], [0, 1, 2, 3]), int_coding("y", [0, 10, 20, 40]))
    t, t2, c = draw(neighbours(columns=cols, max_n=30))
    by = draw(st.lists(st.sampled_from([None, "a", "s", "r", ["s", "a"], ["r", "s"], ["a", "r", "s"]]),
                       min_size=1, max_size=3, unique_by=lambda b: str(b)))
    spec = {"group_bins": {}}
    alternatives = {}
    if draw(st.booleans()):
        spec["group_bins"]["a"] = {"edges": [3], "labels": ["<3", "3+"]}
    elif draw(st.booleans()):
        spec["group_bins"]["a"] = {"per_alternative": {"x": {"edges": [4, 6], "labels": ["p", "q", "r"]}}}
        alternatives["a"] = draw(st.sampled_from(["x", "other"]))
    share = draw(st.sampled_from([0.0, 0.05]))
    return t, t2, c, by, spec, alternatives, share


def _joint_reference(t, c, by, spec, alts, share, keys=None):
    """(value, group sizes) written out: with ``keys`` (a priority per row of T) each real group
    keeps its m_g rows of smallest key (the resize); without, the expectation form."""
    margin = math.ceil(share * t.n) + 1
    y_t = np.clip(t.values_of("y"), 0, 30)
    y_c = np.clip(c.values_of("y"), 0, 30)
    best = abs(y_t.mean() - y_c.mean()) if None in by else 0.0
    sizes = [t.n] if None in by else []
    for item in by:
        if item is None:
            continue
        cols = [item] if isinstance(item, str) else item
        kt, kc = _brute_groups(t, cols, spec, alts), _brute_groups(c, cols, spec, alts)
        # reachable groups: the product of each column's groups that some code's number falls in
        per = [sorted({_group_of_code(t, col, k, spec, alts) for k in range(t.columns[t.column(col)].size)})
               for col in cols]
        for g in itertools.product(*per):
            s = sum(k == g for k in kc)
            rows = [i for i, k in enumerate(kt) if k == g]
            r = [y_t[i] for i in rows]
            m = max(s - margin, 1)
            sizes.append(m)
            mean_c = np.mean([y for y, k in zip(y_c, kc) if k == g]) if s else 15.0
            if len(r) <= m:
                kept = sum(r)
            elif keys is None:
                kept = np.mean(r) * m
            else:
                kept = sum(y_t[i] for i in sorted(rows, key=lambda i: keys[i])[:m])
            mean_t = (kept + max(m - len(r), 0) * 15.0) / m
            best = max(best, abs(mean_t - mean_c))
    return best, sizes


def _order_keys(crit, ctx, t, rng) -> np.ndarray:
    """Position of every row of T in the criterion's random order drawn with ``rng``."""
    from dpbundle.mechanisms.cells import types_of
    from dpbundle.mechanisms.coding import mixed_radix_index

    lazy, fine = crit.resize_order(ctx, rng)
    row_type = np.searchsorted(types_of(t).cells, mixed_radix_index(t.codes, t.domain))
    return lazy.positions(fine[row_type])


@settings(max_examples=150, deadline=None)
@given(joint_case(), st.integers(0, 2**32 - 1))
def test_joint_groups_value_and_neighbour_sensitivity(cs, seed):
    """The value is the keyed reference for the keys of the criterion's own random order; the
    sensitivity holds under the proof's coupling (the same keys for T and its neighbour)."""
    t, t2, c, by, spec, alts, share = cs
    crit = make_criterion({"id": "m", "type": "conditional_means", "target": "y", "by": by,
                           "bounds": [0, 30], "threshold": 1, "epsilon": 1, "margin_share": share})
    ctx = EvalContext(t, c, spec, alternatives=alts)
    sens, inputs = crit.sensitivity(ctx)
    keys = _order_keys(crit, ctx, t, np.random.Generator(np.random.PCG64(seed)))
    v = crit.value(ctx, np.random.Generator(np.random.PCG64(seed)))
    ref, sizes = _joint_reference(t, c, by, spec, alts, share, keys)
    assert v == pytest.approx(ref, abs=1e-9)
    ref2, _ = _joint_reference(t2, c, by, spec, alts, share, keys)
    assert abs(ref - ref2) <= sens + 1e-9
    # the expectation form against the brute-force reference of the joint groups
    best, sizes = _joint_reference(t, c, by, spec, alts, share)
    assert crit.value(ctx) == pytest.approx(best, abs=1e-9)
    assert inputs["min_group_size"] == min(sizes)
    assert sens == pytest.approx(30 / min(sizes))


def test_per_alternative_bins_follow_the_configuration():
    age = int_coding("age", [0, 10, 20, 30])
    y = int_coding("y", [0, 1, 2])
    t = Coded(codes=np.array([[0, 0], [1, 1], [2, 1], [2, 0]]), columns=(age, y))
    spec = {"columns": [{"name": "age", "alternatives": [{"id": "a"}, {"id": "b"}]}],
            "group_bins": {"age": {"per_alternative": {"a": {"edges": [10], "labels": ["young", "old"]}}}}}
    crit = make_criterion({"id": "m", "type": "conditional_means", "target": "y", "by": ["age"],
                           "bounds": [0, 1], "threshold": 0.5, "epsilon": 1, "margin_share": 0,
                           "margin_plus": 0})
    _, ia = crit.sensitivity(EvalContext(t, t, spec, alternatives={"age": "a"}))
    assert ia["synthetic_group_sizes"]["age"] == {"young": 1, "old": 3}
    _, ib = crit.sensitivity(EvalContext(t, t, spec, alternatives={"age": "b"}))
    assert ib["synthetic_group_sizes"]["age"] == {"0-9": 1, "10-19": 1, "20-29": 2}  # its own bins
    with pytest.raises(CriterionError, match="per_alternative"):
        crit.sensitivity(EvalContext(t, t, spec))   # two alternatives, none named


# ------------------------------------------------------------------ k-way subset

@settings(max_examples=100, deadline=None)
@given(neighbours(max_d=4, max_size=3, max_n=20), st.data())
def test_kway_subset_value_and_sensitivity(tc, data):
    t, t2, c = tc
    names = [col.name for col in t.columns]
    sub = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
    mk = data.draw(st.integers(1, len(sub)))
    crit = make_criterion({"id": "k", "type": "kway_marginals", "threshold": 0.5, "epsilon": 1,
                           "columns": sub, "max_k": mk})
    idx = [t.column(x) for x in sub]
    brute = 0
    for k in range(1, mk + 1):
        for S in itertools.combinations(idx, k):
            cells = {}
            for row in t.codes:
                cells[tuple(row[list(S)])] = cells.get(tuple(row[list(S)]), 0) + 1
            for row in c.codes:
                cells[tuple(row[list(S)])] = cells.get(tuple(row[list(S)]), 0) - 1
            brute = max(brute, max(abs(v) for v in cells.values()))
    ctx = EvalContext(t, c, {})
    assert crit.value(ctx) == pytest.approx(brute / t.n)
    sens, inputs = crit.sensitivity(ctx)
    assert sens == 1 / t.n and inputs["columns"] == sub and inputs["max_k"] == mk
    assert abs(crit.value(ctx) - crit.value(EvalContext(t2, c, {}))) <= sens + 1e-12


# ------------------------------------------------------------------ regression: one-hot

def _reg_columns(values=(0, 1, 2)):
    return (int_coding("x", [0, 2, 4, 6]), cat_coding("r", ["n", "s", "e"], list(values)),
            cat_coding("b", ["no", "yes"], [0, 1]), int_coding("y", [0, 10, 20, 30, 40]))


def test_one_hot_design_and_reference_level():
    rng = np.random.default_rng(3)
    cols = _reg_columns()
    codes = np.column_stack([rng.integers(0, k, 500) for k in (3, 3, 2, 4)])
    t = Coded(codes=codes, columns=cols)
    des = RegressionDesign.from_synth(t, "y", 0, 40)   # features default: every other column
    assert des.features == ("x", "r=s", "r=e", "b=yes")
    assert des.d == 5


def test_one_hot_never_uses_code_numbers():
    """Predictions do not change when the categories' numbers change: they enter as indicators."""
    rng = np.random.default_rng(4)
    codes = np.column_stack([rng.integers(0, k, 400) for k in (3, 3, 2, 4)])
    codes[:, 3] = np.clip(codes[:, 1] * 2 - codes[:, 0] + 1, 0, 3)   # y depends on r non-linearly in codes
    preds = []
    for values in ((0, 1, 2), (5, -3, 100)):
        t = Coded(codes=codes, columns=_reg_columns(values))
        des = RegressionDesign.from_synth(t, "y", 0, 40)
        preds.append(des.predict(ols(des.z(t), des.y(t)), t))
    assert preds[0] == pytest.approx(preds[1], abs=1e-8)
    # and the one-hot fit equals least squares on explicit dummies (independent design)
    t = Coded(codes=codes, columns=_reg_columns())
    X = np.column_stack([np.ones(400), t.values_of("x"), codes[:, 1] == 1, codes[:, 1] == 2, codes[:, 2] == 1]).astype(float)
    b = np.linalg.lstsq(X, np.clip(t.values_of("y"), 0, 40), rcond=None)[0]
    assert preds[0] == pytest.approx(np.clip(X @ b, 0, 40), abs=1e-8)


@st.composite
def reg_neighbours(draw):
    return draw(neighbours(columns=_reg_columns(), max_n=25, min_n=2))


@settings(max_examples=150, deadline=None)
@given(reg_neighbours())
def test_one_hot_fm_and_ss_sensitivity_on_neighbours(tc):
    """(1 + d)^2 and d(d+3)/2 with d = design columns (indicators counted) + 1."""
    t, t2, c = tc
    des = RegressionDesign.from_synth(c, "y", 0, 40)
    d = des.d
    for fit, bound, vec in (("functional_mechanism", (1 + d) ** 2, fm_vector),
                            ("sufficient_statistics", d * (d + 3) // 2, ss_vector)):
        crit = make_criterion({"id": "r", "type": "regression_coefficients", "target": "y", "bounds": [0, 40],
                               "fit": fit, "threshold": 1, "epsilon": 1})
        sens, inputs = crit.sensitivity(EvalContext(t, c, {}))
        assert sens == bound and inputs["d"] == d
        a, b = vec(*des.scaled(t)), vec(*des.scaled(t2))
        assert np.abs(a - b).sum() <= sens + 1e-9


def test_one_hot_fm_worst_case_is_attained():
    """Two records whose scaled vectors (ty, tx) agree on half the coordinates and are opposite on
    the rest reach (1 + d)^2, also with indicator coordinates."""
    cols = (cat_coding("r", ["n", "s", "e"], [0, 1, 2]), int_coding("y", [0, 10, 20]))
    # C: every category and both y bins present -> indicators r=s, r=e in use; d = 3
    c = Coded(codes=np.array([[0, 0], [1, 1], [2, 0], [0, 1]]), columns=cols)
    des = RegressionDesign.from_synth(c, "y", 4.5, 14.5)   # bounds = the two numbers: ty = -1 or +1
    assert des.d == 3
    # w = (ty, 1, r=s, r=e): record (s, y high) = (+1, 1, +1, -1); record (e, y high) = (+1, 1, -1, +1)
    # agree on 2 coordinates, differ on 2 -> 4 * 2 * 2 = 16 = (1 + 3)^2
    t = Coded(codes=np.array([[1, 1], [0, 0]]), columns=cols)
    t2 = Coded(codes=np.array([[2, 1], [0, 0]]), columns=cols)
    diff = np.abs(fm_vector(*des.scaled(t)) - fm_vector(*des.scaled(t2))).sum()
    assert diff == pytest.approx((1 + des.d) ** 2)


# ------------------------------------------------------------------ faithfulness: nominal

def _cost_ok(a, b, cols, rules) -> bool:
    n_adj = n_nom = 0
    for j, col in enumerate(cols):
        if a[j] == b[j]:
            continue
        if col.name in rules.get("adjacent", []):
            if abs(int(a[j]) - int(b[j])) != 1:
                return False
            n_adj += 1
        elif col.name in rules.get("nominal", []):
            n_nom += 1
        else:
            return False
    md = rules.get("max_differing")
    return (n_adj <= rules.get("max_adjacent", 1) and n_nom <= rules.get("max_nominal", 0)
            and (md is None or n_adj + n_nom <= md))


def _matching(t, c, rules) -> int:
    g = nx.Graph()
    left = [("t", i) for i in range(t.n)]
    g.add_nodes_from(left)
    g.add_nodes_from(("c", i) for i in range(c.n))
    for i, a in enumerate(t.codes):
        for k, b in enumerate(c.codes):
            if _cost_ok(a, b, t.columns, rules):
                g.add_edge(("t", i), ("c", k))
    return len(nx.algorithms.bipartite.hopcroft_karp_matching(g, top_nodes=left)) // 2


@st.composite
def nominal_case(draw):
    cols = (int_coding("a", [0, 1, 2, 3]), cat_coding("p", ["x", "y", "z"], [0, 1, 2]),
            cat_coding("q", ["u", "v", "w"], [0, 1, 2]), int_coding("b", [0, 2, 4]))
    t, t2, c = draw(neighbours(columns=cols, max_n=18))
    roles = {"a": draw(st.sampled_from(["exact", "adjacent"])), "b": draw(st.sampled_from(["exact", "adjacent"])),
             "p": draw(st.sampled_from(["exact", "nominal"])), "q": draw(st.sampled_from(["exact", "nominal"]))}
    rules = {k: [n for n, r in roles.items() if r == k] for k in ("exact", "adjacent", "nominal")}
    rules["max_adjacent"] = draw(st.integers(0, 2))
    rules["max_nominal"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        rules["max_differing"] = draw(st.integers(0, 3))
    return t, t2, c, rules


@settings(max_examples=150, deadline=None)
@given(nominal_case())
def test_nominal_flow_equals_record_matching_and_sensitivity(cs):
    t, t2, c, rules = cs
    crit = make_criterion({"id": "f", "type": "faithfulness", "threshold": 0.5, "epsilon": 1})
    spec = {"faithfulness": rules}
    v = crit.value(EvalContext(t, c, spec))
    assert v == pytest.approx(1 - _matching(t, c, rules) / t.n)
    v2 = crit.value(EvalContext(t2, c, spec))
    sens, _ = crit.sensitivity(EvalContext(t, c, spec))
    assert sens == 1 / t.n and abs(v - v2) <= sens + 1e-12


def test_nominal_rule_examples():
    cols = (cat_coding("p", ["x", "y", "z"], [0, 1, 2]), cat_coding("q", ["u", "v"], [0, 1]),
            int_coding("a", [0, 1, 2, 3]))
    t = Coded(codes=np.array([[0, 0, 0]]), columns=cols)
    crit = make_criterion({"id": "f", "type": "faithfulness", "threshold": 0.5, "epsilon": 1})

    def f(c_row, **rules):
        rules = {"exact": [], "adjacent": ["a"], "nominal": ["p", "q"], "max_adjacent": 1, **rules}
        return crit.value(EvalContext(t, Coded(codes=np.array([c_row]), columns=cols), {"faithfulness": rules}))

    assert f([2, 0, 0]) == pytest.approx(1.0, abs=1e-12)                  # max_nominal defaults to 0
    assert f([2, 0, 0], max_nominal=1) == pytest.approx(0.0, abs=1e-12)    # p differs to a non-neighbouring category
    assert f([2, 1, 0], max_nominal=1) == pytest.approx(1.0, abs=1e-12)    # two nominal columns differ
    assert f([2, 0, 1], max_nominal=1) == pytest.approx(0.0, abs=1e-12)    # one nominal + one adjacent
    assert f([2, 0, 1], max_nominal=1, max_differing=1) == pytest.approx(1.0, abs=1e-12)
    assert f([0, 0, 2], max_nominal=1) == pytest.approx(1.0, abs=1e-12)    # adjacent means one bin


# ------------------------------------------------------------------ the audit recomputes them

def _view(spec: dict, cols, alternatives: dict) -> SpecView:
    out = []
    for cc in cols:
        out.append(AuditColumn(name=cc.name, alternative=alternatives.get(cc.name, "only"), labels=cc.labels,
                               numbers=np.asarray(cc.values), ordered=cc.ordered,
                               categories=None if cc.ordered else cc.labels))
    return SpecView(spec=spec, configuration={}, configuration_id="", columns=out, min_count=None, notes=[])


@pytest.mark.parametrize("alt", ["x", "other"])
def test_audit_recomputes_joint_per_alternative_and_one_hot(alt):
    rng = np.random.default_rng(9)
    cols = (int_coding("a", [0, 2, 5, 6, 9]), cat_coding("s", ["m", "f"], [0, 1]),
            cat_coding("r", ["n", "s", "e", "w"], [0, 1, 2, 3]), int_coding("y", [0, 10, 20, 40]))
    codes = np.column_stack([rng.integers(0, k, 300) for k in (4, 2, 4, 3)])
    codes[codes[:, 2] == 3, 2] = 2          # category "w" absent from C: its indicator is constant
    c = Coded(codes=codes, columns=cols)
    spec = {"group_bins": {"a": {"per_alternative": {"x": {"edges": [4, 6, 100], "labels": ["p", "q", "r", "empty"]}}}}}
    view = _view(spec, cols, {"a": alt})
    ctx = EvalContext(c, c, spec, alternatives={"a": alt})
    entries = [
        {"id": "m", "type": "conditional_means", "target": "y", "by": [["s", "a"], "r", None], "bounds": [0, 30],
         "threshold": 1, "epsilon": 1},
        {"id": "reg", "type": "regression_coefficients", "target": "y", "bounds": [0, 30], "threshold": 1, "epsilon": 1},
        {"id": "k", "type": "kway_marginals", "columns": ["a", "r"], "max_k": 1, "threshold": 0.5, "epsilon": 1},
    ]
    for e in entries:
        sens, inputs = make_criterion(e).sensitivity(ctx)
        want, facts = recompute_sensitivity(e, {"sensitivity_inputs": inputs}, view, codes, c.n)
        assert want == pytest.approx(sens), (e["id"], facts)
        assert not any(k.startswith("declared_") for k in facts)
    # the one-hot d: x, s=f, r=s, r=e (r=w constant 0 in C) + intercept
    assert make_criterion(entries[1]).sensitivity(ctx)[1]["d"] == 5


def test_bounds_that_hold_every_number_give_the_same_value_and_proportionally_less_noise():
    """What the bounds warning promises, on a mean criterion: bounds [10, 59] around numbers
    10..59 give the exact value of [1, 81] (nothing is clipped; no group is padded here) with the
    sensitivity scaled by 49/80."""
    hours = int_coding("hours", [1, 10, 20, 30, 35, 40, 41, 45, 50, 55, 60, 81],
                       values=[10, 14.5, 24.5, 32, 37, 40, 42.5, 47, 52, 57, 59])
    sex = cat_coding("sex", ["male", "female"], [0, 1])
    rng = np.random.default_rng(5)
    T = Coded(np.column_stack([rng.integers(0, 11, 400), rng.integers(0, 2, 400)]), (hours, sex))
    C = Coded(np.column_stack([rng.integers(0, 11, 400), rng.integers(0, 2, 400)]), (hours, sex))
    spec = {"columns": [], "acceptance": []}
    out = []
    for bounds in ([1, 81], [10, 59]):
        crit = make_criterion({"id": "m", "type": "conditional_means", "target": "hours", "by": [None, "sex"],
                               "bounds": bounds, "threshold": 1.5, "epsilon": 0.1, "margin_share": 0.1})
        ctx = EvalContext(real=T, synth=C, spec=spec)
        out.append((crit.value(ctx, np.random.default_rng(1)), crit.sensitivity(ctx)[0]))
    (v_wide, s_wide), (v_tight, s_tight) = out
    assert v_wide == pytest.approx(v_tight, rel=1e-12) and v_wide > 0   # floats rounded per sensitivity
    assert s_tight == pytest.approx(s_wide * 49 / 80)


def test_the_docs_bounds_warning_is_what_spec_validate_prints_for_the_persons_example():
    """docs/spec.md shows the warning for examples/persons.yaml's mean_hours with the bounds it
    had before ([1, 81]); with its bounds now ([10, 59]) there is none."""
    root = Path(__file__).resolve().parents[1]
    doc = read_spec_document(root / "examples" / "persons.yaml")
    assert [w for w in criteria_warnings(doc) if ".bounds:" in w] == []
    i = next(k for k, e in enumerate(doc["acceptance"]) if e["id"] == "mean_hours")
    doc["acceptance"][i]["bounds"] = [1, 81]
    hit = [w for w in criteria_warnings(doc) if ".bounds:" in w]
    docs = " ".join((root / "docs" / "spec.md").read_text().split())
    assert len(hit) == 1 and "[10, 59]" in hit[0] and "0.61" in hit[0]
    assert "warning " + " ".join(hit[0].split()) in docs


@pytest.mark.parametrize("bounds", [[-20, 45], [60, 100], [0, 5], [1e300, 1.7e308]])
def test_bounds_that_clip_some_number_get_no_bounds_advice(bounds):
    """The rule judges only bounds that hold every number: loose on one side and clipping on the
    other, or disjoint from the numbers, it says nothing (it would name bounds that clip)."""
    root = Path(__file__).resolve().parents[1]
    doc = read_spec_document(root / "examples" / "persons.yaml")
    i = next(k for k, e in enumerate(doc["acceptance"]) if e["id"] == "mean_hours")
    doc["acceptance"][i]["bounds"] = bounds
    assert [w for w in criteria_warnings(doc) if ".bounds:" in w] == []


def test_regression_bounds_get_no_bounds_advice(births_doc):
    """The regressions rescale the target with their bounds: narrower bounds change their values,
    so the rule (exact for conditional means) does not speak for them."""
    for e in births_doc["acceptance"]:
        if e["type"] in ("regression_coefficients", "regression_mae_difference"):
            e["bounds"] = [0, 20000]
    validate_spec(births_doc)
    assert [w for w in criteria_warnings(births_doc) if ".bounds:" in w] == []
