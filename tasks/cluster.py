"""The extract stage on a Dask distributed cluster (``bastion extract --cluster …``).

A :class:`ClusterSession` has the interface the run uses from
:class:`bastion.tasks.session.ExtractSession` (``start``, ``submit``, ``drain``, ``close``,
``produced``, ``pool``): :meth:`bastion.tasks.run.Run.start_session` picks it when
``RunConfig.cluster`` is set.  The documents go to the cluster in batches; the verdicts come
back and are committed here, exactly as a local run commits them, so the client stays the only
writer of the store, the verdict index, ``extract.jsonl`` and the summary, and the output is
byte-identical to a local run's whatever order the batches finish in.

* **Batches** (:meth:`ClusterSession.submit`): items in the plan's order (largest first), cut
  by count (:data:`BATCH_COUNT`, fewer when the run is small, so every worker gets several) and
  by bytes (:data:`BATCH_BYTES`: a file as large alone).  A batch's Dask key is a digest of its
  (sha256, task key) pairs, limits and tool requirements (:func:`batch_key`): submitting it
  again — a retry, a second client on the same tree — is the same task, computed once.
* **The sandbox does not change**: the function Dask runs (:func:`run_batch`) calls
  :func:`bastion.tasks.batch.extract_batch`, whose pools of sandboxed workers are kept across batches
  in each Dask worker process (closed at the worker's teardown).  Dask's own retries and
  worker restarts are a second line only: a Dask worker killed mid-batch has its batch run
  again elsewhere (the client records each (sha256, key) once), a batch Dask gives up on is one
  ``error``/``cluster`` record per document, retried next run.
* **Data movement**: workers read the files from the paths the walk recorded (the roots
  mounted at the same paths on every machine) and re-check the sha256 before reading (a file
  that differs is ``error``/``changed``); only the texts travel, worker → client.  Measured in
  ``bench/cluster.py`` and argued in ``docs/scale.md``.
* **Tools**: every Dask worker probes its own tools (:class:`bastion.readers.tools.ToolProbe`, in the
  :class:`ToolsPlugin`) and advertises each as a Dask resource named by its identity
  (:func:`tool_resource`); a batch whose readers use tools asks for the resources of the tools
  it was planned with, so it only runs on a worker whose tools match its task keys.  The same
  for the code: a worker advertises a digest of the readers and the batch function
  (:func:`code_identity`) and every batch asks for this client's.  A batch no worker can take
  is ``error``/``cluster`` records naming what is missing.
* **Faults of the cluster itself** (cannot connect, no worker, the scheduler gone mid-run) are
  a :class:`ClusterError`: one line, exit 1; the verdicts recorded so far are committed, so the
  next run (local or cluster) extracts only what is missing.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import math
import os
import queue
import re
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from bastion.readers.base import Limits
from bastion.readers.pool import PoolError
from bastion.readers.tools import Tool, ToolProbe
from bastion.readers.verdict import Verdict

from .batch import Doc, Done, PoolStats, close_pools, extract_batch_stats
from .fsio import OutputError
from .manifest import Root
from .plan import Item
from .session import ExtractSession
from .store import Store

INSTALL_HINT = "--cluster needs Dask: pip install 'bastion[dask]'"
BATCH_COUNT = 200  # documents per batch at most
BATCH_BYTES = 32 << 20  # document bytes per batch at most (a larger file is a batch alone)
BATCHES_PER_THREAD = 4  # a small run is cut finer, so that every worker thread gets several
IN_FLIGHT_PER_THREAD = 2  # batches submitted and not yet collected, per worker thread
RETRIES = 2  # Dask re-runs of a batch whose function raised (a pool that could not start)
CONNECT_TIMEOUT_S = 20.0
WORKERS_TIMEOUT_S = 60.0  # how long a run waits for the first Dask worker
POLL_S = 1.0
RESOURCES_REFRESH_S = 5.0  # how often a wait looks at the scheduler connection
WRITER_THREADS = 4  # threads of the client that put the texts into the store
TOOL_CAPACITY = 1_000_000.0  # a tool resource never limits how many batches run at once
PLUGIN_NAME = "bastion-tools"
LOST = "lost the Dask scheduler at {where} ({why}); the verdicts recorded so far are kept: " \
       "run again (with or without --cluster) to extract the rest"


class ClusterError(PoolError, OutputError):
    """The cluster cannot go on: Dask is not installed, the scheduler cannot be reached or was
    lost, no worker joined.  A :class:`~bastion.readers.pool.PoolError` (the pool of workers is
    gone) and an :class:`~bastion.tasks.fsio.OutputError` (the run cannot complete its output), so
    whichever step meets it reports it as one line and the run exits 1."""


# -- the cluster specification -------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterSpec:
    """``local:N`` (a LocalCluster of N worker processes started by this run) or the address
    of a running scheduler (``tcp://host:8786``)."""

    address: str | None = None
    local_workers: int = 0

    @property
    def local(self) -> bool:
        return self.address is None

    def __str__(self) -> str:
        return self.address or f"local:{self.local_workers}"


_LOCAL = re.compile(r"local(?::(\d+))?")
_ADDRESS = re.compile(r"(?:[a-z][a-z0-9+.-]*://)?[^\s/:]+(?::\d+)?|[a-z]+://\S+")


def parse_cluster(text: str) -> ClusterSpec:
    """The cluster ``--cluster`` names; ClusterError (a one-line reason) when it names none."""
    text = text.strip()
    m = _LOCAL.fullmatch(text)
    if m:
        n = int(m.group(1)) if m.group(1) else (os.cpu_count() or 1)
        if n < 1:
            raise ClusterError(f"--cluster {text}: a local cluster needs at least one worker")
        return ClusterSpec(local_workers=n)
    if text and _ADDRESS.fullmatch(text):
        return ClusterSpec(address=text if "://" in text else f"tcp://{text}")
    raise ClusterError(f"--cluster {text!r}: give a scheduler address (tcp://host:8786) or "
                     "local:N (a local cluster of N worker processes)")


def require_dask() -> None:
    """ClusterError with what to install when ``dask.distributed`` is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise ClusterError(INSTALL_HINT) from None


# -- the worker side ------------------------------------------------------------------------------


def tool_resource(name: str, key: str) -> str:
    """The Dask resource a worker advertises for a tool it has (its identity in the name)."""
    return f"bastion-tool:{name}={key}"


_CODE = ("readers/*.py", "tasks/plan.py", "tasks/batch.py", "tasks/session.py",
         "tasks/cluster.py")


@functools.cache
def code_identity() -> str:
    """A digest of the code a verdict depends on (the readers, the plan's keys, the batch
    function): a Dask worker advertises it (:func:`code_resource`) and every batch asks for
    it, so no document is read by a worker running another bastion."""
    base = Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    for pattern in _CODE:
        for path in sorted(base.glob(pattern)):
            h.update(path.relative_to(base).as_posix().encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def code_resource() -> str:
    return f"bastion-code={code_identity()}"


@dataclass(frozen=True)
class Batch:
    """What one Dask task carries: the documents and the settings to read them with."""

    docs: tuple[Doc, ...]
    limits: Limits
    tools: Mapping[str, str]  # name -> identity the plan keyed them on (present tools only)
    extra_readers: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchResult:
    """What a Dask task returns: one Done per document, and who made them."""

    dones: tuple[Done, ...]
    worker: str  # the Dask worker's address
    worker_tools: Mapping[str, str]  # its tools: name -> identity
    stats: PoolStats
    seconds: float


class ToolMismatch(Exception):
    """A batch reached a worker whose tools differ from the ones it was planned with (the
    resource restrictions make this a race of a joining worker only: Dask retries it)."""


_worker_tools: dict[str, Tool] | None = None
_tools_lock = threading.Lock()


def worker_tools() -> dict[str, Tool]:
    """This process's tools (probed once: a Dask worker process's PATH does not change)."""
    global _worker_tools
    with _tools_lock:
        if _worker_tools is None:
            _worker_tools = ToolProbe().result()
        return _worker_tools


def _scratch() -> Path:
    """Where this Dask worker's sandboxed workers get their private directories."""
    try:
        from distributed import get_worker

        base = Path(get_worker().local_directory)
    except (ImportError, ValueError):
        base = Path(tempfile.gettempdir())
    return base / "bastion"


