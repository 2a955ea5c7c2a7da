"""The walk's stat cache: the previous walk's records by root, directory and name.

``.bastion/walk-cache`` is one ``marshal`` blob written beside every ``walk.jsonl``::

    {"settings": [WALK_VERSION, max_file_bytes, no_hash],
     "walk": [size, mtime_ns] of the walk.jsonl it describes,
     "count": how many records that walk.jsonl holds,
     "format": 2,
     "roots": {root name: [root settings, {directory: [names, entries, others]}]},
     "lines": for each line of walk.jsonl, the number of its directory}

where a directory is its POSIX path relative to the root (``""`` for the root) and a name a
``str`` (a name that is not UTF-8 holds surrogate escapes, which marshal keeps).  A
directory's ``names`` are joined by NUL (which no file name holds), in walk order;
``entries`` is five signed 64-bit integers per name, ``(line, size, mtime_ns, inode,
ctime_ns)``, with ``size`` -1 for a record that does not depend only on the stat, whose line
``others`` holds by name (made again, compared).  ``line`` is the record's line number in
that walk.jsonl; ``lines`` (unsigned 32-bit; every array little-endian) numbers the directories in the
order the blob lists them, every root's included.  Packed this way a million records take
≈ 60 MB in memory, not ≈ 350 MB as tuples, and the records a re-walk keeps are read back in
file order without an index of every line.

A cache whose settings differ, or whose walk.jsonl is not the file on disk, is not used; a
root whose settings (path, patterns, symlink and device options) changed gets no entries.
The cache of ``format`` 1 (no ``format`` key: a dict of ``(line, size, mtime_ns, inode,
ctime_ns)`` or ``(line, -1, 0, 0, 0, record line)`` tuples by name per directory, and no
``lines``) is still read, so an upgrade re-reads no file; the next changed walk writes
format 2.
"""

from __future__ import annotations

import marshal
import sys
from array import array
from pathlib import Path
from typing import Any, Iterable, Iterator, TypeAlias

from ..output.atomic import STATE_DIR, atomic_write, makedirs, open_read, read_bytes
from ..output.atomic import stat as out_stat

CACHE_NAME = f"{STATE_DIR}/walk-cache"
FORMAT = 2

Key = tuple[int, int, int, int]  # (size, mtime_ns, inode, ctime_ns)
EMPTY: dict[str, tuple] = {}
# One record of the walk being written: (root, path, directory, name, line, key when the
# record depends only on the stat)
Row = tuple[str, str, str, str, bytes, "Key | None"]


def root_settings(root) -> list:  # root: bastion.tasks.manifest.Root
    """What a root's cached records depend on besides each file's stat."""
    return [str(root.path), list(root.include), list(root.exclude), root.follow_symlinks,
            root.one_file_system]


class PackedDir:
    """One directory's previous entries as the cache holds them (see the module).  ``get``
    answers like a dict of entry tuples, from an index made at the first question and
    dropped by :meth:`release` once the walk has left the directory."""

    __slots__ = ("names", "entries", "others", "_index", "_split")

    def __init__(self, names: str, entries: array, others: dict[str, bytes]) -> None:
        self.names = names
        self.entries = entries
        self.others = others
        self._index: dict[str, int] | None = None
        self._split: list[str] | None = None

    def __len__(self) -> int:
        return len(self.entries) // 5

    def name_list(self) -> list[str]:
        if self._split is None:
            self._split = self.names.split("\0") if len(self) else []
        return self._split

    def entry(self, k: int, name: str) -> tuple:
        e = self.entries
        at = 5 * k
        if e[at + 1] < 0:
            return (e[at], -1, 0, 0, 0, self.others[name])
        return (e[at], e[at + 1], e[at + 2], e[at + 3], e[at + 4])

    def get(self, name: str, default: tuple | None = None) -> tuple | None:
        if self._index is None:
            self._index = {n: k for k, n in enumerate(self.name_list())}
        k = self._index.get(name)
        return default if k is None else self.entry(k, name)

    def __getitem__(self, name: str) -> tuple:
        found = self.get(name)
        if found is None:
            raise KeyError(name)
        return found

    def items(self) -> Iterator[tuple[str, tuple]]:
        for k, name in enumerate(self.name_list()):
            yield name, self.entry(k, name)

    def release(self) -> None:
        self._index = self._split = None

    def __eq__(self, other: object) -> bool:
        return dict(self.items()) == (dict(other.items()) if isinstance(other, PackedDir)
                                      else other)


