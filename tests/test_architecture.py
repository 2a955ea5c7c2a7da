"""docs/architecture.md names every module under ``readers/`` and ``tasks/``, and every
subpackage's ``__init__.py`` names its modules: the map a newcomer reads matches the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("readers", "tasks")


def modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")
                  if p.name != "__init__.py")


def test_the_architecture_page_names_every_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    found = modules()
    assert len(found) > 60, found  # the tree was found
    missing = [p.relative_to(ROOT).as_posix() for p in found
               if f"`{p.relative_to(ROOT).as_posix()}`" not in page]
    assert missing == [], f"docs/architecture.md does not name: {', '.join(missing)}"


def test_each_subpackage_names_its_modules() -> None:
    for init in sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        named = set(re.findall(r"^- ``(\w+)``", doc, re.M))
        present = {p.stem for p in init.parent.glob("*.py") if p.name != "__init__.py"}
        assert named == present, f"{init.relative_to(ROOT)}: names {sorted(named)}, holds {sorted(present)}"


def test_each_top_level_holds_at_most_fifteen_modules() -> None:
    for folder in FOLDERS:
        top = [p for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py"]
        assert len(top) <= 15, f"{folder}/: {len(top)} modules at the top"
