"""The walk's rows in the output's database: the previous walk's records by directory, and a
walk's changes committed in batches.

Each walked file has one row of the ``walk`` table (tasks/database.py): its record's fields,
its identity ``(size, mtime_ns, inode, ctime_ns)`` (and device), ``stat_only`` (the record
depends only on that identity: a re-walk that finds it equal keeps the row without reading the
file) and ``gen``, the walk that made the row.  "Unchanged since the last walk" is one indexed
query per directory (:meth:`WalkTable.previous`, of ``walk_dirs``: below).  A walk's new and changed rows, and the rows
of the files gone, are committed every :data:`BATCH_ROWS` rows, one transaction each, so a
``kill -9`` loses no file already read; the first commit of a walk moves the generation on,
which marks ``walk.jsonl`` as no longer the export of the table (it is then written in full).

Each batch also logs the keys it added, changed or removed in ``walk_log``, with the
generation, in the same transaction: "what changed since generation G" is then a query (the
extract stage's, :mod:`bastion.tasks.extract.table`).  The log holds every change of the
generations after ``walk_state.log_base``; a walk that changes too much for the log to be worth
keeping (a first walk, settings changed, more than :func:`log_limit` keys) empties it and moves
``log_base`` to its own generation (an extract stage behind it then plans in full).

A re-walk reads a directory's previous rows from ``walk_dirs``, one row per directory holding
them marshal'd (what :meth:`WalkTable.previous` returns, loaded in C instead of a Python
object made per fetched row): the transaction that changes any of a directory's rows removes
its ``walk_dirs`` row, and the end of the walk makes the rows of the directories changed or
missing again from ``walk``, so the two never disagree in a committed state (``walk_state.dirs``
is the generation they agree at; a writer that does not know ``walk_dirs`` moves the
generation without it, and the next walk then drops them all).

Rows whose settings no longer hold are dropped when the walk starts: all of them when the walk's
settings (its version, ``max_file_bytes``, ``--no-hash``) changed, a root's when that root's
(path, patterns, link and device options) did.
"""

from __future__ import annotations

import json
import marshal
import os
import sqlite3
from typing import Any, Callable, Iterable

from ..output.modes import OutputError
from .. import runs

__all__ = ["BATCH_ROWS", "ExportKeys", "Row", "WalkTable", "decode", "encode", "root_settings"]

BATCH_ROWS = 5000  # rows written per transaction
REMOVED_KEPT = 200_000  # keys of removed rows held for the export's splice, at most
LOG_MIN = 10_000  # keys the change log holds in any output, at least


