"""A misbehaving reader for the runtime tests, injected with ``WorkerPool(extra_readers=...)``.

The document's first line names the misbehaviour; the rest of the document (after the first
newline) is its argument.  The worker imports this module by name (the repo root is on its
``sys.path``) and puts :data:`READER` first in its registry, so any job with the MIME type
``application/x-hostile`` (or a ``.hostile`` name) comes here.

=========  ===================================================================================
sleep      sleeps forever (the deadline must kill it)
alloc      allocates without bound: 100 MB bytearrays in a list (RLIMIT_AS must stop it)
flood      writes 50 MB to fd 1 (os.write and print) and 50 MB to fd 2, then returns text
bigtext    returns more text than ``Limits.max_output_bytes`` (argument: MiB, default 2)
segv       dies of SIGSEGV
exit       writes a line to stderr, then os._exit(3)
raise      raises ValueError
fork       starts a grandchild ``sleep 1000`` with subprocess.Popen (not run_tool), writes its pid
           (as the pool sees it) to ``grandchild.pid`` in the job's scratch directory (the only writable place in
           the sandbox), then sleeps forever
tool       runs ``sh -c 'sleep 1000.<arg> & sleep 999.<arg>'`` through run_tool (deadline 100 s)
daemon     starts ``sleep 1000.<arg>`` in a session of its own (setsid), then sleeps forever
symlink    plants a symlink named as its text file in its scratch's parent, then returns text
garbage    writes a line that is not JSON on its answer pipe, then returns text
bigline    writes 33 MiB without an end of line on its answer pipe, then exits
write      tries to create the file named by the argument (``$TMPDIR`` expanded); returns
           ``wrote`` or ``denied: …``
net        tries a TCP connection to 127.0.0.1:<argument>; returns ``connected`` or
           ``refused: …``
env        returns the environment it sees, as JSON
fds        returns its open descriptors as JSON ``{fd: readlink target}``
whoami     returns its uid, euid, gid, groups, and whether it can open the path in its argument
           itself (``opened`` or ``denied: …``), as JSON
pid        returns its pid as the pool sees it (in its PID namespace, ``os.getpid()`` is 1)
modules    returns the ``bastion.readers`` modules its worker has imported, as a JSON list
status     returns its ``/proc/self/status`` identity lines and a tool's (``cat``), as JSON
sockets    tries every socket family and protocol against the listeners its argument names
           (JSON: ``{"tcp4": port, "tcp6": port, "udp4": port, "unix": path, "abstract":
           name}``); returns ``{attempt: "open…" | "denied: …"}`` as JSON
syscalls   tries the calls a reader never needs (mount, unshare, setns, ptrace, keyctl, bpf,
           io_uring_setup, perf_event_open, userfaultfd, chroot, TIOCSTI, open_tree_attr and a
           made-up number, PR_SET_NAME and PR_SET_MM, a Landlock ruleset, kill(-1)); returns
           ``{call: "allowed" | errno name}`` as JSON
metadata   tries to change what it does not own or may not (chmod and chown of the path in its
           argument, chown of its own file to root, a setuid bit and a ``security.capability``
           attribute, a device node); returns ``{attempt: "done" | "denied: …"}`` as JSON
peek       tries to read what is not its own: the argument is JSON ``{"paths": [...],
           "pids": [...]}`` (files and directories, and ``/proc/<pid>/cwd`` and ``environ``);
           returns ``{what: "read…" | "denied: …"}`` as JSON
proctalk   tries to say a word in its ``/proc`` entries (argv area, comm, ``PR_SET_MM``); the
           argument is JSON ``{"word": …, "time": seconds to stay}``; returns what each did
procs      starts ``sleep`` processes until refused (at most the argument); returns how many
           ran at once, and leaves them running
plant      leaves a mark for the next document: a module attribute and a builtin, a file in its
           scratch's parent, an ``atexit`` hook, a thread, a child process in a session of its
           own (``sleep 1000.<arg>``); returns ``planted``
planted    returns, as JSON, which marks of ``plant`` it sees
memscan    scans its whole address space (every readable mapping in ``/proc/self/maps``, read
           through ``/proc/self/mem``) for markers; the argument is JSON ``{"markers": [[first
           half, second half], …]}`` (halves, so that no whole marker is in its own document);
           returns ``{"found": [index…], "where": {index: mapping}, "scanned": bytes}``
forge      answers for the worker with a forged line (the argument: JSON merged into a valid
           answer to its job; ``"text_is"`` first tries to make its text a ``dir``, ``fifo``,
           ``symlink``, ``hardlink`` or a ``big`` file, and says in the verdict's warnings
           whether it could), then exits.  A string value ``"$deep:N"`` is written as N
           nested lists, ``"$str:N"`` as a string of N characters, ``"$int:N"`` as an integer
           of N digits, ``"$outline:N"`` as an outline of about N bytes, ``"$empties:N"``
           as a list of N empty lists
giant      returns, honestly (through the worker's own answer), a result as big as its
           argument says: JSON ``{"outline": n, "title": chars, "embedded": n, "fields": n,
           "subject": chars}`` (an outline of n entries with titles of ``title`` characters,
           n embedded documents' metadata with ``fields`` fields each)
ok         returns ``fine``
=========  ===================================================================================
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from bastion.readers.base import Context, Document, Reader, ReadResult, TextSink

MIME = "application/x-hostile"


def _sleep_forever() -> None:
    while True:
        time.sleep(3600)


def _host_pid_of(pid: int) -> int:
    """A child's pid as the pool sees it (``Popen.pid`` counts in the worker's namespace)."""
    fd = os.pidfd_open(pid)
    try:
        with open(f"/proc/self/fdinfo/{fd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    finally:
        os.close(fd)
    raise OSError(f"no pid for the pidfd of {pid}")


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    head, _, rest = doc.data.partition(b"\n")
    cmd = head.decode("ascii", "replace").strip()
    # (a NUL ends the argument: what follows makes a whole run detect the file as binary)
    arg = rest.split(b"\x00", 1)[0].decode("utf-8", "surrogateescape").strip()

    if cmd == "sleep":
        _sleep_forever()
    elif cmd == "alloc":
        hog = []
        while True:
            hog.append(bytearray(100 * 1000 * 1000))
    elif cmd == "flood":
        block = b"x" * (1 << 20)
        for _ in range(25):
            os.write(1, block)
        for _ in range(25):
            print("y" * (1 << 20), flush=True)
        for _ in range(50):
            os.write(2, block)
        sink.write("flooded\n")
    elif cmd == "bigtext":
        mib = int(arg or 2)
        sink.write(("z" * 1023 + "\n") * (mib * 1024))
    elif cmd == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
        import ctypes

        ctypes.string_at(0)
    elif cmd == "exit":
        os.write(2, b"hostile: exiting on purpose\n")
        os._exit(3)
    elif cmd == "raise":
        raise ValueError("hostile reader raised on purpose")
    elif cmd == "fork":
        child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tmp = ctx.tmpdir / "grandchild.pid.tmp"
        tmp.write_text(str(_host_pid_of(child.pid)))
        os.rename(tmp, ctx.tmpdir / "grandchild.pid")
        _sleep_forever()
    elif cmd == "tool":
        # a multi-process tool (sh and two sleeps marked with the argument), with a deadline
        # far past the document's: the pool's kill must take the tool and its children too
        from bastion.readers.runtime.toolcall import run_tool

        run_tool(["sh", "-c", f"sleep 1000.{arg} & sleep 999.{arg}"], timeout=100.0)
        sink.write("tool returned\n")
    elif cmd == "daemon":
        # a descendant that leaves the worker's session (setsid), then sleep
        subprocess.Popen(["sleep", f"1000.{arg}"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        _sleep_forever()
    elif cmd == "symlink":
        # a symlink named as its text (to a decoy) where it may write: its text goes to the
        # descriptor the parent gave, never to a name
        workdir = ctx.tmpdir.parent
        seq = ctx.tmpdir.name[len("job"):]
        decoy = workdir / "decoy"
        decoy.write_text("decoy\n")
        os.symlink(decoy, workdir / f"t{seq}.txt")
        sink.write("text through a symlink\n")
    elif cmd == "garbage":
        # write junk on its answer pipe (the only write-only pipe above fd 2)
        import fcntl

        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if fd > 2 and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY \
                        and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    os.write(fd, b"this is not json\n")
            except OSError:
                pass
        sink.write("wrote garbage\n")
    elif cmd == "bigline":
        import fcntl

        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            try:
                if fd > 2 and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY \
                        and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                    block = b"x" * (1 << 20)
                    for _ in range(33):
                        os.write(fd, block)
            except OSError:
                pass
        os._exit(0)
    elif cmd == "write":
        try:
            with open(os.path.expandvars(arg), "w") as f:
                f.write("escaped the sandbox\n")
            sink.write("wrote\n")
        except OSError as e:
            sink.write(f"denied: {e}\n")
    elif cmd == "net":
        try:
            with socket.create_connection(("127.0.0.1", int(arg)), timeout=2):
                pass
            sink.write("connected\n")
        except OSError as e:
            sink.write(f"refused: {e}\n")
    elif cmd == "env":
        sink.write(json.dumps(dict(os.environ), sort_keys=True) + "\n")
    elif cmd == "fds":
        fds = {}
        for name in os.listdir("/proc/self/fd"):
            try:
                fds[name] = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                fds[name] = None  # the listdir's own descriptor, closed by now
        sink.write(json.dumps(fds, sort_keys=True) + "\n")
    elif cmd == "whoami":
        try:
            open(arg, "rb").close()
            opened = "opened"
        except OSError as e:
            opened = f"denied: {e.strerror}"
        sink.write(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(),
                               "groups": os.getgroups(), "open": opened,
                               "tmpdir": str(ctx.tmpdir)}) + "\n")
    elif cmd == "modules":
        sink.write(json.dumps(sorted(m for m in sys.modules if m.startswith("bastion.readers."))))
    elif cmd == "pid":
        from bastion.readers.runtime.procs import host_pid

        sink.write(f"{host_pid()}\n")
    elif cmd in ATTACKS:
        sink.write(json.dumps(ATTACKS[cmd](arg, ctx), sort_keys=True) + "\n")
    elif cmd == "forge":
        _forge(json.loads(arg or "{}"), ctx)
    elif cmd == "giant":
        return _giant(json.loads(arg), sink)
    elif cmd == "ok":
        sink.write("fine\n")
    else:
        print(f"hostile: unknown command {cmd!r}", file=sys.stderr)
        raise ValueError(f"unknown hostile command {cmd!r}")
    return ReadResult(extractor="hostile")


def _denied(e: OSError) -> str:
    return f"denied: {errno.errorcode.get(e.errno, e.errno)}"


def _status(arg: str, ctx: Context) -> dict:
    from bastion.readers.runtime.toolcall import run_tool

    keys = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
            "NoNewPrivs", "Seccomp")

    def pick(text: str) -> dict:
        return {k: v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())
                if k in keys}

    with open("/proc/self/status") as f:
        own = pick(f.read())
    tool = run_tool(["cat", "/proc/self/status"], timeout=10.0)
    return {"worker": own, "tool": pick(tool.stdout.decode())}


def _sockets(arg: str, ctx: Context) -> dict:
    spec = json.loads(arg)
    out: dict[str, str] = {}

    def attempt(name: str, make, use) -> None:
        try:
            s = make()
        except OSError as e:
            out[name] = _denied(e)
            return
        try:
            use(s)
            out[name] = "open"
        except OSError as e:
            out[name] = f"open, then {_denied(e)}"
        finally:
            s.close()

    S, I4, I6 = socket.socket, socket.AF_INET, socket.AF_INET6
    tcp4, tcp6 = ("127.0.0.1", spec["tcp4"]), ("::1", spec["tcp6"])
    mapped = ("::ffff:127.0.0.1", spec["tcp4"])
    attempt("tcp4", lambda: S(I4, socket.SOCK_STREAM), lambda s: s.connect(tcp4))
    attempt("tcp6", lambda: S(I6, socket.SOCK_STREAM), lambda s: s.connect(tcp6))
    attempt("tcp6-mapped", lambda: S(I6, socket.SOCK_STREAM), lambda s: s.connect(mapped))
    attempt("mptcp4", lambda: S(I4, socket.SOCK_STREAM, 262), lambda s: s.connect(tcp4))
    attempt("mptcp6", lambda: S(I6, socket.SOCK_STREAM, 262), lambda s: s.connect(tcp6))
    attempt("tcp4-fastopen", lambda: S(I4, socket.SOCK_STREAM),
            lambda s: s.sendto(b"fastopen", socket.MSG_FASTOPEN, tcp4))
    attempt("udp4", lambda: S(I4, socket.SOCK_DGRAM),
            lambda s: s.sendto(b"udp", ("127.0.0.1", spec["udp4"])))
    attempt("udp6", lambda: S(I6, socket.SOCK_DGRAM), lambda s: s.sendto(b"udp", ("::1", 9)))
    attempt("listen-unbound", lambda: S(I4, socket.SOCK_STREAM), lambda s: s.listen(1))
    attempt("bind4", lambda: S(I4, socket.SOCK_STREAM), lambda s: s.bind(("0.0.0.0", 0)))
    attempt("unix-path", lambda: S(socket.AF_UNIX, socket.SOCK_STREAM),
            lambda s: s.connect(spec["unix"]))
    attempt("unix-abstract", lambda: S(socket.AF_UNIX, socket.SOCK_STREAM),
            lambda s: s.connect("\0" + spec["abstract"]))
    attempt("unix-dgram", lambda: S(socket.AF_UNIX, socket.SOCK_DGRAM),
            lambda s: s.sendto(b"x", "\0" + spec["abstract"] + "-dgram"))
    attempt("netlink", lambda: S(socket.AF_NETLINK, socket.SOCK_RAW, 0),
            lambda s: s.bind((0, 0)))
    attempt("packet", lambda: S(socket.AF_PACKET, socket.SOCK_RAW, 0x0300), lambda s: None)
    attempt("raw4", lambda: S(I4, socket.SOCK_RAW, socket.IPPROTO_ICMP), lambda s: None)
    attempt("sctp4", lambda: S(I4, socket.SOCK_STREAM, 132), lambda s: s.connect(tcp4))
    attempt("vsock", lambda: S(40, socket.SOCK_STREAM), lambda s: s.connect((2, 1234)))
    try:
        a, b = socket.socketpair(I4, socket.SOCK_STREAM)
        a.close(), b.close()
        out["socketpair-inet"] = "open"
    except OSError as e:
        out["socketpair-inet"] = _denied(e)
    return out


def _syscalls(arg: str, ctx: Context) -> dict:
    import ctypes
    import fcntl
    import termios

    lib = ctypes.CDLL(None, use_errno=True)
    lib.syscall.restype = ctypes.c_long
    out: dict[str, str] = {}

    def call(name: str, *args) -> None:
        ctypes.set_errno(0)
        rc = lib.syscall(*args)
        out[name] = "allowed" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")

    buf = ctypes.create_string_buffer(256)
    call("mount", 165, b"tmpfs", str(ctx.tmpdir).encode(), b"tmpfs", 0, None)
    call("unshare", 272, 0x40000000)  # CLONE_NEWNET
    call("unshare-user", 272, 0x10000000)  # CLONE_NEWUSER
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    call("setns", 308, fd, 0)
    os.close(fd)
    call("ptrace-traceme", 101, 0, 0, 0, 0)  # PTRACE_TRACEME
    call("keyctl", 250, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID of the session keyring
    call("add_key", 248, b"user", b"k", b"v", 1, -3)
    call("bpf", 321, 0, buf, 72)  # BPF_MAP_CREATE
    call("io_uring_setup", 425, 4, buf)
    call("perf_event_open", 298, buf, 0, -1, -1, 0)
    call("userfaultfd", 323, 0)
    call("chroot", 161, b"/")
    call("open_tree_attr", 467, -100, b"/", 0, None, 0)  # newer than the filter's table
    call("made-up", 1000)
    call("prctl-PR_SET_NAME", 157, 15, b"owned")
    call("prctl-PR_SET_MM", 157, 35, 8, 0, 0, 0)  # PR_SET_MM_ARG_START
    call("landlock_create_ruleset", 444, None, 0, 1)  # the zygote's, not a document's
    call("kill-all", 62, -1, 0)
    ctx.tmpdir.mkdir(parents=True, exist_ok=True)
    tty = os.open(os.devnull, os.O_RDWR)
    try:
        fcntl.ioctl(tty, termios.TIOCSTI, b"x")
        out["ioctl-TIOCSTI"] = "allowed"
    except OSError as e:
        out["ioctl-TIOCSTI"] = errno.errorcode.get(e.errno, "?")
    finally:
        os.close(tty)
    return out


def _metadata(arg: str, ctx: Context) -> dict:
    out: dict[str, str] = {}
    ctx.tmpdir.mkdir(parents=True, exist_ok=True)
    own = ctx.tmpdir / "own"
    own.write_bytes(b"#!/bin/sh\n")

    def attempt(name: str, fn) -> None:
        try:
            fn()
            out[name] = "done"
        except OSError as e:
            out[name] = _denied(e)

    attempt("chmod-host", lambda: os.chmod(arg, 0o666))
    attempt("chown-host", lambda: os.chown(arg, os.getuid(), os.getgid()))
    attempt("chown-own-to-root", lambda: os.chown(own, 0, 0))
    attempt("setuid-bit-root", lambda: (os.chown(own, 0, -1), os.chmod(own, 0o4755)))
    attempt("setxattr-capability", lambda: os.setxattr(own, "security.capability",
                                                       b"\x01\x00\x00\x02" + b"\x00" * 16))
    attempt("mknod", lambda: os.mknod(ctx.tmpdir / "dev", 0o600 | 0o020000, os.makedev(1, 3)))
    attempt("write-etc", lambda: open("/etc/bastion-escape", "w").close())
    attempt("read-shadow", lambda: open("/etc/shadow", "rb").close())
    return out


def _peek(arg: str, ctx: Context) -> dict:
    spec = json.loads(arg)
    out: dict[str, str] = {}
    for path in spec.get("paths", []):
        try:
            if os.path.isdir(path):
                out[path] = f"read: {sorted(os.listdir(path))}"
            else:
                with open(path, "rb") as f:
                    out[path] = f"read: {f.read(4096)!r}"
        except OSError as e:
            out[path] = _denied(e)
    for pid in spec.get("pids", []):
        for what in ("cwd", "root"):
            key = f"/proc/{pid}/{what}"
            try:
                out[key] = f"read: {sorted(os.listdir(key))}"
            except OSError as e:
                out[key] = _denied(e)
        key = f"/proc/{pid}/environ"
        try:
            with open(key, "rb") as f:
                out[key] = f"read: {f.read(100)!r}"
        except OSError as e:
            out[key] = _denied(e)
    return out


def _proctalk(arg: str, ctx: Context) -> dict:
    """Tries every way to say ``arg`` (a short word) in its ``/proc`` entries: writes it over
    its argv area, sets its comm (``PR_SET_NAME``, ``/proc/self/comm``, its thread's), points
    its argv area at a buffer holding it (``PR_SET_MM`` ``MAP`` and ``ARG_START``/``END``);
    then stays a while (``time`` in the argument's JSON) for a poller to read."""
    import ctypes

    spec = json.loads(arg)
    word = spec["word"].encode()
    out: dict[str, str] = {}
    lib = ctypes.CDLL(None, use_errno=True)
    lib.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                          ctypes.c_ulong]
    with open("/proc/self/stat", "rb") as f:
        data = f.read()
    fields = [int(x) for x in data[data.rindex(b")") + 2:].split()[1:]]
    field = lambda n: fields[n - 4]  # noqa: E731  (proc(5)'s numbering)
    arg_start, arg_end = field(48), field(49)
    try:  # the argv area: plain memory of its own (the stack's top)
        ctypes.memmove(arg_start, word + b"\0", len(word) + 1)
        out["argv-area"] = f"written ({arg_end - arg_start} bytes shown)"
    except Exception as e:  # noqa: BLE001
        out["argv-area"] = f"denied: {e}"

    def prctl(name: str, *args) -> None:
        ctypes.set_errno(0)
        rc = lib.prctl(*args)
        out[name] = "done" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")

    name = ctypes.create_string_buffer(word[:15])
    prctl("PR_SET_NAME", 15, ctypes.addressof(name), 0, 0, 0)
    for path in ("/proc/self/comm", "/proc/thread-self/comm"):
        try:
            with open(path, "wb") as f:
                f.write(word[:15])
            out[path] = "done"
        except OSError as e:
            out[path] = _denied(e)
    buf = ctypes.create_string_buffer(word + b"\0")
    lo = ctypes.addressof(buf)
    prctl("PR_SET_MM_ARG_END", 35, 9, lo + len(word) + 1, 0, 0)
    prctl("PR_SET_MM_ARG_START", 35, 8, lo, 0, 0)

    class MmMap(ctypes.Structure):
        _fields_ = [*((n, ctypes.c_uint64) for n in (
            "start_code", "end_code", "start_data", "end_data", "start_brk", "brk",
            "start_stack", "arg_start", "arg_end", "env_start", "env_end")),
            ("auxv", ctypes.c_void_p), ("auxv_size", ctypes.c_uint32),
            ("exe_fd", ctypes.c_int32)]

    lib.sbrk.restype = ctypes.c_void_p
    mm = MmMap(field(26), field(27), field(45), field(46), field(47),
               lib.sbrk(ctypes.c_long(0)) or 0, field(28), lo, lo + len(word) + 1,
               lo + len(word) + 1, lo + len(word) + 1, None, 0, -1)
    prctl("PR_SET_MM_MAP", 35, 14, ctypes.addressof(mm), ctypes.sizeof(mm), 0)
    with open("/proc/self/cmdline", "rb") as f:
        out["own cmdline"] = repr(f.read())
    with open("/proc/self/comm", "rb") as f:
        out["own comm"] = repr(f.read())
    time.sleep(float(spec.get("time", 2)))
    return out


def _procs(arg: str, ctx: Context) -> dict:
    started = 0
    why = "limit of the test reached"
    for _ in range(int(arg or 1000)):
        try:
            subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            started += 1
        except OSError as e:
            why = _denied(e)
            break
    return {"started": started, "stopped_by": why}


_MARK = "bastion-hostile-mark"


def _plant(arg: str, ctx: Context) -> dict:
    import atexit

    sys.modules[__name__].__dict__["PLANTED"] = _MARK  # module state
    builtins = sys.modules["builtins"]
    setattr(builtins, "_bastion_hostile_mark", _MARK)
    (ctx.tmpdir.parent / "planted.txt").write_text(_MARK)  # a file beside its scratch
    atexit.register(lambda: None)
    import threading

    threading.Thread(target=_sleep_forever, daemon=True).start()  # a thread
    subprocess.Popen(["sleep", f"1000.{arg}"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    return {"planted": True, "pid": os.getpid()}


def _planted(arg: str, ctx: Context) -> dict:
    builtins = sys.modules["builtins"]
    alive = False
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                alive = alive or f.read().split(b"\0")[:2] == [b"sleep", f"1000.{arg}".encode()]
        except OSError:
            pass
    return {"module": globals().get("PLANTED") == _MARK,
            "builtins": getattr(builtins, "_bastion_hostile_mark", None) == _MARK,
            "file": (ctx.tmpdir.parent / "planted.txt").exists(),
            "child_alive": alive}


def memscan(arg: str) -> dict:
    """Which markers (each given as two halves, never joined here) this process's memory holds,
    in one byte per character (ASCII, as Python keeps an ASCII str), UTF-16 or UTF-32."""
    spec = json.loads(arg)
    forms = []  # (marker index, first half, second half) in each encoding
    for encoding in ("ascii", "utf-16-le", "utf-32-le"):
        forms.append([(i, first.encode(encoding), second.encode(encoding))
                      for i, (first, second) in enumerate(spec["markers"])])
    # one search per encoding for what all first halves begin with (the tests' markers share
    # "zq"): every place one of them starts is a place it starts, then each is checked there
    searches = []
    for group in forms:
        prefix = os.path.commonprefix([first for _, first, _ in group])
        if len(prefix) >= 2:
            searches.append((prefix, group))
        else:
            searches.extend((form[1], [form]) for form in group)
    overlap = max(len(a) + len(b) for group in forms for _, a, b in group)
    found: dict[int, str] = {}
    context: dict[int, str] = {}
    scanned = 0
    with open("/proc/self/maps") as f:
        maps = f.read().splitlines()
    try:
        mem = os.open("/proc/self/mem", os.O_RDONLY)
    except PermissionError:  # not dumpable (its /proc files are root's): it makes itself so
        import ctypes

        ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
        mem = os.open("/proc/self/mem", os.O_RDONLY)
    try:
        for line in maps:
            fields = line.split(maxsplit=5)
            if "r" not in fields[1]:
                continue
            where = fields[5].strip() if len(fields) > 5 else "[anonymous]"
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            addr, tail = lo, b""
            while addr < hi:
                try:
                    chunk = os.pread(mem, min(4 << 20, hi - addr), addr)
                except OSError:
                    break
                if not chunk:
                    break
                buf = tail + chunk
                for prefix, group in searches:
                    at = buf.find(prefix)
                    while at >= 0:
                        for i, first, second in group:
                            end = at + len(first)
                            if (i not in found and buf.startswith(first, at)
                                    and buf.startswith(second, end)):
                                found[i] = where
                                context[i] = repr(buf[max(0, at - 120):end + len(second) + 120])
                        at = buf.find(prefix, at + 1)
                tail = buf[-overlap:]
                addr += len(chunk)
                scanned += len(chunk)
    finally:
        os.close(mem)
    return {"found": sorted(found), "where": {str(k): v for k, v in found.items()},
            "context": {str(k): v for k, v in context.items()}, "scanned": scanned}


def _memscan(arg: str, ctx: Context) -> dict:
    return memscan(arg)


ATTACKS = {"memscan": _memscan, "status": _status, "sockets": _sockets, "syscalls": _syscalls,
           "metadata": _metadata, "peek": _peek, "procs": _procs, "plant": _plant,
           "planted": _planted, "proctalk": _proctalk}


def _forge(spec: dict, ctx: Context) -> None:
    """Write a forged answer to the job its process reads, then exit.  Its text file is first
    made something else (``text_is``) where the sandbox lets it; whether it could goes in the
    forged verdict's warnings (``planted`` or ``plant denied: …``)."""
    import fcntl

    frame = sys._getframe()
    while frame is not None and "job" not in frame.f_locals:  # the worker's handle()
        frame = frame.f_back
    job = frame.f_locals["job"] if frame is not None else {"id": -1, "text": "t0.txt"}
    name = job["text"]
    kind = spec.pop("text_is", None)
    text_fd, target = None, None
    for fdname in os.listdir("/proc/self/fd"):  # the text file the parent made for it
        try:
            link = os.readlink(f"/proc/self/fd/{fdname}")
        except OSError:
            continue
        if link.endswith("-" + name):
            text_fd, target = int(fdname), Path(link)
    planted = "planted"
    try:
        if target is None:
            raise FileNotFoundError(errno.ENOENT, "no text descriptor")
        if kind == "big":
            os.ftruncate(text_fd, int(spec.pop("size", 3 << 20)))
        elif kind is not None:
            os.unlink(target)  # to put something else in its place
            if kind == "dir":
                target.mkdir()
            elif kind == "fifo":
                os.mkfifo(target)
            elif kind == "symlink":
                os.symlink("/etc/passwd", target)
            elif kind == "hardlink":
                os.link("/etc/passwd", target)
    except OSError as e:
        planted = f"plant denied: {errno.errorcode.get(e.errno, e.errno)}"
    answer = {"id": job["id"], "verdict": {"status": "ok", "extractor": "hostile", "chars": 0,
                                           "warnings": [planted]},
              "text": name, "sidecar": {}, "rss": 1, "fatal": False}
    answer.update(spec)
    line = json.dumps(answer).encode() + b"\n"
    for marker in set(_MARKER.findall(line)):  # "$deep:N" and the like, written raw
        kind, n = marker[2:-1].split(b":")
        size = int(n)
        raw = (b"[" * size + b"]" * size if kind == b"deep" else
               b'"' + b"x" * size + b'"' if kind == b"str" else
               b"9" * size if kind == b"int" else
               b"[" + b",".join([b"[]"] * size) + b"]" if kind == b"empties" else
               b"[" + b",".join([b'{"title":"t","page":1,"level":1}'] * (size // 33)) + b"]")
        line = line.replace(marker, raw)
    for fdname in os.listdir("/proc/self/fd"):  # its answer pipe: the one write-only pipe
        fd = int(fdname)
        try:
            if fd > 2 and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY \
                    and os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                os.write(fd, line)
        except OSError:
            pass
    os._exit(0)  # its answer is taken once its zygote reports its end


_MARKER = __import__("re").compile(rb'"\$(?:deep|str|int|outline|empties):[0-9]+"')


def _giant(spec: dict, sink: TextSink) -> ReadResult:
    """A result as big as ``spec`` says, made the honest way: the worker answers with it."""
    from bastion.readers.metadata import DocMeta
    from bastion.readers.pdf.pages import OutlineEntry

    title = "t" * int(spec.get("title", 10))
    outline = tuple(OutlineEntry(f"{i}{title}", 1, 1) for i in range(int(spec.get("outline", 0))))
    fields = {f"f{i}": ["v" * 2000] * 100 for i in range(int(spec.get("fields", 0)))}
    embedded = tuple({"path": f"m{i}.eml", "metadata": DocMeta.make(fields=fields).to_json()}
                     for i in range(int(spec.get("embedded", 0))))
    meta = DocMeta.make(subject="s" * int(spec.get("subject", 0)) or None)
    sink.write("giant\n")
    return ReadResult(extractor="hostile", pages=1, outline=outline or None,
                      embedded=embedded or None).with_metadata(meta)


READER = Reader(
    name="hostile",
    version=1,
    mimes=(MIME,),
    extensions=(".hostile",),
    read=read,
)
