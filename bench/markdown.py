"""Bastion's Markdown against markitdown's, on the bench corpus: the structure each finds,
against what the documents hold.

    python bench/corpus.py                                  # once: bench/.corpus/peers
    python bench/markdown.py [--corpus DIR] [--formats docx,xlsx,…] [--out FILE]

For every file of the formats both read, bastion's Markdown (``Extractor(markdown=True)``:
the sandboxed workers of a sweep, the built-in readers and the tools on PATH) and
markitdown's (``MarkItDown().convert``, in its own venv ``bench/.venvs/markitdown``, made when
missing, offline) are parsed by the same CommonMark parser (markdown-it-py, GFM tables on),
and four kinds of structure are collected from each: headings, list items, table cells (not
empty) and links (their targets, http/https/mailto).  Each is matched against a reference
read independently of both tools, as multisets of normalised texts (case folded, blanks
collapsed, a number as its value: ``1.0`` = ``1``), so a tool scores what it found of what the
document holds, not what it invented:

* DOCX, ODT, RTF, XLSX, ODS: LibreOffice's HTML export (``soffice --headless --convert-to
  html``): ``<h1>``–``<h6>``, ``<li>``, ``<td>``/``<th>``, ``<a href>``;
* PPTX and ODP: the slides' XML counted directly: title placeholders (``p:ph type="title"``,
  ``presentation:class="title"``), paragraphs with an explicit bullet (``a:buChar``,
  ``a:buAutoNum``; ODF list items), table cells, hyperlinks (slide relationships; ``text:a``);
* HTML and EPUB: the (X)HTML itself through Python's ``html.parser``; e-mail: its HTML parts so;
* PDF: the outline's entries as headings (pdfminer's ``get_outlines``; PDFs carry no list,
  table or link structure either tool reads);
* CSV: the ``csv`` module's cells.

Prints a Markdown report (per format and kind: reference, bastion found, markitdown found;
the raw counts beside) and writes it to ``--out`` (default ``bench/results/markdown.md``).
References are cached in ``bench/.corpus/refs-markdown/``.
"""

from __future__ import annotations

import argparse
import csv
import email
import email.policy
import html.parser
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from peers import ensure_venv, peer_env  # noqa: E402

FORMATS = ("docx", "xlsx", "pptx", "odt", "ods", "odp", "html", "epub", "rtf", "eml", "pdf",
           "csv")
KINDS = ("headings", "list items", "table cells", "links")
LIBREOFFICE = ("docx", "odt", "rtf", "xlsx", "ods")
REFS = HERE / ".corpus" / "refs-markdown"
REF_VERSION = 1
EXTERNAL = re.compile(r"(?:https?|mailto):", re.I)

DRIVER = r'''
import json, os, signal, sys
listing, outdir = sys.argv[1], sys.argv[2]
from markitdown import MarkItDown
md = MarkItDown(enable_plugins=False)
def _alarm(*_):
    raise TimeoutError("per-file timeout (120 s)")
signal.signal(signal.SIGALRM, _alarm)
status = {}
for i, path in enumerate(open(listing, encoding="utf-8").read().splitlines()):
    signal.alarm(120)
    try:
        text = md.convert(path).text_content or ""
        status[path] = "ok"
    except BaseException as e:  # noqa: BLE001 - a file that fails finds nothing
        if isinstance(e, KeyboardInterrupt):
            raise
        text, status[path] = "", f"{type(e).__name__}: {str(e)[:200]}"
    finally:
        signal.alarm(0)
    with open(os.path.join(outdir, f"{i}.md"), "w", encoding="utf-8", errors="replace") as f:
        f.write(text)
json.dump(status, open(os.path.join(outdir, "status.json"), "w"))
'''


_SECTION = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[a-z]\.|[ivxlc]+\.)\s+|^sheet \d+: ")


def heading(text: str) -> str:
    """A heading as compared: :func:`norm`, its section number (``2.3``) or a LibreOffice
    sheet heading's ``Sheet N:`` aside (the outline or the export names it without)."""
    return _SECTION.sub("", norm(text))


def norm(text: str) -> str:
    """A text as compared: case folded, blanks collapsed, a number as its value."""
    text = " ".join(text.split()).casefold()
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return text
    return format(value, ".15g") if value == value else text


