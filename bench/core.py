"""Benchmarks of the walk and extract stages, measured side by side in one run.

    python bench/core.py [--files 100000] [--rounds 3] [--work DIR] [--against DIR] [--walk-only]

Builds its trees under ``--work`` (default ``bench/.corpus/core``, not committed), then times
whole processes (wall, CPU, peak RSS from ``wait4``), alternating the commands compared so that
drift on a shared machine hits both alike, and prints a Markdown table of medians and ratios.
``--against DIR`` times the walk rows (first walk, re-walk, hashing) of a second source tree too
(e.g. ``git archive OLD | tar -x -C /tmp/old``), alternating with this one, with the pairwise
ratio this ÷ that; ``--walk-only`` stops after the walk rows.  Figures are quoted in
docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchlib import compile_trees

HERE = Path(__file__).resolve().parent
BASTION = [sys.executable, "-m", "bastion"]


def cli_of(tree: Path | None) -> list[str]:
    """The command of a source tree: ``-m bastion``, or for a tree from before the one
    import name (no bastion/__main__.py) its top-level ``tasks.cli``."""
    if tree is None or (tree / "bastion" / "__main__.py").is_file():
        return BASTION
    return [sys.executable, "-m", "tasks.cli"]


def run(argv: list[str], *, cwd: Path | None = None, stdout=subprocess.DEVNULL) -> dict:
    """Run one process; wall seconds, CPU seconds and peak RSS (MiB) from wait4."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 2):
        raise SystemExit(f"{argv} failed ({proc.returncode}): {err[-500:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024}


def make_tree(root: Path, files: int, size: int = 4000) -> None:
    if (root / ".done").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    per_dir = 1000
    for i in range(files):
        d = root / f"d{i // per_dir:04d}"
        if i % per_dir == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:06d}.txt").write_bytes((f"file {i} words of text " * (size // 20)).encode()[:size])
    (root / ".done").write_text("")


