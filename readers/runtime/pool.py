"""The pool of long-lived reader workers (parent side): jobs in, verdicts out, every limit enforced.

A worker (:mod:`bastion.readers.runtime.workermain`, started by :func:`bastion.readers.runtime.procs.start_worker`) reads many
documents in a row, so no interpreter starts per file.  The pool opens each document and
hands the worker its descriptor, gives it a deadline, caps the result line and the text file,
and kills a worker past a limit with every process it started (its PID namespace), then
replaces it.  Run as root, its workers run as an unprivileged user (:func:`worker_user`).
One worker, its start, job line, deadline and death, is a :class:`bastion.readers.runtime.worker.Worker`;
this module chooses the worker for each job, reads the answers and calls back.
See ``docs/architecture.md``.
"""
from __future__ import annotations

import os
import selectors
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bastion.errors import WorkerError
from ..base import Limits
from .procs import AUTO, PID_NAMESPACE, containment
from .sandbox import SCRATCH_DIR, WORKER_DIR
from .answers import Answers
from .identity import SLOT_BASE, SlotUsers
from .job import Job
from .verdict import Verdict
from .worker import (Misbehaved,
                     StartError,
                     ToolPaths,
                     Worker,
                     first_line,
                     open_document,
                     precompile_readers,
                     view_paths,
                     worker_path)

__all__ = ["DEFAULT_USER", "SLOT_USER", "Job", "JobResult", "WorkerError", "WorkerPool",
           "open_document", "worker_user"]

SLOT_USER = ":slot"  # each worker slot its own unprivileged uid (no account can be named so)
DEFAULT_USER = SLOT_USER  # whom the workers of a pool run as root run as


@dataclass(frozen=True)
class JobResult:
    """A job and its verdict: the worker's, or the parent's when the worker failed it."""

    job: Job
    verdict: Verdict
    text_path: Path | None = None  # the text to move into the store (status ok only)
    sidecar: dict[str, Any] = field(default_factory=dict)  # outline, page sources, …
    markdown_path: Path | None = None  # its Markdown, when the job asked for it (ok only)

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


