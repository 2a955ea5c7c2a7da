"""Resource ceilings, leaked processes and files written outside the output directory.

    python bench/robustness.py [--files 100000] [--jobs 2] [--skip-tree] [--json FILE]

1. **Parent RSS on a big tree**: builds ``bench/.corpus/tree-<N>`` (N tiny text files, 1,000
   per directory; kept for the next run), then runs ``bastion sweep`` on it twice in a child
   process with a fresh ``TMPDIR``: the first extract, then the no-op re-run.  The parent's peak
   RSS is its own ``VmHWM`` (read from ``/proc/self/status`` as it exits); ``os.wait4`` gives
   ``ru_maxrss``, the peak of the parent *and* the workers it reaped.
2. **Worker RSS on the hostile fixtures** (zip bomb, billion laughs, a million-run paragraph, a
   1,000-page PDF, a 64 MB CSV field, a 200 MB text file): each is read by a 1-worker
   ``WorkerPool`` with the default limits; a sampler thread reads the worker's ``VmHWM`` from
   ``/proc/<pid>/status`` every 5 ms until it is retired (and once more in the result callback),
   so the figure is the worker's own peak, not the parent's.
3. **Leaks**: processes alive after the runs that were not before and are ours (their command
   line or working directory is under this run's scratch directory), and
   files created outside the output directory: the fresh ``TMPDIR`` must be empty, the input
   tree and the repository (minus caches) unchanged, and new entries of ``/tmp`` are listed
   (other programs on the machine may add some: they are printed for inspection).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.procutil import alive  # noqa: E402
CORPUS = REPO / "bench" / ".corpus"

PARENT = r"""
import sys
from bastion.tasks.cli import main
rc = main()
with open("/proc/self/status") as f:
    hwm = [l.split()[1] for l in f if l.startswith("VmHWM")][0]
with open(__import__("os").environ["BASTION_BENCH_HWM"], "w") as f:
    f.write(hwm)
