"""DOCX, XLSX and PPTX (and their macro/template variants) as plain text, streamed.

One module for the three Office Open XML families; the package's main part (``_rels/.rels``,
then the MIME type, then which parts exist) decides which.  Every part is read through
:mod:`readers.xmlsafe`: capped decompression, an expat parser that refuses DTDs, and
:class:`~readers.xmlsafe.Flow` holding only the open paragraph or row.  The rules (what is
kept, in which order) are in ``docs/readers/office.md``.  Extractors: ``docx``, ``xlsx``,
``pptx``.  Strict OOXML (the ``purl.oclc.org`` namespaces) is not recognised.
"""

from __future__ import annotations

import math
import posixpath
import re
import zipfile
from datetime import datetime, timedelta
from typing import Callable, Iterator

from .base import Context, Document, Reader, ReadResult, TextSink
from .errors import CapReached, CorruptDocument, EncryptedDocument
from .xmlsafe import (
    Budget, Flow, collect, feed, member_chunks, new_parser, one_line, open_zip, parse_xml,
    run_capped,
)

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main "
A = "http://schemas.openxmlformats.org/drawingml/2006/main "
P = "http://schemas.openxmlformats.org/presentationml/2006/main "
C = "http://schemas.openxmlformats.org/drawingml/2006/chart "
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main "
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships "
M = "http://schemas.openxmlformats.org/officeDocument/2006/math "
MC = "http://schemas.openxmlformats.org/markup-compatibility/2006 "
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
    """``(id, type, target part)`` of a part's internal relationships, in file order."""
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


def _numeric_key(name: str) -> tuple:
    """Sort key putting ``slide2.xml`` before ``slide10.xml``."""
    return tuple(int(d) for d in _DIGITS.findall(posixpath.basename(name))), name


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
        self.ends: dict[str, Callable[[], None]] = {MC + "AlternateContent": self.alt.pop}
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


class _Docx(_Walker):
    """WordprocessingML: body, headers, footers and notes share one event grammar.

    ``w:tab``, ``w:br`` and ``w:cr`` only carry text inside runs; the one other place a
    ``w:tab`` appears, a paragraph's tab stops (``w:tabs``), is skipped.
    """

    def __init__(self, flow: Flow) -> None:
        super().__init__(flow)
        f = flow
        self.starts.update({
            W + "p": lambda a: f.open_para(),
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
            W + "tr": lambda a: f.open_row(),
            W + "tc": lambda a: f.open_cell(),
            W + "footnote": self._note,
            W + "endnote": self._note,
        })
        self.ends.update({
            W + "p": f.close_para,
            W + "t": self.t_off,
            M + "t": self.t_off,
            W + "tr": f.close_row,
            W + "tc": f.close_cell,
        })

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


def _read_docx(pkg: _Package, main: str, flow: Flow) -> dict:
    walker = _Docx(flow)
    walker.parse(pkg, main)
    rels = _read_rels(pkg, main)
    folder = posixpath.dirname(main)
    extra: list[str] = []
    for kind in ("header", "footer", "footnotes", "endnotes"):
        found = sorted({t for _, typ, t in rels if typ.endswith("/" + kind) and t in pkg},
                       key=_numeric_key)
        if not found and not rels:
            found = pkg.like(folder, kind)
        extra.extend(found)
    for part in extra:
        walker.parse(pkg, part)
    return {"parts": 1 + len(extra)}


# -- PPTX -------------------------------------------------------------------------------------

_DROPPED_PLACEHOLDERS = frozenset({"sldNum", "dt", "sldImg"})


class _Slide(_Walker):
    """DrawingML text of a slide or notes page: every ``a:p`` in document order."""

    def __init__(self, flow: Flow) -> None:
        super().__init__(flow)
        self.drop_shape = False  # inside a slide-number/date placeholder
        f = flow
        self.starts.update({
            A + "p": self._p_start,
            A + "t": self.t_on,
            A + "br": lambda a: f.add("\n"),
            A + "tr": lambda a: f.open_row(),
            A + "tc": lambda a: f.open_cell(),
            P + "sp": self._shape_start,
            P + "ph": self._placeholder,
        })
        self.ends.update({
            A + "p": f.close_para,
            A + "t": self.t_off,
            A + "tr": f.close_row,
            A + "tc": f.close_cell,
        })

    def _p_start(self, attrs: dict[str, str]) -> None:
        if self.drop_shape:
            self.skip_it(attrs)
        else:
            self.flow.open_para()

    def _shape_start(self, _attrs: dict[str, str]) -> None:
        self.drop_shape = False

    def _placeholder(self, attrs: dict[str, str]) -> None:
        self.drop_shape = attrs.get("type") in _DROPPED_PLACEHOLDERS


