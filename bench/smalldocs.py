"""Small documents against Kreuzberg's batch API, side by side in one run (issue 40's table).

    python bench/smalldocs.py [--rounds 3] [--bastion NAME=TREE …] [--trees texts,html,mail,one,peers]

Five trees, each swept by ``bastion sweep -j 2`` into a fresh output and read by Kreuzberg's
batch API (``batch_extract_files_sync`` of every file in one call, its result cache off:
``ExtractionConfig(use_cache=False)`` and an empty ``KREUZBERG_CACHE_DIR`` per run):

* ``texts``: 20,000 texts of 30 English words, 100 per directory in 200 directories;
* ``html``: 3,000 small HTML pages (a title, an h1, a three-item list, a paragraph);
* ``mail``: 3,000 small e-mails, one per file in a maildir's ``cur/`` folders (named
  ``….eml``: Kreuzberg chooses its reader by the extension and refuses maildir names);
* ``one``: a one-file tree (a run's start to its summary; ``--one-repeat`` runs a round);
* ``peers``: the held-out-style mixed corpus, every file of bench/.corpus/peers in one flat
  directory (``python bench/corpus.py`` builds it), as bench/peers.py ``--whole`` runs it.

The generated trees are deterministic (fixed seeds) and kept under ``--work``.  Each round runs
every command once per tree, in an order rotated from round to round, so that drift on a shared
machine hits them alike.  Measured per process, through a small spawner (bench/peers.py's):
wall, CPU (user + system of the process tree, ``os.wait4``) and peak RSS (the largest single
process of the tree, ``ru_maxrss``).  Printed: medians, and the ratios of each bastion tree to
Kreuzberg and to the first ``--bastion`` tree, as medians of the per-round ratios.

``--bastion NAME=TREE`` adds another source tree (e.g. main's: ``git -C /work/main archive
HEAD | tar -x -C /tmp/base``), run with this interpreter from that tree (``python -m bastion``
with the tree as the working directory), byte-compiled first; ``this`` (this checkout) is
always measured.  After the rounds, every bastion tree's last output of each tree is compared
with this checkout's (``bastion compare``): the texts and records must be the same.  Kreuzberg
runs from ``bench/.venvs/kreuzberg`` (pinned :data:`KREUZBERG`, installed when missing), and
writes each text to a file as bastion does.  Results: ``--out`` (Markdown) and a JSON file
beside it.
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
sys.path.insert(0, str(HERE))

from benchlib import compile_trees  # noqa: E402
from peers import KREUZBERG, OFFLINE_ENV, VENVS, run_tree, start_spawner  # noqa: E402

TREE_VERSION = 1  # raise when a generated tree changes
TREES = ("texts", "html", "mail", "one", "peers")

WORDS = ("the of and to in is that for it as was with be by on not he this are or his from "
         "at which but have an they you were her she there been one all we their has would "
         "when if so no will more out up into do any your what some can only other new "
         "library budget meeting review annual report number figure winter reading").split()
NAMES = ("Ann Lee", "Bob Stone", "Carla Diaz", "Dmitri Volkov", "Eve Martin", "Femi Okafor",
         "Grace Hopper", "Hiro Tanaka", "Ines Costa", "Jan Novak")

KREUZBERG_DRIVER = r'''
import json, os, sys
from kreuzberg import ExtractionConfig, batch_extract_files_sync
listing, outdir = sys.argv[1], sys.argv[2]
files = open(listing, encoding="utf-8").read().splitlines()
results = batch_extract_files_sync(files, ExtractionConfig(use_cache=False))
failed = chars = 0
for i, res in enumerate(results):
    text = res.content
    if text.startswith("Error: ") and not res.metadata:  # how a batch reports a failure
        failed += 1
        text = ""
    chars += len(text)
    with open(os.path.join(outdir, f"{i}.txt"), "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
json.dump({"files": len(files), "failed": failed, "chars": chars},
          open(os.path.join(outdir, "status.json"), "w"))
'''


# -- the trees ----------------------------------------------------------------------------------

def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def make_texts(where: Path, count: int = 20_000, dirs: int = 200) -> None:
    rng = random.Random(40)
    per = count // dirs
    for n in range(count):
        sub = where / f"d{n // per:03d}"
        if n % per == 0:
            sub.mkdir(parents=True)
        (sub / f"t{n:05d}.txt").write_text(_sentence(rng, 30) + "\n")


def make_html(where: Path, count: int = 3_000) -> None:
    rng = random.Random(41)
    for n in range(count):
        sub = where / f"site{n // 500}"
        if n % 500 == 0:
            sub.mkdir(parents=True)
        title = _sentence(rng, 4)[:-1]
        items = "".join(f"<li>{_sentence(rng, 5)}</li>" for _ in range(3))
        page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{title}</title></head>\n<body>\n<h1>{title}</h1>\n<ul>{items}</ul>\n"
                f"<p>{_sentence(rng, 25)}</p>\n</body></html>\n")
        (sub / f"page{n:05d}.html").write_text(page)


def make_mail(where: Path, count: int = 3_000) -> None:
    rng = random.Random(42)
    t0 = 1_767_225_600  # 2026-01-01
    for n in range(count):
        sub = where / f"folder{n // 500}" / "cur"
        if n % 500 == 0:
            sub.mkdir(parents=True)
        sender, to = rng.sample(NAMES, 2)
        stamp = t0 + n * 3_600
        date = time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime(stamp))
        body = "\n".join(_sentence(rng, 12) for _ in range(3))
        mail = (f"From: {sender} <{sender.split()[0].lower()}@example.org>\n"
                f"To: {to} <{to.split()[0].lower()}@example.org>\n"
                f"Subject: {_sentence(rng, 5)[:-1]}\nDate: {date}\n"
                f"Message-ID: <{n}.{stamp}@example.org>\nMIME-Version: 1.0\n"
                "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
                f"{body}\n\n-- \n{sender}\n")
        (sub / f"{stamp}.M{n}P1.bench.eml").write_text(mail)


def make_one(where: Path) -> None:
    where.mkdir(parents=True)
    (where / "note.txt").write_text(_sentence(random.Random(43), 30) + "\n")


def make_peers(where: Path, corpus: Path) -> None:
    """Every file of the corpus's manifest in one flat directory (the names are unique)."""
    listing = corpus / "MANIFEST.tsv"
    if not listing.is_file():
        raise SystemExit(f"no corpus in {corpus}: run python bench/corpus.py first")
    where.mkdir(parents=True)
    for line in listing.read_text().splitlines()[1:]:
        rel = line.split("\t")[1]
        shutil.copy2(corpus / rel, where / Path(rel).name)


