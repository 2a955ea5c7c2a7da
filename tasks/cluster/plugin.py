"""The worker plugin of a cluster run (``bastion-tools``), registered by the client on every
Dask worker, present and joining.

* **Tools and code**: it probes the worker's tools and advertises each one, and the worker's
  code, as a Dask resource (:func:`bastion.tasks.cluster.worker.tool_resource`,
  :func:`~bastion.tasks.cluster.worker.code_resource`), so that a batch runs only where its keys
  hold.
* **The pool before the first batch**: given the run's limits and extra readers, it starts the
  kept pool of sandboxed workers in each of the worker's executor threads
  (:func:`~bastion.tasks.cluster.worker.warm_pool`): the reader worker boots while the client
  sends the first batch, as a local run's pool boots while the run plans.
* **The end**: the kept pools are stopped when the Dask worker closes.  Not when the plugin is
  merely replaced (the next run registering its own, on a shared cluster): the pools may be
  driving another run's batch, and a thread keeps only a few
  (:data:`bastion.tasks.extract.batch.POOLS_PER_THREAD`).

Its own module because it imports Dask: the client imports it in the background, with the
connection (:mod:`bastion.tasks.cluster.connect`), not at the run's start.
"""

from __future__ import annotations

import asyncio
from typing import Any

from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from bastion.readers.base import Limits

from ..extract.batch import close_pools
from .worker import (PLUGIN_NAME,
                     TOOL_CAPACITY,
                     code_resource,
                     tool_resource,
                     warm_pool,
                     worker_tools)

_CLOSING = (Status.closing, Status.closed, Status.failed)


class ToolsPlugin(WorkerPlugin):
    """Advertises the worker's tools and code; warms the run's pool; stops the pools at the
    worker's close."""

    name = PLUGIN_NAME

    def __init__(self, limits: Limits | None = None, extra_readers: tuple[str, ...] = ()) -> None:
        self.limits = limits
        self.extra_readers = tuple(extra_readers)

    async def setup(self, worker: Any) -> None:
        if self.limits is not None:  # first, so the reader worker boots during the probe
            self._warm(worker)
        tools = await asyncio.get_running_loop().run_in_executor(None, worker_tools)
        resources = {tool_resource(n, t.key): TOOL_CAPACITY for n, t in tools.items()}
        resources[code_resource()] = TOOL_CAPACITY
        await worker.set_resources(**resources)

    def _warm(self, worker: Any) -> None:
        """One warm-up per executor thread, queued there and not waited for (a batch that
        comes first queues behind it; a failure is left for that batch to meet)."""
        executor = getattr(worker, "executors", {}).get("default")
        if executor is None:
            return
        for _ in range(max(1, int(getattr(worker.state, "nthreads", 1) or 1))):
            executor.submit(warm_pool, self.limits, self.extra_readers,
                            str(worker.local_directory))

    def teardown(self, worker: Any) -> None:
        if worker.status in _CLOSING:
            close_pools()
