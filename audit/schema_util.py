"""Load the package's JSON schemas (``dpbundle.schemas``) and validate documents against them.

A small, independent loader: the audit reads the published schemas as data and validates with
``jsonschema``'s Draft 2020-12 validator.
"""
from __future__ import annotations

import json
from functools import lru_cache
from itertools import islice
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
    # The first errors only (a hostile document may hold millions): at most 4 x limit are
    # collected, each cut short as soon as it is made, then sorted by path, so that the work
    # and the memory stop early whatever the document.
    first = []
    for err in islice(validator.iter_errors(document), 4 * limit):
        path = "/".join(str(p) for p in err.absolute_path) or "(root)"
        if len(path) > 300:
            path = path[:300] + "..."
        msg = err.message
        if len(msg) > 300:
            msg = msg[:300] + "..."
        first.append((list(map(str, err.path)), f"{path}: {msg}"))
    return [text for _, text in sorted(first, key=lambda e: e[0])[:limit]]
