"""The extract stage's plan: which reader reads each walked file, under which key, and whether
its stored verdict still stands.

:func:`plan` is a function of data — the walk's records, the stored verdicts, the reader
registry, the tools found and the limits — so it is tested without processes.  Its result, a
:class:`Plan`, holds the items in a SQLite database of its own (a temporary file, not the
output's): a run holds no object per file, "stale" is a query (one item per (sha256, key),
largest first) and the jobs handed out are a column of it; what the run made is the store's
(the verdicts' ``run``).  A file's task
key (:func:`task_key`) is everything besides its bytes that decides its verdict: the extractor
version, the reader's name and version, the MIME type, the limits the reader's text depends
on, the identity of every external tool the reader may call (present or absent), the
versions of the Python libraries it reads with (and py3langid's, which names every text's
languages), and the renderings stored (the Markdown beside the text, ``markdown: true``, with
the renderer's version).  Same key and same sha256 ⇒ the stored verdict stands, whatever its status,
except ``error``, which is retried on every run, or, for a repeat offender (a timeout, memory
or crash verdict that keeps coming back: tasks/extract/store.py), at the runs its backoff
says (``deferred``); and except a verdict whose OCR looked at language packs
(``ocr_packs``) that are no longer what they were (readers/ocr/packs.py).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable, Container, Iterable, Iterator, Mapping, Sequence, overload

from bastion.readers.base import Limits, Reader
from bastion.readers.ocr import packs as ocr_packs
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..records import WalkRecord
from ..walk.table import decode, encode
from .store import text_stem

# Raise when any reader's output changes: every verdict and text is redone on the next run.
EXTRACT_VERSION = 2
# Raise when the Markdown rendering changes (readers/render/markdown.py): every document of a
# run with ``markdown: true`` is rendered again (a run without it is not touched).
MARKDOWN_VERSION = 1

COMMON_SETTINGS = ("max_chars", "max_parts")  # Limits that change every reader's text
# Python distributions every reader's record depends on: the language identification
COMMON_LIBRARIES = ("py3langid",)

Select = Callable[[str, str], "Reader | None"]  # (mime, file name) -> reader


_VERSIONS: dict[str, str | None] = {}  # the distributions' versions found so far


def library_version(distribution: str) -> str | None:
    """The installed version of a Python distribution a reader names (None: not installed),
    read once per process (``importlib.metadata`` scans the import path: ≈ 4 ms a name)."""
    try:
        return _VERSIONS[distribution]
    except KeyError:
        pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        found: str | None = version(distribution)
    except PackageNotFoundError:
        found = None
    _VERSIONS[distribution] = found
    return found


def known_versions(versions: Mapping[str, str | None]) -> None:
    """Versions this installation's distributions were found to have by an earlier run, taken
    under the same readers' fingerprint (tasks/extract/stamp.py ``installed_registry``: the
    fingerprint follows every directory of the import path, so an install, upgrade or
    removal is a new one)."""
    for name, found in versions.items():
        if isinstance(name, str) and (found is None or isinstance(found, str)):
            _VERSIONS.setdefault(name, found)


def task_key(reader: Reader | None, mime: str, limits: Limits,
             tools: Mapping[str, Tool], markdown: bool = False) -> str:
    """The digest of what decides a verdict besides the bytes (see the module docstring).
    ``markdown``: the Markdown is rendered and stored too (a key of its own, so turning it
    on re-reads each document once; off, the key is the one without it)."""
    if reader is None:
        parts: list[Any] = [EXTRACT_VERSION, None, mime]
    else:
        names = COMMON_SETTINGS + reader.settings
        settings = {name: getattr(limits, name) for name in names}
        used = [[t, tools[t].key if t in tools else None] for t in sorted(reader.tools)]
        libs = [[lib, library_version(lib)]
                for lib in sorted(set(reader.libraries) | set(COMMON_LIBRARIES))]
        parts = [EXTRACT_VERSION, reader.name, reader.version, mime, settings, used]
        if libs:
            parts.append(libs)
        if limits.external_off and reader.tools:  # its record says the tools were off
            parts.append("external_off")
        if markdown:
            parts.append(["markdown", MARKDOWN_VERSION])
    blob = json.dumps(parts, sort_keys=True, default=list).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Item:
    """One hashed file of the walk, planned."""

    root: str
    path: str
    sha256: str
    mime: str
    size: int
    reader: str | None  # the reader chosen for it (None: no reader for its type)
    key: str
    stem: str  # its text's name in the store (store.text_stem)
    tools: tuple[str, ...]  # the reader's tools present here (handed to the worker)
    deadline_s: float
    fresh: bool  # its stored verdict stands: nothing to do
    index: int  # its place in the plan (walk order, hashed files only)
    canonical: int  # the index of the first item with the same (sha256, key): one job for both
    markdown: bool = False  # its Markdown is rendered and stored beside its text

    def job(self, job_id: int, path: str, tools: Mapping[str, Tool]) -> Job:
        """The document to read, once its ``path`` is resolved (absolute, as the reading
        machine sees it) and its reader's tools located (``tools``: this machine's)."""
        return Job(job_id, path, posixpath.basename(self.path), self.mime, self.sha256,
                   self.size, self.deadline_s, {t: tools[t].path for t in self.tools},
                   self.reader, self.key, self.markdown)


@dataclass(frozen=True, slots=True)
class Choice:
    """The reader chosen for one (MIME type, suffixes) pair, and what follows from it."""

    mime: str
    reader: Reader | None
    key: str
    tools: tuple[str, ...]
    deadline_s: float


# The plan's tables, in a private database of its own (sqlite3.connect(""): a temporary file
# SQLite removes when it is closed; its pages are cached up to CACHE_KB, then spill to disk)
PLAN_SCHEMA = (
    # one row per hashed file, in walk order (idx); its (sha256, key) pair's first row
    # (canonical: its one job), whether its key is the least its bytes are read under
    # (least: that text keeps the plain name, store.text_stem); on a canonical row, whether
    # this run handed its job out (handed)
    """CREATE TABLE items (idx INTEGER PRIMARY KEY, root TEXT NOT NULL, path BLOB NOT NULL,
        sha256 TEXT NOT NULL, size INTEGER NOT NULL, choice INTEGER NOT NULL,
        key TEXT NOT NULL, fresh INTEGER NOT NULL DEFAULT 0, canonical INTEGER,
        least INTEGER, handed INTEGER NOT NULL DEFAULT 0)""",
    # the items to extract, one per (sha256, key), largest first then in walk order (k)
    "CREATE TABLE stale (k INTEGER PRIMARY KEY, idx INTEGER NOT NULL)",
    # the sha256s whose plain-named texts another key's verdict owns (the store's ``plain``
    # table) while this run gives the plain name to a key of its own: Plan.disowned
    "CREATE TABLE owned (sha256 TEXT PRIMARY KEY) WITHOUT ROWID",
)
CACHE_KB = 16384
ITEM = "idx, root, path, sha256, size, choice, fresh, canonical, least"


class Rows(Sequence[Item]):
    """Positions ``start`` to ``stop`` of a plan table (``items`` by idx, ``stale`` by k) as
    :class:`Item` s, read from the plan's database on access (``CHUNK`` rows a query):
    slicing gives another such range, never a list."""

    def __init__(self, plan: "Plan", table: str, start: int, stop: int) -> None:
        self.plan, self.table, self.start, self.stop = plan, table, start, max(start, stop)

    def __len__(self) -> int:
        return self.stop - self.start

    @overload
    def __getitem__(self, i: int) -> Item: ...

    @overload
    def __getitem__(self, i: slice) -> "Rows": ...

    def __getitem__(self, i: int | slice) -> "Item | Rows":
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("a plan's rows are sliced without a step")
            return Rows(self.plan, self.table, self.start + start, self.start + stop)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return next(self.plan._read(self.table, self.start + i, self.start + i + 1))

    def __iter__(self) -> Iterator[Item]:
        for at in range(self.start, self.stop, CHUNK):
            yield from self.plan._read(self.table, at, min(at + CHUNK, self.stop))


class Plan:
    """The plan of one run: its items in a database of their own (:data:`PLAN_SCHEMA`), so a
    run holds no object per file; the walk records without a sha256 (nothing to extract)
    re-read from the walk, or held when the plan was made from a list."""

    def __init__(self, skipped_source: Callable[[], Iterable[WalkRecord]],
                 markdown: bool = False) -> None:
        self.markdown = markdown  # every item's Markdown rendered and stored too
        self.db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", f"cache_size=-{CACHE_KB}"):
            self.db.execute(f"PRAGMA {pragma}")
        for table in PLAN_SCHEMA:
            self.db.execute(table)
        self.choices: list[Choice] = []
        self.count = 0
        self.skipped_source = skipped_source
        self._stale: int | None = None  # rows of ``stale``; None: to be (re)made

    @property
    def skipped(self) -> Iterable[WalkRecord]:
        """The walk records without a sha256, in walk order."""
        return self.skipped_source()

    @property
    def items(self) -> Rows:
        """The hashed files, in walk order."""
        return Rows(self, "items", 0, self.count)

    @property
    def stale(self) -> Rows:
        """The items to extract, one per (sha256, key), largest first (then in walk order):
        the long documents start early, so no worker is left alone with one at the end.
        Records are sorted when written, so this order changes no output.  A query, made
        again after :meth:`unfresh`."""
        if self._stale is None:
            with self.db:
                self.db.execute("BEGIN")
                self.db.execute("DELETE FROM stale")
                self.db.execute("INSERT INTO stale (k, idx) SELECT row_number() OVER "
                                "(ORDER BY size DESC, idx) - 1, idx FROM items "
                                "WHERE canonical = idx AND NOT fresh")
            self._stale = self.db.execute("SELECT count(*) FROM stale").fetchone()[0]
        return Rows(self, "stale", 0, self._stale)

    def _read(self, table: str, start: int, stop: int) -> Iterator[Item]:
        if table == "items":
            sql = f"SELECT {ITEM} FROM items WHERE idx >= ? AND idx < ? ORDER BY idx"
        else:
            sql = (f"SELECT {', '.join('i.' + c for c in ITEM.split(', '))} FROM stale s "
                   "JOIN items i ON i.idx = s.idx WHERE s.k >= ? AND s.k < ? ORDER BY s.k")
        for idx, root, path, sha, size, choice, fresh, canonical, least in self.db.execute(
                sql, (start, stop)).fetchall():
            c = self.choices[choice]
            yield Item(root, decode(path), sha, c.mime, size,
                       c.reader.name if c.reader is not None else None, c.key,
                       text_stem(sha, c.key, bool(least)), c.tools, c.deadline_s, bool(fresh),
                       idx, canonical, self.markdown)

    def _add(self, rows: list[tuple]) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT INTO items (idx, root, path, sha256, size, choice, key)"
                                " VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        self.count += len(rows)

    def _link(self) -> None:
        """Each item's first item of equal (sha256, key) and whether its key is the least
        its bytes are read under: two grouping queries, sorted on disk."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("CREATE TABLE pairs (sha256 TEXT, key TEXT, first INTEGER, "
                            "PRIMARY KEY (sha256, key)) WITHOUT ROWID")
            self.db.execute("INSERT INTO pairs SELECT sha256, key, min(idx) FROM items "
                            "GROUP BY sha256, key")
            self.db.execute("CREATE TABLE least (sha256 TEXT PRIMARY KEY, key TEXT) "
                            "WITHOUT ROWID")
            self.db.execute("INSERT INTO least SELECT sha256, min(key) FROM pairs "
                            "GROUP BY sha256")
            self.db.execute("UPDATE items SET canonical = p.first, least = (items.key = l.key) "
                            "FROM pairs p JOIN least l ON l.sha256 = p.sha256 "
                            "WHERE p.sha256 = items.sha256 AND p.key = items.key")
            self.db.execute("DROP TABLE least")
            self.db.execute("DROP TABLE pairs")

    def own(self, shas: list[tuple[str]]) -> None:
        """Note sha256s whose plain names another key owns (see :meth:`disowned`)."""
        if shas:
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany("INSERT OR IGNORE INTO owned (sha256) VALUES (?)", shas)

    def set_fresh(self, idxs: Iterable[int], fresh: bool) -> None:
        """Mark these items fresh (their stored verdict stands) or not."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("UPDATE items SET fresh = ? WHERE idx = ?",
                                ((int(fresh), i) for i in idxs))
        self._stale = None

    def disowned(self) -> Iterator[str]:
        """The sha256s whose plain-named texts this run will replace with another key's (a
        stale item's), to be disowned in the store before any is (Store.disown)."""
        for sha, in self.db.execute(
                "SELECT DISTINCT o.sha256 FROM owned o JOIN items i ON i.sha256 = o.sha256 "
                "WHERE i.least AND NOT i.fresh ORDER BY o.sha256"):
            yield sha

    def hand_out(self, item: Item) -> bool:
        """Whether ``item``'s job is to be handed out now: not when its (sha256, key) already
        was in this run (the same document; marked here)."""
        return self.db.execute("UPDATE items SET handed = 1 WHERE idx = ? AND handed = 0",
                               (item.canonical,)).rowcount == 1  # (one autocommit statement)

    def unfresh(self, which: Callable[[Item], bool]) -> None:
        """The fresh items ``which`` picks made stale (``doit forget``)."""
        self.set_fresh([i.index for i in self.items if i.fresh and which(i)], False)


