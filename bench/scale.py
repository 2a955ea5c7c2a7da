"""Cost against tree size: first sweep, no-op sweep, the walk alone, and a sweep after one
change, as whole processes (wall, CPU, peak RSS from ``os.wait4``), on generated trees of small
text files (1,000 per directory).

    python bench/scale.py                          # 10k and 100k files
    python bench/scale.py --sizes 10000,100000,300000,1000000 --rounds 3
    python bench/scale.py --sizes 1000000 --rounds 7 --reuse   # no-op and change rounds only
    python bench/scale.py --sizes 100000,300000 --against /tmp/main   # side by side with
        # another checkout (its own .venv), on the same trees, each run alternated with its twin
    python bench/scale.py --sizes 300000 --noop-only --reuse --rounds 9 --against /tmp/main
        # the walk alone and the no-op sweep only, alternated (the no-op's cost over the walk)
    python bench/scale.py --sizes 300000 --walk-only --against /tmp/main   # the walk alone:
        # a walk-only manifest, a first walk then the re-walk rounds (no sweep)

Each round runs the walk alone, the no-op sweep and a sweep after one change (a different
file each round), so drift hits all three alike; the one-change ratios are also given pairwise.  Writes a table to stdout, the raw figures
to ``bench/results/scale.json`` and a plot (wall time and peak RSS against tree size) to
``bench/results/scale.png`` (drawn with Pillow, which bastion already depends on).
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

from benchlib import compile_trees

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BASTION = [sys.executable, "-m", "bastion"]


def run(argv: list[str], cwd: Path = REPO) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 2):
        raise SystemExit(f"{argv} failed ({code}): {err[-500:]}")
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "rss": ru.ru_maxrss / 1024}


def make_tree(root: Path, files: int) -> None:
    if (root / ".done").exists():
        return
    shutil.rmtree(root, ignore_errors=True)
    for i in range(files):
        d = root / f"d{i // 1000:04d}"
        if i % 1000 == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:07d}.txt").write_bytes(f"file {i}: a few words of text\n".encode())
    (root / ".done").write_text("")


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2]


def measure(work: Path, n: int, rounds: int, reuse: bool = False,
            repos: tuple[Path, ...] = (REPO,), walk_only: bool = False,
            noop_only: bool = False) -> list[dict]:
    """The figures of each checkout in ``repos`` (this one first) on one tree of ``n`` files:
    each its own output, every step run by each in turn."""
    root = work / f"tree{n}"
    make_tree(root, n)
    m = work / (f"w{n}.yaml" if walk_only else f"m{n}.yaml")
    m.write_text(f"version: 1\nroots:\n  - name: r\n    path: {root}\n    exclude: ['.done']\n"
                 f"stages: [{'walk' if walk_only else 'walk, extract'}]\n")
    sides = []
    for k, repo in enumerate(repos):
        py = sys.executable if repo == REPO else str(repo / ".venv" / "bin" / "python")
        out = work / ((f"walk{n}" if walk_only else f"out{n}") + (f".{k}" if k else ""))
        sides.append({"repo": repo, "out": out,
                      "sweep": [py, "-m", "bastion", "sweep", str(m), "--out", str(out), "-q",
                                "-j", "2"],
                      "walk": [py, "-m", "bastion", "walk", str(m), "--out", str(out), "-q"],
                      "first": None, "res": {"walk": [], "noop": [], "change": []}})
    if walk_only:
        return walk_rounds(sides, n, rounds)
    for side in sides:
        if not (reuse and (side["out"] / "extract.summary.json").exists()):
            shutil.rmtree(side["out"], ignore_errors=True)
            side["first"] = run(side["sweep"], side["repo"])
    for side in sides:
        run(side["sweep"], side["repo"])  # settle: the walk's rows and the stamp are in place
    for r in range(rounds):  # walk, no-op, one change: alternated, so drift hits all three
        for kind in ("walk", "noop"):
            for side in sides:
                side["res"][kind].append(run(side["walk" if kind == "walk" else "sweep"],
                                             side["repo"]))
        if noop_only:  # the walk and the no-op alone: no change between the rounds
            continue
        i = min(n - 1, ((r * 7) % max(1, n // 1000)) * 1000 + r)
        victim = root / f"d{i // 1000:04d}" / f"f{i:07d}.txt"
        victim.write_bytes(f"edited in round {r} at {time.time()}\n".encode())
        for side in sides:
            side["res"]["change"].append(run(side["sweep"], side["repo"]))
    rows = []
    for side in sides:
        res = side["res"]
        row = {"files": n, "repo": str(side["repo"]), "first": side["first"],
               "pairs": [c["wall"] / no["wall"] for c, no in zip(res["change"], res["noop"])],
               "noop_pairs": [no["wall"] / w["wall"] for no, w in zip(res["noop"], res["walk"])],
               "noop_cpu_over_walk": median([no["cpu"] - w["cpu"]
                                             for no, w in zip(res["noop"], res["walk"])]),
               "load": os.getloadavg()[0]}
        for k, runs in res.items():
            row[k] = {f: median([x[f] for x in runs]) for f in ("wall", "cpu", "rss")} \
                if runs else None
        rows.append(row)
    return rows


def walk_rounds(sides: list[dict], n: int, rounds: int) -> list[dict]:
    """--walk-only: a first walk of each side, one settling re-walk, then ``rounds`` re-walks
    alternated between the sides."""
    for side in sides:
        shutil.rmtree(side["out"], ignore_errors=True)
        side["first"] = run(side["walk"], side["repo"])
    for side in sides:
        run(side["walk"], side["repo"])
    for _ in range(rounds):
        for side in sides:
            side["res"]["walk"].append(run(side["walk"], side["repo"]))
    return [{"files": n, "repo": str(side["repo"]), "first": side["first"], "walk_only": True,
             "load": os.getloadavg()[0],
             "walk": {f: median([x[f] for x in side["res"]["walk"]])
                      for f in ("wall", "cpu", "rss")}} for side in sides]


def plot(rows: list[dict], path: Path) -> None:
    """Wall time (left) and peak RSS (right) against tree size, log-log, with Pillow."""
    import math

    from PIL import Image, ImageDraw

    W, H, pad = 1100, 460, 60
    img = Image.new("RGB", (W, H), "white")
    d = ImageDraw.Draw(img)
    series = [("first", (200, 30, 30)), ("noop", (30, 120, 30)), ("walk", (30, 30, 200)),
              ("change", (200, 140, 0))]
    xs = [r["files"] for r in rows]

    def panel(x0: int, key: str, title: str, unit: str) -> None:
        w = (W - 3 * pad) // 2
        def val(r: dict, s: str) -> float:
            return (r[s] or {}).get(key, 0)  # no first sweep in a --reuse run

        vals = [val(r, s) for r in rows for s, _ in series if val(r, s) > 0]
        lo, hi = math.log10(min(vals)) - 0.1, math.log10(max(vals)) + 0.1
        xlo, xhi = math.log10(min(xs)) - 0.1, math.log10(max(xs)) + 0.1

        def pt(x: float, y: float) -> tuple[float, float]:
            return (x0 + (math.log10(x) - xlo) / (xhi - xlo) * w,
                    H - pad - (math.log10(y) - lo) / (hi - lo) * (H - 2 * pad))

        d.rectangle([x0, pad, x0 + w, H - pad], outline="black")
        d.text((x0, pad - 40), f"{title} ({unit}, log-log) against files", fill="black")
        for n in xs:
            x, _ = pt(n, 10 ** lo)
            d.text((x - 15, H - pad + 5), f"{n:,}", fill="black")
        for k in range(math.floor(lo), math.ceil(hi) + 1):
            for mant in (1, 2, 5):
                v = mant * 10 ** k
                if lo <= math.log10(v) <= hi:
                    _, y = pt(xs[0], v)
                    d.line([x0, y, x0 + 5, y], fill="black")
                    d.text((x0 - 50, y - 6), f"{v:g}", fill="black")
        for i, (s, colour) in enumerate(series):
            pts = [pt(r["files"], val(r, s)) for r in rows if val(r, s) > 0]
            if len(pts) > 1:
                d.line(pts, fill=colour, width=3)
            for p in pts:
                d.ellipse([p[0] - 4, p[1] - 4, p[0] + 4, p[1] + 4], fill=colour)
            d.text((x0 + 10, pad + 10 + 14 * i), {"first": "first sweep", "noop": "no-op sweep",
                   "walk": "walk alone", "change": "one file changed"}[s], fill=colour)

    panel(pad, "wall", "wall time", "s")
    panel(2 * pad + (W - 3 * pad) // 2, "rss", "peak RSS", "MiB")
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--work", type=Path, default=HERE / ".corpus" / "scale")
    ap.add_argument("--results", type=Path, default=HERE / "results")
    ap.add_argument("--against", type=Path, action="append", default=[],
                    help="another checkout (with its own .venv) measured side by side")
    ap.add_argument("--walk-only", action="store_true",
                    help="the walk alone: a walk-only manifest, a first walk and re-walks")
    ap.add_argument("--noop-only", action="store_true",
                    help="the walk alone and the no-op sweep, alternated (no change rounds)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep an existing output of a size (no first sweep): for the no-op "
                         "and one-change rounds alone")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    repos = (REPO, *args.against)
    for repo in repos:
        compile_trees(repo)  # bytecode, as an installed package has it (bench/benchlib.py)
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        for row in measure(args.work, n, args.rounds, args.reuse, repos, args.walk_only,
                           args.noop_only):
            rows.append(row)
            if args.walk_only:
                f, w = row["first"], row["walk"]
                print(f"{Path(row['repo']).name:>12} {n:>9,} files | first walk "
                      f"{f['wall']:7.2f} s ({f['cpu']:.2f} s CPU) | re-walk {w['wall']:6.3f} s "
                      f"({w['cpu']:.2f} s CPU, {w['rss']:4.0f} MiB; load {row['load']:.1f})",
                      flush=True)
                continue
            if args.noop_only:
                w, no = row["walk"], row["noop"]
                pairs = " ".join(f"{x:.2f}" for x in row["noop_pairs"])
                print(f"{Path(row['repo']).name:>12} {n:>9,} files | walk {w['wall']:6.3f} s "
                      f"({w['cpu']:.2f} s CPU) | no-op {no['wall']:6.3f} s ({no['cpu']:.2f} s "
                      f"CPU, {no['wall'] / w['wall']:.2f}x walk; pairs {pairs}; CPU over the "
                      f"walk {row['noop_cpu_over_walk']:+.3f} s; load {row['load']:.1f})",
                      flush=True)
                continue
            f, w, no, ch = row["first"], row["walk"], row["noop"], row["change"]
            first = (f"first {f['wall']:7.2f} s ({f['cpu']:6.1f} s CPU) {f['rss']:6.0f} MiB "
                     f"({n / f['wall']:6.0f} files/s)" if f else "first (reused)")
            pairs = " ".join(f"{x:.2f}" for x in row["pairs"])
            name = "" if len(repos) == 1 else f"{Path(row['repo']).name:>12} "
            print(f"{name}{n:>9,} files | {first} | walk {w['wall']:6.3f} s "
                  f"({w['cpu']:.2f} s CPU) | no-op {no['wall']:6.3f} s ({no['cpu']:.2f} s CPU, "
                  f"{no['wall'] / w['wall']:.2f}x walk, {no['rss']:4.0f} MiB) | one change "
                  f"{ch['wall']:6.3f} s ({ch['cpu']:.2f} s CPU, {ch['wall'] / no['wall']:.2f}x "
                  f"no-op, {ch['rss']:4.0f} MiB; pairs {pairs}; load {row['load']:.1f})",
                  flush=True)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "scale.json").write_text(json.dumps(rows, indent=1))
    if not (args.walk_only or args.noop_only):
        plot([r for r in rows if r["repo"] == str(REPO)], args.results / "scale.png")


if __name__ == "__main__":
    main()
