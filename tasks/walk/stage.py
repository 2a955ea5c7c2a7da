"""The walk stage: one record per file under each root, hashed and typed, incrementally.

A file whose ``(size, mtime_ns, inode, ctime_ns)`` matches the previous walk keeps its record
byte for byte without being read: the stat cache (:mod:`bastion.tasks.walk.statcache`) finds it by root,
directory and name, so a re-walk costs one ``lstat`` per file, and a big re-walk is shared
with forked helpers (:mod:`bastion.tasks.walk.shared`), one per further core.  What a root's walk
records, prunes and follows is its :class:`~bastion.tasks.walk.globs.Selector`'s decision; a file is read
by :func:`bastion.tasks.walk.filehash.hash_file`.  The trees are other users' to change while they are
walked: the root is opened once, and every directory and file beneath its descriptor with no
symlink followed (:mod:`bastion.tasks.walk.beneath`), without blocking, and checked against the
stat its listing made.  Everything is written atomically; nothing a tree holds
(loops, unreadable directories, FIFOs, devices, vanishing or growing files, names that are
not UTF-8, other bastion outputs) stops the walk: each is a record or a counted warning.

The units, and the data between them (docs/architecture.md draws them larger)::

    Walker --(per root)--> RootWalk --(asks)--> Selector              tasks/walk/globs.py
      |  StatCache: previous records           --(_file)--> hash_file  tasks/walk/filehash.py
      +--> sharedwalk.share(owners, walk_share): (counts, hits, rows) from each helper
"""

from __future__ import annotations

import heapq
import marshal
import os
import stat
import threading
import time
from array import array
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..output import lineindex
from . import shared as sharedwalk
from .beneath import DIR_FLAGS, open_beneath, open_root
from .filehash import READ_CHUNK, Where, hash_file
from ..extract.delta import DELTA_LINES, drop_delta, write_delta
from ..output.atomic import (OUTPUT_TAG,
                             STATE_DIR,
                             atomic_write,
                             file_identity,
                             mark_output,
                             output,
                             remove_stale_temps,
                             scratch_file,
                             write_json)
from ..output.directory import refuse
from ..output.tag import is_tagged, root_conflict
from .globs import FOLLOW, LINK_NOT_FOLLOWED, Selector, relative_to
from ..manifest import Manifest, Root
from ..names import shown
from ..records import WalkRecord, to_line
from .patch import Patch
from .statcache import CACHE_NAME, EMPTY, CacheBuilder, DirCache, Key, PackedDir, Row, StatCache

__all__ = ["CACHE_NAME", "WALK_VERSION", "RootWalk", "WalkStats", "Walker", "describe_problems",
           "run_walk"]

WALK_VERSION = 4  # bump when records or detection change: the stat cache is then ignored
MAX_WARNINGS_KEPT = 100
PARALLEL_MIN_RECORDS = 20_000  # a re-walk this big is shared with forked helpers
MAX_WALKERS = 4
SPILL_ROWS = 100_000  # new records held before a sorted run of them goes to a scratch file

# What the traversal asks a root's Selector about each entry, by module-level name (tests
# interpose on these two to change the tree at exact points: after a directory's listing,
# before an entry's stat; after a subdirectory's stat, before its listing).
root_selects = Selector.selects
dir_excluded = Selector.prunes


def open_dir(dirfd: int, relpath: str) -> int:
    """A directory under a root, opened beneath the root's descriptor with no symlink
    followed on the way (module-level: tests interpose on it, as on the two above)."""
    return open_beneath(dirfd, relpath, DIR_FLAGS)


