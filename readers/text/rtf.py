"""RTF: the body text, by a small iterative tokenizer (group depth costs no recursion).

One compiled regular expression walks the bytes: control words with their numeric parameter,
control symbols, ``\\'hh`` escapes, braces and text runs.  A stack holds each open group's
state (skipping, ``\\ucN``, current font), so ``{``/``}`` nesting of any depth is a list.

* Text and ``\\'hh`` bytes are decoded in the current font's code page (``\\fcharsetN`` /
  ``\\cpgN`` in the font table), else the document's (``\\ansicpgN``, ``\\mac``, ``\\pc``,
  ``\\pca``; default windows-1252).  ``\\uN`` is a UTF-16 unit (negative N + 65536, surrogate
  pairs joined) and skips the next ``\\ucN`` fallback characters (default 1, scoped per group).
* ``\\par``, ``\\line``, ``\\sect``, ``\\page``, ``\\row`` end a line; ``\\tab`` and
  ``\\cell`` write a tab (none before a row's end); ``\\emdash``, ``\\bullet``, quotes, ``\\~``
  and the other common symbols become their characters.
* Destinations without body text are dropped: every ``{\\*\\dest …}`` and the named ones in
  :data:`SKIP_DESTINATIONS` (``fonttbl``, ``stylesheet``, ``info``, ``pict``, headers and
  footers, ``fldinst`` — a field's ``fldrslt`` is kept —, …).  ``\\binN`` data is jumped over.
* Reading stops at the end of the outer group; an unterminated document yields its text so
  far.  Bytes that do not start with ``{\\rtf`` are :class:`CorruptDocument`.
* A table row with more than ``Limits.max_parts`` cells stops with ``max_parts``; the
  character budget is the sink's.

Extractor ``rtf``; the result's ``details["codepage"]`` is the document code page, its ``metadata`` the
``{\\info}`` group (:mod:`bastion.readers.text.rtfinfo`).
"""

from __future__ import annotations

import codecs
import re

from typing import Any

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument
from ..office.xmlsafe import clean
from ..render.events import (CLOSE, LAYOUT, MARK, OPEN, TEXT, Break, Cell, Heading, LineBreak,
                             Link, Note, Paragraph, Row, Table, replay)
from .rtfinfo import info_meta

_FLUSH = 1 << 16  # characters buffered before one sink write
_SURROGATE = re.compile("[\ud800-\udfff]")

_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?[0-9]{1,10})? ?"  # 1, 2: control word and parameter
    rb"|\\'([0-9a-fA-F]{2})"  # 3: hex byte
    rb"|\\([^a-zA-Z])"  # 4: control symbol
    rb"|([{}])"  # 5: group
    rb"|([^\\{}\r\n]+)"  # 6: text run
    rb"|[\r\n]+",  # raw line breaks mean nothing
    re.DOTALL,
)

SKIP_DESTINATIONS = frozenset({
    "fonttbl", "colortbl", "stylesheet", "info", "pict", "object", "shprslt", "themedata",
    "colorschememapping", "datastore", "latentstyles", "listtable", "listoverridetable",
    "rsidtbl", "generator", "xmlnstbl", "filetbl", "revtbl", "fldinst", "bkmkstart",
    "bkmkend", "pn", "nonshppict", "shppict", "shpinst", "objdata", "field_inst",
    "userprops", "docvar", "xe", "tc", "private", "atnid",
    "comment", "ftnsep", "ftnsepc", "ftncn", "aftnsep", "aftnsepc", "aftncn", "mmathPr",
    "protusertbl", "pgdsctbl", "wgrffmtfilter", "passwordhash", "template",
})

