"""Faults during a run, hostile trees and concurrency — real processes, real mounts.

What tests/test_walk.py, test_cli.py, test_runtime.py and test_extract.py already cover is not
repeated here (hostile names in the walk, symlink loops, FIFOs, the lock against a holder
process, -j1 vs -j2, hostile readers, one kill -9 mid-extract).  Here:

* kill -9 of the parent at chosen points (mid-walk, after some of the walk's batches are
  committed, while walk.jsonl / extract.jsonl / the summary is being replaced, after some
  verdicts) and at fixed delays, then
  a re-run: complete, consistent, no ``.tmp-*`` left, every ``ok`` record's text present;
* a worker SIGKILLed from outside while it reads: one ``error`` record, the run goes on;
* the output filesystem full (a 2 MiB tmpfs): exit 1 with one line, no half-written records,
  no truncated store text; enlarged, the re-run completes;
* the output directory read-only (tmpfs remounted ``ro``): exit 1 with one line;
* a file changed or deleted between walk and extract: ``error``/``changed``, no text under the
  old sha256;
* 10,000 files in one directory, a 200-level deep tree, a character device, a sparse 100 GB
  file, names with newlines/colons/spaces/invalid UTF-8 through extract and ``doit
  "extract:<root>/<name>"``;
* two real runs on one output directory (the second refused), ``-j 1``/``-j 2``/``-j 3``
  byte-identical on a mixed office/PDF/HTML/text tree.

Mount tests need root and ``mount``; they skip with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import hashlib
from pathlib import Path
from typing import Any

import pytest

from bastion.readers.base import Limits, MiB
from bastion.readers.runtime.pool import Job, JobResult, WorkerPool
from bastion.tasks.cli import main

from procutil import alive, bytes_read, eventually, pids_with, workers_of  # noqa: E402  (tests/ is on sys.path)

pytestmark = pytest.mark.slow  # every test here runs real pools, clusters or doit runs (> 1 s)

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO), "BASTION_NO_EXTERNAL": "1"}
RUN_TIMEOUT = 240  # generous: a loaded 2-core machine


# -- helpers ----------------------------------------------------------------------------------


def manifest(path: Path, roots: dict[str, Path], extra: str = "") -> Path:
    lines = ["version: 1", "roots:"]
    for name, root in roots.items():
        lines += [f"  - name: {name}", f"    path: {json.dumps(str(root))}"]
    lines.append("stages: [walk, extract]")
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def jsonl(path: Path) -> list[dict[str, Any]]:
    """Parse a JSON Lines file strictly: every line complete, newline-terminated."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n"), f"{path} does not end with a newline"
    return [json.loads(line) for line in data.splitlines()]


def text_of(out: Path, sha: str) -> Path:
    return out / "extract" / sha[:2] / f"{sha}.txt"


def temps_under(out: Path) -> list[str]:
    return [os.path.join(d, n) for d, _, names in os.walk(out) for n in names
            if n.startswith(".tmp-")]


def wait_no_workers(out: Path, within: float = 60.0) -> list[int]:
    """The run's workers left after ``within`` seconds: a net against a survivor, not a bound
    on how soon the kernel finishes a kill."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        left = workers_of(out)
        if not left:
            return []
        time.sleep(0.05)
    return workers_of(out)


def bastion(*argv: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess:
    """``bastion`` in a child process (so it can be killed, or run beside another)."""
    return subprocess.run([sys.executable, "-c", "import sys; from bastion.tasks.cli import main; "
                           "sys.exit(main())", *argv], cwd=str(REPO), env=ENV,
                          capture_output=True, timeout=timeout)


def sweep(m: Path, out: Path, *extra: str) -> int:
    return main(["sweep", str(m), "--out", str(out), "-q", "-j", "2", "--no-external", *extra])


def one_line_error(err: str, *needles: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert lines and all(ln.startswith("bastion: error: ") for ln in lines), err
    for needle in needles:
        assert needle in err, (needle, err)
    return lines[0]


def text_tree(root: Path, dirs: int = 4, per_dir: int = 100, size: int = 60) -> dict[str, bytes]:
    """A tree of unique small text files; returns {relative path: bytes}."""
    files = {}
    for d in range(dirs):
        sub = root / f"d{d:02}"
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(per_dir):
            body = (f"file {d}/{i} unique {d * 100000 + i}\n" * (1 + size // 30)).encode()
            (sub / f"f{i:04}.txt").write_bytes(body)
            files[f"d{d:02}/f{i:04}.txt"] = body
    return files


def assert_complete(out: Path, root_name: str, files: dict[str, bytes]) -> None:
    """A finished run: every file walked and extracted ok, its exact text in the store, no
    temp file anywhere, no worker scratch left."""
    walked = jsonl(out / "walk.jsonl")
    assert {(r["root"], r["path"]) for r in walked} == {(root_name, p) for p in files}
    recs = jsonl(out / "extract.jsonl")
    keys = [(r["root"], r["path"]) for r in recs]
    assert len(keys) == len(set(keys)) == len(files)
    for r in recs:
        assert r["status"] == "ok", r
        assert r["sha256"] == hashlib.sha256(files[r["path"]]).hexdigest()
        assert text_of(out, r["sha256"]).read_bytes() == files[r["path"]], r["path"]
    assert temps_under(out) == []
    tmp = out / ".bastion" / "tmp"
    assert not tmp.exists() or not any(tmp.iterdir())


def sudo_mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture()
def tmpfs(tmp_path: Path):
    """A 2 MiB tmpfs at tmp_path/mnt (skip when it cannot be mounted); unmounted after."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        r = sudo_mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt))
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run mount: {e}")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


