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
from binascii import unhexlify

from typing import Any, Callable

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
    rb"|((?:\\'[0-9a-fA-F]{2})+)"  # 3: hex bytes
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


# where text goes: the body, or a group kept apart (headers and footers are written after the
# body, an annotation after its paragraph)
_BODY, _HEADER, _FOOTER, _ANNOT, _ATNAUTHOR = range(5)
# header and footer groups: kept apart from the body, written after it
_HEADERS = ("header", "headerl", "headerr", "headerf")
_FOOTERS = ("footer", "footerl", "footerr", "footerf")
_ANSI_CHARSETS = {b"mac": "mac_roman", b"pc": "cp437", b"pca": "cp850"}
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
        text = _whole_pairs(text)
        if text:
            self.last = text[-1]
        self.sink.write(clean(text))

    def _flush_ops(self, final: bool) -> None:
        """The structured buffer's flush: the plain flush's rules on the characters (a final
        line break, a high surrogate kept for the next chunk, pairs joined, the format
        characters removed), the events in their places."""
        ops = self.ops
        assert ops is not None
        if final:
            self._end_line(ops)
        last = _last_chars(ops)
        if last is None:
            if ops:  # events alone
                self.ops = []
                replay([(op, v) for op, v in ops], self.sink)
            return
        self.ops = []
        self.size = 0
        if not final:
            ops = self._keep_high_surrogate(ops, last)
        _join_pairs(ops)
        chars = [v for op, v in ops if op <= LAYOUT and v]
        if chars:
            self.last = chars[-1][-1]
        for item in ops:
            if item[0] <= LAYOUT:
                item[1] = clean(_whole_pairs(item[1]))
        replay([(op, v) for op, v in ops], self.sink)

    def _end_line(self, ops: list[list[Any]]) -> None:
        """The text ends with a line break (a final flush)."""
        last = _last_chars(ops)
        if (ops[last][1][-1] if last is not None else self.last) != "\n":
            ops.append([LAYOUT, "\n"])

    def _keep_high_surrogate(self, ops: list[list[Any]], last: int) -> list[list[Any]]:
        """The ops to write now: a high surrogate ending the characters stays in the buffer,
        with the events after it, for its pair in the next chunk."""
        kind, value = ops[last]
        if not "\ud800" <= value[-1] <= "\udbff":
            return ops
        self.ops = [[kind, value[-1]]] + ops[last + 1:]
        self.size = 1
        return ops[:last] + ([[kind, value[:-1]]] if value[:-1] else [])


def _whole_pairs(text: str) -> str:
    """Surrogate pairs written as two ``\\u`` joined; a lone surrogate replaced."""
    if _SURROGATE.search(text):
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


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

    # paragraph properties (:data:`_WORDS`, in a structured sink's body): what only the
    # Markdown shows, headings and tables

    def paragraph_reset(self, word: bytes, param: bytes | None) -> None:
        self.intbl, self.outline = False, None

    def in_table(self, word: bytes, param: bytes | None) -> None:
        self.intbl = True

    def outline_level(self, word: bytes, param: bytes | None) -> None:
        self.outline = int(param) if param is not None else 0


class _CodePages:
    """The document's code pages: its own (``\\ansicpgN``, ``\\mac``, ``\\pc``, ``\\pca``), the
    default font's (``\\deffN``), and each font's, read from the font table (``\\fN`` then
    its ``\\fcharsetN`` or ``\\cpgN``)."""

    __slots__ = ("ansi", "fonts", "deff", "table_font")

    def __init__(self) -> None:
        self.ansi = "cp1252"
        self.fonts: dict[int, str] = {}  # font number -> code page
        self.deff = -1
        self.table_font = -1  # the font table's entry being read

    def of(self, font: int) -> str:
        """The code page of text in ``font`` (-1: the default font)."""
        return self.fonts.get(font if font >= 0 else self.deff, self.ansi)

    # the words (:data:`_WORDS`, :data:`_FONT_TABLE_WORDS`), each given its parameter

    def entry_font(self, word: bytes, param: bytes | None) -> None:
        """``\\fN`` in the font table: the entry being read."""
        if param is not None:
            self.table_font = int(param)

    def entry_charset(self, word: bytes, param: bytes | None) -> None:
        """``\\fcharsetN`` of the entry: its code page, unless ``\\cpgN`` gave one."""
        if param is None:
            return
        cp = _CHARSETS.get(int(param))
        if cp and self.table_font >= 0 and self.table_font not in self.fonts:
            self.fonts[self.table_font] = cp

    def entry_codepage(self, word: bytes, param: bytes | None) -> None:
        """``\\cpgN`` of the entry: its code page, over its charset's."""
        if param is None:
            return
        cp = _codepage(int(param))
        if cp and self.table_font >= 0:
            self.fonts[self.table_font] = cp

    def ansi_codepage(self, word: bytes, param: bytes | None) -> None:
        if param is not None:
            self.ansi = _codepage(int(param)) or self.ansi

    def ansi_charset(self, word: bytes, param: bytes | None) -> None:
        self.ansi = _ANSI_CHARSETS[word]

    def default_font(self, word: bytes, param: bytes | None) -> None:
        if param is not None:
            self.deff = int(param)


