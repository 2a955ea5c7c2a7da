"""One reader worker, parent side: its start, its control messages, its clock, its death.

A :class:`Worker` is one long-lived process, a zygote (:mod:`bastion.readers.runtime.workermain`,
started through :func:`bastion.readers.runtime.procs.start_worker`, run by
:mod:`bastion.readers.runtime.zygote`), and what the parent keeps of it: how it was started
(a :class:`Launch`: its process, its control socket, its directory, its uid, its view), what its
ready message said, the reader families it was asked to load, and the jobs it holds (its
:class:`~bastion.readers.runtime.handout.Handout`, which gives them to the document's process
the zygote forked last).  It knows how to start itself (:meth:`Worker.start`), read the
zygote's messages (:meth:`Worker.receive`: ready, a spare's channel, a process's end), ask it
to load a family (:meth:`Worker.prepare`), tell when its clock is up (:meth:`Worker.overdue`),
say why it died (:meth:`Worker.death`) and stop with every process it started
(:meth:`Worker.stop`).  Which worker gets which job, and what becomes of an answer, is the
pool's (:class:`bastion.readers.runtime.pool.WorkerPool`).
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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable

from bastion.errors import WorkerError

from ..base import Limits
from .handout import (STARTUP_DEADLINE_S, Child, Gone, Handout, Misbehaved, Queued,
                      open_document)
from .identity import dropped, measure
from .job import Job
from .schema import load
from .procs import CHILD_ENV, containment, start_worker, stop_worker, worker_status
from .sandbox import SCRATCH_DIR, WORKER_DIR, blocking_ancestor, passable, reachable

__all__ = ["Child", "Gone", "Misbehaved", "Launch", "StartError", "ToolPaths", "Worker",
           "open_document"]

# the directory holding the ``bastion`` package, which the worker imports
# ``bastion.readers.runtime.workermain`` from: readers/.. is a checkout's root, or in an installation the
# package itself (site-packages/bastion/readers/..), whose parent holds it
_UP = Path(__file__).resolve().parent.parent
_REPO = str(_UP if (_UP / "bastion" / "__init__.py").is_file() else _UP.parent)
# What a worker runs, read from its stdin (``python -I -S`` and nothing more on its command
# line, no environment): its module path, its control socket moved to fd 0, its settings
_BOOT = (
    "import os, sys\n"
    "os.dup2({control}, 0)\n"
    "os.close({control})\n"
    "sys.path[:0] = {path!r}\n"
    "from bastion.readers.runtime.workermain import main\n"
    "main({config!r})\n"
)


class StartError(Exception):
    """A worker's process could not be started (the pool says so as its ``WorkerError``)."""


@dataclass(frozen=True, slots=True)
class Launch:
    """A worker as it was started, fixed for its life: its process (whose stderr is a pipe of
    ours), the parent's end of its control socket, its directory, whom it runs as, the tools'
    paths bound into its view, and when it started."""

    proc: subprocess.Popen
    control: socket.socket  # the parent's end of the control socket
    dir: Path
    user: tuple[int, int] | None  # the uid and gid it runs as (None: the pool's own)
    view: frozenset[str]  # the tools' paths bound into its view
    at: float  # time.monotonic() when it started

    @classmethod
    def start(cls, wdir: Path, limits: Limits, *, user: tuple[int, int] | None,
              extra_readers: tuple[str, ...], contain: str,
              tool_view: frozenset[str] = frozenset()) -> "Launch":
        """Make its directory ``wdir`` and start a worker in it (:class:`StartError` when
        the process cannot be started; ``tool_view``: tools' paths to bind into its view, as
        the interpreter's); its control socket and stderr do not block."""
        wdir.mkdir(parents=True, exist_ok=False)
        mount = user is not None
        if user is not None:  # its own directory, seen as WORKER_DIR in its namespace
            os.chown(wdir, *user)
            os.chmod(wdir, 0o700)
        seen_as = str(WORKER_DIR) if mount else str(wdir)
        scratch = str(SCRATCH_DIR) if mount else str(wdir / "scratch")
        config = {"dir": seen_as, "bind": str(wdir) if mount else None, "user": user,
                  "scratch": scratch,
                  "view": [*view_paths(), *sorted(tool_view)] if mount else [],
                  "limits": limits.as_dict(), "extra_readers": list(extra_readers),
                  "contain": containment(contain, mount)[1]}
        config["env"] = dict(CHILD_ENV, TMPDIR=scratch)  # set by the worker itself
        # messages kept whole, with descriptors (a spare's channel): SOCK_SEQPACKET
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = _BOOT.format(control=theirs.fileno(), path=worker_path(),
                            config=json.dumps(config)).encode()
        try:
            proc = start_worker([sys.executable, "-I", "-S"], boot, str(wdir), theirs.fileno(),
                                contain, mount)
        except OSError as e:
            ours.close()
            raise StartError(str(e)) from None
        finally:
            theirs.close()
        ours.setblocking(False)
        launch = cls(proc, ours, wdir, user, tool_view if mount else frozenset(),
                     time.monotonic())
        assert proc.stderr is not None
        os.set_blocking(proc.stderr.fileno(), False)
        return launch


