"""The batches of a cluster run: cut, submitted with their keys and resources, collected.

Items come in the plan's order (largest first) and are cut by count and by bytes
(:data:`BATCH_BYTES`: a file as large alone).  The count (:func:`batch_count`) is guided —
the items left over a few per worker thread, so batches shrink toward the end and the run
does not wait on one worker's long last batch — and timed: once batches have finished, a
batch holds about :data:`BATCH_SECONDS` of reading at the cost per document seen so far (the
first ones, before any is known, :data:`PROBE_COUNT`), so a slow document (a scan that is
OCR'd) holds back only a few others on its worker.  A batch's Dask key is a digest of its
(sha256, task key) pairs, limits and tool requirements (:func:`batch_key`): submitting it
again is the same task, computed once.  A batch asks for the resources of the tools it was
planned with and of this client's code (:mod:`bastion.tasks.cluster.worker`); one that no
worker can take is refused here, its documents ``error``/``cluster`` records.  At most
:data:`IN_FLIGHT_PER_THREAD` batches per worker thread are out at once.

What comes back is handed to the session's callbacks: a finished batch's
:class:`~bastion.tasks.cluster.worker.BatchResult`, or the reason its documents get no text.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

from bastion.readers.base import Limits
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import Tool

from . import worker as worker
from .connect import ClusterConnection
from .spec import why
from ..manifest import Root
from ..extract.plan import Item

BATCH_COUNT = 200  # documents per batch at most
BATCH_BYTES = 32 << 20  # document bytes per batch at most (a larger file is a batch alone)
BATCHES_PER_THREAD = 4  # the items left are cut finer, so that every worker thread gets several
BATCH_SECONDS = 0.25  # a batch's reading time at most, once finished batches tell the cost...
TASKS_PER_SECOND = 200  # ...or longer on a large cluster: the scheduler gets this many at most
PROBE_COUNT = 4  # documents per batch until one has finished (what a document costs is unknown)
IN_FLIGHT_PER_THREAD = 2  # batches submitted and not yet collected, per worker thread
RETRIES = 2  # Dask re-runs of a batch whose function raised (a pool that could not start)
POLL_S = 1.0


def batch_key(jobs: tuple[Job, ...], limits: Limits, tools: Mapping[str, str],
              extra_readers: tuple[str, ...]) -> str:
    """The Dask key of a batch: a digest of everything its verdicts depend on besides the
    bytes (which the (sha256, key) pairs name)."""
    blob = json.dumps([sorted([j.sha256, j.key] for j in jobs), limits.as_dict(),
                       sorted(tools.items()), list(extra_readers)], sort_keys=True).encode()
    return f"bastion-batch-{hashlib.sha256(blob).hexdigest()[:32]}"


def batch_count(left: int, threads: int, timed_docs: int, timed_seconds: float) -> int:
    """How many documents the next batch takes at most, given the items not sent yet, the
    worker threads, and the documents of the finished batches with their reading time:

    * guided: ``left`` over :data:`BATCHES_PER_THREAD` per thread (at most
      :data:`BATCH_COUNT`), so batches shrink toward the end of the run and no worker is left
      reading a long batch while the others idle;
    * timed: no more than :data:`BATCH_SECONDS` of reading at the average cost per document
      so far (longer on a large cluster: :data:`TASKS_PER_SECOND`), so a few slow documents
      (an OCR'd scan among text PDFs) hold back little else; before any batch finished,
      :data:`PROBE_COUNT`."""
    threads = max(1, threads)
    count = min(BATCH_COUNT, math.ceil(max(1, left) / (threads * BATCHES_PER_THREAD)))
    if timed_seconds > 0:
        seconds = max(BATCH_SECONDS, threads / TASKS_PER_SECOND)
        count = min(count, int(seconds * timed_docs / timed_seconds))
    elif not timed_docs:
        count = min(count, PROBE_COUNT)
    return max(1, count)


Refuse = Callable[[list[Item], str], None]  # the documents get error/cluster records: why
Finish = Callable[[list[Item], "worker.BatchResult"], None]


@dataclass(frozen=True)
class BatchInputs:
    """What every batch's jobs are made from: the run's limits, the roots (a job's path is its
    root's), the extra readers (the tests').  The tools each item's key was planned with come
    with the item (:meth:`BatchQueue.add`)."""

    limits: Limits
    roots: Mapping[str, Root]
    extra_readers: tuple[str, ...]


class _Queued(NamedTuple):
    """An item of the batch being filled: its job, and the tools it needs (name, key)."""

    item: Item
    job: Job
    need: tuple[tuple[str, str], ...]


class _Pace:
    """The documents of the finished batches and their reading time (the batch size
    follows them)."""

    __slots__ = ("docs", "seconds")

    def __init__(self) -> None:
        self.docs = 0
        self.seconds = 0.0


class BatchQueue:
    """The batch being filled and the batches in flight, on one connection."""

    def __init__(self, conn: ClusterConnection, *, limits: Limits,
                 roots: Mapping[str, Root], extra_readers: tuple[str, ...],
                 expected: Callable[[], int], finish: Finish, refuse: Refuse) -> None:
        self.conn = conn
        self.inputs = BatchInputs(limits, roots, extra_readers)
        self.expected = expected  # how many items the run will submit (the batch size)
        self.finish = finish
        self.refuse = refuse
        self.current: list[_Queued] = []  # the batch being filled
        self.current_bytes = 0
        self.inflight: dict[Any, list[Item]] = {}  # future -> its items
        self.batches = 0
        self.batches_failed = 0
        self.sent = 0  # items sent in batches (or refused)
        self.pace = _Pace()
        self._done: queue.Queue[Any] = queue.Queue()  # futures that finished, in order

    # -- submitting -------------------------------------------------------------------------------

    def add(self, item: Item, tools: Mapping[str, Tool]) -> None:
        """Add one item to the batch being filled (sent when full), its job made with
        ``tools`` (the tools its key was planned with)."""
        if self.current and self.current_bytes + item.size > BATCH_BYTES:
            self.send()
        need = tuple(sorted((t, tools[t].key) for t in item.tools))
        self.current.append(_Queued(item, self._job(item, tools), need))
        self.current_bytes += item.size
        if len(self.current) >= self._batch_count() or self.current_bytes >= BATCH_BYTES:
            self.send()
        else:
            self.collect(block=False)

    def _batch_count(self) -> int:
        return batch_count(self.expected() - self.sent, self.conn.threads, self.pace.docs,
                           self.pace.seconds)

    def _job(self, item: Item, tools: Mapping[str, Tool]) -> Job:
        """The item's job: its path under its root as the cluster's workers see it; the
        plan index of its (sha256, key) as its id (a worker's batch numbers them afresh)."""
        root = self.inputs.roots[item.root]
        path = os.path.join(str(root.path), item.path)
        if root.follow_symlinks:  # a file reached through a followed link: read the target
            path = os.path.realpath(path)
        return item.job(item.canonical, path, tools)

    def send(self) -> None:
        """Submit the batch being filled (waiting first while enough are in flight)."""
        queued, self.current, self.current_bytes = self.current, [], 0
        if not queued:
            return
        self.sent += len(queued)
        while len(self.inflight) >= max(2, IN_FLIGHT_PER_THREAD * self.conn.threads):
            self.collect(block=True)
        # group by tool requirement: a batch asks for the tools of every document in it
        groups: dict[tuple[tuple[str, str], ...], list[_Queued]] = {}
        for one in queued:
            groups.setdefault(one.need, []).append(one)
        for need, group in groups.items():
            self._submit_group(dict(need), group)

    def _submit_group(self, need: dict[str, str], group: list[_Queued]) -> None:
        items = [one.item for one in group]
        code = f"bastion-code={worker.code_identity()}"
        resources = {code: 1.0}
        resources.update((worker.tool_resource(n, k), 1.0) for n, k in need.items())
        have = self.conn.resources(resources)
        missing = [r for r in resources if r not in have]
        if missing:
            if code in missing:
                reason = (f"no Dask worker runs this bastion (code {worker.code_identity()}): "
                          "install the same version on the workers")
            else:
                names = ", ".join(r.split(":", 1)[1].replace("=", " ") for r in missing)
                reason = (f"no Dask worker has the tools this file's key was planned with "
                          f"({names}): install them on the workers")
            self.refuse(items, reason)
            return
        jobs = tuple(one.job for one in group)
        limits, extra_readers = self.inputs.limits, self.inputs.extra_readers
        batch = worker.Batch(jobs, limits, need, extra_readers)
        key = batch_key(jobs, limits, need, extra_readers)
        try:
            future = self.conn.client.submit(worker.run_batch, batch, key=key, retries=RETRIES,
                                             resources=resources)
        except Exception as e:  # noqa: BLE001 — the connection is gone, whatever Dask says
            self.conn.lose(e)
        self.inflight[future] = items
        self.batches += 1
        future.add_done_callback(self._done.put)  # called in a thread of Dask's

    # -- collecting -------------------------------------------------------------------------------

    def collect(self, block: bool) -> None:
        """Hand over the batches that finished (waiting for one when ``block``)."""
        while self.inflight:
            try:
                future = self._done.get(timeout=POLL_S) if block else self._done.get_nowait()
            except queue.Empty:
                if not block:
                    return
                if not self.conn.alive():
                    self.conn.lose(None)
                continue
            if future in self.inflight:
                self._finished(future)
            if not block or self._done.empty():
                return

    def flush(self) -> None:
        """Send the batch being filled and collect every batch in flight."""
        self.send()
        while self.inflight:
            self.collect(block=True)

    def _finished(self, future: Any) -> None:
        items = self.inflight.pop(future)
        status = future.status
        if status == "finished":
            try:
                result = future.result()
            except Exception as e:  # noqa: BLE001 — lost between finishing and gathering
                self.inflight[future] = items
                self.conn.lose(e)
            self.pace.docs += len(result.outcomes)
            self.pace.seconds += result.seconds
            self.finish(items, result)
            return
        if status == "cancelled":  # the scheduler forgot it: the connection was lost
            self.inflight[future] = items
            self.conn.lose(None)
        # Dask gave up on it (its workers kept dying, or its function kept raising)
        try:
            error = future.exception()
        except Exception as e:  # noqa: BLE001
            error = e
        self.batches_failed += 1
        self.refuse(items, f"the cluster could not read it: {why(error)}")

    def take_inflight(self) -> list[Any]:
        """The futures still out (forgotten here: the caller cancels them)."""
        futures = list(self.inflight)
        self.inflight.clear()
        return futures
