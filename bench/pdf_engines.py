"""Compare the PDF text engines on a directory of real PDFs: speed, memory, agreement.

    python bench/pdf_engines.py DIR [--engines pdftotext,pdfium,pdfium-range,pdfplumber]
    python bench/pdf_engines.py --big 1000   # peak RSS of each engine on a generated PDF

Each engine runs in a process of its own (so its CPU time and peak RSS are its own) over every
``*.pdf`` in DIR, one file after another:

* ``pdftotext``      a bare ``pdftotext -layout -enc UTF-8 FILE -`` loop (CPU of the children);
* ``pdfium``         bastion's PDFium engine (:func:`bastion.readers.pdf.iter_pdf`, ``get_text_bounded``);
* ``pdfium-range``   the same pages through PDFium's ``get_text_range`` instead;
* ``pdfplumber``     bastion's pdfplumber engine (:func:`bastion.readers.pdf.iter_pdf`);
* ``reader``         the whole PDF reader (``read_document``: engine chain, per-page verdicts,
                     annotations, provenance), no external tools.

Agreement is the token F1 against a reference engine's text of the same files: tokens are
``\\w+`` runs, lower-cased, counted as multisets (2·|A∩B| / (|A|+|B|), summed over the files);
"order" is the same F1 over token bigrams, which also counts words out of reading order
(rotated text read in the wrong direction, lines glued).
Files that an engine could not open count as zero tokens for it.  The table is Markdown.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENGINES = ("pdftotext", "pdfium", "pdfium-range", "pdfplumber")  # and "reader"
TOKEN = re.compile(r"\w+")


def _run_engine(engine: str, files: list[Path], out: Path) -> None:
    """Child: extract every file with one engine; write per-file texts, CPU and RSS as JSON."""
    sys.path.insert(0, str(ROOT))
    from bastion.readers.pdf import iter_pdf

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
                from bastion.readers.context import LocalContext

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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", nargs="?", type=Path, help="a directory of PDFs")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--big", type=int, help="peak RSS on a generated PDF of this many pages")
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
