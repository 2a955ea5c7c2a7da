"""The content-addressed text store and its verdicts: the source of truth of the extract stage.

Layout under the output directory::

    extract/<aa>/<sha256>.txt              the text (UTF-8, normalised), status ok only
    extract/<aa>/<sha256>.meta.json        PDF sidecar (pages, title, outline, page sources)
    extract/<aa>/<sha256>.<key>.txt        the text of the same bytes read as another type
    .bastion/verdicts.sqlite               one verdict per (sha256, task key)

A file's text is named by its content's sha256; when the walk holds the same bytes under two
detected types (``a.json`` and its copy ``a.txt``), each (sha256, key) pair has its own verdict
and its own text, the first key in sort order keeping the plain name (:func:`text_stem`).

A verdict is committed only after its text is in place and durable (texts are flushed with one
``syncfs`` per batch of verdicts, not one fsync per file), so after a crash or ``kill -9`` a
verdict always has its text; a text without a verdict is simply redone, and removed by the
next successful run's clean-up (:meth:`Store.remove_unreferenced`).  doit's own database is
only a cache in front of this: deleting it costs one quick pass, never a re-extraction.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable

from readers.verdict import Verdict

from .fsio import STATE_DIR, TMP_PREFIX, OutputError, atomic_write, dumps, fsync_dir

SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    sha256 TEXT NOT NULL,
    key TEXT NOT NULL,
    status TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (sha256, key)
) WITHOUT ROWID
"""


