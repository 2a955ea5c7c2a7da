"""HTML and XHTML: visible text, one line per block, table cells separated by tabs.

Decoding: :func:`bastion.readers.text.textcodec.choose`, with the declared charset found by
:func:`prescan` (the WHATWG prescan of the first 1024 bytes: ``<meta charset>`` or
``<meta http-equiv="Content-Type" content="…; charset=…">``; a declared UTF-16 means UTF-8)
or else an XML declaration's ``encoding``.  Order: BOM, NUL pattern, strict UTF-8, the
declared charset if the bytes decode with it, the detector, windows-1252.

The stdlib :class:`html.parser.HTMLParser` is streaming and not recursive, so the decoded text
is fed to it in chunks and nesting depth costs nothing.  Rules:

* ``script``, ``style``, ``noscript`` and ``template`` content is dropped, as are comments,
  processing instructions and declarations; ``<title>`` becomes its own line (the first, in
  any normal document) and the result's ``title``.
* Block elements (``p``, ``div``, ``li``, ``tr``, ``h1``–``h6``, ``table``, …) start and end a
  line; ``<br>`` always breaks the line; table cells of one row are separated by a tab.
* Entities are resolved; whitespace runs collapse to one space outside ``pre``/``textarea``.
* A table row with more than ``Limits.max_parts`` cells stops the document (``max_parts``);
  the character budget is the sink's.

Extractor ``html:<encoding>``; ``meta`` has ``charset`` and ``encoding_source``, and
``metadata`` (:func:`page_metadata`): the title, ``<meta>`` description, author, keywords,
Dublin Core and Open Graph dates, the declared language (``<html lang>``).
:func:`html_to_text` is the same conversion for an already decoded string (the e-mail
reader's HTML bodies).
"""

from __future__ import annotations

import re
from dataclasses import replace
from html.parser import HTMLParser

from . import textcodec
from ..base import Context, Document, Limits, Reader, ReadResult, SinkBuffer, TextSink
from ..errors import CapReached
from ..metadata import DocMeta, split_keywords, split_people
from ..render.events import (CLOSE, MARK, MD, OPEN, Break, Caption, Cell, Code, Heading,
                             LineBreak, Link, ListItem, Note, Paragraph, Row, Table)

_PRESCAN = 1024  # bytes the WHATWG prescan looks at
_CHUNK = 1 << 16  # characters fed to the parser at a time (grows with a long pending tag)
_MAX_TABLE_DEPTH = 256  # nested tables tracked separately; deeper ones share a row counter

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


_SPACE = "\t\n\f\r "
_TAG_START = re.compile(r"</?[A-Za-z]")
_META = re.compile(r"<meta[\t\n\f\r /]", re.IGNORECASE)
_MAX_DECLARED = 100  # <meta> names kept from one page
_CONTENT_CHARSET = re.compile(r"charset", re.IGNORECASE)


def prescan(data: bytes) -> str | None:
    """The charset label a document declares in its first 1024 bytes, by the WHATWG
    "prescan a byte stream to determine its encoding" algorithm (comments skipped, attributes
    parsed as the spec does, ``http-equiv`` required for a ``content`` charset), or None.
    A declared UTF-16 is returned as ``utf-8``: the declaration was readable as ASCII."""
    s = data[:_PRESCAN].decode("latin-1")
    pos, end = 0, len(s)
    while pos < end:
        if s.startswith("<!--", pos):
            close = s.find("-->", pos + 2)
            if close < 0:
                return None
            pos = close + 3
            continue
        if _META.match(s, pos):
            label, pos = _meta(s, pos + 6)
            if label is not None:
                return label
            continue
        if _TAG_START.match(s, pos):
            while pos < end and s[pos] not in _SPACE and s[pos] != ">":
                pos += 1
            while True:
                attr, pos = _attribute(s, pos)
                if attr is None:
                    break
        elif s.startswith(("<!", "</", "<?"), pos):
            close = s.find(">", pos + 2)
            if close < 0:
                return None
            pos = close
        pos += 1
    return None


