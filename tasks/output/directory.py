"""The output directory: checked once, then written only through its directory descriptor.

The output holds the plaintext of every file in scope, so it is as private as the most private
of them.  :func:`open_output` opens it the way OpenSSH's ``StrictModes`` treats ``~/.ssh``:

* every component bastion creates (the output and missing ancestors) is made with
  ``mkdir(dir_fd=parent)`` and opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its
  parent's descriptor, never by path; an ancestor that already exists is the user's and is
  opened as named;
* the output directory (and each component bastion created) is refused, one line, when it is
  a symbolic link, is not owned by the running user, or is writable by its group or others;
* the directories are ``0700`` and the files ``0600`` (``output_mode: group`` in the manifest:
  ``0750``/``0640``, never wider), whatever the umask; an existing output made looser is
  tightened once (:func:`tighten`, counted in ``tightened``).

Afterwards every write inside the output goes through :class:`OutputDir`: ``openat``,
``renameat``, ``mkdirat``, ``unlinkat`` relative to descriptors opened with ``O_NOFOLLOW``
from the checked one, so no component swapped after the check redirects a write.  Libraries
that take only paths (sqlite) get the ``/proc/self/fd/N/…`` form of a checked descriptor
(:meth:`OutputDir.proc`).  There is no registry of open outputs: whoever opens one (a run, through
:class:`bastion.tasks.output.atomic.OutputLock`) holds the :class:`OutputDir` as a value, passes it
to what reads and writes the output and closes it.  Its methods take names relative to the output
(``"extract/ab/x.txt"``); an absolute or ``..`` name is refused, so a path cannot be handed where
a name under the checked descriptor is meant.  A file outside any output (a ``--json`` file, a
report) is written by :func:`bastion.tasks.output.atomic.write_file_atomically`, by path.

The rules themselves (owner, modes, the walk that tightens a tree, the errors) are
:mod:`bastion.tasks.output.modes`'s, and the operations on a descriptor that are more than one
call (taking in a worker's file, emptying a tree, removing stale temps) :mod:`bastion.tasks.output.ops`'s;
both are re-exported here.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Iterable

from .modes import (DIR_FLAGS,
                    GROUP,
                    MODES,
                    PRIVATE,
                    Modes,
                    OutputError,
                    UnsafeOutputError,
                    check_dir,
                    refuse,
                    secure_path,
                    tighten_tree)
from .ops import TMP_PREFIX, empty_tree, remove_temps, take_file
from .tag import OUTPUT_TAG, OUTPUT_TAG_TEXT, TOP_NAMES, foreign_entry

__all__ = ["DIR_FLAGS", "GROUP", "MODES", "MODES_MARKER", "PRIVATE", "TMP_PREFIX", "Modes",
           "OutputDir", "OutputError", "UnsafeOutputError", "check_dir", "mark_output",
           "modes_marker", "open_output", "secure_path", "tighten", "write_all", "CopySpan"]

MODES_MARKER = ".bastion/modes"  # the modes the whole tree was last tightened to


@dataclass(frozen=True)
class CopySpan:
    """A chunk that is a byte range of another open file: copied by the kernel
    (``copy_file_range``, a reflink where the file system shares extents), not read."""

    fd: int
    offset: int
    length: int


def write_all(fd: int, chunks: bytes | Iterable[bytes | CopySpan], sync: bool) -> None:
    """Write ``chunks`` to the descriptor (taken over: closed here), fsynced when ``sync``."""
    with os.fdopen(fd, "wb", buffering=1 << 20) as f:
        if isinstance(chunks, (bytes, bytearray, memoryview)):
            f.write(chunks)
        else:
            for chunk in chunks:
                if isinstance(chunk, CopySpan):
                    f.flush()
                    _copy_span(chunk, f.fileno())
                else:
                    f.write(chunk)
        f.flush()
        if sync:
            os.fsync(f.fileno())


_NO_COPY_RANGE = (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM)


def _copy_span(span: CopySpan, dst: int) -> None:
    """``span``'s bytes appended at ``dst``'s offset: by ``copy_file_range``, or where the
    kernel or file system cannot, read and written."""
    left, at = span.length, span.offset
    try:
        while left:
            n = os.copy_file_range(span.fd, dst, left, at)
            if n <= 0:
                raise OSError(errno.EIO, "the file to copy from ended early")
            left -= n
            at += n
        return
    except OSError as e:
        if e.errno not in _NO_COPY_RANGE:
            raise
    while left:
        data = os.pread(span.fd, min(left, 1 << 20), at)
        if not data:
            raise OSError(errno.EIO, "the file to copy from ended early")
        view = memoryview(data)
        while view:
            view = view[os.write(dst, view):]
        left -= len(data)
        at += len(data)


def _open_child(parent: int, name: str, path: Path) -> int:
    """Open directory ``name`` under descriptor ``parent`` without following a symlink."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as e:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise refuse(path, "it is a symbolic link") from None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            raise OutputError(f"cannot use output directory {path}: not a directory") from None
        raise OutputError(f"cannot use output directory {path}: {e.strerror}") from None


