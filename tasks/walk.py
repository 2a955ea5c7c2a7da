"""The walk stage: one record per file under each root, hashed and typed, incrementally.

A file whose ``(size, mtime_ns, inode)`` matches the previous walk keeps its sha256 and MIME
type without being read (the previous record is reused byte for byte from a stat cache, so a
re-walk costs a ``stat`` per file).  Everything is written atomically; nothing a tree holds
(loops, unreadable directories, FIFOs, devices, vanishing or growing files, names that are not
UTF-8) stops the walk: each is a record or a counted warning.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from readers.detect import HEAD_BYTES, detect_file

from .fsio import STATE_DIR, atomic_write, remove_stale_temps, write_json
from .manifest import Manifest, Root, dir_excluded, root_selects
from .records import WalkRecord, to_line

WALK_VERSION = 2  # bump when records or detection change: the stat cache is then ignored
CACHE_NAME = f"{STATE_DIR}/walk-cache"
READ_CHUNK = 1 << 20
MAX_WARNINGS_KEPT = 100


@dataclass
class WalkStats:
    files: int = 0
    bytes: int = 0
    hashed: int = 0
    reused: int = 0
    not_hashed: int = 0
    symlinks: int = 0
    other: int = 0
    errors: int = 0
    warnings: int = 0
    warning_samples: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        self.warnings += 1
        if len(self.warning_samples) < MAX_WARNINGS_KEPT:
            self.warning_samples.append(message)


Stat = tuple[int, int, int]  # (size, mtime_ns, inode)


def _load_cache(out: Path, settings: list) -> tuple[dict[str, tuple[Stat, bytes]], bytes]:
    """The previous walk's hashed files: ``"root\\0path"`` -> (stat, its record line).

    The cache holds only keys and stat triples (compact, quick to load); the lines are the
    previous ``walk.jsonl`` itself, used only when it is the file the cache was written with.
    """
    try:
        with open(out / CACHE_NAME, "rb") as f:
            data = marshal.load(f)
        if not isinstance(data, dict) or data.get("settings") != settings:
            return {}, b""
        st = os.stat(out / "walk.jsonl")
        if data.get("walk") != [st.st_size, st.st_mtime_ns]:
            return {}, b""
        with open(out / "walk.jsonl", "rb") as f:
            previous = f.read()
        lines = previous.splitlines(keepends=True)
        keys = data["keys"]
        stats = array("q")
        stats.frombytes(data["stats"])
        return {
            key: ((stats[4 * i], stats[4 * i + 1], stats[4 * i + 2]), lines[stats[4 * i + 3]])
            for i, key in enumerate(keys)
        }, previous
    except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError):
        return {}, b""


class Walker:
    """Walks the roots of one manifest into ``walk.jsonl``."""

    def __init__(self, manifest: Manifest, out: Path, *, no_hash: bool = False,
                 progress: Callable[[int], None] | None = None) -> None:
        self.manifest = manifest
        self.out = Path(out)
        self.no_hash = no_hash
        self.progress = progress
        self.stats = WalkStats()
        self.settings = [WALK_VERSION, manifest.max_file_bytes, no_hash]
        self.cache, self.previous = _load_cache(self.out, self.settings)
        # (root, path, record line, stat when the file was hashed: cached for the next walk)
        self.lines: list[tuple[str, str, bytes, Stat | None]] = []
        self.buf = bytearray(READ_CHUNK)
        try:
            st = os.stat(self.out)
            self.out_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.out_id = None

    # -- traversal ------------------------------------------------------------------------------

    def run(self) -> WalkStats:
        for root in self.manifest.roots:
            self._walk_root(root)
        return self.stats

    def _walk_root(self, root: Root) -> None:
        top = os.fsencode(str(root.path))
        try:
            top_st = os.stat(top)
        except OSError as e:
            self.stats.warn(f"{root.name}: cannot stat root: {e.strerror}")
            return
        real_top = os.path.realpath(top)
        visited = {(top_st.st_dev, top_st.st_ino)}
        stack: list[tuple[bytes, str]] = [(top, "")]
        while stack:
            dirpath, rel = stack.pop()
            try:
                with os.scandir(dirpath) as it:
                    entries = list(it)
            except OSError as e:
                self.stats.warn(f"{root.name}/{rel or '.'}: cannot read directory: "
                                f"{e.strerror}")
                continue
            for entry in entries:
                name = os.fsdecode(entry.name)
                relpath = f"{rel}/{name}" if rel else name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        if self._skip_dir(root, top_st, st, relpath):
                            continue
                        visited.add((st.st_dev, st.st_ino))
                        stack.append((entry.path, relpath))
                    elif entry.is_symlink():
                        self._symlink(root, entry, relpath, real_top, top_st, visited, stack)
                    elif entry.is_file(follow_symlinks=False):
                        if root_selects(root, relpath):
                            self._file(root, entry.path, relpath,
                                       entry.stat(follow_symlinks=False))
                    else:
                        if root_selects(root, relpath):
                            self._other(root, relpath, entry.stat(follow_symlinks=False))
                except FileNotFoundError:
                    self.stats.warn(f"{root.name}/{relpath}: vanished during the walk")
                except OSError as e:
                    self.stats.warn(f"{root.name}/{relpath}: {e.strerror}")

    def _skip_dir(self, root: Root, top_st: os.stat_result, st: os.stat_result,
                  relpath: str) -> bool:
        if self.out_id == (st.st_dev, st.st_ino):
            return True  # the output directory is never walked
        if root.one_file_system and st.st_dev != top_st.st_dev:
            return True
        return dir_excluded(root, relpath)

    def _symlink(self, root: Root, entry: os.DirEntry, relpath: str, real_top: bytes,
                 top_st: os.stat_result, visited: set, stack: list) -> None:
        if not root_selects(root, relpath) and not root.follow_symlinks:
            return
        lst = entry.stat(follow_symlinks=False)
        reason = "symlink (not followed)"
        if root.follow_symlinks:
            target = os.path.realpath(entry.path)
            inside = target == real_top or target.startswith(real_top.rstrip(b"/") + b"/")
            try:
                st = os.stat(entry.path)
            except OSError:
                reason = "broken symlink or symlink loop"
            else:
                if not inside:
                    reason = "symlink out of the root (not followed)"
                elif stat.S_ISDIR(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if key in visited:
                        reason = "symlink loop (directory already walked)"
                    elif not self._skip_dir(root, top_st, st, relpath):
                        visited.add(key)
                        stack.append((entry.path, relpath))
                        return
                    else:
                        return
                elif stat.S_ISREG(st.st_mode):
                    if root_selects(root, relpath):
                        # open the resolved target: _hash opens with O_NOFOLLOW
                        self._file(root, target, relpath, st)
                    return
                else:
                    reason = "symlink to a special file (not followed)"
        if not root_selects(root, relpath):
            return
        self.stats.symlinks += 1
        self._emit(WalkRecord(root.name, relpath, "symlink", lst.st_size, lst.st_mtime_ns,
                              lst.st_ino, None, reason, None, None))

    def _other(self, root: Root, relpath: str, st: os.stat_result) -> None:
        self.stats.other += 1
        self._emit(WalkRecord(root.name, relpath, "other", st.st_size, st.st_mtime_ns,
                              st.st_ino, None, "not a regular file (never opened)", None, None))

    # -- files ----------------------------------------------------------------------------------

    def _file(self, root: Root, path: bytes, relpath: str, st: os.stat_result) -> None:
        stats = self.stats
        stats.files += 1
        stats.bytes += st.st_size
        triple = (st.st_size, st.st_mtime_ns, st.st_ino)
        cached = self.cache.get(f"{root.name}\0{relpath}")
        if cached is not None and cached[0] == triple:
            stats.reused += 1
            self.lines.append((root.name, relpath, cached[1], triple))
            if self.progress:
                self.progress(1)
            return
        sha, reason, mime, error = self._hash(path, relpath, st)
        record = WalkRecord(root.name, relpath, "file", st.st_size, st.st_mtime_ns, st.st_ino,
                            sha, reason, mime, error)
        if sha is not None:
            stats.hashed += 1
        else:
            stats.not_hashed += 1
        if error:
            stats.errors += 1
        self.lines.append((root.name, relpath, to_line(record), triple if sha else None))
        if self.progress:
            self.progress(1)

    def _hash(self, path: bytes, relpath: str, st: os.stat_result
              ) -> tuple[str | None, str | None, str | None, str | None]:
        """(sha256, reason, mime, error) for one regular file."""
        name = os.path.basename(relpath)
        over = st.st_size > self.manifest.max_file_bytes
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as e:
            return None, "read error", None, f"cannot open: {e.strerror}"
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode) or fst.st_ino != st.st_ino:
                return None, "changed during the walk", None, "replaced during the walk"
            head = os.read(fd, HEAD_BYTES)
            mime = detect_file(path, name, head)
            if over:
                return None, f"over max_file_bytes ({self.manifest.max_file_bytes})", mime, None
            if self.no_hash:
                return None, "no-hash", mime, None
            h = hashlib.sha256(head)
            total = len(head)
            buf = self.buf
            limit = st.st_size + 1
            while total < limit:
                n = os.readv(fd, [buf])
                if not n:
                    break
                h.update(memoryview(buf)[:n])
                total += n
            after = os.fstat(fd)
        except OSError as e:
            return None, "read error", None, f"cannot read: {e.strerror}"
        finally:
            os.close(fd)
        if total != st.st_size or after.st_mtime_ns != st.st_mtime_ns:
            return None, "changed during the walk", mime, "file changed while it was hashed"
        return h.hexdigest(), None, mime, None

    def _emit(self, record: WalkRecord) -> None:
        self.lines.append((record.root, record.path, to_line(record), None))

    # -- output ---------------------------------------------------------------------------------

    def write(self) -> None:
        self.lines.sort(key=_order)
        walk_path = self.out / "walk.jsonl"
        data = b"".join(t[2] for t in self.lines)
        if self.previous and data == self.previous:
            return  # an unchanged tree: walk.jsonl and its cache are already right
        atomic_write(walk_path, data)
        keys: list[str] = []
        stats = array("q")  # size, mtime_ns, inode, line number per key: one bytes blob
        for i, (root, path, _, triple) in enumerate(self.lines):
            if triple is not None:
                keys.append(f"{root}\0{path}")
                stats.extend((*triple, i))
        st = os.stat(walk_path)
        cache = {"settings": self.settings, "walk": [st.st_size, st.st_mtime_ns],
                 "keys": keys, "stats": stats.tobytes()}
        (self.out / STATE_DIR).mkdir(exist_ok=True)
        atomic_write(self.out / CACHE_NAME, marshal.dumps(cache))


def _order(t: tuple) -> tuple[str, str]:
    return (t[0], t[1])


def run_walk(manifest: Manifest, out: Path, *, no_hash: bool = False,
             progress: Callable[[int], None] | None = None) -> dict:
    """Walk, write ``walk.jsonl``, the stat cache and ``walk.summary.json``; return the summary."""
    started = time.time()
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out)
    remove_stale_temps(out / STATE_DIR)  # the stat cache's temp file of a killed walk
    walker = Walker(manifest, out, no_hash=no_hash, progress=progress)
    stats = walker.run()
    walker.write()
    s = stats
    summary = {
        "stage": "walk",
        "manifest": str(manifest.path),
        "manifest_digest": manifest.digest,
        "roots": [{"name": r.name, "path": str(r.path)} for r in manifest.roots],
        "files": s.files,
        "bytes": s.bytes,
        "hashed": s.hashed,
        "reused": s.reused,
        "not_hashed": s.not_hashed,
        "symlinks": s.symlinks,
        "other": s.other,
        "errors": s.errors,
        "warnings": s.warnings,
        "warning_samples": s.warning_samples,
        "records": len(walker.lines),
        "no_hash": no_hash,
        "max_file_bytes": manifest.max_file_bytes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.monotonic() - t0, 3),
    }
    write_json(out / "walk.summary.json", summary)
    return summary
