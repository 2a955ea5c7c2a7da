"""The reader runtime: the only module that starts child processes.

Two kinds of child:

* **Workers** (:class:`WorkerPool`): long-lived Python processes (``python -I -m
  readers.worker``) that each read many documents, so no interpreter starts per file.  The
  parent gives each document a deadline, a cap on the bytes of text handed back and a memory
  cap (``RLIMIT_AS``, set by the worker as its first act); a worker past a limit is killed with
  its whole process group and replaced.  See ``docs/architecture.md``.
* **Tools** (:func:`run_tool`): ``pdftotext``, ``pdftoppm``, ``tesseract`` started by a reader
  inside a worker, in a process group of their own (inside the worker's session, so that the
  kill of a worker reaches them and whatever they started), with a deadline and an output cap,
  killed with their process group and always reaped.
"""

from __future__ import annotations

import json
import os
import re
import select
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from .base import Limits, TextSink, ToolResult
from .errors import ToolFailed

# The whole environment a child gets: nothing from the parent's leaks in.
CHILD_ENV: dict[str, str] = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_THREAD_LIMIT": "1",  # tesseract: one thread per document, the pool gives parallelism
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
}


IN_WORKER = False  # set by enter_sandbox: tools then die with their worker
SETPRIV = shutil.which("setpriv", path="/usr/bin:/bin")


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
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    data = f.read()
                fields = data[data.rindex(b")") + 2 :].split()
                if int(fields[3]) != sid or fields[0] in (b"Z", b"X"):
                    continue
                os.kill(int(name), signal.SIGKILL)
                found = True
            except (OSError, ValueError, IndexError):
                continue
        if not found:
            return


