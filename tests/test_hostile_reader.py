"""A compromised reader gains nothing (issue 31, docs/security.md#a-compromised-reader).

Each test runs attacker code inside the real sandbox: ``tests/hostile_readers.py`` put first
in the registry of a real :class:`~bastion.readers.runtime.pool.WorkerPool` through its
``extra_readers`` seam, as a parser exploit would run it.  The pool runs as root from this
interpreter, which lives under ``/root`` here and in CI (pyenv): the case in which workers
used to keep root.  Every route is asserted closed: no socket of any family or protocol
(against real listeners this test starts), no uid 0 and no capability (measured from
``/proc``, in the worker and in a tool it starts), no metadata change, no other worker's
scratch or ``/proc`` entries, a bounded number of processes, and a forged answer is one
``worker`` error while the run goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import stat
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from bastion.readers.base import Limits
from bastion.readers.runtime.identity import SLOT_BASE
from bastion.readers.runtime.pool import Job, JobResult, WorkerError, WorkerPool
from bastion.readers.runtime.sandbox import MAX_PROCS, SCRATCH_DIR

from procutil import eventually  # tests/ is on sys.path

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the pool drops root only as root")

LIMITS = Limits(deadline_s=30, max_output_bytes=1 << 20)


class Pool:
    """A real pool with the hostile reader; documents 0600 root's, results collected."""

    def __init__(self, tmp: Path, size: int = 1) -> None:
        self.docs = tmp / "docs"
        self.docs.mkdir(mode=0o700)
        self.results: dict[int, tuple[JobResult, str | None]] = {}
        self.seq = 0
        self.pool = WorkerPool(size, LIMITS, tmp / "pool", self._collect,
                               extra_readers=("tests.hostile_readers",))

    def _collect(self, r: JobResult) -> None:
        text = r.text_path.read_text() if r.text_path is not None else None
        self.results[r.job.id] = (r, text)

    def job(self, cmd: str, arg: str = "", deadline: float = 30.0) -> Job:
        self.seq += 1
        data = f"{cmd}\n{arg}".encode()
        path = self.docs / f"{self.seq}.hostile"
        path.write_bytes(data)
        os.chmod(path, 0o600)
        return Job(self.seq, str(path), path.name, "application/x-hostile",
                   hashlib.sha256(data).hexdigest(), len(data), deadline, reader="hostile")

    def run(self, cmd: str, arg: str = "", deadline: float = 30.0) -> tuple[JobResult, str | None]:
        job = self.job(cmd, arg, deadline)
        self.pool.submit(job)
        self.pool.drain()
        return self.results[job.id]

    def answer(self, cmd: str, arg: str = "") -> dict:
        result, text = self.run(cmd, arg)
        assert result.status == "ok", result
        return json.loads(text or "null")

    def goes_on(self) -> None:
        result, text = self.run("ok")
        assert (result.status, text) == ("ok", "fine\n"), result


@pytest.fixture()
def pool(tmp_path: Path) -> Iterator[Pool]:
    p = Pool(tmp_path)
    yield p
    p.pool.close()


@pytest.fixture()
def public_dir() -> Iterator[Path]:
    """A directory any uid may enter (the test's tmp_path is root's alone)."""
    d = Path("/run") / f"bastion-test-{uuid.uuid4().hex[:12]}"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


# -- never host root ---------------------------------------------------------------------------


def _caps_zero(status: dict) -> bool:
    return all(int(status[k], 16) == 0 for k in ("CapInh", "CapPrm", "CapEff", "CapBnd",
                                                  "CapAmb"))


def test_workers_and_their_tools_hold_no_uid_0_and_no_capability(pool: Pool) -> None:
    seen = pool.answer("status")
    for who in ("worker", "tool"):
        status = seen[who]
        uids = [int(u) for u in status["Uid"].split()]
        assert 0 not in uids and uids[0] >= SLOT_BASE, (who, status)
        assert len(set(uids)) == 1 and status["Groups"] == "", (who, status)
        assert _caps_zero(status), (who, status)
        assert status["NoNewPrivs"] == "1" and status["Seccomp"] == "2", (who, status)
    ident = pool.pool.identity  # measured by the parent, not said by the worker
    assert ident is not None and ident["uid"] == int(seen["worker"]["Uid"].split()[0])
    assert ident["cap_eff"] == ident["cap_bnd"] == 0
    assert {"mnt", "net", "pid", "ipc", "uts"} <= set(ident["namespaces"])


def test_each_slot_runs_as_a_uid_of_its_own(tmp_path: Path) -> None:
    """Two workers at once: two uids, each measured in /proc, neither an account's."""
    p = Pool(tmp_path, size=2)
    try:
        p.pool.warm()
        for _ in range(2):
            p.pool.submit(p.job("ok"))
        p.pool.drain()
        measured = [w.identity["uid"] for w in p.pool.workers if w.identity]
        assert len(measured) == 2 and len(set(measured)) == 2, measured
        assert all(uid >= SLOT_BASE for uid in measured)
        assert sorted(measured) == sorted(w.user[0] for w in p.pool.workers)
    finally:
        p.pool.close()


