"""The jobs one worker holds, and how they reach its documents' processes; the clock of them.

A worker's zygote forks one document's process at a time, ahead of need
(:mod:`bastion.readers.runtime.zygote`); the parent holds that process's channel, a
:class:`Child`: the socket its jobs go to, the pipe its answers come from.  A
:class:`Handout` holds the pool's jobs a worker took (:class:`Queued`: not given yet;
:class:`Sent`: given to its process, not answered) and gives them (:meth:`Handout.pump`):

* a job that may not share a process goes alone to a fresh spare, whose socket is then shut
  (one document, one process);
* pure jobs (:mod:`bastion.readers.runtime.batch`) go to a spare that becomes a shared process,
  several to a message (:data:`MSG_JOBS`), while it has fewer than :data:`REFILL` unanswered,
  until it has been given :data:`~bastion.readers.runtime.batch.BATCH_DOCS`; a job of another
  kind ends it (its socket shut once it has answered all it holds);
* a spare forked before the zygote loaded a job's family is let go, never used for it.

The clock (:meth:`Handout.due`): the first job given and unanswered has its deadline from the
moment it was given (or its predecessor answered); a job held waits at most
:data:`STARTUP_DEADLINE_S` for a process; a shared process
that answered all must end within :data:`LINGER_S`.  A lone process's answer is taken only
once the zygote reports its end (every process of its document gone):
:meth:`Handout.ending`.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from array import array
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from .batch import BATCH_DOCS, PURE_READERS
from .job import Job
from .schema import MAX_ANSWER
from .workermain import MAX_FDS, MAX_JOB

MAX_RESULT_LINE = MAX_ANSWER  # bytes of one answer line: the schema's cap (schema.py)
OVER_CAP = f"reader answer over the {MAX_RESULT_LINE >> 20} MiB answer cap"
STARTUP_DEADLINE_S = 60.0  # for a worker's ready message, and for a process it must fork
LINGER_S = 30.0  # for a shared process to end once it has answered its last job
IN_FLIGHT = 32  # pure jobs one worker may hold (given to its process, or waiting for it)
REFILL = 8  # a shared process is given more when fewer than this many of its jobs are unanswered
MSG_JOBS = min(32, MAX_FDS // 2)  # jobs in one message to a shared process
MSG_BYTES = min(64 << 10, MAX_JOB // 2)  # a job message is cut past this size
SPARE_DEATHS = 3  # spares dead on their own in a row: the worker cannot fork one


class Misbehaved(Exception):
    """A worker broke its protocol or a cap: ``kind`` is the error kind of its job."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class Gone(Exception):
    """A worker's socket (its control socket, or its process's) is gone: it died."""


@dataclass(slots=True)
class Queued:
    """A job a worker holds but has not given to a process yet."""

    job: Job
    alone: bool  # sent back by a shared process: to be read in one of its own
    tools: dict[str, str]  # its tools as the worker runs them
    needs: int  # prepare messages its family needs applied in a fresh process

    @property
    def pure(self) -> bool:
        """Whether it may share a process (:mod:`bastion.readers.runtime.batch`)."""
        return self.job.reader in PURE_READERS and not self.alone


@dataclass(slots=True)
class Sent:
    """A job given to a document's process and not answered yet."""

    job: Job
    alone: bool
    seq: int  # its number in the worker: its scratch (job<seq>) and text (t<seq>.txt)
    text: Path  # the parent's file its text goes to
    out: int  # the parent's own descriptor of that file (until the answer is read)
    pure: bool
    md: Path | None = None  # the parent's file its Markdown goes to (a job that asks for it)
    md_out: int = -1  # the parent's own descriptor of that one

    def close(self, keep: bool = False) -> None:
        """Done with its files: the descriptors closed and (unless ``keep``) the files gone."""
        for fd in (self.out, self.md_out):
            if fd >= 0:
                os.close(fd)
        self.out = self.md_out = -1
        if not keep:
            _unlink(self.text)
            if self.md is not None:
                _unlink(self.md)


