"""What the checks share: the opened bundle and the parsed public documents, loaded once.

Each accessor returns the document or raises :class:`Missing` with a clear message naming the
file and the field, so a check that needs something absent fails with that message.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .bundle_io import Bundle, BundleFileError
from .data_csv import Counted, DataTable, read_data_csv, read_header_and_labels
from .labels import AmbiguousAlternative, SpecView, SpecViewError, build_view

__all__ = ["AuditContext", "Missing", "need", "need_number", "spec_publishes"]


class Missing(Exception):
    """Something a check needs is missing or malformed (the message says what)."""


def need(obj, *path, where: str):
    """obj[path[0]][path[1]]...; Missing naming ``where`` and the path otherwise."""
    cur = obj
    for i, p in enumerate(path):
        ok = (isinstance(cur, dict) and isinstance(p, str) and p in cur) or (
            isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur)
        )
        if not ok:
            dotted = ".".join(str(x) for x in path[: i + 1])
            raise Missing(f"{where}: missing field {dotted}")
        cur = cur[p]
    return cur


def need_number(obj, *path, where: str) -> float:
    v = need(obj, *path, where=where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        dotted = ".".join(str(x) for x in path)
        raise Missing(f"{where}: {dotted} is not a finite number ({v!r})")
    return float(v)


@dataclass
class AuditContext:
    bundle: Bundle
    _docs: dict = field(default_factory=dict)
    _view: SpecView | None = None
    _view_error: str | None = None
    _table: DataTable | None = None

    def close(self) -> None:
        """Release what the context holds (nothing to stop since the PDF helper process went
        with issue 36; kept so that callers close a context they opened)."""

    def json(self, name: str):
        """Parsed JSON file of the bundle (Missing if absent or malformed)."""
        if name not in self._docs:
            try:
                self._docs[name] = ("ok", self.bundle.read_json(name))
            except BundleFileError as e:
                self._docs[name] = ("err", str(e))
        status, value = self._docs[name]
        if status == "err":
            raise Missing(value)
        return value

    def view(self) -> SpecView:
        """The spec + selected configuration as the audit reads it."""
        if self._view is None and self._view_error is None:
            try:
                spec_json = self.json("spec.json")
                observed = None
                try:
                    self._view = build_view(spec_json)
                except AmbiguousAlternative:   # read which labels data.csv holds, then again
                    got = read_header_and_labels(self.bundle) if self.bundle.has("data.csv") else None
                    observed = got[1] if got else None
                    self._view = build_view(spec_json, observed)
            except (Missing, SpecViewError) as e:
                self._view_error = str(e)
        if self._view is None:
            raise Missing(self._view_error or "spec.json: unusable")
        return self._view

    def table(self) -> DataTable:
        """data.csv parsed against the view (problems collected in the table)."""
        if self._table is None:
            view = self.view()
            if not self.bundle.has("data.csv"):
                raise Missing("data.csv: not in the bundle")
            self._table = read_data_csv(self.bundle, view)
        return self._table

    def codes(self) -> Counted:
        """data.csv's rows (distinct, with their counts); Missing if it could not be read cleanly."""
        t = self.table()
        if t.data is None:
            raise Missing("data.csv: unusable (" + "; ".join(t.problems[:2]) + ")")
        if t.problems:
            raise Missing(f"data.csv: {len(t.problems)} problem(s), first: {t.problems[0]}")
        return t.data

    def declared_n(self) -> int:
        """The public n (manifest.json's n, else metrics.json's)."""
        for name in ("manifest.json", "metrics.json"):
            try:
                v = self.json(name).get("n")
            except (Missing, AttributeError):
                continue
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        raise Missing("no usable declared n in manifest.json or metrics.json")

    def min_count(self) -> int:
        view = self.view()
        if view.min_count is None:
            raise Missing("spec.json: the configuration has no projection min_count")
        if view.min_count < 1:
            raise Missing(f"spec.json: projection min_count {view.min_count} is below 1")
        return view.min_count


def spec_publishes(ctx: AuditContext, item: str) -> bool | None:
    """Whether spec.json's spec lists ``item`` under ``publish`` (None if spec.json is unusable)."""
    try:
        spec = ctx.json("spec.json").get("spec")
    except (Missing, AttributeError):
        return None
    if not isinstance(spec, dict):
        return None
    value = spec.get("publish") or []
    return item in (value if isinstance(value, list) else [value])