def test_no_metadata_change_outside_its_own_files(pool: Pool, public_dir: Path) -> None:
    victim = public_dir / "victim"
    victim.write_text("root's\n")
    os.chmod(victim, 0o644)
    seen = pool.answer("metadata", str(victim))
    assert all(v.startswith("denied:") for v in seen.values()), seen
    st = os.stat(victim)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o644)
    assert not os.path.exists("/etc/bastion-escape")


# -- no network ------------------------------------------------------------------------------


def test_no_socket_of_any_family_reaches_a_listener(pool: Pool, public_dir: Path) -> None:
    tag = uuid.uuid4().hex[:12]
    listeners = []

    def listen(family: int, kind: int, address) -> socket.socket:
        s = socket.socket(family, kind)
        if family != socket.AF_UNIX:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(address)
        if kind == socket.SOCK_STREAM:
            s.listen(16)
        s.setblocking(False)
        listeners.append(s)
        return s

    tcp4 = listen(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0))
    tcp4.setsockopt(socket.IPPROTO_TCP, 23, 16)  # TCP_FASTOPEN: a server that takes it
    tcp6 = listen(socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0))
    udp4 = listen(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0))
    unix = public_dir / "s.sock"
    listen(socket.AF_UNIX, socket.SOCK_STREAM, str(unix))
    os.chmod(unix, 0o777)
    listen(socket.AF_UNIX, socket.SOCK_STREAM, f"\0bastion-{tag}")
    listen(socket.AF_UNIX, socket.SOCK_DGRAM, f"\0bastion-{tag}-dgram")
    try:
        spec = {"tcp4": tcp4.getsockname()[1], "tcp6": tcp6.getsockname()[1],
                "udp4": udp4.getsockname()[1], "unix": str(unix), "abstract": f"bastion-{tag}"}
        seen = pool.answer("sockets", json.dumps(spec))
        expected = {"tcp4", "tcp6", "tcp6-mapped", "mptcp4", "mptcp6", "tcp4-fastopen", "udp4",
                    "udp6", "listen-unbound", "bind4", "unix-path", "unix-abstract",
                    "unix-dgram", "netlink", "packet", "raw4", "sctp4", "vsock",
                    "socketpair-inet"}
        assert set(seen) == expected
        assert all(v.startswith("denied:") for v in seen.values()), seen
        for s in listeners:  # and nothing arrived
            with pytest.raises(BlockingIOError):
                s.accept() if s.type == socket.SOCK_STREAM else s.recv(100)
    finally:
        for s in listeners:
            s.close()


def test_the_calls_a_reader_never_needs_are_refused(pool: Pool) -> None:
    """Each answers EPERM; calls newer than the filter's table (``open_tree_attr``, which
    returned a descriptor before issue 41) and numbers no kernel has answer ENOSYS."""
    seen = pool.answer("syscalls")
    newer = {"open_tree_attr", "made-up"}
    assert newer < set(seen) and {"prctl-PR_SET_NAME", "kill-all"} < set(seen), seen
    assert all(v == ("ENOSYS" if k in newer else "EPERM") for k, v in seen.items()), seen


def test_its_network_namespace_is_empty(pool: Pool) -> None:
    seen = pool.answer("peek", json.dumps({"paths": ["/proc/self/net/dev"]}))
    dev = seen["/proc/self/net/dev"]
    interfaces = [ln.split(":")[0].strip() for ln in dev.split("\\n")[2:] if ":" in ln]
    assert interfaces == ["lo"], dev


# -- it reads only what reading needs ----------------------------------------------------------


def test_a_document_reads_nothing_of_the_hosts_but_what_reading_needs(
        pool: Pool, public_dir: Path, tmp_path: Path) -> None:
    """As root (the workers on their slots' uids): root's home, the shadow file, another
    store's texts (root's, 0700), and world-readable files of the host — a file in a public
    directory, a 0644 text in a store made with ``output_mode: group``, ``/etc/hostname`` —
    are all invisible to a document's process (Landlock read rules: issue 41), while what
    reading needs (the interpreter's modules, a system library) stays readable."""
    world = public_dir / "world.txt"
    world.write_text("anyone may read this\n")
    os.chmod(world, 0o644)
    shared_store = public_dir / "store" / "extract" / "ab"
    shared_store.mkdir(parents=True)
    for d in (public_dir / "store", public_dir / "store" / "extract", shared_store):
        os.chmod(d, 0o755)
    (shared_store / "ab12.txt").write_text("a group store's text\n")
    os.chmod(shared_store / "ab12.txt", 0o644)
    private = tmp_path / "other-store" / "extract" / "cd"
    private.mkdir(parents=True)
    (private / "cd34.txt").write_text("root's store\n")
    hidden = ["/root", "/etc/shadow", "/etc/hostname", str(world), str(public_dir),
              str(shared_store / "ab12.txt"), str(private / "cd34.txt")]
    needed = [os.__file__, "/usr/lib/x86_64-linux-gnu/libc.so.6"]
    seen = pool.answer("peek", json.dumps({"paths": hidden + needed}))
    assert all(seen[p].startswith("denied:") for p in hidden), seen
    assert all(seen[p].startswith("read:") for p in needed if os.path.exists(p)), seen


