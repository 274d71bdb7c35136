"""What the audit can check of a beacon value without asking the beacon: the time it names.

A pre-registered release binds its post-processing seeds to a public value that must not have
existed when the record was published (``seeds.json``'s ``beacon.value``, from the record's
``beacon_source``). The value is free text: the audit cannot tell a real value from an invented
one, nor a value the publisher chose among several (a "ground" beacon), unless the auditor
fetches it and passes ``--beacon VALUE``. What it checks without that:

* a **drand round** named in the value (``round N``, with "drand" in the value or the source,
  and the chain: quicknet, or the default "mainnet" chain) has the time
  ``genesis + (N - 1) x period``;
* otherwise the first **ISO 8601 time or date** in the value (``2027-01-15T12:00Z``,
  ``2027-01-15 12:00 UTC``, ``2027-01-15``; a time without a zone is read as UTC).

That time must not be before the record's ``created`` (nor before a time the record's
``beacon_source`` names, e.g. "first round after 2027-01-15 12:00 UTC"), and not after the day
the bundle was made (manifest.json's ``created``). A value that names no time is reported as
such. Offline verification of a drand round's BLS signature is not done: no well-kept Python
library for it exists (docs/audit.md, "The beacon").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

__all__ = ["DRAND_CHAINS", "BeaconTime", "beacon_time", "source_time", "parse_time",
           "beacon_time_problems"]

# drand chains: name -> (genesis time in Unix seconds, period in seconds), from the chains'
# published info (https://api.drand.sh/<chain hash>/info).
DRAND_CHAINS = {
    "quicknet": (1692803367, 3),
    "default": (1595431050, 30),
}
_ROUND = re.compile(r"\bround\s*(?:#|no\.?|number)?\s*(\d{1,15})\b", re.IGNORECASE)
_ISO = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})"
    r"(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(Z|UTC|GMT|[+-]\d{2}:?\d{2})?)?(?!\d)")


@dataclass(frozen=True)
class BeaconTime:
    """A time a text names: ``when`` (UTC), ``day_only`` (a date without a time), ``how`` (in words)."""

    when: datetime
    day_only: bool
    how: str


def _chain(text: str) -> str | None:
    t = text.lower()
    if "quicknet" in t:
        return "quicknet"
    if "mainnet" in t or "default" in t or "league of entropy" in t:
        return "default"
    return None


def parse_time(text: str) -> BeaconTime | None:
    """The first ISO 8601 date or time in ``text`` (None if there is none or it is invalid)."""
    for m in _ISO.finditer(text):
        y, mo, d, hh, mi, ss, zone = m.groups()
        try:
            if hh is None:
                return BeaconTime(datetime(int(y), int(mo), int(d), tzinfo=timezone.utc), True,
                                  f"the date {m.group(0)}")
            when = datetime(int(y), int(mo), int(d), int(hh), int(mi), int(ss or 0), tzinfo=timezone.utc)
        except ValueError:
            continue
        if zone and zone[0] in "+-":
            sign = 1 if zone[0] == "+" else -1
            digits = zone[1:].replace(":", "")
            when -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        return BeaconTime(when, False, f"the time {m.group(0)}")
    return None


def beacon_time(value: str, source: str) -> tuple[BeaconTime | None, str | None]:
    """(the time the beacon value names, or None; a note when it names a round whose chain is
    unknown)."""
    m = _ROUND.search(value)
    if m and "drand" in (value + " " + source).lower():
        chain = _chain(value) or _chain(source)
        if chain is None:
            return parse_time(value), (f"the value names drand round {m.group(1)} but not which "
                                       "chain (quicknet or the default mainnet chain)")
        genesis, period = DRAND_CHAINS[chain]
        r = int(m.group(1))
        if r < 1:
            return None, "drand rounds start at 1"
        try:
            when = datetime.fromtimestamp(genesis + (r - 1) * period, tz=timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None, f"drand round {r} is beyond any representable time"
        return BeaconTime(when, False, f"drand {chain} round {r} ({when.isoformat().replace('+00:00', 'Z')})"), None
    return parse_time(value), None


def source_time(source: str) -> BeaconTime | None:
    """A time the record's beacon_source names ("first round after 2027-01-15 12:00 UTC")."""
    return parse_time(source)


def _as_time(text) -> BeaconTime | None:
    return parse_time(text) if isinstance(text, str) else None


def beacon_time_problems(value: str, source: str, record_created, bundle_created
                         ) -> tuple[list[str], list[str], str | None]:
    """(problems, notes, the named time in ISO form or None)."""
    problems: list[str] = []
    notes: list[str] = []
    named, note = beacon_time(value, source)
    if note:
        notes.append(note)
    if named is None:
        notes.append("the beacon value names no time (a drand round or an ISO 8601 date or time): "
                     "its time could not be checked against the record's and the bundle's")
        return problems, notes, None

    def before(a: BeaconTime, b: BeaconTime) -> bool:
        if a.day_only or b.day_only:
            return a.when.date() < b.when.date()
        return a.when < b.when

    record = _as_time(record_created)
    if record is not None and before(named, record):
        problems.append(f"the beacon value names {named.how}, before the pre-registration record "
                        f"was made ({record_created}): a value that existed when the record was "
                        "published does not bind the seeds")
    promised = source_time(source)
    if promised is not None and before(named, promised):
        problems.append(f"the beacon value names {named.how}, before the time the record's beacon "
                        f"source names ({promised.how})")
    made = _as_time(bundle_created)
    if made is not None:
        end = made.when if not made.day_only else made.when + timedelta(days=1)
        late = named.when.date() > made.when.date() if named.day_only else named.when >= end \
            if made.day_only else named.when > made.when
        if late:
            problems.append(f"the beacon value names {named.how}, after the bundle was made "
                            f"({bundle_created}): the seeds cannot have come from it")
    return problems, notes, named.when.isoformat().replace("+00:00", "Z")