def _suffixes(name: str) -> str:
    """The name's last two suffixes (``.tar.gz``, ``.txt``, ``""``): all that reader selection by
    extension looks at, so a (mime, suffixes) pair selects like the whole name."""
    lower = name.lower()
    last = lower.rfind(".")
    if last < 0:
        return ""
    prev = lower.rfind(".", 0, last)
    return lower[prev if prev >= 0 else last:]


Lookup = Callable[[list[str]], Mapping[tuple[str, str], Verdict]]  # sha256s -> their verdicts
Owners = Callable[[list[str]], Mapping[str, str]]  # sha256s -> the key owning their plain names
CHUNK = 2000  # items whose verdicts are looked up at once


def plan(walk: Iterable[WalkRecord] | Callable[[], Iterable[WalkRecord]],
         verdicts: Mapping[tuple[str, str], Verdict] | Lookup,
         select: Select, tools: Mapping[str, Tool], limits: Limits,
         texts: Container[str], deferred: Container[tuple[str, str]] = (),
         markdown: bool = False, owners: Owners | None = None) -> Plan:
    """Plan every walked file.  ``walk`` is the records, or a function reading them again
    (then the records without a sha256 are not held: :attr:`Plan.skipped` re-reads them).
    ``verdicts`` are the stored ones by (sha256, key), or a function giving those of some
    sha256s (looked up :data:`CHUNK` items at a time); ``texts`` the file names in the store
    (an ``ok`` verdict stands only while its text is there, and its Markdown when
    ``markdown``); ``deferred`` the (sha256, key) pairs whose ``error`` verdict stands in
    this run (repeat offenders not due yet); ``markdown``: every text's Markdown is rendered
    and stored too (in the keys); ``owners``: the key whose text each sha256's plain names
    hold (the store's ``plain`` table: an ``ok`` verdict stands on a plain name only while its
    key owns it); None: every plain name is its verdict's (a plan of no store)."""
    records, reread, held = _source(walk)
    made = Plan(lambda: (r for r in reread() if r.kind != "file" or r.sha256 is None),
                markdown)
    _fill(made, records, held,
          lambda mime, name: _choose(select(mime, name), mime, tools, limits, markdown))
    made._link()
    lookup: Lookup = verdicts if callable(verdicts) else (lambda shas: verdicts)
    rule = Standing(texts, deferred, markdown, _packs_here(tools))
    for at in range(0, made.count, CHUNK):
        _freshen(made, at, lookup, owners, rule)
    if held is not None:
        kept = tuple(held)
        made.skipped_source = lambda: kept
    return made


