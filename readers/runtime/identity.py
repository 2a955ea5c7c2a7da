"""Who a worker is: its slot's own unprivileged uid, and its identity as the parent measures it.

Run as root, each worker slot of a pool runs as a uid (and gid) of its own, taken from
:data:`SLOT_BASE` upwards: no account has it, no other process on the host shares it (another
pool, another bastion, a Dask worker's pools: each slot is held by an ``flock`` on
``/run/bastion/slots/<uid>.lock`` for the life of its pool), so ``RLIMIT_NPROC`` counts that
slot alone and no other process can reach its files or its ``/proc`` entries as their owner.
``/run/bastion`` and ``slots/`` are root's, ``0755``, checked before each use
(:func:`slots_dir`).

:func:`measure` reads a worker's identity from the host's ``/proc/<pid>`` — never from what
the worker says: its uids and gids, its capability sets, ``NoNewPrivs``, its seccomp mode,
which namespaces it does not share with the pool.  The extract stage records it in
``extract.summary.json``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Any

SLOT_BASE = 0x7A000000  # 2046820352: past every distribution's ranges for accounts and containers
SLOT_COUNT = 1 << 16
LOCKS = Path("/run/bastion/slots")
NAMESPACES = ("mnt", "net", "pid", "ipc", "uts", "user")


class SlotUsers:
    """The uids of one pool's worker slots: :meth:`take` one for a worker that starts,
    :meth:`give` it back when that worker (and all it started) is gone.  With ``fixed``
    (an account named by the caller), every worker runs as that one."""

    def __init__(self, fixed: tuple[int, int] | None = None) -> None:
        self.fixed = fixed
        self._free: list[int] = []  # uids held by this pool, no worker on them now
        self._held: dict[int, int] = {}  # uid -> its lock file's descriptor

    @property
    def sample(self) -> tuple[int, int]:
        """A uid and gid as its workers' (what one of them may read, the others may)."""
        return self.fixed or (SLOT_BASE, SLOT_BASE)

    def take(self) -> tuple[int, int]:
        if self.fixed is not None:
            return self.fixed
        if self._free:
            uid = self._free.pop()
        else:
            uid = self._lock_one()
        return uid, uid

    def give(self, ids: tuple[int, int]) -> None:
        if self.fixed is None and ids[0] in self._held and ids[0] not in self._free:
            self._free.append(ids[0])

    def close(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()
        self._free.clear()

    def _lock_one(self) -> int:
        slots = slots_dir()
        try:
            for uid in range(SLOT_BASE, SLOT_BASE + SLOT_COUNT):
                if uid in self._held:
                    continue
                fd = _lock_file(slots, uid)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[uid] = fd
                return uid
        finally:
            os.close(slots)
        raise OSError(f"no free worker uid in {SLOT_BASE}..{SLOT_BASE + SLOT_COUNT - 1}")


def slots_dir() -> int:
    """A descriptor of :data:`LOCKS` (``/run/bastion/slots``), each of its two directories
    made ``0755`` whatever the umask and checked before use, through descriptors, as the
    output directory is: a directory (not a symbolic link), owned by this process's user
    (root).  One of ours that is writable by group or others (``/run/bastion`` made under
    umask 0 by an earlier bastion) is narrowed to ``0755`` first; anything else — a link, a
    directory of another user's (a co-user who replaced ``slots/``) — is refused with
    OSError, in one line: root never creates lock files where someone else chose."""
    top = LOCKS.parent
    fd = os.open(top.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for path in (top, LOCKS):
            parent, fd = fd, _own_dir(fd, path)
            os.close(parent)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _own_dir(parent: int, path: Path) -> int:
    """``path`` (a name in the directory ``parent``) opened, made when missing (0755)."""
    try:
        os.mkdir(path.name, 0o755, dir_fd=parent)
    except FileExistsError:
        pass
    try:
        fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent)
    except OSError as e:
        try:
            link = stat.S_ISLNK(os.lstat(path.name, dir_fd=parent).st_mode)
        except OSError:
            link = False
        why = ("it is a symbolic link" if link else "it is not a directory"
               if e.errno == errno.ENOTDIR else e.strerror)
        raise OSError(f"refusing {path}: {why}") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.geteuid():
            raise OSError(f"refusing {path}: owned by uid {st.st_uid}, not by uid "
                          f"{os.geteuid()} (remove it)")
        if stat.S_IMODE(st.st_mode) != 0o755:
            os.fchmod(fd, 0o755)  # ours: 0755 whatever the umask, or an earlier bastion's
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lock_file(slots: int, uid: int) -> int:
    """The lock file of ``uid`` in the directory ``slots``: a regular file of ours (0600),
    never followed through a link."""
    name = f"{uid}.lock"
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
                     | os.O_NONBLOCK, 0o600, dir_fd=slots)
    except OSError as e:
        raise OSError(f"refusing {LOCKS / name}: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        os.close(fd)
        raise OSError(f"refusing {LOCKS / name}: not a lock file of ours")
    if stat.S_IMODE(st.st_mode) != 0o600:
        os.fchmod(fd, 0o600)
    return fd


def measure(pid: int) -> dict[str, Any]:
    """A process's identity from the host's ``/proc/<pid>`` (OSError once it is gone)."""
    status: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            status[key] = value.strip()
    uids = [int(x) for x in status["Uid"].split()]
    gids = [int(x) for x in status["Gid"].split()]
    own = [ns for ns in NAMESPACES if _ns(pid, ns) != _ns(os.getpid(), ns)]
    return {
        "uid": uids[0], "uids": uids, "gid": gids[0], "gids": gids,
        "groups": [int(x) for x in status.get("Groups", "").split()],
        "cap_eff": int(status["CapEff"], 16), "cap_prm": int(status["CapPrm"], 16),
        "cap_bnd": int(status["CapBnd"], 16), "cap_amb": int(status.get("CapAmb", "0"), 16),
        "no_new_privs": status.get("NoNewPrivs") == "1",
        "seccomp": int(status.get("Seccomp", "0")),
        "namespaces": own,
    }


def _ns(pid: int, name: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{name}")
    except OSError:
        return None


def dropped(identity: dict[str, Any] | None) -> bool:
    """Whether that identity (measured) holds no uid 0 and no capability at all."""
    return (identity is not None and 0 not in identity["uids"]
            and not any(identity[k] for k in ("cap_eff", "cap_prm", "cap_bnd", "cap_amb")))
