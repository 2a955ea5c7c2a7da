"""The no-op check: whether a run has nothing to extract, decided without reading the walk.

At the end of a complete run with no ``error`` record, :func:`save` writes
``.bastion/extract-stamp.json``: a digest of every input that decides a task key (the
manifest, the extractor version, the reader registry, the tools' identities, the external-tool
switch), the run's row in ``runs`` (its summary: tasks/runs.py), and the identities (size,
mtime, ctime, inode) of the files the verdicts live in — walk.jsonl (which the walk leaves
untouched when it finds the tree unchanged), extract.jsonl, the database's inode (the walk
writes to it on every run; whatever changes a verdict drops the stamp first:
:meth:`bastion.tasks.extract.store.Store.put_many`, ``forget``), and the store's bucket
directories (deleting a text changes its bucket's mtime).  When the next run finds them all
equal (:func:`matches`), every file's stored verdict stands: the extract stage does no
per-file work and leaves extract.jsonl as it is; the counts it reports are the stamped run's
row's (not extract.summary.json's, its export, which may have been edited or removed: the
no-op writes it again).  Anything else — one changed file, a new tool, a forgotten task, an
error to retry — falls back to the full plan.

The registry's part of the digest (:func:`registry_digest`) needs every reader module
imported; the stamp keeps it under the readers' fingerprint (:func:`readers_fingerprint`,
``stat`` calls only), and a run whose fingerprint is the stamp's takes it from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
from typing import Any, Iterable, Mapping

from bastion.readers.base import Limits, Reader
from bastion.readers.runtime.toolset import Tool

from .. import runs
from ..output.atomic import STATE_DIR, identity
from ..output.directory import OutputDir
from .store import STAMP  # (the store drops it before a verdict changes)

VERSION = 2  # 2: names the run's row in ``runs`` (tasks/runs.py)


def inputs_digest(*, manifest_digest: str, extract_version: int, registry: str,
                  tools: Mapping[str, Tool], limits: Limits, no_external: bool,
                  extra: Iterable[str] = ()) -> str:
    """Everything besides the files that decides any task key (``registry``: the digest of
    the readers, :func:`registry_digest`)."""
    parts: list[Any] = [VERSION, manifest_digest, extract_version, no_external,
                        limits.as_dict(), sorted(extra), registry]
    parts.append(sorted([t.name, t.path, t.key] for t in tools.values()))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def registry_digest(registry: Iterable[Reader]) -> str:
    """The digest of what the readers put in the keys: each one's name, version, types,
    tools, settings and libraries' versions (every reader's module imported)."""
    from .plan import library_version

    parts = [[r.name, r.version, list(r.mimes), list(r.extensions), list(r.tools),
              list(r.settings), r.uses_tool_deadline,
              [[lib, library_version(lib)] for lib in r.libraries]] for r in registry]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def readers_fingerprint() -> str:
    """What :func:`registry_digest` depends on, by ``stat`` alone (no reader imported): each
    source file of the readers package (path, size, mtime, inode) and each directory of the
    import path (installing, upgrading or removing a distribution adds or removes entries
    there, which changes the directory's mtime).  The stamp keeps the registry's digest under
    this fingerprint: a no-op run whose fingerprint is the stamp's does not import the readers."""
    import bastion.readers as package

    parts: list[Any] = []
    stack = [os.path.dirname(os.path.abspath(package.__file__ or "."))]
    while stack:
        with os.scandir(stack.pop()) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        stack.append(e.path)
                elif e.name.endswith(".py"):
                    st = e.stat(follow_symlinks=False)
                    parts.append([e.path, st.st_size, st.st_mtime_ns, st.st_ino])
    parts.sort()
    for entry in sys.path:
        try:
            st = os.stat(entry or ".")
            parts.append([entry, st.st_mtime_ns, st.st_ino])
        except OSError:
            parts.append([entry, None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


INSTALLED = "registry.json"  # in the user's cache (tasks/extract/usercache.py)
INSTALLED_KEPT = 16  # installations remembered (checkouts, virtualenvs of one user)


def installed_registry(fingerprint: str) -> dict[str, Any] | None:
    """What the user's cache holds for the installation of this readers' fingerprint: the
    registry's digest (``digest``) and the versions of the Python libraries the readers
    name (``libraries``), as an earlier run of this installation computed them, so that a
    first run of a new output imports no reader it does not use (every reader module
    imported and the libraries' metadata read: ≈ 0.1 s of a one-file sweep).  None when the
    cache has nothing for it."""
    from . import usercache

    entry = usercache.read(INSTALLED).get(fingerprint)
    if not (isinstance(entry, dict) and isinstance(entry.get("digest"), str)
            and isinstance(entry.get("libraries"), dict)):
        return None
    return entry


def remember_registry(fingerprint: str, digest: str, libraries: Mapping[str, str | None]) -> None:
    """Keep the registry's digest and the libraries' versions of this installation in the
    user's cache (the last :data:`INSTALLED_KEPT` installations)."""
    from . import usercache

    entries = usercache.read(INSTALLED)
    entries.pop(fingerprint, None)
    entries[fingerprint] = {"digest": digest, "libraries": dict(libraries)}
    usercache.write(INSTALLED, dict(list(entries.items())[-INSTALLED_KEPT:]))


def cached_registry(od: OutputDir, fingerprint: str) -> str | None:
    """The registry's digest the stamp holds, when it was taken under ``fingerprint``."""
    stamp = _read(od)
    readers = stamp.get("readers") if stamp is not None else None
    if isinstance(readers, list) and len(readers) == 2 and readers[0] == fingerprint \
            and isinstance(readers[1], str):
        return readers[1]
    return None


def files_identity(od: OutputDir) -> dict[str, Any]:
    """The identities of the files the verdicts live in (a few stats through the output's
    descriptors: the store has at most 256 bucket directories)."""
    buckets: list[Any] = []
    try:
        with os.scandir(od.dir_fd("extract", create=False)) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    st = e.stat(follow_symlinks=False)
                    buckets.append([e.name, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    except OSError:
        pass
    buckets.sort()
    return {
        "walk": identity(od, "walk.jsonl"),
        "records": identity(od, "extract.jsonl"),
        "database": _inode(od, f"{STATE_DIR}/verdicts.sqlite"),
        "forgotten": identity(od, f"{STATE_DIR}/forgotten.json"),
        "store": identity(od, "extract"),
        "buckets": hashlib.sha256(json.dumps(buckets).encode()).hexdigest(),
    }


def _inode(od: OutputDir, rel: str) -> list[int] | None:
    """(device, inode) of the database: the walk writes to it on every run, so only its
    replacement is seen here; a verdict changed drops the stamp (Store.put_many, forget)."""
    try:
        st = od.stat(rel)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def save(od: OutputDir, inputs: str, run: int,
         readers: tuple[str | None, str] | None = None) -> None:
    """Stamp a complete run: its inputs, the files' identities, its row in ``runs`` and
    (``readers``) the readers' fingerprint with the registry's digest taken under it."""
    stamp: dict[str, Any] = {"version": VERSION, "inputs": inputs, "run": run,
                             "files": files_identity(od)}
    if readers is not None and readers[0] is not None:
        stamp["readers"] = list(readers)
    od.write_json(STAMP, stamp)


def drop(od: OutputDir) -> None:
    try:
        od.unlink(STAMP)
    except OSError:
        pass


def _read(od: OutputDir) -> dict[str, Any] | None:
    """The stamp, when it is one of this version."""
    try:
        stamp = od.read_json(STAMP)
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("version") != VERSION \
            or not isinstance(stamp.get("run"), int):
        return None
    return stamp


def _stamped_run(db: sqlite3.Connection, stamp: Mapping[str, Any]) -> dict[str, Any] | None:
    """The summary of the run the stamp names (its row in ``runs``), when it had no error
    (an error is retried on every run)."""
    previous = runs.summary(db, stamp["run"])
    if previous is None or (previous.get("counts") or {}).get("error", 1):
        return None
    return previous


def matches(od: OutputDir, inputs: str) -> bool:
    """Whether the stamp of the last complete run still describes the output exactly."""
    stamp = _read(od)
    return stamp is not None and _holds(od, stamp, inputs)


def _holds(od: OutputDir, stamp: Mapping[str, Any], inputs: str) -> bool:
    files = files_identity(od)
    return (stamp.get("inputs") == inputs and files["walk"] is not None
            and files["records"] is not None and files["forgotten"] is None
            and stamp.get("files") == files)


def nothing_to_do(od: OutputDir, inputs: str, db: sqlite3.Connection) -> dict[str, Any] | None:
    """The summary of the last complete run (its row in ``runs``, ``db``) when its stamp still
    holds and it had no ``error``, else None."""
    stamp = _read(od)
    if stamp is None or stamp.get("inputs") != inputs:
        return None
    previous = _stamped_run(db, stamp)
    return previous if previous is not None and _holds(od, stamp, inputs) else None


def has_stamp(od: OutputDir) -> bool:
    """Whether a complete run left its stamp in the output (without one, no run is a no-op)."""
    try:
        od.stat(STAMP)
    except OSError:
        return False
    return True


def likely_nothing_to_do(od: OutputDir, inputs: str) -> bool:
    """Before the walk: whether the last stamp has these key inputs (then the CLI does not
    start workers early: they would most likely only be stopped again)."""
    stamp = _read(od)
    return stamp is not None and stamp.get("inputs") == inputs


def holds_but_walk(od: OutputDir, inputs: str,
                   db: sqlite3.Connection) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(stamp, the summary of the run it names) when the last complete run's stamp holds for
    every file but walk.jsonl (the walk found a change) and that run had no error; else
    None."""
    st = _read(od)
    if st is None or st.get("inputs") != inputs:
        return None
    previous = _stamped_run(db, st)
    if previous is None:
        return None
    files = files_identity(od)
    then = dict(st.get("files") or {})
    if files["records"] is None or files["forgotten"] is not None:
        return None
    if {k: v for k, v in then.items() if k != "walk"} != \
            {k: v for k, v in files.items() if k != "walk"}:
        return None
    return st, previous
