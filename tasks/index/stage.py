"""The index stage: the index (tasks/index/database.py) brought in step with the records.

A text is indexed once, keyed by its store name (``stem``) and the task key it was read under:
two walked files with the same bytes share one row, and a file re-read under another key (a
tool installed or upgraded, another ``pdf_engines``) has its text's row replaced.  What to
change is asked of the two databases at once (the output's database attached read-only):

* **gone**: rows whose stem no record names any more (the file deleted, edited, no longer
  ``ok``): their words taken out (FTS5's ``delete``, given the text kept in ``texts.body``),
  the row removed;
* **changed**: rows whose stem a verdict made since the last sync (``verdicts.run``) names
  under another key: gone, then added again;
* **new**: stems the records name and the index does not hold: the text read from the store
  (through the output's descriptor) and added.

Both scans walk covering indexes (``records_stem``, the index's ``stem``): ≈ 0.7 s at a
million records (docs/performance.md), and nothing at all when extract.jsonl is the one the
index was last brought in step with (:func:`is_current`, the doit task's ``uptodate``).  The
changes are committed in batches (500 texts, 32 MiB or 2 s: one transaction each), so a
``kill -9`` loses no batch it committed and the next run does only the rest; the state that
says the index is in step (``synced``) is written last.  The rows are added in stem order, so
an index kept up over edits holds the same rows as one built fresh.

The records must be whole (extract.jsonl the export of the ``records`` table): while an
extract run writes them, or after one was killed, the stage refuses in one line rather than
drop the texts of records not written yet.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Callable

from bastion.errors import OutputError, PrerequisiteError

from ..database import DB_NAME
from ..output.atomic import identity
from ..output.directory import OutputDir
from ..output.readonly import ReadOutput
from .database import INDEX_DB, get_state, open_index, pack, read_index, set_state

__all__ = ["IndexSummary", "is_current", "standing", "sync", "describe", "RECORDS"]

RECORDS = "extract.jsonl"
BATCH_TEXTS = 500
BATCH_BYTES = 32 << 20
BATCH_SECONDS = 2.0


@dataclass(frozen=True, kw_only=True)
class IndexSummary:
    """What one index stage did, and the index after it."""

    texts: int  # texts in the index
    added: int  # texts added (new, or read under another key)
    removed: int  # texts taken out (no record names them, or replaced)
    missing: int  # texts the records name that the store does not hold (not indexed)
    chars: int  # characters added
    bytes: int  # the index file's size
    duration_s: float
    current: bool  # it was already in step: nothing was read

    def to_json(self) -> dict[str, Any]:
        return {"stage": "index", **{f: getattr(self, f) for f in self.__dataclass_fields__}}


def standing(out: ReadOutput) -> IndexSummary | None:
    """The summary of an index in step with the records, read without changing anything (the
    CLI's line when doit found the index task up to date); None when there is none."""
    try:
        db = read_index(out)
    except (PrerequisiteError, OutputError):
        return None
    try:
        texts = db.execute("SELECT count(*) FROM texts").fetchone()[0]
    except sqlite3.Error:
        return None
    finally:
        db.close()
    size = 0
    for suffix in ("", "-wal"):
        try:
            size += out.od.stat(INDEX_DB + suffix).st_size
        except OSError:
            pass
    return IndexSummary(texts=texts, added=0, removed=0, missing=0, chars=0, bytes=size,
                        duration_s=0.0, current=True)


def records_identity(od: OutputDir) -> list[int] | None:
    return identity(od, RECORDS)


def is_current(out: ReadOutput) -> bool:
    """Whether the index of ``out`` is in step with its records (read-only: nothing is made,
    so ``doit list --status`` may ask): extract.jsonl is the one it was last brought in step
    with, or every extract run since changed no text (:func:`_unchanged_since`)."""
    if not out.exists(INDEX_DB) or not out.exists(DB_NAME):
        return False
    try:
        db = read_index(out)
    except (PrerequisiteError, OutputError):
        return False
    try:
        synced, row = get_state(db, "synced"), get_state(db, "synced_row")
    except sqlite3.Error:
        return False
    finally:
        db.close()
    if synced is None:
        return False
    if synced == identity(out.od, RECORDS):
        return True
    main = out.sqlite(DB_NAME)
    try:
        return _unchanged_since(main, row)
    finally:
        main.close()


NOOP_ROWS = 1000  # extract runs looked at by _unchanged_since (more: the texts are compared)


def _unchanged_since(db: sqlite3.Connection, row: Any) -> bool:
    """Whether no extract run after run row ``row`` changed a text the records name: there
    was at least one, each read nothing and removed nothing (a run that found nothing to do
    rewrites extract.jsonl only to say every record was reused), and no record was reset
    since (``doit clean extract:<file>`` leaves its row ``reused = 0``; a run that reads
    nothing leaves none)."""
    if not isinstance(row, int):
        return False
    try:
        runs = db.execute("SELECT summary FROM runs WHERE stage = 'extract' AND run > ? "
                          "ORDER BY run LIMIT ?", (row, NOOP_ROWS + 1)).fetchall()
        if not runs or len(runs) > NOOP_ROWS:
            return False
        for (summary,) in runs:
            s = json.loads(summary)
            if s.get("extracted") != 0 or s.get("removed") != 0:
                return False
        return db.execute("SELECT 1 FROM records WHERE reused = 0 LIMIT 1").fetchone() is None
    except (sqlite3.Error, ValueError, AttributeError):
        return False


def _last_run(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT max(run) FROM rec.runs WHERE stage = 'extract'").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def _records_whole(od: OutputDir, main: sqlite3.Connection) -> None:
    """PrerequisiteError unless extract.jsonl exists and is the export of the records."""
    from ..extract.table import Records

    if identity(od, RECORDS) is None:
        raise PrerequisiteError(f"no records to index in {od.path} (no {RECORDS}): run the "
                                "extract stage first")
    if not Records(main, od).matches():
        raise PrerequisiteError(f"the records in {od.path} are not whole (an extract run is "
                                "writing them, or one was killed): run the extract stage, "
                                "then the index stage")


def sync(od: OutputDir, *, progress: Callable[[int, int], None] | None = None) -> IndexSummary:
    """Bring the index of the locked output ``od`` in step with its records (see the
    module).  ``progress(done, total)`` is called as texts are added.  Raises
    PrerequisiteError (no records, or not whole) or OutputError."""
    t0 = time.monotonic()
    try:
        od.stat(DB_NAME)
    except OSError:
        raise PrerequisiteError(f"no records to index in {od.path}: run the extract stage "
                                "first") from None
    db = open_index(od)
    try:
        return _sync(od, db, t0, progress)
    except sqlite3.Error as e:
        raise OutputError(f"cannot update the index {od.path / INDEX_DB}: {e}") from None
    finally:
        db.close()


def _sync(od: OutputDir, db: sqlite3.Connection, t0: float,
          progress: Callable[[int, int], None] | None) -> IndexSummary:
    db.execute("ATTACH DATABASE ? AS rec", (od.proc(DB_NAME),))
    try:
        marker = records_identity(od)
        synced, synced_row = get_state(db, "synced"), get_state(db, "synced_row")
        if synced is not None and synced == marker:
            return _summary(od, db, t0, current=True)
        _records_whole(od, db)  # (the records' tables are found in the attached database)
        if synced is not None and _unchanged_since(db, synced_row):
            with db:  # only the reused flags moved: in step with this export too
                db.execute("BEGIN IMMEDIATE")
                set_state(db, "synced", marker)
                set_state(db, "synced_row", _last_run(db))
            return _summary(od, db, t0, current=True)
        runs = _runs(db)
        since = get_state(db, "synced_run")
        db.execute("DROP TABLE IF EXISTS temp.gone")
        db.execute("DROP TABLE IF EXISTS temp.todo")
        # rows no record names; rows a verdict made since names under another key
        db.execute("CREATE TEMP TABLE gone (id INTEGER PRIMARY KEY)")
        db.execute("INSERT INTO temp.gone SELECT t.id FROM texts t WHERE NOT EXISTS "
                   "(SELECT 1 FROM rec.records r WHERE r.stem = t.stem)")
        _changed(db, since if isinstance(since, int) and since <= runs else None)
        removed = _remove(db)
        db.execute("CREATE TEMP TABLE todo (stem TEXT PRIMARY KEY) WITHOUT ROWID")
        db.execute("INSERT INTO temp.todo SELECT DISTINCT r.stem FROM rec.records r "
                   "WHERE r.stem IS NOT NULL AND NOT EXISTS "
                   "(SELECT 1 FROM texts t WHERE t.stem = r.stem)")
        added, missing, chars = _add(od, db, progress)
        with db:
            db.execute("BEGIN IMMEDIATE")
            set_state(db, "synced", marker)
            set_state(db, "synced_run", runs)
            set_state(db, "synced_row", _last_run(db))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # (the file's size is the index's)
        return _summary(od, db, t0, added=added, removed=removed, missing=missing, chars=chars)
    finally:
        for table in ("gone", "todo"):
            db.execute(f"DROP TABLE IF EXISTS temp.{table}")
        db.execute("DETACH DATABASE rec")


def _runs(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT value FROM rec.counters WHERE name = 'runs'").fetchone()
    return int(row[0]) if row else 0


def _wanted_key(db: sqlite3.Connection, stem: str) -> str | None:
    """The task key the records name ``stem``'s text under (the least, should two)."""
    row = db.execute("SELECT min(key) FROM rec.records WHERE stem = ?", (stem,)).fetchone()
    return row[0] if row else None


def _changed(db: sqlite3.Connection, since: int | None) -> None:
    """Add to ``gone`` the rows whose text was made again under another key: those of the
    ``ok`` verdicts made after run ``since`` (an indexed range); every row when ``since`` is
    None (never synced, or the runs were counted again from 1 since: ``doit clean``)."""
    stale: list[tuple[int]] = []
    if since is None:
        cursor = db.execute("SELECT id, stem, key FROM texts")
        while rows := cursor.fetchmany(BATCH_TEXTS):
            stale = [(i,) for i, stem, key in rows if _wanted_key(db, stem) not in (None, key)]
            db.executemany("INSERT OR IGNORE INTO temp.gone VALUES (?)", stale)
    else:
        made = db.execute("SELECT sha256, key FROM rec.verdicts WHERE run > ? AND "
                          "status = 'ok'", (since,))
        while rows := made.fetchmany(BATCH_TEXTS):
            for sha, key in rows:
                for stem in (sha, f"{sha}.{key}"):
                    row = db.execute("SELECT id, key FROM texts WHERE stem = ?",
                                     (stem,)).fetchone()
                    if row is not None and _wanted_key(db, stem) not in (None, row[1]):
                        stale.append((row[0],))
            db.executemany("INSERT OR IGNORE INTO temp.gone VALUES (?)", stale)
            stale = []


def _remove(db: sqlite3.Connection) -> int:
    """Take the ``gone`` rows out, a batch per transaction; how many."""
    from .database import unpack

    removed, last = 0, -1
    while True:
        ids = [r[0] for r in db.execute("SELECT id FROM temp.gone WHERE id > ? ORDER BY id "
                                        "LIMIT ?", (last, BATCH_TEXTS))]
        if not ids:
            return removed
        last = ids[-1]
        with db:
            db.execute("BEGIN IMMEDIATE")
            for i in ids:
                row = db.execute("SELECT body FROM texts WHERE id = ?", (i,)).fetchone()
                if row is None:
                    continue
                db.execute("INSERT INTO texts_fts (texts_fts, rowid, body) VALUES "
                           "('delete', ?, ?)", (i, unpack(row[0])))
                db.execute("DELETE FROM texts WHERE id = ?", (i,))
                removed += 1


def _add(od: OutputDir, db: sqlite3.Connection,
         progress: Callable[[int, int], None] | None) -> tuple[int, int, int]:
    """Read and add the ``todo`` texts in stem order, committed in batches; (added, missing,
    characters)."""
    total = db.execute("SELECT count(*) FROM temp.todo").fetchone()[0]
    added = missing = chars = done = 0
    last = ""
    while True:
        stems = [r[0] for r in db.execute("SELECT stem FROM temp.todo WHERE stem > ? "
                                          "ORDER BY stem LIMIT ?", (last, BATCH_TEXTS))]
        if not stems:
            return added, missing, chars
        last = stems[-1]
        batch: list[tuple[str, str, str, bytes]] = []
        size, t0 = 0, time.monotonic()
        for stem in stems:
            done += 1
            key = _wanted_key(db, stem)
            try:
                data = od.read(f"extract/{stem[:2]}/{stem}.txt")
            except (OSError, ValueError):
                missing += 1  # the store lost it: the next extract run reads it again
                continue
            text = data.decode("utf-8", "replace")
            batch.append((stem, key or "", text, data))
            size += len(data)
            if size >= BATCH_BYTES or time.monotonic() - t0 >= BATCH_SECONDS:
                added, chars = _commit(db, batch, added, chars)
                batch, size, t0 = [], 0, time.monotonic()
            if progress is not None:
                progress(done, total)
        added, chars = _commit(db, batch, added, chars)


def _commit(db: sqlite3.Connection, batch: list[tuple[str, str, str, bytes]], added: int,
            chars: int) -> tuple[int, int]:
    if not batch:
        return added, chars
    with db:
        db.execute("BEGIN IMMEDIATE")
        for stem, key, text, data in batch:
            cur = db.execute("INSERT INTO texts (stem, key, chars, body) VALUES (?, ?, ?, ?)",
                             (stem, key, len(text), pack(data)))
            db.execute("INSERT INTO texts_fts (rowid, body) VALUES (?, ?)",
                       (cur.lastrowid, text))
            added += 1
            chars += len(text)
    return added, chars


def _summary(od: OutputDir, db: sqlite3.Connection, t0: float, *, current: bool = False,
             added: int = 0, removed: int = 0, missing: int = 0,
             chars: int = 0) -> IndexSummary:
    texts = db.execute("SELECT count(*) FROM texts").fetchone()[0]
    size = 0
    for suffix in ("", "-wal"):
        try:
            size += od.stat(INDEX_DB + suffix).st_size
        except OSError:
            pass
    return IndexSummary(texts=texts, added=added, removed=removed, missing=missing,
                        chars=chars, bytes=size, duration_s=round(time.monotonic() - t0, 3),
                        current=current)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def describe(summary: IndexSummary | None, out: Any) -> str:
    """The index stage's one line for the person."""
    if summary is None:
        return "index: nothing done"
    shown_size = _size(summary.bytes)
    what = ("in step with the records, nothing to do" if summary.current else
            f"{summary.added} added, {summary.removed} removed, {summary.chars} characters "
            f"read")
    missing = (f"; {summary.missing} text(s) missing from the store, not indexed (the next "
               "extract run reads them again)" if summary.missing else "")
    return (f"index: {summary.texts} texts in {summary.duration_s} s: {what}{missing}; "
            f"{shown_size} in {out}/{INDEX_DB}; search it with bastion search")
