"""Isolation overhead per small document: the worker pool vs reading in-process; worker start.

    python bench/isolation.py DIR [--n 3000]
    python bench/isolation.py --starts 40
    python bench/isolation.py --layers 400

Reads the same small files both ways, alternating rounds, and prints the per-document cost
of the worker path minus the in-process path.  ``--starts N`` instead starts N workers one at
a time in each way a worker can hold its descendants (a PID namespace, a user and PID
namespace, the subreaper fallback) and, run as root, in a PID namespace as ``nobody``,
interleaved, and prints the median time from the spawn to the worker's ready line.
``--layers N`` measures what each per-document layer of issue 41 adds to a document's process:
a process that loaded what a zygote loads forks N children, each of which narrows itself as a
document's process does — nothing; Landlock on writes only (as before issue 41); Landlock on
reads too (``DocumentRules``); and that plus the document's stacked seccomp filter on top of the
worker's — then does what a small document's reading does (imports a module not loaded yet,
opens its scratch, writes a text, stats a few system files) and exits; the ways alternate round
by round, CPU (the children's, counted once reaped, and the parent's fork) beside wall.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bastion.readers.base import Document, Limits  # noqa: E402
from bastion.readers.runtime.context import LocalContext  # noqa: E402
from bastion.readers.dispatch import read_document  # noqa: E402
from bastion.readers.runtime.pool import Job, WorkerPool  # noqa: E402
from bastion.readers.runtime.procs import AUTO, SUBREAPER, USER_PID_NAMESPACE  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", type=Path, nargs="?")
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--starts", type=int, default=0)
    ap.add_argument("--layers", type=int, default=0)
    args = ap.parse_args()
    if args.layers:
        layers(args.layers, args.rounds)
        return
    if args.starts:
        starts(args.starts)
        return
    if args.dir is None:
        ap.error("DIR is needed (or --starts N)")
    files = sorted(p for p in args.dir.rglob("*.txt"))[: args.n]
    docs = [(p, p.read_bytes()) for p in files]
    jobs = [Job(i, str(p), p.name, "text/plain", hashlib.sha256(d).hexdigest(), len(d), 60.0)
            for i, (p, d) in enumerate(docs)]
    limits = Limits()
    inproc, pooled = [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            ctx = LocalContext(limits, {}, Path(tmp))
            for p, d in docs:
                outcome = read_document(Document(p.read_bytes(), p.name, "text/plain"), ctx)
                if outcome.status == "ok":  # the text is written out in both paths
                    (Path(tmp) / "t.txt").write_text(outcome.text)
        inproc.append((time.perf_counter() - t0) / len(docs))
        with tempfile.TemporaryDirectory() as tmp:
            done = []
            pool = WorkerPool(1, limits, Path(tmp), done.append)
            pool.submit(jobs[0])  # start the worker outside the timed part
            pool.drain()
            t0 = time.perf_counter()
            for job in jobs:
                pool.submit(job)
            pool.drain()
            pooled.append((time.perf_counter() - t0) / len(docs))
            pool.close()
    a, b = statistics.median(pooled) * 1000, statistics.median(inproc) * 1000
    print(f"isolation overhead per document: {a - b:.3f} ms (worker {a:.3f} ms vs in-process "
          f"{b:.3f} ms, {len(docs)} documents, 1 worker, median of {args.rounds} rounds)")


LAYERS = r"""
import json, os, sys, tempfile, time
from pathlib import Path
from bastion.readers.runtime import seccomp
from bastion.readers.runtime.sandbox import DocumentRules, landlock_ruleset, prepared_enforce
from bastion.readers.runtime.workermain import read_paths
n, rounds = int(sys.argv[1]), int(sys.argv[2])
scratch = Path(tempfile.mkdtemp())
seccomp.install()  # the worker's filter, in every way (the zygote has it)
_, writes = landlock_ruleset([scratch])
only_writes = prepared_enforce(writes)
rules = DocumentRules(scratch, read_paths())
document_filter = seccomp.prepared(seccomp.document_program())
def reads_too():
    rules.enforce()
def reads_and_filter():
    rules.enforce()
    document_filter()
ways = {"none": lambda: None, "landlock writes (before)": only_writes,
        "landlock reads too": reads_too, "reads + document filter": reads_and_filter}
def child():
    import email.feedparser  # a module not loaded yet: the path walk of an import
    with open(scratch / "t.txt", "w") as f:
        f.write("text " * 200)
    for p in ("/usr/lib", "/etc/localtime", "/usr/share/zoneinfo", "/proc/self/status"):
        try:
            os.stat(p)
        except OSError:
            pass
got = {w: [] for w in ways}
for _ in range(rounds):
    for way, narrow in ways.items():
        c0, t0 = os.times(), time.perf_counter()
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                code = 0
                try:
                    narrow()
                    child()
                except BaseException:
                    code = 1
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert status == 0, way
        c1, t1 = os.times(), time.perf_counter()
        cpu = c1.user - c0.user + c1.system - c0.system + c1.children_user - c0.children_user \
            + c1.children_system - c0.children_system
        got[way].append((cpu / n * 1000, (t1 - t0) / n * 1000))
print(json.dumps(got))
"""


def layers(n: int, rounds: int) -> None:
    import json
    import os
    import subprocess

    done = subprocess.run([sys.executable, "-c", LAYERS, str(n), str(rounds)],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                          text=True, timeout=3600)
    if done.returncode:
        sys.exit(done.stderr[-2000:])
    got = json.loads(done.stdout)
    print(f"a document's process: fork, narrow, a small read, exit; ms per process (median of "
          f"{rounds} rounds of {n}, ways alternated; load {os.getloadavg()[0]:.1f})")
    print(f"{'narrowed by':28s} {'CPU':>7s} {'wall':>7s}")
    for way, rows in got.items():
        cpu = statistics.median(r[0] for r in rows)
        wall = statistics.median(r[1] for r in rows)
        print(f"{way:28s} {cpu:7.3f} {wall:7.3f}")


def starts(n: int) -> None:
    limits = Limits()
    # (label, contain, user): user None keeps root; "nobody" gives it up when run as root
    ways = [("pid-namespace", AUTO, None), ("user-pid-namespace", USER_PID_NAMESPACE, None),
            ("subreaper", SUBREAPER, None), ("pid-namespace, as nobody", AUTO, "nobody")]
    times: dict[str, list[float]] = {label: [] for label, _, _ in ways}
    with tempfile.TemporaryDirectory() as tmp:
        probe = WorkerPool(1, limits, Path(tmp), lambda r: None, user="nobody")
        if probe.user is None:  # not root, or nobody cannot run it here
            print(f"(no start as nobody: {probe.user_note or 'not run as root'})")
            ways = ways[:3]
        probe.close()
        for i in range(n + 1):
            for label, contain, user in ways:
                pool = WorkerPool(1, limits, Path(tmp), lambda r: None, contain=contain,
                                  user=user)
                try:
                    t0 = time.perf_counter()
                    pool.warm()
                    while not pool.workers[0].ready:
                        pool._poll()
                    took = time.perf_counter() - t0
                finally:
                    pool.close()
                if i:  # the first round warms the page cache and the byte-compiled readers
                    times[label].append(took)
    base = statistics.median(times["subreaper"]) * 1000
    for label, _, _ in ways:
        ms = statistics.median(times[label]) * 1000
        print(f"worker start, {label}: {ms:.1f} ms (median of {n}; "
              f"{ms - base:+.1f} ms against the subreaper fallback)")

if __name__ == "__main__":
    main()
