"""The content-addressed text store and its verdicts: the source of truth of the extract stage.

Layout under the output directory::

    extract/<aa>/<sha256>.txt              the text (UTF-8, normalised), status ok only
    extract/<aa>/<sha256>.md               its Markdown (a run with ``markdown: true``)
    extract/<aa>/<sha256>.meta.json        PDF sidecar (pages, title, outline, page sources)
    extract/<aa>/<sha256>.<key>.txt        the text of the same bytes read as another type
    .bastion/verdicts.sqlite               one verdict per (sha256, task key); the runs
                                           counted, and when each repeat offender is tried

A file's text is named by its content's sha256; when the walk holds the same bytes under two
detected types (``a.json`` and its copy ``a.txt``), each (sha256, key) pair has its own verdict
and its own text, the first key in sort order keeping the plain name (:func:`text_stem`).
Which key that is depends on the walk (a.txt deleted, or the tools turned on then off), so
the database names the key whose text the plain names hold (its ``plain`` table): an ``ok``
verdict stands on the plain name only while its key is that one, and a run about to give
the plain name to another key first clears the owner (:mod:`.owners`), committed before any
text is renamed.

Every write goes through the output directory's checked descriptor (:mod:`bastion.tasks.output.directory`):
texts are renamed into their bucket with ``renameat`` relative to the bucket's descriptor,
sidecars written and stale files removed with ``*at`` calls, and sqlite opens the verdict
index through ``/proc/self/fd/N`` of the state directory's descriptor.

A verdict is committed only after its text is in place and durable (texts are flushed with one
``syncfs`` per batch of verdicts, not one fsync per file), so after a crash or ``kill -9`` a
verdict always has its text; a text without a verdict is simply redone, and removed by the
next successful run's clean-up (:meth:`Store.remove_unreferenced`).  doit's own database is
only a cache in front of this: deleting it costs one quick pass, never a re-extraction.

The verdict index also counts the extract runs and holds the backoff of repeat offenders
(documents that keep timing out, running out of memory or crashing): its rules are
:mod:`bastion.tasks.extract.backoff`'s, its rows written in the verdicts' transaction.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Callable, Container, Iterable

from bastion.readers.runtime.verdict import Verdict

from ..output.atomic import STATE_DIR, TMP_PREFIX, OutputError, dumps
from ..output.directory import OutputDir
from . import backoff, owners
from ..database import connect

STAMP = f"{STATE_DIR}/extract-stamp.json"  # the no-op stamp (tasks/extract/stamp.py)



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


def _sweep_bucket(bfd: int, bucket: str, referenced: Callable[[str], Container[str]],
                  markdown: Callable[[str], Container[str]] | None) -> int:
    """:meth:`Store.remove_unreferenced` in one bucket (its descriptor ``bfd``)."""
    with os.scandir(bfd) as it:
        entries = [e.name for e in it]
    named = referenced(bucket)
    with_md: Container[str] | None = None
    removed = 0
    for name in entries:
        if name.startswith(TMP_PREFIX):
            continue  # another step's temp file: remove_stale_temps' business
        stem = name[:-4] if name.endswith(".txt") else (
            name[:-10] if name.endswith(".meta.json") else None)
        if stem is not None and stem in named:
            continue
        if name.endswith(".md"):
            if with_md is None:
                with_md = markdown(bucket) if markdown is not None else named
            if name[:-3] in with_md:
                continue
        try:
            os.unlink(name, dir_fd=bfd)
            removed += 1
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputError(f"cannot remove {bucket}/{name}: {e.strerror}") from None
    return removed


class Store:
    """The texts under ``extract/`` and the verdict index under ``.bastion/``."""

    def __init__(self, out: Path, opener: Callable[[], OutputDir]) -> None:
        self.out = Path(out)
        self._open = opener  # the run's checked output directory (locked), at the first use
        self.root = self.out / "extract"
        self.db_path = self.out / STATE_DIR / "verdicts.sqlite"
        self._db: sqlite3.Connection | None = None
        self._dirty = False  # texts or renames not yet made durable
        self._dir: OutputDir | None = None
        self.run = 0  # this extract run's number (backoff.start_run), 0 before
        self._unstamped = self.empty = False  # empty: no bucket when the session claimed it

    @property
    def dir(self) -> OutputDir:
        """The output directory, opened and checked at the first use (``opener``: the run
        locks it then; a listing command that never writes never opens it)."""
        if self._dir is None:
            self._dir = self._open()
        return self._dir

    # -- paths ----------------------------------------------------------------------------------

    def text_path(self, stem: str) -> Path:
        return self.root / stem[:2] / f"{stem}.txt"

    def meta_path(self, stem: str) -> Path:
        return self.root / stem[:2] / f"{stem}.meta.json"

    def markdown_path(self, stem: str) -> Path:  # (a record names it: markdown_of)
        return self.root / stem[:2] / f"{stem}.md"

    # -- verdicts -------------------------------------------------------------------------------

    @property
    def db(self) -> sqlite3.Connection:
        """The output's database (tasks/database.py), opened at the first use."""
        if self._db is None:
            self._db = connect(self.dir)
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

    def verdicts_for(self, shas: list[str]) -> dict[tuple[str, str], Verdict]:
        """The stored verdicts of these sha256s (every key), by (sha256, key)."""
        out: dict[tuple[str, str], Verdict] = {}
        if not shas or not self.db_path.exists():
            return out
        for sha, key, body in self._rows("sha256, key, body", shas):
            try:
                out[(sha, key)] = Verdict.from_store(json.loads(body))
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def made(self, shas: list[str]) -> set[tuple[str, str]]:
        """The (sha256, key) pairs of these sha256s whose verdicts this run made."""
        if not shas or not self.run or not self.db_path.exists():
            return set()
        return {(sha, key) for sha, key, run in self._rows("sha256, key, run", shas)
                if run == self.run}

    def made_count(self) -> int:
        """How many verdicts this run made (an indexed count)."""
        return self._one("SELECT count(*) FROM verdicts WHERE run = ?", self.run) \
            if self.run and self.db_path.exists() else 0

    def _rows(self, columns: str, shas: list[str]) -> list[tuple]:
        """Rows of the verdicts of these sha256s (by the primary key)."""
        return [row for at in range(0, len(shas), 500) for row in self._all(
            f"SELECT {columns} FROM verdicts WHERE sha256 IN "
            f"({','.join('?' * len(shas[at:at + 500]))})", *shas[at:at + 500])]

    def _all(self, sql: str, *args: Any) -> list[tuple]:
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise OutputError(f"cannot read the verdict store {self.db_path}: {e}") from None

    def _one(self, sql: str, *args: Any) -> Any:
        return self._all(sql, *args)[0][0]

    def put_many(self, verdicts: list[tuple[str, str, Verdict]],
                 plain: Iterable[tuple[str, str]] = ()) -> None:
        """Commit (sha256, key, verdict) rows in one transaction, after making their texts
        durable; ``plain``: the (sha256, key) pairs among them whose texts went to the plain
        names (their owners from now on)."""
        if not verdicts:
            return
        self._unstamp()
        self.sync()
        rows = [(sha, key, v.status.value, dumps(v.to_json()), self.run)
                for sha, key, v in verdicts]
        try:
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany("INSERT OR REPLACE INTO verdicts (sha256, key, status, body, "
                                    "run) VALUES (?,?,?,?,?)", rows)
                owners.own(self.db, plain)
                backoff.record(self.db, verdicts, self.run)  # in the same transaction
        except sqlite3.Error as e:
            raise OutputError(f"cannot record verdicts in {self.db_path}: {e}") from None

    def _unstamp(self) -> None:
        """Before the first verdict changes: the no-op stamp no longer holds (it does not
        follow the database's bytes, which every walk writes to)."""
        if not self._unstamped:
            self.dir.unlink(STAMP)
            self._unstamped = True

    def forget(self, pairs: Iterable[tuple[str, str]]) -> int:
        """Drop the verdicts of these (sha256, key) pairs (``doit forget``); how many."""
        pairs = list(pairs)
        if not pairs or not self.db_path.exists():
            return 0
        self._unstamp()
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
        """The file names in the store (one ``scandir`` per bucket, not a stat per text),
        read through the buckets' descriptors."""
        names: set[str] = set()
        od = self.dir
        for bucket in self._bucket_dirs():
            try:
                with os.scandir(od.dir_fd(f"extract/{bucket}", create=False)) as it:
                    names.update(e.name for e in it)
            except OSError:
                continue  # gone, or a link where a bucket should be: never followed
        return names

    def _bucket_dirs(self) -> list[str]:
        """The names of the bucket directories (two hex digits; links are not buckets)."""
        if self._dir is None and not os.path.isdir(self.root):
            return []  # nothing stored: and a listing command must not create the output
        try:
            with os.scandir(self.dir.dir_fd("extract", create=False)) as it:
                return sorted(e.name for e in it if len(e.name) == 2
                              and e.is_dir(follow_symlinks=False))
        except OSError:
            return []

    @staticmethod
    def _rel(stem: str, suffix: str) -> str:
        return f"extract/{stem[:2]}/{stem}{suffix}"

    def adopt_text(self, stem: str, tmp: Path, suffix: str = ".txt") -> None:
        """Move a worker's finished text file (or its Markdown: ``suffix`` ``.md``) into the
        store, atomically (``renameat`` into the bucket's descriptor; what arrives must be a
        regular file, given the store's mode)."""
        self.dir.adopt(tmp, self._rel(stem, suffix))
        self._dirty = True

    def write_text(self, stem: str, data: bytes, suffix: str = ".txt") -> None:
        """Store a text (or its Markdown: ``suffix`` ``.md``) handed over as bytes (made
        elsewhere: a cluster worker)."""
        self.dir.write(self._rel(stem, suffix), data, sync=False)  # durable at the commit
        self._dirty = True

    def write_meta(self, stem: str, meta: dict[str, Any]) -> None:
        body = json.dumps(meta, sort_keys=True, ensure_ascii=True, indent=1) + "\n"
        # no fsync of its own: like the texts, the sidecar is made durable by the commit's
        # syncfs, before the verdict that stands for it (a crash before that re-extracts)
        self.dir.write(self._rel(stem, ".meta.json"), body.encode("ascii"), sync=False)
        self._dirty = True

    def remove_meta(self, stem: str, suffix: str = ".meta.json") -> None:
        """Remove a text's sidecar (or its Markdown: ``suffix`` ``.md``), if there is one."""
        try:
            self.dir.unlink(self._rel(stem, suffix))
        except FileNotFoundError:
            pass

    def remove_text(self, stem: str) -> None:
        for suffix in (".txt", ".md", ".meta.json"):
            try:
                self.dir.unlink(self._rel(stem, suffix))
            except FileNotFoundError:
                pass

    def remove_unreferenced(self, referenced: Callable[[str], Container[str]],
                            markdown: Callable[[str], Container[str]] | None = None) -> int:
        """Delete every store file whose stem no record references (texts and sidecars of
        deleted or edited files): ``referenced(bucket)`` gives the stems the records name in
        one bucket (:meth:`bastion.tasks.extract.table.Records.stems`), ``markdown(bucket)``
        those whose records name a Markdown too (asked only of a bucket holding one: a
        ``.md`` no record names goes, as after a run with ``markdown: true`` turned off).
        Called only once the records that dropped them are durable, so a crash before or
        during it loses nothing.  Returns how many."""
        removed = 0
        od = self.dir
        for bucket in self._bucket_dirs():
            rel_bucket = f"extract/{bucket}"
            try:
                bfd = od.dir_fd(rel_bucket, create=False)
            except OSError:
                continue  # gone, or a link where a bucket should be: never followed
            removed += _sweep_bucket(bfd, bucket, referenced, markdown)
            od.rmdir(rel_bucket)  # only when empty
        return removed

    def sync(self) -> None:
        """Make the texts and renames so far durable: one ``syncfs`` of the output filesystem
        (instead of an fsync per file), then the touched directories."""
        if not self._dirty:
            return
        syncfs(Path(f"/proc/self/fd/{self.dir.fd}"))  # else os.sync(), which covers all of it
        self._dirty = False

    def close(self) -> None:
        self.sync()
        if self._db is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            self._db.close()
            self._db = None
