"""One reader worker, parent side: its start, its job line, its deadline and caps, its death.

A :class:`Worker` is one long-lived process (:mod:`bastion.readers.runtime.workermain`, started through
:func:`bastion.readers.runtime.procs.start_worker`, the only module that starts processes) and what the
parent keeps of it: the job socket, its directory, what it wrote so far and the job it reads.
It knows how to start itself (:meth:`Worker.start`), hand itself a document
(:meth:`Worker.send`), read its ready line, tell when it is past its deadline
(:meth:`Worker.overdue`), say why it died (:meth:`Worker.death`) and stop with every process it
started (:meth:`Worker.stop`).  Which worker gets which job, and what becomes of its answer, is
the pool's (:class:`bastion.readers.runtime.pool.WorkerPool`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from array import array
from pathlib import Path
from typing import IO, Any

from bastion.errors import WorkerError

from ..base import Limits
from .identity import dropped, measure
from .job import Job
from .procs import CHILD_ENV, containment, start_worker, stop_worker, worker_status
from .sandbox import SCRATCH_DIR, WORKER_DIR, passable, reachable

# the directory holding the ``bastion`` package, which the worker imports
# ``bastion.readers.runtime.workermain`` from: readers/.. is a checkout's root, or in an installation the
# package itself (site-packages/bastion/readers/..), whose parent holds it
_UP = Path(__file__).resolve().parent.parent
_REPO = str(_UP if (_UP / "bastion" / "__init__.py").is_file() else _UP.parent)
_BOOT = (
    "import sys; sys.path[:0] = {path!r}; "
    "from bastion.readers.runtime.workermain import main; main()"
)
MAX_RESULT_LINE = 32 << 20  # bytes of one result line (the outline of a PDF can be long)
STARTUP_DEADLINE_S = 60.0


class StartError(Exception):
    """A worker's process could not be started (the pool says so as its ``WorkerError``)."""