def open_output(path: Path, modes: Modes | None = None) -> "OutputDir":
    """Open (creating what is missing) and check the output directory; see the module doc.
    ``modes`` None: the modes the output was last given (``.bastion/modes``), else private."""
    path = Path(os.path.abspath(path))
    missing: list[str] = []
    base = path.parent
    while not os.path.lexists(base) and base != base.parent:
        missing.append(base.name)
        base = base.parent
    try:
        pfd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise OutputError(f"cannot use output directory {path}: {base}: {e.strerror}") from None
    current = base
    try:
        for name in [*reversed(missing), path.name]:
            current = current / name
            created = True
            try:
                os.mkdir(name, (modes or PRIVATE).dir, dir_fd=pfd)
            except FileExistsError:
                created = False
            except OSError as e:
                raise OutputError(f"cannot create {current}: {e.strerror}") from None
            fd = _open_child(pfd, name, current)
            os.close(pfd)
            pfd = fd
            st = check_dir(fd, current)
            if created and stat.S_IMODE(st.st_mode) != (modes or PRIVATE).dir:
                os.fchmod(fd, (modes or PRIVATE).dir)  # mkdir's mode went through the umask
    except BaseException:
        os.close(pfd)
        raise
    if not created:  # an existing folder: a bastion output, or empty, or refused untouched
        try:
            foreign = foreign_entry(pfd, TMP_PREFIX)
        except OSError as e:
            os.close(pfd)
            raise OutputError(f"cannot use output directory {path}: {e.strerror}") from None
        if foreign is not None:
            os.close(pfd)
            raise refuse(path, f"it holds {foreign!r} and is not a bastion output (no bastion "
                               f"{OUTPUT_TAG}); choose a new or empty directory")
    out = OutputDir(path, pfd, modes or PRIVATE, secure=secure_path(base))
    if modes is None:
        out.modes = MODES.get(modes_marker(out) or "", PRIVATE)
    try:
        tighten(out)
    except BaseException:
        out.close()
        raise
    return out