# -- kill -9 of the parent --------------------------------------------------------------------

# Runs bastion with one function patched to SIGKILL the process at a chosen point.
KILLER = r"""
import os, signal, sys
point, n = sys.argv[1], int(sys.argv[2])
del sys.argv[1:3]
import bastion.tasks.walk.stage as walk, bastion.tasks.extract.session as session

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if point == "walk-mid":  # after n files hashed
    orig_file = walk.Walker._file
    seen = [0]
    def _file(self, *a, **k):
        seen[0] += 1
        if seen[0] == n:
            die()
        return orig_file(self, *a, **k)
    walk.Walker._file = _file
elif point == "extract-mid":  # after n verdicts (some committed, some texts without one)
    orig_record = session.ExtractSession.record
    seen = [0]
    def record(self, *a, **k):
        orig_record(self, *a, **k)
        seen[0] += 1
        if seen[0] == n:
            die()
    session.ExtractSession.record = record
elif point == "walk-batch":  # after n batches of the walk's rows committed, before walk.jsonl
    import bastion.tasks.walk.table as table
    table.BATCH_ROWS = 50
    orig_flush = table.WalkTable.flush
    seen = [0]
    def flush(self):
        had = bool(self.rows or self.gone)
        orig_flush(self)
        seen[0] += had
        if seen[0] == n:
            die()
    table.WalkTable.flush = flush
elif point == "rewalk-shared":  # killed while forked helpers share a re-walk
    walk.Walker._helpers = lambda self: 1  # whatever the cores: one helper
    orig_shared = walk.Walker._run_shared
    def _run_shared(self, helpers):
        orig_walk_root = walk.Walker._walk_root
        def _walk_root(self, root, owner=0, owners=1):
            if owner == 0:  # the parent, with its helpers forked and walking
                die()
            return orig_walk_root(self, root, owner, owners)
        walk.Walker._walk_root = _walk_root
        return orig_shared(self, helpers)
    walk.Walker._run_shared = _run_shared
elif point == "doit-db":  # killed while doit's database is being written
    import bastion.tasks.output.directory as outdir
    orig_write = outdir.OutputDir.write
    def write(self, rel, chunks, **kw):
        if rel.endswith("/doit.json"):
            path = self.path / rel
            tmp = path.with_name(f"{outdir.TMP_PREFIX}{path.name}.{os.getpid()}")
            tmp.write_bytes(b"{")  # half of it written, then the kill
            die()
        return orig_write(self, rel, chunks, **kw)
    outdir.OutputDir.write = write
elif point == "index-batch":  # after n batches of the index's texts committed
    import bastion.tasks.index.stage as index
    index.BATCH_TEXTS = 50
    orig_commit = index._commit
    seen = [0]
    def _commit(db, batch, added, chars):
        result = orig_commit(db, batch, added, chars)
        seen[0] += bool(batch)
        if seen[0] == n:
            die()
        return result
    index._commit = _commit
else:  # "<file>": the temp file written and fsynced, killed before it replaces <file>
    orig_replace = os.replace
    def replace(src, dst, *a, **k):
        if os.path.basename(os.fsdecode(dst)) == point:
            die()
        return orig_replace(src, dst, *a, **k)
    os.replace = replace

from bastion.tasks.cli import main
sys.exit(main(sys.argv[1:]))
"""

KILL_POINTS = [
    ("walk-mid", 150),
    ("walk.jsonl", 0),
    ("walk-batch", 3),
    ("walk.summary.json", 0),
    ("extract-mid", 120),
    ("extract.jsonl", 0),
    ("extract.summary.json", 0),
]


@pytest.fixture(scope="module")
def kill_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    base = tmp_path_factory.mktemp("killtree")
    files = text_tree(base / "root", dirs=4, per_dir=100)
    return base / "root", files


def _check_after_kill(tmp_path: Path, root: Path, files: dict[str, bytes], out: Path,
                      proc_rc: int) -> None:
    assert proc_rc == -signal.SIGKILL, f"not killed (exit {proc_rc})"
    assert wait_no_workers(out) == [], "workers survived their parent's kill -9"
    # whatever the killed run left is either absent or complete
    for name in ("walk.jsonl", "extract.jsonl"):
        if (out / name).exists():
            jsonl(out / name)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    assert sweep(m, out) == 0
    assert_complete(out, "r", files)


@pytest.mark.parametrize("point,n", KILL_POINTS, ids=[p for p, _ in KILL_POINTS])
def test_kill_9_of_the_parent_at_a_point_then_rerun(point: str, n: int, tmp_path: Path,
                                                    kill_tree) -> None:
    root, files = kill_tree
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", KILLER, point, str(n), "sweep", str(m),
                           "--out", str(out), "-q", "-j", "2"], cwd=str(REPO), env=ENV,
                          capture_output=True, timeout=RUN_TIMEOUT)
    if point.endswith((".jsonl", ".json")):
        assert list(out.glob(f".tmp-{point}.*")) or list(out.glob(f".bastion/.tmp-{point}.*")), \
            "the kill did not happen between the temp file and its rename"
    if point == "walk-batch":  # the batches committed are kept: 150 files not read again
        import sqlite3

        db = sqlite3.connect(out / ".bastion" / "verdicts.sqlite")
        assert db.execute("SELECT count(*) FROM walk").fetchone()[0] == 3 * 50
        db.close()
        assert not (out / "walk.jsonl").exists()
    _check_after_kill(tmp_path, root, files, out, proc.returncode)