class Worker:
    """One worker and what the parent keeps of it; the jobs it holds are its ``hand``'s."""

    __slots__ = ("launch", "err", "ready", "killed", "contained", "pid", "pidfd", "identity",
                 "hand", "prepared", "gen", "forked")

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.err = bytearray()
        self.ready = False
        self.killed: str | None = None
        self.contained: str | None = None  # how it holds its descendants (its ready message)
        # the worker itself, once its ready message says (else its keeper)
        self.pid = launch.proc.pid
        self.pidfd: int | None = None  # readable once the worker (not its keeper) has exited
        self.identity: dict[str, Any] | None = None  # as measured from /proc at its ready message
        self.hand = Handout(launch.dir.name, self.err, launch.at)
        self.prepared: dict[tuple[str, str, str], int] = {}  # what it was asked to load: gen
        self.gen = 0  # prepare messages sent
        self.forked = 0  # prepare messages its zygote had applied when it forked its last spare

    @property
    def proc(self) -> subprocess.Popen:
        return self.launch.proc

    @property
    def control(self) -> socket.socket:
        """The parent's end of its control socket."""
        return self.launch.control

    @property
    def dir(self) -> Path:
        return self.launch.dir

    @property
    def user(self) -> tuple[int, int] | None:
        """The uid and gid it runs as (None: the pool's own)."""
        return self.launch.user

    @classmethod
    def start(cls, wdir: Path, limits: Limits, *, user: tuple[int, int] | None,
              extra_readers: tuple[str, ...], contain: str,
              tool_view: frozenset[str] = frozenset()) -> "Worker":
        """A worker started in a new directory ``wdir`` (:meth:`Launch.start`)."""
        return cls(Launch.start(wdir, limits, user=user, extra_readers=extra_readers,
                                contain=contain, tool_view=tool_view))

    def exited(self) -> bool:
        """Whether the worker is known to have exited (its keeper may not have followed)."""
        return self.pidfd is not None and _exited(self.pidfd)

    @property
    def job(self) -> Job | None:
        """The job it reads now, or will read first (None: it holds none)."""
        return self.hand.job

    # -- its control messages --------------------------------------------------------------------

    def receive(self) -> list[tuple[Any, ...]]:
        """The zygote's messages waiting now: ``("ready", msg)``, ``("child", Child)``,
        ``("exit", n, status)``.  :class:`Gone` when the control socket has ended (after the
        messages before its end); :class:`Misbehaved` for anything else."""
        out: list[tuple[Any, ...]] = []
        room = socket.CMSG_SPACE(2 * array("i").itemsize)
        while True:
            try:
                data, ancillary, flags, _ = self.control.recvmsg(1 << 16, room,
                                                                 socket.MSG_CMSG_CLOEXEC)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError:
                data, ancillary, flags = b"", [], 0
            fds = array("i")
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
            if not data:
                for fd in fds:
                    os.close(fd)
                if out:  # the messages before its end first: the end is read again next
                    return out
                raise Gone()
            try:
                event = _event(data, flags, list(fds), self.ready)
            except Misbehaved:
                for fd in fds:
                    os.close(fd)
                raise
            out.append(event)

    def on_ready(self, msg: dict[str, Any]) -> None:
        """Its ready message: how it holds its descendants, its own pid."""
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

    def prepare(self, job: Job, tools: dict[str, str]) -> int:
        """Ask the zygote to load ``job``'s reader family (once per family and tools: what its
        documents' processes may read, what keys warm engines); the generation a fresh process
        needs for it.  A spare forked before is shut: the next one will have it."""
        key = (job.reader or "", job.mime if job.reader is None else "",
               json.dumps(tools, sort_keys=True))
        gen = self.prepared.get(key)
        if gen is None:
            spec = {"reader": job.reader, "mime": job.mime if job.reader is None else None,
                    "tools": tools}
            try:
                self.control.sendmsg([json.dumps({"prepare": spec}).encode()])
            except OSError:
                raise Gone() from None
            self.gen += 1
            gen = self.prepared[key] = self.gen
            child = self.hand.child
            if child is not None and child.pure is None and child.gen < gen:
                child.discard()
        return gen

    def assign(self, job: Job, alone: bool, tools: dict[str, str], now: float) -> None:
        """Hold ``job`` (given to its process when it may take it: :meth:`Handout.pump`);
        :class:`Gone` when the worker is (the job held all the same)."""
        item: Queued = self.hand.hold(job, alone, tools, now)
        item.needs = self.prepare(job, tools)

    def pump(self, text_file: Callable[[str, int], tuple[Path, int]], now: float) -> None:
        """Give its process what it may take now (nothing before its ready message)."""
        if self.ready:
            self.hand.pump(text_file, now)

    # -- its clock --------------------------------------------------------------------------------

    def due(self) -> float | None:
        """When its clock is up: its start's while it holds a job before its ready message,
        else its hand's (:meth:`Handout.due`)."""
        if not self.ready:
            return self.launch.at + STARTUP_DEADLINE_S if self.hand.queue else None
        return self.hand.due()

    def overdue(self, now: float) -> tuple[str, str] | None:
        """(error kind, message) when its clock is up (kind "": no job is to blame)."""
        if not self.ready:
            due = self.due()
            return None if due is None or now < due else ("crash", "reader worker did not start")
        return self.hand.overdue(now)

    def keep_stderr(self, data: bytes, cap: int) -> None:
        """Keep what it wrote on stderr, up to ``cap`` bytes."""
        room = cap - len(self.err)
        if room > 0:
            self.err += data[:room]

    def read_stderr(self, cap: int) -> None:
        """Read what is left in its stderr pipe now, up to the cap."""
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

    def child_death(self, status: int, stderr_cap: int) -> tuple[str, str]:
        """(error kind, message) of the job whose process ended without its answer."""
        self.read_stderr(stderr_cap)
        return ("worker", "reader worker broke the protocol") if status == 0 else \
            _classify_death(status, bytes(self.err))

    def death(self, stderr_cap: int) -> tuple[str, str]:
        """(error kind, message) of a worker whose control socket ended: killed by us, or dead."""
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
    def stderr(self) -> IO[bytes]:
        assert self.proc.stderr is not None
        return self.proc.stderr

    def forget(self) -> None:
        """Close this process's copies of its descriptors, touching no process (a forked
        copy of the parent lets go of the parent's workers)."""
        for close in (self.control.close, self.stderr.close):
            try:
                close()
            except OSError:
                pass
        if self.hand.child is not None:
            self.hand.child.close()
            self.hand.child = None
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def stop(self) -> None:
        """Stop it (idle, dead or to be killed) with every process it started, wherever it
        went, and remove its directory."""
        self.control.close()
        if self.hand.child is not None:
            self.hand.child.close()
            self.hand.child = None
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        stop_worker(self.proc, self.contained)
        try:
            self.stderr.close()
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)


