"""/proc helpers shared by the tests that check for leaked or surviving processes."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead: this VM's pid 1 never reaps)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2:].split()[0] not in (b"Z", b"X")


def pids_with(token: str | bytes) -> list[int]:
    """Running processes whose command line holds ``token``."""
    needle = token.encode() if isinstance(token, str) else token
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if needle in cmd and alive(int(entry)):
            found.append(int(entry))
    return found


def workers_of(out: Path) -> list[int]:
    """Live reader workers of the run writing to ``out``: their keepers (``unshare``, working
    in the worker's directory), the workers and their documents' processes.  A worker has no
    argument and no environment and blanks its command line (issue 41), so it is known by
    where it works: its directory under ``out`` (its working directory, or, for one that gave
    up root and sees it as ``/run/bastion-worker``, the bind mount in its mount namespace)."""
    token = str(out)
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or not alive(int(entry)):
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv0 = f.read().split(b"\0", 1)[0]
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        keeper = os.path.basename(argv0) in (b"unshare", b"setpriv")
        if (keeper or argv0 == b"") and (cwd.startswith(token) or
                                         (argv0 == b"" and _binds(int(entry), token))):
            found.append(int(entry))
    return found


def _binds(pid: int, token: str) -> bool:
    """Whether a directory under ``token`` is bound in ``pid``'s mount namespace."""
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return any(line.split()[3].startswith(token) for line in f)
    except (OSError, IndexError):
        return False


def before_a_writer(fifo: Path, call: Callable[[], T], give_up: float = 60.0) -> T:
    """``call()``'s result, and proof that it returned before anything opened ``fifo`` to
    write: a call that blocks waiting for a writer is let go, after ``give_up`` seconds, by a
    writer, and the test fails (a causal check, not a bound on how fast the call is)."""
    returned = threading.Event()
    writer_came = threading.Event()

    def watchdog() -> None:
        if not returned.wait(give_up):
            writer_came.set()
            os.close(os.open(fifo, os.O_WRONLY))  # lets a blocked open go on

    dog = threading.Thread(target=watchdog, daemon=True)
    dog.start()
    try:
        result = call()
    finally:
        returned.set()
        dog.join()
    assert not writer_came.is_set(), f"{fifo}: the call waited for a writer"
    return result


def eventually(cond: Callable[[], bool], what: str, give_up: float = 60.0) -> None:
    """Wait until ``cond()`` holds (a killed process gone, a file there) and fail with ``what``
    if it never does.  ``give_up`` is a net against a hang, not a bound on how soon: what is
    waited for is caused by something that already happened (a kill sent, a file's writer
    started), and what it guards against (a survivor of a 1000 s sleep) lasts far longer."""
    end = time.monotonic() + give_up
    while not cond():
        assert time.monotonic() < end, f"{what} (still so after {give_up:g} s)"
        time.sleep(0.02)


def bytes_read() -> int:
    """The bytes this process has read so far, by any thread (``rchar`` of /proc/self/io:
    from files, pipes and the page cache alike)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("rchar:")).split()[1])
