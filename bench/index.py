"""The index stage's cost: sweeps with and without it, side by side, on one generated tree.

    python bench/index.py                        # 100,000 files, 3 rounds
    python bench/index.py --files 10000 --rounds 5
    python bench/index.py --reuse                # keep the tree and outputs of an earlier run

The tree: ``--files`` text documents (1,000 per directory) of 40–400 words drawn from a
vocabulary of 20,000 made-up words by a Zipf law (seeded: the same tree every time), ≈ 1.3 KB
each.  Two manifests over it: ``stages: [walk, extract]`` (A) and ``[walk, extract, index]``
(B), each with its own output.  Measured as whole processes (wall, CPU = user + system of the
process tree from ``os.wait4``, peak RSS), each pair alternated (A B, then B A the next
round) so that drift hits both alike:

* the first sweep (fresh outputs): the index's build cost;
* the no-op sweep: what the index stage adds when nothing changed;
* a sweep after one file changed (a different file each round, both outputs);
* ``bastion index`` alone building the index again from nothing, against the no-op sweep;
* the bytes: the index file beside the text store and the records' database;
* ``bastion search`` (two words) and ``bastion grep`` (one word) over the output.

Writes a table to stdout and the raw figures to ``bench/results/index-<cases>.json``;
``--only first`` (or ``noop,change,alone,search``) runs some cases only.
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BASTION = [sys.executable, "-m", "bastion"]
ENV = {**os.environ, "BASTION_NO_EXTERNAL": "1"}


def run(argv: list[str], ok: tuple[int, ...] = (0,)) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=REPO, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if proc.stderr:
        proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in ok:
        raise SystemExit(f"{argv} failed ({code}): {err[-800:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024}


def words(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 10))))
    return sorted(out)


def make_tree(root: Path, files: int) -> list[str]:
    rng = random.Random(42)
    vocabulary = words(20_000, rng)
    weights = [1 / (i + 1) for i in range(len(vocabulary))]
    if not (root / ".done").exists():
        shutil.rmtree(root, ignore_errors=True)
        for i in range(files):
            d = root / f"d{i // 1000:04d}"
            if i % 1000 == 0:
                d.mkdir(parents=True, exist_ok=True)
            body = rng.choices(vocabulary, weights, k=rng.randint(40, 400))
            lines = [" ".join(body[j:j + 12]) for j in range(0, len(body), 12)]
            (d / f"f{i:07d}.txt").write_text("\n".join(lines) + "\n")
        (root / ".done").write_text("")
    return vocabulary


def size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/bastion-bench-index"))
    ap.add_argument("--reuse", action="store_true",
                    help="keep the tree and the outputs of an earlier run (no first sweeps)")
    ap.add_argument("--only", default="first,noop,change,alone,search",
                    help="the cases to run, of first,noop,change,alone,search")
    args = ap.parse_args()
    work = args.work
    tree = work / f"tree-{args.files}"
    vocabulary = make_tree(tree, args.files)
    plain, indexed = work / "plain.yaml", work / "indexed.yaml"
    for m, stages in ((plain, "[walk, extract]"), (indexed, "[walk, extract, index]")):
        m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {tree}\nstages: {stages}\n")
    out = {"A": work / "out-plain", "B": work / "out-indexed"}
    manifest = {"A": plain, "B": indexed}

    def sweep(which: str) -> dict:
        return run([*BASTION, "sweep", str(manifest[which]), "--out", str(out[which]), "-q",
                    "-j", "2"])

    figures: dict[str, dict[str, list[dict]]] = {}

    def record(case: str, which: str, fig: dict) -> None:
        figures.setdefault(case, {}).setdefault(which, []).append(fig)

    load = os.getloadavg()
    rounds = args.rounds
    only = set(args.only.split(","))
    if not args.reuse and "first" in only:
        for r in range(rounds):
            for which in (("A", "B") if r % 2 == 0 else ("B", "A")):
                shutil.rmtree(out[which], ignore_errors=True)
                record("first sweep", which, sweep(which))
    for r in range(rounds if "noop" in only else 0):
        for which in (("A", "B") if r % 2 == 0 else ("B", "A")):
            sweep(which)  # (the no-op after a run with work flips the reused flags)
            record("no-op sweep", which, sweep(which))
    for r in range(rounds if "change" in only else 0):
        edited = tree / "d0000" / f"f{r:07d}.txt"
        edited.write_text(edited.read_text() + f"edited in round {r}\n")
        for which in (("A", "B") if r % 2 == 0 else ("B", "A")):
            record("one file changed", which, sweep(which))
    for r in range(rounds if "alone" in only else 0):
        (out["B"] / ".bastion" / "index.sqlite").unlink()
        record("index built alone", "B", run([*BASTION, "index", str(indexed), "--out",
                                              str(out["B"]), "-q"]))
        record("index built alone", "A", sweep("A"))  # the yardstick: a no-op sweep
    query = f"{vocabulary[5]} {vocabulary[50]}"
    for r in range(max(rounds, 5) if "search" in only else 0):
        record("search (2 words)", "B", run([*BASTION, "search", str(out["B"]), query]))
        record("grep (1 word)", "B", run([*BASTION, "grep", vocabulary[500], str(out["B"])],
                                         ok=(0, 1)))
    sizes = {"index": size(out["B"] / ".bastion" / "index.sqlite"),
             "store": size(out["B"] / "extract"),
             "database": size(out["B"] / ".bastion" / "verdicts.sqlite"),
             "tree": size(tree)}
    results = {"files": args.files, "rounds": rounds, "load_before": load,
               "load_after": os.getloadavg(), "figures": figures, "bytes": sizes}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"index-{'-'.join(sorted(only))}.json").write_text(
        json.dumps(results, indent=2))

    print(f"{args.files} files, {rounds} rounds, load {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'case':<20} {'A wall':>8} {'B wall':>8} {'B/A':>6} {'A cpu':>8} {'B cpu':>8} "
          f"{'B/A':>6} {'A rss':>7} {'B rss':>7}")
    for case, by in figures.items():
        a, b = by.get("A"), by.get("B", [])
        bw, bc, br = (med([f[k] for f in b]) for k in ("wall", "cpu", "rss"))
        if a:
            aw, ac, ar = (med([f[k] for f in a]) for k in ("wall", "cpu", "rss"))
            print(f"{case:<20} {aw:8.2f} {bw:8.2f} {bw / aw:6.2f} {ac:8.2f} {bc:8.2f} "
                  f"{bc / ac:6.2f} {ar:7.0f} {br:7.0f}")
        else:
            print(f"{case:<20} {'':>8} {bw:8.2f} {'':>6} {'':>8} {bc:8.2f} {'':>6} {'':>7} "
                  f"{br:7.0f}")
    mib = 1 << 20
    print(f"bytes: index {sizes['index'] / mib:.1f} MiB, text store {sizes['store'] / mib:.1f} "
          f"MiB, database {sizes['database'] / mib:.1f} MiB, tree {sizes['tree'] / mib:.1f} "
          f"MiB; index/store {sizes['index'] / max(sizes['store'], 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
