"""The cost of OCR in the page's language: English pages on two source trees side by side, and
each language's pages with ``auto`` against the pack given outright and against ``eng``.

    python bench/ocrlang.py --base /path/to/base/venv/python [--rounds N] [--out FILE]

The pages are tests/langpages.py's, rendered once to a temporary directory (PNG, 300 dpi),
English in three fonts and as a full page, with the English scan of tests/samples/pdf
(ocrmypdf's ``linn`` scan, through the PDF reader).  Each measurement is one child process per tree and setting, started
by that tree's Python (``--base``: the base commit's virtualenv; this tree's otherwise), which
reads every page through the image reader (``read_document``) with the tools the pipeline
hands a worker: the warm engine on, no OCR memo.  A first read of another page loads the
models (eng, osd, the language identifier), so the per-page figures are the steady state;
the child's whole CPU (user + system, ``os.wait4``) is reported beside them, with the load
(``os.getloadavg``).  Rounds alternate the trees' order; the medians are quoted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"

CHILD = r'''
import json, sys, time
from pathlib import Path
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document, select
from bastion.readers.runtime.context import LocalContext
from bastion.readers.runtime import toolset
spec = json.loads(sys.argv[1])
tools = {n: t.path for n, t in toolset.discover().items() if n in ("tesseract", "tessdata")}
limits = Limits(**({"ocr_languages": tuple(spec["languages"])} if spec["languages"] else {}))
ctx = LocalContext(limits, tools, tmpdir=Path(spec["tmp"]))
def read(path):
    name, mime = ("doc.pdf", "application/pdf") if path.endswith(".pdf") else ("page.png",
                                                                            "image/png")
    return read_document(Document(Path(path).read_bytes(), name, mime), ctx, select(mime, name))
read(spec["warm"])  # the models load here
out = []
for path in spec["pages"]:
    times = []
    for _ in range(spec["repeat"]):
        t = time.process_time()
        got = read(path)
        times.append(time.process_time() - t)
    out.append({"page": path, "cpu": min(times), "text": got.text,
                "packs": (list(got.result.ocr_languages) if hasattr(got, "result")
                          else got.meta.get("ocr_languages"))})
print(json.dumps(out))
'''


def run(python: str, spec: dict) -> tuple[list[dict], float, float]:
    """One child: its per-page results, its whole CPU seconds and wall seconds."""
    start = time.monotonic()
    proc = subprocess.Popen([python, "-c", CHILD, json.dumps(spec)], stdout=subprocess.PIPE,
                            cwd=spec["tmp"],  # not a source tree: its package would shadow
                            env={**os.environ, "OMP_THREAD_LIMIT": "1"})
    data = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    if status != 0:
        raise SystemExit(f"child failed: {python} {spec}")
    return json.loads(data), usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="the base tree's Python")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--english-only", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args()
    sys.path.insert(0, str(TESTS))
    import langpages as lp

    tmp = Path(tempfile.mkdtemp(prefix="ocrlang-bench-"))
    pages: dict[str, str] = {}
    fonts = [lp.LIBERATION / "LiberationSerif-Regular.ttf", lp.DEJAVU / "DejaVuSans.ttf",
             lp.DEJAVU / "DejaVuSerif.ttf"]
    eng = lp.sample("eng")
    for n, font in enumerate(fonts):
        path = tmp / f"eng{n}.png"
        path.write_bytes(lp.render(lp.Sample(eng.lang, eng.iso, eng.script, font, eng.text)))
        pages[f"eng{n}"] = str(path)
    for s in lp.SAMPLES:
        if s.lang != "eng":
            path = tmp / f"{s.lang}.png"
            path.write_bytes(lp.render(s))
            pages[s.lang] = str(path)
    full = lp.Sample(eng.lang, eng.iso, eng.script, fonts[0], "\n".join([eng.text] * 7))
    (tmp / "eng-a4.png").write_bytes(lp.render(full, points=11))
    pages["eng-a4"] = str(tmp / "eng-a4.png")
    for scan in sorted((HERE.parent / "examples" / "docs").glob("*.png")) + [
            HERE.parent / "tests" / "samples" / "pdf" / "ocrmypdf-linn-scan.pdf"]:
        if scan.exists():
            pages[f"eng-{scan.name}"] = str(scan)
    warm = tmp / "warm.png"
    warm.write_bytes(lp.render(eng, points=10))
    (tmp / "scratch").mkdir()
    english = [pages[k] for k in pages if k.startswith("eng")]
    base_spec = dict(pages=english, warm=str(warm), repeat=args.repeat, tmp=str(tmp / "scratch"),
                     languages=None)
    report: dict = {"load_before": os.getloadavg(), "rounds": []}
    for r in range(args.rounds):
        order = [("base", args.base), ("new", sys.executable)]
        if r % 2:
            order.reverse()
        got = {}
        for name, python in order:
            got[name] = run(python, base_spec)
        report["rounds"].append({
            name: {"page_cpu": sum(p["cpu"] for p in res), "process_cpu": cpu, "wall": wall,
                   "pages": [p["cpu"] for p in res], "texts": [p["text"] for p in res]}
            for name, (res, cpu, wall) in got.items()})
    per = {name: statistics.median(r[name]["page_cpu"] for r in report["rounds"])
           for name in ("base", "new")}
    proc = {name: statistics.median(r[name]["process_cpu"] for r in report["rounds"])
            for name in ("base", "new")}
    same = all(r["base"]["texts"] == r["new"]["texts"] for r in report["rounds"])
    print("English pages:", ", ".join(Path(p).name for p in english))
    print(f"English, {len(english)} pages: OCR CPU per round base {per['base']:.3f} s, "
          f"new {per['new']:.3f} s ({per['new'] / per['base'] - 1:+.1%}); whole child "
          f"{proc['base']:.2f} s vs {proc['new']:.2f} s; same text: {same}")
    report["english"] = {"page_cpu": per, "process_cpu": proc, "same_text": same}
    for k, path in enumerate(english):
        b, n = (statistics.median(r[name]["pages"][k] for r in report["rounds"])
                for name in ("base", "new"))
        print(f"  {Path(path).name:28} base {b:.3f} s  new {n:.3f} s  ({n / b - 1:+.1%})")

    langs: dict[str, dict] = {}
    for s in lp.SAMPLES:
        if s.lang == "eng" or args.english_only:
            continue
        row = {}
        for setting, languages in (("auto", None), ("given", [s.lang]), ("eng", ["eng"])):
            spec = {**base_spec, "pages": [pages[s.lang]], "languages": languages}
            cpus, recalls = [], []
            for _ in range(args.rounds):
                res, _, _ = run(sys.executable, spec)
                cpus.append(res[0]["cpu"])
                recalls.append(lp.recall(s.text, res[0]["text"], s.script))
            row[setting] = {"cpu": statistics.median(cpus), "recall": min(recalls)}
        langs[s.lang] = row
        print(f"{s.lang:8} auto {row['auto']['cpu']:.2f} s (recall {row['auto']['recall']:.2f})"
              f"  {s.lang} given {row['given']['cpu']:.2f} s ({row['given']['recall']:.2f})"
              f"  eng {row['eng']['cpu']:.2f} s ({row['eng']['recall']:.2f})")
    report["languages"] = langs
    report["load_after"] = os.getloadavg()
    print(f"load average before {report['load_before'][0]:.2f}, after "
          f"{report['load_after'][0]:.2f}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
