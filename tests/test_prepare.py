"""Data preparation: CSV(.gz) loading, input validation, raw constraints (release/data/prepare.py)."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpbundle.release.data.prepare import InputError, prepare, read_typed
from dpbundle.release.spec.load import validate_spec

HEADER = "mother_age,parity,gestation_week,is_female,birth_weight,date_of_birth"
GOOD_ROW = "30,1,39,True,3400,2019-01-15"

# A hand-made file: which raw constraints of examples/births.yaml each row matches is worked out by
# hand in the comments (strict inequalities; a comparison with a missing value is False).
HAND_ROWS = [
    "30,1,39,True,3400,2019-01-15",   # 1 keep
    "30,NA,39,False,3400,2019-01-15",  # 2 missing
    "30,2,39,True,450,2019-02-15",    # 3 w<500; w<600&g>29; w<700&g>32
    "30,2,39,True,5600,2019-03-15",   # 4 w>5500
    "30,2,21,True,400,2019-03-15",    # 5 w<500; g<22
    "30,2,45,False,3500,2019-04-15",  # 6 g>44
    "22,7,39,False,3300,2019-05-15",  # 7 a<23&p>6
    "19,4,39,False,3301,2019-05-15",  # 8 a<20&p>3
    "18,8,39,True,3302,2019-05-15",   # 9 a<23&p>6; a<20&p>3
    "30,1,25,True,1500,2019-06-15",   # 10 g<26&w>1499
    "30,1,28,True,3000,2019-06-15",   # 11 g<29&w>2999
    "30,1,33,True,4000,2019-06-15",   # 12 g<34&w>3999
    "30,1,30,True,550,2019-07-15",    # 13 w<600&g>29
    "30,1,33,True,650,2019-07-15",    # 14 w<700&g>32
    "30,1,29,True,599,2019-08-15",    # 15 keep (29 > 29 is false)
    "23,7,39,False,3303,2019-08-15",  # 16 keep (23 < 23 is false)
    "20,4,39,False,3304,2019-09-15",  # 17 keep (20 < 20 is false)
    "30,1,22,False,500,2019-09-15",   # 18 keep (22 < 22, 500 < 500 are false)
    "NA,NA,39,True,3305,2019-10-15",  # 19 missing (counted once)
    "30,1,44,True,5500,2019-12-15",   # 20 keep (44 > 44, 5500 > 5500 are false)
]
HAND_EXPECTED_DROPS = {
    "missing value": 2,
    "birth weight below 500 g": 2,
    "birth weight above 5500 g": 1,
    "gestation below 22 weeks": 1,
    "gestation above 44 weeks": 1,
    "mother under 23 with parity above 6": 2,
    "mother under 20 with parity above 3": 2,
    "under 26 weeks and above 1499 g": 1,
    "under 29 weeks and above 2999 g": 1,
    "under 34 weeks and above 3999 g": 1,
    "under 600 g and above 29 weeks": 2,
    "under 700 g and above 32 weeks": 2,
}
HAND_KEPT = [1, 15, 16, 17, 18, 20]  # 1-based data rows


def _csv(tmp_path: Path, rows: list[str], header: str = HEADER, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(header + "\n" + "\n".join(rows) + "\n", "utf-8")
    return path


def _rows(*rows_line: tuple[int, str]) -> list[str]:
    """Ten good rows with some replaced: (1-based data row, row text)."""
    rows = [GOOD_ROW] * 10
    for i, text in rows_line:
        rows[i - 1] = text
    return rows


# --------------------------------------------------------------------------- drop counts

def test_hand_made_drop_counts(tmp_path, births_spec):
    prepared = prepare(_csv(tmp_path, HAND_ROWS), births_spec, atoms=False)   # the records' own values
    assert prepared.rows_read == 20
    assert dict(prepared.dropped_by) == HAND_EXPECTED_DROPS
    assert [name for name, _ in prepared.dropped_by] == list(HAND_EXPECTED_DROPS)  # spec order
    assert prepared.dropped_total == 20 - len(HAND_KEPT)
    assert prepared.n == len(HAND_KEPT)
    kept_weights = [int(HAND_ROWS[i - 1].split(",")[4]) for i in HAND_KEPT]
    np.testing.assert_array_equal(prepared.table["birth_weight"], kept_weights)
    assert len(prepared.sha256) == 64


def test_typed_columns(tmp_path, births_spec):
    prepared = prepare(_csv(tmp_path, HAND_ROWS), births_spec)
    t = prepared.table
    assert t["mother_age"].dtype == np.float64
    np.testing.assert_array_equal(t["is_female"], [1, 1, 0, 0, 0, 1])
    assert t["date_of_birth"].dtype == np.dtype("datetime64[D]")
    assert str(t["date_of_birth"][0]) == "2019-01-15"
    for v in t.values():
        assert len(v) == prepared.n


def test_na_marker_is_dropped_by_any_missing(tmp_path, births_spec):
    rows = _rows((2, "NA,1,39,True,3400,2019-01-15"), (5, "30,1,39,NA,3400,2019-01-15"),
                 (7, "30,1,39,True,3400,NA"))
    prepared = prepare(_csv(tmp_path, rows), births_spec)
    assert dict(prepared.dropped_by)["missing value"] == 3
    assert prepared.n == 7


def test_missing_values_without_any_missing_constraint_is_refused_by_the_spec(births_doc):
    """A spec that declares missing-value markers but drops no missing value is refused before
    any data is read: otherwise one record with a missing cell would make the release refuse the
    registry, a refusal outside the neighbouring relation (issue 22)."""
    from dpbundle.release.spec.load import SpecError

    births_doc["raw_constraints"] = births_doc["raw_constraints"][1:]
    with pytest.raises(SpecError) as info:
        validate_spec(births_doc)
    assert "input.missing_values" in str(info.value) and "any_missing: true" in str(info.value)
    births_doc["input"]["missing_values"] = []
    validate_spec(births_doc)          # no marker declared: nothing to drop


def test_csv_gz_is_read(tmp_path, births_spec):
    plain = _csv(tmp_path, HAND_ROWS)
    gz = tmp_path / "data.csv.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = prepare(plain, births_spec), prepare(gz, births_spec)
    assert b.n == a.n == len(HAND_KEPT)
    assert b.dropped_by == a.dropped_by
    for k in a.table:
        np.testing.assert_array_equal(a.table[k], b.table[k])


def test_no_rows_left(tmp_path, births_spec):
    with pytest.raises(InputError, match="no rows left"):
        prepare(_csv(tmp_path, ["30,1,39,True,5600,2019-01-15"]), births_spec)


# --------------------------------------------------------------------------- bad input

BAD_CELLS = [
    # (1-based data row, row, column, words expected in the message)
    (3, "30,1,39,True,abc,2019-01-15", "birth_weight", "not a number"),
    (4, "30,,39,True,3400,2019-01-15", "parity", "empty cell"),
    (5, "30,1,39,True,3400,2019-02-30", "date_of_birth", "not a valid date"),
    (6, "80,1,39,True,3400,2019-01-15", "mother_age", "above the allowed maximum 70"),
    (7, "30,0,39,True,3400,2019-01-15", "parity", "below the allowed minimum 1"),
    (8, "30,1,39,maybe,3400,2019-01-15", "is_female", "not a boolean"),
    (9, "30,1,39.5,True,3400,2019-01-15", "gestation_week", "not an integer"),
    (10, "30,1,39,True,3400,15/01/2019", "date_of_birth", "not a valid date"),
]


@pytest.mark.parametrize("row,text,column,words", BAD_CELLS, ids=[c[2] + "-" + c[3].split()[-1] for c in BAD_CELLS])
def test_bad_cell_names_line_and_column(tmp_path, births_spec, row, text, column, words):
    path = _csv(tmp_path, _rows((row, text)))
    with pytest.raises(InputError) as info:
        prepare(path, births_spec)
    line = row + 1  # line 1 is the header
    assert info.value.problems == [info.value.problems[0]] and len(info.value.problems) == 1
    msg = info.value.problems[0]
    assert msg.startswith(f"line {line}, column {column!r}: "), msg
    assert words in msg
    assert str(path) in str(info.value)
    bad = text.split(",")[HEADER.split(",").index(column)]
    if bad:  # the offending cell is quoted as it appears in the file, marked PRIVATE (issue 36)
        assert msg.endswith(f"(PRIVATE: {bad!r})"), msg


def test_missing_column(tmp_path, births_spec):
    header = "mother_age,gestation_week,is_female,birth_weight,date_of_birth"
    with pytest.raises(InputError) as info:
        prepare(_csv(tmp_path, ["30,39,True,3400,2019-01-15"], header=header), births_spec)
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("line 1 (header): missing column 'parity'")


def test_several_problems_reported_in_line_order(tmp_path, births_spec):
    rows = _rows((9, "30,1,39,True,3400,2019-02-30"), (2, "30,1,39,True,x,2019-01-15"))
    with pytest.raises(InputError) as info:
        prepare(_csv(tmp_path, rows), births_spec)
    assert info.value.total == 2
    assert [p.split(",")[0] for p in info.value.problems] == ["line 3", "line 10"]


def test_many_problems_are_counted(tmp_path, births_spec):
    rows = ["30,1,39,True,x,2019-01-15"] * 30
    with pytest.raises(InputError) as info:
        prepare(_csv(tmp_path, rows), births_spec)
    assert info.value.total == 30
    assert "and 22 more" in str(info.value)


def test_missing_file(tmp_path, births_spec):
    with pytest.raises(InputError, match="file not found"):
        prepare(tmp_path / "absent.csv", births_spec)


def test_not_a_csv(tmp_path, births_spec):
    path = tmp_path / "data.csv.gz"
    path.write_bytes(b"this is not gzip")
    with pytest.raises(InputError):
        prepare(path, births_spec)


def test_boolean_tokens(tmp_path, births_spec):
    rows = _rows((1, "30,1,39,true,3400,2019-01-15"), (2, "30,1,39,FALSE,3400,2019-01-15"),
                 (3, "30,1,39,1,3400,2019-01-15"), (4, "30,1,39,0,3400,2019-01-15"))
    table, n = read_typed(_csv(tmp_path, rows), births_spec)
    assert n == 10
    np.testing.assert_array_equal(table["is_female"][:5], [1, 0, 1, 0, 1])


# --------------------------------------------------------------------------- public sample

def _design_drop_counts(df: pd.DataFrame) -> tuple[dict[str, int], int]:
    """DESIGN.md's raw constraints written independently with pandas (no missing values in the sample)."""
    a, p, g, w = df["mother_age"], df["parity"], df["gestation_week"], df["birth_weight"]
    masks = {
        "missing value": df.isna().any(axis=1),
        "birth weight below 500 g": w < 500,
        "birth weight above 5500 g": w > 5500,
        "gestation below 22 weeks": g < 22,
        "gestation above 44 weeks": g > 44,
        "mother under 23 with parity above 6": (a < 23) & (p > 6),
        "mother under 20 with parity above 3": (a < 20) & (p > 3),
        "under 26 weeks and above 1499 g": (g < 26) & (w > 1499),
        "under 29 weeks and above 2999 g": (g < 29) & (w > 2999),
        "under 34 weeks and above 3999 g": (g < 34) & (w > 3999),
        "under 600 g and above 29 weeks": (w < 600) & (g > 29),
        "under 700 g and above 32 weeks": (w < 700) & (g > 32),
    }
    drop = np.zeros(len(df), dtype=bool)
    for m in masks.values():
        drop |= m.to_numpy()
    return {k: int(m.sum()) for k, m in masks.items()}, int((~drop).sum())


