"""Whose text the plain-named files of a sha256 hold: the database's ``plain`` table.

Several task keys can read the same bytes (``a.csv`` and its copy ``a.txt``; a tool set
and ``--no-external``).  Each run gives the plain name (``extract/<aa>/<sha256>.txt``, its
``.md`` and ``.meta.json``) to the least key it reads those bytes under
(:func:`bastion.tasks.extract.store.text_stem`), and which key that is changes with the walk
and the tools.  So the table names the key whose verdict put the files there: an ``ok``
verdict stands on the plain name only while its key is the owner
(:func:`bastion.tasks.extract.plan.plan`), a run about to give the name to another key
disowns it first, committed before any text is renamed (a run killed after the rename
leaves no old key's verdict describing the new text), and each verdict batch names the new
owners in its own transaction (:meth:`bastion.tasks.extract.store.Store.put_many`).
"""

from __future__ import annotations

import sqlite3
from typing import Iterable

from ..output.modes import OutputError

__all__ = ["owners", "disown", "own"]

CHUNK = 500  # sha256s a query


def owners(db: sqlite3.Connection, shas: list[str]) -> dict[str, str]:
    """The owner of each of these sha256s' plain names (one missing: no verdict stands on
    them)."""
    found: dict[str, str] = {}
    try:
        for at in range(0, len(shas), CHUNK):
            part = shas[at:at + CHUNK]
            found.update(db.execute("SELECT sha256, key FROM plain WHERE sha256 IN "
                                    f"({','.join('?' * len(part))})", part).fetchall())
    except sqlite3.Error as e:
        raise OutputError(f"cannot read the verdict store: {e}") from None
    return found


def disown(db: sqlite3.Connection, shas: Iterable[str]) -> None:
    """Clear the owners of these sha256s' plain names, in a transaction of its own."""
    try:
        with db:
            db.execute("BEGIN")
            db.executemany("DELETE FROM plain WHERE sha256 = ?", ((sha,) for sha in shas))
    except sqlite3.Error as e:
        raise OutputError(f"cannot record verdicts: {e}") from None


def own(db: sqlite3.Connection, pairs: Iterable[tuple[str, str]]) -> None:
    """Name (sha256, key) pairs the owners of their plain names (in the caller's
    transaction: the one committing those keys' verdicts)."""
    db.executemany("INSERT OR REPLACE INTO plain (sha256, key) VALUES (?,?)", pairs)
