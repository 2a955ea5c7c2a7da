"""One batch of documents through bastion's sandboxed workers: plain data in, verdicts out.

:func:`extract_batch` is the whole seam between "which documents" and "where they run": it
takes :class:`bastion.readers.runtime.job.Job` values (what the plan decided for each file: its
path, its sha256 and task key, the reader and its tools) and returns one :class:`JobOutcome` per
job, in the same order, with the :class:`bastion.readers.runtime.verdict.Verdict`, the text as
bytes and the sidecar.  It writes nothing the caller must clean up and touches no store: the
caller (the client of a cluster run, :mod:`bastion.tasks.cluster.run`) is the only writer of the
output.

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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from bastion.readers.base import Limits
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.pool import JobResult, WorkerPool
from bastion.readers.runtime.verdict import Status, Verdict



@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What reading one :class:`~bastion.readers.runtime.job.Job` came to, in a form that
    travels (pickled back from a Dask worker): the verdict, its text (``ok`` only) and its
    sidecar, under the job's (sha256, task key)."""

    sha256: str
    key: str
    verdict: Verdict
    text: bytes | None = None  # UTF-8, as the worker wrote it (status ok only)
    sidecar: dict[str, Any] | None = None  # pages, title, outline, page sources
    markdown: bytes | None = None  # its Markdown, UTF-8 (a job that asked for it, ok only)

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

    __slots__ = ("sink",)

    def __init__(self) -> None:
        self.sink: dict[int, JobOutcome] | None = None

    def __call__(self, result: JobResult) -> None:
        assert self.sink is not None, "a worker result arrived outside a batch"
        self.sink[result.job.id] = _outcome(result)


def _outcome(result: JobResult) -> JobOutcome:
    verdict = result.verdict
    sha, key = result.job.pair
    text = markdown = None
    if verdict.status is Status.OK and result.text_path is not None:
        text = result.text_path.read_bytes()  # the pool removes the file after the callback
        if result.markdown_path is not None:
            markdown = result.markdown_path.read_bytes()
            verdict = replace(verdict, markdown=True)
    sidecar = dict(result.sidecar) or None
    return JobOutcome(sha, key, verdict, text,
                      sidecar if verdict.status is Status.OK else None, markdown)


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


def extract_batch(jobs: Sequence[Job], *, limits: Limits, workers: int, tmp_root: Path,
                  extra_readers: tuple[str, ...] = ()) -> list[JobOutcome]:
    """Read ``jobs`` with ``workers`` sandboxed workers; one :class:`JobOutcome` per job, in
    order (the jobs' own ids do not matter: each gets one unique in this process)."""
    return extract_batch_stats(jobs, limits=limits, workers=workers, tmp_root=tmp_root,
                               extra_readers=extra_readers)[0]


def extract_batch_stats(jobs: Sequence[Job], *, limits: Limits, workers: int, tmp_root: Path,
                        extra_readers: tuple[str, ...] = ()
                        ) -> tuple[list[JobOutcome], PoolStats]:
    """:func:`extract_batch`, and what it cost the pool (workers started and killed)."""
    pool, collector = pool_for(limits, workers, tmp_root, extra_readers)
    started, killed = pool.spawned, pool.killed
    sink: dict[int, JobOutcome] = {}
    collector.sink = sink
    ids = []
    try:
        for job in jobs:
            job_id = next(_IDS)
            ids.append(job_id)
            pool.submit(replace(job, id=job_id))
        pool.drain()
    except BaseException:
        # a pool that failed (it cannot start workers) or a batch abandoned (the caller was
        # interrupted): its workers may hold half-done jobs, so it is not kept
        collector.sink = None
        _drop(pool)
        raise
    collector.sink = None
    stats = PoolStats(pool.spawned - started, pool.killed - killed)
    return [sink[i] for i in ids], stats