class WorkerPool:
    """N long-lived workers; jobs go to an idle one; every limit is enforced from here.

    ``submit`` returns as soon as a worker has taken the job (waiting, and handling finished
    jobs, while all are busy); ``callback(result)`` runs in the caller's thread for every job,
    exactly once, whatever the worker did — for a finished document, after its worker has been
    given the next one, so the caller's work on a result overlaps the worker's on the next
    document.  ``drain`` waits for the jobs in flight and runs every callback still due.
    One worker's start, protocol, deadline and death are its :class:`~bastion.readers.runtime.worker.
    Worker`'s; the pool chooses the worker, reads the answers and calls back.
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
        allow_root: bool = False,
    ) -> None:
        self.size = max(1, size)
        self.limits = limits
        self.tmp_root = Path(tmp_root)
        self.callback = callback
        self.recycle_after = recycle_after
        self.rss_limit = rss_limit if rss_limit is not None else limits.memory_bytes // 2
        self.extra_readers = extra_readers
        self.contain = contain  # how workers hold their descendants (tests force a fallback)
        # run as root: the workers run as their slots' uids (or ``user``), or say why not
        self.user, self.user_note = worker_user(user, contain, allow_root)
        # the answers read, their texts moved out of worker reach
        self._answers = Answers(self.tmp_root / f"s{os.getpid()}", limits,
                                self.user is not None)
        self._tools_for_worker = ToolPaths(self.user.sample if self.user else None)  # workers
        self.identity: dict[str, Any] | None = None  # a worker's, measured from /proc
        self.workers: list[Worker] = []
        self.sel = selectors.DefaultSelector()
        self._seq = 0
        self.spawned = self.killed = 0  # workers started; jobs failed by a death or a kill
        self.closed = False
        # results whose callback waits for the next dispatch (see submit): (result, text file)
        self._pending: list[tuple[JobResult, Path | None]] = []

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
            self._call_back(*self._pending.pop(0))

    def _call_back(self, result: JobResult, text_path: Path | None) -> None:
        """The caller's callback, then the text file gone (the caller moved it, or not)."""
        try:
            self.callback(result)
        finally:
            for path in (text_path, result.markdown_path):
                if path is not None and path.exists():
                    path.unlink()

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
            self._answers.remove()
            if self.user is not None:
                self.user.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def pids(self) -> list[int]:
        """The workers' pids (as this process numbers them; one not ready yet: its keeper)."""
        return [w.pid for w in self.workers]

    # -- workers --------------------------------------------------------------------------------

    def _spawn(self) -> Worker:
        if not self.spawned:
            precompile_readers()
        self._seq += 1
        wdir, ids = self.tmp_root / f"w{os.getpid()}-{self._seq}", None
        try:
            ids = None if self.user is None else self.user.take()
            worker = Worker.start(wdir, self.limits, user=ids,
                                  extra_readers=self.extra_readers, contain=self.contain)
        except (OSError, StartError) as e:
            if ids is not None and self.user is not None:
                self.user.give(ids)
            raise WorkerError(f"cannot start a reader worker: {e}") from None
        for pipe, kind in zip(worker.pipes, ("out", "err")):
            self.sel.register(pipe, selectors.EVENT_READ, (worker, kind))
        self.workers.append(worker)
        self.spawned += 1
        return worker

    def _idle_worker(self) -> Worker | None:
        for w in self.workers:
            if w.job is None:
                return w
        if len(self.workers) < self.size:
            return self._spawn()
        return None

    def _dispatch(self, w: Worker, job: Job) -> bool:
        if w.exited():
            # dead while idle; its keeper, which holds the job socket too, may not have
            # followed yet (a job sent now would be lost with it): replace it, try again
            self._retire(w)
            return False
        if not w.send(job, self._tools_for_worker(job.tools)):
            self._retire(w)  # died while idle: replace it and try again
            return False
        return True

    def _retire(self, w: Worker) -> None:
        """Stop a worker (idle, dead or to be killed) and forget it."""
        for stream in w.pipes:
            try:
                self.sel.unregister(stream)
            except (KeyError, ValueError):
                pass
        w.stop()  # it and all it started are gone: its uid is free for the next one
        if w.user is not None and self.user is not None:
            self.user.give(w.user)
        if w in self.workers:
            self.workers.remove(w)

    # -- the event loop -------------------------------------------------------------------------

    def _poll(self) -> None:
        due = [t for t in (w.due() for w in self.workers) if t is not None]
        timeout = max(0.0, min(due) - time.monotonic()) if due else None
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
                    worker.keep_stderr(data, self.limits.stderr_bytes)
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
            late = w.overdue(now)
            if late is not None:
                self._fail(w, *late)

    def _on_output(self, w: Worker) -> None:
        while w in self.workers:
            try:
                msg = w.next_message(self.limits.stderr_bytes)
            except Misbehaved as e:
                self._fail(w, e.kind, e.message)
                return
            self.identity = w.identity or self.identity  # checked at its ready line
            if msg is None:
                return
            if isinstance(msg, tuple):  # a document's process ended without an answer
                self._end_job(w, *msg)  # its zygote, which never read it, goes on
            else:
                self._on_result(w, msg)

    # -- answers --------------------------------------------------------------------------------

    def _on_result(self, w: Worker, msg: dict[str, Any]) -> None:
        try:
            verdict, text_path, sidecar, markdown_path = self._answers.read(w, msg)
        except Misbehaved as e:
            self._fail(w, e.kind, e.message)
            return
        result = JobResult(job=w.take_job(), verdict=verdict, text_path=text_path,
                           sidecar=sidecar, markdown_path=markdown_path)
        w.done += 1
        rss = int(msg.get("rss") or 0)
        if not (msg.get("fatal") or w.done >= self.recycle_after or rss > self.rss_limit):
            self._pending.append((result, text_path))  # called back after the next dispatch
            return
        try:  # the worker is replaced, and its directory (with the text) removed: call now
            self._call_back(result, text_path)
        finally:
            self._retire(w)

    def _on_death(self, w: Worker) -> None:
        kind, message = w.death(self.limits.stderr_bytes)
        self._retire(w)
        if w.job is not None:
            self._end_job(w, kind, message)

    def _end_job(self, w: Worker, kind: str, message: str) -> None:
        job = w.take_job()
        self.killed += 1
        self.callback(JobResult(job=job, verdict=Verdict.failed(kind, message)))

    def _fail(self, w: Worker, kind: str, message: str) -> None:
        """Kill a worker (with its process group) and fail its job."""
        w.killed = message
        self._retire(w)
        stderr = first_line(bytes(w.err))
        if w.job is not None:
            self._end_job(w, kind, f"{message}: {stderr}" if kind == "crash" and stderr
                          else message)


