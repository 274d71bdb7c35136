"""Issue 38 (reading at the speed of the disk): Parquet input. The same registry as CSV and as
Parquet (one file of several row groups, parts, CSV and Parquet parts mixed) prepares the same
table with the same fingerprint; a release from Parquet passes its public audit and its enclave
replay from the Parquet file, its parts and the CSV file; bad Parquet input is refused through
the CLI (exit 2, no bundle, nothing spent) naming the row, row group, column and rule, never a
value; without pyarrow a Parquet file is refused with the advice to install the extra."""
from __future__ import annotations

import datetime as dt
import decimal
import gzip
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from dpbundle.audit.private_data import PrivateDataError, load_private, private_parts  # noqa: E402
from dpbundle.release.data.fingerprint import table_fingerprint  # noqa: E402
from dpbundle.release.data.parts import prepare_parts, registry_parts  # noqa: E402
from dpbundle.release.data.prepare import InputError, prepare, read_typed  # noqa: E402
from dpbundle.release.spec.load import load_spec  # noqa: E402

ROWS = 3000
NA_ROWS = {17: "birth_weight", 1400: "date_of_birth", 2999: "is_female"}   # 0-based data rows


def _csv_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text().splitlines()
    return lines[0].split(","), [line.split(",") for line in lines[1:]]


def _arrow_table(header: list[str], rows: list[list[str]]):
    """The CSV's rows as typed Arrow columns (a null where the CSV says NA): integers of two
    widths, the gestation week as a double, a boolean, a date32."""
    cols = {h: [r[j] for r in rows] for j, h in enumerate(header)}

    def na(values, f):
        return [None if v == "NA" else f(v) for v in values]

    return pa.table({
        "mother_age": pa.array(na(cols["mother_age"], int), pa.int64()),
        "parity": pa.array(na(cols["parity"], int), pa.int32()),
        "gestation_week": pa.array(na(cols["gestation_week"], float), pa.float64()),
        "is_female": pa.array(na(cols["is_female"], lambda v: v == "True"), pa.bool_()),
        "birth_weight": pa.array(na(cols["birth_weight"], int), pa.uint16()),
        "date_of_birth": pa.array(na(cols["date_of_birth"], dt.date.fromisoformat), pa.date32()),
    })


@pytest.fixture(scope="module")
def reg(tmp_path_factory):
    """The births registry (3,000 rows, a few NA) as CSV, as one Parquet file of 6 row groups,
    as 3 Parquet parts of several row groups, and as mixed parts (CSV, gzip CSV, Parquet)."""
    tmp = tmp_path_factory.mktemp("i38pq")
    csv = fx.example_registry(tmp / "registry.csv", ROWS, 5)
    header, rows = _csv_rows(csv)
    for r, column in NA_ROWS.items():
        rows[r][header.index(column)] = "NA"
    csv.write_text("\n".join(",".join(x) for x in [header, *rows]) + "\n")
    table = _arrow_table(header, rows)
    single = tmp / "registry.parquet"
    pq.write_table(table, single, row_group_size=500)
    parts = tmp / "parts"
    parts.mkdir()
    mixed = tmp / "mixed"
    mixed.mkdir()
    for k, (a, b) in enumerate([(0, 1000), (1000, 2200), (2200, ROWS)]):
        pq.write_table(table.slice(a, b - a), parts / f"part-{k}.parquet", row_group_size=300)
        text = "\n".join(",".join(x) for x in [header, *rows[a:b]]) + "\n"
        if k == 0:
            (mixed / "part-0.csv").write_text(text)
        elif k == 1:
            pq.write_table(table.slice(a, b - a), mixed / "part-1.parquet", row_group_size=400)
        else:
            (mixed / "part-2.csv.gz").write_bytes(gzip.compress(text.encode()))
    return {"tmp": tmp, "csv": csv, "parquet": single, "parts": parts, "mixed": mixed, "table": table,
            "header": header, "rows": rows}


