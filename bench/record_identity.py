"""Are two source trees' outputs byte-identical along a random edit sequence?  walk.jsonl and
extract.jsonl compared with ``cmp`` after every step, and with ``bastion compare``.

    python bench/record_identity.py OLD_PYTHON NEW_PYTHON [--corpus DIR] [--steps 30]

Each side is a virtualenv's Python whose ``bastion`` is one source tree (e.g.
``/tmp/base/.venv/bin/python`` of main's checkout, ``.venv/bin/python`` of this one).  The
corpus (default ``bench/.corpus/peers``, read only) is copied to a work directory; both sides
sweep it into outputs of their own (``-j 2``), then a seeded random sequence of edits,
deletions, renames and copies (a corpus file's bytes written over another, a duplicate made,
a text appended to) is applied, and both sides sweep again after each step.  After the first
sweep and after every step: walk.jsonl and extract.jsonl must be the same bytes on both sides,
the summaries equal but for their times and tools' timings, and ``bastion compare`` of the
two outputs must find nothing.  Exit 0 when all are, 1 with the first difference.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

VOLATILE = {"started_at", "duration_s", "workers_started", "workers_killed", "tools",
            "worker_identity", "tightened"}


def tree_of(python: str) -> Path:
    """The source tree of a virtualenv's Python (``TREE/.venv/bin/python``): run from there,
    so that the tree's own ``bastion`` is the one imported."""
    return Path(python).absolute().parents[2]


def sweep(python: str, manifest: Path, out: Path) -> None:
    proc = subprocess.run([python, "-m", "bastion", "sweep", str(manifest), "--out", str(out),
                           "-q", "-j", "2"], capture_output=True, text=True,
                          cwd=tree_of(python))
    if proc.returncode not in (0, 2):
        sys.exit(f"{python}: sweep failed ({proc.returncode}): {proc.stderr[-800:]}")


def summary(out: Path) -> dict:
    s = json.loads((out / "extract.summary.json").read_text())
    return {k: v for k, v in s.items() if k not in VOLATILE}


def check(step: str, old: Path, new: Path, python: str) -> list[str]:
    problems = []
    for name in ("walk.jsonl", "extract.jsonl"):
        if subprocess.run(["cmp", "-s", str(old / name), str(new / name)]).returncode:
            problems.append(f"{step}: {name} differs")
    if summary(old) != summary(new):
        problems.append(f"{step}: the summaries differ: {summary(old)} != {summary(new)}")
    proc = subprocess.run([python, "-m", "bastion", "compare", str(old), str(new)],
                          capture_output=True, text=True, cwd=tree_of(python))
    if proc.returncode != 0:
        problems.append(f"{step}: bastion compare: {proc.stdout[-800:]}{proc.stderr[-400:]}")
    return problems


def mutate(root: Path, rng: random.Random) -> str:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    a, b = rng.choice(files), rng.choice(files)
    kind = rng.choice(["edit", "delete", "rename", "copy", "append", "noop"])
    rel = a.relative_to(root)
    if kind == "edit":  # another corpus file's bytes
        a.write_bytes(b.read_bytes())
    elif kind == "delete":
        a.unlink()
    elif kind == "rename":
        a.rename(a.with_name("renamed-" + a.name))
    elif kind == "copy":
        shutil.copyfile(a, b.parent / ("copy-" + a.name))
    elif kind == "append":
        with open(a, "ab") as f:
            f.write(b"\nappended\n")
    return f"{kind} {rel}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--corpus", type=Path, default=HERE / ".corpus" / "peers")
    ap.add_argument("--work", type=Path, default=Path("/tmp/record-identity"))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=33)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    root = args.work / "tree"
    shutil.copytree(args.corpus, root, symlinks=True)
    manifest = args.work / "m.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: peers\n    path: {root}\n"
                        "stages: [walk, extract]\n")
    old, new = args.work / "out-old", args.work / "out-new"
    rng = random.Random(args.seed)
    steps = ["first sweep"]
    for n in range(args.steps + 1):
        if n:
            steps.append(mutate(root, rng))
        sweep(args.old, manifest, old)
        sweep(args.new, manifest, new)
        problems = check(f"step {n} ({steps[-1]})", old, new, args.new)
        if problems:
            print("\n".join(problems))
            sys.exit(1)
        records = summary(new)["records"]
        print(f"step {n:3d} {steps[-1]}: identical ({records} records)", flush=True)
    print(f"identical at every one of {args.steps + 1} steps")


if __name__ == "__main__":
    main()
