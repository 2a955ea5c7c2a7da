"""One batch of documents through bastion's sandboxed workers: plain data in, verdicts out.

:func:`extract_batch` is the whole seam between "which documents" and "where they run": it
takes :class:`Doc` values (what the plan decided for each file: its path, its sha256 and task
key, the reader's tools) and returns one :class:`Done` per document, in the same order, with
the :class:`bastion.readers.runtime.verdict.Verdict`, the text as bytes and the PDF sidecar.  It writes nothing
the caller must clean up and touches no store: the caller (the client of a cluster run,
:mod:`bastion.tasks.cluster.run`) is the only writer of the output.

The sandbox is the local one, unchanged: every document is read by a
:class:`bastion.readers.runtime.pool.WorkerPool` worker under its deadline, memory and output caps and
Landlock, killed with its process group when it overstays.  A hanging document is therefore an
``error``/``timeout`` verdict, never a lost batch.

The pools are kept between batches (:func:`pool_for`), one per calling thread and settings, so
a long-lived caller — a Dask worker process running batch after batch — starts its sandboxed
workers once, not once per batch.  :func:`close_pools` stops them (a Dask worker's teardown,
``atexit`` otherwise).  One pool per thread because a :class:`~bastion.readers.runtime.pool.WorkerPool` is
driven by the thread that feeds it (and its workers die with that thread: ``PDEATHSIG``).
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from bastion.readers.base import Limits
from bastion.readers.runtime.pool import Job, JobResult, WorkerPool
from bastion.readers.runtime.verdict import Status, Verdict



@dataclass(frozen=True, slots=True)
class Doc:
    """One document to extract: what :class:`bastion.tasks.extract.plan.Item` says, resolved to a path."""

    sha256: str
    key: str  # the task key it was planned under
    path: str  # absolute, as the reading machine sees it
    name: str  # the file name (the readers look at its extension)
    mime: str
    size: int
    reader: str | None  # the reader the plan chose: the worker reads with it
    deadline_s: float
    tools: dict[str, str] = field(default_factory=dict)  # the reader's tools: name -> path


@dataclass(frozen=True, slots=True)
class Done:
    """One document's outcome: the verdict, its text (``ok`` only) and its PDF sidecar."""

    sha256: str
    key: str
    verdict: Verdict
    text: bytes | None = None  # UTF-8, as the worker wrote it (status ok only)
    sidecar: dict[str, Any] | None = None  # pages, title, outline, page sources

    @property
    def pair(self) -> tuple[str, str]:
        return (self.sha256, self.key)


@dataclass(frozen=True, slots=True)
class PoolStats:
    """What a batch cost the pool that ran it: workers started and killed meanwhile."""

    started: int = 0
    killed: int = 0


class _Collector:
    """The callback of a kept pool: hands each result to the batch being run (set per
    batch; none arrives outside one, since every batch drains its pool)."""

    __slots__ = ("keys", "sink")

    def __init__(self) -> None:
        self.keys: dict[int, tuple[str, str]] = {}  # job id -> (sha256, key)
        self.sink: dict[int, Done] | None = None

    def __call__(self, result: JobResult) -> None:
        assert self.sink is not None, "a worker result arrived outside a batch"
        self.sink[result.job.id] = _done(result, self.keys.pop(result.job.id))


def _done(result: JobResult, pair: tuple[str, str]) -> Done:
    verdict = result.verdict
    sha, key = pair
    text = None
    if verdict.status is Status.OK and result.text_path is not None:
        text = result.text_path.read_bytes()  # the pool removes the file after the callback
    sidecar = dict(result.sidecar) or None
    return Done(sha, key, verdict, text, sidecar if verdict.status is Status.OK else None)


_PoolKey = tuple[Limits, str, tuple[str, ...], int, int]
_POOLS: dict[_PoolKey, tuple[WorkerPool, _Collector]] = {}
_POOLS_LOCK = threading.Lock()
POOLS_PER_THREAD = 4
_IDS = itertools.count(1)
_POOL_IDS = itertools.count(1)  # job ids, unique in the process (next() is atomic)