def _same(a, b, order: bool) -> None:
    """The same prepared table: counts, the drops, the fingerprint, and (``order``) the rows in
    the file's order; else the same multiset of rows."""
    assert (a.n, a.rows_read, a.dropped_by, a.dropped_total) == (b.n, b.rows_read, b.dropped_by, b.dropped_total)
    ta, tb = a.table, b.table
    assert sorted(ta) == sorted(tb)
    bits = {k: (np.ascontiguousarray(ta[k]).view(np.int64), np.ascontiguousarray(tb[k]).view(np.int64)) for k in ta}
    if order:
        for k, (x, y) in bits.items():
            assert np.array_equal(x, y), k
    else:
        stack = [np.stack([bits[k][i] for k in sorted(bits)], axis=1) for i in (0, 1)]
        x, y = (np.unique(s, axis=0, return_counts=True) for s in stack)
        assert np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])


@pytest.mark.parametrize("policy", ["declared_public", "dp_count"])
def test_csv_and_parquet_prepare_the_same_table(reg, tmp_path, policy):
    spec = load_spec(fx.fast_spec(tmp_path / "spec.yaml", policy))
    one = prepare(reg["csv"], spec)
    assert one.dropped_by[0] == ("missing value", len(NA_ROWS))     # the nulls are missing values
    got = {"parquet": prepare(reg["parquet"], spec),
           "parts": prepare_parts(reg["parts"], spec),
           "mixed": prepare_parts(reg["mixed"], spec)}
    for name, p in got.items():
        _same(p, one, order=name == "parquet" or policy == "dp_count")
        assert table_fingerprint(p, spec) == table_fingerprint(one, spec), name
    assert got["parquet"].sha256 != one.sha256                       # the file's own bytes


def test_parquet_parts_read_by_parallel_processes_and_on_dask(reg, tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = load_spec(fx.fast_spec(tmp_path / "spec.yaml", "dp_count"))
    one = prepare_parts(reg["parts"], spec, workers=1)
    _same(prepare_parts(reg["parts"], spec, workers=2), one, order=True)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None, host="127.0.0.1") as cluster:
        there = prepare_parts(reg["parts"], spec, scheduler=cluster.scheduler_address)
    _same(there, one, order=True)
    assert there.sha256 == one.sha256


# ---------------------------------------------------------------- types
TYPES_SPEC = {
    "missing_values": ["NA"],
    "columns": [
        {"name": "u8", "type": "integer", "min": 0, "max": 300},
        {"name": "f32", "type": "float", "min": -10, "max": 10},
        {"name": "whole", "type": "category", "categories": [1, 2, 3]},
        {"name": "money", "type": "float", "min": 0, "max": 100},
        {"name": "kind", "type": "category", "categories": ["a", "b", "c"]},
        {"name": "text", "type": "category", "categories": ["x", "y"]},
        {"name": "flag", "type": "boolean"},
        {"name": "day", "type": "date"},
        {"name": "nothing", "type": "integer", "min": 0, "max": 9},
    ],
}
# The same table as a CSV file would hold it (written here by hand, not by the code under test).
TYPES_CSV = """u8,f32,whole,money,kind,text,flag,day,nothing
7,0.1,1,12.50,a,x,true,2020-02-29,NA
255,-2.5,2,0.01,b,y,false,1999-12-31,NA
NA,NA,3,NA,c,NA,NA,NA,NA
"""


def _types_table():
    return pa.table({
        "u8": pa.array([7, 255, None], pa.uint8()),
        "f32": pa.array([0.1, -2.5, None], pa.float32()),
        "whole": pa.array([1.0, 2.0, 3.0], pa.float64()),          # integral floats: "1", "2", "3"
        "money": pa.array([decimal.Decimal("12.50"), decimal.Decimal("0.01"), None], pa.decimal128(6, 2)),
        "kind": pa.array(["a", "b", "c"]).dictionary_encode(),
        "text": pa.array(["x", "y", None], pa.large_string()),
        "flag": pa.array([True, False, None]),
        "day": pa.array([dt.date(2020, 2, 29), dt.date(1999, 12, 31), None], pa.date32()),
        "nothing": pa.nulls(3),
    })


