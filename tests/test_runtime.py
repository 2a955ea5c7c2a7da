"""The reader runtime: a pool of sandboxed workers fed misbehaving readers (tests/hostile_readers.py),
and ``run_tool``'s deadline and output cap.

Each misbehaviour must give exactly one ``error`` JobResult with the right ``error_kind`` and a
useful message, and the pool must go on (an ``ok`` job after it succeeds).  Kills take every
process the worker started, even one that left its session (its PID namespace, or the
subreaper fallback); the child sees only ``CHILD_ENV`` + ``TMPDIR`` and none of the parent's
descriptors but its protocol and the document's; with Landlock it cannot write outside its
directory nor open TCP; run as root, the pool's workers are ``nobody`` and still read root-only
documents.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bastion.readers.base import Document, Limits, MiB
from bastion.readers import dispatch
from bastion.readers.dispatch import read_document
from bastion.readers.errors import ToolFailed
from bastion.readers.runtime.context import LocalContext
from bastion.readers.runtime.identity import SLOT_BASE
from bastion.readers.runtime.pool import Job, JobResult, WorkerPool, open_document
from bastion.readers.runtime.procs import CHILD_ENV, SUBREAPER, containment, fork_helper
from bastion.readers.runtime.sandbox import SCRATCH_DIR
from bastion.readers.runtime.toolcall import RunningTool, run_tool

from procutil import alive, eventually, pids_with  # tests/ is on sys.path

HOSTILE = ("tests.hostile_readers",)
LIMITS = Limits(memory_bytes=256 * MiB, max_output_bytes=1 * MiB, deadline_s=2.0)
DEADLINE = 1.5


# -- helpers --------------------------------------------------------------------------------


def proc_state(pid: int) -> str | None:
    """The process's state letter (R, S, Z, …), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(b")") + 2 :].split()[0].decode()


class Harness:
    """A WorkerPool with the hostile reader, documents in a temp dir, results collected."""

    def __init__(self, tmp: Path, size: int = 1, limits: Limits = LIMITS, **kw) -> None:
        self.docs = tmp / "docs"
        self.docs.mkdir(exist_ok=True)
        self.results: list[tuple[JobResult, str | None]] = []
        self.next_id = 0
        self.pool = WorkerPool(size, limits, tmp / "pool", self._collect,
                               extra_readers=HOSTILE, **kw)

    def _collect(self, result: JobResult) -> None:
        text = None
        if result.text_path is not None:
            text = result.text_path.read_text(encoding="utf-8")  # unlinked after the callback
        self.results.append((result, text))

    def job(self, cmd: str, arg: str = "", deadline: float = DEADLINE) -> Job:
        self.next_id += 1
        data = f"{cmd}\n{arg}".encode()
        path = self.docs / f"{self.next_id}.hostile"
        path.write_bytes(data)
        return Job(id=self.next_id, path=str(path), name=path.name,
                   mime="application/x-hostile", sha256=hashlib.sha256(data).hexdigest(),
                   size=len(data), deadline_s=deadline)

    def run(self, cmd: str, arg: str = "", deadline: float = DEADLINE) -> tuple[JobResult, str]:
        job = self.job(cmd, arg, deadline)
        self.pool.submit(job)
        self.pool.drain()
        return self.only(job)

    def only(self, job: Job) -> tuple[JobResult, str]:
        mine = [(r, t) for r, t in self.results if r.job.id == job.id]
        assert len(mine) == 1, f"{len(mine)} results for job {job.id}: {mine}"
        return mine[0]

    def close(self) -> None:
        self.pool.close()


@pytest.fixture()
def harness(tmp_path: Path):
    h = Harness(tmp_path)
    yield h
    h.close()


def assert_goes_on(h: Harness) -> None:
    result, text = h.run("ok")
    assert result.status == "ok", result
    assert text == "fine\n"


_ABI: int | None = None