def pool_for(limits: Limits, workers: int, tmp_root: Path,
             extra_readers: tuple[str, ...] = ()) -> tuple[WorkerPool, _Collector]:
    """The kept pool of this thread for these settings (started on first use).  A thread
    keeps at most :data:`POOLS_PER_THREAD` (a shared cluster serving runs of several
    manifests): the least recently used one is stopped."""
    thread = threading.get_ident()
    key = (limits, str(tmp_root), tuple(extra_readers), max(1, workers), thread)
    stale: list[WorkerPool] = []
    with _POOLS_LOCK:
        kept = _POOLS.pop(key, None)
        if kept is not None and not kept[0].closed:
            _POOLS[key] = kept  # most recently used last
            return kept
        # a directory per pool: two pools of a process would name their workers' alike
        where = Path(tmp_root) / f"pool{os.getpid()}-{next(_POOL_IDS)}"
        where.mkdir(parents=True, exist_ok=True)
        collector = _Collector()
        pool = WorkerPool(max(1, workers), limits, where, collector,
                          extra_readers=tuple(extra_readers))
        _POOLS[key] = (pool, collector)
        mine = [k for k in _POOLS if k[-1] == thread]
        for old in mine[:-POOLS_PER_THREAD]:
            stale.append(_POOLS.pop(old)[0])
    for old_pool in stale:  # this thread's own pools: no batch of it is running
        _close(old_pool)
    return pool, collector


def _close(pool: WorkerPool) -> None:
    try:
        pool.close()
    finally:
        shutil.rmtree(pool.tmp_root, ignore_errors=True)


def _drop(pool: WorkerPool) -> None:
    with _POOLS_LOCK:
        for key, (kept, _) in list(_POOLS.items()):
            if kept is pool:
                del _POOLS[key]
    _close(pool)


def close_pools() -> None:
    """Stop every kept pool (and its sandboxed workers)."""
    with _POOLS_LOCK:
        kept = list(_POOLS.values())
        _POOLS.clear()
    for pool, _ in kept:
        try:
            _close(pool)
        except Exception:  # noqa: BLE001 — teardown: stop the others whatever one did
            pass


atexit.register(close_pools)


def kept_pools() -> int:
    """How many pools are kept (the tests' and the bench's view of reuse)."""
    return len(_POOLS)


def extract_batch(docs: Sequence[Doc], *, limits: Limits, workers: int, tmp_root: Path,
                  extra_readers: tuple[str, ...] = ()) -> list[Done]:
    """Read ``docs`` with ``workers`` sandboxed workers; one :class:`Done` per doc, in order."""
    return extract_batch_stats(docs, limits=limits, workers=workers, tmp_root=tmp_root,
                               extra_readers=extra_readers)[0]


def extract_batch_stats(docs: Sequence[Doc], *, limits: Limits, workers: int, tmp_root: Path,
                        extra_readers: tuple[str, ...] = ()) -> tuple[list[Done], PoolStats]:
    """:func:`extract_batch`, and what it cost the pool (workers started and killed)."""
    pool, collector = pool_for(limits, workers, tmp_root, extra_readers)
    started, killed = pool.spawned, pool.killed
    sink: dict[int, Done] = {}
    collector.sink = sink
    ids = []
    try:
        for doc in docs:
            job_id = next(_IDS)
            ids.append(job_id)
            collector.keys[job_id] = (doc.sha256, doc.key)
            pool.submit(Job(
                id=job_id, path=doc.path, name=doc.name, mime=doc.mime, sha256=doc.sha256,
                size=doc.size, deadline_s=doc.deadline_s, tools=dict(doc.tools),
                reader=doc.reader))
        pool.drain()
    except BaseException:
        # a pool that failed (it cannot start workers) or a batch abandoned (the caller was
        # interrupted): its workers may hold half-done jobs, so it is not kept
        collector.sink = None
        collector.keys.clear()
        _drop(pool)
        raise
    collector.sink = None
    stats = PoolStats(pool.spawned - started, pool.killed - killed)
    return [sink[i] for i in ids], stats