USER_RUN = """
import hashlib, json, sys
sys.path[:0] = json.loads(sys.argv[3])
from pathlib import Path
from bastion.readers.base import Limits
from bastion.readers.runtime.pool import Job, WorkerPool
home, paths = Path(sys.argv[1]), json.loads(sys.argv[2])
results = {}
def collect(r):
    results[r.job.id] = (r.status, r.error, r.text_path.read_text() if r.text_path else None)
pool = WorkerPool(1, Limits(deadline_s=30), home / "pool", collect,
                  extra_readers=("tests.hostile_readers",))
try:
    data = ("peek\\n" + json.dumps({"paths": paths})).encode()
    doc = home / "1.hostile"
    doc.write_bytes(data)
    pool.submit(Job(1, str(doc), doc.name, "application/x-hostile",
                    hashlib.sha256(data).hexdigest(), len(data), 30.0, reader="hostile"))
    pool.drain()
    print(json.dumps({"contained": pool.workers[0].contained if pool.workers else None,
                      "uid": pool.identity["uid"] if pool.identity else None,
                      "result": results[1]}))
finally:
    pool.close()
"""


def test_a_document_read_by_a_user_reads_nothing_of_that_users(tmp_path: Path) -> None:
    """Run by a user who is not root (the pool keeps the user's uid: there is no other), a
    compromised reader cannot read the key planted in that user's ``~/.ssh/id_ed25519``, the
    text in another of that user's stores, nor the home it lives in (issue 41, item 4)."""
    import subprocess
    import sys
    import tempfile

    from seconduser import second_user

    # the user's interpreter: the system's, of this one's version, with this one's packages
    # (this one lives under /root, which the user may not enter)
    python = shutil.which(f"python{sys.version_info[0]}.{sys.version_info[1]}",
                          path="/usr/bin:/usr/local/bin")
    if python is None:
        if os.environ.get("CI"):
            pytest.fail(f"no python{sys.version_info[0]}.{sys.version_info[1]} in /usr/bin: "
                        ".ci/run installs Debian's python3")
        pytest.skip(f"no python{sys.version_info[0]}.{sys.version_info[1]} in /usr/bin for "
                    "the user to run")
    uid, gid = second_user()
    home = Path(tempfile.mkdtemp(prefix="bastion-home-", dir="/tmp"))
    try:
        os.chown(home, uid, gid)
        os.chmod(home, 0o700)
        key = home / ".ssh" / "id_ed25519"
        text = home / "notes" / ".agent" / "extract" / "ab" / "ab12.txt"
        for path, content in ((key, "-----BEGIN OPENSSH PRIVATE KEY----- planted\n"),
                              (text, "another store's text\n")):
            path.parent.mkdir(parents=True)
            path.write_text(content)
            os.chmod(path, 0o600)
            for p in (path, *path.parents):
                if p == home:
                    break
                os.chown(p, uid, gid)
        paths = [str(key), str(key.parent), str(text), str(home)]
        run = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", python, "-I",
             "-c", USER_RUN, str(home), json.dumps(paths),
             json.dumps([str(Path(__file__).resolve().parent.parent),
                         *[p for p in sys.path if "site-packages" in p]])],
            cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
            timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"})
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout.splitlines()[-1])
        assert out["uid"] == uid and out["contained"] == "user-pid-namespace", out
        status, error, seen_text = out["result"]
        assert status == "ok", (status, error)
        seen = json.loads(seen_text)
        assert set(seen) == set(paths)
        assert all(v.startswith("denied:") for v in seen.values()), seen
    finally:
        shutil.rmtree(home, ignore_errors=True)


# -- /proc says nothing -------------------------------------------------------------------------


POLLER = r"""
import os, sys, time
word, stop = sys.argv[1].encode(), sys.argv[2]
seen, others = set(), 0
while not os.path.exists(stop):
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():  # (its own names the word)
            continue
        for what in ("cmdline", "comm", "task/" + pid + "/comm"):
            try:
                with open("/proc/" + pid + "/" + what, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if what == "cmdline" and b"unshare" in data:
                others += 1  # a keeper's: another user's processes are read
            if word in data or word[:15] in data:
                seen.add(what + ": " + repr(data[:80]))
    time.sleep(0.005)
print(others)
print("\n".join(sorted(seen)))
"""


