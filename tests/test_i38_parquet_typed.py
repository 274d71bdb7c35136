"""Issue 38, reading at the speed of the disk: Parquet number, boolean and date columns read
typed (no text per cell). The typed path must give exactly what the text path gives (the same
typed values bit for bit, the same problems, the same messages) and what the enclave replay's
own reader gives; a column whose missing-value markers could be a value's text is read as text."""
from __future__ import annotations

import numpy as np
import pytest

from test_i38_review_parquet import _audit, _bits, _release, _spec, _write

pa = pytest.importorskip("pyarrow")

from dpbundle.release.data import prepare  # noqa: E402
from dpbundle.release.data.prepare import InputError, read_typed  # noqa: E402


def _as_text(monkeypatch):
    """Every column read as text (the path before the typed one)."""
    monkeypatch.setattr(prepare, "_typed_columns", lambda *a, **k: {})


def _both(monkeypatch, path, columns, missing=("NA",)):
    """(typed path's values or its error text, text path's values or its error text)."""
    def run():
        try:
            return _bits(_release(path, columns, missing))
        except InputError as e:
            return str(e)
    typed = run()
    with monkeypatch.context() as m:
        _as_text(m)
        text = run()
    return typed, text


INT_EDGES = [0, -0, 1, -1, 10, 70, 2**31 - 1, -2**31, 2**53, 2**53 + 1, 2**62 + 12345, -(2**63)]
FLOAT_EDGES = [0.0, -0.0, 0.1, 1e-300, 5e-324, 1.7976931348623157e308, 3705.0, -2.5, 1 / 3]


@pytest.mark.parametrize("arrow_type", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint32(),
                                        pa.uint64(), pa.float64()])
def test_numbers_read_typed_are_the_texts_values(tmp_path, monkeypatch, arrow_type):
    if pa.types.is_floating(arrow_type):
        values = FLOAT_EDGES
    else:
        info = np.iinfo(arrow_type.to_pandas_dtype())
        values = [v for v in INT_EDGES if info.min <= v <= info.max] + [int(info.max), int(info.min)]
    path = _write(tmp_path, "n.parquet", pa.table({"x": pa.array(values + [None], type=arrow_type)}))
    plain = _write(tmp_path, "p.parquet", pa.table({"x": pa.array(values, type=arrow_type)}))
    for kind in ("float", "integer"):
        typed, text = _both(monkeypatch, path, [{"name": "x", "type": kind}])
        assert typed == text, (kind, typed, text)
        try:
            got = _release(plain, [{"name": "x", "type": kind}])
        except InputError:
            continue
        # the enclave replay's own reader agrees (as values: it keeps -0.0, the release makes 0.0)
        assert got == _audit(plain, [{"name": "x", "type": kind}])


def test_problems_and_their_messages_are_the_texts(tmp_path, monkeypatch):
    """min, max, not an integer, not a number (NaN, inf), a null where no marker is declared:
    the same problems on the same rows, the same messages, values shown only to the steward."""
    table = pa.table({"a": pa.array([5, 99, 3, None, 50], pa.int64()),
                      "b": pa.array([1.5, float("nan"), float("inf"), 2.0, 7.0]),
                      "c": pa.array([True, None, False, True, True])})
    path = _write(tmp_path, "p.parquet", table, row_group_size=2)
    cols = [{"name": "a", "type": "integer", "min": 10, "max": 60},
            {"name": "b", "type": "integer"}, {"name": "c", "type": "boolean"}]
    typed, text = _both(monkeypatch, path, cols, missing=())
    assert isinstance(typed, str) and typed == text
    for rule in ("below the allowed minimum 10", "above the allowed maximum 60", "not an integer",
                 "not a number", "null cell"):
        assert rule in typed, rule
    assert "'99'" not in typed and "PRIVATE" not in typed   # no value under release
    spec, _ = _spec(cols, ())
    with pytest.raises(InputError) as shown:
        read_typed(path, spec, show_values=True)
    assert "(PRIVATE: '99')" in str(shown.value) and "(PRIVATE: '1.5')" in str(shown.value)


def test_dates_and_booleans_read_typed_are_the_texts(tmp_path, monkeypatch):
    days = np.array(["2014-01-01", "1999-12-31", "2199-12-31", "1700-01-01"], dtype="datetime64[D]")
    table = pa.table({"d": pa.array(days.astype(np.int64).astype(np.int32), pa.int32()).cast(pa.date32()),
                      "f": pa.array([True, False, None, True])})
    path = _write(tmp_path, "d.parquet", table)
    cols = [{"name": "d", "type": "date", "min": "1800-01-01"}, {"name": "f", "type": "boolean"}]
    typed, text = _both(monkeypatch, path, cols)
    assert typed == text and "before the allowed minimum 1800-01-01" in typed
    cols[0].pop("min")
    typed, text = _both(monkeypatch, path, cols)
    assert typed == text
    full = _write(tmp_path, "f.parquet", pa.table({"d": table.column("d"), "f": pa.array([True, False, False, True])}))
    assert _release(full, cols) == _audit(full, cols)


def test_a_date_outside_the_typed_years_is_read_as_text(tmp_path, monkeypatch):
    """1600-01-01: the text path's answer (pandas' range), not the typed one's."""
    old = np.array(["1600-01-01", "2014-05-05"], dtype="datetime64[D]").astype(np.int64).astype(np.int32)
    path = _write(tmp_path, "o.parquet", pa.table({"d": pa.array(old, pa.int32()).cast(pa.date32())}))
    typed, text = _both(monkeypatch, path, [{"name": "d", "type": "date"}])
    assert typed == text


@pytest.mark.parametrize("marker, typed_read", [("NA", True), ("99", False), ("-1", False), ("nan", False),
                                                ("unknown", True)])
def test_a_marker_that_could_be_a_value_keeps_the_column_as_text(tmp_path, monkeypatch, marker, typed_read):
    path = _write(tmp_path, "m.parquet", pa.table({"x": pa.array([99, -1, 5, None], pa.int64())}))
    cols = [{"name": "x", "type": "integer", "missing": [marker]}]
    spec, _ = _spec(cols, ())
    read = {}
    original = prepare._parse_typed

    def spy(name, *a, **k):
        read[name] = True
        return original(name, *a, **k)

    monkeypatch.setattr(prepare, "_parse_typed", spy)
    got, _ = read_typed(path, spec, show_values=False)
    assert bool(read) == typed_read
    expect = {"99": [None, -1.0, 5.0, None], "-1": [99.0, None, 5.0, None]}.get(marker, [99.0, -1.0, 5.0, None])
    assert [None if np.isnan(v) else v for v in got["x"]] == expect
