"""The pool of long-lived reader workers (parent side): jobs in, verdicts out, every limit enforced.

A worker (:mod:`bastion.readers.runtime.workermain`, started by
:func:`bastion.readers.runtime.procs.start_worker`) lives for many documents, so no interpreter
starts per file; it is a zygote that forks a process per document ahead of need
(:mod:`bastion.readers.runtime.zygote`), and the pool gives that process its job directly: it
opens the document and makes the text's file, hands both as descriptors, gives the job a
deadline, caps the answer line and the text file, and kills a worker past a limit with every
process it started (its PID namespace), then replaces it.  Run as root, its workers run as an
unprivileged user (:func:`worker_user`).  One worker, its start, control messages, jobs and
clock, is a :class:`bastion.readers.runtime.worker.Worker`; this module chooses the worker for
each job, reads the answers and calls back.  See ``docs/architecture.md``.
"""
from __future__ import annotations

import dataclasses
import os
import selectors
import stat
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from bastion.errors import WorkerError
from ..base import Limits
from .answers import JobResult
from .batch import PURE_READERS
from .fleet import Fleet
from .handout import open_document
from .identity import SLOT_BASE, SlotUsers
from .job import Job
from .procs import AUTO, PID_NAMESPACE, containment
from .sandbox import SCRATCH_DIR, WORKER_DIR
from .worker import Worker, view_paths, worker_path

__all__ = ["DEFAULT_USER", "SLOT_USER", "Job", "JobResult", "WorkerError", "WorkerPool",
           "open_document", "worker_user"]

SLOT_USER = ":slot"  # each worker slot its own unprivileged uid (no account can be named so)
DEFAULT_USER = SLOT_USER  # whom the workers of a pool run as root run as


