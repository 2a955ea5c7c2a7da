"""Are two source trees' walks byte-identical?  walk.jsonl and the stat cache, compared.

    python bench/walk_identity.py OLD_TREE [NEW_TREE] [--work DIR]

Builds the comparison trees once under ``--work`` (default ``bench/.corpus/walk-identity``): a
copy of ``examples/`` and of ``tests/samples/``, a copy of the source tree itself, an odd tree
(names that are not UTF-8 or hold newlines, quotes, ``=``, a FIFO, symlinks to files, to
directories, to themselves, out of the root, broken, to a FIFO, into excluded paths) and a
750-file tree.  Each source tree (``NEW_TREE`` defaults to this checkout) then walks ten
manifests over them three times (a first walk, a re-walk, a re-walk shared with two forked
helpers) in a process of its own; every ``walk.jsonl`` and stat cache (without the walk.jsonl
stamp) must be byte-identical, and every summary identical apart from keys only one side has.
Exit 0 when all are, 1 with the differences otherwise.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

SCENARIOS = {  # name: (roots, limits, run_walk options)
    "examples": ([{"name": "docs", "path": "examples/docs", "exclude": ["*.tmp"]}],
                 {"max_file_bytes": "256MiB"}, {}),
    "samples": ([{"name": "s", "path": "samples"}], {}, {}),
    "samples-globs": ([{"name": "s", "path": "samples", "include": ["*.pdf", "office/**"],
                        "exclude": ["**/*.docx"]}], {}, {}),
    "repo": ([{"name": "repo", "path": "repo", "exclude": ["**/__pycache__/**", "*.pyc"]},
              {"name": "ex", "path": "examples"}], {}, {}),
    "odd": ([{"name": "o", "path": "odd"}], {"max_file_bytes": 4000}, {}),
    "odd-globs": ([{"name": "o", "path": "odd", "include": ["*.txt", "*.tmp", "link-*",
                                                            "**/*.js", "src/**"],
                    "exclude": ["*.tmp", "build/", "**/node_modules/**", "sub/deeper/**"]}],
                  {}, {}),
    "odd-follow": ([{"name": "o", "path": "odd", "follow_symlinks": True,
                     "exclude": ["*.tmp", "build/"]}], {}, {}),
    "odd-follow-one-fs": ([{"name": "o", "path": "odd", "follow_symlinks": True,
                            "one_file_system": True}], {}, {}),
    "odd-no-hash": ([{"name": "o", "path": "odd"}], {}, {"no_hash": True}),
    "big": ([{"name": "b", "path": "big"}, {"name": "o", "path": "odd",
                                            "follow_symlinks": True}], {}, {}),
}

# Runs inside each source tree: walk every scenario, keep what must not change.
DRIVER = r"""
import json, marshal, os, shutil, sys
from pathlib import Path
trees, res = Path(sys.argv[1]), Path(sys.argv[2])
sys.path.insert(0, os.getcwd())
import bastion.tasks.walk.stage as walk_mod
from bastion.tasks.manifest import load_manifest
from bastion.tasks.output.directory import open_output
from bastion.tasks.walk.stage import run_walk
for name, opts in json.loads(sys.argv[3]).items():
    out = res / f"out-{name}"
    m = load_manifest(trees / f"{name}.yaml")
    for step in ("1first", "2again", "3shared"):
        if step == "3shared":  # a re-walk shared with 2 forked helpers, whatever the cores
            walk_mod.PARALLEL_MIN_RECORDS, walk_mod.MAX_WALKERS = 1, 3
            os.sched_getaffinity = lambda pid: {0, 1, 2}
        with open_output(out) as od:
            summary = run_walk(m, od, **opts)
        for k in ("duration_s", "started_at"):
            summary.pop(k)
        cache = marshal.loads((out / ".bastion" / "walk-cache").read_bytes())
        cache.pop("walk")  # walk.jsonl's size and mtime: differs between two outputs
        (res / f"{name}.{step}.walk.jsonl").write_bytes((out / "walk.jsonl").read_bytes())
        (res / f"{name}.{step}.cache").write_bytes(marshal.dumps(cache))
        (res / f"{name}.{step}.summary.json").write_text(json.dumps(summary, sort_keys=True))
    shutil.rmtree(out)
