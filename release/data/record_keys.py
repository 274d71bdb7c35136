"""The ledger fingerprint of a registry read to its atoms: the records kept as packed value ids.

:func:`~dpbundle.release.data.fingerprint.table_fingerprint` hashes the sorted coded rows of the
prepared table; a table read to atoms (:mod:`dpbundle.release.data.atoms`) no longer holds the
raw records, so the reading keeps them here instead, 8 bytes a plausible record: each record's
value ids (an id per distinct value of a column, as the reading met them) packed into one int64
word (more words when the ids need more than 63 bits), chunk by chunk, each chunk with the
bit widths of its time. :func:`keys_fingerprint` then gives exactly the value that
``table_fingerprint`` gives on the raw records (same format tag, same bytes hashed):

1. per column, the canonical texts of the values some kept record holds, sorted: the column's
   dictionary, and each id's rank in it (two ids of one text share the rank);
2. every record re-packed as its ranks (the first column, by name, in the highest bits), so
   that the order of the words is the lexicographic order of the coded rows;
3. the words sorted in place (one word) or by ``np.lexsort`` (several), and hashed block by
   block as the coded rows (little-endian int64, row-major).

Several readings (the parts of a registry) give one fingerprint of their union: each keeps its
own ids, and step 1 ranks the union of their texts. Like the fingerprint, everything here is
private (derived from the records): it stays in the steward's memory.
"""
from __future__ import annotations

import hashlib
import json
import math

import numpy as np


__all__ = ["RecordKeys", "keys_fingerprint"]

#: the format tag of the table fingerprint (its first line)
FORMAT = "dpbundle-table-fingerprint/1"


def _json_line(obj) -> bytes:
    # json.dumps escapes control characters, so a line never contains a raw newline.
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8") + b"\n"


def _number_text(v: float) -> str:
    v = float(v)
    if math.isnan(v):
        return "NA"
    if v.is_integer() and abs(v) < 2 ** 53:
        return str(int(v))  # 30.0 -> "30" (also -0.0 -> "0"), the text of an integer cell
    return repr(v)  # shortest decimal that reads back as v (inf -> "inf")


def _texts(kind: str, uniq: np.ndarray, categories: list[str]) -> list[str]:
    """Canonical text of each distinct typed value of one column."""
    if kind == "date":
        return ["NA" if np.isnat(u) else str(u.astype("datetime64[D]")) for u in uniq]
    if kind == "category":
        return ["NA" if int(u) < 0 else categories[int(u)] for u in uniq]
    return [_number_text(u) for u in uniq]


#: records decoded and hashed at a time
BLOCK_ROWS = 1 << 20
_WORD_BITS = 63


def _layout(widths: list[int]) -> list[tuple[int, int]]:
    """(word, shift) of each column: columns in order, each word filled from its highest bits
    (the first column of a word in the highest), a new word when the next column does not fit."""
    out, word, left = [], 0, _WORD_BITS
    for w in widths:
        if w > left:
            word, left = word + 1, _WORD_BITS
        left -= w
        out.append((word, left))
    return out


def _width(size: int) -> int:
    return max(1, (max(size, 1) - 1).bit_length())


#: rows of one storage block (16 MB a word): blocks are allocated as the records arrive and
#: released as the fingerprint consumes them, so that memory returns to the system
STORE_ROWS = 1 << 21


