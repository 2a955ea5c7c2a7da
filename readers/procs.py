"""Starting and killing processes: the only module that starts child processes.

Every child bastion makes is started here: reader workers (:func:`start_worker`, and the fork
that puts a worker in a PID namespace of its own, :func:`contain_descendants`), the external
tools readers run (:func:`start_tool`), the walk's forked helpers (:func:`fork_helper`).
Every child gets :data:`CHILD_ENV` (nothing of the parent's environment) and dies with its
parent (``PR_SET_PDEATHSIG``); :func:`stop_worker` takes a worker with every process it
started, including one that left its session, and always reaps.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
from typing import IO, Callable, NoReturn

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
_PR_SET_CHILD_SUBREAPER = 36
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000

# How a worker holds every process it starts (:func:`contain_descendants`)
PID_NAMESPACE = "pid-namespace"  # PID 1 of a namespace of its own (root)
USER_PID_NAMESPACE = "user-pid-namespace"  # the same, inside a user namespace (not root)
SUBREAPER = "subreaper"  # the fallback: a child subreaper, its tree killed from outside
NAMESPACES = (PID_NAMESPACE, USER_PID_NAMESPACE)

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


# -- containing what a worker starts ----------------------------------------------------------


def contain_descendants(namespace: bool = True) -> str:
    """Make every process this one will start die with it, wherever it moves; returns how.

    Called by a worker as its very first act.  With ``namespace`` (the default) the process
    enters a PID namespace of its own (``unshare(CLONE_NEWPID)``; inside a user namespace of
    its own when it is not root) and forks: the child, PID 1 of the new namespace, goes on as
    the worker; this process stays behind as its *keeper*, reaps it and exits as it did (same
    status, same signal).  When PID 1 of a namespace dies the kernel kills every process in
    it, so a reader's child that calls ``setsid`` or double-forks goes too.  Where no
    namespace can be made (not root and no user namespaces) the worker becomes a child
    subreaper (``PR_SET_CHILD_SUBREAPER``): orphans of its descendants are re-parented to it,
    so the pool finds them in its tree and kills them before the worker (:func:`stop_worker`).

    Returns :data:`PID_NAMESPACE`, :data:`USER_PID_NAMESPACE` or :data:`SUBREAPER`.
    """
    set_parent_death_signal()  # the keeper dies with the pool, and PID 1 with the keeper
    lib = libc()
    how = None
    if namespace:
        uid, gid = os.getuid(), os.getgid()
        if lib.unshare(_CLONE_NEWPID) == 0:
            how = PID_NAMESPACE
        elif uid != 0 and lib.unshare(_CLONE_NEWUSER | _CLONE_NEWPID) == 0:
            try:  # the same uid and gid inside: files are read as before
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/uid_map", f"{uid} {uid} 1")
                _write("/proc/self/gid_map", f"{gid} {gid} 1")
                how = USER_PID_NAMESPACE
            except OSError:
                os._exit(1)  # half made: this worker cannot go on (the pool reports it)
    if how is None:
        lib.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        return SUBREAPER
    keeper = os.getpid()
    pid = os.fork()
    if pid:
        _keep(pid)
    set_parent_death_signal()  # not inherited through fork
    if _host_ppid() != keeper:  # the keeper died before the line above
        os._exit(1)
    return how


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _host_ppid() -> int:
    """This process's parent as ``/proc`` (the host's) numbers it: ``os.getppid()`` is 0 in
    a PID namespace whose parent lives outside."""
    fields = _proc_stat("self")
    return int(fields[1]) if fields else -1


def host_pid() -> int:
    """This process's pid as ``/proc`` (the host's, as the pool sees it) numbers it."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


def _keep(child: int) -> NoReturn:
    """The keeper: hold no descriptor of the worker's, reap it, exit as it did."""
    import resource

    code = 1
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # it may re-raise SIGSEGV below
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # the pool sees EOF when the worker dies, not when this does
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)
        _, status = os.waitpid(child, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass  # SIGKILL: its disposition cannot be (and need not be) set
            os.kill(os.getpid(), sig)
            code = 128 + sig
        else:
            code = os.waitstatus_to_exitcode(status)
    finally:
        os._exit(code)


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


def stop_worker(proc: subprocess.Popen, contained: str | None) -> None:
    """Kill a worker and every process it started, even one that left its session; reap it.

    ``contained`` is what :func:`contain_descendants` returned in the worker (None when the
    worker never said).  In a PID namespace, killing its PID 1 kills the rest, and the
    keeper exits once it has reaped it; a subreaper is stopped first (it can start nothing
    more), its tree killed, then it.  Either way the worker's session goes too: the tools a
    worker starts run in groups of their own inside it.
    """
    if proc.returncode is None:
        if contained == SUBREAPER:
            try:
                os.kill(proc.pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        kill_descendants(proc.pid, tree=True)
        # the keeper reaps PID 1 and follows it; anything else is killed with its group
        if not (contained in NAMESPACES and wait_exit(proc, 2.0)):
            kill_group(proc)
    # After the reap the pid may be another process's: only its session is safe to sweep
    # (a session id is not reused while any process belongs to it).
    kill_descendants(proc.pid, tree=False)


def kill_descendants(pid: int, *, tree: bool) -> None:
    """SIGKILL every live process in session ``pid`` and, with ``tree``, every descendant of
    ``pid`` (not ``pid`` itself), until none is left (five sweeps of ``/proc`` at most)."""
    for _ in range(5):
        parents: dict[int, list[int]] = {}
        targets: set[int] = set()
        try:
            entries = os.listdir("/proc")
        except OSError:
            return
        for name in entries:
            if not name.isdigit():
                continue
            fields = _proc_stat(name)
            try:
                if fields is None or fields[0] in (b"Z", b"X"):
                    continue
                if int(fields[3]) == pid:
                    targets.add(int(name))
                if tree:
                    parents.setdefault(int(fields[1]), []).append(int(name))
            except (ValueError, IndexError):
                continue
        todo, seen = list(parents.get(pid, ())), set()
        while todo:
            child = todo.pop()
            if child not in seen:
                seen.add(child)
                todo.extend(parents.get(child, ()))
        targets |= seen
        targets.discard(pid)
        if not targets:
            return
        for target in targets:
            try:
                os.kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Reap ``proc`` within ``timeout`` seconds; whether it exited.  Sleeps on a pidfd, which
    wakes at the exit itself: ``Popen.wait(timeout)`` polls with growing sleeps, ~1 ms lost
    per tool run (a pdftotext per PDF)."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here (old kernel): Popen's polling
        try:
            proc.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        waiter = select.poll()  # poll, not select: no limit on the descriptor's number
        waiter.register(fd, select.POLLIN)
        ready = waiter.poll(timeout * 1000)
    finally:
        os.close(fd)
    if not ready:
        return proc.poll() is not None
    proc.wait()  # it has exited: reaped at once
    return True