def _inputs_spec(inputs: dict):
    """What read_typed reads of a Spec (its ``model.input``), for an input of any columns."""
    from types import SimpleNamespace

    from dpbundle.release.spec.typed import Inputs

    return SimpleNamespace(model=SimpleNamespace(input=Inputs.from_document(inputs)))


def test_every_read_type_gives_the_csv_cells_typed_value(tmp_path):
    path = tmp_path / "types.parquet"
    pq.write_table(_types_table(), path)
    csv = tmp_path / "types.csv"
    csv.write_text(TYPES_CSV)
    spec = _inputs_spec(TYPES_SPEC)
    got, n = read_typed(path, spec)
    want, m = read_typed(csv, spec)
    assert n == m == 3
    for k in want:
        assert np.array_equal(np.asarray(got[k]).view(np.int64), np.asarray(want[k]).view(np.int64)), k
    assert got["f32"][0] == 0.1 and got["whole"][1] == 1      # float32 0.1 as "0.1"; 2.0 is category "2"


def test_the_audit_reads_the_same_texts_as_the_release():
    """The audit's own conversion of each read type gives the release's cell texts."""
    import pyarrow.compute as pc

    from dpbundle.audit.private_data import _parquet_texts
    from dpbundle.release.data.parquet_read import cell_texts

    table = _types_table().append_column("neg", pa.array([-0.0, 1e20, float("nan")]))
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        assert cell_texts(pa, pc, column).to_pylist() == _parquet_texts(pa, pc, column).to_pylist(), name
    assert cell_texts(pa, pc, table.column("f32").combine_chunks()).to_pylist() == ["0.1", "-2.5", None]


# ---------------------------------------------------------------- release, public audit, replay
@pytest.fixture(scope="module")
def made(reg):
    from dpbundle.release.api import release
    from dpbundle.release.bundle import keys

    tmp = reg["tmp"] / "made"
    tmp.mkdir()
    keys.write_keypair(tmp / "k")
    spec = fx.fast_spec(tmp / "spec.yaml")
    with release(spec, reg["parquet"], out=tmp / "b", key=tmp / "k.key", ledger=tmp / "ledger.jsonl",
                 transcript=tmp / "t.jsonl"):
        pass
    return {"bundle": tmp / "b", "pub": tmp / "k.pub", "transcript": tmp / "t.jsonl"}


@pytest.mark.parametrize("data", ["parquet", "parts", "mixed", "csv"])
def test_a_release_from_parquet_passes_its_audit_and_replays(reg, made, data):
    from dpbundle.audit.runner import run_audit

    rep = run_audit(str(made["bundle"]), pubkey=str(made["pub"]), transcript=str(made["transcript"]),
                    data=str(reg[data]))
    assert rep.verdict == "verified", [(c.check, c.problems) for c in rep.checks if c.failed]
    assert rep.get("replay").result == "pass"


# ---------------------------------------------------------------- refusals
def _cli_release(tmp: Path, data: Path, spec: Path | None = None):
    """`dpbundle release` of ``data``: (exit code, output); the bundle and the ledger must not exist."""
    res = cli_refused(tmp, data, spec)
    return res.exit_code, res.output


def cli_refused(tmp: Path, data: Path, spec: Path | None = None):
    """The CliRunner result of `dpbundle release` of ``data``, after checking that no bundle, no
    transcript and no ledger entry exist afterwards."""
    from typer.testing import CliRunner

    from dpbundle.release.cli.main import app

    runner = CliRunner()
    if not (tmp / "k.key").exists():
        assert runner.invoke(app, ["keygen", "--out", str(tmp / "k")]).exit_code == 0
    spec = spec or fx.fast_spec(tmp / "spec.yaml")
    res = runner.invoke(app, ["release", str(spec), str(data), "--out", str(tmp / "B"), "--key", str(tmp / "k.key"),
                              "--ledger", str(tmp / "ledger.jsonl"), "--transcript", str(tmp / "t.jsonl")])
    assert not (tmp / "B").exists() and not (tmp / "t.jsonl").exists()
    assert not (tmp / "ledger.jsonl").exists() or not (tmp / "ledger.jsonl").read_text().strip()
    return res


