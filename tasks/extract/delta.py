"""What changed between two walks, and the extract stage's merge of it: work in proportion to
the change, not to the tree.

The walk (:meth:`bastion.tasks.walk.stage.Walker.write`) records, beside a rewritten ``walk.jsonl``, which of
its lines are new (``fresh``: added or changed files) and which lines of the previous walk it
kept (``hits``), with the identities of the file before and after.  Lines are in (root, path)
order in both walks, so the kept lines keep their relative order.

``extract.jsonl`` has one record per walk line, in the same order.  When the last complete
run's stamp (:mod:`bastion.tasks.extract.stamp`) still holds for everything but the walk, and the delta leads
from the walk that run saw to the one here, the extract stage plans only the fresh lines, and
writes the new ``extract.jsonl`` by copying the kept records' bytes (their ``reused`` now true)
and putting the fresh ones in their places: no record of an unchanged file is parsed, looked up
or encoded (:class:`Merge`).  The summary's counts are the last run's, less the records that
went, plus the new ones.
"""

from __future__ import annotations

import json
import marshal
import os
from array import array
from bisect import bisect_left
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..output import lineindex
from ..output.atomic import STATE_DIR, file_identity
from ..output.directory import OutputDir
from ..output.directory import CopySpan

DELTA = f"{STATE_DIR}/walk-delta"
VERSION = 1
_FRESH, _DROP, _KEEP = 0, 1, 2
DELTA_LINES = 10_000  # new walk records kept in the delta itself, at most
SPARSE_BYTES = 4096  # fewer flags to flip than one per this many bytes: cut spans around them
REUSED_FALSE = b'"reused":false'
REUSED_TRUE = b'"reused":true'
_SHRINK = len(REUSED_FALSE) - len(REUSED_TRUE)


def write_delta(od: OutputDir, before: list[int] | None, after: list[int] | None, old_count: int,
                fresh: list[int], hits: Iterable[int] | bytearray,
                fresh_lines: list[bytes] | None = None) -> None:
    """Record a walk's change: ``fresh`` the new line numbers of new records, ``hits`` the
    old line numbers kept (or a byte per old line, 1 where kept), ``fresh_lines`` the new
    records themselves when there are at most :data:`DELTA_LINES` (the extract stage then
    does not look for them in walk.jsonl).
    Written without an fsync of its own: a delta that does not match the files it names is
    simply not used."""
    if isinstance(hits, bytearray) and len(hits) == max(old_count, 0):
        seen = hits  # the kept lines already marked
    else:
        seen = bytearray(max(old_count, 0))
        for i in hits:
            seen[i] = 1
    removed = array("q")
    at = seen.find(0)
    while at >= 0:  # the lines not kept, found in C
        removed.append(at)
        at = seen.find(0, at + 1)
    kept = len(seen) - len(removed)
    data: dict[str, Any] = {"version": VERSION, "from": before, "to": after, "old_count": old_count,
            "new_count": len(fresh) + kept, "fresh": array("q", fresh).tobytes(),
            "removed": removed.tobytes()}
    if fresh_lines is not None and len(fresh_lines) == len(fresh) <= DELTA_LINES:
        data["lines"] = fresh_lines
    od.write(DELTA, marshal.dumps(data), sync=False)


def drop_delta(od: OutputDir) -> None:
    try:
        od.unlink(DELTA)
    except OSError:
        pass


def load_delta(od: OutputDir, walk_from: Any, walk_to: Any) -> dict[str, Any] | None:
    """The delta from the walk ``walk_from`` to ``walk_to``, or None."""
    try:
        data = marshal.loads(od.read(DELTA))  # through the checked descriptor
    except (OSError, EOFError, ValueError, TypeError):
        return None
    if (not isinstance(data, dict) or data.get("version") != VERSION
            or data.get("from") != walk_from or data.get("to") != walk_to
            or walk_from is None or walk_to is None):
        return None
    for name in ("fresh", "removed"):
        a = array("q")
        a.frombytes(data[name])
        data[name] = a
    return data


