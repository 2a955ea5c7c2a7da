"""Running an external tool: a deadline, an output cap, the kill of its process group, a reap.

Readers run ``pdftotext``, ``pdftoppm`` and ``tesseract`` through :func:`run_tool` (or
:class:`RunningTool`, its two-step form); the process itself is started by
:func:`bastion.readers.runtime.procs.start_tool`.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Callable

from ..base import ToolResult
from ..errors import ToolFailed
from .procs import kill_group, start_tool, wait_exit


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
        try:
            self.proc = start_tool(argv, stdin, str(cwd) if cwd else None)
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
            elif not wait_exit(proc, max(0.1, self.deadline - time.monotonic())):
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