def link_key(href: str) -> str:
    """A link's target as compared: percent-decoded (a renderer may encode it), no trailing
    slash."""
    from urllib.parse import unquote

    return unquote(href.strip()).rstrip("/")


def structure() -> dict[str, Counter]:
    return {k: Counter() for k in KINDS}


# -- Markdown, parsed ----------------------------------------------------------------------------

def of_markdown(md: str) -> dict[str, Counter]:
    """The four kinds of structure a Markdown holds, as a CommonMark reader sees them."""
    import markdown_it

    found = structure()
    toks = markdown_it.MarkdownIt("commonmark").enable("table").parse(md)

    def text(tok) -> str:  # a line break (soft, hard, <br>) read as the space it shows
        return "".join(c.content if c.type in ("text", "code_inline") else " "
                       for c in tok.children or ()
                       if c.type in ("text", "code_inline", "softbreak", "hardbreak")
                       or (c.type == "html_inline" and c.content.lower().startswith("<br")))

    for i, tok in enumerate(toks):
        if tok.type == "heading_open":
            found["headings"][heading(text(toks[i + 1]))] += 1
        elif tok.type == "list_item_open":
            nxt = next((t for t in toks[i + 1:i + 4] if t.type == "inline"), None)
            if nxt is not None and text(nxt).strip():
                found["list items"][norm(text(nxt))] += 1
        elif tok.type in ("td_open", "th_open"):
            value = text(toks[i + 1]).strip()
            if value:
                found["table cells"][norm(value)] += 1
        elif tok.type == "inline":
            for child in tok.children or ():
                if child.type == "link_open":
                    href = str(child.attrs.get("href", ""))
                    if EXTERNAL.match(href):
                        found["links"][link_key(href)] += 1
    return found


# -- references ----------------------------------------------------------------------------------

class _HtmlCounts(html.parser.HTMLParser):
    """Headings, list items, table cells and links of an HTML document (script and style
    left out)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found = structure()
        self.open: list[tuple[str, list[str]]] = []
        self.skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("br", "p", "div") and self.open:  # a line break inside: a space
            self.open[-1][1].append(" ")
        if tag in ("script", "style"):
            self.skip += 1
        elif tag in ("h1", "h2", "h3", "h4", "h5", "h6", "li", "td", "th"):
            self.open.append((tag, []))
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            if EXTERNAL.match(href):
                self.found["links"][link_key(href)] += 1

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
            return
        for k in range(len(self.open) - 1, -1, -1):
            if self.open[k][0] == tag:
                name, parts = self.open.pop(k)
                value = " ".join("".join(parts).split())
                if value:
                    kind = ("headings" if name.startswith("h") else
                            "list items" if name == "li" else "table cells")
                    self.found[kind][heading(value) if kind == "headings" else norm(value)] += 1
                return

    def handle_data(self, data):
        if not self.skip:
            for _, parts in self.open[-1:]:
                parts.append(data)


def of_html(text: str) -> dict[str, Counter]:
    parser = _HtmlCounts()
    parser.feed(text)
    parser.close()
    return parser.found


def _merge(into: dict[str, Counter], more: dict[str, Counter]) -> None:
    for k in KINDS:
        into[k].update(more[k])


def of_ooxml_slides(path: Path) -> dict[str, Counter]:
    """A PPTX's slides counted in their XML: title placeholders, explicitly bulleted
    paragraphs, table cells, hyperlinks."""
    from xml.etree import ElementTree as ET

    a = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
    p = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
    r = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
    found = structure()
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if not re.fullmatch(r"ppt/slides/slide\d+\.xml", name):
                continue
            root = ET.fromstring(zf.read(name))
            rels_name = name.replace("slides/", "slides/_rels/") + ".rels"
            targets = {}
            if rels_name in zf.namelist():
                for rel in ET.fromstring(zf.read(rels_name)):
                    targets[rel.get("Id")] = rel.get("Target", "")
            for sp in root.iter(p + "sp"):
                ph = sp.find(f".//{p}ph")
                title = ph is not None and ph.get("type") in ("title", "ctrTitle")
                texts = ["".join(t.text or "" for t in para.iter(a + "t"))
                         for para in sp.iter(a + "p")]
                if title and " ".join(texts).strip():
                    found["headings"][heading(" ".join(t for t in texts if t.strip()))] += 1
            for para in root.iter(a + "p"):
                ppr = para.find(a + "pPr")
                text = "".join(t.text or "" for t in para.iter(a + "t"))
                if ppr is not None and (ppr.find(a + "buChar") is not None
                                        or ppr.find(a + "buAutoNum") is not None) and text.strip():
                    found["list items"][norm(text)] += 1
            for tc in root.iter(a + "tc"):
                text = " ".join("".join(t.text or "" for t in para.iter(a + "t"))
                                for para in tc.iter(a + "p"))
                if text.strip():
                    found["table cells"][norm(text)] += 1
            for link in root.iter(a + "hlinkClick"):
                href = targets.get(link.get(r + "id"), "")
                if EXTERNAL.match(href):
                    found["links"][link_key(href)] += 1
    return found


def of_odp(path: Path) -> dict[str, Counter]:
    """An ODP's content counted in its XML: title frames, list items, table cells, links."""
    from xml.etree import ElementTree as ET

    text_ns = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
    draw = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
    pres = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
    table = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
    xlink = "{http://www.w3.org/1999/xlink}"
    found = structure()

    def all_text(el) -> str:
        return " ".join("".join(el.itertext()).split())

    with zipfile.ZipFile(path) as zf:
        root = ET.fromstring(zf.read("content.xml"))
    for frame in root.iter(draw + "frame"):
        if frame.get(pres + "class") == "title" and all_text(frame):
            found["headings"][heading(all_text(frame))] += 1
    for item in root.iter(text_ns + "list-item"):
        first = item.find(text_ns + "p")
        if first is not None and all_text(first):
            found["list items"][norm(all_text(first))] += 1
    for cell in root.iter(table + "table-cell"):
        if all_text(cell):
            found["table cells"][norm(all_text(cell))] += 1
    for link in root.iter(text_ns + "a"):
        href = link.get(xlink + "href", "")
        if EXTERNAL.match(href):
            found["links"][link_key(href)] += 1
    return found