def _address() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return f"pid:{os.getpid()}"


def run_batch(batch: Batch) -> BatchResult:
    """The function Dask runs on a worker: the batch through this process's kept pool, with
    this machine's own paths of the tools (checked to be the ones the batch was keyed on)."""
    t0 = time.monotonic()
    tools = worker_tools()
    mine = {name: t.key for name, t in tools.items()}
    wrong = {n: k for n, k in batch.tools.items() if mine.get(n) != k}
    if wrong:
        raise ToolMismatch(", ".join(f"{n} {k} (here: {mine.get(n) or 'absent'})"
                                     for n, k in sorted(wrong.items())))
    docs = [d if not d.tools else Doc(d.sha256, d.key, d.path, d.name, d.mime, d.size,
                                      d.reader, d.deadline_s,
                                      {n: tools[n].path for n in d.tools})
            for d in batch.docs]
    dones, stats = extract_batch_stats(docs, limits=batch.limits, workers=1, tmp_root=_scratch(),
                                       extra_readers=batch.extra_readers)
    return BatchResult(tuple(dones), _address(), mine, stats, time.monotonic() - t0)


def _on_scheduler() -> str:
    """``run_on_scheduler`` probe: the scheduler can import this module (it unpickles the
    batches, so a scheduler without bastion would refuse every one)."""
    return code_identity()