def test_a_document_cannot_say_anything_in_proc(pool: Pool, public_dir: Path) -> None:
    """Attacker code in a document's process writes a word over its argv area, sets its comm
    (``PR_SET_NAME``, ``/proc/self/comm``) and points its argv area at a buffer holding it
    (``PR_SET_MM``); an unprivileged user polling every ``/proc/*/cmdline`` and ``comm``
    meanwhile reads nothing of it (issue 41, item 3: before, it read the word as it ran).
    The worker's own command line is empty: it was started with no argument and no
    environment, its settings on its stdin, and emptied its argv area."""
    import subprocess
    import sys

    from seconduser import second_user

    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no /usr/bin/python3 for the unprivileged poller")
    uid, gid = second_user()
    word = "zq" + uuid.uuid4().hex[:20]
    stop = public_dir / "stop"
    poller = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                               python, "-I", "-c", POLLER, word, str(stop)],
                              stdout=subprocess.PIPE, text=True)
    try:
        tried = pool.answer("proctalk", json.dumps({"word": word, "time": 1.5}))
    finally:
        stop.touch()
        out, _ = poller.communicate(timeout=60)
    others, *seen = out.splitlines()
    assert int(others) > 0, out  # it could read other users' command lines
    assert [s for s in seen if s] == [], (seen, tried)
    assert tried["own cmdline"] == "b''", tried
    assert word[:15] not in tried["own comm"], tried
    for name in ("PR_SET_NAME", "PR_SET_MM_MAP", "PR_SET_MM_ARG_START"):
        assert tried[name] == "EPERM", tried
    for name in ("/proc/self/comm", "/proc/thread-self/comm"):
        assert tried[name].startswith("denied:"), tried
    worker = pool.pool.workers[0].pid
    with open(f"/proc/{worker}/cmdline", "rb") as f:
        assert f.read() == b""
    with open(f"/proc/{worker}/environ", "rb") as f:
        assert f.read() == b""  # (and the settings it read on its stdin are nowhere to read)


# -- workers share nothing ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_worker_reaches_neither_another_workers_scratch_nor_its_proc(tmp_path: Path) -> None:
    p = Pool(tmp_path, size=2)
    try:
        p.pool.warm()
        hold = p.job("fork", deadline=4.0)  # writes grandchild.pid in its scratch, sleeps
        p.pool.submit(hold)
        holder = next(w for w in p.pool.workers if w.job is not None)
        scratch = f"/proc/{holder.pid}/root{SCRATCH_DIR}"  # in its own mount namespace
        mark = Path(scratch) / "job1" / "grandchild.pid"
        eventually(mark.exists, "the holding document never started its grandchild")
        other_doc = p.docs / "1.hostile"
        spec = {"paths": [str(holder.dir), scratch, str(mark), str(other_doc)],
                "pids": [holder.pid]}
        peek = p.job("peek", json.dumps(spec))
        p.pool.submit(peek)  # the only idle worker takes it
        p.pool.drain()
        result, text = p.results[peek.id]
        assert result.status == "ok", result
        seen = json.loads(text or "{}")
        assert len(seen) == 4 + 3 and all(v.startswith("denied:") for v in seen.values()), seen
    finally:
        p.pool.close()


# -- trust nothing a worker says ----------------------------------------------------------------


FORGED = [
    ({"text_is": "big", "size": (1 << 20) + (256 << 10)}, "output limit"),
    ({"text": "../../../../etc/passwd"}, "no valid text file"),
    ({"text": None}, "no valid text file"),
    ({"text": "t999.txt"}, "missing"),
    ({"id": 999999}, "a job it was not given"),
    ({"id": True}, "id: an integer expected, got boolean"),
    ({"verdict": {"status": "ok", "chars": "many"}}, "verdict.chars: an integer expected"),
    ({"verdict": "ok"}, "verdict: an object expected, got string"),
    ({"verdict": {"status": "error", "error_kind": "owned", "error": "x"}},
     "verdict.error_kind: unknown value 'owned'"),
    ({"verdict": {"status": "error", "error_kind": "crash", "error": "x" * 10000}},
     "verdict.error: over 4096 characters"),
    ({"sidecar": {"evil": 1}}, "sidecar: unknown key 'evil'"),
    ({"sidecar": {"pages": "many"}}, "sidecar.pages: an integer expected"),
    ({"sidecar": []}, "sidecar: an object expected, got list"),
    ({"sidecar": {"metadata": ["title"]}}, "sidecar.metadata: an object expected"),
    ({"sidecar": {"embedded": [{"path": 7, "metadata": {}}]}},
     "sidecar.embedded[0].path: a string expected"),
    ({"sidecar": {"embedded": [{"path": "a"}] * 1001}}, "sidecar.embedded: over 1000 items"),
    ({"sidecar": {"metadata": {"title": "x" * 2001}}}, "sidecar.metadata.title: over 2000"),
    ({"sidecar": {"metadata": {"evil": "y"}}}, "sidecar.metadata: unknown key 'evil'"),
    ({"rss": "huge"}, "rss: an integer expected"),
    ({"fatal": "yes"}, "fatal: a boolean expected"),
    ({"verdict": {"status": "ok", "chars": 10}}, "10 chars for a text of 0 bytes"),
]


@pytest.fixture(scope="module")
def forge_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    """One pool for every forged answer: each kills its worker and the next document gets a
    new one (a pool per case started a worker more each)."""
    p = Pool(tmp_path_factory.mktemp("forge"))
    yield p
    p.pool.close()


@pytest.mark.parametrize("forged,why", FORGED, ids=[json.dumps(f)[:40] for f, _ in FORGED])
def test_a_forged_answer_is_one_worker_error_and_the_run_goes_on(
        forge_pool: Pool, forged: dict, why: str) -> None:
    pool = forge_pool
    killed = pool.pool.killed
    result, text = pool.run("forge", json.dumps(forged))
    assert (result.status, result.error_kind) == ("error", "worker"), result
    assert why in (result.error or ""), result
    assert text is None
    answers = pool.pool.fleet.answers.path  # whatever it named was removed, not left to the store
    assert not answers.exists() or list(answers.iterdir()) == []
    pool.goes_on()
    assert len(pool.pool.workers) == 1 and pool.pool.killed == killed + 1