def of_epub(path: Path) -> dict[str, Counter]:
    found = structure()
    with zipfile.ZipFile(path) as zf:
        for name in zf.namelist():
            if name.lower().endswith((".html", ".xhtml", ".htm")):
                _merge(found, of_html(zf.read(name).decode("utf-8", "replace")))
    return found


def of_eml(path: Path) -> dict[str, Counter]:
    found = structure()
    msg = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    for part in msg.walk():
        if part.get_content_type() == "text/html":
            try:
                _merge(found, of_html(part.get_content()))
            except Exception:  # noqa: BLE001 - a damaged part counts nothing
                pass
    return found


def of_pdf(path: Path) -> dict[str, Counter]:
    found = structure()
    try:
        from pdfminer.pdfdocument import PDFDocument
        from pdfminer.pdfparser import PDFParser

        with open(path, "rb") as f:
            doc = PDFDocument(PDFParser(f))
            for _level, title, *_ in doc.get_outlines():
                if isinstance(title, str) and title.strip():
                    found["headings"][heading(title)] += 1
    except Exception:  # noqa: BLE001 - no outline (or none pdfminer reads): nothing
        pass
    return found


def of_csv(path: Path) -> dict[str, Counter]:
    found = structure()
    text = path.read_bytes().decode("utf-8", "replace")
    try:
        dialect = csv.Sniffer().sniff(text[:8192], delimiters=",;|\t")
    except csv.Error:
        dialect = csv.excel
    try:
        for row in csv.reader(io.StringIO(text, newline=""), dialect):
            for cell in row:
                if cell.strip():
                    found["table cells"][norm(cell)] += 1
    except csv.Error:
        pass  # the cells up to a malformed line
    return found


def libreoffice_html(paths: list[Path], fmt: str) -> dict[Path, str]:
    """LibreOffice's HTML export of each file (cached by file name)."""
    cache = REFS / f"v{REF_VERSION}" / fmt
    cache.mkdir(parents=True, exist_ok=True)
    todo = [p for p in paths if not (cache / (p.stem + ".html")).exists()]
    for at in range(0, len(todo), 20):
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(["soffice", f"-env:UserInstallation=file://{profile}", "--headless",
                            "--convert-to", "html", "--outdir", str(cache),
                            *map(str, todo[at:at + 20])],
                           capture_output=True, timeout=900)
    out = {}
    for p in paths:
        f = cache / (p.stem + ".html")
        out[p] = f.read_text(encoding="utf-8", errors="replace") if f.exists() else ""
    return out


