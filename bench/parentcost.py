"""The parent's own cost above the reader pool: a sweep whose pool answers at once.

    python bench/parentcost.py MANIFEST [--against TREE …] [--rounds 3] [--work DIR]

A first, real ``bastion sweep -j 2`` of MANIFEST (this checkout) makes the reference output.
Then, round after round and each source tree in turn (this checkout and every ``--against``
tree, e.g. main's ``git archive``), a fresh sweep of the same tree runs in a process of its own
whose ``WorkerPool`` is a stand-in: it answers every job at once with the verdict and the text
the reference run stored for its (sha256, task key), called back after the next job is handed
out as the real pool does.  What is measured is then everything the parent does for a
document — the walk, the plan, doit's tasks, placing texts, the commits, the records, the
summary — and nothing of the workers (``readers/runtime/``): wall and CPU of that process
(``os.wait4``), the CPU spent in cyclic garbage collection (``gc.callbacks``), and the
end of the run (its finish: every record written while no document is read).  Each output is
compared with the reference (``bastion compare``): the stand-in changes no byte.

The texts handed out are copied into a directory of the run's own before each run (outside
the measurement): the store takes them by rename, as it takes a worker's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from benchlib import compile_trees  # noqa: E402

# Run in the measured process, with the measured tree as its working directory (so that the
# tree's own ``bastion`` is imported): argv = [reference output, texts directory, sweep args…]
REPLAY = r'''
import gc, json, os, sqlite3, sys, time
from pathlib import Path

ref, texts = Path(sys.argv[1]), Path(sys.argv[2])
db = sqlite3.connect(ref / ".bastion" / "verdicts.sqlite")
stored = {(s, k): b for s, k, b in db.execute("SELECT sha256, key, body FROM verdicts")}
db.close()

from bastion.readers.runtime import pool as pool_module
from bastion.readers.runtime.verdict import Status, Verdict
import bastion.tasks.extract.session as session_module
from bastion.tasks.extract import finish as finish_module


class StandIn:
    """WorkerPool's public side, answering each job at once from the reference run."""

    def __init__(self, size, limits, tmp_root, callback, **kwargs):
        self.size, self.callback = size, callback
        self.spawned = self.killed = 0
        self.closed = False
        self.identity = None
        self.workers = []
        self.pending = []

    def warm(self, n=1):
        pass

    def submit(self, job):
        verdict = Verdict.from_store(json.loads(stored[(job.sha256, job.key)]))
        text = texts / f"{job.sha256}.{job.key}.txt" if verdict.status is Status.OK else None
        self.drain()  # the previous answers, called back once the next job is handed out
        self.pending.append(pool_module.JobResult(job, verdict, text, {}))

    def drain(self):
        while self.pending:
            self.callback(self.pending.pop(0))

    def close(self):
        self.drain()
        self.closed = True


session_module.WorkerPool = StandIn
spent = {"gc": 0.0, "finish": 0.0}
started = {}


def collecting(phase, info):
    if phase == "start":
        started["gc"] = time.process_time()
    else:
        spent["gc"] += time.process_time() - started["gc"]


gc.callbacks.append(collecting)
real_finish = finish_module.finish


def timed_finish(*args, **kwargs):
    t = time.monotonic()
    try:
        return real_finish(*args, **kwargs)
    finally:
        spent["finish"] += time.monotonic() - t


finish_module.finish = timed_finish
from bastion.tasks.cli import main

rc = main(sys.argv[3:])
print(json.dumps({"rc": rc, "gc": spent["gc"], "finish": spent["finish"]}))
'''


def prepare_texts(ref: Path, where: Path) -> None:
    """Each ok verdict's text of the reference output, named for the stand-in."""
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    db = sqlite3.connect(ref / ".bastion" / "verdicts.sqlite")
    try:
        rows = db.execute("SELECT sha256, key, body FROM verdicts").fetchall()
    finally:
        db.close()
    for sha, key, body in rows:
        if json.loads(body).get("status") != "ok":
            continue
        src = ref / "extract" / sha[:2] / f"{sha}.txt"
        if not src.exists():
            src = ref / "extract" / sha[:2] / f"{sha}.{key}.txt"
        shutil.copyfile(src, where / f"{sha}.{key}.txt")


def replay(tree: Path, manifest: Path, ref: Path, work: Path) -> dict:
    texts, out = work / "texts", work / f"out-{tree.name}"
    prepare_texts(ref, texts)
    shutil.rmtree(out, ignore_errors=True)
    said = work / "said"
    with open(said, "w+") as f:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", REPLAY, str(ref), str(texts), "sweep",
                                 str(manifest), "--out", str(out), "-q", "-j", "2"], cwd=tree,
                                stdout=f, stderr=subprocess.STDOUT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - t0
        f.seek(0)
        lines = f.read().strip().splitlines()
    stderr = "\n".join(lines[-20:])
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{tree}: replay failed: {stderr}")
    got = json.loads(lines[-1])
    if got["rc"] not in (0, 2):
        raise SystemExit(f"{tree}: sweep exited {got['rc']}: {stderr[-1500:]}")
    same = subprocess.run([sys.executable, "-m", "bastion", "compare", str(ref), str(out)],
                          cwd=ROOT, capture_output=True, text=True).returncode == 0
    return {"wall": wall, "gc": got["gc"], "finish": got["finish"], "same": same,
            "cpu": usage.ru_utime + usage.ru_stime}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("manifest", type=Path)
    ap.add_argument("--against", type=Path, action="append", default=[],
                    help="another bastion source tree, measured beside this checkout")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bastion-parentcost"))
    args = ap.parse_args()
    trees = [t.resolve() for t in args.against] + [ROOT]
    compile_trees(*trees)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    ref = work / "reference"
    shutil.rmtree(ref, ignore_errors=True)
    print("the reference run (real workers) …", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "bastion", "sweep", str(args.manifest.resolve()),
                    "--out", str(ref), "-q", "-j", "2"], cwd=ROOT, check=False)
    runs: dict[Path, list[dict]] = {t: [] for t in trees}
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else trees[::-1]
        for tree in order:
            m = replay(tree, args.manifest.resolve(), ref, work)
            runs[tree].append(m)
            print(f"round {r + 1} {tree}: {m['wall']:.2f} s wall {m['cpu']:.2f} s CPU, "
                  f"gc {m['gc']:.2f} s, finish {m['finish']:.2f} s, "
                  f"{'identical' if m['same'] else 'DIFFERENT'}", file=sys.stderr)
    print(f"\nload {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; medians of "
          f"{args.rounds} rounds\n")
    print("| tree | wall s | CPU s | of it in GC s | finish s | output |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for tree, ms in runs.items():
        med = {k: statistics.median(m[k] for m in ms) for k in ("wall", "cpu", "gc", "finish")}
        same = "identical" if all(m["same"] for m in ms) else "DIFFERENT"
        print(f"| {tree} | {med['wall']:.2f} | {med['cpu']:.2f} | {med['gc']:.2f} | "
              f"{med['finish']:.2f} | {same} |")
    return 0 if all(m["same"] for ms in runs.values() for m in ms) else 1


if __name__ == "__main__":
    sys.exit(main())