def test_public_10k_sample(shared_data_dir, births_spec):
    path = shared_data_dir / "nvss2019_singleton_10k.csv"
    if not path.is_file():
        pytest.skip(f"public test data not available: {path}")
    df = pd.read_csv(path)
    counts, n = _design_drop_counts(df)
    prepared = prepare(path, births_spec)
    assert prepared.rows_read == len(df) == 10_000
    assert dict(prepared.dropped_by) == counts
    assert prepared.n == n
    assert n < 10_000


# --------------------------------------------------------------------------- raw constraints (release/data/constraints.py)

from dpbundle.release.data.constraints import OPS, constraint_mask  # noqa: E402
from dpbundle.release.data.prepare import is_missing  # noqa: E402


def test_ops_table():
    import operator

    assert set(OPS) == {"<", "<=", ">", ">=", "==", "!="}
    a = np.array([1.0, 2.0, 3.0])
    expected = {"<": [True, False, False], "<=": [True, True, False], ">": [False, False, True],
                ">=": [False, True, True], "==": [False, True, False], "!=": [True, False, True]}
    for op, want in expected.items():
        np.testing.assert_array_equal(OPS[op](a, 2.0), want, err_msg=op)
    assert OPS["<"] is operator.lt and OPS["!="] is operator.ne


