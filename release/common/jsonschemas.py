"""Load the JSON Schemas shipped in ``dpbundle.schemas`` and validate documents against them.

Shared by the bundle writer (which validates every JSON file before writing it) and the audit
(which validates every JSON file it reads). Schemas are JSON Schema 2020-12 files named
``<name>.schema.json``; a ``$ref`` to another schema of the package by file name
(``"$ref": "spec.schema.json"``) resolves to that file, never to the network.

    from dpbundle.release.common.jsonschemas import validate
    validate(manifest, "manifest")          # raises SchemaValidationError naming the JSON path
"""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

__all__ = ["SchemaValidationError", "load_schema", "validate", "validate_file", "iter_errors", "schema_names",
           "validator"]

_PACKAGE = "dpbundle.schemas"
_SUFFIX = ".schema.json"


class SchemaValidationError(ValueError):
    """A document does not match its schema. ``errors`` holds ``(json_path, message)`` pairs."""

    def __init__(self, schema: str, errors: list[tuple[str, str]], document: str | None = None):
        self.schema = schema
        self.errors = errors
        self.document = document
        what = document or f"document ({schema} schema)"
        lines = [f"{what} does not match schema {schema}{_SUFFIX}:"]
        lines += [f"  {path}: {message}" for path, message in errors]
        super().__init__("\n".join(lines))


def _file_name(name: str) -> str:
    name = name.rsplit("/", 1)[-1]
    if name.endswith(_SUFFIX):
        return name
    if name.endswith(".json"):
        name = name[: -len(".json")]
    return name + _SUFFIX


def schema_names() -> list[str]:
    """Names (without ``.schema.json``) of every schema shipped in the package."""
    return sorted(
        p.name[: -len(_SUFFIX)]
        for p in resources.files(_PACKAGE).iterdir()
        if p.name.endswith(_SUFFIX)
    )


@lru_cache(maxsize=None)
def _load_text(file_name: str) -> str:
    path = resources.files(_PACKAGE).joinpath(file_name)
    if not path.is_file():
        raise FileNotFoundError(f"no schema {file_name!r} in {_PACKAGE} (have: {', '.join(schema_names())})")
    return path.read_text(encoding="utf-8")


def load_schema(name: str) -> dict:
    """The schema ``name`` ("manifest", "manifest.schema.json" or "manifest.json") as a dict."""
    return json.loads(_load_text(_file_name(name)))


def _retrieve(uri: str) -> referencing.Resource:
    # Only schemas of this package can be referenced; the last path segment names the file.
    try:
        schema = load_schema(uri)
    except FileNotFoundError as exc:
        raise referencing.exceptions.NoSuchResource(ref=uri) from exc
    return referencing.Resource.from_contents(schema, default_specification=referencing.jsonschema.DRAFT202012)


@lru_cache(maxsize=None)
def _validator(file_name: str) -> jsonschema.protocols.Validator:
    schema = load_schema(file_name)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    registry = referencing.Registry(retrieve=_retrieve)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def validator(name: str) -> jsonschema.protocols.Validator:
    """The cached validator of schema ``name`` (for callers that format errors their own way)."""
    return _validator(_file_name(name))


def _path(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def iter_errors(instance: Any, name: str) -> list[tuple[str, str]]:
    """All ``(json_path, message)`` errors of ``instance`` against schema ``name`` (empty if valid)."""
    validator = _validator(_file_name(name))
    errors = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    out = []
    for error in errors:
        # For anyOf/oneOf failures, the most specific sub-error is the most helpful one.
        best = jsonschema.exceptions.best_match([error]) if error.context else error
        out.append((_path(best), best.message))
    return out


def validate(instance: Any, name: str, *, document: str | None = None) -> None:
    """Raise :class:`SchemaValidationError` (a ``ValueError``) if ``instance`` does not match ``name``.

    ``document`` names the file in the message (e.g. "bundle/manifest.json").
    """
    errors = iter_errors(instance, name)
    if errors:
        raise SchemaValidationError(_file_name(name)[: -len(_SUFFIX)], errors, document)


def validate_file(path, name: str) -> Any:
    """Read the JSON file ``path``, validate it against schema ``name`` and return the document.

    Raises :class:`SchemaValidationError` (also for a file that is not valid JSON, with path ``$``).
    """
    from pathlib import Path

    path = Path(path)
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SchemaValidationError(_file_name(name)[: -len(_SUFFIX)], [("$", f"not valid JSON: {exc}")],
                                    str(path)) from exc
    validate(doc, name, document=str(path))
    return doc
