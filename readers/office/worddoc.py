"""Word 97–2003 (``.doc``) text: the piece table of the ``WordDocument`` stream ([MS-DOC]).

The File Information Block (FIB) at the start of ``WordDocument`` gives the character counts of
each story (main text, footnotes, headers/footers, comments, endnotes, text boxes) and where the
piece table (``Clx``) sits in the table stream (``0Table`` or ``1Table``).  Each piece maps a run
of character positions to bytes of ``WordDocument``: 8-bit (Windows-1252) or UTF-16LE.  The
text is then cleaned of Word's control characters:

* paragraph mark (13), line break (11), page/section break (12) → newline;
* a table's cell mark (7) → tab, and the mark that ends a row → newline, so a row is one
  tab-separated line as in the DOCX reader.  Row ends are the paragraphs whose properties (the
  PAPX pages named by ``PlcBtePapx``) carry ``sprmPFTtp``; when those cannot be read, a cell
  mark right after a cell mark is taken for the row end (an empty last cell then merges);
* fields (19 … 20 … 21): the result is kept, the field code dropped; nested fields too;
* non-breaking hyphen (30) → ``-``; optional hyphen (31), object anchors (1, 8), footnote
  reference marks (2), comment marks (5) and the other control characters → dropped.

Stories in this order: main text, then headers and footers (their separator stories dropped),
footnotes, endnotes, text boxes.  Comments are not read (as in the DOCX reader).  Word 6/95
files (nFib < 101) are ``unsupported``; an encrypted or obfuscated file raises
:class:`EncryptedDocument` (the caller may try the default password first).
"""

from __future__ import annotations

import re
import struct

from ..errors import CorruptDocument, EncryptedDocument, Unsupported

_F_ENCRYPTED = 0x0100
_F_WHICH_TABLE = 0x0200
_F_OBFUSCATED = 0x8000
_FC_CLX = 33  # index of fcClx / lcbClx in FibRgFcLcb97
_FC_BTE_PAPX = 13  # index of fcPlcfBtePapx / lcbPlcfBtePapx
_SPRM_TTP = (0x2417, 0x244C)  # sprmPFTtp, sprmPFInnerTtp: the paragraph ends a table row
ROW_END = "\ue000"  # private-use stand-in for a row-end mark while a story is cleaned
MAX_FKPS = 100_000

# story order in the character positions, with whether to keep it
_STORIES = ("main", "footnotes", "headers", "macro", "comments", "endnotes", "textboxes",
            "header_textboxes")
_OUTPUT_ORDER = ("main", "headers", "footnotes", "endnotes", "textboxes", "header_textboxes")

_DROP: dict[int, str | None] = {i: None for i in range(32) if i not in (9, 10)}
_DROP.update({0x0D: "\n", 0x0B: "\n", 0x0C: "\n", 0x1E: "-", 0x07: "\x07"})
_BLANK_LINES = re.compile(r"\n[ \t]*(?=\n)")


class WordDoc:
    """The stories of one Word binary document."""

    def __init__(self, word: bytes, table: bytes, ccp: dict[str, int], pieces: list,
                 row_ends: frozenset[int] = frozenset()) -> None:
        self.word = word
        self.table = table
        self.ccp = ccp
        self.pieces = pieces  # (cp_start, cp_end, fc, compressed)
        self.row_ends = row_ends  # byte offsets just past each table-row-end mark

    def chars(self, start: int, end: int) -> str:
        """The raw characters of positions [start, end)."""
        out: list[str] = []
        for cp0, cp1, fc, compressed in self.pieces:
            lo, hi = max(start, cp0), min(end, cp1)
            if lo >= hi:
                continue
            width = 1 if compressed else 2
            a = fc + width * (lo - cp0)
            raw = self.word[a:a + width * (hi - lo)]
            piece = raw.decode("cp1252" if compressed else "utf-16-le", "replace")
            if self.row_ends and "\x07" in piece:
                # a cell mark that ends a table-row paragraph is the row's end
                piece = "".join(
                    ROW_END if c == "\x07" and a + width * (i + 1) in self.row_ends else c
                    for i, c in enumerate(piece))
            out.append(piece)
        return "".join(out)

    def story(self, name: str) -> str:
        start = 0
        for s in _STORIES:
            if s == name:
                return self.chars(start, start + self.ccp[s])
            start += self.ccp[s]
        return ""


