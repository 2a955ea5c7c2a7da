"""The walk stage: one record per file under each root, hashed and typed, incrementally.

A file whose ``(size, mtime_ns, inode, ctime_ns)`` matches the previous walk keeps its row of
the walk table without being read (:mod:`bastion.tasks.walk.table`: one indexed query per
directory, of its ``walk_dirs`` row), so a re-walk costs one ``lstat`` per file, and a big re-walk is shared
with forked helpers (:mod:`bastion.tasks.walk.shared`), one per further core.  What a root's walk
records, prunes and follows is its :class:`~bastion.tasks.walk.globs.Selector`'s decision; a file is read
by :func:`bastion.tasks.walk.filehash.hash_file`.  The trees are other users' to change while they are
walked: the root is opened once, and every directory and file beneath its descriptor with no
symlink followed (:mod:`bastion.tasks.walk.beneath`), without blocking, and checked against the
stat its listing made.  The rows are committed in batches; ``walk.jsonl`` is their export
(:mod:`bastion.tasks.walk.export`), written atomically; nothing a tree holds
(loops, unreadable directories, FIFOs, devices, vanishing or growing files, names that are
not UTF-8, other bastion outputs) stops the walk: each is a record or a counted warning.

The units, and the data between them (docs/architecture.md draws them larger)::

    Walker --(per root)--> RootWalk --(asks)--> Selector              tasks/walk/globs.py
      |  WalkTable: previous rows by directory --(_file)--> hash_file  tasks/walk/filehash.py
      +--> sharedwalk.share(owners, walk_share): (counts, seen, rows, gone) from each helper
      +--> export_walk: walk.jsonl from the table                    tasks/walk/export.py
"""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterable

from . import shared as sharedwalk
from .beneath import DIR_FLAGS, open_beneath, open_root
from .export import export_walk
from .filehash import READ_CHUNK, Where, hash_file
from ..database import connect, connect_read
from ..output.atomic import OUTPUT_TAG, STATE_DIR
from ..output.directory import OutputDir, mark_output, refuse
from ..output.tag import is_tagged, root_conflict
from .globs import FOLLOW, LINK_NOT_FOLLOWED, Selector, relative_to
from ..manifest import Manifest, Root
from ..names import shown
from .table import Row, WalkTable, encode
from .upgrade import upgrade

__all__ = ["WALK_VERSION", "HelperShare", "RootWalk", "WalkStats", "Walker", "describe_problems",
           "run_walk"]

WALK_VERSION = 4  # bump when records or detection change: the table's rows are then dropped
MAX_WARNINGS_KEPT = 100
PARALLEL_MIN_RECORDS = 20_000  # a re-walk this big is shared with forked helpers
MAX_WALKERS = 4

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


class HelperShare:
    """A forked helper's part of a shared walk, sent back to the walker as plain data: the
    rows it made, ``(row, replaced)``, and the previous rows it found gone, ``(root, dir,
    name)``."""

    __slots__ = ("fresh", "gone")

    def __init__(self) -> None:
        self.fresh: list[tuple[Row, bool]] = []
        self.gone: list[tuple[str, str, str]] = []


