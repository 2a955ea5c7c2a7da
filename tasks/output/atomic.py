"""Atomic file writes and the output directory's lock.

Every file bastion writes goes through :func:`atomic_write`: a temporary file in the same
directory, ``fsync``, ``os.replace``, then an ``fsync`` of the directory — so a crash, a
``kill -9`` or a full disk leaves either the old file or the new one, never half of one.

A path inside an output directory this process holds open (:mod:`bastion.tasks.output.directory`: taken by
:class:`OutputLock`, or by :func:`output`) is written through that directory's checked
descriptor, with ``*at`` calls and the output's modes; :func:`unlink`, :func:`makedirs` and
:func:`rmtree` do the same for removals and directories.  Any other path (a signing key, a
test's scratch) is written by name, owner-only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from bastion.errors import LockedError
from . import directory as outdir
from .directory import (TMP_PREFIX, CopySpan, Modes, OutputDir, OutputError, UnsafeOutputError,
                        write_all)

__all__ = ["TMP_PREFIX", "STATE_DIR", "OutputError", "UnsafeOutputError", "LockedError",
           "OutputLock", "atomic_write", "write_json", "read_json", "dumps", "output",
           "unlink", "makedirs", "rmtree", "read_bytes", "stat", "remove_stale_temps", "fsync_dir"]

STATE_DIR = ".bastion"  # under the output directory: caches, doit's database, worker scratch
# The output directory's marker: a cache directory tag (tasks/output/tag.py)
from .tag import OUTPUT_TAG, OUTPUT_TAG_TEXT, is_output_tag  # noqa: E402  (re-exported)


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, chunks: bytes | Iterable[bytes | CopySpan], *, sync_dir: bool = True,
                 sync: bool = True) -> None:
    """Write ``path`` all or nothing.  Raises :class:`OutputError` naming the file.

    ``sync=False`` skips the file's fsync (and the directory's): for a file that a later
    ``syncfs`` makes durable before anything refers to it (the store's sidecars)."""
    path = Path(path)
    inside = outdir.find(path)
    if inside is not None:
        inside[0].write(inside[1], chunks, sync=sync, sync_dir=sync_dir)
        return
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            write_all(fd, chunks, sync)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        os.replace(tmp, path)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from None
    if sync_dir and sync:
        fsync_dir(path.parent)


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def dumps(obj: Any) -> str:
    """The one JSON encoding of every record: sorted keys, ASCII, compact.  (One encoder made
    once: ``json.dumps`` with options builds a new one per call, a third of its cost.)"""
    return _ENCODER.encode(obj)


def write_json(path: Path, obj: Any) -> None:
    atomic_write(path, (json.dumps(obj, sort_keys=True, ensure_ascii=True, indent=2) + "\n")
                 .encode("ascii"))


def read_json(path: Path) -> Any:
    inside = outdir.find(path)
    if inside is not None:  # read what was written: through the checked descriptor
        return json.loads(inside[0].read(inside[1]))
    with open(path, "rb") as f:
        return json.loads(f.read())


def read_bytes(path: Path) -> bytes:
    """A file's bytes (inside a held output: through its checked descriptor, so a swapped
    output path cannot feed bastion another directory's caches)."""
    inside = outdir.find(path)
    if inside is not None:
        return inside[0].read(inside[1])
    with open(path, "rb") as f:
        return f.read()


def open_read(path: Path) -> BinaryIO:
    """A file opened for reading, buffered (inside a held output: through its checked
    descriptor, never following a link), to read a large one a line at a time."""
    inside = outdir.find(path)
    if inside is None:
        return open(path, "rb")
    dfd, name = inside[0].split(inside[1], create=False)
    return os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd),
                     "rb", buffering=1 << 20)


def stat(path: Path) -> os.stat_result:
    """``lstat`` of a path (inside a held output: through its descriptor)."""
    inside = outdir.find(path)
    if inside is not None:
        return inside[0].stat(inside[1])
    return os.lstat(path)


def output(out: Path, modes: Modes | None = None) -> OutputDir:
    """The output directory ``out``, open and checked (:func:`bastion.tasks.output.directory.held`)."""
    return outdir.held(out, modes)


def unlink(path: Path) -> bool:
    """Remove a file (through the output's descriptor when inside one); False if missing."""
    inside = outdir.find(path)
    if inside is not None:
        return inside[0].unlink(inside[1])
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def makedirs(path: Path) -> None:
    """Make a directory and its missing parents (inside an output: with its mode, each
    component opened without following links)."""
    inside = outdir.find(path)
    if inside is not None:
        inside[0].dir_fd(inside[1])
    else:
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)


def rmtree(path: Path) -> None:
    """Remove a directory tree inside a held output, never following a link."""
    inside = outdir.find(path)
    if inside is None:
        raise OutputError(f"not inside an open output directory: {path}")
    inside[0].rmtree(inside[1])


def remove_stale_temps(directory: Path) -> int:
    """Delete temp files a killed run left in ``directory``; returns how many."""
    inside = outdir.find(directory)
    if inside is not None:
        return inside[0].remove_stale_temps(inside[1])
    n = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if entry.name.startswith(TMP_PREFIX):
            try:
                os.unlink(entry.path)
                n += 1
            except OSError:
                pass
    return n


def mark_output(out: Path) -> None:
    """Give the output directory ``out`` its tag (once).  Raises :class:`OutputError`."""
    tag = Path(out) / OUTPUT_TAG
    if not tag.is_file():
        atomic_write(tag, OUTPUT_TAG_TEXT)


class OutputLock:
    """An exclusive ``flock`` on ``<out>/.lock`` for the life of this process's run."""

    _held: dict[str, "OutputLock"] = {}

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.fd: int | None = None
        self.dir: OutputDir | None = None

    @classmethod
    def acquire(cls, out: Path, modes: Modes | None = None) -> "OutputLock":
        """Take the lock (re-entrant within one process), opening and checking the output
        directory first (:func:`bastion.tasks.output.directory.open_output`: refused when it is a symlink,
        someone else's or writable by others)."""
        key = os.path.abspath(out)
        lock = cls._held.get(key)
        if lock is not None:
            if modes is not None:
                lock.dir = outdir.held(Path(key), modes)
            return lock
        lock = cls(Path(out))
        lock._take(modes)
        cls._held[key] = lock
        return lock

    def _take(self, modes: Modes | None) -> None:
        self.dir = outdir.held(self.out, modes)
        try:
            fd = os.open(".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         self.dir.modes.file, dir_fd=self.dir.fd)
        except OSError as e:
            raise OutputError(f"cannot use output directory {self.out}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockedError(
                    f"another bastion run is using {self.out} (lock {self.out / '.lock'})"
                ) from None
            raise OutputError(f"cannot lock {self.out}: {e.strerror}") from None
        try:
            mark_output(self.out)
        except OutputError:
            os.close(fd)
            raise
        self.fd = fd

    @classmethod
    def tightened(cls, out: Path) -> int:
        """How many files and directories of ``out`` this process narrowed (0: not held)."""
        lock = cls._held.get(os.path.abspath(out))
        return lock.dir.tightened if lock is not None and lock.dir is not None else 0

    @classmethod
    def release_all(cls) -> None:
        """Release every lock and close every output directory this process holds."""
        for lock in cls._held.values():
            if lock.fd is not None:
                os.close(lock.fd)
                lock.fd = None
        cls._held.clear()
        outdir.close_all()


def file_identity(path: Path) -> list[int] | None:
    """(size, mtime_ns, ctime_ns, inode) of a file, or None when it is not there."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
