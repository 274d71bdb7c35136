"""Audit results: one :class:`CheckResult` per named check, rendered as a Rich table, JSON
(validated against ``schemas/audit-report.schema.json``) or HTML."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .bounds import MAX_MESSAGE_CHARS, clip

__all__ = ["CheckResult", "AuditReport", "CHECK_NAMES", "PASS", "FAIL", "SKIP", "PRIVATE_NOTE",
           "VERIFIED", "NOT_PINNED", "PREREG_NOT_PINNED", "BEACON_NOT_CHECKED", "FAILED",
           "EXIT_CODES", "VERDICT_TEXT", "NOT_CHECKED", "UNCHECKED_VERDICT"]

PASS, FAIL, SKIP = "pass", "fail", "skipped"

# The verdict of an audit (the JSON report's "verdict") and its exit code. Exit code 2 (unusable
# input or usage) has no report. "Not verified" is not "passed": every check passed, but against
# something only the bundle vouches for, which whoever re-signed the bundle chose:
#   key not pinned               the signature, against the key the bundle carries (--pubkey)
#   pre-registration not pinned  the pre-registration record, against the copy the bundle carries
#                                (--preregistration REC: the record archived when it was published)
#   beacon not checked           the beacon value in seeds.json, against nothing (--beacon VALUE:
#                                the value the auditor fetched from the beacon's source)
# The verdict names the first missing one in this order; the report's "not_checked" lists all.
VERIFIED, FAILED = "verified", "failed"
NOT_PINNED = "not_verified_key_not_pinned"
PREREG_NOT_PINNED = "not_verified_preregistration_not_pinned"
BEACON_NOT_CHECKED = "not_verified_beacon_not_checked"
# reason (the report's "not_checked") -> its verdict, in the order the verdict names them
NOT_CHECKED = ("key_not_pinned", "preregistration_not_pinned", "beacon_not_checked")
UNCHECKED_VERDICT = dict(zip(NOT_CHECKED, (NOT_PINNED, PREREG_NOT_PINNED, BEACON_NOT_CHECKED)))
EXIT_CODES = {VERIFIED: 0, FAILED: 1, NOT_PINNED: 3, PREREG_NOT_PINNED: 3, BEACON_NOT_CHECKED: 3}
VERDICT_TEXT = {
    VERIFIED: "VERIFIED: all checks passed; the bundle is signed by the pinned key",
    NOT_PINNED: ("NOT VERIFIED (key not pinned): every check passed against the key embedded in the "
                 "bundle, which anyone could have re-signed with; pass --pubkey FILE (the "
                 "publisher's published key) to verify"),
    PREREG_NOT_PINNED: ("NOT VERIFIED (pre-registration not pinned): every check passed against the "
                        "pre-registration record the bundle carries, which its publisher could have "
                        "made after the run; pass --preregistration REC (the record, with REC.sig, "
                        "archived when it was published) to verify"),
    BEACON_NOT_CHECKED: ("NOT VERIFIED (beacon not checked): every check passed, but nobody checked "
                         "that the beacon value in seeds.json is what the beacon published; look it "
                         "up at the source the record names and pass --beacon VALUE to verify"),
    FAILED: "audit FAILED",
}
# words of each reason in a combined verdict line, and what to pass
_REASON_WORDS = {
    "key_not_pinned": ("key not pinned", "--pubkey FILE (the publisher's published key)"),
    "preregistration_not_pinned": ("pre-registration not pinned",
                                   "--preregistration REC (the record archived when it was published)"),
    "beacon_not_checked": ("beacon not checked",
                           "--beacon VALUE (the value you looked up at the beacon's source)"),
}

# An enclave audit (--transcript/--data) read confidential data: its report is private. The JSON
# report's first key is "PRIVATE" with this text, the HTML's first line says so, the console too.
PRIVATE_NOTE = "contains results computed from confidential data; keep inside the enclave"

# The named checks, in the order they run (issue: integrity .. replay).
CHECK_NAMES = (
    "integrity",
    "schema",
    "size",
    "face_privacy",
    "constraints",
    "budget",
    "acceptance",
    "documentation",
    "preregistration",
    "seeds",
    "rederivation",
    "tables",
    "replay",
    "ledger",
)

MAX_PROBLEMS = 50  # per check, in the report (the count is always exact)


class StopCheck(Exception):
    """Raised by a step of a check to end the check early; its message is the check's last failure."""


