"""Where the lines of ``walk.jsonl`` and ``extract.jsonl`` start, kept beside them, so that a
small change finds the few lines it touches without a counting pass over the whole file.

An index (:class:`LineIndex`) is a list of marks — (line number, byte offset) of a line's
start, one at least every :data:`MARK_BYTES` — with the file's line count and identity
(:func:`~bastion.tasks.output.atomic.file_identity`: size, mtime, ctime, inode), and, for
extract.jsonl, the runs of lines holding a pattern (``"reused":false``: the flags the next
merge flips, so that only those lines are read).  It lives in
``.bastion/<file>.lines`` and is written after the file it describes, by whoever wrote it
(:class:`Builder` follows the stream of lines and copied ranges).  It is trusted only while
that file's identity is the recorded one: a file written by anything else, or a crash
between the two writes, makes it stale, and the caller counts the lines instead.  Every
block it reads is checked (it starts after a newline, holds the lines the marks say), so
even a wrong index gives a :class:`ValueError`, never a wrong offset.
"""

from __future__ import annotations

import marshal
import os
from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from .atomic import STATE_DIR, file_identity
from .directory import OutputDir
from .modes import OutputError

MARK_BYTES = 1 << 20
VERSION = 1


@dataclass(frozen=True)
class LineIndex:
    """The marks of one file (see the module); ``flagged`` holds (first, end) line pairs."""

    identity: tuple[int, ...]
    count: int
    lines: array
    offsets: array
    flagged: array

    @property
    def size(self) -> int:
        return self.identity[0]

    def locate(self, fd: int, wanted: Iterable[int]) -> dict[int, int]:
        """The byte offsets where the lines ``wanted`` start (the count itself: the end),
        reading only the blocks that hold them.  Raises ValueError when the file does not
        have the lines the index says."""
        out: dict[int, int] = {}
        todo = sorted(set(wanted))
        i = 0
        while i < len(todo):
            w = todo[i]
            if w >= self.count:
                if w > self.count:
                    raise ValueError(f"line {w} is past the file's {self.count} lines")
                out[w] = self.size
                i += 1
                continue
            b = bisect_right(self.lines, w) - 1
            first, start = self.lines[b], self.offsets[b]
            last = self.lines[b + 1] if b + 1 < len(self.lines) else self.count
            end = self.offsets[b + 1] if b + 1 < len(self.lines) else self.size
            block = _pread(fd, end - start + (start > 0), start - (start > 0))
            if start > 0:
                if block[:1] != b"\n":
                    raise ValueError("a mark of the line index is not at a line's start")
                block = block[1:]
            if block.count(b"\n") != last - first or (block and block[-1:] != b"\n"):
                raise ValueError("the file does not have the lines its index says")
            pos, k = 0, first
            while i < len(todo) and todo[i] < last:
                while k < todo[i]:
                    pos = block.index(b"\n", pos) + 1
                    k += 1
                out[todo[i]] = start + pos
                i += 1
        return out

    def find(self, fd: int, offsets: dict[int, int], pattern: bytes) -> array:
        """The byte offsets of ``pattern`` in the flagged lines (``offsets`` must hold their
        runs' ends, from :meth:`locate`): the file's occurrences, the other lines unread."""
        found = array("q")
        for j in range(0, len(self.flagged), 2):
            start, end = offsets[self.flagged[j]], offsets[self.flagged[j + 1]]
            at = start
            while at < end:
                piece = _pread(fd, min(end - at, 1 << 22), at)
                if at + len(piece) < end:  # whole lines: the pattern is never cut in two
                    piece = piece[:piece.rindex(b"\n") + 1]
                k = piece.find(pattern)
                while k >= 0:
                    found.append(at + k)
                    k = piece.find(pattern, k + len(pattern))
                at += len(piece)
        return found


def counted(fd: int, count: int, lines: array, offsets: array) -> LineIndex:
    """An index of an open file from marks found while counting it (no flagged runs)."""
    st = os.fstat(fd)
    identity = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    return LineIndex(identity, count, lines, offsets, array("q"))


def index_rel(name: str) -> str:
    """The index of the output's file ``name``, relative to the output."""
    return f"{STATE_DIR}/{name}.lines"


def load(od: OutputDir, name: str) -> LineIndex | None:
    """The index of the output's file ``name`` when it still describes the file, else None."""
    identity = file_identity(od.path / name)
    if identity is None:
        return None
    try:
        data = marshal.loads(od.read(index_rel(name)))
    except (OSError, EOFError, ValueError, TypeError):
        return None
    try:
        if (not isinstance(data, dict) or data.get("version") != VERSION
                or list(data["identity"]) != list(identity)):
            return None
        parts = []
        for name in ("lines", "offsets", "flagged"):
            a = array("q")
            a.frombytes(data[name])
            parts.append(a)
        lines, offsets, flagged = parts
        count = int(data["count"])
    except (KeyError, TypeError, ValueError):
        return None
    if (not len(lines) or len(lines) != len(offsets) or lines[0] != 0 or offsets[0] != 0
            or len(flagged) % 2 or any(x > count for x in flagged[-1:])):
        return None
    return LineIndex(tuple(identity), count, lines, offsets, flagged)


