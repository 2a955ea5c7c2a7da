"""Atomic file writes and the output directory's lock.

Every file bastion writes goes through :func:`atomic_write`: a temporary file in the same
directory, ``fsync``, ``os.replace``, then an ``fsync`` of the directory — so a crash, a
``kill -9`` or a full disk leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Iterable

TMP_PREFIX = ".tmp-"
STATE_DIR = ".bastion"  # under the output directory: caches, doit's database, worker scratch
# The output directory's marker: a cache directory tag (https://bford.info/cachedir/), so the
# walk never walks a bastion output and backup tools that honour tags skip it too.
OUTPUT_TAG = "CACHEDIR.TAG"
_TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55\n"
_TAG_MARK = b"# This directory is a bastion output."
OUTPUT_TAG_TEXT = (_TAG_SIGNATURE + _TAG_MARK + b" bastion never walks a directory holding"
                   b" this file.\n# For information about cache directory tags, see:\n"
                   b"#\thttps://bford.info/cachedir/\n")


class OutputError(Exception):
    """Bastion cannot write its outputs (disk full, read-only directory, …)."""


class LockedError(Exception):
    """Another bastion run holds the output directory."""


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


def atomic_write(path: Path, chunks: bytes | Iterable[bytes], *, sync_dir: bool = True,
                 sync: bool = True) -> None:
    """Write ``path`` all or nothing.  Raises :class:`OutputError` naming the file.

    ``sync=False`` skips the file's fsync (and the directory's): for a file that a later
    ``syncfs`` makes durable before anything refers to it (the store's sidecars)."""
    path = Path(path)
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            with os.fdopen(fd, "wb", buffering=1 << 20) as f:
                if isinstance(chunks, (bytes, bytearray, memoryview)):
                    f.write(chunks)
                else:
                    for chunk in chunks:
                        f.write(chunk)
                f.flush()
                if sync:
                    os.fsync(f.fileno())
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
    with open(path, "rb") as f:
        return json.loads(f.read())


def remove_stale_temps(directory: Path) -> int:
    """Delete temp files a killed run left in ``directory``; returns how many."""
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


def is_output_tag(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a ``CACHEDIR.TAG``) is a bastion output's tag.
    Other programs' cache tags are not: their directories are walked like any other."""
    return head.startswith(_TAG_SIGNATURE + _TAG_MARK)


class OutputLock:
    """An exclusive ``flock`` on ``<out>/.lock`` for the life of this process's run."""

    _held: dict[str, "OutputLock"] = {}

    def __init__(self, out: Path) -> None:
        self.out = Path(out)
        self.fd: int | None = None

    @classmethod
    def acquire(cls, out: Path) -> "OutputLock":
        """Take the lock (re-entrant within one process)."""
        key = str(Path(out).resolve())
        lock = cls._held.get(key)
        if lock is not None:
            return lock
        lock = cls(Path(out))
        lock._take()
        cls._held[key] = lock
        return lock

    def _take(self) -> None:
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.out / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
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
    def release_all(cls) -> None:
        for lock in cls._held.values():
            if lock.fd is not None:
                os.close(lock.fd)
                lock.fd = None
        cls._held.clear()
