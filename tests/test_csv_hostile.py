"""Hostile CSV input (issue 12, "CSV input"): every case exits 2 through the CLI with a message
naming the file, the line, the column and the rule, no traceback, no ledger entry; the enclave
replay's own reader (audit/private_data.py) gives the same protections without quoting a cell.

Inputs are built from `dpbundle example births` (examples/births.yaml)."""
from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import audit_fixtures as fx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "examples" / "births.yaml"
COLUMNS = ["mother_age", "parity", "gestation_week", "is_female", "birth_weight", "date_of_birth"]


# --------------------------------------------------------------------------- helpers

@pytest.fixture(scope="module")
def app():
    from dpbundle.release.cli.main import app

    return app


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> list[str]:
    """The header and 500 rows of the simulated births registry, as text lines."""
    from dpbundle.release.data.example import write_example

    path = tmp_path_factory.mktemp("example") / "births.csv"
    write_example(path, rows=500)
    text = path.read_text("utf-8").splitlines()
    assert text[0].split(",") == COLUMNS
    return text


@pytest.fixture(scope="module")
def key(tmp_path_factory) -> Path:
    from dpbundle.release.bundle.keys import write_keypair

    key_path, _ = write_keypair(tmp_path_factory.mktemp("keys") / "steward")
    return key_path


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _write(path: Path, rows: list[str], newline: str = "\n") -> Path:
    path.write_bytes((newline.join(rows) + newline).encode("utf-8"))
    return path


def _set(row: str, column: str, value: str) -> str:
    cells = row.split(",")
    cells[COLUMNS.index(column)] = value
    return ",".join(cells)


def validate(app, path: Path, env: dict | None = None):
    result = CliRunner().invoke(app, ["spec", "validate", str(SPEC), "--data", str(path)],
                                env={"COLUMNS": "200", **(env or {})})
    return result, _flat(result.output)


def release(app, tmp_path: Path, key: Path, path: Path):
    """`dpbundle release` on `path`; (result, flattened output, ledger, bundle, transcript)."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    ledger, out, transcript = work / "ledger.jsonl", work / "bundle", work / "t.transcript.jsonl"
    result = CliRunner().invoke(app, ["release", str(SPEC), str(path), "--out", str(out), "--key", str(key),
                                      "--ledger", str(ledger), "--transcript", str(transcript)],
                                env={"COLUMNS": "200", "DPBUNDLE_KEY_PASSPHRASE": None})
    return result, _flat(result.output), ledger, out, transcript


def assert_input_error(result, text: str, path: Path, *needles: str) -> None:
    """Exit 2, the file named, every needle in the message, no traceback."""
    assert result.exit_code == 2, text
    assert not isinstance(result.exception, (ValueError, RuntimeError, OSError, MemoryError)), repr(result.exception)
    assert "Traceback" not in text, text
    assert str(path) in text, text
    for needle in needles:
        assert needle in text, f"{needle!r} not in {text}"


def assert_nothing_spent(ledger: Path, out: Path, transcript: Path) -> None:
    assert not ledger.exists(), "the preparation comes before the ledger: no entry may be written"
    assert not out.exists() and not transcript.exists()


def load_private(path: Path):
    from dpbundle.audit.private_data import load_private as load

    return load(path, fx.load_spec())


def private_error(path: Path) -> str:
    from dpbundle.audit.private_data import PrivateDataError

    with pytest.raises(PrivateDataError) as info:
        load_private(path)
    return _flat(str(info.value))


# --------------------------------------------------------------------------- one huge cell

def _big_cell_file(path: Path, lines: list[str], chars: int) -> Path:
    """Data line 5 (file line 6) has a `chars`-character birth_weight cell."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("\n".join(lines[:5]) + "\n")
        cells = lines[5].split(",")
        f.write(",".join(cells[:4]) + ",")
        for _ in range(chars >> 20):
            f.write("9" * (1 << 20))
        f.write("9" * (chars & ((1 << 20) - 1)))
        f.write("," + cells[5] + "\n")
        f.write("\n".join(lines[6:]) + "\n")
    return path


