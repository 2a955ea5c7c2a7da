"""The extract stage on a real Dask cluster (tasks/cluster/run.py, tasks/extract/batch.py).

One LocalCluster of two worker processes (processes=True, one thread each) serves the module;
the scheduler-loss test starts its own ``dask scheduler`` and ``dask worker`` processes, since it
kills the scheduler.  Every run is compared with a local ``-j 2`` run of the same tree
(``bastion.tasks.commands.compare.compare_outputs``): the output must be byte-identical whatever the cluster did.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

distributed = pytest.importorskip("distributed")  # the test extra installs it (pyproject.toml)

from bastion.readers.base import Limits  # noqa: E402
from bastion.readers.runtime.job import Job  # noqa: E402
from bastion.tasks.extract.batch import close_pools, extract_batch, kept_pools  # noqa: E402
from bastion.tasks.cli import main, run_stages  # noqa: E402
from bastion.tasks.cluster.run import (Batch, ClusterError, batch_key, parse_cluster,  # noqa: E402
                           run_batch)
from bastion.tasks.commands.compare import compare_outputs  # noqa: E402
from bastion.tasks.config import RunConfig  # noqa: E402

from procutil import alive, pids_with, workers_of  # noqa: E402

pytestmark = pytest.mark.slow  # every test here runs real pools, clusters or doit runs (> 1 s)

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "examples" / "docs"
HOSTILE = ("tests.hostile_readers",)
DASK = Path(sys.executable).with_name("dask")


# -- helpers --------------------------------------------------------------------------------------


def manifest(tmp: Path, root: Path, limits: dict | None = None) -> Path:
    doc = {"version": 1, "roots": [{"name": "r", "path": str(root)}], "stages": ["walk", "extract"]}
    if limits:
        doc["limits"] = limits
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def sweep(m: Path, out: Path, *, cluster: str = "", extract_only: bool = False,
          extra: tuple[str, ...] = ()) -> int:
    cfg = RunConfig(manifest=m, out=out, jobs=2, quiet=True, cluster=cluster,
                    walk="reuse" if extract_only else "run")
    return run_stages(cfg, ["extract"] if extract_only else ["walk", "extract"],
                      extra_readers=extra)


def summary(out: Path) -> dict:
    return json.loads((out / "extract.summary.json").read_text())


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "extract.jsonl").read_bytes().splitlines()]


def mixed_tree(tmp: Path) -> Path:
    """The bundled samples (PDF, office, mail, markup, …), duplicates of them under other names
    and types, and small text files."""
    root = tmp / "tree"
    shutil.copytree(SAMPLES, root / "samples")
    (root / "copies").mkdir()
    for name in ("crazyones.pdf", "data.json", "page.html"):
        for i in range(3):
            shutil.copy(SAMPLES / name, root / "copies" / f"{i}-{name}")
    shutil.copy(SAMPLES / "data.json", root / "copies" / "data-as.txt")  # same bytes, other type
    (root / "small").mkdir()
    for i in range(60):
        (root / "small" / f"n{i:03d}.txt").write_text(f"note {i} marker{i}\n" * (i % 7 + 1))
    return root


def hostile_tree(tmp: Path, sleepers: int, texts: int) -> Path:
    """Sleepers first in the plan (largest first: padded), then small text files."""
    root = tmp / "hostile"
    root.mkdir()
    for i in range(sleepers):
        (root / f"s{i}.hostile").write_bytes(b"sleep\n" + b"\x00" * (4000 + i))  # binary
    for i in range(texts):
        (root / f"t{i:03d}.txt").write_text(f"text {i}\n")
    return root


def sandbox_workers(under: Path) -> list[int]:
    """The reader workers themselves (not the ``unshare`` keeper each one runs under, nor the
    process a worker forks to read documents, which has its command line)."""
    found = [p for p in workers_of(under) if not _argv0_is(p, (b"unshare", b"setpriv"))]
    return [p for p in found if _ppid(p) not in found]


def _ppid(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _argv0_is(pid: int, names: tuple[bytes, ...]) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv0 = f.read().split(b"\0", 1)[0]
    except OSError:
        return False
    return os.path.basename(argv0) in names


def _cmdline_has(pid: int, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return token in f.read()
    except OSError:
        return False


GONE = 60.0  # how long a wait for what a kill or a stop ends: a net, not a bound on how soon


def wait_until(cond, within: float, step: float = 0.05) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


def texts_in_store(out: Path) -> int:
    return sum(1 for _ in (out / "extract").glob("*/*.txt")) if (out / "extract").exists() else 0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A LocalCluster of 2 worker processes (1 thread each) for the module; yields
    (scheduler address, a client of the test's own, the workers' scratch directory)."""
    scratch = tmp_path_factory.mktemp("dask-workers")
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0",
                                  local_directory=str(scratch))
    client = distributed.Client(lc, set_as_default=False)
    try:
        yield lc.scheduler_address, client, scratch
    finally:
        client.close()
        lc.close()
        # every sandboxed worker dies with its Dask worker (PDEATHSIG): none is left
        assert wait_until(lambda: not sandbox_workers(scratch), GONE), sandbox_workers(scratch)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory):
    """The mixed tree and its local -j 2 output (the reference of the module's runs)."""
    tmp = tmp_path_factory.mktemp("reference")
    root = mixed_tree(tmp)
    m = manifest(tmp, root)
    out = tmp / "local"
    assert sweep(m, out) == 0
    return m, root, out


