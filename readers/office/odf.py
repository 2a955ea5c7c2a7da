"""ODT, ODS and ODP (and templates, and the flat ``.fodt/.fods/.fodp`` files) as plain text.

A zip package is read from its ``styles.xml`` (list styles, master pages) then its
``content.xml``; a flat file is one XML document.  Both go through :mod:`bastion.readers.office.xmlsafe`
(capped bytes, an expat parser that refuses DTDs) and are streamed: only the open paragraph or
row is held, beside the list styles and the header and footer lines.  Which family it is comes
from the body element (``office:text``, ``office:spreadsheet``, ``office:presentation``), so one
set of rules serves all three: list labels, annotations, headers and footers, embedded objects
(charts in place, documents through ``ctx.read_nested``); they are listed in
``docs/readers/office.md``.  Extractors: ``odt``, ``ods``, ``odp`` (``odg`` for a drawing read as
a presentation).
"""

from __future__ import annotations

import io
import posixpath
import re
import zipfile
from typing import TYPE_CHECKING, Any, Callable

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument, EncryptedDocument, ReaderError, Unsupported
from ..metadata import DocMeta
from ..render.events import Heading, ListItem
from .ooxml import alt_line, comment_line, list_number

if TYPE_CHECKING:
    from .docprops import Props
from .flow import Flow, flow as make_flow, run_capped
from .xmlsafe import (Budget,
                      bytes_chunks,
                      feed,
                      member_chunks,
                      new_parser,
                      one_line,
                      open_zip,
                      parse_xml,
                      to_int)

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0 "
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0 "
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0 "
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0 "
PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0 "
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0 "
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0 "
DC = "http://purl.org/dc/elements/1.1/ "
OFFICEOOO = "http://openoffice.org/2009/office "  # LibreOffice's slide annotations
XLINK = "http://www.w3.org/1999/xlink "
MANIFEST = "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0 "
NUMBER = "urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0 "

_BASE = "application/vnd.oasis.opendocument."
MIMES = tuple(
    _BASE + kind + variant
    for kind in ("text", "spreadsheet", "presentation")
    for variant in ("", "-template", "-flat-xml")
)
EXTENSIONS = (".odt", ".ods", ".odp", ".ott", ".ots", ".otp", ".fodt", ".fods", ".fodp")

_BODY_KIND = {
    OFFICE + "text": "odt",
    OFFICE + "spreadsheet": "ods",
    OFFICE + "presentation": "odp",
    OFFICE + "drawing": "odg",
}
# Subtrees with no reading text: deleted changes, note numbers, index templates, shape
# titles, form controls.
_SKIPPED = frozenset({
    TEXT + "tracked-changes", TEXT + "note-citation", OFFICE + "forms",
    TEXT + "table-of-content-source", TEXT + "alphabetical-index-source",
    TEXT + "illustration-index-source", TEXT + "table-index-source",
    TEXT + "object-index-source", TEXT + "user-index-source", TEXT + "bibliography-source",
})
# Fields of a header or footer (page number, sheet name, date, ...): left out, as the
# slide-number placeholders of PPTX and the &-codes of XLSX are.
_HF_FIELDS = frozenset(TEXT + t for t in (
    "page-number", "page-count", "sheet-name", "date", "time", "file-name", "title",
    "subject", "chapter", "author-name", "author-initials"))
_HF_KINDS = {STYLE + k: k.split("-")[0] for k in (
    "header", "header-left", "header-first", "footer", "footer-left", "footer-first")}
_REGIONS = frozenset(STYLE + r for r in ("region-left", "region-center", "region-right"))
_LEVEL_STYLES = {TEXT + "list-level-style-number": "number",
                 TEXT + "list-level-style-bullet": "bullet",
                 TEXT + "list-level-style-image": "image",
                 TEXT + "outline-level-style": "number"}
# Outside the body, subtrees with nothing the reader uses: skipped with no start callbacks
# (expat then builds no attribute dictionaries); none of them nests its own element.
_STYLE_SKIPPED = frozenset({
    OFFICE + "font-face-decls", OFFICE + "scripts", STYLE + "page-layout",
    STYLE + "default-style", STYLE + "presentation-page-layout", OFFICE + "settings",
    DRAW + "frame", DRAW + "custom-shape",
} | {NUMBER + k for k in ("number-style", "currency-style", "percentage-style", "date-style",
                          "time-style", "boolean-style", "text-style")})
_LIST_STYLE, _OUTLINE_STYLE = TEXT + "list-style", TEXT + "outline-style"
_STYLE_STYLE, _STYLE_NAME = STYLE + "style", STYLE + "name"
_LIST_STYLE_NAME, _LEVEL = STYLE + "list-style-name", TEXT + "level"
_OFFICE_BODY = OFFICE + "body"
_MASTER_PAGE = STYLE + "master-page"
_INLINE_KINDS = {"text": "odt", "spreadsheet": "ods", "presentation": "odp", "chart": "odc",
                 "graphics": "odg", "formula": "odf"}