def references(fmt: str, paths: list[Path]) -> dict[Path, dict[str, Counter]]:
    if fmt in LIBREOFFICE:
        return {p: of_html(t) for p, t in libreoffice_html(paths, fmt).items()}
    fn = {"pptx": of_ooxml_slides, "odp": of_odp, "epub": of_epub, "eml": of_eml,
          "pdf": of_pdf, "csv": of_csv,
          "html": lambda p: of_html(p.read_bytes().decode("utf-8", "replace"))}[fmt]
    return {p: fn(p) for p in paths}


# -- the tools -----------------------------------------------------------------------------------

def bastion_markdown(paths: list[Path]) -> dict[Path, str]:
    from bastion.extractor import Extractor

    out = {}
    with Extractor(markdown=True, jobs=2) as ex:
        for path, result in zip(paths, ex.extract_files(paths)):
            out[path] = result.markdown or ""
    return out


def markitdown_markdown(paths: list[Path]) -> dict[Path, str]:
    py = ensure_venv("markitdown", "markitdown[all]")
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "files.txt"
        listing.write_text("\n".join(str(p) for p in paths), encoding="utf-8")
        outdir = Path(tmp) / "out"
        outdir.mkdir()
        subprocess.run([str(py), "-c", DRIVER, str(listing), str(outdir)], env=peer_env(),
                       capture_output=True, timeout=3600)
        return {p: (outdir / f"{i}.md").read_text(encoding="utf-8", errors="replace")
                if (outdir / f"{i}.md").exists() else "" for i, p in enumerate(paths)}


def matched(found: Counter, ref: Counter, kind: str = "") -> int:
    """How many of ``ref`` ``found`` holds (multisets).  A list item matches a reference item
    it begins (an item's first paragraph against the whole item: the reference reads an item's
    later blocks, a code block or a second paragraph, into its text)."""
    exact = found & ref
    hits = sum(exact.values())
    if kind != "list items":
        return hits
    left_ref = list((ref - exact).elements())
    for text in (found - exact).elements():
        for i, whole in enumerate(left_ref):
            if len(text) >= 8 and whole.startswith(text):
                hits += 1
                del left_ref[i]
                break
    return hits


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", default=str(HERE / ".corpus" / "peers"))
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--out", default=str(HERE / "results" / "markdown.md"))
    args = ap.parse_args()
    corpus = Path(args.corpus)
    rows = []
    totals: dict[str, dict[str, list[int]]] = {}
    for fmt in args.formats.split(","):
        paths = sorted(p for p in (corpus / fmt).glob("*") if p.is_file())
        if not paths:
            continue
        print(f"{fmt}: {len(paths)} files", file=sys.stderr)
        refs = references(fmt, paths)
        tools = {"bastion": bastion_markdown(paths), "markitdown": markitdown_markdown(paths)}
        counts = {name: {p: of_markdown(md) for p, md in mds.items()}
                  for name, mds in tools.items()}
        for kind in KINDS:
            ref_total = sum(sum(refs[p][kind].values()) for p in paths)
            cells = [fmt, kind, str(ref_total)]
            for name in tools:
                hit = sum(matched(counts[name][p][kind], refs[p][kind], kind) for p in paths)
                raw = sum(sum(counts[name][p][kind].values()) for p in paths)
                cells.append(f"{hit} ({raw})")
                totals.setdefault(name, {}).setdefault(kind, [0, 0])
                totals[name][kind][0] += hit
                totals[name][kind][1] += raw
            rows.append(cells)
    lines = ["| format | structure | reference | bastion found (all it wrote) | "
             "markitdown found (all it wrote) |", "| --- | --- | ---: | ---: | ---: |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    report = "\n".join(lines) + "\n"
    print(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report, encoding="utf-8")
    worse = [(r[0], r[1]) for r in rows
             if int(r[3].split()[0]) < int(r[4].split()[0])]
    if worse:
        print("bastion finds fewer than markitdown: " + ", ".join(f"{f} {k}" for f, k in worse),
              file=sys.stderr)
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