DirCache: TypeAlias = "PackedDir | dict[str, tuple]"  # one directory's entries (format 2, or format 1)


def _unpacked(blob: bytes, code: str) -> array:
    """An array from its bytes in the file (little-endian, whatever this machine's order)."""
    a = array(code)
    a.frombytes(blob)
    if sys.byteorder == "big":
        a.byteswap()
    return a


def _packed(a: array) -> bytes:
    if sys.byteorder == "big":
        a = array(a.typecode, a)
        a.byteswap()
    return a.tobytes()


class StatCache:
    """The previous walk's records, as the cache file holds them (see the module's doc)."""

    __slots__ = ("roots", "count", "dirs", "lines")

    def __init__(self, roots: dict[str, dict] | None = None, count: int = -1,
                 dirs: list | None = None, lines: array | None = None) -> None:
        self.roots = roots if roots is not None else {}  # root name -> directory -> entries
        self.count = count  # records in the previous walk.jsonl; -1: no usable cache
        # format 2: every directory of the blob in its order as (root, directory, entries),
        # None for those of a root not kept; and each line's directory number
        self.dirs = dirs
        self.lines = lines

    @classmethod
    def load(cls, out: Path, settings: list, roots: Iterable) -> "StatCache":
        """The cache under ``out`` when it describes the walk.jsonl there and was written
        with ``settings``; an empty one otherwise.  ``roots`` are the manifest's."""
        try:
            # through the output's checked descriptor: marshal is no parser for hostile data
            data = marshal.loads(read_bytes(out / CACHE_NAME))  # not marshal.load(f): 8x slower
            if not isinstance(data, dict) or data.get("settings") != settings:
                return cls()
            st = out_stat(out / "walk.jsonl")
            if data.get("walk") != [st.st_size, st.st_mtime_ns]:
                return cls()  # walk.jsonl is not the file the line numbers refer to
            cached = data["roots"]
            count = data["count"]
            if not isinstance(cached, dict) or not isinstance(count, int):
                return cls()
            wanted = {root.name: root_settings(root) for root in roots}
            kept: dict[str, Any] = {}
            if data.get("format") != FORMAT:  # format 1: dicts of tuples
                for name, entry in cached.items():
                    if (name in wanted and isinstance(entry, list) and len(entry) == 2
                            and entry[0] == wanted[name]):
                        kept[name] = entry[1]
                return cls(kept, count)
            dirs: list[tuple[Any, Any, PackedDir] | None] = []
            for name, entry in cached.items():
                keep = (name in wanted and isinstance(entry, list) and len(entry) == 2
                        and entry[0] == wanted[name])
                if keep:
                    kept[name] = {}
                for rel, (names, entries, others) in entry[1].items():
                    if not keep:
                        dirs.append(None)
                        continue
                    packed = PackedDir(names, _unpacked(entries, "q"), others)
                    if len(packed.entries) % 5 or not isinstance(others, dict):
                        return cls()
                    kept[name][rel] = packed
                    dirs.append((name, rel, packed))
            lines = _unpacked(data["lines"], "I")
            if len(lines) != count:
                return cls()
            return cls(kept, count, dirs, lines)
        except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError, AttributeError):
            return cls()

    def root(self, name: str) -> dict:
        """One root's directories (empty when the root is not cached)."""
        return self.roots.get(name, {})

    @property
    def streams(self) -> bool:
        """Whether the records kept can be read back in file order (format 2)."""
        return self.lines is not None

    def kept(self, hits: bytearray, walk_jsonl: Path) -> Iterator[Row]:
        """The rows of the previous records whose line numbers ``hits`` marks, in file order
        (which is walk order), read in one pass of the previous ``walk_jsonl``: each line's
        directory from :attr:`lines`, its name the next one of that directory."""
        assert self.dirs is not None and self.lines is not None
        dirs, lines = self.dirs, self.lines
        cursor = array("q", bytes(8 * len(dirs)))
        n = -1
        with open_read(walk_jsonl) as f:
            for n, line in enumerate(f):
                d = lines[n]
                k = cursor[d]
                cursor[d] = k + 1
                if not hits[n]:
                    continue
                root_name, rel, packed = dirs[d]
                name = packed.name_list()[k]
                c = packed.entry(k, name)
                yield (root_name, f"{rel}/{name}" if rel else name, rel, name, line,
                       c[1:5] if len(c) == 5 else None)
        if n + 1 != len(lines):
            raise ValueError(f"{walk_jsonl} does not have the lines its stat cache says")
        for d in dirs:
            if d is not None:
                d[2].release()

    def found(self, lines: Iterable[int], walk_jsonl: Path) -> list[Row]:
        """The rows of the previous records at ``lines`` (those this walk found unchanged),
        in the order asked, their bytes read from the previous ``walk_jsonl`` (any format)."""
        lines = lines if isinstance(lines, (list, array)) else list(lines)
        order = sorted(range(len(lines)), key=lines.__getitem__)  # where each line goes
        where: dict[int, tuple[str, str, str, tuple]] = {}
        for root_name, dirs in self.roots.items():
            for rel, dc in dirs.items():
                for name, c in dc.items():
                    where[c[0]] = (root_name, rel, name, c)
        rows: list[Row] = [None] * len(lines)  # type: ignore[list-item]
        at = 0
        # the previous lines read in one pass, only those asked for (not the whole file held
        # and split); through the output's checked descriptor, as read_bytes does
        with open_read(walk_jsonl) as f:
            for n, line in enumerate(f):
                if at == len(order):
                    break
                if n != lines[order[at]]:
                    continue
                root_name, rel, name, c = where[n]
                relpath = f"{rel}/{name}" if rel else name
                row = (root_name, relpath, rel, name, line, c[1:5] if len(c) == 5 else None)
                while at < len(order) and lines[order[at]] == n:
                    rows[order[at]] = row
                    at += 1
        if at != len(order):
            raise ValueError(f"{walk_jsonl} is shorter than its stat cache says")
        return rows

    @staticmethod
    def write(out: Path, settings: list, roots: Iterable, rows: Iterable[Row]) -> None:
        """Write the cache of the walk.jsonl just written from ``rows`` (in its order)."""
        builder = CacheBuilder(roots)
        for row in rows:
            builder.add(row)
        builder.write(out, settings)


