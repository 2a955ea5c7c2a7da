"""The sandbox a reader worker enters as its first act: limits, private I/O, no root, Landlock, seccomp."""

from __future__ import annotations

import os
import signal
import socket
import stat
from pathlib import Path
from typing import Any, Callable

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
# Where such a worker's scratch is: a tmpfs of its own, mounted in its mount namespace over this
# empty directory (made by the pool), capped in bytes, reachable by no other process on the host
SCRATCH_DIR = Path("/run/bastion-scratch")

# Landlock filesystem rights: reading (and executing) a file, listing a directory
_LL_EXECUTE, _LL_READ_FILE, _LL_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_LL_READ_RIGHTS = _LL_EXECUTE | _LL_READ_FILE | _LL_READ_DIR
_LL_FILE_RIGHTS = _LL_EXECUTE | _LL_READ_FILE | (1 << 1) | (1 << 14)  # what a file's rule takes
# and the rights that change the filesystem
_LL_WRITE_FILE = 1 << 1
_LL_WRITE_RIGHTS_V1 = (
    (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)
    | (1 << 11) | (1 << 12)
)
_LL_REFER = 1 << 13  # ABI 2
_LL_TRUNCATE = 1 << 14  # ABI 3
_LL_NET_ALL = (1 << 0) | (1 << 1)  # ABI 4: bind and connect TCP
_LL_SCOPE_ALL = (1 << 0) | (1 << 1)  # ABI 6: abstract unix sockets and signals of other domains
_MS_RDONLY, _MS_REC = 1, 16384

# What every document's process may read besides its scratch, the interpreter, bastion and its
# environment's packages, and the tools (and their data) its jobs name: the system's programs,
# libraries and shared data, what the dynamic loader, fontconfig and ``mimetypes`` read,
# ``/proc`` (other processes' memory, descriptors and environment stay behind ptrace's rules)
# and the harmless devices.  Nothing else of the host: no home, no output store, no ``/etc``
# beyond these, no ``/tmp``, no ``/srv``, no mount of the user's (docs/security.md).
SYSTEM_READ = (
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/mime.types", "/etc/fonts", "/etc/alternatives", "/var/cache/fontconfig",
    "/proc", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
    "/sys/devices/system/cpu",
)
_PR_CAPBSET_DROP, _PR_SET_DUMPABLE = 24, 4

# The most processes (threads count) one worker slot's uid may have at once: the slot's uid is
# its own (:mod:`bastion.readers.runtime.identity`), so RLIMIT_NPROC counts that slot alone
MAX_PROCS = 256


def landlock_restrict(writable: list[Path]) -> int:
    """Forbid every filesystem change outside ``writable`` and all TCP, with Landlock.

    Returns the Landlock ABI used, or 0 where the kernel has none (then the worker relies on
    its private working directory and the file-size limit alone; docs/architecture.md says so).
    """
    abi, ruleset = landlock_ruleset(writable)
    if ruleset is not None:
        try:
            landlock_enforce(ruleset)
        finally:
            os.close(ruleset)
    return abi


def landlock_ruleset(writable: list[Path], readable: list[str] | None = None,
                     ) -> tuple[int, int | None]:
    """(Landlock ABI, a ruleset's descriptor) allowing filesystem changes only in ``writable``
    and no TCP; (0, None) where the kernel has no Landlock.  With ``readable``, reading,
    listing and executing too are allowed only beneath ``writable`` and ``readable`` (a
    path that does not exist is left out; a file's rule covers that file alone).  Made once,
    it can be enforced by many processes (:func:`landlock_enforce`: the zygote makes it, each
    document's child enforces it, one system call)."""
    import ctypes

    lib = libc()
    syscall = lib.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0, None
    fs, net, scoped = _handled(abi, reading=readable is not None)

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    attr = RulesetAttr(fs, net, scoped)
    size = 24 if scoped else 16 if net else 8
    ruleset = syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                      ctypes.c_uint32(0))
    if ruleset < 0:
        return 0, None
    try:
        rules: list[tuple[str, int]] = [(str(p), fs) for p in writable]
        rules.append(("/dev/null", _LL_WRITE_FILE | (_LL_TRUNCATE if abi >= 3 else 0)
                      | (_LL_READ_FILE if readable is not None else 0)))
        rules += [(p, _LL_READ_RIGHTS) for p in readable or ()]
        for path, rights in rules:
            optional = path != "/dev/null" and readable is not None and (path, fs) not in rules
            _add_rule(syscall, ruleset, path, rights, fs, optional)
    except BaseException:
        os.close(ruleset)
        raise
    os.set_inheritable(ruleset, False)
    return int(abi), int(ruleset)


