"""An output of the earlier layout imported into the walk table once, re-hashing nothing.

Before the walk table, an output held the walk as ``walk.jsonl`` plus a stat cache beside it
(``.bastion/walk-cache``: one ``marshal`` blob of each directory's names and their
``(line, size, mtime_ns, inode, ctime_ns)``, ``size`` -1 for a record that does not depend
only on the stat; format 1 held a dict of such tuples per directory).  On the first walk with
an empty table, :func:`import_walk` reads both, checks that the cache describes that
walk.jsonl and was written with the same settings, and inserts one row per record (its
identity from the cache, its fields from the line) in one transaction; walk.jsonl, unchanged,
is recorded as the table's export, so an extract stage after it still finds nothing to do.
Records of a root whose settings changed, or that the cache does not know, are imported as
not reusable (read again by the next walk).  The cache file is removed after the commit.
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import sys
from array import array
from typing import Any, Iterable, TypeAlias

from ..output.atomic import STATE_DIR, identity as file_identity_in
from ..output.directory import OutputDir
from .table import INSERT, encode, root_settings, set_state, state

__all__ = ["LEGACY_CACHE", "import_walk", "upgrade"]

LEGACY_CACHE = f"{STATE_DIR}/walk-cache"

Key: TypeAlias = "tuple | None"  # (size, mtime_ns, inode, ctime_ns), None: not by the stat alone


def _identities(data: dict, wanted: dict[str, list]) -> dict[tuple[str, str, str], Key]:
    """(root, directory, name) -> identity, for the roots whose settings are ``wanted``'s."""
    out: dict[tuple[str, str, str], Key] = {}
    for root, entry in data["roots"].items():
        if not (isinstance(entry, list) and len(entry) == 2 and wanted.get(root) == entry[0]):
            continue
        for rel, d in entry[1].items():
            if data.get("format") == 2:
                names_s, blob, _others = d
                names = names_s.split("\0") if blob else []
                e = array("q")
                e.frombytes(blob)
                if sys.byteorder == "big":
                    e.byteswap()
                for k, name in enumerate(names):
                    size, mtime, ino, ctime = e[5 * k + 1:5 * k + 5]
                    out[(root, rel, name)] = None if size < 0 else (size, mtime, ino, ctime)
            else:  # format 1
                for name, t in d.items():
                    out[(root, rel, name)] = None if t[1] < 0 else tuple(t[1:5])
    return out


def import_walk(od: OutputDir, db: sqlite3.Connection, settings: list,
                roots: dict[str, list]) -> int | None:
    """Import the earlier layout's walk into the (empty) table when there is one that holds
    (see the module); how many rows, or None when there was nothing to import.  ``roots``:
    each root's settings as the earlier cache listed them."""
    try:
        data: Any = marshal.loads(od.read(LEGACY_CACHE))  # through the checked descriptor
        st = od.stat("walk.jsonl")
        ok = (isinstance(data, dict) and data.get("settings") == settings
              and data.get("walk") == [st.st_size, st.st_mtime_ns])
        known = _identities(data, roots) if ok else None
    except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError):
        known = None
    if known is None:
        od.unlink(LEGACY_CACHE)
        return None
    identity = file_identity_in(od, "walk.jsonl")
    try:
        n = _insert(db, od, known, identity, settings, roots)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        n = None  # a walk.jsonl that is not one (rolled back): the next walk reads everything
    od.unlink(LEGACY_CACHE)
    return n


def _insert(db: sqlite3.Connection, od: OutputDir, known: dict, identity: list[int] | None,
            settings: list, roots: dict[str, list]) -> int:
    """The rows of walk.jsonl inserted, in one transaction; how many."""
    n = 0
    with db:
        db.execute("BEGIN IMMEDIATE")
        batch = []
        with od.open_read("walk.jsonl") as f:
            for line in f:
                d = json.loads(line)
                root, path = d["root"], d["path"]
                rel, _, name = path.rpartition("/")
                key = known.get((root, rel, name))
                if key is not None and d["kind"] == "file" and not d["error"] and \
                        (d["size"], d["mtime_ns"], d["inode"]) == key[:3]:
                    ctime, stat_only = key[3], 1
                else:
                    ctime, stat_only = None, 0
                batch.append((root, encode(rel), encode(name), encode(path), d["kind"],
                              d["size"], d["mtime_ns"], ctime, d["inode"], None, d["sha256"],
                              d["reason"], d["mime"], d["error"], stat_only, 1))
                n += 1
                if len(batch) >= 5000:
                    db.executemany(INSERT, batch)
                    batch = []
        db.executemany(INSERT, batch)
        set_state(db, "settings", settings)
        db.executemany("INSERT OR REPLACE INTO walk_roots VALUES (?, ?)",
                       [(name, json.dumps(rs)) for name, rs in roots.items()])
        set_state(db, "gen", 1)
        set_state(db, "count", n)
        set_state(db, "export", [1, identity])
    return n


def upgrade(od: OutputDir, db: sqlite3.Connection, settings: list, roots: Iterable[Any]) -> None:
    """Before a walk: the earlier layout's walk imported when the table never held one; a
    cache left by a run killed after its import removed."""
    try:
        od.stat(LEGACY_CACHE)
    except OSError:
        return
    if state(db, "gen") is None:
        import_walk(od, db, settings, {r.name: json.loads(root_settings(r)) for r in roots})
    else:
        od.unlink(LEGACY_CACHE)
