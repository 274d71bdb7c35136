"""``configurations.yaml``: the configuration list the private selection drew from.

A release run with ``--configs LIST`` (a narrowed.yaml of ``dpbundle sweep``, on public data)
publishes that list verbatim as ``configurations.yaml``: its SHA-256 is then the
``configs_sha256`` a pre-registration record registers (``dpbundle preregister --configs``
hashes the file's bytes). A release without a list drew from the spec's whole space, which
spec.json already publishes; its bundle has no configurations.yaml.

The audit checks (``schema``) that the list parses (the audit's strict YAML loader), matches
``schemas/narrowed.schema.json``, that each entry's id is its configuration's, and that the
selected configuration (spec.json) is one of them; and (``seeds``) that a pre-registered
bundle publishes the list its record registered: the same SHA-256, or no list when the record
registered none.
"""
from __future__ import annotations

import hashlib
import json

from .bundle_io import BundleFileError
from .context import AuditContext, Missing

__all__ = ["CONFIGURATIONS", "MAX_CONFIGURATIONS_BYTES", "config_id", "configurations_problems",
           "configurations_sha256"]

CONFIGURATIONS = "configurations.yaml"
MAX_CONFIGURATIONS_BYTES = 20_000_000     # the sweep's own limit on a narrowed list


def config_id(config: dict) -> str:
    """First 16 hex digits of SHA-256 over the configuration's canonical JSON (the id spec.json,
    the transcript's iteration marks and configurations.yaml give a configuration)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def configurations_sha256(ctx: AuditContext) -> str | None:
    """SHA-256 of configurations.yaml's bytes (None when the bundle has none)."""
    if not ctx.bundle.has(CONFIGURATIONS):
        return None
    return ctx.bundle.digest(CONFIGURATIONS)[0]


def _load(ctx: AuditContext) -> dict:
    from .preregistration import strict_yaml_mapping

    size = ctx.bundle.files.get(CONFIGURATIONS, 0)
    if size > MAX_CONFIGURATIONS_BYTES:
        raise Missing(f"{CONFIGURATIONS}: {size:,} bytes, more than the limit of "
                      f"{MAX_CONFIGURATIONS_BYTES:,}")
    try:
        data = ctx.bundle.read_bytes(CONFIGURATIONS, cache=False)
    except BundleFileError as e:
        raise Missing(str(e)) from None
    try:
        return strict_yaml_mapping(data, CONFIGURATIONS)
    except ValueError as e:
        raise Missing(str(e)) from None


def _canonical(x) -> str:
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def configurations_problems(ctx: AuditContext, validate_json: bool = True) -> tuple[list[str], dict]:
    """(problems, facts) of configurations.yaml; ([], {}) when the bundle has none."""
    if not ctx.bundle.has(CONFIGURATIONS):
        return [], {"configurations": "the spec's whole space (no configurations.yaml)"}
    try:
        doc = _load(ctx)
    except Missing as e:
        return [str(e)], {}
    if validate_json:
        from .schema_util import validate

        errors = validate(doc, "narrowed")
        if errors:
            return [f"{CONFIGURATIONS}: {e}" for e in errors[:5]], {}
    entries = doc.get("configurations")
    if not isinstance(entries, list) or not entries:
        return [f"{CONFIGURATIONS}: lists no configurations"], {}
    out: list[str] = []
    listed = set()
    for i, e in enumerate(entries):
        config = e.get("config") if isinstance(e, dict) else None
        if not isinstance(config, dict):
            out.append(f"{CONFIGURATIONS}: configurations[{i}] has no config")
            continue
        if config_id(config) != e.get("id"):
            out.append(f"{CONFIGURATIONS}: configurations[{i}]: id {e.get('id')!r} is not its "
                       f"configuration's ({config_id(config)})")
        listed.add(_canonical(config))
    try:
        selected = ctx.json("spec.json").get("configuration")
    except (Missing, AttributeError):
        selected = None
    if isinstance(selected, dict) and _canonical(selected) not in listed:
        out.append(f"spec.json: the selected configuration is not in {CONFIGURATIONS}, the list "
                   "the release says it drew from")
    return out, {"configurations": len(entries),
                 "configurations_sha256": configurations_sha256(ctx)}