@dataclass
class WalkStats:
    """A walk's counts (``walk.summary.json`` has each), and up to 100 warning messages."""

    files: int = 0
    bytes: int = 0
    hashed: int = 0
    reused: int = 0
    not_hashed: int = 0
    symlinks: int = 0
    other: int = 0
    errors: int = 0  # file records with an error (could not be opened or read whole)
    warnings: int = 0
    unreadable: int = 0  # directories, roots and entries the walk could not read
    vanished: int = 0  # directories and entries gone between their listing and their stat
    outputs_skipped: int = 0  # other bastion outputs (tagged directories) not walked
    warning_samples: list[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        self.warnings += 1
        if len(self.warning_samples) < MAX_WARNINGS_KEPT:
            self.warning_samples.append(message)

    @property
    def partial(self) -> bool:
        """Whether something in the roots could not be read: a directory not listed (its
        files are not in walk.jsonl) or a file recorded with an error (no sha256)."""
        return self.unreadable > 0 or self.errors > 0

    def counts(self) -> list[int]:
        """The counters as plain data (what a shared walk's helper sends back)."""
        return [getattr(self, f.name) for f in fields(self) if f.name != "warning_samples"]

    def add(self, counts: list[int], samples: list[str]) -> None:
        """Add a helper's :meth:`counts` and warning samples to these."""
        names = [f.name for f in fields(self) if f.name != "warning_samples"]
        if len(counts) != len(names):
            raise ValueError(f"{len(counts)} counts, expected {len(names)}")
        for name, n in zip(names, counts):
            setattr(self, name, getattr(self, name) + n)
        self.warning_samples.extend(samples[:MAX_WARNINGS_KEPT - len(self.warning_samples)])


class Walker:
    """Walks the roots of one manifest into ``walk.jsonl``.

    A re-walk costs one ``lstat`` per file: an entry whose ``(size, mtime_ns, inode,
    ctime_ns)`` matches the stat cache keeps its previous record line, found by its directory
    and name (no path string is even built for it).  When every previous record is found again
    and nothing new was made, ``walk.jsonl`` and the cache are left as they are.
    """

    def __init__(self, manifest: Manifest, out: Path, *, no_hash: bool = False,
                 progress: Callable[[int], None] | None = None,
                 out_fd: int | None = None) -> None:
        self.manifest = manifest
        self.out = Path(out)
        self.no_hash = no_hash
        self.progress = progress
        self.stats = WalkStats()
        self.settings = [WALK_VERSION, manifest.max_file_bytes, no_hash]
        self.cache = StatCache.load(self.out, self.settings, manifest.roots)
        self.selectors = {root.name: Selector.for_root(root) for root in manifest.roots}
        self.hits = array("q")  # line numbers of previous records found unchanged
        self.fresh: list[Row] = []  # records made by this walk (those not spilled yet)
        self.made = 0  # records made by this walk, spilled or not
        self.spills: list = []  # sorted runs of made records, in scratch files
        self.may_spill = True  # not in a forked helper: its rows go back to the walker
        self.records = 0
        self.buf = bytearray(READ_CHUNK)
        try:  # the output never walked: the checked descriptor's, not whatever its path is now
            st = os.fstat(out_fd) if out_fd is not None else os.stat(self.out)
            self.out_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.out_id = None

    def run(self) -> WalkStats:
        helpers = self._helpers()
        if helpers:
            self._run_shared(helpers)
        else:
            for root in self.manifest.roots:
                self._walk_root(root)
        self.records = len(self.hits) + self.made
        return self.stats

    def _helpers(self) -> int:
        """How many forked helpers share a re-walk: one per further core (at most 3) when
        the stat cache predicts enough files to pay for the forks, none otherwise.  A first
        walk stays in one process: it reads every file, and parallel reads would seek on a
        spinning disk."""
        if self.cache.count < PARALLEL_MIN_RECORDS or threading.active_count() > 1:
            return 0  # never fork a process that runs threads
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        return max(0, min(cores, MAX_WALKERS) - 1)

    def _run_shared(self, helpers: int) -> None:
        """Walk with ``helpers`` forked copies of this walker.  Every process lists every
        directory (cheap); each ``lstat``s, compares, hashes and records only the entries it
        owns: ``hash(name) % owners`` (forked processes share the hash seed).  A helper whose
        share does not come back has it walked again here, so nothing is lost."""
        owners = helpers + 1
        for owner, result in sharedwalk.share(owners, lambda o: self._share(o, owners)):
            if owner == 0:
                continue  # walked into this walker's own counts and lists
            try:
                if isinstance(result, sharedwalk.HelperFailed):
                    raise ValueError(str(result))
                counts, samples, hits, fresh = result
                hits = array("q", hits)
                self.stats.add(counts, samples)
            except (ValueError, TypeError) as e:
                self.stats.warn(f"walk helper {owner} failed ({e}): its share walked again")
                for root in self.manifest.roots:
                    self._walk_root(root, owner, owners)
                continue
            self.hits.extend(hits)
            self.fresh.extend(fresh)
            self.made += len(fresh)
            if self.progress:
                self.progress(counts[0])

    def _share(self, owner: int, owners: int) -> tuple | None:
        """Walk ``owner``'s share of every root.  In a helper (owner > 0), from nothing, and
        return it as plain data: (counts, warning samples, hit line numbers, rows)."""
        if owner:
            self.progress = None
            self.stats, self.hits, self.fresh = WalkStats(), array("q"), []
            self.may_spill = False
        for root in self.manifest.roots:
            self._walk_root(root, owner, owners)
        if not owner:
            return None
        s = self.stats
        return s.counts(), s.warning_samples, array("q", self.hits).tobytes(), self.fresh

    def _walk_root(self, root: Root, owner: int = 0, owners: int = 1) -> None:
        """Walk one root; with ``owners`` > 1, record only the entries ``owner`` owns."""
        RootWalk(self, root, owner, owners).run()

    # -- records ------------------------------------------------------------------------

    def _file(self, root: Root, dc: DirCache, rel: str, name: str, path: Where,
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

    def _hash(self, path: Where, relpath: str, st: os.stat_result
              ) -> tuple[str | None, str | None, str | None, str | None]:
        """(sha256, reason, mime, error) for one regular file: ``path`` is a ``(directory
        descriptor, relative path)`` pair in the walk (a plain path in tests)."""
        return hash_file(path, os.path.basename(relpath), st,
                         max_file_bytes=self.manifest.max_file_bytes, no_hash=self.no_hash,
                         buf=self.buf)

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
        self.made += 1
        if len(self.fresh) >= SPILL_ROWS and self.may_spill:
            self._spill()

    def _spill(self) -> None:
        """A sorted run of the records made so far to a scratch file (framed marshal
        chunks), so that a first walk of millions of files holds ~100k rows, not all."""
        self.fresh.sort(key=_order)
        f = scratch_file(self.out)
        for at in range(0, len(self.fresh), 4096):
            blob = marshal.dumps(self.fresh[at:at + 4096])
            f.write(len(blob).to_bytes(8, "little"))
            f.write(blob)
        f.flush()
        f.seek(0)
        self.spills.append(f)
        self.fresh = []

    # -- output -------------------------------------------------------------------------

    def unchanged(self) -> bool:
        """Whether this walk found exactly the previous walk's records."""
        return not self.fresh and len(self.hits) == self.cache.count

    def write(self) -> None:
        """walk.jsonl, its stat cache and the delta from the previous walk, as one stream:
        the kept records (read back in file order) merged with the sorted runs of the new
        ones, written line by line while the next cache is made; nothing holds every row."""
        if self.unchanged():
            return  # walk.jsonl and its cache are already right
        walk_jsonl = self.out / "walk.jsonl"
        before = file_identity(walk_jsonl) if self.cache.count >= 0 else None
        self.fresh.sort(key=_order)
        runs = [_tagged(self.fresh), *(_tagged(_spilled(f)) for f in self.spills)]
        kept: Iterable[Row] = ()
        if self.hits and self.cache.streams:
            marks = bytearray(self.cache.count)
            for i in self.hits:
                marks[i] = 1
            patch = None if self.spills else Patch.plan(self.cache, marks, self.fresh)
            if patch is not None:  # a small change: the previous files patched
                patched_at = patch.write(self.out, walk_jsonl, self.settings,
                                         self.manifest.roots)
                write_delta(self.out, before, file_identity(walk_jsonl), len(marks), patched_at,
                            marks, [row[4] for row in self.fresh])
                self.fresh = []
                return
            kept = self.cache.kept(marks, walk_jsonl)
        elif self.hits:  # a cache of the earlier format: its rows found, then sorted
            kept = sorted(self.cache.found(self.hits, walk_jsonl), key=_order)
        builder = CacheBuilder(self.manifest.roots)
        fresh_at: list[int] = []
        fresh_lines: list[bytes] | None = []  # for the delta, while they are few

        def lines() -> Iterator[bytes]:
            nonlocal fresh_lines
            for j, row in enumerate(heapq.merge(kept, *runs, key=_order)):
                if len(row) == 7:
                    fresh_at.append(j)
                    if fresh_lines is not None:
                        fresh_lines.append(row[4])
                        if len(fresh_lines) > DELTA_LINES:
                            fresh_lines = None
                builder.add(row)
                yield row[4]

        index = lineindex.Builder()
        atomic_write(walk_jsonl, lineindex.indexed(lines(), index))
        lineindex.save_built(walk_jsonl, index)
        self.fresh, self.spills = [], []
        builder.write(self.out, self.settings)
        if before is not None:  # the change, for an extract stage that merges it in
            write_delta(self.out, before, file_identity(walk_jsonl), self.cache.count,
                        fresh_at, self.hits, fresh_lines)
        else:
            drop_delta(self.out)


def _tagged(rows: Iterable[Row]) -> Iterator[tuple]:
    """New rows marked as new (a seventh field), for the delta."""
    for r in rows:
        yield (*r, True)


def _spilled(f) -> Iterator[Row]:
    """The rows of one spilled run, a chunk at a time; the scratch file closed after."""
    with f:
        while head := f.read(8):
            yield from marshal.loads(f.read(int.from_bytes(head, "little")))


def _order(t: tuple) -> tuple[str, str]:
    return (t[0], t[1])


class RootWalk:
    """One root's traversal (or one owner's share of it): a stack of directories, each
    opened, checked for a bastion output's tag, listed, and its entries compared with the
    stat cache, recorded through the :class:`Walker` or pushed."""

    def __init__(self, walker: Walker, root: Root, owner: int = 0, owners: int = 1) -> None:
        self.walker = walker
        self.root = root
        self.sel = walker.selectors[root.name]
        self.owner = owner
        self.owners = owners
        self.stats = walker.stats
        self.rcache = walker.cache.root(root.name)
        self.top = str(root.path)
        self.top_dev = 0
        self.top_fd = -1  # the root's directory, opened once: everything is opened beneath it
        self.real_top = ""
        self.visited: set[tuple[int, int]] = set()
        # (directory, its path relative to the root, its real path relative to the root when
        # it was reached through a followed symlink, the (device, inode) its listing saw)
        self.stack: list[tuple[str, str, str | None, tuple[int, int]]] = []

    def run(self) -> None:
        root, stats, owner = self.root, self.stats, self.owner
        try:
            self.top_fd = open_root(self.top)
            top_st = os.fstat(self.top_fd)
        except OSError as e:
            if owner == 0:
                stats.unreadable += 1
                stats.warn(f"{root.name}: cannot open root: {e.strerror}")
            return
        try:
            self._run(top_st)
        finally:
            os.close(self.top_fd)
            self.top_fd = -1

    def _run(self, top_st: os.stat_result) -> None:
        root, stats, owner = self.root, self.stats, self.owner
        self.top_dev = top_st.st_dev
        self.real_top = self.top  # the manifest's resolved path, opened without symlinks
        self.visited.add((top_st.st_dev, top_st.st_ino))
        stack = self.stack
        stack.append((self.top, "", None, (top_st.st_dev, top_st.st_ino)))
        while stack:
            dirpath, rel, real, ident = stack.pop()
            try:
                # opened beneath the root's descriptor, no symlink followed on the way; then
                # entries are stat'ed relative to it (fstatat): one name resolved, not a path
                dfd = open_dir(self.top_fd, rel if real is None else real)
            except OSError as e:
                self._unreadable_dir(rel, e)
                continue
            try:
                dst = os.fstat(dfd)
                if (dst.st_dev, dst.st_ino) != ident:
                    if owner == 0:  # swapped since its listing: not walked, never followed
                        stats.unreadable += 1
                        stats.warn(f"{root.name}/{rel or '.'}: replaced during the walk, "
                                   "not walked")
                    continue
                if is_tagged(dfd):  # one open that fails for a directory without a tag
                    if owner == 0:
                        stats.outputs_skipped += 1
                        stats.warn(f"{root.name}/{rel or '.'}: a bastion output "
                                   f"({OUTPUT_TAG}), not walked")
                    continue
                self._dir(dfd, dirpath, rel, real)
            finally:
                os.close(dfd)

    def _unreadable_dir(self, rel: str, e: OSError) -> None:
        if self.owner == 0:
            if isinstance(e, FileNotFoundError):
                self.stats.vanished += 1
            else:
                self.stats.unreadable += 1
            self.stats.warn(f"{self.root.name}/{rel or '.'}: cannot read directory: "
                            f"{e.strerror}")

    def _dir(self, dfd: int, dirpath: str, rel: str, real: str | None) -> None:
        """One directory: files compared with the stat cache (or read), subdirectories
        pushed on the stack."""
        walker, sel, stats, stack = self.walker, self.sel, self.stats, self.stack
        hits = walker.hits
        owner, owners = self.owner, self.owners
        shared = owners > 1
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            self._unreadable_dir(rel, e)
            return
        dc = self.rcache.get(rel, EMPTY)
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
                    if root_selects(sel, relpath) and (
                            real is None or not sel.excluded(f"{real}/{name}")):
                        walker._file(self.root, dc, rel, name, (dfd, name), relpath,
                                     entry.stat(follow_symlinks=False))
                elif entry.is_dir(follow_symlinks=False):
                    relpath = prefix + name
                    st = entry.stat(follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):  # swapped between listing and stat
                        if stat.S_ISLNK(st.st_mode) and (
                                not shared or hash(name) % owners == owner):
                            self._symlink(dc, rel, entry, base + name, relpath)
                        elif not shared or hash(name) % owners == owner:
                            stats.vanished += 1
                            stats.warn(f"{self.root.name}/{relpath}: replaced during the walk")
                        continue
                    sub_real = None if real is None else f"{real}/{name}"
                    if self._skip_dir(st, relpath, sub_real):
                        continue
                    self.visited.add((st.st_dev, st.st_ino))
                    stack.append((base + name, relpath, sub_real, (st.st_dev, st.st_ino)))
                elif shared and hash(name) % owners != owner:
                    if sel.follow_symlinks and entry.is_symlink():
                        # every process walks a followed directory link's subtree
                        self._symlink(dc, rel, entry, base + name, prefix + name,
                                      record=False)
                elif entry.is_symlink():
                    self._symlink(dc, rel, entry, base + name, prefix + name)
                else:
                    relpath = prefix + name
                    if root_selects(sel, relpath) and (
                            real is None or not sel.excluded(f"{real}/{name}")):
                        self._other(dc, rel, name, relpath, entry.stat(follow_symlinks=False))
            except OSError as e:
                if not shared or hash(name) % owners == owner:  # counted once in a shared walk
                    if isinstance(e, FileNotFoundError):
                        stats.vanished += 1
                        stats.warn(f"{self.root.name}/{prefix}{name}: vanished during the walk")
                    else:
                        stats.unreadable += 1
                        stats.warn(f"{self.root.name}/{prefix}{name}: {e.strerror}")
        if isinstance(dc, PackedDir):
            dc.release()  # its index of names: made for this visit only
        if reused:
            stats.files += reused
            stats.reused += reused
            stats.bytes += nbytes
            if walker.progress:
                walker.progress(reused)

    def _skip_dir(self, st: os.stat_result, relpath: str, real: str | None = None) -> bool:
        if self.walker.out_id == (st.st_dev, st.st_ino):
            return True  # this run's output directory is never walked
        if self.sel.leaves_device(self.top_dev, st.st_dev):
            return True
        return dir_excluded(self.sel, relpath) or (
            real is not None and dir_excluded(self.sel, real))

    def _symlink(self, dc: DirCache, rel: str, entry: os.DirEntry, path: str, relpath: str,
                 record: bool = True) -> None:
        """Record a symlink, or follow it; with ``record`` false, only follow a link to a
        directory (the traversal every process of a shared walk does)."""
        sel = self.sel
        if not sel.follow_symlinks and not root_selects(sel, relpath):
            return
        lst = entry.stat(follow_symlinks=False)
        reason = LINK_NOT_FOLLOWED
        if sel.follow_symlinks:
            target = os.path.realpath(path)
            try:
                st: os.stat_result | None = os.stat(path)
            except OSError:
                st = None
            target_rel = relative_to(self.real_top, target)
            seen = st is not None and (st.st_dev, st.st_ino) in self.visited
            reason = sel.link(target_rel, st, seen)
            if reason == FOLLOW and st is not None and target_rel is not None:
                if stat.S_ISDIR(st.st_mode):
                    if not self._skip_dir(st, relpath):
                        self.visited.add((st.st_dev, st.st_ino))
                        self.stack.append((path, relpath, target_rel,
                                           (st.st_dev, st.st_ino)))
                elif record and root_selects(sel, relpath):
                    # the resolved target, opened beneath the root with no symlink followed
                    # and checked against the stat that resolved it
                    self.walker._file(self.root, dc, rel, entry.name,
                                      (self.top_fd, target_rel), relpath, st)
                return
        if not record or not root_selects(sel, relpath):
            return
        self.stats.symlinks += 1
        self.walker._emit(self.root, dc, rel, entry.name, relpath,
                          WalkRecord(self.root.name, relpath, "symlink", lst.st_size,
                                     lst.st_mtime_ns, lst.st_ino, None, reason, None, None))

    def _other(self, dc: DirCache, rel: str, name: str, relpath: str,
               st: os.stat_result) -> None:
        self.stats.other += 1
        self.walker._emit(self.root, dc, rel, name, relpath,
                          WalkRecord(self.root.name, relpath, "other", st.st_size,
                                     st.st_mtime_ns, st.st_ino, None,
                                     "not a regular file (never opened)", None, None))


def run_walk(manifest: Manifest, out: Path, *, no_hash: bool = False,
             progress: Callable[[int], None] | None = None) -> dict:
    """Walk, write ``walk.jsonl``, the stat cache and ``walk.summary.json``; return the summary."""
    started = time.time()
    t0 = time.monotonic()
    why = root_conflict(out, manifest.roots)
    if why is not None:  # before anything in it is opened, let alone tightened
        raise refuse(Path(os.path.abspath(out)), why)
    od = output(out)  # opened and checked (tasks/output/directory.py); written through its descriptor
    mark_output(out)
    remove_stale_temps(out)
    remove_stale_temps(out / STATE_DIR)  # the stat cache's temp file of a killed walk
    walker = Walker(manifest, out, no_hash=no_hash, progress=progress, out_fd=od.fd)
    s = walker.run()
    walker.write()
    summary = {
        "stage": "walk",
        "manifest": str(manifest.path),
        "manifest_digest": manifest.digest,
        "roots": [{"name": r.name, "path": str(r.path),
                   **({"given": r.given} if r.given else {})} for r in manifest.roots],
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
        "unreadable": s.unreadable,
        "vanished": s.vanished,
        "outputs_skipped": s.outputs_skipped,
        "partial": s.partial,
        "records": walker.records,
        "no_hash": no_hash,
        "max_file_bytes": manifest.max_file_bytes,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_s": round(time.monotonic() - t0, 3),
        "tightened": od.tightened,
    }
    write_json(out / "walk.summary.json", summary)
    return summary


def describe_problems(summary: dict, out: Path) -> str | None:
    """The line to print when the walk met a warning or an error record (None when it met
    neither), e.g. ``walk: 1 warning (1 unreadable), 1 file with a read error; first:
    r/locked: cannot read directory: Permission denied; details in OUT/walk.summary.json
    and OUT/walk.jsonl``."""
    warnings, errors = summary.get("warnings", 0), summary.get("errors", 0)
    if not warnings and not errors:
        return None
    parts = []
    if warnings:
        kinds = [f"{summary[k]} {what}" for k, what in (("unreadable", "unreadable"),
                                                        ("vanished", "vanished"))
                 if summary.get(k)]
        if summary.get("outputs_skipped"):
            kinds.append(f"{_count(summary['outputs_skipped'], 'bastion output')} skipped")
        parts.append(_count(warnings, "warning") + (f" ({', '.join(kinds)})" if kinds else ""))
    if errors:
        parts.append(f"{_count(errors, 'file')} with a read error")
    line = "walk: " + ", ".join(parts)
    samples = summary.get("warning_samples") or []
    if samples:
        line += f"; first: {samples[0]}"
    line += f"; details in {out / 'walk.summary.json'}"
    # a file name in the sample is shown escaped: it never moves the cursor or starts a line
    return shown(line + (f" and {out / 'walk.jsonl'}" if errors else ""))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
