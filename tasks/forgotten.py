"""The extract tasks forgotten with ``doit forget``: a list beside doit's database.

doit forgets a task by dropping its entry from its database; bastion decides up to date from
its own store, so the backend (:mod:`bastion.tasks.doitdb`) also records the name here, and the next
run's plan treats those files as not extracted.  The list is trimmed as they are redone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Container, Iterable

from .output.atomic import STATE_DIR
from .output.directory import OutputDir

FORGOTTEN = "forgotten.json"
ALL = "*"  # every extract task (doit forget --all)


def forgotten(state_dir: Path) -> set[str]:
    """The task names forgotten since they last ran (``{"*"}``: every extract task)."""
    try:
        names = json.loads((state_dir / FORGOTTEN).read_text(encoding="utf-8",
                                                             errors="surrogateescape"))
    except (OSError, ValueError):
        return set()
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def set_forgotten(od: OutputDir, names: set[str]) -> None:
    rel = f"{STATE_DIR}/{FORGOTTEN}"
    if names:
        od.write_json(rel, sorted(names))
    else:
        od.unlink(rel)


def trim_forgotten(od: OutputDir, names: set[str], items: Iterable[Any],
                   made: Callable[[list[str]], Container[tuple[str, str]]]) -> None:
    """Drop from the list the tasks this run extracted again (``ALL`` becomes the names of
    the files it did not reach).  ``items``: the plan's, streamed; ``made`` gives the
    (sha256, key) pairs of some sha256s whose verdicts this run made (the store's)."""
    from .names import task_name

    every = ALL in names
    left = set() if every else set(names)
    chunk: list[Any] = []

    def sort(chunk: list[Any]) -> None:
        new = made(sorted({i.sha256 for i in chunk}))
        for i in chunk:
            name = f"extract:{task_name(i.root, i.path)}"
            if (i.sha256, i.key) in new:
                left.discard(name)
            elif every:
                left.add(name)

    for item in items:
        chunk.append(item)
        if len(chunk) >= 2000:
            sort(chunk)
            chunk = []
    sort(chunk)
    set_forgotten(od, left)