def text_stem(sha256: str, key: str, primary: bool) -> str:
    """The store name (without suffix) of the text of ``sha256`` read under ``key``."""
    return sha256 if primary else f"{sha256}.{key}"


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
    """The texts under ``extract/`` and the verdict index under ``.bastion/``."""

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.root = self.out / "extract"
        self.db_path = self.out / STATE_DIR / "verdicts.sqlite"
        self._db: sqlite3.Connection | None = None
        self._dirty_dirs: set[Path] = set()
        self._buckets: set[Path] = set()  # bucket directories known to exist

    # -- paths ----------------------------------------------------------------------------------

    def text_path(self, stem: str) -> Path:
        return self.root / stem[:2] / f"{stem}.txt"

    def meta_path(self, stem: str) -> Path:
        return self.root / stem[:2] / f"{stem}.meta.json"

    # -- verdicts -------------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.db_path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.db_path, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                if db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                    # an index of an earlier layout: its keys are of another kind, so every
                    # verdict in it would be redone anyway
                    db.execute("DROP TABLE IF EXISTS verdicts")
                    db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                db.execute(SCHEMA)
            except (OSError, sqlite3.Error) as e:
                raise OutputError(f"cannot open the verdict store {self.db_path}: {e}") from None
            self._db = db
        return self._db

    def verdicts(self) -> dict[tuple[str, str], Verdict]:
        """Every stored verdict, by (sha256, key) (one query; used to plan a run).  A row that
        does not parse is left out: its file is extracted again."""
        if not self.db_path.exists():
            return {}
        try:
            rows = self.db.execute("SELECT sha256, key, body FROM verdicts").fetchall()
        except sqlite3.Error as e:
            raise OutputError(f"cannot read the verdict store {self.db_path}: {e}") from None
        out: dict[tuple[str, str], Verdict] = {}
        loads = json.loads
        for sha, key, body in rows:
            try:
                out[(sha, key)] = Verdict.from_store(loads(body))
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def put_many(self, verdicts: list[tuple[str, str, Verdict]]) -> None:
        """Commit (sha256, key, verdict) rows in one transaction, after making their texts
        durable."""
        if not verdicts:
            return
        self.sync()
        rows = [(sha, key, v.status.value, dumps(v.to_json())) for sha, key, v in verdicts]
        try:
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?)", rows)
        except sqlite3.Error as e:
            raise OutputError(f"cannot record verdicts in {self.db_path}: {e}") from None

    def forget(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop the verdicts of these (sha256, key) pairs (``doit forget``); how many."""
        pairs = list(pairs)
        if not pairs or not self.db_path.exists():
            return 0
        try:
            with self.db:
                self.db.execute("BEGIN")
                n = 0
                for sha, key in pairs:
                    n += self.db.execute("DELETE FROM verdicts WHERE sha256=? AND key=?",
                                         (sha, key)).rowcount
        except sqlite3.Error as e:
            raise OutputError(f"cannot update the verdict store {self.db_path}: {e}") from None
        return n

    # -- texts ----------------------------------------------------------------------------------

    def text_names(self) -> set[str]:
        """The file names in the store (one ``scandir`` per bucket, not a stat per text)."""
        names: set[str] = set()
        for bucket in self._bucket_dirs():
            with os.scandir(bucket) as it:
                names.update(e.name for e in it)
        return names

    def _bucket_dirs(self) -> list[str]:
        try:
            return sorted(e.path for e in os.scandir(self.root) if e.is_dir())
        except OSError:
            return []

    def adopt_text(self, stem: str, tmp: Path) -> None:
        """Move a worker's finished text file into the store, atomically."""
        dest = self.text_path(stem)
        try:
            if dest.parent not in self._buckets:
                dest.parent.mkdir(parents=True, exist_ok=True)
                self._buckets.add(dest.parent)
            os.replace(tmp, dest)
        except OSError as e:
            raise OutputError(f"cannot store text {dest}: {e.strerror}") from None
        self._dirty_dirs.add(dest.parent)

    def write_text(self, stem: str, data: bytes) -> None:
        """Store a text handed over as bytes (a text made elsewhere: a cluster worker)."""
        dest = self.text_path(stem)
        if dest.parent not in self._buckets:
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise OutputError(f"cannot store text {dest}: {e.strerror}") from None
            self._buckets.add(dest.parent)
        atomic_write(dest, data, sync=False)  # made durable by the commit's syncfs
        self._dirty_dirs.add(dest.parent)

    def write_meta(self, stem: str, meta: dict[str, Any]) -> None:
        dest = self.meta_path(stem)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot store {dest}: {e.strerror}") from None
        body = json.dumps(meta, sort_keys=True, ensure_ascii=True, indent=1) + "\n"
        # no fsync of its own: like the texts, the sidecar is made durable by the commit's
        # syncfs, before the verdict that stands for it (a crash before that re-extracts)
        atomic_write(dest, body.encode("ascii"), sync=False)
        self._dirty_dirs.add(dest.parent)

    def remove_meta(self, stem: str) -> None:
        try:
            os.unlink(self.meta_path(stem))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputError(f"cannot remove {self.meta_path(stem)}: {e.strerror}") from None

    def remove_text(self, stem: str) -> None:
        for p in (self.text_path(stem), self.meta_path(stem)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
            except OSError as e:
                raise OutputError(f"cannot remove {p}: {e.strerror}") from None

    def remove_unreferenced(self, referenced: set[str]) -> int:
        """Delete every store file whose stem no record references (texts and sidecars of
        deleted or edited files).  Called only once the records that dropped them are
        durable, so a crash before or during it loses nothing.  Returns how many."""
        removed = 0
        for bucket in self._bucket_dirs():
            with os.scandir(bucket) as it:
                entries = [(e.name, e.path) for e in it]
            for name, path in entries:
                if name.startswith(TMP_PREFIX):
                    continue  # another step's temp file: remove_stale_temps' business
                stem = name[:-4] if name.endswith(".txt") else (
                    name[:-10] if name.endswith(".meta.json") else None)
                if stem is not None and stem in referenced:
                    continue
                try:
                    os.unlink(path)
                    removed += 1
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise OutputError(f"cannot remove {path}: {e.strerror}") from None
            try:
                os.rmdir(bucket)  # only when empty
            except OSError:
                pass
        return removed

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
