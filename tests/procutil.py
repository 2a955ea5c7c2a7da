"""/proc helpers shared by the tests that check for leaked or surviving processes."""

from __future__ import annotations

import os
from pathlib import Path


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