def tree(work: Path, name: str, corpus: Path) -> Path:
    """The generated tree ``name`` under ``work`` (made once; made again when its recipe or
    the corpus changed)."""
    where = work / "trees" / name
    mark = work / "trees" / f"{name}.made"
    recipe = f"{TREE_VERSION}"
    if name == "peers":
        recipe += f" {(corpus / 'MANIFEST.tsv').stat().st_mtime_ns}"
    if mark.is_file() and mark.read_text() == recipe and where.is_dir():
        return where
    shutil.rmtree(where, ignore_errors=True)
    mark.unlink(missing_ok=True)
    print(f"making the {name} tree …", file=sys.stderr)
    if name == "texts":
        make_texts(where)
    elif name == "html":
        make_html(where)
    elif name == "mail":
        make_mail(where)
    elif name == "one":
        make_one(where)
    else:
        make_peers(where, corpus)
    mark.write_text(recipe)
    return where


def files_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


# -- the commands -------------------------------------------------------------------------------

def kreuzberg_python() -> Path:
    """bench/.venvs/kreuzberg's Python with Kreuzberg :data:`KREUZBERG` (installed when
    missing or another version)."""
    py = VENVS / "kreuzberg" / "bin" / "python"
    probe = [str(py), "-c", "import kreuzberg, sys; sys.stdout.write(kreuzberg.__version__)"]
    if py.exists() and subprocess.run(probe, capture_output=True, text=True).stdout == KREUZBERG:
        return py
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENVS / "kreuzberg")], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"kreuzberg=={KREUZBERG}"],
                   check=True)
    return py


