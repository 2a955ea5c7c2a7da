"""The walk's stat cache: the previous walk's records by root, directory and name.

``.bastion/walk-cache`` is one ``marshal`` blob written beside every ``walk.jsonl``::

    {"settings": [WALK_VERSION, max_file_bytes, no_hash],
     "walk": [size, mtime_ns] of the walk.jsonl it describes,
     "count": how many records that walk.jsonl holds,
     "roots": {root name: [root settings, {directory: {name: entry}}]}}

where a directory is its POSIX path relative to the root (``""`` for the root) and a name a
``str`` (a name that is not UTF-8 holds surrogate escapes, which marshal keeps).  An entry is

    (line, size, mtime_ns, inode, ctime_ns)          a record that depends only on the stat
    (line, -1, 0, 0, 0, record line)                 any other record: made again, compared

with ``line`` the record's line number in that walk.jsonl.  A cache whose settings differ, or
whose walk.jsonl is not the file on disk, is not used; a root whose settings (path, patterns,
symlink and device options) changed gets no entries.  The format has not changed since
``WALK_VERSION`` 3, which therefore also versions it.
"""

from __future__ import annotations

import marshal
from array import array
from pathlib import Path
from typing import Iterable

from .fsio import STATE_DIR, atomic_write, makedirs, open_read, read_bytes
from .fsio import stat as out_stat

CACHE_NAME = f"{STATE_DIR}/walk-cache"

Key = tuple[int, int, int, int]  # (size, mtime_ns, inode, ctime_ns)
DirCache = dict[str, tuple]  # one directory's entries by name
EMPTY: DirCache = {}
# One record of the walk being written: (root, path, directory, name, line, key when the
# record depends only on the stat)
Row = tuple[str, str, str, str, bytes, "Key | None"]


def root_settings(root) -> list:  # root: bastion.tasks.manifest.Root
    """What a root's cached records depend on besides each file's stat."""
    return [str(root.path), list(root.include), list(root.exclude), root.follow_symlinks,
            root.one_file_system]


class StatCache:
    """The previous walk's records, as the cache file holds them (see the module's doc)."""

    __slots__ = ("roots", "count")

    def __init__(self, roots: dict[str, dict[str, DirCache]] | None = None,
                 count: int = -1) -> None:
        self.roots = roots if roots is not None else {}  # root name -> directory -> name
        self.count = count  # records in the previous walk.jsonl; -1: no usable cache

    @classmethod
    def load(cls, out: Path, settings: list, roots: Iterable) -> "StatCache":
        """The cache under ``out`` when it describes the walk.jsonl there and was written
        with ``settings``; an empty one otherwise.  ``roots`` are the manifest's."""
        try:
            # through the output's checked descriptor: marshal is no parser for hostile data
            data = marshal.loads(read_bytes(out / CACHE_NAME))  # not marshal.load(f): 8x slower
            if not isinstance(data, dict) or data.get("settings") != settings:
                return cls()
            st = out_stat(out / "walk.jsonl")
            if data.get("walk") != [st.st_size, st.st_mtime_ns]:
                return cls()  # walk.jsonl is not the file the line numbers refer to
            cached = data["roots"]
            count = data["count"]
            if not isinstance(cached, dict) or not isinstance(count, int):
                return cls()
            kept = {}
            for root in roots:
                entry = cached.get(root.name)
                if (isinstance(entry, list) and len(entry) == 2
                        and entry[0] == root_settings(root)):
                    kept[root.name] = entry[1]
            return cls(kept, count)
        except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError):
            return cls()

    def root(self, name: str) -> dict[str, DirCache]:
        """One root's directories (empty when the root is not cached)."""
        return self.roots.get(name, {})

    def found(self, lines: Iterable[int], walk_jsonl: Path) -> list[Row]:
        """The rows of the previous records at ``lines`` (those this walk found unchanged),
        their bytes read from the previous ``walk_jsonl``."""
        lines = lines if isinstance(lines, (list, array)) else list(lines)
        order = sorted(range(len(lines)), key=lines.__getitem__)  # where each line goes
        where: dict[int, tuple[str, str, str, tuple]] = {}
        for root_name, dirs in self.roots.items():
            for rel, dc in dirs.items():
                for name, c in dc.items():
                    where[c[0]] = (root_name, rel, name, c)
        rows: list[Row] = [None] * len(lines)  # type: ignore[list-item]
        at = 0
        # the previous lines read in one pass, only those asked for (not the whole file held
        # and split); through the output's checked descriptor, as read_bytes does
        with open_read(walk_jsonl) as f:
            for n, line in enumerate(f):
                if at == len(order):
                    break
                if n != lines[order[at]]:
                    continue
                root_name, rel, name, c = where[n]
                relpath = f"{rel}/{name}" if rel else name
                row = (root_name, relpath, rel, name, line, c[1:5] if len(c) == 5 else None)
                while at < len(order) and lines[order[at]] == n:
                    rows[order[at]] = row
                    at += 1
        if at != len(order):
            raise ValueError(f"{walk_jsonl} is shorter than its stat cache says")
        return rows

    @staticmethod
    def write(out: Path, settings: list, roots: Iterable, rows: list[Row]) -> None:
        """Write the cache of the walk.jsonl just written from ``rows`` (in its order)."""
        by_root: dict[str, list] = {r.name: [root_settings(r), {}] for r in roots}
        for i, (root_name, _, rel, name, line, key) in enumerate(rows):
            dirs = by_root[root_name][1]
            dc = dirs.get(rel)
            if dc is None:
                dc = dirs[rel] = {}
            dc[name] = (i, *key) if key is not None else (i, -1, 0, 0, 0, line)
        st = out_stat(out / "walk.jsonl")
        cache = {"settings": settings, "walk": [st.st_size, st.st_mtime_ns],
                 "roots": by_root, "count": len(rows)}
        makedirs(out / STATE_DIR)
        atomic_write(out / CACHE_NAME, marshal.dumps(cache))
