"""Detection + decoding cost, this tree against a baseline revision, side by side.

    python bench/textcodec.py [--baseline REV] [--rounds 3] [--small 20000] [--big-mb 100]

The baseline's ``readers/`` is taken with ``git archive REV`` (default: the merge base with
``main``) into a temporary directory; each measurement runs in a fresh interpreter whose
``sys.path`` starts with one tree or the other, and the two trees alternate round by round so
that drift on a shared machine hits both alike.  In-process, no worker pool or sandbox (their
cost is the same for both and is measured by ``bench/isolation.py``).

Workloads (generated deterministically under ``bench/results/textcodec/``, not committed):

* ``big-*``: one file of ``--big-mb`` MB: mostly-ASCII UTF-8 (a log), windows-1251 Russian, and
  UTF-8 with one invalid byte at the very end (the worst case: the whole file is checked as
  UTF-8, then as the detected code page).  Timed: the encoding choice alone over the whole
  file, and detection (walk head) + a full read under the default limits (16 Mi characters).
* ``small``: ``--small`` files of 1-8 KB, 70 % UTF-8/ASCII, 30 % legacy encodings (the texts of
  ``tests/samples/text``); ``small-utf8``: as many, UTF-8/ASCII only; ``small-legacy``: a
  quarter as many, legacy only.  Timed: ``detect_file`` on each file's head +
  ``read_document``.

Prints a table and writes ``bench/results/textcodec/results.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "textcodec"
SAMPLES = ROOT / "tests" / "samples" / "text"

LEGACY = {  # sample -> its codec (the text is re-encoded into small files of that codec)
    "windows-1251-russian.txt": "cp1251", "koi8-r-russian.txt": "koi8_r",
    "shift_jis-japanese.txt": "shift_jis", "euc-kr-korean.txt": "euc_kr",
    "big5-chinese.txt": "big5", "iso-8859-2-polish.txt": "iso8859_2",
    "windows-1250-czech.txt": "cp1250", "iso-8859-7-greek.txt": "iso8859_7",
    "windows-1252-german.txt": "cp1252", "windows-1255-hebrew.txt": "cp1255",
}

WORKER = r"""
import json, os, sys, time
tree, kind, target = sys.argv[1], sys.argv[2], sys.argv[3]
import importlib
sys.path.insert(0, tree)
# a revision before the one import name has the readers at the top (``readers``); the
# baseline's archive holds only readers/, so it is imported under its own name
PKG = "bastion.readers" if os.path.isdir(os.path.join(tree, "bastion")) else "readers"
def mod(name):
    return importlib.import_module(f"{PKG}.{name}")
Document, Limits = mod("base").Document, mod("base").Limits
HEAD_BYTES, detect_file = mod("detect").HEAD_BYTES, mod("detect").detect_file
read_document = mod("dispatch").read_document
LocalContext = mod("context").LocalContext

def choose(data):
    try:
        return mod("textcodec").choose(data).codec
    except ImportError:
        return mod("plaintext").choose_encoding(data)[0]

ctx = LocalContext(Limits())
cpu0, t0 = time.process_time(), time.perf_counter()
result = {}
if kind == "choose":
    data = open(target, "rb").read()
    cpu0, t0 = time.process_time(), time.perf_counter()
    result["codec"] = choose(data)
elif kind == "read":
    with open(target, "rb") as f:
        head = f.read(HEAD_BYTES)
    mime = detect_file(target, os.path.basename(target), head)
    data = open(target, "rb").read()
    out = read_document(Document(data, os.path.basename(target), mime), ctx)
    result.update(mime=mime, status=out.status, extractor=out.extractor, chars=len(out.text))
else:  # many small files
    names = sorted(os.listdir(target))
    statuses = {}
    cpu0, t0 = time.process_time(), time.perf_counter()
    for name in names:
        path = os.path.join(target, name)
        with open(path, "rb") as f:
            data = f.read()
        mime = detect_file(path, name, data[:HEAD_BYTES])
        out = read_document(Document(data, name, mime), ctx)
        key = (out.extractor or out.status).split(":")[-1]
        statuses[key] = statuses.get(key, 0) + 1
    result.update(files=len(names), extractors=statuses)
