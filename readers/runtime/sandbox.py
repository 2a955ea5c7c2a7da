"""The sandbox a reader worker enters as its first act: limits, private I/O, no root, Landlock."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import IO

from ..base import Limits
from .procs import libc, mark_in_worker, set_parent_death_signal

_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 2, 4, 8, 32, 4096

# Where a worker that gives up root sees its own directory: bound, in its own mount namespace,
# over this empty directory (made by the pool), so the path to it needs no permission on the
# output's private directories and the bind hides nothing of the host's (once /tmp: a checkout
# or a virtualenv under /tmp vanished from the worker's view)
WORKER_DIR = Path("/run/bastion-worker")

# Landlock filesystem rights that change the filesystem (reading and executing stay allowed).
_LL_WRITE_FILE = 1 << 1
_LL_WRITE_RIGHTS_V1 = (
    (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)
    | (1 << 11) | (1 << 12)
)
_LL_REFER = 1 << 13  # ABI 2
_LL_TRUNCATE = 1 << 14  # ABI 3
_LL_NET_ALL = (1 << 0) | (1 << 1)  # ABI 4: bind and connect TCP


def landlock_restrict(writable: list[Path]) -> int:
    """Forbid every filesystem change outside ``writable`` and all TCP, with Landlock.

    Returns the Landlock ABI used, or 0 where the kernel has none (then the worker relies on
    its private working directory and the file-size limit alone; docs/architecture.md says so).
    """
    import ctypes

    lib = libc()
    syscall = lib.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs = _LL_WRITE_RIGHTS_V1
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
    net = _LL_NET_ALL if abi >= 4 else 0

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(fs, net)
    size = ctypes.sizeof(RulesetAttr) if net else 8
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if ruleset < 0:
        return 0
    try:
        rules: list[tuple[str, int]] = [(str(p), fs) for p in writable]
        rules.append(("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0)))
        for path, rights in rules:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                if os.path.isdir(path):
                    allowed = rights
                else:  # a file takes only file rights
                    allowed = rights & (_LL_WRITE_FILE | _LL_TRUNCATE)
                rule = PathBeneath(allowed, fd)
                if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) < 0:
                    raise OSError(ctypes.get_errno(), "landlock_add_rule")
            finally:
                os.close(fd)
        lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return int(abi)


def bind_worker_dir(host_dir: str) -> Path:
    """Bind ``host_dir`` over :data:`WORKER_DIR` (``nosuid``, ``nodev``, ``noexec``) in this
    worker's mount namespace; returns :data:`WORKER_DIR`.  Needs root in that namespace, so it
    comes before :func:`drop_privileges`; the namespace's propagation is private (unshare's
    default), so the host never sees the mount."""
    import ctypes

    lib = libc()
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                          ctypes.c_void_p]
    target = os.fsencode(WORKER_DIR)
    if lib.mount(os.fsencode(host_dir), target, None, _MS_BIND, None) != 0:
        raise OSError(ctypes.get_errno(), f"cannot bind {host_dir} over {WORKER_DIR}")
    flags = _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if lib.mount(None, target, None, flags, None) != 0:
        raise OSError(ctypes.get_errno(), f"cannot remount {WORKER_DIR} noexec")
    return WORKER_DIR


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` for good (real, effective and saved), with no supplementary
    group; raises OSError if anything of root is left."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) \
            or os.getgroups():
        raise OSError(f"could not give up root for uid {uid}")


def enter_sandbox(tmpdir: Path, limits: Limits,
                  user: tuple[int, int] | None = None) -> tuple[socket.socket, IO[bytes], int]:
    """Called by a worker before it reads anything: limits, private I/O, Landlock.

    * ``RLIMIT_AS`` = ``limits.memory_bytes``; ``RLIMIT_FSIZE`` = the output cap (a larger
      write fails with EFBIG: SIGXFSZ is ignored); no core dumps.
    * The protocol moves to private descriptors (jobs: the socket on fd 0, each job one
      message with the document's descriptor; results: the pipe on fd 1); fd 0 and 1 become
      ``/dev/null`` so a reader that prints or reads stdin cannot corrupt the protocol.
    * ``user`` (uid, gid): gives up root for that user, with no supplementary group
      (:func:`drop_privileges`; ``tmpdir`` is its own, bound by :func:`bind_worker_dir`).
    * Dies with its parent (``PR_SET_PDEATHSIG``, set again after the change of user, which
      clears it).
    * Landlock: no filesystem change outside ``tmpdir``, no TCP.

    Returns (jobs in, results out, landlock ABI or 0).
    """
    import resource

    mark_in_worker()
    set_parent_death_signal()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    fsize = limits.max_output_bytes + (1 << 20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    jobs_fd = os.dup(0)
    results_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.set_inheritable(jobs_fd, False)
    os.set_inheritable(results_fd, False)
    os.chdir(tmpdir)
    if user is not None:
        drop_privileges(*user)
        set_parent_death_signal()
    abi = landlock_restrict([tmpdir])
    return socket.socket(fileno=jobs_fd), os.fdopen(results_fd, "wb", buffering=0), abi