_ALT = frozenset({SVG + "title", SVG + "desc"})
# what a presentation's master page shows on its slides: shapes, frames, custom shapes (a
# group is entered, its shapes taken one by one)
_MASTER_SHAPES = frozenset(DRAW + t for t in (
    "rect", "polyline", "polygon", "regular-polygon", "path", "circle", "ellipse", "frame",
    "caption", "custom-shape"))
_MASTER_HEADINGS = (("header", "## header"), ("footer", "## footer"),
                    ("master", "## master page"))
_SHAPES = TABLE + "shapes"
# What starts a spreadsheet drawing: the sheet's shapes element and every ODF shape (in a cell)
_DRAWING_STARTS = frozenset({_SHAPES} | {DRAW + t for t in (
    "rect", "line", "polyline", "polygon", "regular-polygon", "path", "circle", "ellipse", "g",
    "page-thumbnail", "frame", "measure", "caption", "connector", "control", "custom-shape",
    "a")})
_WS = re.compile(r"[\t\n\r ]{2,}|[\t\n\r]")
_WORD = re.compile(r"\w")
_MAX_SPACES = 1000  # one text:s element expands to at most this many spaces
_MAX_LEVELS = 10
_MAX_STYLES = 100_000  # list and paragraph styles remembered at most


class _ListLevel:
    __slots__ = ("kind", "fmt", "prefix", "suffix", "display", "start", "bullet")

    def __init__(self, kind: str, a: dict[str, str]) -> None:
        self.kind = kind
        self.fmt = a.get(STYLE + "num-format", "")
        self.prefix = a.get(STYLE + "num-prefix", "")
        self.suffix = a.get(STYLE + "num-suffix", "")
        self.display = min(max(to_int(a.get(TEXT + "display-levels"), 1), 1), _MAX_LEVELS)
        self.start = to_int(a.get(TEXT + "start-value"), 1)
        bullet = a.get(TEXT + "bullet-char", "\u2022")[:1]
        # OpenSymbol and other symbol fonts draw private-use code points
        self.bullet = "\u2022" if not bullet or "\ue000" <= bullet <= "\uf8ff" else bullet


class _Lists:
    """List numbering: the list and outline styles (read outside the body), the counters of
    the lists open in the body, and the label each list item's first paragraph and each
    numbered heading gets."""

    def __init__(self) -> None:
        self.styles: dict[str, dict[int, _ListLevel]] = {}
        self.para_list: dict[str, str] = {}  # paragraph style -> its list style
        self.outline: dict[int, _ListLevel] = {}
        self.open: list[dict] = []  # open text:list: style, counters shared with the top
        self.last_top: list[int | None] | None = None  # counters of the last top-level list
        self.outline_counts: list[int | None] = [None] * _MAX_LEVELS
        self.item_first: list[bool] = []  # per open list item: its first paragraph is next
        self.style: dict | None = None  # the list style being read

    # -- styles (outside the body) ---------------------------------------------------------

    def style_start(self, tag: str, a: dict[str, str]) -> bool:
        """Read a list-style element; False when ``tag`` is none of them."""
        if tag == _LIST_STYLE:
            name = a.get(_STYLE_NAME, "")
            if len(self.styles) < _MAX_STYLES:
                self.style = self.styles.setdefault(name, {})
        elif tag == _OUTLINE_STYLE:
            self.style = self.outline
        elif tag in _LEVEL_STYLES:
            if self.style is not None:
                level = min(max(to_int(a.get(_LEVEL), 1), 1), _MAX_LEVELS)
                self.style[level] = _ListLevel(_LEVEL_STYLES[tag], a)
        else:
            return False
        return True

    def paragraph_style(self, a: dict[str, str]) -> None:
        ls = a.get(_LIST_STYLE_NAME)
        if ls and len(self.para_list) < _MAX_STYLES:
            self.para_list[a.get(_STYLE_NAME, "")] = ls

    # -- labels ----------------------------------------------------------------------------

    def label(self, levels: dict[int, _ListLevel], counts: list[int | None],
              level: int) -> str:
        lvl = levels.get(level)
        if lvl is None:
            return ""
        if lvl.kind != "number":
            return lvl.bullet + " "
        if not lvl.fmt:
            text = lvl.prefix + lvl.suffix
        else:
            nums = []
            for k in range(max(level - lvl.display + 1, 1), level + 1):
                klvl = levels.get(k)
                count = counts[k - 1]
                n = count if count is not None else (klvl.start if klvl else 1)
                nums.append(list_number(n, klvl.fmt if klvl else "1"))
            text = lvl.prefix + ".".join(nums) + lvl.suffix
        text = text.strip()
        return text + " " if text else ""

    def paragraph_label(self, attrs: dict[str, str]) -> str:
        """The label of a paragraph just opened: its list item's, if it is the item's first."""
        if not (self.item_first and self.item_first[-1] and self.open):
            return ""
        self.item_first[-1] = False
        top = self.open[-1]
        style = top["style"] or self.para_list.get(attrs.get(TEXT + "style-name", ""))
        levels = self.styles.get(style or "", {})
        return self.label(levels, top["counts"], len(self.open))

    def label_paragraph(self, flow: Flow, attrs: dict[str, str]) -> None:
        """Give the paragraph just opened its list item's label (a structured flow: a list
        item, labelled or not)."""
        listed = bool(self.open)
        label = self.paragraph_label(attrs)
        if label:
            flow.set_label(label, len(self.open) - 1)
        elif listed and flow.structured:  # a list item without a label of its own
            flow.set_block(ListItem(len(self.open) - 1, ""))

    def heading_label(self, attrs: dict[str, str]) -> str:
        """The outline number of a heading outside a list (counted here)."""
        if not self.outline or (self.item_first and self.open):
            return ""
        level = min(max(to_int(attrs.get(TEXT + "outline-level"), 1), 1), _MAX_LEVELS)
        lvl = self.outline.get(level)
        if lvl is None or not (lvl.fmt or lvl.prefix or lvl.suffix):
            return ""
        counts = self.outline_counts
        count = counts[level - 1]
        counts[level - 1] = lvl.start if count is None else count + 1
        for d in range(level, _MAX_LEVELS):
            counts[d] = None
        return self.label(self.outline, counts, level)

    # -- lists and items in the body -------------------------------------------------------

    def list_start(self, attrs: dict[str, str]) -> None:
        if len(self.open) >= 64:  # deeper nesting counts as the deepest level
            self.open.append(self.open[-1])
            return
        style = attrs.get(TEXT + "style-name") or (self.open[-1]["style"] if self.open
                                                   else None)
        if self.open:
            counts = self.open[-1]["counts"]
        elif (attrs.get(TEXT + "continue-numbering") == "true"
              or attrs.get(TEXT + "continue-list")) and self.last_top is not None:
            counts = self.last_top
        else:
            counts = [None] * _MAX_LEVELS
        self.open.append({"style": style, "counts": counts})

    def list_end(self) -> None:
        if self.open:
            top = self.open.pop()
            if not self.open:
                self.last_top = top["counts"]

    def item_start(self, attrs: dict[str, str]) -> None:
        self.item_first.append(True)
        if not self.open:
            return
        level = min(len(self.open), _MAX_LEVELS)
        counts = self.open[-1]["counts"]
        levels = self.styles.get(self.open[-1]["style"] or "", {})
        start = attrs.get(TEXT + "start-value")
        if start is not None:
            counts[level - 1] = to_int(start, 1)
        elif counts[level - 1] is None:
            lvl = levels.get(level)
            counts[level - 1] = lvl.start if lvl else 1
        else:
            counts[level - 1] += 1
        for d in range(level, _MAX_LEVELS):
            counts[d] = None

    def header_item_start(self, _attrs: dict[str, str]) -> None:
        self.item_first.append(False)

    def item_end(self) -> None:
        if self.item_first:
            self.item_first.pop()