@dataclass(slots=True, eq=False)
class Child:
    """A document's process as the parent holds it: the socket its jobs go to, the pipe its
    answers come from, what it was given.  ``pure`` is None for a spare given nothing yet."""

    n: int
    gen: int  # prepare messages its zygote had applied when it forked it
    jobs: socket.socket
    answers: int
    buf: bytearray = field(default_factory=bytearray)
    pure: bool | None = None
    given: int = 0
    open: bool = True  # may be given more jobs (else its job socket is closed)
    eof: bool = False  # its answer pipe ended
    discarded: bool = False  # a spare the parent let go unused (its end is no surprise)
    scanned: int = 0  # bytes of ``buf`` known to hold no end of line

    def __post_init__(self) -> None:
        self.jobs.shutdown(socket.SHUT_RD)  # the parent only writes there: nothing comes back

    def shut(self) -> None:
        """No more jobs: it reads what it was given, answers, and ends."""
        if self.open:
            self.open = False
            self.jobs.close()

    def discard(self) -> None:
        """Let an unused spare go (it ends at once)."""
        self.discarded = True
        self.shut()

    def read(self) -> None:
        """Read what its answer pipe holds now (to its end, once every writer is gone)."""
        while not self.eof:
            try:
                data = os.read(self.answers, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.eof = True
                return
            self.buf += data
            if len(self.buf) > MAX_RESULT_LINE:
                return  # read no more: :meth:`lines` says whether there is a whole line

    def lines(self) -> Iterator[bytes]:
        """Its whole answer lines so far; :class:`Misbehaved` for one over the cap.  (Each
        byte is looked at once for an end of line, however the line came in pieces.)"""
        while True:
            at = self.buf.find(b"\n", self.scanned)
            if at < 0:
                self.scanned = len(self.buf)
                if len(self.buf) > MAX_RESULT_LINE:
                    raise Misbehaved("output_limit", OVER_CAP)
                return
            line = bytes(self.buf[:at])
            del self.buf[: at + 1]
            self.scanned = 0
            yield line

    def close(self) -> None:
        self.shut()
        try:
            os.close(self.answers)
        except OSError:
            pass


class Handout:
    """The jobs one worker holds (``queue``: not given; ``sent``: given to its process
    ``child``, unanswered) and the giving of them.  ``name`` names its text files; ``err``
    is the worker's stderr as kept (cleared when a job starts: what a death is told by)."""

    __slots__ = ("name", "err", "child", "queue", "sent", "seq", "since", "done",
                 "spare_deaths", "refused")

    def __init__(self, name: str, err: bytearray, now: float) -> None:
        self.name = name
        self.err = err
        self.child: Child | None = None  # the document's process forked last, until its end
        self.queue: deque[Queued] = deque()
        self.sent: deque[Sent] = deque()
        self.seq = 0  # jobs given
        self.since = now  # when its clock (due) last started
        self.done = 0  # jobs answered
        self.spare_deaths = 0
        self.refused: list[tuple[Job, str]] = []  # jobs no text file could be made for, and why

    @property
    def job(self) -> Job | None:
        """The job its process reads now, or will read first (None: it holds none)."""
        if self.sent:
            return self.sent[0].job
        return self.queue[0].job if self.queue else None

    def load(self) -> int:
        return len(self.sent) + len(self.queue)

    def free(self) -> bool:
        """Whether it holds no job (a process it keeps for pure documents takes any job)."""
        return not self.sent and not self.queue

    def takes_pure(self) -> bool:
        """Whether it may hold one more pure job behind those it holds: all its jobs are
        pure (its process is a shared one, or will be) and it holds fewer than the cap."""
        return (0 < self.load() < IN_FLIGHT and all(s.pure for s in self.sent)
                and all(q.pure for q in self.queue))

    def hold(self, job: Job, alone: bool, tools: dict[str, str], now: float) -> Queued:
        """Hold ``job``, to be given by :meth:`pump` (its ``needs`` set by the caller)."""
        if self.free():
            self.since = now  # until a process takes it: the spare's clock
        item = Queued(job, alone, tools, 0)
        self.queue.append(item)
        return item

    def pump(self, text_file: Callable[..., tuple[Path, int]], now: float) -> None:
        """Give its process the jobs it may take now: a spare one job alone (then it is
        shut), or pure jobs in messages of up to :data:`MSG_JOBS` (a shared process is shut
        at :data:`~bastion.readers.runtime.batch.BATCH_DOCS`, when a job that may not share
        it comes, and when its family came after it was forked).  ``text_file(worker, seq)``
        makes a text file.  A process whose socket is gone takes nothing more: its end
        will be reported."""
        while self.queue:
            child, head = self.child, self.queue[0]
            if child is None:
                break  # a spare comes
            if child.pure is None:
                if not child.open:
                    break
                if child.gen < head.needs:
                    child.discard()  # forked before its family was loaded: the next has it
                    break
                if not head.pure:
                    self._give(child, [self.queue.popleft()], False, text_file, now)
                    if child.given:
                        child.shut()  # one document, one process
                    elif child.open:
                        child.discard()  # no text file could be made for it: unused
                    break
                child.pure = True
            if not child.open or not child.pure:
                break
            if not head.pure or child.gen < head.needs:
                if not self.sent:
                    child.shut()  # the shared process ends: the next job gets a fresh one
                break
            if len(self.sent) >= REFILL:
                break  # it has enough to read; more when it answers
            room = min(MSG_JOBS, BATCH_DOCS - child.given)
            take: list[Queued] = []
            while self.queue and len(take) < room and self.queue[0].pure \
                    and child.gen >= self.queue[0].needs:
                take.append(self.queue.popleft())
            self._give(child, take, True, text_file, now)
            if child.given >= BATCH_DOCS:
                child.shut()

    def _give(self, child: Child, items: list[Queued], pure: bool,
              text_file: Callable[..., tuple[Path, int]], now: float) -> None:
        """Give ``child`` these jobs, each with its document's and its text file's descriptors
        (the document opened here, by the parent: :func:`open_document`; the text file's kept
        by its :class:`Sent` too), in messages of at most :data:`MSG_BYTES`; when its socket is
        gone, the jobs not given are held again."""
        given: list[tuple[dict[str, Any], int | None, Sent, Queued]] = []
        for item in items:
            self.seq += 1
            job = item.job
            md: tuple[Path | None, int] = (None, -1)
            try:
                text, out = text_file(self.name, self.seq)
                if job.markdown:  # its Markdown: a second file of the parent's, m<seq>.md
                    try:
                        md = text_file(self.name, self.seq, markdown=True)
                    except OSError:
                        os.close(out)
                        _unlink(text)
                        raise
            except OSError as e:  # the output's filesystem: the pool says so as its verdict
                self.refused.append((job, f"cannot write text: {e.strerror}"))
                continue
            message: dict[str, Any] = {
                "id": job.id, "seq": self.seq, "name": job.name, "mime": job.mime,
                "reader": job.reader, "sha256": job.sha256, "size": job.size,
                "tools": item.tools, "deadline": job.deadline_s, "pure": pure,
                "text": f"t{self.seq}.txt", "doc": None}
            if md[0] is not None:
                message["markdown"] = f"m{self.seq}.md"
            doc, why = open_document(job.path)
            if why is not None:
                message["open_error"] = why
            given.append((message, doc, Sent(job, item.alone, self.seq, text, out, pure, *md),
                          item))
        at = 0
        try:
            while at < len(given):
                batch, size = given[at:at + 1], _size(given[at][0])
                while at + len(batch) < len(given) and size < MSG_BYTES:
                    batch.append(given[at + len(batch)])
                    size += _size(batch[-1][0])
                jobs: list[dict[str, Any]] = []
                fds: list[int] = []
                for message, doc, sent, _ in batch:
                    message["out"] = len(fds)
                    fds.append(sent.out)
                    if sent.md_out >= 0:
                        message["md_out"] = len(fds)
                        fds.append(sent.md_out)
                    if doc is not None:
                        message["doc"] = len(fds)
                        fds.append(doc)
                    jobs.append(message)
                try:
                    child.jobs.sendmsg([json.dumps({"jobs": jobs}, ensure_ascii=True).encode()],
                                       [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))])
                except OSError:  # it is gone (its end will be reported): the jobs held again
                    for _, _, sent, _ in given[at:]:
                        sent.close()
                    self.queue.extendleft(reversed([item for *_, item in given[at:]]))
                    child.shut()
                    return
                at += len(batch)
                if not self.sent:
                    self.since = now  # the first job's clock starts
                    self.err.clear()
                self.sent.extend(sent for _, _, sent, _ in batch)
                child.given += len(batch)
        finally:
            for _, doc, _, _ in given:
                if doc is not None:
                    os.close(doc)

    def answered(self, now: float) -> Sent:
        """The job its process answered (the first it holds): its clock ends, the next's starts."""
        done = self.sent.popleft()
        self.done += 1
        self.since = now
        if self.sent:
            self.err.clear()
        return done

    def answers(self) -> Iterator[bytes]:
        """A shared process's whole answer lines, as they come (:class:`Misbehaved` for one
        over the cap); a lone process's wait for its end (:meth:`ending`)."""
        child = self.child
        assert child is not None
        if child.pure:
            yield from child.lines()
        elif len(child.buf) > MAX_RESULT_LINE:
            raise Misbehaved("output_limit", OVER_CAP)

    def ending(self, n: int, status: int) -> list[bytes]:
        """The zygote reports its process ``n`` ended with ``status`` and every process it
        left gone: the answer lines to take now, all of them read (a lone process's only when
        it exited 0; its job then is answered or failed by :meth:`ended`).  :class:`Misbehaved`
        when that is not its process, or what it wrote is not whole lines."""
        child = self.child
        if child is None or child.n != n:
            raise Misbehaved("worker", "reader worker broke the protocol")
        child.read()  # all of it: every writer is gone
        if len(child.buf) > MAX_RESULT_LINE:
            raise Misbehaved("output_limit", OVER_CAP)
        if not child.eof:
            raise Misbehaved("worker", "a document's process left its answer pipe open")
        lines = list(child.lines())
        if child.buf:  # a line without its end
            raise Misbehaved("worker", "reader worker broke the protocol")
        return lines if child.pure or status == 0 else []

    def ended(self, now: float) -> tuple[Sent | None, list[Sent], bool]:
        """Its process's end, once its answers are taken: the channel is closed, a new spare
        comes.  Returns the job it was reading and did not answer (its end is that job's
        error), the jobs it was given and never started (to be held again), and whether it
        was a spare that died of itself (the worker cannot fork one: :data:`SPARE_DEATHS`)."""
        child = self.child
        assert child is not None
        self.child = None
        child.close()
        self.since = now  # a job it holds waits for the next spare
        if not child.given and not child.discarded:
            self.spare_deaths += 1
            return None, [], self.spare_deaths >= SPARE_DEATHS
        self.spare_deaths = 0
        dead = self.answered(now) if self.sent else None
        again = list(self.sent)
        self.sent.clear()
        return dead, again, False

    # -- the clock --------------------------------------------------------------------------------

    def due(self) -> float | None:
        """When its clock is up: its first job's deadline while it holds one given; a
        spare's while it holds jobs not given; a shared process's end once it has answered
        all; None when idle."""
        if self.sent:
            return self.since + self.sent[0].job.deadline_s
        if self.queue:
            return self.since + STARTUP_DEADLINE_S
        child = self.child
        if child is not None and child.given and not child.open:
            return self.since + LINGER_S
        return None

    def overdue(self, now: float) -> tuple[str, str] | None:
        """(error kind, message) when its clock is up: for the job it reads, or the one it
        holds; ("", reason) when no job is to blame (a shared process that does not end)."""
        due = self.due()
        if due is None or now < due:
            return None
        if self.sent:
            return "timeout", f"extraction timed out after {self.sent[0].job.deadline_s:g} s"
        if self.queue:
            return "crash", "reader worker forked no process for it"
        return "", "a document's process did not end"


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


def _size(message: dict[str, Any]) -> int:
    """About the bytes of a job in a message (no need to encode it twice)."""
    return 300 + len(message["name"]) * 6 + sum(len(k) + len(v) + 8
                                                 for k, v in message["tools"].items())


def _unlink(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
