"""``walk.jsonl``, the export of the walk table: one function writes it, in (root, path)
order, the same bytes whichever way it goes.

The database records which export matches it (``walk_state.export``: the generation and the
file's identity).  When the walk changed nothing and the export on disk is that one, nothing
is written.  A small change to a matching export is written as the previous file with the
lines of the files gone left out and the new lines put where their (root, path) sorts (found
by a binary search over the previous file's lines, located through its line index): the
unchanged byte ranges between them are copied by the kernel
(:class:`~bastion.tasks.output.directory.CopySpan`).  Anything else (a first walk, a big
change, an export that is not the table's: a killed walk, an edited file) is written in full
from one ordered query.

Beside a changed export, the delta from the previous one
(:func:`bastion.tasks.extract.delta.write_delta`) says which lines are new and which previous
lines were kept, for an extract stage that merges only the change.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_left
from pathlib import Path
from typing import Iterator

from ..extract.delta import DELTA_LINES, drop_delta, find_lines, write_delta
from ..output import lineindex
from ..output.atomic import file_identity
from ..output.directory import CopySpan, OutputDir
from ..records import WalkRecord, to_line
from .table import WalkTable, decode, encode

__all__ = ["export_walk", "line_of"]

MAX_SHARE = 0.01  # changed records (new + removed) per previous record, to patch
MIN_CHANGES = 64  # up to this many changes are patched in any walk

SELECT = ("SELECT root, path, kind, size, mtime_ns, inode, sha256, reason, mime, error, gen "
          "FROM walk")


def line_of(row: tuple) -> bytes:
    """The walk.jsonl line of a row (root, path, kind, size, mtime_ns, inode, sha256, reason,
    mime, error, ...)."""
    return to_line(WalkRecord(row[0], decode(row[1]), *row[2:10]))


def export_walk(od: OutputDir, table: WalkTable) -> bool:
    """Write walk.jsonl (and the delta beside it) from the table, unless the file there is
    already its export; whether it was written."""
    walk_jsonl = od.path / "walk.jsonl"
    before = file_identity(walk_jsonl)
    trusted = (before is not None and table.export is not None
               and table.export == [table.prev_gen, before])
    if trusted and not table.written:
        return False
    delta = trusted and not table.reset and table.removed is not None
    if delta and table.fresh_keys is not None:
        limit = max(MIN_CHANGES, int(table.count_before * MAX_SHARE))
        if len(table.fresh_keys) + len(table.removed or ()) <= limit:
            try:
                fresh_at, marks, lines = _patch(od, table)
            except ValueError:
                pass  # not the lines the table says: written in full below
            else:
                write_delta(od, before, file_identity(walk_jsonl), table.count_before,
                            fresh_at, marks, lines)
                table.exported(file_identity(walk_jsonl))
                return True
    _full(od, walk_jsonl, table, before if delta else None)
    table.exported(file_identity(walk_jsonl))
    return True


def _full(od: OutputDir, walk_jsonl: Path, table: WalkTable, before: list[int] | None) -> None:
    """walk.jsonl written from one ordered query; with ``before`` (the previous export's
    identity), the delta from it, counted as the rows stream past."""
    removed = sorted(table.removed or ())
    fresh_at: list[int] = []
    fresh_lines: list[bytes] | None = []
    old_at: list[int] = []  # the previous line numbers of the removed rows
    gen = table.gen
    index = lineindex.Builder()

    def lines() -> Iterator[bytes]:
        nonlocal fresh_lines
        kept = r = 0
        cursor = table.db.execute(SELECT + " ORDER BY root, path")
        while rows := cursor.fetchmany(4096):
            for j, row in enumerate(rows, len(fresh_at) + kept):
                line = line_of(row)
                if row[10] == gen:
                    fresh_at.append(j)
                    if fresh_lines is not None:
                        fresh_lines.append(line)
                        if len(fresh_lines) > DELTA_LINES:
                            fresh_lines = None
                else:
                    if r < len(removed):
                        key = (row[0], decode(row[1]))
                        while r < len(removed) and removed[r] < key:
                            old_at.append(kept + r)
                            r += 1
                    kept += 1
                index.add(line)
                yield line
        while r < len(removed):
            old_at.append(kept + r)
            r += 1

    od.write("walk.jsonl", lines())
    lineindex.save_built(od, "walk.jsonl", index)
    if before is None:
        drop_delta(od)
        return
    marks = bytearray(b"\x01") * table.count_before
    for at in old_at:
        if at >= len(marks):
            drop_delta(od)  # not the previous export's rows: no delta
            return
        marks[at] = 0
    write_delta(od, before, file_identity(walk_jsonl), table.count_before, fresh_at, marks,
                fresh_lines)


def _patch(od: OutputDir, table: WalkTable) -> tuple[list[int], bytearray, list[bytes]]:
    """The small change written over the previous export (see the module): the new line
    numbers of the new rows, the previous lines kept (a byte each), the new lines.  Raises
    ValueError when the previous file is not what the table says."""
    index = lineindex.load(od, "walk.jsonl")
    if index is None or index.count != table.count_before:
        raise ValueError("no line index of the previous export")
    count = index.count
    fresh = sorted(table.fresh_keys or ())
    db = table.db
    fresh_lines = []
    for root, path in fresh:
        rel, _, name = path.rpartition("/")
        row = db.execute(SELECT + " WHERE root = ? AND dir = ? AND name = ?",
                         (root, encode(rel), encode(name))).fetchone()
        if row is None:
            raise ValueError(f"{root}/{path} is not in the table")
        fresh_lines.append(line_of(row))
    with od.open_read("walk.jsonl") as f:
        fd = f.fileno()
        cache: dict[int, tuple[str, str]] = {}

        def key(n: int) -> tuple[str, str]:
            k = cache.get(n)
            if k is None:
                at = index.locate(fd, [n, n + 1])
                d = json.loads(os.pread(fd, at[n + 1] - at[n], at[n]))
                k = cache[n] = (d["root"], d["path"])
            return k

        def position(target: tuple[str, str]) -> int:
            lo, hi = 0, count
            while lo < hi:
                mid = (lo + hi) // 2
                if key(mid) < target:
                    lo = mid + 1
                else:
                    hi = mid
            return lo

        removed = []
        for k in sorted(table.removed or ()):
            n = position(k)
            if n >= count or key(n) != k:
                raise ValueError(f"{k} is not in the previous export")
            removed.append(n)
        places = [position(k) for k in fresh]
        fresh_at = [p - bisect_left(removed, p) + k for k, p in enumerate(places)]
        built = lineindex.Builder()
        od.write("walk.jsonl", _spliced(od, f, count, places, removed, fresh_lines, built))
        lineindex.save_built(od, "walk.jsonl", built)
    marks = bytearray(b"\x01") * count
    for n in removed:
        marks[n] = 0
    return fresh_at, marks, fresh_lines


def _spliced(od: OutputDir, f, count: int, places: list[int], removed: list[int],
             fresh_lines: list[bytes], built: lineindex.Builder) -> Iterator[bytes | CopySpan]:
    """The new walk.jsonl: the previous lines between two changes as byte ranges of the
    previous file, the new lines inserted, the removed lines left out; ``built`` follows."""
    wanted = sorted({0, count, *places, *removed, *(r + 1 for r in removed)})
    offsets, index, _ = find_lines(od, "walk.jsonl", f, wanted)
    if index.count != count or offsets.get(count) != os.fstat(f.fileno()).st_size:
        raise ValueError(f"{od.path / 'walk.jsonl'} does not have the lines the table says")
    fd = f.fileno()
    k = r = at = 0  # new lines given, removed lines passed, previous line
    while True:
        while k < len(places) and places[k] == at:
            built.add(fresh_lines[k])
            yield fresh_lines[k]
            k += 1
        if at == count:
            break
        if r < len(removed) and removed[r] == at:
            r += 1
            at += 1
            continue
        nxt = count
        if k < len(places):
            nxt = min(nxt, places[k])
        if r < len(removed):
            nxt = min(nxt, removed[r])
        built.keep(index, at, nxt - at, offsets[at], offsets[nxt])
        yield CopySpan(fd, offsets[at], offsets[nxt] - offsets[at])
        at = nxt
