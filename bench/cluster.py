"""The extract stage on a Dask cluster against the local pool, side by side in one run.

    python bench/cluster.py [--files 20000] [--pdfs 80] [--rounds 3] [--work DIR] [--against DIR]
                            [--only text|pdfs] [--no-extras]

Two corpora, built under ``--work`` (default ``bench/.corpus/cluster``, not committed): 20,000
small text files, and a PDF set (the real PDFs of ``tests/samples/pdf`` plus generated ones of
5–60 pages, ``tests/pdfgen.py``).  Each corpus is walked once; every measured run extracts
from a copy of that walk into a fresh output directory, in three ways, alternated per round:

* ``local -j 2``: the local pool (the reference);
* ``--cluster local:2``: a scheduler and 2 worker processes started and stopped by the run
  (what ``bastion extract --cluster local:2`` costs a user, start-up included; the process
  tree's CPU includes them, ``tasks/cluster/local.py`` reaps them);
* with ``--against DIR``: the ``local:2`` of another source tree (an older commit), the same way;
* ``--cluster tcp://…``: a cluster already running (``dask scheduler`` + ``dask worker
  --nworkers 2 --nthreads 1``, started once by this script): the steady state.

Reported: wall seconds, files/s and its ratio to local (target ≥ 0.8 on this 2-core machine,
where a cluster can only add overhead), the client's peak RSS (``wait4``: the largest
process of the tree), the scheduler's peak RSS (``VmHWM``), and
every output is checked byte-identical to the local one (``bastion.tasks.commands.compare``).

Then the data-movement question, measured on the warm cluster: the same batches sent as paths
(each worker reads its files: what bastion does) or as the files' bytes (the client reads
them and ships them), the task doing nothing else; and the bytes each design moves per GB of
documents (texts only, or documents and texts), from the corpus's own text/document ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(HERE)]

from core import make_tree, manifest, run  # noqa: E402

BASTION = [sys.executable, "-m", "bastion"]
DASK = str(Path(sys.executable).with_name("dask"))


WORDS = ("archive budget committee delivery estimate framework guideline hearing inventory "
         "journal ledger minutes notice outline procedure quarterly register schedule tender "
         "update vendor warrant").split()


def make_pdfs(root: Path, n: int) -> None:
    """The real sample PDFs, then generated ones (seeded): 10–120 pages of 40 lines each."""
    if (root / ".done").exists():
        return
    from pdfgen import make_text_pdf

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for src in sorted((REPO / "tests" / "samples" / "pdf").glob("*.pdf")):
        shutil.copy(src, root / src.name)
    rnd = random.Random(7)
    for i in range(n - len(list(root.glob("*.pdf")))):
        pages = ["\n".join(" ".join(rnd.choice(WORDS) for _ in range(11)) + f" d{i}p{p}l{k}"
                           for k in range(40)) for p in range(rnd.randint(10, 120))]
        (root / f"gen{i:03d}.pdf").write_bytes(make_text_pdf(pages, compress=True))
    (root / ".done").write_text("")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hwm_mib(pid: int) -> float:
    """Peak RSS of a running process (VmHWM), MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


class WarmCluster:
    """``dask scheduler`` and ``dask worker --nworkers 2 --nthreads 1`` on localhost."""

    def __init__(self, work: Path) -> None:
        port = free_port()
        self.address = f"tcp://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.scheduler = subprocess.Popen(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.workers = subprocess.Popen(
            [DASK, "worker", self.address, "--nworkers", "2", "--nthreads", "1",
             "--no-dashboard", "--local-directory", str(work / "dask-workers")],
            env=env, cwd=str(REPO), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        import distributed

        self.client = distributed.Client(self.address, timeout=60, set_as_default=False)
        self.client.wait_for_workers(2, timeout=60)

    def close(self) -> None:
        self.client.close()
        for proc in (self.workers, self.scheduler):
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def fresh_out(base: Path, out: Path) -> Path:
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for name in ("walk.jsonl", "walk.summary.json"):
        shutil.copy(base / name, out / name)
    return out


def root_tag(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name)