class RecordKeys:
    """The plausible records of one reading as packed value ids (see the module doc). ``add``
    each chunk's ids (columns in any order; packed in the order of ``names``) with each
    column's count of ids so far; ``set_values`` the values by id once the reading is done.
    Storage: per word, blocks of :data:`STORE_ROWS` records; ``runs``: (first record, records,
    widths, layout) of consecutive chunks packed alike."""

    def __init__(self, names: list[str], kinds: dict[str, str], categories: dict[str, list[str]]) -> None:
        self.names = sorted(names)
        self.kinds, self.categories = dict(kinds), {k: list(v) for k, v in categories.items()}
        self.runs: list[list] = []
        self.blocks: list[list[np.ndarray | None]] = []     # [word][block]
        self.used = {n: np.zeros(0, dtype=bool) for n in self.names}
        self.values: dict[str, np.ndarray] | None = None
        self.rows = 0

    def add(self, ids: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
        rows = len(ids[self.names[0]]) if self.names else 0
        if not rows:
            return
        widths = [_width(sizes[n]) for n in self.names]
        layout = _layout(widths)
        words = [np.zeros(rows, dtype=np.int64) for _ in range(layout[-1][0] + 1)]
        for n, (word, shift) in zip(self.names, layout):
            v = ids[n]
            words[word] |= v << shift
            used = self.used[n]
            if len(used) < sizes[n]:      # grown by doubling; cut to the ids' count in set_values
                grown = np.zeros(max(sizes[n], 2 * len(used)), dtype=bool)
                grown[:len(used)] = used
                used = self.used[n] = grown
            used[v] = True
        for w, word in enumerate(words):
            self._store(w, self.rows, word)
        last = self.runs[-1] if self.runs else None
        if last is not None and last[2] == widths:
            last[1] += rows
        else:
            self.runs.append([self.rows, rows, widths, layout])
        self.rows += rows

    def _store(self, w: int, at: int, values: np.ndarray) -> None:
        while len(self.blocks) <= w:
            self.blocks.append([])
        blocks = self.blocks[w]
        done = 0
        while done < len(values):
            b, off = divmod(at + done, STORE_ROWS)
            while len(blocks) <= b:
                blocks.append(None)
            if blocks[b] is None:
                blocks[b] = np.zeros(STORE_ROWS, dtype=np.int64)   # calloc: pages as written
            k = min(len(values) - done, STORE_ROWS - off)
            blocks[b][off:off + k] = values[done:done + k]
            done += k

    def load(self, w: int, at: int, rows: int) -> np.ndarray:
        """Records ``at`` .. ``at + rows`` of word ``w`` (zeros where that word was never used)."""
        out = np.zeros(rows, dtype=np.int64)
        blocks = self.blocks[w] if w < len(self.blocks) else []
        done = 0
        while done < rows:
            b, off = divmod(at + done, STORE_ROWS)
            k = min(rows - done, STORE_ROWS - off)
            if b < len(blocks) and blocks[b] is not None:
                out[done:done + k] = blocks[b][off:off + k]
            done += k
        return out

    def release_before(self, at: int) -> None:
        """Drop the blocks holding only records before ``at`` (consumed)."""
        for blocks in self.blocks:
            for b in range(min(len(blocks), at // STORE_ROWS)):
                blocks[b] = None

    def set_values(self, values: dict[str, np.ndarray]) -> None:
        self.values = {n: values[n] for n in self.names}
        for n in self.names:
            used = self.used[n][:len(values[n])]
            self.used[n] = np.concatenate([used, np.zeros(len(values[n]) - len(used), dtype=bool)])

    def compact(self) -> None:
        """Renumber the ids in the order of the values, re-pack every record to the final
        widths (one run) and sort the records: what is kept is then the set of values read and
        the multiset of the reading's records, not their order (what a Dask worker sends back
        under ``declared_public``). After ``set_values``."""
        if self.values is None:
            raise ValueError("RecordKeys.compact: the reading is not finished")
        renumber = {}            # ids in the order of the values (not of their first reading)
        for n in self.names:
            order = np.argsort(self.values[n], kind="stable")      # NaN / NaT last
            renumber[n] = np.empty(len(order), dtype=np.int64)
            renumber[n][order] = np.arange(len(order), dtype=np.int64)
            self.values[n], self.used[n] = self.values[n][order], self.used[n][order]
        widths = [_width(len(self.values[n])) for n in self.names]
        layout = _layout(widths)
        words = [np.empty(self.rows, dtype=np.int64) for _ in range(layout[-1][0] + 1)]
        self.repack_into(words, 0, layout, renumber)
        if len(words) == 1:
            words[0].sort()
        elif self.rows:
            order = np.lexsort(tuple(reversed(words)))
            words = [w[order] for w in words]
        self.blocks = []
        for w in words:    # blocks of their own (released one by one as the fingerprint reads them)
            self.blocks.append([w[s:s + STORE_ROWS].copy() for s in range(0, self.rows, STORE_ROWS)])
            w.resize(0, refcheck=False)
        self.runs = [[0, self.rows, widths, layout]] if self.rows else []

    def repack_into(self, words: list[np.ndarray], at: int, layout: list[tuple[int, int]],
                    maps: dict[str, np.ndarray]) -> int:
        """Every record, each value id ``i`` of column ``c`` as ``maps[c][i]``, packed in
        ``layout`` into ``words`` from record ``at`` on (the storage released as it is read);
        the record after the last."""
        for first, count, run_widths, run_layout in self.runs:
            for s in range(0, count, STORE_ROWS):
                size = min(STORE_ROWS, count - s)
                ids = self.decoded(first + s, size, run_widths, run_layout)
                for w in words:
                    w[at:at + size] = 0
                for n, (word, shift) in zip(self.names, layout):
                    words[word][at:at + size] |= maps[n][ids[n]] << shift
                at += size
                self.release_before(first + s + size)
        return at

    def decoded(self, at: int, rows: int, widths: list[int], layout: list[tuple[int, int]]) -> dict[str, np.ndarray]:
        words = {w: self.load(w, at, rows) for w in {word for word, _ in layout}}
        return {n: (words[word] >> shift) & ((1 << w) - 1) for n, w, (word, shift) in zip(self.names, widths, layout)}


def keys_fingerprint(readings: list[RecordKeys]) -> str:
    """The table fingerprint (``dpbundle-table-fingerprint/1``) of the records of ``readings``
    (one registry: its parts' readings, in any order); each reading's storage is released as it
    is re-packed (the readings are emptied)."""
    if not readings:
        raise ValueError("keys_fingerprint: no reading")
    names, kinds, cats = readings[0].names, readings[0].kinds, readings[0].categories
    if any(r.names != names or r.values is None for r in readings):
        raise ValueError("keys_fingerprint: readings of other columns, or unfinished")
    rows = sum(r.rows for r in readings)
    h = hashlib.sha256()
    h.update(_json_line({"format": FORMAT, "columns": names, "rows": rows}))
    ranks: list[dict[str, np.ndarray]] = [{} for _ in readings]
    sizes = []
    for n in names:
        kind = kinds[n] or "float"
        texts = []
        for r in readings:
            used = np.flatnonzero(r.used[n])
            texts.append((used, _texts(kind, r.values[n][used], cats.get(n, []))))
        dictionary = sorted({t for _, ts in texts for t in ts})
        rank = {t: i for i, t in enumerate(dictionary)}
        for k, (r, (used, ts)) in enumerate(zip(readings, texts)):
            of = np.full(len(r.used[n]), -1, dtype=np.int64)
            of[used] = np.array([rank[t] for t in ts], dtype=np.int64)
            ranks[k][n] = of
        sizes.append(len(dictionary))
        h.update(_json_line({"column": n, "values": dictionary}))
    if not rows or not names:
        return h.hexdigest()
    widths = [_width(s) for s in sizes]
    layout = _layout(widths)
    words = [np.empty(rows, dtype=np.int64) for _ in range(layout[-1][0] + 1)]   # pages as written
    at = 0
    for k, r in enumerate(readings):
        at = r.repack_into(words, at, layout, ranks[k])
        r.runs, r.blocks = [], []
    if len(words) == 1:
        words[0].sort()
        order = None
    else:
        order = np.lexsort(tuple(reversed(words)))
    for s in range(0, rows, BLOCK_ROWS):
        block = [w[s:s + BLOCK_ROWS] if order is None else w[order[s:s + BLOCK_ROWS]] for w in words]
        coded = np.empty((len(block[0]), len(names)), dtype="<i8")
        for j, (w, (word, shift)) in enumerate(zip(widths, layout)):
            coded[:, j] = (block[word] >> shift) & ((1 << w) - 1)
        h.update(coded.tobytes())
    return h.hexdigest()
