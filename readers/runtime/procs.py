"""Starting and killing processes: every program bastion starts, and every fork but the zygote's.

Every child bastion makes is started here: reader workers (:func:`start_worker`, each PID 1 of
a PID namespace of its own: :func:`containment`), the external tools readers run
(:func:`start_tool`), the walk's forked helpers (:func:`fork_helper`).  The one other place a
process begins is inside a worker: its zygote forks each document's process
(:mod:`bastion.readers.runtime.zygote`), a copy of itself that execs nothing.
Every tool started gets :data:`CHILD_ENV` (nothing of the parent's environment), a worker no
environment and no argument at all (its settings come on its stdin), and every child dies with
its parent (``PR_SET_PDEATHSIG``); :func:`stop_worker` takes a worker with every process it
started, including one that left its session, and always reaps.
"""

from __future__ import annotations

import functools
import os
import re
import select
import shutil
import signal
import subprocess
from typing import IO, Any, Callable

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
_PR_SET_MM, _PR_SET_MM_MAP = 35, 14

# How a worker holds every process it starts (:func:`containment`)
AUTO = "auto"  # the first of the three below that this machine allows
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


def libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# -- starting -------------------------------------------------------------------------------


def start_worker(argv: list[str], boot: bytes, cwd: str, control: int,
                 contain: str = AUTO, mount: bool = False) -> subprocess.Popen:
    """A reader worker: ``argv`` (the interpreter and its flags, nothing more) with an empty
    environment, its own session, ``boot`` (the program it runs, its settings within) on its
    stdin, read to the end before it runs, ``control`` (the worker's end of its control
    socket) kept at its number, ``/dev/null`` as its stdout, a pipe for its stderr, no other
    descriptor of the parent's, PID 1 of a PID namespace of its own where the machine allows
    it (``containment(contain)``, whose mode the worker is to be told; ``mount``: in a mount
    namespace too).  So neither its command line nor its keeper's says anything of the run
    (the paths, the limits) to who reads ``/proc``.  Raises OSError when it cannot start.
    (The worker, a zygote, forks each document's process itself:
    :mod:`bastion.readers.runtime.zygote`.)"""
    prefix, _ = containment(contain, mount)
    if len(boot) > 1 << 16:  # a pipe's buffer holds it: written whole before the start
        raise OSError(f"a worker's settings are too large ({len(boot)} bytes)")
    r, w = os.pipe()
    try:
        with open(w, "wb", closefd=True) as f:
            f.write(boot)
        return subprocess.Popen(
            [*prefix, *argv], stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env={}, cwd=cwd, close_fds=True, pass_fds=(control,), start_new_session=True,
        )
    finally:
        os.close(r)


