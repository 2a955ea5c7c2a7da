"""Bastion's OCR path against a bare ``tesseract`` CLI loop on the same images, side by side.

    python bench/ocr.py [--rounds N] [--images DIR ...] [--out FILE]

The images: ``examples/docs/scanned-note.png``, the images of the peer corpus
(``bench/.corpus/peers/image``, when bench/corpus.py has built it) and every page of the
scanned PDFs of ``tests/samples/pdf`` and of the corpus that the PDF reader OCRs, rendered as
the reader renders them (gray PGM at ``ocr_dpi``, PDFium).  They are written to a temporary
directory once; every round then runs, in a rotating order, one process per command:

* ``cli-loop``: ``sh -c 'for f in …; do tesseract "$f" stdout -l eng [--dpi N] tsv; done'``
  (what a user's script does: one process per image, the model loaded every time);
* ``bastion-cli``: bastion's OCR code (readers/ocr/reader.py) over the same files in one process,
  with the warm engine off (``ocr.USE_LIBRARY = False``: one ``tesseract`` per image, as
  before), images through the image reader, pages through :func:`bastion.readers.ocr.reader.ocr_image`;
* ``bastion-warm``: the same with the warm engine (readers/ocr/engine.py);
* ``engine-alone``: the warm engine's ``tsv()`` on each file's bytes and nothing else (no
  Pillow, no reader), in a process that starts and imports as the others: the floor any
  change around the engine can reach, as long as the engine's answer stays the same.

Each process runs with ``OMP_THREAD_LIMIT=1`` (one core); CPU is user + system of the process
tree (``os.wait4``), the measure to quote on a loaded machine, with wall beside it.  Ratios are
taken pairwise per round (median).  Agreement: the texts of ``bastion-warm`` against
``bastion-cli`` (equal texts; token recall and precision over ``\\w+`` tokens) and against
the bare command's text on the original images (what scaling to 300 dpi changes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOKEN = re.compile(r"\w+")
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"}

DRIVER = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from bastion.readers import ocr
from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import read_document
from bastion.readers.runtime.context import LocalContext
import mimetypes, shutil
mode, listing, outdir = sys.argv[2], sys.argv[3], Path(sys.argv[4])
ocr.USE_LIBRARY = mode != "cli"
tools = {"tesseract": shutil.which("tesseract")}
if mode == "engine":  # the library alone: what no code around it can go below
    from bastion.readers import tessapi
    import subprocess
    version = subprocess.run([tools["tesseract"], "--version"], capture_output=True).stdout
    engine = tessapi.engine(version.split()[1].decode().lstrip("v"))
for i, line in enumerate(Path(listing).read_text().splitlines()):
    path, dpi = line.rsplit("\t", 1)
    if mode == "engine":
        tsv = engine.tsv(Path(path).read_bytes(), dpi=int(dpi) or None)
        (outdir / f"{i}.txt").write_text(ocr.parse_tsv(tsv).text, encoding="utf-8")
        continue
    ctx = LocalContext(Limits(deadline_s=600, tool_deadline_s=600), tools,
                       tmpdir=outdir / "scratch")
    data = Path(path).read_bytes()
    if path.endswith(".pgm"):
        text = ocr.ocr_image(data, ctx, dpi=int(dpi)).text
        meta = {}
    else:
        rec = read_document(Document(data, Path(path).name, mimetypes.guess_type(path)[0] or ""), ctx)
        text = rec.text or ""
        meta = (rec.result.details if hasattr(rec, "result") else rec.meta).get("ocr", {})
    (outdir / f"{i}.txt").write_text(text, encoding="utf-8")
    (outdir / f"{i}.json").write_text(json.dumps(meta), encoding="utf-8")
'''


def collect(extra: list[Path], work: Path) -> list[tuple[Path, int]]:
    """(file, dpi) per image: images as they are, scanned PDF pages rendered to PGM."""
    sys.path.insert(0, str(ROOT))
    import pypdfium2 as pdfium

    from bastion.readers.base import Limits, Document
    from bastion.readers.dispatch import read_document
    from bastion.readers.runtime.context import LocalContext

    images = [ROOT / "examples" / "docs" / "scanned-note.png"]
    pdfs = sorted((ROOT / "tests" / "samples" / "pdf").glob("*.pdf"))
    corpus = HERE / ".corpus" / "peers"
    for d in [corpus / "image", *extra]:
        if d.is_dir():
            images += sorted(p for p in d.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if (corpus / "pdf").is_dir():
        pdfs += sorted((corpus / "pdf").glob("*.pdf"))
    out: list[tuple[Path, int]] = [(p, 0) for p in images]
    dpi = Limits().ocr_dpi
    tools = {"pdftotext": "/usr/bin/pdftotext", "pdftoppm": "/usr/bin/pdftoppm",
             "tesseract": "/usr/bin/tesseract"}
    for pdf in pdfs:  # the pages the PDF reader sends to OCR
        rec = read_document(Document(pdf.read_bytes(), pdf.name, "application/pdf"),
                            LocalContext(Limits(), tools, tmpdir=work / "scratch"))
        pages = [s["page"] for s in rec.result.page_sources or () if s.get("source") == "ocr"]
        if not pages:
            continue
        doc = pdfium.PdfDocument(pdf)
        for n in pages:
            page = doc[n - 1]
            w, h = page.get_size()
            d = max(1, min(dpi, int((2480 * 3508 / max(w * h / 5184, 1.0)) ** 0.5)))
            im = page.render(scale=d / 72, grayscale=True, draw_annots=False,
                             may_draw_forms=False).to_pil().convert("L")
            target = work / "pages" / f"{pdf.stem}-p{n}.pgm"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"P5\n%d %d\n255\n" % im.size + im.tobytes())
            out.append((target, d))
        doc.close()
    return out


def run(argv: list[str], env: dict) -> dict:
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, ru = os.wait4(proc.pid, 0)
    if status:
        raise SystemExit(f"{argv[:3]} failed: {err.decode(errors='replace')[-2000:]}")
    return {"wall": time.monotonic() - t0, "cpu": ru.ru_utime + ru.ru_stime}


def tokens(text: str) -> Counter:
    return Counter(t.lower() for t in TOKEN.findall(text))


def agree(a: list[str], b: list[str]) -> dict:
    """Token recall and precision of ``a`` against ``b`` (multisets, summed over files)."""
    common = sum(sum((tokens(x) & tokens(y)).values()) for x, y in zip(a, b))
    na, nb = sum(sum(tokens(x).values()) for x in a), sum(sum(tokens(y).values()) for y in b)
    return {"recall": common / nb if nb else 1.0, "precision": common / na if na else 1.0,
            "equal": sum(1 for x, y in zip(a, b) if x == y)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--images", type=Path, nargs="*", default=[])
    ap.add_argument("--out", type=Path, default=HERE / "results" / "ocr.md")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-ocr-"))
    files = collect(args.images, work)
    listing = work / "files.tsv"
    listing.write_text("".join(f"{p}\t{d}\n" for p, d in files))
    driver = work / "driver.py"
    driver.write_text(DRIVER)
    script = work / "loop.sh"
    script.write_text("".join(
        f"tesseract '{p}' stdout -l eng {'--dpi ' + str(d) + ' ' if d else ''}tsv\n"
        for p, d in files))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_THREAD_LIMIT": "1"}
    outs = {m: work / m for m in ("cli", "warm", "engine")}
    cmds = {
        "cli-loop": ["sh", str(script)],
        "bastion-cli": [sys.executable, str(driver), str(ROOT), "cli", str(listing),
                        str(outs["cli"])],
        "bastion-warm": [sys.executable, str(driver), str(ROOT), "warm", str(listing),
                         str(outs["warm"])],
        "engine-alone": [sys.executable, str(driver), str(ROOT), "engine", str(listing),
                         str(outs["engine"])],
    }
    for d in outs.values():
        d.mkdir()
    names = list(cmds)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    load0 = os.getloadavg()
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            runs[n].append(run(cmds[n], env))
            print(f"round {r + 1} {n}: {runs[n][-1]}", file=sys.stderr)
    load1 = os.getloadavg()
    texts = {m: [(outs[m] / f"{i}.txt").read_text() for i in range(len(files))] for m in outs}
    metas = [json.loads((outs["warm"] / f"{i}.json").read_text()) for i in range(len(files))]
    bare = [subprocess.run(["tesseract", str(p), "stdout", "-l", "eng"]
                           + (["--dpi", str(d)] if d else []), capture_output=True,
                           env=env).stdout.decode("utf-8", "replace") for p, d in files]
    a_cli = agree(texts["warm"], texts["cli"])
    a_bare = agree(texts["warm"], bare)
    a_bare_cli = agree(texts["cli"], bare)
    scaled = sum(1 for m in metas if m.get("scaled"))
    skipped = sum(1 for m in metas if m.get("skipped"))
    pixels = 0
    from PIL import Image
    for p, _ in files:
        with Image.open(p) as im:
            pixels += im.width * im.height
    lines = [
        f"{len(files)} images ({sum(1 for _, d in files if not d)} image files, "
        f"{sum(1 for _, d in files if d)} scanned PDF pages; {pixels / 1e6:.0f} Mpixel); "
        f"{args.rounds} rounds; load average {load0[0]:.1f} before, {load1[0]:.1f} after; "
        "each process on one core (OMP_THREAD_LIMIT=1).\n",
        "| command | wall s (median) | CPU s (median) | images per CPU s | vs cli-loop (CPU, "
        "pairwise) | vs cli-loop (wall, pairwise) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for n in names:
        ms = runs[n]
        rc = statistics.median(b["cpu"] / a["cpu"] for a, b in zip(ms, runs["cli-loop"]))
        rw = statistics.median(b["wall"] / a["wall"] for a, b in zip(ms, runs["cli-loop"]))
        cpu = statistics.median(m["cpu"] for m in ms)
        lines.append(f"| {n} | {statistics.median(m['wall'] for m in ms):.2f} | {cpu:.2f} | "
                     f"{len(files) / cpu:.2f} | {rc:.2f}× | {rw:.2f}× |")
    lines += [
        "",
        f"bastion-warm against bastion-cli: {a_cli['equal']} of {len(files)} texts equal; "
        f"recall {a_cli['recall']:.4f}, precision {a_cli['precision']:.4f}.",
        f"Against the bare command's text on the original images: bastion-warm recall "
        f"{a_bare['recall']:.4f} precision {a_bare['precision']:.4f}; bastion-cli recall "
        f"{a_bare_cli['recall']:.4f} precision {a_bare_cli['precision']:.4f} "
        f"({scaled} images scaled to 300 dpi, {skipped} skipped as blank).",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
