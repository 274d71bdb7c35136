"""Check ``--spec``: the bundle's spec is the one the publisher pre-registered.

A publisher can fix its spec (thresholds, epsilons, the privacy cap) before it sees the data, by
publishing the spec file or its SHA-256. An auditor then runs ``dpbundle audit BUNDLE --spec
FILE`` or ``--spec <64 hex>``; the named check ``preregistration`` fails when the bundle's spec
(``spec.json``'s ``spec``) is another one.

The spec's SHA-256 is taken over its *canonical JSON*: the parsed spec without
``privacy.private_data_sha256`` (fingerprints of confidential files, which a bundle never
publishes), serialised with sorted keys, no whitespace, UTF-8 (``ensure_ascii=False``), no NaN.
It does not change with comments, key order, quoting or YAML versus JSON, and it is the same for
the spec file and for the bundle that was released from it. Print it with::

    python -m dpbundle.audit.preregistration SPEC.yaml

The pre-registered file is untrusted text: read only if it is a regular file of at most 2 MB
(:mod:`.safe_read`), and parsed by a small strict YAML loader (a ``yaml.SafeLoader``) that
refuses anchors and aliases, merge keys, duplicate keys, nesting deeper than 64 levels and any
value JSON cannot hold; dates stay strings, as in the release's reader.
"""
from __future__ import annotations

import copy
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from yaml.events import AliasEvent

from .edges_check import declared_spec, edges_epsilon, spec_edges
from .context import AuditContext, Missing
from .report import CheckResult
from .safe_read import InputFileError, read_small_file

__all__ = ["MAX_SPEC_BYTES", "MAX_DEPTH", "PreregistrationError", "Preregistered", "load_preregistered",
           "parse_spec_text", "canonical_sha256", "check_preregistration", "SHA256_ARG", "strict_yaml_mapping"]

MAX_SPEC_BYTES = 2 * 1024 * 1024   # a spec is a few kilobytes
MAX_DEPTH = 64                     # nesting levels (a spec needs about 8)
SHA256_ARG = re.compile(r"(?:sha256:)?([0-9a-fA-F]{64})")
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"


class PreregistrationError(Exception):
    """The --spec argument cannot be used (the message names the file and the rule)."""


@dataclass(frozen=True)
class Preregistered:
    """A pre-registered spec: from a file (``spec`` parsed) or only its SHA-256 (``spec`` None)."""

    source: str
    sha256: str
    spec: dict | None = None


# --------------------------------------------------------------------------- the strict loader


