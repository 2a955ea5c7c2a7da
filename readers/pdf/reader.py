"""PDF: text per page from PDFium, pdfplumber or pdftotext, with title, outline and OCR.

One protocol serves both ways of running the built-in engines.  :func:`iter_pdf` yields a
``{"meta": {"pages", "title", "outline"}}`` event and then one ``{"page": n, "text": …}`` (or
``{"page": n, "error": …}``) event per page; :func:`read` consumes it inside the worker, and
:func:`pdftext_main` (``bastion pdftext [-max-pages N] [-engine NAME] < file.pdf``) writes it as
JSON lines for a parent (``tests/pdftext_client.py`` reads them back).

Engines are tried in turn — ``Limits.pdf_engines`` (default PDFium, then pdfplumber), then
``pdftotext`` when the tool is present — until one opens the file, does not crash and gives
at least one readable page; the record names the engine that produced the text and the
warnings say why earlier ones were passed over.  Pages are separated by a form feed in the
text, each page's annotation notes after its text.  Each page is judged on its own: a page
whose text layer is blank, short or garbage (under 90% printable) is rendered (PDFium, or
``pdftoppm``) and OCRed with ``tesseract`` when it is present, and the result's ``page_sources``
says how every page's text was made.  ``docs/readers/pdf.md`` has the rules and measurements.
"""

from __future__ import annotations

import codecs
import ctypes
import functools
import io
import itertools
import json
import logging
import math
import operator
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Generator, Hashable, Protocol, TextIO, cast

from ..base import Context, Document, Limits, MiB, Reader, ReadResult, TextSink
from ..errors import (CapReached,
                      CorruptDocument,
                      EncryptedDocument,
                      ReaderError,
                      ToolFailed,
                      Unsupported)
from ..ocr.choose import PageChoice
from ..ocr.packs import TESSDATA
from ..ocr.reader import (NEEDS_TESSERACT, detect_rotation, document_meta, provenance,
                          read_page, tesseract_version)
from .info import INFO_KEYS, info_strings, metadata_text, pdf_meta

ENCRYPTED = "encrypted PDF (password required)"
NO_TEXT_LAYER = "no text layer (scanned PDF?)"
TIMED_OUT = "pdf extraction timed out"
OVER_OUTPUT = "pdf text over the output limit"
NEEDS_PDFTOTEXT = "needs pdftotext (poppler) on this machine"
GARBAGE = "pdf text is not readable (under 90% printable characters)"

MAX_INPUT_BYTES = 200 * MiB  # what ``pdftext_main`` reads from stdin
MAX_OUTLINE_ITEMS = 10_000
MIN_PRINTABLE = 0.90
BUILTIN_ENGINES = ("pdfium", "pdfplumber")
MAX_PAGE_WARNINGS = 20
MIN_PAGE_CHARS = 10  # a page with fewer visible characters of its own is OCRed (as Tika does)
MAX_OCR_PIXELS = 40_000_000  # a page image is rendered at a lower dpi beyond this (40 MB gray)
OCR_RESERVE_S = 5.0  # of the deadline, kept for writing the text: OCR stops before it
LOW_CONFIDENCE = 60.0  # under this mean word confidence, a page's orientation is checked
_WHITE = bytes(range(248, 256))  # gray levels a blank page renders in

# What makes text "not printable": C0/C1 controls other than whitespace, private-use code
# points, U+FFFD and non-characters, and pdfminer's "(cid:N)" for glyphs it cannot map.
_BAD = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\ufffe\uffff\U000f0000-\U0010ffff]")
_CID = re.compile(r"\(cid:\d+\)")
_ASCII_BAD = re.compile("[\x00-\x08\x0e-\x1f\x7f]")
# A C1 control character in a page's text is a byte of a font without a usable encoding read
# as Latin-1 (documents do not hold C1 controls).  Such bytes are Windows-1252 punctuation
# (German „…“, dashes, €) in fonts from Windows, or Mac OS Roman letters (ä = 0x8A, ö = 0x9A,
# ü = 0x9F) in fonts from a Mac.  In Windows-1252 0x80-0x9F are marks: quotes touch a word on
# one side, dashes and bullets on neither; in Mac Roman they are letters, mostly inside words.
# So a page with more C1 bytes between two letters than between two non-letters is read as
# Mac Roman — all its characters U+0080-U+00FF, since that font's other bytes (ß = 0xA7, „ =
# 0xE3) were misread as Latin-1 too — and any other page's C1 bytes as Windows-1252 (0x92, the
# Windows apostrophe of "don’t", does not vote).
_C1 = re.compile("[\x80-\x9f]")
_C1_CP1252 = {c: bytes([c]).decode("cp1252") for c in range(0x80, 0xA0)
              if c not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}  # the five cp1252 leaves undefined
_C1_MAC = {c: bytes([c]).decode("mac_roman") for c in range(0x80, 0x100)}
_LETTER = "[^\\W\\d_]"
_C1_VOTER = "[\\x80-\\x91\\x93-\\x9f]"
_C1_INSIDE = re.compile(f"(?<={_LETTER}){_C1_VOTER}(?={_LETTER})")
_C1_APART = re.compile(f"(?<!{_LETTER}){_C1_VOTER}(?!{_LETTER})")


def repair_c1(text: str) -> str:
    """``text`` with its C1 control characters read as Windows-1252 or Mac Roman bytes."""
    mac = len(_C1_INSIDE.findall(text)) > len(_C1_APART.findall(text))
    return text.translate(_C1_MAC if mac else _C1_CP1252)


Events = Generator[dict[str, Any], None, None]  # the meta event, then page events


# ---------------------------------------------------------------------------- text helpers

def decode_text_string(raw: bytes) -> str:
    """A PDF text string: UTF-16BE after ``FE FF``, UTF-8 after its BOM (PDF 2.0), otherwise
    PDFDocEncoding, read as Latin-1 (the two differ only in a few punctuation marks); trimmed."""
    if raw.startswith(b"\xfe\xff"):
        text = raw[2:].decode("utf-16-be", "replace")
    elif raw.startswith(b"\xef\xbb\xbf"):
        text = raw[3:].decode("utf-8", "replace")
    else:
        text = raw.decode("latin-1")
    return text.replace("\x00", "").strip()


def _measure(text: str) -> tuple[int, int]:
    """(visible characters, unprintable ones); a pdfminer ``(cid:N)`` counts as one of each."""
    if "(cid:" in text:
        text = _CID.sub("\ufffd", text)
    visible = len(text) - sum(text.count(c) for c in " \t\n\r\f\v")
    if not visible or (text.isascii() and not _ASCII_BAD.search(text)):
        return visible, 0  # ASCII text without controls: no regex pass over every character
    return visible, len(_BAD.findall(text))


def printable_ratio(text: str) -> float:
    """Share of the non-space characters that are printable (1.0 for blank text)."""
    visible, bad = _measure(text)
    if visible <= 0:
        return 1.0
    return max(0.0, 1.0 - bad / visible)