class WorkerPool:
    """N long-lived workers; jobs go to a free one; every limit is enforced from here.

    ``submit`` returns as soon as a worker has taken the job (waiting, and handling finished
    jobs, while all are busy): its process has it, or reads earlier jobs and will be given it
    as it answers them; ``callback(result)`` runs in the caller's thread for every job,
    exactly once, whatever its process did — for a finished document, once the next job has
    been taken (while a process is forked for it, or after), so the caller's work on a result
    overlaps the workers' on the next documents.  ``drain`` waits for the jobs in flight and runs every callback still due.

    Each document is read in a process of its own, forked ahead by its worker's zygote and
    given the job straight from here; documents of the pure readers
    (:data:`~bastion.readers.runtime.batch.PURE_READERS`) share one for up to
    :data:`~bastion.readers.runtime.batch.BATCH_DOCS` in a row, several to a message, and one
    that turns out to need a native reader is read again alone.  The pool holds the jobs no
    worker holds yet and chooses the worker for each; its :class:`~bastion.readers.runtime.
    fleet.Fleet` runs the workers and says what came of each job.
    """

    def __init__(
        self,
        size: int,
        limits: Limits,
        tmp_root: Path,
        callback: Callable[[JobResult], None],
        *,
        recycle_after: int = 5000,
        rss_limit: int | None = None,
        extra_readers: tuple[str, ...] = (),
        contain: str = AUTO,
        user: str | None = DEFAULT_USER,
        allow_root: bool = False,
    ) -> None:
        self.size = max(1, size)
        self.limits = limits
        self.tmp_root = Path(tmp_root)
        self.callback = callback
        # run as root: the workers run as their slots' uids (or ``user``), or say why not
        self.user, self.user_note = worker_user(user, contain, allow_root)
        self.fleet = Fleet(limits, self.tmp_root, recycle_after=recycle_after,
                           rss_limit=rss_limit if rss_limit is not None
                           else limits.memory_bytes // 2,
                           extra_readers=extra_readers, contain=contain, user=self.user)
        self.closed = False
        # jobs no worker holds yet (first: those to read again), with whether to read alone
        self._queue: deque[tuple[Job, bool]] = deque()
        # results whose callback waits for the next job given out (see submit); failures,
        # called back at once
        self._pending: deque[JobResult] = deque()
        self._failed: deque[JobResult] = deque()

    @property
    def workers(self) -> list[Worker]:
        return self.fleet.workers

    @property
    def identity(self) -> dict[str, Any] | None:
        """A worker's identity, measured from ``/proc`` at its ready message."""
        return self.fleet.identity

    @property
    def spawned(self) -> int:
        return self.fleet.spawned

    @property
    def killed(self) -> int:
        return self.fleet.killed

    @property
    def extra_readers(self) -> tuple[str, ...]:
        return self.fleet.policy.extra_readers

    @extra_readers.setter
    def extra_readers(self, modules: tuple[str, ...]) -> None:  # for the workers started next
        self.fleet.policy = dataclasses.replace(self.fleet.policy, extra_readers=modules)

    # -- public ---------------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        self._queue.append((job, False))
        while not self._assign():
            self._poll()
        if any(w.hand.queue for w in self.workers):  # what the workers said meanwhile: a
            self._poll(0.0)  # spare to give a held job to, answers to make room for more
        while any(w.hand.queue and not w.hand.sent for w in self.workers):
            self._flush()  # the caller's work on earlier results while a process is forked
            self._poll()  # a worker holds jobs its process does not have: until it does
        # the finished jobs' callbacks (the caller's store work) run now, while the workers
        # already read the next documents, not before they get them
        self._flush()

    def warm(self, count: int | None = None) -> None:
        """Start ``count`` workers (default: every one) now, each booting while the caller
        goes on, not at first use; the rest start when a job finds the started ones busy."""
        while len(self.workers) < min(self.size, self.size if count is None else count):
            self.fleet.spawn()

    def drain(self) -> None:
        self._flush()
        while self._queue or any(not w.hand.free() for w in self.workers):
            if self._assign():
                self._flush()
            self._poll()
            self._flush()

    def close(self) -> None:
        try:
            while self._failed:
                self.callback(self._failed.popleft())
            self._flush()
        finally:
            if not self.closed:
                self.closed = True
                self.fleet.close()
                if self.user is not None:
                    self.user.close()

    def abandon(self) -> None:
        """In a forked copy of the parent: let go of the workers without touching them
        (closing only this process's copies of their descriptors)."""
        for w in self.workers:
            w.forget()
        self.workers.clear()
        self.fleet.sel.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The workers' pids (as this process numbers them; one not ready yet: its keeper)."""
        return [w.pid for w in self.workers]

    # -- its jobs -------------------------------------------------------------------------------

    def _flush(self) -> None:
        """Run the callbacks of the results held back, in order; each text file is gone
        after its callback (the caller moved it, or not)."""
        while self._pending:
            result = self._pending.popleft()
            try:
                self.callback(result)
            finally:
                for path in (result.text_path, result.markdown_path):
                    if path is not None and path.exists():
                        path.unlink()

    def _choose(self, job: Job, alone: bool) -> Worker | None:
        """The worker to hold ``job``: a free one, a new one, or the least loaded one whose
        process reads pure documents — with room for more, for a pure job; for one a shared
        process sent back (to be read alone), behind them, lest it hold up the queue."""
        for w in list(self.workers):
            if w.hand.free():
                if w.exited():  # dead while idle (its keeper, holding its sockets, may not
                    self.fleet.retire(w)  # have followed yet): replaced
                    self._take()
                    continue
                return w
        if len(self.workers) < self.size:
            return self.fleet.spawn()
        if job.reader in PURE_READERS:
            takers = [w for w in self.workers if w.hand.takes_pure()]
            if takers:
                return min(takers, key=lambda w: w.hand.load())
        return None

    def _assign(self) -> bool:
        """Hand the queued jobs to workers; whether none is left waiting for one."""
        while self._queue:
            job, alone = self._queue[0]
            w = self._choose(job, alone)
            if w is None:
                return False
            self._queue.popleft()
            self.fleet.assign(w, job, alone)
            self._take()
        return True

    def _poll(self, timeout: float | None = None) -> None:
        self.fleet.poll(timeout)
        self._take()

    def _take(self) -> None:
        """Act on what came of the jobs: results wait for their callback, jobs to give again
        go first in the queue (in their order), failures are called back now."""
        out, self.fleet.out = self.fleet.out, []
        self._queue.extendleft(reversed([(o.job, o.alone) for o in out if o.kind == "again"]))
        for o in out:
            if o.result is not None:
                (self._pending if o.kind == "result" else self._failed).append(o.result)
        while self._failed:  # (one that raises leaves the others for the next call)
            self.callback(self._failed.popleft())