# -- the batch function ---------------------------------------------------------------------------


def _doc(path: Path, mime: str = "text/plain", reader: str = "text") -> Job:
    data = path.read_bytes()
    return Job(0, str(path), path.name, mime, hashlib.sha256(data).hexdigest(), len(data), 10.0,
               reader=reader, key="k1")


def test_extract_batch_keeps_its_pool_between_batches(tmp_path: Path) -> None:
    docs = []
    for i in range(4):
        p = tmp_path / f"d{i}.txt"
        p.write_text(f"document {i}\n")
        docs.append(_doc(p))
    changed = tmp_path / "changed.txt"
    changed.write_text("before\n")
    stale = _doc(changed)
    changed.write_text("after!\n")  # same size, other bytes: the worker's sha256 check says so
    try:
        first = extract_batch(docs + [stale], limits=Limits(), workers=2, tmp_root=tmp_path / "w")
        pids = sandbox_workers(tmp_path / "w")
        second = extract_batch(docs, limits=Limits(), workers=2, tmp_root=tmp_path / "w")
        assert kept_pools() == 1
        assert sandbox_workers(tmp_path / "w") == pids  # the same workers read the second batch
    finally:
        close_pools()
    assert [d.text for d in first[:4]] == [f"document {i}\n".encode() for i in range(4)]
    assert first[:4] == second
    assert first[4].verdict.status == "error" and first[4].verdict.error_kind == "changed"
    assert first[4].text is None
    assert wait_until(lambda: not sandbox_workers(tmp_path / "w"), GONE)


def test_a_batch_resubmitted_is_the_same_task(cluster, tmp_path: Path) -> None:
    address, client, _ = cluster
    docs = []
    for i in range(3):
        p = tmp_path / f"r{i}.txt"
        p.write_text(f"resubmitted {i}\n")
        docs.append(_doc(p))
    batch = Batch(tuple(docs), Limits(), {})
    key = batch_key(batch.jobs, batch.limits, batch.tools, batch.extra_readers)
    assert key == batch_key(tuple(reversed(docs)), Limits(), {}, ())  # order-free
    assert key != batch_key(batch.jobs, Limits(max_chars=10), {}, ())
    with distributed.get_task_stream(client) as stream:
        a = client.submit(run_batch, batch, key=key)
        b = client.submit(run_batch, batch, key=key)
        assert a.key == b.key
        ra, rb = a.result(), b.result()
    assert ra.outcomes == rb.outcomes and [d.text for d in ra.outcomes] == [
        f"resubmitted {i}\n".encode() for i in range(3)]
    assert [t["key"] for t in stream.data].count(key) == 1  # computed once


