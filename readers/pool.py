"""The pool of long-lived reader workers (parent side): jobs in, verdicts out, every limit enforced.

A worker (:mod:`bastion.readers.worker`, started by :func:`bastion.readers.procs.start_worker`) reads many
documents in a row, so no interpreter starts per file.  The pool opens each document and
hands the worker its descriptor, gives it a deadline, caps the result line and the text file,
and kills a worker past a limit with every process it started (its PID namespace), then
replaces it.  Run as root, its workers run as an unprivileged user (:func:`worker_user`).
See ``docs/architecture.md``.
"""

from __future__ import annotations

import json
import os
import re
import select
import selectors
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .base import Limits
from .procs import (AUTO, CHILD_ENV, PID_NAMESPACE, containment, start_worker, stop_worker,
                    worker_status)
from .sandbox import WORKER_DIR
from .verdict import Status, Verdict

# the directory holding the ``bastion`` package, which the worker imports
# ``bastion.readers.worker`` from: readers/.. is a checkout's root, or in an installation the
# package itself (site-packages/bastion/readers/..), whose parent holds it
_UP = Path(__file__).resolve().parent.parent
_REPO = str(_UP if (_UP / "bastion" / "__init__.py").is_file() else _UP.parent)
_BOOT = (
    "import sys; sys.path[:0] = {path!r}; "
    "from bastion.readers.worker import main; main()"
)
_TEXT_NAME = re.compile(r"t[0-9]{1,12}\.txt")
DEFAULT_USER = "nobody"  # whom the workers of a pool run as root run as
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
    reader: str | None = None  # the reader the parent chose (None: the worker's registry's)


@dataclass(frozen=True)
class JobResult:
    """A job and its verdict: the worker's, or the parent's when the worker failed it."""

    job: Job
    verdict: Verdict
    text_path: Path | None = None  # the text to move into the store (status ok only)
    sidecar: dict[str, Any] = field(default_factory=dict)  # outline, page sources, …

    # the verdict's fields, read through (callers that only look at one)
    @property
    def status(self) -> str:
        return self.verdict.status.value

    @property
    def extractor(self) -> str | None:
        return self.verdict.extractor

    @property
    def error(self) -> str | None:
        return self.verdict.error

    @property
    def error_kind(self) -> str | None:
        return self.verdict.error_kind

    @property
    def limit(self) -> str | None:
        return self.verdict.limit

    @property
    def chars(self) -> int:
        return self.verdict.chars

    @property
    def warnings(self) -> tuple[str, ...]:
        return self.verdict.warnings


