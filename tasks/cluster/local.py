"""``--cluster local:N``: a Dask scheduler and N worker processes of this machine, for one run.

One helper process (``python -m bastion.tasks.cluster.local N DIR``) holds them, so that the
scheduler does not share the client's GIL with the single writer.  It imports Dask and
bastion's worker side and probes the tools (:func:`bastion.tasks.cluster.preload.prepare`),
then — still a single thread — forks the N worker processes, which therefore start without
importing anything (a ``LocalCluster``'s nannies spawn interpreters that import Dask again,
≈ 0.5 s of CPU each, on the run's critical path); then it starts the scheduler
(:class:`distributed.Scheduler`) and sends each worker its address; each runs a
:class:`distributed.Worker` of one thread.  There is no nanny: a worker that dies is not
restarted (Dask re-runs its batch on the others, the run goes on with N - 1).  A one-run
cluster runs without Dask's profiler and HTTP routes, with slower health polls
(:data:`LOCAL_CONFIG`).

:meth:`LocalProcesses.launch` returns at once: the helper and its workers start while the run
walks and plans; the helper writes the scheduler's address in ``DIR/scheduler.json`` once its
workers have joined.  :meth:`LocalProcesses.stop` sends the helper SIGTERM (it closes the
scheduler, SIGTERMs its workers — each closes, stopping its sandboxed workers — and reaps them,
so all their CPU counts in the run's process tree) and SIGKILLs its process group after a
short grace.  Everything it writes (the address, the workers' scratch, its log) is in
``DIR``, a private temporary directory removed at the end.  The helper stops by itself when
the client dies (its parent changes), and the workers when the helper does (their pipe from
it closes).
"""

from __future__ import annotations

import asyncio
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