# -- whole runs -----------------------------------------------------------------------------------


def test_local_cluster_output_is_identical_to_a_local_run(local_run, tmp_path: Path) -> None:
    """--cluster local:2 (a LocalCluster this run starts and stops) against -j 2."""
    m, root, reference = local_run
    out = tmp_path / "cluster"
    assert main(["sweep", str(m), "--out", str(out), "--cluster", "local:2", "-q"]) == 0
    assert compare_outputs(reference, out) == []
    s = summary(out)
    assert s["cluster"]["scheduler"].startswith("local:2 (tcp://")
    assert len(s["cluster"]["workers"]) == 2
    assert s["workers"] == 2
    # duplicates (same sha256 and key) were read once, cluster-wide
    assert sum(w["documents"] for w in s["cluster"]["workers"]) == s["extracted"]
    pairs = {(r["sha256"], r["mime"]) for r in records(out)}
    assert s["extracted"] == len(pairs) < s["records"]
    for w in s["cluster"]["workers"]:  # every worker reports its tools and their versions
        assert set(w["tools"]) == {t["name"] for t in s["tools"]}


def test_shared_cluster_run_then_no_op_rerun(cluster, local_run, tmp_path: Path) -> None:
    address, _, _ = cluster
    m, root, reference = local_run
    out = tmp_path / "cluster"
    assert sweep(m, out, cluster=address) == 0
    assert compare_outputs(reference, out) == []
    first = summary(out)
    assert first["cluster"]["scheduler"] == address
    assert first["cluster"]["batches"] >= 2  # the work was spread
    assert sweep(m, out, cluster=address) == 0  # nothing to do: no batch at all
    again = summary(out)
    # nothing to do (the stamp holds): the cluster is not even contacted
    assert again["extracted"] == 0 and again["cluster"] is None
    assert compare_outputs(reference, out) == []


def test_a_hanging_document_is_a_timeout_record(cluster, tmp_path: Path) -> None:
    address, _, _ = cluster
    root = hostile_tree(tmp_path, sleepers=1, texts=3)
    m = manifest(tmp_path, root, {"deadline_s": 1})
    out = tmp_path / "out"
    assert sweep(m, out, cluster=address, extra=HOSTILE) == 2  # completed with error records
    by_path = {r["path"]: r for r in records(out)}
    assert by_path["s0.hostile"]["status"] == "error"
    assert by_path["s0.hostile"]["error_kind"] == "timeout"
    assert all(by_path[f"t{i:03d}.txt"]["status"] == "ok" for i in range(3))
    s = summary(out)
    assert s["workers_killed"] == 1  # the sandboxed worker, not the Dask worker
    assert all(w["documents"] for w in s["cluster"]["workers"] if w["batches"])


def test_a_dask_worker_killed_mid_batch(cluster, tmp_path: Path) -> None:
    """SIGKILL the Dask worker process running a batch: Dask runs the batch again elsewhere,
    and the output is the local run's, each record once."""
    address, client, _ = cluster
    root = hostile_tree(tmp_path, sleepers=4, texts=40)
    m = manifest(tmp_path, root, {"deadline_s": 1})
    reference = tmp_path / "local"
    assert sweep(m, reference, extra=HOSTILE) == 2
    out = tmp_path / "cluster"
    killed: list[int] = []

    def kill_one_busy() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end and not killed:
            busy = [a for a, keys in client.processing().items()
                    if any(str(k).startswith("bastion-batch-") for k in keys)]
            if busy:
                pids = client.run(os.getpid, workers=busy[:1])
                pid = next(iter(pids.values()))
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_busy)
    killer.start()
    try:
        rc = sweep(m, out, cluster=address, extra=HOSTILE)
    finally:
        killer.join()
    assert killed, "no batch was seen running"
    assert not wait_until(lambda: alive(killed[0]), 0)  # the victim is gone
    assert rc == 2
    assert compare_outputs(reference, out) == []
    assert len(records(out)) == 44
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it, for the next tests


