"""The extract stage on a Dask distributed cluster (``bastion extract --cluster …``).

A :class:`ClusterSession` is a :class:`bastion.tasks.extract.session.Session` (``start``,
``submit``, ``drain``, ``close``, ``counts``, ``describe``), as the local
:class:`~bastion.tasks.extract.session.ExtractSession` is, and commits as it does
(:class:`bastion.tasks.extract.commits.Commits`): :func:`bastion.tasks.extract.run.open_session`
picks it when ``RunConfig.cluster`` is set.  The documents go to the cluster in batches; the verdicts come
back and are committed here, exactly as a local run commits them, so the client stays the only
writer of the store, the verdict index, ``extract.jsonl`` and the summary, and the output is
byte-identical to a local run's whatever order the batches finish in.

The parts, one module each:

* what ``--cluster`` names, and :class:`ClusterError` (:mod:`bastion.tasks.cluster.spec`);
* the connection, made in the background while the run walks and plans, the workers it saw
  (:mod:`bastion.tasks.cluster.connect`), and ``local:N``'s scheduler and worker processes
  (:mod:`bastion.tasks.cluster.local`);
* the batches: cut by count and bytes, keyed by their (sha256, key) pairs so that a batch
  submitted twice is computed once, restricted to the workers whose tools and code match
  (:mod:`bastion.tasks.cluster.batches`);
* the worker side: the batch function through the kept pools of sandboxed workers (the
  sandbox does not change), the tools plugin (:mod:`bastion.tasks.cluster.worker`);
* here: the session, and the commit side (texts into the store from a few threads, then the
  verdicts in order, each (sha256, key) once whatever Dask re-ran).

Data movement: workers read the files from the paths the walk recorded (the roots mounted at
the same paths on every machine) and re-check the sha256 before reading; only the texts
travel, worker → client (``bench/cluster.py``, ``docs/scale.md``).  Faults of the cluster
itself (cannot connect, no worker, the scheduler gone mid-run) are a :class:`ClusterError`:
one line, exit 1; the verdicts recorded so far are committed, so the next run (local or
cluster) extracts only what is missing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from bastion.readers.base import Limits
from bastion.readers.runtime.toolset import Tool
from bastion.readers.runtime.verdict import Verdict

from ..extract.batch import JobOutcome
from .batches import BatchQueue, batch_key
from .connect import ClusterConnection, WorkerSeen
from .spec import ClusterError, ClusterSpec, parse_cluster, require_dask
from .worker import Batch, BatchResult, run_batch
from ..manifest import Root
from ..extract.plan import Item
from ..extract.commits import Commits
from ..extract.session import WorkerCounts
from ..extract.store import Store

__all__ = ["Batch", "BatchResult", "ClusterError", "ClusterSession", "ClusterSpec", "ClusterStats",
           "batch_key", "parse_cluster", "require_dask", "run_batch"]

WRITER_THREADS = 4  # threads of the client that put the texts into the store


@dataclass
class ClusterStats:
    """The pool-like counters the summary reads (``workers_started``, ``workers_killed``):
    sandboxed workers started and killed across the cluster during this run."""

    spawned: int = 0
    killed: int = 0


class ClusterSession(Commits):
    """The run's session when its documents are extracted on a Dask cluster (a
    :class:`bastion.tasks.extract.session.Session`)."""

    def __init__(self, spec: ClusterSpec, *, out: Path, store: Store, limits: Limits,
                 roots: Mapping[str, Root],
                 on_verdict: Callable[[Item, Verdict], None] | None = None,
                 extra_readers: tuple[str, ...] = (),
                 expected: Callable[[], int] = lambda: 0,
                 more_slices: Callable[[], bool] = lambda: False) -> None:
        super().__init__(out=out, store=store, on_verdict=on_verdict)
        self.spec = spec
        self.more_slices = more_slices  # whether more items come after a drain (the run's next doit slice)
        self.pool: ClusterStats | None = None
        self.conn = ClusterConnection(spec, limits, extra_readers)
        self.batches = BatchQueue(self.conn, limits=limits, roots=roots,
                                  extra_readers=extra_readers, expected=expected,
                                  finish=self._record_batch, refuse=self._refuse)
        self.failed: str | None = None  # why the cluster could not be used
        self.threads = 0  # the summary's "workers": batches that run at once (once connected)
        self._connected = False
        self._writer_pool: Any = None  # threads placing texts in the store

    @property
    def workers(self) -> int:
        return self.threads

    # -- starting ---------------------------------------------------------------------------------

    def start(self) -> ClusterStats:
        """Start connecting to the cluster (or starting the local one) in the background:
        the first batch waits for it (:meth:`ready`).  Idempotent; a ClusterError when Dask
        is missing, or when the cluster already proved unusable."""
        if self.pool is not None:
            return self.pool
        if self.failed:  # once is enough: the run's prestart met it, the first item meets it
            raise ClusterError(self.failed)
        try:
            self.conn.begin()
        except ClusterError as e:
            self.failed = str(e)
            raise
        self.claim_store()  # what a killed run left; this run writes the store now
        self.pool = ClusterStats()
        return self.pool

    def ready(self) -> None:
        """Wait for the connection (a ClusterError, remembered, when there is none)."""
        if self._connected:
            return
        self.start()
        try:
            self.conn.ready()
        except ClusterError as e:
            self.failed = str(e)
            raise
        self.threads = self.conn.threads
        self._connected = True

    # -- submitting -------------------------------------------------------------------------------

    def submit(self, item: Item, tools: Mapping[str, Tool]) -> None:
        """Add one item to the batch being filled (sent when full), its job made with
        ``tools``; an item whose (sha256, key) was already handed out in this run is the same
        document."""
        if not self.take(item):
            return
        self.ready()
        self.batches.add(item, tools)

    # -- committing -------------------------------------------------------------------------------

    def _refuse(self, items: list[Item], why: str) -> None:
        for item in items:
            self.record(item, Verdict.failed("cluster", why), None, {})

    def _record_batch(self, items: list[Item], result: BatchResult) -> None:
        by_pair = {(i.sha256, i.key): i for i in items}
        seen = self.conn.seen.setdefault(result.worker, WorkerSeen(result.worker))
        if not seen.tools:
            seen.tools = dict(result.worker_tools)
        seen.batches += 1
        seen.documents += len(result.outcomes)
        assert self.pool is not None
        self.pool.spawned += result.stats.started
        self.pool.killed += result.stats.killed
        todo = []
        for done in result.outcomes:
            item = by_pair.pop(done.pair, None)
            if item is None or self.recorded(item):
                continue  # not of this batch, or recorded already: never twice
            todo.append((item, done))
        # the texts go into the store from a few threads (creating a file is kernel time,
        # the GIL released): the single writer's main cost per document; then, in order,
        # the verdicts are queued for commit (after their texts, as always)
        per = -(-len(todo) // WRITER_THREADS)  # a slice per thread: a future each, not a text
        for _ in self._writers().map(self._place, [todo[i:i + per]
                                                   for i in range(0, len(todo), per)]):
            pass
        for item, done in todo:
            self.queue(item, done.verdict)

    def _place(self, pairs: list[tuple[Item, JobOutcome]]) -> None:
        for item, done in pairs:
            self.place(item, done.verdict, None, done.sidecar or {}, text=done.text,
                       markdown=done.markdown)

    def _writers(self) -> Any:
        if self._writer_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._writer_pool = ThreadPoolExecutor(WRITER_THREADS,
                                                   thread_name_prefix="bastion-store")
        return self._writer_pool

    # -- the run's end ----------------------------------------------------------------------------

    def drain(self) -> None:
        """Send the last batch, wait for every batch and commit.  Between two doit slices of
        the run (``more_slices``) only commit: the batches in flight and the one being filled go on,
        so the cluster does not idle while doit makes the next slice's tasks."""
        if self.conn.lost:
            raise ClusterError(self.conn.lost)
        if self.more_slices():
            if self._connected:
                self.batches.collect(block=False)
            self.commit()
            return
        if self._connected:
            self.batches.flush()
        elif self.pool is not None and not self.failed:
            try:  # nothing was submitted: wait only to name the workers in the summary
                self.ready()
            except ClusterError:
                pass  # left for a document to report; this run had none
        self.commit()

    def close(self) -> None:
        """Commit what was recorded, cancel the batches still running, disconnect (and stop
        the local cluster).  Idempotent."""
        try:
            self.commit()
        finally:
            if self._writer_pool is not None:
                self._writer_pool.shutdown(wait=True)
                self._writer_pool = None
            self.conn.close(self.batches.take_inflight())
            if self.pool is not None:  # the writer threads are done: nothing writes the store
                self.release_store()

    def counts(self) -> WorkerCounts:
        stats = self.pool
        return WorkerCounts(stats.spawned, stats.killed) if stats is not None else WorkerCounts()

    def describe(self) -> dict[str, Any]:
        """The summary's ``cluster`` entry: the scheduler and the workers that took part."""
        return {
            "scheduler": self.conn.address,
            "batches": self.batches.batches,
            "batches_failed": self.batches.batches_failed,
            "workers": [
                {"address": w.address, "name": w.name, "nthreads": w.nthreads,
                 "batches": w.batches, "documents": w.documents, "tools": w.tools}
                for w in sorted(self.conn.seen.values(), key=lambda w: w.address)
            ],
        }