class _Apart:
    """The text of the groups kept apart from the body (headers, footers, an annotation and
    its author: at most ``limit`` characters in all), and the annotations of the current
    paragraph, written after it (``comments``)."""

    __slots__ = ("text", "size", "limit", "comments")

    def __init__(self, text: dict[int, list[str]], limit: int) -> None:
        for key in (_HEADER, _FOOTER, _ANNOT, _ATNAUTHOR):
            text.setdefault(key, [])
        self.text = text
        self.size = 0
        self.limit = limit
        self.comments: list[str] = []

    def put(self, target: int, s: str) -> None:
        if self.size < self.limit:
            self.text[target].append(s)
            self.size += len(s)

    def annotation_end(self, out: _Out, max_parts: int) -> None:
        """The annotation that ended: its line held for after the paragraph (none when it
        holds no text); its text and its author's are taken out of the store."""
        body = " ".join("".join(self.text[_ANNOT]).split())
        author = " ".join("".join(self.text[_ATNAUTHOR]).split())
        for key in (_ANNOT, _ATNAUTHOR):
            self.size -= sum(len(x) for x in self.text[key])
            self.text[key].clear()
        if not body:
            return
        self.comments.append(f"[comment: {author}] {body}" if author else f"[comment] {body}")
        if len(self.comments) > max_parts:
            out.flush()
            raise CapReached("max_parts", f"{max_parts} annotations in one paragraph")

    def write_comments(self, out: _Out, put: Callable[[str], None], structured: bool) -> None:
        """The annotations of the paragraph that ended, after it."""
        for line in self.comments:
            if structured:
                _note(out, line)
            else:
                put(line + "\n")
        self.comments.clear()

    def end_comments(self, out: _Out, put: Callable[[str], None], structured: bool) -> None:
        """The annotations of a last paragraph that did not end, after the text."""
        if not self.comments:
            return
        if structured:
            out.layout("\n")
            for line in self.comments:
                _note(out, line)
        else:
            put("\n" + "\n".join(self.comments) + "\n")


class _Fields:
    """Fields for a structured sink: a ``HYPERLINK`` field's instruction captured
    (``\\fldinst``), its target opened as a link around the field's result (``\\fldrslt``)
    and closed with the result's group."""

    __slots__ = ("capture", "capture_depth", "link", "links")

    def __init__(self) -> None:
        self.capture: list[bytes] | None = None  # a field instruction's text
        self.capture_depth = 0
        self.link: str | None = None  # the target of the field whose result comes next
        self.links: list[int] = []  # the group depths of the open links

    def instruction(self, depth: int) -> None:
        self.capture, self.capture_depth, self.link = [], depth, None

    def text(self, run: bytes) -> None:
        """A text run inside a skipped group: part of the instruction being captured."""
        if self.capture is not None and len(self.capture) < 256:
            self.capture.append(run)

    def result(self, depth: int, out: _Out) -> None:
        if self.link is not None:
            if not self.links:  # links do not nest
                out.event(OPEN, Link(self.link))
                self.links.append(depth)
            self.link = None

    def group_closed(self, depth: int, out: _Out) -> None:
        """A group closed, ``depth`` groups remain open: the instruction's end, a link's."""
        if self.capture is not None and depth < self.capture_depth:
            self.link = _field_link(b"".join(self.capture))
            self.capture = None
        while self.links and depth < self.links[-1]:
            self.links.pop()
            out.event(CLOSE)


# when a control word's handler runs: always (it changes the group's state), where text is read
# (not in a skipped destination), in the body of a structured sink
_ALWAYS, _READ, _STRUCTURE = range(3)


