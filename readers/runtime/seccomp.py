"""The seccomp filters: the worker's (no new socket, no namespace, no tracing, no mount, nothing
newer than this table), and a stricter one each document's process stacks on it.

Classic BPF programs, written here by hand and loaded with ``seccomp(SECCOMP_SET_MODE_FILTER,
SECCOMP_FILTER_FLAG_TSYNC)``: on every thread of the process at once (a thread started before
the filter is filtered too), and inherited by every process it starts, across ``execve``
(``PR_SET_NO_NEW_PRIVS`` is set).  Why by hand and not with libseccomp's binding
(``pyseccomp``, a ctypes wrapper of the system's libseccomp2): see docs/security.md
("seccomp").

What the **worker's** filter (:func:`install`, the zygote's; every document's process inherits
it) denies (``EPERM``; a reader sees an ordinary error, the document an ordinary record):

* any other architecture's calls (the x32 ABI on x86_64 included): the process is killed;
* every call numbered past :data:`LAST_REVIEWED`, the last this table was reviewed against
  (Linux 6.14's ``removexattrat``): ``ENOSYS``, as a kernel without them answers, so that a
  call added by a later kernel (``open_tree_attr``, 467, a mount-API call that returned a
  descriptor) is denied until it is reviewed, and the C library falls back;
* ``socket`` of any family, ``socketpair`` of any family but ``AF_UNIX``, ``bind``,
  ``listen``, ``connect``, ``accept``/``accept4``: the worker reads its jobs on the socket
  the pool handed it and creates none;
* ``io_uring_*``: its operations (``IORING_OP_SOCKET``, ``CONNECT``…) bypass this filter;
* ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``, ``kcmp``;
* ``mount`` and the new mount API (``statmount``/``listmount`` too), ``umount2``,
  ``pivot_root``, ``chroot``, ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*``
  flag (``clone3``, whose flags a filter cannot read, answers ``ENOSYS`` so the C library
  falls back to ``clone``);
* ``keyctl``, ``add_key``, ``request_key``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``open_by_handle_at``, ``name_to_handle_at``, ``fanotify_init``, the module and ``kexec``
  calls, ``swapon/off``, ``reboot``, ``acct``, ``quotactl``, ``syslog``, ``vhangup``,
  ``iopl``, ``ioperm``, ``uselib``;
* ``ioctl`` ``TIOCSTI`` (type into a terminal) and ``TIOCLINUX``;
* ``prctl`` ``PR_SET_NAME`` and ``PR_SET_MM``: a process cannot rename itself in
  ``/proc/<pid>/comm`` nor move its ``cmdline`` area (``/proc`` as a channel: the worker is
  started with an argv that leaves no room, docs/security.md).

What a **document's process** (:func:`document_program`, stacked on the worker's when the
zygote forks it) is denied besides: the Landlock calls (its domain is set before the filter; it
makes no ruleset, as the zygote does), and ``kill(-1, …)``, every process it may signal at once
(the zygote's sweep as PID 1 of the worker's namespace, never a document's).

Only x86_64 has its table here; elsewhere :func:`install` returns False and the worker's
identity says ``seccomp: 0`` (the namespace and Landlock layers still hold).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct
from typing import Callable

_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# BPF opcodes (linux/filter.h)
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

# offsets in struct seccomp_data: nr, arch, instruction pointer, args[6] (u64, little-endian)
_NR, _ARCH = 0, 4


def _arg_low(i: int) -> int:
    return 16 + 8 * i


# x86_64 numbers (arch/x86/entry/syscalls/syscall_64.tbl)
X86_64 = {
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "clone": 56, "kill": 62, "ioctl": 16, "accept4": 288, "ptrace": 101, "syslog": 103,
    "uselib": 134, "vhangup": 153, "pivot_root": 155, "prctl": 157, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435, "pidfd_getfd": 438,
    "mount_setattr": 442, "landlock_create_ruleset": 444, "landlock_add_rule": 445,
    "landlock_restrict_self": 446, "statmount": 457, "listmount": 458,
}
# The last call number this table was reviewed against (removexattrat, Linux 6.14): every
# call numbered past it is denied with ENOSYS until it is reviewed
LAST_REVIEWED = 466

DENIED = (
    "socket", "connect", "accept", "accept4", "bind", "listen",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "statmount",
    "listmount", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "syslog", "vhangup", "iopl", "ioperm", "uselib",
)
# what a document's process is denied besides (its filter, stacked on the worker's)
DOCUMENT_DENIED = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")
AF_UNIX = 1
CLONE_NEW_ANY = 0x7E020080  # NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
PR_SET_NAME, PR_SET_MM = 15, 35
_SYS_SECCOMP = 317
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arch_check() -> list[bytes]:
    """Kill a call of any other architecture or ABI (x32); leave the call's number loaded."""
    return [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _NR),
        _insn(_JGE_K, 0, 1, _X32_BIT),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
    ]