def _describe_tools() -> dict[str, list]:
    """``client.run`` probe: this worker's tools as {name: [path, version, identity]}."""
    return {n: [t.path, t.version, t.key] for n, t in sorted(worker_tools().items())}


try:
    from distributed.diagnostics.plugin import WorkerPlugin as _WorkerPlugin
except ImportError:  # without dask the plugin is never registered
    _WorkerPlugin = object  # type: ignore[assignment,misc]


class ToolsPlugin(_WorkerPlugin):  # type: ignore[misc,valid-type]
    """Registered on every Dask worker (present and joining): probes its tools, advertises
    them as resources (:func:`tool_resource`), and stops its kept pools at teardown."""

    name = PLUGIN_NAME

    async def setup(self, worker: Any) -> None:
        tools = await asyncio.get_running_loop().run_in_executor(None, worker_tools)
        resources = {tool_resource(n, t.key): TOOL_CAPACITY for n, t in tools.items()}
        resources[code_resource()] = TOOL_CAPACITY
        await worker.set_resources(**resources)

    def teardown(self, worker: Any) -> None:
        close_pools()


# -- the client side ------------------------------------------------------------------------------


def batch_key(docs: tuple[Doc, ...], limits: Limits, tools: Mapping[str, str],
              extra_readers: tuple[str, ...]) -> str:
    """The Dask key of a batch: a digest of everything its verdicts depend on besides the
    bytes (which the (sha256, key) pairs name)."""
    blob = json.dumps([sorted([d.sha256, d.key] for d in docs), limits.as_dict(),
                       sorted(tools.items()), list(extra_readers)], sort_keys=True).encode()
    return f"bastion-batch-{hashlib.sha256(blob).hexdigest()[:32]}"


@dataclass
class ClusterStats:
    """The pool-like counters the summary reads (``workers_started``, ``workers_killed``):
    sandboxed workers started and killed across the cluster during this run."""

    spawned: int = 0
    killed: int = 0


@dataclass
class _WorkerSeen:
    address: str
    name: str = ""
    nthreads: int = 0
    tools: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    documents: int = 0