def worker_user(name: str | None, contain: str = AUTO,
                allow_root: bool = False) -> tuple[SlotUsers | None, str | None]:
    """Whom reader workers run as, and why not when they would run as root.

    Only a pool running as root changes user.  By default (:data:`SLOT_USER`) each worker
    slot runs as a uid and gid of its own that no account has
    (:class:`~bastion.readers.runtime.identity.SlotUsers`); a ``name`` runs them all as that
    account (its primary group, no other); None keeps root, as the caller asked.  The
    interpreter, its library and bastion's modules need not be readable by that uid on the
    host: each worker binds them back, read-only, in its own mount namespace
    (:func:`bastion.readers.runtime.sandbox.build_view`).  What a worker needs is a PID and
    mount namespace and that each of those paths itself be readable by others; without
    either, :class:`WorkerError` says why in one line, unless ``allow_root`` accepts root
    workers: then the result is None and the note says why.
    """
    users, note = _worker_user(name, contain)
    if note is not None and not allow_root:
        raise WorkerError(f"{note} (refusing to start them; accept root workers with "
                        "allow_root_workers: true in the manifest)")
    return users, note


def _worker_user(name: str | None, contain: str) -> tuple[SlotUsers | None, str | None]:
    if name is None or os.geteuid() != 0:
        return None, None
    fixed = None
    if name != SLOT_USER:
        import pwd

        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise WorkerError(f"no user {name!r} to run the reader workers as") from None
        if entry.pw_uid == 0:
            return None, None
        fixed = (entry.pw_uid, entry.pw_gid)
    uid, gid = fixed or (SLOT_BASE, SLOT_BASE)
    needed = view_paths()
    for path in _essential():  # bound back as they are: each must itself be readable
        if not _readable_itself(path, uid, gid):
            return None, f"reader workers would run as root: {path} is not readable by others"
    for top in (WORKER_DIR, SCRATCH_DIR):
        try:  # an empty directory to mount over: it hides nothing of the host's
            os.makedirs(top, mode=0o755, exist_ok=True)
        except OSError as e:
            return None, (f"reader workers would run as root: cannot make {top}: "
                          f"{e.strerror}")
        hidden = _under(top, [sys.executable, *needed])
        if hidden is not None:  # the worker's own directory or scratch is mounted there
            return None, (f"reader workers would run as root: {hidden} is under {top}, "
                          f"which a worker sees replaced by its own directory")
    if containment(contain, mount=True)[1] != PID_NAMESPACE:  # probed once per process
        return None, ("reader workers would run as root: no PID, mount and network "
                      "namespace here (unshare --pid --mount --net failed)")
    return SlotUsers(fixed), None


def _essential() -> list[str]:
    """What a worker cannot run without: the standard library and bastion's own tree."""
    return [os.path.dirname(os.__file__), worker_path()[0]]


def _readable_itself(path: str, uid: int, gid: int) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    bits = (st.st_mode >> 6 if st.st_uid == uid else
            st.st_mode >> 3 if st.st_gid == gid else st.st_mode) & 7
    need = 5 if stat.S_ISDIR(st.st_mode) else 4
    return bits & need == need


def _under(top: Path, paths: list[str]) -> str | None:
    """The first of ``paths`` (as written or as its symlinks lead) inside ``top``, or None."""
    for path in paths:
        for form in {os.path.abspath(path), os.path.realpath(path)}:
            if Path(form).is_relative_to(top):
                return path
    return None