def _deny(numbers: list[int], deny: int) -> list[bytes]:
    out = []
    for nr in numbers:  # each: if nr == N return the denial
        out.append(_insn(_JEQ_K, 0, 1, nr))
        out.append(_insn(_RET_K, 0, 0, deny))
    return out


def _arg_is(nr: int, arg: int, values: tuple[int, ...], deny: int) -> list[bytes]:
    """If the call is ``nr`` and the low word of argument ``arg`` is one of ``values``:
    ``deny``; if it is ``nr`` otherwise: allow; else on to the next check."""
    n = len(values)
    out = [_insn(_JEQ_K, 0, n + 3, nr), _insn(_LD_W_ABS, 0, 0, _arg_low(arg))]
    for i, value in enumerate(values):  # a match jumps to the denial, after the others
        out.append(_insn(_JEQ_K, n - i, 0, value))
    out += [_insn(_RET_K, 0, 0, _RET_ALLOW), _insn(_RET_K, 0, 0, deny)]
    return out


def program(table: dict[str, int] = X86_64) -> bytes:
    """The worker's filter (``struct sock_filter[]``) for x86_64."""
    deny = _RET_ERRNO | errno.EPERM
    out = _arch_check()
    out += [  # past the reviewed table: ENOSYS, as a kernel without the call answers
        _insn(_JGE_K, 0, 1, LAST_REVIEWED + 1),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    out += _deny([table[name] for name in DENIED], deny)
    out += [  # clone3: ENOSYS, so that the C library falls back to clone
        _insn(_JEQ_K, 0, 1, table["clone3"]),
        _insn(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    out += [  # socketpair: AF_UNIX only
        _insn(_JEQ_K, 0, 4, table["socketpair"]),
        _insn(_LD_W_ABS, 0, 0, _arg_low(0)),
        _insn(_JEQ_K, 1, 0, AF_UNIX),
        _insn(_RET_K, 0, 0, deny),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    out += [  # clone: no new namespace
        _insn(_JEQ_K, 0, 4, table["clone"]),
        _insn(_LD_W_ABS, 0, 0, _arg_low(0)),
        _insn(_JSET_K, 0, 1, CLONE_NEW_ANY),
        _insn(_RET_K, 0, 0, deny),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    out += _arg_is(table["ioctl"], 1, (TIOCSTI, TIOCLINUX), deny)  # no typing into a tty
    out += _arg_is(table["prctl"], 0, (PR_SET_NAME, PR_SET_MM), deny)  # no word in /proc
    out.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(out)


def document_program(table: dict[str, int] = X86_64) -> bytes:
    """The filter a document's process stacks on the worker's (``struct sock_filter[]``)."""
    deny = _RET_ERRNO | errno.EPERM
    out = _arch_check()
    out += _deny([table[name] for name in DOCUMENT_DENIED], deny)
    out += _arg_is(table["kill"], 0, (0xFFFFFFFF,), deny)  # kill(-1, …): every process
    out.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(out)


def supported() -> bool:
    return platform.machine() == "x86_64"


def install() -> bool:
    """Load the worker's filter into every thread of this process (and so into all it will
    start); False where this architecture has no table.  Raises OSError when the kernel
    refuses the filter, or a thread could not be synchronised."""
    if not supported():
        return False
    prepared(program())()
    return True


def prepared(code: bytes) -> Callable[[], None]:
    """A function that loads the filter ``code`` into every thread of the process calling
    it (``PR_SET_NO_NEW_PRIVS`` first): its buffers and the C library's function made now,
    once, so that the caller's part is two system calls (each document's process: the
    zygote prepares, the child loads)."""
    count = len(code) // 8

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = SockFprog(count, code)
    lib = ctypes.CDLL(None, use_errno=True)
    prctl, syscall = lib.prctl, lib.syscall
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                      ctypes.c_ulong]
    syscall.restype = ctypes.c_long
    flags = ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC)

    def load() -> None:
        prctl(38, 1, None, 0, 0)  # PR_SET_NO_NEW_PRIVS (a filter needs it without CAP_SYS_ADMIN)
        rc = syscall(ctypes.c_long(_SYS_SECCOMP), ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                     flags, ctypes.byref(prog))
        if rc != 0:  # -1 and errno; or the id of a thread that could not be synchronised
            raise OSError(ctypes.get_errno() if rc < 0 else 0,
                          "cannot load the seccomp filter"
                          + (f" on thread {rc}" if rc > 0 else ""))

    return load