class OutputDir:
    """An open, checked output directory and the descriptors of its subdirectories."""

    def __init__(self, path: Path, fd: int, modes: Modes, *, secure: bool = False) -> None:
        self.path = path
        self.fd = fd
        self.modes = modes
        # whether the name ``path`` itself cannot be swapped by another user (its existing
        # ancestors are secure_path): then a library or process may use it by name
        self.secure = secure
        self.tightened = 0  # files and directories whose mode this run narrowed
        self._dirs: dict[str, int] = {"": fd}

    def __repr__(self) -> str:
        return f"OutputDir({str(self.path)!r}, fd={self.fd}, modes={self.modes.name})"

    # -- names ------------------------------------------------------------------------------

    def rel(self, path: Path | str) -> str | None:
        """``path`` relative to the output (lexically), or None when it is not inside."""
        p = os.path.abspath(path)
        top = str(self.path)
        if p == top:
            return ""
        if top == "/":
            return p.lstrip("/")
        if p.startswith(top + "/"):
            return p[len(top) + 1:]
        return None

    def dir_fd(self, rel: str, *, create: bool = True) -> int:
        """The descriptor of subdirectory ``rel`` ("a/b"), each component opened with
        ``O_NOFOLLOW`` from its parent's descriptor (and made with the output's mode)."""
        fd = self._dirs.get(rel)
        if fd is not None:
            return fd
        _check_name(rel)
        parent_rel, _, name = rel.rpartition("/")
        parent = self.dir_fd(parent_rel, create=create)
        where = self.path / rel
        if create:
            try:
                os.mkdir(name, self.modes.dir, dir_fd=parent)
                made = True
            except FileExistsError:
                made = False
            except OSError as e:
                raise OutputError(f"cannot create {where}: {e.strerror}") from None
        else:
            made = False
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as e:
            if not create or e.errno == errno.ENOENT:
                raise  # a reader's business (missing, or a link where a directory should be)
            try:
                link = stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
            except OSError:
                link = False
            raise OutputError(f"cannot use {where}: "
                              f"{'a symbolic link (never followed)' if link else e.strerror}"
                              ) from None
        if made:
            os.fchmod(fd, self.modes.dir)
        self._dirs[rel] = fd
        return fd

    def split(self, rel: str, *, create: bool = True) -> tuple[int, str]:
        """(descriptor of the parent directory, last name) of file ``rel``."""
        parent, _, name = rel.rpartition("/")
        if name in ("", ".", "..") or rel[0] == "/":
            _check_name(rel or "/")
        return self.dir_fd(parent, create=create), name

    def proc(self, rel: str) -> str:
        """A path to ``rel`` through the checked descriptor of its directory, for libraries
        that take only paths (the kernel resolves ``/proc/self/fd/N`` to the open directory
        itself, not to the name it was opened by)."""
        fd, name = self.split(rel)
        return f"/proc/self/fd/{fd}/{name}"

    def forget_dirs(self, rel: str) -> None:
        """Close the descriptors of ``rel`` and below (the directories were removed)."""
        for key in [k for k in self._dirs if k and (k == rel or k.startswith(rel + "/")
                                                     or rel == "")]:
            os.close(self._dirs.pop(key))

    # -- writes -----------------------------------------------------------------------------

    def write(self, rel: str, chunks: bytes | Iterable[bytes | CopySpan], *, sync: bool = True,
              sync_dir: bool = True) -> None:
        """Write file ``rel`` all or nothing: a temp file beside it, ``fsync``, ``renameat``."""
        where = self.path / rel
        try:
            dfd, name = self.split(rel)
            tmp = f"{TMP_PREFIX}{name}.{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                         | os.O_CLOEXEC, self.modes.file, dir_fd=dfd)
            try:
                if stat.S_IMODE(os.fstat(fd).st_mode) != self.modes.file:
                    os.fchmod(fd, self.modes.file)  # a temp left by a killed run, or a umask
                write_all(fd, chunks, sync)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except OSError as e:
            raise OutputError(f"cannot write {where}: {e.strerror or e}") from None
        if sync and sync_dir:
            try:
                os.fsync(dfd)
            except OSError:
                pass

    def adopt(self, src: Path | str, rel: str) -> None:
        """Move file ``src`` (made by a worker) to ``rel``, then make sure what arrived is a
        regular file of this user with the output's file mode.  A ``src`` inside the output
        is named through the output's descriptor, so a swapped output path cannot supply it."""
        where = self.path / rel
        src_rel = self.rel(src)
        source = (f"/proc/self/fd/{self.fd}/{src_rel}" if src_rel else str(src))
        dfd, name = self.split(rel)
        take_file(source, dfd, name, self.modes.file, where)

    def create(self, rel: str) -> None:
        """Make file ``rel`` if it does not exist, with the output's file mode (for a file a
        library then opens by path: sqlite gives its journal files the database's mode)."""
        dfd, name = self.split(rel)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         self.modes.file, dir_fd=dfd)
        except OSError as e:
            raise OutputError(f"cannot create {self.path / rel}: {e.strerror}") from None
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != self.modes.file:
                os.fchmod(fd, self.modes.file)
        finally:
            os.close(fd)

    def chmod_file(self, rel: str) -> None:
        """Give existing file ``rel`` the output's file mode (missing: nothing)."""
        try:
            dfd, name = self.split(rel, create=False)
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=dfd)
        except OSError:
            return
        try:
            if stat.S_IMODE(os.fstat(fd).st_mode) != self.modes.file:
                os.fchmod(fd, self.modes.file)
        finally:
            os.close(fd)

    def unlink(self, rel: str) -> bool:
        """Remove file ``rel``; False when it was not there."""
        try:
            dfd, name = self.split(rel, create=False)
            os.unlink(name, dir_fd=dfd)
            return True
        except FileNotFoundError:
            return False
        except OSError as e:
            raise OutputError(f"cannot remove {self.path / rel}: {e.strerror}") from None

    def rmdir(self, rel: str) -> bool:
        """Remove directory ``rel`` when it is empty; whether it was removed."""
        try:
            pfd, name = self.split(rel, create=False)
            os.rmdir(name, dir_fd=pfd)
        except OSError:
            return False
        self.forget_dirs(rel)
        return True

    def rmtree(self, rel: str) -> None:
        """Remove directory ``rel`` and everything in it, never following a link."""
        try:
            fd = self.dir_fd(rel, create=False)
        except FileNotFoundError:
            return
        except OSError as e:
            raise OutputError(f"cannot remove {self.path / rel}: {e.strerror}") from None
        empty_tree(fd, self.path / rel)
        self.forget_dirs(rel)
        pfd, name = self.split(rel, create=False)
        try:
            os.rmdir(name, dir_fd=pfd)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputError(f"cannot remove {self.path / rel}: {e.strerror}") from None

    def remove_stale_temps(self, rel: str) -> int:
        """Delete the temp files a killed run left in directory ``rel``; how many."""
        try:
            fd = self.dir_fd(rel, create=False)
        except OSError:
            return 0  # missing, or not a directory: nothing of ours to clean
        return remove_temps(fd)

    def stat(self, rel: str) -> os.stat_result:
        """``lstat`` of ``rel`` through the checked descriptors."""
        if not rel:
            return os.stat(self.fd)
        dfd, name = self.split(rel, create=False)
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)

    def read(self, rel: str) -> bytes:
        """The bytes of file ``rel``, opened through the checked descriptors."""
        dfd, name = self.split(rel, create=False)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def read_json(self, rel: str) -> Any:
        """File ``rel`` parsed as JSON, read through the checked descriptors."""
        return json.loads(self.read(rel))

    def write_json(self, rel: str, obj: Any) -> None:
        """``obj`` as indented, sorted JSON in file ``rel`` (:meth:`write`)."""
        self.write(rel, (json.dumps(obj, sort_keys=True, ensure_ascii=True, indent=2) + "\n")
                   .encode("ascii"))

    def open_read(self, rel: str) -> BinaryIO:
        """File ``rel`` opened for reading, buffered, through the checked descriptors and
        never following a link (to read a large one a line at a time)."""
        dfd, name = self.split(rel, create=False)
        return os.fdopen(os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd),
                         "rb", buffering=1 << 20)

    def __enter__(self) -> "OutputDir":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._dirs.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._dirs.clear()


