"""Check ``ledger`` (inside the enclave, ``--ledger LEDGER``): the number of spends on this
registry that the bundle states is the private budget ledger's.

One pre-registration (and one registry) can back many runs: a publisher could run the release
several times and keep the run it likes. Every run reserves its whole budget in the private
ledger before it touches the data (``release/scheme/ledger.py``); the bundle states, signed in
manifest.json's ``ledger``, how many spends the ledger had recorded on this registry when this
release reserved its own (``spends_on_registry``, this one included) and which entry is its own
(``spend_id``). With the ledger, the enclave auditor checks:

* the entry ``spend_id`` is in the ledger, its epsilon is budget.json's total, and (with
  ``--data``) it was made on this data file (its ``data_fingerprint`` is the file's SHA-256; a
  re-export of the same registry has another one and gives a warning);
* the spends on the same data, closed transitively over their two keys (the file's SHA-256 and
  the prepared table's fingerprint, as ``release/scheme/ledger.py`` does) among the ledger's lines up to
  and including this entry, number exactly ``spends_on_registry``;
* the earlier epsilons the bundle states (``earlier_epsilons``, dpbundle 0.3 and later) are
  the epsilons of those spends before this one, in ledger order, as the ledger records them
  (the public audit checks that ``composed_epsilon`` is their sum with this bundle's total);
* later spends on the same data are reported (they compose with this release too).

The ledger is private (it holds fingerprints of the confidential data): the report is private.
This module re-implements the closure; it imports nothing from ``dpbundle.release``.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .context import AuditContext, Missing
from .report import CheckResult

__all__ = ["check_ledger", "MAX_LEDGER_BYTES", "LedgerFileError", "read_ledger", "same_data"]

MAX_LEDGER_BYTES = 256 * 1024 * 1024


class LedgerFileError(ValueError):
    """The ledger file is unusable (the message names the line, never a fingerprint)."""


def read_ledger(path: Path) -> list[dict]:
    """The ledger's spends in file order, each with its latest status."""
    from .safe_read import InputFileError, read_small_file

    try:
        data = read_small_file(path, "budget ledger (--ledger)", MAX_LEDGER_BYTES)
    except InputFileError as e:
        raise LedgerFileError(str(e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LedgerFileError(f"{path}: not UTF-8 (byte {e.start})") from None
    spends: dict[str, dict] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise LedgerFileError(f"{path}:{no}: not JSON") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise LedgerFileError(f"{path}:{no}: not a ledger line (an object with an id)")
        if rec.get("kind") == "spend":
            if rec["id"] in spends:
                raise LedgerFileError(f"{path}:{no}: duplicate spend id")
            if not isinstance(rec.get("data_fingerprint"), str):
                raise LedgerFileError(f"{path}:{no}: a spend without data_fingerprint")
            spends[rec["id"]] = dict(rec)
        elif rec.get("kind") == "status":
            if rec["id"] not in spends:
                raise LedgerFileError(f"{path}:{no}: a status line for an unknown spend")
            spends[rec["id"]]["status"] = rec.get("status")
        else:
            raise LedgerFileError(f"{path}:{no}: unknown kind")
    return list(spends.values())


def same_data(spends: list[dict], data_fp: str, table_fp: str | None) -> list[dict]:
    """The spends sharing a key with (data_fp, table_fp), closed transitively (file order)."""
    files, tables = {data_fp}, ({table_fp} if table_fp else set())
    mine = [False] * len(spends)
    grown = True
    while grown:
        grown = False
        for i, e in enumerate(spends):
            if not mine[i] and (e["data_fingerprint"] in files or e.get("table_fingerprint") in tables):
                mine[i] = grown = True
                files.add(e["data_fingerprint"])
                if isinstance(e.get("table_fingerprint"), str):
                    tables.add(e["table_fingerprint"])
    return [e for e, m in zip(spends, mine) if m]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_ledger(ctx: AuditContext, ledger: Path, data: Path | None) -> CheckResult:
    r = CheckResult("ledger")
    try:
        manifest = ctx.json("manifest.json")
        stated = manifest.get("ledger") if isinstance(manifest, dict) else None
    except Missing as e:
        r.fail(str(e))
        return r
    if not isinstance(stated, dict) or not isinstance(stated.get("spends_on_registry"), int) \
            or not isinstance(stated.get("spend_id"), str):
        r.fail("manifest.json states no ledger spends (ledger.spends_on_registry and spend_id): "
               "the number of runs on this registry cannot be checked")
        return r
    try:
        spends = read_ledger(ledger)
    except LedgerFileError as e:
        r.fail(str(e))
        return r
    ids = [e["id"] for e in spends]
    if stated["spend_id"] not in ids:
        r.fail("this release's spend (manifest.json ledger.spend_id) is not in the ledger: wrong "
               "ledger, or the spend was not recorded")
        return r
    at = ids.index(stated["spend_id"])
    entry = spends[at]
    before = same_data(spends[:at + 1], entry["data_fingerprint"], entry.get("table_fingerprint"))
    count = len(before)
    if count != stated["spends_on_registry"]:
        r.fail(f"the bundle states {stated['spends_on_registry']} spend(s) on this registry; the "
               f"ledger recorded {count} up to and including this release's")
    _check_earlier(manifest, stated, before[:-1], r)
    try:
        from dpbundle.mechanisms import exact

        total = ctx.json("budget.json").get("total_epsilon")
        if exact.dec(entry.get("epsilon")) != exact.dec(total):
            r.fail("the ledger entry's epsilon is not budget.json's total_epsilon")
    except (Missing, AttributeError, TypeError, ValueError, ArithmeticError):
        r.fail("the ledger entry's epsilon cannot be compared with budget.json's total_epsilon")
    if data is not None and _file_sha256(Path(data)) != entry["data_fingerprint"]:
        r.warn("the ledger entry was made on another file than --data (its SHA-256 differs): "
               "a re-export of the same registry, or another registry")
    later = same_data(spends, entry["data_fingerprint"], entry.get("table_fingerprint"))
    after = len(later) - count
    if entry.get("status") != "released":
        r.warn(f"the ledger marks this release's spend {entry.get('status')!r}, not 'released'")
    r.facts.update({"spends_on_registry": count, "spends_after": after})
    if after > 0:
        r.warn(f"{after} spend(s) on the same registry came after this release: their epsilons "
               "compose with this bundle's")
    if not r.failed:
        r.detail = (f"the ledger recorded {count} spend(s) on this registry up to and including "
                    "this release's, as the bundle states; its epsilon is the bundle's total")
        if "earlier_epsilons" in stated:
            r.detail += "; the earlier spends' epsilons are the ones the bundle states"
    return r


def _check_earlier(manifest: dict, stated: dict, earlier: list[dict], r: CheckResult) -> None:
    """The bundle's ``earlier_epsilons`` are the ledger's epsilons of the earlier spends on this
    registry, in ledger order (required from dpbundle 0.3; older bundles do not state them)."""
    from .checks_integrity import SIGNED_CHECKSUMS_SINCE, made_since

    if "earlier_epsilons" not in stated:
        if made_since(manifest, SIGNED_CHECKSUMS_SINCE):
            r.fail("manifest.json states no ledger.earlier_epsilons (a bundle made by dpbundle 0.3 or "
                   "later states them)")
        return
    mine = stated["earlier_epsilons"]
    theirs = [e.get("epsilon") for e in earlier]
    if not isinstance(mine, list) or len(mine) != len(theirs):
        r.fail(f"the bundle states {len(mine) if isinstance(mine, list) else 'no list of'} earlier "
               f"epsilon(s); the ledger recorded {len(theirs)} earlier spend(s) on this registry")
        return
    for i, (a, b) in enumerate(zip(mine, theirs)):
        if isinstance(a, bool) or not isinstance(a, (int, float)) or isinstance(b, bool) \
                or not isinstance(b, (int, float)) or float(a) != float(b):
            r.fail(f"ledger.earlier_epsilons[{i}] {a!r} is not the epsilon the ledger records for "
                   f"earlier spend {i + 1} on this registry")