def _meta(s: str, pos: int) -> tuple[str | None, int]:
    """The charset of one ``<meta>`` whose attributes start at ``pos``, and where it ends."""
    seen: set[str] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None
    while True:
        attr, pos = _attribute(s, pos)
        if attr is None:
            break
        name, value = attr
        if name in seen:
            continue
        seen.add(name)
        if name == "http-equiv" and value == "content-type":
            got_pragma = True
        elif name == "content" and charset is None:
            found = _content_charset(value)
            if found is not None and textcodec.label_codec(found):
                charset, need_pragma = found, True
        elif name == "charset":
            charset, need_pragma = value, False
    if need_pragma is None or (need_pragma and not got_pragma) or not charset:
        return None, pos + 1
    codec = textcodec.label_codec(charset)
    if codec is None:
        return None, pos + 1
    if codec.startswith("utf-16") or charset.strip().lower() == "x-user-defined":
        return ("utf-8" if codec.startswith("utf-16") else "windows-1252"), pos
    return charset, pos


def _attribute(s: str, pos: int) -> tuple[tuple[str, str] | None, int]:
    """WHATWG "get an attribute": ((name, value) lowercased, new position), or None at ``>``
    or the end of the prescan window."""
    end = len(s)
    while pos < end and (s[pos] in _SPACE or s[pos] == "/"):
        pos += 1
    if pos >= end or s[pos] == ">":
        return None, pos
    name, pos, valued = _attribute_name(s, pos)
    if valued is None:
        return None, pos
    if not valued:
        return (name, ""), pos
    pos = _spaces(s, pos)
    if pos >= end:
        return None, pos
    return _attribute_value(s, pos, name)


def _spaces(s: str, pos: int) -> int:
    """The position after the spaces at ``pos``."""
    while pos < len(s) and s[pos] in _SPACE:
        pos += 1
    return pos


def _attribute_name(s: str, pos: int) -> tuple[str, int, bool | None]:
    """An attribute's name (lowercased), the position after it (and after its ``=``), and
    whether a value follows (None: the window ended)."""
    end = len(s)
    name: list[str] = []
    while True:
        if pos >= end:
            return "", pos, None
        c = s[pos]
        if c == "=" and name:
            return "".join(name), pos + 1, True
        if c in _SPACE:
            pos = _spaces(s, pos)
            if pos >= end:
                return "", pos, None
            if s[pos] != "=":
                return "".join(name), pos, False
            return "".join(name), pos + 1, True
        if c in "/>":
            return "".join(name), pos, False
        name.append(c.lower())
        pos += 1


def _attribute_value(s: str, pos: int, name: str) -> tuple[tuple[str, str] | None, int]:
    """An attribute's value at ``pos``: quoted, empty (at ``>``), or unquoted."""
    end = len(s)
    c = s[pos]
    if c in "\"'":
        close = s.find(c, pos + 1)
        if close < 0:
            return None, end
        return (name, s[pos + 1:close].lower()), close + 1
    if c == ">":
        return (name, ""), pos
    value: list[str] = []
    while pos < end and s[pos] not in _SPACE and s[pos] != ">":
        value.append(s[pos].lower())
        pos += 1
    if pos >= end:
        return None, pos
    return (name, "".join(value)), pos


def _content_charset(content: str) -> str | None:
    """WHATWG "extract a character encoding from a meta element" (a ``content`` value)."""
    pos = 0
    while True:
        m = _CONTENT_CHARSET.search(content, pos)
        if m is None:
            return None
        pos = m.end()
        while pos < len(content) and content[pos] in _SPACE:
            pos += 1
        if pos < len(content) and content[pos] == "=":
            break
    pos += 1
    while pos < len(content) and content[pos] in _SPACE:
        pos += 1
    if pos >= len(content):
        return None
    if content[pos] in "\"'":
        close = content.find(content[pos], pos + 1)
        return content[pos + 1:close] if close > 0 else None
    stop = pos
    while stop < len(content) and content[stop] not in _SPACE and content[stop] != ";":
        stop += 1
    return content[pos:stop] or None


def choose(data: bytes) -> textcodec.Choice:
    """How an HTML document's bytes are decoded; see the module docstring."""
    return textcodec.choose(data, prescan(data) or textcodec.xml_declared(data))