def _source(walk: Iterable[WalkRecord] | Callable[[], Iterable[WalkRecord]]
            ) -> tuple[Iterable[WalkRecord], Callable[[], Iterable[WalkRecord]],
                       list[WalkRecord] | None]:
    """The records to plan, how to read them again, and the list the records without a
    sha256 are to be held in (None: they are read again instead)."""
    if callable(walk):
        return walk(), walk, None
    return walk, lambda: (), []  # (the held records are given instead of a second reading)


def _choose(reader: Reader | None, mime: str, tools: Mapping[str, Tool], limits: Limits,
           markdown: bool) -> Choice:
    """What follows from choosing ``reader`` for files of type ``mime``: their key, the
    reader's tools present here and their deadline (the tools' own when it waits on one)."""
    present = tuple(sorted(t for t in reader.tools if t in tools)) if reader else ()
    deadline = limits.deadline_s
    if reader is not None and reader.uses_tool_deadline and present:
        deadline = limits.tool_deadline_s
    return Choice(mime, reader, task_key(reader, mime, limits, tools, markdown), present,
                  deadline)


def _fill(made: Plan, records: Iterable[WalkRecord], held: list[WalkRecord] | None,
          chosen_for: Callable[[str, str], Choice]) -> None:
    """The walk's hashed files written to the plan's items, :data:`CHUNK` rows at a time,
    each with its :class:`Choice` (``chosen_for(mime, name)``, once per (MIME type,
    suffixes)); the other records held in ``held`` (when it is a list)."""
    chosen: dict[tuple[str, str], int] = {}
    rows: list[tuple] = []
    for rec in records:
        sha = rec.sha256
        if rec.kind != "file" or sha is None:
            if held is not None:
                held.append(rec)
            continue
        mime = rec.mime or "application/octet-stream"
        name = rec.path.rsplit("/", 1)[-1]
        pair = (mime, _suffixes(name))
        at = chosen.get(pair)
        if at is None:
            at = chosen[pair] = len(made.choices)
            made.choices.append(chosen_for(mime, name))
        rows.append((made.count + len(rows), rec.root, encode(rec.path), sha, rec.size or 0,
                     at, made.choices[at].key))
        if len(rows) >= CHUNK:
            made._add(rows)
            rows = []
    made._add(rows)


