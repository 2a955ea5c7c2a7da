"""The content-addressed text store and its verdicts: the source of truth of the extract stage.

Layout under the output directory::

    extract/<aa>/<sha256>.txt         the text (UTF-8, normalised), status ok only
    extract/<aa>/<sha256>.meta.json   PDF metadata sidecar (pages, title, outline)
    .bastion/verdicts.sqlite          one verdict per sha256, keyed by the reader's key

A verdict is committed only after its text is in place and durable (texts are flushed with one
``syncfs`` per batch of verdicts, not one fsync per file), so after a crash or ``kill -9`` a
verdict always has its text; a text without a verdict is simply redone.  doit's own database is
only a cache in front of this: deleting it costs one quick pass, never a re-extraction.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .fsio import STATE_DIR, OutputError, atomic_write, fsync_dir

SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    sha256 TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    extractor TEXT,
    chars INTEGER NOT NULL,
    error TEXT,
    error_kind TEXT,
    cap TEXT,
    tools TEXT,
    pages INTEGER,
    title TEXT
)
"""


@dataclass(slots=True)
class Verdict:
    sha256: str
    key: str  # the task key: extractor version, reader, settings (see tasks.extract.task_key)
    status: str
    extractor: str | None
    chars: int
    error: str | None
    error_kind: str | None
    limit: str | None
    tools: tuple[str, ...] | None
    pages: int | None = None
    title: str | None = None


def syncfs(path: Path) -> bool:
    """Flush every dirty page and inode of the filesystem holding ``path`` (Linux
    ``syncfs``); False when that was not possible (then ``os.sync()`` was called)."""
    import ctypes

    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        os.sync()
        return False
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) == 0:
            return True
    except (OSError, AttributeError):
        pass
    finally:
        os.close(fd)
    os.sync()
    return False


class Store:
    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.root = self.out / "extract"
        self.db_path = self.out / STATE_DIR / "verdicts.sqlite"
        self._db: sqlite3.Connection | None = None
        self._dirty_dirs: set[Path] = set()
        self._buckets: set[Path] = set()  # bucket directories known to exist

    # -- paths ----------------------------------------------------------------------------------

    def text_path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.txt"

    def meta_path(self, sha256: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}.meta.json"

    # -- verdicts -------------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.db_path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.db_path, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(SCHEMA)
            except (OSError, sqlite3.Error) as e:
                raise OutputError(f"cannot open the verdict store {self.db_path}: {e}") from None
            self._db = db
        return self._db

    def verdicts(self) -> dict[str, Verdict]:
        """Every stored verdict, by sha256 (one query; used to plan a run)."""
        if not self.db_path.exists():
            return {}
        rows = self.db.execute(
            "SELECT sha256, key, status, extractor, chars, error, error_kind, cap, tools, pages,"
            " title FROM verdicts").fetchall()
        out = {}
        for r in rows:
            v = Verdict(*r)
            if v.tools is not None:
                v.tools = tuple(json.loads(v.tools))  # type: ignore[arg-type]
            out[r[0]] = v
        return out

    def put_many(self, verdicts: list[Verdict]) -> None:
        """Commit verdicts in one transaction, after making their texts durable."""
        if not verdicts:
            return
        self.sync()
        rows = [(v.sha256, v.key, v.status, v.extractor, v.chars, v.error, v.error_kind,
                 v.limit, json.dumps(list(v.tools)) if v.tools is not None else None,
                 v.pages, v.title) for v in verdicts]
        try:
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany(
                    "INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?,?,?,?,?,?,?)", rows)
        except sqlite3.Error as e:
            raise OutputError(f"cannot record verdicts in {self.db_path}: {e}") from None

    # -- texts ----------------------------------------------------------------------------------

    def text_names(self) -> set[str]:
        """The file names in the store (one ``scandir`` per bucket, not a stat per text)."""
        names: set[str] = set()
        try:
            buckets = [e.path for e in os.scandir(self.root) if e.is_dir()]
        except OSError:
            return names
        for bucket in buckets:
            with os.scandir(bucket) as it:
                names.update(e.name for e in it)
        return names

    def adopt_text(self, sha256: str, tmp: Path) -> None:
        """Move a worker's finished (fsynced) text file into the store, atomically."""
        dest = self.text_path(sha256)
        try:
            if dest.parent not in self._buckets:
                dest.parent.mkdir(parents=True, exist_ok=True)
                self._buckets.add(dest.parent)
            os.replace(tmp, dest)
        except OSError as e:
            raise OutputError(f"cannot store text {dest}: {e.strerror}") from None
        self._dirty_dirs.add(dest.parent)

    def write_meta(self, sha256: str, meta: dict[str, Any]) -> None:
        dest = self.meta_path(sha256)
        dest.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(meta, sort_keys=True, ensure_ascii=True, indent=1) + "\n"
        # no fsync of its own: like the texts, the sidecar is made durable by the commit's
        # syncfs, before the verdict that stands for it (a crash before that re-extracts)
        atomic_write(dest, body.encode("ascii"), sync=False)
        self._dirty_dirs.add(dest.parent)

    def remove_text(self, sha256: str) -> None:
        for p in (self.text_path(sha256), self.meta_path(sha256)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise OutputError(f"cannot remove {p}: {e.strerror}") from None

    def sync(self) -> None:
        """Make the texts and renames so far durable: one ``syncfs`` of the output filesystem
        (instead of an fsync per file), then the touched directories."""
        if not self._dirty_dirs:
            return
        if not syncfs(self.root):  # syncfs covers the directories too; fsync them otherwise
            for d in sorted(self._dirty_dirs):
                fsync_dir(d)
        self._dirty_dirs.clear()

    def close(self) -> None:
        self.sync()
        if self._db is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            self._db.close()
            self._db = None
