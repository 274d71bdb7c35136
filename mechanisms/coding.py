"""Integer-coded tables: the representation every DP step works on.

A released column with ``k`` bins or categories is coded ``0 .. k-1``; a table of ``d`` such
columns is an ``int64`` array of shape ``(n, d)``. The domain (the tuple of column sizes) comes
from the public spec only; :class:`Coded` checks that every code lies inside it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["ColumnCoding", "Coded", "mixed_radix_index", "mixed_radix_decode", "SPECIAL_KINDS"]


#: The kinds of special values (the spec's ``input.columns[].special[].kind``).
SPECIAL_KINDS = ("not_applicable", "unknown")


def _float_array(x, name: str, size: int) -> np.ndarray:
    a = np.array(x, dtype=np.float64).reshape(-1)
    if a.shape[0] != size:
        raise ValueError(f"ColumnCoding {name!r}: expected {size} values, got {a.shape[0]}")
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class ColumnCoding:
    """How one released column is coded.

    ``labels[i]`` is the label of code ``i``; ``values[i]`` its number (midpoint rule of
    DESIGN); ``lower[i]``/``upper[i]`` the inclusive lower / exclusive upper bin edge
    (``nan`` for categories); ``ordered`` is True when adjacent codes are adjacent bins.
    ``categories[i]`` is the spec's category name of code ``i`` of a categorical column (the
    names synthetic constraints speak of; ``labels`` may override them for display), else None.
    ``integer``: True when a bin ``[a, b)`` holds only the integers a..b-1 (an integer or
    date-part source), False when it holds the real interval, None when unknown (then bins with
    integer edges are taken to hold integers).
    """

    name: str
    labels: tuple[str, ...]
    values: np.ndarray
    ordered: bool
    lower: np.ndarray
    upper: np.ndarray
    categories: tuple[str, ...] | None = None
    integer: bool | None = None
    special: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        labels = tuple(str(s) for s in self.labels)
        if len(labels) == 0:
            raise ValueError(f"ColumnCoding {self.name!r}: at least one label is needed")
        if len(set(labels)) != len(labels):
            raise ValueError(f"ColumnCoding {self.name!r}: labels must be distinct, got {labels}")
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "ordered", bool(self.ordered))
        k = len(labels)
        object.__setattr__(self, "values", _float_array(self.values, self.name, k))
        object.__setattr__(self, "lower", _float_array(self.lower, self.name, k))
        object.__setattr__(self, "upper", _float_array(self.upper, self.name, k))
        if self.special is not None:
            kinds = tuple(str(x) for x in self.special)
            if len(kinds) != k or any(x not in SPECIAL_KINDS + ("",) for x in kinds):
                raise ValueError(f"ColumnCoding {self.name!r}: expected {k} special kinds "
                                 f"({', '.join(SPECIAL_KINDS)} or empty), got {kinds}")
            object.__setattr__(self, "special", kinds if any(kinds) else None)
        if self.categories is not None:
            cats = tuple(str(s) for s in self.categories)
            if len(cats) != k or len(set(cats)) != k:
                raise ValueError(f"ColumnCoding {self.name!r}: expected {k} distinct category names, got {cats}")
            object.__setattr__(self, "categories", cats)

    @property
    def special_codes(self) -> tuple[int, ...]:
        """The codes of special values (not numbers: not applicable, unknown), after the bins."""
        return tuple(i for i, x in enumerate(self.special or ()) if x)

    @property
    def regular_size(self) -> int:
        """The number of codes that stand for numbers or categories (the special codes follow)."""
        return self.size - len(self.special_codes)

    def code_of_category(self, name: str) -> int:
        """Code of a category name (the spec's ``categories``; the labels when none are recorded)."""
        names = self.categories if self.categories is not None else self.labels
        try:
            return names.index(str(name))
        except ValueError:
            raise KeyError(f"column {self.name!r}: {name!r} is not one of its categories ({', '.join(names)})") from None

    @property
    def size(self) -> int:
        """Number of codes (``len(labels)``)."""
        return len(self.labels)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ColumnCoding):
            return NotImplemented
        return (
            self.name == other.name
            and self.labels == other.labels
            and self.ordered == other.ordered
            and np.array_equal(self.values, other.values, equal_nan=True)
            and np.array_equal(self.lower, other.lower, equal_nan=True)
            and np.array_equal(self.upper, other.upper, equal_nan=True)
        )

    def __hash__(self) -> int:
        return hash((self.name, self.labels, self.ordered))

    def to_dict(self) -> dict:
        """JSON-able description (nan edges become ``None``)."""

        def conv(a: np.ndarray) -> list:
            return [None if np.isnan(v) else float(v) for v in a]

        return {
            "name": self.name,
            "labels": list(self.labels),
            "values": conv(self.values),
            "ordered": self.ordered,
            "lower": conv(self.lower),
            "upper": conv(self.upper),
        }