def _u16(b: bytes, at: int) -> int:
    return struct.unpack_from("<H", b, at)[0]


def _u32(b: bytes, at: int) -> int:
    return struct.unpack_from("<I", b, at)[0]


def fib_flags(word: bytes) -> int:
    if len(word) < 32 or _u16(word, 0) != 0xA5EC:
        raise CorruptDocument("WordDocument stream without a Word FIB")
    return _u16(word, 0x0A)


def is_encrypted(word: bytes) -> bool:
    return bool(fib_flags(word) & (_F_ENCRYPTED | _F_OBFUSCATED))


def table_stream_name(word: bytes) -> str:
    return "1Table" if fib_flags(word) & _F_WHICH_TABLE else "0Table"


def parse(word: bytes, table: bytes) -> WordDoc:
    """The piece table and story lengths of a Word 97+ document."""
    flags = fib_flags(word)
    nfib = _u16(word, 2)
    if nfib < 0xC0:
        raise Unsupported(f"Word 6/95 document (nFib {nfib}): only Word 97 and later is read")
    if flags & (_F_ENCRYPTED | _F_OBFUSCATED):
        raise EncryptedDocument("encrypted Word document")
    try:
        csw = _u16(word, 32)
        at = 34 + 2 * csw
        cslw = _u16(word, at)
        lw = at + 2
        ccp = {name: _u32(word, lw + 12 + 4 * i) for i, name in enumerate(_STORIES)}
        at = lw + 4 * cslw
        cb = _u16(word, at)
        if cb <= _FC_CLX:
            raise CorruptDocument("Word FIB too short to locate the piece table")
        fc_clx = _u32(word, at + 2 + 8 * _FC_CLX)
        lcb_clx = _u32(word, at + 2 + 8 * _FC_CLX + 4)
        fc_bte = _u32(word, at + 2 + 8 * _FC_BTE_PAPX)
        lcb_bte = _u32(word, at + 2 + 8 * _FC_BTE_PAPX + 4)
    except struct.error:
        raise CorruptDocument("Word FIB truncated") from None
    clx = table[fc_clx:fc_clx + lcb_clx]
    if len(clx) != lcb_clx or not lcb_clx:
        raise CorruptDocument("Word piece table outside the table stream")
    pieces = _pieces(clx, len(word))
    total = sum(ccp.values())
    if total <= 0 or any(v < 0 or v > 1 << 30 for v in ccp.values()):
        raise CorruptDocument("Word FIB declares impossible text lengths")
    return WordDoc(word, table, ccp, pieces, _row_ends(word, table[fc_bte:fc_bte + lcb_bte]))


def _row_ends(word: bytes, plc: bytes) -> frozenset[int]:
    """The end offsets of the paragraphs whose properties carry sprmPFTtp/sprmPFInnerTtp: the
    PlcBtePapx names the 512-byte PAPX pages (FKPs) of ``WordDocument``; each page maps
    paragraph ends to their property lists.  Damaged pages are skipped: without them a row
    end is told by two cell marks in a row."""
    ends: set[int] = set()
    if len(plc) < 8:
        return frozenset()
    n = (len(plc) - 4) // 8
    pns = struct.unpack_from(f"<{n}I", plc, 4 * (n + 1)) if n else ()
    for pn in pns[:MAX_FKPS]:
        page = word[(pn & 0x3FFFFF) * 512:(pn & 0x3FFFFF) * 512 + 512]
        if len(page) != 512:
            continue
        crun = page[511]
        if crun == 0 or 4 * (crun + 1) + 13 * crun > 511:
            continue
        fcs = struct.unpack_from(f"<{crun + 1}I", page, 0)
        for i in range(crun):
            offset = page[4 * (crun + 1) + 13 * i] * 2
            if offset and _has_ttp(page, offset):
                ends.add(fcs[i + 1])
    return frozenset(ends)