# Dask settings of a local:N cluster (as DASK_* variables of the helper, which its forked
# workers inherit; a variable the user set wins): a one-run cluster nobody watches does without
# the statistical profiler (a thread sampling the running batch every 10 ms), polls its health
# less often and serves no HTTP routes (on the bench's 80 PDFs, the profiler and the polls cost
# the Dask processes ≈ 0.6 s of CPU per run: docs/performance.md).
LOCAL_CONFIG = {
    "DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED": "False",
    "DASK_DISTRIBUTED__ADMIN__TICK__INTERVAL": "1s",
    "DASK_DISTRIBUTED__ADMIN__SYSTEM_MONITOR__INTERVAL": "5s",
    "DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES": "[]",  # no HTTP endpoints to serve
    "DASK_DISTRIBUTED__WORKER__HTTP__ROUTES": "[]",
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
        self._stopping = threading.Lock()

    def launch(self) -> None:
        """Start the helper (not waiting for it)."""
        self.dir = Path(tempfile.mkdtemp(prefix="bastion-dask-"))
        with open(self.dir / "cluster.log", "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "bastion.tasks.cluster.local", str(self.workers),
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
        """Stop the helper and its workers, remove their directory.  Idempotent; from any
        thread (one stops, the others wait for it)."""
        with self._stopping:
            self._stop()

    def _stop(self) -> None:
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


WORKERS_UP_S = 60.0  # how long the helper waits for its workers to join the scheduler


def serve(workers: int, where: Path, parent: int) -> int:
    """The helper: a Dask scheduler and ``workers`` worker processes until SIGTERM, or until
    the client (``parent``) is gone.

    It imports Dask and bastion's worker side, probes the tools (:mod:`.cluster_preload`),
    and then, while it is still a single thread, forks the worker processes: each starts with
    all of it, none imports Dask again.  Only then does it start the scheduler (whose event
    loop and threads a forked child must not inherit) and send each worker its address."""
    from .preload import prepare

    prepare()  # before the fork, so that the workers inherit it
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if threading.active_count() != 1:  # a thread would be lost in the children: no fork
        raise SystemExit("cannot fork the Dask workers: the helper is not single-threaded")
    children: list[tuple[int, int]] = []  # (pid, the pipe that sends it the address)
    for i in range(workers):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker process
            os.close(w)
            for _, other in children:
                os.close(other)
            code = 1
            try:
                code = _worker(r, i, where)
            finally:
                os._exit(code)
        os.close(r)
        children.append((pid, w))
    try:
        return asyncio.run(_scheduler(children, where, parent))
    finally:
        _stop_children(children)


def _stop_children(children: list[tuple[int, int]]) -> None:
    """SIGTERM the workers (each closes, its sandboxed workers with it), reap them (their CPU
    counts in the run's process tree); SIGKILL any still there after the grace."""
    for pid, w in children:
        _kill(pid, signal.SIGTERM)
        os.close(w)
    deadline = time.monotonic() + STOP_GRACE_S
    left = {pid for pid, _ in children}
    while left:
        for pid in list(left):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                left.discard(pid)
        if left and time.monotonic() >= deadline:
            for pid in left:
                _kill(pid, signal.SIGKILL)
            deadline = float("inf")
        time.sleep(POLL_S / 5)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


async def _scheduler(children: list[tuple[int, int]], where: Path, parent: int) -> int:
    import distributed

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with distributed.Scheduler(host="127.0.0.1", port=0, dashboard=False) as scheduler:
        for _, w in children:  # kept open: its end tells the worker the helper is gone
            os.write(w, scheduler.address.encode() + b"\n")
        deadline = time.monotonic() + WORKERS_UP_S
        while len(scheduler.workers) < len(children):
            if stop.is_set() or time.monotonic() >= deadline or _any_exited(children):
                print(f"the Dask workers did not start ({len(scheduler.workers)} of "
                      f"{len(children)} joined)", file=sys.stderr)
                return 1
            await asyncio.sleep(POLL_S)
        tmp = where / "scheduler.json.tmp"
        tmp.write_text(json.dumps({"address": scheduler.address}))
        os.replace(tmp, where / "scheduler.json")
        while os.getppid() == parent:
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
                break
            except asyncio.TimeoutError:
                pass
        for pid, _ in children:  # the workers close while the scheduler does
            _kill(pid, signal.SIGTERM)
    return 0


def _any_exited(children: list[tuple[int, int]]) -> bool:
    for pid, _ in children:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                return True
        except ChildProcessError:
            return True
    return False


def _worker(r: int, index: int, where: Path) -> int:
    """A forked worker process: a Dask worker of one thread on the scheduler whose address
    comes down ``r``, until SIGTERM or the helper's end of ``r`` closes."""
    with os.fdopen(r, "rb", buffering=0) as pipe:
        line = b""
        while not line.endswith(b"\n"):
            chunk = pipe.read(256)
            if not chunk:
                return 1  # the helper is gone before the scheduler started
            line += chunk
        return asyncio.run(_run_worker(line.decode().strip(), index, where, pipe.fileno()))


async def _run_worker(address: str, index: int, where: Path, pipe: int) -> int:
    import distributed

    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    loop.add_reader(pipe, done.set)  # readable only at EOF: the helper is gone
    # memory_limit=0: no Dask memory manager (no nanny to restart a worker anyway); the
    # sandboxed workers' own memory caps are what bounds a document
    async with distributed.Worker(address, nthreads=1, name=str(index), host="127.0.0.1",
                                  local_directory=str(where / "w"), dashboard=False,
                                  memory_limit=0) as worker:
        finished = asyncio.ensure_future(worker.finished())
        stopping = asyncio.ensure_future(done.wait())
        await asyncio.wait({finished, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not finished.done():
            await worker.close(reason="bastion: the run is over")
        finished.cancel()
    return 0


if __name__ == "__main__":
    _code = serve(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
    sys.stderr.flush()
    # its workers are reaped, its output flushed: skip the interpreter's teardown of Dask's
    # modules (≈ 0.1 s the client would wait for)
    os._exit(_code)