"""


def build(trees: Path, source: Path) -> None:
    if (trees / ".done").exists():
        return
    shutil.rmtree(trees, ignore_errors=True)
    trees.mkdir(parents=True)
    shutil.copytree(source / "examples", trees / "examples", symlinks=True)
    shutil.copytree(source / "tests" / "samples", trees / "samples", symlinks=True)
    shutil.copytree(source, trees / "repo", symlinks=True,
                    ignore=shutil.ignore_patterns(".git", ".venv", ".corpus", ".venvs",
                                                  "results", ".agent"))
    o = trees / "odd"
    for rel, data in (("a.txt", b"alpha\n"), ("empty.txt", b""), ("big.bin", b"x" * 5000),
                      ("drop.tmp", b"tmp\n"), ("sub/c.txt", b"gamma\n"),
                      ("sub/deeper/d.json", b'{"d": 1}\n'), ("build/x.txt", b"build\n"),
                      ("build/deep/y.txt", b"deep\n"), ("src/node_modules/pkg/i.js", b"i\n"),
                      ("src/main.py", b"print(1)\n")):
        (o / rel).parent.mkdir(parents=True, exist_ok=True)
        (o / rel).write_bytes(data)
    for raw in (b"caf\xc3\xa9.txt", b"bad-\xff\xfe.txt", b"sp ace.txt", b"new\nline.txt",
                b"q\"uote\\.txt", b"colon:eq=.txt", b"\x01ctrl.txt", b"-a", b"x=y"):
        with open(os.path.join(os.fsencode(str(o)), raw), "wb") as f:
            f.write(raw + b"\n")
    os.mkfifo(o / "pipe")
    for name, target in (("link-file", "a.txt"), ("link-dir", "sub"), ("sub/loop", "."),
                         ("link-out", "/etc"), ("link-broken", "nowhere"),
                         ("link-fifo", "pipe"), ("link-excl", "drop.tmp"),
                         ("link-build", "build"), ("sub/up.txt", "../a.txt")):
        os.symlink(target, o / name)
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("word/document.xml", "<w:document/>")
        zf.writestr("[Content_Types].xml", "<Types/>")
    (o / "zips").mkdir()
    (o / "zips" / "doc.docx").write_bytes(z.getvalue())
    (o / "zips" / "plain.zip").write_bytes(z.getvalue())
    g = trees / "big"
    for d in range(12):
        sub = g / f"d{d}" / "inner"
        sub.mkdir(parents=True)
        for i in range(60):
            (sub if i % 2 else sub.parent).joinpath(f"f{i:03d}.txt").write_bytes(
                f"dir {d} file {i}\n".encode())
    os.mkfifo(g / "pipe")
    os.symlink("d0", g / "link")
    os.symlink("d1/f000.txt", g / "flink")
    for name, (roots, limits, _) in SCENARIOS.items():
        doc = {"version": 1, "roots": [dict(r, path=str(trees / r["path"])) for r in roots]}
        if limits:
            doc["limits"] = limits
        (trees / f"{name}.yaml").write_text(json.dumps(doc))  # JSON is YAML
    (trees / ".done").write_text("")


def walk_with(source: Path, trees: Path, res: Path) -> None:
    shutil.rmtree(res, ignore_errors=True)
    res.mkdir(parents=True)
    opts = {name: o for name, (_, _, o) in SCENARIOS.items()}
    subprocess.run([sys.executable, "-c", DRIVER, str(trees), str(res), json.dumps(opts)],
                   cwd=source, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path, nargs="?", default=HERE.parent)
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "walk-identity")
    args = ap.parse_args()
    work = args.work.resolve()
    build(work / "trees", args.old.resolve())
    a, b = work / "old", work / "new"
    walk_with(args.old.resolve(), work / "trees", a)
    walk_with(args.new.resolve(), work / "trees", b)
    differences = []
    names = sorted(p.name for p in a.iterdir())
    for name in names:
        x, y = (a / name).read_bytes(), (b / name).read_bytes()
        if name.endswith(".summary.json"):
            sx, sy = json.loads(x), json.loads(y)
            common = sx.keys() & sy.keys()
            if any(sx[k] != sy[k] for k in common):
                differences.append(f"{name}: {[k for k in common if sx[k] != sy[k]]}")
        elif x != y:
            differences.append(f"{name}: different bytes")
    for line in differences:
        print(line)
    lines = sum(len((a / n).read_bytes().splitlines()) for n in names if n.endswith(".jsonl"))
    print(f"{len(names)} files compared ({lines} records), {len(differences)} different")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