def _clean_page(text: str) -> str:
    """One page's text: LF line ends, no form feeds (they separate pages), no NUL, valid
    UTF-8, no trailing spaces, no blank lines around it."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\f", "\n").replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
        if _C1.search(text):
            text = repair_c1(text)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


# --------------------------------------------------------------------------- outline walk

class OutlineSource(Protocol):
    """How one engine exposes outline items to :func:`walk_outline`."""

    def first_child(self, node: Any) -> Any: ...  # None at the end; ``node`` None = the root
    def next_sibling(self, node: Any) -> Any: ...
    def key(self, node: Any) -> Hashable: ...  # the same object gives the same key
    def title(self, node: Any) -> str: ...
    def page(self, node: Any) -> int | None: ...  # 1-based, None when unresolvable


def walk_outline(src: OutlineSource) -> list[dict[str, Any]]:
    """The outline in reading order: ``[{"title", "page", "level"}]``, level 1 at the top.

    Depth first without recursion; an object seen before ends its chain (outlines can loop);
    at most ``MAX_OUTLINE_ITEMS`` items are visited; items without a resolvable page are left
    out, their children are not.
    """
    items: list[dict[str, Any]] = []
    seen: set[Hashable] = set()
    stack: list[tuple[Any, int]] = [(src.first_child(None), 1)]
    while stack and len(seen) < MAX_OUTLINE_ITEMS:
        node, level = stack.pop()
        if node is None:
            continue
        key = src.key(node)
        if key in seen:
            continue
        seen.add(key)
        stack.append((src.next_sibling(node), level))
        stack.append((src.first_child(node), level + 1))
        page = src.page(node)
        if page is not None:
            items.append({"title": src.title(node), "page": page, "level": level})
    return items


class _PdfiumOutline:
    """Outline items as PDFium bookmarks (PDFium resolves named destinations itself), raw
    handles (ints) through :class:`_Pdfium`'s plain prototypes."""

    def __init__(self, pdf: Any) -> None:
        self.api = _api()
        self.pdf = ctypes.cast(pdf.raw, ctypes.c_void_p).value

    def first_child(self, node: int | None) -> int | None:
        return self.api.first_child(self.pdf, node) or None

    def next_sibling(self, node: int) -> int | None:
        return self.api.next_sibling(self.pdf, node) or None

    def key(self, node: int) -> Hashable:
        return node

    def title(self, node: int) -> str:
        n = self.api.bookmark_title(node, None, 0)
        buf = ctypes.create_string_buffer(n)
        self.api.bookmark_title(node, buf, n)
        return buf.raw[: max(n - 2, 0)].decode("utf-16-le", "replace").strip()

    def page(self, node: int) -> int | None:
        api = self.api
        dest = api.bookmark_dest(self.pdf, node)
        if not dest:
            action = api.bookmark_action(node)
            if action and api.action_type(action) == api.ACTION_GOTO:
                dest = api.action_dest(self.pdf, action)
        if not dest:
            return None
        index = api.dest_page(self.pdf, dest)
        return index + 1 if index >= 0 else None


class _MinerOutline:
    """Outline items as pdfminer objects, page references mapped through the page tree."""

    def __init__(self, doc: Any, page_numbers: dict[int, int]) -> None:
        from pdfminer.pdftypes import PDFObjRef, resolve1
        from pdfminer.psparser import PSLiteral

        self.doc = doc
        self.page_numbers = page_numbers
        self.ref_type, self.resolve, self.literal = PDFObjRef, resolve1, PSLiteral
        self.root = self._dict(doc.catalog.get("Outlines"))

    def _dict(self, obj: Any) -> dict[str, Any]:
        obj = self.resolve(obj)
        return obj if isinstance(obj, dict) else {}

    def first_child(self, node: Any) -> Any:
        return (self.root if node is None else self._dict(node)).get("First")

    def next_sibling(self, node: Any) -> Any:
        return self._dict(node).get("Next")

    def key(self, node: Any) -> Hashable:
        return node.objid if isinstance(node, self.ref_type) else id(node)

    def title(self, node: Any) -> str:
        raw = self.resolve(self._dict(node).get("Title"))
        return decode_text_string(raw) if isinstance(raw, bytes) else ""

    def _name(self, obj: Any) -> str | bytes | None:
        if isinstance(obj, self.literal):
            return obj.name
        return obj if isinstance(obj, (bytes, str)) else None

    def page(self, node: Any) -> int | None:
        item = self._dict(node)
        dest = self.resolve(item.get("Dest"))
        if dest is None:
            action = self._dict(item.get("A"))
            if self._name(self.resolve(action.get("S"))) == "GoTo":
                dest = self.resolve(action.get("D"))
        name = self._name(dest)
        if name is not None:
            try:
                dest = self.resolve(self.doc.get_dest(name))
            except Exception:  # pdfminer raises KeyError, or worse on a broken name tree
                return None
        if isinstance(dest, dict):
            dest = self.resolve(dest.get("D"))
        if isinstance(dest, list) and dest and isinstance(dest[0], self.ref_type):
            return self.page_numbers.get(dest[0].objid)
        return None


# -------------------------------------------------------------------------- the engines

class _Pdfium:
    """The PDFium functions the text pass calls on every page or character, through plain
    ctypes prototypes on raw handles (ints).  pypdfium2's bindings check their argument types
    on every call and its page objects attach finalizers: ≈ 0.1 ms a page, and a call per
    character three times as dear.  The per-character ones hold the GIL (``PYFUNCTYPE``: no
    release and re-acquire around a call of a microsecond); the page-level ones release it.
    ``text_range`` and ``text_bounded`` give exactly what pypdfium2's ``get_text_range()`` and
    ``get_text_bounded()`` give."""

    def __init__(self) -> None:
        import pypdfium2.raw as raw

        def plain(fn: Any, restype: Any, *argtypes: Any, hold_gil: bool = False) -> Any:
            address = ctypes.cast(fn, ctypes.c_void_p).value
            assert address is not None  # a function of the loaded library
            kind = ctypes.PYFUNCTYPE if hold_gil else ctypes.CFUNCTYPE
            return kind(restype, *argtypes)(address)

        vp, i32, f64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
        self.load_page = plain(raw.FPDF_LoadPage, vp, vp, i32)
        self.close_page = plain(raw.FPDF_ClosePage, None, vp)
        self.load_text = plain(raw.FPDFText_LoadPage, vp, vp)
        self.close_text = plain(raw.FPDFText_ClosePage, None, vp)
        self.count_chars = plain(raw.FPDFText_CountChars, i32, vp, hold_gil=True)
        self.text_index = plain(raw.FPDFText_GetTextIndexFromCharIndex, i32, vp, i32,
                                hold_gil=True)
        self._get_text = plain(raw.FPDFText_GetText, i32, vp, i32, i32, vp)
        self._bounded = plain(raw.FPDFText_GetBoundedText, i32, vp, f64, f64, f64, f64, vp,
                              i32)
        self._bbox = plain(raw.FPDF_GetPageBoundingBox, i32, vp, vp, hold_gil=True)
        self.loose_box = plain(raw.FPDFText_GetLooseCharBox, i32, vp, i32, vp, hold_gil=True)
        self.angle = plain(raw.FPDFText_GetCharAngle, ctypes.c_float, vp, i32, hold_gil=True)
        self.origin = plain(raw.FPDFText_GetCharOrigin, i32, vp, i32, vp, vp, hold_gil=True)
        self.annot_count = plain(raw.FPDFPage_GetAnnotCount, i32, vp, hold_gil=True)
        self.annot = plain(raw.FPDFPage_GetAnnot, vp, vp, i32, hold_gil=True)
        self.annot_subtype = plain(raw.FPDFAnnot_GetSubtype, i32, vp, hold_gil=True)
        self.annot_value = plain(raw.FPDFAnnot_GetStringValue, ctypes.c_ulong, vp,
                                 ctypes.c_char_p, vp, ctypes.c_ulong, hold_gil=True)
        self.close_annot = plain(raw.FPDFPage_CloseAnnot, None, vp, hold_gil=True)
        self.first_child = plain(raw.FPDFBookmark_GetFirstChild, vp, vp, vp, hold_gil=True)
        self.next_sibling = plain(raw.FPDFBookmark_GetNextSibling, vp, vp, vp, hold_gil=True)
        self.bookmark_title = plain(raw.FPDFBookmark_GetTitle, ctypes.c_ulong, vp, vp,
                                    ctypes.c_ulong, hold_gil=True)
        self.bookmark_dest = plain(raw.FPDFBookmark_GetDest, vp, vp, vp, hold_gil=True)
        self.bookmark_action = plain(raw.FPDFBookmark_GetAction, vp, vp, hold_gil=True)
        self.action_type = plain(raw.FPDFAction_GetType, ctypes.c_ulong, vp, hold_gil=True)
        self.action_dest = plain(raw.FPDFAction_GetDest, vp, vp, vp, hold_gil=True)
        self.dest_page = plain(raw.FPDFDest_GetDestPageIndex, i32, vp, vp, hold_gil=True)
        self.ACTION_GOTO = raw.PDFACTION_GOTO
        self._rect = raw.FS_RECTF

    def text_range(self, textpage: int) -> str:
        """All the text page's characters (pypdfium2's ``get_text_range()``: characters that
        map to no text index at either end are left out)."""
        start, end = 0, self.count_chars(textpage) - 1
        while start <= end and self.text_index(textpage, start) == -1:
            start += 1
        while start <= end and self.text_index(textpage, end) == -1:
            end -= 1
        if start > end:
            return ""
        t_start, t_end = self.text_index(textpage, start), self.text_index(textpage, end)
        buffer = (ctypes.c_ushort * (t_end + 2 - t_start))()
        out = self._get_text(textpage, start, end + 1 - start, ctypes.addressof(buffer))
        return codecs.decode(memoryview(buffer)[: out - 1], "utf-16-le", "ignore")

    def text_bounded(self, page: int, textpage: int) -> str:
        """The text within the page's bounding box (pypdfium2's ``get_text_bounded()``)."""
        rect = self._rect()
        if not self._bbox(page, ctypes.addressof(rect)):
            raise _pdfium_error("Failed to get page bounding box.")
        box = (rect.left, rect.top, rect.right, rect.bottom)
        # One call into a buffer that holds any page's text (a character gives at most a line
        # break and a surrogate pair: 4 units) instead of pypdfium2's two, each of which
        # gathers the text anew.  Its result is pypdfium2's when the text has no surrogate and
        # no NUL: PDFium builds have sized the text in wide characters (one per pair) or in
        # UTF-16 units, and copied a terminating NUL or not; any other text takes pypdfium2's
        # two calls.
        room = 4 * max(self.count_chars(textpage), 0) + 4
        buffer = (ctypes.c_ushort * room)()
        got = self._bounded(textpage, *box, ctypes.addressof(buffer), room)
        if 0 < got < room:
            units = memoryview(buffer)[: got - 1 if buffer[got - 1] == 0 else got]
            try:
                text = codecs.decode(units, "utf-16-le")
            except UnicodeDecodeError:  # a lone surrogate
                text = None
            if text is not None and len(text) == len(units) and "\x00" not in text:
                return text
        n = self._bounded(textpage, *box, None, 0)
        if n <= 0:
            return ""
        buffer = (ctypes.c_ushort * n)()
        self._bounded(textpage, *box, ctypes.addressof(buffer), n)
        return codecs.decode(buffer, "utf-16-le", "ignore")


