"""Reading one regular file for the walk: its sha256 and MIME type, or why it has none."""

from __future__ import annotations

import hashlib
import os
import stat
from typing import TypeAlias

from bastion.readers.detect import HEAD_BYTES, detect_file

from .beneath import FILE_FLAGS, open_beneath

READ_CHUNK = 1 << 20

# (sha256, reason, mime, error): the hashed fields of a walk record
Hashed = tuple["str | None", "str | None", "str | None", "str | None"]
# where a file is: a path, or (a directory's descriptor, a path relative to it)
Where: TypeAlias = "str | bytes | tuple[int, str | bytes]"


def hash_file(path: Where, name: str, st: os.stat_result, *, max_file_bytes: int,
              no_hash: bool, buf: bytearray) -> Hashed:
    """Hash and type the regular file at ``path`` (named ``name``) that the walk stat'ed as
    ``st``.  ``path`` is a ``(directory descriptor, relative path)`` pair in the walk, opened
    beneath that directory with no symlink followed on the way
    (:func:`bastion.tasks.walk.beneath.open_beneath`); a plain path is opened without
    following its last component.  Either way the open never blocks, a file that is not the
    one stat'ed (device and inode) or that changes while it is read has no sha256, and the
    one descriptor is read for the hash and the type.  ``buf`` is the caller's read buffer
    (``READ_CHUNK`` bytes), reused from file to file."""
    over = st.st_size > max_file_bytes
    try:
        if isinstance(path, tuple):
            fd = open_beneath(path[0], path[1], FILE_FLAGS)
        else:
            fd = os.open(path, FILE_FLAGS)
    except OSError as e:
        return None, "read error", None, f"cannot open: {e.strerror}"
    try:
        fst = os.fstat(fd)
        if (not stat.S_ISREG(fst.st_mode) or fst.st_ino != st.st_ino
                or fst.st_dev != st.st_dev):
            return None, "changed during the walk", None, "replaced during the walk"
        head = os.read(fd, HEAD_BYTES)
        mime = detect_file(fd, name, head)
        if over:
            return None, f"over max_file_bytes ({max_file_bytes})", mime, None
        if no_hash:
            return None, "no-hash", mime, None
        h = hashlib.sha256(head)
        total = len(head)
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