def _read_pptx(pkg: _Package, main: str, flow: Flow) -> dict:
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
    walker = _Slide(flow)
    for n, slide in enumerate(slides, 1):
        flow.heading(f"# slide {n}")
        walker.drop_shape = False
        walker.parse(pkg, slide)
        rels = _read_rels(pkg, slide)
        for _, typ, target in rels:
            if typ.endswith("/chart") and target in pkg:
                _read_chart(pkg, target, flow)
        for _, typ, target in rels:
            if typ.endswith("/notesSlide") and target in pkg:
                flow.pending_heading = "## notes"
                walker.drop_shape = False
                walker.parse(pkg, target)
                flow.pending_heading = None
                break
    return {"slides": len(slides)}


def _read_chart(pkg: _Package, part: str, flow: Flow) -> None:
    """The words a chart shows: its titles (``a:t`` runs, one line per ``a:p``), series
    names and category labels (``c:v`` under ``c:tx`` / ``c:cat``), in document order, one
    line each.  Plotted values are left out: they are numbers drawn, not text shown."""
    depth = {"tx": 0, "cat": 0, "v": 0, "t": 0}
    words: list[str] = []

    def start(tag: str, _a: dict[str, str]) -> None:
        if tag == C + "tx":
            depth["tx"] += 1
        elif tag == C + "cat":
            depth["cat"] += 1
        elif tag == C + "v" and (depth["tx"] or depth["cat"]):
            depth["v"] += 1
            words.append("")
        elif tag == A + "t":
            depth["t"] += 1
            if not words:
                words.append("")
        elif tag == A + "p":
            words.append("")

    def end(tag: str) -> None:
        if tag == C + "tx":
            depth["tx"] -= 1
        elif tag == C + "cat":
            depth["cat"] -= 1
        elif tag == C + "v" and depth["v"]:
            depth["v"] -= 1
        elif tag == A + "t":
            depth["t"] -= 1

    def text(data: str) -> None:
        if depth["v"] or depth["t"]:
            words[-1] += data

    parse_xml(pkg.chunks(part), part, start, end, text)
    seen: set[str] = set()
    for w in words:
        w = w.strip()
        if w and w not in seen:  # a label repeats in every series' cache: show it once
            seen.add(w)
            flow.open_para()
            flow.add(w)
            flow.close_para()


# -- XLSX -------------------------------------------------------------------------------------

_BUILTIN_DATE_FORMATS = frozenset(range(14, 18))
_BUILTIN_DATETIME_FORMATS = frozenset({22})
_BUILTIN_TIME_FORMATS = frozenset(range(18, 22)) | {45, 46, 47}
_FORMAT_NOISE = re.compile(r'"[^"]*"|\\.|\[(?![hms]+\])[^\]]*\]|_.|\*.')  # keeps [h]
_BASE_1900 = datetime(1899, 12, 30)
_BASE_1904 = datetime(1904, 1, 1)


# Built-in number formats that change how a number reads: id -> format code.
_BUILTIN_NUMBER_FORMATS = {2: "0.00", 3: "#,##0", 4: "#,##0.00", 9: "0%", 10: "0.00%",
                           37: "#,##0", 38: "#,##0", 39: "#,##0.00", 40: "#,##0.00"}
_DECIMALS = re.compile(r"0\.(0+)")


def _format_kind(code: str) -> str | None:
    """``"date"``, ``"time"``, a number format ``"num:<decimals>:<,>:<%>"`` (fixed decimals,
    thousands separators, percent) or None for a format code."""
    bare = _FORMAT_NOISE.sub("", code.split(";", 1)[0]).lower()
    if "y" in bare or "d" in bare:
        return "datetime" if "h" in bare or "s" in bare else "date"
    if "h" in bare or "s" in bare:
        return "time"
    if "m" in bare and "0" not in bare and "#" not in bare:
        return "date"
    if "0" in bare and "e+" not in bare:
        m = _DECIMALS.search(bare)
        decimals = len(m.group(1)) if m else 0
        return f"num:{decimals}:{',' if ',' in bare else ''}:{'%' if '%' in bare else ''}"
    return None