def extract_runs(name: str, m: Path, base: Path, work: Path, warm: WarmCluster, rounds: int,
                 files: int, against: Path | None = None) -> tuple[list[str], dict]:
    from bastion.tasks.commands.compare import compare_outputs

    modes = {
        "local -j 2": ["-j", "2"],
        "--cluster local:2": ["--cluster", "local:2"],
        "--cluster tcp:// (running)": ["--cluster", warm.address],
    }
    trees = {mode: REPO for mode in modes}
    if against is not None:  # another source tree's local:2, alternated with this one's
        mode = f"--cluster local:2, {against.name}"
        modes[mode], trees[mode] = ["--cluster", "local:2"], against
    results: dict[str, list[dict]] = {k: [] for k in modes}
    saved = os.environ.get("PYTHONPATH")
    for r in range(rounds):
        order = list(modes) if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            tag = f"{root_tag(name)}-{list(modes).index(mode)}-{len(results[mode])}"
            out = fresh_out(base, work / f"out-{tag}")
            os.environ["PYTHONPATH"] = str(trees[mode])  # python -m bastion of that tree
            res = run([*BASTION, "extract", str(m), "--out", str(out), "-q", *modes[mode]],
                      cwd=trees[mode])
            res["out"] = out
            res["load"] = os.getloadavg()[0]  # the machine is shared: say how loaded it was
            res["summary"] = json.loads((out / "extract.summary.json").read_text())
            results[mode].append(res)
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved
    reference = results["local -j 2"][0]["out"]
    lines = [f"### {name}: {files} files", "",
             "| mode | wall s (median) | files/s | × local | CPU s (process tree) | "
             "client peak RSS MiB | load avg (1 min) | identical |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    local_wall = statistics.median(r["wall"] for r in results["local -j 2"])
    figures = {}
    for mode, runs in results.items():
        wall = statistics.median(r["wall"] for r in runs)
        same = all(not compare_outputs(reference, r["out"]) for r in runs)
        ratio = local_wall / wall
        cpu = statistics.median(r["cpu"] for r in runs)
        load = statistics.median(r["load"] for r in runs)
        figures[mode] = {"wall": wall, "files_per_s": files / wall, "ratio": ratio,
                         "cpu": cpu, "rss": max(r["rss"] for r in runs), "identical": same,
                         "load": load, "walls": [r["wall"] for r in runs]}
        lines.append(f"| {mode} | {wall:.2f} | {files / wall:,.0f} | {ratio:.2f} | {cpu:.2f} | "
                     f"{max(r['rss'] for r in runs):.0f} | {load:.1f} | "
                     f"{'yes' if same else 'NO'} |")
    lines.append("")
    for runs in results.values():
        for r in runs:
            shutil.rmtree(r["out"], ignore_errors=True)
    return lines, figures


def _read_paths(paths: list[str]) -> int:
    total = 0
    for p in paths:
        with open(p, "rb") as f:
            total += len(f.read())
    return total


def _take_bytes(blobs: list[bytes]) -> int:
    return sum(len(b) for b in blobs)


def movement(name: str, root: Path, warm: WarmCluster, text_ratio: float) -> list[str]:
    """Paths vs bytes through the warm cluster: the transfer alone (the task does nothing)."""
    paths = sorted(str(p) for p in root.rglob("*") if p.is_file() and p.name != ".done")
    sizes = [os.path.getsize(p) for p in paths]
    batches: list[list[int]] = [[]]
    acc = 0
    for i, size in enumerate(sizes):
        if batches[-1] and (len(batches[-1]) >= 200 or acc + size > 32 << 20):
            batches.append([])
            acc = 0
        batches[-1].append(i)
        acc += size
    client = warm.client
    out = []
    for design in ("paths", "bytes"):
        t0 = time.monotonic()
        c0 = time.process_time()
        futures = []
        for k, batch in enumerate(batches):
            if design == "paths":
                futures.append(client.submit(_read_paths, [paths[i] for i in batch],
                                             key=f"bench-paths-{name}-{k}-{t0}"))
            else:
                blobs = []
                for i in batch:
                    with open(paths[i], "rb") as f:
                        blobs.append(f.read())
                futures.append(client.submit(_take_bytes, blobs, key=f"bench-bytes-{name}-{k}-{t0}"))
        total = sum(client.gather(futures))
        wall = time.monotonic() - t0
        cpu = time.process_time() - c0
        out.append((design, wall, cpu, total))
        del futures
    lines = [f"### data movement, {name}: {len(paths)} files, {sum(sizes) / 1e6:.1f} MB "
             f"(texts {text_ratio:.2f} × the documents' bytes)", "",
             "| design | wall s | client CPU s | MB/s | moved per GB of documents |",
             "| --- | ---: | ---: | ---: | ---: |"]
    for design, wall, cpu, total in out:
        moved = text_ratio if design == "paths" else 1 + text_ratio
        lines.append(f"| {design} | {wall:.2f} | {cpu:.2f} | {total / 1e6 / wall:,.0f} | "
                     f"{moved:.2f} GB |")
    lines.append("")
    return lines


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _never(batch) -> None:  # never runs: its tasks wait for a resource no worker has
    return None


def scheduler_memory(warm: WarmCluster, tasks: int = 2000) -> list[str]:
    """The scheduler's memory per waiting batch task: tasks that ask for a resource no worker
    has wait on the scheduler with their arguments, as batches do before a worker is free."""
    from bastion.readers.base import Limits
    from bastion.readers.runtime.job import Job
    from bastion.tasks.cluster.run import Batch

    lines = ["### scheduler memory per batch task", "",
             "| documents per batch | tasks waiting | scheduler RSS growth MiB | per task KiB | "
             "per document B |", "| ---: | ---: | ---: | ---: | ---: |"]
    for per in (1, 200):
        before = rss_mib(warm.scheduler.pid)
        futures = []
        for k in range(tasks):
            docs = tuple(Job(j, f"/srv/share/dept{k % 50}/project{j}/report-{k}-{j}.pdf",
                             f"report-{k}-{j}.pdf", "application/pdf", f"{k:08x}{j:056x}",
                             123456, 300.0, {"pdftotext": "/usr/bin/pdftotext"}, "pdf",
                             "0123456789abcdef") for j in range(per))
            futures.append(warm.client.submit(_never, Batch(docs, Limits(), {}),
                                              key=f"bench-mem-{per}-{k}",
                                              resources={"bench-no-such-resource": 1}))
        time.sleep(3.0)  # let the scheduler take them all
        grown = rss_mib(warm.scheduler.pid) - before
        warm.client.cancel(futures)
        del futures
        lines.append(f"| {per} | {tasks} | {grown:.1f} | {grown * 1024 / tasks:.1f} | "
                     f"{grown * 1024 * 1024 / tasks / per:.0f} |")
        time.sleep(2.0)
    lines.append("")
    return lines


def text_ratio(m: Path, base: Path, work: Path) -> float:
    out = fresh_out(base, work / "out-ratio")
    run([*BASTION, "extract", str(m), "--out", str(out), "-q", "-j", "2"], cwd=REPO)
    texts = sum(p.stat().st_size for p in (out / "extract").glob("*/*.txt"))
    docs = sum(json.loads(line).get("size") or 0 for line in (base / "walk.jsonl").open())
    shutil.rmtree(out, ignore_errors=True)
    return texts / docs if docs else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--pdfs", type=int, default=80)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "cluster")
    ap.add_argument("--against", type=Path, default=None,
                    help="another source tree (git archive OLD | tar -x -C DIR): its "
                         "--cluster local:2 as a fourth mode, alternated with the others")
    ap.add_argument("--only", choices=("text", "pdfs"), default=None,
                    help="measure one corpus only")
    ap.add_argument("--no-extras", action="store_true",
                    help="only the extract runs: no data-movement or scheduler-memory rows")
    args = ap.parse_args()
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    corpora = {}
    if args.only in (None, "text"):
        small = work / "small"
        make_tree(small, args.files, size=2000)
        corpora["small text files"] = (small, args.files)
    if args.only in (None, "pdfs"):
        pdfs = work / "pdfs"
        make_pdfs(pdfs, args.pdfs)
        corpora["PDFs"] = (pdfs, args.pdfs)
    warm = WarmCluster(work)
    lines = [f"## bench/cluster.py ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
             f"{os.cpu_count()} cores, {args.rounds} rounds, load average at the start "
             f"{os.getloadavg()[0]:.1f})", ""]
    figures = {}
    try:
        for name, (root, files) in corpora.items():
            m = manifest(work / f"{root.name}.yaml", root)
            base = work / f"walk-{root.name}"
            if not (base / "walk.jsonl").exists():
                run([*BASTION, "walk", str(m), "--out", str(base), "-q"], cwd=REPO)
            part, figures[name] = extract_runs(name, m, base, work, warm, args.rounds, files,
                                               args.against)
            lines += part
            if not args.no_extras:
                lines += movement(name, root, warm, text_ratio(m, base, work))
        lines.append(f"scheduler peak RSS over every run: {hwm_mib(warm.scheduler.pid):.0f} MiB")
        lines.append("")
        if not args.no_extras:
            lines += scheduler_memory(warm)
    finally:
        warm.close()
    report = "\n".join(lines) + "\n"
    print(report)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "cluster.md").write_text(report)
    (results / "cluster.json").write_text(json.dumps(figures, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
