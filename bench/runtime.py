"""The reader runtime's cost per document, two source trees side by side: the pool alone, and whole sweeps.

    python bench/runtime.py --base /tmp/base [--n 2000] [--rounds 3] [--workers 1]
    python bench/runtime.py --base /tmp/base --sweep [--n 3000] [--rounds 3]
    python bench/runtime.py --images [--n 300]

``--base`` is another checkout of bastion (e.g. ``git -C /work/main archive HEAD | tar -x -C
/tmp/base``); each side runs in a subprocess of its own, from its own tree, with this
interpreter, alternated round by round.

The pool (default): for each kind of small document — plain texts (reader ``text``), HTML
pages (``markup``), e-mails (``mail``), and plain texts with no reader named (read one
document to a process on either side) — a :class:`WorkerPool` of ``--workers`` reads
``n // 10`` and then ``n`` documents; the cost of one document is the difference over the
difference, so the workers' start cancels out: wall time, the parent's CPU, and the CPU of
every process under it (the workers and what they forked, counted once reaped).  The row
``in-proc`` reads the same documents, already in memory, in one process of this tree: no
isolation, no file (``read_document``, hashing each, encoding its text): the readers' own cost.

``--sweep``: ``bastion sweep -j 2`` of a fresh output over ``n`` small texts, ``n`` HTML
pages and ``n`` e-mails (each tree its own sweep), and over one file; wall time and the CPU
of the sweep and everything under it.

``--images``: what a document's process costs against the size of the image it is forked
from: a process of this tree loads what a zygote loads (the runtime, the language model) and
then more and more reader families (HTML and e-mail; PDF with PDFium and pdfplumber; OCR with
tesseract's warm engines), and at each step forks ``n`` children that exit at once, then ``n``
that read one small text first; its anonymous memory beside the CPU of each (fork, the child's
page faults, exit and reap).

Prints the medians of the rounds and the ratio of this tree to the base.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent

KINDS = {  # kind -> (extension, MIME type, reader named in the job)
    "text": (".txt", "text/plain", "text"),
    "html": (".html", "text/html", "markup"),
    "mail": (".eml", "message/rfc822", "mail"),
    "text, no reader": (".txt", "text/plain", None),
}

WORDS = ("apple river stone paper light window garden music table letter winter summer "
         "forest number market silver bridge morning history doctor").split()


def text(i: int) -> bytes:
    words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(30))
    return f"Note {i}\n{words}\n".encode()


def html(i: int) -> bytes:
    return (f"<!doctype html><html><head><title>Page {i}</title></head><body><h1>Heading "
            f"{i}</h1><ul><li>{WORDS[i % 20]}</li><li>{WORDS[(i + 1) % 20]}</li></ul><p>"
            f"{' '.join(WORDS[(i + k) % 20] for k in range(25))}</p></body></html>\n").encode()


def mail(i: int) -> bytes:
    return (f"From: Sender {i} <sender{i}@example.org>\r\nTo: someone@example.org\r\n"
            f"Subject: Message {i} about {WORDS[i % 20]}\r\nDate: Mon, 1 Jun 2026 10:00:00 "
            f"+0000\r\nMessage-ID: <{i}@example.org>\r\nContent-Type: text/plain; "
            f"charset=utf-8\r\n\r\n{' '.join(WORDS[(i + k) % 20] for k in range(30))}\r\n"
            ).encode()


MAKERS = {".txt": text, ".html": html, ".eml": mail}


def make_tree(root: Path, ext: str, n: int) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        d = root / f"d{i // 100:03d}"
        d.mkdir(exist_ok=True)
        p = d / f"doc{i:05d}{ext}"
        p.write_bytes(MAKERS[ext](i))
        paths.append(p)
    return paths


# -- the pool, in a subprocess of one tree ------------------------------------------------------

POOL = r"""
import hashlib, json, os, sys, time
from pathlib import Path
from bastion.readers.base import Limits
from bastion.readers.runtime.pool import Job, WorkerPool
files, mime, reader, workers, tmp = json.loads(sys.argv[1])
jobs = []
for i, f in enumerate(files):
    data = Path(f).read_bytes()
    jobs.append(Job(i, f, Path(f).name, mime, hashlib.sha256(data).hexdigest(), len(data),
                    60.0, reader=reader))
done = []
def collect(r):
    done.append(r.status)
t0, c0 = time.perf_counter(), os.times()
pool = WorkerPool(workers, Limits(), Path(tmp), collect)
pool.warm()
for job in jobs:
    pool.submit(job)