def test_kill_9_mid_index_keeps_every_batch_it_committed(tmp_path: Path, kill_tree) -> None:
    """The parent killed after 3 batches of the index stage were committed: those texts stay
    in the index, the re-run adds only the rest (reads no committed text again), and the
    index then holds what one built fresh holds."""
    import sqlite3

    from bastion.tasks.index.database import INDEX_DB

    root, files = kill_tree
    m = manifest(tmp_path / "m.yaml", {"r": root})
    m.write_text(m.read_text().replace("stages: [walk, extract]",
                                       "stages: [walk, extract, index]"))
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", KILLER, "index-batch", "3", "sweep", str(m),
                           "--out", str(out), "-q", "-j", "2"], cwd=str(REPO), env=ENV,
                          capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr

    def rows(where: Path) -> dict[str, str]:
        db = sqlite3.connect(f"file:{where / INDEX_DB}?mode=ro", uri=True)
        try:
            return dict(db.execute("SELECT stem, key FROM texts"))
        finally:
            db.close()

    committed = rows(out)
    assert len(committed) == 3 * 50
    assert_complete(out, "r", files)  # the extract stage had finished
    rerun = bastion("index", str(m), "--out", str(out))
    assert rerun.returncode == 0, rerun.stderr
    assert f"{len(files) - 150} added, 0 removed" in rerun.stderr.decode(), rerun.stderr
    assert committed.items() <= rows(out).items()
    fresh = tmp_path / "fresh"
    assert sweep(m, fresh) == 0
    assert rows(out) == rows(fresh)
    assert temps_under(out) == []


@pytest.mark.slow
def test_kill_9_while_a_change_is_spliced_then_rerun(tmp_path: Path) -> None:
    """A run that planned only a change, killed after its record rows were committed and
    before the spliced extract.jsonl replaced the previous one: the previous file is whole,
    and the next run (the export no longer the rows') plans in full, extracts nothing again,
    and leaves what a fresh run leaves."""
    from bastion.tasks.commands.compare import compare_outputs

    root = tmp_path / "root"
    files = text_tree(root, dirs=2, per_dir=30)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    before = (out / "extract.jsonl").read_bytes()
    (root / "d01" / "new.txt").write_bytes(b"a file added after the first sweep\n")
    files["d01/new.txt"] = b"a file added after the first sweep\n"
    proc = subprocess.run([sys.executable, "-c", KILLER, "extract.jsonl", "0", "sweep", str(m),
                           "--out", str(out), "-q", "-j", "2", "--no-external"], cwd=str(REPO),
                          env=ENV,
                          capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert list(out.glob(".tmp-extract.jsonl.*")), "not killed before the rename"
    assert (out / "extract.jsonl").read_bytes() == before
    assert sweep(m, out) == 0
    assert json.loads((out / "extract.summary.json").read_text())["extracted"] == 0
    assert_complete(out, "r", files)
    fresh = tmp_path / "fresh"
    assert sweep(m, fresh) == 0
    assert compare_outputs(out, fresh) == []


@pytest.mark.slow
@pytest.mark.parametrize("what", ["change", "noop"])
def test_kill_9_between_the_runs_row_and_its_summary_then_rerun(what: str,
                                                                 tmp_path: Path) -> None:
    """An extract run (a change only, or nothing to do) killed after its row in ``runs`` was
    committed and before extract.summary.json replaced the previous one: the file is the
    previous run's, whole; the next run counts from the database, not from that file, and
    leaves what a fresh run leaves, its summary the export of its own row."""
    import sqlite3

    from bastion.tasks.commands.compare import compare_outputs

    root = tmp_path / "root"
    files = text_tree(root, dirs=2, per_dir=30)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    if what == "change":
        (root / "d01" / "new.txt").write_bytes(b"a file added after the first sweep\n")
        files["d01/new.txt"] = b"a file added after the first sweep\n"
    else:
        assert sweep(m, out) == 0  # the no-op that flags the records reused
    before = (out / "extract.summary.json").read_bytes()
    proc = subprocess.run([sys.executable, "-c", KILLER, "extract.summary.json", "0", "sweep",
                           str(m), "--out", str(out), "-q", "-j", "2", "--no-external"],
                          cwd=str(REPO), env=ENV, capture_output=True, timeout=RUN_TIMEOUT)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert list(out.glob(".tmp-extract.summary.json.*")), "not killed before the rename"
    assert (out / "extract.summary.json").read_bytes() == before

    def extract_rows() -> list[dict]:
        db = sqlite3.connect(f"file:{out}/.bastion/verdicts.sqlite?mode=ro", uri=True)
        try:
            return [json.loads(r[0]) for r in db.execute(
                "SELECT summary FROM runs WHERE stage = 'extract' ORDER BY run")]
        finally:
            db.close()

    killed = extract_rows()[-1]  # the killed run's row: committed before the export
    assert killed["extracted"] == (1 if what == "change" else 0)
    assert killed["records"] == len(files)
    assert sweep(m, out) == 0
    last = extract_rows()[-1]
    assert json.loads((out / "extract.summary.json").read_text()) == last
    assert (last["records"], last["reused"]) == (len(files), len(files))
    assert_complete(out, "r", files)
    fresh = tmp_path / "fresh"
    assert sweep(m, fresh) == 0
    assert compare_outputs(out, fresh) == []
    assert {k: last[k] for k in ("records", "counts", "chars")} == {
        k: json.loads((fresh / "extract.summary.json").read_text())[k]
        for k in ("records", "counts", "chars")}


def test_kill_9_during_a_shared_rewalk_then_rerun(tmp_path: Path, kill_tree) -> None:
    """The parent killed while its forked walk helpers are walking their shares: the helpers
    go too (parent-death signal), and the re-run is complete."""
    root, files = kill_tree
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    proc = subprocess.run([sys.executable, "-c", KILLER, "rewalk-shared", "0", "sweep", str(m),
                           "--out", str(out), "-q", "-j", "2"], cwd=str(REPO), env=ENV,
                          capture_output=True, timeout=RUN_TIMEOUT)
    eventually(lambda: pids_with(str(out)) + workers_of(out) == [],
               "walk helpers or workers outlived the parent")
    _check_after_kill(tmp_path, root, files, out, proc.returncode)


def test_kill_9_while_doit_writes_its_database_then_rerun(tmp_path: Path, kill_tree) -> None:
    root, files = kill_tree
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", KILLER, "doit-db", "0", "sweep", str(m),
                           "--out", str(out), "-q", "-j", "2"], cwd=str(REPO), env=ENV,
                          capture_output=True, timeout=RUN_TIMEOUT)
    _check_after_kill(tmp_path, root, files, out, proc.returncode)


