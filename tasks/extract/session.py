"""The running side of one extract run: the session a run hands its items to, and the local
one, whose workers are the sandboxed reader pool.

:class:`Session` is what a run asks of a session, local or on a cluster: start, submit an item
with the tools its key was planned with, drain, close, and the figures the summary names.  An
:class:`ExtractSession` hands planned items to the sandboxed workers
(:class:`bastion.readers.runtime.pool.WorkerPool`) and commits each verdict as it arrives
(:class:`bastion.tasks.extract.commits.Commits`: the text first, moved into the store, then
the verdicts in batches); :class:`bastion.tasks.cluster.run.ClusterSession` sends them to a
Dask cluster instead.  Items of one (sha256, key) share one job.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

from bastion.readers.base import Limits
from bastion.readers.runtime.pool import JobResult, WorkerPool
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..output.atomic import STATE_DIR, OutputError
from ..manifest import Root
from .commits import COMMIT_EVERY, COMMIT_SECONDS, RUNNING, Commits
from .docopen import DocumentDirs, Unopenable
from .plan import Item
from .store import Store

__all__ = ["COMMIT_EVERY", "COMMIT_SECONDS", "RUNNING", "SCRATCH", "ExtractSession",
           "PoolSettings", "Session", "WorkerCounts"]

SCRATCH = f"{STATE_DIR}/tmp"  # the workers' private directories (when the output's path is secure)


@dataclass(frozen=True)
class WorkerCounts:
    """The sandboxed workers a session started and killed (on a cluster: across its
    workers), and a worker's identity measured from ``/proc`` (local workers only)."""

    started: int = 0
    killed: int = 0
    identity: dict[str, Any] | None = None


class Session(Protocol):
    """What a run asks of its session (:class:`ExtractSession`, or on a Dask cluster
    :class:`bastion.tasks.cluster.run.ClusterSession`)."""

    failed: str | None  # why the session cannot be used (a cluster that cannot be reached)

    @property
    def workers(self) -> int:
        """The documents it reads at once (the summary's ``workers``)."""

    def start(self) -> object:
        """Start the workers (idempotent)."""

    def submit(self, item: Item, tools: Mapping[str, Tool]) -> None:
        """Hand one item to a worker, its job made with ``tools`` (the tools its key was
        planned with); its verdict is committed when it arrives."""

    def drain(self) -> None:
        """Wait for the items in flight and commit their verdicts."""

    def close(self) -> None:
        """Commit what was recorded and stop the workers (idempotent)."""

    def counts(self) -> WorkerCounts:
        """The workers started and killed so far."""

    def describe(self) -> dict[str, Any] | None:
        """The summary's ``cluster`` entry (None for a local session)."""


@dataclass(frozen=True)
class PoolSettings:
    """What the worker pool is started with: how many workers, the run's limits, the extra
    readers (the tests'), whether workers may run as root (the manifest's
    allow_root_workers)."""

    workers: int
    limits: Limits
    extra_readers: tuple[str, ...] = ()
    allow_root: bool = False