class Bastion:
    def __init__(self, name: str, source: Path, jobs: int) -> None:
        self.name, self.source, self.jobs = name, source, jobs
        self.kind = "bastion"

    def run(self, root: Path, work: Path) -> dict:
        manifest = work / f"{root.name}.yaml"
        manifest.write_text(f"version: 1\nroots:\n  - name: {root.name}\n    path: {root}\n"
                            "stages: [walk, extract]\nlimits:\n  max_file_bytes: 64MiB\n")
        out = work / f"out-{self.name}-{root.name}"
        shutil.rmtree(out, ignore_errors=True)
        m = run_tree([sys.executable, "-m", "bastion", "sweep", str(manifest), "--out", str(out),
                      "-q", "-j", str(self.jobs)], cwd=self.source)
        if m["rc"] not in (0, 2):
            raise SystemExit(f"{self.name} on {root.name} failed ({m['rc']}): "
                             f"{m['stderr'][-1500:]}")
        summary = json.loads((out / "extract.summary.json").read_text())
        m["records"] = summary["records"]
        m["ok"] = summary["counts"]["ok"]
        m["errors"] = summary["counts"]["error"]
        m["out"] = str(out)
        return m


class Kreuzberg:
    def __init__(self, python: Path) -> None:
        self.name, self.python, self.kind = "kreuzberg-batch", python, "peer"

    def run(self, root: Path, work: Path) -> dict:
        out = work / f"out-kreuzberg-{root.name}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        listing = work / f"{root.name}.files"
        if not listing.exists():
            listing.write_text("\n".join(str(f) for f in files_of(root)), encoding="utf-8")
        driver = work / "kreuzberg_driver.py"
        driver.write_text(KREUZBERG_DRIVER)
        env = dict(os.environ, **OFFLINE_ENV)
        with tempfile.TemporaryDirectory(prefix="kb-cache-") as cache:
            env["KREUZBERG_CACHE_DIR"] = cache  # an empty cache each run (and use_cache off)
            m = run_tree([str(self.python), str(driver), str(listing), str(out)], env=env,
                         cwd=work)
        if m["rc"] != 0:
            raise SystemExit(f"kreuzberg on {root.name} failed ({m['rc']}): {m['stderr'][-1500:]}")
        status = json.loads((out / "status.json").read_text())
        m["records"], m["errors"] = status["files"], status["failed"]
        m["ok"] = status["files"] - status["failed"]
        return m


# -- the rounds and the report ------------------------------------------------------------------

def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def ratios(a: list[dict], b: list[dict], key: str) -> list[float]:
    """Per-round ratios a/b (the same round's runs), for the median."""
    return [x[key] / y[key] for x, y in zip(a, b) if y[key] > 0]


