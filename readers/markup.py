"""HTML and XHTML: visible text, one line per block, table cells separated by tabs.

Decoding (first rule that applies): a byte-order mark; a charset declared in the first 4 KiB
(``<meta charset>``, ``<meta http-equiv="Content-Type" content="…; charset=…">`` or an XML
declaration's ``encoding``), with the WHATWG aliases (``iso-8859-1``/``ascii`` read as
windows-1252, a declared UTF-16 without a BOM read as UTF-8); strict UTF-8; windows-1252.

The stdlib :class:`html.parser.HTMLParser` is streaming and not recursive, so the decoded text
is fed to it in chunks and nesting depth costs nothing.  Rules:

* ``script``, ``style``, ``noscript`` and ``template`` content is dropped, as are comments,
  processing instructions and declarations; ``<title>`` becomes its own line (the first, in
  any normal document) and ``meta["title"]``.
* Block elements (``p``, ``div``, ``li``, ``tr``, ``h1``–``h6``, ``table``, …) start and end a
  line; ``<br>`` always breaks the line; table cells of one row are separated by a tab.
* Entities are resolved; whitespace runs collapse to one space outside ``pre``/``textarea``.
* A table row with more than ``Limits.max_parts`` cells stops the document (``max_parts``);
  the character budget is the sink's.

Extractor ``html``; the charset used is ``meta["charset"]``.  :func:`html_to_text` is the same
conversion for an already decoded string (the e-mail reader's HTML bodies).
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

from .base import (Context, Document, Limits, Reader, ReadResult, SinkBuffer, TextSink,
                   bom_codec)
from .errors import CapReached

_PRESCAN = 4096  # bytes searched for a declared charset
_CHUNK = 1 << 16  # characters fed to the parser at a time (grows with a long pending tag)
_MAX_TABLE_DEPTH = 256  # nested tables tracked separately; deeper ones share a row counter

_DECLARED = re.compile(
    rb"""<meta\b[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})"""
    rb"""|<\?xml\b[^>]*?encoding\s*=\s*["']\s*([A-Za-z0-9_.:-]{1,40})""",
    re.IGNORECASE,
)
# WHATWG: these labels mean windows-1252 on the web; a declared UTF-16 without a BOM is UTF-8.
_ALIASES = {
    "ascii": "cp1252", "latin_1": "cp1252", "iso8859_1": "cp1252",
    "utf_16": "utf-8", "utf_16_le": "utf-8", "utf_16_be": "utf-8",
}

_SKIP = frozenset({"script", "style", "noscript", "template"})
_PRE = frozenset({"pre", "textarea", "listing", "xmp", "plaintext"})
_CELLS = frozenset({"td", "th"})
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd",
    "details", "dialog", "dir", "div", "dl", "dt", "fieldset", "figcaption", "figure",
    "footer", "form", "frameset", "h1", "h2", "h3", "h4", "h5", "h6", "head", "header",
    "hgroup", "hr", "html", "legend", "li", "main", "menu", "nav", "ol", "optgroup",
    "option", "p", "section", "select", "summary", "table", "tbody", "tfoot", "thead",
    "title", "tr", "ul",
}) | _PRE
_WS = re.compile(r"[ \t\n\r\f]+")

_LINE_START, _AFTER_TAB, _IN_LINE = 0, 1, 2


def text_codec(label: str | None) -> str | None:
    """The Python codec for a declared charset label, or None if unknown or not a text codec.

    Refuses codecs that are not text encodings (``zlib``, ``base64``, ``rot13``…): a label
    in an untrusted file must never select a decompressor.
    """
    if not label:
        return None
    try:
        info = codecs.lookup(label.strip().strip("\"'"))
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True):
        return None
    return _ALIASES.get(info.name.replace("-", "_"), info.name)


