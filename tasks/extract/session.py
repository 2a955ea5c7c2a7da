"""The running side of one extract run: the worker pool, the batched commits, progress.

An :class:`ExtractSession` hands planned items to the sandboxed workers
(:class:`bastion.readers.runtime.pool.WorkerPool`) and commits each verdict as it arrives: the text first
(moved into the store), then, in batches, the verdicts (one ``syncfs`` and one transaction per
:data:`COMMIT_EVERY` verdicts or :data:`COMMIT_SECONDS`, whichever comes first).  Items of one
(sha256, key) share one job.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from bastion.readers.base import Limits
from bastion.readers.runtime.pool import JobResult, WorkerPool
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Status, Verdict

from ..output.atomic import STATE_DIR, OutputError
from ..interrupts import critical
from ..manifest import Root
from .docopen import DocumentDirs, Unopenable
from .plan import Item
from .store import Store

# verdicts per commit (one syncfs + one transaction), or the verdicts of COMMIT_SECONDS: a
# kill -9 redoes at most that much finished work.  Each commit costs ≈ 15–25 ms whatever its
# size (the syncfs's journal commit, the WAL's checkpoint), so at a few thousand small
# documents a second the count, not the time, would decide how often: 500 made it 40 commits
# per 20,000 files (docs/performance.md, issue 40).
COMMIT_EVERY = 5000
COMMIT_SECONDS = 2.0
RUNNING = f"{STATE_DIR}/extracting"  # present while a session may be writing the store
SCRATCH = f"{STATE_DIR}/tmp"  # the workers' private directories (when the output's path is secure)


@dataclass(frozen=True)
class PoolSettings:
    """What the worker pool is started with: how many workers, the run's limits, the extra
    readers (the tests'), whether workers may run as root (the manifest's
    allow_root_workers)."""

    workers: int
    limits: Limits
    extra_readers: tuple[str, ...] = ()
    allow_root: bool = False


class ExtractSession:
    """Workers, commits and progress for one run.  ``on_verdict(item, verdict)`` is told of
    every verdict once it is recorded (the progress display)."""

    def __init__(self, *, out: Path, store: Store, limits: Limits, workers: int,
                 tools: Mapping[str, Tool], roots: Mapping[str, Root],
                 on_verdict: Callable[[Item, Verdict], None] | None = None,
                 extra_readers: tuple[str, ...] = (), allow_root: bool = False) -> None:
        self.out = out
        self.store = store
        self.settings = PoolSettings(workers, limits, extra_readers, allow_root)
        self.tools = tools
        self.roots = roots
        self.on_verdict = on_verdict
        self.pool: WorkerPool | None = None
        self.jobs: dict[int, Item] = {}  # in flight, by job id
        self.job_seq = 0
        self.pending: list[tuple[str, str, Verdict]] = []  # texts not yet known durable
        self.pending_plain: list[tuple[str, str]] = []  # their pairs whose texts are plain-named
        self.last_commit = time.monotonic()
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

    def claim_store(self) -> None:
        """Clear the temp files a killed run left in the output and the store (the texts and
        sidecars it was writing), and mark the store as being written.  Only a run that did
        not close its session leaves the marker, so a million-text store is not listed on
        every run."""
        od = self.store.dir
        od.remove_stale_temps("")
        try:
            od.stat(RUNNING)
            unfinished = True
        except OSError:
            unfinished = False
        buckets = self.store._bucket_dirs()
        if unfinished:
            for bucket in buckets:
                od.remove_stale_temps(f"extract/{bucket}")
        else:
            od.dir_fd(STATE_DIR)
            od.write(RUNNING, b"", sync=False)
        # a store without a bucket holds no text or sidecar: nothing to remove before a
        # text is placed (each (sha256, key) is placed once a run: Plan.hand_out)
        self.store.empty = not buckets

    def release_store(self) -> None:
        """Nothing of this run writes the store any more: the marker goes."""
        self.store.dir.unlink(RUNNING)

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

    def take(self, item: Item) -> bool:
        """Whether ``item`` is work for a worker: not when no reader takes its type (recorded
        here as ``unsupported``).  (An item whose (sha256, key) was handed out already in this
        run never comes: :meth:`bastion.tasks.extract.plan.Plan.hand_out`.)"""
        if item.reader is None:
            self.record(item, Verdict(status=Status.UNSUPPORTED,
                                      error=f"no reader for {item.mime}"), None, {})
            return False
        return True

    def submit(self, item: Item) -> None:
        """Extract one item (returns once a worker has it)."""
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
        pool.submit(item.job(self.job_seq, path, self.tools))

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

    # -- commits --------------------------------------------------------------------------------

    def record(self, item: Item, verdict: Verdict, text_path: Path | None,
               sidecar: dict[str, Any], text: bytes | None = None, *,
               markdown_path: Path | None = None, markdown: bytes | None = None) -> None:
        """Put a verdict's text (a worker's file, or ``text`` bytes made elsewhere: a cluster
        worker), its Markdown (``markdown_path`` or ``markdown``, when the job asked for it)
        and sidecar in place and queue the verdict for commit.  The sidecar (PDFs: pages,
        title, outline, how each page's text was made; any document's metadata and its
        embedded documents') is kept beside a text that has any."""
        with critical():  # a text in the store always has its verdict queued
            verdict = self.place(item, verdict, text_path, sidecar, text,
                                 markdown_path=markdown_path, markdown=markdown)
            self.queue(item, verdict)

    def place(self, item: Item, verdict: Verdict, text_path: Path | None,
              sidecar: dict[str, Any], text: bytes | None = None, *,
              markdown_path: Path | None = None, markdown: bytes | None = None) -> Verdict:
        """The text, Markdown and sidecar of a verdict into the store (or out of it): files
        only, so several items may be placed at once from threads (tasks/cluster/run.py
        does).  The verdict to record: with ``markdown`` set when its Markdown was stored."""
        stem = item.stem
        if verdict.status is Status.OK and (text_path is not None or text is not None):
            if text is not None:
                self.store.write_text(stem, text)
            elif text_path is not None:
                self.store.adopt_text(stem, text_path)
            if markdown is not None:
                self.store.write_text(stem, markdown, ".md")
            elif markdown_path is not None:
                self.store.adopt_text(stem, markdown_path, ".md")
            elif not self.store.empty:
                self.store.remove_meta(stem, ".md")  # (one an earlier run left)
            verdict = replace(verdict, markdown=markdown is not None
                              or markdown_path is not None)
            if ("outline" in sidecar or "page_sources" in sidecar or "metadata" in sidecar
                    or "embedded" in sidecar):
                self.store.write_meta(stem, sidecar)
            elif not self.store.empty:
                self.store.remove_meta(stem)
        elif not self.store.empty:
            self.store.remove_text(stem)
        return verdict

    def recorded(self, item: Item) -> bool:
        """Whether this run recorded a verdict of ``item``'s (sha256, key) already: queued,
        or committed under this run (the store's ``run`` column)."""
        pair = (item.sha256, item.key)
        return any(p[:2] == pair for p in self.pending) or pair in self.store.made([pair[0]])

    def queue(self, item: Item, verdict: Verdict) -> None:
        """Queue a placed verdict for commit (committing when the batch is full or old)."""
        self.pending.append((item.sha256, item.key, verdict))
        if verdict.status is Status.OK and item.stem == item.sha256:
            self.pending_plain.append((item.sha256, item.key))
        if (len(self.pending) >= COMMIT_EVERY
                or time.monotonic() - self.last_commit >= COMMIT_SECONDS):
            self.commit()
        if self.on_verdict is not None:
            self.on_verdict(item, verdict)

    def commit(self) -> None:
        """Make the pending verdicts (and their texts) durable."""
        with critical():
            self.store.put_many(self.pending, self.pending_plain)
            self.pending, self.pending_plain = [], []
        self.last_commit = time.monotonic()

    def _commit_quietly(self) -> None:
        """Commit what is pending, on the way out: a failure here (the disk full) leaves
        texts without verdicts, which the next run simply redoes."""
        if self.pending:
            try:
                self.commit()
            except (OutputError, OSError):
                pass

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
