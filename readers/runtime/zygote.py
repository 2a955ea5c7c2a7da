"""One document, one process: the worker forks a child per document and sweeps up after it.

The worker process itself is a *zygote*: it enters the sandbox, imports the reader families
its jobs name and loads their engines (the warm libtesseract), but never reads a document.
For each job it forks a child (:func:`read_in_child`) that inherits the sandbox, narrows it
(a second Landlock domain: it may write only in its scratch; its text goes to a descriptor the
zygote opened), reads the document and writes its answer on a pipe of its own, then exits.
The zygote reads that answer to its end, reaps the child, kills every process the document
left (``kill(-1)`` from PID 1 of the worker's PID namespace; elsewhere the tree under it) and
forwards the answer unparsed when it is one line of JSON, else reports the child's end itself
(a line starting ``!``).  Nothing a document did — module state, hooks, ``atexit``, files,
children — survives into the next one: the next child is forked from the untouched zygote.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
from pathlib import Path
from typing import Any, Callable

# what the zygote reads of one child's answer (as the pool's cap on a result line)
MAX_ANSWER = 32 << 20


def clear(directory: Path, keep: str | None = None) -> None:
    """Remove everything in ``directory`` (but ``keep``): what the last document left."""
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if name == keep:
            continue
        path = directory / name
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


def read_in_child(job_id: int, work: Callable[[], dict[str, Any]],
                  close_in_child: tuple[int, ...], narrow: Callable[[], None],
                  pid1: bool) -> bytes:
    """Fork a child that runs ``narrow()`` then ``work()`` and writes the answer it returns;
    returns the line the pool gets: the child's answer, or the zygote's report of its end.
    The child closes ``close_in_child`` (the zygote's job socket and result pipe) first."""
    r, w = os.pipe()
    gc.freeze()  # what the zygote holds: the child's collector leaves it (and its pages) alone
    pid = os.fork()
    if pid == 0:  # the child: one document, then gone
        code = 70
        try:
            os.close(r)
            for fd in close_in_child:
                os.close(fd)
            from .procs import set_parent_death_signal

            set_parent_death_signal()  # it dies with the zygote
            narrow()
            answer = json.dumps(work(), ensure_ascii=True, separators=(",", ":")).encode()
            view = memoryview(answer + b"\n")
            while view:
                view = view[os.write(w, view):]
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc(limit=3)
        finally:
            os._exit(code)
    os.close(w)
    data, over = _read_all(r)
    status = _wait(pid)
    sweep(pid1)
    if over:
        return report(job_id, "over", status)
    if status == 0 and data[:1] == b"{" and data.endswith(b"\n") and data.count(b"\n") == 1:
        return data
    return report(job_id, "died" if status != 0 else "malformed", status)


def report(job_id: int, reason: str, status: int) -> bytes:
    return b"!" + json.dumps({"id": job_id, "reason": reason, "status": status}).encode() + b"\n"


def _read_all(fd: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks), False
            size += len(chunk)
            if size > MAX_ANSWER:
                return b"", True
            chunks.append(chunk)
    finally:
        os.close(fd)


def _wait(pid: int) -> int:
    """The child's end as ``Popen.returncode`` says it (negative: the signal)."""
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


# The one exception to one process per document: plain-text documents (the ``text`` family:
# decoding in pure Python, no native parser) share a child for up to BATCH_DOCS documents in a
# row.  Measured in docs/performance.md; the batch ends at BATCH_DOCS, at the first document of
# any other family, and when its child misbehaves, and every process it started dies then.
BATCH_READERS = frozenset({"text"})
BATCH_DOCS = 64


class Batch:
    """A child that reads plain-text documents one after another, handed them by the zygote
    over a socket (the job, the document's and the text's descriptors)."""

    def __init__(self, work: Callable[[dict[str, Any], int | None, int], dict[str, Any]],
                 close_in_child: tuple[int, ...], narrow: Callable[[], None]) -> None:
        import socket

        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        r, w = os.pipe()
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                os.close(r)
                self.sock.close()
                for fd in close_in_child:
                    os.close(fd)
                from .procs import set_parent_death_signal

                set_parent_death_signal()
                narrow()
                _serve(theirs, w, work)
                code = 0
            except BaseException:
                import traceback

                traceback.print_exc(limit=3)
            finally:
                os._exit(code)
        theirs.close()
        os.close(w)
        self.pid, self.answers, self.count = pid, r, 0
        self.malformed = False  # its last answer was not one line of JSON

    def read(self, job: dict[str, Any], doc_fd: int | None, text_fd: int) -> bytes | None:
        """Its answer to ``job`` (one line), or None when it ended without one (then the
        batch is over: :meth:`end` says how)."""
        import socket
        from array import array

        self.count += 1
        fds = [fd for fd in (text_fd, doc_fd) if fd is not None]
        try:
            self.sock.sendmsg([json.dumps(job).encode()],
                              [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))])
        except OSError:
            return None
        data = b""
        while not data.endswith(b"\n"):
            chunk = os.read(self.answers, 1 << 20)
            if not chunk:
                return None
            if len(data) + len(chunk) > MAX_ANSWER:
                self.malformed = True
                return None
            data += chunk
        if data[:1] != b"{" or data.count(b"\n") != 1:
            self.malformed = True
            return None
        return data

    def ended(self, job_id: int, pid1: bool) -> bytes:
        """The zygote's report on ``job_id``, whose answer did not come: the batch is over."""
        status = self.end(pid1)
        if self.malformed:
            return report(job_id, "malformed", status)
        return report(job_id, "died" if status != 0 else "malformed", status)

    def end(self, pid1: bool) -> int:
        """Close it, reap it and everything it started; its exit status."""
        self.sock.close()
        os.close(self.answers)
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        status = _wait(self.pid)
        sweep(pid1)
        return status


def _serve(sock: Any, answers: int, work: Callable[[dict[str, Any], int | None, int],
                                                   dict[str, Any]]) -> None:
    """A batch child's loop: a job, its answer, until the zygote closes the socket."""
    import socket
    from array import array

    room = socket.CMSG_SPACE(2 * array("i").itemsize)
    while True:
        line, ancillary, _, _ = sock.recvmsg(1 << 20, room, socket.MSG_CMSG_CLOEXEC)
        if not line:
            return
        fds = array("i")
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        text_fd, doc_fd = fds[0], (fds[1] if len(fds) > 1 else None)
        try:
            answer = json.dumps(work(json.loads(line), doc_fd, text_fd), ensure_ascii=True,
                                separators=(",", ":")).encode() + b"\n"
        finally:
            os.close(text_fd)
        view = memoryview(answer)
        while view:
            view = view[os.write(answers, view):]
