"""``walk.jsonl``, the export of the walk table: one function writes it, in (root, path)
order, the same bytes whichever way it goes.

The database records which export matches it (``walk_state.export``: the generation and the
file's identity).  When the walk changed nothing and the export on disk is that one, nothing
is written.  A small change to a matching export is spliced into it
(:func:`bastion.tasks.output.splice.splice`: the lines of the files gone left out, the new
lines put where their (root, path) sorts, found by a binary search over the previous file's
byte offsets; the unchanged byte ranges copied by the kernel).  Anything else (a first walk, a
big change, an export that is not the table's: a killed walk, an edited file) is written in
full from one ordered query.

What changed is not written beside the export: the walk logs each changed key in the
database (``walk_log``, :mod:`bastion.tasks.walk.table`), which the extract stage queries.
"""

from __future__ import annotations

from typing import Iterator

from ..output.atomic import identity
from ..output.directory import OutputDir
from ..output.splice import export, splice
from ..records import WalkRecord, to_line
from .table import WalkTable, decode, encode

__all__ = ["export_walk", "line_of"]

MAX_SHARE = 0.01  # changed records (new + removed) per previous record, to splice
MIN_CHANGES = 64  # up to this many changes are spliced in any walk

SELECT = ("SELECT root, path, kind, size, mtime_ns, inode, sha256, reason, mime, error, gen "
          "FROM walk")


def line_of(row: tuple) -> bytes:
    """The walk.jsonl line of a row (root, path, kind, size, mtime_ns, inode, sha256, reason,
    mime, error, ...)."""
    return to_line(WalkRecord(row[0], decode(row[1]), *row[2:10]))


def export_walk(od: OutputDir, table: WalkTable) -> bool:
    """Write walk.jsonl from the table, unless the file there is already its export; whether
    it was written."""
    walk_jsonl = "walk.jsonl"
    before = identity(od, walk_jsonl)
    trusted = (before is not None and table.export is not None
               and table.export == [table.prev_gen, before])
    if trusted and not table.written:
        return False
    keys = table.keys
    if trusted and not table.reset and keys.removed is not None and keys.made is not None:
        limit = max(MIN_CHANGES, int(table.count_before * MAX_SHARE))
        if len(keys.made) + len(keys.removed) <= limit:
            try:
                splice(od, walk_jsonl, _changes(table))
            except ValueError:
                pass  # not the lines the table says: written in full below
            else:
                table.exported(identity(od, walk_jsonl))
                return True
    export(od, walk_jsonl, _lines(table))
    table.exported(identity(od, walk_jsonl))
    return True


def _lines(table: WalkTable) -> Iterator[bytes]:
    """Every line, from one ordered query."""
    cursor = table.db.execute(SELECT + " ORDER BY root, path")
    while rows := cursor.fetchmany(4096):
        for row in rows:
            yield line_of(row)


def _changes(table: WalkTable) -> list[tuple[tuple[str, str], bytes | None]]:
    """The keys this walk removed (None) and the lines of the rows it made."""
    changes: list[tuple[tuple[str, str], bytes | None]] = [
        (k, None) for k in table.keys.removed or ()]
    for root, path in table.keys.made or ():
        rel, _, name = path.rpartition("/")
        row = table.db.execute(SELECT + " WHERE root = ? AND dir = ? AND name = ?",
                               (root, encode(rel), encode(name))).fetchone()
        if row is None:
            raise ValueError(f"{root}/{path} is not in the table")
        changes.append(((root, path), line_of(row)))
    return changes