def blank_cmdline() -> bool:
    """Make this process's ``/proc/<pid>/cmdline`` empty, and so every process it forks
    (the zygote's children inherit it): ``PR_SET_MM_MAP`` with argument and environment areas
    of no length (allowed to any process for its own memory; the seccomp filter then denies
    ``PR_SET_MM``, so nobody can point them at memory of their choosing again).  A process
    may still write its old argv's bytes: ``/proc`` no longer shows them.  Whether it could."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as f:
            data = f.read()
        fields = data[data.rindex(b")") + 2:].split()
    except (OSError, ValueError):
        return False

    def field(n: int) -> int:  # proc(5)'s numbering: fields[0] is field 3, the state
        return int(fields[n - 3])

    class MmMap(ctypes.Structure):  # struct prctl_mm_map (linux/prctl.h)
        _fields_ = [*((name, ctypes.c_uint64) for name in (
            "start_code", "end_code", "start_data", "end_data", "start_brk", "brk",
            "start_stack", "arg_start", "arg_end", "env_start", "env_end")),
            ("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32),
            ("exe_fd", ctypes.c_int32)]

    lib = libc()
    lib.sbrk.restype = ctypes.c_void_p
    lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                          ctypes.c_ulong]
    try:
        brk = lib.sbrk(ctypes.c_long(0)) or 0
        mm = MmMap(field(26), field(27), field(45), field(46), field(47), brk, field(28),
                   field(48), field(48), field(50), field(50), None, 0, -1)
    except (IndexError, ValueError):
        return False
    if lib.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0) != 0:
        return False
    with open("/proc/self/cmdline", "rb") as f:
        return f.read() == b""


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


_NAMESPACE_FLAGS = {  # util-linux unshare(1): the worker is PID 1 of a namespace of its own
    PID_NAMESPACE: ["--pid"],
    USER_PID_NAMESPACE: ["--map-current-user", "--pid"],  # same uid and gid inside
}


# and, with it, an empty network namespace (only a loopback, down), its own IPC and host name
_PRIVATE = ["--net", "--ipc", "--uts"]


@functools.cache
def containment(how: str = AUTO, mount: bool = False) -> tuple[tuple[str, ...], str]:
    """How workers started now hold their descendants: (argv prefix, mode).

    The prefix runs the worker as PID 1 of a PID namespace of its own, through util-linux:
    ``setpriv --pdeathsig KILL -- unshare --pid --fork --kill-child --`` (``--pid`` needs
    root; ``--map-current-user`` adds a user namespace that maps only the caller's own uid
    and gid, for a user who is not).  ``unshare`` stays as the worker's parent, its
    *keeper*: it reaps the worker and exits as it did (same status, same signal), dies with
    bastion (``--pdeathsig``) and takes the worker with it (``--kill-child``).  When PID 1 of
    a namespace dies the kernel kills every process in it, so a reader's child that calls
    ``setsid`` or double-forks goes too.

    Each mode is tried once per process (``unshare … true``, ~2 ms).  Where none works (no
    ``unshare``/``setpriv``, not root and user namespaces disabled) the mode is
    :data:`SUBREAPER` and the prefix empty: the worker makes itself a child subreaper
    (:func:`contain_descendants`).  ``how`` is :data:`AUTO` (the first mode this machine
    allows) or a mode to force (the tests' way to reach the fallbacks).  Each namespace
    mode comes with an empty network namespace (no interface but a loopback, down), and IPC
    and UTS namespaces of its own: a worker has no network at all.  ``mount`` adds a
    mount namespace (``--mount``, private propagation) to the PID namespace, for a worker that
    binds its directory in place before it gives up root (:mod:`bastion.readers.runtime.sandbox`).
    """
    unshare = shutil.which("unshare", path="/usr/bin:/bin")
    true = shutil.which("true", path=CHILD_ENV["PATH"])
    modes = (PID_NAMESPACE, USER_PID_NAMESPACE) if how == AUTO else (how,)
    for mode in modes:
        if mode not in _NAMESPACE_FLAGS or not (unshare and SETPRIV and true):
            continue
        flags = [*_NAMESPACE_FLAGS[mode], *_PRIVATE, *(["--mount"] if mount else [])]
        prefix = (SETPRIV, "--pdeathsig", "KILL", "--", unshare, *flags, "--fork",
                  "--kill-child", "--")
        try:
            probe = subprocess.run([*prefix[4:], true], env=CHILD_ENV, timeout=10,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return prefix, mode
    return (), SUBREAPER


# unshare(1) (util-linux 2.38) passes a worker's death by signal on by raising the signal in
# itself, but fails for SIGKILL (it cannot reset SIGKILL's disposition) and exits 1 with this
_KEEPER_SIGKILL = re.compile(rb"^unshare: sigprocmask unblock failed: .*$\n?", re.MULTILINE)


def worker_status(returncode: int | None, stderr: bytes) -> tuple[int | None, bytes]:
    """The worker's own exit status and stderr, from its keeper's: a worker killed by
    SIGKILL (the OOM killer, an operator) comes back as -SIGKILL, not as unshare's exit 1."""
    if returncode == 1 and _KEEPER_SIGKILL.search(stderr):
        return -signal.SIGKILL, _KEEPER_SIGKILL.sub(b"", stderr)
    return returncode, stderr


def contain_descendants(mode: str) -> str:
    """The worker's side of :func:`containment`, its very first act; returns the mode it got.

    In a namespace (``mode`` says so and this process is its PID 1) nothing more is needed.
    Otherwise the worker becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): the orphans
    of its descendants are re-parented to it rather than to init, so the pool finds them in
    its tree and kills them before it (:func:`stop_worker`).  What the fallback misses: a
    descendant that outlives a worker which died on its own (then nobody holds it).
    """
    if mode in NAMESPACES and os.getpid() == 1:
        return mode
    libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    return SUBREAPER


def host_pid() -> int:
    """This process's pid as ``/proc`` (the host's, as the pool sees it) numbers it: in a
    PID namespace ``os.getpid()`` counts from 1."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


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
