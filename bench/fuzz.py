"""The long fuzz run over every reader and MIME detection (the short slice is tests/test_fuzz.py).

    python bench/fuzz.py --seconds 600 [--seed 1] [--pool-share 0.1] [--jobs 1]

Seeds and mutations are those of ``tests/robust_fuzzlib.py`` (the fixtures of tests/officegen.py,
tests/pdfgen.py and tests/samples/**, mutated as bytes and as structure).  Two phases:

1. **in-process** (most of the time): each input goes through ``detect_bytes`` (and
   ``detect_file``, which must agree) and ``bastion.readers.dispatch.read_document`` in a child
   process with a 2 GiB ``RLIMIT_AS``; the child writes each input to
   ``bench/.corpus/fuzz-crashes/.current-<n>`` before reading it, so a segfault or a hang
   (no progress for 60 s: the child is killed) still leaves its reproducer.  Inputs whose
   outcome is new (reader, status, error kind, message head) join the corpus and are mutated
   further: a crude feedback without coverage instrumentation.
2. **through a real WorkerPool** (``--pool-share`` of the time): mutated inputs are written to
   files and submitted as jobs to a 2-worker pool; the parent must get exactly one JobResult per
   job, with a status in the four, and no worker may survive ``close()``.

Prints the iterations per reader (the reader the detected type selects) and per seed family,
and every failure with its reproducer saved as ``bench/.corpus/fuzz-crashes/<reader>-<sha>.<ext>``
(+ ``.why`` saying what broke).  Exit 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import multiprocessing as mp
import os
import random
import signal
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.procutil import alive  # noqa: E402

CRASH_DIR = REPO / "bench" / ".corpus" / "fuzz-crashes"
HANG_S = 60.0


def _quiet() -> None:
    import logging

    warnings.simplefilter("ignore")
    logging.disable(logging.CRITICAL)
    # pdfplumber/pdfminer print "[WARNING] …" through their own logger setup on stderr
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


def save_reproducer(data: bytes, name: str, reader: str, what: str) -> Path:
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(data).hexdigest()[:12]
    ext = os.path.splitext(name)[1] or ".bin"
    path = CRASH_DIR / f"{reader}-{digest}{ext}"
    path.write_bytes(data)
    path.with_name(path.name + ".why").write_text(f"name: {name}\n{what}\n")
    return path


# -- phase 1: in-process, in a child that may die -------------------------------------------------


def _child(conn, seed: int, slot: int, stop_at: float) -> None:
    import resource

    _quiet()
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    from bastion.readers.runtime.context import LocalContext
    from bastion.readers.dispatch import read_nested
    from tests import robust_fuzzlib as fl

    seeds = fl.all_seeds()
    corpus: dict[str, list[tuple[str, bytes]]] = collections.defaultdict(list)
    seen: set[tuple] = set()
    rng = random.Random(seed)
    scratch = Path(tempfile.mkdtemp(prefix="bastion-fuzz-"))
    ctx = LocalContext(fl.fuzz_limits(), {}, scratch, nested=read_nested)
    current = CRASH_DIR / f".current-{slot}"
    counts: collections.Counter = collections.Counter()
    last = time.monotonic()
    n = 0
    while time.time() < stop_at:
        family, name, data = rng.choice(seeds)
        if corpus[family] and rng.random() < 0.3:
            name, data = rng.choice(corpus[family])
        other = rng.choice(seeds)[2]
        data = fl.apply(data, fl.random_mutations(rng, family), other)
        with open(current, "wb") as f:
            f.write(name.encode() + b"\n" + data)
        check_dir = scratch if n % 10 == 0 else None  # detect_file agreement, 1 in 10
        v = fl.check(data, name, ctx, check_dir)
        n += 1
        counts[f"reader:{v.reader}"] += 1
        counts[f"family:{family}"] += 1
        counts[f"status:{v.status}"] += 1
        if v.failure:
            path = save_reproducer(data, name, v.reader, v.failure)
            conn.send(("failure", {"reader": v.reader, "failure": v.failure, "path": str(path)}))
        else:
            sig = (v.reader, v.status, v.error_kind)
            if sig not in seen and len(corpus[family]) < 200:
                seen.add(sig)
                corpus[family].append((name, data))
        if time.monotonic() - last > 1.0:
            conn.send(("progress", dict(counts)))
            counts.clear()
            last = time.monotonic()
    conn.send(("progress", dict(counts)))
    conn.send(("done", None))


def in_process(seconds: float, seed: int, jobs: int) -> tuple[collections.Counter, list[dict]]:
    CRASH_DIR.mkdir(parents=True, exist_ok=True)
    ctx = mp.get_context("fork")
    totals: collections.Counter = collections.Counter()
    failures: list[dict] = []
    stop_at = time.time() + seconds
    live: dict[int, tuple] = {}
    gen = 0

    def start(slot: int) -> None:
        nonlocal gen
        gen += 1
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(child, seed * 1000 + gen, slot, stop_at))
        proc.start()
        child.close()
        live[slot] = (proc, parent, time.monotonic())

    for slot in range(jobs):
        start(slot)
    while live:
        for slot, (proc, conn, beat) in list(live.items()):
            done = False
            while conn.poll(0.2):
                try:
                    kind, payload = conn.recv()
                except EOFError:
                    break
                beat = time.monotonic()
                if kind == "progress":
                    totals.update(payload)
                elif kind == "failure":
                    failures.append(payload)
                    print(f"FAILURE {payload['reader']}: {payload['failure']} -> "
                          f"{payload['path']}", flush=True)
                elif kind == "done":
                    done = True
            live[slot] = (proc, conn, beat)
            if done:
                proc.join(10)
                del live[slot]
                continue
            hung = time.monotonic() - beat > HANG_S
            if proc.is_alive() and not hung:
                continue
            if hung:
                proc.kill()
            proc.join(10)
            current = CRASH_DIR / f".current-{slot}"
            raw = current.read_bytes() if current.exists() else b"?\n"
            name, _, data = raw.partition(b"\n")
            what = ("no progress for %d s (hang)" % HANG_S if hung
                    else f"fuzz child died (exit {proc.exitcode})")
            path = save_reproducer(data, name.decode(errors="replace"), "child", what)
            failures.append({"reader": "?", "failure": what, "path": str(path)})
            print(f"FAILURE {what} -> {path}", flush=True)
            del live[slot]
            if time.time() < stop_at - 5:
                start(slot)
    for slot in range(jobs):
        (CRASH_DIR / f".current-{slot}").unlink(missing_ok=True)
    return totals, failures


# -- phase 2: through a real WorkerPool ----------------------------------------------------------


def through_pool(seconds: float, seed: int) -> tuple[collections.Counter, list[dict]]:
    from bastion.readers.base import Limits, MiB
    from bastion.readers.detect import detect_bytes
    from bastion.readers.runtime.pool import Job, WorkerPool
    from tests import robust_fuzzlib as fl

    warnings.simplefilter("ignore")
    rng = random.Random(seed)
    seeds = fl.all_seeds()
    counts: collections.Counter = collections.Counter()
    failures: list[dict] = []
    results: dict[int, list] = collections.defaultdict(list)
    jobs: dict[int, tuple[str, bytes]] = {}
    limits = Limits(deadline_s=30.0, memory_bytes=1 << 30, max_output_bytes=8 * MiB,
                    max_chars=1 * MiB, max_pages=50)
    with tempfile.TemporaryDirectory(prefix="bastion-fuzzpool-") as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        pool = WorkerPool(2, limits, Path(tmp) / "pool", lambda r: results[r.job.id].append(r))
        end = time.monotonic() + seconds
        i = 0
        pids: set[int] = set()
        try:
            while time.monotonic() < end:
                family, name, data = rng.choice(seeds)
                data = fl.apply(data, fl.random_mutations(rng, family), rng.choice(seeds)[2])
                i += 1
                path = docs / f"{i}-{name}"
                path.write_bytes(data)
                jobs[i] = (name, data)
                pool.submit(Job(i, str(path), name, detect_bytes(data, name),
                                hashlib.sha256(data).hexdigest(), len(data), limits.deadline_s))
                pids.update(pool.pids())
                if i % 50 == 0:
                    pool.drain()
                    for p in docs.iterdir():
                        p.unlink()
            pool.drain()
        finally:
            pool.close()
        time.sleep(0.2)
        leaked = [p for p in pids if alive(p)]
        if leaked:
            failures.append({"reader": "pool", "failure": f"workers alive after close: {leaked}",
                             "path": ""})
    for job_id, (name, data) in jobs.items():
        got = results.get(job_id, [])
        counts["pool:jobs"] += 1
        if len(got) != 1 or got[0].status not in fl.STATUSES:
            what = f"{len(got)} JobResults ({[r.status for r in got]}) for one job"
            path = save_reproducer(data, name, "pool", what)
            failures.append({"reader": "pool", "failure": what, "path": str(path)})
        else:
            counts[f"pool:{got[0].status}"] += 1
            if got[0].error_kind in ("internal", "crash"):
                what = f"worker verdict {got[0].error_kind}: {got[0].error}"
                path = save_reproducer(data, name, "pool", what)
                failures.append({"reader": "pool", "failure": what, "path": str(path)})
    return counts, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="total time budget")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="in-process fuzz children")
    ap.add_argument("--pool-share", type=float, default=0.1,
                    help="share of the time spent through a real WorkerPool")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()
    t0 = time.monotonic()
    pool_s = args.seconds * args.pool_share
    totals, failures = in_process(args.seconds - pool_s, args.seed, max(1, args.jobs))
    pool_counts, pool_failures = (through_pool(pool_s, args.seed) if pool_s >= 1
                                  else (collections.Counter(), []))
    failures += pool_failures
    elapsed = time.monotonic() - t0
    readers = {k[7:]: v for k, v in sorted(totals.items()) if k.startswith("reader:")}
    families = {k[7:]: v for k, v in sorted(totals.items()) if k.startswith("family:")}
    statuses = {k[7:]: v for k, v in sorted(totals.items()) if k.startswith("status:")}
    total = sum(readers.values())
    print(f"fuzz: {total} in-process inputs + {pool_counts['pool:jobs']} through a WorkerPool "
          f"in {elapsed:.0f} s, {len(failures)} failure(s)")
    print("  iterations per reader (selected by the detected type; 'none' = no reader):")
    for name, n in readers.items():
        print(f"    {name:10} {n:9}")
    print("  iterations per seed family:", ", ".join(f"{k} {v}" for k, v in families.items()))
    print("  outcomes:", ", ".join(f"{k} {v}" for k, v in statuses.items()))
    print("  pool:", ", ".join(f"{k[5:]} {v}" for k, v in sorted(pool_counts.items())))
    for f in failures:
        print(f"  FAILURE {f['reader']}: {f['failure']} -> {f['path']}")
    if args.json:
        args.json.write_text(json.dumps({"seconds": round(elapsed), "inputs": total,
                                         "readers": readers, "families": families,
                                         "statuses": statuses, "pool": dict(pool_counts),
                                         "failures": failures}, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main())