@pytest.mark.parametrize("delay", [0.4, 1.2, 2.5])
def test_kill_9_of_the_parent_after_a_delay_then_rerun(delay: float, tmp_path: Path,
                                                       kill_tree) -> None:
    """Wall-clock kills: wherever the run happens to be (interpreter start, walk, extract,
    or already done on a fast machine — then the re-run must still be clean)."""
    root, files = kill_tree
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from bastion.tasks.cli import main; "
                             "sys.exit(main())", "sweep", str(m), "--out", str(out), "-q",
                             "-j", "2"], cwd=str(REPO), env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(delay)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    rc = proc.wait(timeout=RUN_TIMEOUT)
    if rc == -signal.SIGKILL:
        _check_after_kill(tmp_path, root, files, out, rc)
    else:
        assert rc == 0
        assert_complete(out, "r", files)


# -- a worker killed from outside -----------------------------------------------------------


def test_worker_sigkilled_from_outside_is_one_error_and_the_pool_goes_on(tmp_path: Path) -> None:
    """SIGKILL the worker (found via /proc, not through the pool) while it reads a document:
    exactly one error JobResult for that job, the next documents are read by a new worker."""
    docs = tmp_path / "docs"
    docs.mkdir()
    results: list[JobResult] = []
    limits = Limits(deadline_s=60.0, memory_bytes=512 * MiB, max_output_bytes=4 * MiB)
    pool = WorkerPool(1, limits, tmp_path / "pool", results.append,
                      extra_readers=("tests.hostile_readers",))

    def job(i: int, body: bytes, name: str, mime: str) -> Job:
        path = docs / name
        path.write_bytes(body)
        return Job(i, str(path), name, mime, hashlib.sha256(body).hexdigest(), len(body), 60.0)

    try:
        pool.submit(job(1, b"ok\n", "1.hostile", "application/x-hostile"))
        pool.drain()
        slow = job(2, b"sleep\n", "2.hostile", "application/x-hostile")
        pool.submit(slow)
        victim = pool.pids()[0]
        # find it the way an operator would: a bastion.readers.runtime.workermain process under this pool dir
        seen = [pid for pid in workers_of(tmp_path / "pool")]
        assert victim in seen
        time.sleep(0.5)  # well inside the reader's sleep
        killer = threading.Timer(0.0, os.kill, (victim, signal.SIGKILL))
        killer.start()
        killer.join()
        pool.drain()
        for i in range(3, 6):
            pool.submit(job(i, f"plain text {i}\n".encode(), f"{i}.txt", "text/plain"))
        pool.drain()
    finally:
        pool.close()
    by_id: dict[int, list[JobResult]] = {}
    for r in results:
        by_id.setdefault(r.job.id, []).append(r)
    assert sorted(by_id) == [1, 2, 3, 4, 5]
    assert all(len(v) == 1 for v in by_id.values()), by_id
    killed = by_id[2][0]
    assert killed.status == "error" and killed.error_kind in ("memory", "crash"), killed
    assert "SIGKILL" in (killed.error or ""), killed.error
    assert all(by_id[i][0].status == "ok" for i in (1, 3, 4, 5))
    assert not alive(victim)
    assert pool.killed == 1


