"""The output's database: one SQLite file (``.bastion/verdicts.sqlite``) holding the walk, the
verdicts and the runs, its schema and its version.

It is the system of record: ``walk.jsonl`` is an export of its ``walk`` table
(:mod:`bastion.tasks.walk.export`), ``extract.jsonl`` an export of its ``records`` table joined
with the verdicts by (sha256, key) (:mod:`bastion.tasks.extract.table`).  docs/architecture.md shows the schema; docs/records.md
queries it.  WAL journal, ``synchronous=NORMAL``: a committed transaction survives a
``kill -9`` of the process (each walk batch and each verdict batch is one).

The file is opened through the output directory's checked descriptor (``/proc/self/fd/N`` of
the state directory), made with the output's file mode, and checked to be the file that was
made there.  Versions 2 (verdicts, backoff and counters, no walk), 3 (no change log, no
records), 4 (no run of each verdict) and 5 (no owner of the plain names) are upgraded in
place, their verdicts and walk kept; any other older version holds
keys of another kind: its verdicts are dropped (every one would be redone anyway).
"""

from __future__ import annotations

import os
import sqlite3
import stat

from .output.directory import OutputDir
from .output.modes import OutputError

__all__ = ["DB_NAME", "SCHEMA", "SCHEMA_VERSION", "connect", "open_sqlite"]

DB_NAME = ".bastion/verdicts.sqlite"
SCHEMA_VERSION = 6