class _Converter:
    """One document's tokenizer: the bytes from ``{\\rtf`` to the outer group's end into
    ``out`` (:meth:`convert`).  The state a group changes and its closing brace restores
    (``skip``, ``uc``, ``font``, ``fonttbl``, ``target``) is pushed on ``stack`` at each ``{``;
    what a control word does is its handler in :data:`_WORDS` (:data:`_FONT_TABLE_WORDS`
    inside the font table).  The text of header and footer groups goes to ``apart``'s store
    (at most ``max_apart`` characters in all) instead of ``out``.  ``blocks``: the body's
    structure for a structured sink (paragraphs, headings, tables; a ``HYPERLINK`` field's
    result as a link)."""

    __slots__ = ("out", "blocks", "max_parts", "pages", "apart", "fields", "stack", "skip",
                 "uc", "font", "fonttbl", "target", "put", "skip_fallback", "cells")

    def __init__(self, out: _Out, max_parts: int, apart: dict[int, list[str]],
                 max_apart: int, blocks: _Blocks | None) -> None:
        self.out = out
        self.blocks = blocks
        self.max_parts = max_parts
        self.pages = _CodePages()
        self.apart = _Apart(apart, max_apart)
        self.fields = _Fields()
        self.stack: list[tuple[bool, int, int, bool, int]] = []
        self.skip = False  # inside a destination with no body text
        self.uc = 1  # fallback characters after \uN
        self.font = -1
        self.fonttbl = False  # inside the font table (its \f and \fcharset build ``pages``)
        self.target = _BODY
        self.put = out.put  # where text goes: the body's buffer, or the store apart
        self.skip_fallback = 0  # fallback characters still to pass over
        self.cells = 0  # cells in the current table row

    def convert(self, data: bytes, start: int) -> str:
        """Tokenize ``data`` from ``start``; returns the document code page."""
        pending = bytearray()  # text bytes in the current code page, decoded on the next token
        star = False  # the last control symbol was \\*
        pos = start
        n = len(data)
        finditer = _TOKEN.finditer
        while pos < n:
            for m in finditer(data, pos):
                kind = m.lastindex
                if kind == 6 or kind == 3:  # a text run, a run of \\'hh bytes
                    pending += self.text(m.group(kind), kind == 3)
                    continue
                if kind is None:  # raw CR/LF
                    continue
                if pending:
                    self.decode(pending)
                if kind == 5:  # a brace
                    star = False
                    if self.brace(m.group(5)):  # the outer group closed: the document ends
                        pos = n
                        break
                elif kind == 4:  # a control symbol
                    star = self.symbol(m.group(4), star)
                elif star or self.skip_fallback or m.group(1) in _ACTIVE:  # a control word
                    jump = self.control_word(m, star)  # (one that only formats: passed over)
                    star = False
                    if jump:  # \\binN: N raw bytes follow; scanning resumes after them
                        pos = jump
                        break
            else:
                pos = n
        if pending:
            self.decode(pending)
        # the annotations of a last paragraph that did not end, after the text
        self.apart.end_comments(self.out, self.put, self.structured_body())
        return self.pages.ansi

    def text(self, run: bytes, escaped: bool) -> bytes:
        """The bytes of a text run or of a run of ``\\'hh`` escapes (``escaped``), past the
        fallback characters of a ``\\uN`` still due (one per escape)."""
        if self.skip:  # inside a destination: no text (a field's instruction is captured)
            if not escaped:
                self.fields.text(run)
            return b""
        if escaped:
            run = unhexlify(run.replace(b"\\'", b""))
        if self.skip_fallback:
            cut = min(self.skip_fallback, len(run))
            self.skip_fallback -= cut
            run = run[cut:]
        return run

    def decode(self, pending: bytearray) -> None:
        self.put(pending.decode(self.pages.of(self.font), "replace"))
        pending.clear()

    def fallback_passed(self) -> bool:
        """One fallback character of a ``\\uN`` passed over (True), or none was due."""
        if self.skip_fallback:
            self.skip_fallback -= 1
            return True
        return False

    def brace(self, brace: bytes) -> bool:
        """A group opens or closes; True when the outer group closed."""
        self.skip_fallback = 0
        if brace == b"{":
            self.stack.append((self.skip, self.uc, self.font, self.fonttbl, self.target))
            return False
        if self.stack:
            self.skip, self.uc, self.font, self.fonttbl, was = self.stack.pop()
            if self.blocks is not None:
                self.fields.group_closed(len(self.stack), self.out)
            if was != self.target:
                if self.target == _ANNOT:  # an annotation ended: its line is due
                    self.apart.annotation_end(self.out, self.max_parts)
                self.write_to(was)
        return not self.stack

    def symbol(self, sym: bytes, star: bool) -> bool:
        """A control symbol; returns whether a ``\\*`` is pending (it is, from a ``\\*`` to
        the next control word or brace)."""
        if sym == b"*":
            return True
        if not self.fallback_passed() and not self.skip and sym in _CONTROL_SYMBOLS:
            self.put(_CONTROL_SYMBOLS[sym])
        return star

    def control_word(self, m: re.Match[bytes], star: bool) -> int:
        """Run the word's handler where its gate allows (a word not in the table only
        formats, and is passed over); returns where scanning resumes after ``\\binN``'s
        data, else 0.  After ``\\*`` the word's group is a destination, skipped unless the
        handler reads it."""
        word = m.group(1)
        if star:
            self.skip = True
        if word == b"bin":
            return _bin_end(m)
        if self.fallback_passed():
            return 0
        entry = (_FONT_TABLE_WORDS if self.fonttbl else _WORDS).get(word)
        if entry is not None:
            handler, gate = entry
            if gate == _ALWAYS or not self.skip and (
                    gate == _READ or self.blocks is not None and self.target == _BODY):
                handler(self, word, m.group(2))
        return 0

    def write_to(self, target: int) -> None:
        self.target = target
        self.put = self.put_apart if target else self.out.put

    def put_apart(self, s: str) -> None:
        self.apart.put(self.target, s)

    def structured_body(self) -> bool:
        return self.blocks is not None and self.target == _BODY


    # -- the control words' handlers (:data:`_WORDS`), each given the word and its parameter

    def destination(self, word: bytes, param: bytes | None) -> None:
        """A group without body text: skipped (the font table is read for its code pages; a
        field instruction is captured for its link)."""
        if word == b"fonttbl":
            self.fonttbl = True
        elif word == b"fldinst" and self.structured_body():
            self.fields.instruction(len(self.stack))
        self.skip = True

    def unicode(self, word: bytes, param: bytes | None) -> None:
        """``\\uN``: a UTF-16 unit, then ``\\ucN`` fallback characters to pass over."""
        if param is not None:
            if not self.skip:
                unit = int(param)
                self.put(chr(unit + 65536 if unit < 0 else unit & 0xFFFF))
            self.skip_fallback = self.uc

    def fallback_count(self, word: bytes, param: bytes | None) -> None:
        if param is not None:
            self.uc = max(0, int(param))

    def shape_text(self, word: bytes, param: bytes | None) -> None:
        """A shape's text, inside the skipped shape instructions: read."""
        self.skip = False

    def header(self, word: bytes, param: bytes | None) -> None:
        if not self.skip:
            self.write_to(_HEADER)

    def footer(self, word: bytes, param: bytes | None) -> None:
        if not self.skip:
            self.write_to(_FOOTER)

    def annotation(self, word: bytes, param: bytes | None) -> None:
        """``\\annotation``, ``\\atnauthor`` (starred): read unless their group is skipped."""
        if self.stack and not self.stack[-1][0] and self.target == _BODY:
            self.skip = False
            self.write_to(_ANNOT if word == b"annotation" else _ATNAUTHOR)

    def set_font(self, word: bytes, param: bytes | None) -> None:
        if param is not None:
            self.font = int(param)

    def text_symbol(self, word: bytes, param: bytes | None) -> None:
        """``\\par``, ``\\tab``, ``\\emdash`` …: the character; a paragraph's end writes
        the annotations it held, and a structured body's paragraph ends there."""
        name = word.decode("ascii")
        if self.structured_body() and (name in _BREAKS or name == "line"):
            if name == "line":
                self.out.event(MARK, LineBreak())
            else:
                assert self.blocks is not None
                self.blocks.paragraph_end()
            self.out.layout("\n")
        else:
            self.put(_SYMBOLS[name])
        if name == "par":
            self.cells = 0
            if self.apart.comments and self.target == _BODY:
                self.apart.write_comments(self.out, self.put, self.blocks is not None)

    def cell(self, word: bytes, param: bytes | None) -> None:
        self.cells += 1
        if self.cells > self.max_parts:
            self.out.flush()
            raise CapReached("max_parts", f"a table row of more than {self.max_parts} cells")
        if self.blocks is not None and self.target == _BODY:
            self.blocks.cell_end()
            self.out.layout("\t")
        else:
            self.put("\t")

    def row(self, word: bytes, param: bytes | None) -> None:
        self.out.drop_tab()  # no tab before a row's end
        if self.blocks is not None and self.target == _BODY:
            self.blocks.row_end()
            self.out.layout("\n")
        else:
            self.put("\n")
        self.cells = 0

    def field_result(self, word: bytes, param: bytes | None) -> None:
        """``\\fldrslt`` (a structured body's): a link's text begins."""
        self.fields.result(len(self.stack), self.out)