def sniff_charset(data: bytes) -> tuple[str, int]:
    """(codec, bytes to skip) for an HTML document's bytes; see the module docstring."""
    marked = bom_codec(data)
    if marked is not None:
        return marked
    head = data[:_PRESCAN]
    for m in _DECLARED.finditer(head):
        codec = text_codec((m.group(1) or m.group(2)).decode("ascii"))
        if codec:
            return codec, 0
    if data.isascii() or _is_utf8(data):
        return "utf-8", 0
    return "cp1252", 0


def _is_utf8(data: bytes) -> bool:
    """Strict UTF-8 check, a chunk at a time (no full-size copy of a large document)."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    try:
        for off in range(0, len(view), 1 << 20):
            decoder.decode(view[off:off + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


class _Lines:
    """Whitespace-collapsing line writer in front of a sink (buffered, flushed in chunks)."""

    __slots__ = ("_put", "flush", "state", "space", "newlines")

    def __init__(self, sink: TextSink) -> None:
        buffer = SinkBuffer(sink)
        self._put = buffer.put
        self.flush = buffer.flush
        self.state = _LINE_START
        self.space = False  # a collapsed space waits for the next word on this line
        self.newlines = 1  # consecutive line breaks just written (the start counts as one)

    def text(self, s: str) -> None:
        """Flowing text: whitespace runs collapse to one space, none at a line start."""
        words = _WS.split(s)
        lead = not words[0]
        trail = not words[-1]
        body = " ".join(w for w in words if w)
        if not body:
            if s:
                self.space = True
            return
        if (lead or self.space) and self.state == _IN_LINE:
            self._put(" ")
        self._put(body)
        self.state = _IN_LINE
        self.newlines = 0
        self.space = trail

    def raw(self, s: str) -> None:
        """Preformatted text, kept as it is."""
        if not s:
            return
        if self.space and self.state == _IN_LINE:
            self._put(" ")
        self.space = False
        self._put(s)
        if s.endswith("\n"):
            self.state = _LINE_START
            self.newlines = 1
        else:
            self.state = _IN_LINE
            self.newlines = 0

    def newline(self, force: bool = False) -> None:
        """End the line (a block boundary); ``force`` (``<br>``) may also leave an empty one."""
        self.space = False
        if self.state != _LINE_START or (force and self.newlines < 2):
            self._put("\n")
            self.newlines += 1
            self.state = _LINE_START

    def tab(self) -> None:
        self.space = False
        self._put("\t")
        self.state = _AFTER_TAB
        self.newlines = 0

    def finish(self) -> None:
        if self.state != _LINE_START:
            self._put("\n")
            self.state = _LINE_START
        self.flush()


class _TextParser(HTMLParser):
    """Turns parser events into lines; holds only counters and a bounded table stack."""

    def __init__(self, out: _Lines, max_parts: int) -> None:
        super().__init__(convert_charrefs=True)
        self.out = out
        self.max_parts = max_parts
        self.skip = 0  # open noscript/template elements (script/style are CDATA to the parser)
        self.pre = 0  # open pre-like elements
        self.pre_start = False  # drop the newline right after <pre>
        self.cells: list[int] = []  # cells seen in the current row, per open table
        self.title: list[str] | None = None  # collecting the first <title>
        self.meta_title: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in _SKIP:
            if tag in ("noscript", "template"):
                self.skip += 1
            return
        if self.skip:
            return
        if tag in _CELLS:
            self._cell()
        elif tag == "br":
            self.out.newline(force=True)
        elif tag in _BLOCKS:
            self.out.newline()
            if tag == "table":
                if len(self.cells) < _MAX_TABLE_DEPTH:
                    self.cells.append(0)
            elif tag == "tr" and self.cells:
                self.cells[-1] = 0
            elif tag in _PRE:
                self.pre += 1
                self.pre_start = True
            elif tag == "title" and self.meta_title is None:
                self.title = []

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        # <div/> opens a div in HTML; only void elements (br, hr…) really are empty
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("noscript", "template"):
            self.skip = max(0, self.skip - 1)
            return
        if self.skip or tag in _SKIP:
            return
        if tag == "br":  # </br> is read as <br>, as browsers do
            self.out.newline(force=True)
        elif tag in _BLOCKS:
            self.out.newline()
            if tag == "table" and self.cells:
                self.cells.pop()
            elif tag in _PRE:
                self.pre = max(0, self.pre - 1)
            elif tag == "title" and self.title is not None:
                self.meta_title = " ".join("".join(self.title).split())
                self.title = None

    def _cell(self) -> None:
        if not self.cells:
            self.cells.append(0)
        n = self.cells[-1] + 1
        self.cells[-1] = n
        if n > self.max_parts:
            self.out.flush()
            raise CapReached("max_parts", f"a table row of more than {self.max_parts} cells")
        if n > 1:
            self.out.tab()

    def handle_data(self, data: str) -> None:
        if self.skip or self.cdata_elem:
            return
        if self.title is not None:
            self.title.append(data)
        if self.pre:
            if self.pre_start and data.startswith("\n"):
                data = data[1:]
            self.pre_start = False
            self.out.raw(data)
        else:
            self.out.text(data)

    def parse_html_declaration(self, i: int) -> int:
        # _markupbase raises AssertionError on some malformed declarations ("<![x[", a DOCTYPE
        # with a bad internal subset): read those as bogus comments, as browsers do.
        try:
            return super().parse_html_declaration(i)
        except AssertionError:
            j = self.rawdata.find(">", i + 2)
            return -1 if j < 0 else j + 1

    def unknown_decl(self, data: str) -> None:
        if data.startswith("CDATA[") and not self.skip:  # XHTML CDATA section: text
            self.handle_data(data[6:])


def _feed(parser: _TextParser, pieces) -> None:
    """Feed decoded pieces, growing the piece size while the parser holds an unfinished tag,
    so a huge tag or comment costs linear, not quadratic, time."""
    pending: list[str] = []
    size = 0
    for piece in pieces:
        pending.append(piece)
        size += len(piece)
        if size >= max(_CHUNK, len(parser.rawdata)):
            parser.feed("".join(pending))
            pending.clear()
            size = 0
    if pending:
        parser.feed("".join(pending))
    parser.close()


def _str_pieces(html: str):
    for off in range(0, len(html), _CHUNK):
        yield html[off:off + _CHUNK]


def _byte_pieces(data: bytes, codec: str, skip: int):
    decoder = codecs.getincrementaldecoder(codec)("replace")
    view = memoryview(data)[skip:]
    for off in range(0, len(view), _CHUNK):
        yield decoder.decode(view[off:off + _CHUNK])
    yield decoder.decode(b"", final=True)


def _convert(pieces, sink: TextSink, limits: Limits) -> str | None:
    out = _Lines(sink)
    parser = _TextParser(out, limits.max_parts)
    _feed(parser, pieces)
    out.finish()
    return parser.meta_title


def html_to_text(html: str, sink: TextSink, limits: Limits) -> None:
    """Write the visible text of an HTML string into ``sink`` (rules in the module docstring).

    Raises :class:`CapReached` at the character or parts budget.
    """
    _convert(_str_pieces(html), sink, limits)


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    codec, skip = sniff_charset(doc.data)
    meta: dict = {"charset": codec}
    try:
        title = _convert(_byte_pieces(doc.data, codec, skip), sink, ctx.limits)
    except CapReached as cap:
        cap.extractor = cap.extractor or "html"
        cap.meta = cap.meta or meta
        raise
    if title:
        meta["title"] = title
    return ReadResult("html", meta=meta)


READER = Reader(
    name="markup",
    version=1,
    mimes=("text/html", "application/xhtml+xml"),
    extensions=(".html", ".htm", ".xhtml"),
    read=read,
)
