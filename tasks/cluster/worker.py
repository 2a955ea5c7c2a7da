"""The worker side of a cluster run: what a Dask worker runs and advertises.

Imported by every Dask worker that takes a batch (it unpickles :class:`Batch` and
:func:`run_batch`), so it imports only what reading needs: the batch function
(:mod:`bastion.tasks.extract.batch`), the limits and the tools, none of the client's store or session.

* :func:`run_batch`: one batch through this process's kept pool of sandboxed workers
  (:func:`bastion.tasks.extract.batch.extract_batch_stats`), with this machine's paths of the tools,
  checked to be the ones the batch was planned with (:class:`ToolMismatch` otherwise).
* what the worker plugin (:mod:`bastion.tasks.cluster.plugin`) calls: the tools probe
  (:func:`worker_tools`), the resources it advertises (:func:`tool_resource`,
  :func:`code_resource`), the pool started before the first batch (:func:`warm_pool`).

It does not import Dask (the client imports it at the run's start, before Dask is needed).
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

from bastion.readers.base import Limits
from bastion.readers.runtime.job import Job
from bastion.readers.runtime.toolset import Tool, ToolProbe

from ..extract.batch import JobOutcome, PoolStats, extract_batch_stats, pool_for

TOOL_CAPACITY = 1_000_000.0  # a tool resource never limits how many batches run at once
PLUGIN_NAME = "bastion-tools"


def tool_resource(name: str, key: str) -> str:
    """The Dask resource a worker advertises for a tool it has (its identity in the name)."""
    return f"bastion-tool:{name}={key}"


_CODE = ("readers/**/*.py", "tasks/extract/plan.py", "tasks/extract/batch.py",
         "tasks/extract/session.py", "tasks/cluster/*.py")


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

    jobs: tuple[Job, ...]
    limits: Limits
    tools: Mapping[str, str]  # name -> identity the plan keyed them on (present tools only)
    extra_readers: tuple[str, ...] = ()


@dataclass(frozen=True)
class BatchResult:
    """What a Dask task returns: one outcome per job, in order, and who made them."""

    outcomes: tuple[JobOutcome, ...]
    worker: str  # the Dask worker's address
    worker_tools: Mapping[str, str]  # its tools: name -> identity
    stats: PoolStats
    seconds: float


class ToolMismatch(Exception):
    """A batch reached a worker whose tools differ from the ones it was planned with (the
    resource restrictions make this a race of a joining worker only: Dask retries it)."""


_worker_tools: dict[str, Tool] | None = None
_tools_lock = threading.Lock()


def worker_tools(probe: ToolProbe | None = None) -> dict[str, Tool]:
    """This process's tools (probed once: a Dask worker process's PATH does not change);
    ``probe``: one already asked (its answers are collected)."""
    global _worker_tools
    with _tools_lock:
        if _worker_tools is None:
            _worker_tools = (probe or ToolProbe()).result()
        return _worker_tools


def _scratch(local_directory: str | None = None) -> Path:
    """Where this Dask worker's sandboxed workers get their private directories."""
    if local_directory is None:
        try:
            from distributed import get_worker

            local_directory = get_worker().local_directory
        except (ImportError, ValueError):
            local_directory = tempfile.gettempdir()
    return Path(local_directory) / "bastion"


def warm_pool(limits: Limits, extra_readers: tuple[str, ...], local_directory: str) -> None:
    """Start the calling thread's kept pool for these settings (the one :func:`run_batch`
    will use in this thread), its sandboxed worker booting while the first batch is on its
    way.  Called in a Dask worker's executor thread (:mod:`bastion.tasks.cluster.plugin`)."""
    pool, _ = pool_for(limits, 1, _scratch(local_directory), extra_readers)
    pool.warm()


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
    jobs = [j if not j.tools else replace(j, tools={n: tools[n].path for n in j.tools})
            for j in batch.jobs]
    outcomes, stats = extract_batch_stats(jobs, limits=batch.limits, workers=1,
                                          tmp_root=_scratch(), extra_readers=batch.extra_readers)
    return BatchResult(tuple(outcomes), _address(), mine, stats, time.monotonic() - t0)


def _on_scheduler() -> str:
    """``run_on_scheduler`` probe: the scheduler can import this module (it unpickles the
    batches, so a scheduler without bastion would refuse every one)."""
    return code_identity()


def _describe_tools() -> dict[str, list]:
    """``client.run`` probe: this worker's tools as {name: [path, version, identity]}."""
    return {n: [t.path, t.version, t.key] for n, t in sorted(worker_tools().items())}