def _audit_spec(spec_path: Path) -> dict:
    return yaml.safe_load(spec_path.read_text())


def _with(table, name: str, values, dtype=None):
    i = table.column_names.index(name)
    return table.set_column(i, name, pa.array(values, dtype if dtype is not None else table.schema.field(name).type))


def test_a_bad_value_in_row_group_2_names_row_group_column_and_rule_not_the_value(reg, tmp_path):
    ages = reg["table"].column("mother_age").to_pylist()
    ages[1203] = 7777                                   # data row 1204: row group 2 of 500-row groups
    path = tmp_path / "bad.parquet"
    pq.write_table(_with(reg["table"], "mother_age", ages), path, row_group_size=500)
    code, out = _cli_release(tmp_path, path)
    where = "row 1204 (row group 2), column 'mother_age': above the allowed maximum 70"
    assert code == 2 and where in " ".join(out.split()) and "7777" not in out and "Traceback" not in out
    spec = load_spec(tmp_path / "spec.yaml")
    with pytest.raises(InputError, match="7777"):       # the steward's own tool shows it
        prepare(path, spec, show_values=True)
    with pytest.raises(PrivateDataError) as caught:     # the audit's own reader
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))
    assert "row 1204 (row group 2), column 'mother_age': above the allowed maximum" in str(caught.value)
    assert "7777" not in str(caught.value)


def test_a_null_where_the_column_declares_no_missing_marker_is_refused(reg, tmp_path):
    doc = yaml.safe_load(fx.fast_spec(tmp_path / "base.yaml").read_text())
    doc["input"].pop("missing_values", None)
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    path = tmp_path / "nulls.parquet"
    pq.write_table(reg["table"], path, row_group_size=500)         # a null on data row 18
    code, out = _cli_release(tmp_path, path, spec)
    assert code == 2 and "row 18 (row group 0), column 'birth_weight': null cell" in " ".join(out.split())
    with pytest.raises(PrivateDataError, match=r"row 18 \(row group 0\), column 'birth_weight': null cell"):
        load_private(path, _audit_spec(spec))
    assert load_private(reg["parquet"], _audit_spec(fx.fast_spec(tmp_path / "na.yaml"))).n > 0  # with NA declared


def test_an_overlong_string_cell_is_refused_without_its_value(reg, tmp_path, monkeypatch):
    monkeypatch.setenv("DPBUNDLE_MAX_CELL_CHARS", "50")
    ages = [str(x) for x in reg["table"].column("mother_age").to_pylist()]
    ages[2499] = "SECRET" * 20
    path = tmp_path / "long.parquet"
    pq.write_table(_with(reg["table"], "mother_age", ages, pa.string()), path, row_group_size=500)
    code, out = _cli_release(tmp_path, path)
    text = " ".join(out.split())
    assert code == 2 and "row 2500 (row group 4), column 'mother_age': cell longer than the maximum of 50" in text
    assert "SECRET" not in out
    with pytest.raises(PrivateDataError) as caught:
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))
    assert "row 2500 (row group 4), column 'mother_age': a cell longer than 50" in str(caught.value)
    assert "SECRET" not in str(caught.value)
    ages[2499] = "30"                       # text cells that are numbers are read as the CSV's
    pq.write_table(_with(reg["table"], "mother_age", ages, pa.string()), path, row_group_size=500)
    assert prepare(path, load_spec(tmp_path / "spec.yaml")).rows_read == ROWS


def test_a_file_that_is_not_parquet_is_refused(reg, tmp_path):
    path = tmp_path / "registry.parquet"
    path.write_bytes(reg["csv"].read_bytes())
    code, out = _cli_release(tmp_path, path)
    assert code == 2 and "not a Parquet file" in out
    with pytest.raises(PrivateDataError, match="not a Parquet file"):
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))


