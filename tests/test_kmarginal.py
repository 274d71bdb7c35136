"""The SDNist k-marginal instrument (benchmarks/kmarginal.py): expected values are worked out by
hand in each test from the definition (densities = counts / n, L1 over the union of cells,
score = (2 - mean L1 over pairs) x 500, numeric features in 20 percentile bins of the target)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "kmarginal.py"
_SPEC = importlib.util.spec_from_file_location("bench_kmarginal_module", _PATH)
km = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = km
_SPEC.loader.exec_module(km)

AGE = {"AGEP": {"values": {"min": 0, "max": 99}}}


def _ages(values, sex="1") -> pd.DataFrame:
    return pd.DataFrame({"AGEP": [str(v) for v in values], "SEX": [sex] * len(values)})


def test_identical_tables_score_1000():
    t = pd.DataFrame({"A": list("xxyy"), "B": list("uvuu"), "C": list("pqrp")})
    assert km.kmarginal(t, t.copy(), ["A", "B", "C"], {}) == pytest.approx(1000.0)


def test_disjoint_supports_on_every_pair_score_0():
    t = pd.DataFrame({"A": ["a", "b"], "B": ["c", "d"], "C": ["e", "f"]})
    s = pd.DataFrame({"A": ["z"] * 3, "B": ["y"] * 3, "C": ["x"] * 3})
    assert km.kmarginal(t, s, ["A", "B", "C"], {}) == pytest.approx(0.0)


def test_hand_computed_example_with_three_pairs():
    # target (A,B): xu 1/4, xv 1/4, yu 2/4; synthetic: xu 2/4, yv 1/4, yu 1/4
    # L1(A,B) = 1/4 + 1/4 + 1/4 + 1/4 = 1. C is constant in both, and A's and B's one-way
    # densities agree (A: 1/2,1/2; B: 3/4,1/4), so L1(A,C) = L1(B,C) = 0.
    t = pd.DataFrame({"A": list("xxyy"), "B": list("uvuu"), "C": ["c"] * 4})
    s = pd.DataFrame({"A": list("xxyy"), "B": list("uuvu"), "C": ["c"] * 4})
    assert km.kmarginal(t, s, ["A", "B"], {}) == pytest.approx((2 - 1.0) * 500)
    assert km.kmarginal(t, s, ["A", "B", "C"], {}) == pytest.approx((2 - 1 / 3) * 500)


def test_different_sizes_compare_densities_not_counts():
    t = pd.DataFrame({"A": list("xy"), "B": list("uu")})
    s = pd.concat([t] * 5, ignore_index=True)
    assert km.kmarginal(t, s, ["A", "B"], {}) == pytest.approx(1000.0)


def test_target_percentile_bins_follow_sdnist_rule():
    # 40 distinct values: percentile rank k/40, bin floor(20 k/40) = floor(k/2), 19 for k = 40.
    edges, labels = km.percentile_edges(pd.Series([str(v) for v in range(1, 41)]), {"N"})
    assert list(labels) == list(range(20))
    assert list(edges) == [1] + [2 * b + 1 for b in range(1, 19)] + [40]
    # 20 distinct values: rank k/20 -> bin k (k < 20), 19 for k = 20: bin 0 stays empty.
    edges, labels = km.percentile_edges(pd.Series([str(v) for v in range(1, 21)]), {"N"})
    assert list(labels) == list(range(1, 20))
    assert list(edges) == list(range(1, 19)) + [20]


def test_synthetic_shift_is_binned_by_the_target():
    t = _ages(range(1, 41))
    # +10: synthetic 11..50. Target bins: b0 {1}, b1..b18 {2b, 2b+1}, b19 {38, 39, 40}.
    # Synthetic: b5 {11}, b6..b18 two each, b19 {38..50} = 13. Count differences:
    # b0 1, b1..b4 2 each (8), b5 1, b19 10 -> L1 = 20/40 (with its own percentiles: 0).
    assert km.kmarginal(t, _ages(range(11, 51)), ["AGEP", "SEX"], AGE) == pytest.approx(750.0)
    # all 100, above the target's range: the last bin. L1 = (1 - 3/40) + 37/40 = 74/40.
    assert km.kmarginal(t, _ages([100] * 40), ["AGEP", "SEX"], AGE) == pytest.approx(
        (2 - 74 / 40) * 500)
    # 2 -> 3 stays in bin 1: the binned score does not see it; raw values would (value 2:
    # 1/40 -> 0, value 3: 1/40 -> 2/40, L1 = 2/40, score 975).
    moved = _ages([3] + list(range(3, 41)) + [1])
    assert km.kmarginal(t, moved, ["AGEP", "SEX"], AGE) == pytest.approx(1000.0)
    assert km.kmarginal(t, moved, ["AGEP", "SEX"], {}) == pytest.approx((2 - 2 / 40) * 500)


def test_not_applicable_is_a_value_of_its_own():
    t = _ages(list(range(1, 41)) + ["N"] * 10)
    # "N" is not ranked: the bins are those of 1..40.
    edges, _ = km.percentile_edges(t["AGEP"], {"N"})
    assert edges[0] == 1 and edges[-1] == 40 and len(edges) == 20
    # the ten "N" become age 1 (bin 0): N 10/50 -> 0, bin 0 1/50 -> 11/50: L1 = 20/50.
    s = _ages(list(range(1, 41)) + [1] * 10)
    assert km.kmarginal(t, s, ["AGEP", "SEX"], AGE) == pytest.approx((2 - 0.4) * 500)


def test_dictionary_codes_beside_min_max_stay_values():
    povpip = {"POVPIP": {"values": {"N": "N/A", "min": 0, "max": 500, "501": "above 5x"}}}
    t = pd.DataFrame({"POVPIP": [str(v) for v in range(1, 41)] + ["501"], "SEX": ["1"] * 41})
    s = pd.DataFrame({"POVPIP": [str(v) for v in range(1, 41)] + ["40"], "SEX": ["1"] * 41})
    # target: bin 19 {38, 39, 40} and "501"; synthetic: bin 19 gets four, "501" none: L1 = 2/41.
    assert km.kmarginal(t, s, ["POVPIP", "SEX"], povpip) == pytest.approx((2 - 2 / 41) * 500)


def test_row_order_does_not_matter():
    rng = np.random.default_rng(7)
    t = pd.DataFrame({"AGEP": rng.integers(0, 90, 300).astype(str),
                      "A": rng.choice(list("abc"), 300), "B": rng.choice(list("xyN"), 300)})
    s = pd.DataFrame({"AGEP": rng.integers(0, 99, 200).astype(str),
                      "A": rng.choice(list("abd"), 200), "B": rng.choice(list("xy"), 200)})
    base = km.kmarginal(t, s, ["AGEP", "A", "B"], AGE)
    assert 0 < base < 1000
    shuffled = km.kmarginal(t.sample(frac=1, random_state=1), s.sample(frac=1, random_state=2),
                            ["B", "AGEP", "A"], AGE)
    assert shuffled == pytest.approx(base, abs=1e-9)


def test_bad_input_is_refused():
    t = pd.DataFrame({"A": list("xy"), "B": list("uv")})
    with pytest.raises(ValueError, match="lacks feature"):
        km.kmarginal(t, t.drop(columns="B"), ["A", "B"], {})
    with pytest.raises(ValueError, match="two features"):
        km.kmarginal(t, t, ["A"], {})
    with pytest.raises(ValueError, match="no rows"):
        km.kmarginal(t, t.iloc[:0], ["A", "B"], {})


def test_command_prints_the_score_and_exits_2_on_bad_input(tmp_path, capsys):
    t, s = tmp_path / "t.csv", tmp_path / "s.csv"
    pd.DataFrame({"A": list("xxyy"), "B": list("uvuu")}).to_csv(t, index=False)
    pd.DataFrame({"A": list("xxyy"), "B": list("uuvu")}).to_csv(s, index=False)
    assert km.main([str(t), str(s), "--features", "A", "B"]) == 0
    assert capsys.readouterr().out.strip() == "500.0"
    assert km.main([str(t), str(s), "--features", "A", "Z"]) == 2
    err = capsys.readouterr().err
    assert "Z" in err and "Traceback" not in err
