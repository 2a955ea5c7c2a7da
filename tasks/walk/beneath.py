"""Opening a path beneath a directory descriptor without following a symlink anywhere on it.

The walk runs as root over trees that other users can write: any directory on a path may be
renamed and replaced by a symlink between the listing that named it and the open that reads
it.  :func:`open_beneath` resolves a relative path from a directory descriptor the way the
kernel's ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` does:
no symlink is followed at any component (``ELOOP``), no ``..`` or absolute path leaves the
directory (``EXDEV``).  Where the kernel has no ``openat2`` (before Linux 5.6, or a seccomp
filter that refuses it) each component is opened with ``openat(O_NOFOLLOW)`` relative to the
previous one, which gives the same guarantee in more calls.  Every open is ``O_NONBLOCK |
O_NOCTTY`` too: a FIFO or a terminal put in a file's place never blocks the opener.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from typing import Any

__all__ = ["DIR_FLAGS", "FILE_FLAGS", "foreign_link", "open_beneath", "open_root", "same_file",
           "uses_openat2"]

SYS_OPENAT2 = 437  # the same number on every Linux architecture (the unified table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_RESOLVE = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS

_SAFE = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | _SAFE
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | _SAFE


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


_syscall: Any = None  # libc's syscall(), once probed
_have_openat2: bool | None = None  # None: not probed yet


def _openat2(dirfd: int, path: bytes, flags: int) -> int:
    how = _OpenHow(flags, 0, _RESOLVE)
    fd = _syscall(SYS_OPENAT2, dirfd, path, ctypes.byref(how), ctypes.sizeof(how))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), os.fsdecode(path))
    return fd


def uses_openat2() -> bool:
    """Whether :func:`open_beneath` resolves with the kernel's ``openat2`` (probed once: an
    ``ENOSYS`` or a seccomp ``EPERM`` means the per-component fallback)."""
    global _syscall, _have_openat2
    if _have_openat2 is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            call = libc.syscall
            call.restype = ctypes.c_long
            call.argtypes = (ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                             ctypes.c_size_t)
            _syscall = call
            top = os.open("/", DIR_FLAGS)
            try:
                os.close(_openat2(top, b".", DIR_FLAGS))
            finally:
                os.close(top)
        except (OSError, AttributeError):
            _have_openat2 = False
        else:
            _have_openat2 = True
    return _have_openat2


def open_beneath(dirfd: int, relpath: str | bytes, flags: int = FILE_FLAGS) -> int:
    """A descriptor of ``relpath`` (relative, no ``..``) opened beneath ``dirfd`` with
    ``flags`` (``O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC`` always added), no symlink
    followed on the way; ``OSError`` (``ELOOP`` for a symlink, ``EXDEV`` for a path that
    would leave the directory) otherwise.  An empty path opens the directory itself."""
    path = os.fsencode(relpath) or b"."
    flags |= _SAFE
    parts = path.split(b"/")
    if path.startswith(b"/") or b".." in parts:
        raise OSError(errno.EXDEV, "path leaves the directory", os.fsdecode(path))
    if len(parts) == 1:  # one name (a file of the directory being walked): O_NOFOLLOW is all
        return os.open(path, flags, dir_fd=dirfd)
    if uses_openat2():
        while True:
            try:
                return _openat2(dirfd, path, flags)
            except InterruptedError:
                continue
            except OSError as e:
                if e.errno != errno.EAGAIN:  # EAGAIN: a rename raced the lookup; again
                    raise
    parts = [p for p in parts if p and p != b"."] or [b"."]
    fd = dirfd
    try:
        for part in parts[:-1]:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            if fd != dirfd:
                os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        if fd != dirfd:
            os.close(fd)


def open_root(path: str) -> int:
    """A root's directory, by its resolved absolute path, opened with no symlink followed
    anywhere on it: the manifest resolved it once; a component swapped for a symlink since
    is refused (``ELOOP``), never followed."""
    top = os.open("/", DIR_FLAGS)
    try:
        return open_beneath(top, path.lstrip("/"), DIR_FLAGS)
    finally:
        os.close(top)


def same_file(a: os.stat_result, b: os.stat_result) -> bool:
    """Whether two stats are of the same file (device and inode)."""
    return a.st_dev == b.st_dev and a.st_ino == b.st_ino


def foreign_link(path: str | os.PathLike) -> tuple[str, int] | None:
    """The first symlink that resolving the absolute ``path`` goes through and that neither
    root nor the running user owns, with its owner's uid; None when there is none.  Such a
    link is another user's to point elsewhere (at ``/etc``, say) whenever they like: a root
    named through it is refused rather than resolved (its resolution is checked once, when
    the manifest is loaded; the walk then opens the resolved path without following any
    symlink).  Links are followed as the kernel follows them (at most 40)."""
    me = os.geteuid()
    todo = [p for p in reversed(os.fspath(path).split("/")) if p]
    current, hops = "/", 0
    while todo:
        part = todo.pop()
        if part == ".":
            continue
        if part == "..":
            current = os.path.dirname(current)
            continue
        here = os.path.join(current, part)
        try:
            st = os.lstat(here)
        except OSError:
            return None  # not there: resolving it fails on its own
        if not stat.S_ISLNK(st.st_mode):
            current = here
            continue
        if st.st_uid not in (0, me):
            return here, st.st_uid
        hops += 1
        if hops > 40:
            return None
        target = os.readlink(here)
        if target.startswith("/"):
            current = "/"
        todo.extend(p for p in reversed(target.split("/")) if p)
    return None
