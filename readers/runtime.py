"""The reader runtime: the only module that starts child processes.

Two kinds of child:

* **Workers** (:class:`WorkerPool`): long-lived Python processes (``python -I -m
  readers.worker``) that each read many documents, so no interpreter starts per file.  The
  parent gives each document a deadline, a cap on the bytes of text handed back and a memory
  cap (``RLIMIT_AS``, set by the worker as its first act); a worker past a limit is killed with
  its whole process group and replaced.  See ``docs/architecture.md``.
* **Tools** (:func:`run_tool`): ``pdftotext``, ``pdftoppm``, ``tesseract`` started by a reader
  inside a worker, in a session of their own, with a deadline and an output cap, killed with
  their process group and always reaped.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from pathlib import Path
from typing import IO

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
) -> ToolResult:
    """Run an external tool in its own session with a deadline and an output cap.

    ``input`` is given through a file in ``input_dir`` (or an anonymous temp file), so a large
    input never dead-locks against the output pipe.  On the deadline the tool and anything it
    started is killed and :class:`ToolFailed` (kind ``timeout``) raised; output beyond
    ``max_output`` kills it too and comes back ``truncated``.  The child is always reaped.
    """
    import tempfile

    stdin: IO[bytes] | int = subprocess.DEVNULL
    tmp = None
    if input is not None:
        tmp = tempfile.TemporaryFile(dir=input_dir)
        tmp.write(input)
        tmp.seek(0)
        stdin = tmp
    name = os.path.basename(argv[0])
    try:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=CHILD_ENV,
                cwd=str(cwd) if cwd else None,
                close_fds=True,
                start_new_session=True,
            )
        except OSError as e:
            raise ToolFailed(f"{name} could not start: {e.strerror or e}") from None
        try:
            out, err, truncated, timed_out = _drain(
                proc, time.monotonic() + timeout, max_output, max_stderr
            )
        except BaseException:
            kill_group(proc)
            raise
        if timed_out or truncated:
            kill_group(proc)
        else:
            try:
                proc.wait(timeout=max(0.1, timeout))
            except subprocess.TimeoutExpired:
                kill_group(proc)
                timed_out = True
        # Anything the tool started and left behind goes with its group.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if timed_out:
            raise ToolFailed(f"{name} timed out after {timeout:g} s", kind="timeout")
        return ToolResult(proc.returncode, out, err, truncated)
    finally:
        if tmp is not None:
            tmp.close()


class LocalContext:
    """A reader context for one document: limits, allowed tools, a private scratch dir.

    The worker builds one per document; tests build one to call a reader directly.
    """

    def __init__(
        self, limits: Limits | None = None, tools: dict[str, str] | None = None,
        tmpdir: Path | None = None, deadline: float | None = None,
    ) -> None:
        import tempfile

        self.limits = limits or Limits()
        self.tools = dict(tools or {})
        self.tmpdir = Path(tmpdir) if tmpdir else Path(tempfile.mkdtemp(prefix="bastion-"))
        # monotonic time by which the whole document must be done; tools get what is left
        self.deadline = deadline if deadline is not None else (
            time.monotonic() + self.limits.tool_deadline_s
        )
        self.depth = 0

    def time_left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def run_tool(
        self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None,
        max_output: int | None = None,
    ) -> ToolResult:
        limit = self.time_left() if timeout is None else min(timeout, self.time_left())
        return run_tool(
            argv, input=input, timeout=limit,
            max_output=max_output if max_output is not None else self.limits.max_output_bytes,
            max_stderr=self.limits.stderr_bytes, cwd=self.tmpdir, input_dir=self.tmpdir,
        )

    def read_nested(self, data: bytes, name: str, sink: TextSink) -> str:
        from .dispatch import read_nested

        return read_nested(self, data, name, sink)