def _handled(abi: int, reading: bool) -> tuple[int, int, int]:
    """The (filesystem, network, scope) rights a ruleset of Landlock ``abi`` handles: every
    change (and with ``reading``, reading, listing and executing), TCP, and the scopes."""
    fs = _LL_WRITE_RIGHTS_V1 | (_LL_READ_RIGHTS if reading else 0)
    if abi >= 2:
        fs |= _LL_REFER
    if abi >= 3:
        fs |= _LL_TRUNCATE
    return fs, _LL_NET_ALL if abi >= 4 else 0, _LL_SCOPE_ALL if abi >= 6 else 0


def _add_rule(syscall: Any, ruleset: int, path: str, rights: int, fs: int,
              optional: bool) -> None:
    """Allow ``rights`` (of the handled ``fs``) beneath ``path`` in ``ruleset``; a file takes
    only file rights; an ``optional`` path this host has not (/lib32, a tool's absent data)
    is left out."""
    import ctypes

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        if not optional:
            raise
        return
    try:
        allowed = rights & fs
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            allowed &= _LL_FILE_RIGHTS
        rule = PathBeneath(allowed, fd)
        if syscall(_SYS_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_add_rule")
    finally:
        os.close(fd)


def prepared_enforce(ruleset: int | None) -> Callable[[], None]:
    """A function that restricts the process calling it by ``ruleset`` and closes it (what
    each document's process does first): the C library's functions resolved now, once, in
    the zygote, so that the child's part is two system calls.  Without a ruleset (no
    Landlock here), a function that does nothing."""
    if ruleset is None:
        return lambda: None
    import ctypes

    lib = libc()
    prctl, syscall = lib.prctl, lib.syscall
    syscall.restype = ctypes.c_long

    def enforce() -> None:
        prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        os.close(ruleset)

    return enforce


class DocumentRules:
    """The Landlock ruleset each document's process enforces as it starts (made by the
    zygote): it may change files only in ``scratch``, and read, list or run only what
    reading needs — :data:`SYSTEM_READ`, ``readable`` (the interpreter, bastion, the
    environment's packages) and the tools and tool data the parent's prepare messages name
    (:meth:`add_tools`: the ruleset is made again when one names a path it did not cover,
    before the next process is forked).  :meth:`enforce` is what the child calls."""

    def __init__(self, scratch: Path, readable: list[str]) -> None:
        self.scratch = scratch
        self.readable = covering([*SYSTEM_READ, *readable])
        self.tools: list[str] = []
        self.abi, self._ruleset = landlock_ruleset([scratch], self.readable)
        self._enforce = prepared_enforce(self._ruleset)

    def add_tools(self, paths: list[str]) -> None:
        """Let the processes forked from now on read ``paths`` too (tools, their data)."""
        new = [p for p in paths if p and os.path.isabs(p)
               and not any(_beneath(p, q) for q in (*self.readable, *self.tools))]
        if not new or self._ruleset is None:
            return
        self.tools = covering([*self.tools, *new])
        os.close(self._ruleset)
        self.abi, self._ruleset = landlock_ruleset([self.scratch], [*self.readable, *self.tools])
        self._enforce = prepared_enforce(self._ruleset)

    def enforce(self) -> None:
        self._enforce()


def _beneath(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def covering(paths: list[str]) -> list[str]:
    """``paths`` (each as written and as its links lead), without those beneath another."""
    forms = sorted({f for p in paths if p for f in (os.path.abspath(p), os.path.realpath(p))})
    out: list[str] = []
    for path in forms:  # sorted: a directory comes before what is beneath it
        if not any(_beneath(path, q) for q in out):
            out.append(path)
    return out


def landlock_enforce(ruleset: int) -> None:
    """Restrict this process (and all it will start) by the ruleset ``ruleset``."""
    import ctypes

    lib = libc()
    lib.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    lib.syscall.restype = ctypes.c_long
    if lib.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")


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


def reachable(path: str, uid: int, gid: int, need: int = 5) -> bool:
    """Whether ``uid``/``gid`` (no other group) has the ``need`` bits on ``path`` (r-x: list
    a directory; --x: run a file) and may pass every directory above it, both along the
    path as written and along the one its symlinks lead to, by the permission bits (ACLs
    are not read)."""
    return all(passable(p, uid, gid, need)
               for p in {os.path.abspath(path), os.path.realpath(path)})


def passable(path: str, uid: int, gid: int, need: int) -> bool:
    while True:
        try:
            st = os.stat(path)
        except OSError:
            return False
        bits = (st.st_mode >> 6 if st.st_uid == uid else
                st.st_mode >> 3 if st.st_gid == gid else st.st_mode) & 7
        if bits & need != need:
            return False
        if path == "/":
            return True
        path, need = os.path.dirname(path), 1


def mount_scratch(path: Path, size: int, uid: int, gid: int) -> Path:
    """Mount a tmpfs of ``size`` bytes over ``path`` (``nosuid``, ``nodev``; mode 0700, owned
    by ``uid``/``gid``) in this worker's own mount namespace: its scratch, which no process
    outside the namespace sees, and which cannot outgrow ``size`` (``ENOSPC``).  Needs root
    in that namespace (before :func:`drop_privileges`)."""
    _mount("tmpfs", str(path), "tmpfs", _MS_NOSUID | _MS_NODEV,
           f"size={size},nr_inodes=65536,mode=0700,uid={uid},gid={gid}")
    return path


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    import ctypes

    lib = libc()
    lib.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                          ctypes.c_void_p]
    if lib.mount(None if source is None else os.fsencode(source), os.fsencode(target),
                 None if fstype is None else fstype.encode(), flags,
                 None if data is None else data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source or fstype} on {target}: {os.strerror(err)}")


def blocking_ancestor(path: str, uid: int, gid: int) -> str | None:
    """The topmost directory above ``path`` that ``uid``/``gid`` may not pass, or None."""
    parts = Path(path).parts
    for i in range(2, len(parts)):
        above = str(Path(*parts[:i]))
        if not passable(above, uid, gid, 1):
            return above
    return None


def build_view(paths: list[str], uid: int, gid: int) -> list[str]:
    """Make each of ``paths`` reachable by ``uid``/``gid`` in this process's own mount
    namespace, at the same path, read-only: a directory it may not pass (``/root`` for a
    pyenv interpreter) gets a small read-only tmpfs over it, and under it only ``paths``,
    bound back from the host's tree (``nosuid``, ``nodev``).  Everything else there is
    hidden.  Needs root in a private mount namespace (the worker's, made by ``unshare``).
    Returns the directories covered."""
    by_top: dict[str, list[str]] = {}
    for path in paths:
        top = blocking_ancestor(path, uid, gid)
        if top is not None:
            by_top.setdefault(top, []).append(path)
    for top, under in by_top.items():
        # keep the outermost of nested paths; open each before the tmpfs hides it
        keep = [p for p in sorted(set(under))
                if not any(p != q and Path(p).is_relative_to(q) for q in under)]
        held = [(p, os.open(p, os.O_PATH | os.O_CLOEXEC)) for p in keep]
        try:
            _mount("tmpfs", top, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                   "mode=0755,size=64k,nr_inodes=1024")
            for path, fd in held:
                is_dir = os.path.isdir(f"/proc/self/fd/{fd}")
                os.makedirs(path if is_dir else os.path.dirname(path), mode=0o755,
                            exist_ok=True)
                if not is_dir:
                    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
                _mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
                _mount(None, path, None,
                       _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
            _mount(None, top, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID
                   | _MS_NODEV | _MS_NOEXEC)
        finally:
            for _, fd in held:
                os.close(fd)
    return sorted(by_top)


def drop_privileges(uid: int, gid: int, max_procs: int = MAX_PROCS) -> None:
    """Become ``uid``/``gid`` for good (real, effective and saved), with no supplementary
    group, no capability (the bounding set emptied first, so no ``execve`` brings one
    back), at most ``max_procs`` processes of that uid, and not dumpable; raises OSError if
    anything of root is left."""
    import resource

    lib = libc()
    last = _last_cap()
    for cap in range(last + 1):
        lib.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    resource.setrlimit(resource.RLIMIT_NPROC, (max_procs, max_procs))
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    lib.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) \
            or os.getgroups():
        raise OSError(f"could not give up root for uid {uid}")
    caps = capabilities()
    if any(caps.get(k) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")):
        raise OSError(f"capabilities left after giving up root: {caps}")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def capabilities(pid: int | str = "self") -> dict[str, int]:
    """The capability sets of a process (``/proc/<pid>/status``), as integers."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key.startswith("Cap"):
                out[key] = int(value.strip(), 16)
    return out


def enter_sandbox(tmpdir: Path, limits: Limits, user: tuple[int, int] | None = None,
                  view: list[str] | tuple[str, ...] = (), scratch: Path | None = None,
                  ) -> tuple[socket.socket, int, bool]:
    """Called by a worker before it reads anything: limits, private I/O, no root, Landlock,
    seccomp.

    * ``RLIMIT_AS`` = ``limits.memory_bytes``; ``RLIMIT_FSIZE`` = the output cap (a larger
      write fails with EFBIG: SIGXFSZ is ignored); no core dumps.
    * The control socket (fd 0: :mod:`bastion.readers.runtime.zygote`'s messages) moves to a
      private descriptor; fd 0 and 1 become ``/dev/null`` so a reader that prints or reads
      stdin cannot corrupt a protocol.
    * ``user`` (uid, gid): gives up root for that uid (its slot's own), with no
      supplementary group, no capability, at most :data:`MAX_PROCS` processes, not dumpable
      (:func:`drop_privileges`), after making ``view`` (the interpreter, bastion's modules)
      reachable to it in its own mount namespace (:func:`build_view`; ``tmpdir`` is its
      own, bound by :func:`bind_worker_dir`).
    * Dies with its parent (``PR_SET_PDEATHSIG``, set again after the change of user, which
      clears it).
    * Landlock: no filesystem change outside ``scratch`` (``tmpdir`` without one), no TCP, no
      abstract unix socket or signal outside its own domain (ABI 6).
    * seccomp (:mod:`bastion.readers.runtime.seccomp`): no socket, no namespace, no tracing.

    Returns (the control socket, Landlock ABI or 0, whether the seccomp filter is loaded).
    """
    import resource

    from . import seccomp

    mark_in_worker()
    set_parent_death_signal()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    fsize = limits.max_output_bytes + (1 << 20)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    control_fd = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.set_inheritable(control_fd, False)
    os.chdir(tmpdir)
    if user is not None:
        build_view(list(view), *user)
        drop_privileges(*user)
        set_parent_death_signal()
    abi = landlock_restrict([scratch if scratch is not None else tmpdir])
    filtered = seccomp.install()
    return socket.socket(fileno=control_fd), abi, filtered
