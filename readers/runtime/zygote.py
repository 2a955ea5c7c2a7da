"""The zygote: it forks each document's process ahead of need, and never sees what one reads or says.

The worker process is a *zygote* (:func:`bastion.readers.runtime.workermain.main` makes it
one): it has entered the sandbox, imports the reader families the parent names and loads
their engines (the warm libtesseract), and from then on only forks.  It keeps one *spare*
child forked ahead while the slot is idle: a process that has narrowed its sandbox (a second
Landlock domain: it may write only in the scratch) and waits on a channel of its own to the
parent, made by the zygote for it alone — a ``SOCK_SEQPACKET`` socket for its jobs (each with
the document's descriptor and the text file's) and a pipe for its answers.  The zygote hands
the parent's ends to the parent (``SCM_RIGHTS``) and closes them: the parent gives the child
its job and reads its answer directly, and no job line, name, metadata, text or answer ever
passes through, or stays in, the process every later child is forked from.

When the child ends, the zygote reaps it, kills every process it left (``kill(-1)`` from PID
1 of the worker's PID namespace; elsewhere the tree under it), clears the scratch, tells the
parent, and only then forks the next spare.  So no process of one document lives in the
next one's time, and each is forked from the zygote as the one before it was: nothing a
document did — module state, hooks, ``atexit``, files, descriptors, memory — reaches the next.

Its control messages, one JSON object per ``SOCK_SEQPACKET`` message on the worker's fd 0::

    zygote -> parent  {"ready": true, "contained": …, "pid": …, "landlock": …, "seccomp": …}
                      {"child": n, "gen": g}   + [job socket, answer pipe]: a spare, forked
                                               after the zygote had applied g prepare messages
                      {"exit": n, "status": s} child n ended (s as Popen's returncode), every
                                               process it left is gone, the scratch is clear
    parent -> zygote  {"prepare": {"reader": name | null, "mime": type | null, "tools": {…}}}
                                               load a reader family (and its engines) for the
                                               children forked from now on
                      end of file: stop

What passes between the parent and a child is :mod:`bastion.readers.runtime.workermain`'s.
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import socket
import traceback
from array import array
from pathlib import Path
from typing import Any, Callable

MAX_CONTROL = 1 << 16  # bytes of one control message (a prepare names a family and tools)


def clear(directory: Path) -> None:
    """Remove everything in ``directory``: what the last document left."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = directory / name
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


def wait(pid: int) -> int:
    """Reap ``pid``; its end as ``Popen.returncode`` says it (negative: the signal)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def sweep(pid1: bool) -> None:
    """Kill and reap every process left in this worker but itself.  PID 1 of a PID namespace
    sends ``SIGKILL`` to all the others in one call (only there: elsewhere ``kill(-1)`` would
    reach every process this uid may signal); a subreaper kills the tree under it."""
    if pid1 and os.getpid() == 1:
        try:
            os.kill(-1, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    else:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):  # children still running
                from .procs import kill_descendants

                kill_descendants(os.getpid(), tree=True)
        except ChildProcessError:
            return
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


class _Spare:
    """The zygote's one child: its number, pid and pidfd (readable once it has exited)."""

    __slots__ = ("n", "pid", "pidfd")

    def __init__(self, n: int, pid: int, pidfd: int | None) -> None:
        self.n, self.pid, self.pidfd = n, pid, pidfd


class Zygote:
    """The fork loop: one spare child at a time, its end reported, the next forked at once
    (the first once the parent has named a family to load: every job's family is named).

    ``child_main(jobs, answers)`` is what a child runs, after ``narrow()``, with its end of
    the job socket and the write end of its answer pipe; ``prepare(spec)`` loads what a
    prepare message names.  ``pid1``: this process is PID 1 of the worker's PID namespace
    (the sweep is ``kill(-1)``)."""

    def __init__(self, control: socket.socket, *, child_main: Callable[[socket.socket, int], None],
                 prepare: Callable[[dict[str, Any]], None], narrow: Callable[[], None],
                 scratch: Path, pid1: bool) -> None:
        self.control = control
        self.child_main = child_main
        self.prepare = prepare
        self.narrow = narrow
        self.scratch = scratch
        self.pid1 = pid1
        self.gen = 0  # prepare messages applied
        self.count = 0  # children forked
        self.child: _Spare | None = None

    def send(self, msg: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))] if fds else []
        self.control.sendmsg([json.dumps(msg).encode()], anc)

    def run(self) -> None:
        """Until the parent closes the control socket."""
        waiter = select.poll()
        waiter.register(self.control.fileno(), select.POLLIN)
        try:
            while True:
                if not self.commands():
                    return
                if self.child is None and self.gen:  # (the first spare once a family is named)
                    self.fork()
                child = self.child
                if child is None:
                    waiter.poll()
                    continue
                if child.pidfd is not None:
                    waiter.register(child.pidfd, select.POLLIN)
                try:
                    ready = {fd for fd, _ in waiter.poll(None if child.pidfd is not None else 50)}
                finally:
                    if child.pidfd is not None:
                        waiter.unregister(child.pidfd)
                if child.pidfd in ready or (child.pidfd is None and _exited(child.pid)):
                    self.ended()
        finally:
            if self.child is not None:
                try:
                    os.kill(self.child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                wait(self.child.pid)
                sweep(self.pid1)

    def commands(self) -> bool:
        """Apply the parent's pending messages (without waiting); False once it has closed."""
        while True:
            try:
                data, _, flags, _ = self.control.recvmsg(MAX_CONTROL, 0, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return True
            if not data:
                return False
            if flags & socket.MSG_TRUNC:
                os._exit(2)  # not the pool's protocol: the pool sees this worker die
            msg = json.loads(data)
            spec = msg.get("prepare") if isinstance(msg, dict) else None
            if not isinstance(spec, dict):
                os._exit(2)
            self.prepare(spec)
            self.gen += 1

    def fork(self) -> None:
        """Fork the next spare and hand its channel's parent ends to the parent."""
        jobs, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        gc.freeze()  # what the zygote holds: the child's collector leaves it (and its pages) alone
        pid = os.fork()
        if pid == 0:  # the child: its channel, its sandbox, its documents, then gone
            code = 70
            try:
                self.control.close()
                jobs.close()
                os.close(r)
                from .procs import set_parent_death_signal

                set_parent_death_signal()  # it dies with the zygote
                self.narrow()
                self.child_main(theirs, w)
                code = 0
            except BaseException:
                traceback.print_exc(limit=3)
            finally:
                os._exit(code)
        theirs.close()
        os.close(w)
        try:
            pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pidfd = None  # no pidfd here (an old kernel): polled
        self.count += 1
        self.child = _Spare(self.count, pid, pidfd)
        try:
            self.send({"child": self.count, "gen": self.gen}, (jobs.fileno(), r))
        finally:
            jobs.close()
            os.close(r)

    def ended(self) -> None:
        """The child has exited: reap it, sweep what it left, clear the scratch, report."""
        child = self.child
        assert child is not None
        self.child = None
        if child.pidfd is not None:
            os.close(child.pidfd)
        status = wait(child.pid)
        sweep(self.pid1)
        clear(self.scratch)
        self.send({"exit": child.n, "status": status})


def _exited(pid: int) -> bool:
    """Whether a child (watched without a pidfd) has exited; not reaped here."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
