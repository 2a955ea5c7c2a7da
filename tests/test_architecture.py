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


# -- the document's "only" claims ------------------------------------------------------------------

CODE = ("readers", "tasks", "bastion")
PROCESS_STARTERS = {"readers/runtime/procs.py", "readers/runtime/zygote.py",
                    "tasks/cluster/local.py"}
_OS_STARTS = {"fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen", "execv",
              "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
              "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"}
_SUBPROCESS_STARTS = {"Popen", "run", "call", "check_call", "check_output", "getoutput",
                      "getstatusoutput"}


def code_files() -> list[Path]:
    found = sorted(p for folder in CODE for p in (ROOT / folder).rglob("*.py"))
    return found + [ROOT / "dodo.py"]


def process_starts(tree: ast.AST) -> list[str]:
    """The process starts in a module: calls of os.fork, os.exec*, os.spawn*, os.system,
    subprocess's functions (also imported by name), any use of multiprocessing or pty."""
    found: list[str] = []
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os"):
            imported |= {a.asname or a.name for a in node.names
                         if a.name in _SUBPROCESS_STARTS | _OS_STARTS}
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) \
                else [node.module or ""]
            found += [f"import {n}" for n in names if n.split(".")[0] in ("multiprocessing",
                                                                          "pty")]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                f.value.id == "os" and f.attr in _OS_STARTS
                or f.value.id == "subprocess" and f.attr in _SUBPROCESS_STARTS):
            found.append(f"{f.value.id}.{f.attr}")
        elif isinstance(f, ast.Name) and f.id in imported:
            found.append(f.id)
    return found


def test_only_the_named_modules_start_processes() -> None:
    starters = {p.relative_to(ROOT).as_posix() for p in code_files()
                if process_starts(ast.parse(p.read_text(encoding="utf-8")))}
    assert starters == PROCESS_STARTERS
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    said = page[page.index("`readers/runtime/procs.py` starts every program bastion runs"):]
    said = said[:said.index("checks it)")]
    assert all(f"`{m}`" in said for m in PROCESS_STARTERS), said


def test_the_process_start_check_sees_a_start() -> None:
    tree = ast.parse("import os, subprocess\nfrom subprocess import run as r\n"
                     "os.fork()\nsubprocess.Popen(['x'])\nr(['y'])\nsubprocess.PIPE\n")
    assert process_starts(tree) == ["os.fork", "subprocess.Popen", "r"]


_EMPTY_CALLS = {"dict", "list", "set", "WeakSet", "WeakValueDictionary", "WeakKeyDictionary",
                "deque", "OrderedDict", "defaultdict", "Lock", "RLock"}


def module_state(tree: ast.Module) -> tuple[set[str], set[str]]:
    """A module's state: the globals its functions rebind (``global``) or that start empty
    and are filled (an empty container, a lock); and its memoised functions."""
    state: set[str] = set()
    memoised: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            state |= set(node.names)
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        empty = (isinstance(value, (ast.Dict, ast.List, ast.Set)) and not any(
            getattr(value, f, None) for f in ("keys", "elts"))) or (
            isinstance(value, ast.Call) and not value.args and not value.keywords and (
                getattr(value.func, "attr", None) or getattr(value.func, "id", None))
            in _EMPTY_CALLS)
        if empty:
            state |= {t.id for t in targets if isinstance(t, ast.Name)}
        if isinstance(node, ast.FunctionDef) and any(
                "cache" in ast.unparse(d) for d in node.decorator_list):
            memoised.add(node.name)
    return state, memoised


def test_the_module_globals_are_the_ones_the_document_lists() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    listed = {(m, n.strip("` ")) for m, names in re.findall(r"^\| `([\w/]+\.py):(.*?) \|",
                                                            page, re.M)
              for n in re.findall(r"`?(\w+)`?", names.split("|")[0]) if n}
    found: set[tuple[str, str]] = set()
    for p in code_files():
        rel = p.relative_to(ROOT).as_posix()
        state, memoised = module_state(ast.parse(p.read_text(encoding="utf-8")))
        found |= {(rel, n) for n in state}
        if not (rel.startswith("readers/") or rel == "tasks/walk/globs.py"):
            found |= {(rel, n) for n in memoised}  # (those are pure: the document says so)
    assert found == listed, (f"not in docs/architecture.md: {sorted(found - listed)}; "
                             f"listed, not found: {sorted(listed - found)}")