def test_64_mib_cell_is_refused_naming_line_and_column(app, tmp_path, lines, key):
    """Was: MemoryError 'Unable to allocate 39.1 TiB' (a fixed-width array of rows x longest cell)."""
    path = _big_cell_file(tmp_path / "big.csv", lines, 64 << 20)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 6, column 'birth_weight'", "cell longer than the maximum of 65,536 characters",
                       "DPBUNDLE_MAX_CELL_CHARS")
    assert "9999999999" not in text
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "line 6, column 'birth_weight'", "cell longer than the maximum")
    assert_nothing_spent(*written)
    msg = private_error(path)
    assert "line 6, column 'birth_weight'" in msg and "longer than 65536" in msg and "9999" not in msg


def test_long_quoted_cell_over_many_lines_names_the_line_it_starts_on(app, tmp_path, lines):
    """A quoted cell of 100,000 characters in 80-character lines (no single line is long),
    after a quoted cell of the same row."""
    body = "\n".join(["x" * 79] * 1250)
    rows = lines[:3] + [_set(_set(lines[3], "mother_age", '"30"'), "is_female", f'"{body}"')] + lines[4:]
    path = _write(tmp_path / "quoted.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 4, column 'is_female'", "cell longer than the maximum")
    msg = private_error(path)
    assert "line 4, column 'is_female'" in msg and "x" * 20 not in msg


def test_max_cell_chars_is_configurable(app, tmp_path, lines):
    rows = lines[:3] + [_set(lines[3], "is_female", "x" * 3000)] + lines[4:]
    path = _write(tmp_path / "long.csv", rows)
    result, text = validate(app, path, env={"DPBUNDLE_MAX_CELL_CHARS": "2000"})
    assert_input_error(result, text, path, "line 4, column 'is_female'", "maximum of 2,000 characters")
    result, text = validate(app, path, env={"DPBUNDLE_MAX_CELL_CHARS": "4000"})
    assert_input_error(result, text, path, "line 4, column 'is_female'", "not a boolean")
    result, text = validate(app, path, env={"DPBUNDLE_MAX_CELL_CHARS": "lots"})
    assert result.exit_code == 2 and "DPBUNDLE_MAX_CELL_CHARS" in text and "Traceback" not in text


def test_echoed_value_is_cut(app, tmp_path, lines):
    """A 20 KB cell in 10,000 rows: was 1.66 GB and the whole cell echoed by spec validate."""
    rows = [lines[0]] + [lines[1 + i % 500] for i in range(10_000)]
    rows[8] = _set(rows[8], "is_female", "y" * 20_000)
    path = _write(tmp_path / "wide.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 9, column 'is_female'", "not a boolean", "(20,000 characters)")
    assert "y" * 41 not in text and "y" * 40 in text
    error = result.output[result.output.index("error"):]     # the spec's own warnings come before it
    assert len(error) < 2000


def test_release_never_echoes_a_cell(app, tmp_path, lines, key):
    rows = list(lines)
    rows[8] = _set(rows[8], "is_female", "secret-4711")
    path = _write(tmp_path / "value.csv", rows)
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "line 9, column 'is_female'", "not a boolean")
    assert "4711" not in text
    assert_nothing_spent(*written)


def test_release_does_not_count_the_bad_rows(app, tmp_path, lines, key):
    """How many records break a rule is a count of private data: `release` lists where (the
    first lines) but not how many; `spec validate --data` (the steward's tool) does."""
    rows = [lines[0]] + [_set(row, "mother_age", "5") if i < 37 else row for i, row in enumerate(lines[1:])]
    path = _write(tmp_path / "many.csv", rows)
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "line 2, column 'mother_age'")
    shown = text.replace(str(tmp_path), "TMP")  # the temporary path may hold any digits
    assert not re.search(r"(?<![\d.])37(?![\d.])", shown) and "29 more" not in shown
    assert "more problem(s)" in text
    assert_nothing_spent(*written)
    result, text = validate(app, path)
    assert "37 problem(s)" in text


# --------------------------------------------------------------------------- compression

def test_corrupt_gzip_body(app, tmp_path, lines, key):
    data = gzip.compress(("\n".join(lines) + "\n").encode())
    mid = len(data) // 2
    path = tmp_path / "corrupt.csv.gz"
    path.write_bytes(data[:mid] + bytes(100) + data[mid + 100:])
    result, text = validate(app, path)
    assert_input_error(result, text, path, "gzip data are corrupt")
    assert re.search(r"line \d+: the gzip data are corrupt", text), text
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "gzip data are corrupt")
    assert_nothing_spent(*written)
    assert "gzip" in private_error(path)


