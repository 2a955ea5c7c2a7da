"""The rules an output directory is held to, and the walk that gives its tree its modes.

Like OpenSSH's ``StrictModes`` for ``~/.ssh``: a directory of the output is refused when it is
not owned by the running user or is writable by its group or others (:func:`check_dir`), a
directory is never opened through a symbolic link (:data:`DIR_FLAGS`), and everything bastion
makes has the output's :class:`Modes` (``0700``/``0600``, or ``0750``/``0640`` with
``output_mode: group``).  :func:`tighten_tree` narrows an existing tree to them.  The errors of
an output are here too: :mod:`bastion.tasks.output.directory` opens and writes it by these rules.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path
from bastion.errors import OutputError, UnsafeOutputError

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Modes:
    """The permissions of everything bastion makes in an output."""

    name: str
    dir: int
    file: int


PRIVATE = Modes("private", 0o700, 0o600)
GROUP = Modes("group", 0o750, 0o640)
MODES = {m.name: m for m in (PRIVATE, GROUP)}


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def refuse(path: Path, why: str) -> UnsafeOutputError:
    """The error refusing output directory ``path``, saying ``why``."""
    return UnsafeOutputError(f"refusing output directory {path}: {why}")


def check_dir(fd: int, path: Path) -> os.stat_result:
    """Refuse a directory not owned by this user or writable by its group or others."""
    st = os.fstat(fd)
    me = os.geteuid()
    if st.st_uid != me:
        raise refuse(path, f"owned by {_user(st.st_uid)}, not by {_user(me)}")
    loose = st.st_mode & 0o022
    if loose:
        who = "its group and others" if loose == 0o022 else (
            "others" if loose & 0o002 else "its group")
        raise refuse(path, f"writable by {who} (mode {stat.S_IMODE(st.st_mode):04o}; "
                            f"chmod go-w it or choose another --out)")
    return st


def secure_path(path: Path) -> bool:
    """Whether no other user can rename or replace a component of ``path``: each directory
    on its real path (OpenSSH's ``secure_path``) owned by root or this user and writable by
    no one else, or sticky (``/tmp``: others cannot move what is not theirs)."""
    me = os.geteuid()
    p = Path(os.path.realpath(path))
    for d in (p, *p.parents):
        try:
            st = os.stat(d)
        except OSError:
            return False
        if st.st_uid not in (0, me):
            return False
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return False
    return True


def tighten_tree(fd: int, where: Path, modes: Modes, *,
                 top: frozenset[str] | None = None, tmp_prefix: str = "") -> int:
    """Give the directory ``fd`` (at ``where``) and everything below it ``modes``, checking
    each subdirectory (:func:`check_dir`) and never following a link; how many entries were
    wider than they should be.  With ``top``, only the entries of ``fd`` so named (or named
    with ``tmp_prefix``) are touched: an output's own names, never a file someone put beside
    them."""
    n = 0
    st = os.fstat(fd)
    if stat.S_IMODE(st.st_mode) != modes.dir:
        if stat.S_IMODE(st.st_mode) & ~modes.dir:
            n += 1  # wider than it should be (a narrower one is only set right)
        os.fchmod(fd, modes.dir)
    with os.scandir(fd) as it:
        entries = list(it)
    for entry in entries:
        if top is not None and entry.name not in top and not (
                tmp_prefix and entry.name.startswith(tmp_prefix)):
            continue  # not bastion's: left as it is
        try:
            est = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(est.st_mode):
            try:
                sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            try:
                check_dir(sub, where / entry.name)
                n += tighten_tree(sub, where / entry.name, modes)
            finally:
                os.close(sub)
        elif stat.S_ISREG(est.st_mode) and stat.S_IMODE(est.st_mode) != modes.file:
            if stat.S_IMODE(est.st_mode) & ~modes.file:
                n += 1
            try:
                os.chmod(entry.name, modes.file, dir_fd=fd)
            except OSError as e:
                raise OutputError(f"cannot tighten {where / entry.name}: "
                                  f"{e.strerror}") from None
    return n