def test_worker_sigkilled_during_a_real_run_is_one_error_record(tmp_path: Path) -> None:
    """The same through ``bastion sweep``: a real reader kept busy by a large CSV; its worker is
    SIGKILLed from outside; one error record for it, every other file ok, exit 2."""
    root = tmp_path / "root"
    root.mkdir()
    # ~40 MB of CSV rows: the CSV reader takes seconds on it (max_chars cuts the text)
    with open(root / "big.csv", "wb") as f:
        row = b",".join(b"cell%d" % i for i in range(40)) + b"\n"
        for _ in range(150_000):
            f.write(row)
    files = {f"t{i}.txt": f"text {i}\n".encode() for i in range(20)}
    for name, body in files.items():
        (root / name).write_bytes(body)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from bastion.tasks.cli import main; "
                             "sys.exit(main())", "sweep", str(m), "--out", str(out), "-q",
                             "-j", "1"], cwd=str(REPO), env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    killed = None
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end and proc.poll() is None:
            for pid in workers_of(out):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        rss = [ln for ln in f if ln.startswith("VmRSS")]
                except OSError:
                    continue
                # the big CSV is being read once the worker holds its ~40 MB
                if rss and int(rss[0].split()[1]) > 60_000:
                    os.kill(pid, signal.SIGKILL)
                    killed = pid
                    break
            if killed:
                break
            time.sleep(0.01)
        _, err = proc.communicate(timeout=RUN_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if killed is None:
        pytest.skip("the CSV was read before its worker could be caught (very fast machine)")
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert len(recs) == 21
    assert recs["big.csv"]["status"] == "error", recs["big.csv"]
    assert recs["big.csv"]["error_kind"] in ("memory", "crash")
    assert all(recs[n]["status"] == "ok" for n in files)
    assert proc.returncode == 2, err
    assert wait_no_workers(out) == []


# -- the output filesystem full, or read-only ------------------------------------------------


def _fill_and_run(tmp_path: Path, tmpfs: Path) -> tuple[Path, Path, dict[str, bytes], int, str]:
    """A sweep of ~6 MB of unique text into a 2 MiB output filesystem."""
    root = tmp_path / "root"
    files = text_tree(root, dirs=3, per_dir=40, size=50_000)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmpfs / "out"
    r = bastion("sweep", str(m), "--out", str(out), "-q", "-j", "2")
    return m, out, files, r.returncode, r.stderr.decode()


def test_output_disk_full_then_enlarged(tmp_path: Path, tmpfs: Path) -> None:
    m, out, files, rc, err = _fill_and_run(tmp_path, tmpfs)
    assert rc == 1, err
    first = err.strip().splitlines()[0]
    assert first.startswith("bastion: error: "), err
    assert "full" in first or "No space left" in first, first
    # no half-written records: each either absent or complete
    for name in ("walk.jsonl", "extract.jsonl", "walk.summary.json", "extract.summary.json"):
        p = out / name
        if p.exists():
            if name.endswith(".jsonl"):
                jsonl(p)
            else:
                json.loads(p.read_text())
    # no corrupt store text: every text with a committed verdict is complete
    db = out / ".bastion" / "verdicts.sqlite"
    by_sha = {hashlib.sha256(b).hexdigest(): b for b in files.values()}
    if db.exists():
        import sqlite3

        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT sha256, status FROM verdicts").fetchall()
        except sqlite3.Error:
            rows = []
        finally:
            con.close()
        for sha, status in rows:
            if status == "ok":
                assert text_of(out, sha).read_bytes() == by_sha[sha]
    assert wait_no_workers(out) == []

    r2 = sudo_mount("-o", "remount,size=64m", str(tmpfs))
    if r2.returncode != 0:
        pytest.skip(f"cannot enlarge the tmpfs: {r2.stderr.strip()}")
    r = bastion("sweep", str(m), "--out", str(out), "-q", "-j", "2")
    assert r.returncode == 0, r.stderr.decode()
    assert_complete(out, "r", files)


def test_output_disk_full_then_enlarged_rerun_needs_no_cleanup(tmp_path: Path,
                                                               tmpfs: Path) -> None:
    m, out, files, rc, _ = _fill_and_run(tmp_path, tmpfs)
    assert rc == 1
    r2 = sudo_mount("-o", "remount,size=64m", str(tmpfs))
    if r2.returncode != 0:
        pytest.skip(f"cannot enlarge the tmpfs: {r2.stderr.strip()}")
    r = bastion("sweep", str(m), "--out", str(out), "-q", "-j", "2")
    assert r.returncode == 0, r.stderr.decode()
    assert_complete(out, "r", files)


def test_output_disk_full_message_is_one_line(tmp_path: Path, tmpfs: Path) -> None:
    _, _, _, rc, err = _fill_and_run(tmp_path, tmpfs)
    assert rc == 1
    one_line_error(err)
    assert len(err.strip().splitlines()) == 1, err


def test_output_directory_read_only(tmp_path: Path, tmpfs: Path) -> None:
    root = tmp_path / "root"
    files = text_tree(root, dirs=1, per_dir=5)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmpfs / "out"
    assert bastion("sweep", str(m), "--out", str(out), "-q", "-j", "1").returncode == 0
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    (root / "d00" / "new.txt").write_bytes(b"a new file for a read-only output\n")
    r = sudo_mount("-o", "remount,ro", str(tmpfs))
    if r.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {r.stderr.strip()}")
    for cmd in ("sweep", "walk", "extract"):
        r = bastion(cmd, str(m), "--out", str(out), "-q")
        err = r.stderr.decode()
        assert r.returncode == 1, (cmd, err)
        one_line_error(err, str(out))
        assert len(err.strip().splitlines()) == 1, err
    fresh = tmpfs / "never-made"
    r = bastion("sweep", str(m), "--out", str(fresh), "-q")
    assert r.returncode == 1
    one_line_error(r.stderr.decode(), str(fresh))
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before
    assert wait_no_workers(out) == []
    del files


# -- a file changed or deleted between walk and extract --------------------------------------


def test_file_changed_or_deleted_between_walk_and_extract(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "grows.txt").write_bytes(b"old content\n")
    (root / "goes.txt").write_bytes(b"soon gone\n")
    (root / "stays.txt").write_bytes(b"unchanged\n")
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    walked = {r["path"]: r for r in jsonl(out / "walk.jsonl")}
    (root / "grows.txt").write_bytes(b"new content, longer than before\n")
    (root / "goes.txt").unlink()
    assert main(["extract", str(m), "--out", str(out), "-q", "-j", "2", "--no-external"]) == 2
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    for name in ("grows.txt", "goes.txt"):
        r = recs[name]
        assert r["status"] == "error" and r["error_kind"] == "changed", r
        assert r["sha256"] == walked[name]["sha256"]
        assert not text_of(out, r["sha256"]).exists(), "a text under the old sha256"
    assert "disappeared" in recs["goes.txt"]["error"]
    assert recs["stays.txt"]["status"] == "ok"
    new_sha = hashlib.sha256(b"new content, longer than before\n").hexdigest()
    texts = {p.name: p.read_bytes() for p in (out / "extract").rglob("*.txt")}
    assert b"new content, longer than before\n" not in texts.values()
    assert f"{new_sha}.txt" not in texts
    # the next sweep walks the new bytes and extracts them under their own sha256
    assert sweep(m, out) == 0
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["grows.txt"]["sha256"] == new_sha and recs["grows.txt"]["status"] == "ok"
    assert "goes.txt" not in recs
    assert not text_of(out, walked["grows.txt"]["sha256"]).exists()


# -- hostile trees ------------------------------------------------------------------------------


def test_ten_thousand_files_in_one_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(10_000):
        (root / f"n{i:05}.txt").write_bytes(b"n%d\n" % i)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    recs = jsonl(out / "extract.jsonl")
    assert len(recs) == 10_000
    assert [r["path"] for r in recs] == sorted(f"n{i:05}.txt" for i in range(10_000))
    assert all(r["status"] == "ok" for r in recs)
    assert text_of(out, recs[1234]["sha256"]).read_bytes() == b"n1234\n"
    s = json.loads((out / "extract.summary.json").read_text())
    assert s["extracted"] == 10_000
    assert sweep(m, out) == 0  # no-op re-run
    s = json.loads((out / "extract.summary.json").read_text())
    assert s["extracted"] == 0 and s["reused"] == 10_000


def test_two_hundred_levels_deep(tmp_path: Path) -> None:
    root = tmp_path / "root"
    deep = root
    for level in range(200):
        deep = deep / f"l{level}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_bytes(b"at the bottom\n")
    (root / "l0" / "top.txt").write_bytes(b"near the top\n")
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    bottom = "/".join(f"l{i}" for i in range(200)) + "/bottom.txt"
    assert set(recs) == {bottom, "l0/top.txt"}
    assert recs[bottom]["status"] == "ok"
    assert text_of(out, recs[bottom]["sha256"]).read_bytes() == b"at the bottom\n"


def test_character_device_recorded_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a\n")
    dev = root / "null-device"
    try:
        os.mknod(dev, 0o666 | __import__("stat").S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError) as e:
        pytest.skip(f"cannot create a device node here: {e}")
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    before = os.stat(dev).st_atime_ns
    assert sweep(m, out) == 0
    walk = {r["path"]: r for r in jsonl(out / "walk.jsonl")}
    assert walk["null-device"]["kind"] == "other"
    assert walk["null-device"]["sha256"] is None and walk["null-device"]["mime"] is None
    assert walk["null-device"]["reason"] == "not a regular file (never opened)"
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["null-device"]["status"] == "skipped"
    assert os.stat(dev).st_atime_ns == before  # never read


@pytest.mark.timeout(600)  # a net: reading 100 GB takes minutes
def test_sparse_100_gb_file_not_read_past_the_cap(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    sparse = root / "huge.bin"
    with open(sparse, "wb") as f:
        f.truncate(100 * 1024**3)
    (root / "small.txt").write_bytes(b"small\n")
    m = manifest(tmp_path / "m.yaml", {"r": root}, "limits:\n  max_file_bytes: 1MiB\n")
    out = tmp_path / "out"
    before = bytes_read()
    assert sweep(m, out) == 0
    # what the run read (the walk reads in this process): its own files, the head of the
    # big one to type it, never the 100 GB past the cap
    read = bytes_read() - before
    assert read < 256 * MiB, f"the run read {read >> 20} MiB"
    walk = {r["path"]: r for r in jsonl(out / "walk.jsonl")}
    assert walk["huge.bin"]["sha256"] is None
    assert walk["huge.bin"]["size"] == 100 * 1024**3
    assert walk["huge.bin"]["reason"] == f"over max_file_bytes ({1 * MiB})"
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert recs["huge.bin"]["status"] == "skipped"
    assert recs["small.txt"]["status"] == "ok"
    # the default cap too (256 MiB in the bundled manifest's style; 2 GiB default)
    m2 = manifest(tmp_path / "m2.yaml", {"r": root})
    assert sweep(m2, tmp_path / "out2") == 0
    walk = {r["path"]: r for r in jsonl(tmp_path / "out2" / "walk.jsonl")}
    assert walk["huge.bin"]["sha256"] is None and "over max_file_bytes" in walk["huge.bin"]["reason"]


ODD_NAMES = [b"a b:c.txt", b"line\nbreak.txt", b"bad-\xff\xfe-utf8.txt", b"col:on: spa ce.txt"]


def test_odd_names_through_extract_and_doit_task_names(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    bodies = {}
    for i, raw in enumerate(ODD_NAMES):
        body = f"odd name number {i}\n".encode()
        with open(os.path.join(os.fsencode(root), raw), "wb") as f:
            f.write(body)
        bodies[os.fsdecode(raw)] = body
    m = manifest(tmp_path / "m.yaml", {"docs": root})
    out = tmp_path / "out"
    assert sweep(m, out) == 0
    recs = {r["path"]: r for r in jsonl(out / "extract.jsonl")}
    assert set(recs) == set(bodies)
    for name, body in bodies.items():
        assert recs[name]["status"] == "ok", recs[name]
        assert text_of(out, recs[name]["sha256"]).read_bytes() == body
        assert os.fsencode(name) in ODD_NAMES

    dodo = str(REPO / "dodo.py")
    summary = out / "extract.summary.json"
    for raw in ODD_NAMES:
        name = os.fsdecode(raw)
        before = jsonl(out / "extract.jsonl")
        from bastion.tasks.names import task_name

        task = ("extract:" + task_name("docs", name)).encode()  # as doit lists it
        proc = subprocess.run(
            # (doit takes its options before the task names: "doit TASK -a", as
            # docs/architecture.md writes it, is refused with "Invalid parameter: -a")
            [sys.executable.encode(), b"-m", b"doit", b"-f", dodo.encode(), b"-a", task,
             f"manifest={m}".encode(), f"out={out}".encode(), b"jobs=1", b"no_external=1"],
            cwd=str(tmp_path), env=ENV, capture_output=True, timeout=RUN_TIMEOUT)
        assert proc.returncode == 0, (raw, proc.stderr.decode(errors="replace"))
        s = json.loads(summary.read_text())
        assert s["extracted"] == 1, (raw, s)  # that one file, and only it, was read again
        after = jsonl(out / "extract.jsonl")
        assert [r["path"] for r in after] == [r["path"] for r in before]
        redone = {r["path"]: r for r in after if not r["reused"]}
        assert set(redone) == {name}, (raw, sorted(redone))
        assert redone[name]["status"] == "ok"


# -- concurrency --------------------------------------------------------------------------------


def _lock_held(lock: Path) -> bool:
    """Whether some process holds a flock on ``lock`` (from /proc/locks, without taking it)."""
    try:
        ino = os.stat(lock).st_ino
        with open("/proc/locks") as f:
            return any(line.split()[5].endswith(f":{ino}") for line in f
                       if len(line.split()) > 5 and "FLOCK" in line)
    except OSError:
        return False


def test_two_runs_on_one_output_directory(tmp_path: Path) -> None:
    root = tmp_path / "root"
    files = text_tree(root, dirs=4, per_dir=300)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    first = subprocess.Popen([sys.executable, "-c", "import sys; from bastion.tasks.cli import main; "
                              "sys.exit(main())", "sweep", str(m), "--out", str(out), "-q",
                              "-j", "1"], cwd=str(REPO), env=ENV, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end and first.poll() is None and \
                not _lock_held(out / ".lock"):
            time.sleep(0.01)
        if first.poll() is not None:
            pytest.skip("the first run finished before the second could start")
        for cmd in ("sweep", "walk", "extract"):
            second = bastion(cmd, str(m), "--out", str(out), "-q")
            err = second.stderr.decode()
            if first.poll() is not None:
                pytest.skip("the first run finished while the second was starting")
            assert second.returncode == 1, (cmd, err)
            one_line_error(err, "another bastion run", str(out / ".lock"))
        _, err = first.communicate(timeout=RUN_TIMEOUT)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    assert_complete(out, "r", files)


def mixed_tree(root: Path) -> None:
    from tests import officegen as og
    from tests import pdfgen as pg

    (root / "office").mkdir(parents=True)
    (root / "pdf").mkdir()
    (root / "web").mkdir()
    (root / "text").mkdir()
    for i in range(6):
        (root / "office" / f"d{i}.docx").write_bytes(og.docx(og.w_p(f"docx {i}", "words")))
        (root / "office" / f"x{i}.xlsx").write_bytes(og.xlsx(
            [("S", "sheet1.xml", f'<row r="1"><c r="A1"><v>{i}</v></c></row>')]))
        (root / "office" / f"p{i}.pptx").write_bytes(og.pptx([(og.a_sp(f"slide {i}"), None)]))
        (root / "office" / f"o{i}.odt").write_bytes(og.odf("text", f"<text:p>odt {i}</text:p>"))
        (root / "pdf" / f"p{i}.pdf").write_bytes(pg.make_text_pdf([f"pdf {i} page one",
                                                                  f"pdf {i} page two"]))
        (root / "web" / f"h{i}.html").write_bytes(
            f"<html><body><p>html {i}</p></body></html>".encode())
        (root / "text" / f"t{i}.txt").write_bytes(f"text {i}\n".encode())
        (root / "text" / f"c{i}.csv").write_bytes(f"a,b\n{i},x\n".encode())
    (root / "pdf" / "outline.pdf").write_bytes(pg.make_nested_outline())
    (root / "pdf" / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a pdf at all\n")
    (root / "text" / "blob.bin").write_bytes(bytes(range(256)))
    for p in sorted((REPO / "tests" / "samples").rglob("*")):
        if p.suffix in (".docx", ".ods", ".pdf") and p.stat().st_size < 64 * 1024:
            (root / "office" / p.name).write_bytes(p.read_bytes())


def test_j1_j2_j3_byte_identical_on_a_mixed_tree(tmp_path: Path) -> None:
    root = tmp_path / "root"
    mixed_tree(root)
    m = manifest(tmp_path / "m.yaml", {"mixed": root})
    outs = {}
    for j in (1, 2, 3):
        out = tmp_path / f"out{j}"
        assert main(["sweep", str(m), "--out", str(out), "-q", "-j", str(j),
                     "--no-external"]) in (0, 2)
        outs[j] = out
    base = outs[1]
    recs = jsonl(base / "extract.jsonl")
    statuses = {r["status"] for r in recs}
    assert "ok" in statuses and len(recs) > 50
    assert {r["extractor"].split(":")[0] for r in recs if r["extractor"]} >= {
        "docx", "xlsx", "pptx", "odt", "html", "csv", "text"}
    assert any(r["mime"] == "application/pdf" and r["status"] == "ok" for r in recs)

    def store(out: Path) -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in (out / "extract").rglob("*")
                if p.is_file()}

    for j in (2, 3):
        assert (outs[j] / "extract.jsonl").read_bytes() == (base / "extract.jsonl").read_bytes()
        assert (outs[j] / "walk.jsonl").read_bytes() == (base / "walk.jsonl").read_bytes()
        assert store(outs[j]) == store(base)


# -- interrupted runs keep their work (issue 32) -----------------------------------------------


def _texts_in_store(out: Path) -> set[str]:
    return {p.name[:-4] for p in (out / "extract").glob("*/*.txt")} if (
        out / "extract").is_dir() else set()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_commits_every_finished_verdict(sig: int, tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) or SIGTERM to a real ``bastion sweep`` in mid-extract: it exits
    (130 / 143) after committing every verdict whose text it had placed, so the re-run
    reuses every text the store held and extracts only the rest."""
    root = tmp_path / "root"
    files = text_tree(root, dirs=4, per_dir=150)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from bastion.tasks.cli import "
                             "main; sys.exit(main())", "sweep", str(m), "--out", str(out),
                             "-q", "-j", "1"], cwd=str(REPO), env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + RUN_TIMEOUT
    while len(_texts_in_store(out)) < 40 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=RUN_TIMEOUT)
    held = _texts_in_store(out)
    assert proc.returncode == 128 + sig, err.decode()
    assert 40 <= len(held) < len(files), len(held)  # really interrupted in mid-extract
    assert wait_no_workers(out) == []
    assert sweep(m, out) == 0
    summary = json.loads((out / "extract.summary.json").read_text())
    assert summary["extracted"] == len(files) - len(held), (summary["extracted"], len(held))
    assert_complete(out, "r", files)


@pytest.mark.slow
def test_a_full_output_stops_the_run_instead_of_failing_documents(tmp_path: Path,
                                                                  tmpfs: Path) -> None:
    """Texts that do not fit (12 MB into 8 MiB) while the walk and the verdicts do: the
    workers' "cannot write text: No space left on device" is the output's problem, not the
    documents': one line naming the output, exit 1, no error record of a sound document; once
    there is room the re-run reuses every text stored and extracts only the rest."""
    assert sudo_mount("-o", "remount,size=8m", str(tmpfs)).returncode == 0
    root = tmp_path / "root"
    files = text_tree(root, dirs=2, per_dir=40, size=150_000)
    m = manifest(tmp_path / "m.yaml", {"r": root})
    out = tmpfs / "out"
    r = bastion("sweep", str(m), "--out", str(out), "-q", "-j", "1")
    err = r.stderr.decode()
    assert r.returncode == 1, err
    line = one_line_error(err, str(out), "No space left on device")
    assert len(err.strip().splitlines()) == 1, err
    assert "cannot write texts to" in line
    if (out / "extract.jsonl").exists():
        assert not [rec for rec in jsonl(out / "extract.jsonl") if rec["status"] == "error"]
    assert 0 < len(_texts_in_store(out)) < len(files)
    committed = _committed(out)  # what a full disk still let sqlite commit
    assert all(status == "ok" for status in committed.values()), committed
    assert sudo_mount("-o", "remount,size=64m", str(tmpfs)).returncode == 0
    assert sweep(m, out) == 0
    summary = json.loads((out / "extract.summary.json").read_text())
    assert summary["extracted"] == len(files) - len(committed)
    assert_complete(out, "r", files)


def _committed(out: Path) -> dict[str, str]:
    import sqlite3

    db = out / ".bastion" / "verdicts.sqlite"
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(con.execute("SELECT sha256, status FROM verdicts").fetchall())
    except sqlite3.Error:
        return {}
    finally:
        con.close()
