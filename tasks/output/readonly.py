"""An output opened to read only (``bastion show``, ``grep``, ``search``): checked to be a
bastion output, then nothing in it created, tightened, locked or written.

The commands that read an output take no lock (they work while a sweep writes it) and never
change it: :func:`open_read` opens the directory (the name the user gave may be a symlink
to it: reading cannot hurt), refuses one without bastion's ``CACHEDIR.TAG``, and from then on
every file is opened through that descriptor, each component with ``O_NOFOLLOW`` and none
created (:meth:`ReadOutput.read`, :meth:`ReadOutput.open_read`).  Its SQLite files are
opened read-only (``mode=ro``) through ``/proc/self/fd/N`` of their directory's descriptor
(:meth:`ReadOutput.sqlite`); SQLite may make the ``-shm`` file a WAL database needs, with the
database's own mode.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import BinaryIO

from bastion.errors import NotAnOutputError

from .directory import OutputDir
from .modes import PRIVATE
from .tag import OUTPUT_TAG, is_tagged

__all__ = ["ReadOutput", "open_read"]


class ReadOutput:
    """An open bastion output, for reading: its path and descriptors (an :class:`OutputDir`
    used only through its calls that create nothing)."""

    def __init__(self, od: OutputDir) -> None:
        self.od = od
        self.path = od.path

    def exists(self, rel: str) -> bool:
        try:
            self.od.stat(rel)
        except (OSError, ValueError):
            return False
        return True

    def read(self, rel: str) -> bytes:
        """The bytes of file ``rel`` (OSError when it cannot be read)."""
        return self.od.read(rel)

    def open_read(self, rel: str) -> BinaryIO:
        return self.od.open_read(rel)

    def sqlite(self, rel: str) -> sqlite3.Connection:
        """The SQLite file ``rel`` opened read-only (autocommit: each statement sees the
        last committed state).  NotAnOutputError when it is not there or cannot be opened."""
        try:
            dfd, name = self.od.split(rel, create=False)
            os.stat(name, dir_fd=dfd, follow_symlinks=False)
            db = sqlite3.connect(f"file:/proc/self/fd/{dfd}/{name}?mode=ro", uri=True,
                                 isolation_level=None, check_same_thread=False)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except (OSError, sqlite3.Error) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise NotAnOutputError(f"cannot read {self.path / rel}: {why}") from None
        return db

    def close(self) -> None:
        self.od.close()

    def __enter__(self) -> "ReadOutput":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_read(path: str | os.PathLike[str]) -> ReadOutput:
    """The output at ``path`` opened to read; NotAnOutputError when it is not a directory or
    holds no bastion output's tag."""
    where = Path(os.path.abspath(path))
    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise NotAnOutputError(f"{where}: {e.strerror}") from None
    if not is_tagged(fd):
        os.close(fd)
        raise NotAnOutputError(f"{where} is not a bastion output (no bastion {OUTPUT_TAG})")
    return ReadOutput(OutputDir(where, fd, PRIVATE))