def lines_at(path: Path, wanted: Iterable[int]) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of a file's lines at the given (sorted) numbers: their offsets
    found in one counting pass (:func:`line_offsets`), each line then read by itself."""
    wanted = list(wanted)
    if not wanted:
        return
    with open(path, "rb") as f:
        offsets, count = line_offsets(f, sorted({*wanted, *(n + 1 for n in wanted)}))
        for n in wanted:
            if n >= count:
                return
            yield n, os.pread(f.fileno(), offsets[n + 1] - offsets[n], offsets[n])


class Merge:
    """The new extract.jsonl from the old one and the fresh records (see the module)."""

    def __init__(self, delta: dict[str, Any]) -> None:
        self.delta = delta
        self.fresh = set(delta["fresh"])
        self.removed = set(delta["removed"])
        self.dropped: list[dict[str, Any]] = []  # old records that went (files gone/changed)
        self.index: lineindex.Builder | None = None  # the new file's, once written

    def lines(self, od: OutputDir, name: str,
              fresh_lines: Iterator[bytes]) -> Iterator[bytes | CopySpan]:
        """Kept records' bytes (flagged reused) and the fresh records, in walk order.  The
        old records not kept are parsed into :attr:`dropped` (for the counts and the store's
        clean-up).  Raises ValueError when extract.jsonl does not have the delta's shape.

        The kept records between two changes are byte ranges of the old file
        (:class:`~bastion.tasks.output.directory.CopySpan`: the kernel copies them), cut around each
        ``"reused":false``, which becomes ``"reused":true``; with unescaped quotes that is
        only ever the key of a record (a string's own quotes are escaped), one per line."""
        fresh = sorted(self.fresh)
        removed = sorted(self.removed)
        new_count = self.delta["new_count"]
        ops: list[tuple[int, int, int]] = []  # (FRESH, 0, 0), (DROP, line, 1), (KEEP, line, n)
        fi = ri = 0
        i = j = 0  # old lines passed, new lines given
        while j < new_count:
            if fi < len(fresh) and fresh[fi] == j:
                ops.append((_FRESH, 0, 0))
                fi += 1
                j += 1
                continue
            while ri < len(removed) and removed[ri] == i:
                ops.append((_DROP, i, 1))
                ri += 1
                i += 1
            span = new_count - j
            if fi < len(fresh):
                span = min(span, fresh[fi] - j)
            if ri < len(removed):
                span = min(span, removed[ri] - i)
            span = max(1, span)
            ops.append((_KEEP, i, span))
            i += span
            j += span
        while ri < len(removed) and removed[ri] == i:
            ops.append((_DROP, i, 1))
            ri += 1
            i += 1
        wanted = sorted({x for kind, at, n in ops if kind != _FRESH for x in (at, at + n)})
        built = self.index = lineindex.Builder(REUSED_FALSE)
        with od.open_read(name) as f:
            fd = f.fileno()
            offsets, index, hits = find_lines(od, name, f, wanted, REUSED_FALSE)
            if index.count < i:
                raise ValueError("extract.jsonl is shorter than the walk it was made from")
            if index.count > i:
                raise ValueError("extract.jsonl is longer than the walk it was made from")
            for kind, at, n in ops:
                if kind == _FRESH:
                    line = next(fresh_lines)
                    built.add(line)
                    yield line
                elif kind == _DROP:
                    begin = offsets[at]
                    self.dropped.append(json.loads(os.pread(fd, offsets[at + 1] - begin, begin)))
                else:
                    start, end = offsets[at], offsets[at + n]
                    cuts = hits[bisect_left(hits, start):bisect_left(hits, end)]
                    built.keep(index, at, n, start, end, cuts, _SHRINK)
                    yield from _reused(hits, fd, start, end)
        if next(fresh_lines, None) is not None:
            raise ValueError("more fresh records than the delta has places for")


def find_lines(od: OutputDir, name: str, f: Any, wanted: list[int], pattern: bytes = b""
            ) -> tuple[dict[int, int], lineindex.LineIndex, array]:
    """Where the ``wanted`` lines of the open JSON Lines file ``f`` (at ``path``) start, its
    line index, and the offsets of ``pattern`` in it: from the index beside it (reading only
    the blocks of the wanted lines and of the flagged runs), or, with no index that holds, by
    counting the whole file (:func:`line_offsets`, which makes the index as it goes)."""
    index = lineindex.load(od, name)
    if index is not None:
        try:
            offsets = index.locate(f.fileno(), [*wanted, *index.flagged])
            hits = index.find(f.fileno(), offsets, pattern) if pattern else array("q")
            return offsets, index, hits
        except ValueError:
            pass  # not the file the index says: counted below
    hits = array("q")
    marks = (array("q", [0]), array("q", [0]))
    offsets, count = line_offsets(f, wanted, pattern, hits, marks)
    return offsets, lineindex.counted(f.fileno(), count, *marks), hits


def _reused(hits: array, fd: int, start: int, end: int) -> Iterator[bytes | CopySpan]:
    """Bytes ``start:end`` of the old records, each ``"reused":false`` in them (at
    ``hits``) given as ``"reused":true``: as spans to copy, cut around the few there are; a
    range dense with them (the first change after a first sweep) read and replaced."""
    first, last = bisect_left(hits, start), bisect_left(hits, end)
    if (last - first) * SPARSE_BYTES > end - start:
        while start < end:
            piece = os.pread(fd, min(end - start, 1 << 22), start)
            if not piece:
                raise ValueError("extract.jsonl changed while it was read")
            if start + len(piece) < end:  # whole lines only: a key is never cut in two
                piece = piece[:piece.rindex(b"\n") + 1]
            start += len(piece)
            yield piece.replace(REUSED_FALSE, REUSED_TRUE)
        return
    at = start
    for hit in hits[first:last]:
        if hit > at:
            yield CopySpan(fd, at, hit - at)
        yield REUSED_TRUE
        at = hit + len(REUSED_FALSE)
    if end > at:
        yield CopySpan(fd, at, end - at)


def line_offsets(f: Any, wanted: list[int], pattern: bytes = b"", found: array | None = None,
                 marks: tuple[array, array] | None = None) -> tuple[dict[int, int], int]:
    """The byte offsets where the lines numbered ``wanted`` (sorted) start in the open file
    ``f`` (the line count itself: its end), and how many complete lines it has: one pass in
    chunks, newlines counted in C, stepped through only inside a chunk holding a wanted one.
    With a ``pattern`` (no newline in it), the offset of each occurrence goes to ``found``;
    with ``marks`` (line numbers, offsets), a line start about every
    :data:`~bastion.tasks.output.lineindex.MARK_BYTES` is added to them, for a line index."""
    out: dict[int, int] = {}
    w = 0
    while w < len(wanted) and wanted[w] == 0:
        out[0] = 0
        w += 1
    seen = base = 0
    tail = b""
    while chunk := f.read(1 << 18):
        n = chunk.count(b"\n")
        pos, k = 0, seen
        while w < len(wanted) and wanted[w] <= seen + n:
            while k < wanted[w]:
                pos = chunk.index(b"\n", pos) + 1
                k += 1
            out[wanted[w]] = base + pos
            w += 1
        if pattern and found is not None:
            window = tail + chunk  # an occurrence across two chunks is found whole
            at = window.find(pattern)
            while at >= 0:
                found.append(base - len(tail) + at)
                at = window.find(pattern, at + len(pattern))
            tail = chunk[-(len(pattern) - 1):] if len(pattern) > 1 else b""
        if marks is not None:
            lineindex.mark_lines(chunk, base, seen, *marks)
        seen += n
        base += len(chunk)
    return out, seen


class StoreTexts:
    """``name in texts``: whether the store holds that file (one stat, for the few items a
    change plans; the full plan lists every bucket instead)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and os.path.exists(self.root / name[:2] / name)


def plan_change(run: Any, select: Any) -> tuple[Any, dict, Merge] | None:
    """The plan of only what changed since the last complete run, its verdicts and the
    :class:`Merge` that writes the records; None when that run's stamp does not hold for
    everything but the walk, or the delta does not lead from its walk to this one (then the
    caller plans everything)."""
    from . import stamp
    from .plan import plan
    from ..records import WalkRecord

    out = run.out
    od = run.lock()
    previous = stamp.holds_but_walk(od, run.inputs())
    if previous is None:
        return None
    st, summary = previous
    delta = load_delta(od, st["files"]["walk"], file_identity(out / "walk.jsonl"))
    if delta is None or delta["old_count"] != summary.get("records"):
        return None
    lines = delta.get("lines")
    if not (isinstance(lines, list) and len(lines) == len(delta["fresh"])
            and all(isinstance(x, bytes) for x in lines)):
        lines = [line for _, line in lines_at(out / "walk.jsonl", sorted(delta["fresh"]))]
    records = [WalkRecord(**json.loads(line)) for line in lines]
    shas = sorted({r.sha256 for r in records if r.sha256})
    verdicts = run.store.verdicts_for(shas)
    planned = plan(records, verdicts, select, run.tools, run.manifest.limits,
                   StoreTexts(run.store.root))
    keys: dict[str, set[str]] = {}
    for sha, key in verdicts:
        keys.setdefault(sha, set()).add(key)
    for item in planned.items:
        if keys.get(item.sha256, {item.key}) - {item.key}:
            # these bytes have a verdict under another key: another file of the tree may
            # read them under that key, and the store's names for the two depend on both
            return None
    run.merge_from = summary
    return planned, verdicts, Merge(delta)
