"""Whole sweeps of several source trees side by side: the peers corpus's images, clean English
pages, and thousands of small texts, at ``-j 2``, wall and CPU, with the texts compared.

    python bench/ocrsweep.py NAME=VENV_PYTHON ... [--rounds N] [--texts N] [--out FILE]

Each tree is named and given by its virtualenv's Python (``base=/tmp/base/.venv/bin/python``;
the tree's ``bastion`` script beside it runs the sweep).  The inputs, written once to a
temporary directory:

* ``images``: ``bench/.corpus/peers/image`` (bench/corpus.py builds it; ``--images DIR``);
* ``english``: tests/langpages.py's English text rendered at 300 dpi in three fonts, a full
  page of it, and ``examples/docs/scanned-note.png``;
* ``texts``: ``--texts`` files of 30 English words each (a fixed seed).

Then ``pages``: every English page and corpus image read by the image reader in one process
per tree (no pool, no sandbox; a first read loads the models), each page's least CPU of
``--repeat`` reads: the marginal cost of OCR per page, without what a worker pays once.

Every round runs every (input, tree) pair once, a fresh output directory each, the trees'
order rotating from round to round; no run starts while the load average is over
``--max-load`` (it waits).  CPU is user + system of ``bastion sweep`` and every process it
started (``os.wait4``).  Medians over the rounds are printed, with each tree's ratio to the
first one named, and whether each tree's texts are byte for byte the first tree's (by path).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORDS = ("the of and to in is that for it as was with be by on not he this are or his from "
         "at which but have an they you were her she there been one all we their has would "
         "when if so no will more out up into do any your what some can only other new "
         "library budget meeting review annual report number figure winter reading").split()


def english_pages(where: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import langpages as lp

    eng = lp.sample("eng")
    fonts = [lp.LIBERATION / "LiberationSerif-Regular.ttf", lp.DEJAVU / "DejaVuSans.ttf",
             lp.DEJAVU / "DejaVuSerif.ttf"]
    for n, font in enumerate(fonts):
        page = lp.Sample(eng.lang, eng.iso, eng.script, font, eng.text)
        (where / f"eng{n}.png").write_bytes(lp.render(page))
    full = lp.Sample(eng.lang, eng.iso, eng.script, fonts[0], "\n".join([eng.text] * 7))
    (where / "eng-a4.png").write_bytes(lp.render(full, points=11))
    shutil.copy(ROOT / "examples" / "docs" / "scanned-note.png", where / "scanned-note.png")


def small_texts(where: Path, count: int) -> None:
    rng = random.Random(34)
    for n in range(count):
        sub = where / f"d{n // 500:02d}"
        sub.mkdir(exist_ok=True)
        words = [rng.choice(WORDS) for _ in range(30)]
        (sub / f"t{n:05d}.txt").write_text(" ".join(words).capitalize() + ".\n")


PAGES = r'''
import json, sys, time, shutil
from pathlib import Path
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document
try:
    from bastion.readers.runtime.context import LocalContext
    from bastion.readers.runtime import toolset
    tools = {n: t.path for n, t in toolset.discover().items() if n in ("tesseract", "tessdata")}
except ImportError:  # a tree from before readers/runtime/ and the language packs
    from bastion.readers.context import LocalContext
    tools = {"tesseract": shutil.which("tesseract")}
spec = json.loads(sys.argv[1])
ctx = LocalContext(Limits(), tools, tmpdir=Path(spec["tmp"]))
def read(path):
    mime = {".png": "image/png", ".jpg": "image/jpeg"}[Path(path).suffix]
    return read_document(Document(Path(path).read_bytes(), Path(path).name, mime), ctx)
read(spec["warm"])  # the models load here
out = []
for path in spec["pages"]:
    times = []
    for _ in range(spec["repeat"]):
        t = time.process_time()
        got = read(path)
        times.append(time.process_time() - t)
    out.append({"page": Path(path).name, "cpu": min(times), "text": got.text})
print(json.dumps(out))
'''


def per_page(trees: list[tuple[str, str]], pages: list[Path], warm: Path, tmp: Path,
             rounds: int, repeat: int, max_load: float) -> dict:
    """Each page's OCR CPU in one process per tree (the image reader, no sandbox, the models
    loaded by a first read of ``warm``; the least of ``repeat`` reads), medians over rounds."""
    got: dict[str, list[list[dict]]] = {name: [] for name, _ in trees}
    (tmp / "scratch").mkdir(exist_ok=True)
    spec = {"pages": [str(p) for p in pages], "warm": str(warm), "repeat": repeat,
            "tmp": str(tmp / "scratch")}
    for r in range(rounds):
        for name, python in trees[r % len(trees):] + trees[:r % len(trees)]:
            wait_for_quiet(max_load)
            proc = subprocess.run([python, "-c", PAGES, json.dumps(spec)], cwd=tmp,
                                  capture_output=True, check=True,
                                  env={**os.environ, "OMP_THREAD_LIMIT": "1"})
            got[name].append(json.loads(proc.stdout))
    ref = trees[0][0]
    report: dict = {}
    print(f"\nper page, least CPU of {repeat} reads, median of {rounds} rounds "
          f"(load {os.getloadavg()[0]:.2f})")
    for k, page in enumerate(pages):
        row = {name: statistics.median(run[k]["cpu"] for run in got[name]) for name, _ in trees}
        same = {name: all(run[k]["text"] == got[ref][0][k]["text"] for run in got[name])
                for name, _ in trees}
        report[page.name] = {"cpu": row, "same_text": same}
        print(f"  {page.name[:34]:34} " + "  ".join(
            f"{name} {row[name]:.3f} s{'' if same[name] else ' (text differs)'}"
            for name, _ in trees))
    totals = {name: sum(report[p.name]["cpu"][name] for p in pages) for name, _ in trees}
    print("  total                              " + "  ".join(
        f"{name} {totals[name]:.3f} s ({totals[name] / totals[ref]:.3f}x)" for name, _ in trees))
    report["total"] = totals
    return report


def manifest(tmp: Path, name: str, root: Path) -> Path:
    path = tmp / f"{name}.yaml"
    path.write_text(f"version: 1\nroots:\n  - name: {name}\n    path: {root}\n"
                    "stages: [walk, extract]\n")
    return path


def sweep(python: str, manifest_path: Path, out: Path, jobs: int) -> tuple[float, float]:
    shutil.rmtree(out, ignore_errors=True)
    bastion = str(Path(python).parent / "bastion")
    start = time.monotonic()
    proc = subprocess.Popen([bastion, "sweep", str(manifest_path), "--out", str(out), "-j",
                             str(jobs), "-q"], cwd=tempfile.gettempdir(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        raise SystemExit(f"{bastion} sweep {manifest_path} failed: {err[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime


def texts(out: Path) -> dict[str, bytes]:
    """Each record's text by its path (b"" without one)."""
    got: dict[str, bytes] = {}
    for line in (out / "extract.jsonl").read_text().splitlines():
        rec = json.loads(line)
        text = rec.get("text")
        got[rec["path"]] = (out / text).read_bytes() if text else b""
    return got