def _drain(
    proc: subprocess.Popen, deadline: float, max_output: int, max_stderr: int
) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout/stderr until EOF, the deadline or the output cap.

    Returns (stdout, stderr, truncated, timed_out).  Never blocks past ``deadline``.
    """
    out = bytearray()
    err = bytearray()
    truncated = False
    timed_out = False
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.data == "out":
                    room = max_output - len(out)
                    if len(chunk) > room:
                        out += chunk[: max(room, 0)]
                        truncated = True
                    else:
                        out += chunk
                elif len(err) < max_stderr:
                    err += chunk[: max_stderr - len(err)]
            if truncated:
                break
    finally:
        sel.close()
    return bytes(out), bytes(err), truncated, timed_out


def run_tool(
    argv: list[str],
    *,
    input: bytes | None = None,
    timeout: float = 300.0,
    max_output: int = 64 * 1024 * 1024,
    max_stderr: int = 4096,
    cwd: Path | None = None,
    input_dir: Path | None = None,
    while_running: Callable[[], None] | None = None,
) -> ToolResult:
    """Run an external tool in its own process group with a deadline and an output cap.

    Outside a worker the tool gets a session of its own; inside one it stays in the worker's
    session (in its own group), so the pool's kill of the worker takes it and its children.

    ``input`` is given through a file in ``input_dir`` (or, without one, an anonymous memory
    file), so a large input never dead-locks against the output pipe.  ``while_running`` is
    called once the tool has started, before its output is read: work to overlap with the
    tool's (its time counts against the deadline; the tool blocks once a pipe is full).  On
    the deadline the tool and anything it started is killed and :class:`ToolFailed` (kind
    ``timeout``) raised; output beyond ``max_output`` kills it too and comes back
    ``truncated``.  The child is always reaped.
    """
    tool = RunningTool(argv, input=input, timeout=timeout, max_output=max_output,
                       max_stderr=max_stderr, cwd=cwd, input_dir=input_dir)
    try:
        if while_running is not None:
            while_running()
    except BaseException:
        tool.kill()
        raise
    return tool.finish()


class RunningTool:
    """A tool started as :func:`run_tool` starts one, returned to at once: :meth:`finish`
    reads its output to the end (or the deadline or the cap), reaps it and kills whatever it
    left in its group; :meth:`kill` abandons it.  For tools whose output is small (a version
    line): a large output blocks the tool on its full pipe until ``finish()`` reads it, and
    the deadline still runs."""

    def __init__(
        self,
        argv: list[str],
        *,
        input: bytes | None = None,
        timeout: float = 300.0,
        max_output: int = 64 * 1024 * 1024,
        max_stderr: int = 4096,
        cwd: Path | None = None,
        input_dir: Path | None = None,
    ) -> None:
        self.name = os.path.basename(argv[0])
        self.timeout = timeout
        self.max_output = max_output
        self.max_stderr = max_stderr
        stdin: IO[bytes] | int = subprocess.DEVNULL
        self._input = None
        if input is not None:
            if input_dir is None and hasattr(os, "memfd_create"):
                self._input = open(os.memfd_create("bastion-input", os.MFD_CLOEXEC), "w+b")
            else:
                self._input = tempfile.TemporaryFile(dir=input_dir)
            self._input.write(input)
            self._input.seek(0)
            stdin = self._input
        preexec = None
        if IN_WORKER:
            # Inside a worker the tool must die with it.  setpriv (util-linux) sets the
            # parent-death signal and execs the tool, so Python can start it with vfork; a
            # preexec_fn would force a fork() of the whole worker for every tool run.
            if SETPRIV:
                argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
            else:
                preexec = set_parent_death_signal
        try:
            self.proc = subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=CHILD_ENV,
                cwd=str(cwd) if cwd else None,
                close_fds=True,
                start_new_session=not IN_WORKER,
                process_group=0 if IN_WORKER else None,
                preexec_fn=preexec,
            )
        except OSError as e:
            self._close_input()
            raise ToolFailed(f"{self.name} could not start: {e.strerror or e}") from None
        self.deadline = time.monotonic() + timeout

    def finish(self) -> ToolResult:
        proc = self.proc
        try:
            try:
                out, err, truncated, timed_out = _drain(proc, self.deadline, self.max_output,
                                                        self.max_stderr)
            except BaseException:
                kill_group(proc)
                raise
            if timed_out or truncated:
                kill_group(proc)
            elif not _wait_exit(proc, max(0.1, self.deadline - time.monotonic())):
                kill_group(proc)  # closed its output but kept running past the deadline
                timed_out = True
            # Anything the tool started and left behind goes with its group.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        finally:
            self._close_input()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        if timed_out:
            raise ToolFailed(f"{self.name} timed out after {self.timeout:g} s", kind="timeout")
        return ToolResult(proc.returncode, out, err, truncated)

    def kill(self) -> None:
        try:
            kill_group(self.proc)
        finally:
            self._close_input()
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()

    def _close_input(self) -> None:
        if self._input is not None:
            self._input.close()
            self._input = None


def _wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
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


class LocalContext:
    """A reader context for one document: limits, allowed tools, a private scratch dir.

    The worker builds one per document; tests build one to call a reader directly.
    """

    def __init__(
        self, limits: Limits | None = None, tools: dict[str, str] | None = None,
        tmpdir: Path | None = None, deadline: float | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.tools = dict(tools or {})
        # The scratch directory is made on first use: most readers never need one, and a
        # mkdir + rmtree per document is most of the isolation overhead on a slow disk.
        self._tmpdir = Path(tmpdir) if tmpdir else None
        # monotonic time by which the whole document must be done; tools get what is left
        self.deadline = deadline if deadline is not None else (
            time.monotonic() + self.limits.tool_deadline_s
        )
        self.depth = 0
        self.tools_used: set[str] = set()  # the tools that ran for this document

    @property
    def tmpdir(self) -> Path:
        if self._tmpdir is None:
            self._tmpdir = Path(tempfile.mkdtemp(prefix="bastion-"))
        else:
            self._tmpdir.mkdir(parents=True, exist_ok=True)
        return self._tmpdir

    def time_left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def run_tool(
        self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None,
        max_output: int | None = None, scratch: bool = True,
        while_running: Callable[[], None] | None = None,
    ) -> ToolResult:
        limit = self.time_left() if timeout is None else min(timeout, self.time_left())
        # ``scratch``: the tool runs in the document's scratch directory (made for it); a tool
        # that only reads stdin and writes stdout runs where the worker is, and its input is
        # a memory file
        where = self.tmpdir if scratch else None
        name = os.path.basename(argv[0])
        self.tools_used.add(next((t for t, p in self.tools.items() if p == argv[0]), name))
        return run_tool(
            argv, input=input, timeout=limit,
            max_output=max_output if max_output is not None else self.limits.max_output_bytes,
            max_stderr=self.limits.stderr_bytes, cwd=where, input_dir=where,
            while_running=while_running,
        )

    def read_nested(self, data: bytes, name: str, sink: TextSink) -> str:
        from .dispatch import read_nested

        return read_nested(self, data, name, sink)


# ---------------------------------------------------------------------------------------------
# The sandbox a worker enters as its first act
# ---------------------------------------------------------------------------------------------

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38

# Landlock filesystem rights that change the filesystem (reading and executing stay allowed).
_LL_WRITE_FILE = 1 << 1
_LL_WRITE_RIGHTS_V1 = (
    (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)
    | (1 << 11) | (1 << 12)
)
_LL_REFER = 1 << 13  # ABI 2
_LL_TRUNCATE = 1 << 14  # ABI 3
_LL_NET_ALL = (1 << 0) | (1 << 1)  # ABI 4: bind and connect TCP


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux only)."""
    try:
        _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def landlock_restrict(writable: list[Path]) -> int:
    """Forbid every filesystem change outside ``writable`` and all TCP, with Landlock.

    Returns the Landlock ABI used, or 0 where the kernel has none (then the worker relies on
    its private working directory and the file-size limit alone; docs/architecture.md says so).
    """
    import ctypes

    libc = _libc()
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs = _LL_WRITE_RIGHTS_V1
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
    net = _LL_NET_ALL if abi >= 4 else 0

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(fs, net)
    size = ctypes.sizeof(RulesetAttr) if net else 8
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        rules: list[tuple[str, int]] = [(str(p), fs) for p in writable]
        rules.append(("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0)))
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                if os.path.isdir(path):
                    allowed = rights
                else:  # a file takes only file rights
                    allowed = rights & (_LL_WRITE_FILE | _LL_TRUNCATE)
                rule = PathBeneath(allowed, fd)
                if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) < 0:
                    raise OSError(ctypes.get_errno(), "landlock_add_rule")
            finally:
                os.close(fd)
        libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return int(abi)


def enter_sandbox(tmpdir: Path, limits: Limits) -> tuple[IO[bytes], IO[bytes], int]:
    """Called by a worker before it reads anything: limits, private I/O, Landlock.

    * ``RLIMIT_AS`` = ``limits.memory_bytes``; ``RLIMIT_FSIZE`` = the output cap (a larger
      write fails with EFBIG: SIGXFSZ is ignored); no core dumps.
    * The protocol moves to private descriptors; fd 0 and 1 become ``/dev/null`` so a reader
      that prints or reads stdin cannot corrupt the protocol.
    * Dies with its parent (``PR_SET_PDEATHSIG``).
    * Landlock: no filesystem change outside ``tmpdir``, no TCP.

    Returns (jobs in, results out, landlock ABI or 0).
    """
    import resource

    global IN_WORKER
    IN_WORKER = True
    set_parent_death_signal()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    fsize = limits.max_output_bytes + (1 << 20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    jobs_fd = os.dup(0)
    results_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.set_inheritable(jobs_fd, False)
    os.set_inheritable(results_fd, False)
    os.chdir(tmpdir)
    abi = landlock_restrict([tmpdir])
    return os.fdopen(jobs_fd, "rb", buffering=0), os.fdopen(results_fd, "wb", buffering=0), abi


# ---------------------------------------------------------------------------------------------
# The pool of long-lived workers (parent side)
# ---------------------------------------------------------------------------------------------


_REPO = str(Path(__file__).resolve().parent.parent)
_BOOT = (
    "import sys; sys.path[:0] = {path!r}; "
    "from readers.worker import main; main()"
)
_TEXT_NAME = re.compile(r"t[0-9]{1,12}\.txt")
MAX_RESULT_LINE = 32 << 20  # bytes of one result line (the outline of a PDF can be long)
STARTUP_DEADLINE_S = 60.0


@dataclass(frozen=True)
class Job:
    """One document for a worker."""

    id: int
    path: str  # absolute; non-UTF-8 bytes as surrogate escapes
    name: str
    mime: str
    sha256: str
    size: int
    deadline_s: float
    tools: dict[str, str] = field(default_factory=dict)


@dataclass
class JobResult:
    """A worker's verdict on a job, or the parent's when the worker failed it."""

    job: Job
    status: str
    extractor: str | None = None
    chars: int = 0
    error: str | None = None
    error_kind: str | None = None
    limit: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    text_path: Path | None = None  # the text to move into the store (status ok only)


class _Worker:
    __slots__ = ("proc", "dir", "buf", "err", "job", "deadline", "done", "ready", "killed",
                 "started")

    def __init__(self, proc: subprocess.Popen, wdir: Path) -> None:
        self.proc = proc
        self.dir = wdir
        self.buf = bytearray()
        self.err = bytearray()
        self.job: Job | None = None
        self.deadline: float | None = None
        self.done = 0
        self.ready = False
        self.killed: str | None = None
        self.started = time.monotonic()


class PoolError(Exception):
    """The pool itself cannot go on (workers cannot be started)."""


class WorkerPool:
    """N long-lived workers; jobs go to an idle one; every limit is enforced from here.

    ``submit`` returns as soon as a worker has taken the job (waiting, and handling finished
    jobs, while all are busy); ``callback(result)`` runs in the caller's thread for every job,
    exactly once, whatever the worker did — for a finished document, after its worker has been
    given the next one, so the caller's work on a result overlaps the worker's on the next
    document.  ``drain`` waits for the jobs in flight and runs every callback still due.
    """

    def __init__(
        self,
        size: int,
        limits: Limits,
        tmp_root: Path,
        callback: Callable[[JobResult], None],
        *,
        recycle_after: int = 5000,
        rss_limit: int | None = None,
        extra_readers: tuple[str, ...] = (),
    ) -> None:
        self.size = max(1, size)
        self.limits = limits
        self.tmp_root = Path(tmp_root)
        self.callback = callback
        self.recycle_after = recycle_after
        self.rss_limit = rss_limit if rss_limit is not None else limits.memory_bytes // 2
        self.extra_readers = extra_readers
        self.workers: list[_Worker] = []
        self.sel = selectors.DefaultSelector()
        self._seq = 0
        self.spawned = 0
        self.killed = 0
        self.closed = False
        # results whose callback waits for the next dispatch (see submit): (result, text file)
        self._pending: list[tuple[JobResult, Path | None]] = []
        self.landlock_abi: int | None = None

    # -- public ---------------------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        while True:
            worker = self._idle_worker()
            if worker is not None:
                if self._dispatch(worker, job):
                    # the finished jobs' callbacks (the caller's store work) run now, while
                    # the worker already reads the next document, not before it gets one
                    self._flush()
                    return
                continue
            self._poll()

    def _flush(self) -> None:
        """Run the callbacks of the results held back by ``_on_result``, in order."""
        while self._pending:
            result, text_path = self._pending.pop(0)
            try:
                self.callback(result)
            finally:
                if text_path is not None and text_path.exists():
                    text_path.unlink()

    def warm(self) -> None:
        """Start every worker now (each boots while the caller goes on), not at first use."""
        while len(self.workers) < self.size:
            self._spawn()

    def drain(self) -> None:
        self._flush()
        while any(w.job is not None for w in self.workers):
            self._poll()
            self._flush()

    def close(self) -> None:
        try:
            self._flush()  # held-back texts live in the workers' directories
        finally:
            for w in list(self.workers):
                self._retire(w)
        if not self.closed:
            self.closed = True
            self.sel.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        return [w.proc.pid for w in self.workers]

    # -- workers --------------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        if not self.spawned:
            _precompile_readers()
        self._seq += 1
        wdir = self.tmp_root / f"w{os.getpid()}-{self._seq}"
        wdir.mkdir(parents=True, exist_ok=False)
        config = {"dir": str(wdir), "limits": self.limits.as_dict(),
                  "extra_readers": list(self.extra_readers)}
        argv = [sys.executable, "-I", "-S", "-c", _BOOT.format(path=_worker_path()),
                json.dumps(config)]
        env = dict(CHILD_ENV, TMPDIR=str(wdir))
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                env=env, cwd=str(wdir), close_fds=True, start_new_session=True,
            )
        except OSError as e:
            raise PoolError(f"cannot start a reader worker: {e}") from None
        worker = _Worker(proc, wdir)
        assert proc.stdout is not None and proc.stderr is not None
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stderr.fileno(), False)
        self.sel.register(proc.stdout, selectors.EVENT_READ, (worker, "out"))
        self.sel.register(proc.stderr, selectors.EVENT_READ, (worker, "err"))
        self.workers.append(worker)
        self.spawned += 1
        return worker

    def _idle_worker(self) -> _Worker | None:
        for w in self.workers:
            if w.job is None:
                return w
        if len(self.workers) < self.size:
            return self._spawn()
        return None

    def _dispatch(self, w: _Worker, job: Job) -> bool:
        line = json.dumps({
            "id": job.id, "path": job.path, "name": job.name, "mime": job.mime,
            "sha256": job.sha256, "size": job.size, "tools": job.tools,
            "deadline": job.deadline_s,
        }, ensure_ascii=True).encode() + b"\n"
        try:
            assert w.proc.stdin is not None
            w.proc.stdin.write(line)
            w.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._retire(w)  # died while idle: replace it and try again
            return False
        w.job = job
        w.err.clear()
        if w.ready:
            w.deadline = time.monotonic() + job.deadline_s
        return True

    def _retire(self, w: _Worker) -> None:
        """Stop a worker (idle, dead or to be killed) and forget it."""
        for stream in (w.proc.stdout, w.proc.stderr):
            try:
                self.sel.unregister(stream)
            except (KeyError, ValueError):
                pass
        try:
            if w.proc.stdin:
                w.proc.stdin.close()
        except OSError:
            pass
        if w.proc.returncode is None:  # not reaped yet: its pid (the session id) stays taken
            try:
                os.killpg(w.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        kill_session(w.proc.pid)  # tools it started, in groups of their own, and their children
        kill_group(w.proc)
        for stream in (w.proc.stdout, w.proc.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        if w in self.workers:
            self.workers.remove(w)
        shutil.rmtree(w.dir, ignore_errors=True)

    # -- the event loop -------------------------------------------------------------------------

    def _next_deadline(self) -> float | None:
        times = []
        for w in self.workers:
            if w.job is not None:
                times.append(w.deadline if w.deadline is not None
                             else w.started + STARTUP_DEADLINE_S)
        return min(times) if times else None

    def _poll(self) -> None:
        deadline = self._next_deadline()
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        for key, _ in self.sel.select(timeout):
            worker, which = key.data
            if worker not in self.workers:
                continue
            try:
                data = os.read(key.fd, 1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if which == "err":
                if data:
                    room = self.limits.stderr_bytes - len(worker.err)
                    if room > 0:
                        worker.err += data[:room]
                else:
                    self.sel.unregister(key.fileobj)
                continue
            if not data:
                self._on_death(worker)
                continue
            worker.buf += data
            self._on_output(worker)
        now = time.monotonic()
        for w in list(self.workers):
            if w.job is None:
                continue
            if w.deadline is not None and now >= w.deadline:
                self._fail(w, "timeout", f"extraction timed out after {w.job.deadline_s:g} s")
            elif w.deadline is None and now >= w.started + STARTUP_DEADLINE_S:
                self._fail(w, "crash", "reader worker did not start")

    def _on_output(self, w: _Worker) -> None:
        while w in self.workers:
            at = w.buf.find(b"\n")
            if at < 0:
                if len(w.buf) > MAX_RESULT_LINE:
                    self._fail(w, "output_limit", "reader output over the result size limit")
                return
            line = bytes(w.buf[:at])
            del w.buf[: at + 1]
            try:
                msg = json.loads(line)
            except ValueError:
                self._fail(w, "crash", "reader worker broke the protocol")
                return
            if msg.get("ready"):
                w.ready = True
                if w.job is not None:
                    w.deadline = time.monotonic() + w.job.deadline_s
                continue
            self._on_result(w, msg)

    def _on_result(self, w: _Worker, msg: dict[str, Any]) -> None:
        job = w.job
        if job is None or msg.get("id") != job.id:
            self._fail(w, "crash", "reader worker answered a job it was not given")
            return
        text_path = None
        status = msg.get("status")
        if status not in ("ok", "empty", "unsupported", "error"):
            self._fail(w, "crash", "reader worker sent an invalid status")
            return
        if status == "ok":
            text_path = self._checked_text(w, msg.get("text"))
            if text_path is None:
                self._fail(w, "crash", "reader worker's text file is missing or not a file")
                return
        result = JobResult(
            job=job, status=status, extractor=msg.get("extractor"),
            chars=int(msg.get("chars") or 0), error=msg.get("error"),
            error_kind=msg.get("error_kind"), limit=msg.get("limit"),
            meta=msg.get("meta") or {}, warnings=list(msg.get("warnings") or []),
            text_path=text_path,
        )
        w.job = None
        w.deadline = None
        w.done += 1
        rss = int(msg.get("rss") or 0)
        if not (msg.get("fatal") or w.done >= self.recycle_after or rss > self.rss_limit):
            self._pending.append((result, text_path))  # called back after the next dispatch
            return
        try:  # the worker is replaced, and its directory (with the text) removed: call now
            self.callback(result)
        finally:
            if text_path is not None and text_path.exists():
                text_path.unlink()
            self._retire(w)

    def _checked_text(self, w: _Worker, name: Any) -> Path | None:
        """The worker's text file, only if it is a plain regular file in its own directory."""
        if not isinstance(name, str) or not _TEXT_NAME.fullmatch(name):
            return None
        path = w.dir / name
        try:
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            return None
        if st.st_size > self.limits.max_output_bytes:
            return None
        return path

    def _on_death(self, w: _Worker) -> None:
        job = w.job
        if w.killed is None:
            rc = w.proc.poll()
            if rc is None:
                try:
                    rc = w.proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    rc = None
            kind, message = _classify_death(rc, bytes(w.err))
        else:
            kind, message = "crash", w.killed
        self._retire(w)
        if job is not None:
            self.killed += 1
            self.callback(JobResult(job=job, status="error", error=message, error_kind=kind))

    def _fail(self, w: _Worker, kind: str, message: str) -> None:
        """Kill a worker (with its process group) and fail its job."""
        job = w.job
        w.killed = message
        self._retire(w)
        if job is not None:
            self.killed += 1
            stderr = _first_line(bytes(w.err))
            if kind == "crash" and stderr:
                message = f"{message}: {stderr}"
            self.callback(JobResult(job=job, status="error", error=message, error_kind=kind))


def _worker_path() -> list[str]:
    """The worker's module path: bastion's tree, then this interpreter's own path as ``site``
    and the ``.pth`` files made it.  The worker starts with ``-S`` (no ``site``): processing
    the environment's ``.pth`` files cost ~25 ms of every worker start."""
    path = [_REPO]
    for entry in sys.path:
        if entry and entry not in path and os.path.isabs(entry) and os.path.isdir(entry):
            path.append(entry)
    return path


def _precompile_readers() -> None:
    """Byte-compile the readers once, in the parent: a worker cannot write ``__pycache__``
    (Landlock, and ``PYTHONDONTWRITEBYTECODE`` in its environment), so without this every
    worker compiled the modules only it imports, at every start."""
    import compileall

    try:
        compileall.compile_dir(str(Path(__file__).parent), quiet=2, maxlevels=0)
    except OSError:
        pass  # a read-only installation: workers compile in memory, as before


def _first_line(err: bytes) -> str:
    for line in err.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return ""


def _last_line(err: bytes) -> str:
    lines = [ln.strip() for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _classify_death(rc: int | None, err: bytes) -> tuple[str, str]:
    """error_kind and message for a worker that died while reading a document."""
    text = err.decode("utf-8", "replace")
    memoryish = any(s in text for s in ("MemoryError", "bad_alloc", "Cannot allocate memory",
                                        "out of memory"))
    tail = _last_line(err)
    suffix = f": {tail}" if tail else ""
    if rc is None:
        return "crash", "reader worker stopped answering"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        if memoryish or -rc == signal.SIGKILL:
            return "memory", f"reader killed ({name}; out of memory?){suffix}"
        return "crash", f"reader crashed ({name}){suffix}"
    if memoryish:
        return "memory", f"reader ran out of memory{suffix}"
    return "crash", f"reader worker exited with status {rc}{suffix}"