def save(od: OutputDir, name: str, index: LineIndex) -> None:
    """Write the index (no fsync of its own: a lost or stale one is only not used)."""
    data = {"version": VERSION, "identity": list(index.identity), "count": index.count,
            "lines": index.lines.tobytes(), "offsets": index.offsets.tobytes(),
            "flagged": index.flagged.tobytes()}
    od.write(index_rel(name), marshal.dumps(data), sync=False)


def drop(od: OutputDir, name: str) -> None:
    try:
        od.unlink(index_rel(name))
    except OSError:
        pass


class Builder:
    """The index of a file being written, from what is written: whole lines
    (:meth:`add`), and ranges of lines copied from a file with an index (:meth:`keep`)."""

    def __init__(self, pattern: bytes = b"") -> None:
        self.pattern = pattern
        self.lines = array("q", [0])
        self.offsets = array("q", [0])
        self.flagged = array("q")
        self.line = 0  # lines so far
        self.pos = 0  # bytes so far

    def _mark(self, line: int, pos: int) -> None:
        if pos - self.offsets[-1] >= MARK_BYTES:
            self.lines.append(line)
            self.offsets.append(pos)

    def _flag(self, line: int) -> None:
        f = self.flagged
        if f and f[-1] == line:
            f[-1] = line + 1
        else:
            f.extend((line, line + 1))

    def add(self, data: bytes) -> None:
        """``data``: one or more whole lines, as written."""
        self._mark(self.line, self.pos)
        n = 1
        if len(data) > MARK_BYTES or data.find(b"\n") != len(data) - 1:
            n = self._interior(data)
        if self.pattern:
            k = data.find(self.pattern)
            while k >= 0:
                self._flag(self.line + (data.count(b"\n", 0, k) if n > 1 else 0))
                k = data.find(self.pattern, k + len(self.pattern))
        self.line += n
        self.pos += len(data)

    def _interior(self, data: bytes) -> int:
        """Marks inside a long piece; how many lines it has."""
        mark_lines(data, self.pos, self.line, self.lines, self.offsets)
        return data.count(b"\n")

    def keep(self, src: LineIndex, first: int, n: int, start: int, end: int,
             cuts: array | list | tuple = (), shrink: int = 0) -> None:
        """Old lines ``first`` … ``first + n`` of the file ``src`` indexes (its bytes
        ``start:end``) written here, each byte offset in ``cuts`` (sorted, in that range)
        ``shrink`` bytes shorter; none of them flagged any more."""
        self._mark(self.line, self.pos)
        lo = bisect_right(src.lines, first)
        hi = bisect_left(src.lines, first + n)
        for b in range(lo, hi):
            off = src.offsets[b]
            less = shrink * (bisect_left(cuts, off) if cuts else 0)
            self._mark(self.line + src.lines[b] - first, self.pos + off - start - less)
        self.line += n
        self.pos += end - start - shrink * len(cuts)

    def finish(self, jsonl: Path) -> LineIndex | None:
        """The index of ``jsonl`` as now written (None when it is not the size built)."""
        identity = file_identity(jsonl)
        if identity is None or identity[0] != self.pos:
            return None
        return LineIndex(tuple(identity), self.line, self.lines, self.offsets, self.flagged)


def save_built(od: OutputDir, name: str, builder: Builder | None) -> None:
    """Save what ``builder`` built for the output's file ``name``, or drop a stale index.  A
    failure to write it (a full disk) is not the run's: the index is then stale, and not used."""
    index = builder.finish(od.path / name) if builder is not None else None
    try:
        if index is None:
            drop(od, name)
        else:
            save(od, name, index)
    except (OSError, OutputError):
        pass


def indexed(lines: Iterable[bytes], builder: Builder) -> Iterator[bytes]:
    """``lines`` passed on, each one added to ``builder``."""
    for line in lines:
        builder.add(line)
        yield line


def mark_lines(data: bytes, base: int, line: int, lines: array, offsets: array) -> None:
    """Marks for the line starts in ``data`` (a file's bytes from ``base``, after ``line``
    lines), one whenever :data:`MARK_BYTES` have passed since the last of ``offsets``."""
    at = 0
    while True:
        want = offsets[-1] + MARK_BYTES - base  # the first byte the next mark may be at
        if want >= len(data):
            return
        nl = data.find(b"\n", max(want - 1, at))
        if nl < 0 or nl + 1 >= len(data):
            return
        line += data.count(b"\n", at, nl + 1)
        at = nl + 1
        lines.append(line)
        offsets.append(base + at)


def _pread(fd: int, n: int, at: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        piece = os.pread(fd, n - len(out), at + len(out))
        if not piece:
            raise ValueError("the file is shorter than its line index says")
        out += piece
    return bytes(out)
