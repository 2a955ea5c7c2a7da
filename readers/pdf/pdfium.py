"""PDFium through its C API on raw handles: the calls of the text pass on every page or
character, the word gaps a font without a usable space width leaves glued (:class:`Gaps`),
and the frames of rotated text (:class:`Angles`)."""

from __future__ import annotations

import codecs
import ctypes
import functools
import itertools
import math
import operator
from typing import Any

def _prototype(fn: Any, restype: Any, *argtypes: Any, hold_gil: bool = False) -> Any:
    """A PDFium function as a plain ctypes prototype on raw handles (ints)."""
    address = ctypes.cast(fn, ctypes.c_void_p).value
    assert address is not None  # a function of the loaded library
    kind = ctypes.PYFUNCTYPE if hold_gil else ctypes.CFUNCTYPE
    return kind(restype, *argtypes)(address)


_VP, _I32, _F64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_double


class Pdfium:
    """The PDFium functions the text pass calls on every page or character, through plain
    ctypes prototypes on raw handles (ints).  pypdfium2's bindings check their argument types
    on every call and its page objects attach finalizers: ≈ 0.1 ms a page, and a call per
    character three times as dear.  The per-character ones hold the GIL (``PYFUNCTYPE``: no
    release and re-acquire around a call of a microsecond); the page-level ones release it.
    ``text_range`` and ``text_bounded`` give exactly what pypdfium2's ``get_text_range()`` and
    ``get_text_bounded()`` give.  A page's annotations and the outline's bookmarks have their
    own (:class:`PdfiumAnnots`, :class:`PdfiumBookmarks`)."""

    def __init__(self) -> None:
        import pypdfium2.raw as raw

        plain, vp, i32, f64 = _prototype, _VP, _I32, _F64
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
            raise pdfium_error("Failed to get page bounding box.")
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


class PdfiumAnnots:
    """PDFium's functions on a page's annotations (:class:`~bastion.readers.pdf.annotations.
    Notes`), as plain prototypes holding the GIL."""

    def __init__(self) -> None:
        import pypdfium2.raw as raw

        plain, vp, i32 = _prototype, _VP, _I32
        self.count = plain(raw.FPDFPage_GetAnnotCount, i32, vp, hold_gil=True)
        self.get = plain(raw.FPDFPage_GetAnnot, vp, vp, i32, hold_gil=True)
        self.subtype = plain(raw.FPDFAnnot_GetSubtype, i32, vp, hold_gil=True)
        self.value = plain(raw.FPDFAnnot_GetStringValue, ctypes.c_ulong, vp, ctypes.c_char_p,
                           vp, ctypes.c_ulong, hold_gil=True)
        self.close = plain(raw.FPDFPage_CloseAnnot, None, vp, hold_gil=True)


class PdfiumBookmarks:
    """PDFium's functions on the outline's bookmarks and their destinations
    (:class:`~bastion.readers.pdf.outline.PdfiumOutline`), as plain prototypes holding the
    GIL."""

    def __init__(self) -> None:
        import pypdfium2.raw as raw

        plain, vp, i32 = _prototype, _VP, _I32
        self.first_child = plain(raw.FPDFBookmark_GetFirstChild, vp, vp, vp, hold_gil=True)
        self.next_sibling = plain(raw.FPDFBookmark_GetNextSibling, vp, vp, vp, hold_gil=True)
        self.title = plain(raw.FPDFBookmark_GetTitle, ctypes.c_ulong, vp, vp, ctypes.c_ulong,
                           hold_gil=True)
        self.dest = plain(raw.FPDFBookmark_GetDest, vp, vp, vp, hold_gil=True)
        self.action = plain(raw.FPDFBookmark_GetAction, vp, vp, hold_gil=True)
        self.action_type = plain(raw.FPDFAction_GetType, ctypes.c_ulong, vp, hold_gil=True)
        self.action_dest = plain(raw.FPDFAction_GetDest, vp, vp, vp, hold_gil=True)
        self.dest_page = plain(raw.FPDFDest_GetDestPageIndex, i32, vp, vp, hold_gil=True)
        self.ACTION_GOTO = raw.PDFACTION_GOTO


def pdfium_error(message: str) -> Exception:
    """pypdfium2's error, as its helpers raise it (a failed page's error names it)."""
    import pypdfium2 as pdfium

    return pdfium.PdfiumError(message)


@functools.cache
def pdfium_api() -> Pdfium:
    """PDFium's bound functions of the text pass: built on first use, once per process."""
    return Pdfium()


@functools.cache
def pdfium_annots() -> PdfiumAnnots:
    """PDFium's bound annotation functions: built on first use, once per process."""
    return PdfiumAnnots()


@functools.cache
def pdfium_bookmarks() -> PdfiumBookmarks:
    """PDFium's bound bookmark functions: built on first use, once per process."""
    return PdfiumBookmarks()


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


class Gaps:
    """The word breaks PDFium's text misses, from each glyph's loose box (its advance)."""

    def __init__(self, api: Pdfium) -> None:
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


class Angles:
    """The reading order of rotated text, from PDFium's per-character angle and origin."""

    def __init__(self, api: Pdfium) -> None:
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
        if len(text) != self._count(handle):
            return None
        return "\n".join(line for line in _reading_order(self._lines(handle, text)) if line)

    def _lines(self, handle: int, text: str) -> list[list[Any]]:
        """The page's lines in each character's own frame, in PDFium's order: ``[step,
        across, along, size, chars]`` — a line ends where the baseline moves across the text
        direction or the text runs back."""
        x, y = ctypes.c_double(), ctypes.c_double()
        px, py = ctypes.addressof(x), ctypes.addressof(y)
        box = (ctypes.c_float * 4)()  # left, top, right, bottom
        pbox = ctypes.addressof(box)
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
        return lines


def _reading_order(lines: list[list[Any]]) -> list[str]:
    """The lines' texts as they read: each run of lines at one angle in turn, an upright
    run as it stands, a rotated one top to bottom, then along the line (pieces of one line
    joined)."""
    out: list[str] = []
    k = 0
    while k < len(lines):
        j = k
        while j < len(lines) and lines[j][0] == lines[k][0]:
            j += 1
        run = lines[k:j]
        if run[0][0] == 0:
            out += ["".join(l[4]).strip() for l in run]
        else:
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
    return out