def test_a_workers_metadata_is_made_again_in_the_parent(pool: Pool) -> None:
    """The metadata a worker sends beside its text goes through DocMeta again in the parent:
    strings cleaned, dates that are no dates dropped (what is not of the schema's types and
    bounds is refused before: FORGED)."""
    forged = {"sidecar": {"metadata": {"title": "\x1b]0;owned\x07T" + "x" * 1900,
                                       "created": "not a date", "pages": 3},
                          "embedded": [{"path": "a.docx", "metadata": {"authors": ["\x1b[2JA"]}}]}}
    result, _ = pool.run("forge", json.dumps(forged))
    assert result.status == "ok", result
    meta = result.sidecar["metadata"]
    assert set(meta) == {"title", "pages"} and meta["pages"] == 3
    assert "\x1b" not in meta["title"] and meta["title"] == "]0;ownedT" + "x" * 1900
    assert result.sidecar["embedded"] == [{"path": "a.docx", "metadata": {"authors": ["[2JA"]}}]


@pytest.mark.parametrize("kind", ["dir", "fifo", "symlink", "hardlink"])
def test_a_document_cannot_make_its_text_anything_but_its_text(pool: Pool, kind: str) -> None:
    """The text file is the parent's, in a directory of its own, handed to the document's
    process as a descriptor: the process may not remove it or put a directory, FIFO or link
    in its place (it cannot reach the directory; and Landlock: it writes only in its
    scratch).  The answer it then forges names that file, which is what is taken."""
    result, text = pool.run("forge", json.dumps({"text_is": kind}))
    assert result.status == "ok", result
    assert result.warnings == ("plant denied: EACCES",), result
    assert text == ""


@pytest.mark.parametrize("kind,why", [("dir", "no longer the file made for it"),
                                      ("fifo", "no longer the file made for it"),
                                      ("symlink", "no longer the file made for it"),
                                      ("gone", "gone"),
                                      ("hardlink", "other links"),
                                      ("big", "output limit")])
def test_the_parent_takes_only_its_own_file_of_one_link_within_the_cap(
        tmp_path: Path, kind: str, why: str) -> None:
    """The parent's own check, behind the sandbox's: a document's process only ever had a
    descriptor of its text file, in a directory of the parent's, but were that path reached
    (by a process of the same user without Landlock) and replaced by a directory, a FIFO or a
    link, removed, linked elsewhere or grown past the cap, the text is refused and whatever
    is at the path removed: never an exception that stops the run (a directory raised
    IsADirectoryError before), never a text read through a link."""
    from bastion.readers.runtime.answers import Answers
    from bastion.readers.runtime.handout import Misbehaved, Sent

    answers = Answers(tmp_path / "answers", LIMITS)
    target, fd = answers.text_file("w1", 1)
    sent = Sent(Job(1, "x", "x", "text/plain", "0" * 64, 1, 1.0), False, 1, target, fd, False)
    if kind in ("dir", "fifo", "symlink", "gone"):
        target.unlink()
    if kind == "dir":
        target.mkdir()
        (target / "inside").write_text("x")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        os.symlink("/etc/passwd", target)
    elif kind == "hardlink":
        os.link(target, tmp_path / "elsewhere")
    elif kind == "big":
        os.ftruncate(fd, LIMITS.max_output_bytes + 1)
    with pytest.raises(Misbehaved) as refused:
        answers.take(sent)
    assert refused.value.kind == "worker" and why in refused.value.message
    assert list((tmp_path / "answers").iterdir()) == []
    assert os.stat("/etc/passwd").st_nlink >= 1


# -- one document, one process -----------------------------------------------------------------


def test_processes_are_capped_and_die_with_the_document(pool: Pool) -> None:
    seen = pool.answer("procs", "1000")
    assert seen["started"] < MAX_PROCS and seen["stopped_by"] == "denied: EAGAIN", seen
    again = pool.answer("procs", "20")  # the last document's processes are gone
    assert again["started"] == 20, again


def test_nothing_a_document_does_survives_into_the_next(pool: Pool) -> None:
    tag = uuid.uuid4().hex[:12]
    assert pool.answer("plant", tag)["planted"] is True
    seen = pool.answer("planted", tag)
    assert seen == {"module": False, "builtins": False, "file": False,
                    "child_alive": False}, seen


# -- never silently --------------------------------------------------------------------------


def test_a_pool_that_cannot_drop_root_refuses_in_one_line_unless_accepted(tmp_path: Path) -> None:
    """Forced to the fallback containment (no PID and mount namespace: no way to give up
    root), a root pool refuses to start; accepted explicitly, it starts, and the identity it
    measures says root."""
    with pytest.raises(WorkerError) as refused:
        WorkerPool(1, LIMITS, tmp_path / "a", print, contain="subreaper")
    message = str(refused.value)
    assert "\n" not in message and "would run as root" in message
    assert "allow_root_workers" in message
    accepted = WorkerPool(1, LIMITS, tmp_path / "b", lambda r: None, contain="subreaper",
                          allow_root=True, extra_readers=("tests.hostile_readers",))
    try:
        accepted.warm()
        while accepted.identity is None:
            accepted._poll()
        assert accepted.identity["uid"] == 0 and accepted.identity["cap_eff"] != 0
    finally:
        accepted.close()