def _packs_here(tools: Mapping[str, Tool]) -> dict[str, str]:
    """The OCR language packs found here (readers/ocr/packs.py), by name: their identity."""
    return {n[len(ocr_packs.TOOL_PREFIX):]: t.key for n, t in tools.items()
            if n.startswith(ocr_packs.TOOL_PREFIX)}


@dataclass(frozen=True, slots=True)
class Standing:
    """When a stored verdict stands (its item is fresh): see the module docstring."""

    texts: Container[str]  # the file names in the store
    deferred: Container[tuple[str, str]]  # (sha256, key) of errors not retried this run
    markdown: bool  # an ok verdict's Markdown must be there too
    installed: Mapping[str, str]  # the OCR language packs here (_packs_here)

    def judge(self, items: Iterable[Item], found: Mapping[tuple[str, str], Verdict],
              owner: Mapping[str, str] | None) -> tuple[list[int], list[tuple[str]]]:
        """The indexes of the ``items`` whose verdict stored for their (sha256, key) (in
        ``found``) stands, and the sha256s whose plain-named texts another key owns
        (``owner``: the key owning each sha256's plain names; None: every plain name is its
        verdict's).  One loop, its rule inline: it is asked of every item of a run."""
        texts, deferred, markdown, installed = (self.texts, self.deferred, self.markdown,
                                                self.installed)
        owned_by, checked = owner or {}, owner is not None
        fresh, owned = [], []
        for item in items:
            plain = checked and item.stem == item.sha256  # its text has the plain name
            if plain and owned_by.get(item.sha256, item.key) != item.key:
                owned.append((item.sha256,))
            v = found.get((item.sha256, item.key))
            if v is not None and (
                    # not an error, or a repeat offender's whose retry is not due this run
                    v.status is not Status.ERROR or (item.sha256, item.key) in deferred) and (
                    # not ok, or its text (and Markdown) stored under a name its key owns
                    v.status is not Status.OK or f"{item.stem}.txt" in texts and (
                        not markdown or f"{item.stem}.md" in texts) and (
                        not plain or owned_by.get(item.sha256) == item.key)) and (
                    # not read by OCR, or with the language packs it looked at as they were
                    v.ocr_packs is None or ocr_packs.holds(v.ocr_packs, installed)):
                fresh.append(item.index)
        return fresh, owned


