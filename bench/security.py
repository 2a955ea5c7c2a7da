"""The cost of the checked output directory (issue 22): writes through directory descriptors,
owner-only modes, the ownership checks, side by side against the code before the change.

    python bench/security.py                    # 10k small files, 3 rounds
    python bench/security.py --files 10000 --rounds 5 --base c5619d8

Two measures, each alternating base and this code in every round so drift hits both alike:

* **store writes**: in one process, ``Store.adopt_text`` of N worker texts then the commit's
  sync and close (the per-text path: base ``rename`` by name; now ``renameat`` into the cached
  bucket descriptor, then an ``O_NOFOLLOW`` open, ``fstat`` and ``close`` of what arrived);
* **sweeps**: whole ``bastion sweep`` processes on a tree of N small text files: the first sweep
  (every text written) and a no-op sweep (nothing written: the open and checks only).

The base code is ``git archive``d into the work directory.  Writes a table to stdout and the
figures to ``bench/results/security.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from scale import make_tree, median  # noqa: E402

ADOPT = r"""
import os, sys, time
from pathlib import Path
from bastion.tasks.extract.store import Store
from bastion.tasks.output.directory import open_output
out, n = Path(sys.argv[1]), int(sys.argv[2])
scratch = out / ".bastion" / "tmp" / "w1"
scratch.mkdir(parents=True, exist_ok=True)
names = []
for i in range(n):
    p = scratch / f"t{i}.txt"
    p.write_bytes(b"a few words of text %d\n" % i)
    names.append(p)
stems = [f"{i:064x}"[::-1] for i in range(n)]  # spread over the 256 buckets
od = open_output(out)
store = Store(out, lambda: od)
t0 = time.perf_counter()
for stem, p in zip(stems, names):
    store.adopt_text(stem, p)
store.sync()
print(time.perf_counter() - t0)
"""


def adopt(code: Path, work: Path, n: int) -> float:
    out = work / "adopt-out"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    r = subprocess.run([sys.executable, "-c", ADOPT, str(out), str(n)], cwd=code, env=env,
                       capture_output=True, text=True, check=True)
    return float(r.stdout.strip())


def sweep(code: Path, m: Path, out: Path) -> dict:
    """One ``bastion sweep`` process of ``code``: wall, CPU (``os.wait4``)."""
    # a tree before the one import name (no bastion/__main__.py) runs its top-level tasks.cli
    cli = "bastion" if (code / "bastion" / "__main__.py").is_file() else "tasks.cli"
    argv = [sys.executable, "-m", cli, "sweep", str(m), "--out", str(out), "-q", "-j",
            "2", "--no-external"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=code, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed: {err[-500:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--base", default="c5619d8")
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "security")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base-code"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", args.base],
                             capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
    codes = {"base": base, "this": REPO}
    root = work / f"tree{args.files}"
    make_tree(root, args.files)
    m = work / "m.yaml"
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n    exclude: ['.done']\n")
    res: dict[str, dict[str, list]] = {k: {"adopt": [], "first": [], "noop": []} for k in codes}
    for r in range(args.rounds):
        order = list(codes) if r % 2 == 0 else list(codes)[::-1]
        for name in order:
            code = codes[name]
            res[name]["adopt"].append(adopt(code, work, args.files))
            out = work / f"out-{name}"
            shutil.rmtree(out, ignore_errors=True)
            res[name]["first"].append(sweep(code, m, out))
            sweep(code, m, out)  # settle: the stamp is in place
            res[name]["noop"].append(sweep(code, m, out))
    rows = {}
    for name in codes:
        rows[name] = {
            "adopt_s": median(res[name]["adopt"]),
            "adopt_us_per_text": median(res[name]["adopt"]) / args.files * 1e6,
            **{f"{k}_{f}": median([x[f] for x in res[name][k]])
               for k in ("first", "noop") for f in ("wall", "cpu")},
        }
    print(f"{args.files} files, median of {args.rounds} rounds, base {args.base}")
    print(f"{'':6} {'adopt s':>8} {'µs/text':>8} {'first wall':>11} {'first cpu':>10} "
          f"{'no-op wall':>11} {'no-op cpu':>10}")
    for name, row in rows.items():
        print(f"{name:6} {row['adopt_s']:8.3f} {row['adopt_us_per_text']:8.1f} "
              f"{row['first_wall']:11.2f} {row['first_cpu']:10.2f} {row['noop_wall']:11.3f} "
              f"{row['noop_cpu']:10.3f}")
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "security.json").write_text(json.dumps(
        {"files": args.files, "rounds": args.rounds, "base": args.base, "rows": rows,
         "raw": res, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1)
        + "\n")


if __name__ == "__main__":
    main()