class _Refused(Exception):
    def __init__(self, message: str, mark=None):
        super().__init__(message)
        self.mark = mark


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader without anchors, aliases, merge keys or duplicate keys, at most MAX_DEPTH deep."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if self.check_event(AliasEvent):
            raise _Refused(f"an alias (*{event.anchor}); rule: anchors and aliases are refused, "
                           "write every value out", event.start_mark)
        if getattr(event, "anchor", None) is not None:
            raise _Refused(f"an anchor (&{event.anchor}); rule: anchors and aliases are refused, "
                           "write every value out", event.start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nesting deeper than {MAX_DEPTH} levels; rule: a spec needs about "
                               "8 levels", event.start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE:
                raise _Refused("a merge key (<<); rule: each field is written once, where it "
                               "applies", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            try:
                text = _key_text(key)
            except TypeError:
                raise _Refused(f"a mapping key of type {type(key).__name__}; rule: keys are "
                               "strings or numbers", key_node.start_mark) from None
            if text in seen:
                raise _Refused(f"the key {text!r} appears twice in one mapping; rule: no duplicate "
                               "keys (a parser would silently keep the last one)", key_node.start_mark)
            seen.add(text)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != _TIMESTAMP]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _key_text(key: Any) -> str:
    """A mapping key as the JSON object key it becomes (1 and "1" are the same key)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)
    raise TypeError(type(key).__name__)


def strict_yaml_mapping(data: bytes, name: str) -> dict:
    """A bundle's YAML file ``name`` as JSON data, read by the strict loader (no anchors, aliases,
    merge keys or duplicate keys, bounded depth, dates as strings); ValueError naming the rule
    otherwise (not UTF-8, refused, not valid YAML, not a mapping)."""
    try:
        loader = _StrictLoader(data.decode("utf-8"))
        try:
            doc = _json_value(loader.get_single_data())
        finally:
            loader.dispose()
    except UnicodeDecodeError as e:
        raise ValueError(f"{name}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except _Refused as e:
        where = f" (line {e.mark.line + 1})" if e.mark is not None else ""
        raise ValueError(f"{name}: refused{where}: {e}") from None
    except Exception as e:  # noqa: BLE001 - yaml errors, ValueError, RecursionError
        text = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise ValueError(f"{name}: not valid YAML ({text})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{name}: not a mapping of fields")
    return doc


def _json_value(x: Any, where: str = "(root)") -> Any:
    """``x`` as plain JSON data (string keys), or _Refused naming where it is not."""
    if isinstance(x, dict):
        return {_key_text(k): _json_value(v, f"{where}.{k}") for k, v in x.items()}
    if isinstance(x, list):
        return [_json_value(v, f"{where}[{i}]") for i, v in enumerate(x)]
    if isinstance(x, float) and not math.isfinite(x):
        raise _Refused(f"{where}: {x!r} is not a finite number; rule: NaN and infinities are refused")
    if x is None or isinstance(x, (str, bool, int, float)):
        return x
    raise _Refused(f"{where}: a {type(x).__name__} value; rule: only JSON values (mappings, lists, "
                   "strings, numbers, booleans, null)")


def _depth_ok(x: Any, depth: int = 1) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(x, dict):
        return all(_depth_ok(v, depth + 1) for v in x.values())
    if isinstance(x, list):
        return all(_depth_ok(v, depth + 1) for v in x)
    return True


def _load_json(text: str) -> Any:
    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise _Refused(f"the key {k!r} appears twice in one object; rule: no duplicate keys")
            out[k] = v
        return out

    def no_constant(c):
        raise _Refused(f"{c} is not a finite number; rule: NaN and infinities are refused")

    try:
        doc = json.loads(text, object_pairs_hook=pairs, parse_constant=no_constant)
    except RecursionError:
        raise _Refused(f"nesting deeper than {MAX_DEPTH} levels") from None
    if not _depth_ok(doc):
        raise _Refused(f"nesting deeper than {MAX_DEPTH} levels; rule: a spec needs about 8 levels")
    return doc


def parse_spec_text(text: str, source: str, json_syntax: bool = False) -> dict:
    """Parse a spec's text (YAML, or JSON when ``json_syntax``) strictly; PreregistrationError."""
    try:
        if json_syntax:
            doc = _load_json(text)
        else:
            loader = _StrictLoader(text)
            try:
                doc = loader.get_single_data()
            finally:
                loader.dispose()
        doc = _json_value(doc)
    except _Refused as e:
        where = f" (line {e.mark.line + 1}, column {e.mark.column + 1})" if e.mark is not None else ""
        raise PreregistrationError(f"{source}: the pre-registered spec is refused{where}: {e}") from None
    except yaml.YAMLError as e:
        raise PreregistrationError(f"{source}: the pre-registered spec is not valid YAML "
                                   f"({str(e).splitlines()[0]})") from None
    except (ValueError, RecursionError) as e:   # malformed JSON, an integer too long to convert
        raise PreregistrationError(f"{source}: the pre-registered spec cannot be read "
                                   f"({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    if not isinstance(doc, dict):
        raise PreregistrationError(f"{source}: the pre-registered spec is not a mapping of fields")
    return doc


# --------------------------------------------------------------------------- the spec's SHA-256


def public_spec(spec: dict) -> dict:
    """The spec as a bundle publishes it: without ``privacy.private_data_sha256``."""
    out = copy.deepcopy(spec)
    if isinstance(out.get("privacy"), dict):
        out["privacy"].pop("private_data_sha256", None)
    return out


def canonical_sha256(spec: dict) -> str:
    """SHA-256 (hex) of the canonical JSON of the public spec (see the module docstring)."""
    text = json.dumps(public_spec(spec), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_preregistered(arg: str, path_only: bool = False) -> Preregistered:
    """``--spec``: 64 hex characters (optionally ``sha256:``) are a spec's SHA-256; anything
    else (and anything with ``path_only``) is the path of a spec file (YAML, or JSON when it ends
    in .json). To name a file whose name is 64 hex characters, write ``./NAME``."""
    m = None if path_only else SHA256_ARG.fullmatch(arg.strip())
    if m:
        return Preregistered(source="the pre-registered SHA-256", sha256=m.group(1).lower())
    try:
        data = read_small_file(arg, "pre-registered spec (--spec)", MAX_SPEC_BYTES)
    except InputFileError as e:
        raise PreregistrationError(str(e)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PreregistrationError(f"{arg}: the pre-registered spec is not UTF-8 text "
                                   f"({e.reason} at byte {e.start})") from None
    spec = parse_spec_text(text.removeprefix("\ufeff"), arg, json_syntax=arg.lower().endswith(".json"))
    try:
        sha = canonical_sha256(spec)
    except (TypeError, ValueError) as e:   # pragma: no cover - _json_value admits JSON data only
        raise PreregistrationError(f"{arg}: the pre-registered spec has no canonical JSON ({e})") from None
    return Preregistered(source=arg, sha256=sha, spec=public_spec(spec))


# --------------------------------------------------------------------------- the check

_ABSENT = object()    # a field the spec does not write


def _show(v: Any) -> str:
    if v is _ABSENT:
        return "(absent)"
    if isinstance(v, Fraction):
        from dpbundle.mechanisms import exact

        return exact.show(v)
    text = json.dumps(v, sort_keys=True, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return text if len(text) <= 200 else text[:200] + "..."


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return _ABSENT
        d = d[p]
    return d


def _num(x: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _total(spec: dict) -> Any:
    """count + dp_edges + 2 x (generation + evaluation) + pre-selection, exactly (``retries:
    resample``: count + dp_edges + generation + 2 x evaluation + pre-selection; ``definition: zcdp``: the total rho);
    _ABSENT if not computable."""
    from dpbundle.mechanisms import exact
    from dpbundle.mechanisms.records import DEFAULT_COUNT_EPSILON

    priv = spec.get("privacy") if isinstance(spec.get("privacy"), dict) else {}
    acc = spec.get("acceptance") if isinstance(spec.get("acceptance"), list) else []
    rec = priv.get("records") if isinstance(priv.get("records"), dict) else {}
    gen = priv.get("epsilon_generation")
    evals = [e.get("epsilon") for e in acc if isinstance(e, dict)]
    pre = priv.get("pre_selection") or []
    pres = [p.get("epsilon") if isinstance(p, dict) else None for p in pre] if isinstance(pre, list) else [None]
    count = 0 if rec.get("policy", "dp_count") == "declared_public" else rec.get("epsilon", DEFAULT_COUNT_EPSILON)
    sel = priv.get("selection") if isinstance(priv.get("selection"), dict) else {}
    if priv.get("definition") == "zcdp":
        from dpbundle.mechanisms import zcdp

        rho = priv.get("rho_generation")
        if not all(_num(x) for x in [rho, count, *evals, *pres]):
            return _ABSENT
        return zcdp.release_rho(exact.dec(count), exact.dec(rho), exact.total(evals),
                                [exact.dec(p) for p in pres])["total"]
    if not all(_num(x) for x in [gen, count, *evals, *pres]):
        return _ABSENT
    head = exact.dec(count) + edges_epsilon(spec)         # the DP count and the dp_edges draws
    if sel.get("retries") == "resample":      # the generator fitted once
        return head + exact.dec(gen) + 2 * exact.total(evals) + exact.total(pres)
    return head + 2 * (exact.dec(gen) + exact.total(evals)) + exact.total(pres)


def key_fields(spec: dict) -> dict[str, Any]:
    """The fields a pre-registration is about, by name: thresholds, epsilons, the cap, the total."""
    out: dict[str, Any] = {
        "privacy.epsilon_cap": _get(spec, "privacy", "epsilon_cap"),
        "privacy.epsilon_generation": _get(spec, "privacy", "epsilon_generation"),
        "privacy.records.policy": _get(spec, "privacy", "records", "policy"),
        "privacy.records.epsilon": _get(spec, "privacy", "records", "epsilon"),
        "privacy.selection.stop_probability": _get(spec, "privacy", "selection", "stop_probability"),
        "privacy.selection.retries": _get(spec, "privacy", "selection", "retries"),
        "privacy.definition": _get(spec, "privacy", "definition"),
        "privacy.rho_generation": _get(spec, "privacy", "rho_generation"),
        "privacy.delta": _get(spec, "privacy", "delta"),
    }
    pre = _get(spec, "privacy", "pre_selection")
    for i, p in enumerate(pre if isinstance(pre, list) else []):
        out[f"privacy.pre_selection[{i}].epsilon"] = _get(p, "epsilon")
    acc = spec.get("acceptance")
    for i, e in enumerate(acc if isinstance(acc, list) else []):
        name = f"acceptance[{e.get('id')}]" if isinstance(e, dict) and isinstance(e.get("id"), str) \
            else f"acceptance[{i}]"
        out[f"{name}.epsilon"] = _get(e, "epsilon")
        threshold = _get(e, "threshold")
        if isinstance(threshold, dict):     # a derived threshold: each of its inputs by name
            out.update({f"{name}.threshold.{k}": v for k, v in threshold.items()})
        else:
            out[f"{name}.threshold"] = threshold
    for c, a, alt in spec_edges(spec):
        out[f"columns[{c}].alternatives[{a}].dp_edges.epsilon"] = _get(alt, "dp_edges", "epsilon")
    out["total epsilon (count + DP bin edges + 2 x (generation + evaluation) + pre-selection; resample: generation "
        "once; zcdp: the total rho)"] = _total(spec)
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (1 and 1.0 are the same number; True is not 1)."""
    if a is _ABSENT or b is _ABSENT:
        return a is b
    if (_num(a) or isinstance(a, Fraction)) and (_num(b) or isinstance(b, Fraction)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def check_preregistration(ctx: AuditContext, pre: Preregistered | None) -> CheckResult:
    """Compare the bundle's spec with the pre-registered one (skipped without --spec)."""
    r = CheckResult("preregistration")
    try:
        doc = ctx.json("spec.json")
        spec = doc.get("spec") if isinstance(doc, dict) else None
        if not isinstance(spec, dict):
            raise Missing("spec.json: no spec object")
        bundle_sha = canonical_sha256(declared_spec(spec))     # drawn dp_edges are not declared
    except (Missing, TypeError, ValueError, RecursionError) as e:
        if pre is None:
            r.skip(f"not requested (--spec); the bundle's spec is unusable ({e})")
        else:
            r.fail(f"the bundle's spec cannot be compared: {e}")
        return r
    r.facts["bundle_spec_sha256"] = bundle_sha
    if pre is None:
        r.skip(f"not requested (--spec FILE or --spec SHA256); the bundle's spec SHA-256 is {bundle_sha}")
        return r
    r.facts["preregistered_spec_sha256"] = pre.sha256
    if pre.spec is not None:
        mine, theirs = key_fields(pre.spec), key_fields(spec)
        for name in list(mine) + [k for k in theirs if k not in mine]:
            a, b = mine.get(name, _ABSENT), theirs.get(name, _ABSENT)
            if not _same(a, b):
                r.fail(f"{name}: pre-registered {_show(a)}, bundle {_show(b)}")
    if bundle_sha != pre.sha256:
        r.fail(f"spec SHA-256 (canonical JSON): pre-registered {pre.sha256}, bundle {bundle_sha}"
               + ("" if pre.spec is None or r.problems else
                  " (the thresholds, epsilons and cap agree; another field differs)"))
    if pre.spec is not None and bundle_sha != pre.sha256:
        r.facts["differing_paths"] = _differing_paths(pre.spec, spec)
    if not r.failed:
        r.detail = (f"the bundle's spec is the pre-registered one (SHA-256 {bundle_sha}"
                    + (f", {pre.source}" if pre.spec is not None else "") + ")")
    return r


def _differing_paths(a: Any, b: Any, path: str = "", out: list | None = None, limit: int = 20) -> list[str]:
    """Up to ``limit`` JSON paths where two documents differ (for the report's facts)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}".lstrip(".") + (" (only in the bundle)" if k not in a
                                                         else " (only pre-registered)"))
            else:
                _differing_paths(a[k], b[k], f"{path}.{k}", out, limit)
            if len(out) >= limit:
                break
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _differing_paths(x, y, f"{path}[{i}]", out, limit)
    elif not _same(a, b):
        out.append(path.lstrip(".") or "(root)")
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the canonical SHA-256 of a spec file (the value to pre-register)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m dpbundle.audit.preregistration SPEC.yaml\n"
              "Prints the SHA-256 to pre-register: dpbundle audit BUNDLE --spec <it> checks a bundle "
              "against it.", file=sys.stderr)
        return 2
    try:
        pre = load_preregistered(args[0], path_only=True)
    except PreregistrationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{pre.sha256}  {Path(args[0]).name}")
    return 0


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
