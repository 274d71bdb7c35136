"""``dp-tables.csv``: the DP count tables of ``publish: tables``, one row per cell, rendered from
``dp-tables.json`` and the released columns' labels (the audit renders it again and compares
bytes).

Layout ("tidy", one file for every table): ``table`` (the table's id in dp-tables.json), then
one column per released column of data.csv, in data.csv's order, holding the cell's label, or
empty when the column is not one of the table's; then ``dp_count`` (the noisy count, which may
be negative), ``lower_95`` and ``upper_95`` (the cell's 95% interval for the count of the
plausible records: mechanisms/measured.py). Cells run in the table's
mixed-radix order (its first column most significant). A column read on merged codes
(``merge`` g > 1: codes ``c // g``) has the label of the group, ``"FIRST to LAST"`` (the labels
of its first and last codes), or the code's own label when the group has one code.
"""
from __future__ import annotations

import csv
import io
import itertools
import math
from typing import Any, Sequence

from dpbundle.mechanisms.measured import cell_interval

__all__ = ["TABLES_JSON", "TABLES_CSV", "CSV_COUNT_FIELDS", "group_label", "dp_tables_csv",
           "tables_resource", "reserved_name_problems"]

TABLES_JSON = "dp-tables.json"
TABLES_CSV = "dp-tables.csv"
CSV_COUNT_FIELDS = {
    "dp_count": "The cell's differentially private count: the count of the records the generator "
                "was fitted on plus discrete Laplace noise (may be negative).",
    "lower_95": "The lower end of the cell's 95% interval for the count of the plausible records "
                "of the registry (never below 0).",
    "upper_95": "The upper end of the cell's 95% interval for the count of the plausible records "
                "of the registry.",
}


def reserved_name_problems(names: Sequence[str]) -> list[str]:
    """Released column names that would clash with dp-tables.csv's own columns."""
    own = {"table", *CSV_COUNT_FIELDS}
    return [f"columns: {n!r} is one of dp-tables.csv's own column names ({', '.join(sorted(own))}); "
            "rename the released column to publish tables" for n in names if n in own]


def group_label(labels: Sequence[str], merge: int, code: int) -> str:
    """The label of merged code ``code`` (codes ``code * merge`` .. of a column of ``labels``)."""
    first = code * merge
    last = min(first + merge, len(labels)) - 1
    if not 0 <= first <= last:
        raise ValueError(f"merged code {code} (x {merge}) lies outside a column of {len(labels)} values")
    return str(labels[first]) if first == last else f"{labels[first]} to {labels[last]}"


def dp_tables_csv(doc: dict, columns: Sequence[tuple[str, Sequence[str]]]) -> bytes:
    """dp-tables.csv of ``doc`` (dp-tables.json) for the released ``columns`` ((name, labels in
    code order), data.csv's order). ValueError for a table that does not fit the columns."""
    names = [str(n) for n, _ in columns]
    labels = {str(n): [str(x) for x in lab] for n, lab in columns}
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["table", *names, *CSV_COUNT_FIELDS])
    for t in doc["tables"]:
        cols, merge, counts = list(t["columns"]), [int(g) for g in t["merge"]], t["counts"]
        if any(c not in labels for c in cols) or len(merge) != len(cols):
            raise ValueError(f"table {t.get('id')!r}: columns {cols} are not released columns")
        sizes = [-(-len(labels[c]) // g) for c, g in zip(cols, merge)]
        if len(counts) != math.prod(sizes):
            raise ValueError(f"table {t.get('id')!r}: {len(counts)} counts for {math.prod(sizes)} cells")
        width = int(t["half_width"])
        for cell, count in zip(itertools.product(*(range(s) for s in sizes)), counts):
            row = dict.fromkeys(names, "")
            for c, g, code in zip(cols, merge, cell):
                row[c] = group_label(labels[c], g, code)
            lo, hi = cell_interval(int(count), width)
            w.writerow([t["id"], *(row[n] for n in names), int(count), lo, hi])
    return out.getvalue().encode("utf-8")


def tables_resource(names: Sequence[str], ids: Sequence[str]) -> dict[str, Any]:
    """dp-tables.csv's Table Schema: ``table`` (one of ``ids``), the released columns (labels;
    empty where the column is not the table's), the count and its interval."""
    fields: list[dict[str, Any]] = [{"name": "table", "type": "string",
                                     "description": "The table's id in dp-tables.json.",
                                     "constraints": {"required": True, "enum": list(ids)}}]
    for n in names:
        fields.append({"name": n, "type": "string",
                       "description": f"The cell's value of {n} (a label, or 'FIRST to LAST' for a group "
                                      "of values); empty when the table does not have this column."})
    fields.append({"name": "dp_count", "type": "integer", "description": CSV_COUNT_FIELDS["dp_count"],
                   "constraints": {"required": True}})
    for k in ("lower_95", "upper_95"):
        fields.append({"name": k, "type": "integer", "description": CSV_COUNT_FIELDS[k],
                       "constraints": {"required": True, "minimum": 0}})
    return {"fields": fields, "missingValues": [""]}