@dataclass
class CheckResult:
    """The outcome of one named check.

    ``problems`` are the reasons for a failure (empty when passed); ``warnings`` do not make the
    check fail (e.g. "key not pinned"); ``facts`` are the public numbers the check used.
    """

    check: str
    result: str = PASS
    detail: str = ""
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    facts: dict = field(default_factory=dict)

    def fail(self, message: str) -> None:
        self.problems.append(clip(str(message)))   # a hostile bundle's values may be megabytes long
        self.result = FAIL

    def warn(self, message: str) -> None:
        self.warnings.append(clip(str(message)))

    def skip(self, message: str) -> None:
        self.result = SKIP
        self.detail = message

    @property
    def failed(self) -> bool:
        return self.result == FAIL

    def summary(self) -> str:
        """One line for the table: the first problems, else the detail."""
        if self.problems:
            head = "; ".join(self.problems[:3])
            more = len(self.problems) - 3
            return head + (f" (+{more} more)" if more > 0 else "")
        return clip(self.detail, 2 * MAX_MESSAGE_CHARS)

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "result": self.result,
            "detail": clip(self.detail, 2 * MAX_MESSAGE_CHARS),
            "problems": self.problems[:MAX_PROBLEMS],
            "problem_count": len(self.problems),
            "warnings": self.warnings,
            "facts": _jsonable(self.facts),
        }


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return int(x)
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f) or math.isinf(f):
        return str(f)
    if f.is_integer() and not isinstance(x, float) and abs(f) < 2**53:
        return int(f)
    return f


