"""A document's path for its worker, fixed when the job is handed out: its directory opened
beneath its root's descriptor, no symlink followed on the way.

Between the walk and the extract another user who can write a root may swap a directory on a
document's path for a symlink (to ``/etc``, say).  The parent opens each document for its
worker (``readers/runtime/worker.py``'s ``open_document``: by path, the last component
``O_NOFOLLOW``); handing it ``/proc/self/fd/<D>/<name>``, ``D`` being the document's directory
opened here with :func:`bastion.tasks.walk.beneath.open_beneath` from the root's descriptor,
leaves only the last name to resolve, which that open does not follow.  The directory's
descriptor is held until the job's verdict arrives (:meth:`DocumentDirs.done`).
"""

from __future__ import annotations

import errno
import os
from typing import Any, Mapping

from ..walk.beneath import DIR_FLAGS, open_beneath, open_root
from ..walk.globs import relative_to

__all__ = ["DocumentDirs", "Unopenable"]


class Unopenable(Exception):
    """A document's directory could not be opened beneath its root: why, for its record."""


class DocumentDirs:
    """The roots' descriptors (opened once each) and the directory descriptor of each job in
    flight."""

    def __init__(self, roots: Mapping[str, Any]) -> None:
        self.roots = roots
        self._roots: dict[str, int] = {}
        self._held: dict[int, int] = {}

    def path(self, job: int, root_name: str, relpath: str) -> str:
        """The path to hand the worker side for job ``job`` (``/proc/self/fd/<D>/<name>``);
        :class:`Unopenable` when the document's directory is gone or was replaced."""
        root = self.roots[root_name]
        top = str(root.path)
        if root.follow_symlinks:  # reached through a followed link: the target, in the root
            real = relative_to(top, os.path.realpath(os.path.join(top, relpath)))
            if real is None:
                raise Unopenable("replaced since the walk (its link now leads out of the root)")
            relpath = real
        parent, _, name = relpath.rpartition("/")
        try:
            rfd = self._roots.get(root_name)
            if rfd is None:
                rfd = self._roots[root_name] = open_root(top)
            dfd = open_beneath(rfd, parent, DIR_FLAGS)
        except OSError as e:
            if e.errno == errno.ENOENT:
                raise Unopenable("file disappeared since the walk") from None
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
                raise Unopenable("replaced since the walk (a symbolic link on its path)") from None
            raise Unopenable(f"cannot open: {e.strerror}") from None
        self._held[job] = dfd
        return f"/proc/self/fd/{dfd}/{name}"

    def done(self, job: int) -> None:
        """Job ``job`` answered: its directory's descriptor is closed."""
        fd = self._held.pop(job, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for fd in [*self._held.values(), *self._roots.values()]:
            try:
                os.close(fd)
            except OSError:
                pass
        self._held.clear()
        self._roots.clear()