def _pdfium_error(message: str) -> Exception:
    """pypdfium2's error, as its helpers raise it (a failed page's error names it)."""
    import pypdfium2 as pdfium

    return pdfium.PdfiumError(message)


@functools.cache
def _api() -> _Pdfium:
    """PDFium's bound functions: built on first use, once per process."""
    return _Pdfium()


# pdfplumber's words break at a gap over PLUMBER_WORD_GAP x the font size (its default, 3 points
# at any size, glued words 0.2 em apart: F1 against MuPDF 0.896 -> 0.965 on the peers corpus;
# 0.08, 0.10, 0.12 and 0.15 all score 0.964-0.965 there).
PLUMBER_WORD_GAP = 0.10
#
# PDFium puts a space where the content stream's positioning leaves a gap wider than about
# half the font's space width; with a font that declares no usable space width (groff's, for
# one), words set with TJ kerning come out glued ("ifthere").  Those gaps are put back from
# the glyphs' boxes: a gap wider than WORD_GAP x the glyph height between two glyphs on one
# line is a word break.  It costs a PDFium call per character, so each document is probed:
# the first PROBE_CHARS characters are checked, and the whole document only when the probe
# found two such gaps.  docs/readers/pdf.md has the measurements.
WORD_GAP = 0.12
PROBE_CHARS = 1500
_SPACE = frozenset(" \t\r\n\f\x00\x02\xa0")
_GLYPH_BYTES = bytes(0 if chr(b) in _SPACE else 1 for b in range(256))  # Latin-1 -> 1 glyph
_MIN_GAP = 0.01  # points: glyphs closer than this are set edge to edge