SCHEMA = (
    # one verdict per (sha256, task key): the extract stage's source of truth
    """CREATE TABLE IF NOT EXISTS verdicts (
        sha256 TEXT NOT NULL,
        key TEXT NOT NULL,
        status TEXT NOT NULL,
        body TEXT NOT NULL,
        run INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (sha256, key)
    ) WITHOUT ROWID""",
    # the verdicts an extract run made ("produced": their first records are not reused)
    "CREATE INDEX IF NOT EXISTS verdicts_run ON verdicts (run)",
    # repeat offenders (tasks/extract/backoff.py)
    """CREATE TABLE IF NOT EXISTS retries (
        sha256 TEXT NOT NULL,
        key TEXT NOT NULL,
        failures INTEGER NOT NULL,
        due INTEGER NOT NULL,
        PRIMARY KEY (sha256, key)
    ) WITHOUT ROWID""",
    "CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
    # whose text the plain-named files of a sha256 hold (extract/<aa>/<sha256>.txt, .md,
    # .meta.json): the key whose verdict put them there.  Several keys can read the same bytes
    # and each run gives the plain name to the least of its own, so an ok verdict stands on
    # the plain name only while its key is the one here (tasks/extract/store.py)
    """CREATE TABLE IF NOT EXISTS plain (
        sha256 TEXT PRIMARY KEY,
        key TEXT NOT NULL
    ) WITHOUT ROWID""",
    # one row per walked file (or link, or other entry): the walk's record of it, and the
    # identity its reuse is decided on.  dir, name, path: UTF-8 bytes, a byte that is not
    # UTF-8 kept as its surrogate escape (U+DC80+b, encoded 'surrogatepass'), so that the
    # byte order of path is the order of walk.jsonl
    """CREATE TABLE IF NOT EXISTS walk (
        root TEXT NOT NULL,
        dir BLOB NOT NULL,
        name BLOB NOT NULL,
        path BLOB NOT NULL,
        kind TEXT NOT NULL,
        size INTEGER,
        mtime_ns INTEGER,
        ctime_ns INTEGER,
        inode INTEGER,
        device INTEGER,
        sha256 TEXT,
        reason TEXT,
        mime TEXT,
        error TEXT,
        stat_only INTEGER NOT NULL,
        gen INTEGER NOT NULL,
        PRIMARY KEY (root, dir, name)
    ) WITHOUT ROWID""",
    # one directory's rows of ``walk`` as a re-walk compares them: a marshal'd dict name ->
    # (None, size, mtime_ns, inode, ctime_ns, stat_only); removed in the transaction that
    # changes any of the directory's rows, made again at the end of the walk
    """CREATE TABLE IF NOT EXISTS walk_dirs (
        root TEXT NOT NULL,
        dir BLOB NOT NULL,
        rows BLOB NOT NULL,
        PRIMARY KEY (root, dir)
    )""",
    # what a root's rows depend on besides each file's stat (path, patterns, link options)
    "CREATE TABLE IF NOT EXISTS walk_roots (root TEXT PRIMARY KEY, settings TEXT NOT NULL)",
    # the walk's settings, generation, row count and the export that matches them
    "CREATE TABLE IF NOT EXISTS walk_state (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # the keys each walk generation added, changed or removed (its last change only): what
    # changed since a generation is a query (tasks/walk/table.py, tasks/extract/table.py)
    """CREATE TABLE IF NOT EXISTS walk_log (
        root TEXT NOT NULL,
        dir BLOB NOT NULL,
        name BLOB NOT NULL,
        gen INTEGER NOT NULL,
        PRIMARY KEY (root, dir, name)
    ) WITHOUT ROWID""",
    # one row per extract.jsonl record: the walk's fields it repeats, the task key whose
    # verdict (in ``verdicts``) it carries, or, with no key, why it is skipped; ``stem``
    # names its text in the store (tasks/extract/table.py)
    """CREATE TABLE IF NOT EXISTS records (
        root TEXT NOT NULL,
        dir BLOB NOT NULL,
        name BLOB NOT NULL,
        path BLOB NOT NULL,
        sha256 TEXT,
        mime TEXT,
        key TEXT,
        skip TEXT,
        reused INTEGER NOT NULL,
        stem TEXT,
        PRIMARY KEY (root, dir, name)
    ) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS records_stem ON records (stem) WHERE stem IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS records_new ON records (root) WHERE reused = 0",
    # the walk generation the records were made from, and the export that matches them
    "CREATE TABLE IF NOT EXISTS records_state (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # one row per walk or extract run: its summary as JSON
    """CREATE TABLE IF NOT EXISTS runs (
        run INTEGER PRIMARY KEY AUTOINCREMENT,
        stage TEXT NOT NULL,
        started_at TEXT NOT NULL,
        summary TEXT NOT NULL
    )""",
)


def connect(od: OutputDir) -> sqlite3.Connection:
    """The database of the output ``od``, opened through its checked descriptor, upgraded to
    :data:`SCHEMA_VERSION` (autocommit mode: callers open their transactions)."""
    rel = DB_NAME
    try:
        db = open_sqlite(od, rel)
        with db:
            db.execute("BEGIN IMMEDIATE")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version != SCHEMA_VERSION:
                if version not in (2, 3, 4, 5):
                    # an index of an earlier layout: its keys are of another kind, so every
                    # verdict in it would be redone anyway
                    db.execute("DROP TABLE IF EXISTS verdicts")
                else:
                    columns = {c[1] for c in db.execute("PRAGMA table_info(verdicts)")}
                    if columns and "run" not in columns:  # made by no run of this one
                        db.execute("ALTER TABLE verdicts ADD COLUMN run INTEGER NOT NULL "
                                   "DEFAULT 0")
                db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            for table in SCHEMA:
                db.execute(table)
            if version in (2, 3, 4, 5):
                _own_plain_names(db)
    except (OSError, sqlite3.Error) as e:
        raise OutputError(f"cannot open the database {od.path / rel}: {e}") from None
    return db


def _own_plain_names(db: sqlite3.Connection) -> None:
    """Upgrading from a version without the ``plain`` table: the owner of a sha256's plain
    names is known where it has one ``ok`` verdict only (no other key ever wrote a text of
    it); bytes read under several keys are read again once, their owner unknown."""
    db.execute("INSERT OR IGNORE INTO plain (sha256, key) SELECT sha256, min(key) "
               "FROM verdicts WHERE status = 'ok' GROUP BY sha256 HAVING count(*) = 1")


def open_sqlite(od: OutputDir, rel: str) -> sqlite3.Connection:
    """The SQLite file ``rel`` of the output ``od`` (made if missing), in WAL mode with
    ``synchronous=NORMAL``, autocommit: made with the output's file mode (sqlite gives its
    -wal and -shm files the database's permissions), journals of a looser run tightened,
    opened through the checked descriptor of its directory and checked to be the file made
    there.  Raises OSError or sqlite3.Error (the caller names the file in its error)."""
    od.create(rel)
    for suffix in ("-wal", "-shm"):  # files of an earlier, looser run
        _tighten(od, rel + suffix)
    db = sqlite3.connect(od.proc(rel), isolation_level=None)
    _check_opened(db, od, rel)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def _tighten(od: OutputDir, rel: str) -> None:
    """Give sqlite's journal file ``rel`` the output's mode, before this process connects:
    the file is opened only when its mode is wrong, never while a connection of this process
    is open (closing any descriptor of a file drops every POSIX lock the process holds on it,
    sqlite's lock on ``-shm`` included: another process would then take the shared memory for
    unused, truncate it, and this one die of SIGBUS)."""
    dfd, name = od.split(rel)
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_IMODE(st.st_mode) != od.modes.file:
        od.chmod_file(rel)


def _check_opened(db: sqlite3.Connection, od: OutputDir, rel: str) -> None:
    """Refuse a database file other than the one made through the descriptor (sqlite
    resolves the ``/proc/self/fd`` name to a path before opening it)."""
    opened = db.execute("PRAGMA database_list").fetchone()[2]
    dfd, name = od.split(rel)
    want = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    got = os.stat(opened)
    if (got.st_dev, got.st_ino) != (want.st_dev, want.st_ino):
        db.close()
        raise OutputError(f"the database opened as {opened} is not "
                          f"{od.path / rel} (the output directory was moved)")


def connect_read(od: OutputDir) -> sqlite3.Connection:
    """The database of ``od`` opened read-only (a forked walk helper's: it only looks)."""
    try:
        db = sqlite3.connect(f"file:{od.proc(DB_NAME)}?mode=ro", uri=True,
                             isolation_level=None)
        _check_opened(db, od, DB_NAME)
    except (OSError, sqlite3.Error) as e:
        raise OutputError(f"cannot open the database {od.path / DB_NAME}: {e}") from None
    return db


# (records_state with the walk's: the walk generation the records were made from is gone)
WALK_TABLES = ("walk", "walk_dirs", "walk_roots", "walk_state", "walk_log", "records_state")
EXTRACT_TABLES = ("verdicts", "retries", "counters", "records", "records_state")


def clear(od: OutputDir, tables: tuple[str, ...]) -> None:
    """Empty ``tables`` (``doit clean`` of a stage: :data:`WALK_TABLES` or
    :data:`EXTRACT_TABLES`); when the database then holds neither a walk nor a verdict, it
    is removed with its journal files."""
    dfd, name = od.split(DB_NAME)
    try:
        os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return
    db = connect(od)
    try:
        with db:
            db.execute("BEGIN IMMEDIATE")
            for table in tables:
                db.execute(f"DELETE FROM {table}")
            rest = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                       for t in ("walk", "verdicts", "retries"))
    except sqlite3.Error as e:
        raise OutputError(f"cannot clear the database {od.path / DB_NAME}: {e}") from None
    finally:
        db.close()
    if not rest:
        for suffix in ("", "-wal", "-shm"):
            od.unlink(DB_NAME + suffix)
