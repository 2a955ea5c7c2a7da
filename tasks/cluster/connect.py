"""The client's connection to the Dask cluster of one run: getting there, what is on it, leaving.

:meth:`ClusterConnection.begin` returns at once: ``local:N`` launches its processes
(:class:`bastion.tasks.cluster.local.LocalProcesses`), and a thread connects, checks that the
scheduler can load bastion, waits for the workers, registers the tools plugin and probes the
workers' tools, while the run walks and plans.  :meth:`ClusterConnection.ready` waits for that
thread (the first batch needs it) and raises its :class:`ClusterError`, if any.

A ``local:N`` client takes the results straight from the workers (``direct_to_workers``: the
texts cross one socket, not two through the scheduler); against a running cluster Dask's own
setting ``distributed.client.direct-to-workers`` decides (the workers may not be reachable
from the client).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

from bastion.readers.base import Limits

from .local import LocalProcesses, LocalStartError
from .spec import ClusterError, ClusterSpec, require_dask, why
from .worker import PLUGIN_NAME, _describe_tools, _on_scheduler

CONNECT_TIMEOUT_S = 20.0
WORKERS_TIMEOUT_S = 60.0  # how long a run waits for the first Dask worker (local:N: for all)
RESOURCES_REFRESH_S = 5.0  # how often a wait looks at the scheduler connection
LOST = "lost the Dask scheduler at {where} ({why}); the verdicts recorded so far are kept: " \
       "run again (with or without --cluster) to extract the rest"


@dataclass
class WorkerSeen:
    """A Dask worker that took part (the summary's ``cluster.workers``)."""

    address: str
    name: str = ""
    nthreads: int = 0
    tools: dict[str, Any] = field(default_factory=dict)
    batches: int = 0
    documents: int = 0


class ClusterConnection:
    """The Dask client of a run, and what it knows of the cluster's workers."""

    def __init__(self, spec: ClusterSpec, limits: Limits | None = None,
                 extra_readers: tuple[str, ...] = ()) -> None:
        self.spec = spec
        self.limits = limits  # the run's: each worker starts its pool with them (the plugin)
        self.extra_readers = extra_readers
        self.address = str(spec)
        self.client: Any = None
        self.local: LocalProcesses | None = None  # the processes of local:N
        self.threads = 0  # worker threads in the cluster (batches run at once)
        self.seen: dict[str, WorkerSeen] = {}
        self.lost: str | None = None
        self._have: set[str] | None = None  # resources the workers advertise
        self._have_at = 0.0
        self._thread: threading.Thread | None = None
        self._error: ClusterError | None = None
        self._stopper: threading.Thread | None = None  # stopping local:N's processes

    # -- connecting -------------------------------------------------------------------------------

    def begin(self) -> None:
        """Start connecting (local:N: start the processes first), in the background."""
        require_dask()
        logging.getLogger("distributed").setLevel(logging.CRITICAL)  # our own one-line errors
        if self.spec.local:
            self.local = LocalProcesses(self.spec.local_workers)
            try:
                self.local.launch()
            except OSError as e:
                self.local.stop()
                raise ClusterError(f"cannot start on the Dask cluster {self.address}: "
                                   f"{why(e)}") from None
        self._thread = threading.Thread(target=self._connect, name="bastion-cluster-connect",
                                        daemon=True)
        self._thread.start()

    def ready(self) -> Any:
        """The connected client, once it is (ClusterError when it could not be)."""
        thread = self._thread
        if thread is not None:
            while thread.is_alive():
                thread.join(0.5)
            self._thread = None
        if self._error is not None:
            raise self._error
        return self.client

    def _connect(self) -> None:
        try:
            self._open()
        except ClusterError as e:
            self._error = e
        except (OSError, TimeoutError, asyncio.TimeoutError) as e:
            what = "no Dask worker joined" if self.client is not None else "cannot reach"
            self._error = ClusterError(f"{what} the Dask scheduler at {self.address}: {why(e)}")
        except Exception as e:  # noqa: BLE001 — Dask's own errors vary by version
            self._error = ClusterError(f"cannot start on the Dask cluster {self.address}: "
                                       f"{why(e)}")

    def _open(self) -> None:
        import distributed

        if self.local is not None:
            try:
                address = self.local.address(CONNECT_TIMEOUT_S)
            except LocalStartError as e:
                raise ClusterError(f"cannot start on the Dask cluster {self.address}: "
                                   f"{e}") from None
            self.address = f"{self.spec} ({address})"
            self.client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S,
                                             set_as_default=False, direct_to_workers=True)
        else:
            self.client = distributed.Client(self.spec.address, timeout=CONNECT_TIMEOUT_S,
                                             set_as_default=False)
        try:  # the scheduler unpickles the tasks: it must be able to import bastion
            self.client.run_on_scheduler(_on_scheduler)
        except Exception as e:  # noqa: BLE001 — whatever the scheduler's import said
            raise ClusterError(
                f"the Dask scheduler at {self.address} cannot load bastion ({why(e)}): "
                "install the same bastion there (pip install 'bastion[dask]')") from None
        self.client.wait_for_workers(self.spec.local_workers or 1, timeout=WORKERS_TIMEOUT_S)
        from .plugin import ToolsPlugin

        self.client.register_plugin(ToolsPlugin(self.limits, self.extra_readers),
                                    name=PLUGIN_NAME)
        self.refresh_workers(probe=True)

    # -- the workers ------------------------------------------------------------------------------

    def refresh_workers(self, probe: bool = False) -> None:
        workers = self._scheduler_info().get("workers", {})
        self.threads = sum(int(w.get("nthreads") or 1) for w in workers.values()) or 1
        for address, w in workers.items():
            seen = self.seen.setdefault(address, WorkerSeen(address))
            seen.name = str(w.get("name", ""))
            seen.nthreads = int(w.get("nthreads") or 0)
        if probe:
            for address, tools in self.client.run(_describe_tools).items():
                self.seen.setdefault(address, WorkerSeen(address)).tools = tools

    def resources(self, needed: Iterable[str]) -> set[str]:
        """Every resource some worker of the cluster advertises (asked again when one of
        ``needed`` is not among those known, at most every few seconds)."""
        now = time.monotonic()
        if (self._have is None or (not set(needed) <= self._have
                                   and now - self._have_at >= RESOURCES_REFRESH_S)):
            have: set[str] = set()
            for w in self._scheduler_info().get("workers", {}).values():
                have.update(w.get("resources") or {})
            self._have, self._have_at = have, now
        return self._have

    def _scheduler_info(self) -> dict[str, Any]:
        if _takes_n_workers():
            return self.client.scheduler_info(n_workers=-1)
        return self.client.scheduler_info()

    # -- losing it, leaving -----------------------------------------------------------------------

    def alive(self) -> bool:
        return self.client is not None and self.client.status in ("running", "connecting")

    def lose(self, error: BaseException | None) -> None:
        """The scheduler is gone: a ClusterError saying so (kept for the next calls)."""
        self.lost = LOST.format(where=self.address,
                                why=why(error) if error is not None else "the connection closed")
        raise ClusterError(self.lost)

    def close(self, inflight: list[Any]) -> None:
        """Cancel ``inflight``, disconnect, stop local:N's processes.  Idempotent.  local:N's
        processes are stopped from a thread of their own (≈ 0.2 s: the helper closes its
        cluster and reaps it), while the run writes its records and summary; the thread is
        not a daemon, so the interpreter waits for it at exit."""
        if self._thread is not None:  # closed while connecting: local:N's processes go first
            if self.local is not None:
                self.local.stop()
            try:
                self.ready()
            except ClusterError:
                pass
        client, self.client = self.client, None
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
        if self.local is not None and self._stopper is None:
            self._stopper = threading.Thread(target=self.local.stop, name="bastion-cluster-stop")
            self._stopper.start()


@functools.cache
def _takes_n_workers() -> bool:
    import inspect

    from distributed import Client

    return "n_workers" in inspect.signature(Client.scheduler_info).parameters