def make_big(root: Path, total: int = 1 << 30, each: int = 64 << 20) -> None:
    if (root / ".done").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    block = hashlib.sha256(b"seed").digest() * (1 << 15)  # 1 MiB of bytes
    for i in range(total // each):
        with open(root / f"blob{i:02d}.bin", "wb") as f:
            for _ in range(each // len(block)):
                f.write(block)
    (root / ".done").write_text("")


def manifest(path: Path, root: Path, max_file_bytes: str = "256MiB") -> Path:
    path.write_text(f"version: 1\nroots:\n  - name: t\n    path: {root}\n"
                    f"    exclude: ['.done']\nlimits:\n  max_file_bytes: {max_file_bytes}\n")
    return path


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def row(name: str, runs: list[dict], base: list[dict] | None = None, unit: str = "") -> str:
    w, c, m = median(runs, "wall"), median(runs, "cpu"), max(r["rss"] for r in runs)
    ratio = ""
    if base:
        ratios = [a["wall"] / b["wall"] for a, b in zip(runs, base)]
        ratio = f"{statistics.median(ratios):.2f}×"
    return f"| {name} | {w:.2f} | {c:.2f} | {m:.0f} | {ratio} {unit} |"


def cpu_ratio(runs: list[dict], base: list[dict]) -> str:
    ratios = [a["cpu"] / b["cpu"] for a, b in zip(runs, base)]
    return f"(CPU {statistics.median(ratios):.2f}×)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--extract-files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "core")
    ap.add_argument("--skip-hash", action="store_true")
    ap.add_argument("--against", type=Path, help="another bastion source tree to time the walk of")
    ap.add_argument("--walk-only", action="store_true")
    args = ap.parse_args()
    other = args.against.resolve() if args.against else None
    compile_trees(HERE.parent, other)  # what is timed, byte-compiled (bench/benchlib.py)
    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    tree = work / f"tree{args.files}"
    small = work / f"tree{args.extract_files}"
    make_tree(tree, args.files)
    make_tree(small, args.extract_files)
    m_tree = manifest(work / "tree.yaml", tree)
    m_small = manifest(work / "small.yaml", small)
    out = work / "out"
    lines = ["| what | wall s (median) | CPU s | peak RSS MiB | ratio (wall, pairwise) |",
             "| --- | --- | --- | --- | --- |"]

    # 1. walk: first walk, re-walk of the unchanged tree, find -printf
    first, again, find = [], [], []
    first_o, again_o = [], []
    out_o = work / "out-against"
    pairs = [(out, first, again, None)] + ([(out_o, first_o, again_o, other)] if other else [])
    for i in range(args.rounds):
        for o, fw, rw, cwd in (pairs if i % 2 == 0 else pairs[::-1]):  # alternate who goes first
            shutil.rmtree(o, ignore_errors=True)
            fw.append(run(cli_of(cwd) + ["walk", str(m_tree), "--out", str(o), "-q"], cwd=cwd))
            rw.append(run(cli_of(cwd) + ["walk", str(m_tree), "--out", str(o), "-q"], cwd=cwd))
        find.append(run(["find", str(tree), "-printf", "%s %T@\n"]))
    lines.append(row(f"first walk, {args.files} files", first))
    lines.append(row("re-walk, unchanged (vs first walk)", again, first))
    lines.append(row("re-walk, unchanged (vs find -printf)", again, find))
    lines.append(row("find -printf '%s %T@'", find))
    if other is not None:
        lines.append(row(f"first walk, {other}", first_o))
        lines.append(row("  this first walk vs that one", first, first_o,
                         cpu_ratio(first, first_o)))
        lines.append(row(f"re-walk, {other}", again_o))
        lines.append(row("  this re-walk vs that one", again, again_o, cpu_ratio(again, again_o)))

    # 2. hashing 1 GiB: bastion walk vs sha256sum
    if not args.skip_hash:
        big = work / "big"
        make_big(big)
        m_big = manifest(work / "big.yaml", big, "1GiB")
        blobs = sorted(str(p) for p in big.glob("blob*.bin"))
        hw, ss, hw_o = [], [], []
        hashers = [(hw, None)] + ([(hw_o, other)] if other else [])
        for i in range(args.rounds):
            for runs, cwd in (hashers if i % 2 == 0 else hashers[::-1]):
                shutil.rmtree(work / "out-big", ignore_errors=True)
                runs.append(run(BASTION + ["walk", str(m_big), "--out", str(work / "out-big"),
                                           "-q"], cwd=cwd))
            ss.append(run(["sha256sum", *blobs]))
        lines.append(row("walk (hash) 1 GiB", hw))
        lines.append(row("sha256sum 1 GiB (vs walk)", ss, hw, "= walk throughput ÷ sha256sum's"))
        if other is not None:
            lines.append(row(f"walk (hash) 1 GiB, {other}", hw_o))
            lines.append(row("  this hashing walk vs that one", hw, hw_o, cpu_ratio(hw, hw_o)))
    if args.walk_only:
        print("\n".join(lines))
        return

    # 3. extract: first extract of small text files, then no-op re-runs
    fx, noop = [], []
    for _ in range(args.rounds):
        shutil.rmtree(out, ignore_errors=True)
        run(BASTION + ["walk", str(m_small), "--out", str(out), "-q"])
        fx.append(run(BASTION + ["extract", str(m_small), "--out", str(out), "-q", "-j", "2"]))
    rate = args.extract_files / median(fx, "wall")
    lines.append(row(f"first extract, {args.extract_files} text files, -j 2", fx,
                     unit=f"{rate:.0f} files/s"))

    shutil.rmtree(out, ignore_errors=True)
    run(BASTION + ["sweep", str(m_tree), "--out", str(out), "-q", "-j", "2"])
    for _ in range(args.rounds):
        noop.append(run(BASTION + ["extract", str(m_tree), "--out", str(out), "-q"]))
    lines.append(row(f"no-op extract re-run, {args.files} files", noop))

    # 4. re-run after one file changed: only that file is extracted again
    victim = next(iter(sorted((tree / "d0000").iterdir())))
    one = []
    for i in range(args.rounds):
        victim.write_bytes(f"changed {i} {time.time()}".encode())
        one.append(run(BASTION + ["sweep", str(m_tree), "--out", str(out), "-q"]))
        summary = json.loads((out / "extract.summary.json").read_text())
        assert summary["extracted"] == 1, summary["extracted"]
    lines.append(row(f"sweep after one change, {args.files} files (extracted: 1)", one))

    # 5. isolation overhead per small document
    iso = subprocess.run([sys.executable, str(HERE / "isolation.py"), str(small)],
                         capture_output=True, text=True, check=True).stdout.strip()
    print("\n".join(lines))
    print()
    print(iso)


if __name__ == "__main__":
    os.chdir(HERE.parent)
    main()
