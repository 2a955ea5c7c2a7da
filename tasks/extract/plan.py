"""The extract stage's plan: which reader reads each walked file, under which key, and whether
its stored verdict still stands.

:func:`plan` is a pure function of data — the walk's records, the stored verdicts, the reader
registry, the tools found and the limits — so it is tested without processes.  A file's task
key (:func:`task_key`) is everything besides its bytes that decides its verdict: the extractor
version, the reader's name and version, the MIME type, the limits the reader's text depends
on, the identity of every external tool the reader may call (present or absent), and the
versions of the Python libraries it reads with (and py3langid's, which names every text's
languages).  Same key and same sha256 ⇒ the stored verdict stands, whatever its status,
except ``error``, which is retried on every run, or, for a repeat offender (a timeout, memory
or crash verdict that keeps coming back: tasks/extract/store.py), at the runs its backoff
says (``deferred``); and except a verdict whose OCR looked at language packs
(``ocr_packs``) that are no longer what they were (readers/ocr/packs.py).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from array import array
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Container, Iterable, Iterator, Mapping, Sequence, overload

from bastion.readers.base import Limits, Reader
from bastion.readers.ocr import packs as ocr_packs
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..records import WalkRecord
from .store import text_stem

# Raise when any reader's output changes: every verdict and text is redone on the next run.
EXTRACT_VERSION = 2

COMMON_SETTINGS = ("max_chars", "max_parts")  # Limits that change every reader's text
# Python distributions every reader's record depends on: the language identification
COMMON_LIBRARIES = ("py3langid",)

Select = Callable[[str, str], "Reader | None"]  # (mime, file name) -> reader


@lru_cache(maxsize=None)
def library_version(distribution: str) -> str | None:
    """The installed version of a Python distribution a reader names (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def task_key(reader: Reader | None, mime: str, limits: Limits,
             tools: Mapping[str, Tool]) -> str:
    """The digest of what decides a verdict besides the bytes (see the module docstring)."""
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

    def job(self, job_id: int, path: str, tools: Mapping[str, Tool]) -> Job:
        """The document to read, once its ``path`` is resolved (absolute, as the reading
        machine sees it) and its reader's tools located (``tools``: this machine's)."""
        return Job(job_id, path, posixpath.basename(self.path), self.mime, self.sha256,
                   self.size, self.deadline_s, {t: tools[t].path for t in self.tools},
                   self.reader, self.key)


@dataclass(frozen=True, slots=True)
class Choice:
    """The reader chosen for one (MIME type, suffixes) pair, and what follows from it."""

    mime: str
    reader: Reader | None
    key: str
    tools: tuple[str, ...]
    deadline_s: float


class IndexSet:
    """A set of plan indices (:attr:`Item.index`, :attr:`Item.canonical`) as one bit each: what a
    run scheduled and produced, at a million files 125 KB instead of a set of pairs."""

    __slots__ = ("_bits", "_n")

    def __init__(self) -> None:
        self._bits = bytearray()
        self._n = 0

    def add(self, i: int) -> None:
        byte, bit = divmod(i, 8)
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits) + 4096))
        if not self._bits[byte] >> bit & 1:
            self._bits[byte] |= 1 << bit
            self._n += 1

    def __contains__(self, i: object) -> bool:
        if not isinstance(i, int) or i < 0:
            return False
        byte, bit = divmod(i, 8)
        return byte < len(self._bits) and bool(self._bits[byte] >> bit & 1)

    def __len__(self) -> int:
        return self._n