def landlock_abi() -> int:
    """The Landlock ABI the sandbox gets, asked in a throw-away child (it restricts itself)."""
    global _ABI
    if _ABI is None:
        code = ("import sys, tempfile, pathlib; from bastion.readers.runtime.sandbox import landlock_restrict; "
                "print(landlock_restrict([pathlib.Path(tempfile.mkdtemp())]))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             cwd=str(Path(__file__).resolve().parent.parent), timeout=30)
        _ABI = int(out.stdout.strip() or 0) if out.returncode == 0 else 0
    return _ABI


def test_a_worker_imports_only_the_reader_families_its_jobs_need(tmp_path: Path) -> None:
    """A worker handed CSV files imports the CSV reader and no other family; a document with
    no reader chosen is selected on ``dispatch.SPECS`` and loads no other family either."""
    h = Harness(tmp_path)
    try:
        csv_path = h.docs / "a.csv"
        csv_path.write_bytes(b"a,b\n1,2\n")
        data = csv_path.read_bytes()
        h.next_id += 1
        job = Job(id=h.next_id, path=str(csv_path), name="a.csv", mime="text/csv",
                  sha256=hashlib.sha256(data).hexdigest(), size=len(data), deadline_s=DEADLINE,
                  reader="delimited")
        h.pool.submit(job)
        h.pool.drain()
        result, text = h.only(job)
        assert result.status == "ok" and "1" in text, result
        listing = h.job("modules")
        listing = dataclasses.replace(listing, reader="hostile")  # chosen, as the parent does
        h.pool.submit(listing)
        h.pool.drain()
        loaded = set(json.loads(h.only(listing)[1]))
        assert "bastion.readers.text.delimited" in loaded
        families = {f"bastion.readers.{m}" for m in dispatch.MODULES.values()}
        assert loaded & families == {"bastion.readers.text.delimited"}, sorted(loaded & families)
        h.next_id += 1
        unplanned = Job(id=h.next_id, path=str(csv_path), name="a.csv", mime="text/csv",
                        sha256=job.sha256, size=job.size, deadline_s=DEADLINE)
        h.pool.submit(unplanned)
        h.pool.drain()
        assert h.only(unplanned)[0].status == "ok"
        _, listing = h.run("modules")  # no reader chosen: selected on SPECS, nothing loaded
        assert set(json.loads(listing)) & families == {"bastion.readers.text.delimited"}
    finally:
        h.close()


def test_the_registry_is_the_modules_in_order() -> None:
    """``dispatch.MODULES`` names each reader's module, in the registry's order."""
    assert [r.name for r in dispatch.BUILTIN.readers()] == list(dispatch.MODULES)
    assert dispatch.BUILTIN.by_name("text") is dispatch.BUILTIN.readers()[-1]
    assert dispatch.BUILTIN.by_name("no such reader") is None


def test_the_registry_is_a_value_passed_in() -> None:
    """The reader registry is a frozen value that whoever dispatches builds and passes in (to
    the read context too): a registry with a reader put first chooses it, for a document and
    for the members of an archive read under it, and the built-in registry stays as it is."""
    import io
    import zipfile

    mine = dispatch.Registry.with_modules(("tests.hostile_text",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        mine.first = ()  # type: ignore[misc]
    for chosen in (mine.select("text/plain", "a.txt"), mine.by_name("text")):
        assert chosen is not None and chosen.read.__module__ == "tests.hostile_text"
    builtin = dispatch.BUILTIN.by_name("text")
    assert builtin is not None and builtin.read.__module__ == "bastion.readers.text.plaintext"
    assert dispatch.BUILTIN.first == () and dispatch.BUILTIN.select("text/plain", "a.txt") is builtin
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.txt", "MEMBERWORD\n")
    doc = Document(buf.getvalue(), "a.zip", "application/zip")
    theirs = read_document(doc, LocalContext(Limits(name_languages=False), registry=mine))
    assert theirs.status == "ok" and '"marks"' in theirs.text and "MEMBERWORD" not in theirs.text
    plain = read_document(doc, LocalContext(Limits(name_languages=False)))
    assert plain.status == "ok" and "MEMBERWORD" in plain.text and '"marks"' not in plain.text


def test_callbacks_run_after_the_next_dispatch_exactly_once(tmp_path: Path) -> None:
    """A finished document's callback runs once its worker has been given the next document
    (the caller's store work overlaps the worker's next read); every callback runs exactly
    once by the end of ``drain``, and ``close`` runs any still held back."""
    h = Harness(tmp_path)
    events: list[tuple[str, int]] = []
    real_collect = h._collect

    def collect(result: JobResult) -> None:
        events.append(("callback", result.job.id))
        real_collect(result)

    h.pool.callback = collect
    real_choose = h.pool._choose

    def choose(job, alone):
        chosen = real_choose(job, alone)
        if chosen is not None:
            events.append(("dispatch", job.id))
        return chosen

    h.pool._choose = choose  # type: ignore[method-assign]
    try:
        jobs = [h.job("ok") for _ in range(4)]
        for job in jobs:
            h.pool.submit(job)
        h.pool.drain()
        assert sorted(r.job.id for r, _ in h.results) == [j.id for j in jobs]
        assert all(text == "fine\n" for _, text in h.results)  # texts read in the callback
        for earlier, later in zip(jobs, jobs[1:]):  # job k's callback after k+1's dispatch
            assert events.index(("dispatch", later.id)) < events.index(("callback", earlier.id))
        extra = h.job("ok")
        h.pool.submit(extra)
        h.pool.drain()
        assert [r.job.id for r, _ in h.results].count(extra.id) == 1
    finally:
        h.close()


# -- each misbehaviour: one error record, the run goes on -----------------------------------


@pytest.mark.parametrize("cmd, kind, words", [
    ("sleep", "timeout", "timed out after 1.5 s"),
    ("alloc", "memory", "memory"),
    ("segv", "crash", "SIGSEGV"),
    ("exit", "crash", "exited with status 3: hostile: exiting on purpose"),
    ("raise", "internal", "ValueError: hostile reader raised on purpose"),
    ("bigtext", "output_limit", f"{1 * MiB} byte output limit"),
])
@pytest.mark.slow
@pytest.mark.timeout(120)  # "sleep" never ends of itself: a deadline not kept is a hang
def test_misbehaviour_is_one_error_and_the_run_goes_on(harness: Harness, cmd: str, kind: str,
                                                       words: str) -> None:
    result, text = harness.run(cmd)
    assert result.status == "error"
    assert result.error_kind == kind, result
    assert words in (result.error or ""), result.error  # "sleep": the deadline it was given
    assert result.text_path is None and text is None
    assert_goes_on(harness)
    # still exactly one verdict for the bad job, and nothing left over in the pool
    harness.only(harness.results[0][0].job)
    assert len(harness.results) == 2
    assert all(w.job is None for w in harness.pool.workers)


@pytest.mark.slow
def test_kills_are_counted_and_workers_replaced(harness: Harness) -> None:
    """A document's process that dies is reported by its worker's zygote, which goes on (it
    never read that document); a document past its deadline takes the whole worker."""
    assert_goes_on(harness)
    first = harness.pool.pids()
    assert harness.run("exit")[0].error_kind == "crash"
    assert harness.pool.pids() == first and harness.pool.spawned == 1
    assert harness.run("sleep", deadline=0.5)[0].error_kind == "timeout"
    assert_goes_on(harness)
    assert harness.pool.killed == 2
    assert harness.pool.spawned == 2
    assert not set(first) & set(harness.pool.pids())


def test_stdout_and_stderr_floods_do_not_break_the_protocol(harness: Harness) -> None:
    result, text = harness.run("flood", deadline=20)
    assert result.status == "ok", result
    assert text == "flooded\n"
    assert_goes_on(harness)
    # the worker survived: same process did both jobs
    assert harness.pool.spawned == 1


@pytest.mark.slow
@pytest.mark.timeout(120)  # the reader and its grandchild never end of themselves
def test_timeout_kills_the_process_group_with_a_grandchild(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    try:
        job = h.job("fork", deadline=2.0)
        h.pool.submit(job)
        # the reader writes its grandchild's pid into its scratch dir, before it sleeps: a
        # tmpfs in the worker's own mount namespace (run as root), else under its directory
        def pid_files() -> list[Path]:
            worker_pid = h.pool.pids()[0]
            where = (Path(f"/proc/{worker_pid}/root{SCRATCH_DIR}") if h.pool.user is not None
                     else tmp_path / "pool" / h.pool.workers[0].dir.name / "scratch")
            return list(where.glob("job*/grandchild.pid"))

        eventually(lambda: pid_files() != [], "the fork reader never started its grandchild")
        worker_pid = h.pool.pids()[0]
        grandchild = int(pid_files()[0].read_text())
        assert alive(grandchild)
        h.pool.drain()
        result, _ = h.only(job)
        assert result.status == "error" and result.error_kind == "timeout"
        # a sleep of 1000 s: gone only by the kill (the kernel finishes it a moment later)
        eventually(lambda: not alive(grandchild), f"grandchild {grandchild} survived the kill")
        assert proc_state(worker_pid) is None, "the worker was not reaped (zombie)"
        assert_goes_on(h)
    finally:
        h.close()


def test_close_leaves_no_workers(tmp_path: Path) -> None:
    h = Harness(tmp_path, size=2)
    jobs = [h.job("ok") for _ in range(4)]
    for job in jobs:
        h.pool.submit(job)
    h.pool.drain()
    pids = h.pool.pids()
    assert len(pids) == 2
    assert all(alive(p) for p in pids)
    h.close()
    for p in pids:
        assert proc_state(p) is None, f"worker {p} left behind ({proc_state(p)})"
    assert not any((tmp_path / "pool").iterdir()), "worker directories left behind"
    assert [r.status for r, _ in h.results] == ["ok"] * 4


def test_recycling_replaces_the_worker_every_k_documents(tmp_path: Path) -> None:
    h = Harness(tmp_path, recycle_after=3)
    try:
        seen = []  # the worker (its keeper's pid) that read each document
        for _ in range(7):
            job = h.job("ok")
            h.pool.submit(job)
            seen.append(h.pool.workers[0].proc.pid)
            h.pool.drain()
            assert h.only(job)[0].status == "ok"
        assert seen[0] == seen[1] == seen[2]
        assert seen[3] == seen[4] == seen[5]
        assert len({seen[0], seen[3], seen[6]}) == 3
        assert h.pool.spawned == 3 and h.pool.killed == 0
        for p in (seen[0], seen[3]):
            assert proc_state(p) is None
        result, text = h.run("ok")
        assert text == "fine\n"
    finally:
        h.close()


# -- what the child sees ----------------------------------------------------------------------


def test_child_environment_is_exactly_child_env(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASTION_TEST_MARKER", "leaked-secret")
    monkeypatch.setenv("PYTHONPATH", "/nonexistent-leak")
    h = Harness(tmp_path)
    try:
        result, text = h.run("env")
        assert result.status == "ok", result
        env = json.loads(text)
        wdir = env.pop("TMPDIR")
        if h.pool.user is None:  # its scratch, in its directory
            assert Path(wdir).parent.parent == tmp_path / "pool"
        else:  # a worker that gave up root: a tmpfs of its own over /run/bastion-scratch
            assert Path(wdir) == SCRATCH_DIR
        assert env == CHILD_ENV
        assert "leaked-secret" not in text
    finally:
        h.close()


def test_child_has_no_parent_descriptors(tmp_path: Path) -> None:
    secret = tmp_path / "parent-secret.txt"
    secret.write_text("secret")
    fd = os.open(secret, os.O_RDONLY)  # inheritable on purpose
    os.set_inheritable(fd, True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    os.set_inheritable(sock.fileno(), True)
    parent_socket = f"socket:[{os.fstat(sock.fileno()).st_ino}]"
    try:
        h = Harness(tmp_path)
        try:
            result, text = h.run("fds")
        finally:
            h.close()
    finally:
        os.close(fd)
        sock.close()
    assert result.status == "ok", result
    fds = {int(k): v for k, v in json.loads(text).items()}
    targets = {v for v in fds.values() if v is not None}
    assert str(secret) not in targets
    assert parent_socket not in targets, fds
    assert not any(t.endswith(".hostile") for t in targets), fds  # the document: read, closed
    # 0 and 1 are /dev/null (a reader's prints cannot reach the protocol), 2 is the stderr pipe
    assert fds[0] == "/dev/null" and fds[1] == "/dev/null"
    assert fds[2].startswith("pipe:")
    # the document's process has its own channel to the parent (its job socket, its answer
    # pipe), not its zygote's control socket
    protocol = [n for n, t in fds.items() if n > 2 and t and t.startswith(("pipe:", "socket:"))]
    assert sorted(fds[n].partition(":")[0] for n in protocol) == ["pipe", "socket"], fds
    # and its text file (t1.txt, made by the parent in its own directory); everything else is
    # the listing's own descriptor (/proc/<pid>/fd), nothing of the parent
    rest = {n: t for n, t in fds.items() if n > 2 and n not in protocol}
    texts = [n for n, t in rest.items() if t and t.endswith("-t1.txt")]
    assert len(texts) == 1, rest
    rest.pop(texts[0])
    assert all(t is None or t.startswith("/proc/") for t in rest.values()), rest
    assert len(rest) <= 1, rest


def test_landlock_forbids_writing_outside_the_private_dir(tmp_path: Path) -> None:
    if landlock_abi() == 0:
        pytest.skip("no Landlock on this kernel")
    target = tmp_path / "escaped.txt"
    h = Harness(tmp_path)
    try:
        result, text = h.run("write", str(target))
        assert result.status == "ok", result
        assert text.startswith("denied:"), text
        assert not target.exists()
        # nor in its worker's directory (its cwd)
        result, text = h.run("write", "inside.txt")
        assert text.startswith("denied:"), text
        # inside its own scratch directory it may write
        result, text = h.run("write", "$TMPDIR/inside.txt")
        assert text == "wrote\n"
    finally:
        h.close()
    assert not target.exists()


def test_landlock_forbids_tcp(tmp_path: Path) -> None:
    if landlock_abi() < 4:
        pytest.skip("Landlock without network rules (ABI < 4) on this kernel")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    port = server.getsockname()[1]
    # the listener works for the parent
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    conn, _ = server.accept()
    conn.close()
    h = Harness(tmp_path)
    try:
        result, text = h.run("net", str(port))
    finally:
        h.close()
    try:
        assert result.status == "ok", result
        assert text.startswith("refused:"), text
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


# -- run_tool ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(60)  # the tool never ends of itself: a deadline not kept is a hang
def test_run_tool_kills_the_tool_group_at_the_deadline() -> None:
    """run_tool returns only when the tool ends, and this one ends only by the kill: its
    ``timeout`` verdict, naming the deadline it was given, shows the deadline's kill came
    first; then neither sleep is left."""
    token = uuid.uuid4().int % 10**9
    a, b = f"1000.{token}", f"999.{token}"
    with pytest.raises(ToolFailed) as info:
        run_tool(["sh", "-c", f"sleep {a} & sleep {b}"], timeout=1.0)
    assert info.value.kind == "timeout"
    assert "timed out after 1 s" in info.value.message
    eventually(lambda: pids_with(f".{token}") == [], "a sleep of the tool survived")


def test_run_tool_caps_output_and_returns_promptly() -> None:
    """'yes' never ends: a result at all (not a ``timeout`` at 30 s) shows the cap stopped it
    before the deadline did, and it was killed there."""
    token = f"y{uuid.uuid4().hex}"
    result = run_tool(["yes", token], timeout=30.0, max_output=1 << 20)
    assert result.truncated is True
    assert len(result.stdout) == 1 << 20
    assert result.stdout.startswith(f"{token}\n{token}\n".encode())
    assert pids_with(token) == [], "'yes' was not killed at the cap"


def test_run_tool_reaps_a_tool_that_finishes() -> None:
    result = run_tool(["sh", "-c", "echo out; echo err >&2; exit 4"], timeout=10.0)
    assert (result.returncode, result.stdout, result.stderr, result.truncated) == (
        4, b"out\n", b"err\n", False)


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_run_tool_input_from_memory_and_work_while_it_runs(tmp_path: Path) -> None:
    """Without an input directory the input is a memory file (nothing on disk); the work
    given as ``while_running`` happens while the tool runs, and its deadline counts from
    the tool's start."""
    # the tool cannot finish before the work while it runs lets it go (a ``while_running``
    # called after the tool's end would leave it waiting until the deadline)
    go = tmp_path / "go"
    seen: list[bool] = []

    def work() -> None:
        seen.append(go.exists())
        go.touch()

    result = run_tool(["sh", "-c", f"while [ ! -e '{go}' ]; do sleep 0.01; done; wc -c; "
                       "ls -l /proc/self/fd/0"], input=b"x" * 100_000, timeout=10.0,
                      while_running=work)
    lines = result.stdout.decode().splitlines()
    assert lines[0].strip() == "100000"
    assert "memfd:bastion-input" in lines[1]
    assert seen == [False]  # called once, while the tool ran
    # slow work while running eats the tool's time: a tool that ends at once, found past its
    # deadline (counted from its start, not from the work's end), is a timeout
    with pytest.raises(ToolFailed) as err:
        run_tool(["true"], timeout=0.5, while_running=lambda: time.sleep(0.6))
    assert err.value.kind == "timeout"


def test_run_tool_that_closes_its_output_but_runs_on_is_timed_out() -> None:
    """A tool that closes stdout and stderr and keeps running is waited for only until the
    deadline, then killed: the wait for its exit counts against the same deadline."""
    token = f"s{uuid.uuid4().hex}"
    with pytest.raises(ToolFailed) as err:  # a wait for its exit would return its status 0
        run_tool(["sh", "-c", f"exec >&- 2>&-; sleep 30; : {token}"], timeout=0.5)
    assert (err.value.kind, err.value.message) == ("timeout", "sh timed out after 0.5 s")
    assert pids_with(token) == []


def test_run_tool_sees_only_child_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BASTION_TEST_MARKER", "leaked-secret")
    result = run_tool(["env"], timeout=10.0)
    seen = dict(line.split("=", 1) for line in result.stdout.decode().splitlines())
    assert seen == CHILD_ENV


@pytest.mark.slow
def test_running_tool_returns_at_once_and_finish_collects(tmp_path: Path) -> None:
    """RunningTool does not wait for the tool; finish() reads its output and reaps it, and the
    deadline counts from the start, not from finish().

    "At once" is shown by cause, not by a clock (a timed bound failed under load): the tool
    cannot end before the test creates ``go``, which it does only after the constructor has
    returned; a constructor that waited for the tool would reach the deadline instead."""
    go = tmp_path / "go"
    tool = RunningTool(["sh", "-c", f"while [ ! -e '{go}' ]; do sleep 0.01; done; "
                        "echo done; echo note >&2"], timeout=10.0)
    assert tool.proc.poll() is None  # still running: it waits for us
    go.touch()
    result = tool.finish()
    assert (result.returncode, result.stdout, result.stderr) == (0, b"done\n", b"note\n")
    assert tool.proc.returncode == 0  # reaped

    # the caller is busy past the deadline, then lets the tool go: from there it would end of
    # itself, with a line.  finish() gives it no more time (a finish() that read on, or
    # counted the deadline from its own start, would return that line) and kills its group
    # (the sleep it left, which never ends of itself).
    token = uuid.uuid4().int % 10**9
    free = tmp_path / "free"
    late = RunningTool(["sh", "-c", f"sleep 1000.{token} >/dev/null 2>&1 & "
                        f"while [ ! -e '{free}' ]; do sleep 0.01; done; echo late"],
                       timeout=0.4)
    time.sleep(0.5)
    free.touch()
    with pytest.raises(ToolFailed) as err:
        late.finish()
    assert (err.value.kind, err.value.message) == ("timeout", "sh timed out after 0.4 s")
    eventually(lambda: pids_with(f"1000.{token}") == [], "the tool's group outlived finish()")


def test_running_tool_kill_leaves_nothing() -> None:
    token = f"k{uuid.uuid4().hex}"
    tool = RunningTool(["sh", "-c", f"sleep 30 & sleep 31; : {token}"], input=b"x" * 10,
                       timeout=60.0)
    time.sleep(0.1)
    tool.kill()
    assert tool.proc.returncode is not None
    eventually(lambda: pids_with(token) == [], "a sleep of the killed tool survived")


# -- isolation overhead (measured, not asserted: bench/ owns speed) ---------------------------


@pytest.mark.slow
def test_isolation_overhead_per_document(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    n = 2000
    docs = tmp_path / "small"
    docs.mkdir()
    jobs = []
    datas = []
    for i in range(n):
        data = f"document {i}\nsome small text, line two\n".encode()
        p = docs / f"{i}.txt"
        p.write_bytes(data)
        datas.append(data)
        jobs.append(Job(id=i + 1, path=str(p), name=p.name, mime="text/plain",
                        sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                        deadline_s=60.0))
    results: list[str] = []

    def collect(r: JobResult) -> None:
        results.append(r.status)

    limits = Limits()
    pool = WorkerPool(1, limits, tmp_path / "pool", collect)
    try:
        # start the worker outside the timing (its start is paid once per run, not per file)
        pool.submit(jobs[0])
        pool.drain()
        t0 = time.perf_counter()
        for job in jobs[1:]:
            pool.submit(job)
        pool.drain()
        pooled = time.perf_counter() - t0
    finally:
        pool.close()
    assert results == ["ok"] * n

    ctx = LocalContext(limits, {}, tmp_path)
    t0 = time.perf_counter()
    for job, data in zip(jobs[1:], datas[1:]):
        with open(job.path, "rb") as f:
            raw = f.read()
        hashlib.sha256(raw).hexdigest()
        outcome = read_document(Document(raw, job.name, job.mime), ctx)
        assert outcome.status == "ok"
    inproc = time.perf_counter() - t0
    m = n - 1
    overhead_ms = (pooled - inproc) / m * 1000
    with capsys.disabled():
        print(f"\nisolation overhead: worker {pooled / m * 1000:.3f} ms/doc, in-process "
              f"{inproc / m * 1000:.3f} ms/doc, overhead {overhead_ms:.3f} ms/doc "
              f"(N={m}, 1 worker)")


# -- more ways a worker can misbehave ---------------------------------------------------------


def test_worker_that_breaks_the_protocol_is_killed(harness: Harness) -> None:
    result, _ = harness.run("garbage")
    assert result.status == "error" and result.error_kind == "worker"
    assert "protocol" in result.error
    assert_goes_on(harness)
    assert len(harness.results) == 2


def test_an_answer_over_the_cap_is_one_output_limit_error(harness: Harness) -> None:
    """A document's process that writes an answer line past the cap (4 MiB) is stopped
    there: one ``output_limit`` record naming the cap, the parent's buffer bounded, the run
    goes on."""
    result, _ = harness.run("bigline", deadline=30)
    assert (result.status, result.error_kind) == ("error", "output_limit"), result
    assert result.error == "reader answer over the 4 MiB answer cap", result
    assert_goes_on(harness)
    assert len(harness.results) == 2


def test_text_file_replaced_by_a_symlink_is_refused(harness: Harness) -> None:
    """A symlink planted at its text's name (in its scratch: nothing else is its to write) is
    never followed: the text goes to the descriptor of the file the parent made.  The
    parent's own refusal of a link is tests/test_hostile_reader.py's."""
    result, text = harness.run("symlink")
    assert result.status == "ok", result
    assert text == "text through a symlink\n"
    assert_goes_on(harness)


def test_worker_dead_while_idle_is_replaced(harness: Harness) -> None:
    """The process the pool started (the worker's keeper, ``unshare``) killed from outside:
    the worker dies with it, and the next document goes to a new worker."""
    assert_goes_on(harness)
    worker = int(harness.run("pid")[1])
    (pid,) = harness.pool.pids()
    os.kill(pid, 9)
    eventually(lambda: proc_state(pid) in ("Z", None) and not alive(worker),
               "the worker outlived its keeper")
    assert_goes_on(harness)
    assert harness.pool.pids() != [pid]
    assert [r.status for r, _ in harness.results] == ["ok", "ok", "ok"]


@pytest.mark.slow
def test_timeout_kills_a_tool_the_reader_started(harness: Harness) -> None:
    token = uuid.uuid4().int % 10**9
    job = harness.job("tool", str(token), deadline=1.5)
    harness.pool.submit(job)
    eventually(lambda: len(pids_with(f".{token}")) == 3, "sh and its two sleeps never started")
    harness.pool.drain()
    result, _ = harness.only(job)
    assert result.error_kind == "timeout"
    eventually(lambda: pids_with(f".{token}") == [],
               "the tool's children outlived the killed worker")


@pytest.mark.parametrize("contain", ["auto", "user-pid-namespace", "subreaper"])
@pytest.mark.slow
def test_timeout_kills_a_descendant_that_left_the_session(tmp_path: Path, contain: str) -> None:
    """A reader's child that calls ``setsid`` leaves the worker's session and group: the kill
    still takes it, through the worker's PID namespace (its PID 1 dies, the kernel kills the
    rest; as root, or inside a user namespace) or, in the fallback, through the subreaper's
    tree."""
    # a forced fallback gives no mount namespace to give up root in: accepted explicitly
    harness = Harness(tmp_path, contain=contain, allow_root=contain != "auto")
    try:
        assert_goes_on(harness)
        expected = {"auto": "pid-namespace" if os.geteuid() == 0 else "user-pid-namespace"}
        assert harness.pool.workers[0].contained == expected.get(contain, contain)
        run_daemon(harness)
        assert_goes_on(harness)
    finally:
        harness.close()


def run_daemon(harness: Harness) -> None:
    token = uuid.uuid4().int % 10**9
    job = harness.job("daemon", str(token), deadline=1.5)
    try:
        harness.pool.submit(job)
        eventually(lambda: pids_with(f"1000.{token}") != [], "the daemon never started")
        harness.pool.drain()
        assert harness.only(job)[0].error_kind == "timeout"
        eventually(lambda: pids_with(f"1000.{token}") == [],
                   "a setsid descendant outlived its worker")
    finally:
        for pid in pids_with(f"1000.{token}"):  # the stray sleep this test started
            os.kill(pid, 9)


def test_kill_9_of_the_parent_takes_a_setsid_descendant(tmp_path: Path) -> None:
    """bastion itself killed with SIGKILL (no cleanup runs): its worker dies with it
    (``PR_SET_PDEATHSIG`` down the chain), and with the worker's PID namespace every process
    in it, even one that left the worker's session."""
    if containment()[1] == SUBREAPER:
        pytest.skip("no PID namespace here (not root, no user namespaces): the subreaper "
                    "fallback cannot hold what outlives its worker")
    token = uuid.uuid4().int % 10**9
    doc = tmp_path / "d.hostile"
    doc.write_bytes(f"daemon\n{token}".encode())
    code = f"""
import hashlib, sys, time
from pathlib import Path
from bastion.readers.base import Limits
from bastion.readers.runtime.pool import Job, WorkerPool
data = Path({str(doc)!r}).read_bytes()
pool = WorkerPool(1, Limits(deadline_s=600), Path({str(tmp_path / "pool")!r}), print,
                  extra_readers=("tests.hostile_readers",))
pool.submit(Job(1, {str(doc)!r}, "d.hostile", "application/x-hostile",
                hashlib.sha256(data).hexdigest(), len(data), 600.0))
pool.drain()  # the daemon's document sleeps: this waits until the kill
"""
    parent = subprocess.Popen([sys.executable, "-c", code],
                              cwd=str(Path(__file__).resolve().parent.parent))
    try:
        eventually(lambda: pids_with(f"1000.{token}") != [], "the daemon never started")
        parent.kill()
        parent.wait()
        eventually(lambda: pids_with(f"1000.{token}") == [],
                   "a setsid descendant outlived bastion")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in pids_with(f"1000.{token}"):
            os.kill(pid, 9)


# -- a pool run as root: workers without root ----------------------------------------------

ROOT_POOL = """
import hashlib, json, os, sys
from pathlib import Path
from bastion.readers.base import Limits
from bastion.readers.runtime.pool import Job, WorkerPool
doc, tmp = Path(sys.argv[1]), Path(sys.argv[2])
data = doc.read_bytes()
out = {}
def collect(result):
    out["status"], out["error"] = result.status, result.error
    if result.text_path is not None:
        st = os.stat(result.text_path)
        out["text"] = json.loads(result.text_path.read_text())
        out["text_owner"], out["text_mode"] = st.st_uid, st.st_mode & 0o777
pool = WorkerPool(1, Limits(), tmp / "pool", collect, extra_readers=("tests.hostile_readers",))
out["note"] = pool.user_note
pool.submit(Job(1, str(doc), doc.name, "application/x-hostile",
                hashlib.sha256(data).hexdigest(), len(data), 30.0))
pool.drain()
out["identity"] = pool.identity
pool.close()
print(json.dumps(out))
"""


def test_a_root_pool_runs_its_workers_as_a_slot_uid_who_still_read_root_only_documents(
        tmp_path: Path) -> None:
    """Run as root from this interpreter (under /root, which only root may enter, on this
    machine and in CI), the pool's workers give up root for their slot's own uid (no
    account, no supplementary group, no capability): the interpreter and bastion are bound
    back read-only in the worker's mount namespace.  The parent opens each document and
    hands over the descriptor, so a 0600 document of root's is read although the worker
    cannot open it; the worker's own directory, under a directory only root can enter, is
    bound where it can reach it; its text ends up root's."""
    if os.geteuid() != 0:
        pytest.skip("workers change user only in a pool run as root")
    os.chmod(tmp_path, 0o700)
    doc = tmp_path / "secret.hostile"
    doc.write_bytes(f"whoami\n{doc}".encode())
    os.chmod(doc, 0o600)
    repo = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, "-c", ROOT_POOL, str(doc), str(tmp_path)],
                         capture_output=True, text=True, timeout=60, cwd=str(repo))
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["note"] is None
    assert out["status"] == "ok", out
    seen = out["text"]
    assert seen["uid"] == seen["euid"] == seen["gid"] >= SLOT_BASE, seen
    assert seen["groups"] == []
    assert seen["open"].startswith("denied:"), seen  # the path itself stays closed to it
    assert seen["tmpdir"].startswith(str(SCRATCH_DIR) + "/")
    assert (out["text_owner"], out["text_mode"]) == (0, 0o600)
    ident = out["identity"]
    assert ident["uids"] == [seen["uid"]] * 4 and ident["cap_eff"] == ident["cap_bnd"] == 0
    assert ident["no_new_privs"] and ident["seccomp"] == 2
    assert {"mnt", "net", "pid", "ipc", "uts"} <= set(ident["namespaces"])


# -- the walk's forked helpers ----------------------------------------------------------------


def test_fork_helper_sends_back_what_its_work_returns() -> None:
    def read_all(fd: int) -> bytes:
        with open(fd, "rb") as f:
            return f.read()

    pid, fd = fork_helper(lambda: b"counted %d" % os.getpid())
    data = read_all(fd)
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data == b"counted %d" % pid  # done in the helper, not here

    def fails() -> bytes:
        raise ValueError("helper failed on purpose")

    pid, fd = fork_helper(fails)
    assert read_all(fd) == b""
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 1


def test_the_parent_opens_only_regular_files_for_its_workers(tmp_path: Path) -> None:
    """What a worker is handed: a descriptor of a regular file, never of a symlink's target,
    a FIFO (no blocking on it either) or a device; else why not."""
    regular = tmp_path / "a.txt"
    regular.write_bytes(b"text\n")
    fd, why = open_document(str(regular))
    assert why is None and fd is not None
    try:
        assert os.read(fd, 100) == b"text\n"
    finally:
        os.close(fd)
    (tmp_path / "link").symlink_to(regular)
    os.mkfifo(tmp_path / "fifo")
    assert open_document(str(tmp_path / "link")) == (
        None, "cannot open: Too many levels of symbolic links")
    assert open_document(str(tmp_path / "fifo")) == (None, "no longer a regular file")
    assert open_document("/dev/null") == (None, "no longer a regular file")
    assert open_document(str(tmp_path / "gone")) == (None, "file disappeared since the walk")


def test_a_document_the_parent_cannot_open_is_one_changed_error(harness: Harness) -> None:
    job = harness.job("ok")
    Path(job.path).unlink()
    os.mkfifo(job.path)  # swapped for a FIFO after the walk
    harness.pool.submit(job)
    harness.pool.drain()
    result, _ = harness.only(job)
    assert (result.status, result.error_kind, result.error) == (
        "error", "changed", "no longer a regular file")
    assert_goes_on(harness)


def test_the_worker_reads_with_the_reader_the_parent_chose(tmp_path: Path) -> None:
    """The reader is chosen once, in the parent: a job names it and the worker does not pick
    again (a job for the hostile type handed to the plain-text reader is read as text); the
    verdict comes back as one Verdict."""
    from bastion.readers.runtime.verdict import Status, Verdict

    h = Harness(tmp_path)
    try:
        job = h.job("ok")
        h.pool.submit(dataclasses.replace(job, reader="text"))
        h.pool.drain()
        (result, text), = h.results
        assert isinstance(result.verdict, Verdict)
        assert result.verdict.status is Status.OK
        assert result.extractor.startswith("text:"), result
        assert text == "ok\n"  # the document's own bytes, not the hostile reader's answer
    finally:
        h.close()


# -- seccomp: unknown calls, every thread, a stricter filter for a document (issue 41) ----------

SECCOMP_PROBE = r"""
import ctypes, errno, json, os, sys, threading
from bastion.readers.runtime import seccomp
lib = ctypes.CDLL(None, use_errno=True)
lib.syscall.restype = ctypes.c_long

def call(*args):
    ctypes.set_errno(0)
    rc = lib.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    if rc >= 0:
        return "allowed"
    return errno.errorcode.get(ctypes.get_errno(), "?")

def probe():
    return {"open_tree_attr": call(467, -100, b"/", 0, None, 0),
            "made-up": call(seccomp.LAST_REVIEWED + 600),
            "landlock_create_ruleset": call(444, None, 0, 1),
            "kill-all": call(62, -1, 0),
            "prctl-set-name": call(157, 15, b"owned"),
            "getpid": call(39)}

out = {}
go, done = threading.Event(), threading.Event()
def early():  # a thread started before the filter, which acts after it
    go.wait()
    out["thread"] = probe()
    done.set()
threading.Thread(target=early, daemon=True).start()
seccomp.install()
out["worker"] = probe()
go.set()
done.wait(10)
if sys.argv[1] == "document":
    seccomp.prepared(seccomp.document_program())()
    out["document"] = probe()
print(json.dumps(out))
"""


@pytest.mark.parametrize("who", ["worker", "document"])
def test_seccomp_denies_unknown_calls_on_every_thread_and_more_to_a_document(who: str) -> None:
    """The worker's filter answers ENOSYS to calls past the reviewed table (``open_tree_attr``,
    467, returned a descriptor before; a number no kernel has), on every thread, one started
    before the filter too (TSYNC); a document's process stacks a stricter one: what the
    zygote may do (make a Landlock ruleset: it makes one per document's process) a document
    may not, nor signal every process at once (``kill(-1)``)."""
    run = subprocess.run([sys.executable, "-c", SECCOMP_PROBE, who], capture_output=True,
                         text=True, timeout=60, cwd=Path(__file__).resolve().parent.parent)
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    for where in ("worker", "thread"):
        assert seen[where]["open_tree_attr"] == seen[where]["made-up"] == "ENOSYS", seen
        assert seen[where]["prctl-set-name"] == "EPERM", seen
        assert seen[where]["landlock_create_ruleset"] == "allowed", seen  # the zygote's
        assert seen[where]["kill-all"] != "EPERM" and seen[where]["getpid"] == "allowed"
    if who == "document":
        doc = seen["document"]
        assert doc["landlock_create_ruleset"] == doc["kill-all"] == "EPERM", seen
        assert doc["open_tree_attr"] == "ENOSYS" and doc["getpid"] == "allowed", seen