class _Lines:
    """Whitespace-collapsing line writer in front of a sink (buffered, flushed in chunks):
    the words and the spaces between them are the text, the line breaks and tabs between
    blocks and cells the plain text's layout; ``event`` puts a structure event in its place."""

    __slots__ = ("_put", "_lay", "event", "flush", "state", "space", "newlines")

    def __init__(self, sink: TextSink) -> None:
        buffer = SinkBuffer(sink)
        self._put = buffer.put
        self._lay = buffer.layout
        self.event = buffer.event
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
            self._lay("\n")
            self.newlines += 1
            self.state = _LINE_START

    def tab(self) -> None:
        self.space = False
        self._lay("\t")
        self.state = _AFTER_TAB
        self.newlines = 0

    def finish(self) -> None:
        if self.state != _LINE_START:
            self._lay("\n")
            self.state = _LINE_START
        self.flush()


_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_MAX_NODES = 512  # open structure nodes; deeper elements give text only
_LISTS = frozenset({"ul", "ol", "menu", "dir"})
_ROW_PARTS = frozenset({"thead", "tbody", "tfoot"})
_SPAN_MAX = 1000


def _span(attrs: dict[str, str], name: str) -> int:
    value = attrs.get(name) or "1"
    digits = value.strip()[:6]
    return min(max(int(digits), 1), _SPAN_MAX) if digits.isdigit() else 1