class CacheBuilder:
    """The next cache, made a row at a time while walk.jsonl is written (in its order)."""

    def __init__(self, roots: Iterable) -> None:
        self.by_root: dict[str, list] = {r.name: [root_settings(r), {}] for r in roots}
        self.numbers: dict[tuple[str, str], int] = {}
        self.order: list[tuple[str, str]] = []
        self.lines = array("I")

    def add(self, row: Row) -> None:
        root_name, _, rel, name, line, key = row[:6]
        i = len(self.lines)
        number = self.numbers.get((root_name, rel))
        if number is None:
            number = self.numbers[(root_name, rel)] = len(self.order)
            self.order.append((root_name, rel))
            self.by_root[root_name][1][rel] = (bytearray(), array("q"), {})
        names, entries, others = self.by_root[root_name][1][rel]
        names += name.encode("utf-8", "surrogatepass") + b"\0"  # ~15 bytes, not a str object
        if key is None:
            entries.extend((i, -1, 0, 0, 0))
            others[name] = line
        else:
            entries.extend((i, *key))
        self.lines.append(number)

    def write(self, out: Path, settings: list) -> None:
        # the directories renumbered in the order the blob lists them
        final: dict[str, list] = {}
        renumber: dict[tuple[str, str], int] = {}
        for root_name, (rsettings, dirs) in self.by_root.items():
            packed = {}
            for rel, (names, entries, others) in dirs.items():
                renumber[(root_name, rel)] = len(renumber)
                packed[rel] = [names[:-1].decode("utf-8", "surrogatepass"), _packed(entries),
                               others]
                names.clear()
            final[root_name] = [rsettings, packed]
        remap = array("I", (renumber[key] for key in self.order))
        lines = array("I", (remap[n] for n in self.lines))
        write_blob(out, settings, final, lines)


def write_blob(out: Path, settings: list, roots: dict[str, list], lines: array) -> None:
    """The cache file of the walk.jsonl just written: its roots' packed directories, each
    line's directory number."""
    st = out_stat(out / "walk.jsonl")
    cache = {"settings": settings, "walk": [st.st_size, st.st_mtime_ns],
             "roots": roots, "count": len(lines), "format": FORMAT, "lines": _packed(lines)}
    makedirs(out / STATE_DIR)
    atomic_write(out / CACHE_NAME, marshal.dumps(cache))

