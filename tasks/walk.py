"""The walk stage: one record per file under each root, hashed and typed, incrementally.

A file whose ``(size, mtime_ns, inode, ctime_ns)`` matches the previous walk keeps its record
byte for byte without being read: the stat cache (``.bastion/walk-cache``) finds it by root,
directory and name, so a re-walk costs one ``lstat`` per file, and a big re-walk is shared
with forked helpers, one per further core.  Everything is written atomically; nothing a tree
holds (loops, unreadable directories, FIFOs, devices, vanishing or growing files, names that are
not UTF-8) stops the walk: each is a record or a counted warning.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import stat
import threading
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from readers.detect import HEAD_BYTES, detect_file

from .fsio import (STATE_DIR, atomic_write, makedirs, output, read_bytes, remove_stale_temps,
                   write_json)
from .fsio import stat as out_stat
from .manifest import Manifest, Root, dir_excluded, path_excluded, root_selects
from .records import WalkRecord, to_line

WALK_VERSION = 3  # bump when records or detection change: the stat cache is then ignored
CACHE_NAME = f"{STATE_DIR}/walk-cache"
READ_CHUNK = 1 << 20
MAX_WARNINGS_KEPT = 100
PARALLEL_MIN_RECORDS = 20_000  # a re-walk this big is shared with forked helpers
MAX_WALKERS = 4


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


Key = tuple[int, int, int, int]  # (size, mtime_ns, inode, ctime_ns)
# The stat cache, per root and directory (relative POSIX path), per entry name (a str; a
# name that is not UTF-8 holds surrogate escapes, which marshal keeps):
#   a reusable file record:   (line, size, mtime_ns, inode, ctime_ns)
#   any other record:         (line, -1, 0, 0, 0, record line)  -- made again, then compared
# ``line`` is the record's line number in the walk.jsonl the cache was written with.
DirCache = dict[str, tuple]
_EMPTY: DirCache = {}
# A record made by this walk: (root, path, directory, name, line, key when reusable)
Fresh = tuple[str, str, str, str, bytes, "Key | None"]


def _root_settings(root: Root) -> list:
    """What a root's cached records depend on besides each file's stat."""
    return [str(root.path), list(root.include), list(root.exclude), root.follow_symlinks,
            root.one_file_system]


def _load_cache(out: Path, settings: list, roots: tuple[Root, ...]
                ) -> tuple[dict[str, dict[str, DirCache]], int]:
    """The previous walk's records by root, directory and name, and how many there were
    (-1 when there is no usable cache).  A root whose settings changed gets no entries."""
    try:
        # read through the output's checked descriptor: marshal is no parser for hostile data
        data = marshal.loads(read_bytes(out / CACHE_NAME))  # not marshal.load(f): 8x slower
        if not isinstance(data, dict) or data.get("settings") != settings:
            return {}, -1
        st = out_stat(out / "walk.jsonl")
        if data.get("walk") != [st.st_size, st.st_mtime_ns]:
            return {}, -1  # walk.jsonl is not the file the line numbers refer to
        cached = data["roots"]
        count = data["count"]
        if not isinstance(cached, dict) or not isinstance(count, int):
            return {}, -1
        kept = {}
        for root in roots:
            entry = cached.get(root.name)
            if isinstance(entry, list) and len(entry) == 2 and entry[0] == _root_settings(root):
                kept[root.name] = entry[1]
        return kept, count
    except (OSError, EOFError, ValueError, TypeError, KeyError, IndexError):
        return {}, -1


class Walker:
    """Walks the roots of one manifest into ``walk.jsonl``.

    A re-walk costs one ``lstat`` per file: an entry whose ``(size, mtime_ns, inode,
    ctime_ns)`` matches the stat cache keeps its previous record line, found by its directory
    and name (no path string is even built for it).  When every previous record is found again
    and nothing new was made, ``walk.jsonl`` and the cache are left as they are.
    """

    def __init__(self, manifest: Manifest, out: Path, *, no_hash: bool = False,
                 progress: Callable[[int], None] | None = None) -> None:
        self.manifest = manifest
        self.out = Path(out)
        self.no_hash = no_hash
        self.progress = progress
        self.stats = WalkStats()
        self.settings = [WALK_VERSION, manifest.max_file_bytes, no_hash]
        self.cache, self.cache_count = _load_cache(self.out, self.settings, manifest.roots)
        self.hits: list[int] = []  # line numbers of previous records found unchanged
        self.fresh: list[Fresh] = []  # records made by this walk
        self.records = 0
        self.buf = bytearray(READ_CHUNK)
        try:
            st = os.stat(self.out)
            self.out_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.out_id = None

    # -- traversal ------------------------------------------------------------------------------

    def run(self) -> WalkStats:
        helpers = self._helpers()
        if helpers:
            self._run_shared(helpers)
        else:
            for root in self.manifest.roots:
                self._walk_root(root)
        self.records = len(self.hits) + len(self.fresh)
        return self.stats

    def _helpers(self) -> int:
        """How many forked helpers share a re-walk: one per further core (at most 3) when
        the stat cache predicts enough files to pay for the forks, none otherwise.  A first
        walk stays in one process: it reads every file, and parallel reads would seek on a
        spinning disk."""
        if self.cache_count < PARALLEL_MIN_RECORDS or threading.active_count() > 1:
            return 0  # never fork a process that runs threads
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        return max(0, min(cores, MAX_WALKERS) - 1)

    def _run_shared(self, helpers: int) -> None:
        """Walk with ``helpers`` forked copies of this walker.  Every process lists every
        directory (cheap); each ``lstat``s, compares, hashes and records only the entries it
        owns: ``hash(name) % owners`` (forked processes share the hash seed).  A helper sends
        back its counts, hits and records over a pipe; if one fails, its share is walked
        again here, so nothing is lost."""
        owners = helpers + 1
        parent = os.getpid()
        children: list[tuple[int, int, int]] = []  # (pid, read fd, owner)
        for owner in range(1, owners):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the helper: walk its share, send it, exit without cleanup
                code = 1
                try:
                    from readers.runtime import set_parent_death_signal

                    set_parent_death_signal()  # a killed parent takes its helpers along
                    if os.getppid() != parent:
                        os._exit(1)
                    os.close(r)
                    self.progress = None
                    self.stats, self.hits, self.fresh = WalkStats(), [], []
                    for root in self.manifest.roots:
                        self._walk_root(root, owner, owners)
                    s = self.stats
                    data = marshal.dumps((
                        [s.files, s.bytes, s.hashed, s.reused, s.not_hashed, s.symlinks,
                         s.other, s.errors, s.warnings], s.warning_samples,
                        array("q", self.hits).tobytes(), self.fresh))
                    with open(w, "wb") as f:
                        f.write(data)
                    code = 0
                finally:
                    os._exit(code)
            os.close(w)
            children.append((pid, r, owner))
        for root in self.manifest.roots:
            self._walk_root(root, 0, owners)
        for pid, r, owner in children:
            with open(r, "rb") as f:
                data = f.read()
            _, status = os.waitpid(pid, 0)
            try:
                if status != 0:
                    raise ValueError(f"walk helper exited with status {status}")
                counts, samples, hits, fresh = marshal.loads(data)
            except (ValueError, EOFError, TypeError) as e:
                self.stats.warn(f"walk helper {owner} failed ({e}): its share walked again")
                for root in self.manifest.roots:
                    self._walk_root(root, owner, owners)
                continue
            s = self.stats
            (files, nbytes, hashed, reused, not_hashed, symlinks, other, errors,
             warnings) = counts
            s.files += files
            s.bytes += nbytes
            s.hashed += hashed
            s.reused += reused
            s.not_hashed += not_hashed
            s.symlinks += symlinks
            s.other += other
            s.errors += errors
            s.warnings += warnings
            s.warning_samples.extend(samples[:MAX_WARNINGS_KEPT - len(s.warning_samples)])
            self.hits.extend(array("q", hits))
            self.fresh.extend(fresh)
            if self.progress:
                self.progress(files)

    def _walk_root(self, root: Root, owner: int = 0, owners: int = 1) -> None:
        """Walk one root; with ``owners`` > 1, record only the entries ``owner`` owns."""
        top = str(root.path)
        try:
            top_st = os.stat(top)
        except OSError as e:
            if owner == 0:
                self.stats.warn(f"{root.name}: cannot stat root: {e.strerror}")
            return
        real_top = os.path.realpath(top)
        visited = {(top_st.st_dev, top_st.st_ino)}
        rcache = self.cache.get(root.name, _EMPTY)
        hits = self.hits
        stats = self.stats
        shared = owners > 1
        # (directory, its path relative to the root, its real path relative to the root when
        # it was reached through a followed symlink)
        stack: list[tuple[str, str, str | None]] = [(top, "", None)]
        while stack:
            dirpath, rel, real = stack.pop()
            try:
                # entries are stat'ed relative to the directory's descriptor (fstatat): the
                # kernel resolves one name, not the whole path (≈ 18 % of a re-walk)
                dfd = os.open(dirpath, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as e:
                if owner == 0:
                    stats.warn(f"{root.name}/{rel or '.'}: cannot read directory: "
                               f"{e.strerror}")
                continue
            try:
                self._walk_dir(root, dfd, dirpath, rel, real, owner, owners, rcache, top_st,
                               real_top, visited, stack)
            finally:
                os.close(dfd)

    def _walk_dir(self, root: Root, dfd: int, dirpath: str, rel: str, real: str | None,
                  owner: int, owners: int, rcache: dict[str, DirCache],
                  top_st: os.stat_result, real_top: str, visited: set, stack: list) -> None:
        """One directory: files compared with the stat cache (or read), subdirectories
        pushed on ``stack``."""
        stats = self.stats
        hits = self.hits
        shared = owners > 1
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            if owner == 0:
                stats.warn(f"{root.name}/{rel or '.'}: cannot read directory: {e.strerror}")
            return
        dc = rcache.get(rel, _EMPTY)
        prefix = f"{rel}/" if rel else ""
        base = dirpath.rstrip("/") + "/"
        reused = nbytes = 0
        for entry in entries:
            name = entry.name
            try:
                if entry.is_file(follow_symlinks=False):
                    if shared and hash(name) % owners != owner:
                        continue
                    c = dc.get(name)
                    if c is not None and real is None:  # a re-walk's path: one lstat
                        st = entry.stat(follow_symlinks=False)
                        if (c[1] == st.st_size and c[2] == st.st_mtime_ns
                                and c[3] == st.st_ino and c[4] == st.st_ctime_ns):
                            hits.append(c[0])
                            reused += 1
                            nbytes += st.st_size
                            continue
                    relpath = prefix + name
                    if self._selected(root, relpath, real, name):
                        self._file(root, dc, rel, name, base + name, relpath,
                                   entry.stat(follow_symlinks=False))
                elif entry.is_dir(follow_symlinks=False):
                    relpath = prefix + name
                    st = entry.stat(follow_symlinks=False)
                    sub_real = None if real is None else f"{real}/{name}"
                    if self._skip_dir(root, top_st, st, relpath, sub_real):
                        continue
                    visited.add((st.st_dev, st.st_ino))
                    stack.append((base + name, relpath, sub_real))
                elif shared and hash(name) % owners != owner:
                    if root.follow_symlinks and entry.is_symlink():
                        # every process walks a followed directory link's subtree
                        self._symlink(root, dc, rel, entry, base + name,
                                      prefix + name, real_top, top_st, visited,
                                      stack, record=False)
                elif entry.is_symlink():
                    self._symlink(root, dc, rel, entry, base + name, prefix + name,
                                  real_top, top_st, visited, stack)
                else:
                    relpath = prefix + name
                    if self._selected(root, relpath, real, name):
                        self._other(root, dc, rel, name, relpath,
                                    entry.stat(follow_symlinks=False))
            except FileNotFoundError:
                stats.warn(f"{root.name}/{prefix}{name}: vanished during the walk")
            except OSError as e:
                stats.warn(f"{root.name}/{prefix}{name}: {e.strerror}")
        if reused:
            stats.files += reused
            stats.reused += reused
            stats.bytes += nbytes
            if self.progress:
                self.progress(reused)

    @staticmethod
    def _selected(root: Root, relpath: str, real: str | None, name: str) -> bool:
        """Selected by its path in the tree, and (under a followed directory link) not
        excluded by its real path."""
        if not root_selects(root, relpath):
            return False
        return real is None or not path_excluded(root, f"{real}/{name}")

    def _skip_dir(self, root: Root, top_st: os.stat_result, st: os.stat_result,
                  relpath: str, real: str | None = None) -> bool:
        if self.out_id == (st.st_dev, st.st_ino):
            return True  # the output directory is never walked
        if root.one_file_system and st.st_dev != top_st.st_dev:
            return True
        return dir_excluded(root, relpath) or (real is not None and dir_excluded(root, real))

    def _symlink(self, root: Root, dc: DirCache, rel: str, entry: os.DirEntry, path: str,
                 relpath: str, real_top: str, top_st: os.stat_result, visited: set,
                 stack: list, record: bool = True) -> None:
        """Record a symlink, or follow it; with ``record`` false, only follow a link to a
        directory (the traversal every process of a shared walk does)."""
        if not root_selects(root, relpath) and not root.follow_symlinks:
            return
        lst = entry.stat(follow_symlinks=False)
        reason = "symlink (not followed)"
        if root.follow_symlinks:
            target = os.path.realpath(path)
            inside = target == real_top or target.startswith(real_top.rstrip("/") + "/")
            target_rel = target[len(real_top.rstrip("/")) + 1:] if inside else ""
            try:
                st = os.stat(path)
            except OSError:
                reason = "broken symlink or symlink loop"
            else:
                if not inside:
                    reason = "symlink out of the root (not followed)"
                elif stat.S_ISDIR(st.st_mode):
                    key = (st.st_dev, st.st_ino)
                    if key in visited:
                        reason = "symlink loop (directory already walked)"
                    elif dir_excluded(root, target_rel):
                        reason = "symlink into an excluded path (not followed)"
                    elif not self._skip_dir(root, top_st, st, relpath):
                        visited.add(key)
                        stack.append((path, relpath, target_rel))
                        return
                    else:
                        return
                elif stat.S_ISREG(st.st_mode):
                    if not record or not root_selects(root, relpath):
                        return
                    if (path_excluded(root, target_rel)
                            or dir_excluded(root, os.path.dirname(target_rel))):
                        reason = "symlink into an excluded path (not followed)"
                    else:
                        # open the resolved target: _hash opens with O_NOFOLLOW
                        self._file(root, dc, rel, entry.name, target, relpath, st)
                        return
                else:
                    reason = "symlink to a special file (not followed)"
        if not record or not root_selects(root, relpath):
            return
        self.stats.symlinks += 1
        self._emit(root, dc, rel, entry.name, relpath,
                   WalkRecord(root.name, relpath, "symlink", lst.st_size, lst.st_mtime_ns,
                              lst.st_ino, None, reason, None, None))

    def _other(self, root: Root, dc: DirCache, rel: str, name: str, relpath: str,
               st: os.stat_result) -> None:
        self.stats.other += 1
        self._emit(root, dc, rel, name, relpath,
                   WalkRecord(root.name, relpath, "other", st.st_size, st.st_mtime_ns,
                              st.st_ino, None, "not a regular file (never opened)", None, None))

    # -- files ----------------------------------------------------------------------------------

    def _file(self, root: Root, dc: DirCache, rel: str, name: str, path: str,
              relpath: str, st: os.stat_result) -> None:
        stats = self.stats
        stats.files += 1
        stats.bytes += st.st_size
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        c = dc.get(name)
        if c is not None and c[1:5] == key:  # a followed symlink's unchanged target
            stats.reused += 1
            self.hits.append(c[0])
        else:
            sha, reason, mime, error = self._hash(path, relpath, st)
            record = WalkRecord(root.name, relpath, "file", st.st_size, st.st_mtime_ns,
                                st.st_ino, sha, reason, mime, error)
            if sha is not None:
                stats.hashed += 1
            else:
                stats.not_hashed += 1
            if error:
                stats.errors += 1
            # a record without an error depends only on the stat: the next walk reuses it
            self._add(root, dc, rel, name, relpath, to_line(record), None if error else key)
        if self.progress:
            self.progress(1)

    def _hash(self, path: str | bytes, relpath: str, st: os.stat_result
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

    def _emit(self, root: Root, dc: DirCache, rel: str, name: str, relpath: str,
              record: WalkRecord) -> None:
        self._add(root, dc, rel, name, relpath, to_line(record), None)

    def _add(self, root: Root, dc: DirCache, rel: str, name: str, relpath: str, line: bytes,
             key: Key | None) -> None:
        if key is None:
            c = dc.get(name)
            if c is not None and len(c) == 6 and c[5] == line:
                self.hits.append(c[0])  # made again, the same as last time
                return
        self.fresh.append((root.name, relpath, rel, name, line, key))

    # -- output ---------------------------------------------------------------------------------

    def unchanged(self) -> bool:
        """Whether this walk found exactly the previous walk's records."""
        return not self.fresh and len(self.hits) == self.cache_count

    def write(self) -> None:
        if self.unchanged():
            return  # walk.jsonl and its cache are already right
        rows = self.fresh
        if self.hits:
            previous = read_bytes(self.out / "walk.jsonl").splitlines(keepends=True)
            where: dict[int, tuple[str, str, str, tuple]] = {}
            for root_name, dirs in self.cache.items():
                for rel, dc in dirs.items():
                    for name, c in dc.items():
                        where[c[0]] = (root_name, rel, name, c)
            for i in self.hits:
                root_name, rel, name, c = where[i]
                relpath = f"{rel}/{name}" if rel else name
                rows.append((root_name, relpath, rel, name, previous[i],
                             c[1:5] if len(c) == 5 else None))
        rows.sort(key=_order)
        walk_path = self.out / "walk.jsonl"
        atomic_write(walk_path, b"".join(r[4] for r in rows))
        roots: dict[str, list] = {r.name: [_root_settings(r), {}] for r in self.manifest.roots}
        for i, (root_name, _, rel, name, line, key) in enumerate(rows):
            dirs = roots[root_name][1]
            dc = dirs.get(rel)
            if dc is None:
                dc = dirs[rel] = {}
            dc[name] = (i, *key) if key is not None else (i, -1, 0, 0, 0, line)
        st = out_stat(walk_path)
        cache = {"settings": self.settings, "walk": [st.st_size, st.st_mtime_ns],
                 "roots": roots, "count": len(rows)}
        makedirs(self.out / STATE_DIR)
        atomic_write(self.out / CACHE_NAME, marshal.dumps(cache))


def _order(t: tuple) -> tuple[str, str]:
    return (t[0], t[1])


def run_walk(manifest: Manifest, out: Path, *, no_hash: bool = False,
             progress: Callable[[int], None] | None = None) -> dict:
    """Walk, write ``walk.jsonl``, the stat cache and ``walk.summary.json``; return the summary."""
    started = time.time()
    t0 = time.monotonic()
    od = output(out)  # opened and checked (tasks/outdir.py); written through its fd
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
        "records": walker.records,
        "no_hash": no_hash,
        "max_file_bytes": manifest.max_file_bytes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.monotonic() - t0, 3),
        "tightened": od.tightened,
    }
    write_json(out / "walk.summary.json", summary)
    return summary