_SYMBOLS: dict[str, str] = {
    "par": "\n", "line": "\n", "sect": "\n", "page": "\n", "column": "\n", "tab": "\t",
    "emdash": "\u2014", "endash": "\u2013", "emspace": "\u2003", "enspace": "\u2002",
    "qmspace": "\u2005", "bullet": "\u2022", "lquote": "\u2018", "rquote": "\u2019",
    "ldblquote": "\u201c", "rdblquote": "\u201d", "zwj": "\u200d", "zwnj": "\u200c",
    "zwbo": "\u200b", "ltrmark": "\u200e", "rtlmark": "\u200f",
}
_CONTROL_SYMBOLS: dict[bytes, str] = {
    b"\\": "\\", b"{": "{", b"}": "}", b"~": "\u00a0", b"_": "-", b"\n": "\n",
    b"\r": "\n", b"\t": "\t",
}
# \fcharsetN -> code page (Windows GDI charsets)
_CHARSETS: dict[int, str] = {
    0: "cp1252", 2: "cp1252", 77: "mac_roman", 128: "cp932", 129: "cp949", 130: "cp1361",
    134: "gbk", 136: "cp950", 161: "cp1253", 162: "cp1254", 163: "cp1258", 177: "cp1255",
    178: "cp1256", 186: "cp1257", 204: "cp1251", 222: "cp874", 238: "cp1250", 255: "cp437",
}


(_BIN, _DEST, _FONT, _FCHARSET, _CPG, _UNICODE, _UC, _SYMBOL, _CELL, _ROW, _ANSICPG, _CHARSET,
 _DEFF, _HEADER, _FOOTER, _SHPTXT, _ANNOT, _ATNAUTHOR, _PARD, _INTBL, _OUTLINE,
 _FLDRSLT) = range(1, 23)
# header and footer groups: kept apart from the body, written after it
_HEADERS = ("header", "headerl", "headerr", "headerf")
_FOOTERS = ("footer", "footerl", "footerr", "footerf")
_ANSI_CHARSETS = {b"mac": "mac_roman", b"pc": "cp437", b"pca": "cp850"}
# control word -> what it does; a word not here only formats, and is passed over
_ACTIONS: dict[bytes, int] = {
    b"bin": _BIN, b"f": _FONT, b"fcharset": _FCHARSET, b"cpg": _CPG, b"u": _UNICODE,
    b"uc": _UC, b"cell": _CELL, b"nestcell": _CELL, b"row": _ROW, b"nestrow": _ROW,
    b"ansicpg": _ANSICPG, b"deff": _DEFF, b"shptxt": _SHPTXT, b"annotation": _ANNOT,
    b"atnauthor": _ATNAUTHOR,
    **{w.encode(): _HEADER for w in _HEADERS},
    **{w.encode(): _FOOTER for w in _FOOTERS},
    **{w.encode(): _DEST for w in SKIP_DESTINATIONS},
    **{w.encode(): _SYMBOL for w in _SYMBOLS},
    **{w: _CHARSET for w in _ANSI_CHARSETS},
    # paragraph properties and fields: what only the Markdown shows (headings, tables, links)
    b"pard": _PARD, b"intbl": _INTBL, b"outlinelevel": _OUTLINE, b"fldrslt": _FLDRSLT,
}
_BREAKS = frozenset({"par", "sect", "page", "column"})  # end a paragraph (the Markdown's)


def _codepage(n: int) -> str | None:
    """A Python codec for a Windows code page number, or None."""
    name = "mac_roman" if n == 10000 else f"cp{n}"
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    return info.name if getattr(info, "_is_text_encoding", True) else None


