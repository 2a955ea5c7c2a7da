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
symlink    plants a symlink where the worker writes the text file, then returns text
garbage    writes a line that is not JSON on the protocol descriptor, then returns text
write      tries to create the file named by the argument; returns ``wrote`` or ``denied: …``
net        tries a TCP connection to 127.0.0.1:<argument>; returns ``connected`` or
           ``refused: …``
env        returns the environment it sees, as JSON
fds        returns its open descriptors as JSON ``{fd: readlink target}``
whoami     returns its uid, euid, gid, groups, and whether it can open the path in its argument
           itself (``opened`` or ``denied: …``), as JSON
pid        returns its pid as the pool sees it (in its PID namespace, ``os.getpid()`` is 1)
modules    returns the ``bastion.readers`` modules its worker has imported, as a JSON list
ok         returns ``fine``
=========  ===================================================================================
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

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
    arg = rest.decode("utf-8", "surrogateescape").strip()

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
        # the worker writes t<seq>.txt itself; plant a symlink there first (to a decoy in the
        # worker's own directory): the parent must refuse a text that is not a regular file
        workdir = ctx.tmpdir.parent
        seq = ctx.tmpdir.name[len("job"):]
        decoy = workdir / "decoy"
        decoy.write_text("decoy\n")
        os.symlink(decoy, workdir / f"t{seq}.txt")
        sink.write("text through a symlink\n")
    elif cmd == "garbage":
        # write junk on the protocol descriptor (the only write-only pipe above fd 2)
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
    elif cmd == "write":
        try:
            with open(arg, "w") as f:
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
    elif cmd == "ok":
        sink.write("fine\n")
    else:
        print(f"hostile: unknown command {cmd!r}", file=sys.stderr)
        raise ValueError(f"unknown hostile command {cmd!r}")
    return ReadResult(extractor="hostile")


READER = Reader(
    name="hostile",
    version=1,
    mimes=(MIME,),
    extensions=(".hostile",),
    read=read,
)