def worker_user(name: str | None, contain: str = AUTO,
                allow_root: bool = False) -> tuple[SlotUsers | None, str | None]:
    """Whom reader workers run as, and why not when they would run as root.

    Only a pool running as root changes user.  By default (:data:`SLOT_USER`) each worker
    slot runs as a uid and gid of its own that no account has
    (:class:`~bastion.readers.runtime.identity.SlotUsers`); a ``name`` runs them all as that
    account (its primary group, no other); None keeps root, as the caller asked.  The
    interpreter, its library and bastion's modules need not be readable by that uid on the
    host: each worker binds them back, read-only, in its own mount namespace
    (:func:`bastion.readers.runtime.sandbox.build_view`).  What a worker needs is a PID and
    mount namespace and that each of those paths itself be readable by others; without
    either, :class:`WorkerError` says why in one line, unless ``allow_root`` accepts root
    workers: then the result is None and the note says why.
    """
    users, note = _worker_user(name, contain)
    if note is not None and not allow_root:
        raise WorkerError(f"{note} (refusing to start them; accept root workers with "
                        "allow_root_workers: true in the manifest)")
    return users, note


def _worker_user(name: str | None, contain: str) -> tuple[SlotUsers | None, str | None]:
    if name is None or os.geteuid() != 0:
        return None, None
    fixed = None
    if name != SLOT_USER:
        import pwd

        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise WorkerError(f"no user {name!r} to run the reader workers as") from None
        if entry.pw_uid == 0:
            return None, None
        fixed = (entry.pw_uid, entry.pw_gid)
    uid, gid = fixed or (SLOT_BASE, SLOT_BASE)
    needed = view_paths()
    for path in _essential():  # bound back as they are: each must itself be readable
        if not _readable_itself(path, uid, gid):
            return None, f"reader workers would run as root: {path} is not readable by others"
    for top in (WORKER_DIR, SCRATCH_DIR):
        try:  # an empty directory to mount over: it hides nothing of the host's
            os.makedirs(top, mode=0o755, exist_ok=True)
        except OSError as e:
            return None, (f"reader workers would run as root: cannot make {top}: "
                          f"{e.strerror}")
        hidden = _under(top, [sys.executable, *needed])
        if hidden is not None:  # the worker's own directory or scratch is mounted there
            return None, (f"reader workers would run as root: {hidden} is under {top}, "
                          f"which a worker sees replaced by its own directory")
    if containment(contain, mount=True)[1] != PID_NAMESPACE:  # probed once per process
        return None, ("reader workers would run as root: no PID, mount and network "
                      "namespace here (unshare --pid --mount --net failed)")
    return SlotUsers(fixed), None


def _essential() -> list[str]:
    """What a worker cannot run without: the standard library and bastion's own tree."""
    return [os.path.dirname(os.__file__), worker_path()[0]]


def _readable_itself(path: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    bits = (st.st_mode >> 6 if st.st_uid == uid else
            st.st_mode >> 3 if st.st_gid == gid else st.st_mode) & 7
    need = 5 if stat.S_ISDIR(st.st_mode) else 4
    return bits & need == need


def _under(top: Path, paths: list[str]) -> str | None:
    """The first of ``paths`` (as written or as its symlinks lead) inside ``top``, or None."""
    for path in paths:
        for form in {os.path.abspath(path), os.path.realpath(path)}:
            if Path(form).is_relative_to(top):
                return path
    return None