class _Out:
    """Buffered text to the sink; joins UTF-16 surrogate pairs written by two ``\\u``.

    For a structured sink the buffer holds the stream's ops in order (``put``: text,
    ``layout``: the plain text's own line breaks and tabs, ``event``: structure), flushed at
    the same points as the plain buffer, each character treated as the plain buffer treats
    it (:meth:`_flush_ops`); ``opener`` opens the block the next text needs."""

    __slots__ = ("sink", "buf", "size", "last", "ops", "opener")

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.buf: list[str] = []
        self.size = 0
        self.last = "\n"  # the last character written (a text ends with a line break)
        self.ops: list[list[Any]] | None = [] if sink.structured else None
        self.opener: Any = None

    def put(self, s: str) -> None:
        if self.ops is not None:
            if self.opener is not None:
                self.opener()
            self.ops.append([TEXT, s])
        else:
            self.buf.append(s)
        self.size += len(s)
        if self.size >= _FLUSH:
            self.flush()

    def layout(self, s: str) -> None:
        if self.ops is None:
            self.put(s)
            return
        self.ops.append([LAYOUT, s])
        self.size += len(s)
        if self.size >= _FLUSH:
            self.flush()

    def event(self, op: int, value: Any = None) -> None:
        if self.ops is not None:
            self.ops.append([op, value])

    def drop_tab(self) -> None:
        if self.ops is not None:
            last = _last_chars(self.ops)
            if last is not None and self.ops[last][1] == "\t":
                del self.ops[last]
                self.size -= 1
            return
        if self.buf and self.buf[-1] == "\t":
            self.buf.pop()
            self.size -= 1

    def flush(self, final: bool = False) -> None:
        if self.ops is not None:
            self._flush_ops(final)
            return
        if final and self.buf and not self.buf[-1].endswith("\n"):
            self.buf.append("\n")
        if final and not self.buf and self.last != "\n":
            self.buf.append("\n")
        if not self.buf:
            return
        text = "".join(self.buf)
        self.buf.clear()
        self.size = 0
        if not final and "\ud800" <= text[-1] <= "\udbff":  # keep a high surrogate's pair
            self.buf.append(text[-1])
            self.size = 1
            text = text[:-1]
        if _SURROGATE.search(text):
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        if text:
            self.last = text[-1]
        self.sink.write(clean(text))

    def _flush_ops(self, final: bool) -> None:
        """The structured buffer's flush: the plain flush's rules on the characters (a final
        line break, a high surrogate kept for the next chunk, pairs joined, the format
        characters removed), the events in their places."""
        ops = self.ops
        assert ops is not None
        last = _last_chars(ops)
        if final and last is not None and not ops[last][1].endswith("\n"):
            ops.append([LAYOUT, "\n"])
        if final and last is None and self.last != "\n":
            ops.append([LAYOUT, "\n"])
        last = _last_chars(ops)
        if last is None:
            if ops:  # events alone
                self.ops = []
                replay([(op, v) for op, v in ops], self.sink)
            return
        self.ops = []
        self.size = 0
        value = ops[last][1]
        if not final and "\ud800" <= value[-1] <= "\udbff":  # keep a high surrogate's pair
            keep = [[ops[last][0], value[-1]]] + ops[last + 1:]
            ops = ops[:last] + ([[ops[last][0], value[:-1]]] if value[:-1] else [])
            self.ops = keep
            self.size = 1
        _join_pairs(ops)
        chars = [v for op, v in ops if op <= LAYOUT and v]
        if chars:
            self.last = chars[-1][-1]
        for item in ops:
            if item[0] <= LAYOUT and _SURROGATE.search(item[1]):
                item[1] = item[1].encode("utf-16-le", "surrogatepass").decode("utf-16-le",
                                                                              "replace")
            if item[0] <= LAYOUT:
                item[1] = clean(item[1])
        replay([(op, v) for op, v in ops], self.sink)


def _last_chars(ops: list[list[Any]]) -> int | None:
    """The index of the last op holding characters (text or layout)."""
    for i in range(len(ops) - 1, -1, -1):
        if ops[i][0] <= LAYOUT and ops[i][1]:
            return i
    return None


def _join_pairs(ops: list[list[Any]]) -> None:
    """A surrogate pair split by an event: its low half moved to its high half, so each op's
    characters decode as the plain text's whole chunk does."""
    prev: list[Any] | None = None
    for item in ops:
        if item[0] > LAYOUT or not item[1]:
            continue
        if prev is not None and "\ud800" <= prev[1][-1] <= "\udbff" and \
                "\udc00" <= item[1][0] <= "\udfff":
            prev[1] += item[1][0]
            item[1] = item[1][1:]
            if not item[1]:
                continue
        prev = item