class ClusterSession(ExtractSession):
    """The run's session when its documents are extracted on a Dask cluster."""

    def __init__(self, spec: ClusterSpec, *, out: Path, store: Store, limits: Limits,
                 tools: Mapping[str, Tool], roots: Mapping[str, Root],
                 on_verdict: Callable[[Item, Verdict], None] | None = None,
                 extra_readers: tuple[str, ...] = (),
                 expected: Callable[[], int] = lambda: 0,
                 more: Callable[[], bool] = lambda: False) -> None:
        super().__init__(out=out, store=store, limits=limits, workers=0, tools=tools,
                         roots=roots, on_verdict=on_verdict, extra_readers=extra_readers)
        self.spec = spec
        self.expected = expected  # how many items the run will submit (the batch size)
        self.more = more  # whether more items come after a drain (the run's next doit slice)
        self.pool: ClusterStats | None = None  # type: ignore[assignment]
        self.client: Any = None
        self.cluster: Any = None  # the LocalCluster this run started, if any
        self.address = str(spec)
        self.threads = 0  # worker threads in the cluster (batches run at once)
        self.seen: dict[str, _WorkerSeen] = {}
        self.current: list[Item] = []
        self.current_bytes = 0
        self.inflight: dict[Any, list[Item]] = {}  # future -> its items
        self.batches = 0
        self.batches_failed = 0
        self.lost: str | None = None
        self.failed: str | None = None  # why the cluster could not be used
        self._writer_pool: Any = None  # threads placing texts in the store
        self._done: queue.Queue[Any] = queue.Queue()  # futures that finished, in order
        self._have: set[str] | None = None  # tool resources the workers advertise
        self._have_at = 0.0

    # -- starting ---------------------------------------------------------------------------------

    def start(self) -> ClusterStats:  # type: ignore[override]
        """Connect (or start the local cluster), register the tools plugin, wait for a
        worker.  Idempotent; a ClusterError when the cluster cannot be used."""
        if self.pool is not None:
            return self.pool
        if self.failed:  # once is enough: the run's prestart met it, the first item meets it
            raise ClusterError(self.failed)
        try:
            return self._start()
        except ClusterError as e:
            self.failed = str(e)
            raise

    def _start(self) -> ClusterStats:
        require_dask()
        import distributed

        logging.getLogger("distributed").setLevel(logging.CRITICAL)  # our own one-line errors
        try:
            if self.spec.local:
                self.cluster = distributed.LocalCluster(
                    n_workers=self.spec.local_workers, threads_per_worker=1, processes=True,
                    dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
                self.client = distributed.Client(self.cluster, set_as_default=False)
                self.address = f"local:{self.spec.local_workers} ({self.cluster.scheduler_address})"
            else:
                self.client = distributed.Client(self.spec.address, timeout=CONNECT_TIMEOUT_S,
                                                 set_as_default=False)
            try:  # the scheduler unpickles the tasks: it must be able to import bastion
                self.client.run_on_scheduler(_on_scheduler)
            except Exception as e:  # noqa: BLE001 — whatever the scheduler's import said
                raise ClusterError(
                    f"the Dask scheduler at {self.address} cannot load bastion ({_why(e)}): "
                    "install the same bastion there (pip install 'bastion[dask]')") from None
            self.client.wait_for_workers(1, timeout=WORKERS_TIMEOUT_S)
            self.client.register_plugin(ToolsPlugin(), name=PLUGIN_NAME)
            self._refresh_workers(probe=True)
        except ClusterError:
            self.close()
            raise
        except (OSError, TimeoutError, asyncio.TimeoutError) as e:
            self.close()
            what = "no Dask worker joined" if self.client is not None else "cannot reach"
            raise ClusterError(f"{what} the Dask scheduler at {self.address}: "
                               f"{_why(e)}") from None
        except Exception as e:  # noqa: BLE001 — Dask's own errors vary by version
            self.close()
            raise ClusterError(f"cannot start on the Dask cluster {self.address}: "
                               f"{_why(e)}") from None
        self.pool = ClusterStats()
        return self.pool

    def _refresh_workers(self, probe: bool = False) -> None:
        workers = self._scheduler_info().get("workers", {})
        self.threads = sum(int(w.get("nthreads") or 1) for w in workers.values()) or 1
        self.workers = self.threads  # the summary's "workers": batches that run at once
        for address, w in workers.items():
            seen = self.seen.setdefault(address, _WorkerSeen(address))
            seen.name = str(w.get("name", ""))
            seen.nthreads = int(w.get("nthreads") or 0)
        if probe:
            for address, tools in self.client.run(_describe_tools).items():
                self.seen.setdefault(address, _WorkerSeen(address)).tools = tools

    def _resources(self, needed: Iterable[str]) -> set[str]:
        """Every tool resource some worker of the cluster advertises (asked again when one
        of ``needed`` is not among those known, at most every few seconds)."""
        now = time.monotonic()
        if (self._have is None or (not set(needed) <= self._have
                                   and now - self._have_at >= RESOURCES_REFRESH_S)):
            info = self._scheduler_info()
            have: set[str] = set()
            for w in info.get("workers", {}).values():
                have.update(w.get("resources") or {})
            self._have, self._have_at = have, now
        return self._have

    def _scheduler_info(self) -> dict[str, Any]:
        if _takes_n_workers():
            return self.client.scheduler_info(n_workers=-1)
        return self.client.scheduler_info()

    # -- submitting -------------------------------------------------------------------------------

    def submit(self, item: Item) -> None:
        """Add one item to the batch being filled (sent when full); an item whose
        (sha256, key) was already handed out in this run is the same document."""
        if not self.take(item):
            return
        self.start()
        if self.current and self.current_bytes + item.size > BATCH_BYTES:
            self._send()
        self.current.append(item)
        self.current_bytes += item.size
        if len(self.current) >= self._batch_count() or self.current_bytes >= BATCH_BYTES:
            self._send()
        else:
            self._collect(block=False)

    def _batch_count(self) -> int:
        per = math.ceil(max(1, self.expected()) / (max(1, self.threads) * BATCHES_PER_THREAD))
        return max(1, min(BATCH_COUNT, per))

    def _doc(self, item: Item) -> Doc:
        root = self.roots[item.root]
        path = os.path.join(str(root.path), item.path)
        if root.follow_symlinks:  # a file reached through a followed link: read the target
            path = os.path.realpath(path)
        return Doc(sha256=item.sha256, key=item.key, path=path,
                   name=os.path.basename(item.path), mime=item.mime, size=item.size,
                   reader=item.reader or "", deadline_s=item.deadline_s,
                   tools={t: self.tools[t].path for t in item.tools})

    def _send(self) -> None:
        """Submit the batch being filled (waiting first while enough are in flight)."""
        items, self.current, self.current_bytes = self.current, [], 0
        if not items:
            return
        while len(self.inflight) >= max(2, IN_FLIGHT_PER_THREAD * self.threads):
            self._collect(block=True)
        # group by tool requirement: a batch asks for the tools of every document in it
        groups: dict[tuple[tuple[str, str], ...], list[Item]] = {}
        for item in items:
            need = tuple(sorted((t, self.tools[t].key) for t in item.tools))
            groups.setdefault(need, []).append(item)
        for need, group in groups.items():
            self._submit_group(dict(need), group)

    def _submit_group(self, need: dict[str, str], items: list[Item]) -> None:
        docs = tuple(self._doc(i) for i in items)
        resources = {code_resource(): 1.0}
        resources.update((tool_resource(n, k), 1.0) for n, k in need.items())
        have = self._resources(resources)
        missing = [r for r in resources if r not in have]
        if missing:
            if code_resource() in missing:
                why = (f"no Dask worker runs this bastion (code {code_identity()}): install the "
                       "same version on the workers")
            else:
                names = ", ".join(r.split(":", 1)[1].replace("=", " ") for r in missing)
                why = (f"no Dask worker has the tools this file's key was planned with "
                       f"({names}): install them on the workers")
            for item in items:
                self.record(item, Verdict.failed("cluster", why), None, {})
            return
        batch = Batch(docs, self.limits, need, self.extra_readers)
        key = batch_key(docs, self.limits, need, self.extra_readers)
        try:
            future = self.client.submit(run_batch, batch, key=key, retries=RETRIES,
                                        resources=resources)
        except Exception as e:  # noqa: BLE001 — the connection is gone, whatever Dask says
            self._lose(e)
        self.inflight[future] = items
        self.batches += 1
        future.add_done_callback(self._done.put)  # called in a thread of Dask's

    # -- collecting -------------------------------------------------------------------------------

    def _collect(self, block: bool) -> None:
        """Record the batches that finished (waiting for one when ``block``)."""
        while self.inflight:
            try:
                future = self._done.get(timeout=POLL_S) if block else self._done.get_nowait()
            except queue.Empty:
                if not block:
                    return
                if self.client.status not in ("running", "connecting"):
                    self._lose(None)
                continue
            if future in self.inflight:
                self._finished(future)
            if not block or self._done.empty():
                return

    def _finished(self, future: Any) -> None:
        items = self.inflight.pop(future)
        status = future.status
        if status == "finished":
            try:
                result: BatchResult = future.result()
            except Exception as e:  # noqa: BLE001 — lost between finishing and gathering
                self.inflight[future] = items
                self._lose(e)
            self._record_batch(items, result)
            return
        if status == "cancelled":  # the scheduler forgot it: the connection was lost
            self.inflight[future] = items
            self._lose(None)
        # Dask gave up on it (its workers kept dying, or its function kept raising)
        try:
            error = future.exception()
        except Exception as e:  # noqa: BLE001
            error = e
        self.batches_failed += 1
        for item in items:
            self.record(item, Verdict.failed(
                "cluster", f"the cluster could not read it: {_why(error)}"), None, {})

    def _record_batch(self, items: list[Item], result: BatchResult) -> None:
        by_pair = {(i.sha256, i.key): i for i in items}
        seen = self.seen.setdefault(result.worker, _WorkerSeen(result.worker))
        if not seen.tools:
            seen.tools = dict(result.worker_tools)
        seen.batches += 1
        seen.documents += len(result.dones)
        assert self.pool is not None
        self.pool.spawned += result.stats.started
        self.pool.killed += result.stats.killed
        todo = []
        for done in result.dones:
            item = by_pair.pop(done.pair, None)
            if item is None or item.rep in self.produced:
                continue  # not of this batch, or recorded already: never twice
            todo.append((item, done))
        # the texts go into the store from a few threads (creating a file is kernel time,
        # the GIL released): the single writer's main cost per document; then, in order,
        # the verdicts are queued for commit (after their texts, as always)
        for placed in self._writers().map(self._place, todo):
            pass
        for item, done in todo:
            self.queue(item, done.verdict)

    def _place(self, pair: tuple[Item, Done]) -> None:
        item, done = pair
        self.place(item, done.verdict, None, done.sidecar or {}, text=done.text)

    def _writers(self) -> Any:
        if self._writer_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._writer_pool = ThreadPoolExecutor(WRITER_THREADS,
                                                   thread_name_prefix="bastion-store")
        return self._writer_pool

    def _lose(self, error: BaseException | None) -> None:
        why = _why(error) if error is not None else "the connection closed"
        self.lost = LOST.format(where=self.address, why=why)
        raise ClusterError(self.lost)

    # -- the run's end ----------------------------------------------------------------------------

    def drain(self) -> None:
        """Send the last batch, wait for every batch and commit.  Between two doit slices of
        the run (``more``) only commit: the batches in flight and the one being filled go on,
        so the cluster does not idle while doit makes the next slice's tasks."""
        if self.lost:
            raise ClusterError(self.lost)
        if self.more():
            self._collect(block=False)
            self.commit()
            return
        if self.client is not None:
            self._send()
            while self.inflight:
                self._collect(block=True)
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
            client, cluster = self.client, self.cluster
            self.client = self.cluster = None
            inflight = list(self.inflight)
            self.inflight.clear()
            if client is not None:
                try:
                    if inflight and client.status == "running":
                        client.cancel(inflight)
                except Exception:  # noqa: BLE001 — best effort on the way out
                    pass
                try:
                    client.close(timeout=5)
                except Exception:  # noqa: BLE001
                    pass
            if cluster is not None:
                try:
                    cluster.close(timeout=20)
                except Exception:  # noqa: BLE001
                    pass

    def describe(self) -> dict[str, Any]:
        """The summary's ``cluster`` entry: the scheduler and the workers that took part."""
        return {
            "scheduler": self.address,
            "batches": self.batches,
            "batches_failed": self.batches_failed,
            "workers": [
                {"address": w.address, "name": w.name, "nthreads": w.nthreads,
                 "batches": w.batches, "documents": w.documents, "tools": w.tools}
                for w in sorted(self.seen.values(), key=lambda w: w.address)
            ],
        }


def _why(error: BaseException | None) -> str:
    if error is None:
        return "unknown"
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text and text[0] else type(error).__name__


@functools.cache
def _takes_n_workers() -> bool:
    import inspect

    from distributed import Client

    return "n_workers" in inspect.signature(Client.scheduler_info).parameters
