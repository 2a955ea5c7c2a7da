"""Operations on plain descriptors inside a checked output: the ``*at`` system calls, never
following a link.

Each takes the descriptor of a directory (one :class:`bastion.tasks.output.directory.OutputDir` opened
from the checked output) and a name in it: taking in a file a worker made (:func:`take_file`,
copied when it is on another filesystem), emptying a directory tree (:func:`empty_tree`) and
removing the temp files a killed run left (:func:`remove_temps`).  Where a failure is the
output's, :class:`~bastion.tasks.output.modes.OutputError` names the path ``where``.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .modes import DIR_FLAGS, OutputError

TMP_PREFIX = ".tmp-"


def take_file(source: str, dfd: int, name: str, mode: int, where: Path) -> None:
    """Move file ``source`` to ``name`` under ``dfd``, then make sure what arrived is a
    regular file of this user with file mode ``mode`` (a symlink is never kept)."""
    try:
        try:
            os.replace(source, name, dst_dir_fd=dfd)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise
            copy_in(source, dfd, name, mode)  # scratch on another filesystem
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=dfd)
    except OSError as e:
        if e.errno == 40:  # the worker's file was a symlink: never keep it
            try:
                os.unlink(name, dir_fd=dfd)
            except OSError:
                pass
        raise OutputError(f"cannot store text {where}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.unlink(name, dir_fd=dfd)
            raise OutputError(f"cannot store text {where}: not a regular file")
        if st.st_uid != os.geteuid():
            os.fchown(fd, os.geteuid(), os.getegid())  # a worker running as another user
        if stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(fd, mode)
    except OSError as e:
        raise OutputError(f"cannot store text {where}: {e.strerror}") from None
    finally:
        os.close(fd)


def copy_in(source: str, dfd: int, name: str, mode: int) -> None:
    """Copy file ``source`` to ``name`` under ``dfd`` atomically (file mode ``mode``), then
    remove it."""
    sfd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(sfd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        tmp = f"{TMP_PREFIX}{name}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                     | os.O_CLOEXEC, mode, dir_fd=dfd)
        try:
            while os.sendfile(fd, sfd, None, 1 << 24):
                pass
        except BaseException:
            os.close(fd)
            os.unlink(tmp, dir_fd=dfd)
            raise
        os.close(fd)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    finally:
        os.close(sfd)
    os.unlink(source)


def empty_tree(fd: int, where: Path) -> None:
    """Remove everything in directory ``fd`` (at ``where``), never following a link."""
    with os.scandir(fd) as it:
        entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    for name, is_dir in entries:
        try:
            if is_dir:
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    empty_tree(sub, where / name)
                finally:
                    os.close(sub)
                os.rmdir(name, dir_fd=fd)
            else:
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputError(f"cannot remove {where / name}: {e.strerror}") from None


def remove_temps(fd: int) -> int:
    """Delete the temp files (:data:`TMP_PREFIX`) in directory ``fd``; how many."""
    n = 0
    with os.scandir(fd) as it:
        names = [e.name for e in it if e.name.startswith(TMP_PREFIX)]
    for name in names:
        try:
            os.unlink(name, dir_fd=fd)
            n += 1
        except OSError:
            pass
    return n