def test_without_dask_a_one_line_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    m = manifest(tmp_path, root)
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    capsys.readouterr()
    assert main(["sweep", str(m), "--out", str(tmp_path / "out"), "--cluster", "local:2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bastion: error: --cluster needs Dask: pip install 'bastion[dask]'"]
    assert not (tmp_path / "out").exists()  # refused before anything was done


@pytest.mark.parametrize("spec", ["local:0", "no such thing", "tcp://"])
def test_a_bad_cluster_address_is_a_one_line_error(spec: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    root = tmp_path / "r"
    root.mkdir()
    m = manifest(tmp_path, root)
    capsys.readouterr()
    assert main(["extract", str(m), "--out", str(tmp_path / "out"), "--cluster", spec]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bastion: error: --cluster"), err


def test_parse_cluster() -> None:
    assert parse_cluster("local:3").local_workers == 3
    assert parse_cluster("tcp://10.0.0.5:8786").address == "tcp://10.0.0.5:8786"
    assert parse_cluster("sched:8786").address == "tcp://sched:8786"
    with pytest.raises(ClusterError):
        parse_cluster("local:x")


def test_an_unreachable_scheduler_is_a_one_line_error(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("bastion.tasks.cluster.connect.CONNECT_TIMEOUT_S", 1.0)
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    m = manifest(tmp_path, root)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # tried once, for the timeout: the real Client, its construction counted
    import distributed

    tries: list[object] = []

    class Counted(distributed.Client):
        def __init__(self, *args, **kw) -> None:
            tries.append(kw.get("timeout"))
            super().__init__(*args, **kw)

    monkeypatch.setattr(distributed, "Client", Counted)
    capsys.readouterr()
    rc = main(["sweep", str(m), "--out", str(tmp_path / "out"), "--cluster",
               f"tcp://127.0.0.1:{port}", "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1 and "cannot reach the Dask scheduler" in err[0], err
    assert err[0].endswith(f"Timed out trying to connect to tcp://127.0.0.1:{port} after 1 s")
    assert tries == [1.0]


# -- the scheduler lost mid-run ---------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduler_lost_mid_run_then_a_rerun_finishes(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    """``dask scheduler`` and ``dask worker`` as an operator starts them; the scheduler is
    SIGKILLed while batches run: exit 1 with one line, the verdicts recorded are kept, and a
    local re-run extracts only what is missing, to the output of a local run."""
    root = hostile_tree(tmp_path, sleepers=4, texts=60)
    m = manifest(tmp_path, root, {"deadline_s": 1})
    reference = tmp_path / "local"
    assert sweep(m, reference, extra=HOSTILE) == 2
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    scratch = tmp_path / "dw"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    scheduler = subprocess.Popen(
        [str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    worker = subprocess.Popen(
        # one process, two threads: two kept pools side by side in one Dask worker
        [str(DASK), "worker", address, "--nworkers", "1", "--nthreads", "2", "--no-dashboard",
         "--local-directory", str(scratch), "--death-timeout", "5"],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    out = tmp_path / "cluster"
    try:
        def kill_scheduler() -> None:
            # once texts arrive the sleepers' batches are running (they take seconds)
            if wait_until(lambda: texts_in_store(out) >= 20, 90):
                scheduler.send_signal(signal.SIGKILL)

        killer = threading.Thread(target=kill_scheduler)
        killer.start()
        capsys.readouterr()
        try:
            rc = sweep(m, out, cluster=address, extract_only=False, extra=HOSTILE)
        finally:
            killer.join()
        err = capsys.readouterr().err.strip().splitlines()
        assert scheduler.poll() is not None, "the scheduler was not killed mid-run"
        assert rc == 1
        assert len(err) == 1 and "lost the Dask scheduler" in err[0], err
        assert not (out / "extract.jsonl").exists()
        from bastion.tasks.extract.store import Store
        from bastion.tasks.output.directory import open_output

        with open_output(out) as od:
            store = Store(out, lambda: od)
            kept = store.verdicts()
            store.close()
        # what arrived was committed (a batch's verdicts are queued once all its texts are
        # placed: 20 texts ⇒ the batches that brought them, 8 verdicts at least, queued);
        # not everything did
        assert 8 <= len(kept) < 64
    finally:
        for proc in (scheduler, worker):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert wait_until(lambda: not sandbox_workers(scratch), GONE), sandbox_workers(scratch)
    # the next run (local) finishes only what is missing
    assert sweep(m, out, extract_only=True, extra=HOSTILE) == 2
    assert summary(out)["extracted"] == 64 - len(kept)
    assert compare_outputs(reference, out) == []


# -- tool sets that differ between machines ---------------------------------------------------


def test_a_worker_with_other_tools_gets_no_document_that_uses_them(cluster, tmp_path: Path) -> None:
    """A third Dask worker whose pdftotext is another version (a fake on its PATH) joins the
    cluster: the PDFs, keyed on this machine's pdftotext, never run there (not even once to
    be refused), and the output is the local run's."""
    address, client, _ = cluster
    if shutil.which("pdftotext") is None:
        pytest.skip("needs pdftotext (poppler-utils) on this machine")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    marker = tmp_path / "fake-pdftotext-ran"
    script = fake / "pdftotext"
    script.write_text("#!/bin/sh\n"
                      'if [ "$1" = "-v" ]; then echo "pdftotext version 0.1.0" >&2; exit 0; fi\n'
                      f"touch {marker}\nexit 1\n")
    script.chmod(0o755)
    root = tmp_path / "pdfs"
    shutil.copytree(REPO / "tests" / "samples" / "pdf", root, ignore=shutil.ignore_patterns("*.md"))
    m = manifest(tmp_path, root)
    reference = tmp_path / "local"
    assert sweep(m, reference) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": f"{fake}:{os.environ['PATH']}"}
    odd = subprocess.Popen(
        [str(DASK), "worker", address, "--nthreads", "1", "--name", "odd-tools",
         "--no-dashboard", "--local-directory", str(tmp_path / "odd"), "--death-timeout", "5"],
        env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        client.wait_for_workers(3, timeout=60)
        odd_address = next(a for a, w in client.scheduler_info()["workers"].items()
                           if w.get("name") == "odd-tools")
        out = tmp_path / "cluster"
        with distributed.get_task_stream(client) as stream:
            assert sweep(m, out, cluster=address) == 0
        ran_on_odd = [t for t in stream.data if t.get("worker") == odd_address
                      and str(t["key"]).startswith("bastion-batch-")]
        s = summary(out)
    finally:
        os.killpg(odd.pid, signal.SIGTERM)
        odd.wait(timeout=30)
    assert compare_outputs(reference, out) == []
    assert not marker.exists()
    workers = {w["name"]: w for w in s["cluster"]["workers"]}
    assert workers["odd-tools"]["tools"]["pdftotext"][1] == "0.1.0"  # reported truthfully
    assert {r["mime"] for r in records(out)} == {"application/pdf"}
    assert s["extracted"] == len(list(root.glob("*.pdf")))
    # a batch per PDF, three idle workers: without the restriction the odd one would get some
    # (and refuse them: ToolMismatch, in the task stream)
    assert ran_on_odd == [] and workers["odd-tools"]["documents"] == 0
    assert wait_until(lambda: not sandbox_workers(tmp_path / "odd"), GONE)


def test_ctrl_c_cancels_the_batches_and_a_rerun_finishes(cluster, tmp_path: Path) -> None:
    """SIGINT to ``bastion extract --cluster`` mid-run: exit 130, the scheduler holds no batch
    of it any more, the verdicts recorded are kept, and a re-run completes to the output of a
    local run."""
    address, client, _ = cluster
    root = tmp_path / "many"
    root.mkdir()
    for i in range(3000):
        (root / f"f{i:04d}.txt").write_text(f"file {i} " * 40 + "\n")
    m = manifest(tmp_path, root)
    reference = tmp_path / "local"
    assert sweep(m, reference) == 0
    out = tmp_path / "cluster"
    assert main(["walk", str(m), "--out", str(out), "-q"]) == 0
    proc = subprocess.Popen([sys.executable, "-m", "bastion", "extract", str(m), "--out",
                             str(out), "--cluster", address, "-q"], cwd=str(REPO),
                            env={**os.environ, "PYTHONPATH": str(REPO)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            # a suite started in the background by a shell inherits SIGINT
                            # ignored, and would hand that on: the child gets the default
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    def stopped_midway() -> bool:
        if proc.poll() is not None:
            return True
        if texts_in_store(out) < 250:
            return False
        proc.send_signal(signal.SIGSTOP)  # held where it is, however fast the machine
        return True

    try:
        # a batch's texts are all placed before its verdicts are queued: past the first
        # batch's 200 texts, the first batch's verdicts are queued (committed on the way out)
        assert wait_until(stopped_midway, 120)
        proc.send_signal(signal.SIGINT)  # pending while stopped: delivered first thing
        proc.send_signal(signal.SIGCONT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == 0:
        pytest.fail("the run finished before it could be interrupted: make the tree larger")
    assert proc.returncode == 130, err
    assert err.decode().strip().splitlines()[-1] == "bastion: interrupted"

    def batches_left() -> list[str]:
        return client.run_on_scheduler(
            lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks
                                    if str(k).startswith("bastion-batch-")])

    assert wait_until(lambda: not batches_left(), GONE), batches_left()
    assert sweep(m, out, cluster=address, extract_only=True) == 0
    assert summary(out)["extracted"] < 3000  # what was recorded before the interrupt was kept
    assert compare_outputs(reference, out) == []


def test_workers_running_another_bastion_get_nothing(cluster, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    """The client's code differs from every worker's (a digest of the readers and the batch
    function): no document is sent; each is an error/cluster record, retried next run."""
    address, _, _ = cluster
    root = tmp_path / "r"
    root.mkdir()
    for i in range(3):
        (root / f"{i}.txt").write_text(f"text {i}\n")
    m = manifest(tmp_path, root)
    monkeypatch.setattr("bastion.tasks.cluster.worker.code_identity", lambda: "another-version")
    out = tmp_path / "out"
    assert sweep(m, out, cluster=address) == 2
    recs = records(out)
    assert [(r["status"], r["error_kind"]) for r in recs] == [("error", "cluster")] * 3
    assert "no Dask worker runs this bastion (code another-version)" in recs[0]["error"]
    monkeypatch.undo()
    assert sweep(m, out, cluster=address) == 0  # retried: now read
    assert {r["status"] for r in records(out)} == {"ok"}


def test_a_thread_keeps_a_few_pools_at_most(tmp_path: Path) -> None:
    from bastion.tasks.extract import batch

    p = tmp_path / "a.txt"
    p.write_text("a\n")
    try:
        pools = []
        for i in range(batch.POOLS_PER_THREAD + 2):  # runs with other limits, one after another
            limits = Limits(max_chars=1000 + i)
            extract_batch([_doc(p)], limits=limits, workers=1, tmp_root=tmp_path / "w")
            pools.append(batch.pool_for(limits, 1, tmp_path / "w")[0])
        assert kept_pools() == batch.POOLS_PER_THREAD
        assert all(pool.closed for pool in pools[:2])
        assert not any(pool.closed for pool in pools[2:])
        assert len(sandbox_workers(tmp_path / "w")) == batch.POOLS_PER_THREAD
    finally:
        close_pools()


def _pools_of(max_chars: int) -> list[tuple[int, int, int]]:
    """``client.run`` probe: this Dask worker's kept pools with these limits, each as (its
    identity, sandboxed workers started, running)."""
    from bastion.tasks.extract import batch

    return [(id(pool), pool.spawned, len(pool.workers))
            for key, (pool, _) in list(batch._POOLS.items())
            if key[0].max_chars == max_chars and not pool.closed]


def test_the_plugin_starts_the_pool_before_the_first_batch(cluster, tmp_path: Path) -> None:
    """Registered with the run's limits, the plugin starts each worker's kept pool in its
    executor thread; the first batch then uses it, and registering again (the next run)
    does not stop it."""
    from bastion.tasks.cluster.plugin import ToolsPlugin
    from bastion.tasks.cluster.worker import PLUGIN_NAME

    address, client, _ = cluster
    limits = Limits(max_chars=4321)  # limits of this test only: pools of their own
    client.register_plugin(ToolsPlugin(limits), name=PLUGIN_NAME)
    workers = sorted(client.scheduler_info()["workers"])

    def warm() -> dict[str, list[tuple[int, int, int]]]:
        return client.run(_pools_of, 4321)

    assert wait_until(lambda: all(len(p) == 1 and p[0][1:] == (1, 1) for p in warm().values()),
                      20.0), warm()
    before = warm()
    assert sorted(before) == workers
    client.register_plugin(ToolsPlugin(limits), name=PLUGIN_NAME)  # the next run's
    p = tmp_path / "a.txt"
    p.write_text("warm\n")
    for w in workers:  # a batch on each worker reads with the pool already there
        batch = Batch((_doc(p),), limits, {})
        result = client.submit(run_batch, batch, workers=[w], pure=False).result()
        assert result.outcomes[0].text == b"warm\n" and result.stats.started == 0
    assert warm() == before


def test_local_processes_fork_the_workers_and_leave_nothing(tmp_path: Path) -> None:
    """local:N's helper: its workers are forked from it (no import of Dask of their own),
    with the profiler off; stopping it leaves no process and no directory."""
    from bastion.tasks.cluster.local import LocalProcesses, _alive_in_group

    local = LocalProcesses(2)
    local.launch()
    assert local.proc is not None and local.dir is not None
    helper, where = local.proc.pid, local.dir
    try:
        client = distributed.Client(local.address(60), set_as_default=False)
        try:
            client.wait_for_workers(2, timeout=60)

            def probe() -> tuple[int, bool, str]:
                import dask

                return (os.getppid(), dask.config.get("distributed.worker.profile.enabled"),
                        open(f"/proc/{os.getppid()}/cmdline", "rb").read().decode())

            seen = list(client.run(probe).values())
        finally:
            client.close()
    finally:
        local.stop()
    assert len(seen) == 2 and seen[0][0] == seen[1][0] == helper  # forked by the helper
    assert "bastion.tasks.cluster.local" in seen[0][2]
    assert seen[0][1] is False
    assert not _alive_in_group(helper)
    assert not where.exists()


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    if int(f.read().rsplit(b")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except OSError:
                pass
    return found


def test_local_cluster_worker_killed_mid_run(tmp_path: Path) -> None:
    """local:2 without nannies: SIGKILL one of its forked worker processes while the sleepers'
    batches run; Dask re-runs its batch on the other, the run completes with the local run's
    output, and nothing of the cluster is left."""
    root = hostile_tree(tmp_path, sleepers=4, texts=40)
    m = manifest(tmp_path, root, {"deadline_s": 1})
    reference = tmp_path / "local"
    assert sweep(m, reference, extra=HOSTILE) == 2
    out = tmp_path / "cluster"
    seen: dict[str, int] = {}

    def kill_one_worker() -> None:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            helpers = [p for p in _children(os.getpid())
                       if _cmdline_has(p, b"bastion.tasks.cluster.local")]
            workers = [w for h in helpers for w in _children(h)]
            # both workers have their sandboxed workers: batches (sleepers first) are running
            if helpers and len(workers) == 2 and all(_children(w) for w in workers):
                time.sleep(0.5)
                seen["helper"] = helpers[0]
                os.kill(workers[0], signal.SIGKILL)
                seen["killed"] = workers[0]
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    try:
        rc = sweep(m, out, cluster="local:2", extra=HOSTILE)
    finally:
        killer.join()
    assert "killed" in seen, "no worker was seen running"
    assert rc == 2
    assert compare_outputs(reference, out) == []
    assert len(records(out)) == 44
    from bastion.tasks.cluster.local import _alive_in_group

    # the helper, its workers, their sandboxed workers: stopped by the run's stopping thread
    assert wait_until(lambda: not _alive_in_group(seen["helper"]), GONE)
