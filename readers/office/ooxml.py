"""DOCX, XLSX and PPTX (and their macro/template variants) as plain text, streamed.

One module for the three Office Open XML families; the package's main part (``_rels/.rels``,
then the MIME type, then which parts exist) decides which.  Every part is read through
:mod:`bastion.readers.office.xmlsafe`: capped decompression, an expat parser that refuses DTDs, and
:class:`~bastion.readers.office.flow.Flow` holding only the open paragraph or row.  Besides the body:
list labels, comments, headers and footers, charts (with their data), SmartArt, alt text and
embedded documents (through ``ctx.read_nested``), each with its marker line; numbers as their
format shows them (:mod:`bastion.readers.office.numfmt`); workbooks encrypted with Excel's default password
are decrypted.  The rules (what is kept, in which order, with which marker) are in
``docs/readers/office.md``.  Extractors: ``docx``, ``xlsx``, ``pptx``.  Strict OOXML (the
``purl.oclc.org`` namespaces) is not recognised.
"""

from __future__ import annotations

import math
import posixpath
import re
import zipfile
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument, EncryptedDocument, ReaderError, Unsupported
from ..metadata import DocMeta
from .numfmt import NumberFormat, compile_format
from ..render.events import Cell, Heading, ListItem, Note, Paragraph, Row, Table
from .flow import Flow, Line, block_line, flow as make_flow, marker_line, run_capped, write_line
from .xmlsafe import (Budget,
                      clean,
                      collect,
                      feed,
                      member_chunks,
                      new_parser,
                      one_line,
                      open_zip,
                      parse_xml)

if TYPE_CHECKING:
    from .docprops import Props

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main "
A = "http://schemas.openxmlformats.org/drawingml/2006/main "
P = "http://schemas.openxmlformats.org/presentationml/2006/main "
C = "http://schemas.openxmlformats.org/drawingml/2006/chart "
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main "
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships "
M = "http://schemas.openxmlformats.org/officeDocument/2006/math "
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006 "
WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing "
XDR = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing "
DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram "
O = "urn:schemas-microsoft-com:office:office "
V = "urn:schemas-microsoft-com:vml "
P188 = "http://schemas.microsoft.com/office/powerpoint/2018/8/main "
TC = "http://schemas.microsoft.com/office/spreadsheetml/2018/threadedcomments "
PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships Relationship"

DOCX_MIMES = (
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
    "application/vnd.ms-word.document.macroEnabled.12",
    "application/vnd.ms-word.template.macroEnabled.12",
)
XLSX_MIMES = (
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
    "application/vnd.ms-excel.sheet.macroEnabled.12",
    "application/vnd.ms-excel.template.macroEnabled.12",
)
PPTX_MIMES = (
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.presentationml.template",
    "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
    "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
    "application/vnd.ms-powerpoint.template.macroEnabled.12",
    "application/vnd.ms-powerpoint.slideshow.macroEnabled.12",
)
ENCRYPTED_MIME = "application/x-ooxml-encrypted"
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"

_EXT_KIND = {
    ".docx": "docx", ".docm": "docx", ".dotx": "docx", ".dotm": "docx",
    ".xlsx": "xlsx", ".xlsm": "xlsx", ".xltx": "xlsx", ".xltm": "xlsx",
    ".pptx": "pptx", ".pptm": "pptx", ".potx": "pptx", ".potm": "pptx",
    ".ppsx": "pptx", ".ppsm": "pptx",
}
_MIME_KIND = {
    **{m: "docx" for m in DOCX_MIMES}, **{m: "xlsx" for m in XLSX_MIMES},
    **{m: "pptx" for m in PPTX_MIMES},
}
_DIR_KIND = {"word": "docx", "xl": "xlsx", "ppt": "pptx"}
_DEFAULT_MAIN = {"docx": "word/document.xml", "xlsx": "xl/workbook.xml",
                 "pptx": "ppt/presentation.xml"}

_DIGITS = re.compile(r"\d+")


# -- package plumbing -------------------------------------------------------------------------


class _Package:
    """A zip package's parts, found by name case-insensitively and with ``\\`` read as
    ``/`` (some writers use either), each read under the document's byte budget."""

    def __init__(self, zf: zipfile.ZipFile, budget: Budget) -> None:
        self.zf = zf
        self.budget = budget
        self.rels_cache: dict[str, list[tuple[str, str, str]]] = {}
        self.links_cache: dict[str, dict[str, str]] = {}
        self.limit: str | None = None  # a cap met and gone past (an embed nested too deep)
        self.parts: dict[str, str] = {}
        for name in zf.namelist():
            self.parts.setdefault(name.replace("\\", "/").lower(), name)

    def __contains__(self, part: object) -> bool:
        # a relationship id that names no relationship looks up as None: not a part
        return isinstance(part, str) and part.lower() in self.parts

    def chunks(self, part: str) -> Iterator[bytes]:
        return member_chunks(self.zf, self.parts.get(part.lower(), part), self.budget)

    def like(self, folder: str, stem: str) -> list[str]:
        """Parts ``folder/stemN.xml`` (lower-cased names), in numeric order."""
        pat = re.compile(re.escape(f"{folder}/{stem}".lower()) + r"\d*\.xml$")
        return sorted((n for n in self.parts if pat.match(n)), key=_numeric_key)


def _rels_path(part: str) -> str:
    folder, base = posixpath.split(part)
    return posixpath.join(folder, "_rels", base + ".rels")


def _read_rels(pkg: _Package, part: str) -> list[tuple[str, str, str]]:
    """``(id, type, target part)`` of a part's internal relationships, in file order (read
    once per part)."""
    cached = pkg.rels_cache.get(part)
    if cached is None:
        cached = pkg.rels_cache[part] = _parse_rels(pkg, part)
    return cached


def _parse_rels(pkg: _Package, part: str) -> list[tuple[str, str, str]]:
    path = _rels_path(part)
    if path not in pkg:
        return []
    base = posixpath.dirname(part)
    rels = []
    for _, a in collect(pkg.chunks(path), path, frozenset({PKG_REL})):
        target = a.get("Target", "")
        if not target or a.get("TargetMode") == "External":
            continue
        if target.startswith("/"):
            resolved = posixpath.normpath(target.lstrip("/"))
        else:
            resolved = posixpath.normpath(posixpath.join(base, target))
        rels.append((a.get("Id", ""), a.get("Type", ""), resolved))
    return rels


def _link_targets(pkg: _Package, part: str) -> dict[str, str]:
    """``id -> target`` of a part's hyperlink relationships (external ones, as written: a
    URL), read once per part; only the Markdown uses them."""
    key = "links:" + part
    cached = pkg.links_cache.get(key)
    if cached is None:
        cached = pkg.links_cache[key] = {}
        path = _rels_path(part)
        if path in pkg:
            for _, a in collect(pkg.chunks(path), path, frozenset({PKG_REL})):
                if a.get("Type", "").endswith("/hyperlink") and a.get("Target"):
                    cached[a.get("Id", "")] = a["Target"]
    return cached


def _numeric_key(name: str) -> tuple:
    """Sort key putting ``slide2.xml`` before ``slide10.xml``."""
    return tuple(int(d) for d in _DIGITS.findall(posixpath.basename(name))), name


def _rel_map(pkg: _Package, part: str) -> dict[str, tuple[str, str]]:
    """``id -> (type, target part)`` of a part's internal relationships."""
    return {rid: (typ, target) for rid, typ, target in _read_rels(pkg, part)}


# -- what every family embeds: charts, diagrams, embedded documents, alt text -----------------

_EMBED_TYPES = ("/package", "/oleObject")
_C_PT, _C_V, _C_FMT, _A_T, _A_P = C + "pt", C + "v", C + "formatCode", A + "t", A + "p"
# chart subtrees without shown text (none nests itself)
_CHART_SKIPPED = frozenset(C + t for t in ("spPr", "txPr", "extLst", "marker", "dPt",
                                           "printSettings", "externalData", "scaling",
                                           "layout", "majorGridlines", "minorGridlines"))


def alt_line(descr: str) -> str:
    """The line a picture's (or shape's) alternative text becomes."""
    return f"[alt text: {' '.join(descr.split())}]"