def test_truncated_gzip(app, tmp_path):
    from dpbundle.release.data.example import write_example

    plain = tmp_path / "many.csv"
    write_example(plain, rows=20_000)
    data = gzip.compress(plain.read_bytes())
    path = tmp_path / "truncated.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    result, text = validate(app, path)
    assert_input_error(result, text, path, "truncated")
    line = int(re.search(r"line (\d+): the gzip data end too early", text).group(1))
    assert 1000 < line < 20_000
    assert re.search(r"line \d+: the file cannot be read from here on \(EOFError", private_error(path))


def test_other_compression_or_workbook_is_named(app, tmp_path):
    path = tmp_path / "registry.csv"
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    result, text = validate(app, path)
    assert_input_error(result, text, path, "not a CSV file", "zip")
    path = tmp_path / "plain.csv.gz"
    path.write_text("a,b\n1,2\n")
    result, text = validate(app, path)
    assert_input_error(result, text, path, "not gzip data")


# --------------------------------------------------------------------------- line numbers

def test_line_numbers_count_blank_lines(app, tmp_path, lines):
    rows = lines[:3] + ["", ""] + lines[3:]
    rows[12] = _set(rows[12], "mother_age", "999")   # file line 13
    path = _write(tmp_path / "blank.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 13, column 'mother_age': above the allowed maximum 70")
    assert "line 13, column 'mother_age'" in private_error(path)


def test_line_numbers_after_quoted_line_breaks(app, tmp_path, lines):
    rows = list(lines)
    rows[2] = _set(rows[2], "date_of_birth", '"2014-01-15\r\n"')      # line 3 spans 3-4 (CR LF inside quotes)
    rows[5] = _set(rows[5], "is_female", '"Tr\nue"')                   # file line 7: a bad cell across a line break
    rows[9] = _set(_set(rows[9], "is_female", '"x\ny"'), "birth_weight", "heavy")   # line 12; its weight on line 13
    rows[20] = _set(rows[20], "mother_age", "999")                     # file line 24
    path = _write(tmp_path / "quoted.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 3, column 'date_of_birth': not a valid date",
                       "line 7, column 'is_female': not a boolean", "line 12, column 'is_female'",
                       "line 13, column 'birth_weight': not a number", "line 24, column 'mother_age'")
    msg = private_error(path)
    for needle in ("line 3, column 'date_of_birth'", "line 7, column 'is_female'", "line 13, column 'birth_weight'",
                   "line 24, column 'mother_age'"):
        assert needle in msg, msg


def test_non_utf8_bytes_name_line_and_column(app, tmp_path, lines, key):
    raw = [line.encode() for line in lines]
    raw[20] = _set(lines[20], "is_female", "X").encode().replace(b"X", b"Tr\xffue")   # file line 21
    path = tmp_path / "latin.csv"
    path.write_bytes(b"\n".join(raw) + b"\n")
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 21, column 'is_female': bytes that are not UTF-8 text")
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "line 21, column 'is_female'", "not UTF-8")
    assert_nothing_spent(*written)
    msg = private_error(path)
    assert "line 21, column 'is_female'" in msg and "UnicodeDecodeError" in msg and "0xff" not in msg


# --------------------------------------------------------------------------- header and structure

def test_duplicated_header_column_is_refused(app, tmp_path, lines, key):
    rows = [lines[0] + ",parity"] + [row + ",2" for row in lines[1:]]
    path = _write(tmp_path / "dup.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 1, column 'parity': the header names this column twice (columns 2 and 7)")
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "names this column twice")
    assert_nothing_spent(*written)
    assert "column 'parity': the header names this column twice" in private_error(path)


def test_trailing_comma_on_every_row_is_named_once(app, tmp_path, lines, key):
    """Was: the first column taken as an index, every cell shifted, 2,994 'problems'."""
    rows = [lines[0]] + [row + "," for row in lines[1:]]
    path = _write(tmp_path / "trailing.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 2: 7 cells where the header has 6",
                       "trailing comma", "and 496 more line(s)")
    assert "below the allowed minimum" not in text and "not a number" not in text
    assert len(re.findall(r"line \d+", text)) == 1   # line 2 (the same on lines 3, 4, 5 and 496 more)
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "trailing comma")
    assert_nothing_spent(*written)
    msg = private_error(path)
    assert "line 2: 7 cells where the header has 6 (a trailing comma" in msg and len(re.findall(r"line \d+", msg)) == 1


