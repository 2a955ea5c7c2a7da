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

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument
from ..office.xmlsafe import clean
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
 _DEFF, _HEADER, _FOOTER, _SHPTXT, _ANNOT, _ATNAUTHOR) = range(1, 19)
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
}


def _codepage(n: int) -> str | None:
    """A Python codec for a Windows code page number, or None."""
    name = "mac_roman" if n == 10000 else f"cp{n}"
    try:
        info = codecs.lookup(name)
    except LookupError:
        return None
    return info.name if getattr(info, "_is_text_encoding", True) else None


class _Out:
    """Buffered text to the sink; joins UTF-16 surrogate pairs written by two ``\\u``."""

    __slots__ = ("sink", "buf", "size", "last")

    def __init__(self, sink: TextSink) -> None:
        self.sink = sink
        self.buf: list[str] = []
        self.size = 0
        self.last = "\n"  # the last character written (a text ends with a line break)

    def put(self, s: str) -> None:
        self.buf.append(s)
        self.size += len(s)
        if self.size >= _FLUSH:
            self.flush()

    def drop_tab(self) -> None:
        if self.buf and self.buf[-1] == "\t":
            self.buf.pop()
            self.size -= 1

    def flush(self, final: bool = False) -> None:
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


def _convert(data: bytes, start: int, out: _Out, max_parts: int,
             apart: dict[int, list[str]] | None = None, max_apart: int = 1 << 24) -> str:
    """Tokenize ``data`` from ``start`` into ``out``; returns the document code page.  The
    text of header and footer groups goes to ``apart[_HEADER]`` / ``apart[_FOOTER]``
    (at most ``max_apart`` characters in all) instead."""
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

    def decode() -> None:
        cp = fonts.get(font if font >= 0 else deff, ansi)
        put(pending.decode(cp, "replace"))
        pending.clear()

    while pos < n:
        for m in finditer(data, pos):
            kind = m.lastindex
            if kind == 6:  # text run
                if skip:
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
                put(_SYMBOLS[word])
                if word == "par":
                    cells = 0
                    if comments and target == 0:
                        for line in comments:
                            put(line + "\n")
                        comments.clear()
            elif act == _CELL:
                cells += 1
                if cells > max_parts:
                    out.flush()
                    raise CapReached("max_parts", f"a table row of more than {max_parts} cells")
                put("\t")
            elif act == _ROW:
                out.drop_tab()
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
        else:
            pos = n
    if pending:
        decode()
    if comments:
        put("\n" + "\n".join(comments) + "\n")
    return ansi


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    data = doc.data
    start = len(data) - len(data.lstrip())
    if not data.startswith(b"{\\rtf", start):
        raise CorruptDocument("not an RTF document (no {\\rtf header)")
    out = _Out(sink)
    apart: dict[int, list[str]] = {}
    try:
        codepage = _convert(data, start, out, ctx.limits.max_parts, apart, ctx.limits.max_chars)
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
            if seen:
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