_Handler = Callable[[_Converter, bytes, "bytes | None"], None]


def _of_pages(word: Callable[[_CodePages, bytes, "bytes | None"], None]) -> _Handler:
    """A word the code pages read, as a converter's handler."""
    return lambda conv, w, param: word(conv.pages, w, param)


def _of_blocks(word: Callable[[_Blocks, bytes, "bytes | None"], None]) -> _Handler:
    """A paragraph property (a structured body's: ``blocks`` is set), as a converter's
    handler."""
    def handler(conv: _Converter, w: bytes, param: bytes | None) -> None:
        assert conv.blocks is not None
        word(conv.blocks, w, param)
    return handler

# control word -> (its handler, when it runs); a word not here only formats, and is passed over
_WORDS: dict[bytes, tuple[_Handler, int]] = {
    **{w.encode(): (_Converter.destination, _ALWAYS) for w in SKIP_DESTINATIONS},
    b"u": (_Converter.unicode, _ALWAYS), b"uc": (_Converter.fallback_count, _ALWAYS),
    b"shptxt": (_Converter.shape_text, _ALWAYS),
    **{w.encode(): (_Converter.header, _ALWAYS) for w in _HEADERS},
    **{w.encode(): (_Converter.footer, _ALWAYS) for w in _FOOTERS},
    b"annotation": (_Converter.annotation, _ALWAYS),
    b"atnauthor": (_Converter.annotation, _ALWAYS),
    b"f": (_Converter.set_font, _ALWAYS),
    **{w.encode(): (_Converter.text_symbol, _READ) for w in _SYMBOLS},
    b"cell": (_Converter.cell, _READ), b"nestcell": (_Converter.cell, _READ),
    b"row": (_Converter.row, _READ), b"nestrow": (_Converter.row, _READ),
    b"ansicpg": (_of_pages(_CodePages.ansi_codepage), _READ),
    **{w: (_of_pages(_CodePages.ansi_charset), _READ) for w in _ANSI_CHARSETS},
    b"deff": (_of_pages(_CodePages.default_font), _READ),
    b"pard": (_of_blocks(_Blocks.paragraph_reset), _STRUCTURE),
    b"intbl": (_of_blocks(_Blocks.in_table), _STRUCTURE),
    b"outlinelevel": (_of_blocks(_Blocks.outline_level), _STRUCTURE),
    b"fldrslt": (_Converter.field_result, _STRUCTURE),
}
# inside the font table: its entries' code pages; every other word but a destination is passed over
_FONT_TABLE_WORDS: dict[bytes, tuple[_Handler, int]] = {
    **{w.encode(): (_Converter.destination, _ALWAYS) for w in SKIP_DESTINATIONS},
    b"f": (_of_pages(_CodePages.entry_font), _ALWAYS),
    b"fcharset": (_of_pages(_CodePages.entry_charset), _ALWAYS),
    b"cpg": (_of_pages(_CodePages.entry_codepage), _ALWAYS),
}
# the words the tokenizer hands to :meth:`_Converter.control_word`; any other only formats
_ACTIVE = frozenset(_WORDS) | frozenset(_FONT_TABLE_WORDS) | {b"bin"}