class _Structure:
    """The structure of a page as events beside its text (built only for a structured sink):
    headings, paragraphs, lists, tables, links, preformatted text, quotes, captions; the end
    tags HTML lets a page leave out (``</p>``, ``</li>``, ``</td>``, ``</tr>``) are implied
    where a browser would imply them.  Each node opened is remembered with its tag (and
    lists and table sections without a node of their own), so every node is closed once."""

    def __init__(self, out: "_Lines") -> None:
        self.event = out.event
        self.tags: list[tuple[str, bool]] = []  # (tag, a node was opened for it)
        self.lists: list[list[int]] = []  # per open list: [ordered (0/1), next number]

    def _open(self, tag: str, node: object | None) -> None:
        if len(self.tags) >= _MAX_NODES:
            return
        if node is not None:
            self.event(OPEN, node)
        self.tags.append((tag, node is not None))

    def _pop(self) -> None:
        tag, opened = self.tags.pop()
        if opened:
            self.event(CLOSE)
        if tag in _LISTS and self.lists:
            self.lists.pop()

    def _close_to(self, names: frozenset[str] | tuple[str, ...],
                  stop: frozenset[str] | tuple[str, ...] = ()) -> None:
        """Close everything up to and including the innermost node opened by one of
        ``names``, unless one opened by a tag of ``stop`` comes first."""
        tags = self.tags
        for i in range(len(tags) - 1, -1, -1):
            tag = tags[i][0]
            if tag in names:
                break
            if tag in stop:
                return
        else:
            return
        while len(tags) > i:
            self._pop()

    def _end_paragraph(self) -> None:
        """A block starts: an open paragraph (on top, links aside) ends, as HTML has it."""
        for i in range(len(self.tags) - 1, -1, -1):
            tag = self.tags[i][0]
            if tag == "p":
                while len(self.tags) > i:
                    self._pop()
                return
            if tag != "a":
                return

    def start(self, tag: str, attrs: list) -> None:
        if tag == "a" or tag == "br" or tag == "img":
            self._inline(tag, attrs)
            return
        if tag in _BLOCKS:
            self._end_paragraph()
        if not self._block(tag, attrs) and not self._table_part(tag, attrs) and tag in _BLOCKS:
            self.event(MARK, Break())

    def _inline(self, tag: str, attrs: list) -> None:
        """A link opened, a line break, a picture in a link (its alt text is the link's,
        Markdown only)."""
        if tag == "a":
            self._close_to(("a",))
            href = dict(attrs).get("href")
            self._open("a", Link(href) if isinstance(href, str) and href.strip() else None)
        elif tag == "br":
            self.event(MARK, LineBreak())
        else:
            alt = dict(attrs).get("alt")
            if isinstance(alt, str) and alt.strip() and any(t == "a" and opened
                                                            for t, opened in self.tags):
                self.event(MD, " ".join(alt.split()))

    def _block(self, tag: str, attrs: list) -> bool:
        """A heading, paragraph, list, list item, preformatted text, quote or caption opened
        (False: the tag is none of them)."""
        level = _HEADINGS.get(tag)
        if level is not None:
            self._open(tag, Heading(level))
        elif tag == "p" or tag == "title":
            self._open(tag, Paragraph())
        elif tag == "li":
            self._close_to(("li",), stop=_LISTS)
            self._open("li", self._item(dict(attrs)))
        elif tag in _LISTS:
            start = (dict(attrs).get("start") or "1").strip()[:9]
            self.lists.append([1 if tag == "ol" else 0,
                               int(start) if start.isdigit() else 1])
            self._open(tag, None)
        elif tag == "pre" or tag == "listing" or tag == "xmp" or tag == "plaintext":
            self._open(tag, Code())
        elif tag == "blockquote":
            self._open(tag, Note("quote"))
        elif tag == "caption" or tag == "figcaption":
            self._open(tag, Caption())
        else:
            return False
        return True

    def _table_part(self, tag: str, attrs: list) -> bool:
        """A table, a row group, a row or a cell opened, the parts it implies closed first
        (False: the tag is none of them)."""
        if tag == "table":
            self._open("table", Table())
        elif tag in _ROW_PARTS:
            self._close_to(_ROW_PARTS | {"tr", "td", "th"}, stop=("table",))
            self._open(tag, None)
        elif tag == "tr":
            self._close_to(("tr",), stop=("table",))
            header = any(t == "thead" for t, _ in self.tags)
            self._open("tr", Row(header=header))
        elif tag in _CELLS:
            self._close_to(_CELLS, stop=("tr", "table"))
            a = dict(attrs)
            self._open(tag, Cell(_span(a, "colspan"), _span(a, "rowspan")))
        else:
            return False
        return True

    def _item(self, attrs: dict[str, str]) -> ListItem:
        level = max(len(self.lists) - 1, 0)
        if not self.lists or not self.lists[-1][0]:
            return ListItem(level, "")
        value = (attrs.get("value") or "").strip()[:9]
        if value.isdigit():
            self.lists[-1][1] = int(value)
        n = self.lists[-1][1]
        self.lists[-1][1] = n + 1
        return ListItem(level, f"{n}.")

    def end(self, tag: str) -> None:
        if tag in _CELLS:
            self._close_to(_CELLS, stop=("tr", "table"))
        elif tag == "tr":
            self._close_to(("tr",), stop=("table",))
        elif tag in _ROW_PARTS:
            self._close_to((tag,), stop=("table",))
        elif tag == "li":
            self._close_to(("li",), stop=_LISTS)
        elif tag in _HEADINGS or tag in _LISTS or tag in ("a", "p", "title", "table", "pre",
                                                         "listing", "xmp", "blockquote",
                                                         "caption", "figcaption"):
            self._close_to((tag,))
        elif tag in _BLOCKS:
            self._end_paragraph()
            self.event(MARK, Break())

    def finish(self) -> None:
        while self.tags:
            self._pop()


