"""No import circle among bastion's modules (``readers/`` and ``tasks/``).

The graph is read from the source (``ast``), with every import statement: at module level,
inside functions (a lazy import still ties the two modules together) and under
``TYPE_CHECKING``.  An edge goes to a project module only; ``from . import name`` counts when
``name`` is a module of the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# each package by its import name, and the directory it is in (bastion.readers is readers/)
PACKAGES = {"bastion": "bastion", "bastion.readers": "readers", "bastion.tasks": "tasks"}


def project_modules() -> dict[str, Path]:
    mods = {}
    for pkg, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join((pkg, *parts))] = path
    return mods


def imports_of(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The project modules that module ``name`` (at ``path``) imports, anywhere in it."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                for i in range(len(parts), 0, -1):  # import a.b.c: the deepest project module
                    if ".".join(parts[:i]) in mods:
                        found.add(".".join(parts[:i]))
                        break
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # from pkg import module
                sub = f"{target}.{alias.name}"
                if sub in mods:
                    found.add(sub)
            if target in mods and not all(f"{target}.{a.name}" in mods for a in node.names):
                found.add(target)
    found.discard(name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def registry_modules(path: Path) -> set[str]:
    """The reader modules the registry imports by name (``MODULES`` in readers/dispatch.py, a
    dict literal whose values are module names): edges the import statements do not show."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "MODULES" and isinstance(node.value, ast.Dict)):
            return {f"bastion.readers.{v.value}" for v in node.value.values
                    if isinstance(v, ast.Constant)}
    raise AssertionError("readers/dispatch.py has no MODULES literal")


def import_graph() -> dict[str, set[str]]:
    mods = project_modules()
    graph = {name: imports_of(name, path, mods) for name, path in mods.items()}
    graph["bastion.readers.dispatch"] |= registry_modules(mods["bastion.readers.dispatch"])
    return graph


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    """The reader of the graph itself: edges the project is known to have."""
    graph = import_graph()
    assert "bastion.readers.pdf.reader" in graph["bastion.readers.dispatch"]  # MODULES: "pdf": "pdf.reader"
    assert "bastion.readers.text.plaintext" in graph["bastion.readers.dispatch"]  # "text": "text.plaintext"
    assert "bastion.readers.containers.nested" in graph["bastion.readers.dispatch"]  # inside a function
    assert "bastion.readers.base" in graph["bastion.readers.dispatch"]  # from .base import ...
    assert "bastion.readers.runtime.context" in graph["bastion.readers.runtime.workermain"]  # inside a function
    assert "bastion.readers.runtime.pool" in graph["bastion.tasks.extract.session"]  # absolute: from bastion.readers.runtime.pool import ...


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_among_the_project_modules() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)
