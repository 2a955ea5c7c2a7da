"""The output one run holds: locked once, with the manifest's modes, its checked directory
handed to every writer, released when the run ends.

A run (:class:`bastion.tasks.extract.run.Run`) holds one :class:`HeldOutput` and passes it to
the steps that write or read the output; the lock may also be given, taken by the caller (the
public API's ``sweep``), who then releases it.  A listing command (``doit list``, ``info``)
that has not locked the output reads through it opened and checked but not locked
(:meth:`HeldOutput.store_dir`), so that it still works while another run holds the lock.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from ..manifest import Manifest
from .atomic import OutputLock
from .directory import MODES, OutputDir, open_output, refuse
from .tag import root_conflict

__all__ = ["HeldOutput"]


class HeldOutput:
    """The output's lock and checked directory for one run (see the module doc)."""

    def __init__(self, lock: OutputLock | None = None) -> None:
        self._lock = lock  # taken by lock(), or given (its giver releases it)
        self._owns_lock = lock is None
        self._unlocked: OutputDir | None = None  # a listing command's (store_dir)
        self._told_tightened = False

    def lock(self, manifest: Manifest, out: Path, say: Callable[[str], None]) -> OutputDir:
        """Open, check and lock the output directory (tasks/output/directory.py: a symlink,
        another user's or a group/world-writable one is refused), with the manifest's modes,
        once; the checked directory everything the run writes goes through.  ``say`` is told,
        once, of the files the modes narrowed."""
        if self._lock is None or self._lock.fd is None:
            why = root_conflict(out, manifest.roots)
            if why is not None:  # before anything in it is opened, let alone tightened
                raise refuse(Path(os.path.abspath(out)), why)
            self._lock = OutputLock.acquire(out, MODES[manifest.output_mode])
            self._owns_lock = True
        else:
            self._lock.use_modes(MODES[manifest.output_mode])
        od = self._lock.dir
        if od.tightened and not self._told_tightened:
            self._told_tightened = True
            say(f"tightened {od.tightened} file(s) and director(ies) of "
                f"{out} to {od.modes.dir:o}/{od.modes.file:o}")
        return od

    def unlocked(self, out: Path) -> OutputDir | None:
        """A listing command's output, opened and checked but not locked (once), when it has
        not been locked; else None (the locked one is the store's)."""
        if self._lock is not None:
            return None
        if self._unlocked is None:
            self._unlocked = open_output(out)
        return self._unlocked

    @property
    def tightened(self) -> int:
        """Files and directories of the output this run narrowed to its modes."""
        return self._lock.dir.tightened if self._lock is not None else 0

    def release(self) -> None:
        """Release the lock this run took (a lock it was given stays its giver's) and close
        what it opened (idempotent)."""
        if self._lock is not None and self._owns_lock:
            self._lock.release()
            self._lock = None
        if self._unlocked is not None:
            self._unlocked.close()
            self._unlocked = None
