"""Old module names of ``dpbundle.release`` (before 0.3 it was one flat folder), kept importable.

``import dpbundle.release.prepare`` still works and gives the module that now lives at
``dpbundle.release.data.prepare`` (the same object, so a ``monkeypatch`` through the old name
patches the new module). Each old name warns once with a ``DeprecationWarning`` naming its new
place. The map is the only list of moves; docs/internals.md shows the layout.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "forward_attributes", "install"]

MOVED: dict[str, str] = {
    "spec_criteria": "spec.criteria_checks", "spec_docs": "spec.explain",
    "spec_yaml": "spec.yaml_text", "spec_noise": "scheme.weak_evidence",
    "csv_read": "data.csv_read", "prepare": "data.prepare", "transform": "data.transform",
    "constraints": "data.constraints", "fingerprint": "data.fingerprint", "example": "data.example",
    "example_persons": "data.example_persons",
    "iteration": "scheme.iteration", "selection": "scheme.selection", "stopping": "scheme.stopping",
    "records": "scheme.records", "budget": "scheme.budget", "space": "scheme.space",
    "ledger": "scheme.ledger", "preregister": "preregistration",
    "datasheet": "bundle.datasheet", "glyphs": "bundle.glyphs",
    "keys": "bundle.keys", "registry_entry": "bundle.registry_entry", "preflight": "bundle.preflight",
    "pending": "bundle.pending",
    "jsonschemas": "common.jsonschemas", "safe_io": "common.safe_io", "filelock": "common.filelock",
    "sweep_exec": "sweep.execute", "sweep_report": "sweep.report", "utility": "sweep.utility",
    "cli_style": "cli.style", "sample_cmd": "cli.sample", "release_cmd": "pipeline",
    "charts": "dpbundle.templates.datasheet.charts",
    "value_noise": "dpbundle.templates.datasheet.value_noise",
}
_PREFIX = "dpbundle.release."


def _target(fullname: str) -> str | None:
    if not fullname.startswith(_PREFIX):
        return None
    new = MOVED.get(fullname[len(_PREFIX):])
    if new is None:
        return None
    return new if new.startswith("dpbundle.") else _PREFIX + new


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:  # the target module is already executed
        return None


class _OldNames(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        new = _target(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} moved to {new}; the old name will be removed in a later version",
                      DeprecationWarning, stacklevel=3)
        return importlib.util.spec_from_loader(fullname, _Alias(new))


def install() -> None:
    """Put the old-name finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _OldNames) for f in sys.meta_path):
        sys.meta_path.append(_OldNames())


def forward_attributes(package: str, module: str):
    """A module ``__getattr__`` for ``package`` (once a module, now a package): a name not found
    in the package is one of its modules not imported yet, or else a name of ``module`` (the old
    module's new home), e.g. ``from dpbundle.release.bundle import write_bundle``."""
    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:  # a module of this package not imported yet
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
        try:
            return getattr(importlib.import_module(f"{package}.{module}"), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__