pool.drain()
pool.close()
t1, c1 = time.perf_counter(), os.times()
assert done == ["ok"] * len(jobs), sorted(set(done))
print(json.dumps({"wall": t1 - t0, "parent": c1.user - c0.user + c1.system - c0.system,
                  "children": c1.children_user - c0.children_user
                              + c1.children_system - c0.children_system}))
"""


# the same documents read in one process, no isolation at all: the floor the pool is over
INPROC = r"""
import hashlib, json, os, sys, time
from pathlib import Path
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import BUILTIN, read_document
from bastion.readers.runtime.context import LocalContext
files, mime, reader, workers, tmp = json.loads(sys.argv[1])
chosen = BUILTIN.by_name(reader) if reader else None
ctx = LocalContext(Limits(), {}, Path(tmp))
read_document(Document(Path(files[0]).read_bytes(), "x", mime), ctx, chosen)  # imports
docs = [(Path(f).name, Path(f).read_bytes()) for f in files]
t0, c0 = time.perf_counter(), os.times()
for name, data in docs:
    hashlib.sha256(data).hexdigest()
    out = read_document(Document(data, name, mime), ctx, chosen)
    assert out.status == "ok", out
    out.text.encode()
t1, c1 = time.perf_counter(), os.times()
print(json.dumps({"wall": t1 - t0, "parent": c1.user - c0.user + c1.system - c0.system,
                  "children": 0.0}))
"""


def pool_run(tree: Path, files: list[Path], mime: str, reader: str | None, workers: int,
             code: str = POOL) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        arg = json.dumps([[str(f) for f in files], mime, reader, workers, tmp])
        out = subprocess.run([sys.executable, "-c", code, arg], cwd=tree, capture_output=True,
                             text=True, timeout=3600)
    if out.returncode:
        sys.exit(f"{tree}: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def pools(trees: dict[str, Path], n: int, rounds: int, workers: int, work: Path) -> None:
    files = {ext: make_tree(work / ext.strip("."), ext, n) for ext in MAKERS}
    small = max(1, n // 10)
    rows: dict[tuple[str, str], list[dict]] = {}
    for _ in range(rounds):
        for kind, (ext, mime, reader) in KINDS.items():
            for side, tree in [*trees.items(), ("in-process", HERE)]:
                code = INPROC if side == "in-process" else POOL
                a = pool_run(tree, files[ext][:small], mime, reader, workers, code)
                b = pool_run(tree, files[ext], mime, reader, workers, code)
                rows.setdefault((kind, side), []).append(
                    {k: (b[k] - a[k]) / (n - small) * 1000 for k in a})
    print(f"per document, ms (median of {rounds}; {workers} worker(s); ({n} - {small}) "
          f"documents' difference; load {os.getloadavg()[0]:.1f})")
    print(f"{'kind':18s} {'side':6s} {'wall':>8s} {'parent CPU':>11s} {'workers CPU':>12s} "
          f"{'CPU total':>10s}")
    for kind in KINDS:
        med = {}
        for side in [*trees, "in-process"]:
            got = rows[(kind, side)]
            med[side] = {k: statistics.median(r[k] for r in got) for k in got[0]}
            m = med[side]
            print(f"{kind:18s} {side[:6]:6s} {m['wall']:8.3f} {m['parent']:11.3f} "
                  f"{m['children']:12.3f} {m['parent'] + m['children']:10.3f}")
        if "base" in med and "this" in med:
            b, t = med["base"], med["this"]
            print(f"{'':18s} {'ratio':6s} {t['wall'] / b['wall']:8.2f} "
                  f"{'':11s} {'':12s} "
                  f"{(t['parent'] + t['children']) / (b['parent'] + b['children']):10.2f}")


# -- the image a process is forked from ---------------------------------------------------------

IMAGES = r"""
import json, os, shutil, sys, time, gc
from pathlib import Path
from bastion.readers.base import Document, Limits
from bastion.readers.runtime import workermain, batch, context, verdict, zygote, sandbox
from bastion.readers.runtime.context import LocalContext
from bastion.readers.dispatch import Registry, read_document
from bastion.readers.text import langid
n, tmp = int(sys.argv[1]), Path(sys.argv[2])
limits, registry = Limits(), Registry()
langid.map_model()
langid.preload()
doc = Document(b"Note 1\napple river stone paper light window garden music table letter\n",
               "a.txt", "text/plain")
text = registry.by_name("text")
tesseract = shutil.which("tesseract")
steps = [("zygote + text", {"reader": "text"}), ("+ HTML, e-mail", {"reader": "mail"}),
         ("+ PDF", {"reader": "pdf"}),
         ("+ OCR (warm tesseract)", {"reader": "ocr", "tools": {"tesseract": tesseract}}
          if tesseract else None)]