def _has_ttp(page: bytes, at: int) -> bool:
    """Whether the PapxInFkp at ``at`` holds a TTP sprm with a true operand."""
    if at >= 511:
        return False
    cb = page[at]
    if cb == 0:
        if at + 1 >= 511:
            return False
        size, start = 2 * page[at + 1], at + 2
    else:
        size, start = 2 * cb - 1, at + 1
    grpprl = page[start + 2:min(start + size, 511)]  # after the 2-byte istd
    pos = 0
    while pos + 2 <= len(grpprl):
        sprm = struct.unpack_from("<H", grpprl, pos)[0]
        pos += 2
        spra = sprm >> 13
        if sprm in _SPRM_TTP:
            return pos < len(grpprl) and grpprl[pos] == 1
        if spra in (0, 1):
            pos += 1
        elif spra in (2, 4, 5):
            pos += 2
        elif spra == 3:
            pos += 4
        elif spra == 7:
            pos += 3
        else:  # variable: a length byte (sprmPChgTabs 0xC615 may say 255 and carry more)
            if pos >= len(grpprl):
                break
            pos += 1 + grpprl[pos]
    return False


def _pieces(clx: bytes, word_len: int) -> list[tuple[int, int, int, bool]]:
    at = 0
    try:
        while at < len(clx) and clx[at] == 0x01:  # Prc: property modifiers, skipped
            at += 3 + struct.unpack_from("<h", clx, at + 1)[0]
        if at >= len(clx) or clx[at] != 0x02:
            raise CorruptDocument("Word piece table (Pcdt) not found")
        lcb = _u32(clx, at + 1)
        plc = clx[at + 5:at + 5 + lcb]
        n = (len(plc) - 4) // 12
        if n <= 0 or len(plc) < 4 + 12 * n:
            raise CorruptDocument("Word piece table empty or truncated")
        cps = struct.unpack_from(f"<{n + 1}I", plc, 0)
        out = []
        for i in range(n):
            fc_raw = _u32(plc, 4 * (n + 1) + 8 * i + 2)
            compressed = bool(fc_raw & 0x40000000)
            fc = fc_raw & 0x3FFFFFFF
            if compressed:
                fc //= 2
            if cps[i + 1] < cps[i] or fc > word_len:
                raise CorruptDocument("Word piece table has impossible pieces")
            out.append((cps[i], cps[i + 1], fc, compressed))
        return out
    except struct.error:
        raise CorruptDocument("Word piece table truncated") from None


def clean(raw: str) -> str:
    """Text of a story: fields resolved, control characters mapped (module docstring)."""
    out: list[str] = []
    # field state stack: True while inside a field's code part (dropped)
    stack: list[bool] = []
    start = 0
    for m in re.finditer("[\x13\x14\x15]", raw):
        chunk = raw[start:m.start()]
        if not any(stack):
            out.append(chunk)
        c = m.group()
        if c == "\x13":
            stack.append(True)
        elif c == "\x14":
            if stack:
                stack[-1] = False
        elif stack:
            stack.pop()
        start = m.end()
    if not any(stack):
        out.append(raw[start:])
    text = "".join(out).translate(_DROP)
    if ROW_END in text:  # rows known from the paragraph properties
        text = text.replace("\x07" + ROW_END, ROW_END).replace(ROW_END, "\n")
        text = text.replace("\x07", "\t")
    elif "\x07" in text:  # no properties: a cell mark right after a cell mark ends a row
        text = text.replace("\x07\x07", "\t\n").replace("\x07", "\t")
    lines = [line.rstrip() for line in text.split("\n")]
    return "\n".join(line for line in lines if line.strip())


def text(doc: WordDoc) -> str:
    """The document's text, stories in output order, separated by blank lines."""
    parts = []
    for name in _OUTPUT_ORDER:
        if not doc.ccp.get(name):
            continue
        story = doc.story(name)
        if name == "headers":
            story = _headers(story)
        body = clean(story)
        if body:
            parts.append(body)
    return "\n".join(parts) + ("\n" if parts else "")


def _headers(story: str) -> str:
    """The header/footer story without its separator stories and with each distinct
    header/footer once (sections repeat them).  The stories are split by the PlcfHdd in the
    table stream; without it, the text is read as one block and deduplicated by paragraph."""
    seen: set[str] = set()
    out = []
    for para in story.split("\r"):
        key = para.strip()
        if key and key not in seen:
            seen.add(key)
            out.append(para)
    return "\r".join(out)
