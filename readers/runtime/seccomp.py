"""The seccomp filter a worker loads last: no new socket, no namespace, no tracing, no mount.

A classic BPF program, written here by hand and loaded with ``prctl(PR_SET_SECCOMP)``:
libseccomp's Python binding is not on PyPI (it ships with the distribution's C library, and
then only for the system's interpreter), and the filter is small enough to read whole.  Every
process the worker starts inherits it, across ``execve`` (``PR_SET_NO_NEW_PRIVS`` is set).

What it denies (``EPERM``; a reader sees an ordinary error, the document an ordinary record):

* any other architecture's calls (the x32 ABI on x86_64 included): the process is killed;
* ``socket`` of any family, ``socketpair`` of any family but ``AF_UNIX``, ``bind``,
  ``listen``, ``connect``, ``accept``/``accept4``: the worker reads its jobs on the socket
  the pool handed it and creates none;
* ``io_uring_*``: its operations (``IORING_OP_SOCKET``, ``CONNECT``…) bypass this filter;
* ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``, ``kcmp``;
* ``mount`` and the new mount API, ``umount2``, ``pivot_root``, ``chroot``, ``unshare``,
  ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag (``clone3``, whose flags a filter
  cannot read, answers ``ENOSYS`` so the C library falls back to ``clone``);
* ``keyctl``, ``add_key``, ``request_key``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``open_by_handle_at``, ``name_to_handle_at``, ``fanotify_init``, the module and ``kexec``
  calls, ``swapon/off``, ``reboot``, ``acct``, ``quotactl``, ``syslog``, ``vhangup``,
  ``iopl``, ``ioperm``, ``uselib``;
* ``ioctl`` ``TIOCSTI`` (type into a terminal) and ``TIOCLINUX``.

Only x86_64 has its table here; elsewhere :func:`install` returns False and the worker's
identity says ``seccomp: 0`` (the namespace and Landlock layers still hold).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

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
    "clone": 56, "ioctl": 16, "accept4": 288, "ptrace": 101, "syslog": 103,
    "uselib": 134, "vhangup": 153, "pivot_root": 155, "chroot": 161, "acct": 163,
    "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
    "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320,
    "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435, "pidfd_getfd": 438,
    "mount_setattr": 442,
}

DENIED = (
    "socket", "connect", "accept", "accept4", "bind", "listen",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree",
    "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "init_module",
    "finit_module", "delete_module", "kexec_load", "kexec_file_load", "swapon", "swapoff",
    "reboot", "acct", "quotactl", "syslog", "vhangup", "iopl", "ioperm", "uselib",
)
AF_UNIX = 1
CLONE_NEW_ANY = 0x7E020080  # NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
TIOCSTI, TIOCLINUX = 0x5412, 0x541C


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(table: dict[str, int] = X86_64) -> bytes:
    """The filter's instructions (``struct sock_filter[]``) for x86_64."""
    deny = _RET_ERRNO | errno.EPERM
    out: list[bytes] = [
        _insn(_LD_W_ABS, 0, 0, _ARCH),
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _insn(_LD_W_ABS, 0, 0, _NR),
        _insn(_JGE_K, 0, 1, _X32_BIT),
        _insn(_RET_K, 0, 0, _RET_KILL_PROCESS),
    ]
    for name in DENIED:  # each: if nr == N return EPERM
        out.append(_insn(_JEQ_K, 0, 1, table[name]))
        out.append(_insn(_RET_K, 0, 0, deny))
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
    out += [  # ioctl: not TIOCSTI nor TIOCLINUX
        _insn(_JEQ_K, 0, 5, table["ioctl"]),
        _insn(_LD_W_ABS, 0, 0, _arg_low(1)),
        _insn(_JEQ_K, 1, 0, TIOCSTI),
        _insn(_JEQ_K, 0, 1, TIOCLINUX),
        _insn(_RET_K, 0, 0, deny),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
    ]
    out.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(out)


def supported() -> bool:
    return platform.machine() == "x86_64"


def install() -> bool:
    """Load the filter into this process (and so into all it will start); False where this
    architecture has no table.  Needs ``PR_SET_NO_NEW_PRIVS`` (set by Landlock's step);
    raises OSError when the kernel refuses the filter."""
    if not supported():
        return False
    code = program()
    count = len(code) // 8

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = SockFprog(count, code)
    lib = ctypes.CDLL(None, use_errno=True)
    lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                          ctypes.c_ulong]
    lib.prctl(38, 1, None, 0, 0)  # PR_SET_NO_NEW_PRIVS (a filter needs it without CAP_SYS_ADMIN)
    if lib.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "cannot load the seccomp filter")
    return True
