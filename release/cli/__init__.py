"""The ``dpbundle`` command line: ``main`` (the root app and its commands), ``common`` (exit codes,
input errors, spec loading for commands), ``style`` (help layout) and one module per command."""
from dpbundle.release.cli.main import app, main

__all__ = ["app", "main"]