class _TextParser(HTMLParser):
    """Turns parser events into lines; holds only counters and a bounded table stack."""

    out: _Lines  # the line writer, given before the first feed (:func:`_convert`)

    def __init__(self, max_parts: int) -> None:
        super().__init__(convert_charrefs=True)
        self.struct: _Structure | None = None  # the structure events (a structured sink's)
        self.max_parts = max_parts
        self.skip = 0  # open noscript/template elements (script/style are CDATA to the parser)
        self.pre = 0  # open pre-like elements
        self.pre_start = False  # drop the newline right after <pre>
        self.cells: list[int] = []  # cells seen in the current row, per open table
        self.title: list[str] | None = None  # collecting the first <title>
        self.meta_title: str | None = None
        self.declared: dict[str, str] = {}  # <meta name|property|http-equiv> → content, <html lang>

    def updatepos(self, i: int, j: int) -> int:
        """The base parser's line and column bookkeeping, skipped: nothing here asks for a
        position (``getpos``), and counting the newlines of every token was ≈ 10% of a parse."""
        return j

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "meta":
            self._declared(tag, attrs)
            return
        if tag == "html" and "lang" not in self.declared:
            self._declared(tag, attrs)
        if tag in _SKIP:
            if tag in ("noscript", "template"):
                self.skip += 1
            return
        if self.skip:
            return
        if self.struct is not None:
            self.struct.start(tag, attrs)
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

    def _declared(self, tag: str, attrs: list) -> None:
        """What a page declares about itself: ``<meta name|property|http-equiv content>``
        (the first of each name), ``<html lang>``."""
        a = {k.lower(): v for k, v in attrs if isinstance(k, str) and isinstance(v, str)}
        if tag == "html":
            lang = a.get("lang") or a.get("xml:lang")
            if lang:
                self.declared["lang"] = lang
            return
        key = (a.get("name") or a.get("property") or a.get("http-equiv") or "").lower()
        if (key and "content" in a and key not in self.declared
                and len(self.declared) < _MAX_DECLARED):
            self.declared[key] = a["content"]

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        # <div/> opens a div in HTML; only void elements (br, hr…) really are empty
        self.handle_starttag(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("noscript", "template"):
            self.skip = max(0, self.skip - 1)
            return
        if self.skip or tag in _SKIP:
            return
        if self.struct is not None:
            if tag == "br":
                self.struct.start(tag, [])
            else:
                self.struct.end(tag)
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


def _byte_pieces(data: bytes, choice: textcodec.Choice):
    return textcodec.pieces(data, choice, _CHUNK)


def _convert(pieces, sink: TextSink, limits: Limits,
             parser: "_TextParser | None" = None) -> str | None:
    out = _Lines(sink)
    parser = parser or _TextParser(limits.max_parts)
    parser.out = out
    if sink.structured:
        parser.struct = _Structure(out)
    try:
        _feed(parser, pieces)
    finally:
        if parser.struct is not None:  # every node closed, also when a cap stops the page
            parser.struct.finish()
    out.finish()
    return parser.meta_title


def page_metadata(title: str | None, declared: dict[str, str]) -> DocMeta:
    """A page's metadata: its ``<title>`` (else ``og:title``/``dc.title``), ``<meta>``
    description, author, keywords, Dublin Core and Open Graph dates, its language
    (``<html lang>``, else ``content-language``), its generator."""
    def first(*names: str) -> str | None:
        return next((declared[n] for n in names if declared.get(n)), None)

    authors = split_people(first("author", "dc.creator", "dcterms.creator", "article:author"))
    return DocMeta.make(
        title=title or first("og:title", "dc.title", "dcterms.title", "twitter:title"),
        authors=authors,
        created=first("dcterms.created", "dc.date.created", "article:published_time",
                      "dc.date", "dcterms.date", "date"),
        modified=first("dcterms.modified", "article:modified_time", "last-modified"),
        subject=first("dc.subject", "dcterms.subject"),
        description=first("description", "og:description", "dc.description",
                          "dcterms.description"),
        keywords=split_keywords(first("keywords")),
        language=first("lang", "content-language", "dc.language", "dcterms.language"),
        fields={"application": first("generator")})


def html_to_text(html: str, sink: TextSink, limits: Limits) -> None:
    """Write the visible text of an HTML string into ``sink`` (rules in the module docstring).

    Raises :class:`CapReached` at the character or parts budget.
    """
    _convert(_str_pieces(html), sink, limits)


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    choice = choose(doc.data)
    extractor = f"html:{choice.codec}"
    facts = ReadResult("", encoding_source=choice.source, details={"charset": choice.codec})
    parser = _TextParser(ctx.limits.max_parts)
    try:
        title = _convert(_byte_pieces(doc.data, choice), sink, ctx.limits, parser)
    except CapReached as cap:
        cap.extractor = cap.extractor or extractor
        cap.keep(facts)
        cap.with_metadata(page_metadata(parser.meta_title, parser.declared))
        raise
    return replace(facts, extractor=extractor, title=title or None,
                   warnings=tuple(textcodec.warnings(choice))).with_metadata(
        page_metadata(title, parser.declared))


READER = Reader(
    name="markup",
    version=3,
    mimes=("text/html", "application/xhtml+xml"),
    extensions=(".html", ".htm", ".xhtml"),
    read=read,
    libraries=("charset-normalizer",),
)
