"""The extract stage's plan: which reader reads each walked file, under which key, and whether
its stored verdict still stands.

:func:`plan` is a pure function of data — the walk's records, the stored verdicts, the reader
registry, the tools found and the limits — so it is tested without processes.  A file's task
key (:func:`task_key`) is everything besides its bytes that decides its verdict: the extractor
version, the reader's name and version, the MIME type, the limits the reader's text depends
on, the identity of every external tool the reader may call (present or absent), and the
versions of the Python libraries it reads with.  Same
key and same sha256 ⇒ the stored verdict stands, whatever its status, except ``error``, which
is retried on every run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Container, Iterable, Mapping

from bastion.readers.base import Limits, Reader
from bastion.readers.tools import Tool
from bastion.readers.verdict import Status, Verdict

from .records import WalkRecord
from .store import text_stem

# Raise when any reader's output changes: every verdict and text is redone on the next run.
EXTRACT_VERSION = 2

COMMON_SETTINGS = ("max_chars", "max_parts")  # Limits that change every reader's text

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
        libs = [[lib, library_version(lib)] for lib in sorted(reader.libraries)]
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


@dataclass(frozen=True)
class Plan:
    items: tuple[Item, ...]  # the hashed files, in walk order
    skipped: tuple[WalkRecord, ...]  # walk records without a sha256 (nothing to extract)

    @property
    def stale(self) -> list[Item]:
        """The items to extract, one per (sha256, key), largest first (then in walk order):
        the long documents start early, so no worker is left alone with one at the end.
        Records are sorted when written, so this order changes no output."""
        seen: set[tuple[str, str]] = set()
        todo = []
        for item in self.items:
            if item.fresh or (item.sha256, item.key) in seen:
                continue
            seen.add((item.sha256, item.key))
            todo.append(item)
        todo.sort(key=lambda i: -i.size)
        return todo


def _suffixes(name: str) -> str:
    """The name's last two suffixes (``.tar.gz``, ``.txt``, ``""``): all that reader selection by
    extension looks at, so a (mime, suffixes) pair selects like the whole name."""
    lower = name.lower()
    last = lower.rfind(".")
    if last < 0:
        return ""
    prev = lower.rfind(".", 0, last)
    return lower[prev if prev >= 0 else last:]


def plan(walk: Iterable[WalkRecord], verdicts: Mapping[tuple[str, str], Verdict],
         select: Select, tools: Mapping[str, Tool], limits: Limits,
         texts: Container[str]) -> Plan:
    """Plan every walked file.  ``verdicts`` are the stored ones by (sha256, key); ``texts``
    the file names in the store (an ``ok`` verdict stands only while its text is there)."""
    chosen: dict[tuple[str, str], tuple[Reader | None, str, tuple[str, ...], float]] = {}
    rows: list[tuple[WalkRecord, Reader | None, str, tuple[str, ...], float]] = []
    skipped: list[WalkRecord] = []
    first_key: dict[str, str] = {}  # sha256 -> the smallest key it is read under
    for rec in walk:
        sha = rec.sha256
        if rec.kind != "file" or sha is None:
            skipped.append(rec)
            continue
        mime = rec.mime or "application/octet-stream"
        name = rec.path.rsplit("/", 1)[-1]
        cached = chosen.get((mime, _suffixes(name)))
        if cached is None:
            reader = select(mime, name)
            present = tuple(sorted(t for t in reader.tools if t in tools)) if reader else ()
            deadline = limits.deadline_s
            if reader is not None and reader.uses_tool_deadline and present:
                deadline = limits.tool_deadline_s
            cached = (reader, task_key(reader, mime, limits, tools), present, deadline)
            chosen[(mime, _suffixes(name))] = cached
        key = cached[1]
        known = first_key.get(sha)
        if known is None or key < known:
            first_key[sha] = key
        rows.append((rec, *cached))
    items = []
    for rec, reader, key, present, deadline in rows:
        sha = rec.sha256
        assert sha is not None
        stem = text_stem(sha, key, first_key[sha] == key)
        v = verdicts.get((sha, key))
        fresh = v is not None and v.status is not Status.ERROR and (
            v.status is not Status.OK or f"{stem}.txt" in texts)
        items.append(Item(rec.root, rec.path, sha, rec.mime or "application/octet-stream",
                          rec.size or 0, reader.name if reader else None, key, stem, present,
                          deadline, fresh))
    return Plan(tuple(items), tuple(skipped))


def describe(item: Item, verdict: Verdict | None, *, forgotten: bool, other_key: bool) -> str:
    """Why an item's task is up to date or not, in words (``doit info``, ``doit list``).
    ``other_key``: its bytes have a verdict under another key."""
    if forgotten:
        return "not up to date: forgotten (doit forget)"
    if item.fresh and verdict is not None:
        return f"up to date: {verdict.status} under key {item.key}"
    if verdict is None:
        if other_key:
            return ("not up to date: extracted before under another key (the reader, its "
                    "settings or the tools it may call changed)")
        return "not up to date: not extracted yet"
    if verdict.status is Status.ERROR:
        return f"not up to date: error ({verdict.error_kind}) last time, retried on every run"
    return "not up to date: its text is missing from the store"
