"""data.csv, written in blocks: never the whole table as text, objects or int64 rows.

The released table comes as an integer array of codes (n, d), or as a
:class:`~dpbundle.mechanisms.coding.Coded` table; a projected candidate held as its record types
(:class:`~dpbundle.mechanisms.projection.ArrangedCoded`) is written from its arrangement: each
record type's CSV line is made once, and the lines are gathered by the type of each row (4 bytes
a row) a block at a time. The bytes are those of ``csv.writer`` (``lineterminator="\\n"``,
minimal quoting) over the header and every row in order, whichever form the table has.
"""
from __future__ import annotations

import csv
import hashlib
import io
import os
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from dpbundle.mechanisms.coding import Coded
from dpbundle.mechanisms.projection import ArrangedCoded

__all__ = ["BLOCK_ROWS", "data_csv_blocks", "data_csv_bytes", "released_rows", "released_n", "write_data_csv"]

#: Rows per block written (about 30 MB of text for a births table).
BLOCK_ROWS = 1 << 20


def released_n(data: Any) -> int:
    """Number of records of the released table (array or Coded), without building its rows."""
    return int(data.n) if isinstance(data, Coded) else int(np.asarray(data).shape[0])


def released_rows(data: Any) -> np.ndarray:
    """The released table's int64 rows in order (built now if it is held as record types)."""
    return np.asarray(data.codes if isinstance(data, Coded) else data).astype(np.int64, copy=False)


def _line(writer_buf: tuple[Any, io.StringIO], row: Sequence[str]) -> str:
    writer, buf = writer_buf
    buf.seek(0)
    buf.truncate()
    writer.writerow(row)
    return buf.getvalue()


def _labels(columns: Sequence[Any]) -> list[np.ndarray]:
    return [np.asarray([str(x) for x in c.labels], dtype=object) for c in columns]


def data_csv_blocks(columns: Sequence[Any], data: Any, block_rows: int = BLOCK_ROWS) -> Iterator[bytes]:
    """The UTF-8 bytes of data.csv: the header, then the rows, ``block_rows`` at a time."""
    buf = io.StringIO()
    wb = (csv.writer(buf, lineterminator="\n"), buf)
    yield _line(wb, [c.name for c in columns]).encode("utf-8")
    labels = _labels(columns)
    if isinstance(data, ArrangedCoded) and "codes" not in data.__dict__:
        types, which = data.arrangement()
        rows = types.table.codes
        lines = np.array([_line(wb, [labels[j][rows[t, j]] for j in range(len(columns))]).encode("utf-8")
                          for t in range(rows.shape[0])], dtype=object)
        for start in range(0, len(which), block_rows):
            yield b"".join(lines[which[start:start + block_rows]])
        return
    codes = released_rows(data)
    for start in range(0, codes.shape[0], block_rows):
        block = codes[start:start + block_rows]
        buf.seek(0)
        buf.truncate()
        wb[0].writerows(zip(*[labels[j][block[:, j]] for j in range(len(columns))]))
        yield buf.getvalue().encode("utf-8")


def data_csv_bytes(columns: Sequence[Any], data: Any) -> bytes:
    """All of data.csv in memory (small tables and tests)."""
    return b"".join(data_csv_blocks(columns, data))


def write_data_csv(path: Path, columns: Sequence[Any], data: Any, mode: int = 0o644) -> tuple[str, int]:
    """Write data.csv to a new file ``path`` (fsynced), block by block; (SHA-256 hex, size)."""
    h, size = hashlib.sha256(), 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as fh:
        for block in data_csv_blocks(columns, data):
            fh.write(block)
            h.update(block)
            size += len(block)
        fh.flush()
        os.fsync(fh.fileno())
    return h.hexdigest(), size