@dataclass(repr=False)
class AuditReport:
    """The checks of one audit and their verdict. ``repr(report)`` is one short line; in a
    notebook the report shows its verdict and the table of checks, with the same texts as the
    console (an enclave audit's view says PRIVATE, as its console output does)."""

    bundle: str
    checks: list[CheckResult] = field(default_factory=list)
    key_pinned: bool = False
    tool_version: str = ""
    created: str = field(
        default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")
    )
    private: bool = False   # an enclave audit (--transcript/--data): every output is private
    # what the bundle vouches for and the auditor did not pin (besides the key): reasons of
    # NOT_CHECKED other than key_not_pinned, set by the runner from the seeds check
    unpinned: list[str] = field(default_factory=list)

    @property
    def signature_only(self) -> list[str]:
        """What only the signature vouches for in this bundle (the closure rule, docs/audit.md):
        the ``schema`` check's list, ``file: field`` items that nothing re-derives or binds to
        the run; the verdict "verified" does not cover them."""
        schema = self.get("schema")
        items = schema.facts.get("signature_only") if schema is not None else None
        return [str(x) for x in items] if isinstance(items, list) else []

    def signature_only_text(self) -> str:
        """One line naming :attr:`signature_only` (empty when there is nothing to name)."""
        items = self.signature_only
        if not items:
            return ""
        return ("Bound by the signature alone (the publisher's word: nothing re-derives it or binds it to "
                "the run): " + "; ".join(items))

    @property
    def passed(self) -> bool:
        return not any(c.failed for c in self.checks)

    @property
    def not_checked(self) -> list[str]:
        """What was checked only against the bundle's own word (NOT_CHECKED order)."""
        reasons = set(self.unpinned) | ({"key_not_pinned"} if not self.key_pinned else set())
        return [r for r in NOT_CHECKED if r in reasons]

    @property
    def verdict(self) -> str:
        """``failed`` if any check failed; else ``verified`` when nothing was checked only
        against the bundle's own word; else the verdict of the first reason of
        :attr:`not_checked` (key, pre-registration, beacon)."""
        if not self.passed:
            return FAILED
        missing = self.not_checked
        return UNCHECKED_VERDICT[missing[0]] if missing else VERIFIED

    def verdict_text(self) -> str:
        """The verdict as one line of plain text (names the failed checks, or everything that
        was not checked and the option that checks it)."""
        verdict = self.verdict
        if verdict == FAILED:
            names = [c.check for c in self.checks if c.failed]
            return f"{VERDICT_TEXT[FAILED]}: failed checks: {', '.join(names)}"
        missing = self.not_checked
        if len(missing) <= 1:
            text = VERDICT_TEXT[verdict]
            if verdict == VERIFIED and "preregistration_pinned" in self.unpinned_facts():
                text += ("; its pre-registration is the pinned record and its beacon value the "
                         "one given")
            return text
        words = "; ".join(_REASON_WORDS[m][0] for m in missing)
        opts = [_REASON_WORDS[m][1] for m in missing]
        options = ", ".join(opts[:-1]) + " and " + opts[-1]
        return (f"NOT VERIFIED ({words}): every check passed, but against what only the bundle "
                f"vouches for, which whoever re-signed it chose; pass {options} to verify")

    def unpinned_facts(self) -> set[str]:
        """'preregistration_pinned' when the seeds check compared the bundle with the
        auditor's pre-registration and beacon (for the verdict's words)."""
        seeds = self.get("seeds")
        if seeds is not None and seeds.facts.get("preregistration_pinned") \
                and seeds.facts.get("beacon_checked"):
            return {"preregistration_pinned"}
        return set()

    @property
    def exit_code(self) -> int:
        """0 verified, 1 a check failed, 3 every check passed but something was checked only
        against the bundle's own word (key, pre-registration or beacon not pinned)."""
        return EXIT_CODES[self.verdict]

    def get(self, name: str) -> CheckResult | None:
        for c in self.checks:
            if c.check == name:
                return c
        return None

    def to_dict(self) -> dict:
        head = {"PRIVATE": PRIVATE_NOTE} if self.private else {}
        return head | {
            "format": "dpbundle-audit-report/1",
            "dpbundle_version": self.tool_version,
            "created": self.created,
            "bundle": self.bundle,
            "passed": self.passed,
            "key_pinned": self.key_pinned,
            "not_checked": self.not_checked,
            "verdict": self.verdict,
            "signature_only": self.signature_only,
            "checks": [c.to_dict() for c in self.checks],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=False) + "\n"

    def validate(self) -> None:
        """Validate :meth:`to_dict` against ``schemas/audit-report.schema.json``."""
        from .schema_util import validate

        errors = validate(self.to_dict(), "audit-report")
        if errors:
            raise ValueError("audit report does not match its schema: " + "; ".join(errors[:5]))

    # -- rendering ---------------------------------------------------------------------
    def __repr__(self) -> str:
        from dpbundle.templates.notebook import short

        counts = {r: sum(1 for c in self.checks if c.result == r) for r in (PASS, FAIL, SKIP)}
        private = "PRIVATE " if self.private else ""
        return (f"<{private}AuditReport {short(self.bundle)!r} verdict {self.verdict!r}: "
                f"{counts[PASS]} passed, {counts[FAIL]} failed, {counts[SKIP]} skipped>")

    def _repr_html_(self) -> str:
        """The notebook view: the console's texts (verdict, the checks' one-line summaries,
        warnings), HTML-escaped."""
        from dpbundle.templates.notebook import esc, table

        colour = {VERIFIED: "#2a7d2a", FAILED: "#b00020"}.get(self.verdict, "#9a6700")
        banner = (f"<p style=\"color:#b00020;font-weight:bold\">{esc(self.private_banner())}</p>"
                  if self.private else "")
        rows = [(c.check, c.result if c.result != FAIL else "FAIL", c.summary()) for c in self.checks]
        warnings = "".join(f"<li>({esc(c.check)}) {esc(w)}</li>" for c in self.checks for w in c.warnings)
        return (
            f"<div class=\"dpbundle-audit\">{banner}"
            f"<p style=\"color:{colour};font-weight:bold\">{esc(self.verdict_text(), 4000)}</p>"
            + (f"<p>{esc(self.signature_only_text(), 4000)}</p>" if self.signature_only else "")
            + table(["check", "status", "message"], rows, caption=f"dpbundle audit: {self.bundle}")
            + (f"<p>Warnings:</p><ul>{warnings}</ul>" if warnings else "")
            + ("<p style=\"color:#b00020;font-weight:bold\">PRIVATE: do not copy this output or "
               "its reports out of the enclave</p>" if self.private else "")
            + "</div>")

    def private_banner(self) -> str:
        """The console banner of an enclave audit (plain text; empty for a public audit)."""
        return f"PRIVATE: this audit read confidential data; its output {PRIVATE_NOTE}" if self.private else ""

    def render(self, console) -> None:
        from rich.table import Table

        if self.private:
            console.print(f"[bold red]{self.private_banner()}[/bold red]", highlight=False, soft_wrap=True)
        table = Table(title=f"dpbundle audit: {self.bundle}", show_lines=False)
        table.add_column("check", style="bold")
        table.add_column("result")
        table.add_column("detail", overflow="fold")
        style = {PASS: "[green]pass[/green]", FAIL: "[red]FAIL[/red]", SKIP: "[yellow]skipped[/yellow]"}
        from rich.markup import escape

        for c in self.checks:
            table.add_row(c.check, style.get(c.result, c.result), escape(c.summary()))
        console.print(table)
        for c in self.checks:
            for w in c.warnings:
                console.print(f"[yellow]warning[/yellow] ({c.check}): {escape(w)}")
        colour = {VERIFIED: "bold green", FAILED: "bold red"}.get(self.verdict, "bold yellow")
        console.print(f"[{colour}]{escape(self.verdict_text())}[/{colour}]", highlight=False, soft_wrap=True)
        if self.signature_only and self.verdict != FAILED:
            console.print(escape(self.signature_only_text()), highlight=False, soft_wrap=True)
        if self.private:
            console.print("[bold red]PRIVATE[/bold red]: do not copy this output or its reports out of "
                          "the enclave", highlight=False, soft_wrap=True)

    def to_html(self) -> str:
        """A standalone HTML page (template ``audit_report.html.j2`` if present); an enclave
        audit's page starts with a ``<!-- PRIVATE: ... -->`` line and shows a PRIVATE banner."""
        page = self._html()
        if not self.private:
            return page
        import html

        banner = (f"<p style=\"color:#b00020;font-weight:bold\">PRIVATE: this report "
                  f"{html.escape(PRIVATE_NOTE)}.</p>")
        page = page.replace("<body>", "<body>\n" + banner, 1)
        return f"<!-- PRIVATE: {PRIVATE_NOTE} -->\n" + page

    def _html(self) -> str:
        import html

        try:
            from importlib.resources import files

            import jinja2

            text = files("dpbundle.templates").joinpath("audit_report.html.j2").read_text("utf-8")
            env = jinja2.Environment(autoescape=True)
            return env.from_string(text).render(report=self.to_dict(), verdict_text=self.verdict_text())
        except (FileNotFoundError, ModuleNotFoundError, OSError):
            rows = "".join(
                f"<tr><td>{html.escape(c.check)}</td><td>{html.escape(c.result)}</td>"
                f"<td>{html.escape(c.summary())}</td></tr>"
                for c in self.checks
            )
            return (
                "<!doctype html><html><head><meta charset='utf-8'><title>dpbundle audit</title>"
                f"</head><body><h1>dpbundle audit: {html.escape(self.bundle)}</h1>"
                f"<p>Verdict: {html.escape(self.verdict_text())}</p>"
                f"<table><tr><th>check</th><th>result</th><th>detail</th></tr>{rows}</table>"
                "</body></html>"
            )
