"""Repeat offenders: documents that keep timing out, running out of memory, crashing their
worker or breaking its protocol (a ``worker`` error: a forged answer, its process killed) are
not read again on every run.

Reading such a document costs as much again on the next run with the same bytes and key (a
2-million-object PDF: 65–80 s, every run).  The verdict index (``.bastion/verdicts.sqlite``,
:mod:`bastion.tasks.extract.store`) therefore counts the extract runs (:func:`start_run`: one
per run that plans to extract) and, for each (sha256, key) whose verdict is an ``error`` of a
kind in :data:`KINDS`, how many times in a row it failed and the run at which it is tried
again: after the n-th failure in a row, 2**(n-1) runs later (the next run after the first
failure, as every other ``error``; then 2, 4, … up to :data:`CAP`).  Until then the plan keeps
its ``error`` verdict and its record says when it is tried again; a new key (the reader, its
settings, its tools) or new bytes try it at once, as does ``--retry-errors``, and any other
verdict on it ends the count.  Other ``error`` kinds are tried on every run.

So an output that is run again is not always what a fresh run would make: a fresh run reads
the offender now, an incremental one may keep its last ``error`` verdict until its backoff
ends (docs/robustness.md).
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable

from bastion.readers.runtime.verdict import Verdict

from ..output.atomic import OutputError

__all__ = ["CAP", "KINDS", "deferred", "record", "retries", "start_run"]

KINDS = ("timeout", "memory", "crash", "worker")  # errors that cost as much again when retried
CAP = 64  # at most this many runs between two tries of a repeat offender


def record(db: sqlite3.Connection, verdicts: Iterable[tuple[str, str, Verdict]],
           run: int) -> None:
    """Count the verdicts of run ``run`` into the backoff, inside the caller's transaction:
    a failure of a kind in :data:`KINDS` is one more in a row (the n-th: tried again
    2**(n-1) runs later, at most :data:`CAP`); any other verdict ends the count."""
    verdicts = list(verdicts)
    failed = [(sha, key, run, run, CAP) for sha, key, v in verdicts if v.error_kind in KINDS]
    ended = [(sha, key) for sha, key, v in verdicts if v.error_kind not in KINDS]
    db.executemany("INSERT INTO retries VALUES (?, ?, 1, ? + 1) ON CONFLICT (sha256, key) "
                   "DO UPDATE SET failures = failures + 1, due = ? + min(1 << failures, ?)",
                   failed)
    db.executemany("DELETE FROM retries WHERE sha256 = ? AND key = ?", ended)


def start_run(store: Any, *, count: bool = True) -> int:
    """Count one more extract run in ``store`` (a :class:`~bastion.tasks.extract.store.Store`;
    committed at once), set it as the store's ``run`` and return it.  ``count`` false: the
    number the next run would have, nothing counted (``doit list``/``info`` look, never run)."""
    if not count and not store.db_path.exists():
        store.run = 1  # nothing stored yet: looking creates nothing
        return store.run
    db = store.db
    try:
        with db:
            db.execute("BEGIN")
            if count:
                db.execute("INSERT INTO counters VALUES ('runs', 1) ON CONFLICT (name) "
                           "DO UPDATE SET value = value + 1")
            row = db.execute("SELECT value FROM counters WHERE name = 'runs'").fetchone()
    except sqlite3.Error as e:
        raise OutputError(f"cannot update the verdict store {store.db_path}: {e}") from None
    store.run = (row[0] if row else 0) + (0 if count else 1)
    return store.run


def retries(store: Any) -> dict[tuple[str, str], tuple[int, int]]:
    """The repeat offenders of ``store``: (failures in a row, the run at which each is tried
    again), by (sha256, key).  As few as the documents that keep failing."""
    if not store.db_path.exists():
        return {}
    try:
        rows = store.db.execute("SELECT sha256, key, failures, due FROM retries").fetchall()
    except sqlite3.Error as e:
        raise OutputError(f"cannot read the verdict store {store.db_path}: {e}") from None
    return {(sha, key): (failures, due) for sha, key, failures, due in rows}


def deferred(found: dict[tuple[str, str], tuple[int, int]], run: int) -> set[tuple[str, str]]:
    """The (sha256, key) pairs of ``found`` (:func:`retries`) not due in run ``run``: their
    ``error`` verdict stands."""
    return {pair for pair, (_, due) in found.items() if due > run}