class _Worker:
    __slots__ = ("proc", "jobs", "dir", "buf", "err", "job", "deadline", "done", "ready",
                 "killed", "started", "contained", "pid", "pidfd")

    def __init__(self, proc: subprocess.Popen, jobs: socket.socket, wdir: Path) -> None:
        self.proc = proc
        self.jobs = jobs  # the parent's end of the job socket
        self.dir = wdir
        self.buf = bytearray()
        self.err = bytearray()
        self.job: Job | None = None
        self.deadline: float | None = None
        self.done = 0
        self.ready = False
        self.killed: str | None = None
        self.started = time.monotonic()
        self.contained: str | None = None  # how it holds its descendants (its ready line)
        self.pid = proc.pid  # the worker itself, once its ready line says (else its keeper)
        self.pidfd: int | None = None  # readable once the worker (not its keeper) has exited


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
        contain: str = AUTO,
        user: str | None = DEFAULT_USER,
    ) -> None:
        self.size = max(1, size)
        self.limits = limits
        self.tmp_root = Path(tmp_root)
        self.callback = callback
        self.recycle_after = recycle_after
        self.rss_limit = rss_limit if rss_limit is not None else limits.memory_bytes // 2
        self.extra_readers = extra_readers
        self.contain = contain  # how workers hold their descendants (tests force a fallback)
        # run as root: the workers run as ``user`` (uid, gid), or say why they cannot
        self.user, self.user_note = worker_user(user, contain)
        self._staging = self.tmp_root / f"s{os.getpid()}"  # texts moved out of worker reach
        self._staged = False  # the staging directory is made
        self._tool_paths: dict[str, str] = {}  # a tool's path -> the one its workers run
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
            shutil.rmtree(self._staging, ignore_errors=True)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The workers' pids (as this process numbers them; a worker not ready yet: the
        process started for it, its keeper)."""
        return [w.pid for w in self.workers]

    # -- workers --------------------------------------------------------------------------------

    def _spawn(self) -> _Worker:
        if not self.spawned:
            _precompile_readers()
        self._seq += 1
        wdir = self.tmp_root / f"w{os.getpid()}-{self._seq}"
        wdir.mkdir(parents=True, exist_ok=False)
        mount = self.user is not None
        if self.user is not None:  # its own directory, seen as WORKER_DIR in its namespace
            os.chown(wdir, *self.user)
            os.chmod(wdir, 0o700)
        seen_as = str(WORKER_DIR) if mount else str(wdir)
        config = {"dir": seen_as, "bind": str(wdir) if mount else None, "user": self.user,
                  "limits": self.limits.as_dict(), "extra_readers": list(self.extra_readers),
                  "contain": containment(self.contain, mount)[1]}
        argv = [sys.executable, "-I", "-S", "-c", _BOOT.format(path=_worker_path()),
                json.dumps(config)]
        env = dict(CHILD_ENV, TMPDIR=seen_as)
        # one message per job, with the document's descriptor: SOCK_SEQPACKET keeps both whole
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            proc = start_worker(argv, env, str(wdir), theirs.fileno(), self.contain, mount)
        except OSError as e:
            ours.close()
            raise PoolError(f"cannot start a reader worker: {e}") from None
        finally:
            theirs.close()
        worker = _Worker(proc, ours, wdir)
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
        if w.pidfd is not None and _exited(w.pidfd):
            # dead while idle; its keeper, which holds the job socket too, may not have
            # followed yet (a job sent now would be lost with it): replace it, try again
            self._retire(w)
            return False
        fd, why = open_document(job.path)
        message = {
            "id": job.id, "name": job.name, "mime": job.mime, "reader": job.reader,
            "sha256": job.sha256,
            "size": job.size, "tools": self._tools_for_worker(job.tools),
            "deadline": job.deadline_s,
        }
        if why is not None:
            message["open_error"] = why
        line = json.dumps(message, ensure_ascii=True).encode()
        try:
            fds = ([(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", [fd]))]
                   if fd is not None else [])
            w.jobs.sendmsg([line], fds)
        except OSError:
            self._retire(w)  # died while idle: replace it and try again
            return False
        finally:
            if fd is not None:
                os.close(fd)
        w.job = job
        w.err.clear()
        if w.ready:
            w.deadline = time.monotonic() + job.deadline_s
        return True

    def _tools_for_worker(self, tools: dict[str, str]) -> dict[str, str]:
        """The tools' paths as a worker that gave up root can run them: a path it cannot
        reach (a symlink in a directory of root's, say) becomes the binary it points to."""
        if self.user is None or not tools:
            return tools
        out = {}
        for name, path in tools.items():
            if path not in self._tool_paths:
                real = os.path.realpath(path)
                usable = (_reachable(path, *self.user, need=1)
                          or not _passable(real, *self.user, need=1))
                self._tool_paths[path] = path if usable else real
            out[name] = self._tool_paths[path]
        return out

    def _retire(self, w: _Worker) -> None:
        """Stop a worker (idle, dead or to be killed) and forget it."""
        for stream in (w.proc.stdout, w.proc.stderr):
            try:
                self.sel.unregister(stream)
            except (KeyError, ValueError):
                pass
        w.jobs.close()
        if w.pidfd is not None:
            os.close(w.pidfd)
            w.pidfd = None
        stop_worker(w.proc, w.contained)  # with every process it started, wherever it went
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
                w.contained = msg.get("contained")
                if _is_child(msg.get("pid"), w.proc.pid):  # PID 1 of its namespace
                    w.pid = msg["pid"]
                    if w.pid != w.proc.pid:
                        try:
                            w.pidfd = os.pidfd_open(w.pid)
                        except (AttributeError, OSError):
                            pass
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
        try:
            verdict = Verdict.from_json(msg.get("verdict"))
        except ValueError as e:
            self._fail(w, "crash", f"reader worker sent an invalid verdict ({e})")
            return
        sidecar = msg.get("sidecar") if isinstance(msg.get("sidecar"), dict) else {}
        if verdict.status is Status.OK:
            text_path = self._checked_text(w, msg.get("text"))
            if text_path is None:
                self._fail(w, "crash", "reader worker's text file is missing or not a file")
                return
        result = JobResult(job=job, verdict=verdict, text_path=text_path, sidecar=sidecar)
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
        """The worker's text file, only if it is a plain regular file in its own directory.

        It is first renamed out of the worker's directory, into one only this process can
        reach, and checked there: checked in place, a worker could swap it for a symlink
        between the check and the store's rename.  A worker's text then belongs to us."""
        if not isinstance(name, str) or not _TEXT_NAME.fullmatch(name):
            return None
        if not self._staged:
            self._staging.mkdir(mode=0o700, exist_ok=True)
            self._staged = True
        path = self._staging / f"{w.dir.name}-{name}"
        try:
            os.rename(w.dir / name, path)
            st = os.lstat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 \
                or st.st_size > self.limits.max_output_bytes:
            path.unlink()
            return None
        if self.user is not None:
            os.chown(path, os.geteuid(), os.getegid())
            os.chmod(path, 0o600)
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
            self._read_stderr(w)  # what it (or its keeper) said last may not be read yet
            kind, message = _classify_death(*worker_status(rc, bytes(w.err)))
        else:
            kind, message = "crash", w.killed
        self._retire(w)
        if job is not None:
            self.killed += 1
            self.callback(JobResult(job=job, verdict=Verdict.failed(kind, message)))

    def _read_stderr(self, w: _Worker) -> None:
        """Read what is left in a dead worker's stderr pipe, up to the cap."""
        stream = w.proc.stderr
        if stream is None or stream.closed:
            return
        while len(w.err) < self.limits.stderr_bytes:
            try:
                data = os.read(stream.fileno(), 1 << 16)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            w.err += data[: self.limits.stderr_bytes - len(w.err)]

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
            self.callback(JobResult(job=job, verdict=Verdict.failed(kind, message)))


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


def worker_user(name: str | None,
                contain: str = AUTO) -> tuple[tuple[int, int] | None, str | None]:
    """The (uid, gid) reader workers run as, and why not when they run as root.

    Only a pool running as root changes user: its workers become ``name`` (``nobody`` by
    default; None keeps root) with that user's primary group and no other.  They need a PID
    and mount namespace (their directory is bound where the user can reach it) and read
    access to the interpreter's library and bastion's own modules: without either, they stay
    root and the note says why.
    """
    if name is None or os.geteuid() != 0:
        return None, None
    import pwd

    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise PoolError(f"no user {name!r} to run the reader workers as") from None
    if entry.pw_uid == 0:
        return None, None
    needed = [os.path.dirname(os.__file__), *_worker_path()]
    for entry_path in needed:
        if os.path.isdir(entry_path) and not _reachable(entry_path, entry.pw_uid,
                                                        entry.pw_gid):
            return None, f"reader workers run as root: {entry_path} is not readable by {name}"
    try:  # an empty directory to bind over: it hides nothing of the host's
        os.makedirs(WORKER_DIR, mode=0o755, exist_ok=True)
    except OSError as e:
        return None, f"reader workers run as root: cannot make {WORKER_DIR}: {e.strerror}"
    hidden = _under(WORKER_DIR, [sys.executable, *needed])
    if hidden is not None:  # the worker's own directory is bound over WORKER_DIR
        return None, (f"reader workers run as root: {hidden} is under {WORKER_DIR}, which a "
                      f"worker that gives up root sees replaced by its own directory")
    if containment(contain, mount=True)[1] != PID_NAMESPACE:  # probed once per process
        return None, f"reader workers run as root: no PID and mount namespace to give {name}"
    return (entry.pw_uid, entry.pw_gid), None


def _under(top: Path, paths: list[str]) -> str | None:
    """The first of ``paths`` (as written or as its symlinks lead) inside ``top``, or None."""
    for path in paths:
        for form in {os.path.abspath(path), os.path.realpath(path)}:
            if Path(form).is_relative_to(top):
                return path
    return None


def _reachable(path: str, uid: int, gid: int, need: int = 5) -> bool:
    """Whether ``uid``/``gid`` (no other group) has the ``need`` bits on ``path`` (r-x: list
    a directory; --x: run a file) and may pass every directory above it, both along the
    path as written and along the one its symlinks lead to, by the permission bits (ACLs
    are not read)."""
    return all(_passable(p, uid, gid, need)
               for p in {os.path.abspath(path), os.path.realpath(path)})


def _passable(path: str, uid: int, gid: int, need: int) -> bool:
    while True:
        try:
            st = os.stat(path)
        except OSError:
            return False
        bits = (st.st_mode >> 6 if st.st_uid == uid else
                st.st_mode >> 3 if st.st_gid == gid else st.st_mode) & 7
        if bits & need != need:
            return False
        if path == "/":
            return True
        path, need = os.path.dirname(path), 1


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
