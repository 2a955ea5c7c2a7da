"""A small change patched into the previous walk: ``walk.jsonl`` and its stat cache rewritten
in time proportional to the tree's bytes (one buffered copy) plus the change, not to a Python
step per record.

When a re-walk kept almost every record (:data:`MAX_SHARE` of them changed at most), the new
walk.jsonl is the previous one with the removed lines dropped and the new records inserted
where their (root, path) sorts; each insertion point is found by a binary search over the
previous lines, whose keys the packed cache gives without reading the file
(:meth:`Patch.key`).  The cache is patched in place: the removed entries deleted, every line
number shifted by the insertions and removals before it, the new entries added, new
directories appended.  The result is the walk.jsonl a full rewrite writes, byte for byte, and
a cache that answers the same (its directories may be numbered in another order).
"""

from __future__ import annotations

import os
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import Iterable, Iterator

from ..output import lineindex
from ..extract.delta import find_lines
from ..output.atomic import atomic_write, open_read
from ..output.directory import CopySpan
from .statcache import PackedDir, Row, StatCache, _packed, root_settings, write_blob

MAX_SHARE = 0.01  # changed records (new + removed) per previous record, to patch
MIN_CHANGES = 64  # up to this many changes are patched in any walk


class Patch:
    """One patch of the previous walk (see the module)."""

    def __init__(self, cache: StatCache, marks: bytearray, fresh: list[Row]) -> None:
        self.cache = cache
        self.marks = marks
        self.fresh = fresh  # sorted by (root, path)
        self.removed = array("q")  # the previous lines not kept, in order
        self._ranks: dict[int, array] = {}

    @classmethod
    def plan(cls, cache: StatCache, marks: bytearray, fresh: list[Row]) -> "Patch | None":
        """The patch, or None when the change is too big or the cache cannot be patched (a
        root not cached, a new root): then the walk is rewritten as a stream."""
        if not cache.streams or cache.dirs is None or any(d is None for d in cache.dirs):
            return None
        if any(row[0] not in cache.roots for row in fresh):
            return None
        limit = max(MIN_CHANGES, int(cache.count * MAX_SHARE))
        removed = array("q")
        at = marks.find(0)
        while at >= 0:
            removed.append(at)
            if len(removed) + len(fresh) > limit:
                return None
            at = marks.find(0, at + 1)
        if len(fresh) > limit:
            return None
        patch = cls(cache, marks, fresh)
        patch.removed = removed
        return patch

    # -- the previous lines' keys ----------------------------------------------------------

    @property
    def _dirs(self) -> list:
        assert self.cache.dirs is not None  # a patch is planned on a format-2 cache only
        return self.cache.dirs

    @property
    def _lines_of(self) -> array:
        assert self.cache.lines is not None
        return self.cache.lines

    def _rank(self, d: int, line: int) -> int:
        """The place of old line ``line`` among the entries of directory ``d``."""
        lines = self._ranks.get(d)
        if lines is None:
            lines = self._ranks[d] = self._dirs[d][2].entries[0::5]
        return bisect_left(lines, line)

    def key(self, line: int) -> tuple[str, str]:
        """(root, path) of the previous walk.jsonl's line ``line``."""
        d = self._lines_of[line]
        root, rel, packed = self._dirs[d]
        name = packed.name_list()[self._rank(d, line)]
        return root, f"{rel}/{name}" if rel else name

    def position(self, row: Row) -> int:
        """How many previous lines sort before ``row``."""
        lo, hi = 0, self.cache.count
        target = (row[0], row[1])
        while lo < hi:
            mid = (lo + hi) // 2
            if self.key(mid) < target:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- the rewrite -----------------------------------------------------------------------

    def write(self, out: Path, walk_jsonl: Path, settings: list, roots: Iterable) -> list[int]:
        """Write the new walk.jsonl and cache; the new line numbers of the new records."""
        places = [self.position(row) for row in self.fresh]  # non-decreasing: fresh sorted
        removed = self.removed
        fresh_at = [p - bisect_left(removed, p) + k for k, p in enumerate(places)]
        index = lineindex.Builder()
        atomic_write(walk_jsonl, self._lines(walk_jsonl, places, index))
        lineindex.save_built(walk_jsonl, index)
        self._patch_cache(places, fresh_at)
        self._write_cache(out, settings, roots)
        return fresh_at

    def _lines(self, walk_jsonl: Path, places: list[int],
               built: lineindex.Builder) -> Iterator[bytes | CopySpan]:
        """The new walk.jsonl: the previous lines between two changes as byte ranges of the
        previous file (:class:`~bastion.tasks.output.directory.CopySpan`: the kernel copies them), the
        new records inserted, the removed lines left out; ``built`` follows them."""
        fresh, removed = self.fresh, self.removed
        count = self.cache.count
        wanted = sorted({0, count, *places, *removed, *(r + 1 for r in removed)})
        with open_read(walk_jsonl) as f:
            offsets, index, _ = find_lines(walk_jsonl, f, wanted)
            if index.count != count or offsets.get(count) != os.fstat(f.fileno()).st_size:
                raise ValueError(f"{walk_jsonl} does not have the lines its stat cache says")
            fd = f.fileno()
            k = r = at = 0  # new records given, removed lines passed, previous line
            while True:
                while k < len(places) and places[k] == at:
                    built.add(fresh[k][4])
                    yield fresh[k][4]
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

    def _patch_cache(self, places: list[int], fresh_at: list[int]) -> None:
        cache = self.cache
        assert cache.dirs is not None and cache.lines is not None  # a format-2 cache (plan)
        removed = self.removed
        # the removed entries go (their directory's numbers still the old ones)
        for line in sorted(removed, reverse=True):
            d = cache.lines[line]
            packed = cache.dirs[d][2]
            k = self._rank(d, line)
            names = packed.name_list()
            name = names.pop(k)
            del packed.entries[5 * k:5 * k + 5]
            packed.others.pop(name, None)
            del self._ranks[d]
            _touched(packed)
        # every line number shifted by what was inserted and removed before it
        if places or removed:
            first = min([*places, *removed])
            beyond = max([*places, *(r + 1 for r in removed)])  # from here: one shift
            shift = len(places) - len(removed)
            for _, _, packed in cache.dirs:
                e = packed.entries
                if not len(e) or e[-5] < first:
                    continue
                if e[0] >= beyond:
                    if shift:
                        e[0::5] = shifted(e[0::5], shift)
                    continue
                for j in range(0, len(e), 5):
                    old = e[j]
                    if old >= first:
                        e[j] = old - bisect_left(removed, old) + bisect_right(places, old)
        # the lines' directories: removed lines dropped, new ones inserted
        old_lines = cache.lines
        lines = array("I")
        numbers = {(root, rel): d for d, (root, rel, _) in enumerate(cache.dirs)}
        prev = 0
        # at one place, the new records come before the previous line there (kept or not)
        cuts = sorted([(p, 0, k) for k, p in enumerate(places)] +
                      [(r, 1, -1) for r in removed])
        for pos, kind, k in cuts:
            lines.extend(old_lines[prev:pos])
            if kind == 1:  # a removed line: skipped
                prev = pos + 1
                continue
            prev = pos
            root, _, rel, name, _line, key = self.fresh[k][:6]
            d = numbers.get((root, rel))
            if d is None:  # a new directory: numbered last
                d = numbers[(root, rel)] = len(cache.dirs)
                packed = PackedDir("", array("q"), {})
                packed._split = []
                cache.dirs.append((root, rel, packed))
                cache.roots[root][rel] = packed
            lines.append(d)
        lines.extend(old_lines[prev:])
        cache.lines = lines
        # the new entries, each at its place in its directory (names sort as lines do)
        for k, row in enumerate(self.fresh):
            root, _, rel, name, record, key = row[:6]
            packed = cache.roots[root][rel]
            new = fresh_at[k]
            e = packed.entries
            at = bisect_left(e[0::5], new)
            entry = (new, *key) if key is not None else (new, -1, 0, 0, 0)
            e[5 * at:5 * at] = array("q", entry)
            packed.name_list().insert(at, name)
            if key is None:
                packed.others[name] = record
            _touched(packed)
        cache.count = len(lines)

    def _write_cache(self, out: Path, settings: list, roots: Iterable) -> None:
        """The patched cache, its directories renumbered in the order the file lists them
        (the manifest's roots in order, each root's directories as the cache holds them)."""
        cache = self.cache
        assert cache.dirs is not None and cache.lines is not None  # a format-2 cache (plan)
        number = {(root, rel): d for d, (root, rel, _) in enumerate(cache.dirs)}
        renumber = array("I", bytes(4 * len(cache.dirs)))
        blob_roots: dict[str, list] = {}
        order = 0
        for r in roots:
            dirs = cache.roots.get(r.name, {})
            blob_roots[r.name] = [root_settings(r), {
                rel: [packed.names, _packed(packed.entries), packed.others]
                for rel, packed in dirs.items()}]
            for rel in dirs:
                renumber[number[(r.name, rel)]] = order
                order += 1
        lines = cache.lines
        if any(renumber[d] != d for d in range(len(renumber))):
            lines = array("I", (renumber[d] for d in lines))
        write_blob(out, settings, blob_roots, lines)


def shifted(values: array, by: int) -> array:
    """``values`` (int64s, each staying >= 0) plus ``by``, in C: the array read as one
    big integer of 64-bit words, the same word added to (or taken from) each.  No word
    overflows or borrows, so none carries into the next: it is one vector addition."""
    n = len(values)
    if not n:
        return array("q")
    order = sys.byteorder
    word = abs(by).to_bytes(8, order) * n
    whole = int.from_bytes(values.tobytes(), order)
    whole = whole + int.from_bytes(word, order) if by > 0 else whole - int.from_bytes(word, order)
    out = array("q")
    out.frombytes(whole.to_bytes(8 * n, order))
    return out


def _touched(packed: PackedDir) -> None:
    packed.names = "\0".join(packed.name_list())
