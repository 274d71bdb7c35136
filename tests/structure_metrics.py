"""Structure metrics of the dpbundle package, measured from its source with ``ast``.

Used by tests/test_structure.py (the acceptance of the layout issue) and runnable on its own:
``python tests/structure_metrics.py`` prints the long functions, the long parameter lists, the
import circles and the raw spec reads.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("release", "audit", "mechanisms", "templates")


def modules() -> dict[str, Path]:
    """Dotted name (``dpbundle.release.cli.main.audit``) -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out["dpbundle." + ".".join(parts)] = p
    return out


def functions(path: Path):
    """(qualified name, first line, length in lines, number of parameters) of every function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = child.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
                if a.args and a.args[0].arg in ("self", "cls"):
                    n -= 1
                yield prefix + child.name, child.lineno, child.end_lineno - child.lineno + 1, n
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")

    yield from walk(tree, "")


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(top_level_only: bool = False) -> dict[str, set[str]]:
    """module -> the package's modules it imports (anywhere in the file, or only at module level)."""
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_pkg = path.name == "__init__.py"
        nodes = tree.body if top_level_only else list(ast.walk(tree))
        for node in nodes:
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for t in targets:
                if t in mods and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    return out


def package_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Circles between modules, ignoring a package's ``__init__`` importing its own members
    (a package re-exporting its modules is not a circle of meaning)."""
    g = {m: {t for t in ts if not (m.startswith(t + ".") )} for m, ts in graph.items()}
    return cycles(g)


def main() -> int:
    long_, many = [], []
    for mod, path in modules().items():
        for name, line, length, n in functions(path):
            if length > 80:
                long_.append((length, f"{path.relative_to(ROOT)}:{line} {name}"))
            if n > 10:
                many.append((n, f"{path.relative_to(ROOT)}:{line} {name}"))
    print("functions over 80 lines:")
    for length, where in sorted(long_, reverse=True):
        print(f"  {length:4d}  {where}")
    print("functions over 10 parameters:")
    for n, where in sorted(many, reverse=True):
        print(f"  {n:4d}  {where}")
    print("import circles:")
    for c in package_cycles(import_graph()):
        print("  " + " <-> ".join(c))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
