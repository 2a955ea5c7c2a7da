"""``--cluster local:N``: a Dask scheduler and N worker processes of this machine, for one run.

Started as processes of their own (``dask scheduler`` and ``dask worker --nworkers N
--nthreads 1``, the configuration of a running cluster), not as a ``LocalCluster`` inside the
client: the scheduler's and the nannies' event loops then do not share the client's GIL with
the single writer, and :meth:`LocalProcesses.launch` returns at once, so the processes start
(interpreters, Dask's imports) while the run walks and plans.  Each process is a session of
its own; :meth:`LocalProcesses.stop` signals their groups (SIGTERM, SIGKILL after a short
grace) without Dask's graceful close timeouts: by then the client has every result it uses.  Everything they write (the scheduler file, the workers'
scratch, their logs) is in one private temporary directory, removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POLL_S = 0.05
STOP_GRACE_S = 5.0  # how long the processes get to stop on SIGTERM


class LocalStartError(Exception):
    """The local scheduler or its workers could not start (the reason in one line)."""


def _env() -> dict[str, str]:
    """The child's environment: this interpreter's import path first (what multiprocessing's
    spawn hands its children), so the workers import the same bastion, the same readers."""
    path = [p for p in sys.path if p and os.path.isdir(p)]
    old = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path + ([old] if old else []))}


class LocalProcesses:
    """The scheduler and the workers of one ``local:N`` run (started by :meth:`launch`)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.dir: Path | None = None
        self.procs: list[subprocess.Popen] = []

    def launch(self) -> None:
        """Start the scheduler and the workers (not waiting for them)."""
        self.dir = Path(tempfile.mkdtemp(prefix="bastion-dask-"))
        env = _env()
        dask = [sys.executable, "-m"]
        common = ["--scheduler-file", str(self.dir / "scheduler.json")]
        self._spawn("scheduler", [*dask, "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", *common], env)
        self._spawn("workers", [*dask, "distributed.cli.dask_worker", "--nworkers",
                                str(self.workers), "--nthreads", "1", "--host", "127.0.0.1",
                                "--no-dashboard", "--local-directory", str(self.dir / "w"),
                                "--death-timeout", "60", *common], env)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> None:
        assert self.dir is not None
        with open(self.dir / f"{name}.log", "wb") as log:
            self.procs.append(subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, cwd=str(self.dir)))

    def address(self, timeout: float) -> str:
        """The scheduler's address, once it has written it (LocalStartError if it exits or
        the timeout passes first)."""
        assert self.dir is not None
        deadline = time.monotonic() + timeout
        path = self.dir / "scheduler.json"
        while True:
            try:
                return str(json.loads(path.read_text())["address"])
            except (OSError, ValueError, KeyError):
                pass
            for proc in self.procs:
                if proc.poll() is not None:
                    raise LocalStartError(f"the local Dask {self._name(proc)} exited "
                                          f"({proc.returncode}): {self._last_line(proc)}")
            if time.monotonic() >= deadline:
                raise LocalStartError(f"the local Dask scheduler did not start in {timeout:.0f} s")
            time.sleep(POLL_S)

    def _name(self, proc: subprocess.Popen) -> str:
        return "scheduler" if proc is self.procs[0] else "workers"

    def _last_line(self, proc: subprocess.Popen) -> str:
        assert self.dir is not None
        try:
            lines = (self.dir / f"{self._name(proc)}.log").read_text(errors="replace").split("\n")
        except OSError:
            return "no output"
        lines = [line.strip() for line in lines if line.strip()]
        return lines[-1] if lines else "no output"

    def stop(self) -> None:
        """Stop the processes and remove their directory.  Idempotent.  SIGTERM first (the
        nanny stops its workers, their teardown stops the sandboxed workers: ≈ 0.3 s), SIGKILL
        for whatever is left after :data:`STOP_GRACE_S` (the groups: a Dask worker killed so
        takes its sandboxed workers along, ``PDEATHSIG``)."""
        procs, self.procs = self.procs, []
        for proc in procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait()
            # the group's other processes: once they are gone, their sandboxed workers have
            # had their PDEATHSIG, and nothing writes in the directory any more
            while _alive_in_group(proc.pid) and time.monotonic() < deadline + STOP_GRACE_S:
                _signal_group(proc.pid, signal.SIGKILL)
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