def _format_number(raw: str, kind: str) -> str:
    """A number shown with a fixed-decimals / thousands / percent format, as Excel shows it."""
    try:
        value = float(raw)
    except ValueError:
        return raw
    if not math.isfinite(value):
        return raw
    _, decimals, comma, percent = kind.split(":")
    if percent:
        value *= 100
    text = f"{value:{comma}.{int(decimals)}f}"
    return text + "%" if percent else text


def _read_styles(pkg: _Package) -> dict[int, str]:
    """Style index -> ``"date"``/``"time"`` for the cell formats that show dates."""
    part = "xl/styles.xml"
    if part not in pkg:
        return {}
    custom: dict[int, str] = {}
    xfs: list[int] = []
    depth = [0]

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == S + "numFmt":
            kind = _format_kind(a.get("formatCode", ""))
            if kind and a.get("numFmtId", "").isdigit():
                custom[int(a["numFmtId"])] = kind
        elif tag == S + "cellXfs":
            depth[0] += 1
        elif tag == S + "xf" and depth[0]:
            fid = a.get("numFmtId", "0")
            xfs.append(int(fid) if fid.isdigit() else 0)

    def end(tag: str) -> None:
        if tag == S + "cellXfs":
            depth[0] -= 1

    parse_xml(pkg.chunks(part), part, start, end)
    kinds: dict[int, str] = {}
    for i, fid in enumerate(xfs):
        if fid in custom:
            kinds[i] = custom[fid]
        elif fid in _BUILTIN_DATE_FORMATS:
            kinds[i] = "date"
        elif fid in _BUILTIN_DATETIME_FORMATS:
            kinds[i] = "datetime"
        elif fid in _BUILTIN_TIME_FORMATS:
            kinds[i] = "time"
        elif fid in _BUILTIN_NUMBER_FORMATS:
            kinds[i] = _format_kind(_BUILTIN_NUMBER_FORMATS[fid]) or ""
    return kinds


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


def _serial_date(value: str, kind: str, base: datetime) -> str:
    """An Excel serial number as ISO 8601 (date, date and time, or time of day)."""
    try:
        serial = float(value)
    except ValueError:
        return value
    if not 0 <= serial < 2958466:  # up to 9999-12-31
        return value
    seconds = round(serial * 86400)
    if kind == "time" and serial < 1:
        return (datetime(2000, 1, 1) + timedelta(seconds=seconds)).time().isoformat()
    dt = base + timedelta(seconds=seconds)
    # as the format shows it: a date format shows the day only, a date-time format the time too
    return dt.isoformat(sep=" ") if kind == "datetime" else dt.date().isoformat()


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
    return strings


_C, _V, _T, _ROW, _RPH = S + "c", S + "v", S + "t", S + "row", S + "rPh"