class _Blocks:
    """The structure of the body for a structured sink: a paragraph or heading
    (``\\outlinelevelN``), a table's rows and cells (``\\intbl``, ``\\cell``, ``\\row``),
    opened at their first text and closed at ``\\par``, ``\\cell``, ``\\row``."""

    __slots__ = ("out", "intbl", "outline", "block", "table", "row", "cell")

    def __init__(self, out: _Out) -> None:
        self.out = out
        self.intbl = False
        self.outline: int | None = None
        self.block = self.table = self.row = self.cell = False
        out.opener = self.open

    def open(self) -> None:
        """Open what the next text belongs to (called by the buffer before the text)."""
        out = self.out
        out.opener = None
        if self.intbl:
            if self.block:
                out.event(CLOSE)
                self.block = False
            if not self.table:
                out.event(OPEN, Table())
                self.table = True
            if not self.row:
                out.event(OPEN, Row())
                self.row = True
            if not self.cell:
                out.event(OPEN, Cell())
                self.cell = True
            return
        self.end_table()
        if not self.block:
            level = self.outline
            out.event(OPEN, Heading(min(level + 1, 6)) if level is not None and level < 9
                      else Paragraph())
            self.block = True

    def end_table(self) -> None:
        for flag in ("cell", "row", "table"):
            if getattr(self, flag):
                self.out.event(CLOSE)
                setattr(self, flag, False)

    def paragraph_end(self) -> None:
        if self.cell:
            self.out.event(MARK, Break())  # a paragraph of a cell: a line in the cell
        elif self.block:
            self.out.event(CLOSE)
            self.block = False
        self.out.opener = self.open

    def cell_end(self) -> None:
        if self.block:
            self.out.event(CLOSE)
            self.block = False
        if self.cell:
            self.out.event(CLOSE)
            self.cell = False
        self.out.opener = self.open

    def row_end(self) -> None:
        self.cell_end()
        if self.row:
            self.out.event(CLOSE)
            self.row = False

    def end(self) -> None:
        if self.block:
            self.out.event(CLOSE)
            self.block = False
        self.end_table()
        self.out.opener = None