class Misbehaved(Exception):
    """A worker broke its protocol or a cap: ``kind`` is the error kind of its job."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Worker:
    """One worker and what the parent keeps of it (``job``: the job it reads, if any)."""

    __slots__ = ("proc", "jobs", "dir", "buf", "err", "job", "deadline", "done", "ready",
                 "killed", "started", "contained", "pid", "pidfd", "user", "identity")

    def __init__(self, proc: subprocess.Popen, jobs: socket.socket, wdir: Path,
                 user: tuple[int, int] | None = None) -> None:
        self.proc = proc
        self.jobs = jobs  # the parent's end of the job socket
        self.dir = wdir
        self.buf = bytearray()
        self.err = bytearray()
        self.job: Job | None = None  # the job it reads
        self.deadline: float | None = None
        self.done = 0
        self.ready = False
        self.killed: str | None = None
        self.started = time.monotonic()
        self.contained: str | None = None  # how it holds its descendants (its ready line)
        self.pid = proc.pid  # the worker itself, once its ready line says (else its keeper)
        self.pidfd: int | None = None  # readable once the worker (not its keeper) has exited
        self.user = user  # the uid and gid it runs as (None: the pool's own)
        self.identity: dict[str, Any] | None = None  # as measured from /proc at its ready line

    @classmethod
    def start(cls, wdir: Path, limits: Limits, *, user: tuple[int, int] | None,
              extra_readers: tuple[str, ...], contain: str) -> "Worker":
        """Make its directory ``wdir`` and start a worker in it (:class:`StartError` when
        the process cannot be started); its stdout and stderr do not block."""
        wdir.mkdir(parents=True, exist_ok=False)
        mount = user is not None
        if user is not None:  # its own directory, seen as WORKER_DIR in its namespace
            os.chown(wdir, *user)
            os.chmod(wdir, 0o700)
        seen_as = str(WORKER_DIR) if mount else str(wdir)
        scratch = str(SCRATCH_DIR) if mount else str(wdir / "scratch")
        config = {"dir": seen_as, "bind": str(wdir) if mount else None, "user": user,
                  "scratch": scratch,
                  "view": view_paths() if mount else [],
                  "limits": limits.as_dict(), "extra_readers": list(extra_readers),
                  "contain": containment(contain, mount)[1]}
        argv = [sys.executable, "-I", "-S", "-c", _BOOT.format(path=worker_path()),
                json.dumps(config)]
        env = dict(CHILD_ENV, TMPDIR=scratch)
        # one message per job, with the document's descriptor: SOCK_SEQPACKET keeps both whole
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = start_worker(argv, env, str(wdir), theirs.fileno(), contain, mount)
        except OSError as e:
            ours.close()
            raise StartError(str(e)) from None
        finally:
            theirs.close()
        worker = cls(proc, ours, wdir, user)
        assert proc.stdout is not None and proc.stderr is not None
        os.set_blocking(proc.stdout.fileno(), False)
        os.set_blocking(proc.stderr.fileno(), False)
        return worker

    def exited(self) -> bool:
        """Whether the worker is known to have exited (its keeper may not have followed)."""
        return self.pidfd is not None and _exited(self.pidfd)

    def send(self, job: Job, tools: dict[str, str]) -> bool:
        """Hand it ``job`` (a :class:`bastion.readers.runtime.job.Job`) with the document's
        descriptor; False when the job socket is gone (it died while idle)."""
        fd, why = open_document(job.path)
        message = {
            "id": job.id, "name": job.name, "mime": job.mime, "reader": job.reader,
            "sha256": job.sha256,
            "size": job.size, "tools": tools,
            "deadline": job.deadline_s,
        }
        if why is not None:
            message["open_error"] = why
        if job.markdown:  # the Markdown too, in m<seq>.md beside the text
            message["markdown"] = True
        line = json.dumps(message, ensure_ascii=True).encode()
        try:
            fds = ([(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [fd]))]
                   if fd is not None else [])
            self.jobs.sendmsg([line], fds)
        except OSError:
            return False
        finally:
            if fd is not None:
                os.close(fd)
        self.job = job
        self.err.clear()
        if self.ready:
            self.deadline = time.monotonic() + job.deadline_s
        return True

    def take_job(self) -> Job:
        """The job it had in hand, answered or ended: it has none (and no deadline) after."""
        job, self.job, self.deadline = self.job, None, None
        assert job is not None, "a worker without a job answered or ended one"
        return job

    def next_message(self, stderr_cap: int) -> dict[str, Any] | tuple[str, str] | None:
        """Its next answer from what it wrote so far (None: no whole line yet), or, where
        its zygote reported (a line starting ``!``) that a document's process ended without
        one, that job's (error kind, message) (:meth:`child_end`); its ready line is read on
        the way.  :class:`Misbehaved` when a line is over the cap or not JSON."""
        while True:
            at = self.buf.find(b"\n")
            if at < 0:
                if len(self.buf) > MAX_RESULT_LINE:
                    raise Misbehaved("output_limit", "reader output over the result size limit")
                return None
            line = bytes(self.buf[:at])
            del self.buf[: at + 1]
            report = line[:1] == b"!"
            try:
                msg = json.loads(line[1:] if report else line)
            except ValueError:
                raise Misbehaved("worker", "reader worker broke the protocol") from None
            if not isinstance(msg, dict):
                raise Misbehaved("worker", "reader worker broke the protocol")
            if report:
                return self.child_end(msg, stderr_cap)
            if not msg.get("ready"):
                return msg
            self.on_ready(msg)

    def child_end(self, report: dict[str, Any], stderr_cap: int) -> tuple[str, str]:
        """(error kind, message) of the job whose child the zygote reports ended without an
        answer: it died (by the status), its answer was over the cap, or not one line."""
        if self.job is None or report.get("id") != self.job.id:
            raise Misbehaved("worker", "reader worker reported on a job it was not given")
        reason, status = report.get("reason"), report.get("status")
        if reason == "over":
            return "output_limit", "reader output over the result size limit"
        if reason == "died" and isinstance(status, int) and not isinstance(status, bool):
            self.read_stderr(stderr_cap)
            return _classify_death(status, bytes(self.err))
        return "worker", "reader worker broke the protocol"

    def on_ready(self, msg: dict[str, Any]) -> None:
        """Its ready line: how it holds its descendants, its own pid; the job's clock starts."""
        self.ready = True
        self.contained = msg.get("contained")
        if _is_child(msg.get("pid"), self.proc.pid):  # PID 1 of its namespace
            self.pid = msg["pid"]
            if self.pid != self.proc.pid:
                try:
                    self.pidfd = os.pidfd_open(self.pid)
                except (AttributeError, OSError):
                    pass
        try:
            self.identity = measure(self.pid)
        except (OSError, KeyError, ValueError):
            self.identity = None
        if self.user is not None and not dropped(self.identity):  # measured, not asked
            raise WorkerError(f"a reader worker kept root or a capability: {self.identity}")
        if self.job is not None:
            self.deadline = time.monotonic() + self.job.deadline_s

    # -- limits ---------------------------------------------------------------------------------

    def due(self) -> float | None:
        """When its job is up (or its start, before its ready line); None when idle."""
        if self.job is None:
            return None
        return self.deadline if self.deadline is not None else self.started + STARTUP_DEADLINE_S

    def overdue(self, now: float) -> tuple[str, str] | None:
        """(error kind, message) when its job is past its deadline or it never started."""
        if self.job is None:
            return None
        if self.deadline is not None and now >= self.deadline:
            return "timeout", f"extraction timed out after {self.job.deadline_s:g} s"
        if self.deadline is None and now >= self.started + STARTUP_DEADLINE_S:
            return "crash", "reader worker did not start"
        return None

    def keep_stderr(self, data: bytes, cap: int) -> None:
        """Keep what it wrote on stderr, up to ``cap`` bytes."""
        room = cap - len(self.err)
        if room > 0:
            self.err += data[:room]

    def read_stderr(self, cap: int) -> None:
        """Read what is left in a dead worker's stderr pipe, up to the cap."""
        stream = self.proc.stderr
        if stream is None or stream.closed:
            return
        while len(self.err) < cap:
            try:
                data = os.read(stream.fileno(), 1 << 16)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            self.err += data[: cap - len(self.err)]

    # -- the end --------------------------------------------------------------------------------

    def death(self, stderr_cap: int) -> tuple[str, str]:
        """(error kind, message) of a worker whose output ended: killed by us, or dead."""
        if self.killed is not None:
            return "crash", self.killed
        rc = self.proc.poll()
        if rc is None:
            try:
                rc = self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                rc = None
        self.read_stderr(stderr_cap)  # what it (or its keeper) said last may not be read yet
        return _classify_death(*worker_status(rc, bytes(self.err)))

    @property
    def pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        """Its stdout and stderr (both pipes: :func:`procs.start_worker` makes them)."""
        assert self.proc.stdout is not None and self.proc.stderr is not None
        return self.proc.stdout, self.proc.stderr

    def stop(self) -> None:
        """Stop it (idle, dead or to be killed) with every process it started, wherever it
        went, and remove its directory."""
        self.jobs.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        stop_worker(self.proc, self.contained)
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()  # type: ignore[union-attr]
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