def compare(this: str, other: str) -> str:
    r = subprocess.run([sys.executable, "-m", "bastion", "compare", this, other], cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode == 0:
        return "identical"
    lines = (r.stdout + r.stderr).strip().splitlines()
    return f"DIFFERENT ({len(lines)} lines; first: {lines[0] if lines else '?'})"


def render(trees: dict[str, Path], runs: dict, tools: list, checks: dict, load0: tuple,
           load1: tuple, rounds: int, elapsed: float, counts: dict[str, int]) -> str:
    names = [t.name for t in tools]
    base = next((t.name for t in tools if t.kind == "bastion" and t.name != "this"), None)
    out = [f"# Small documents against Kreuzberg {KREUZBERG}'s batch API",
           "",
           f"{rounds} round(s), bastion `sweep -j 2` into a fresh output; load "
           f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end; {elapsed / 60:.1f} min; "
           f"`python bench/smalldocs.py {' '.join(sys.argv[1:])}`",
           "",
           "| tree | files | command | wall s | CPU s | peak RSS MiB | files/s | "
           "wall ÷ Kreuzberg | CPU ÷ Kreuzberg |" + (f" wall ÷ {base} | CPU ÷ {base} |" if base
                                                        else ""),
           "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |" +
           (" ---: | ---: |" if base else "")]
    for t in trees:
        for name in names:
            ms = runs[t][name]
            if not ms:
                continue
            wall, cpu = med([m["wall"] for m in ms]), med([m["cpu"] for m in ms])
            rss = max(m["rss"] for m in ms)
            n = counts[t]
            row = [t, str(n), name, f"{wall:.2f}" if wall >= 1 else f"{wall:.3f}",
                   f"{cpu:.2f}", f"{rss:.0f}", f"{n / wall:.0f}"]
            kb = runs[t].get("kreuzberg-batch") or []
            if name != "kreuzberg-batch" and kb:
                row += [f"{med(ratios(ms, kb, 'wall')):.2f}×",
                        f"{med(ratios(ms, kb, 'cpu')):.2f}×"]
            else:
                row += ["", ""]
            if base:
                if name not in (base, "kreuzberg-batch") and runs[t].get(base):
                    row += [f"{med(ratios(ms, runs[t][base], 'wall')):.2f}×",
                            f"{med(ratios(ms, runs[t][base], 'cpu')):.2f}×"]
                else:
                    row += ["", ""]
            out.append("| " + " | ".join(row) + " |")
    out += ["", "Per round (wall s / CPU s):", ""]
    for t in trees:
        for name in names:
            ms = runs[t][name]
            out.append(f"- {t} {name}: " + ", ".join(f"{m['wall']:.2f}/{m['cpu']:.2f} "
                                                       f"(load {m['load']:.1f})" for m in ms))
    out += ["", "Records and texts (`bastion compare` against this checkout's output):", ""]
    for key, verdict in checks.items():
        out.append(f"- {key}: {verdict}")
    out += ["", "Counts (records, ok, errors) of the last round:", ""]
    for t in trees:
        for name in names:
            ms = runs[t][name]
            if ms:
                m = ms[-1]
                out.append(f"- {t} {name}: {m['records']} records, {m['ok']} ok, "
                           f"{m['errors']} errors")
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--trees", default=",".join(TREES),
                    help=f"comma-separated, of {', '.join(TREES)}")
    ap.add_argument("--bastion", action="append", default=[], metavar="NAME=TREE",
                    help="another bastion source tree measured beside this checkout "
                         "(the first one is the base of the 'before' ratios)")
    ap.add_argument("--no-kreuzberg", action="store_true")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--one-repeat", type=int, default=5,
                    help="runs of each command on the one-file tree per round")
    ap.add_argument("--corpus", type=Path, default=HERE / ".corpus" / "peers")
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "smalldocs")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "smalldocs.md")
    args = ap.parse_args()

    start_spawner()  # first, while this process is small (peers.py says why)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    wanted = [t for t in args.trees.split(",") if t]
    for t in wanted:
        if t not in TREES:
            raise SystemExit(f"unknown tree {t!r} (trees: {', '.join(TREES)})")
    trees = {t: tree(work, t, args.corpus.resolve()) for t in wanted}
    counts = {t: len(files_of(p)) for t, p in trees.items()}

    tools: list = [Bastion("this", ROOT, args.jobs)]
    for spec in args.bastion:
        name, _, path = spec.rpartition("=")
        source = Path(path).resolve()
        if not (source / "bastion" / "__main__.py").is_file():
            raise SystemExit(f"{source} is not a bastion source tree")
        tools.insert(len(tools), Bastion(name or source.name, source, args.jobs))
    # the base first among the bastions when given (its ratios are the "before")
    tools = tools[1:] + tools[:1] if len(tools) > 1 else tools
    compile_trees(*(t.source for t in tools))
    if not args.no_kreuzberg:
        tools.append(Kreuzberg(kreuzberg_python()))

    runs: dict[str, dict[str, list[dict]]] = {t: {x.name: [] for x in tools} for t in trees}
    load0 = os.getloadavg()
    t_start = time.monotonic()
    runs_dir = work / "runs"
    runs_dir.mkdir(exist_ok=True)
    for r in range(args.rounds):
        for t, root in trees.items():
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            repeat = args.one_repeat if t == "one" else 1
            for _ in range(repeat):
                for tool in order:
                    load = os.getloadavg()[0]
                    m = tool.run(root, runs_dir)
                    m["load"] = load
                    runs[t][tool.name].append(m)
                    print(f"round {r + 1} {t:6} {tool.name:16} {m['wall']:7.2f} s wall "
                          f"{m['cpu']:7.2f} s CPU  {m['rss']:5.0f} MiB  (load {load:.1f})",
                          file=sys.stderr)
    checks = {}
    for t in trees:
        for tool in tools:
            if tool.kind == "bastion" and tool.name != "this":
                checks[f"{t}: {tool.name}"] = compare(runs[t]["this"][-1]["out"],
                                                      runs[t][tool.name][-1]["out"])
    report = render(trees, runs, tools, checks, load0, os.getloadavg(), args.rounds,
                    time.monotonic() - t_start, counts)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    args.out.with_suffix(".json").write_text(json.dumps(
        {t: {n: [{k: v for k, v in m.items() if k != "stderr"} for m in ms]
             for n, ms in by.items()} for t, by in runs.items()}, indent=1))
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
