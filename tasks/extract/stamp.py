"""The no-op check: whether a run has nothing to extract, decided without reading the walk.

At the end of a complete run with no ``error`` record, :func:`save` writes
``.bastion/extract-stamp.json``: a digest of every input that decides a task key (the
manifest, the extractor version, the reader registry, the tools' identities, the external-tool
switch) and the identities (size, mtime, ctime, inode) of the files the verdicts live in —
walk.jsonl (which the walk leaves untouched when it finds the tree unchanged), extract.jsonl,
the database's inode (the walk writes to it on every run; whatever changes a verdict drops the
stamp first: :meth:`bastion.tasks.extract.store.Store.put_many`, ``forget``), and the store's
bucket directories (deleting a text changes its bucket's mtime).  When the next run finds them all equal (:func:`matches`), every file's stored
verdict stands: the extract stage does no per-file work and leaves extract.jsonl as it is.
Anything else — one changed file, a new tool, a forgotten task, an error to retry — falls back
to the full plan.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable, Mapping

from bastion.readers.base import Limits, Reader
from bastion.readers.runtime.toolset import Tool

from ..output.atomic import STATE_DIR, identity
from ..output.directory import OutputDir
from .store import STAMP  # (the store drops it before a verdict changes)

VERSION = 1


def inputs_digest(*, manifest_digest: str, extract_version: int,
                  registry: Iterable[Reader], tools: Mapping[str, Tool], limits: Limits,
                  no_external: bool, extra: Iterable[str] = ()) -> str:
    """Everything besides the files that decides any task key."""
    parts: list[Any] = [VERSION, manifest_digest, extract_version, no_external,
                        limits.as_dict(), sorted(extra)]
    from .plan import library_version

    parts.append([[r.name, r.version, list(r.mimes), list(r.extensions), list(r.tools),
                   list(r.settings), r.uses_tool_deadline,
                   [[lib, library_version(lib)] for lib in r.libraries]] for r in registry])
    parts.append(sorted([t.name, t.path, t.key] for t in tools.values()))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


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


def save(od: OutputDir, inputs: str) -> None:
    od.write_json(STAMP, {"version": VERSION, "inputs": inputs, "files": files_identity(od)})


def drop(od: OutputDir) -> None:
    try:
        od.unlink(STAMP)
    except OSError:
        pass


def matches(od: OutputDir, inputs: str) -> bool:
    """Whether the stamp of the last complete run still describes the output exactly."""
    try:
        stamp = od.read_json(STAMP)
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("version") != VERSION:
        return False
    files = files_identity(od)
    return (stamp.get("inputs") == inputs and files["walk"] is not None
            and files["records"] is not None and files["forgotten"] is None
            and stamp.get("files") == files)


def nothing_to_do(od: OutputDir, inputs: str) -> dict[str, Any] | None:
    """The last run's summary when its stamp still holds and it had no ``error`` (an error is
    retried on every run), else None."""
    try:
        previous = od.read_json("extract.summary.json")
    except (OSError, ValueError):
        return None
    if not isinstance(previous, dict) or (previous.get("counts") or {}).get("error", 1):
        return None
    return previous if matches(od, inputs) else None


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
    try:
        previous = od.read_json(STAMP)
    except (OSError, ValueError):
        return False
    return isinstance(previous, dict) and previous.get("inputs") == inputs


def holds_but_walk(od: OutputDir, inputs: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(stamp, last summary) when the last complete run's stamp holds for every file but
    walk.jsonl (the walk found a change) and that run had no error; else None."""
    try:
        st = od.read_json(STAMP)
        previous = od.read_json("extract.summary.json")
    except (OSError, ValueError):
        return None
    if (not isinstance(st, dict) or st.get("version") != VERSION
            or st.get("inputs") != inputs or not isinstance(previous, dict)
            or (previous.get("counts") or {}).get("error", 1)):
        return None
    files = files_identity(od)
    then = dict(st.get("files") or {})
    if files["records"] is None or files["forgotten"] is not None:
        return None
    if {k: v for k, v in then.items() if k != "walk"} != \
            {k: v for k, v in files.items() if k != "walk"}:
        return None
    return st, previous