class ExtractSession(Commits):
    """The local workers of one run and its commits (:class:`Commits`): a :class:`Session`.
    ``on_verdict(item, verdict)`` is told of every verdict once it is recorded (the progress
    display)."""

    failed: str | None = None  # (a local session is always usable: its first document says)

    def __init__(self, *, out: Path, store: Store, limits: Limits, workers: int,
                 roots: Mapping[str, Root],
                 on_verdict: Callable[[Item, Verdict], None] | None = None,
                 extra_readers: tuple[str, ...] = (), allow_root: bool = False) -> None:
        super().__init__(out=out, store=store, on_verdict=on_verdict)
        self.settings = PoolSettings(workers, limits, extra_readers, allow_root)
        self.pool: WorkerPool | None = None
        self.jobs: dict[int, Item] = {}  # in flight, by job id
        self.job_seq = 0
        self._private_scratch: Path | None = None  # see _scratch_root
        self.dirs = DocumentDirs(roots)  # each job's directory, opened beneath its root
        self.stopping = False  # close() has begun: the pool hands back what it held

    @property
    def workers(self) -> int:
        return self.settings.workers

    # -- workers --------------------------------------------------------------------------------

    def start(self) -> WorkerPool:
        """Start the workers (idempotent).  Clears the scratch a killed run left behind."""
        if self.pool is not None:
            return self.pool
        tmp_root = self._scratch_root()
        self.claim_store()
        for stale in tmp_root.iterdir():  # scratch of a killed run
            try:
                if self._private_scratch is None:
                    self.store.dir.rmtree(f"{SCRATCH}/{stale.name}")
                else:
                    shutil.rmtree(stale)
            except OSError:
                pass
        settings = self.settings
        self.pool = WorkerPool(settings.workers, settings.limits, tmp_root, self._on_result,
                               extra_readers=settings.extra_readers,
                               allow_root=settings.allow_root)
        self._warm_one(self.pool)
        return self.pool

    @staticmethod
    def _warm_one(pool: WorkerPool) -> None:
        """Start one worker now (it boots while the walk and the plan run); the pool starts
        the others when a document finds every started one busy (``WorkerPool.submit``),
        which for a run of many documents is its second document, a few milliseconds after
        the first.  A run of one document (``bastion sweep`` of a changed file, a one-file
        tree) so never starts a second worker beside the one it uses: on two cores that
        second start took ≈ 50 ms of wall time and 0.1 s of CPU from a 0.4 s run
        (docs/performance.md, issue 40)."""
        pool.warm(1)

    def _scratch_root(self) -> Path:
        """Where the workers' private directories go.  The workers name them by path, so
        under ``.bastion/tmp`` only when no other user can swap a component of the output's
        path (:func:`bastion.tasks.output.directory.secure_path`); otherwise (an output in a root others may
        write) in a private temporary directory, and texts are copied in through the
        output's descriptor when it is on another filesystem."""
        od = self.store.dir
        if od.secure:
            od.dir_fd(SCRATCH)  # made, through the output's checked descriptor (tasks/output/directory.py)
            return self.out / SCRATCH
        if self._private_scratch is None:
            self._private_scratch = Path(tempfile.mkdtemp(prefix="bastion-scratch-"))
        return self._private_scratch

    def submit(self, item: Item, tools: Mapping[str, Tool]) -> None:
        """Extract one item, its job made with ``tools`` (returns once a worker has it)."""
        if not self.take(item):
            return
        pool = self.start()
        self.job_seq += 1
        try:  # its directory opened beneath the root: nothing swapped since the walk is followed
            path = self.dirs.path(self.job_seq, item.root, item.path)
        except Unopenable as e:
            self.record(item, Verdict(status=Status.ERROR, error=str(e), error_kind="changed"),
                        None, {})
            return
        self.jobs[self.job_seq] = item
        pool.submit(item.job(self.job_seq, path, tools))

    def _on_result(self, result: JobResult) -> None:
        item = self.jobs.pop(result.job.id)
        self.dirs.done(result.job.id)
        full = _disk_full(result.verdict)
        if self.stopping:  # answers the pool hands back while it stops: kept when they can be
            if full is None:
                try:
                    self.record(item, result.verdict, result.text_path, result.sidecar,
                                markdown_path=result.markdown_path)
                except (OutputError, OSError):
                    pass  # the run's one error line is said; the next run redoes this one
            return
        if full is not None:  # the output's problem, not the document's: the run stops
            raise OutputError(f"cannot write texts to {self.out}: {full} (the texts stored so "
                              "far are kept: free space and run again)")
        self.record(item, result.verdict, result.text_path, result.sidecar,
                    markdown_path=result.markdown_path)

    def drain(self) -> None:
        """Wait for every job in flight and commit."""
        if self.pool is not None:
            self.pool.drain()
        self.commit()

    def close(self) -> None:
        """Commit the verdicts already placed (a run stopped by Ctrl-C, SIGTERM or an error
        keeps every one it finished), then stop the workers (idempotent); the verdicts of
        the jobs that answered while they stopped are committed too."""
        self._commit_quietly()
        if self.pool is not None:
            self.stopping = True
            try:
                self.pool.close()
            finally:
                self._commit_quietly()
            if self.pool.closed:  # every job answered or stopped: nothing writing any more
                self.release_store()
                self.dirs.close()
        if self._private_scratch is not None and self.pool is not None and self.pool.closed:
            shutil.rmtree(self._private_scratch, ignore_errors=True)
            self._private_scratch = None

    def counts(self) -> WorkerCounts:
        pool = self.pool
        if pool is None:
            return WorkerCounts()
        return WorkerCounts(pool.spawned, pool.killed, pool.identity)

    def describe(self) -> dict[str, Any] | None:
        return None


_FULL = tuple(os.strerror(e) for e in (errno.ENOSPC, errno.EDQUOT))


def _disk_full(verdict: Verdict) -> str | None:
    """The reason, when a worker could not write its text because the filesystem of its
    scratch (the output's, or a private one beside it) is full or over quota; else None.
    Such a verdict is never recorded: it would be an ``error`` of a sound document."""
    error = verdict.error or ""
    if verdict.status is Status.ERROR and error.startswith("cannot write text: ") and any(
            why in error for why in _FULL):
        return error[len("cannot write text: "):]
    return None