def _typed_table():
    return {
        "age": np.array([15.0, 25.0, np.nan, 19.0, 30.0]),
        "parity": np.array([5.0, 5.0, 5.0, np.nan, 1.0]),
        "female": np.array([1.0, 0.0, 1.0, 0.0, np.nan]),
        "dob": np.array(["2019-01-15", "2019-06-15", "NaT", "2019-12-15", "2019-03-01"], dtype="datetime64[D]"),
        "region": np.array([0, 1, -1, 2, 1], dtype=np.int64),
    }


KINDS = {"age": "integer", "parity": "integer", "female": "boolean", "dob": "date", "region": "category"}


@pytest.mark.parametrize("when,expected", [
    ([["age", "<", 20]], [True, False, False, True, False]),        # NaN < 20 is False
    ([["age", ">=", 19]], [False, True, False, True, True]),
    ([["age", "!=", 25]], [True, False, False, True, True]),        # NaN != 25 is False here (missing never matches)
    ([["age", "<", 20], ["parity", ">", 3]], [True, False, False, False, False]),
    ([["female", "==", True]], [True, False, True, False, False]),
    ([["female", "!=", True]], [False, True, False, True, False]),
    ([["dob", "<", "2019-03-01"]], [True, False, False, False, False]),
    ([["dob", ">=", "2019-03-01"]], [False, True, False, True, True]),
    ([["region", "==", "south"]], [False, True, False, False, True]),
    ([["region", "!=", "south"]], [True, False, False, True, False]),  # missing category never matches
    ([["region", "in", ["south", "east"]]], [False, True, False, True, True]),
    ([["region", "not in", ["south"]]], [True, False, False, True, False]),  # missing never matches
    ([["age", "in", [15, 25]]], [True, True, False, False, False]),
    ([["age", "not in", [15]]], [False, True, False, True, True]),  # NaN is in no set, but missing never matches
])
def test_raw_constraint_on_typed_table(when, expected):
    cats = {"region": ["north", "south", "east"]}
    mask = constraint_mask({"name": "c", "when": when}, _typed_table(), KINDS, missing=is_missing, categories=cats)
    np.testing.assert_array_equal(mask, expected)


def test_raw_constraint_on_an_undeclared_category_is_refused():
    """Regression (issue 10, wrong result 1): an unknown category used to match no row silently."""
    cats = {"region": ["north", "south", "east"]}
    for op in ("==", "!="):
        with pytest.raises(ValueError, match="nowhere"):
            constraint_mask({"name": "c", "when": [["region", op, "nowhere"]]}, _typed_table(), KINDS,
                            missing=is_missing, categories=cats)


def test_any_missing_constraint():
    mask = constraint_mask({"name": "m", "any_missing": True}, _typed_table(), KINDS, missing=is_missing)
    np.testing.assert_array_equal(mask, [False, False, True, True, True])