def test_trailing_comma_on_header_and_rows_is_a_consistent_file(app, tmp_path, lines):
    path = _write(tmp_path / "both.csv", [row + "," for row in lines])
    result, text = validate(app, path)
    assert result.exit_code == 0, text
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec

    assert prepare(path, load_spec(SPEC)).n == load_private(path).n


@pytest.mark.parametrize("sep,name", [(";", "';' (semicolon)"), ("\t", "a tab")])
def test_other_separator_is_named_once(app, tmp_path, lines, key, sep, name):
    path = _write(tmp_path / "sep.csv", [row.replace(",", sep) for row in lines])
    result, text = validate(app, path)
    assert_input_error(result, text, path, f"line 1 (header): the columns are separated by {name}, not by commas")
    assert "missing column" not in text and len(re.findall(r"line \d+", text)) == 1
    result, text, *written = release(app, tmp_path, key, path)
    assert_input_error(result, text, path, "separated by")
    assert_nothing_spent(*written)
    assert "separated by" in private_error(path)


def test_missing_columns_are_one_message(app, tmp_path, lines):
    rows = [row.split(",", 2)[2] for row in lines]   # without mother_age and parity
    path = _write(tmp_path / "narrow.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 1 (header): missing columns 'mother_age', 'parity'")
    assert text.count("missing column") == 1


def test_unclosed_quote_and_text_after_a_quote(app, tmp_path, lines):
    rows = list(lines)
    rows[4] = _set(rows[4], "gestation_week", '"39"x')
    rows[9] = _set(rows[9], "gestation_week", '"39')   # never closed: swallows the rest of the file
    path = _write(tmp_path / "quotes.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 5, column 'gestation_week': text after the closing quote",
                       "line 10, column 'gestation_week': a quoted cell starting here is never closed")
    msg = private_error(path)
    assert "line 5, column 'gestation_week': text after the closing quote" in msg
    assert "line 10, column 'gestation_week': a quoted cell that is never closed" in msg


def test_reading_stops_after_a_bounded_number_of_problems(app, tmp_path, lines, monkeypatch):
    from dpbundle.release.data import csv_read
    from dpbundle.release.data import prepare

    monkeypatch.setattr(csv_read, "CHUNK_ROWS", 100)
    monkeypatch.setattr(prepare, "MAX_PROBLEMS", 50)
    rows = [lines[0]] + [_set(lines[1 + i % 500], "mother_age", "5") for i in range(1000)]
    path = _write(tmp_path / "allbad.csv", rows)
    result, text = validate(app, path)
    assert_input_error(result, text, path, "line 2, column 'mother_age': below the allowed minimum 10",
                       "and 92 more problem(s); reading stopped at line 101 after 100 problems",
                       "the rest of the file was not checked")
    assert text.count("below the allowed minimum") == 8


def test_good_variants_read_the_same_rows(tmp_path, lines):
    """Blank lines, CR LF, a byte-order mark and a quoted line break in an unread column change
    nothing: the release and the enclave replay read the same rows."""
    from dpbundle.release.data.prepare import prepare
    from dpbundle.release.spec.load import load_spec

    spec = load_spec(SPEC)
    base = prepare(_write(tmp_path / "plain.csv", lines), spec)
    note = [lines[0] + ",note"] + [row + (',"two\nlines"' if i % 7 == 0 else ",-") for i, row in enumerate(lines[1:])]
    variants = {
        "blank.csv": _write(tmp_path / "blank.csv", lines[:1] + [""] + lines[1:100] + ["", ""] + lines[100:] + [""]),
        "crlf.csv": _write(tmp_path / "crlf.csv", lines, "\r\n"),
        "note.csv": _write(tmp_path / "note.csv", note),
    }
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "plain.csv").read_bytes())
    variants["bom.csv"] = bom
    for name, path in variants.items():
        got = prepare(path, spec)
        assert got.rows_read == base.rows_read and got.n == base.n, name
        for k in base.table:
            assert (got.table[k] == base.table[k]).all(), (name, k)
        assert load_private(path).n == base.n, name