def _convert(data: bytes, start: int, out: _Out, max_parts: int,
             apart: dict[int, list[str]] | None = None, max_apart: int = 1 << 24,
             blocks: _Blocks | None = None) -> str:
    """Tokenize ``data`` from ``start`` into ``out``; returns the document code page.  The
    text of header and footer groups goes to ``apart[_HEADER]`` / ``apart[_FOOTER]``
    (at most ``max_apart`` characters in all) instead.  ``blocks``: the body's structure
    for a structured sink (paragraphs, headings, tables; a ``HYPERLINK`` field's result as
    a link)."""
    ansi = "cp1252"
    fonts: dict[int, str] = {}  # font number -> code page
    deff = -1
    stack: list[tuple[bool, int, int, bool, int]] = []
    target = 0  # 0: the body; _HEADER, _FOOTER, _ANNOT, _ATNAUTHOR inside such a group
    apart = apart if apart is not None else {}
    for key in (_HEADER, _FOOTER, _ANNOT, _ATNAUTHOR):
        apart.setdefault(key, [])
    comments: list[str] = []  # finished annotations, written after their paragraph
    apart_size = [0]
    body_put = out.put

    def apart_put(s: str) -> None:
        if apart_size[0] < max_apart:
            apart[target].append(s)
            apart_size[0] += len(s)

    skip = False  # inside a destination with no body text
    uc = 1  # fallback characters after \uN
    font = -1
    fonttbl = False  # inside the font table (its \f and \fcharset build ``fonts``)
    table_font = -1
    pending = bytearray()  # text bytes in the current code page, decoded on the next token
    skip_fallback = 0
    cells = 0
    star = False  # the last token was \*
    pos = start
    n = len(data)
    finditer = _TOKEN.finditer
    put = out.put
    capture: list[bytes] | None = None  # a field instruction's text (structured only)
    capture_depth = 0
    link: str | None = None  # the target of the field whose result comes next
    links: list[int] = []  # the group depths of the open links

    def decode() -> None:
        cp = fonts.get(font if font >= 0 else deff, ansi)
        put(pending.decode(cp, "replace"))
        pending.clear()

    while pos < n:
        for m in finditer(data, pos):
            kind = m.lastindex
            if kind == 6:  # text run
                if skip:
                    if capture is not None and len(capture) < 256:
                        capture.append(m.group(6))
                    continue
                run = m.group(6)
                if skip_fallback:
                    cut = min(skip_fallback, len(run))
                    skip_fallback -= cut
                    run = run[cut:]
                pending += run
                continue
            if kind == 3:  # \'hh
                if skip:
                    continue
                if skip_fallback:
                    skip_fallback -= 1
                    continue
                pending.append(int(m.group(3), 16))
                continue
            if kind is None:  # raw CR/LF
                continue
            if pending:
                decode()
            if kind == 5:  # brace
                skip_fallback = 0
                star = False
                if m.group(5) == b"{":
                    stack.append((skip, uc, font, fonttbl, target))
                    continue
                if stack:
                    skip, uc, font, fonttbl, was = stack.pop()
                    if blocks is not None:
                        if capture is not None and len(stack) < capture_depth:
                            link = _field_link(b"".join(capture))
                            capture = None
                        while links and len(stack) < links[-1]:
                            links.pop()
                            out.event(CLOSE)
                    if was != target:
                        if target == _ANNOT:  # an annotation ended: its line is due
                            body = " ".join("".join(apart[_ANNOT]).split())
                            author = " ".join("".join(apart[_ATNAUTHOR]).split())
                            apart_size[0] -= sum(len(x) for x in apart[_ANNOT])
                            apart_size[0] -= sum(len(x) for x in apart[_ATNAUTHOR])
                            apart[_ANNOT].clear()
                            apart[_ATNAUTHOR].clear()
                            if body:
                                comments.append(f"[comment: {author}] {body}" if author
                                                else f"[comment] {body}")
                                if len(comments) > max_parts:
                                    out.flush()
                                    raise CapReached("max_parts", f"{max_parts} annotations "
                                                                  "in one paragraph")
                        target = was
                        put = apart_put if target else body_put
                if not stack:  # the outer group closed: the document ends
                    pos = n
                    break
                continue
            if kind == 4:  # control symbol
                sym = m.group(4)
                if sym == b"*":
                    star = True
                    continue
                if skip_fallback:
                    skip_fallback -= 1
                    continue
                if not skip and sym in _CONTROL_SYMBOLS:
                    put(_CONTROL_SYMBOLS[sym])
                continue
            # control word
            if star:
                star = False
                skip = True
            act = _ACTIONS.get(m.group(1), 0)
            if act == _BIN:
                # \binN: N raw bytes follow the delimiter; resume scanning after them
                pos = m.end() + max(0, int(m.group(2) or 0))
                break
            if skip_fallback:
                skip_fallback -= 1
                continue
            if not act:  # formatting: nothing to do
                continue
            param = m.group(2)
            if act == _DEST:
                if m.group(1) == b"fonttbl":
                    fonttbl = True
                elif m.group(1) == b"fldinst" and blocks is not None and target == 0:
                    capture, capture_depth, link = [], len(stack), None
                skip = True
            elif fonttbl:
                if param is None:
                    continue
                if act == _FONT:
                    table_font = int(param)
                elif act in (_FCHARSET, _CPG) and table_font >= 0:
                    num = int(param)
                    cp = _CHARSETS.get(num) if act == _FCHARSET else _codepage(num)
                    if cp and (act == _CPG or table_font not in fonts):
                        fonts[table_font] = cp
            elif act == _UNICODE:
                if param is not None:
                    if not skip:
                        unit = int(param)
                        put(chr(unit + 65536 if unit < 0 else unit & 0xFFFF))
                    skip_fallback = uc
            elif act == _UC:
                if param is not None:
                    uc = max(0, int(param))
            elif act == _SHPTXT:  # a shape's text, inside the skipped shape instructions
                skip = False
            elif act in (_HEADER, _FOOTER):
                if not skip:
                    target = act
                    put = apart_put
            elif act in (_ANNOT, _ATNAUTHOR):  # starred: read unless its group is skipped
                if stack and not stack[-1][0] and target == 0:
                    skip = False
                    target = act
                    put = apart_put
            elif act == _FONT:
                if param is not None:
                    font = int(param)
            elif skip:
                continue
            elif act == _SYMBOL:
                word = m.group(1).decode("ascii")
                if blocks is not None and target == 0 and (word in _BREAKS or word == "line"):
                    if word == "line":
                        out.event(MARK, LineBreak())
                    else:
                        blocks.paragraph_end()
                    out.layout("\n")
                else:
                    put(_SYMBOLS[word])
                if word == "par":
                    cells = 0
                    if comments and target == 0:
                        for line in comments:
                            if blocks is not None:
                                _note(out, line)
                            else:
                                put(line + "\n")
                        comments.clear()
            elif act == _CELL:
                cells += 1
                if cells > max_parts:
                    out.flush()
                    raise CapReached("max_parts", f"a table row of more than {max_parts} cells")
                if blocks is not None and target == 0:
                    blocks.cell_end()
                    out.layout("\t")
                else:
                    put("\t")
            elif act == _ROW:
                out.drop_tab()
                if blocks is not None and target == 0:
                    blocks.row_end()
                    out.layout("\n")
                else:
                    put("\n")
                cells = 0
            elif act == _ANSICPG:
                if param is not None:
                    ansi = _codepage(int(param)) or ansi
            elif act == _CHARSET:
                ansi = _ANSI_CHARSETS[m.group(1)]
            elif act == _DEFF:
                if param is not None:
                    deff = int(param)
            elif blocks is None or target != 0:
                continue
            elif act == _PARD:
                blocks.intbl, blocks.outline = False, None
            elif act == _INTBL:
                blocks.intbl = True
            elif act == _OUTLINE:
                blocks.outline = int(param) if param is not None else 0
            elif act == _FLDRSLT and link is not None:
                if not links:  # links do not nest
                    out.event(OPEN, Link(link))
                    links.append(len(stack))
                link = None
        else:
            pos = n
    if pending:
        decode()
    if comments:
        if blocks is not None and target == 0:
            out.layout("\n")
            for line in comments:
                _note(out, line)
        else:
            put("\n" + "\n".join(comments) + "\n")
    return ansi