class ToolPaths:
    """The tools' paths as a worker that gave up root can run them: a path it cannot reach
    (a symlink in a directory of root's, say) becomes the binary it points to."""

    def __init__(self, user: tuple[int, int] | None) -> None:
        self.user = user
        self._paths: dict[str, str] = {}  # a tool's path -> the one its workers run

    def __call__(self, tools: dict[str, str]) -> dict[str, str]:
        if self.user is None or not tools:
            return tools
        out = {}
        for name, path in tools.items():
            if path not in self._paths:
                real = os.path.realpath(path)
                usable = (reachable(path, *self.user, need=1)
                          or not passable(real, *self.user, need=1))
                self._paths[path] = path if usable else real
            out[name] = self._paths[path]
        return out


def _exited(pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` has exited (poll, not select: no limit on the
    descriptor's number)."""
    waiter = select.poll()
    waiter.register(pidfd, select.POLLIN)
    return bool(waiter.poll(0))


def _is_child(pid: Any, parent: int) -> bool:
    """Whether ``pid`` is ``parent`` or a child of it (what a worker says is checked)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if pid == parent:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2 :].split()[1]) == parent
    except (OSError, ValueError, IndexError):
        return False


def open_document(path: str) -> tuple[int | None, str | None]:
    """A read-only descriptor of the document for its worker, or why there is none.

    The parent opens it (the worker may run as a user who could not) without following a
    symlink, without blocking on a FIFO and without taking a terminal (``O_NOFOLLOW |
    O_NONBLOCK | O_NOCTTY``), and hands over only a regular file.  Size and content are
    checked by the worker against the walk.  (An ``O_PATH`` open and a reopen through
    ``/proc/self/fd`` would not open a device node at all, at 4x the cost: a device node
    cannot be planted in a swept tree without root, ``mknod`` needing ``CAP_MKNOD``.)
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(os.fsencode(path), flags)
    except FileNotFoundError:
        return None, "file disappeared since the walk"
    except OSError as e:
        return None, f"cannot open: {e.strerror}"
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd, None
        why = "no longer a regular file"
    except OSError as e:
        why = f"cannot open: {e.strerror}"
    os.close(fd)
    return None, why


def view_paths() -> list[str]:
    """What a worker that gives up root must reach (:func:`bastion.readers.runtime.sandbox.
    build_view`): the interpreter, its standard library and extension modules, bastion's
    tree and the environment's packages."""
    import sysconfig

    paths = [os.path.realpath(sys.executable), os.path.dirname(os.__file__),
             sysconfig.get_path("platstdlib") or "", *worker_path()]
    dynload = os.path.join(os.path.dirname(os.__file__), "lib-dynload")
    paths.append(dynload)
    out: list[str] = []
    for path in paths:  # as written and as its links lead (a link's own directory may be hidden)
        for form in ({os.path.abspath(path), os.path.realpath(path)} if path else ()):
            if os.path.exists(form) and form not in out:
                out.append(form)
    return out


def worker_path() -> list[str]:
    """The worker's module path: bastion's tree, then this interpreter's own path as ``site``
    and the ``.pth`` files made it.  The worker starts with ``-S`` (no ``site``): processing
    the environment's ``.pth`` files cost ~25 ms of every worker start."""
    path = [_REPO]
    for entry in sys.path:
        if entry and entry not in path and os.path.isabs(entry) and os.path.isdir(entry):
            path.append(entry)
    return path


def precompile_readers() -> None:
    """Byte-compile the readers once, in the parent: a worker cannot write ``__pycache__``
    (Landlock, and ``PYTHONDONTWRITEBYTECODE`` in its environment), so without this every
    worker compiled the modules only it imports, at every start."""
    import compileall

    try:
        compileall.compile_dir(str(Path(__file__).parent), quiet=2, maxlevels=0)
    except OSError:
        pass  # a read-only installation: workers compile in memory, as before


def first_line(err: bytes) -> str:
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