out = []
for label, spec in steps:
    if spec is None:
        continue
    workermain.prepare({"mime": None, "tools": {}, **spec}, limits, tmp, registry)
    read_document(doc, LocalContext(limits, {}, tmp), text)
    gc.freeze()
    with open("/proc/self/status") as f:
        anon = next(int(l.split()[1]) for l in f if l.startswith("RssAnon")) / 1024
    row = {"image": label, "anon_mib": anon}
    for mode in ("exit", "read"):
        c0, t0 = os.times(), time.perf_counter()
        for _ in range(n):
            pid = os.fork()
            if pid == 0:
                if mode == "read":
                    read_document(doc, LocalContext(limits, {}, tmp), text)
                os._exit(0)
            os.waitpid(pid, 0)
        c1, t1 = os.times(), time.perf_counter()
        cpu = (c1.user - c0.user + c1.system - c0.system + c1.children_user - c0.children_user
               + c1.children_system - c0.children_system)
        row[mode] = cpu / n * 1000
        row[mode + "_wall"] = (t1 - t0) / n * 1000
    out.append(row)
print(json.dumps(out))
"""


def images(n: int, rounds: int) -> None:
    runs = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, "-c", IMAGES, str(n), tmp], cwd=HERE,
                                  capture_output=True, text=True, timeout=3600)
        if done.returncode:
            sys.exit(done.stderr[-2000:])
        runs.append(json.loads(done.stdout))
    print(f"a document's process against its image: CPU per process, ms (median of {rounds} "
          f"runs of {n}; load {os.getloadavg()[0]:.1f})")
    print(f"{'image':24s} {'anon MiB':>9s} {'fork+exit':>10s} {'fork+read+exit':>15s}")
    for i, row in enumerate(runs[0]):
        med = {k: statistics.median(r[i][k] for r in runs) for k in row if k != "image"}
        print(f"{row['image']:24s} {med['anon_mib']:9.1f} {med['exit']:10.2f} {med['read']:15.2f}")


# -- whole sweeps ---------------------------------------------------------------------------------


def sweep_run(tree: Path, root: Path, work: Path) -> dict:
    manifest = work / f"m-{root.name}.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n")
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    before = os.times()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bastion", "sweep", str(manifest), "--out",
                           str(out), "-q", "-j", "2", "--no-external"], cwd=tree,
                          capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    after = os.times()
    if done.returncode not in (0, 2):
        sys.exit(f"{tree}: sweep failed ({done.returncode}): {done.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "cpu": after.children_user - before.children_user
            + after.children_system - before.children_system}


def sweeps(trees: dict[str, Path], n: int, rounds: int, work: Path) -> None:
    roots = {f"{n} {ext.strip('.')}": work / f"sweep-{ext.strip('.')}" for ext in MAKERS}
    for (label, root), ext in zip(roots.items(), MAKERS):
        make_tree(root, ext, n)
    one = work / "sweep-one"
    make_tree(one, ".txt", 1)
    roots["one file"] = one
    rows: dict[tuple[str, str], list[dict]] = {}
    for _ in range(rounds):
        for label, root in roots.items():
            for side, tree in trees.items():
                rows.setdefault((label, side), []).append(sweep_run(tree, root, work))
    print(f"bastion sweep -j 2, fresh output, --no-external (median of {rounds}; load "
          f"{os.getloadavg()[0]:.1f})")
    print(f"{'tree':12s} {'side':6s} {'wall s':>8s} {'CPU s':>8s}")
    for label in roots:
        med = {}
        for side in trees:
            got = rows[(label, side)]
            med[side] = {k: statistics.median(r[k] for r in got) for k in got[0]}
            print(f"{label:12s} {side:6s} {med[side]['wall']:8.2f} {med[side]['cpu']:8.2f}")
        if "base" in med:
            print(f"{'':12s} {'ratio':6s} {med['this']['wall'] / med['base']['wall']:8.2f} "
                  f"{med['this']['cpu'] / med['base']['cpu']:8.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", type=Path, help="another checkout of bastion to compare with")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--sweep", action="store_true", help="whole sweeps instead of the pool")
    ap.add_argument("--images", action="store_true",
                    help="a document's process against the size of the image it is forked from")
    args = ap.parse_args()
    if args.images:
        images(args.n if args.n != 2000 else 300, args.rounds)
        return
    trees = {"this": HERE}
    if args.base is not None:
        trees = {"base": args.base.resolve(), "this": HERE}
    with tempfile.TemporaryDirectory(prefix="bastion-runtime-") as tmp:
        if args.sweep:
            sweeps(trees, args.n, args.rounds, Path(tmp))
        else:
            pools(trees, args.n, args.rounds, args.workers, Path(tmp))


if __name__ == "__main__":
    main()
