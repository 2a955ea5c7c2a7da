"""The ``runs`` table: one row per walk or extract run, its summary; extract.summary.json is the
export of the last extract run's row.

Each extract run that finishes (in full, only the walk's change, or nothing to do) adds its row
(:func:`record`) once its records are committed and the texts they dropped are removed, then
writes extract.summary.json from that row (:func:`export`), then its stamp
(tasks/extract/stamp.py), which names the row.  The next run takes the counts it starts from
(a change-only run's, a no-op's) from the row its stamp names (:func:`summary`), never from
extract.summary.json, which a person may have edited or removed: a ``kill -9`` between the row
and the export leaves the previous stamp, which names the previous row (still the records'
counts when the stamp holds), or none.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Mapping

from .output.directory import OutputDir
from .output.modes import OutputError

__all__ = ["EXTRACT_SUMMARY", "export", "last", "record", "record_extract", "summary"]

EXTRACT_SUMMARY = "extract.summary.json"


def record(db: sqlite3.Connection, summary: Mapping[str, Any]) -> int:
    """Add ``summary`` (its ``stage`` and ``started_at`` in their columns) as one row of
    ``runs``, in a transaction of its own; the row's number."""
    try:
        with db:
            db.execute("BEGIN IMMEDIATE")
            cur = db.execute("INSERT INTO runs (stage, started_at, summary) VALUES (?, ?, ?)",
                             (summary["stage"], summary["started_at"],
                              json.dumps(summary, sort_keys=True)))
    except sqlite3.Error as e:
        raise OutputError(f"cannot record the {summary['stage']} run in the database: {e}") \
            from None
    assert cur.lastrowid is not None
    return cur.lastrowid


def summary(db: sqlite3.Connection, run: int, stage: str = "extract") -> dict[str, Any] | None:
    """The summary of run ``run`` of ``stage`` (None: no such row)."""
    try:
        row = db.execute("SELECT summary FROM runs WHERE run = ? AND stage = ?",
                         (run, stage)).fetchone()
    except sqlite3.Error:
        return None
    return json.loads(row[0]) if row else None


def last(db: sqlite3.Connection, stage: str = "extract") -> tuple[int, dict[str, Any]] | None:
    """The number and summary of the last run of ``stage`` (None: none yet)."""
    row = db.execute("SELECT run, summary FROM runs WHERE stage = ? ORDER BY run DESC LIMIT 1",
                     (stage,)).fetchone()
    return (row[0], json.loads(row[1])) if row else None


def record_extract(db: sqlite3.Connection, od: OutputDir, summary_: Mapping[str, Any]) -> int:
    """An extract run's row added, then extract.summary.json written from it; its number (the
    stamp names it)."""
    run = record(db, summary_)
    row = summary(db, run)
    assert row is not None
    export(od, row)
    return run


def export(od: OutputDir, summary: Mapping[str, Any]) -> None:
    """extract.summary.json: a run's row, as indented sorted JSON (atomically, fsynced)."""
    od.write_json(EXTRACT_SUMMARY, dict(summary))
