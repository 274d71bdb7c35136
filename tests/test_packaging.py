"""Packaging: metadata in the forms current tools accept, no POSIX-only imports, and runtime
dependencies that the package itself uses (not only the tests)."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIRS = ("release", "audit", "mechanisms")
POSIX_ONLY = {"fcntl", "termios", "pwd", "grp", "resource", "posix", "tty", "pty"}
# distribution name -> import name, where they differ
IMPORT_NAME = {"pyyaml": "yaml", "weasyprint": "weasyprint"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))


def _package_files() -> list[Path]:
    return [p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")]


def _module_level_imports(path: Path) -> set[str]:
    """Top-level module names imported at module level (not inside functions or try/except
    blocks that handle a missing module)."""
    tree = ast.parse(path.read_text("utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text("utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_license_is_an_spdx_string_with_a_license_file():
    project = _pyproject()["project"]
    assert isinstance(project["license"], str), "project.license must be an SPDX string"
    assert re.fullmatch(r"[A-Za-z0-9.\-+]+( (AND|OR|WITH) [A-Za-z0-9.\-+]+)*", project["license"])
    for name in project["license-files"]:
        text = (ROOT / name).read_text("utf-8")
        assert "Apache License" in text and "Version 2.0" in text


def test_every_package_directory_is_declared():
    """setuptools warns about (and may drop) a folder that is importable (holds modules) or
    whose files a package-data pattern ships, unless it is declared in ``packages``."""
    tool = _pyproject()["tool"]["setuptools"]
    declared, dirs = set(tool["packages"]), tool["package-dir"]
    data = tool.get("package-data", {})
    for pkg, folder in dirs.items():
        base = ROOT / folder
        for sub in base.rglob("*"):
            if not sub.is_dir() or "__pycache__" in sub.parts or str(sub) in {str(ROOT / d) for d in dirs.values()}:
                continue
            rel = sub.relative_to(base).as_posix()
            has_modules = any(sub.glob("*.py"))
            shipped = any(pattern.startswith(rel + "/") for pattern in data.get(pkg, []))
            name = ".".join((pkg, *rel.split("/")))
            if has_modules or shipped:
                assert name in declared, f"{sub} is importable as {name} but not declared"


def test_no_posix_only_module_at_module_level():
    """A command must import on Windows too: POSIX-only modules only inside guarded code."""
    offenders = {
        str(p.relative_to(ROOT)): sorted(_module_level_imports(p) & POSIX_ONLY)
        for p in _package_files()
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_runtime_dependencies_are_used_by_the_package():
    """A dependency that only the tests use belongs in the ``test`` extra."""
    used: set[str] = set()
    for p in _package_files():
        used |= _all_imports(p)
    for req in _pyproject()["project"]["dependencies"]:
        dist = re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower()
        assert IMPORT_NAME.get(dist, dist.replace("-", "_")) in used, (
            f"runtime dependency {dist!r} is not imported by the package")


@pytest.mark.slow
def test_wheel_builds_without_warnings(tmp_path):
    """``pip wheel -v .`` prints no setuptools warning (deprecated license table, undeclared
    packages) and the wheel carries the license and the package data."""
    import shutil

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, src / name)
    for folder in set(_pyproject()["tool"]["setuptools"]["package-dir"].values()):
        top = folder.split("/")[0]
        if not (src / top).exists():
            shutil.copytree(ROOT / top, src / top, ignore=shutil.ignore_patterns("__pycache__"))
    wheel_dir = tmp_path / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(wheel_dir), str(src)],
        capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0 and ("No matching distribution" in proc.stderr
                                 or "Could not find a version" in proc.stderr):
        pytest.skip("no package index reachable to fetch the build backend")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout + proc.stderr
    bad = [line for line in out.splitlines()
           if re.search(r"(Deprecat\w*Warning|_Warning|SetuptoolsWarning|is absent from the)", line)]
    assert bad == []
    import zipfile
    (wheel,) = wheel_dir.glob("dpbundle-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith("/licenses/LICENSE") for n in names)
    assert "dpbundle/release/data/births_example_model.json" in names
    assert any(n.startswith("dpbundle/schemas/") and n.endswith(".json") for n in names)


SCHEMA_BASE = "https://dpbundle.invalid/schemas/"


def test_every_json_schema_id_uses_the_documented_base():
    """One base URI for every ``$id`` (docs/internals.md explains it: an identifier under the
    reserved .invalid domain, never fetched), ending in the schema's own file name."""
    import json

    for path in sorted((ROOT / "schemas").glob("*.schema.json")):
        assert json.loads(path.read_text("utf-8"))["$id"] == SCHEMA_BASE + path.name
    assert SCHEMA_BASE in (ROOT / "docs" / "internals.md").read_text("utf-8")
