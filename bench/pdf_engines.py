"""Compare the PDF text engines on a directory of real PDFs: speed, memory, agreement.

    python bench/pdf_engines.py DIR [--engines pdftotext,pdfium,pdfium-range,pdfplumber]
    python bench/pdf_engines.py --big 1000   # peak RSS of each engine on a generated PDF

Each engine runs in a process of its own (so its CPU time and peak RSS are its own) over every
``*.pdf`` in DIR, one file after another:

* ``pdftotext``      a bare ``pdftotext -layout -enc UTF-8 FILE -`` loop (CPU of the children);
* ``pdfium``         bastion's PDFium engine (:func:`bastion.readers.pdf.engines.iter_pdf`, ``get_text_bounded``);
* ``pdfium-range``   the same pages through PDFium's ``get_text_range`` instead;
* ``pdfplumber``     bastion's pdfplumber engine (:func:`bastion.readers.pdf.engines.iter_pdf`);
* ``reader``         the whole PDF reader (``read_document``: engine chain, per-page verdicts,
                     annotations, provenance), no external tools.

With ``--sweeps`` it times whole runs instead, side by side, ``--rounds`` rounds in a rotating
order, one process each, CPU (user + system of the process tree, ``os.wait4``) and wall:

* ``pdftotext-loop``: ``sh -c 'for f in DIR/*.pdf; do pdftotext -layout -enc UTF-8 "$f" -; done'``;
* ``sweep-j1`` / ``sweep-j2``: ``python -m bastion sweep <manifest of DIR> --out <fresh> -q -j N
  --no-external`` from this tree (the built-in PDFium path);
* ``reader``: the PDF reader alone (the ``reader`` engine below: ``read_document`` per file in
  one process, no tools), its CPU summed over the files (the process start and imports left out);
* with ``--against TREE`` (e.g. a ``git archive`` snapshot of an earlier commit) the same three
  from that tree (its own ``bench/pdf_engines.py`` for the reader row), and the two trees'
  records and texts compared byte for byte.

Ratios are taken pairwise per round (medians): ``python bench/pdf_engines.py DIR --sweeps
--rounds 5 --against /tmp/snap``.

Agreement is the token F1 against a reference engine's text of the same files: tokens are
``\\w+`` runs, lower-cased, counted as multisets (2·|A∩B| / (|A|+|B|), summed over the files);
"order" is the same F1 over token bigrams, which also counts words out of reading order
(rotated text read in the wrong direction, lines glued).
Files that an engine could not open count as zero tokens for it.  The table is Markdown.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchlib import compile_trees

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("pdftotext", "pdfium", "pdfium-range", "pdfplumber")  # and "reader"
TOKEN = re.compile(r"\w+")


def _run_engine(engine: str, files: list[Path], out: Path) -> None:
    """Child: extract every file with one engine; write per-file texts, CPU and RSS as JSON."""
    sys.path.insert(0, str(ROOT))
    from bastion.readers.pdf.engines import iter_pdf

    results = []
    for path in files:
        data = path.read_bytes()
        cpu0 = time.process_time()
        kids0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall0 = time.perf_counter()
        pages: list[str] = []
        error = None
        try:
            if engine == "pdftotext":
                proc = subprocess.run(["pdftotext", "-layout", "-enc", "UTF-8", str(path), "-"],
                                      capture_output=True, check=False)
                pages = proc.stdout.decode("utf-8", "replace").split("\f")[:-1]
            elif engine == "pdfium-range":
                import pypdfium2 as pdfium

                pdf = pdfium.PdfDocument(data)
                for i in range(len(pdf)):
                    page = pdf[i]
                    textpage = page.get_textpage()
                    pages.append(textpage.get_text_range())
                    textpage.close()
                    page.close()
                pdf.close()
            elif engine == "reader":
                from bastion.readers.base import Document, Limits
                from bastion.readers.dispatch import read_document
                from bastion.readers.runtime.context import LocalContext

                got = read_document(Document(data, path.name, "application/pdf"),
                                    LocalContext(Limits(), {}))
                pages = got.text.split("\f") if got.text else []
                error = None if got.status in ("ok", "empty") else got.error
            else:
                pages = [e.get("text", "") for e in iter_pdf(data, engine, 10**9)
                         if "page" in e]
        except Exception as e:  # an engine that fails on a file scores nothing on it
            error = f"{type(e).__name__}: {e}"
        kids1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = time.process_time() - cpu0 + (kids1.ru_utime - kids0.ru_utime) + (
            kids1.ru_stime - kids0.ru_stime)
        results.append({"file": path.name, "pages": len(pages), "cpu": cpu,
                        "wall": time.perf_counter() - wall0, "text": "\f".join(pages),
                        "error": error})
    rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
              resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    out.write_text(json.dumps({"engine": engine, "rss_kib": rss, "files": results}))


def _spawn(engine: str, files: list[Path], tmp: Path) -> dict:
    out = tmp / f"{engine}.json"
    listing = tmp / "files.txt"
    listing.write_text("\n".join(str(f) for f in files))
    subprocess.run([sys.executable, __file__, "--child", engine, "--list", str(listing),
                    "--out", str(out)], check=True)
    return json.loads(out.read_text())


def _tokens(text: str, n: int = 1) -> Counter:
    words = TOKEN.findall(text.lower())
    return Counter(words) if n == 1 else Counter(zip(*(words[i:] for i in range(n))))


def _agreement(run: dict, ref: dict, n: int = 1) -> float:
    common = total = 0
    for mine, theirs in zip(run["files"], ref["files"]):
        a, b = _tokens(mine["text"], n), _tokens(theirs["text"], n)
        common += sum((a & b).values())
        total += sum(a.values()) + sum(b.values())
    return 2 * common / total if total else 1.0


def _table(runs: dict[str, dict]) -> str:
    base = runs.get("pdftotext")
    refs = [r for r in ("pdftotext", "pdfplumber") if r in runs]
    head = ["engine", "files failed", "pages", "CPU s", "pages / CPU s", "CPU vs pdftotext",
            "peak RSS MiB"] + [f"agreement vs {r}" for r in refs] + [
            f"order vs {r}" for r in refs[:1]]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, run in runs.items():
        files = run["files"]
        pages = sum(f["pages"] for f in files)
        cpu = sum(f["cpu"] for f in files)
        ratio = (f"{cpu / sum(f['cpu'] for f in base['files']):.2f}×" if base else "")
        row = [name, str(sum(1 for f in files if f["error"])), str(pages), f"{cpu:.1f}",
               f"{pages / cpu:.0f}" if cpu else "-", ratio, f"{run['rss_kib'] / 1024:.0f}"]
        row += [f"{_agreement(run, runs[r]):.3f}" for r in refs]
        row += [f"{_agreement(run, runs[r], 2):.3f}" for r in refs[:1]]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _timed(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> dict:
    """One process and the children it waits for: wall and CPU seconds, exit code."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    return {"wall": time.monotonic() - t0, "cpu": ru.ru_utime + ru.ru_stime,
            "rc": os.waitstatus_to_exitcode(status)}


