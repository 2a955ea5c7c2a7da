"""No class in ``readers/`` or ``tasks/`` is longer than 250 lines (issue #24: each unit one
concept, small enough for a newcomer to read alone).

The lengths are read from the source (``ast``): a class runs from its ``class`` line (its
decorators not counted) to its last line, ``end_lineno - lineno + 1``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("readers", "tasks")
MAX_CLASS_LINES = 250


def class_lengths(source: str, filename: str = "<source>") -> list[tuple[str, int]]:
    """(qualified name, lines) of every class in ``source``, nested ones too."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                found.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, filename), "")
    return found


def test_class_lengths_are_read_from_the_source() -> None:
    """The reader of the lengths itself: a class's own lines, nested classes named."""
    source = "x = 1\n\n@decorated\nclass A:\n    class B:\n        pass\n\n    y = 2\n"
    assert class_lengths(source) == [("A", 5), ("A.B", 2)]
    assert class_lengths("def f():\n    class C:\n        pass\n") == [("C", 2)]


def test_no_class_is_longer_than_250_lines() -> None:
    modules = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))
    assert len(modules) > 20, modules  # the folders were found
    offenders = [
        f"{path.relative_to(ROOT)} {name}: {lines} lines"
        for path in modules
        for name, lines in class_lengths(path.read_text(encoding="utf-8"), str(path))
        if lines > MAX_CLASS_LINES
    ]
    assert offenders == [], (f"classes longer than {MAX_CLASS_LINES} lines: "
                             + "; ".join(offenders))