def test_a_corrupt_footer_names_the_exception_type_not_its_text(reg, tmp_path):
    good = reg["parquet"].read_bytes()
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(good[:-300] + b"\x07" * 292 + good[-8:])      # the footer's bytes overwritten
    with pytest.raises(Exception) as arrow:
        pq.ParquetFile(path)
    code, out = _cli_release(tmp_path, path)
    assert code == 2 and "not a readable Parquet file" in out and type(arrow.value).__name__ in out
    assert str(arrow.value)[:30] not in out
    with pytest.raises(PrivateDataError, match="footer cannot be decoded"):
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))


def test_a_timestamp_column_is_refused_naming_column_and_type(reg, tmp_path):
    days = reg["table"].column("date_of_birth").to_pylist()
    stamps = [None if d is None else dt.datetime(d.year, d.month, d.day, 12) for d in days]
    path = tmp_path / "stamps.parquet"
    pq.write_table(_with(reg["table"], "date_of_birth", stamps, pa.timestamp("ms")), path)
    code, out = _cli_release(tmp_path, path)
    assert code == 2 and "column 'date_of_birth' is a timestamp[ms] column" in " ".join(out.split())
    with pytest.raises(PrivateDataError, match=r"column 'date_of_birth' is a timestamp\[ms\] column"):
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))


def test_without_pyarrow_a_parquet_file_is_refused_with_the_extra_to_install(reg, tmp_path, monkeypatch):
    for name in ("pyarrow", "pyarrow.parquet", "pyarrow.compute"):
        monkeypatch.setitem(sys.modules, name, None)     # `import pyarrow` raises ImportError
    code, out = _cli_release(tmp_path, reg["parquet"])
    assert code == 2 and "pip install 'dpbundle[parquet]'" in " ".join(out.split())
    with pytest.raises(PrivateDataError, match=r"pip install 'dpbundle\[parquet\]'"):
        load_private(reg["parquet"], _audit_spec(tmp_path / "spec.yaml"))
    assert prepare(reg["csv"], load_spec(tmp_path / "spec.yaml")).rows_read == ROWS   # CSV needs none


def test_x_csv_beside_x_parquet_is_the_same_records_twice(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "a.csv").write_text("x\n")
    pq.write_table(pa.table({"x": [1]}), d / "b.parquet")
    assert [p.name for p in registry_parts(d)] == ["a.csv", "b.parquet"]
    assert [p.name for p in private_parts(d)] == ["a.csv", "b.parquet"]
    pq.write_table(pa.table({"x": [1]}), d / "a.parquet")
    with pytest.raises(InputError, match="a.csv and a.parquet are both parts"):
        registry_parts(d)
    with pytest.raises(PrivateDataError, match="a.csv and a.parquet are both parts"):
        private_parts(d)


def test_a_string_that_is_not_utf8_is_refused_with_its_row(reg, tmp_path):
    texts = [str(x) for x in reg["table"].column("mother_age").to_pylist()]
    raw = [t.encode() for t in texts]
    raw[600] = b"3\xff\xfe"                                         # data row 601: row group 1
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in raw])]).astype(np.int32)
    column = pa.Array.from_buffers(pa.string(), len(raw), [None, pa.py_buffer(offsets.tobytes()),
                                                           pa.py_buffer(b"".join(raw))])
    path = tmp_path / "bytes.parquet"
    i = reg["table"].column_names.index("mother_age")
    pq.write_table(reg["table"].set_column(i, "mother_age", column), path, row_group_size=500)
    code, out = _cli_release(tmp_path, path)
    assert code == 2 and "row 601 (row group 1), column 'mother_age': bytes that are not UTF-8" in " ".join(out.split())
    with pytest.raises(PrivateDataError, match=r"row 601 \(row group 1\), column 'mother_age': bytes that are not UTF-8"):
        load_private(path, _audit_spec(tmp_path / "spec.yaml"))