def test_the_summary_records_the_measured_worker_identity(tmp_path: Path) -> None:
    import yaml

    from bastion.tasks.cli import main

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    manifest = tmp_path / "m.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "roots": [{"name": "r", "path": "root"}]}))
    out = tmp_path / "out"
    assert main(["sweep", str(manifest), "--out", str(out), "-q", "-j", "1",
                 "--no-external"]) == 0
    ident = json.loads((out / "extract.summary.json").read_text())["worker_identity"]
    assert ident["uid"] >= SLOT_BASE and 0 not in ident["uids"], ident
    assert ident["cap_eff"] == ident["cap_prm"] == ident["cap_bnd"] == 0
    assert ident["no_new_privs"] and ident["seccomp"] == 2
    assert {"mnt", "net", "pid", "ipc", "uts"} <= set(ident["namespaces"])


# -- the one exception: plain text in bounded batches ------------------------------------------


@pytest.mark.slow
def test_plain_text_shares_a_process_for_a_bounded_batch_only(tmp_path: Path) -> None:
    """Documents of the ``text`` family (pure-Python decoding) share a process for at most
    BATCH_DOCS in a row; a document of any other family ends the batch; what one left in
    the batch's process is gone after it.  (A reader named ``text`` stands in for the plain-
    text reader, so the answers can say which process read them.)"""
    from bastion.readers.runtime.batch import BATCH_DOCS

    p = Pool(tmp_path)
    p.pool.extra_readers = ("tests.hostile_text", "tests.hostile_readers")
    try:
        def text_job(i: int) -> Job:
            path = p.docs / f"t{i}.txt"
            data = f"plain {i}\n".encode()
            path.write_bytes(data)
            return Job(10_000 + i, str(path), path.name, "text/plain",
                       hashlib.sha256(data).hexdigest(), len(data), 30.0, reader="text")

        jobs = [text_job(i) for i in range(BATCH_DOCS + 3)]
        for job in jobs[:BATCH_DOCS + 2]:
            p.pool.submit(job)
        p.pool.drain()
        assert p.run("ok")[0].status == "ok"  # another family: the batch ends
        p.pool.submit(jobs[-1])
        p.pool.drain()
        seen = [json.loads(p.results[j.id][1] or "{}") for j in jobs]
        pids = [s["pid"] for s in seen]
        assert len(set(pids[:BATCH_DOCS])) == 1, pids
        assert pids[BATCH_DOCS] not in pids[:BATCH_DOCS]
        assert pids[BATCH_DOCS] == pids[BATCH_DOCS + 1]
        assert pids[-1] not in pids[:-1]
        marks = [s["marks"] for s in seen]
        assert marks == [*range(BATCH_DOCS), 0, 1, 0], marks
    finally:
        p.pool.close()


# -- nothing of one document in the memory of the next -----------------------------------------


CORE_XML = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><cp:coreProperties '
            'xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title>'
            '<dc:creator>{author}</dc:creator><dc:subject>{subject}</dc:subject>'
            '</cp:coreProperties>')


