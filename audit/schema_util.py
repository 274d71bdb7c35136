"""Load the package's JSON schemas (``dpbundle.schemas``) and validate documents against them.

A small, independent loader: the audit reads the published schemas as data and validates with
``jsonschema``'s Draft 2020-12 validator.
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files

__all__ = ["load_schema", "validate", "SchemaMissing"]


class SchemaMissing(Exception):
    """The installed package has no schema of that name."""


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    try:
        text = files("dpbundle.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    except (FileNotFoundError, OSError):
        raise SchemaMissing(f"no schema {name}.schema.json in dpbundle.schemas") from None
    return json.loads(text)


def validate(document, name: str, limit: int = 20) -> list[str]:
    """Messages ``path: message`` for every violation (at most ``limit``); [] if valid."""
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    out = []
    for err in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.path))):
        path = "/".join(str(p) for p in err.absolute_path) or "(root)"
        msg = err.message
        if len(msg) > 300:
            msg = msg[:300] + "..."
        out.append(f"{path}: {msg}")
        if len(out) >= limit:
            break
    return out
