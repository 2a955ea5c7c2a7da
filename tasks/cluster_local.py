"""``--cluster local:N``: a Dask scheduler and N worker processes of this machine, for one run.

One helper process (``python -m bastion.tasks.cluster_local N DIR``) holds a ``LocalCluster``
— the scheduler and the N nannies in its event loop — so that the scheduler and the nannies do
not share the client's GIL with the single writer.  Its first act is to start a forkserver
preloaded with Dask and bastion's worker side (:func:`_start_forkserver`); the N worker
processes fork from it (Dask's ``forkserver`` method), so they start without importing Dask
each, while the helper imports it for the scheduler.  A one-run cluster runs without Dask's
profiler and with slower health polls (:data:`LOCAL_CONFIG`).
:meth:`LocalProcesses.launch` returns at once: the helper and its workers start while the run
walks and plans; the helper writes the scheduler's address in ``DIR/scheduler.json`` once its
workers are up.  :meth:`LocalProcesses.stop` sends the helper SIGTERM (it closes the cluster:
the workers' teardown stops their sandboxed workers; it stops the forkserver, which reaps the
workers, and reaps it, so all their CPU counts in the run's process tree) and SIGKILLs its
process group after a short grace.  Everything it writes (the address, the workers' scratch, its log) is in ``DIR``, a
private temporary directory removed at the end.  The helper stops by itself when the client
dies (its parent changes).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

POLL_S = 0.05
STOP_GRACE_S = 5.0  # how long the helper gets to close its cluster on SIGTERM


class LocalStartError(Exception):
    """The local cluster could not start (the reason in one line)."""


# Dask settings of a local:N cluster (as DASK_* variables of the helper, so that the
# forkserver and the workers have them too; a variable the user set wins): the workers fork
# from a preloaded server, and a one-run cluster nobody watches does without the statistical
# profiler (a thread sampling the running batch every 10 ms) and polls its health and memory
# less often.  Together ≈ 0.6 s of CPU less per 80-PDF run (bench/cluster.py).
LOCAL_CONFIG = {
    "DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD": "forkserver",
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__WORKER__MEMORY__MONITOR_INTERVAL": "1s",
}


def _env() -> dict[str, str]:
    """The helper's environment: this interpreter's import path first (what multiprocessing's
    spawn hands its children), so the workers import the same bastion, the same readers; and
    :data:`LOCAL_CONFIG`."""
    path = [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH")
    return {**LOCAL_CONFIG, **os.environ,
            "PYTHONPATH": os.pathsep.join(path + ([old] if old else []))}


class LocalProcesses:
    """The helper process of one ``local:N`` run (started by :meth:`launch`)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None

    def launch(self) -> None:
        """Start the helper (not waiting for it)."""
        self.dir = Path(tempfile.mkdtemp(prefix="bastion-dask-"))
        with open(self.dir / "cluster.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bastion.tasks.cluster_local", str(self.workers),
                 str(self.dir), str(os.getpid())],
                env=_env(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, cwd=str(self.dir))

    def address(self, timeout: float) -> str:
        """The scheduler's address, once the helper has written it (LocalStartError if it
        exits or the timeout passes first)."""
        assert self.dir is not None and self.proc is not None
        deadline = time.monotonic() + timeout
        path = self.dir / "scheduler.json"
        while True:
            try:
                return str(json.loads(path.read_text())["address"])
            except (OSError, ValueError, KeyError):
                pass
            if self.proc.poll() is not None:
                raise LocalStartError(f"the local Dask cluster exited ({self.proc.returncode}): "
                                      f"{self._last_line()}")
            if time.monotonic() >= deadline:
                raise LocalStartError(f"the local Dask cluster did not start in {timeout:.0f} s")
            time.sleep(POLL_S)

    def _last_line(self) -> str:
        assert self.dir is not None
        try:
            lines = (self.dir / "cluster.log").read_text(errors="replace").split("\n")
        except OSError:
            return "no output"
        lines = [line.strip() for line in lines if line.strip()]
        return lines[-1] if lines else "no output"

    def stop(self) -> None:
        """Stop the helper and its workers, remove their directory.  Idempotent."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.send_signal(signal.SIGTERM)  # the helper closes its cluster, reaps it all
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc.pid, signal.SIGKILL)  # whatever of the group is left
            proc.wait()
            # the group's other processes: once they are gone, their sandboxed workers have
            # had their PDEATHSIG, and nothing writes in the directory any more
            deadline = time.monotonic() + STOP_GRACE_S
            while _alive_in_group(proc.pid) and time.monotonic() < deadline:
                time.sleep(POLL_S)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _alive_in_group(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (zombies do not count)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


# -- the helper process ---------------------------------------------------------------------------


FORKSERVER_PRELOAD = ["distributed", "bastion.tasks.cluster_plugin"]


def _start_forkserver() -> None:
    """Start the server the worker processes fork from, first thing: it imports Dask and
    bastion's worker side (:data:`FORKSERVER_PRELOAD`) while this process imports Dask for the
    scheduler, so the N workers start without N more imports (≈ 0.5 s of CPU each)."""
    import multiprocessing
    import multiprocessing.forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(FORKSERVER_PRELOAD)
    multiprocessing.forkserver.ensure_running()


def _stop_forkserver() -> None:
    """Stop the forkserver and reap it (its workers have exited): nothing outlives the helper,
    and the CPU of the workers and their sandboxed workers counts in the run's process tree."""
    import multiprocessing.forkserver

    try:
        multiprocessing.forkserver._forkserver._stop()  # the stdlib's own, for its tests
    except (AttributeError, OSError):
        pass


def serve(workers: int, where: Path, parent: int) -> int:
    """The helper: a LocalCluster until SIGTERM, or until the client (``parent``) is gone."""
    _start_forkserver()
    import distributed
    import distributed.utils

    # the server started above is the one Dask's forkserver method uses; left to itself, Dask
    # would set its preload and import numpy and pandas here to pass it on
    distributed.utils._forkserver_preload_set = True

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
        scheduler_port=0, dashboard_address=None, local_directory=str(where / "w"),
        silence_logs=logging.ERROR)
    tmp = where / "scheduler.json.tmp"
    tmp.write_text(json.dumps({"address": cluster.scheduler_address}))
    os.replace(tmp, where / "scheduler.json")
    while not stop.wait(1.0) and os.getppid() == parent:
        pass
    cluster.close(timeout=STOP_GRACE_S)
    _stop_forkserver()
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