def test_no_earlier_documents_name_title_author_sender_or_subject_is_in_a_later_ones_memory(
        tmp_path: Path) -> None:
    """Attacker code in a document's process (the hostile reader, one document of its own; and
    the first document of a new plain-text batch) scans every readable mapping of its address
    space for unique markers that earlier documents of the same worker carried in their names,
    titles, authors, e-mail senders, subjects and texts — read before it through the single-
    document path (a DOCX) and the batch path (a text, an HTML page, an e-mail).  It finds
    none: no job line and no answer passes through the zygote they are forked from.  (It finds
    its own document's name, which its job carries: the scan works.)"""
    from officegen import docx, w_p

    marks: dict[str, str] = {}

    def mark(what: str) -> str:
        marks[what] = "zq" + uuid.uuid4().hex[:22]
        return marks[what]

    p = Pool(tmp_path)
    p.pool.extra_readers = ("tests.hostile_text", "tests.hostile_readers")

    def submit(name: str, data: bytes, mime: str, reader: str) -> Job:
        p.seq += 1
        path = p.docs / name
        path.write_bytes(data)
        job = Job(p.seq, str(path), name, mime, hashlib.sha256(data).hexdigest(), len(data),
                  30.0, reader=reader)
        p.pool.submit(job)
        return job

    try:
        text = submit(f"{mark('text name')}.txt", f"notes {mark('text body')}\n".encode(),
                      "text/plain", "text")
        page = submit(f"{mark('page name')}.html",
                      (f"<html><head><title>{mark('page title')}</title><meta name=author "
                       f"content=\"{mark('page author')}\"></head><body><p>{mark('page body')}"
                       "</p></body></html>").encode(), "text/html", "markup")
        mail = submit(f"{mark('mail name')}.eml",
                      (f"From: {mark('sender name')} <{mark('sender')}@example.org>\r\n"
                       f"To: someone@example.org\r\nSubject: {mark('subject')}\r\n"
                       "Date: Mon, 1 Jun 2026 10:00:00 +0000\r\n"
                       f"Content-Type: text/plain\r\n\r\nbody {mark('mail body')}\r\n").encode(),
                      "message/rfc822", "mail")
        core = CORE_XML.format(title=mark("docx title"), author=mark("docx author"),
                               subject=mark("docx subject"))
        office = submit(f"{mark('docx name')}.docx",
                        docx(w_p(f"words {mark('docx body')}"),
                             parts={"docProps/core.xml": core}),
                        "application/vnd.openxmlformats-officedocument.wordprocessingml."
                        "document", "ooxml")
        p.pool.drain()
        for job in (text, page, mail, office):
            assert p.results[job.id][0].status == "ok", p.results[job.id]
        assert p.results[page.id][0].sidecar["metadata"]["title"] == marks["page title"]
        assert p.results[mail.id][0].sidecar["metadata"]["subject"] == marks["subject"]
        assert p.results[office.id][0].sidecar["metadata"]["authors"] == [marks["docx author"]]

        earlier = list(marks.values())

        def scan(cmd: str, name: str, mime: str, reader: str) -> dict:
            own = mark(f"{cmd} name")
            halves = [[m[:12], m[12:]] for m in [*earlier, own]]
            job = submit(f"{own}{name}", f"memscan\n{json.dumps({'markers': halves})}".encode(),
                         mime, reader)
            p.pool.drain()
            result, seen = p.results[job.id]
            assert result.status == "ok", (result.error_kind, result.error)
            return json.loads(seen or "{}")

        for cmd, name, mime, reader in (("alone", ".hostile", "application/x-hostile", "hostile"),
                                        ("batch", ".txt", "text/plain", "text")):
            seen = scan(cmd, name, mime, reader)
            leaked = [f"{what} (in {seen['where'].get(str(i))}: {seen['context'].get(str(i))})"
                      for i, what in enumerate(marks) if i in seen["found"] and i < len(earlier)]
            assert leaked == [], leaked
            assert seen["found"] == [len(earlier)], seen  # its own name: the scan sees memory
            assert seen["scanned"] > 16 << 20, seen
            earlier.append(marks[f"{cmd} name"])  # an earlier document's, for the next scan
    finally:
        p.pool.close()


def _mail(subject: str, attachment: tuple[str, str, bytes] | None = None) -> bytes:
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.org", "b@example.org", subject
    msg.set_content(f"body of {subject}\n")
    if attachment is not None:
        name, mime, data = attachment
        maintype, subtype = mime.split("/")
        msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return msg.as_bytes()


@pytest.mark.slow
def test_an_email_shares_a_process_only_while_it_needs_no_native_reader(tmp_path: Path) -> None:
    """E-mails and HTML pages share a process with plain texts (pure readers, one batch); an
    e-mail whose attachment needs a reader that is not pure (here the hostile one, standing
    for PDFium or tesseract) is not read in the batch: the batch's process answers that it
    needs a process of its own, and it is read again, whole, in a fresh one.  A plain-text
    attachment is read in the batch.  Every document gets exactly one record."""
    p = Pool(tmp_path)
    p.pool.extra_readers = ("tests.hostile_text", "tests.hostile_readers")

    def submit(name: str, data: bytes, mime: str, reader: str) -> Job:
        p.seq += 1
        path = p.docs / name
        path.write_bytes(data)
        job = Job(p.seq, str(path), name, mime, hashlib.sha256(data).hexdigest(), len(data),
                  30.0, reader=reader)
        p.pool.submit(job)
        return job

    try:
        for name, mime, reader in (("w.txt", "text/plain", "text"),
                                   ("w.html", "text/html", "markup"),
                                   ("w.eml", "message/rfc822", "mail")):
            submit(name, b"warm\n", mime, reader)  # each family loaded by the zygote first
        p.pool.drain()
        first = submit("a.txt", b"plain a\n", "text/plain", "text")
        page = submit("p.html", b"<title>T</title><p>page words</p>", "text/html", "markup")
        plain = submit("plain.eml", _mail("plain one"), "message/rfc822", "mail")
        texted = submit("texted.eml", _mail("with text", ("n.txt", "text/plain", b"note\n")),
                        "message/rfc822", "mail")
        native = submit("native.eml", _mail("with native", ("x.hostile", "application/"
                        "octet-stream", b"pid\n\x00\x01\x02")), "message/rfc822", "mail")
        last = submit("b.txt", b"plain b\n", "text/plain", "text")
        p.pool.drain()
        jobs = (first, page, plain, texted, native, last)
        assert all(p.results[j.id][0].status == "ok" for j in jobs), [p.results[j.id] for j in jobs]
        assert len(p.results) == len(jobs) + 3
        batch_pid = json.loads(p.results[first.id][1] or "{}")["pid"]
        assert "page words" in (p.results[page.id][1] or "")
        assert "body of plain one" in (p.results[plain.id][1] or "")
        # the text attachment: read by the pure reader put first, in the batch's process
        inner = (p.results[texted.id][1] or "").split("[attachment: n.txt (text/plain")[1]
        assert json.loads(inner.split("\n", 1)[1].split("\n")[0])["pid"] == batch_pid
        # the native one: read, with its e-mail, in a process of its own
        text = p.results[native.id][1] or ""
        assert "body of with native" in text and "[attachment: x.hostile" in text, text
        seen_by = int(text.split("[attachment: x.hostile")[1].split("\n")[1])
        last_pid = json.loads(p.results[last.id][1] or "{}")["pid"]
        assert seen_by not in (batch_pid, last_pid)
        assert p.pool.killed == 0
    finally:
        p.pool.close()