class _Extras:
    """Reads the parts a document points to from its text: charts, SmartArt data, embedded
    documents (through ``ctx.read_nested``).  Each returns whole lines, bounded by the part's
    byte cap and ``max_parts``."""

    def __init__(self, pkg: _Package, ctx: Context, flow: Flow) -> None:
        self.pkg = pkg
        self.ctx = ctx
        self.flow = flow  # the document's flow: its lines typed as it types them
        self.max_parts = ctx.limits.max_parts
        self.read: set[str] = set()  # parts already shown (a chart anchored twice shows once)

    def first_time(self, part: str) -> bool:
        if part in self.read or part not in self.pkg:
            return False
        self.read.add(part)
        return True

    # -- charts ----------------------------------------------------------------------------

    def chart(self, part: str) -> list[Any]:
        """A ``[chart]`` line, the titles (chart and axes), then the data as a table: a row of
        the categories after an empty cell, and one row per series, its name and its values
        as the chart's number format shows them."""
        titles: list[str] = []
        series: list[tuple[str, list[str], list[str]]] = []
        stack: list[str] = []  # open c:title / c:ser / c:tx / c:cat / c:val / c:xVal / c:yVal
        cur: dict[str, Any] = {"name": [], "cat": {}, "val": {}, "fmt": None, "cat_fmt": None}
        pt: dict[str, Any] = {"idx": -1, "buf": []}
        state = {"t": False, "v": False, "fmtcode": False}
        points = [0]  # categories and values of the series read so far
        max_parts = self.max_parts
        watched = {C + n: n for n in ("title", "ser", "tx", "cat", "val", "xVal", "yVal")}

        p = new_parser()

        def start(tag: str, a: dict[str, str]) -> None:
            n = watched.get(tag)
            if n is None and tag in _CHART_SKIPPED:  # shape and text formatting, extensions
                p.StartElementHandler = None
                p.CharacterDataHandler = None

                def until(t: str, tag: str = tag) -> None:
                    if t == tag:
                        p.StartElementHandler = start
                        p.EndElementHandler = end
                        p.CharacterDataHandler = text
                p.EndElementHandler = until
                return
            if n is not None:
                stack.append(n)
                if n == "ser":
                    cur.update(name=[], cat={}, val={}, fmt=None, cat_fmt=None)
                elif n == "title":
                    titles.append("")
                return
            if tag == _C_PT:
                pt["idx"] = to_idx(a.get("idx"))
                pt["buf"] = []
            elif tag == _C_V:
                state["v"] = True
                pt["buf"] = []
            elif tag == _A_T and "title" in stack:
                state["t"] = True
            elif tag == _A_P and "title" in stack and titles and titles[-1]:
                titles[-1] += " "
            elif tag == _C_FMT:
                state["fmtcode"] = True
                pt["buf"] = []

        def end(tag: str) -> None:
            n = watched.get(tag)
            if n is not None:
                if stack:
                    stack.pop()
                if n == "ser":
                    cats = [_category(cur["cat"][i], cur["cat_fmt"]) for i in sorted(cur["cat"])]
                    fmt = cur["fmt"]
                    vals = [_shown(cur["val"][i], fmt) for i in sorted(cur["val"])]
                    points[0] += len(cats) + len(vals)
                    if points[0] > max_parts:
                        raise CapReached("max_parts", f"{max_parts} points in one chart")
                    series.append((" ".join("".join(cur["name"]).split()), cats, vals))
                return
            if tag == _C_V:
                state["v"] = False
                text = "".join(pt["buf"])
                where = stack[-1] if stack else ""
                if "ser" in stack and "title" not in stack:
                    if where == "tx":
                        cur["name"].append(text)
                    elif where in ("cat", "xVal"):
                        cur["cat"].setdefault(pt["idx"], text)
                    elif where in ("val", "yVal"):
                        cur["val"][pt["idx"]] = text
                elif "title" in stack and titles:
                    titles[-1] += text
            elif tag == _A_T:
                state["t"] = False
            elif tag == _C_FMT:
                state["fmtcode"] = False
                if "val" in stack or "yVal" in stack:
                    cur["fmt"] = compile_format("".join(pt["buf"]))
                elif "cat" in stack or "xVal" in stack:
                    cur["cat_fmt"] = compile_format("".join(pt["buf"]))

        def text(data: str) -> None:
            if state["v"] or state["fmtcode"]:
                pt["buf"].append(data)
            elif state["t"] and titles:
                titles[-1] += data

        p.StartElementHandler = start
        p.EndElementHandler = end
        p.CharacterDataHandler = text
        feed(p, self.pkg.chunks(part), part)
        lines: list[Any] = [t for t in (" ".join(t.split()) for t in titles) if t]
        rows: list[list[str]] = []
        last_cats: list[str] | None = None
        for name, cats, vals in series:
            if cats and cats != last_cats:
                rows.append([""] + [_cell_text(c) for c in cats])
                last_cats = cats
            row = [_cell_text(name)] + vals
            if "\t".join(row).strip():
                rows.append(row)
        if rows:
            lines += self.flow.table_lines(rows)
        return ["[chart]"] + lines if lines else []

    # -- SmartArt --------------------------------------------------------------------------

    def diagram(self, part: str) -> list[str]:
        """A ``[diagram]`` line, then the text of every node of a SmartArt data model, one line
        per paragraph, parents before children in the order of the connections."""
        texts: dict[str, list[str]] = {}
        order: list[str] = []
        children: dict[str, list[tuple[int, str]]] = {}
        roots: list[str] = []
        count = [0]  # connections read
        cur: dict[str, Any] = {"id": None, "t": False, "in_t": 0}

        def start(tag: str, a: dict[str, str]) -> None:
            if tag == DGM + "pt":
                typ = a.get("type", "node")
                mid = a.get("modelId", "")
                cur["id"] = mid if typ in ("node", "doc", "asst") else None
                if cur["id"] is not None and mid not in texts:
                    texts[mid] = []
                    order.append(mid)
                    if typ == "doc":
                        roots.append(mid)
            elif tag == DGM + "t":
                cur["in_t"] += 1
            elif tag == A + "p" and cur["in_t"] and cur["id"] is not None:
                texts[cur["id"]].append("")
            elif tag == A + "t" and cur["in_t"]:
                cur["t"] = True
            elif tag == DGM + "cxn" and a.get("type", "parOf") == "parOf":
                src, dest = a.get("srcId", ""), a.get("destId", "")
                count[0] += 1
                if count[0] + len(order) > self.max_parts:
                    raise CapReached("max_parts", f"{self.max_parts} points in one diagram")
                children.setdefault(src, []).append((to_idx(a.get("srcOrd")), dest))

        def end(tag: str) -> None:
            if tag == DGM + "pt":
                cur["id"] = None
            elif tag == DGM + "t":
                cur["in_t"] -= 1
            elif tag == A + "t":
                cur["t"] = False

        def text(data: str) -> None:
            if cur["t"] and cur["id"] is not None and texts[cur["id"]]:
                texts[cur["id"]][-1] += data

        parse_xml(self.pkg.chunks(part), part, start, end, text)
        seen: set[str] = set()
        ordered: list[str] = []
        todo = list(reversed(roots))
        while todo:  # depth first, iterative: a hostile cycle is stopped by ``seen``
            node = todo.pop()
            if node in seen:
                continue
            seen.add(node)
            ordered.append(node)
            todo.extend(d for _, d in sorted(children.get(node, ()), reverse=True))
        ordered += [n for n in order if n not in seen]
        lines = [ln for n in ordered for ln in (" ".join(t.split()) for t in texts.get(n, ()))
                 if ln]
        return ["[diagram]"] + lines if lines else []

    # -- embedded documents ----------------------------------------------------------------

    def embedded(self, part: str) -> list[Any]:
        """An embedded document read through the readers: an ``[embedded: name]`` line, then
        its text; a document no reader takes is one line saying why."""
        name = posixpath.basename(part)
        data = b"".join(self.pkg.chunks(part))
        sink = self.flow.sink.nested(max(self.ctx.limits.max_chars, 0))
        from ..containers.nested import read_embedded

        try:
            result = read_embedded(self.ctx, data, name, sink)
            extractor = result.extractor
            if result.limit is not None:  # met deeper down, gone past
                self.pkg.limit = result.limit
        except CapReached as cap:
            if cap.cap != "max_depth" or sink.chars:
                raise
            self.pkg.limit = cap.cap  # noted here; the record names the cap
            return [f"[embedded: {one_line(name)}: not read: nested too deep "
                    f"({cap.detail})]"]
        except Unsupported as e:
            return [f"[embedded: {one_line(name)}: not read: {e.message}]"]
        except ReaderError as e:
            return [f"[embedded: {one_line(name)}: not read: {e.kind}: {e.message}]"]
        text = sink.getvalue()
        if not text.strip():
            return []
        return [f"[embedded: {one_line(name)} ({extractor})]"] + self.flow.fragment(
            [ln for ln in text.splitlines() if ln and not ln.isspace()], sink)

    def related(self, rels: dict[str, tuple[str, str]], rid: str | None) -> list[Any]:
        """The lines of whatever relationship ``rid`` points to (chart, diagram, embed)."""
        typ, target = rels.get(rid or "", ("", ""))
        if not target or not self.first_time(target):
            return []
        if typ.endswith("/chart"):
            return self.chart(target)
        if typ.endswith("/diagramData"):
            return self.diagram(target)
        if typ.endswith(_EMBED_TYPES):
            return self.embedded(target)
        return []


