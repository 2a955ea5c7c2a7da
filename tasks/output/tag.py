"""What makes a directory a bastion output: its tag, the names bastion writes at its top, and
where an output may not be.

An output is tagged with a cache directory tag (``CACHEDIR.TAG``, https://bford.info/cachedir/)
carrying bastion's mark, so the walk never walks one and backup tools that honour tags skip
it.  An existing ``--out`` that holds anything else and has no such tag is a user's folder:
:func:`foreign_entry` names what makes it one, and the output is refused before anything in it
is touched.  Only the names bastion writes at an output's top (:data:`TOP_NAMES`, and its
temporary files) are ever given the output's modes: a file someone put beside them keeps
its own.  An output may not be one of the swept roots nor hold one (:func:`root_conflict`).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterable

__all__ = ["OUTPUT_TAG", "OUTPUT_TAG_TEXT", "TOP_NAMES", "foreign_entry", "is_output_tag",
           "is_tagged", "root_conflict"]

OUTPUT_TAG = "CACHEDIR.TAG"
_TAG_SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55\n"
_TAG_MARK = b"# This directory is a bastion output."
OUTPUT_TAG_TEXT = (_TAG_SIGNATURE + _TAG_MARK + b" bastion never walks a directory holding"
                   b" this file.\n# For information about cache directory tags, see:\n"
                   b"#\thttps://bford.info/cachedir/\n")

# every name bastion writes at the top of an output (its temporary files aside: TMP_PREFIX)
TOP_NAMES = frozenset({OUTPUT_TAG, ".lock", ".bastion", "extract", "walk.jsonl",
                       "extract.jsonl", "walk.summary.json", "extract.summary.json"})
# what an output may hold before its tag is written (a first run stopped early)
_BEFORE_TAG = frozenset({".lock", ".bastion"})


def is_output_tag(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a ``CACHEDIR.TAG``) is a bastion output's tag.
    Other programs' cache tags are not: their directories are walked like any other."""
    return head.startswith(_TAG_SIGNATURE + _TAG_MARK)


def is_tagged(dfd: int) -> bool:
    """Whether the directory open at ``dfd`` holds a bastion output's tag (a regular file,
    not followed through a symlink, opened without blocking)."""
    try:
        fd = os.open(OUTPUT_TAG, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and is_output_tag(os.read(fd, 512))
    except OSError:
        return False
    finally:
        os.close(fd)


def foreign_entry(dfd: int, tmp_prefix: str) -> str | None:
    """The first entry (sorted) of the untagged directory open at ``dfd`` that bastion would
    not have written before its tag; None when it is empty or holds only those (a lock, the
    state directory, temporary files of a first run that stopped early) or is tagged."""
    if is_tagged(dfd):
        return None
    with os.scandir(dfd) as it:
        names = sorted(e.name for e in it)
    for name in names:
        if name not in _BEFORE_TAG and not name.startswith(tmp_prefix):
            return name
    return None


def root_conflict(out: Path, roots: Iterable) -> str | None:
    """Why ``out`` cannot be the output of a sweep of ``roots`` (each with ``name`` and a
    resolved ``path``): it is one of them, or it holds one; None when it is neither (an output
    inside a root is fine: the walk never walks it)."""
    real = Path(os.path.realpath(out))
    for root in roots:
        path = Path(root.path)
        if path == real:
            return f"it is the root {root.name!r}"
        if real in path.parents:
            return f"it contains the root {root.name!r} ({path})"
    return None
