"""The output directory's lock, and atomic writes of files outside any output.

Every file bastion writes is written all or nothing: a temporary file in the same directory,
``fsync``, a rename, then an ``fsync`` of the directory — so a crash, a ``kill -9`` or a full
disk leaves either the old file or the new one, never half of one.  Inside an output that is
:meth:`bastion.tasks.output.directory.OutputDir.write`, through the output's checked descriptor
with ``*at`` calls and the output's modes; a run gets that :class:`OutputDir` from the
:class:`OutputLock` it takes, and holds both as values (nothing is registered per process).
A file outside any output (a ``--json`` file, an HTML report, a test's scratch) is written by
name, owner-only, by the separately named :func:`write_file_atomically`: no path is ever looked
up to decide which of the two it gets.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any, Iterable

from bastion.errors import LockedError
from .directory import (TMP_PREFIX, CopySpan, Modes, OutputDir, OutputError, UnsafeOutputError,
                        mark_output, open_output, tighten, write_all)

__all__ = ["TMP_PREFIX", "STATE_DIR", "OutputError", "UnsafeOutputError", "LockedError",
           "OutputLock", "write_file_atomically", "read_json_file", "dumps", "fsync_dir",
           "identity"]

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


def write_file_atomically(path: Path, chunks: bytes | Iterable[bytes | CopySpan], *,
                          sync: bool = True) -> None:
    """Write the file named ``path`` all or nothing, by path, owner-only: for a file outside
    any output directory (a ``--json`` file, a report, a signing key).  Nothing here looks for
    an output the path may be in: a file inside one is written by :meth:`OutputDir.write`.
    Raises :class:`OutputError` naming the file."""
    path = Path(path)
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
    if sync:
        fsync_dir(path.parent)


_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def dumps(obj: Any) -> str:
    """The one JSON encoding of every record: sorted keys, ASCII, compact.  (One encoder made
    once: ``json.dumps`` with options builds a new one per call, a third of its cost.)"""
    return _ENCODER.encode(obj)


def read_json_file(path: Path) -> Any:
    """A JSON file read by path: for an output not opened by this run (a listing command's,
    a report's) or a file outside any output; an open output reads through
    :meth:`OutputDir.read_json`."""
    with open(path, "rb") as f:
        return json.loads(f.read())


class OutputLock:
    """An exclusive ``flock`` on ``<out>/.lock``, and the output's checked :class:`OutputDir`:
    a value its taker holds, passes on (:attr:`dir`) and releases (:meth:`release`, or a
    ``with`` block).  Nothing is kept per process: a second lock of the same output, in this
    process or another, is a :class:`LockedError` until the first is released."""

    def __init__(self, out: Path, dir: OutputDir, fd: int) -> None:
        self.out = out
        self.dir = dir
        self.fd: int | None = fd

    @classmethod
    def acquire(cls, out: Path, modes: Modes | None = None) -> "OutputLock":
        """Open and check the output directory (:func:`bastion.tasks.output.directory.open_output`:
        refused when it is a symlink, someone else's or writable by others), then take its lock
        and give it its tag."""
        od = open_output(Path(out), modes)
        try:
            fd = os.open(".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         od.modes.file, dir_fd=od.fd)
        except OSError as e:
            od.close()
            raise OutputError(f"cannot use output directory {out}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            od.close()
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise LockedError(
                    f"another bastion run is using {out} (lock {Path(out) / '.lock'})"
                ) from None
            raise OutputError(f"cannot lock {out}: {e.strerror}") from None
        try:
            mark_output(od)
        except BaseException:
            os.close(fd)
            od.close()
            raise
        return cls(od.path, od, fd)

    def use_modes(self, modes: Modes) -> None:
        """Give the output ``modes`` (a run's manifest names them): tightened when they are
        not the ones it has."""
        if modes != self.dir.modes:
            self.dir.modes = modes
            tighten(self.dir)

    def release(self) -> None:
        """Release the lock and close the output directory (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
            self.dir.close()

    def __enter__(self) -> "OutputLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def identity(od: OutputDir, rel: str) -> list[int] | None:
    """(size, mtime_ns, ctime_ns, inode) of the file ``rel`` of the output ``od`` (through its
    descriptor), or None when it is not there."""
    try:
        st = od.stat(rel)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