def to_idx(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _cell_text(s: str) -> str:
    if "\t" in s or "\n" in s or "\r" in s:
        s = " ".join(s.split())
    return s


def _category(raw: str, fmt: NumberFormat | None) -> str:
    """A chart category: a number category (a date axis' serials) as its format shows it."""
    if fmt is None:
        return raw
    try:
        float(raw)
    except ValueError:
        return raw
    if fmt.kind in ("number", "literal"):
        return _shown(raw, fmt)
    return _serial_date(raw, fmt, _BASE_1900)


def _shown(raw: str, fmt: NumberFormat | None) -> str:
    """A chart value as its number format shows it (General without one)."""
    if fmt is not None:
        try:
            shown = fmt.render(float(raw))
        except ValueError:
            shown = None
        if shown is not None:
            return shown
    return _cell_text(_number(raw))


# -- the walker shared by DOCX and PPTX -------------------------------------------------------


class _Walker:
    """Dispatches expat events by tag, skips whole subtrees and takes one branch of each
    ``mc:AlternateContent`` (the first ``mc:Choice``, else the ``mc:Fallback``).

    Hot paths are kept short: the element handlers are closures doing one dict lookup, a
    skipped subtree swaps in handlers that only count depth, and text is received only
    inside a text element (the character handler is set on its start, cleared on its end).
    """

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.parser = new_parser()
        self.skip = 0  # depth inside a skipped subtree
        self.alt: list[bool] = []  # per open mc:AlternateContent: a branch was taken
        self.starts: dict[str, Callable[[dict[str, str]], None]] = {
            MC + "AlternateContent": self._alt_start,
            MC + "Choice": self._branch,
            MC + "Fallback": self._branch,
        }
        self.ends: dict[str, Callable[[], object]] = {MC + "AlternateContent": self.alt.pop}
        starts_get = self.starts.get
        ends_get = self.ends.get

        def start(tag: str, attrs: dict[str, str]) -> None:
            f = starts_get(tag)
            if f is not None:
                f(attrs)

        def end(tag: str) -> None:
            f = ends_get(tag)
            if f is not None:
                f()

        self.start = start
        self.end = end

    def _handlers(self) -> None:
        p = self.parser
        p.StartElementHandler = self.start
        p.EndElementHandler = self.end
        p.CharacterDataHandler = None

    def skip_it(self, _attrs: dict[str, str] | None = None) -> None:
        """Skip the element just started and everything in it."""
        self.skip = 1
        p = self.parser
        p.StartElementHandler = self._skip_start
        p.EndElementHandler = self._skip_end
        p.CharacterDataHandler = None

    def _skip_start(self, _tag: str, _attrs: dict[str, str]) -> None:
        self.skip += 1

    def _skip_end(self, _tag: str) -> None:
        self.skip -= 1
        if not self.skip:
            self._handlers()

    def t_on(self, _attrs: dict[str, str]) -> None:
        self.parser.CharacterDataHandler = self.flow.add

    def t_off(self) -> None:
        self.parser.CharacterDataHandler = None

    def _alt_start(self, _attrs: dict[str, str]) -> None:
        self.alt.append(False)

    def _branch(self, attrs: dict[str, str]) -> None:
        if not self.alt or self.alt[-1]:
            self.skip_it(attrs)
        else:
            self.alt[-1] = True

    def parse(self, pkg: _Package, part: str) -> None:
        self.parser = new_parser()
        self.skip = 0
        self._handlers()
        feed(self.parser, pkg.chunks(part), part)


# -- DOCX -------------------------------------------------------------------------------------

_NOTE_SEPARATORS = frozenset({"separator", "continuationSeparator", "continuationNotice"})
_MAX_LEVELS = 9  # w:ilvl 0..8
_MAX_STYLE_DEPTH = 16  # w:basedOn links followed


class _Level:
    __slots__ = ("start", "fmt", "text", "restart", "legal", "suffix")

    def __init__(self) -> None:
        self.start = 1
        self.fmt = "decimal"
        self.text: str | None = None
        self.restart: int | None = None  # w:lvlRestart: None = after any higher level
        self.legal = False
        self.suffix = "tab"


_ROMAN = ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"), (90, "xc"),
          (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"), (4, "iv"), (1, "i"))
_CARDINAL_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                   "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                   "sixteen", "seventeen", "eighteen", "nineteen", "twenty")
_ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth",
                  "ninth", "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth",
                  "fifteenth", "sixteenth", "seventeenth", "eighteenth", "nineteenth",
                  "twentieth")
# Symbol-font (private use) bullets Word writes, as the characters they draw
_BULLETS = {"\uf0b7": "\u2022", "\uf0a7": "\u25aa", "\uf0d8": "\u27a2", "\uf0fc": "\u2713",
            "\uf076": "\u2756", "\uf0a8": "\u25e6", "\uf06e": "\u25a0", "\uf0e8": "\u2794",
            "\uf02d": "-", "\uf0be": "\u2014"}


def _roman(n: int) -> str:
    if not 0 < n < 4000:
        return str(n)
    out = []
    for value, letters in _ROMAN:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


def _letters(n: int) -> str:
    """Word's letter numbering: a..z, then aa..zz, aaa..."""
    if n <= 0:
        return str(n)
    return chr(97 + (n - 1) % 26) * min((n - 1) // 26 + 1, 10)


def list_number(n: int, fmt: str) -> str:
    """``n`` in one of the list numbering formats of ECMA-376 (``w:numFmt``) or ODF
    (``style:num-format``: ``1 a A i I``); an unknown format counts in decimal."""
    if fmt in ("decimal", "1"):
        return str(n)
    if fmt in ("lowerLetter", "a"):
        return _letters(n)
    if fmt in ("upperLetter", "A"):
        return _letters(n).upper()
    if fmt in ("lowerRoman", "i"):
        return _roman(n)
    if fmt in ("upperRoman", "I"):
        return _roman(n).upper()
    if fmt == "decimalZero":
        return f"{n:02d}"
    if fmt == "ordinal":
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"
    if fmt == "cardinalText" and 0 <= n <= 20:
        return _CARDINAL_WORDS[n].capitalize()
    if fmt == "ordinalText" and 1 <= n <= 20:
        return _ORDINAL_WORDS[n - 1].capitalize()
    if fmt == "decimalEnclosedCircle" and 1 <= n <= 20:
        return chr(0x2460 + n - 1)
    if fmt in ("none", "", "bullet"):
        return ""
    return str(n)


class _Numbering:
    """``word/numbering.xml`` and the numbered paragraph styles of ``word/styles.xml``, and the
    counters of the document: the label each numbered paragraph shows (``1.``, ``a)``,
    ``iv.``, ``2.3.1``, a bullet)."""

    def __init__(self) -> None:
        self.abstract: dict[str, dict[int, _Level]] = {}
        self.nums: dict[str, tuple[str, dict[int, int], dict[int, _Level]]] = {}
        self.styles: dict[str, tuple[str | None, int | None, str | None]] = {}
        self.default_style: str | None = None
        self.style_level: dict[tuple[str, str], int] = {}  # (abstract id, style) -> ilvl
        # a list's counters: one list per abstract definition, and one of its own for each
        # num that overrides a level (w:lvlOverride: a restarted list, as Word numbers it)
        self.counters: dict[str, list[int | None]] = {}
        self.level = 0  # the list level of the last label given

    @classmethod
    def read(cls, pkg: _Package, rels: dict[str, tuple[str, str]]) -> "_Numbering | None":
        num_part = next((t for typ, t in rels.values() if typ.endswith("/numbering")), None)
        if num_part is None and "word/numbering.xml" in pkg and not rels:
            num_part = "word/numbering.xml"
        if num_part is None or num_part not in pkg:
            return None
        self = cls()
        self._read_numbering(pkg, num_part)
        if not self.nums:
            return None
        style_part = next((t for typ, t in rels.values() if typ.endswith("/styles")),
                          "word/styles.xml")
        if style_part in pkg:
            data = b"".join(pkg.chunks(style_part))
            if b"numId" in data:  # some style is numbered: read them
                self._read_styles(data, style_part)
        return self

    def _read_numbering(self, pkg: _Package, part: str) -> None:
        state: dict = {"abs": None, "num": None, "lvl": None, "override": None}

        def start(tag: str, a: dict[str, str]) -> None:
            val = a.get(W + "val", "")
            if tag == W + "abstractNum":
                state["abs"] = self.abstract.setdefault(a.get(W + "abstractNumId", ""), {})
                state["abs_id"] = a.get(W + "abstractNumId", "")
            elif tag == W + "num":
                state["num"] = [None, {}, {}]
                state["num_id"] = a.get(W + "numId", "")
            elif tag == W + "abstractNumId" and state["num"] is not None:
                state["num"][0] = val
            elif tag == W + "lvlOverride" and state["num"] is not None:
                state["override"] = min(max(to_idx(a.get(W + "ilvl")), 0), _MAX_LEVELS - 1)
            elif tag == W + "startOverride" and state["override"] is not None:
                state["num"][1][state["override"]] = to_idx(val)
            elif tag == W + "lvl":
                ilvl = min(max(to_idx(a.get(W + "ilvl")), 0), _MAX_LEVELS - 1)
                lvl = _Level()
                if state["override"] is not None and state["num"] is not None:
                    state["num"][2][state["override"]] = lvl
                elif state["abs"] is not None:
                    state["abs"][ilvl] = lvl
                state["lvl"] = lvl
                state["ilvl"] = ilvl
            elif state["lvl"] is not None:
                lvl = state["lvl"]
                if tag == W + "start":
                    lvl.start = to_idx(val)
                elif tag == W + "numFmt":
                    lvl.fmt = val
                elif tag == W + "lvlText":
                    lvl.text = val
                elif tag == W + "lvlRestart":
                    lvl.restart = to_idx(val)
                elif tag == W + "isLgl":
                    lvl.legal = val not in ("0", "false", "off")
                elif tag == W + "suff":
                    lvl.suffix = val
                elif tag == W + "pStyle" and state["abs"] is not None:
                    self.style_level[(state["abs_id"], val)] = state["ilvl"]

        def end(tag: str) -> None:
            if tag == W + "abstractNum":
                state["abs"] = None
            elif tag == W + "num" and state["num"] is not None:
                abs_id, starts, levels = state["num"]
                if abs_id is not None:
                    self.nums[state["num_id"]] = (abs_id, starts, levels)
                state["num"] = None
            elif tag == W + "lvlOverride":
                state["override"] = None
            elif tag == W + "lvl":
                state["lvl"] = None

        parse_xml(pkg.chunks(part), part, start, end)

    def _read_styles(self, data: bytes, part: str) -> None:
        state: dict = {"id": None, "num": None, "ilvl": None, "based": None, "ppr": 0}
        p = new_parser()

        def start(tag: str, a: dict[str, str]) -> None:
            if tag == W + "style":
                if a.get(W + "type", "paragraph") == "paragraph":
                    state.update(id=a.get(W + "styleId", ""), num=None, ilvl=None, based=None)
                    if a.get(W + "default") in ("1", "true", "on"):
                        self.default_style = state["id"]
            elif state["id"] is None:
                return
            elif tag == W + "basedOn":
                state["based"] = a.get(W + "val")
            elif tag == W + "numId":
                state["num"] = a.get(W + "val")
            elif tag == W + "ilvl":
                state["ilvl"] = to_idx(a.get(W + "val"))

        def end(tag: str) -> None:
            if tag == W + "style" and state["id"] is not None:
                self.styles[state["id"]] = (state["num"], state["ilvl"], state["based"])
                state["id"] = None

        def skipping(tag: str) -> Callable[[str], None]:
            def until(t: str) -> None:
                if t == tag:
                    p.StartElementHandler = start_all
                    p.EndElementHandler = end
            return until

        def start_all(tag: str, a: dict[str, str]) -> None:
            if tag in _STYLE_SKIPPED:  # run, table and latent-style properties: no numbering
                p.StartElementHandler = None
                p.EndElementHandler = skipping(tag)
            else:
                start(tag, a)

        p.StartElementHandler = start_all
        p.EndElementHandler = end
        feed(p, [data], part)

    def _style_num(self, style: str | None) -> tuple[str | None, int | None]:
        for _ in range(_MAX_STYLE_DEPTH):
            if style is None or style not in self.styles:
                return None, None
            num, ilvl, based = self.styles[style]
            if num is not None:
                if ilvl is None:
                    abs_id = self.nums.get(num, ("",))[0]
                    ilvl = self.style_level.get((abs_id, style), 0)
                return num, ilvl
            style = based
        return None, None

    def label(self, num_id: str | None, ilvl: int | None, style: str | None) -> str:
        """The label of the next paragraph with this numbering, counting it."""
        if num_id is None:
            num_id, s_ilvl = self._style_num(style or self.default_style)
            if ilvl is None:
                ilvl = s_ilvl
        if not num_id or num_id == "0" or num_id not in self.nums:
            return ""
        abs_id, starts, overrides = self.nums[num_id]
        levels = {**self.abstract.get(abs_id, {}), **overrides}
        ilvl = min(max(ilvl or 0, 0), _MAX_LEVELS - 1)
        self.level = ilvl
        lvl = levels.get(ilvl)
        if lvl is None:
            return ""
        own = bool(starts or overrides)
        counters = self.counters.setdefault(f"num:{num_id}" if own else abs_id,
                                            [None] * _MAX_LEVELS)
        _count(counters, levels, ilvl, starts.get(ilvl, lvl.start))
        label = _level_text(lvl, ilvl, levels, counters).strip()
        if not label:
            return ""
        return label if lvl.suffix == "nothing" else label + " "


def _count(counters: list[int | None], levels: dict[int, _Level], ilvl: int,
           start: int) -> None:
    """A paragraph counted at level ``ilvl`` (``start``: the level's first number, which
    w:startOverride replaces in its list at every restart); the deeper levels that restart
    after it set back."""
    count = counters[ilvl]
    counters[ilvl] = start if count is None else count + 1
    for d in range(ilvl + 1, _MAX_LEVELS):
        deeper = levels.get(d)
        if deeper is None or deeper.restart is None or (deeper.restart and
                                                        ilvl < deeper.restart):
            counters[d] = None


def _level_text(lvl: _Level, ilvl: int, levels: dict[int, _Level],
                counters: list[int | None]) -> str:
    """A level's label text: its bullet characters, or its ``%N`` references replaced by
    the levels' numbers in their formats."""
    text = lvl.text if lvl.text is not None else f"%{ilvl + 1}."
    if lvl.fmt == "bullet":
        return "".join(_BULLETS.get(ch, "\u2022" if "\ue000" <= ch <= "\uf8ff" else ch)
                       for ch in text)

    def number(m: re.Match) -> str:
        k = int(m.group(1)) - 1
        level = levels.get(k)
        if level is None:
            return ""
        count = counters[k]
        n = count if count is not None else level.start
        fmt = "decimal" if lvl.legal and level.fmt != "none" else level.fmt
        return list_number(n, fmt)
    return _LEVEL_REF.sub(number, text)


_LEVEL_REF = re.compile(r"%([1-9])")
_STYLE_SKIPPED = frozenset(W + t for t in ("rPr", "tblPr", "tcPr", "trPr", "latentStyles",
                                          "rPrDefault", "tblStylePr"))


_HEADING_NAME = re.compile(r"heading\s*([1-9])")


def _heading_styles(pkg: _Package, rels: dict[str, tuple[str, str]]) -> dict[str, int]:
    """``styleId -> heading level`` (1…) of the paragraph styles of ``word/styles.xml``
    that are headings: named ``heading N`` or ``Title`` (Word's built-in names, whatever
    the display language), or with an outline level (``w:outlineLvl`` 0-8), ``w:basedOn``
    followed.  Read for the Markdown only."""
    part = next((t for typ, t in rels.values() if typ.endswith("/styles")), "word/styles.xml")
    if part not in pkg:
        return {}
    styles: dict[str, tuple[int | None, str | None]] = {}
    cur: dict[str, Any] = {"id": None, "level": None, "based": None, "depth": 0}

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == W + "style":
            if a.get(W + "type", "paragraph") == "paragraph" and len(styles) < 100_000:
                cur.update(id=a.get(W + "styleId", ""), level=None, based=None)
        elif cur["id"] is None:
            return
        elif tag == W + "name":
            name = a.get(W + "val", "").strip().lower()
            m = _HEADING_NAME.fullmatch(name)
            if m:
                cur["level"] = int(m.group(1))
            elif name == "title":
                cur["level"] = 1
        elif tag == W + "outlineLvl" and cur["level"] is None:
            level = to_idx(a.get(W + "val"))
            if 0 <= level <= 8:
                cur["level"] = level + 1
        elif tag == W + "basedOn":
            cur["based"] = a.get(W + "val")

    def end(tag: str) -> None:
        if tag == W + "style" and cur["id"] is not None:
            styles[cur["id"]] = (cur["level"], cur["based"])
            cur["id"] = None

    parse_xml(pkg.chunks(part), part, start, end)
    out: dict[str, int] = {}
    for sid in styles:
        style: str | None = sid
        for _ in range(_MAX_STYLE_DEPTH):
            if style is None or style not in styles:
                break
            level, based = styles[style]
            if level is not None:
                out[sid] = level
                break
            style = based
    return out


class _DocxState:
    """What every part of one DOCX shares: numbering counters, comments, the extras reader.

    The numbering definitions (and the paragraph styles, when any names a numbering) are read
    when the first paragraph with properties needs them."""

    def __init__(self, pkg: _Package, ctx: Context, main_rels: dict, flow: Flow) -> None:
        self.pkg = pkg
        self.main_rels = main_rels
        self.extras = _Extras(pkg, ctx, flow)
        self._numbering: _Numbering | None = None
        self.numbering_read = False
        self._headings: dict[str, int] | None = None
        self.comments: dict[str, str] = {}
        self.shown: set[str] = set()
        part = next((t for typ, t in main_rels.values() if typ.endswith("/comments")), None)
        if part is not None and part in pkg:
            self.comments = _read_docx_comments(pkg, part)

    @property
    def numbering(self) -> "_Numbering | None":
        if not self.numbering_read:
            self.numbering_read = True
            self._numbering = _Numbering.read(self.pkg, self.main_rels)
        return self._numbering

    def heading_level(self, style: str | None, outline: int | None) -> int:
        """The heading level of a paragraph (its own outline level, else its style's), 0
        when it is no heading (read for the Markdown only)."""
        if outline is not None:
            return outline + 1 if 0 <= outline <= 8 else 0
        if not style:
            return 0
        if self._headings is None:
            self._headings = _heading_styles(self.pkg, self.main_rels)
        return self._headings.get(style, 0)


def _read_docx_comments(pkg: _Package, part: str) -> dict[str, str]:
    """``w:id -> "[comment: author] text"`` of ``word/comments.xml``; paragraphs joined by a
    space, deleted text left out."""
    out: dict[str, str] = {}
    cur: dict = {"id": None, "author": "", "paras": [], "t": False, "skip": 0}

    def start(tag: str, a: dict[str, str]) -> None:
        if cur["skip"]:
            cur["skip"] += 1
        elif tag == W + "comment":
            cur.update(id=a.get(W + "id", ""), author=a.get(W + "author", ""), paras=[])
        elif cur["id"] is None:
            return
        elif tag == W + "p":
            cur["paras"].append([])
        elif tag == W + "t" and cur["paras"]:
            cur["t"] = True
        elif tag in (W + "tab", W + "br") and cur["paras"]:
            cur["paras"][-1].append(" ")
        elif tag in (W + "del", W + "moveFrom"):
            cur["skip"] = 1

    def end(tag: str) -> None:
        if cur["skip"]:
            cur["skip"] -= 1
        elif tag == W + "t":
            cur["t"] = False
        elif tag == W + "comment" and cur["id"] is not None:
            body = " ".join(" ".join("".join(p).split()) for p in cur["paras"]).strip()
            if body:
                out[cur["id"]] = comment_line(cur["author"], body)
            cur["id"] = None

    def text(data: str) -> None:
        if cur["t"] and not cur["skip"]:
            cur["paras"][-1].append(data)

    parse_xml(pkg.chunks(part), part, start, end, text)
    return out


def comment_line(author: str, body: str, where: str = "") -> str:
    """``[comment where: author] text``: the one line every comment becomes."""
    head = "comment" + (f" {where}" if where else "")
    author = " ".join(author.split())
    line = f"[{head}: {author}] {' '.join(body.split())}" if author else \
        f"[{head}] {' '.join(body.split())}"
    return clean(line)


class _Docx(_Walker):
    """WordprocessingML: body, headers, footers and notes share one event grammar.

    ``w:tab``, ``w:br`` and ``w:cr`` only carry text inside runs; the one other place a
    ``w:tab`` appears, a paragraph's tab stops (``w:tabs``), is skipped.  A paragraph's
    properties give its list label; a comment reference, a picture's ``descr``, a chart, a
    SmartArt diagram and an embedded document add lines after the paragraph.
    """

    def __init__(self, flow: Flow, state: _DocxState) -> None:
        super().__init__(flow)
        self.state = state
        self.rels: dict[str, tuple[str, str]] = {}
        self.part = ""
        self.num: list = [None, None, None]  # the open paragraph's numId, ilvl, style
        self.outline: int | None = None  # the open paragraph's own outline level
        self.fields: list[list[Any]] = []  # open complex fields: [instruction text, linked]
        self.hyperlinks: list[bool] = []  # open w:hyperlink: whether it started a link
        f = flow
        self.starts.update({
            W + "p": self._p_start,
            W + "t": self.t_on,
            M + "t": self.t_on,
            W + "tab": lambda a: f.add("\t"),
            W + "ptab": lambda a: f.add("\t"),
            W + "br": lambda a: f.add("\n"),
            W + "cr": lambda a: f.add("\n"),
            W + "noBreakHyphen": lambda a: f.add("-"),
            W + "sym": self._sym,
            W + "tabs": self.skip_it,
            W + "del": self.skip_it,
            W + "moveFrom": self.skip_it,
            W + "pPrChange": self.skip_it,
            W + "tr": lambda a: f.open_row(),
            W + "tc": lambda a: f.open_cell(),
            W + "footnote": self._note,
            W + "endnote": self._note,
            W + "numId": self._num_id,
            W + "ilvl": self._ilvl,
            W + "pStyle": self._pstyle,
            W + "commentReference": self._comment,
            WP + "docPr": self._alt,
            V + "shape": self._vml_alt,
            C + "chart": self._related,
            DGM + "relIds": self._diagram,
            O + "OLEObject": self._related,
            W + "objectEmbed": self._related,
        })
        self.ends.update({
            W + "p": f.close_para,
            W + "pPr": self._ppr_end,
            W + "t": self.t_off,
            M + "t": self.t_off,
            W + "tr": f.close_row,
            W + "tc": f.close_cell,
        })
        if flow.structured:  # what only the Markdown shows: tables, headings, links
            self.starts.update({
                W + "tbl": lambda a: f.open_table(),
                W + "tblHeader": self._tbl_header,
                W + "gridSpan": self._grid_span,
                W + "outlineLvl": self._outline_lvl,
                W + "hyperlink": self._hyperlink,
                W + "fldSimple": self._fld_simple,
                W + "fldChar": self._fld_char,
                W + "instrText": self._instr_text,
            })
            self.ends.update({
                W + "tbl": f.close_table,
                W + "hyperlink": self._hyperlink_end,
                W + "fldSimple": self._hyperlink_end,
                W + "instrText": self.t_off,
            })

    def _p_start(self, _attrs: dict[str, str]) -> None:
        self.flow.open_para()
        self.num = [None, None, None]
        self.outline = None

    def _num_id(self, attrs: dict[str, str]) -> None:
        self.num[0] = attrs.get(W + "val")

    def _ilvl(self, attrs: dict[str, str]) -> None:
        self.num[1] = to_idx(attrs.get(W + "val"))

    def _pstyle(self, attrs: dict[str, str]) -> None:
        self.num[2] = attrs.get(W + "val")

    def _ppr_end(self) -> None:
        numbering = self.state.numbering
        if numbering is not None:
            label = numbering.label(*self.num)
            if label:
                self.flow.set_label(label, numbering.level)
        if self.flow.structured:
            level = self.state.heading_level(self.num[2], self.outline)
            if level:
                self.flow.set_block(Heading(level))

    # -- what only the Markdown shows ------------------------------------------------------

    def _tbl_header(self, attrs: dict[str, str]) -> None:
        if attrs.get(W + "val", "true") not in ("0", "false", "off"):
            self.flow.set_row(True)

    def _grid_span(self, attrs: dict[str, str]) -> None:
        self.flow.set_cell(to_idx(attrs.get(W + "val")) or 1)

    def _outline_lvl(self, attrs: dict[str, str]) -> None:
        self.outline = to_idx(attrs.get(W + "val"))

    def _hyperlink(self, attrs: dict[str, str]) -> None:
        rid = attrs.get(R + "id")
        target = _link_targets(self.state.pkg, self.part).get(rid or "") if rid else None
        anchor = attrs.get(W + "anchor")
        if anchor:  # a place in the target (or in this document)
            target = (target or "") + "#" + anchor
        self.hyperlinks.append(bool(target))
        if target:
            self.flow.link_start(target)

    def _hyperlink_end(self) -> None:
        if self.hyperlinks and self.hyperlinks.pop():
            self.flow.link_end()

    def _fld_simple(self, attrs: dict[str, str]) -> None:
        target = field_link(attrs.get(W + "instr", ""))
        self.hyperlinks.append(bool(target))
        if target:
            self.flow.link_start(target)

    def _fld_char(self, attrs: dict[str, str]) -> None:
        kind = attrs.get(W + "fldCharType")
        if kind == "begin":
            if len(self.fields) < 64:
                self.fields.append([[], False])
        elif kind == "separate" and self.fields:
            field = self.fields[-1]
            target = field_link("".join(field[0])[:4096])
            if target and not field[1]:
                field[1] = True
                self.flow.link_start(target)
        elif kind == "end" and self.fields:
            if self.fields.pop()[1]:
                self.flow.link_end()

    def _instr_text(self, _attrs: dict[str, str]) -> None:
        if self.fields:
            self.parser.CharacterDataHandler = self.fields[-1][0].append

    def _comment(self, attrs: dict[str, str]) -> None:
        cid = attrs.get(W + "id", "")
        line = self.state.comments.get(cid)
        if line is not None and cid not in self.state.shown:
            self.state.shown.add(cid)
            self.flow.emit(self.flow.note(line))

    def _alt(self, attrs: dict[str, str]) -> None:
        descr = attrs.get("descr", "").strip()
        if descr:
            self.flow.emit(self.flow.caption(alt_line(descr)))

    def _vml_alt(self, attrs: dict[str, str]) -> None:
        """A VML picture's alternative text (older Word; the DrawingML branch, when there is
        one, is read instead)."""
        descr = attrs.get("alt", "").strip()
        if descr:
            self.flow.emit(self.flow.caption(alt_line(descr)))

    def _related(self, attrs: dict[str, str]) -> None:
        for line in self.state.extras.related(self.rels, attrs.get(R + "id")):
            self.flow.emit(line)

    def _diagram(self, attrs: dict[str, str]) -> None:
        for line in self.state.extras.related(self.rels, attrs.get(R + "dm")):
            self.flow.emit(line)

    def _sym(self, attrs: dict[str, str]) -> None:
        try:
            code = int(attrs.get(W + "char", ""), 16)
        except ValueError:
            return
        if 0xF000 <= code <= 0xF0FF:  # symbol-font private use: no faithful Unicode
            return
        if 0x20 <= code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
            self.flow.add(chr(code))

    def _note(self, attrs: dict[str, str]) -> None:
        if attrs.get(W + "type") in _NOTE_SEPARATORS:
            self.skip_it()

    def read_part(self, part: str) -> None:
        self.rels = _rel_map(self.state.pkg, part)
        self.part = part
        self.fields, self.hyperlinks = [], []
        self.parse(self.state.pkg, part)


_FIELD_TOKEN = re.compile(r'"([^"]*)"|(\S+)')
_FIELD_SWITCHES_WITH_ARG = frozenset({"\\o", "\\t"})


def field_link(instruction: str) -> str | None:
    """The target of a ``HYPERLINK "url" \\l "anchor"`` field instruction, else None."""
    tokens = [w or q for q, w in _FIELD_TOKEN.findall(instruction)]
    if not tokens or tokens[0].upper() != "HYPERLINK":
        return None
    url = anchor = None
    i = 1
    while i < len(tokens):
        tok = tokens[i]
        if tok == "\\l" and i + 1 < len(tokens):
            anchor = tokens[i + 1]
            i += 2
            continue
        if tok in _FIELD_SWITCHES_WITH_ARG:
            i += 2
            continue
        if tok.startswith("\\"):
            i += 1
            continue
        if url is None:
            url = tok
        i += 1
    if url:
        return url + (f"#{anchor}" if anchor else "")
    return f"#{anchor}" if anchor else None


_DOCX_EXTRA = (("header", "## header"), ("footer", "## footer"),
               ("footnotes", "## footnotes"), ("endnotes", "## endnotes"))


def _read_docx(pkg: _Package, main: str, flow: Flow, ctx: Context) -> dict:
    rels_list = _read_rels(pkg, main)
    rels = {rid: (typ, t) for rid, typ, t in rels_list}
    state = _DocxState(pkg, ctx, rels, flow)
    walker = _Docx(flow, state)
    walker.read_part(main)
    folder = posixpath.dirname(main)
    parts = 1
    seen_text: set[str] = set()
    for kind, heading in _DOCX_EXTRA:
        found = sorted({t for _, typ, t in rels_list if typ.endswith("/" + kind) and t in pkg},
                       key=_numeric_key)
        if not found and not rels_list:
            found = pkg.like(folder, kind)
        parts += len(found)
        if kind in ("header", "footer"):
            # the same header is often written once per section (first, even, default):
            # each distinct text once
            for part in found:
                sub = flow.sink.nested(max(flow.sink.max_chars - flow.sink.chars, 0))
                sub_flow = make_flow(sub, ctx.limits, nested_apart=True)
                try:
                    _Docx(sub_flow, state).read_part(part)
                except CapReached:
                    sub_flow.flush()
                    flow.pending_heading = heading
                    flow.lines(sub.getvalue(), sub)
                    raise
                text = sub.getvalue()
                if text.strip() and text not in seen_text:
                    seen_text.add(text)
                    flow.pending_heading = heading if heading else None
                    flow.lines(text, sub)
                    heading = ""
            flow.pending_heading = None
            continue
        flow.pending_heading = heading
        for part in found:
            walker.read_part(part)
        flow.pending_heading = None
    rest = [line for cid, line in state.comments.items() if cid not in state.shown]
    if rest:  # comments no reference in the text points to
        flow.pending_heading = "## comments"
        for line in rest:
            flow.emit(flow.note(line))
        flow.pending_heading = None
    return {"parts": parts}


# -- PPTX -------------------------------------------------------------------------------------

_DROPPED_PLACEHOLDERS = frozenset({"sldNum", "dt", "sldImg"})


class _Slide(_Walker):
    """DrawingML text of a slide or notes page: every ``a:p`` in document order, a shape's
    ``descr`` (alternative text) as an ``[alt text: …]`` line before its text."""

    def __init__(self, flow: Flow) -> None:
        super().__init__(flow)
        self.drop_shape = False  # inside a slide-number/date placeholder
        self.title_shape = False  # inside a title placeholder (the Markdown's headings)
        self.links: dict[str, str] = {}  # the part's hyperlink targets (the Markdown's)
        self.tables: list[list[Any]] = []  # open a:tbl: [first row is a header, rows seen]
        self.bullets: dict[int, int] = {}  # the shape's numbered paragraphs so far, by level
        self.level = 0  # the open paragraph's level (a:pPr lvl)
        f = flow
        self.starts.update({
            A + "p": self._p_start,
            A + "t": self.t_on,
            A + "br": lambda a: f.add("\n"),
            A + "tr": lambda a: f.open_row(),
            A + "tc": lambda a: f.open_cell(),
            P + "sp": self._shape_start,
            P + "ph": self._placeholder,
            P + "cNvPr": self._alt,
        })
        self.ends.update({
            A + "p": f.close_para,
            A + "t": self.t_off,
            A + "tr": f.close_row,
            A + "tc": f.close_cell,
        })
        if flow.structured:  # what only the Markdown shows: titles, bullets, tables, links
            self.starts.update({
                A + "tbl": self._tbl,
                A + "tblPr": self._tbl_pr,
                A + "tr": self._tr,
                A + "pPr": self._ppr,
                A + "buChar": self._bullet,
                A + "buAutoNum": self._numbered,
                A + "hlinkClick": self._link,
                **{P + t: self._other_shape for t in ("graphicFrame", "pic", "grpSp",
                                                       "cxnSp")},
            })
            self.ends.update({
                A + "tbl": self._tbl_end,
                A + "r": f.link_end,
                A + "fld": f.link_end,
            })

    def _p_start(self, attrs: dict[str, str]) -> None:
        if self.drop_shape:
            self.skip_it(attrs)
        else:
            self.flow.open_para()
            if self.title_shape:
                self.flow.set_block(Heading(2))

    def _shape_start(self, _attrs: dict[str, str]) -> None:
        self.drop_shape = False
        self.title_shape = False
        self.bullets = {}

    def _other_shape(self, _attrs: dict[str, str]) -> None:
        self.title_shape = False
        self.bullets = {}

    def _placeholder(self, attrs: dict[str, str]) -> None:
        self.drop_shape = attrs.get("type") in _DROPPED_PLACEHOLDERS
        self.title_shape = attrs.get("type") in ("title", "ctrTitle")

    def _alt(self, attrs: dict[str, str]) -> None:
        descr = attrs.get("descr", "").strip()
        if descr:
            self.flow.emit(self.flow.caption(alt_line(descr)))

    # -- what only the Markdown shows ------------------------------------------------------

    def _tbl(self, _attrs: dict[str, str]) -> None:
        self.title_shape = False
        if len(self.tables) < 64:
            self.tables.append([False, 0])
        self.flow.open_table()

    def _tbl_pr(self, attrs: dict[str, str]) -> None:
        if self.tables:
            self.tables[-1][0] = attrs.get("firstRow") in ("1", "true")

    def _tr(self, _attrs: dict[str, str]) -> None:
        self.flow.open_row()
        if self.tables:
            table = self.tables[-1]
            table[1] += 1
            if table[0] and table[1] == 1:
                self.flow.set_row(True)

    def _tbl_end(self) -> None:
        if self.tables:
            self.tables.pop()
        self.flow.close_table()

    def _ppr(self, attrs: dict[str, str]) -> None:
        self.level = min(max(to_idx(attrs.get("lvl")), 0), 8)

    def _bullet(self, _attrs: dict[str, str]) -> None:
        if not self.title_shape:
            self.flow.set_block(ListItem(self.level, ""))

    def _numbered(self, attrs: dict[str, str]) -> None:
        if self.title_shape:
            return
        n = self.bullets.get(self.level)
        n = max(to_idx(attrs.get("startAt")), 1) if n is None else n + 1
        self.bullets[self.level] = n
        for deeper in [lv for lv in self.bullets if lv > self.level]:
            del self.bullets[deeper]
        self.flow.set_block(ListItem(self.level, f"{n}."))

    def _link(self, attrs: dict[str, str]) -> None:
        target = self.links.get(attrs.get(R + "id") or "")
        if target:
            self.flow.link_start(target)

    def read(self, pkg: _Package, part: str) -> None:
        """The text of one slide or notes page."""
        self.drop_shape = self.title_shape = False
        self.tables, self.bullets, self.level = [], {}, 0
        if self.flow.structured:
            self.links = _link_targets(pkg, part)
        self.parse(pkg, part)


def _comment_authors(pkg: _Package, part: str, tag: str, name_attr: str) -> dict[str, str]:
    if part not in pkg:
        return {}
    return {a.get("id", ""): a.get(name_attr, "")
            for _, a in collect(pkg.chunks(part), part, frozenset({tag}))}


def _read_pptx_comments(pkg: _Package, part: str, authors: dict[str, dict[str, str]],
                        modern: bool) -> list[str]:
    """The comments of a slide: legacy ``p:cm`` (``p:text``) or modern ``p188:cm`` (a text
    body; replies follow their comment), one line each."""
    lines: list[str] = []
    cur: dict = {"author": None, "buf": [], "t": False, "depth": 0}
    who = authors["modern" if modern else "legacy"]
    open_tags = (P188 + "cm", P188 + "reply") if modern else (P + "cm",)
    text_tag = A + "t" if modern else P + "text"
    stack: list[tuple[str | None, list[str]]] = []

    def start(tag: str, a: dict[str, str]) -> None:
        if tag in open_tags:
            stack.append((cur["author"], cur["buf"]))
            cur["author"] = who.get(a.get("authorId", ""), "")
            cur["buf"] = []
        elif tag == text_tag:
            cur["t"] = True
        elif tag == A + "p" and cur["buf"]:
            cur["buf"].append(" ")

    body_tag = P188 + "txBody" if modern else P + "cm"

    def end(tag: str) -> None:
        if tag == body_tag:  # a modern comment's text ends before its replies
            body = "".join(cur["buf"]).strip()
            if body:
                lines.append(comment_line(cur["author"] or "", body))
            cur["buf"] = []
        if tag in open_tags:
            cur["author"], cur["buf"] = stack.pop() if stack else (None, [])
        elif tag == text_tag:
            cur["t"] = False

    def text(data: str) -> None:
        if cur["t"] and cur["author"] is not None:
            cur["buf"].append(data)

    parse_xml(pkg.chunks(part), part, start, end, text)
    return lines


def _read_pptx(pkg: _Package, main: str, flow: Flow, ctx: Context) -> dict:
    slides = _slide_parts(pkg, main)
    walker = _Slide(flow)
    extras = _Extras(pkg, ctx, flow)
    authors: dict[str, dict[str, str]] = {}  # the comments' authors, read at the first comment
    for n, slide in enumerate(slides, 1):
        flow.heading(f"# slide {n}")
        walker.read(pkg, slide)
        slide_rels = _read_rels(pkg, slide)
        for rid, typ, target in slide_rels:  # charts, SmartArt and embedded documents
            if typ.endswith(("/chart", "/diagramData") + _EMBED_TYPES):
                for line in extras.related({rid: (typ, target)}, rid):
                    flow.emit(line)
        for _, typ, target in slide_rels:
            if typ.endswith("/comments") and target in pkg:
                _slide_comments(pkg, flow, typ, target, authors)
        for _, typ, target in slide_rels:
            if typ.endswith("/notesSlide") and target in pkg:
                flow.pending_heading = "## notes"
                walker.read(pkg, target)
                flow.pending_heading = None
                break
    return {"slides": len(slides)}


def _slide_parts(pkg: _Package, main: str) -> list[str]:
    """The slides' parts in the presentation's order (else the slide parts found)."""
    slides: list[str] = []
    if main in pkg:
        rels = {rid: t for rid, typ, t in _read_rels(pkg, main)
                if typ.endswith("/slide")}
        ids = collect(pkg.chunks(main), main, frozenset({P + "sldId"}))
        slides = [rels[a[R + "id"]] for _, a in ids if rels.get(a.get(R + "id", "")) in pkg]
    if not slides:
        slides = pkg.like("ppt/slides", "slide")
        if not slides and main not in pkg:
            raise CorruptDocument("not a presentation: no presentation or slide parts")
    return slides


def _slide_comments(pkg: _Package, flow: Flow, typ: str, target: str,
                    authors: dict[str, dict[str, str]]) -> None:
    """A slide's comments part (legacy or modern) as notes; ``authors`` read once, at the
    first."""
    if not authors:
        authors.update({
            "legacy": _comment_authors(pkg, "ppt/commentAuthors.xml", P + "cmAuthor", "name"),
            "modern": _comment_authors(pkg, "ppt/authors.xml", P188 + "author", "name"),
        })
    modern = "/2018/" in typ or "modernComment" in target
    for line in _read_pptx_comments(pkg, target, authors, modern):
        flow.emit(flow.note(line))


# -- XLSX -------------------------------------------------------------------------------------

_BASE_1900 = datetime(1899, 12, 30)
_BASE_1904 = datetime(1904, 1, 1)

# The built-in number formats (ECMA-376 §18.8.30; 5-8, 14, 22 and 41-44 as an en-US Excel
# shows them: 14 and 22 are the locale's short date, "m/d/yyyy" there)
_BUILTIN_FORMATS = {
    1: "0", 2: "0.00", 3: "#,##0", 4: "#,##0.00", 5: '"$"#,##0_);("$"#,##0)',
    6: '"$"#,##0_);[Red]("$"#,##0)', 7: '"$"#,##0.00_);("$"#,##0.00)',
    8: '"$"#,##0.00_);[Red]("$"#,##0.00)', 9: "0%", 10: "0.00%", 11: "0.00E+00",
    12: "# ?/?", 13: "# ??/??", 14: "m/d/yyyy", 15: "d-mmm-yy", 16: "d-mmm", 17: "mmm-yy",
    18: "h:mm AM/PM", 19: "h:mm:ss AM/PM", 20: "h:mm", 21: "h:mm:ss", 22: "m/d/yyyy h:mm",
    37: "#,##0 ;(#,##0)", 38: "#,##0 ;[Red](#,##0)", 39: "#,##0.00;(#,##0.00)",
    40: "#,##0.00;[Red](#,##0.00)", 41: '_(* #,##0_);_(* \\(#,##0\\);_(* "-"_);_(@_)',
    42: '_("$"* #,##0_);_("$"* \\(#,##0\\);_("$"* "-"_);_(@_)',
    43: '_(* #,##0.00_);_(* \\(#,##0.00\\);_(* "-"??_);_(@_)',
    44: '_("$"* #,##0.00_);_("$"* \\(#,##0.00\\);_("$"* "-"??_);_(@_)',
    45: "mm:ss", 46: "[h]:mm:ss", 47: "mm:ss.0", 48: "##0.0E+0",
}


def _read_styles(pkg: _Package) -> dict[int, NumberFormat]:
    """Style index -> the compiled number format of each cell format (``cellXfs``) that has
    one other than General."""
    part = "xl/styles.xml"
    if part not in pkg:
        return {}
    custom: dict[int, str] = {}
    xfs: list[int] = []
    depth = [0]

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == S + "numFmt":
            if a.get("numFmtId", "").isdigit():
                custom[int(a["numFmtId"])] = a.get("formatCode", "")
        elif tag == S + "cellXfs":
            depth[0] += 1
        elif tag == S + "xf" and depth[0]:
            fid = a.get("numFmtId", "0")
            xfs.append(int(fid) if fid.isdigit() else 0)

    def end(tag: str) -> None:
        if tag == S + "cellXfs":
            depth[0] -= 1

    parse_xml(pkg.chunks(part), part, start, end)
    compiled: dict[int, NumberFormat | None] = {}
    formats: dict[int, NumberFormat] = {}
    for i, fid in enumerate(xfs):
        if fid not in compiled:
            code = custom.get(fid, _BUILTIN_FORMATS.get(fid, ""))
            compiled[fid] = compile_format(code)
        fmt = compiled[fid]
        if fmt is not None:
            formats[i] = fmt
    return formats


def _number(raw: str) -> str:
    """A decimal as Excel's General format shows it: doubles are stored with up to 17
    significant digits (``1.0299999999999999``) and shown with at most 15 (``1.03``), and a
    whole number without its ``.0`` (``31001.0`` → ``31001``)."""
    if "." not in raw or "e" in raw.lower():
        return raw
    try:
        value = float(raw)
    except ValueError:
        return raw
    return format(value, ".15g") if math.isfinite(value) else raw


def _serial_date(value: str, fmt: NumberFormat, base: datetime) -> str:
    """An Excel serial number as its date or time format shows it, by the format's own
    tokens: a date (``9/15/2011``, ``15-Sep-11``), a date and time (``9/15/2011 15:22``), a
    time or elapsed time (``18:00``, ``6:00 PM``, ``27:30``); ISO 8601 when the format
    shows nothing of it."""
    try:
        serial = float(value)
    except ValueError:
        return value
    if not 0 <= serial < 2958466:  # up to 9999-12-31
        return value
    if fmt.kind in ("time", "elapsed"):
        return fmt.render_time(serial)
    shown = fmt.render_datetime(serial, base)
    if any(ch.isdigit() for ch in shown) or any(m in shown for m in _MONTH_NAMES):
        return shown
    dt = base + timedelta(seconds=round(serial * 86400))
    return dt.isoformat(sep=" ") if fmt.kind == "datetime" else dt.date().isoformat()


_MONTH_NAMES = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                "Dec")


def _read_shared_strings(pkg: _Package) -> list[str]:
    part = "xl/sharedStrings.xml"
    if part not in pkg:
        return []
    strings: list[str] = []
    cur: list[str] = []
    state = [0, False]  # skip depth (phonetic runs), in a <t>

    def start(tag: str, _a: dict[str, str]) -> None:
        if state[0]:
            state[0] += 1
        elif tag == S + "t":
            state[1] = True
        elif tag == S + "rPh":
            state[0] = 1

    def end(tag: str) -> None:
        if state[0]:
            state[0] -= 1
        elif tag == S + "t":
            state[1] = False
        elif tag == S + "si":
            strings.append("".join(cur))
            cur.clear()

    def text(data: str) -> None:
        if state[1]:
            cur.append(data)

    parse_xml(pkg.chunks(part), part, start, end, text)
    return [clean(x) for x in strings]


_C, _V, _T, _ROW, _RPH = S + "c", S + "v", S + "t", S + "row", S + "rPh"


_HF_TAGS = {S + t: t for t in ("oddHeader", "evenHeader", "firstHeader", "oddFooter",
                                 "evenFooter", "firstFooter")}
# &-codes of a header or footer (ECMA-376 §18.3.1.39): section starts, fields (page number,
# date, file and sheet name, picture: left out, like slide numbers), font and style codes
_HF_CODE = re.compile(r'&([LCR])|&&|&"[^"]*"|&K[0-9A-Fa-f]{6}|&K\d\d[+-]\d{3}|&\d+|&[A-Za-z]?')
_REF = re.compile(r"([A-Za-z]{1,3})(\d{1,7})")


def header_footer_text(code: str) -> str:
    """A header or footer's text with its &-codes removed; the left, centre and right
    sections that have text joined by a tab."""
    sections: list[list[str]] = [[]]
    pos = 0
    for m in _HF_CODE.finditer(code):
        sections[-1].append(code[pos:m.start()])
        pos = m.end()
        if m.group(1):
            sections.append([])
        elif m.group(0) == "&&":
            sections[-1].append("&")
    sections[-1].append(code[pos:])
    texts = (" ".join("".join(sec).split()) for sec in sections)
    return "\t".join(t for t in texts if t)


def _ref_pos(ref: str) -> tuple[int, int]:
    m = _REF.match(ref)
    if not m:
        return (0, 0)
    col = 0
    for ch in m.group(1).upper():
        col = col * 26 + ord(ch) - 64
    return int(m.group(2)), col


def _read_sheet_comments(pkg: _Package, rels: list[tuple[str, str, str]],
                         persons: dict[str, str]) -> list[tuple[int, int, str]]:
    """``(row, column, line)`` of a sheet's notes and threaded comments, in cell order; a
    cell with a threaded comment shows it instead of the legacy copy Excel writes beside it."""
    threaded: list[tuple[int, int, int, str]] = []
    legacy: list[tuple[int, int, int, str]] = []
    for _, typ, target in rels:
        if target not in pkg:
            continue
        if typ.endswith("/threadedComment"):
            _parse_comments(pkg, target, TC + "threadedComment", TC + "text", "personId",
                            persons, threaded)
        elif typ.endswith("/comments"):
            authors = {str(i): x for i, x in enumerate(_texts_of(pkg, target, S + "author"))}
            _parse_comments(pkg, target, S + "comment", S + "t", "authorId", authors, legacy)
    refs = {(r, c) for r, c, _, _ in threaded}
    merged = threaded + [x for x in legacy if (x[0], x[1]) not in refs]
    merged.sort(key=lambda x: (x[0], x[1], x[2]))
    return [(r, c, line) for r, c, _, line in merged]


def _texts_of(pkg: _Package, part: str, tag: str) -> list[str]:
    out: list[str] = []
    inside = [False]

    def start(t: str, _a: dict[str, str]) -> None:
        if t == tag:
            inside[0] = True
            out.append("")

    def end(t: str) -> None:
        if t == tag:
            inside[0] = False

    def text(data: str) -> None:
        if inside[0]:
            out[-1] += data

    parse_xml(pkg.chunks(part), part, start, end, text)
    return out


def _parse_comments(pkg: _Package, part: str, item: str, text_tag: str, who_attr: str,
                    who: dict, out: list[tuple[int, int, int, str]]) -> None:
    cur: dict = {"ref": None, "who": "", "buf": [], "t": False, "skip": 0}

    def start(tag: str, a: dict[str, str]) -> None:
        if cur["skip"]:
            cur["skip"] += 1
        elif tag == item:
            cur.update(ref=a.get("ref", ""), buf=[], who=who.get(a.get(who_attr, ""), ""))
        elif tag == S + "rPh":
            cur["skip"] = 1
        elif tag == text_tag and cur["ref"] is not None:
            cur["t"] = True

    def end(tag: str) -> None:
        if cur["skip"]:
            cur["skip"] -= 1
        elif tag == text_tag:
            cur["t"] = False
        elif tag == item and cur["ref"] is not None:
            body = "".join(cur["buf"]).strip()
            if body:
                row, col = _ref_pos(cur["ref"])
                out.append((row, col, len(out), comment_line(cur["who"], body, cur["ref"])))
            cur["ref"] = None

    def text(data: str) -> None:
        if cur["t"]:
            cur["buf"].append(data)

    parse_xml(pkg.chunks(part), part, start, end, text)


@dataclass(frozen=True)
class _Book:
    """What a workbook's cells are shown with: its shared strings, its cell formats' number
    formats (by style index), its date system's day zero."""

    shared: list[str]
    styles: dict[int, NumberFormat]
    base: datetime


class _Comments:
    """A sheet's comments ``(row, column, line)`` in row order, and how many are written."""

    __slots__ = ("lines", "written")

    def __init__(self, lines: list[tuple[int, int, str]]) -> None:
        self.lines = lines
        self.written = 0


class _Sheet:
    """One worksheet's rows as tab-separated lines, columns placed by their ``r`` refs.

    Only a cell's value (``<v>``) and inline string text (``<is><t>``) are collected: the
    character handler is set on their start and cleared on their end, so formulas and
    whitespace cost nothing.  A cell's comment follows its row; the header and footer
    texts and the drawing's relationship id are kept for after the rows.
    """

    def __init__(self, sink: TextSink, max_parts: int, book: _Book,
                 comments: list[tuple[int, int, str]] | None = None) -> None:
        self.sink = sink
        self.max_parts = max_parts
        self.book = book
        self.row: list[str] = []
        self.col = 0
        self.cell: dict[str, str] = {}  # the open cell's attributes
        self.skip = 0  # depth in a phonetic run (rPh) of an inline string
        self.columns: dict[str, int] = {}
        self.comments = _Comments(comments or [])
        self.row_number = 0
        self.headers: dict[str, list[str]] = {}  # "oddHeader" -> its text
        self.drawings: list[str] = []  # r:id of the sheet's drawing and embedded objects
        self.table_open = False
        self.width = 0  # the width the sheet's <dimension> declares (0: none)
        self.parser = p = new_parser()
        value: list[str] = []
        collect_value = value.append
        hf: list[str] = []

        def start(tag: str, a: dict[str, str]) -> None:
            if tag == _C:
                self.cell = a
            elif tag == _V or tag == _T:
                if not self.skip:
                    p.CharacterDataHandler = collect_value
            elif tag == _ROW:
                self.row = []
                self.col = 0
                r = a.get("r")
                self.row_number = int(r) if r and r.isdigit() else self.row_number + 1
                if self.comments.lines:
                    self.write_comments(self.row_number - 1)
            elif tag == _RPH or self.skip:
                self.skip += 1
            elif tag in _HF_TAGS:
                hf.clear()
                p.CharacterDataHandler = hf.append
            elif tag == S + "drawing" or tag == S + "oleObject":
                rid = a.get(R + "id")
                if rid and len(self.drawings) < 1000:
                    self.drawings.append(rid)
            elif tag == S + "dimension":
                self.width = min(_ref_pos(a.get("ref", "").rsplit(":", 1)[-1])[1], 16384)

        def end(tag: str) -> None:
            if tag == _V or tag == _T:
                p.CharacterDataHandler = None
            elif tag == _C:
                self._cell("".join(value))
                value.clear()
            elif tag == _ROW:
                if self.row:
                    self.write_row(self.row)
                    self.row = []
                if self.comments.lines:
                    self.write_comments(self.row_number)
            elif self.skip:
                self.skip -= 1
            elif tag in _HF_TAGS:
                p.CharacterDataHandler = None
                self.headers[_HF_TAGS[tag]] = hf[:]

        p.StartElementHandler = start
        p.EndElementHandler = end

    @property
    def structured(self) -> bool:
        """A structured sink's: the rows a table, the comments notes."""
        return self.sink.structured

    def write_row(self, row: list[str]) -> None:
        """One row: its cells joined by tabs (a structured sink: a row of the sheet's table)."""
        sink = self.sink
        if not self.structured:
            sink.write("\t".join(row) + "\n")
            return
        if not self.table_open:
            sink.open(Table(self.width))
            self.table_open = True
        sink.open(Row())
        for i, value in enumerate(row):
            if i:
                sink.layout("\t")
            sink.open(Cell())
            sink.write(value)
            sink.close()
        sink.close()
        sink.layout("\n")

    def end_table(self) -> None:
        if self.table_open:
            self.sink.close()
            self.table_open = False

    def write_comments(self, upto: int) -> None:
        """Write the comments of the rows up to ``upto`` not written yet."""
        cs = self.comments.lines
        i = self.comments.written
        while i < len(cs) and cs[i][0] <= upto:
            if self.structured:
                write_line(self.sink, block_line(Note("comment"), cs[i][2]))
            else:
                self.sink.write(cs[i][2] + "\n")
            i += 1
        self.comments.written = i

    def header_footer(self) -> list[str]:
        """``## header`` / ``## footer`` blocks: each distinct text of the odd, even and
        first-page variants once."""
        lines: list[str] = []
        for kind in ("Header", "Footer"):
            seen: list[str] = []
            for variant in ("odd", "even", "first"):
                text = header_footer_text("".join(self.headers.get(variant + kind, ())))
                if text and text not in seen:
                    seen.append(text)
            if seen:
                lines.append(f"## {kind.lower()}")
                lines.extend(seen)
        return lines

    def _column(self, ref: str) -> int:
        letters = ref.rstrip("0123456789")
        col = self.columns.get(letters)
        if col is None:
            col = 0
            for ch in letters.upper():
                if not "A" <= ch <= "Z":
                    return self.col
                col = col * 26 + ord(ch) - 64
            col -= 1
            if len(self.columns) < 20000:
                self.columns[letters] = col
        return col

    def _cell(self, raw: str) -> None:
        a = self.cell
        ref = a.get("r")
        col = self._column(ref) if ref else self.col
        self.col = col + 1
        if not raw:
            return
        v = self._value(a.get("t", "n"), a.get("s"), raw)
        if not v:
            return
        if "\t" in v or "\n" in v:
            v = v.replace("\t", " ").replace("\r\n", " ").replace("\n", " ")
        row = self.row
        if col > len(row):
            if col > self.max_parts:
                self._overflow()
            row.extend([""] * (col - len(row)))
        row.append(v)
        if len(row) > self.max_parts:
            self._overflow()

    def _value(self, t: str, style: str | None, raw: str) -> str | None:
        """A cell's value as shown, by its type ``t``: a shared string, a number in its
        style's format (a date, a time), a boolean, text (inlineStr, str: a formula's text,
        e: an error, d: an ISO date)."""
        if t == "s":
            try:
                return self.book.shared[int(raw)]
            except (ValueError, IndexError):
                return None
        if t == "n":
            fmt = self.book.styles.get(int(style)) if style and style.isdigit() else None
            if fmt is None:
                return _number(raw)
            if fmt.kind == "number" or fmt.kind == "literal":
                try:
                    shown = fmt.render(float(raw))
                except ValueError:
                    shown = None
                return _number(raw) if shown is None else shown
            return _serial_date(raw, fmt, self.book.base)
        if t == "b":
            return "TRUE" if raw.strip() in ("1", "true") else "FALSE"
        return clean(raw)

    def _overflow(self) -> None:
        if self.row:
            self.write_row(self.row[: self.max_parts])
            self.row = []
        raise CapReached("max_parts", f"{self.max_parts} cells in one row")


class _Drawing(_Slide):
    """A sheet's drawing (``xl/drawings/drawingN.xml``): shapes' and text boxes' paragraphs,
    pictures' alternative text, and the charts and SmartArt it anchors, in document order."""

    def __init__(self, flow: Flow, extras: _Extras) -> None:
        super().__init__(flow)
        self.extras = extras
        self.rels: dict[str, tuple[str, str]] = {}
        self.starts.update({
            XDR + "cNvPr": self._alt,
            C + "chart": lambda a: self._lines(self.extras.related(self.rels, a.get(R + "id"))),
            DGM + "relIds": lambda a: self._lines(self.extras.related(self.rels,
                                                                      a.get(R + "dm"))),
        })

    def _lines(self, lines: list[Any]) -> None:
        for line in lines:
            self.flow.emit(line)


def _read_xlsx(pkg: _Package, main: str, sink: TextSink, ctx: Context) -> dict:
    sheets, date1904, persons = _workbook(pkg, main)
    book = _Book(_read_shared_strings(pkg), _read_styles(pkg),
                 _BASE_1904 if date1904 else _BASE_1900)
    extras = _Extras(pkg, ctx, make_flow(sink, ctx.limits))
    structured = sink.structured
    for name, part in sheets:
        heading = f"# {one_line(name)}"
        write_line(sink, marker_line(heading) if structured else heading)
        sheet_rels = _read_rels(pkg, part)
        comments = _read_sheet_comments(pkg, sheet_rels, persons) if sheet_rels else []
        sheet = _Sheet(sink, ctx.limits.max_parts, book, comments)
        try:
            feed(sheet.parser, pkg.chunks(part), part)
        except CapReached:
            if sheet.row:  # the row open when a byte cap struck
                sheet.write_row(sheet.row)
            raise
        sheet.end_table()
        sheet.write_comments(1 << 62)
        _sheet_drawings(pkg, sheet, {rid: (typ, t) for rid, typ, t in sheet_rels}, extras,
                        sink, ctx)
        for line in sheet.header_footer():
            if structured:
                write_line(sink, marker_line(line) if line.startswith("## ")
                           else block_line(Paragraph(), line), clean_text=True)
            else:
                sink.write(clean(line) + "\n")
    return {"sheets": len(sheets)}


def _workbook(pkg: _Package, main: str) -> tuple[list[tuple[str, str]], bool, dict[str, str]]:
    """The workbook's sheets ``(name, part)`` in its order (else the sheet parts found), its
    date system (1904), and the people its threaded comments name (id -> display name)."""
    sheets: list[tuple[str, str]] = []
    date1904 = False
    persons: dict[str, str] = {}
    if main in pkg:
        wb_rels = _read_rels(pkg, main)
        rels = {rid: t for rid, typ, t in wb_rels if typ.endswith("/worksheet")}
        found = collect(pkg.chunks(main), main,
                        frozenset({S + "sheet", S + "workbookPr"}))
        for tag, a in found:
            if tag == S + "workbookPr":
                date1904 = a.get("date1904", "").lower() in ("1", "true")
            elif rels.get(a.get(R + "id", "")) in pkg:
                sheets.append((a.get("name", ""), rels[a[R + "id"]]))
        for _, typ, target in wb_rels:
            if typ.endswith("/person") and target in pkg:
                persons = {a.get("id", ""): a.get("displayName", "")
                           for _, a in collect(pkg.chunks(target), target,
                                               frozenset({TC + "person"}))}
    if not sheets:
        sheets = [(posixpath.basename(p)[:-4], p)
                  for p in pkg.like("xl/worksheets", "sheet")]
    return sheets, date1904, persons


def _sheet_drawings(pkg: _Package, sheet: _Sheet, rel_map: dict[str, tuple[str, str]],
                    extras: _Extras, sink: TextSink, ctx: Context) -> None:
    """The drawings a sheet anchors (shapes, text boxes, charts, SmartArt), and the other
    parts its drawing and object elements name."""
    for rid in sheet.drawings:
        typ, target = rel_map.get(rid, ("", ""))
        if typ.endswith("/drawing") and target in pkg:
            flow = make_flow(sink, ctx.limits)
            drawing = _Drawing(flow, extras)
            drawing.rels = _rel_map(pkg, target)
            drawing.links = _link_targets(pkg, target) if sink.structured else {}
            run_capped(flow, lambda: drawing.parse(pkg, target))
        else:
            for line in extras.related(rel_map, rid):
                write_line(sink, line)


# -- entry point ------------------------------------------------------------------------------


def _main_part(pkg: _Package, doc: Document) -> tuple[str, str]:
    """``(kind, main part)``: the content decides (the package's officeDocument relationship,
    then which main part exists), then the MIME type, then the extension."""
    main = ""
    for _, typ, target in _read_rels(pkg, ""):
        if typ.endswith("/officeDocument") and target in pkg:
            main = target
            break
    kind = (_DIR_KIND.get(main.split("/", 1)[0])
            or next((k for k, p in _DEFAULT_MAIN.items() if p in pkg), None)
            or _MIME_KIND.get(doc.mime)
            or _EXT_KIND.get(posixpath.splitext(doc.name.lower())[1]))
    if kind is None:
        raise CorruptDocument("not an Office Open XML package (no document, workbook or "
                              "presentation part)")
    if not main or _DIR_KIND.get(main.split("/", 1)[0]) != kind:
        main = _DEFAULT_MAIN[kind]
    return kind, main


def _doc_props(pkg: _Package, kind: str) -> DocMeta:
    """The package's core and extended properties (docProps/core.xml, docProps/app.xml, as
    the package relationships name them); a damaged part costs the metadata, never the
    text."""
    from .docprops import ooxml_meta, properties

    parts: dict[str, "Props | None"] = {"core": None, "app": None}
    wanted = {"/core-properties": ("core", "docProps/core.xml"),
              "/extended-properties": ("app", "docProps/app.xml")}
    found = {key: default for key, default in wanted.values()}
    for _, typ, target in _read_rels(pkg, ""):
        for suffix, (key, _) in wanted.items():
            if typ.endswith(suffix) and target in pkg:
                found[key] = target
    for key, part in found.items():
        if part in pkg:
            try:
                parts[key] = properties(pkg.chunks(part), part)
            except (CorruptDocument, EncryptedDocument):
                pass
    doc_meta = ooxml_meta(parts["core"], parts["app"], kind)
    if kind == "xlsx":
        sheets = len(pkg.like("xl/worksheets", "sheet"))
        if sheets:
            doc_meta = doc_meta.merged(DocMeta(sheets=sheets))
    return doc_meta


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    """Write the text of an OOXML package; see the module docstring for the rules."""
    # (an encrypted package — Excel's "protected" workbooks under the default password — is
    # readers/office/officecrypt.py's: it decrypts it and hands the package back to this reader)
    if doc.data[:8] == OLE_MAGIC:
        raise EncryptedDocument("encrypted document")
    zf = open_zip(doc.data)
    try:
        pkg = _Package(zf, Budget(ctx.limits))
        kind, main = _main_part(pkg, doc)
        if kind != "pptx" and main not in pkg:
            raise CorruptDocument(f"missing part {main}")
        props = _doc_props(pkg, kind)
        try:
            if kind == "xlsx":
                details = _read_xlsx(pkg, main, sink, ctx)
            else:
                # a table nested in a Word table cell: on lines of its own after its row
                flow = make_flow(sink, ctx.limits, nested_apart=kind == "docx")
                reader = _read_docx if kind == "docx" else _read_pptx
                details = run_capped(flow, lambda: reader(pkg, main, flow, ctx))
        except CapReached as cap:
            cap.with_metadata(props)
            raise
    except (KeyError, IndexError, ValueError, RecursionError) as e:  # a structure we missed
        raise CorruptDocument(f"damaged {doc.name or 'document'}: {e!r}") from None
    finally:
        zf.close()
    return ReadResult(kind, limit=pkg.limit or None, details=details).with_metadata(props)


READER = Reader(
    name="ooxml",
    # 5: metadata, list overrides, dates as their format shows them; 6: a table nested in a
    # Word table cell on lines of its own after its row (issue 43)
    version=6,
    mimes=DOCX_MIMES + XLSX_MIMES + PPTX_MIMES,
    extensions=tuple(_EXT_KIND),
    settings=("max_member_bytes", "max_xml_bytes"),
    read=read,
)