def _event(data: bytes, flags: int, fds: list[int], ready: bool) -> tuple[Any, ...]:
    """One control message of a zygote as an event (:meth:`Worker.receive`; the descriptors
    are the caller's to close when it raises)."""
    broke = Misbehaved("worker", "reader worker broke the protocol")
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        raise broke
    try:  # bounded before the parse, as an answer is (a zygote is trusted no more)
        msg = load(data)
    except ValueError:
        raise broke from None
    if not isinstance(msg, dict):
        raise broke
    if msg.get("ready") is True and not fds and not ready:
        return ("ready", msg)
    if "child" in msg and len(fds) == 2 and _count(msg["child"]) and _count(msg.get("gen")):
        jobs = socket.socket(fileno=fds[0])
        if jobs.type != socket.SOCK_SEQPACKET or not stat.S_ISFIFO(os.fstat(fds[1]).st_mode):
            jobs.detach()
            raise broke
        os.set_blocking(fds[1], False)
        return ("child", Child(msg["child"], msg["gen"], jobs, fds[1]))
    if "exit" in msg and not fds and _count(msg["exit"]) and isinstance(msg.get("status"), int):
        return ("exit", msg["exit"], msg["status"])
    raise broke


def _count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


class ToolPaths:
    """The tools' paths as a worker that gave up root can run them: a path it cannot reach
    (a symlink in a directory of root's, say) becomes the binary it points to."""

    def __init__(self, user: tuple[int, int] | None) -> None:
        self.user = user
        self._paths: dict[str, str] = {}  # a tool's path -> the one its workers run
        self._hidden: dict[str, bool] = {}  # a path its workers run -> behind a private dir
        self.view: frozenset[str] = frozenset()  # such paths: bound into new workers' views

    def widen(self, tools: dict[str, str], view: frozenset[str]) -> bool:
        """Whether a worker whose view binds ``view`` lacks one of ``tools``' paths (as
        :meth:`__call__` gave them) that a directory above hides from its user (kept in
        :attr:`view` for the workers started from now on)."""
        if self.user is None:
            return False
        for path in tools.values():
            if path not in self._hidden:
                self._hidden[path] = blocking_ancestor(path, *self.user) is not None
        hidden = frozenset(p for p in tools.values() if self._hidden[p])
        self.view |= hidden
        return not hidden <= view

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