class _ItemView(Sequence[Item]):
    """A sequence of :class:`Item` s made on access: a subclass says how many and the k-th."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _make(self, k: int) -> Item:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> Item: ...

    @overload
    def __getitem__(self, i: slice) -> list[Item]: ...

    def __getitem__(self, i: int | slice) -> Item | list[Item]:
        if isinstance(i, slice):
            return [self._make(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._make(i)

    def __iter__(self) -> Iterator[Item]:
        for k in range(len(self)):
            yield self._make(k)


class Items(_ItemView):
    """The planned items, in walk order, held compactly: root, path and sha256 of each in
    one buffer, sizes, choices and flags in arrays (≈ 110 bytes an item instead of ≈ 700 as
    :class:`Item` objects, so a million-file plan fits in ≈ 110 MB).  Items are made on
    access; the reader choices are a small shared table (:class:`Choice`)."""

    FRESH, PRIMARY = 1, 2

    def __init__(self) -> None:
        self.choices: list[Choice] = []
        self._blob = bytearray()  # root \0 path \0 sha256, item after item (utf-8, any str)
        self._ends = array("q")
        self._size = array("q")
        self._choice = array("I")
        self._flags = bytearray()
        self._canonical = array("q")
        self._prefix = array("Q")  # the sha256's first 64 bits: to find equal bytes by sorting

    def append(self, root: str, path: str, sha: str, size: int, choice: int) -> None:
        self._blob += f"{root}\0{path}\0{sha}".encode("utf-8", "surrogatepass")
        self._ends.append(len(self._blob))
        self._size.append(size)
        self._choice.append(choice)
        self._flags.append(0)
        self._canonical.append(len(self._canonical))
        try:
            self._prefix.append(int(sha[:16], 16))
        except ValueError:
            self._prefix.append(0)  # not hex: compared in full like any other

    def __len__(self) -> int:
        return len(self._ends)

    def _fields(self, i: int) -> tuple[str, str, str]:
        start = self._ends[i - 1] if i else 0
        root, path, sha = self._blob[start:self._ends[i]].decode("utf-8", "surrogatepass") \
            .split("\0")
        return root, path, sha

    def sha256(self, i: int) -> str:
        return self._fields(i)[2]

    def key(self, i: int) -> str:
        return self.choices[self._choice[i]].key

    def size(self, i: int) -> int:
        return self._size[i]

    def fresh(self, i: int) -> bool:
        return bool(self._flags[i] & self.FRESH)

    def canonical(self, i: int) -> int:
        return self._canonical[i]

    def set_fresh(self, i: int, fresh: bool) -> None:
        if fresh:
            self._flags[i] |= self.FRESH
        else:
            self._flags[i] &= ~self.FRESH & 0xFF

    def item(self, i: int) -> Item:
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        root, path, sha = self._fields(i)
        c = self.choices[self._choice[i]]
        flags = self._flags[i]
        stem = text_stem(sha, c.key, bool(flags & self.PRIMARY))
        return Item(root, path, sha, c.mime, self._size[i],
                    c.reader.name if c.reader is not None else None, c.key, stem, c.tools,
                    c.deadline_s, bool(flags & self.FRESH), i, self._canonical[i])

    def _make(self, k: int) -> Item:
        return self.item(k)

    def link(self) -> None:
        """Find the items of equal bytes (sorted by the sha256's first 64 bits, compared in
        full within a run of equal prefixes): each item's :attr:`Item.canonical` (the first item
        of its (sha256, key)) and whether its key is the smallest its bytes are read under
        (that text keeps the plain name, :func:`text_stem`).  O(n log n) time, and memory
        of one list of indices while it sorts."""
        n = len(self)
        prefix = self._prefix
        order = sorted(range(n), key=prefix.__getitem__)
        at = 0
        while at < n:
            end = at + 1
            while end < n and prefix[order[end]] == prefix[order[at]]:
                end += 1
            if end == at + 1:
                self._flags[order[at]] |= self.PRIMARY
            else:
                self._link_group(sorted(order[at:end]))
            at = end
        del order

    def _link_group(self, members: list[int]) -> None:
        first_key: dict[str, str] = {}
        first_of: dict[tuple[str, str], int] = {}
        for i in members:  # in walk order
            sha, key = self.sha256(i), self.key(i)
            if sha not in first_key or key < first_key[sha]:
                first_key[sha] = key
            self._canonical[i] = first_of.setdefault((sha, key), i)
        for i in members:
            if first_key[self.sha256(i)] == self.key(i):
                self._flags[i] |= self.PRIMARY

    def stale_order(self) -> array:
        """The indices of the items to extract, one per (sha256, key) (its first item),
        largest first, then in walk order."""
        todo = array("q", (i for i in range(len(self))
                           if self._canonical[i] == i and not self._flags[i] & self.FRESH))
        size = self._size
        return array("q", sorted(todo, key=lambda i: -size[i]))


class Stale(_ItemView):
    """The items to extract (:meth:`Items.stale_order`), made on access."""

    def __init__(self, items: Items, order: array) -> None:
        self.items = items
        self.order = order

    def __len__(self) -> int:
        return len(self.order)

    def _make(self, k: int) -> Item:
        return self.items.item(self.order[k])


@dataclass(frozen=True)
class Plan:
    items: Items  # the hashed files, in walk order
    skipped_source: Callable[[], Iterable[WalkRecord]]  # walk records without a sha256

    @property
    def skipped(self) -> Iterable[WalkRecord]:
        """The walk records without a sha256 (nothing to extract), in walk order: re-read
        from the walk when the plan was made from a file, not held."""
        return self.skipped_source()

    @property
    def stale(self) -> Stale:
        """The items to extract, one per (sha256, key), largest first (then in walk order):
        the long documents start early, so no worker is left alone with one at the end.
        Records are sorted when written, so this order changes no output."""
        return Stale(self.items, self.items.stale_order())


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
CHUNK = 2000  # items whose verdicts are looked up at once


def plan(walk: Iterable[WalkRecord] | Callable[[], Iterable[WalkRecord]],
         verdicts: Mapping[tuple[str, str], Verdict] | Lookup,
         select: Select, tools: Mapping[str, Tool], limits: Limits,
         texts: Container[str], deferred: Container[tuple[str, str]] = ()) -> Plan:
    """Plan every walked file.  ``walk`` is the records, or a function reading them again
    (then the records without a sha256 are not held: :attr:`Plan.skipped` re-reads them).
    ``verdicts`` are the stored ones by (sha256, key), or a function giving those of some
    sha256s (looked up :data:`CHUNK` items at a time); ``texts`` the file names in the store
    (an ``ok`` verdict stands only while its text is there); ``deferred`` the (sha256, key)
    pairs whose ``error`` verdict stands in this run (repeat offenders not due yet)."""
    if callable(walk):
        reread: Callable[[], Iterable[WalkRecord]] = walk
        held: list[WalkRecord] | None = None
        records = walk()
    else:
        held = []
        records = walk
    items = Items()
    chosen: dict[tuple[str, str], int] = {}
    installed = {n[len(ocr_packs.TOOL_PREFIX):]: t.key for n, t in tools.items()
                 if n.startswith(ocr_packs.TOOL_PREFIX)}
    for rec in records:
        sha = rec.sha256
        if rec.kind != "file" or sha is None:
            if held is not None:
                held.append(rec)
            continue
        mime = rec.mime or "application/octet-stream"
        name = rec.path.rsplit("/", 1)[-1]
        at = chosen.get((mime, _suffixes(name)))
        if at is None:
            reader = select(mime, name)
            present = tuple(sorted(t for t in reader.tools if t in tools)) if reader else ()
            deadline = limits.deadline_s
            if reader is not None and reader.uses_tool_deadline and present:
                deadline = limits.tool_deadline_s
            at = chosen[(mime, _suffixes(name))] = len(items.choices)
            items.choices.append(Choice(mime, reader, task_key(reader, mime, limits, tools),
                                        present, deadline))
        items.append(rec.root, rec.path, sha, rec.size or 0, at)
    items.link()
    lookup: Lookup = verdicts if callable(verdicts) else (lambda shas: verdicts)
    for at in range(0, len(items), CHUNK):
        chunk = range(at, min(at + CHUNK, len(items)))
        found = lookup(sorted({items.sha256(i) for i in chunk}))
        if not found:
            continue
        for i in chunk:
            item = items.item(i)
            v = found.get((item.sha256, item.key))
            items.set_fresh(i, v is not None and (
                v.status is not Status.ERROR or (item.sha256, item.key) in deferred) and (
                v.status is not Status.OK or f"{item.stem}.txt" in texts) and (
                v.ocr_packs is None or ocr_packs.holds(v.ocr_packs, installed)))
    if held is not None:
        kept = tuple(held)
        return Plan(items, lambda: kept)

    def skipped() -> Iterator[WalkRecord]:
        return (r for r in reread() if r.kind != "file" or r.sha256 is None)

    return Plan(items, skipped)


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
    return "not up to date: its text is missing from the store"