class _Gaps:
    """The word breaks PDFium's text misses, from each glyph's loose box (its advance)."""

    def __init__(self, api: _Pdfium) -> None:
        self.api = api

    def respace(self, textpage: int, text: str, limit: int | None = None
                ) -> tuple[str, int] | None:
        """The page's text (``text``: its ``text_range``) with a space at every gap, and how
        many were put in; None when PDFium's text does not map one character to one index
        (characters beyond U+FFFF).  With ``limit``, only the first ``limit`` characters are
        looked at (a probe)."""
        from array import array

        n = self.api.count_chars(textpage)
        if len(text) != n or n < 2:
            return None
        m = n if limit is None else max(2, min(n, limit))
        boxes = (ctypes.c_float * (4 * m))()
        base = ctypes.addressof(boxes)
        # only glyphs are asked for their box (no gap next to a space counts; a space's box
        # stays zero): a byte per character, 1 for a glyph, keeps the selection in C
        glyphs = text[:m].encode("latin-1", "replace").translate(_GLYPH_BYTES)
        addresses = range(base, base + 16 * m, 16)
        for _ in map(self.api.loose_box, itertools.repeat(textpage),
                     itertools.compress(range(m), glyphs), itertools.compress(addresses, glyphs)):
            pass
        values = array("f", bytes(boxes))  # left, top, right, bottom per character
        left, top, right, bottom = values[0::4], values[1::4], values[2::4], values[3::4]
        # glyphs set edge to edge (nearly all pairs) are dropped by the first, cheap test
        breaks = []
        spacing: dict[int, float] = {}  # a run of glyphs' median gap (letter-spacing), by start
        wide = map(_MIN_GAP.__lt__, map(operator.sub, left[1:], right))
        for i in itertools.compress(itertools.count(1), wide):
            if text[i] in _SPACE or text[i - 1] in _SPACE:
                continue
            height = max(top[i] - bottom[i], top[i - 1] - bottom[i - 1])
            gap = left[i] - right[i - 1]
            if gap <= WORD_GAP * height or abs(bottom[i] - bottom[i - 1]) >= 0.3 * height:
                continue
            # the run of glyphs around the gap (PDFium's "word"): a gap counts only against
            # the run's usual spacing, so letter-spaced text is not cut into letters
            start = i - 1
            while start > 0 and text[start - 1] not in _SPACE:
                start -= 1
            usual = spacing.get(start)
            if usual is None:
                end = i + 1
                while end < m and text[end] not in _SPACE:
                    end += 1
                gaps = sorted(left[k] - right[k - 1] for k in range(start + 1, end))
                usual = spacing[start] = gaps[len(gaps) // 2]
            if gap - max(usual, 0.0) > WORD_GAP * height:
                breaks.append(i)
        if not breaks:
            return text, 0
        parts, start = [], 0
        for i in breaks:
            parts.append(text[start:i])
            start = i
        parts.append(text[start:])
        return " ".join(parts), len(breaks)


# A page whose characters are set at an angle (a rotated table header, a landscape page set
# on a portrait one, a /Rotate 90 scan with its text turned to match) comes out of PDFium
# with its lines glued ("hotelindia") and out of order, since PDFium breaks lines on the page's
# vertical axis.  Such pages are found by sampling character angles (every ANGLE_STRIDE-th
# character, at most ANGLE_SAMPLES a page: ≈ 1 µs each) and then laid out again in each angle's
# own frame: lines split where the baseline moves across the text direction or the text runs
# back, and ordered top to bottom, left to right as the rotated text reads.
ANGLE_STRIDE = 32  # every 32nd character is looked at, at most ANGLE_SAMPLES of them a page
ANGLE_SAMPLES = 16
ANGLE_STEP = 5  # degrees: characters within one step share a frame
ANGLE_TOLERANCE = math.radians(ANGLE_STEP / 2)


class _Angles:
    """The reading order of rotated text, from PDFium's per-character angle and origin."""

    def __init__(self, api: _Pdfium) -> None:
        self._angle, self._origin, self._box = api.angle, api.origin, api.loose_box
        self._count = api.count_chars

    @staticmethod
    def _step(angle: float) -> int:
        """The angle (radians, PDFium: 0…2π, -1 unknown) in ANGLE_STEP-degree steps, 0…359."""
        if angle < 0:
            return 0
        return int(round(math.degrees(angle) / ANGLE_STEP)) * ANGLE_STEP % 360

    def rotated(self, handle: int) -> bool:
        """Whether a sample of the text page's characters holds one set at an angle (PDFium's
        generated spaces and line breaks report 0)."""
        n = self._count(handle)
        if n <= 0:
            return False
        # an angle (0…2π) more than ANGLE_TOLERANCE from 0 and from 2π is |a - π| < π - tol;
        # min over map() keeps the loop in C
        stride = max(ANGLE_STRIDE, n // ANGLE_SAMPLES)
        angles = map(self._angle, itertools.repeat(handle, n), range(0, n, stride))
        return min(map(abs, map(operator.sub, angles, itertools.repeat(math.pi)))) \
            < math.pi - ANGLE_TOLERANCE

    def relayout(self, handle: int, text: str) -> str | None:
        """The page's text (``text``: its ``text_range``) with each rotated run's lines split
        and ordered as it reads; None when PDFium's text does not map one character to one
        index."""
        n = len(text)
        if n != self._count(handle):
            return None
        x, y = ctypes.c_double(), ctypes.c_double()
        px, py = ctypes.addressof(x), ctypes.addressof(y)
        box = (ctypes.c_float * 4)()  # left, top, right, bottom
        pbox = ctypes.addressof(box)
        # lines: [step, across, along, size, chars]
        lines: list[list[Any]] = []
        line: list[Any] | None = None
        for i, ch in enumerate(text):
            if ch in "\r\n":
                line = None
                continue
            if ch in _SPACE and ch != "\x02":  # PDFium's line-end hyphen is a glyph
                if line is not None:
                    line[4].append(" ")
                continue
            step = self._step(self._angle(handle, i))
            self._origin(handle, i, px, py)
            a = math.radians(step)  # PDFium's angles turn clockwise
            along = x.value * math.cos(a) - y.value * math.sin(a)
            across = x.value * math.sin(a) + y.value * math.cos(a)
            # the glyph's extent across the text direction (PDFium's font size is scaled
            # by the text matrix, so it is no measure on rotated text)
            self._box(handle, i, pbox)
            size = (abs((box[2] - box[0]) * math.sin(a)) + abs((box[1] - box[3]) * math.cos(a))
                    or 10.0)
            if (line is None or line[0] != step or abs(across - line[1]) > 0.5 * size
                    or along < line[2] - 0.5 * size):
                line = [step, across, along, size, []]
                lines.append(line)
            line[2] = along
            line[4].append(ch)
        out: list[str] = []
        k = 0
        while k < len(lines):  # a run of lines at one angle; rotated runs are re-ordered
            j = k
            while j < len(lines) and lines[j][0] == lines[k][0]:
                j += 1
            run = lines[k:j]
            if run[0][0] == 0:
                out += ["".join(l[4]).strip() for l in run]
            else:  # top to bottom, then along the line; pieces of one line joined
                run = sorted(run, key=lambda l: (-round(l[1] / (0.5 * l[3])), l[2]))
                last: list[Any] | None = None
                for l in run:
                    piece = "".join(l[4]).strip()
                    if last is not None and abs(l[1] - last[1]) < 0.5 * l[3]:
                        out[-1] = f"{out[-1]} {piece}".strip()
                    else:
                        out.append(piece)
                    last = l
            k = j
        return "\n".join(l for l in out if l)


# Annotations whose /Contents is text a reader wrote: every markup annotation (notes, free
# text, highlights, stamps, …).  Links and form widgets carry no such text, and a pop-up
# shows its parent's /Contents, which is read from the parent.
ANNOTATION_MARK = "[annotation] "
_NOT_NOTES = frozenset((2, 16))  # FPDF_ANNOT_LINK, _POPUP
_WIDGET = 20  # FPDF_ANNOT_WIDGET: a form field's widget, its value in /V
_UNSET = frozenset({"", "Off"})  # a check box or radio button that is not set


def field_line(name: str, value: str) -> str:
    """A form field's value as a line after its page: ``[form field: Name] value``."""
    name = " ".join(name.split())
    return f"[form field: {name}] {value}" if name else f"[form field] {value}"


def _note_text(note: str) -> str:
    """A note's text; a form field's value (pdftotext draws the fields' appearances)."""
    return note.split("] ", 1)[1] if note.startswith("[form field") and "] " in note else note


def _note_line(note: str) -> str:
    return note if note.startswith("[form field") else ANNOTATION_MARK + note


def _clean_note(text: str) -> str:
    return _clean_page(text.replace("\x00", ""))


class _Notes:
    """The /Contents of a page's annotations, in the page's /Annots order, through plain
    prototypes of PDFium's functions (most pages have none, or only links: the checked
    bindings cost ≈ 50 µs a page for the count alone)."""

    def __init__(self, api: _Pdfium) -> None:
        self._count, self._get = api.annot_count, api.annot
        self._subtype, self._value, self._close = (api.annot_subtype, api.annot_value,
                                                   api.close_annot)

    def _string(self, annot: int, key: bytes) -> str:
        size = self._value(annot, key, None, 0)
        if size <= 2:
            return ""
        buf = ctypes.create_string_buffer(size)
        self._value(annot, key, buf, size)
        return buf.raw[: size - 2].decode("utf-16-le", "replace")

    def read(self, handle: int) -> list[str]:
        """The notes of the page ``handle`` (a raw ``FPDF_PAGE``), and the values of its
        form fields (a widget's own /V, as :func:`field_line`)."""
        notes = []
        for k in range(self._count(handle)):
            annot = self._get(handle, k)
            if not annot:
                continue
            try:
                subtype = self._subtype(annot)
                if subtype in _NOT_NOTES:
                    continue
                if subtype == _WIDGET:
                    value = _clean_note(self._string(annot, b"V"))
                    if value.strip() not in _UNSET:
                        notes.append(field_line(_clean_note(self._string(annot, b"T")), value))
                    continue
                note = _clean_note(self._string(annot, b"Contents"))
                if note.strip():
                    notes.append(note)
            finally:
                self._close(annot)
        return notes


def _miner_annotations(page: Any) -> list[str]:
    """The same, from pdfplumber's page (pdfminer objects)."""
    from pdfminer.pdftypes import resolve1

    notes = []
    for annot in page.annots or ():
        data = annot.get("data") or {}
        kind = getattr(data.get("Subtype"), "name", None)
        if kind == "Widget":
            value, name = resolve1(data.get("V")), resolve1(data.get("T"))
            value = getattr(value, "name", value)  # a check box's /Yes
            value = decode_text_string(value) if isinstance(value, bytes) else value
            name = decode_text_string(name) if isinstance(name, bytes) else ""
            if isinstance(value, str) and _clean_note(value).strip() not in _UNSET:
                notes.append(field_line(_clean_note(name), _clean_note(value)))
            continue
        if kind in ("Link", "Popup"):
            continue
        contents = annot.get("contents")
        if isinstance(contents, bytes):
            contents = decode_text_string(contents)
        if isinstance(contents, str):
            note = _clean_note(contents)
            if note.strip():
                notes.append(note)
    return notes


def _pdfium_meta(pdf: Any) -> dict[str, Any]:
    """Page count, title and outline of an open PDFium document."""
    title = (pdf.get_metadata_value("Title") or "").replace("\x00", "").strip()
    try:
        outline = walk_outline(_PdfiumOutline(pdf))
    except Exception:  # a broken outline costs the outline, never the text
        outline = []
    info = {}
    for key in INFO_KEYS:
        try:
            value = (pdf.get_metadata_value(key) or "").replace("\x00", "").strip()
        except Exception:  # one unreadable entry costs that entry
            value = ""
        if value:
            info[key] = value
    meta = {"pages": len(pdf), "title": title or None, "outline": outline}
    if info:
        meta["info"] = info
    return meta


def _pdfium_events(data: bytes, max_pages: int) -> Events:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        code = getattr(e, "err_code", None)
        if code == raw.FPDF_ERR_PASSWORD:
            raise EncryptedDocument(ENCRYPTED) from None
        if code == raw.FPDF_ERR_SECURITY:
            raise EncryptedDocument("encrypted PDF (unsupported security handler)") from None
        reason = "no pages" if code == raw.FPDF_ERR_SUCCESS else str(e)
        raise CorruptDocument(f"unreadable PDF: {reason}") from None
    try:
        n = len(pdf)
        yield {"meta": _pdfium_meta(pdf)}
        api = _api()
        gaps, angles, reader_notes = _Gaps(api), _Angles(api), _Notes(api)
        handle = ctypes.cast(pdf.raw, ctypes.c_void_p).value
        respace: bool | None = None  # None: probing; then every page, or none
        probed = breaks = 0
        for i in range(min(n, max_pages)):
            try:
                page = api.load_page(handle, i)
                if not page:
                    raise _pdfium_error("Failed to load page.")
                try:
                    textpage = api.load_text(page)
                    if not textpage:
                        raise _pdfium_error("Failed to load text page.")
                    try:
                        text = whole = None  # whole: the page's text_range
                        if angles.rotated(textpage):
                            whole = api.text_range(textpage)
                            text = angles.relayout(textpage, whole)
                        found = None
                        if text is None and respace is None:  # probing: the first characters
                            whole = api.text_range(textpage) if whole is None else whole
                            limit = PROBE_CHARS - probed
                            found = gaps.respace(textpage, whole, limit)
                            if found is not None:
                                probed += min(len(found[0]), limit)
                                breaks += found[1]
                                if breaks >= 2:
                                    respace = True
                                elif probed >= PROBE_CHARS:
                                    respace = False
                            if limit < len(whole):  # the probe saw part of the page
                                found = None
                        if text is None and respace:
                            if found is None:
                                whole = api.text_range(textpage) if whole is None else whole
                                found = gaps.respace(textpage, whole)
                            if found is not None and found[1]:
                                text = found[0]
                        if text is None:
                            text = api.text_bounded(page, textpage)
                    finally:
                        api.close_text(textpage)
                    try:
                        notes = reader_notes.read(page)
                    except Exception:  # a broken annotation costs the notes, never the text
                        notes = []
                finally:
                    api.close_page(page)
            except Exception as e:
                yield {"page": i + 1, "error": f"{type(e).__name__}: {e}"}
                continue
            event: dict[str, Any] = {"page": i + 1, "text": _clean_page(text.replace("\x02", "-"))}
            if notes:
                event["annotations"] = notes
            yield event
    finally:
        pdf.close()


def _miner_pages(doc: Any) -> list[tuple[int, dict[str, Any]]]:
    """The page tree's leaves as (object id, attributes with inherited ones), depth first,
    each object once; pdfminer's own walk (which also scans for pages without a tree) when
    the tree gives none."""
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdftypes import PDFObjRef, resolve1

    pages: list[tuple[int, dict[str, Any]]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, dict[str, Any]]] = [(doc.catalog.get("Pages"), {})]
    while stack:
        ref, inherited = stack.pop()
        if not isinstance(ref, PDFObjRef) or ref.objid in seen:
            continue
        seen.add(ref.objid)
        node = resolve1(ref)
        if not isinstance(node, dict):
            continue
        attrs = {**inherited, **node}
        kind = getattr(resolve1(node.get("Type")), "name", None)
        if kind == "Pages" or (kind is None and "Kids" in node):
            passed = {k: v for k, v in attrs.items() if k in PDFPage.INHERITABLE_ATTRS}
            kids = resolve1(node.get("Kids"))
            for kid in reversed(kids if isinstance(kids, list) else []):
                stack.append((kid, passed))
        elif kind == "Page":
            pages.append((int(ref.objid), attrs))
    if not pages:
        pages = [(int(cast(Any, p.pageid)), dict(p.attrs))
                 for p in PDFPage.create_pages(doc)]
    return pages


def _pdfplumber_events(data: bytes, max_pages: int) -> Events:
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdftypes import resolve1

    # pdfminer logs every oddity of a broken file as a warning; the page errors say enough.
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    try:
        pdf = pdfplumber.PDF(io.BytesIO(data))
        doc = pdf.doc
        pages = _miner_pages(doc)
    except Exception as e:
        cause = e.args[0] if e.args and isinstance(e.args[0], Exception) else e
        if isinstance(cause, PDFPasswordIncorrect):
            raise EncryptedDocument(ENCRYPTED) from None
        if isinstance(cause, PDFEncryptionError):
            raise EncryptedDocument("encrypted PDF (unsupported security handler)") from None
        raise CorruptDocument(f"unreadable PDF: {type(cause).__name__}: {cause}") from None
    if not pages:
        raise CorruptDocument("unreadable PDF: no pages")
    title = None
    info_text: dict[str, str] = {}
    for info in doc.info:
        if not isinstance(info, dict):
            continue
        for key in INFO_KEYS:
            try:
                raw = resolve1(info.get(key))
            except Exception:  # a broken reference costs that entry
                continue
            if isinstance(raw, bytes) and key not in info_text:
                value = decode_text_string(raw).replace("\x00", "").strip()
                if value:
                    info_text[key] = value
    title = info_text.get("Title")
    try:
        numbers = {objid: i for i, (objid, _) in enumerate(pages, 1)}
        outline = walk_outline(_MinerOutline(doc, numbers))
    except Exception:  # a broken outline costs the outline, never the text
        outline = []
    meta: dict[str, Any] = {"pages": len(pages), "title": title, "outline": outline}
    if info_text:
        meta["info"] = info_text
    yield {"meta": meta}
    for i, (objid, attrs) in enumerate(pages[:max_pages], 1):
        try:
            page = pdfplumber.page.Page(pdf, PDFPage(doc, objid, attrs, None), page_number=i)
            try:
                text = page.extract_text(x_tolerance_ratio=PLUMBER_WORD_GAP)
                try:
                    notes = _miner_annotations(page)
                except Exception:  # a broken annotation costs the notes, never the text
                    notes = []
            finally:
                page.close()
        except Exception as e:
            yield {"page": i, "error": f"{type(e).__name__}: {e}"}
            continue
        event: dict[str, Any] = {"page": i, "text": _clean_page(text)}
        if notes:
            event["annotations"] = notes
        yield event


def iter_pdf(data: bytes, engine: str, max_pages: int) -> Events:
    """The line protocol as events: the meta event (full page count), then pages 1…
    min(pages, max_pages).  Raises EncryptedDocument or CorruptDocument before any event."""
    if engine == "pdfium":
        return _pdfium_events(data, max_pages)
    if engine == "pdfplumber":
        return _pdfplumber_events(data, max_pages)
    raise ReaderError(f"unknown PDF engine {engine!r} (known: {', '.join(BUILTIN_ENGINES)})")


def _pdftotext_events(
    data: bytes, ctx: Context, max_pages: int, meta: dict[str, Any] | None,
) -> Events:
    """pdftotext as an engine: ``-layout`` text split on its form feeds.  It gives no title or
    outline, so the meta is the one an engine already read, else PDFium's (read while
    pdftotext runs), else a page count.  The PDF goes to pdftotext's stdin as a memory file
    (``fd://0``): no scratch directory, nothing written to disk.  The annotation notes are
    PDFium's, read while pdftotext runs too (none when PDFium cannot open the file)."""
    probed: list[dict[str, Any] | None] = []
    notes: dict[int, list[str]] = {}

    def probe() -> None:
        try:
            import pypdfium2 as pdfium

            pdf = pdfium.PdfDocument(data)
        except Exception:  # PDFium cannot open it: pdftotext's text and page count alone
            probed.append(None)
            return
        try:
            if meta is None:
                probed.append(_pdfium_meta(pdf))
            api = _api()
            reader, handle = _Notes(api), ctypes.cast(pdf.raw, ctypes.c_void_p).value
            for i in range(min(len(pdf), max_pages)):
                try:
                    page = api.load_page(handle, i)
                    if not page:
                        continue
                    try:
                        found = reader.read(page)
                    finally:
                        api.close_page(page)
                except Exception:  # a broken page or annotation costs its notes only
                    continue
                if found:
                    notes[i + 1] = found
        finally:
            pdf.close()

    result = ctx.run_tool([ctx.tools["pdftotext"], "-layout", "-enc", "UTF-8", "-l",
                           str(max_pages), "fd://0", "-"], input=data, scratch=False,
                          while_running=probe)
    if meta is None and probed:
        meta = probed[0]
    if result.truncated:
        raise ReaderError(OVER_OUTPUT, kind="output_limit")
    if result.returncode != 0:
        line = _first_line(result.stderr)
        if "password" in line.lower():
            raise EncryptedDocument(ENCRYPTED)
        raise CorruptDocument(f"unreadable PDF: {line or f'pdftotext exit {result.returncode}'}")
    pages = result.stdout.decode("utf-8", "replace").split("\f")
    if pages[-1].strip() == "":
        pages.pop()  # pdftotext ends every page, the last one too, with a form feed
    yield {"meta": meta or {"pages": len(pages), "title": None, "outline": []}}
    for i, text in enumerate(pages, 1):
        event: dict[str, Any] = {"page": i, "text": _clean_page(text)}
        # poppler draws the appearance of some annotations (free text) into the page's text:
        # a note already there is not repeated
        flat = " ".join(text.split())
        found = [n for n in notes.get(i, ()) if " ".join(_note_text(n).split()) not in flat]
        if found:
            event["annotations"] = found
        yield event


# ------------------------------------------------------------------------------ the reader

@dataclass
class _Extraction:
    """One engine's pass over the document."""

    meta: dict[str, Any]
    texts: list[str] = field(default_factory=list)  # pages 1…, "" for a failed page
    notes: list[list[str]] = field(default_factory=list)  # each page's annotation text
    errors: list[str] = field(default_factory=list)  # "page N: why"
    failed: set[int] = field(default_factory=set)  # 0-based indices of the failed pages
    chars_full: bool = False  # stopped early: the text already exceeds the character budget


def _collect(events: Events, max_chars: int) -> _Extraction:
    """Run an engine to the end, or until its text is over the character budget."""
    try:
        got = _Extraction(meta=next(events)["meta"])
        chars = 0
        for event in events:
            text = event.get("text", "")
            if "error" in event:
                got.errors.append(f"page {event['page']}: {event['error']}")
                got.failed.add(len(got.texts))
            got.texts.append(text)
            notes = event.get("annotations") or []
            got.notes.append(notes)
            chars += len(text) + 1 + sum(len(n) + len(ANNOTATION_MARK) + 1 for n in notes)
            if chars > max_chars:
                got.chars_full = True
                break
        return got
    finally:
        events.close()


def _engine_chain(ctx: Context) -> list[str]:
    """``Limits.pdf_engines`` in order, then pdftotext when present (unless the setting
    places it itself); pdftotext only when the tool is in ``ctx.tools``."""
    chain = list(dict.fromkeys(ctx.limits.pdf_engines))
    if "pdftotext" not in chain:
        chain.append("pdftotext")
    return [e for e in chain if e != "pdftotext" or "pdftotext" in ctx.tools]


def engine_version(engine: str, ctx: Context) -> str | None:
    """The version of a text engine: PDFium's build, pdfplumber's release, poppler's
    (``pdftotext -v`` of the context's pdftotext); each asked once per process."""
    if engine == "pdftotext":
        path = ctx.tools.get("pdftotext")
        return _pdftotext_version(path, ctx.limits.stderr_bytes) if path else None
    return _library_version(engine)


@functools.cache
def _library_version(engine: str) -> str | None:
    """PDFium's build or pdfplumber's release (None for another name, or when it is not
    installed)."""
    try:
        if engine == "pdfium":
            import pypdfium2.version

            return str(pypdfium2.version.PDFIUM_INFO.version).split("@")[0]
        if engine == "pdfplumber":
            import pdfplumber

            return str(pdfplumber.__version__)
    except (ImportError, AttributeError):
        pass
    return None


@functools.cache
def _pdftotext_version(path: str, max_stderr: int) -> str | None:
    """``pdftotext -v``'s version (poppler's), asked once per tool path and process (the
    document whose text is pdftotext's has run it already: its tools name it)."""
    from ..runtime.toolcall import run_tool

    try:
        res = run_tool([path, "-v"], timeout=10, max_output=64 * 1024, max_stderr=max_stderr)
    except ToolFailed:
        return None
    line = (res.stderr + res.stdout).decode("utf-8", "replace").split("\n")[0]
    return line.rsplit(" ", 1)[-1].strip() or None


def page_kind(text: str) -> str:
    """How a page's own text layer reads: ``text``; ``garbage`` (under 90% printable: glyphs
    without a Unicode mapping); ``short`` (fewer than MIN_PAGE_CHARS visible characters) or
    ``blank`` (none).  Every page but ``text`` is a page to OCR."""
    visible, bad = _measure(text)
    if not visible:
        return "blank"
    if bad > (1 - MIN_PRINTABLE) * visible:
        return "garbage"
    return "short" if visible < MIN_PAGE_CHARS else "text"


@dataclass(frozen=True)
class _PageImage:
    pixels: bytes  # 8-bit gray, row after row
    width: int
    height: int
    dpi: int

    @property
    def pgm(self) -> bytes:
        """The image as binary PGM, which tesseract (leptonica) reads from its stdin."""
        return b"P5\n%d %d\n255\n" % (self.width, self.height) + self.pixels

    def turned(self, degrees: int) -> "_PageImage":
        """The image turned ``degrees`` (90, 180, 270) clockwise."""
        from PIL import Image

        how = {90: Image.Transpose.ROTATE_270, 180: Image.Transpose.ROTATE_180,
               270: Image.Transpose.ROTATE_90}[degrees]
        im = Image.frombytes("L", (self.width, self.height), self.pixels).transpose(how)
        return _PageImage(im.tobytes(), im.width, im.height, self.dpi)


class _PageImages:
    """Pages as gray images for tesseract: PDFium's renderer inside the worker (no file, no
    process: ≈ 5 ms a page at 200 dpi), or ``pdftoppm`` when PDFium cannot open the file.
    Annotations are not drawn (their text is read from the annotations themselves)."""

    def __init__(self, data: bytes, ctx: Context) -> None:
        import pypdfium2 as pdfium

        self.data, self.ctx = data, ctx
        self.pdf: Any = None
        self.name: str | None = None
        try:
            self.pdf = pdfium.PdfDocument(data)
            self.name = "pdfium"
        except pdfium.PdfiumError:
            if "pdftoppm" in ctx.tools:
                self.name = "pdftoppm"

    def close(self) -> None:
        if self.pdf is not None:
            self.pdf.close()

    def has_content(self, number: int, images_only: bool = False) -> bool:
        """Whether page ``number`` holds any page object (image, path, text) to look at, or
        with ``images_only`` any image (or form XObject, which may hold one); True when
        PDFium cannot tell."""
        if self.pdf is None:
            return True
        import pypdfium2.raw as raw

        try:
            page = self.pdf[number - 1]
            try:
                n = raw.FPDFPage_CountObjects(page.raw)
                if not images_only:
                    return n != 0
                for k in range(n):
                    kind = raw.FPDFPageObj_GetType(raw.FPDFPage_GetObject(page.raw, k))
                    if kind in (raw.FPDF_PAGEOBJ_IMAGE, raw.FPDF_PAGEOBJ_FORM):
                        return True
                return False
            finally:
                page.close()
        except Exception:
            return True

    def image(self, number: int) -> _PageImage | None:
        """Page ``number`` (1-based) at ``ocr_dpi`` (less when the page would exceed
        MAX_OCR_PIXELS); None when it renders blank.  Raises ToolFailed when it cannot be
        rendered."""
        dpi = self.ctx.limits.ocr_dpi
        if self.pdf is not None:
            try:
                page = self.pdf[number - 1]
                try:
                    width, height = page.get_size()
                    area = max(width * height, 1.0) / (72 * 72)
                    dpi = max(1, min(dpi, int(math.sqrt(MAX_OCR_PIXELS / area))))
                    bitmap = page.render(scale=dpi / 72, grayscale=True, draw_annots=False,
                                         may_draw_forms=False)
                    w, h, stride = bitmap.width, bitmap.height, bitmap.stride
                    if bitmap.n_channels != 1:
                        pixels = bitmap.to_pil().convert("L").tobytes()
                    else:
                        buf = bytes(bitmap.buffer)
                        pixels = buf if stride == w else b"".join(
                            buf[r * stride: r * stride + w] for r in range(h))
                    bitmap.close()
                finally:
                    page.close()
            except Exception as e:
                raise ToolFailed(f"rendering failed: {type(e).__name__}: {e}") from None
        else:
            res = self.ctx.run_tool([self.ctx.tools["pdftoppm"], "-r", str(dpi), "-f",
                                     str(number), "-l", str(number), "-gray", "fd://0"],
                                    input=self.data, scratch=False)
            if res.returncode != 0 or res.truncated or not res.stdout.startswith(b"P5"):
                why = "image over the output limit" if res.truncated else _first_line(res.stderr)
                raise ToolFailed(f"pdftoppm: {why or 'no image'}")
            magic, size, _, pixels = res.stdout.split(b"\n", 3)  # P5, "w h", 255, pixels
            w, h = (int(v) for v in size.split())
        if not pixels.translate(None, _WHITE):
            return None
        return _PageImage(pixels, w, h, dpi)


@dataclass
class _OcrPass:
    """What OCR did with the pages that needed it (0-based indices)."""

    # page -> (what read it, renderer, dpi, degrees the image was turned)
    done: dict[int, tuple[PageChoice, str, int, int]] = field(default_factory=dict)
    blank: set[int] = field(default_factory=set)  # rendered white: nothing to read
    untried: list[int] = field(default_factory=list)  # not blank, but no tesseract
    capped: list[int] = field(default_factory=list)  # past ocr_max_pages
    stopped: list[int] = field(default_factory=list)  # the deadline was near
    failed: dict[int, str] = field(default_factory=dict)

    def tool_failed(self, page: int, e: ToolFailed) -> None:
        """A render or OCR of ``page`` that failed: stopped at the deadline, or an error."""
        if e.kind == "timeout":
            self.stopped.append(page)
        else:
            self.failed[page] = e.message


def _ocr_pass(data: bytes, candidates: list[int], kinds: list[str], ctx: Context) -> _OcrPass:
    """Render each candidate page and OCR it, one page at a time, in page order: at most
    ``ocr_max_pages`` pages go to tesseract, and none once less than OCR_RESERVE_S of the
    document's deadline is left, so the text already read is still written."""
    out = _OcrPass()
    images = _PageImages(data, ctx)
    if images.name is None:
        out.untried = list(candidates)
        return out
    tesseract = "tesseract" in ctx.tools
    sent = 0
    try:
        for i in candidates:
            if sent >= ctx.limits.ocr_max_pages:
                out.capped.append(i)
                continue
            left = _time_left(ctx)
            if tesseract and left is not None and left <= 0:
                out.stopped.append(i)
                continue
            if kinds[i] == "blank" and not images.has_content(i + 1):
                out.blank.add(i)  # an empty page: nothing to render
                continue
            if kinds[i] == "short" and not images.has_content(i + 1, images_only=True):
                continue  # a few words and drawings: the text layer is all there is to read
            if not tesseract:  # a page to OCR, and no OCR: nothing rendered
                out.untried.append(i)
                continue
            try:
                image = images.image(i + 1)
            except ToolFailed as e:
                out.tool_failed(i, e)
                continue
            if image is None:
                out.blank.add(i)
                continue
            sent += 1
            left = _time_left(ctx)
            try:
                got = read_page(image.pgm, ctx, dpi=image.dpi,
                                timeout=None if left is None else max(0.1, left))
            except ToolFailed as e:
                out.tool_failed(i, e)
                continue
            turned = 0
            if (got.reading.confidence or 0.0) < LOW_CONFIDENCE:
                got, turned = _try_turned(image, got, ctx)
            out.done[i] = (got, images.name, image.dpi, turned)
    finally:
        images.close()
    return out


def _try_turned(image: _PageImage, got: PageChoice, ctx: Context) -> tuple[PageChoice, int]:
    """A page read with low confidence may be a scan lying on its side or upside down:
    tesseract's orientation detection (``--psm 0``) says how far to turn it; the turned image
    is read again and kept when its confidence is higher.  (Tesseract reads text turned 90°
    itself, often well; 180° and 270° it reads as garbage.)"""
    left = _time_left(ctx)
    if left is not None and left <= OCR_RESERVE_S:  # two more tesseract runs would not fit
        return got, 0
    try:
        degrees = detect_rotation(image.pgm, ctx, dpi=image.dpi,
                                  timeout=None if left is None else max(0.1, left))
        if degrees not in (90, 180, 270):
            return got, 0
        left = _time_left(ctx)
        again = read_page(image.turned(degrees).pgm, ctx, dpi=image.dpi,
                          timeout=None if left is None else max(0.1, left))
    except ToolFailed:  # no orientation found, no time: the first reading stands
        return got, 0
    if (again.reading.confidence or 0.0) > (got.reading.confidence or 0.0):
        return again, degrees
    return got, 0


def _time_left(ctx: Context) -> float | None:
    """Seconds left of the document's deadline, less the reserve kept for writing the text
    (OCR_RESERVE_S, or a tenth of a short ``tool_deadline_s``); None when the context has no
    deadline."""
    time_left = getattr(ctx, "time_left", None)
    if not callable(time_left):
        return None
    return time_left() - min(OCR_RESERVE_S, 0.1 * ctx.limits.tool_deadline_s)


def _page_list(indices: list[int]) -> str:
    """``page 2`` or ``pages 2, 5, 7`` (1-based), at most MAX_PAGE_WARNINGS, then a count."""
    shown = ", ".join(str(i + 1) for i in indices[:MAX_PAGE_WARNINGS])
    more = len(indices) - MAX_PAGE_WARNINGS
    return ("page " if len(indices) == 1 else "pages ") + shown + (
        f" and {more} more" if more > 0 else "")


def _finish(
    doc: Document, sink: TextSink, ctx: Context, engine: str, got: _Extraction,
    kinds: list[str], warnings: list[str],
) -> ReadResult:
    """The kept engine's pages, each page that needs it OCRed, annotations after each page;
    the text into the sink and the provenance of every page into the meta."""
    limits = ctx.limits
    version = engine_version(engine, ctx)
    texts = list(got.texts)
    sources: list[dict[str, Any]] = []
    for i, kind in enumerate(kinds):
        entry: dict[str, Any] = {"page": i + 1, "source": "native", "engine": engine,
                                 "version": version}
        if i in got.failed:
            entry["source"] = "failed"
        sources.append(entry)
    candidates = [i for i, k in enumerate(kinds) if k != "text" and i not in got.failed]
    ocr = _ocr_pass(doc.data, candidates, kinds, ctx) if candidates else _OcrPass()
    for i, (choice, renderer, dpi, turned) in ocr.done.items():
        found = choice.reading
        read_chars, own_chars = _measure(found.text)[0], _measure(texts[i])[0]
        if not read_chars:
            sources[i]["ocr_unused"] = "read nothing"
        elif kinds[i] == "short" and read_chars < 2 * own_chars:
            # OCR of a few words drops and misreads letters ("Test" -> "est"): a short text
            # layer stays unless OCR found text it lacks (a page number over a scan)
            sources[i]["ocr_unused"] = "read no more than the text layer"
        else:
            texts[i] = _clean_page(found.text)
            sources[i] = {"page": i + 1, "source": "ocr", "engine": "tesseract",
                          "version": tesseract_version(ctx), "confidence": found.confidence,
                          "renderer": renderer, "dpi": dpi, **provenance(choice)}
            if turned:
                sources[i]["turned"] = turned
    for i in ocr.blank:
        sources[i]["blank"] = True
    garbage = [i for i in candidates if kinds[i] == "garbage" and sources[i]["source"] != "ocr"]
    for i in garbage:  # never stored: a page of glyphs without a Unicode mapping
        ratio = printable_ratio(texts[i])
        texts[i] = ""
        sources[i] = {**sources[i], "source": "dropped",
                      "reason": f"garbage text ({ratio:.0%} printable)"}
    if garbage:
        why = "" if "tesseract" in ctx.tools else f", not OCRed: {NEEDS_TESSERACT}"
        warnings.append(f"{_page_list(garbage)}: garbage text dropped{why}")
    why = NEEDS_TESSERACT if "tesseract" not in ctx.tools else "no renderer opens the file"
    for pages, reason in ((ocr.untried, why), (ocr.capped, "ocr_max_pages reached"),
                          (ocr.stopped, "the deadline was near")):
        for i in pages:
            sources[i]["not_ocred"] = reason
    unread = [i for i in ocr.untried if kinds[i] == "blank"]
    if unread:
        warnings.append(f"{_page_list(unread)}: no text layer, not OCRed: {why}")
    for i, message in sorted(ocr.failed.items())[:MAX_PAGE_WARNINGS]:
        warnings.append(f"OCR page {i + 1}: {message}")
    if len(ocr.failed) > MAX_PAGE_WARNINGS:
        warnings.append(f"OCR failed on {len(ocr.failed) - MAX_PAGE_WARNINGS} more pages")
    for i, notes in enumerate(got.notes):
        if notes:
            block = "\n".join(_note_line(note) for note in notes)
            texts[i] = f"{texts[i]}\n{block}" if texts[i] else block
            sources[i]["annotations"] = len(notes)
    pages_ocr = sum(1 for s in sources if s["source"] == "ocr")
    extractor = f"{engine}+tesseract" if pages_ocr else engine
    kept = [ocr.done[i][0] for i, s in enumerate(sources) if s["source"] == "ocr"]
    packs = document_meta([c for c, *_ in ocr.done.values()], kept)
    outline = got.meta.get("outline")
    doc_meta = pdf_meta(doc.data, info_strings(got.meta.get("info")), got.meta.get("pages"))
    result = ReadResult(
        extractor, pages=got.meta.get("pages"), title=got.meta.get("title"),
        outline=tuple(outline) if outline is not None else None, page_sources=tuple(sources),
        pages_ocr=pages_ocr, ocr_languages=packs.ocr_languages, ocr_missing=packs.ocr_missing,
        ocr_packs=packs.ocr_packs).with_metadata(doc_meta)
    if not any(t.strip() for t in texts):
        only = metadata_text(doc_meta)
        if not only:
            return replace(result, empty_reason=NO_TEXT_LAYER, warnings=tuple(warnings))
        # a scan whose only words are in its Info/XMP: those words are its text
        warnings.append(f"{NO_TEXT_LAYER}: the text is the document's metadata")
        _write_pages(sink, [only], result, warnings)
        return replace(result, warnings=tuple(warnings))
    _write_pages(sink, texts, result, warnings)
    caps: list[tuple[str, str]] = []
    n = got.meta["pages"]
    if n > limits.max_pages and not got.chars_full:
        caps.append(("max_pages", f"{limits.max_pages} of {n} pages"))
    if ocr.capped:
        total = len(ocr.done) + len(ocr.failed) + len(ocr.capped)
        caps.append(("ocr_max_pages", f"{limits.ocr_max_pages} of {total} pages to OCR"))
    if ocr.stopped:
        caps.append(("ocr_deadline", f"not OCRed: {_page_list(ocr.stopped)}"))
    if caps:
        for cap, detail in caps[1:]:
            warnings.append(f"{cap} reached: {detail}")
        raise CapReached(caps[0][0], caps[0][1],
                         result=replace(result, warnings=tuple(warnings)))
    return replace(result, warnings=tuple(warnings))


def _write_pages(sink: TextSink, texts: list[str], result: ReadResult,
                 warnings: list[str]) -> None:
    """Pages into the sink separated by form feeds; a character cap keeps the result and the
    warnings so far."""
    try:
        for i, text in enumerate(texts):
            if i:
                sink.write("\f")
            sink.write(text + "\n" if text else "")
    except CapReached as cap:
        raise CapReached(cap.cap, cap.detail,
                         result=replace(result, warnings=tuple(warnings))) from None


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    limits = ctx.limits
    meta: dict[str, Any] | None = None
    failures: list[str] = []
    garbage: tuple[str, _Extraction, list[str]] | None = None  # the first all-garbage engine
    encrypted: EncryptedDocument | None = None
    for engine in _engine_chain(ctx):
        try:
            if engine == "pdftotext":
                events = _pdftotext_events(doc.data, ctx, limits.max_pages, meta)
            else:
                events = iter_pdf(doc.data, engine, limits.max_pages)
            got = _collect(events, limits.max_chars)
        except MemoryError:
            raise
        except EncryptedDocument as e:
            # Engines differ on encryption: PDFium refuses some AES-256 files with an empty
            # user password that pdfminer and poppler open.  Let the next engine try.
            encrypted = encrypted or e
            failures.append(f"{engine}: {e.message}")
            continue
        except ToolFailed as e:
            if e.kind == "timeout":
                raise
            failures.append(f"{engine}: {e.message}")
            continue
        except ReaderError as e:
            failures.append(f"{engine}: {e.message}")
            continue
        except Exception as e:  # the engine crashed: try the next one
            failures.append(f"{engine} crashed: {type(e).__name__}: {e}")
            continue
        meta = meta or got.meta  # pdftotext reports the first meta an engine read
        if got.texts and len(got.errors) == len(got.texts):
            failures.append(f"{engine}: every page failed ({got.errors[0]})")
            continue
        kinds = [page_kind(t) for t in got.texts]
        if "text" not in kinds and "garbage" in kinds and not any(got.notes):
            # nothing readable but glyphs without a Unicode mapping: another engine may map
            # them (pdfminer and poppler read some fonts PDFium does not)
            bad = "".join(t for t, k in zip(got.texts, kinds) if k == "garbage")
            failures.append(f"{engine}: garbage text ({printable_ratio(bad):.0%} printable)")
            garbage = garbage or (engine, got, kinds)
            continue
        return _finish(doc, sink, ctx, engine, got, kinds, _warnings(failures, got))
    if garbage is not None:
        if "tesseract" in ctx.tools:  # the pages can still be read from their pixels
            engine, got, kinds = garbage
            return _finish(doc, sink, ctx, engine, got, kinds, _warnings(failures, got))
        if "pdftotext" not in ctx.tools:
            raise Unsupported(NEEDS_PDFTOTEXT)
        raise ReaderError(f"{GARBAGE}: " + "; ".join(failures))
    if encrypted is not None:  # no engine could open it without a password
        raise encrypted
    raise CorruptDocument(_unreadable_message(failures))


def _warnings(failures: list[str], got: _Extraction) -> list[str]:
    """Why earlier engines were passed over, then the pages the kept one failed on."""
    page_warnings = got.errors[:MAX_PAGE_WARNINGS]
    if len(got.errors) > MAX_PAGE_WARNINGS:
        page_warnings.append(f"{len(got.errors) - MAX_PAGE_WARNINGS} more pages failed")
    return [f"skipped {f}" for f in failures] + page_warnings


def _unreadable_message(failures: list[str]) -> str:
    """The first engine's reason, with the ``unreadable PDF:`` prefix only once."""
    if not failures:
        return "unreadable PDF: no PDF engine configured"
    first = failures[0].split(": ", 1)[-1]
    return first if first.startswith("unreadable PDF") else f"unreadable PDF: {first}"


READER = Reader(
    name="pdf",
    # 4: metadata (Info, XMP; a scan's metadata as its text), form field values; 5: and OCR
    # in each page's language (the installed packs in the key)
    version=5,
    mimes=("application/pdf",),
    extensions=(".pdf",),
    tools=("pdftotext", "pdftoppm", "tesseract", TESSDATA),
    uses_tool_deadline=True,
    settings=("pdf_engines", "max_pages", "ocr_max_pages", "ocr_dpi", "ocr_languages"),
    read=read,
    libraries=("pypdfium2", "pdfplumber"),
)


# ------------------------------------------------------------------------------ child mode

def pdftext_main(argv: list[str], stdin: BinaryIO, stdout: TextIO) -> int:
    """``bastion pdftext [-max-pages N] [-engine NAME] < file.pdf``: the protocol as JSON lines.

    Exit 0 ok, 3 encrypted (a user password is needed), 4 unreadable (cannot be opened, no
    pages), 1 anything else, with one line on stderr.  Reads no environment, opens no network.
    """
    max_pages = Limits().max_pages
    engine = Limits().pdf_engines[0]
    args = list(argv)
    try:
        while args:
            flag = args.pop(0)
            name, _, value = flag.lstrip("-").partition("=")
            if not value:
                value = args.pop(0)
            if name == "max-pages":
                max_pages = int(value)
            elif name == "engine":
                engine = value
            else:
                raise ValueError(f"unknown flag {flag}")
        if max_pages < 0:
            raise ValueError("-max-pages must be 0 or more")
    except (ValueError, IndexError) as e:
        print(f"pdftext: {e or 'flag needs a value'}", file=sys.stderr)
        return 1
    data = stdin.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        print(f"pdftext: input over {MAX_INPUT_BYTES // MiB} MiB", file=sys.stderr)
        return 1
    try:
        for event in iter_pdf(data, engine, max_pages):
            stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
        stdout.flush()
    except EncryptedDocument as e:
        print(e.message, file=sys.stderr)
        return 3
    except CorruptDocument as e:
        print(e.message.removeprefix("unreadable PDF: "), file=sys.stderr)
        return 4
    except Exception as e:
        print(f"pdftext: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
