"""faithfulness: max-flow on types equals record-level Hopcroft-Karp; rules; sensitivity 1/n."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from criteria_util import BIRTHS_FAITHFULNESS, births_columns, births_like, neighbours
from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.criteria import EvalContext, make_criterion

ENTRY = {"id": "faith", "type": "faithfulness", "threshold": 0.05, "epsilon": 0.01}


def cost_le_1(a, b, columns, rules) -> bool:
    """The spec's rule, record against record, written out directly."""
    changed = 0
    for j, col in enumerate(columns):
        if a[j] == b[j]:
            continue
        if col.name not in rules.get("adjacent", []) or abs(int(a[j]) - int(b[j])) != 1:
            return False
        for v in rules.get("exact_if_contains", {}).get(col.name, []):
            for k in (a[j], b[j]):
                lo, up = col.lower[k], col.upper[k]
                if lo < v < up - 1:     # integer bins: v neither the first nor the last value
                    return False
        changed += 1
    return changed <= rules.get("max_adjacent", 1)


def hopcroft_karp(t: Coded, c: Coded, rules) -> int:
    g = nx.Graph()
    left = [("t", i) for i in range(t.n)]
    g.add_nodes_from(left)
    g.add_nodes_from(("c", i) for i in range(c.n))
    for i, a in enumerate(t.codes):
        for k, b in enumerate(c.codes):
            if cost_le_1(a, b, t.columns, rules):
                g.add_edge(("t", i), ("c", k))
    m = nx.algorithms.bipartite.hopcroft_karp_matching(g, top_nodes=left)
    return len(m) // 2


@st.composite
def faith_case(draw):
    t, t2, c = draw(neighbours(max_d=4, max_size=4, max_n=20))
    names = [x.name for x in t.columns]
    roles = [draw(st.sampled_from(["exact", "adjacent", "none"])) for _ in names]
    rules = {"exact": [n for n, r in zip(names, roles) if r == "exact"],
             "adjacent": [n for n, r in zip(names, roles) if r == "adjacent"],
             "max_adjacent": draw(st.integers(0, 2))}
    if rules["adjacent"] and draw(st.booleans()):
        col = draw(st.sampled_from(rules["adjacent"]))
        cc = t.columns[t.column(col)]
        rules["exact_if_contains"] = {col: [draw(st.integers(int(cc.lower[0]), int(cc.upper[-1])))]}
    # columns with role "none" count as exact (documented rule): drop them from both lists
    return t, t2, c, rules


@settings(max_examples=200, deadline=None)
@given(faith_case())
def test_flow_equals_record_matching_and_sensitivity(cs):
    t, t2, c, rules = cs
    crit = make_criterion(ENTRY)
    ctx = EvalContext(t, c, {"faithfulness": rules})
    v = crit.value(ctx)
    assert v == pytest.approx(1 - hopcroft_karp(t, c, rules) / t.n)
    v2 = crit.value(EvalContext(t2, c, {"faithfulness": rules}))
    sens, inputs = crit.sensitivity(ctx)
    assert sens == pytest.approx(1 / t.n) and inputs["n"] == t.n
    assert abs(v - v2) <= sens + 1e-12


def _record(cols, **labels):
    return [cols[j].labels.index(labels[c.name]) for j, c in enumerate(cols)]


@pytest.mark.parametrize("age,t_age,c_age,ok", [
    ("coarse", "35-39", "30-34", False),      # 37 strictly inside 35-39: exact
    ("coarse", "30-34", "35-39", False),      # ... on either side
    ("coarse", "30-34", "25-29", True),
    ("coarse-37", "37-39", "35-36", True),    # 37 is the first value of 37-39
    ("coarse-37", "37-39", "40-42", True),
])
def test_births_exact_if_contains(age, t_age, c_age, ok):
    cols = births_columns(age)
    base = dict(birth_month="3", parity="2-3", gestation_week="37-41", birth_sex="F",
                birth_weight="3200-3299")
    t = Coded(codes=np.array([_record(cols, mother_age=t_age, **base)]), columns=cols)
    c = Coded(codes=np.array([_record(cols, mother_age=c_age, **base)]), columns=cols)
    v = make_criterion(ENTRY).value(EvalContext(t, c, {"faithfulness": BIRTHS_FAITHFULNESS}))
    assert v == pytest.approx(0.0 if ok else 1.0, abs=1e-12)  # lipschitz_float: a hair below


def test_births_two_adjacent_changes_not_allowed():
    cols = births_columns()
    a = dict(birth_month="3", parity="1", gestation_week="37-41", birth_sex="M",
             birth_weight="3200-3299", mother_age="25-29")
    b = dict(a, gestation_week="34-36", birth_weight="3300-3399")
    t = Coded(codes=np.array([_record(cols, **a)]), columns=cols)
    c = Coded(codes=np.array([_record(cols, **b)]), columns=cols)
    spec = {"faithfulness": BIRTHS_FAITHFULNESS}
    assert make_criterion(ENTRY).value(EvalContext(t, c, spec)) == pytest.approx(1.0, abs=1e-12)
    spec2 = {"faithfulness": dict(BIRTHS_FAITHFULNESS, max_adjacent=2)}
    assert make_criterion(ENTRY).value(EvalContext(t, c, spec2)) == 0.0


def test_births_like_against_hopcroft_karp():
    rng = np.random.default_rng(4)
    t = births_like(300, rng)
    codes = t.codes.copy()
    rows = rng.choice(300, 120, replace=False)
    cols = rng.integers(0, 6, 120)
    codes[rows, cols] = np.clip(codes[rows, cols] + rng.choice([-1, 1], 120), 0,
                                np.asarray(t.domain)[cols] - 1)
    c = t.with_codes(codes[rng.permutation(300)])
    v = make_criterion(ENTRY).value(EvalContext(t, c, {"faithfulness": BIRTHS_FAITHFULNESS}))
    assert v == pytest.approx(1 - hopcroft_karp(t, c, BIRTHS_FAITHFULNESS) / 300)
    assert 0 < v < 0.4
