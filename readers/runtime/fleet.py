"""The pool's workers and what they say: started, watched, retired; what happened, as outcomes.

A :class:`Fleet` is the mechanism under :class:`bastion.readers.runtime.pool.WorkerPool`: it
starts workers (:meth:`Fleet.spawn`), lets one hold a job and give it to its process
(:meth:`Fleet.assign`), watches every control socket, stderr pipe and answer pipe with one
selector (:meth:`Fleet.poll`), acts on the zygotes' messages and the processes' answers by
the protocol (:mod:`bastion.readers.runtime.zygote`, :mod:`bastion.readers.runtime.workermain`),
and kills a worker past its clock or its protocol with every process it started.  What came
of each job it reports in :attr:`Fleet.out` for the pool to act on: a result (called back
after the next job is given out), a job to give again (first), or a job failed (called back
at once).  Which worker holds which job is the pool's choice.
"""

from __future__ import annotations

import os
import selectors
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bastion.errors import WorkerError

from ..base import Limits
from .answers import Answers, JobResult
from .handout import Gone, Misbehaved, Queued, Sent
from .identity import SlotUsers
from .job import Job
from .verdict import Verdict
from .worker import StartError, ToolPaths, Worker, first_line, precompile_readers

@dataclass(frozen=True, slots=True)
class Outcome:
    """What came of a job: a ``result`` (called back after the next job is given out), a
    ``failed`` one (called back now), or one to give ``again`` (``alone``: to a process of
    its own), first."""

    kind: str  # "result" | "failed" | "again"
    job: Job
    result: JobResult | None = None
    alone: bool = False


@dataclass(frozen=True, slots=True)
class Policy:
    """How a fleet starts and keeps its workers, fixed for the pool's life (but for the
    readers put first, which a test seam may change for the workers started after)."""

    limits: Limits
    tmp_root: Path  # where the workers' directories and the texts' files go
    recycle_after: int  # documents a worker reads before another takes its place
    rss_limit: int  # the peak memory past which a shared process takes no more documents
    extra_readers: tuple[str, ...]  # reader modules put before the registry's (tests)
    contain: str  # how a worker holds its descendants (procs.py)