def _bin_end(m: re.Match[bytes]) -> int:
    """Where scanning resumes after ``\\binN``: N raw bytes past the word's delimiter."""
    return m.end() + max(0, int(m.group(2) or 0))


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


def _write_apart(sink: TextSink, heading: str, text: str, structured: bool) -> None:
    """The headers' (or footers') text after the body: its distinct lines, under a marker
    line (a structured sink's paragraphs)."""
    seen: list[str] = []
    for line in _whole_pairs(text).split("\n"):
        line = line.strip()
        if line and line not in seen:
            seen.append(line)
    if seen and structured:
        from ..office.flow import block_line, marker_line, write_line

        write_line(sink, marker_line(heading))
        for line in seen:
            write_line(sink, block_line(Paragraph(), line), clean_text=True)
    elif seen:
        sink.write(clean("\n".join([heading] + seen) + "\n"))


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    data = doc.data
    start = len(data) - len(data.lstrip())
    if not data.startswith(b"{\\rtf", start):
        raise CorruptDocument("not an RTF document (no {\\rtf header)")
    out = _Out(sink)
    apart: dict[int, list[str]] = {}
    blocks = _Blocks(out) if sink.structured else None
    try:
        codepage = _Converter(out, ctx.limits.max_parts, apart, ctx.limits.max_chars,
                              blocks).convert(data, start)
        if blocks is not None:
            blocks.end()
        out.flush(final=True)
        for kind, heading in ((_HEADER, "## header"), (_FOOTER, "## footer")):
            _write_apart(sink, heading, "".join(apart[kind]), blocks is not None)
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
