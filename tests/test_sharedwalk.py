"""bastion.tasks.walk.shared: one share per owner, helpers forked, results back as plain data."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from bastion.tasks.walk import shared as sharedwalk
from bastion.tasks.walk.shared import HelperFailed, share


def test_every_owner_once_in_owner_order_owner_zero_here() -> None:
    parent = os.getpid()

    def walk_share(owner: int):
        return [owner, os.getpid() == parent, os.getppid() == parent, b"\x00" * owner]

    results = list(share(3, walk_share))
    assert [o for o, _ in results] == [0, 1, 2]
    assert results[0][1] == [0, True, False, b""]  # owner 0 runs in this process
    for owner, (got, here, child, payload) in results[1:]:  # the others in forked children
        assert got == owner and not here and child and payload == b"\x00" * owner


def test_one_owner_forks_nothing(monkeypatch) -> None:
    monkeypatch.setattr(sharedwalk.os, "fork", lambda: (_ for _ in ()).throw(AssertionError))
    assert list(share(1, lambda owner: ("alone", owner))) == [(0, ("alone", 0))]


def test_failed_helpers_are_reported_not_raised(tmp_path: Path) -> None:
    parent = os.getpid()

    def walk_share(owner: int):
        if os.getpid() == parent:
            return "parent"
        if owner == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # killed mid-walk
        if owner == 2:
            raise RuntimeError("a bug in the helper")  # exits 1, sends nothing
        if owner == 3:
            return object()  # not plain data: marshal refuses it
        return {"ok": owner}

    results = dict(share(5, walk_share))
    assert results[0] == "parent" and results[4] == {"ok": 4}
    for owner in (1, 2, 3):
        assert isinstance(results[owner], HelperFailed), owner
    assert "status 9" in str(results[1])
    assert "status 256" in str(results[2])  # the raw wait status of exit code 1


def test_helpers_leave_no_process_behind() -> None:
    pids: list[int] = []
    real_fork = os.fork

    def fork() -> int:
        pid = real_fork()
        if pid:
            pids.append(pid)
        return pid

    sharedwalk.os.fork = fork
    try:
        list(share(3, lambda owner: owner))
    finally:
        sharedwalk.os.fork = real_fork
    assert len(pids) == 2
    for pid in pids:  # reaped by share(): no zombie left to wait for
        try:
            os.waitpid(pid, os.WNOHANG)
            raise AssertionError(f"helper {pid} not reaped")
        except ChildProcessError:
            pass