sys.exit(rc)
"""


def build_tree(n: int) -> Path:
    root = CORPUS / f"tree-{n}"
    done = root / ".complete"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    for i in range(n):
        d = root / f"d{i // 1000:04}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i % 1000:03}.txt").write_bytes(b"tiny file %d\n" % i)
    done.write_text("")
    return root


def pids() -> set[int]:
    return {int(p) for p in os.listdir("/proc") if p.isdigit()}


def cmdline(pid: int, limit: int = 120) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:limit]
    except OSError:
        return "?"


def cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def binds(pid: int) -> str:
    """The sources of the bind mounts in ``pid``'s mount namespace (a worker that gave up root
    works in its directory bound over /run/bastion-worker, its command line empty)."""
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return " ".join(line.split()[3] for line in f)
    except (OSError, IndexError):
        return ""


def tree_snapshot(top: Path, skip: tuple[str, ...] = ()) -> set[str]:
    out = set()
    for d, dirs, files in os.walk(top):
        dirs[:] = [x for x in dirs if not any(s in os.path.join(d, x) for s in skip)]
        for name in files:
            p = os.path.join(d, name)
            if not any(s in p for s in skip):
                out.add(p)
    return out


def run_parent(argv: list[str], tmpdir: Path) -> dict:
    hwm_file = tmpdir.parent / f"hwm-{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "TMPDIR": str(tmpdir), "BASTION_BENCH_HWM": str(hwm_file),
           "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", PARENT, *argv], cwd=str(REPO), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    hwm = int(hwm_file.read_text()) if hwm_file.exists() else -1
    hwm_file.unlink(missing_ok=True)
    return {"rc": proc.returncode, "seconds": round(time.monotonic() - t0, 1),
            "parent_vmhwm_mib": round(hwm / 1024, 1),
            "maxrss_parent_and_workers_mib": round(usage.ru_maxrss / 1024, 1),
            "stderr": err.decode(errors="replace").strip()[-300:]}


# -- workers on the hostile fixtures ---------------------------------------------------------


def hostile_fixtures(d: Path) -> dict[str, tuple[Path, str]]:
    from tests import officegen as og
    from tests import pdfgen as pg

    d.mkdir(parents=True, exist_ok=True)
    made: dict[str, tuple[Path, str]] = {}
    p = d / "bomb.docx"
    og.docx_bomb(str(p), 1 << 30)  # 1 GiB of XML inflated from a few MB
    made["zip bomb (1 GiB document.xml)"] = (p, "docx")
    laughs = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
              + "".join(f'<!ENTITY lol{i} "{("&lol%s;" % (i - 1 if i > 1 else "")) * 10}">'
                        for i in range(1, 10))
              + ']>')
    p = d / "laughs.docx"
    p.write_bytes(og.zip_bytes({
        "[Content_Types].xml": og.content_types("application/vnd.openxmlformats-"
                                                "officedocument.wordprocessingml.document.main+xml"),
        "_rels/.rels": og.rels(("rId1", "officeDocument", "word/document.xml")),
        "word/document.xml": laughs + f"<w:document {og.W_ROOT}><w:body>"
                             + og.w_p("&lol9;") + "</w:body></w:document>"}))
    made["billion laughs (DOCX)"] = (p, "docx")
    p = d / "laughs.xml"
    p.write_text(laughs + "<lolz>&lol9;</lolz>")
    made["billion laughs (.xml, text reader)"] = (p, "xml")
    p = d / "runs.docx"
    p.write_bytes(og.million_runs())
    made["million-run paragraph (DOCX)"] = (p, "docx")
    p = d / "pages.pdf"
    p.write_bytes(pg.make_many_pages(1000))
    made["1,000-page PDF"] = (p, "pdf")
    p = d / "field.csv"
    with open(p, "wb") as f:
        f.write(b'a,b\n1,"')
        f.write(b"x" * (64 << 20))
        f.write(b'"\n')
    made["64 MB CSV field"] = (p, "csv")
    p = d / "big.txt"
    with open(p, "wb") as f:
        line = b"plain text line of a big file\n"
        for _ in range((200 << 20) // len(line)):
            f.write(line)
    made["200 MB text file"] = (p, "txt")
    return made


def worker_peaks(d: Path, no_external: bool) -> list[dict]:
    from bastion.readers.base import Limits
    from bastion.readers.detect import detect_bytes
    from bastion.readers.runtime.pool import Job, WorkerPool
    from bastion.readers.runtime.toolset import discover

    fixtures = hostile_fixtures(d / "fixtures")
    limits = Limits()
    tools = {} if no_external else {t.name: t.path for t in discover(False).values()}
    rows = []
    for label, (path, _) in fixtures.items():
        data = path.read_bytes()
        mime = detect_bytes(data, path.name)
        peak = [0]
        got = []
        stop = threading.Event()
        pool_ref: list = []

        def hwm(pid: int) -> int:
            try:
                with open(f"/proc/{pid}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM"):
                            return int(line.split()[1])
            except OSError:
                pass
            return 0

        def sample() -> None:
            while not stop.is_set():
                if pool_ref:
                    for pid in list(pool_ref[0].pids()):
                        peak[0] = max(peak[0], hwm(pid))
                time.sleep(0.005)

        def callback(result) -> None:
            for pid in pool_ref[0].pids():
                peak[0] = max(peak[0], hwm(pid))
            got.append(result)

        with tempfile.TemporaryDirectory(prefix="bastion-bench-") as tmp:
            pool = WorkerPool(1, limits, Path(tmp), callback)
            pool_ref.append(pool)
            th = threading.Thread(target=sample, daemon=True)
            th.start()
            t0 = time.monotonic()
            reader_tools = {k: v for k, v in tools.items()} if mime == "application/pdf" else {}
            try:
                pool.submit(Job(1, str(path), path.name, mime, hashlib.sha256(data).hexdigest(),
                                len(data), limits.tool_deadline_s if reader_tools
                                else limits.deadline_s, reader_tools))
                pool.drain()
            finally:
                stop.set()
                th.join()
                pool.close()
            del data
        r = got[0] if got else None
        rows.append({"fixture": label, "bytes": path.stat().st_size, "mime": mime,
                     "results": len(got), "status": r.status if r else None,
                     "error_kind": r.error_kind if r else None, "limit": r.limit if r else None,
                     "extractor": r.extractor if r else None,
                     "worker_vmhwm_mib": round(peak[0] / 1024, 1),
                     "seconds": round(time.monotonic() - t0, 1)})
        print(f"  {label:38} {rows[-1]['status']}/{rows[-1]['error_kind'] or rows[-1]['limit']}"
              f"  worker peak {rows[-1]['worker_vmhwm_mib']} MiB  {rows[-1]['seconds']} s",
              flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--skip-tree", action="store_true", help="only the hostile fixtures")
    ap.add_argument("--no-external", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    report: dict = {}
    work = Path(tempfile.mkdtemp(prefix="bastion-robust-"))
    fresh_tmp = work / "tmpdir"
    fresh_tmp.mkdir()
    before_pids = pids()
    before_tmp = {e for e in os.listdir("/tmp")}
    repo_skip = ("/.corpus", "__pycache__", "/.pytest_cache", "/.hypothesis", "/.git/",
                 "/.benchmarks", "/bench/results")
    before_repo = tree_snapshot(REPO, repo_skip)

    if not args.skip_tree:
        tree = build_tree(args.files)
        before_tree = {p: os.stat(p).st_mtime_ns for p in tree_snapshot(tree)}
        m = work / "m.yaml"
        m.write_text(f"version: 1\nroots:\n  - name: t\n    path: {tree}\n"
                     "stages: [walk, extract]\n")
        out = work / "out"
        argv = ["sweep", str(m), "--out", str(out), "-q", "-j", str(args.jobs)]
        if args.no_external:
            argv.append("--no-external")
        print(f"tree of {args.files} files: first sweep …", flush=True)
        first = run_parent(argv, fresh_tmp)
        print(f"  {first}", flush=True)
        print("  no-op sweep …", flush=True)
        noop = run_parent(argv, fresh_tmp)
        print(f"  {noop}", flush=True)
        recs = sum(1 for _ in open(out / "extract.jsonl", "rb"))
        report["tree"] = {"files": args.files, "first": first, "noop": noop,
                          "records": recs}
        report["tree_unchanged"] = before_tree == {p: os.stat(p).st_mtime_ns
                                                   for p in tree_snapshot(tree)}
        shutil.rmtree(out, ignore_errors=True)

    print("workers on the hostile fixtures:", flush=True)
    old_tmp = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(fresh_tmp)
    tempfile.tempdir = None
    try:
        report["workers"] = worker_peaks(work, args.no_external)
    finally:
        if old_tmp is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_tmp
        tempfile.tempdir = None

    time.sleep(0.5)
    # ours: a worker (or its keeper) works in its directory under `work`, bound there in its
    # mount namespace when it gave up root; a tool runs in a scratch directory there (other
    # programs on the machine are not counted)
    leaked = [p for p in pids() - before_pids if alive(p) and p != os.getpid()
              and (str(work) in cmdline(p, 4096) or str(work) in cwd(p)
                   or str(work) in binds(p))]
    report["processes_leaked"] = [{"pid": p, "cmd": cmdline(p)} for p in leaked]
    tmp_left = tree_snapshot(fresh_tmp)
    report["files_in_fresh_tmpdir"] = sorted(tmp_left)
    report["repo_files_added_or_removed"] = sorted(tree_snapshot(REPO, repo_skip)
                                                   ^ before_repo)
    report["new_tmp_entries"] = sorted({e for e in os.listdir("/tmp")} - before_tmp
                                       - {work.name})
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({k: v for k, v in report.items() if k != "workers"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    bad = report["processes_leaked"] or tmp_left or report["repo_files_added_or_removed"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