def _same_outputs(a: Path, b: Path) -> bool:
    """Two sweeps' records and extract directories hold the same bytes."""
    if (a / "extract.jsonl").read_bytes() != (b / "extract.jsonl").read_bytes():
        return False
    pending = [filecmp.dircmp(a / "extract", b / "extract")]
    while pending:
        cmp = pending.pop()
        if cmp.left_only or cmp.right_only or cmp.funny_files:
            return False
        if filecmp.cmpfiles(cmp.left, cmp.right, cmp.common_files, shallow=False)[1:] != ([], []):
            return False
        pending += cmp.subdirs.values()
    return True


def sweeps(pdf_dir: Path, rounds: int, against: Path | None, tmp: Path) -> str:
    """The sweep rows against a bare pdftotext loop, as a Markdown table."""
    manifest = tmp / "manifest.yaml"
    manifest.write_text(f"version: 1\nroots:\n  - name: c\n    path: {pdf_dir.resolve()}\n"
                        "limits:\n  max_file_bytes: 64MiB\n")
    loop = ("for f in " + shlex.quote(str(pdf_dir.resolve())) + "/*.pdf; do "
            'pdftotext -layout -enc UTF-8 "$f" -; done')
    commands: dict[str, tuple[list[str], Path | None]] = {"pdftotext-loop": (["sh", "-c", loop],
                                                                               None)}
    trees = {"": ROOT} | ({" (--against)": against.resolve()} if against else {})
    compile_trees(*trees.values())  # bytecode, as an installed package has it
    for tag, tree in trees.items():
        for jobs in (1, 2):
            commands[f"sweep-j{jobs}{tag}"] = ([sys.executable, "-m", "bastion", "sweep",
                                                str(manifest), "-q", "-j", str(jobs),
                                                "--no-external"], tree)
        commands[f"reader{tag}"] = ([sys.executable, str(tree / "bench" / "pdf_engines.py"),
                                      "--child", "reader", "--list", str(tmp / "files.txt"),
                                      "--out", str(tmp / "reader.json")], tree)
    (tmp / "files.txt").write_text("\n".join(str(f) for f in sorted(pdf_dir.glob("*.pdf"))))
    names = list(commands)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[: r % len(names)]:
            argv, tree = commands[name]
            env = None
            if name.startswith("reader"):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                got = _timed(argv, cwd=tree, env=env)
                if got["rc"] != 0:
                    raise SystemExit(f"{name} exited {got['rc']}")
                files = json.loads((tmp / "reader.json").read_text())["files"]
                runs[name].append({"cpu": sum(f["cpu"] for f in files),
                                   "wall": sum(f["wall"] for f in files)})
                continue
            if tree is not None:
                out = tmp / f"out-{name.replace(' ', '')}"
                subprocess.run(["rm", "-rf", str(out)], check=True)
                argv = argv + ["--out", str(out)]
                env = {**os.environ, "PYTHONPATH": str(tree)}
            got = _timed(argv, cwd=tree, env=env)
            if got["rc"] not in (0, 2):  # 2: some documents failed (encrypted ones)
                raise SystemExit(f"{name} exited {got['rc']}")
            runs[name].append(got)
        print(f"  round {r + 1}/{rounds} done", file=sys.stderr)
    base = runs["pdftotext-loop"]
    head = ["command", "CPU s", "wall s", "CPU: the loop / it", "wall: the loop / it"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name in names:
        rs = runs[name]
        row = [name, f"{statistics.median(x['cpu'] for x in rs):.2f}",
               f"{statistics.median(x['wall'] for x in rs):.2f}"]
        for key in ("cpu", "wall"):
            row.append(f"{statistics.median(b[key] / x[key] for b, x in zip(base, rs)):.2f}×")
        lines.append("| " + " | ".join(row) + " |")
    if against:
        for what in ("sweep-j1", "sweep-j2", "reader"):
            mine, theirs = runs[what], runs[f"{what} (--against)"]
            cpu, wall = (statistics.median(t[k] / m[k] for m, t in zip(mine, theirs))
                         for k in ("cpu", "wall"))
            lines.append(f"\n{what}, --against / this tree, pairwise medians: CPU {cpu:.3f}×, "
                         f"wall {wall:.3f}×")
        same = all(_same_outputs(tmp / f"out-sweep-j{j}", tmp / f"out-sweep-j{j}(--against)")
                   for j in (1, 2))
        lines.append(f"\nrecords and texts of the two trees byte-identical: {same}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", type=Path, help="a directory of PDFs")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--big", type=int, help="peak RSS on a generated PDF of this many pages")
    ap.add_argument("--sweeps", action="store_true",
                    help="time whole sweeps against a bare pdftotext loop instead")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--against", type=Path, help="with --sweeps: an earlier tree to compare")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--list", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _run_engine(args.child, [Path(p) for p in args.list.read_text().splitlines()],
                    args.out)
        return 0
    engines = [e for e in args.engines.split(",") if e]
    with tempfile.TemporaryDirectory(prefix="pdfbench-") as tmpname:
        tmp = Path(tmpname)
        if args.sweeps:
            if not args.dir:
                ap.error("--sweeps needs a directory of PDFs")
            print(f"{len(list(args.dir.glob('*.pdf')))} files, {args.rounds} rounds")
            print(sweeps(args.dir, args.rounds, args.against, tmp))
            return 0
        if args.big:
            sys.path.insert(0, str(ROOT / "tests"))
            from pdfgen import make_many_pages

            files = [tmp / f"big-{args.big}.pdf"]
            files[0].write_bytes(make_many_pages(args.big))
            print(f"generated PDF: {args.big} pages, {files[0].stat().st_size // 1024} KiB")
        elif args.dir:
            files = sorted(args.dir.glob("*.pdf"))
        else:
            ap.error("give a directory of PDFs or --big N")
        print(f"{len(files)} files")
        runs = {}
        for engine in engines:
            started = time.perf_counter()
            runs[engine] = _spawn(engine, files, tmp)
            print(f"  {engine}: {time.perf_counter() - started:.1f} s wall", file=sys.stderr)
        print(_table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