def _note(out: _Out, line: str) -> None:
    """A comment after its paragraph (a structured sink's note)."""
    opener, out.opener = out.opener, None
    out.event(OPEN, Note("comment"))
    out.put(line)
    out.event(CLOSE)
    out.layout("\n")
    out.opener = opener


def _field_link(instruction: bytes) -> str | None:
    """The target of a ``HYPERLINK "url"`` field instruction (Word's field syntax:
    :func:`bastion.readers.office.ooxml.field_link`)."""
    from ..office.ooxml import field_link

    return field_link(instruction.decode("latin-1"))


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    data = doc.data
    start = len(data) - len(data.lstrip())
    if not data.startswith(b"{\\rtf", start):
        raise CorruptDocument("not an RTF document (no {\\rtf header)")
    out = _Out(sink)
    apart: dict[int, list[str]] = {}
    blocks = _Blocks(out) if sink.structured else None
    try:
        codepage = _convert(data, start, out, ctx.limits.max_parts, apart, ctx.limits.max_chars,
                            blocks)
        if blocks is not None:
            blocks.end()
        out.flush(final=True)
        for kind, heading in ((_HEADER, "## header"), (_FOOTER, "## footer")):
            text = "".join(apart[kind])
            if _SURROGATE.search(text):
                text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
            seen: list[str] = []
            for line in text.split("\n"):
                line = line.strip()
                if line and line not in seen:
                    seen.append(line)
            if seen and blocks is not None:
                from ..office.flow import block_line, marker_line, write_line

                write_line(sink, marker_line(heading))
                for line in seen:
                    write_line(sink, block_line(Paragraph(), line), clean_text=True)
            elif seen:
                sink.write(clean("\n".join([heading] + seen) + "\n"))
    except CapReached as cap:
        cap.extractor = cap.extractor or "rtf"
        cap.with_metadata(info_meta(data))
        raise
    return ReadResult("rtf", details={"codepage": codepage}).with_metadata(info_meta(data))


READER = Reader(
    name="rtf",
    version=3,  # 3: the info group as metadata
    mimes=("application/rtf", "text/rtf"),
    extensions=(".rtf",),
    read=read,
)
