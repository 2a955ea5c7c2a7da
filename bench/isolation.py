"""Isolation overhead per small document: the worker pool vs reading in-process; worker start.

    python bench/isolation.py DIR [--n 3000]
    python bench/isolation.py --starts 40

Reads the same small files both ways, alternating rounds, and prints the per-document cost
of the worker path minus the in-process path.  ``--starts N`` instead starts N workers one at
a time in each way a worker can hold its descendants (a PID namespace, a user and PID
namespace, the subreaper fallback) and, run as root, in a PID namespace as ``nobody``,
interleaved, and prints the median time from the spawn to the worker's ready line.
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
    args = ap.parse_args()
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