def log_limit(count: int) -> int:
    """The most keys ``walk_log`` holds for a table of ``count`` rows."""
    return max(LOG_MIN, count // 10)

# One row as inserted: (root, dir, name, path, kind, size, mtime_ns, ctime_ns, inode,
# device, sha256, reason, mime, error, stat_only, gen)
Row = tuple
Previous = dict  # name -> (name, size, mtime_ns, inode, ctime_ns, stat_only)

COLUMNS = ("root, dir, name, path, kind, size, mtime_ns, ctime_ns, inode, device, sha256, "
           "reason, mime, error, stat_only, gen")
INSERT = f"INSERT OR REPLACE INTO walk ({COLUMNS}) VALUES ({','.join('?' * 16)})"


def encode(s: str) -> bytes:
    """A path (or name) as the table holds it: UTF-8, surrogate escapes kept (order-keeping)."""
    return s.encode("utf-8", "surrogatepass")


def decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def root_settings(root: Any) -> str:  # root: bastion.tasks.manifest.Root
    """What a root's rows depend on besides each file's stat, as stored."""
    return json.dumps([str(root.path), list(root.include), list(root.exclude),
                       root.follow_symlinks, root.one_file_system])


def state(db: sqlite3.Connection, name: str) -> Any:
    row = db.execute("SELECT value FROM walk_state WHERE name = ?", (name,)).fetchone()
    return None if row is None else json.loads(row[0])


def set_state(db: sqlite3.Connection, name: str, value: Any) -> None:
    db.execute("INSERT OR REPLACE INTO walk_state VALUES (?, ?)", (name, json.dumps(value)))


class _Connection:
    """The database, connected by the process that uses it: a forked helper opens its own
    (a connection never crosses a fork)."""

    __slots__ = ("connect", "db", "pid")

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self.connect = connect
        self.db: sqlite3.Connection | None = None
        self.pid = os.getpid()

    def get(self) -> sqlite3.Connection:
        if self.db is None or self.pid != os.getpid():
            self.db = self.connect()  # (in a forked helper: its own connection)
            self.pid = os.getpid()
        return self.db

    def close(self) -> None:
        if self.db is not None and self.pid == os.getpid():
            self.db.close()
        self.db = None


class ExportKeys:
    """The keys ``(root, path)`` a walk changed, for the export's splice
    (:mod:`bastion.tasks.walk.export`): of every row it removed or replaced (in the previous
    walk's export), and of every row it made; each None once it holds more than
    :data:`REMOVED_KEPT`."""

    __slots__ = ("removed", "made")

    def __init__(self) -> None:
        self.removed: list[tuple[str, str]] | None = []
        self.made: list[tuple[str, str]] | None = []

    def add_removed(self, root: str, path: str) -> None:
        if self.removed is not None:
            self.removed.append((root, path))
            if len(self.removed) > REMOVED_KEPT:
                self.removed = None

    def add_made(self, root: str, path: str) -> None:
        if self.made is not None:
            self.made.append((root, path))
            if len(self.made) > REMOVED_KEPT:
                self.made = None


class WalkTable:
    """One walk's view of the ``walk`` table (see the module): the previous rows by
    directory, and the changes written.  ``connect`` opens the database (again in a forked
    helper: a connection never crosses a fork)."""

    def __init__(self, connect: Any, settings: list, roots: Iterable[Any],
                 upgrade: Callable[[sqlite3.Connection], Any] | None = None) -> None:
        roots = list(roots)
        self._connection = _Connection(connect)
        self.roots = {r.name: root_settings(r) for r in roots}
        self.rows: list[Row] = []  # to insert at the next flush
        self.gone: list[tuple[str, bytes, bytes]] = []  # (root, dir, name) to delete
        self.keys = ExportKeys()  # of the rows this walk removed, replaced and made
        self.written = False  # a batch was committed: the export no longer matches
        self.reset = False  # rows were dropped wholesale (settings): written in full
        self.added = self.deleted = 0  # rows added (not replacing one), rows removed
        # (root, dir) whose walk_dirs row is to be made again at the end of the walk
        self.stale: set[tuple[str, bytes]] = set()
        db = self.db
        try:
            if upgrade is not None:  # an output of the earlier layout (tasks/walk/upgrade.py)
                upgrade(db)
            self.gen = (state(db, "gen") or 0) + 1
            self.count_before = state(db, "count") or 0
            self.export = state(db, "export")  # [gen, identity of walk.jsonl] or None
            self.log = ChangeLog(db, self.gen, self.count_before)
            if state(db, "dirs") != state(db, "gen"):  # walk_dirs not made from these rows
                with db:
                    db.execute("BEGIN IMMEDIATE")
                    db.execute("DELETE FROM walk_dirs")
                    set_state(db, "dirs", state(db, "gen"))
            stale = [name for name, s in db.execute("SELECT root, settings FROM walk_roots")
                     if name in self.roots and s != self.roots[name]]
            if state(db, "settings") not in (None, settings):
                self._drop("DELETE FROM walk", "DELETE FROM walk_dirs", ())
                stale = []
            for name in stale:
                self._drop("DELETE FROM walk WHERE root = ?",
                           "DELETE FROM walk_dirs WHERE root = ?", (name,))
            with db:
                db.execute("BEGIN IMMEDIATE")
                set_state(db, "settings", settings)
                db.executemany("INSERT OR REPLACE INTO walk_roots VALUES (?, ?)",
                               self.roots.items())
        except sqlite3.Error as e:
            raise OutputError(f"cannot read the walk from the database: {e}") from None

    @property
    def db(self) -> sqlite3.Connection:
        return self._connection.get()

    @property
    def prev_gen(self) -> int:
        """The previous walk's generation."""
        return self.gen - 1

    def _drop(self, sql: str, dirs_sql: str, args: tuple) -> None:
        """Rows whose settings changed, dropped before the walk (nothing of them is reused)."""
        db = self.db
        with db:
            db.execute("BEGIN IMMEDIATE")
            n = db.execute(sql, args).rowcount
            db.execute(dirs_sql, args)
            self._begin_gen(db)
            self.log.reset(db)
            self.count_before -= n
            set_state(db, "count", self.count_before)  # in the same transaction: exact
        self.reset = True

    def _begin_gen(self, db: sqlite3.Connection) -> None:
        if not self.written:
            set_state(db, "gen", self.gen)  # the export is now older than the table
            set_state(db, "dirs", self.gen)  # walk_dirs kept with the rows (the module)
            self.written = True

    # -- reading -------------------------------------------------------------------------

    def previous(self, root: str, rel: str) -> Previous:
        """The rows of one directory as the previous walk left them, by name: each
        ``(None, size, mtime_ns, inode, ctime_ns, stat_only)``.  From the directory's
        ``walk_dirs`` row when it has one, else fetched from ``walk`` (and the ``walk_dirs``
        row made at the end of the walk)."""
        key = (root, encode(rel))
        db = self.db
        got = db.execute("SELECT rows FROM walk_dirs WHERE root = ? AND dir = ?",
                         key).fetchone()
        if got is not None:
            try:
                rows = marshal.loads(got[0])
            except (ValueError, EOFError, TypeError):
                rows = None
            if type(rows) is dict:
                return rows
        self.stale.add(key)
        return _fetch(db, key)

    def record(self, root: str, rel: str, name: str) -> tuple | None:
        """(kind, size, mtime_ns, inode, sha256, reason, mime, error) of one previous row."""
        return self.db.execute(
            "SELECT kind, size, mtime_ns, inode, sha256, reason, mime, error FROM walk "
            "WHERE root = ? AND dir = ? AND name = ?",
            (root, encode(rel), encode(name))).fetchone()

    def dirs(self) -> list[tuple[str, str]]:
        """Every (root, directory) holding a row."""
        out = []
        prev = None
        for root, d in self.db.execute("SELECT DISTINCT root, dir FROM walk"):
            if (root, d) != prev:
                out.append((root, decode(d)))
                prev = (root, d)
        return out

    # -- writing -------------------------------------------------------------------------

    def add(self, row: Row, replaced: bool) -> None:
        """A row made by this walk (``replaced``: it takes the place of a previous one)."""
        self.rows.append(row)
        self.keys.add_made(row[0], decode(row[3]))
        if replaced:
            self.keys.add_removed(row[0], decode(row[3]))
        else:
            self.added += 1
        if len(self.rows) >= BATCH_ROWS:
            self.flush()

    def remove(self, root: str, rel: str, name: str) -> None:
        """A previous row whose file this walk did not record."""
        self.gone.append((root, encode(rel), encode(name)))
        self.deleted += 1
        self.keys.add_removed(root, f"{rel}/{name}" if rel else name)
        if len(self.gone) >= BATCH_ROWS:
            self.flush()

    def flush(self) -> None:
        """Commit the rows and removals held (one transaction)."""
        if not self.rows and not self.gone:
            return
        db = self.db
        touched = {(r[0], r[1]) for r in self.rows} | {(g[0], g[1]) for g in self.gone}
        try:
            with db:
                db.execute("BEGIN IMMEDIATE")
                self._begin_gen(db)
                db.executemany("DELETE FROM walk WHERE root = ? AND dir = ? AND name = ?",
                               self.gone)
                db.executemany(INSERT, self.rows)
                self.log.add(db, [(r[0], r[1], r[2]) for r in self.rows] + self.gone)
                # a directory's walk_dirs row goes with any change of its rows
                db.executemany("DELETE FROM walk_dirs WHERE root = ? AND dir = ?", touched)
                # the count of what is committed, with it: a walk killed after this batch
                # leaves the next one an exact count (it decides whether rows outside the
                # directories listed must be looked for)
                set_state(db, "count", self.count_before + self.added - self.deleted)
        except sqlite3.Error as e:
            raise OutputError(f"cannot record the walk in the database: {e}") from None
        self.rows, self.gone = [], []
        self.stale |= touched

    def finish(self, listed: set[tuple[str, str]], seen: int) -> int:
        """The end of a walk: the rows of directories not listed this time (gone, pruned,
        unreadable) and of roots no longer in the manifest removed, the count updated.
        ``seen``: previous rows found again in the directories listed (kept or replaced).
        Returns how many rows the table holds."""
        self.flush()
        db = self.db
        try:
            if self.count_before - seen - self.deleted > 0:
                # previous rows outside the directories listed: found by their directories
                for root, rel in self.dirs():
                    if (root, rel) in listed and root in self.roots:
                        continue
                    for (name,) in db.execute(
                            "SELECT name FROM walk WHERE root = ? AND dir = ? AND gen < ?",
                            (root, encode(rel), self.gen)).fetchall():
                        self.remove(root, rel, decode(name))
                self.flush()
            count = self.count_before + self.added - self.deleted
            with db:
                db.execute("BEGIN IMMEDIATE")
                db.execute("DELETE FROM walk_roots WHERE root NOT IN (%s)"
                           % ",".join("?" * len(self.roots)), list(self.roots))
            self._make_dirs(listed)
        except sqlite3.Error as e:
            raise OutputError(f"cannot record the walk in the database: {e}") from None
        return count

    def _make_dirs(self, listed: set[tuple[str, str]]) -> None:
        """The walk_dirs rows of the directories changed or read without one made again
        from their rows (one transaction), and those of directories not listed removed."""
        db = self.db
        if not self.stale and db.execute(
                "SELECT count(*) FROM walk_dirs").fetchone()[0] <= len(listed):
            return
        with db:
            db.execute("BEGIN IMMEDIATE")
            for key in sorted(self.stale):
                if (key[0], decode(key[1])) in listed:
                    db.execute("INSERT OR REPLACE INTO walk_dirs VALUES (?, ?, ?)",
                               (*key, marshal.dumps(_fetch(db, key))))
            db.executemany("DELETE FROM walk_dirs WHERE root = ? AND dir = ?",
                           [(root, d) for root, d in db.execute(
                               "SELECT root, dir FROM walk_dirs").fetchall()
                            if (root, decode(d)) not in listed])
        self.stale = set()

    def exported(self, identity: list[int] | None) -> None:
        """Record that walk.jsonl (of this identity) is the export of the table as it is."""
        db = self.db
        gen = self.gen if self.written else self.prev_gen
        with db:
            db.execute("BEGIN IMMEDIATE")
            set_state(db, "export", [gen, identity])

    def record_run(self, summary: dict) -> None:
        """The walk's summary, as one row of ``runs``."""
        runs.record(self.db, summary)

    def close(self) -> None:
        self._connection.close()


class ChangeLog:
    """The keys a walk changes, logged in ``walk_log`` with its generation (see the module)."""

    def __init__(self, db: sqlite3.Connection, gen: int, count_before: int) -> None:
        self.gen = gen
        self.limit = log_limit(count_before)
        self.rows = db.execute("SELECT count(*) FROM walk_log").fetchone()[0]
        base = state(db, "log_base")
        self.logging = base is not None and base < gen
        if not count_before or base is None:
            # a first walk logs nothing (no extract stage is behind it); an output without
            # a log starts one with this walk
            with db:
                db.execute("BEGIN IMMEDIATE")
                self.reset(db, gen - 1 if count_before else gen)

    def reset(self, db: sqlite3.Connection, gen: int | None = None) -> None:
        """Empty the log: the changes up to ``gen`` (this walk's) are not in it."""
        gen = self.gen if gen is None else gen
        db.execute("DELETE FROM walk_log")
        set_state(db, "log_base", gen)
        self.rows = 0
        self.logging = gen < self.gen  # the changes after it are logged

    def add(self, db: sqlite3.Connection, keys: list[tuple[str, bytes, bytes]]) -> None:
        """Log the keys of the batch being committed (in its transaction)."""
        if not self.logging:
            return
        if self.rows + len(keys) > self.limit:
            self.reset(db)
            return
        db.executemany("INSERT OR REPLACE INTO walk_log VALUES (?, ?, ?, ?)",
                       [(*k, self.gen) for k in keys])
        self.rows += len(keys)


def _fetch(db: sqlite3.Connection, key: tuple[str, bytes]) -> Previous:
    """One directory's rows fetched from ``walk``, as :meth:`WalkTable.previous` gives them."""
    rows = db.execute("SELECT name, size, mtime_ns, inode, ctime_ns, stat_only FROM walk "
                      "WHERE root = ? AND dir = ?", key).fetchall()
    return {str(r[0], "utf-8", "surrogatepass"): (None, *r[1:]) for r in rows}