def _freshen(made: Plan, at: int, lookup: Lookup, owners: Owners | None,
             rule: Standing) -> None:
    """The items ``at`` to ``at`` + :data:`CHUNK` marked fresh where their stored verdict
    stands, and the plain names another key owns noted (:meth:`Plan.own`)."""
    found = lookup(_shas(made, at, least=False))
    if not found:
        return  # (a first run: no item is read back)
    owner = None if owners is None else owners(_shas(made, at, least=True))
    fresh, owned = rule.judge(made.items[at:at + CHUNK], found, owner)
    made.set_fresh(fresh, True)
    made.own(owned)


# the distinct sha256s of a chunk of items, all of them or those keeping the plain name
SHAS = "SELECT DISTINCT sha256 FROM items WHERE idx >= ? AND idx < ? ORDER BY sha256"
SHAS_LEAST = ("SELECT DISTINCT sha256 FROM items WHERE idx >= ? AND idx < ? AND least "
              "ORDER BY sha256")


def _shas(made: Plan, at: int, *, least: bool) -> list[str]:
    """The distinct sha256s of the items ``at`` to ``at`` + :data:`CHUNK`, sorted (``least``:
    of those whose key is the least their bytes are read under: their texts' plain names)."""
    return [sha for sha, in made.db.execute(
        SHAS_LEAST if least else SHAS, (at, at + CHUNK))]