class _Sheet:
    """Tables, rows and cells: the flow's row and cell events, and for a spreadsheet the
    ``# <sheet>`` line, the cell references and the annotations held until their row ends."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.ods = False  # the document is a spreadsheet
        self.tables = 0  # open table:table
        self.cells: list[tuple[int, str | None]] = []  # open cells: (repeat, ISO date)
        self.rows: list[int] = []  # open rows: their repeat count
        self.row_comments: list[Any] = []  # annotations of the open ODS row
        self.header_rows = 0  # open table:table-header-rows
        self.row_index = 0
        self.col_index = 0
        self.drawings: list[Any] = []  # lines of the open sheet's shapes, for after its rows

    def table_start(self, attrs: dict[str, str]) -> None:
        if not self.tables and self.ods:
            self.flow.heading(f"# {attrs.get(TABLE + 'name', '')}")
            self.row_index = 0
        self.tables += 1
        self.flow.open_table()

    def table_end(self) -> None:
        self.tables -= 1
        self.flow.close_table()
        if not self.tables and self.drawings:
            drawings, self.drawings = self.drawings, []
            for line in drawings:
                self.flow.emit(line)

    def hold_drawing(self) -> bool:
        """Whether the element just started (``table:shapes`` or a shape) is a spreadsheet
        drawing to hold for after the sheet's rows: the sheet's shapes, or a shape anchored in
        a cell (its text is not the cell's)."""
        return self.ods and self.tables == 1

    def keep_drawing(self, lines: list[Any]) -> None:
        self.drawings.extend(lines)
        if len(self.drawings) > self.flow.max_parts:  # held no further: the open row, the
            self.flow.flush()                         # drawings, then the cap
            drawings, self.drawings = self.drawings, []
            for line in drawings:
                self.flow.emit(line)
            raise CapReached("max_parts", f"{self.flow.max_parts} drawing lines in one sheet")

    def header_start(self, _attrs: dict[str, str]) -> None:
        self.header_rows += 1  # table:table-header-rows: its rows are header rows

    def header_end(self) -> None:
        self.header_rows = max(self.header_rows - 1, 0)

    def row_start(self, attrs: dict[str, str]) -> None:
        repeat = max(to_int(attrs.get(TABLE + "number-rows-repeated"), 1), 1)
        self.rows.append(repeat)
        self.row_index += 1
        self.col_index = 0
        self.flow.open_row()
        if self.header_rows:
            self.flow.set_row(True)

    def row_end(self) -> None:
        repeat = self.rows.pop() if self.rows else 1
        self.row_index += min(repeat, 1 << 40) - 1
        self.flow.close_row(repeat)
        if self.row_comments and not self.rows:
            comments, self.row_comments = self.row_comments, []
            for line in comments:
                self.flow.emit(line)

    def cell_start(self, attrs: dict[str, str]) -> None:
        repeat = max(to_int(attrs.get(TABLE + "number-columns-repeated"), 1), 1)
        date = attrs.get(OFFICE + "date-value") if (
            attrs.get(OFFICE + "value-type") == "date") else None
        self.cells.append((repeat, date))
        self.flow.open_cell()

    def cell_end(self) -> None:
        repeat, date = self.cells.pop() if self.cells else (1, None)
        self.col_index += min(repeat, 1 << 40)
        self.flow.close_cell(repeat, fallback=date)  # the text shown, else the ISO date

    def cell_ref(self) -> str:
        """``B3`` for the open cell of a spreadsheet, else empty."""
        if not self.ods or not self.rows:
            return ""
        col, letters = self.col_index, ""
        while True:
            col, rem = divmod(col, 26)
            letters = chr(65 + rem) + letters
            if not col:
                break
            col -= 1
        return f"{letters}{self.row_index}"

    def hold_comment(self, line: Any) -> bool:
        """Keep a cell's annotation for after its row; False outside a spreadsheet row."""
        if not (self.ods and self.rows):
            return False
        if len(self.row_comments) <= self.flow.max_parts:
            self.row_comments.append(line)
        return True


class _Capture:
    """Text collected outside the flow: an annotation, a header or footer, a presentation's
    footer declaration.  ``paras`` are its paragraphs; ``regions`` group them (ODS headers)."""

    __slots__ = ("paras", "regions", "creator", "in_creator", "field", "depth", "kind")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.paras: list[list[str]] = []
        self.regions: list[list[str]] = []
        self.creator: list[str] = []
        self.in_creator = False
        self.field = 0  # depth inside a dropped field
        self.depth = 0

    def lines(self) -> list[str]:
        if self.regions:
            texts = [" ".join(" ".join("".join(p).split()) for p in r).strip()
                     for r in self.regions]
            line = "\t".join(t for t in texts if t)
            return [line] if line else []
        return [t for t in ("".join(p).strip() for p in self.paras) if t]


class _Captures:
    """Annotations, alt text (``svg:desc``), headers and footers: each element's text is
    captured apart from the flow, then written as a marker line (annotations after their
    paragraph or row, alt text in place) or kept for ``## header`` / ``## footer``."""

    def __init__(self, flow: Flow, sheet: _Sheet, max_chars: int) -> None:
        self.flow = flow
        self.sheet = sheet
        self.capture: _Capture | None = None
        self.captured: dict[str, list[str]] = {"header": [], "footer": [], "master": []}
        self.captured_chars = 0
        self.max_chars = max_chars or (1 << 62)

    def open(self, kind: str) -> None:
        self.capture = _Capture(kind)

    def text(self, data: str) -> None:
        cap = self.capture
        assert cap is not None  # called only while an element is captured
        if cap.in_creator:
            cap.creator.append(data)
        elif cap.paras and not cap.field:
            cap.paras[-1].append(_WS.sub(" ", data))
        elif cap.kind in ("footer", "header", "alt") and not cap.paras and not cap.field:
            cap.paras.append([_WS.sub(" ", data)])  # a declaration's bare text

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        cap = self.capture
        assert cap is not None  # called only while an element is captured
        cap.depth += 1
        if cap.field:
            cap.field += 1
        elif tag in (TEXT + "p", TEXT + "h"):
            cap.paras.append([])
            if cap.regions:
                cap.regions[-1].append("")
        elif tag in _REGIONS:
            cap.regions.append([])
        elif tag == DC + "creator":
            cap.in_creator = True
        elif tag == TEXT + "s" and cap.paras:
            cap.paras[-1].append(" " * min(max(to_int(attrs.get(TEXT + "c"), 1), 1), 100))
        elif tag == TEXT + "tab" and cap.paras:
            cap.paras[-1].append("\t" if cap.kind in ("header", "footer") else " ")
        elif tag == TEXT + "line-break" and cap.paras:
            cap.paras[-1].append(" ")
        elif tag in _HF_FIELDS or tag in (DC + "date", TEXT + "note-citation") or (
                tag == TEXT + "note" or tag == TEXT + "tracked-changes") or (
                tag in _ALT and cap.kind != "alt"):  # a shape's title inside a footer frame
            cap.field = 1

    def end(self, tag: str) -> None:
        cap = self.capture
        assert cap is not None  # called only while an element is captured
        if cap.field:
            cap.field -= 1
        elif tag == DC + "creator":
            cap.in_creator = False
        elif tag in (TEXT + "p", TEXT + "h") and cap.regions and cap.paras:
            cap.regions[-1][-1] = "".join(cap.paras[-1])
        if cap.depth:
            cap.depth -= 1
            return
        self.capture = None  # the captured element itself ended
        self._captured(cap)

    def _captured(self, cap: _Capture) -> None:
        if cap.kind == "comment":
            body = " ".join(cap.lines())
            if not body:
                return
            line = self.flow.note(comment_line("".join(cap.creator), body,
                                               self.sheet.cell_ref()))
            if not self.sheet.hold_comment(line):
                self.flow.emit(line)
        elif cap.kind == "alt":
            body = " ".join(cap.lines())
            if body:
                self.flow.emit(self.flow.caption(alt_line(body)))
        else:
            target = self.captured[cap.kind]
            for line in cap.lines():
                if not _WORD.search(line):  # only what a dropped field left: "()", " / "
                    continue
                if line not in target and self.captured_chars < self.max_chars:
                    target.append(line)
                    self.captured_chars += len(line)

    def headers_footers(self) -> None:
        """``## header`` and ``## footer`` after the body (then a presentation master
        page's other text as ``## master page``): each distinct line once."""
        for kind, heading in _MASTER_HEADINGS:
            lines = self.captured[kind]
            if lines:
                self.flow.pending_heading = heading
                for line in lines:
                    self.flow.emit(line)
                self.flow.pending_heading = None


class _Deck:
    """A presentation's slides as read so far: how many, the open shapes (each: inside a
    slide's title, the Markdown's heading), the open slide's notes lines (written at its
    end)."""

    __slots__ = ("count", "shapes", "notes")

    def __init__(self) -> None:
        self.count = 0
        self.shapes: list[bool] = []
        self.notes: list[Any] = []


class _Handlers:
    """The handlers of a document's elements by tag: at their start (given the
    attributes), at their end."""

    __slots__ = ("starts", "ends")

    def __init__(self, starts: dict[str, Callable[[dict[str, str]], None]],
                 ends: dict[str, Callable[[], None]]) -> None:
        self.starts = starts
        self.ends = ends


class _Content:
    """Events of an ODF document (``styles.xml``, then ``content.xml``, or one flat file)
    turned into lines: paragraphs, slides and embedded objects here, through the flow; list
    numbering in :class:`_Lists`, tables in :class:`_Sheet`, annotations, headers and footers
    in :class:`_Captures`."""

    def __init__(self, flow: Flow, objects: Callable[[str], list[Any]] | None = None,
                 max_chars: int = 0) -> None:
        self.flow = flow
        self.objects = objects  # reads an embedded object (draw:object) into lines
        self.parser: Any = None  # the running expat parser (for skipping subtrees)
        self.kind = ""  # odt / ods / odp / odg once the body element is seen
        self.in_body = False
        self.in_master = False  # inside styles.xml's style:master-page
        self.inner_bodies = 0  # open office:body elements of inline objects (a flat file's)
        self.skip = 0
        self.in_p = 0  # open text:p / text:h
        self.held = 0  # depth inside a spreadsheet drawing held for after the rows
        self.deck = _Deck()
        self.lists = _Lists()
        self.sheet = sheet = _Sheet(flow)
        self.captures = _Captures(flow, sheet, max_chars)
        self.handlers = _handlers(self, flow)

    # -- dispatch --------------------------------------------------------------------------

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if self.skip:
            self.skip += 1
        elif self.captures.capture is not None:
            self.captures.start(tag, attrs)
        elif self.in_body:
            if tag in _SKIPPED:
                self._skip_subtree(tag)
                return
            if tag == _OFFICE_BODY:  # an inline object's document (draw:object in a flat file)
                self.inner_bodies += 1
                return
            if tag == OFFICE + "document":
                kind = attrs.get(OFFICE + "mimetype", "").rsplit(".", 1)[-1]
                self.flow.emit(f"[embedded: inline object ({_INLINE_KINDS.get(kind, kind)})]")
                return
            f = self.handlers.starts.get(tag)
            if f is not None:
                f(attrs)
        elif tag == _OFFICE_BODY:
            self.in_body = True
        elif tag in _HF_KINDS:
            if attrs.get(STYLE + "display") != "false":
                self.captures.open(_HF_KINDS[tag])
        elif tag == _MASTER_PAGE:
            self.in_master = True
        elif self.in_master and tag in _MASTER_SHAPES:
            self._master_shape(tag, attrs)
        elif self.in_master and tag == PRESENTATION + "notes":
            self._skip_subtree(tag)  # the notes page's template
        elif tag == _STYLE_STYLE:
            self.lists.paragraph_style(attrs)
            self._skip_subtree(tag)  # its properties
        elif tag in _STYLE_SKIPPED:
            self._skip_subtree(tag)
        else:
            self.lists.style_start(tag, attrs)

    def end(self, tag: str) -> None:
        if self.skip:
            self.skip -= 1
        elif self.captures.capture is not None:
            self.captures.end(tag)
        elif self.in_body:
            if tag == _OFFICE_BODY:
                if self.inner_bodies:
                    self.inner_bodies -= 1
                else:
                    self.in_body = False
                return
            f = self.handlers.ends.get(tag)
            if f is not None:
                f()
        elif tag == _LIST_STYLE or tag == _OUTLINE_STYLE:
            self.lists.style = None
        elif tag == _MASTER_PAGE:
            self.in_master = False

    def _master_shape(self, tag: str, attrs: dict[str, str]) -> None:
        """A shape on a presentation's master page: a header or footer frame's own text
        (shown on every slide), a plain shape's text (``## master page``); a placeholder
        (title, outline, date, page number: template text) is skipped."""
        cls = attrs.get(PRESENTATION + "class")
        if cls in ("header", "footer"):
            self.captures.open(cls)
        elif cls or attrs.get(PRESENTATION + "placeholder") == "true":
            self._skip_subtree(tag)
        else:
            self.captures.open("master")

    def _skip_subtree(self, tag: str) -> None:
        """Skip the element just started: no callbacks until its end tag (the skipped
        elements never nest themselves); without a parser, count depth instead."""
        p = self.parser
        if p is None:
            self.skip = 1
            return

        def until_end(t: str) -> None:
            if t == tag:
                p.StartElementHandler = self.start
                p.EndElementHandler = self.end
                p.CharacterDataHandler = self.text

        p.StartElementHandler = None
        p.CharacterDataHandler = None
        p.EndElementHandler = until_end

    def text(self, data: str) -> None:
        if self.captures.capture is not None:
            self.captures.text(data)
        elif self.in_p and not self.skip:
            self.flow.add(_WS.sub(" ", data))

    def headers_footers(self) -> None:
        self.captures.headers_footers()

    # -- body ------------------------------------------------------------------------------

    def _kind(self, kind: str) -> Callable[[dict[str, str]], None]:
        def handler(_attrs: dict[str, str]) -> None:
            self.kind = self.kind or kind
            self.sheet.ods = self.kind == "ods"
        return handler

    def _p_start(self, attrs: dict[str, str]) -> None:
        self.in_p += 1
        self.flow.open_para()
        first = self.lists.item_first
        if first and first[-1]:  # the first paragraph of a list item (checked here: hot)
            self.lists.label_paragraph(self.flow, attrs)
        shapes = self.deck.shapes
        if shapes and shapes[-1]:
            self.flow.set_block(Heading(2))

    def _h_start(self, attrs: dict[str, str]) -> None:
        self._p_start(attrs)
        if self.flow.structured:
            level = min(max(to_int(attrs.get(TEXT + "outline-level"), 1), 1), 6)
            self.flow.set_block(Heading(level))
        label = self.lists.heading_label(attrs)
        if label:
            self.flow.set_label(label)

    def _p_end(self) -> None:
        self.in_p -= 1
        self.flow.close_para()

    def _spaces(self, attrs: dict[str, str]) -> None:
        if self.in_p:
            self.flow.add(" " * min(max(to_int(attrs.get(TEXT + "c"), 1), 1), _MAX_SPACES))

    def _page_start(self, _attrs: dict[str, str]) -> None:
        self.deck.count += 1
        self.flow.heading(f"# slide {self.deck.count}")

    def _drawing_start(self, attrs: dict[str, str]) -> None:
        shapes = self.deck.shapes
        if self.flow.structured and len(shapes) < 256:  # a slide's title: a heading
            shapes.append(bool(shapes and shapes[-1]) or (
                self.kind == "odp" and attrs.get(PRESENTATION + "class") == "title"))
        # shapes nest only in shapes, so counting these elements finds the held one's end
        if self.held:
            self.held += 1
        elif self.sheet.hold_drawing():
            self.flow.hold()
            self.held = 1

    def _drawing_end(self) -> None:
        if self.deck.shapes:
            self.deck.shapes.pop()
        if self.held:
            self.held -= 1
            if not self.held:
                self.sheet.keep_drawing(self.flow.release())

    def _page_end(self) -> None:
        """The notes after the slide's text and its annotations (written after the notes)."""
        if self.deck.notes:
            notes, self.deck.notes = self.deck.notes, []
            self.flow.pending_heading = "## notes"
            for line in notes:
                self.flow.emit(line)
            self.flow.pending_heading = None

    def _notes_start(self, _attrs: dict[str, str]) -> None:
        self.flow.hold()

    def _notes_end(self) -> None:
        self.deck.notes.extend(self.flow.release())

    def _object(self, attrs: dict[str, str]) -> None:
        href = attrs.get(XLINK + "href", "")
        if self.objects is not None and href:
            for line in self.objects(href):
                self.flow.emit(line)


def _handlers(content: _Content, flow: Flow) -> _Handlers:
    """A document's element handlers: the content's own, its lists', its tables', its
    captures'; a structured flow's links and table header rows besides."""
    lists, sheet, caps = content.lists, content.sheet, content.captures
    f = flow
    starts: dict[str, Callable[[dict[str, str]], None]] = {
        TEXT + "p": content._p_start,
        TEXT + "h": content._h_start,
        TEXT + "s": content._spaces,
        TEXT + "tab": lambda a: f.add("\t") if content.in_p else None,
        TEXT + "line-break": lambda a: f.add("\n") if content.in_p else None,
        TABLE + "table": sheet.table_start,
        TABLE + "table-row": sheet.row_start,
        TABLE + "table-cell": sheet.cell_start,
        TABLE + "covered-table-cell": sheet.cell_start,
        DRAW + "page": content._page_start,
        DRAW + "object": content._object,
        PRESENTATION + "notes": content._notes_start,
        PRESENTATION + "footer-decl": lambda a: caps.open("footer"),
        PRESENTATION + "header-decl": lambda a: caps.open("header"),
        OFFICE + "annotation": lambda a: caps.open("comment"),
        OFFICEOOO + "annotation": lambda a: caps.open("comment"),
        SVG + "desc": lambda a: caps.open("alt"),
        SVG + "title": lambda a: caps.open("alt"),
        TEXT + "list": lists.list_start,
        TEXT + "list-item": lists.item_start,
        TEXT + "list-header": lists.header_item_start,
        **{tag: content._kind(kind) for tag, kind in _BODY_KIND.items()},
        **{tag: content._drawing_start for tag in _DRAWING_STARTS},
    }
    if flow.structured:  # what only the Markdown shows: links, table header rows
        starts.update({
            TEXT + "a": lambda a: f.link_start(a.get(XLINK + "href", "")) if content.in_p
            else None,
            TABLE + "table-header-rows": sheet.header_start,
        })
    ends: dict[str, Callable[[], None]] = {
        TEXT + "p": content._p_end,
        TEXT + "h": content._p_end,
        TABLE + "table": sheet.table_end,
        TABLE + "table-row": sheet.row_end,
        TABLE + "table-cell": sheet.cell_end,
        TABLE + "covered-table-cell": sheet.cell_end,
        PRESENTATION + "notes": content._notes_end,
        DRAW + "page": content._page_end,
        TEXT + "list": lists.list_end,
        TEXT + "list-item": lists.item_end,
        TEXT + "list-header": lists.item_end,
        **{tag: content._drawing_end for tag in _DRAWING_STARTS},
    }
    if flow.structured:
        ends.update({TEXT + "a": flow.link_end,
                     TABLE + "table-header-rows": sheet.header_end})
    return _Handlers(starts, ends)


def _parse(content: "_Content", chunks, name: str) -> None:
    """Stream one part through a refusing parser driving ``content``."""
    p = new_parser()
    p.StartElementHandler = content.start
    p.EndElementHandler = content.end
    p.CharacterDataHandler = content.text
    content.parser = p
    try:
        feed(p, chunks, name)
    finally:
        content.parser = None


def _check_manifest(zf: zipfile.ZipFile, names: set[str], budget: Budget) -> dict[str, str]:
    """Refuse a password-protected package (its manifest carries encryption data); return the
    media type of every folder entry (the embedded objects)."""
    part = "META-INF/manifest.xml"
    if part not in names:
        return {}
    types: dict[str, str] = {}
    encrypted = [False]

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == MANIFEST + "encryption-data":
            encrypted[0] = True
        elif tag == MANIFEST + "file-entry":
            path = a.get(MANIFEST + "full-path", "")
            if path.endswith("/") and len(types) < 10_000:
                types[path.rstrip("/")] = a.get(MANIFEST + "media-type", "")

    try:
        parse_xml(member_chunks(zf, part, budget), part, start)
    except CorruptDocument:
        if any(b"encryption-data" in c for c in member_chunks(zf, part, budget)):
            raise EncryptedDocument("encrypted document") from None
        return {}
    if encrypted[0]:
        raise EncryptedDocument("encrypted document")
    return types


_OBJECT_EXT = {"text": ".odt", "spreadsheet": ".ods", "presentation": ".odp"}


class _Objects:
    """The embedded objects of a package (``draw:object xlink:href="./Object 1"``): a chart
    is read here (``[chart]``, its titles and its data table); a text, spreadsheet or
    presentation is rebuilt as a package and read through ``ctx.read_nested``."""

    def __init__(self, zf: zipfile.ZipFile, names: set[str], types: dict[str, str],
                 budget: Budget, ctx: Context, flow: Flow) -> None:
        self.zf, self.names, self.types, self.budget, self.ctx = zf, names, types, budget, ctx
        self.flow = flow  # the document's: its sinks' kind, its lines' types
        self.done: set[str] = set()

    def __call__(self, href: str) -> list[Any]:
        folder = posixpath.normpath(href[2:] if href.startswith("./") else href)
        if folder in self.done or folder.startswith("..") or f"{folder}/content.xml" not in \
                self.names:
            return []
        self.done.add(folder)
        media = self.types.get(folder, "")
        kind = media.rsplit(".", 1)[-1] if media.startswith(_BASE) else ""
        if kind == "chart" or not kind:
            return self._chart(folder)
        ext = _OBJECT_EXT.get(kind)
        if ext is None:
            return []
        return self._nested(folder, media, ext)

    def _chart(self, folder: str) -> list[Any]:
        sink = self.flow.sink.nested(self.ctx.limits.max_chars)
        flow = make_flow(sink, self.ctx.limits)
        content = _Content(flow)
        part = f"{folder}/content.xml"
        run_capped(flow, lambda: _parse(content, member_chunks(self.zf, part, self.budget), part))
        lines = [ln for ln in sink.getvalue().splitlines() if ln.strip()]
        if not lines:
            return []
        head = (f"[embedded: {one_line(folder)} ({content.kind})]" if content.kind  # a
                else "[chart]")  # document read as a chart, or a chart
        return [head] + self.flow.fragment(lines, sink)

    def _nested(self, folder: str, media: str, ext: str) -> list[Any]:
        buf = io.BytesIO()
        prefix = folder + "/"
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as out:
            out.writestr("mimetype", media)
            for name in sorted(self.names):
                if name.startswith(prefix) and not name.endswith("/"):
                    out.writestr(name[len(prefix):],
                                 b"".join(member_chunks(self.zf, name, self.budget)))
        name = folder + ext
        sink = self.flow.sink.nested(self.ctx.limits.max_chars)
        try:
            extractor = self.ctx.read_nested(buf.getvalue(), posixpath.basename(name), sink)
        except CapReached:
            raise
        except Unsupported as e:
            return [f"[embedded: {one_line(folder)}: not read: {e.message}]"]
        except ReaderError as e:
            return [f"[embedded: {one_line(folder)}: not read: {e.kind}: {e.message}]"]
        lines = [ln for ln in sink.getvalue().splitlines() if ln.strip()]
        if not lines:
            return []
        return [f"[embedded: {one_line(folder)} ({extractor})]"] + self.flow.fragment(lines, sink)


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    """Write the text of an ODF package or flat ODF file; rules in the module docstring."""
    budget = Budget(ctx.limits)
    flow = make_flow(sink, ctx.limits)
    content = _Content(flow, max_chars=ctx.limits.max_chars)

    def parse(chunks, name: str) -> None:
        _parse(content, chunks, name)

    props = None
    try:
        if doc.data[:2] == b"PK":
            with open_zip(doc.data) as zf:
                names = set(zf.namelist())
                types = _check_manifest(zf, names, budget)
                if "content.xml" not in names:
                    raise CorruptDocument("not an OpenDocument package (no content.xml)")
                props = _package_props(zf, names, budget)
                content.objects = _Objects(zf, names, types, budget, ctx, flow)
                if "styles.xml" in names:  # list styles and master pages first
                    run_capped(flow, lambda: parse(member_chunks(zf, "styles.xml", budget),
                                                   "styles.xml"))
                chunks = member_chunks(zf, "content.xml", budget)
                run_capped(flow, lambda: parse(chunks, "content.xml"))
                run_capped(flow, content.headers_footers)
        else:
            name = doc.name or "flat ODF"
            props = _flat_props(doc.data)
            chunks = bytes_chunks(doc.data, name, budget)
            run_capped(flow, lambda: parse(chunks, name))
            run_capped(flow, content.headers_footers)
    except CapReached as cap:
        cap.with_metadata(_doc_meta(props, content))
        raise
    except (KeyError, IndexError, ValueError, RecursionError) as e:
        raise CorruptDocument(f"damaged {doc.name or 'document'}: {e!r}") from None
    if not content.kind:
        raise CorruptDocument("not an OpenDocument text, spreadsheet or presentation")
    details = {"slides": content.deck.count} if content.kind in ("odp", "odg") else {}
    return ReadResult(content.kind, details=details).with_metadata(_doc_meta(props, content))


def _package_props(zf: Any, names: set[str], budget: Budget) -> "Props | None":
    """meta.xml's properties; a damaged part costs the metadata, never the text."""
    if "meta.xml" not in names:
        return None
    from .docprops import properties

    try:
        return properties(member_chunks(zf, "meta.xml", budget), "meta.xml")
    except (CorruptDocument, EncryptedDocument):
        return None


_FLAT_META = re.compile(rb"<office:meta\b.*?</office:meta>", re.DOTALL)
_FLAT_ROOT = (b'<office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:'
              b'office:1.0" xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
              b'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xlink="http://www.w3.org/'
              b'1999/xlink" xmlns:ooo="http://openoffice.org/2004/office">')


def _flat_props(data: bytes) -> "Props | None":
    """A flat file's ``office:meta`` (found in its first MiB under the usual prefixes)."""
    m = _FLAT_META.search(data, 0, 1 << 20)
    if m is None:
        return None
    from .docprops import properties

    try:
        return properties(_FLAT_ROOT + m.group() + b"</office:document-meta>", "office:meta")
    except (CorruptDocument, EncryptedDocument):
        return None


def _doc_meta(props: "Props | None", content: "_Content") -> DocMeta:
    from .docprops import Props, odf_meta

    doc_meta = odf_meta(props or Props(), content.kind)
    if content.kind in ("odp", "odg") and content.deck.count:
        doc_meta = DocMeta(**{**_fields_of(doc_meta), "slides": content.deck.count})
    return doc_meta


def _fields_of(doc_meta: DocMeta) -> dict[str, Any]:
    from dataclasses import fields

    return {f.name: getattr(doc_meta, f.name) for f in fields(doc_meta)}


READER = Reader(name="odf", version=4, mimes=MIMES, extensions=EXTENSIONS,
                settings=("max_member_bytes", "max_xml_bytes"), read=read)