class _Sheet:
    """One worksheet's rows as tab-separated lines, columns placed by their ``r`` refs.

    Only a cell's value (``<v>``) and inline string text (``<is><t>``) are collected: the
    character handler is set on their start and cleared on their end, so formulas and
    whitespace cost nothing.
    """

    def __init__(self, sink: TextSink, max_parts: int, shared: list[str],
                 styles: dict[int, str], base: datetime) -> None:
        self.sink = sink
        self.max_parts = max_parts
        self.shared = shared
        self.styles = styles
        self.base = base
        self.row: list[str] = []
        self.col = 0
        self.cell: dict[str, str] = {}  # the open cell's attributes
        self.skip = 0  # depth in a phonetic run (rPh) of an inline string
        self.columns: dict[str, int] = {}
        self.parser = p = new_parser()
        value: list[str] = []
        collect_value = value.append

        def start(tag: str, a: dict[str, str]) -> None:
            if tag == _C:
                self.cell = a
            elif tag == _V or tag == _T:
                if not self.skip:
                    p.CharacterDataHandler = collect_value
            elif tag == _ROW:
                self.row = []
                self.col = 0
            elif tag == _RPH or self.skip:
                self.skip += 1

        def end(tag: str) -> None:
            if tag == _V or tag == _T:
                p.CharacterDataHandler = None
            elif tag == _C:
                self._cell("".join(value))
                value.clear()
            elif tag == _ROW:
                if self.row:
                    self.sink.write("\t".join(self.row) + "\n")
                    self.row = []
            elif self.skip:
                self.skip -= 1

        p.StartElementHandler = start
        p.EndElementHandler = end

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
        t = a.get("t", "n")
        if t == "s":
            try:
                v = self.shared[int(raw)]
            except (ValueError, IndexError):
                return
        elif t == "n":
            style = a.get("s")
            kind = self.styles.get(int(style)) if style and style.isdigit() else None
            if not kind:
                v = _number(raw)
            elif kind.startswith("num:"):
                v = _format_number(raw, kind)
            else:
                v = _serial_date(raw, kind, self.base)
        elif t == "b":
            v = "TRUE" if raw.strip() in ("1", "true") else "FALSE"
        else:  # inlineStr, str (formula text), e (error), d (ISO date)
            v = raw
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

    def _overflow(self) -> None:
        if self.row:
            self.sink.write("\t".join(self.row[: self.max_parts]) + "\n")
            self.row = []
        raise CapReached("max_parts", f"{self.max_parts} cells in one row")


def _read_xlsx(pkg: _Package, main: str, sink: TextSink, max_parts: int) -> dict:
    sheets: list[tuple[str, str]] = []
    date1904 = False
    if main in pkg:
        rels = {rid: t for rid, typ, t in _read_rels(pkg, main)
                if typ.endswith("/worksheet")}
        found = collect(pkg.chunks(main), main,
                        frozenset({S + "sheet", S + "workbookPr"}))
        for tag, a in found:
            if tag == S + "workbookPr":
                date1904 = a.get("date1904", "").lower() in ("1", "true")
            elif rels.get(a.get(R + "id", "")) in pkg:
                sheets.append((a.get("name", ""), rels[a[R + "id"]]))
    if not sheets:
        sheets = [(posixpath.basename(p)[:-4], p)
                  for p in pkg.like("xl/worksheets", "sheet")]
    shared = _read_shared_strings(pkg)
    styles = _read_styles(pkg)
    base = _BASE_1904 if date1904 else _BASE_1900
    for name, part in sheets:
        sink.write(f"# {one_line(name)}\n")
        sheet = _Sheet(sink, max_parts, shared, styles, base)
        try:
            feed(sheet.parser, pkg.chunks(part), part)
        except CapReached:
            if sheet.row:  # the row open when a byte cap struck
                sink.write("\t".join(sheet.row) + "\n")
            raise
    return {"sheets": len(sheets)}


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


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    """Write the text of an OOXML package; see the module docstring for the rules."""
    if doc.mime == ENCRYPTED_MIME or doc.data[:8] == OLE_MAGIC:
        raise EncryptedDocument("encrypted document")
    zf = open_zip(doc.data)
    try:
        pkg = _Package(zf, Budget(ctx.limits))
        kind, main = _main_part(pkg, doc)
        if kind != "pptx" and main not in pkg:
            raise CorruptDocument(f"missing part {main}")
        if kind == "xlsx":
            meta = _read_xlsx(pkg, main, sink, ctx.limits.max_parts)
        else:
            flow = Flow(sink, ctx.limits)
            reader = _read_docx if kind == "docx" else _read_pptx
            meta = run_capped(flow, lambda: reader(pkg, main, flow))
    except (KeyError, IndexError, ValueError, RecursionError) as e:  # a structure we missed
        raise CorruptDocument(f"damaged {doc.name or 'document'}: {e!r}") from None
    finally:
        zf.close()
    return ReadResult(kind, meta)


READER = Reader(
    name="ooxml",
    version=3,
    mimes=DOCX_MIMES + XLSX_MIMES + PPTX_MIMES + (ENCRYPTED_MIME,),
    extensions=tuple(_EXT_KIND),
    settings=("max_member_bytes", "max_xml_bytes"),
    read=read,
)
