"""The one writer of a JSON Lines export sorted by (root, path) (``walk.jsonl``,
``extract.jsonl``): written in full from the lines of one ordered query, or, for a few changed
keys, spliced into the previous export.

A splice finds where each changed key's line is (or would go) in the previous file by a binary
search over the file's BYTE offsets: seek, skip to the next newline, parse that line's
``root`` and ``path`` (no line index is kept).  The unchanged byte ranges between two changes
are copied by the kernel (:class:`~bastion.tasks.output.directory.CopySpan`), the changed
lines written.  Either way the file is replaced atomically, through the output's checked
descriptor (:meth:`~bastion.tasks.output.directory.OutputDir.write`).  The caller
decides whether the previous file is the export it splices into (its identity recorded in the
database); a line read that is not a record, or keys out of order where they are read, raise
ValueError (the file is left as it was).
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Iterator

from .directory import CopySpan, OutputDir

__all__ = ["Key", "export", "splice"]

Key = tuple[str, str]  # (root, path)
READ = 4096  # bytes read to find one line


def export(od: OutputDir, name: str, lines: Iterable[bytes]) -> None:
    """Write the export ``name`` of the output ``od`` in full from ``lines`` (already in
    (root, path) order)."""
    od.write(name, lines)


def splice(od: OutputDir, name: str, changes: Iterable[tuple[Key, bytes | None]]) -> None:
    """Rewrite the export ``name`` of the output ``od`` with each changed key's line replaced by the one given
    (``None``: the key's line removed; a key not in the file: the line inserted where it
    sorts).  ``changes`` need not be sorted; a key given twice keeps its last line.  Raises
    ValueError when what it reads is not a sorted export."""
    wanted = dict(changes)
    with od.open_read(name) as f:
        fd = f.fileno()
        size = os.fstat(fd).st_size
        finder = _Finder(fd, size)
        places = []  # (start, end, line): the bytes start:end replaced by line
        prev_end = 0
        for key in sorted(wanted):
            start = finder.first_at_least(key)
            end = start
            if start < size:
                got, end_of = finder.line_at(start)
                if got == key:
                    end = end_of
            if start < prev_end:
                raise ValueError(f"{od.path / name} is not sorted by (root, path)")
            places.append((start, end, wanted[key]))
            prev_end = end
        od.write(name, _spliced(fd, size, places))


def _spliced(fd: int, size: int, places: list[tuple[int, int, bytes | None]]
             ) -> Iterator[bytes | CopySpan]:
    at = 0
    for start, end, line in places:
        if start > at:
            yield CopySpan(fd, at, start - at)
        if line is not None:
            yield line
        at = max(at, end)
    if size > at:
        yield CopySpan(fd, at, size - at)


class _Finder:
    """Lines of an open sorted export found by byte offset (see the module)."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = size
        self.cache: dict[int, tuple[Key, int]] = {}  # line start -> (key, end)

    def next_start(self, offset: int) -> int:
        """The start of the first line at or after ``offset`` (the size when none)."""
        if offset <= 0:
            return 0
        at = offset - 1  # a line starts at offset when the byte before it is a newline
        while at < self.size:
            chunk = os.pread(self.fd, READ, at)
            if not chunk:
                break
            nl = chunk.find(b"\n")
            if nl >= 0:
                return at + nl + 1
            at += len(chunk)
        return self.size

    def line_at(self, start: int) -> tuple[Key, int]:
        """The (root, path) of the line starting at ``start``, and where it ends."""
        got = self.cache.get(start)
        if got is not None:
            return got
        data = b""
        while True:
            chunk = os.pread(self.fd, max(READ, len(data)), start + len(data))
            if not chunk:
                raise ValueError("the export ends inside a line")
            nl = chunk.find(b"\n")
            if nl >= 0:
                data += chunk[:nl + 1]
                break
            data += chunk
        try:
            d = json.loads(data)
            key = (d["root"], d["path"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"not a record at byte {start} of the export") from None
        if not (isinstance(key[0], str) and isinstance(key[1], str)):
            raise ValueError(f"not a record at byte {start} of the export")
        got = self.cache[start] = (key, start + len(data))
        return got

    def first_at_least(self, key: Key) -> int:
        """The start of the first line whose key is not below ``key`` (the size: none)."""
        lo, hi = 0, self.size  # lines starting before lo sort below key; hi is such a start
        while lo < hi:
            mid = (lo + hi) // 2
            s = self.next_start(mid)
            if s >= hi:  # no line starts in mid..hi: step over the line at lo
                s = lo
            got, end = self.line_at(s)
            if got < key:
                lo = end
            else:
                hi = s
        return lo