def _check_name(rel: str) -> None:
    """Refuse a name that is not under the output: an absolute path (a path where a name
    relative to the output is meant), a ``..`` or ``.`` component, an empty one."""
    if not isinstance(rel, str) or rel.startswith("/") or (
            rel and any(c in ("", ".", "..") for c in rel.split("/"))):
        raise ValueError(f"not a name inside the output directory: {rel!r}")


def mark_output(od: OutputDir) -> None:
    """Give the output its tag (once)."""
    try:
        st = od.stat(OUTPUT_TAG)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        od.write(OUTPUT_TAG, OUTPUT_TAG_TEXT)


def tighten(od: OutputDir) -> int:
    """Give every directory and file of the output its mode (once: the modes are recorded in
    ``.bastion/modes`` and the tree walked again only when they change or the output
    directory itself was loosened).  Returns how many were narrowed."""
    top = stat.S_IMODE(os.fstat(od.fd).st_mode)
    if top == od.modes.dir and modes_marker(od) == od.modes.name:
        return 0
    n = tighten_tree(od.fd, od.path, od.modes, top=TOP_NAMES, tmp_prefix=TMP_PREFIX)
    od.tightened += n
    od.write(MODES_MARKER, f"{od.modes.name}\n".encode("ascii"), sync=False)
    return n


def modes_marker(od: OutputDir) -> str | None:
    """The name of the modes the tree was last tightened to, if recorded."""
    try:
        return od.read(MODES_MARKER).decode("ascii", "replace").strip()
    except OSError:
        return None
