"""Read a released bundle from Python (notebooks, scripts): data with its meaning, the DP metrics,
the privacy budget, the datasheet, and verification.

    >>> from dpbundle.audit import open_bundle
    >>> b = open_bundle("births-dp")            # a bundle folder or its .zip
    >>> b.data.dtypes                           # ordered categoricals, categories in bin order
    >>> b.metrics[["id", "dp_value", "threshold", "passed"]]
    >>> b.budget["total_epsilon"]
    >>> b.verify("publisher.pub").verdict       # the same checks as `dpbundle audit`

Opening reads nothing but the bundle's public files and checks nothing: call :meth:`verify`
before trusting the contents. Reading uses the audit's guarded reader (size limits, no links,
no paths outside the bundle), so a hostile bundle cannot make it read or write elsewhere.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .bundle_io import Bundle, BundleError, BundleFileError
from .bundle_io import open_bundle as _open_guarded

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from .report import AuditReport

__all__ = ["BundleReadError", "ReleasedBundle", "open_bundle"]


class BundleReadError(ValueError):
    """The bundle cannot be read as a dpbundle bundle (names the file and the problem)."""


def open_bundle(path: str | os.PathLike) -> "ReleasedBundle":
    """Open a bundle folder or zip for reading; :class:`BundleReadError` if it is unusable."""
    try:
        guarded = _open_guarded(path)
    except BundleError as e:
        raise BundleReadError(str(e)) from None
    try:
        if not guarded.has("datapackage.json") or not guarded.has("data.csv"):
            raise BundleReadError(f"{path}: not a dpbundle bundle (no datapackage.json and data.csv)")
        return ReleasedBundle(Path(path), guarded)
    except BaseException:
        guarded.close()
        raise


@dataclass(repr=False)
class ReleasedBundle:
    """A released bundle, opened for reading (use as a context manager, or call :meth:`close`).

    ``repr(bundle)`` is one short line (title, size, epsilon, criteria); in a notebook the
    bundle shows its title, size, columns, metrics table and budget (all from public files),
    and whether :meth:`verify` verified it (its last verdict, else "not verified")."""

    path: Path
    _bundle: Bundle
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)
    _tmp: str | None = field(default=None, repr=False)

    # -- lifecycle ---------------------------------------------------------------------
    def close(self) -> None:
        self._bundle.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> "ReleasedBundle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata ----------------------------------------------------------------------
    def _json(self, name: str) -> Any:
        try:
            return self._bundle.read_json(name)
        except BundleFileError as e:
            raise BundleReadError(f"{self.path}: {e}") from None

    @property
    def files(self) -> list[str]:
        """The bundle's files (relative POSIX paths)."""
        return sorted(self._bundle.files)

    @property
    def datapackage(self) -> dict:
        """datapackage.json: the Frictionless description of data.csv."""
        return self._json("datapackage.json")

    @property
    def budget(self) -> dict:
        """budget.json: the privacy budget, part by part (epsilons as published)."""
        return self._json("budget.json")

    @property
    def spec(self) -> dict:
        """spec.json: the release spec, as published."""
        return self._json("spec.json")

    @property
    def manifest(self) -> dict:
        """manifest.json: every file's SHA-256 and the signing key (unverified until verify())."""
        return self._json("manifest.json")

    @property
    def fields(self) -> list[dict]:
        """The Table Schema fields of data.csv, in column order."""
        try:
            resource = next(r for r in self.datapackage["resources"] if r.get("path") == "data.csv")
            return list(resource["schema"]["fields"])
        except (KeyError, TypeError, StopIteration):
            raise BundleReadError(f"{self.path}: datapackage.json has no schema for data.csv") from None

    # -- tables ------------------------------------------------------------------------
    @property
    def data(self) -> "pd.DataFrame":
        """data.csv as a DataFrame: one categorical column per field, its categories in the
        datapackage's order, ordered where the field says ``categoriesOrdered`` (bins)."""
        if "data" not in self._cache:
            self._cache["data"] = self._read_data()
        return self._cache["data"]

    def _read_data(self) -> "pd.DataFrame":
        import pandas as pd

        fields = self.fields
        names = [f["name"] for f in fields]
        with self._bundle.open_text("data.csv") as text:
            frame = pd.read_csv(text, dtype=str, keep_default_na=False, na_filter=False,
                                engine="c")
        if list(frame.columns) != names:
            raise BundleReadError(f"{self.path}: data.csv columns {list(frame.columns)} differ "
                                  f"from the datapackage's fields {names}")
        for f in fields:
            frame[f["name"]] = _categorical(frame[f["name"]], f, self.path)
        return frame

    @property
    def metrics(self) -> "pd.DataFrame":
        """metrics.json's criteria, one row per acceptance criterion (the DP values, their
        thresholds, noise scales and whether each passed), with metrics.csv's noise of the
        reported value beside them: ``value_noise_std`` (the standard deviation of the noise on
        ``dp_value``; for a fit, simulated on the released data; empty when unknown),
        ``value_noise_mean`` and ``noise_on`` (``value``, ``inside_fit`` or
        ``selection_scores``). ``noise_std`` is the noise the mechanism draws: the value's own only
        where ``noise_on`` is ``value`` (a fit's is on its loss's coefficients, in other units).
        Columns: id, type, dp_value, threshold, passed, the value's noise, then the rest."""
        import pandas as pd

        criteria = [dict(c) for c in self._json("metrics.json").get("criteria", []) if isinstance(c, dict)]
        extra = self._value_noise()
        for row in criteria:
            row.update(extra.get(row.get("id"), {}))
        frame = pd.DataFrame(criteria)
        first = [c for c in ("id", "type", "dp_value", "threshold", "passed", "value_noise_std",
                             "value_noise_mean", "noise_on") if c in frame.columns]
        return frame[first + [c for c in frame.columns if c not in first]]

    def _value_noise(self) -> dict[str, dict[str, Any]]:
        """metrics.csv's noise of each reported value, by criterion id ({} for a bundle without
        those columns): noise_on (text), value_noise_std and value_noise_mean (float, NaN when
        empty)."""
        import csv
        import io
        import math

        if not self._bundle.has("metrics.csv"):
            return {}
        try:
            text = self._bundle.read_bytes("metrics.csv").decode("utf-8")
        except (BundleFileError, UnicodeDecodeError):
            return {}
        out: dict[str, dict[str, Any]] = {}
        for row in csv.DictReader(io.StringIO(text, newline="")):
            if "value_noise_std" not in row or not row.get("id"):
                return {}
            values: dict[str, Any] = {"noise_on": row.get("noise_on") or None}
            for key in ("value_noise_std", "value_noise_mean"):
                try:
                    values[key] = float(row[key]) if row.get(key) else math.nan
                except ValueError:
                    values[key] = math.nan
            out[row["id"]] = values
        return out

    @property
    def n(self) -> int:
        """The number of synthetic records (the published n)."""
        return int(self._json("metrics.json")["n"])

    # -- documents ---------------------------------------------------------------------
    @property
    def datasheet(self) -> Path | None:
        """Path of the datasheet (README.pdf); a zip's copy is extracted to a private
        temporary folder removed by :meth:`close`. None if the bundle has none."""
        return self._document("README.pdf")

    @property
    def readme_html(self) -> Path | None:
        """Path of README.html (the datasheet's HTML), or None."""
        return self._document("README.html")

    def _document(self, name: str) -> Path | None:
        if not self._bundle.has(name):
            return None
        if self._bundle.kind == "directory":
            return self._bundle.root / name
        if self._tmp is None:
            self._tmp = tempfile.mkdtemp(prefix="dpbundle-doc-")
        target = Path(self._tmp) / name
        if not target.exists():
            target.write_bytes(self._bundle.read_bytes(name))
        return target

    # -- notebook views ----------------------------------------------------------------
    def _summary(self) -> dict[str, Any]:
        """What the views show, read defensively: a missing or malformed file gives no value,
        never an error (a repr must not raise)."""
        out: dict[str, Any] = {}
        for key, read in (("title", lambda: self.datapackage.get("title")),
                          ("fields", lambda: [f.get("name") for f in self.fields]),
                          ("metrics", lambda: self._json("metrics.json")),
                          ("budget", lambda: self.budget)):
            try:
                out[key] = read()
            except Exception:  # noqa: BLE001 -- a view of a hostile or closed bundle
                out[key] = None
        metrics = out["metrics"] if isinstance(out["metrics"], dict) else {}
        crit = metrics.get("criteria")
        out["criteria"] = [c for c in crit if isinstance(c, dict)] if isinstance(crit, list) else []
        out["n"] = metrics.get("n")
        out["budget"] = out["budget"] if isinstance(out["budget"], dict) else {}
        out["fields"] = out["fields"] if isinstance(out["fields"], list) else None
        return out

    def __repr__(self) -> str:
        from dpbundle.templates.notebook import count, number, short

        s = self._summary()
        title = short(s["title"] if s["title"] is not None else self.path.name)
        parts = []
        if s["n"] is not None:
            parts.append(f"{count(s['n'])} rows")
        if s["fields"] is not None:
            parts.append(f"{len(s['fields']):,} columns")
        size = " x ".join(parts)
        facts = [size] if size else []
        if s["budget"].get("total_epsilon") is not None:
            facts.append(f"epsilon {number(s['budget']['total_epsilon'])}")
        if s["criteria"]:
            passed = sum(1 for c in s["criteria"] if c.get("passed") is True)
            total = len(s["criteria"])
            facts.append(f"{total:,} criteria passed" if passed == total
                         else f"{passed:,} of {total:,} criteria passed")
        return f"<ReleasedBundle {title!r} {', '.join(facts) or 'unreadable'}>"

    def _repr_html_(self) -> str:
        from dpbundle.templates.notebook import count, esc, number, table

        s = self._summary()
        title = s["title"] if s["title"] is not None else self.path.name
        fields = s["fields"] or []
        shown = ", ".join(str(f) for f in fields[:40]) + (f", ... ({len(fields) - 40} more)"
                                                          if len(fields) > 40 else "")
        rows = [(c.get("id"), number(c.get("dp_value"), 4), number(c.get("threshold"), 4),
                 "pass" if c.get("passed") is True else "FAIL") for c in s["criteria"][:100]]
        more = len(s["criteria"]) - len(rows)
        b = s["budget"]
        budget = [(k, number(b.get(k), 4)) for k in ("total_epsilon", "epsilon_cap",
                                                     "per_iteration_epsilon") if b.get(k) is not None]
        for part in ("generation", "evaluation"):
            if isinstance(b.get(part), dict) and b[part].get("epsilon") is not None:
                budget.append((f"{part} epsilon (per iteration)", number(b[part]["epsilon"], 4)))
        return (
            "<div class=\"dpbundle-bundle\">"
            f"<strong>{esc(title)}</strong> <small>({esc(self.path)}; {esc(self._verification_text())})</small>"
            f"<p>{esc(count(s['n']) if s['n'] is not None else '?')} rows, {len(fields):,} columns: "
            f"{esc(shown)}</p>"
            + table(["criterion", "DP value", "threshold", "result"], rows,
                    caption="Acceptance criteria (metrics.json)"
                    + (f"; {more:,} more not shown" if more > 0 else ""))
            + table(["privacy budget", "epsilon"], budget, caption="Budget (budget.json)")
            + "</div>")

    def _verification_text(self) -> str:
        """What the views say about verification: the verdict of the last :meth:`verify` of this
        object (and the key it was given), else that it is not verified."""
        report = self._cache.get("verification")
        if report is None:
            return "not verified: call verify()"
        verdict = str(getattr(report, "verdict", "unknown"))
        key = self._cache.get("verification_key")
        if verdict == "verified":
            return f"verified by verify() with the key {key}" if key else "verified by verify()"
        return f"verify() verdict: {verdict}"

    # -- verification ------------------------------------------------------------------
    def verify(self, pubkey: str | os.PathLike | None = None, *,
               spec: str | os.PathLike | None = None,
               preregistration: str | os.PathLike | None = None,
               beacon: str | None = None) -> "AuditReport":
        """Run every public check of ``dpbundle audit`` on this bundle and return its report:
        ``report.verdict`` is "verified", "failed" or one of the "not_verified_..." verdicts
        (docs/audit.md); ``report.checks`` the named checks
        (:class:`dpbundle.audit.report.AuditReport`).

        Give ``pubkey`` (the publisher's key file or its fingerprint): without it the signature
        can only be checked against the key the bundle carries, which proves nothing about who
        signed, and the verdict is never "verified". ``spec``: a pre-registered spec file or
        its SHA-256. For a pre-registered bundle, ``preregistration`` (the record you archived,
        with its ``.sig`` beside it) and ``beacon`` (the value you looked up) pin what the
        bundle can only vouch for itself; without them the verdict is not "verified".
        """
        from .runner import run_audit

        kwargs: dict[str, Any] = {"pubkey": pubkey}
        if spec is not None:
            kwargs["spec"] = spec
        if preregistration is not None:
            kwargs["preregistration"] = preregistration
        if beacon is not None:
            kwargs["beacon"] = beacon
        self._cache.pop("verification", None)
        report = run_audit(self.path, **kwargs)
        self._cache["verification"] = report
        self._cache["verification_key"] = None if pubkey is None else str(pubkey)
        return report


def _categorical(column: "pd.Series", field_: dict, path: Path) -> "pd.Series":
    """``column`` as a categorical with the field's categories (v2 ``categories``, else the
    v1 ``constraints.enum``); a value outside them is an error, never a silent missing value."""
    import pandas as pd

    labels = field_.get("categories")
    if labels is None:
        labels = (field_.get("constraints") or {}).get("enum")
    if not labels:
        return column
    dtype = pd.CategoricalDtype([str(x) for x in labels],
                                ordered=bool(field_.get("categoriesOrdered", False)))
    bad = ~column.isin(dtype.categories)
    if bad.any():
        row = int(bad.to_numpy().nonzero()[0][0])
        raise BundleReadError(f"{path}: data.csv line {row + 2}, column {field_['name']!r}: "
                              f"value {str(column.iloc[row])[:80]!r} is not one of its labels")
    return column.astype(dtype)
