"""The enclave replay's tables at national scale (the audit's own code): the private records as
stored rows and a per-record index, T as its record types (its rows built only for a generator
that needs them), and the replayed data.csv written block by block into a hash.

T's record types are the distinct code rows of the records (after the DP count's resize under
``dp_count``) with their counts, ascending in mixed radix: the arrays ``types_from_rows`` gives
of T's rows, so a generator that fits on record types (``FITS_TYPES``) makes the fit it makes on
the rows, and the criteria (which work on record types) the same values.
"""
from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

__all__ = ["PrivateCodes", "csv_blocks", "arranged_csv_blocks", "digest_of"]

BLOCK_ROWS = 1 << 20


@dataclass
class PrivateCodes:
    """The binned private records: ``stored`` codes of the stored rows, ``index`` the stored
    row of each plausible record (file order), ``plan`` the replayed resize (dp_count) or None."""

    stored: np.ndarray
    index: np.ndarray
    plan: Any
    sizes: list[int]

    @property
    def n(self) -> int:
        return int(self.plan.m) if self.plan is not None else int(self.index.size)

    def rows(self) -> np.ndarray:
        """T's rows, int64 (n, d), as the release's transform gives them."""
        codes = np.take(self.stored, self.index, axis=0)
        if self.plan is not None:
            codes = self.plan.apply(codes, self.sizes)
        return np.ascontiguousarray(codes, dtype=np.int64)

    def types(self, columns: Sequence[Any]):
        """T's record types (see the module doc)."""
        from dpbundle.mechanisms.cells import domain_cells, types_from_rows, types_from_weighted

        if domain_cells(tuple(self.sizes)) is None:
            return types_from_rows(self.rows(), columns)
        if self.plan is None:
            return types_from_weighted(self.stored, np.bincount(self.index, minlength=len(self.stored)), columns)
        pads = self.plan.pad_rows(self.sizes)
        return types_from_weighted(np.concatenate([self.stored, pads]),
                                   np.concatenate([self.plan.kept_counts(self.index, len(self.stored)),
                                                   np.ones(len(pads), dtype=np.int64)]), columns)


def _writer() -> tuple[Any, io.StringIO]:
    buf = io.StringIO()
    return csv.writer(buf, lineterminator="\n"), buf


def _take(buf: io.StringIO) -> str:
    text = buf.getvalue()
    buf.seek(0)
    buf.truncate()
    return text


def csv_blocks(view: Any, codes: np.ndarray) -> Iterator[bytes]:
    """data.csv of rows ``codes`` as the release writes it (header, labels, \\n), in blocks."""
    w, buf = _writer()
    w.writerow(view.names)
    yield _take(buf).encode("utf-8")
    labels = [np.asarray(c.labels, dtype=object) for c in view.columns]
    for start in range(0, codes.shape[0], BLOCK_ROWS):
        block = codes[start:start + BLOCK_ROWS]
        w.writerows(zip(*[labels[j][block[:, j]] for j in range(len(labels))]))
        yield _take(buf).encode("utf-8")


def arranged_csv_blocks(view: Any, rows: np.ndarray, which: np.ndarray) -> Iterator[bytes]:
    """data.csv of ``np.take(rows, which, axis=0)``, each row's line made once per distinct row."""
    w, buf = _writer()
    w.writerow(view.names)
    yield _take(buf).encode("utf-8")
    labels = [np.asarray(c.labels, dtype=object) for c in view.columns]
    lines = []
    for r in rows:
        w.writerow([labels[j][r[j]] for j in range(len(labels))])
        lines.append(_take(buf).encode("utf-8"))
    table = np.array(lines, dtype=object)
    for start in range(0, len(which), BLOCK_ROWS):
        yield b"".join(table[which[start:start + BLOCK_ROWS]])


def digest_of(blocks: Iterator[bytes]) -> tuple[str, int]:
    """(SHA-256 hex, size) of the bytes of ``blocks``."""
    h, size = hashlib.sha256(), 0
    for b in blocks:
        h.update(b)
        size += len(b)
    return h.hexdigest(), size