class Fleet:
    """The workers of one pool, one selector over all they say, and the outcomes of jobs."""

    def __init__(self, limits: Limits, tmp_root: Path, *, recycle_after: int, rss_limit: int,
                 extra_readers: tuple[str, ...], contain: str, user: SlotUsers | None) -> None:
        self.policy = Policy(limits, tmp_root, recycle_after, rss_limit, extra_readers, contain)
        self.user = user  # the slots' uids, taken by a worker for its life
        # the answers read, and the texts' files (the pool's own)
        self.answers = Answers(tmp_root / f"s{os.getpid()}", limits)
        self.tools = ToolPaths(user.sample if user else None)  # as the workers run them
        self.identity: dict[str, Any] | None = None  # a worker's, measured from /proc
        self.workers: list[Worker] = []
        self.sel = selectors.DefaultSelector()
        self.seq = 0
        self.spawned = self.killed = 0  # workers started; jobs failed by a death or a kill
        self.out: list[Outcome] = []

    def spawn(self) -> Worker:
        if not self.spawned:
            precompile_readers()
        self.seq += 1
        policy = self.policy
        wdir, ids = policy.tmp_root / f"w{os.getpid()}-{self.seq}", None
        try:
            ids = None if self.user is None else self.user.take()
            worker = Worker.start(wdir, policy.limits, user=ids,
                                  extra_readers=policy.extra_readers, contain=policy.contain,
                                  tool_view=self.tools.view)
        except (OSError, StartError) as e:
            if ids is not None and self.user is not None:
                self.user.give(ids)
            raise WorkerError(f"cannot start a reader worker: {e}") from None
        self.sel.register(worker.control, selectors.EVENT_READ, (worker, None))
        self.sel.register(worker.stderr, selectors.EVENT_READ, (worker, "err"))
        self.workers.append(worker)
        self.spawned += 1
        return worker

    def assign(self, w: Worker, job: Job, alone: bool) -> None:
        """Let ``w`` hold ``job`` and give it to its process as soon as it may (a new worker
        in place of a free ``w`` whose view lacks a hidden tool path: :meth:`ToolPaths.widen`)."""
        tools = self.tools(job.tools)
        if self.tools.widen(tools, w.launch.view) and w.hand.free():
            self.retire(w)
            w = self.spawn()
        try:
            w.assign(job, alone, tools, time.monotonic())
        except Gone:
            self._on_death(w)
            return
        self.pump(w)

    def pump(self, w: Worker) -> None:
        """Let ``w`` give its process what it may take now."""
        if w not in self.workers:
            return
        w.pump(self.answers.text_file, time.monotonic())
        for job, why in w.hand.refused:
            self.out.append(Outcome("failed", job, JobResult(job=job, verdict=Verdict.failed(
                "internal", why))))
        w.hand.refused.clear()

    def retire(self, w: Worker, *, again: bool = True) -> None:
        """Stop a worker (idle, dead or to be killed) and forget it; the jobs it held go back
        to the queue, first (``again``)."""
        hand = w.hand
        watched: list[Any] = [w.control, w.stderr]
        if hand.child is not None:
            watched.append(hand.child.answers)
        for fileobj in watched:
            try:
                self.sel.unregister(fileobj)
            except (KeyError, ValueError):
                pass
        held = [(s.job, s.alone) for s in hand.sent] + [(q.job, q.alone) for q in hand.queue]
        for s in hand.sent:
            self.answers.discard(s)
        hand.sent.clear()
        hand.queue.clear()
        w.stop()  # it and all it started are gone: its uid is free for the next one
        if w.user is not None and self.user is not None:
            self.user.give(w.user)
        if w in self.workers:
            self.workers.remove(w)
        if again:
            self.out.extend(Outcome("again", job, alone=alone) for job, alone in held)

    def close(self) -> None:
        for w in list(self.workers):
            self.retire(w, again=False)
        self.sel.close()
        self.answers.remove()

    def poll(self, timeout: float | None) -> None:
        """Wait for what the workers say (at most ``timeout``; None: until the first clock is
        up) and act on it; then fail what is overdue."""
        due = [t for t in (w.due() for w in self.workers) if t is not None]
        if timeout is None and due:
            timeout = max(0.0, min(due) - time.monotonic())
        for key, _ in self.sel.select(timeout):
            w, what = key.data
            if w not in self.workers:
                continue
            if what is None:
                self._on_control(w)
            elif what != "err":
                if what is w.hand.child:
                    self._on_answers(w)
            else:
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    w.keep_stderr(data, self.policy.limits.stderr_bytes)
                else:
                    self.sel.unregister(key.fileobj)
        now = time.monotonic()
        for w in list(self.workers):
            late = w.overdue(now)
            if late is not None:
                self._fail(w, *late, held=True)

    def _on_control(self, w: Worker) -> None:
        try:
            for event in w.receive():
                if event[0] == "ready":
                    w.on_ready(event[1])
                    self.identity = w.identity or self.identity  # checked at its ready message
                elif event[0] == "child":  # a spare, one at a time: its channel is ours
                    if w.hand.child is not None or not w.ready:
                        event[1].close()
                        raise Misbehaved("worker", "reader worker broke the protocol")
                    w.hand.child = event[1]
                    w.forked = event[1].gen
                    self.sel.register(event[1].answers, selectors.EVENT_READ, (w, event[1]))
                else:
                    self._on_exit(w, event[1], event[2])
                if w not in self.workers:
                    return
        except Gone:
            self._on_death(w)
            return
        except Misbehaved as e:
            self._fail(w, e.kind, e.message)
            return
        self.pump(w)

    def _on_answers(self, w: Worker) -> None:
        """What ``w``'s process wrote: a shared process's answers are taken as they come; a
        lone process's once it has ended (:meth:`_on_exit`)."""
        child = w.hand.child
        assert child is not None
        child.read()
        if child.eof:
            self.sel.unregister(child.answers)
        try:
            for line in w.hand.answers():
                self._answer(w, line)
                if w not in self.workers:
                    return
        except Misbehaved as e:
            self._fail(w, e.kind, e.message)
            return
        self.pump(w)

    def _on_exit(self, w: Worker, n: int, status: int) -> None:
        """``w``'s zygote reports its process ``n`` ended, everything it left gone: its
        answers are taken, the job it did not answer is failed by its end, the jobs it was
        given and never started are held again; :class:`Misbehaved` as the protocol says."""
        child = w.hand.child
        if child is not None and not child.eof:
            self.sel.unregister(child.answers)
        for line in w.hand.ending(n, status):
            self._answer(w, line)
            if w not in self.workers:
                return
        dead, again, stuck = w.hand.ended(time.monotonic())
        if stuck:  # the job it holds is failed, lest it go from worker to worker for ever
            self._fail(w, "crash", "reader worker's processes die before any job"
                       + (f" (status {status})" if not w.err else ""), held=True)
            return
        if dead is not None:
            self._end_job(dead, *w.child_death(status, self.policy.limits.stderr_bytes))
        for s in again:
            self.answers.discard(s)
            self.out.append(Outcome("again", s.job, alone=s.alone))
        if w.hand.done >= self.policy.recycle_after:
            self.retire(w)

    def _answer(self, w: Worker, line: bytes) -> None:
        """One answer line of ``w``'s process, for the first job it holds."""
        if not w.hand.sent:
            raise Misbehaved("worker", "reader worker answered a job it was not given")
        result, msg = self.answers.result(w.hand.sent[0], line)
        head = w.hand.answered(time.monotonic())
        if result is None:  # a pure job that needs a process of its own: read again, alone
            w.hand.done -= 1
            self.out.append(Outcome("again", head.job, alone=True))
            return
        self.out.append(Outcome("result", result.job, result))  # called back after the next
        rss = msg.get("rss") or 0
        if (msg.get("fatal") or rss > self.policy.rss_limit) and w.hand.child is not None:
            w.hand.child.shut()  # a shared process that ran out of memory takes no more

    # -- failures -------------------------------------------------------------------------------

    def _on_death(self, w: Worker) -> None:
        """``w``'s control socket ended: the job it read is failed by its death (or, none
        given, the first it held, when the zygote died loading its family); the others go
        back to the queue."""
        queue = w.hand.queue
        self._blame(w, *w.death(self.policy.limits.stderr_bytes),
                    held=bool(queue) and queue[0].needs > w.forked)

    def _fail(self, w: Worker, kind: str, message: str, *, held: bool = False) -> None:
        """Kill a worker (with everything it started) and fail the job it read (``held``: or
        the first it holds, given to no process yet; none when ``kind`` is empty)."""
        w.killed = message
        w.read_stderr(self.policy.limits.stderr_bytes)
        stderr = first_line(bytes(w.err))
        self._blame(w, kind, f"{message}: {stderr}" if kind == "crash" and stderr else message,
                    held=held)

    def _blame(self, w: Worker, kind: str, message: str, *, held: bool = False) -> None:
        """Retire ``w``: the job its process was reading gets an error (or, when it never
        became ready or ``held`` says so, the first job it held); every other job it held
        goes back to the queue."""
        culprit: Sent | Queued | None = None
        if kind and w.hand.sent:
            culprit = w.hand.answered(time.monotonic())
        elif kind and w.hand.queue and (held or not w.ready):
            culprit = w.hand.queue.popleft()
        self.retire(w)
        if culprit is not None:
            self._end_job(culprit, kind, message)

    def _end_job(self, culprit: Sent | Queued, kind: str, message: str) -> None:
        if isinstance(culprit, Sent):
            self.answers.discard(culprit)
        self.killed += 1
        self.out.append(Outcome("failed", culprit.job, JobResult(
            job=culprit.job, verdict=Verdict.failed(kind, message))))