result.update(wall=time.perf_counter() - t0, cpu=time.process_time() - cpu0)
print(json.dumps(result))
"""


def make_workloads(small: int, big_mb: int) -> dict[str, Path]:
    OUT.mkdir(parents=True, exist_ok=True)
    texts = {name: (SAMPLES / name).read_bytes().decode(codec) for name, codec in LEGACY.items()}
    made: dict[str, Path] = {}
    size = big_mb * 1_000_000
    log = Path(OUT / f"big-utf8-log-{big_mb}mb.txt")
    if not log.exists():
        line = "2026-12-01T09:00:00Z INFO worker 3 served /api/items in 12 ms — café\n"
        log.write_bytes((line * (size // len(line.encode()) + 1)).encode()[:size].rsplit(
            b"\n", 1)[0] + b"\n")
    made["big-utf8"] = log
    legacy = Path(OUT / f"big-cp1251-{big_mb}mb.txt")
    if not legacy.exists():
        chunk = texts["windows-1251-russian.txt"].encode("cp1251")
        legacy.write_bytes((chunk * (size // len(chunk) + 1))[:size].rsplit(b"\n", 1)[0])
    made["big-cp1251"] = legacy
    bad = Path(OUT / f"big-utf8-bad-tail-{big_mb}mb.txt")
    if not bad.exists():
        bad.write_bytes(log.read_bytes() + b"tail \xe9 byte\n")
    made["big-utf8-bad-tail"] = bad
    for label, count, legacy_share in (("small", small, 0.3), ("small-utf8", small, 0.0),
                                       ("small-legacy", small // 4, 1.0)):
        many = OUT / f"{label}-{count}"
        if not many.is_dir():
            many.mkdir()
            _small_files(many, count, legacy_share, texts, random.Random(count))
        made[label] = many
    return made


def _small_files(into: Path, count: int, legacy_share: float, texts: dict[str, str],
                 rng: random.Random) -> None:
    pool = list(texts.items())
    ascii_words = ("request", "served", "worker", "items", "queue", "retry", "done")
    for i in range(count):
        n = rng.randint(1000, 8000)
        if rng.random() < legacy_share:
            name, text = pool[i % len(pool)]
            start = rng.randrange(0, max(1, len(text) - 200))
            body = (text[start:] + text) * (n // max(1, len(text)) + 1)
            data = body.encode(LEGACY[name], "replace")[:n]
            data = data[: data.rfind(b"\n") + 1] or data[: n // 2]
        elif rng.random() < 0.2:
            data = ("Grüße, naïve café — " * (n // 24)).encode("utf-8")
        else:
            data = " ".join(rng.choice(ascii_words) for _ in range(n // 7)).encode()
        (into / f"f{i:05d}.txt").write_bytes(data)


def run(tree: Path, kind: str, target: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", WORKER, str(tree), kind, str(target)],
                          capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=None,
                    help="git revision (default: the merge base with main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--small", type=int, default=20_000)
    ap.add_argument("--big-mb", type=int, default=100)
    args = ap.parse_args()
    rev = args.baseline or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                          capture_output=True, text=True,
                                          check=True).stdout.strip()
    work = make_workloads(args.small, args.big_mb)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        base.mkdir()
        archive = subprocess.run(["git", "archive", rev, "readers"], cwd=ROOT, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        trees = {"baseline": base, "this": ROOT}
        jobs = [(k, "choose", p) for k, p in work.items() if k.startswith("big")]
        jobs += [(k, "read", p) for k, p in work.items() if k.startswith("big")]
        jobs += [(k, "small", p) for k, p in work.items() if k.startswith("small")]
        results: dict[str, dict[str, list[dict]]] = {}
        for r in range(args.rounds):
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for label, kind, path in jobs:
                for tree in order:
                    res = run(trees[tree], kind, path)
                    results.setdefault(f"{label}/{kind}", {}).setdefault(tree, []).append(res)
                    print(f"round {r} {label}/{kind} {tree}: {res['wall']:.3f} s", flush=True)
    summary = {"baseline": rev, "rounds": args.rounds, "results": results}
    (OUT / "results.json").write_text(json.dumps(summary, indent=1, sort_keys=True))
    print(f"\nbaseline {rev[:10]} vs this tree, median of {args.rounds} rounds (wall s, cpu s)")
    print("| workload | baseline | this | ratio | this: outcome |")
    print("| --- | --- | --- | --- | --- |")
    for key, by_tree in results.items():
        med = {t: sorted(x["wall"] for x in v)[len(v) // 2] for t, v in by_tree.items()}
        cpu = {t: sorted(x["cpu"] for x in v)[len(v) // 2] for t, v in by_tree.items()}
        last = by_tree["this"][-1]
        what = {k: last[k] for k in ("codec", "extractor", "extractors", "status") if k in last}
        print(f"| {key} | {med['baseline']:.3f} ({cpu['baseline']:.3f}) | "
              f"{med['this']:.3f} ({cpu['this']:.3f}) | {med['this'] / med['baseline']:.2f}x | "
              f"{what} |")


if __name__ == "__main__":
    main()
