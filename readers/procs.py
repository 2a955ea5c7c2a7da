"""Starting and killing processes: the only module that starts child processes.

Every child bastion makes is started here: reader workers (:func:`start_worker`), the
external tools readers run (:func:`start_tool`), the walk's forked helpers
(:func:`fork_helper`).  Every child gets :data:`CHILD_ENV` (nothing of the parent's
environment) and dies with its parent (``PR_SET_PDEATHSIG``); the kills here take a child's
process group, session or whole tree, and always reap.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from typing import IO, Callable

# The whole environment a child gets: nothing from the parent's leaks in.
CHILD_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_THREAD_LIMIT": "1",  # tesseract: one thread per document, the pool gives parallelism
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}

SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin")
_PR_SET_PDEATHSIG = 1

_in_worker = False  # set by the sandbox: tools then stay in the worker's session, die with it


def mark_in_worker() -> None:
    """From now on this process is a reader worker: the tools it starts stay in its session
    (in groups of their own) and die with it."""
    global _in_worker
    _in_worker = True


def libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# -- starting -------------------------------------------------------------------------------


def start_worker(argv: list[str], env: dict[str, str], cwd: str) -> subprocess.Popen:
    """A reader worker: its own session, pipes for the protocol and stderr, no descriptor of
    the parent's.  Raises OSError when it cannot start."""
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=cwd, close_fds=True, start_new_session=True,
    )


def start_tool(argv: list[str], stdin: IO[bytes] | int, cwd: str | None) -> subprocess.Popen:
    """An external tool with stdout and stderr piped.  Outside a worker it gets a session of
    its own; inside one it stays in the worker's session, in a process group of its own, and
    dies with the worker.  Raises OSError when it cannot start."""
    preexec = None
    if _in_worker:
        # setpriv (util-linux) sets the parent-death signal and execs the tool, so Python
        # can start it with vfork; a preexec_fn would force a fork() of the whole worker
        # for every tool run.
        if SETPRIV:
            argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        else:
            preexec = set_parent_death_signal
    return subprocess.Popen(
        argv, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=CHILD_ENV,
        cwd=cwd, close_fds=True, start_new_session=not _in_worker,
        process_group=0 if _in_worker else None, preexec_fn=preexec,
    )


def fork_helper(work: Callable[[], bytes]) -> tuple[int, int]:
    """Fork a copy of this process that runs ``work()`` and sends back the bytes it returns.

    Returns (pid, descriptor to read the bytes from).  The helper dies with this process
    (``PR_SET_PDEATHSIG``), exits without cleanup (``os._exit``: status 0 once its bytes are
    written, 1 when ``work`` raised); the caller reads the descriptor to its end, closes it
    and reaps the pid.  Never fork a process that runs threads.
    """
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            set_parent_death_signal()  # a killed parent takes its helpers along
            if os.getppid() == parent:  # else the parent died before the line above
                os.close(r)
                data = work()
                with open(w, "wb") as f:
                    f.write(data)
                code = 0
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


# -- killing --------------------------------------------------------------------------------


def kill_group(proc: subprocess.Popen) -> None:
    """Kill a child started with ``start_new_session=True`` and everything it started; reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()


def _proc_stat(pid: str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()
    except (OSError, ValueError):
        return None


def kill_session(sid: int) -> None:
    """SIGKILL every process still in session ``sid``: what a killed worker left running.

    A worker is a session leader; the tools it starts run in process groups of their own
    inside its session, so ``killpg`` of the worker's group misses them (``PR_SET_PDEATHSIG``
    takes the tool itself, not the children it started).  A session id is not reused while
    any process still belongs to it.
    """
    for _ in range(5):
        found = False
        try:
            entries = os.listdir("/proc")
        except OSError:
            return
        for name in entries:
            if not name.isdigit():
                continue
            fields = _proc_stat(name)
            try:
                if fields is None or int(fields[3]) != sid or fields[0] in (b"Z", b"X"):
                    continue
                os.kill(int(name), signal.SIGKILL)
                found = True
            except (OSError, ValueError, IndexError):
                continue
        if not found:
            return
