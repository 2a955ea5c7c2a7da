"""What bastion keeps for the user across outputs: facts of the machine, not of an output.

Two JSON files in the user's cache directory (``$XDG_CACHE_HOME/bastion``, else
``~/.cache/bastion``: :func:`bastion.readers.text.langmodel.cache_dir`, beside the language
model's unpacked copy): ``registry.json``, the reader registry's digest and the readers'
library versions under the readers' fingerprint (tasks/extract/stamp.py), and ``tools.json``,
the tools' versions, tesseract's data directory and the language packs' digests under each
file's stat (tasks/extract/toolcache.py).  Every entry is checked against what it describes
before it is used (the fingerprint, the file's stat), so a stale one is only computed again.

A cache never fails a run: one that cannot be read is empty, one that cannot be written is
left as it is.  Read only when owned by this user and writable by nobody else (as the
language model's copy), written by a temporary file and a rename, without an fsync (a lost
write is computed again).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from ..output.atomic import OutputError, write_file_atomically

MAX_BYTES = 4 << 20  # a cache file larger than this is not read


def path(name: str) -> Path | None:
    """Where the user's cache file ``name`` is (None: this user has no home)."""
    from bastion.readers.text.langmodel import cache_dir

    where = cache_dir()
    return None if where is None else where / name


def read(name: str) -> dict[str, Any]:
    """The JSON object in cache file ``name``; empty when there is none, it is not this
    user's own or others may write it, or it is not a JSON object."""
    where = path(name)
    if where is None:
        return {}
    try:
        fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) or st.st_size > MAX_BYTES):
            return {}
        with os.fdopen(os.dup(fd), "rb") as f:
            data = json.loads(f.read(MAX_BYTES))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return data if isinstance(data, dict) else {}


def write(name: str, data: dict[str, Any]) -> None:
    """Replace cache file ``name`` with ``data`` (the directory made 0700 when missing)."""
    where = path(name)
    if where is None:
        return
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # (in the given order: the callers keep the most recent entries last)
        write_file_atomically(where, json.dumps(data).encode(), sync=False)
    except (OSError, ValueError, OutputError):
        pass
