"""The package's structure holds (issue 23): no import circle, the layers' dependency direction
(docs/internals.md, "The layers"), short functions, short parameter lists, the spec read only
through its typed model, and the audit independent of the release.

Measured from the source with ``ast`` (tests/structure_metrics.py); each test names the offenders.
"""
from __future__ import annotations

import ast

import pytest

from structure_metrics import ROOT, functions, import_graph, modules, package_cycles

#: The layers of dpbundle.release, lowest first: a module may import only its own layer or lower.
LAYERS = [
    ("dpbundle.release.errors", "dpbundle.release.common", "dpbundle.release._compat"),
    ("dpbundle.release.spec",),
    ("dpbundle.release.data",),
    ("dpbundle.release.scheme",),
    ("dpbundle.release.bundle",),
    ("dpbundle.release.pipeline", "dpbundle.release.sweep", "dpbundle.release.preregistration"),
    ("dpbundle.release.api", "dpbundle.release.selftest"),
    ("dpbundle.release.cli",),
]


def _layer(module: str) -> int | None:
    for rank, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_no_import_circle_anywhere():
    assert package_cycles(import_graph()) == []


def test_the_finder_sees_a_circle():
    """The circle test can fail: a made-up graph with a circle is reported."""
    from structure_metrics import cycles

    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_release_layers_point_down():
    wrong = []
    for mod, targets in import_graph().items():
        lm = _layer(mod)
        if lm is None:
            continue
        for t in targets:
            lt = _layer(t)
            if lt is not None and lt > lm:
                wrong.append(f"{mod} -> {t}")
    assert wrong == []


@pytest.mark.parametrize("package, forbidden", [
    ("dpbundle.audit", "dpbundle.release"),
    ("dpbundle.mechanisms", "dpbundle.release"),
    ("dpbundle.mechanisms", "dpbundle.audit"),
    ("dpbundle.templates", "dpbundle.release"),
])
def test_independent_packages(package, forbidden):
    bad = [f"{m} -> {t}" for m, ts in import_graph().items() if m.startswith(package)
           for t in ts if t.startswith(forbidden)]
    assert bad == []


def _is_cli(path, name: str) -> bool:
    """A Typer command body (its options are its parameters)."""
    return name.split(".")[-1].startswith("cli_") or name in ("_main",)


def test_at_most_three_long_functions_and_none_in_release():
    long_ = [(length, f"{p.relative_to(ROOT)}:{line} {name}") for p in modules().values()
             for name, line, length, _ in functions(p) if length > 80]
    assert len(long_) <= 3, sorted(long_, reverse=True)
    assert [w for _, w in long_ if w.startswith("release/")] == []


def test_no_long_parameter_list_outside_the_cli():
    many = [f"{p.relative_to(ROOT)}:{line} {name} ({n})" for p in modules().values()
            for name, line, _, n in functions(p) if n > 10 and not _is_cli(p, name)]
    assert many == []


def test_only_the_spec_package_reads_the_raw_spec():
    readers = []
    for mod, path in modules().items():
        if not mod.startswith("dpbundle.release.") or mod.startswith("dpbundle.release.spec"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "raw":
                readers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert readers == []


def test_old_module_names_still_import():
    """The compatibility layer: a moved module under its old name is the same module object."""
    import importlib
    import warnings

    from dpbundle.release._compat import MOVED

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for old, new in MOVED.items():
            target = new if new.startswith("dpbundle.") else f"dpbundle.release.{new}"
            assert importlib.import_module(f"dpbundle.release.{old}") is importlib.import_module(target)