@pytest.mark.parametrize("cmd,kind", [("segv", "crash"), ("sleep", "timeout")])
def test_a_shared_process_that_dies_costs_one_record_and_the_rest_are_read(
        tmp_path: Path, cmd: str, kind: str) -> None:
    """A shared process (plain texts: a reader named ``text`` put first) given several
    documents in one message dies on one of them (a crash; a deadline that kills its whole
    worker): that document gets one error record, the documents it was given and had not
    started are read by another process, the ones it had answered keep their records, and
    every document has exactly one."""
    p = Pool(tmp_path)
    p.pool.extra_readers = ("tests.hostile_text", "tests.hostile_readers")
    try:
        jobs = []
        for i in range(12):
            p.seq += 1
            data = f"{cmd}\n".encode() if i == 5 else f"plain {i}\n".encode()
            path = p.docs / f"t{i}.txt"
            path.write_bytes(data)
            job = Job(p.seq, str(path), path.name, "text/plain", hashlib.sha256(data).hexdigest(),
                      len(data), 2.0, reader="text")
            jobs.append(job)
            p.pool.submit(job)
        p.pool.drain()
        assert sorted(p.results) == [j.id for j in jobs]
        bad, _ = p.results[jobs[5].id]
        assert (bad.status, bad.error_kind) == ("error", kind), bad
        seen = {j.id: json.loads(p.results[j.id][1] or "{}") for j in jobs if j is not jobs[5]}
        assert all(p.results[i][0].status == "ok" for i in seen)
        before = {seen[j.id]["pid"] for j in jobs[:5]}
        after = {seen[j.id]["pid"] for j in jobs[6:]}
        assert not before & after  # those after it: read by another process
        assert p.pool.killed == 1
        p.goes_on()
    finally:
        p.pool.close()


# -- /run/bastion and its slots ----------------------------------------------------------------


@pytest.fixture()
def run_dir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``/run/bastion`` stood in for by a fresh directory (the real one is every run's)."""
    from bastion.readers.runtime import identity

    top = Path("/run") / f"bastion-test-{uuid.uuid4().hex[:12]}"
    top.mkdir(mode=0o755)
    monkeypatch.setattr(identity, "LOCKS", top / "bastion" / "slots")
    yield top / "bastion"
    shutil.rmtree(top, ignore_errors=True)


def test_run_bastion_and_its_slots_are_roots_0755_whatever_the_umask(run_dir: Path) -> None:
    from bastion.readers.runtime.identity import SlotUsers

    old = os.umask(0)
    users = SlotUsers()
    try:
        uid, _ = users.take()
    finally:
        os.umask(old)
        users.close()
    for d in (run_dir, run_dir / "slots"):
        st = os.lstat(d)
        assert stat.S_ISDIR(st.st_mode) and (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
    lock = os.lstat(run_dir / "slots" / f"{uid}.lock")
    assert (lock.st_uid, stat.S_IMODE(lock.st_mode)) == (0, 0o600)


@pytest.mark.parametrize("how", ["replaced", "symlink"])
def test_slots_a_co_user_replaced_are_refused_in_one_line(run_dir: Path, tmp_path: Path,
                                                          how: str) -> None:
    """``/run/bastion`` left 0777 (by the code before, under umask 0) let a co-user put their
    own ``slots/`` in place, or a link to a directory of root's: root then created lock
    files where they chose, and two runs could share a slot's uid.  Now the pool refuses in
    one line, and creates nothing there."""
    from seconduser import second_user

    from bastion.readers.runtime.identity import SlotUsers

    uid, gid = second_user()
    run_dir.mkdir()
    os.chmod(run_dir, 0o777)
    if how == "replaced":
        (run_dir / "slots").mkdir()
        os.chown(run_dir / "slots", uid, gid)
        os.chmod(run_dir / "slots", 0o777)
        why = f"owned by uid {uid}"
    else:
        target = tmp_path / "roots-dir"
        target.mkdir()
        os.symlink(target, run_dir / "slots")
        why = "symbolic link"
    users = SlotUsers()
    try:
        with pytest.raises(OSError) as refused:
            users.take()
    finally:
        users.close()
    message = str(refused.value)
    assert why in message and "/slots" in message and "\n" not in message, message
    made = list((run_dir / "slots").iterdir())
    assert made == [], made
    with pytest.raises(WorkerError, match=why):  # and the pool says so, one line
        pool = WorkerPool(1, LIMITS, tmp_path / "pool", print)
        try:
            pool.warm()
        finally:
            pool.close()