class Walker:
    """Walks the roots of one manifest into the walk table, and exports ``walk.jsonl``.

    A re-walk costs one ``lstat`` per file: an entry whose ``(size, mtime_ns, inode,
    ctime_ns)`` matches its row keeps it (its directory's rows come from one indexed query,
    :meth:`bastion.tasks.walk.table.WalkTable.previous`).  When nothing changed and walk.jsonl
    is the table's export, nothing is written.
    """

    def __init__(self, manifest: Manifest, od: OutputDir, *, no_hash: bool = False,
                 progress: Callable[[int], None] | None = None) -> None:
        self.manifest = manifest
        self.no_hash = no_hash
        self.progress = progress
        self.stats = WalkStats()
        self.settings = [WALK_VERSION, manifest.max_file_bytes, no_hash]
        self.od = od
        self._table: WalkTable | None = None
        self.selectors = {root.name: Selector.for_root(root) for root in manifest.roots}
        self.listed: set[tuple[str, str]] = set()  # (root, directory) listed by this walk
        self.seen = 0  # previous rows found again (kept or replaced)
        # a forked helper's share: its rows go back to the walker, not to the table
        self.share: HelperShare | None = None
        self.records = 0
        self.buf = bytearray(READ_CHUNK)
        try:  # the output never walked: the checked descriptor's, not whatever its path is now
            st = os.fstat(od.fd)
            self.out_id: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except OSError:
            self.out_id = None

    @property
    def table(self) -> WalkTable:
        """The walk table, opened at the first use (read-only in a forked helper)."""
        if self._table is None:
            od, settings, roots = self.od, self.settings, self.manifest.roots
            self._table = WalkTable(
                lambda: connect_read(od) if self.share is not None else connect(od), settings, roots,
                lambda db: upgrade(od, db, settings, roots))
        return self._table

    def run(self) -> WalkStats:
        table = self.table
        helpers = self._helpers()
        if helpers:
            table.flush()
            self._run_shared(helpers)
        else:
            for root in self.manifest.roots:
                self._walk_root(root)
        self.records = table.finish(self.listed, self.seen)
        return self.stats

    def _helpers(self) -> int:
        """How many forked helpers share a re-walk: one per further core (at most 3) when
        the table holds enough rows to pay for the forks, none otherwise.  A first
        walk stays in one process: it reads every file, and parallel reads would seek on a
        spinning disk."""
        if self.table.count_before < PARALLEL_MIN_RECORDS or threading.active_count() > 1:
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
                continue  # walked into this walker's own counts and table
            try:
                if isinstance(result, sharedwalk.HelperFailed):
                    raise ValueError(str(result))
                counts, samples, seen, fresh, gone = result
                self.stats.add(counts, samples)
            except (ValueError, TypeError) as e:
                self.stats.warn(f"walk helper {owner} failed ({e}): its share walked again")
                for root in self.manifest.roots:
                    self._walk_root(root, owner, owners)
                continue
            self.seen += seen
            table = self.table
            for row, replaced in fresh:
                table.add(row, replaced)
            for root_name, rel, name in gone:
                table.remove(root_name, rel, name)
            if self.progress:
                self.progress(counts[0])

    def _share(self, owner: int, owners: int) -> tuple | None:
        """Walk ``owner``'s share of every root.  In a helper (owner > 0), from nothing, and
        return it as plain data: (counts, warning samples, rows seen again, new rows, rows
        gone)."""
        if owner:
            self.progress = None
            self.stats, self.seen, self.share = WalkStats(), 0, HelperShare()
        for root in self.manifest.roots:
            self._walk_root(root, owner, owners)
        if not owner or self.share is None:
            return None
        s = self.stats
        return s.counts(), s.warning_samples, self.seen, self.share.fresh, self.share.gone

    def _walk_root(self, root: Root, owner: int = 0, owners: int = 1) -> None:
        """Walk one root; with ``owners`` > 1, record only the entries ``owner`` owns."""
        RootWalk(self, root, owner, owners).run()

    # -- records ------------------------------------------------------------------------

    def previous(self, root: Root, rel: str) -> dict[str, tuple]:
        """One directory's previous rows, by name (:meth:`WalkTable.previous`)."""
        return self.table.previous(root.name, rel)

    def take(self, dc: dict[str, tuple], name: str) -> tuple | None:
        """The previous row of ``name``, taken out of its directory's (what stays is gone)."""
        c = dc.pop(name, None)
        if c is not None:
            self.seen += 1
        return c

    def _file(self, root: Root, dc: dict[str, tuple], rel: str, name: str, path: Where,
              relpath: str, st: os.stat_result) -> None:
        stats = self.stats
        stats.files += 1
        stats.bytes += st.st_size
        key = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)
        c = dc.get(name)
        if c is not None and c[5] and c[1:5] == key:  # a followed symlink's unchanged target
            stats.reused += 1
            self.take(dc, name)
        else:
            sha, reason, mime, error = self._hash(path, relpath, st)
            if sha is not None:
                stats.hashed += 1
            else:
                stats.not_hashed += 1
            if error:
                stats.errors += 1
            # a record without an error depends only on the stat: the next walk reuses it
            self._add(root, dc, rel, name, relpath, ("file", st.st_size, st.st_mtime_ns,
                                                     st.st_ino, sha, reason, mime, error),
                      st, not error)
        if self.progress:
            self.progress(1)

    def _hash(self, path: Where, relpath: str, st: os.stat_result
              ) -> tuple[str | None, str | None, str | None, str | None]:
        """(sha256, reason, mime, error) for one regular file: ``path`` is a ``(directory
        descriptor, relative path)`` pair in the walk (a plain path in tests)."""
        return hash_file(path, os.path.basename(relpath), st,
                         max_file_bytes=self.manifest.max_file_bytes, no_hash=self.no_hash,
                         buf=self.buf)

    def _add(self, root: Root, dc: dict[str, tuple], rel: str, name: str, relpath: str,
             fields: tuple, st: os.stat_result, stat_only: bool) -> None:
        """A record made by this walk: ``fields`` (kind, size, mtime_ns, inode, sha256,
        reason, mime, error).  One that does not depend only on the stat and is made the
        same as last time keeps its row."""
        c = self.take(dc, name)
        if c is not None and not stat_only and not c[5] and \
                self.table.record(root.name, rel, name) == fields:
            return  # made again, the same as last time
        row = (root.name, encode(rel), encode(name), encode(relpath), fields[0], fields[1],
               fields[2], st.st_ctime_ns, fields[3], st.st_dev, *fields[4:], int(stat_only),
               self.table.gen)
        if self.share is not None:
            self.share.fresh.append((row, c is not None))
        else:
            self.table.add(row, c is not None)

    def gone_rows(self, root: Root, rel: str, names: Iterable[str]) -> None:
        """Previous rows of a directory listed by this walk whose files it did not record."""
        for name in names:
            if self.share is not None:
                self.share.gone.append((root.name, rel, name))
            else:
                self.table.remove(root.name, rel, name)

    # -- output -------------------------------------------------------------------------

    def unchanged(self) -> bool:
        """Whether this walk found exactly the previous walk's rows (after :meth:`run`)."""
        return not self.table.written

    def write(self) -> bool:
        """walk.jsonl, exported from the table (:func:`bastion.tasks.walk.export.export_walk`):
        nothing written when it already is the table's export.  Whether it was written."""
        return export_walk(self.od, self.table)

    def close(self) -> None:
        if self._table is not None:
            self._table.close()