@dataclass(frozen=True, eq=False)
class Coded:
    """An integer-coded table: ``codes[:, j]`` lies in ``range(columns[j].size)``."""

    codes: np.ndarray
    columns: tuple[ColumnCoding, ...]

    def __post_init__(self) -> None:
        columns = tuple(self.columns)
        codes = np.asarray(self.codes)
        if codes.ndim == 1 and len(columns) == 1:
            codes = codes.reshape(-1, 1)
        if codes.ndim != 2 or codes.shape[1] != len(columns):
            raise ValueError(
                f"Coded: codes must have shape (n, {len(columns)}), got {codes.shape}"
            )
        if codes.dtype != np.int64:
            if codes.size and not np.issubdtype(codes.dtype, np.integer):
                raise ValueError(f"Coded: codes must be integers, got dtype {codes.dtype}")
            codes = codes.astype(np.int64)
        codes = np.ascontiguousarray(codes)
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise ValueError(f"Coded: column names must be distinct, got {names}")
        if codes.shape[0]:
            lo = codes.min(axis=0)
            hi = codes.max(axis=0)
            for j, c in enumerate(columns):
                if lo[j] < 0 or hi[j] >= c.size:
                    raise ValueError(
                        f"Coded: column {c.name!r} has codes in [{lo[j]}, {hi[j]}], "
                        f"outside its domain 0..{c.size - 1}"
                    )
        object.__setattr__(self, "codes", codes)
        object.__setattr__(self, "columns", columns)

    @classmethod
    def unchecked(cls, codes: np.ndarray, columns: tuple[ColumnCoding, ...]) -> "Coded":
        """A Coded of C-contiguous int64 ``codes`` already known to lie in the domain (built from
        validated codes): skips the O(n d) check of the constructor."""
        if codes.dtype != np.int64 or codes.ndim != 2 or codes.shape[1] != len(columns) \
                or not codes.flags.c_contiguous:
            raise ValueError("Coded.unchecked: codes must be C-contiguous int64 of shape (n, d)")
        obj = cls.__new__(cls)
        object.__setattr__(obj, "codes", codes)
        object.__setattr__(obj, "columns", tuple(columns))
        return obj

    @property
    def domain(self) -> tuple[int, ...]:
        """Sizes of the columns' code ranges (public)."""
        return tuple(c.size for c in self.columns)

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.codes.shape[0])

    @property
    def names(self) -> tuple[str, ...]:
        """Column names in order."""
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> int:
        """Index of the column called ``name`` (KeyError naming the columns if absent)."""
        for j, c in enumerate(self.columns):
            if c.name == name:
                return j
        raise KeyError(f"no column {name!r}; columns are {list(self.names)}")

    def values_of(self, name: str) -> np.ndarray:
        """The numbers (``ColumnCoding.values``) of column ``name`` for every record."""
        j = self.column(name)
        return self.columns[j].values[self.codes[:, j]]

    def with_codes(self, codes: np.ndarray) -> "Coded":
        """Same columns, other records (validated)."""
        return Coded(codes=codes, columns=self.columns)

    def labels_frame(self):
        """A pandas DataFrame of labels (one string column per released column)."""
        import pandas as pd

        data = {
            c.name: np.asarray(c.labels, dtype=object)[self.codes[:, j]]
            for j, c in enumerate(self.columns)
        }
        return pd.DataFrame(data, columns=list(self.names))


def mixed_radix_index(codes: np.ndarray, domain: Sequence[int]) -> np.ndarray:
    """Flat cell index of each row: sum_j codes[:, j] * prod(domain[j+1:]) (C order).

    Equal to ``np.ravel_multi_index(codes.T, domain)``; rows must lie in the domain.
    """
    codes = np.asarray(codes, dtype=np.int64)
    domain = tuple(int(s) for s in domain)
    if codes.ndim != 2 or codes.shape[1] != len(domain):
        raise ValueError(f"codes must have shape (n, {len(domain)}), got {codes.shape}")
    idx = np.zeros(codes.shape[0], dtype=np.int64)
    for j, size in enumerate(domain):
        idx *= size
        idx += codes[:, j]
    return idx


def mixed_radix_decode(index: np.ndarray, domain: Sequence[int]) -> np.ndarray:
    """Inverse of :func:`mixed_radix_index`: flat cell indices -> int64 (m, d) codes."""
    index = np.asarray(index, dtype=np.int64)
    domain = tuple(int(s) for s in domain)
    out = np.empty((index.shape[0], len(domain)), dtype=np.int64)
    rest = index.copy()
    for j in range(len(domain) - 1, -1, -1):
        out[:, j] = rest % domain[j]
        rest //= domain[j]
    return out
