"""/proc helpers shared by the tests that check for leaked or surviving processes."""

from __future__ import annotations

import os
import threading
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
    """Live reader workers of the run writing to ``out`` (their config names its directory)."""
    return [pid for pid in pids_with(str(out)) if _is_worker(pid)]


def _is_worker(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"bastion.readers.runtime.workermain" in f.read()
    except OSError:
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