class RootWalk:
    """One root's traversal (or one owner's share of it): a stack of directories, each
    opened, checked for a bastion output's tag, listed, and its entries compared with the
    directory's previous rows, recorded through the :class:`Walker` or pushed."""

    def __init__(self, walker: Walker, root: Root, owner: int = 0, owners: int = 1) -> None:
        self.walker = walker
        self.root = root
        self.sel = walker.selectors[root.name]
        self.owner = owner
        self.owners = owners
        self.stats = walker.stats
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
        """One directory: files compared with their previous rows (or read), subdirectories
        pushed on the stack."""
        walker, stats = self.walker, self.stats
        try:
            with os.scandir(dfd) as it:
                entries = list(it)
        except OSError as e:
            self._unreadable_dir(rel, e)
            return
        dc = walker.previous(self.root, rel)
        if self.owner == 0:
            walker.listed.add((self.root.name, rel))
        listing = _Listing(self, dfd, dirpath.rstrip("/") + "/", rel, real, dc)
        reused, nbytes = listing.entries(entries)
        if dc:  # previous rows whose files this walk did not record (in this share)
            walker.gone_rows(self.root, rel, [name for name in dc if self._owns(name)])
        if reused:
            walker.seen += reused
            stats.files += reused
            stats.reused += reused
            stats.bytes += nbytes
            if walker.progress:
                walker.progress(reused)

    def _owns(self, name: str) -> bool:
        """Whether this process records the entry ``name`` (every entry, unless the walk is
        shared: then its owner's, ``hash(name) % owners``)."""
        return self.owners == 1 or hash(name) % self.owners == self.owner

    def _skip_dir(self, st: os.stat_result, relpath: str, real: str | None = None) -> bool:
        if self.walker.out_id == (st.st_dev, st.st_ino):
            return True  # this run's output directory is never walked
        if self.sel.leaves_device(self.top_dev, st.st_dev):
            return True
        return dir_excluded(self.sel, relpath) or (
            real is not None and dir_excluded(self.sel, real))

    def _symlink(self, dc: dict[str, tuple], rel: str, entry: os.DirEntry, path: str, relpath: str,
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
        self.walker._add(self.root, dc, rel, entry.name, relpath,
                         ("symlink", lst.st_size, lst.st_mtime_ns, lst.st_ino, None, reason,
                          None, None), lst, False)

    def _other(self, dc: dict[str, tuple], rel: str, name: str, relpath: str,
               st: os.stat_result) -> None:
        self.stats.other += 1
        self.walker._add(self.root, dc, rel, name, relpath,
                         ("other", st.st_size, st.st_mtime_ns, st.st_ino, None,
                          "not a regular file (never opened)", None, None), st, False)


class _Listing:
    """One directory of a root's walk, listed: its descriptor, its path (ending in ``/``),
    its path relative to the root, its real path relative to the root beneath a followed
    link (else None), the prefix of its entries' relative paths, and its previous rows by
    name (taken out as their files are found).  Its entries are compared with those rows,
    recorded through the walk, or pushed on its stack."""

    __slots__ = ("walk", "fd", "path", "rel", "real", "prefix", "rows")

    def __init__(self, walk: RootWalk, fd: int, path: str, rel: str, real: str | None,
                 rows: dict[str, tuple]) -> None:
        self.walk, self.fd, self.path, self.rel, self.real, self.rows = (
            walk, fd, path, rel, real, rows)
        self.prefix = f"{rel}/" if rel else ""

    def entries(self, entries: list[os.DirEntry]) -> tuple[int, int]:
        """A directory's entries in their listing's order.  A file whose previous row holds
        its stat is kept with one ``lstat`` (the re-walk's path, here in the loop); any other
        entry is recorded (:meth:`_file_entry`, :meth:`_other_entry`).  Returns how many
        files were kept, and their bytes."""
        walk = self.walk
        owner, owners, shared = walk.owner, walk.owners, walk.owners > 1
        dc, unresolved = self.rows, self.real is None
        reused = nbytes = 0
        for entry in entries:
            try:
                if entry.is_file(follow_symlinks=False):
                    name = entry.name
                    if shared and hash(name) % owners != owner:
                        continue
                    c = dc.get(name)
                    if c is not None and unresolved and c[5]:  # a re-walk's path: one lstat
                        st = entry.stat(follow_symlinks=False)
                        if (c[1] == st.st_size and c[2] == st.st_mtime_ns
                                and c[3] == st.st_ino and c[4] == st.st_ctime_ns):
                            del dc[name]
                            reused += 1
                            nbytes += st.st_size
                            continue
                    self._file_entry(entry)
                else:
                    self._other_entry(entry)
            except OSError as e:
                self._entry_error(entry.name, e)
        return reused, nbytes

    def _selected(self, name: str, relpath: str) -> bool:
        """Whether the root's selector records the entry (by its path, and by its real path
        beneath a followed directory link)."""
        sel = self.walk.sel
        return root_selects(sel, relpath) and (
            self.real is None or not sel.excluded(f"{self.real}/{name}"))

    def _file_entry(self, entry: os.DirEntry) -> None:
        """A regular file new or changed since its row: recorded (read) when selected."""
        name = entry.name
        relpath = self.prefix + name
        if self._selected(name, relpath):
            walk = self.walk
            walk.walker._file(walk.root, self.rows, self.rel, name, (self.fd, name), relpath,
                              entry.stat(follow_symlinks=False))

    def _other_entry(self, entry: os.DirEntry) -> None:
        """A directory (pushed), a symbolic link (recorded or followed), anything else
        (recorded, never opened).  In a shared walk every process walks every directory and
        follows every directory link; it records only the entries it owns."""
        name, walk = entry.name, self.walk
        if entry.is_dir(follow_symlinks=False):
            self._subdir(entry)
        elif not walk._owns(name):
            if walk.sel.follow_symlinks and entry.is_symlink():
                # every process walks a followed directory link's subtree
                walk._symlink(self.rows, self.rel, entry, self.path + name, self.prefix + name,
                              record=False)
        elif entry.is_symlink():
            walk._symlink(self.rows, self.rel, entry, self.path + name, self.prefix + name)
        else:
            relpath = self.prefix + name
            if self._selected(name, relpath):
                walk._other(self.rows, self.rel, name, relpath,
                            entry.stat(follow_symlinks=False))

    def _subdir(self, entry: os.DirEntry) -> None:
        """A subdirectory, pushed on the stack unless pruned; one swapped for a link or a
        file between the listing and its stat is that link, or a warning."""
        name, walk = entry.name, self.walk
        relpath = self.prefix + name
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):  # swapped between listing and stat
            if stat.S_ISLNK(st.st_mode) and walk._owns(name):
                walk._symlink(self.rows, self.rel, entry, self.path + name, relpath)
            elif walk._owns(name):
                walk.stats.vanished += 1
                walk.stats.warn(f"{walk.root.name}/{relpath}: replaced during the walk")
            return
        sub_real = None if self.real is None else f"{self.real}/{name}"
        if walk._skip_dir(st, relpath, sub_real):
            return
        walk.visited.add((st.st_dev, st.st_ino))
        walk.stack.append((self.path + name, relpath, sub_real, (st.st_dev, st.st_ino)))

    def _entry_error(self, name: str, e: OSError) -> None:
        """An entry that vanished or could not be read: counted once in a shared walk."""
        walk = self.walk
        if not walk._owns(name):
            return
        if isinstance(e, FileNotFoundError):
            walk.stats.vanished += 1
            walk.stats.warn(f"{walk.root.name}/{self.prefix}{name}: vanished during the walk")
        else:
            walk.stats.unreadable += 1
            walk.stats.warn(f"{walk.root.name}/{self.prefix}{name}: {e.strerror}")


def run_walk(manifest: Manifest, od: OutputDir, *, no_hash: bool = False,
             progress: Callable[[int], None] | None = None) -> dict:
    """Walk into the walk table, export ``walk.jsonl``, write ``walk.summary.json`` (also
    recorded in the table's ``runs``); return the summary.  ``od``: the output, opened and
    checked (its run's lock: tasks/output/atomic.py); written only through its descriptors."""
    started = time.time()
    t0 = time.monotonic()
    why = root_conflict(od.path, manifest.roots)
    if why is not None:  # a run checks this before it opens the output; a caller that did not
        raise refuse(od.path, why)
    mark_output(od)
    od.remove_stale_temps("")
    od.remove_stale_temps(STATE_DIR)
    walker = Walker(manifest, od, no_hash=no_hash, progress=progress)
    try:
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
        od.write_json("walk.summary.json", summary)
        walker.table.record_run(summary)
    finally:
        walker.close()
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
