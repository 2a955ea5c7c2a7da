"""The extract stage's records in the output's database (the ``records`` table), their export
``extract.jsonl``, and what changed since the walk generation they were made from.

One row per record, keyed like the walk's by (root, dir, name): the fields the record repeats
from the walk (path, sha256, MIME type), the task key whose verdict (in ``verdicts``) it
carries, or, with no key, why it is skipped; ``reused`` and ``stem`` (its text's name in the
store, for an ``ok`` verdict).  A line of extract.jsonl is re-encoded from its row joined with
its verdict (and a repeat offender's backoff, ``retries``): :func:`line_of`.  The line bytes are
not stored.

``records_state`` holds the walk generation the rows were made from (``gen``) and the identity
of the export that matches them (``export``); rows are changed only after ``export`` is cleared
in the same transaction, so a run killed before its export is written leaves an export that
does not match: the next run plans in full and writes it from one ordered query.

A run after a small change (:func:`bastion.tasks.extract.runplan.plan_change`) plans only the keys the walk logged after
``gen`` (``walk_log``, :mod:`bastion.tasks.walk.table`); :meth:`Records.apply` replaces their
rows, flags the rows the previous run extracted as reused, and splices those lines into the
previous export (:func:`bastion.tasks.output.splice.splice`).  "Texts no record names" is an
indexed query on ``stem`` (:meth:`Records.names`).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from bastion.readers.runtime.verdict import Status, Verdict

from ..output.atomic import identity
from ..output.directory import OutputDir
from ..output.modes import OutputError
from ..output.splice import export, splice
from ..records import ExtractRecord, WalkRecord, to_line
from ..walk.table import decode, encode
from . import plan as _plan

if TYPE_CHECKING:
    from .plan import Item

__all__ = ["NOT_YET", "Records", "Row", "line_of", "make_row", "markdown_file", "markdown_of"]

NOT_YET = "not extracted yet (run the extract stage)"
BATCH_ROWS = 5000  # rows written per transaction
MAX_SHARE = 0.01  # changed lines per record, to splice (more: written in full)
MIN_CHANGES = 64

# (root, dir, name, path, sha256, mime, key, skip, reused, stem)
Row = tuple
COLUMNS = "root, dir, name, path, sha256, mime, key, skip, reused, stem"
SELECT = ("SELECT r.root, r.path, r.sha256, r.mime, r.key, r.skip, r.reused, r.stem, v.body, "
          "t.failures, t.due FROM records r "
          "LEFT JOIN verdicts v ON v.sha256 = r.sha256 AND v.key = r.key "
          "LEFT JOIN retries t ON t.sha256 = r.sha256 AND t.key = r.key")
BY_KEY = " WHERE r.root = ? AND r.dir = ? AND r.name = ?"


def make_row(root: str, path: str, sha256: str | None, mime: str | None, key: str | None,
             skip: str | None, reused: bool, stem: str | None) -> Row:
    """A ``records`` row: ``key`` (the verdict's) or ``skip`` (why there is none)."""
    rel, _, name = path.rpartition("/")
    return (root, encode(rel), encode(name), encode(path), sha256, mime, key, skip,
            int(reused), stem)


def record(root: str, path: str, sha256: str | None, mime: str | None, verdict: Verdict | None,
           skip: str | None, reused: bool, stem: str | None,
           retry: tuple[int, int] | None, run: int) -> ExtractRecord:
    """The record of one row: skipped (``skip``, or no verdict: not extracted yet; ``reused``
    once a later run kept every verdict, as for any record), or the verdict's, naming its
    text and, for a repeat offender's error, its backoff."""
    if verdict is None:
        return ExtractRecord(root=root, path=path, sha256=sha256, mime=mime,
                             verdict=Verdict(status=Status.SKIPPED, error=skip or NOT_YET),
                             v=_plan.EXTRACT_VERSION, reused=reused)
    text = f"extract/{stem[:2]}/{stem}.txt" if stem is not None else None
    markdown = markdown_file(stem) if stem is not None and verdict.markdown else None
    backoff = retry if verdict.status is Status.ERROR else None
    return ExtractRecord(root=root, path=path, sha256=sha256, mime=mime, verdict=verdict,
                         v=_plan.EXTRACT_VERSION, reused=reused, text=text,
                         retry=None if backoff is None else
                         {"failures": backoff[0], "next_try_in_runs": max(backoff[1] - run, 1)},
                         markdown=markdown)


def markdown_file(stem: str) -> str:
    """The store file of a text's Markdown, relative to the output directory (what an ok
    record of a run with ``markdown: true`` names): ``extract/<aa>/<stem>.md``."""
    return f"extract/{stem[:2]}/{stem}.md"


def markdown_of(out: Path, record: dict[str, Any]) -> Path | None:
    """The Markdown file an extract record (a parsed extract.jsonl line) names, as a path
    under the output directory ``out``; None when it names none (not ok, or a run without
    ``markdown: true``).  Only a name of the store's own form is taken."""
    name = record.get("markdown")
    if not isinstance(name, str) or not _MARKDOWN_FILE.fullmatch(name):
        return None
    return Path(out) / name


_MARKDOWN_FILE = re.compile(r"extract/[0-9a-f]{2}/[0-9a-f]{64}(\.[0-9a-f]{16})?\.md")


def line_of(row: tuple, run: int) -> bytes:
    """The extract.jsonl line of a :data:`SELECT` row, in run ``run`` (a backoff counts
    runs from it)."""
    root, path, sha, mime, key, skip, reused, stem, body, failures, due = row
    verdict = None
    if key is not None:
        try:
            verdict = None if body is None else Verdict.from_store(json.loads(body))
        except (ValueError, KeyError, TypeError):
            verdict = None  # a damaged verdict: as the store reads it, not there
        if verdict is None:
            reused = False  # not extracted yet (the verdict it had is gone)
    return to_line(record(root, decode(path), sha, mime, verdict, skip, bool(reused),
                          stem if verdict is not None and verdict.status is Status.OK else None,
                          None if failures is None else (failures, due), run))


class Records:
    """The ``records`` table of one output (see the module); ``db`` is the store's
    connection (:attr:`bastion.tasks.extract.store.Store.db`)."""

    def __init__(self, db: sqlite3.Connection, od: OutputDir) -> None:
        self.db = db
        self.od = od
        self.name = "extract.jsonl"

    def state(self, name: str) -> Any:
        row = self.db.execute("SELECT value FROM records_state WHERE name = ?",
                              (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _set(self, name: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO records_state VALUES (?, ?)",
                        (name, json.dumps(value)))

    def matches(self) -> bool:
        """Whether extract.jsonl is the export of the rows, made from a known walk."""
        try:
            export_ = self.state("export")
            gen = self.state("gen")
        except sqlite3.Error:
            return False
        return gen is not None and export_ is not None and export_ == identity(self.od, self.name)

    def _write(self, sql: str, args: Iterable[Any] = (), many: bool = False) -> None:
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                self._set("export", None)  # the rows change: no export matches them
                if many:
                    self.db.executemany(sql, args)
                else:
                    self.db.execute(sql, tuple(args))
        except sqlite3.Error as e:
            raise OutputError(f"cannot record the records in the database: {e}") from None

    def _exported(self, gen: int | None = None) -> None:
        try:
            with self.db:
                self.db.execute("BEGIN IMMEDIATE")
                if gen is not None:
                    self._set("gen", gen)
                    # the walk's changes up to gen are in these rows: the log of them goes
                    self.db.execute("DELETE FROM walk_log WHERE gen <= ?", (gen,))
                self._set("export", identity(self.od, self.name))
        except sqlite3.Error as e:
            raise OutputError(f"cannot record the records in the database: {e}") from None

    # -- writing ------------------------------------------------------------------------

    def write_all(self, pairs: Iterable[tuple[bytes, Row]], gen: int) -> None:
        """Replace every row with those of ``pairs`` (line, row, in (root, path) order),
        committed a batch at a time as the lines are written to extract.jsonl."""
        self._write("DELETE FROM records")

        def lines() -> Iterator[bytes]:
            batch: list[Row] = []
            for line, row in pairs:
                batch.append(row)
                if len(batch) >= BATCH_ROWS:
                    self._write(f"INSERT INTO records ({COLUMNS}) VALUES "
                                f"({','.join('?' * 10)})", batch, many=True)
                    batch = []
                yield line
            self._write(f"INSERT INTO records ({COLUMNS}) VALUES ({','.join('?' * 10)})",
                        batch, many=True)

        export(self.od, self.name, lines())
        self._exported(gen)

    def export_all(self, run: int) -> None:
        """extract.jsonl written in full from one ordered query."""
        def lines() -> Iterator[bytes]:
            cursor = self.db.execute(SELECT + " ORDER BY r.root, r.path")
            while rows := cursor.fetchmany(4096):
                for row in rows:
                    yield line_of(row, run)

        export(self.od, self.name, lines())
        self._exported()

    def _lines_of(self, keys: Iterable[tuple[str, bytes, bytes]], run: int
                  ) -> list[tuple[tuple[str, str], bytes | None]]:
        out: list[tuple[tuple[str, str], bytes | None]] = []
        for key in keys:
            row = self.db.execute(SELECT + BY_KEY, key).fetchone()
            if row is not None:
                out.append(((row[0], decode(row[1])), line_of(row, run)))
        return out

    def _splice(self, changes: list[tuple[tuple[str, str], bytes | None]], count: int,
                run: int, trusted: bool) -> None:
        """Splice the changed lines into a matching export, else write it in full."""
        if trusted and len(changes) <= _limit(count):
            try:
                splice(self.od, self.name, changes)
            except (ValueError, OSError):
                pass  # not a sorted export: written in full below
            else:
                self._exported()
                return
        self.export_all(run)

    def _flip(self, limit: int) -> list[tuple[str, bytes, bytes]] | None:
        """Flag reused the rows the previous run extracted (``reused`` false: this run kept
        their verdicts), in one statement; their keys, or None when there are more than
        ``limit`` (the export is then written in full)."""
        n = self.db.execute("SELECT count(*) FROM records WHERE reused = 0").fetchone()[0]
        keys = None
        if n <= limit:
            keys = [tuple(k) for k in self.db.execute(
                "SELECT root, dir, name FROM records WHERE reused = 0").fetchall()]
        if n:
            self._write("UPDATE records SET reused = 1 WHERE reused = 0")
        return keys

    def flip(self, count: int, run: int) -> bool:
        """A run that kept every verdict: every record now says reused (the lines the
        previous run extracted change, spliced in); whether extract.jsonl was written."""
        if not self.matches():  # (the rows may not be whole: the next run plans in full)
            return False
        keys = self._flip(_limit(count))
        if keys == []:
            return False
        if keys is None:
            self.export_all(run)
        else:
            self._splice(self._lines_of(keys, run), count, run, True)
        return True

    def apply(self, change: "Change", pairs: Iterable[tuple[bytes, Row]], count: int,
              run: int) -> list[dict[str, Any]]:
        """A run that planned only the walk's change: the changed keys' rows replaced by
        ``pairs`` (line, row), the previous run's extracted rows flagged reused, the export
        spliced.  Returns the records that went (parsed), for the counts and the texts."""
        trusted = self.matches()
        gone = [json.loads(line) for _, line in self._lines_of(change.keys, run) if line]
        flipped = self._flip(_limit(count))
        pairs = list(pairs)
        self._write("DELETE FROM records WHERE root = ? AND dir = ? AND name = ?",
                    change.keys, many=True)
        self._write(f"INSERT INTO records ({COLUMNS}) VALUES ({','.join('?' * 10)})",
                    [row for _, row in pairs], many=True)
        if flipped is None:
            self.export_all(run)
        else:
            keyset = set(change.keys)
            changes: list[tuple[tuple[str, str], bytes | None]] = [
                ((root, decode(d) + "/" + decode(n) if d else decode(n)), None)
                for root, d, n in change.keys]
            changes += [((row[0], decode(row[3])), line) for line, row in pairs]
            changes += self._lines_of([k for k in flipped if k not in keyset], run)
            self._splice(changes, count, run, trusted)
        self._exported(change.gen)
        return gone

    def reset(self, item: Item, run: int) -> None:
        """One file's record made ``skipped`` (not extracted yet: ``doit clean
        extract:<file>``), and the export following it."""
        rel, _, name = item.path.rpartition("/")
        key = (item.root, encode(rel), encode(name))
        trusted = self.matches()
        self._write("UPDATE records SET key = NULL, skip = ?, reused = 0, stem = NULL "
                    "WHERE root = ? AND dir = ? AND name = ?", (NOT_YET, *key))
        if trusted:  # (else the rows may not be whole: the next run writes it in full)
            self._splice(self._lines_of([key], run), 0, run, trusted)

    # -- asking -------------------------------------------------------------------------

    def stems(self, bucket: str) -> set[str]:
        """The stems the records name in one store bucket (those starting with ``bucket``: an
        indexed range, so the full run's clean-up holds one bucket's names at a time)."""
        return {r[0] for r in self.db.execute(
            "SELECT DISTINCT stem FROM records WHERE stem >= ? AND stem < ?",
            (bucket, bucket + "\uffff"))}

    def markdown_stems(self, bucket: str) -> set[str]:
        """The stems in one store bucket whose records name a Markdown too (their verdict's
        ``markdown``)."""
        return {r[0] for r in self.db.execute(
            "SELECT DISTINCT r.stem FROM records r JOIN verdicts v ON v.sha256 = r.sha256 "
            "AND v.key = r.key WHERE r.stem >= ? AND r.stem < ? "
            "AND json_extract(v.body, '$.markdown') = 1", (bucket, bucket + "\uffff"))}

    def names(self, stem: str, besides: tuple[str, str] | None = None) -> int:
        """How many records name the text ``stem`` (other than ``besides``' (root, path))."""
        rows = self.db.execute("SELECT root, path FROM records WHERE stem = ?",
                               (stem,)).fetchall()
        if besides is not None:
            other = (besides[0], encode(besides[1]))
            rows = [r for r in rows if tuple(r) != other]
        return len(rows)


def _limit(count: int) -> int:
    """The most changed lines spliced into an export of ``count`` records."""
    return max(MIN_CHANGES, int(count * MAX_SHARE))


class Change:
    """The keys the walk logged after the generation the records were made from, up to
    ``gen`` (the walk's now)."""

    def __init__(self, keys: list[tuple[str, bytes, bytes]], gen: int) -> None:
        self.keys = keys
        self.gen = gen


def changed(db: sqlite3.Connection, since: int) -> tuple[list[WalkRecord], Change] | None:
    """The walk records of the keys logged after generation ``since`` (in (root, path)
    order; the keys removed have none), and the :class:`Change`; None when the log does not
    reach back to ``since``."""
    def state(name: str) -> Any:
        row = db.execute("SELECT value FROM walk_state WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    base, gen = state("log_base"), state("gen")
    if base is None or gen is None or not base <= since <= gen:
        return None
    rows = db.execute(
        "SELECT l.root, l.dir, l.name, w.path, w.kind, w.size, w.mtime_ns, w.inode, "
        "w.sha256, w.reason, w.mime, w.error FROM walk_log l LEFT JOIN walk w "
        "ON w.root = l.root AND w.dir = l.dir AND w.name = l.name WHERE l.gen > ?",
        (since,)).fetchall()
    records = sorted((WalkRecord(r[0], decode(r[3]), *r[4:]) for r in rows if r[3] is not None),
                     key=lambda w: (w.root, w.path))
    return records, Change([(r[0], r[1], r[2]) for r in rows], gen)


WALK_FIELDS = "root, path, kind, size, mtime_ns, inode, sha256, reason, mime, error"


def walk_records(db: sqlite3.Connection) -> Iterator[WalkRecord]:
    """The walk table's rows as records, in (root, path) order (walk.jsonl's), streamed
    :data:`BATCH_ROWS` at a time: what a full plan is made from."""
    cursor = db.execute(f"SELECT {WALK_FIELDS} FROM walk ORDER BY root, path")
    try:
        while rows := cursor.fetchmany(BATCH_ROWS):
            for r in rows:
                yield WalkRecord(r[0], decode(r[1]), *r[2:])
    finally:
        cursor.close()


def walk_gen(db: sqlite3.Connection) -> int:
    """The walk's generation now (what the records are made from)."""
    row = db.execute("SELECT value FROM walk_state WHERE name = 'gen'").fetchone()
    return 0 if row is None else int(json.loads(row[0]) or 0)


class StoreTexts:
    """``name in texts``: whether the store holds that file (one stat, for the few items a
    change plans; the full plan lists every bucket instead)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and os.path.exists(self.root / name[:2] / name)