def _chunks(rows: Rows) -> Iterator[list[Item]]:
    """The rows, :data:`CHUNK` at a time."""
    for at in range(0, len(rows), CHUNK):
        yield list(rows[at:at + CHUNK])


def describe(item: Item, verdict: Verdict | None, *, forgotten: bool, other_key: bool,
             retry: tuple[int, int] | None = None) -> str:
    """Why an item's task is up to date or not, in words (``doit info``, ``doit list``).
    ``other_key``: its bytes have a verdict under another key; ``retry``: (failures in a row,
    the runs until its next try) of a repeat offender."""
    if forgotten:
        return "not up to date: forgotten (doit forget)"
    if item.fresh and verdict is not None and verdict.status is Status.ERROR and retry:
        return (f"up to date: error ({verdict.error_kind}) {retry[0]} times in a row; tried "
                f"again in {retry[1]} run(s), or now with --retry-errors")
    if item.fresh and verdict is not None:
        return f"up to date: {verdict.status} under key {item.key}"
    if verdict is None:
        if other_key:
            return ("not up to date: extracted before under another key (the reader, its "
                    "settings or the tools it may call changed)")
        return "not up to date: not extracted yet"
    if verdict.status is Status.ERROR:
        return f"not up to date: error ({verdict.error_kind}) last time, retried on every run"
    if verdict.ocr_packs is not None:
        return ("not up to date: an OCR language pack it looked at was installed, removed or "
                "changed (or its text is missing from the store)")
    return "not up to date: its text (or its Markdown) is missing from the store"