def wait_for_quiet(max_load: float) -> float:
    while (load := os.getloadavg()[0]) > max_load:
        time.sleep(10)
    return load


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+", help="NAME=VENV_PYTHON, the first is the reference")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--texts", type=int, default=5000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--images", default=str(ROOT / "bench" / ".corpus" / "peers" / "image"))
    ap.add_argument("--only", help="comma-separated inputs (images, english, texts, pages)")
    ap.add_argument("--repeat", type=int, default=3, help="reads of each page (pages)")
    ap.add_argument("--max-load", type=float, default=3.0)
    ap.add_argument("--out")
    args = ap.parse_args()
    trees = [tuple(t.split("=", 1)) for t in args.trees]
    tmp = Path(tempfile.mkdtemp(prefix="ocrsweep-"))
    inputs: dict[str, Path] = {}
    if Path(args.images).is_dir():
        inputs["images"] = manifest(tmp, "images", Path(args.images))
    (tmp / "english").mkdir()
    english_pages(tmp / "english")
    inputs["english"] = manifest(tmp, "english", tmp / "english")
    (tmp / "texts").mkdir()
    small_texts(tmp / "texts", args.texts)
    inputs["texts"] = manifest(tmp, "texts", tmp / "texts")
    only = args.only.split(",") if args.only else ["images", "english", "texts", "pages"]
    inputs = {k: v for k, v in inputs.items() if k in only}
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        k: {name: [] for name, _ in trees} for k in inputs}
    same: dict[str, dict[str, bool]] = {k: {} for k in inputs}
    for r in range(args.rounds):
        order = trees[r % len(trees):] + trees[:r % len(trees)]
        for kind, man in inputs.items():
            got: dict[str, dict[str, bytes]] = {}
            for name, python in order:
                load = wait_for_quiet(args.max_load)
                out = tmp / f"out-{kind}-{name}"
                wall, cpu = sweep(python, man, out, args.jobs)
                runs[kind][name].append((wall, cpu, load))
                got[name] = texts(out)
                print(f"round {r + 1} {kind:8} {name:8} wall {wall:6.2f} s  cpu {cpu:6.2f} s"
                      f"  load {load:.2f}", flush=True)
            ref = got[trees[0][0]]
            for name, _ in trees:
                same[kind][name] = same[kind].get(name, True) and got[name] == ref
    report: dict = {}
    print(f"\nmedians of {args.rounds} rounds, -j {args.jobs} (ratios to {trees[0][0]})")
    for kind in inputs:
        report[kind] = {}
        ref_wall = statistics.median(w for w, _, _ in runs[kind][trees[0][0]])
        ref_cpu = statistics.median(c for _, c, _ in runs[kind][trees[0][0]])
        for name, _ in trees:
            wall = statistics.median(w for w, _, _ in runs[kind][name])
            cpu = statistics.median(c for _, c, _ in runs[kind][name])
            loads = [l for _, _, l in runs[kind][name]]
            report[kind][name] = {"wall": wall, "cpu": cpu, "runs": runs[kind][name],
                                  "same_text": same[kind][name]}
            print(f"{kind:8} {name:8} wall {wall:6.2f} s ({wall / ref_wall:5.2f}x)  cpu "
                  f"{cpu:6.2f} s ({cpu / ref_cpu:5.2f}x)  load {min(loads):.2f}-{max(loads):.2f}"
                  f"  same text: {same[kind][name]}")
    if "pages" in only:
        pages = sorted((tmp / "english").iterdir())
        if Path(args.images).is_dir():
            pages += sorted(Path(args.images).iterdir())
        report["pages"] = per_page(trees, pages, tmp / "english" / "eng0.png", tmp,
                                   args.rounds, args.repeat, args.max_load)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
