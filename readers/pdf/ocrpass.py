"""The OCR pass of a PDF: the pages that need it rendered (PDFium, or ``pdftoppm``), each read
in its own language (readers/ocr/), a page read poorly turned when it lies on its side, within
``ocr_max_pages`` and the deadline."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..base import Context
from ..errors import ToolFailed
from ..ocr.choose import PageChoice
from ..ocr.reader import detect_rotation, read_page
from .text import first_line

MAX_OCR_PIXELS = 40_000_000  # a page image is rendered at a lower dpi beyond this (40 MB gray)
OCR_RESERVE_S = 5.0  # of the deadline, kept for writing the text: OCR stops before it
LOW_CONFIDENCE = 60.0  # under this mean word confidence, a page's orientation is checked
_WHITE = bytes(range(248, 256))  # gray levels a blank page renders in


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
                why = "image over the output limit" if res.truncated else first_line(res.stderr)
                raise ToolFailed(f"pdftoppm: {why or 'no image'}")
            magic, size, _, pixels = res.stdout.split(b"\n", 3)  # P5, "w h", 255, pixels
            w, h = (int(v) for v in size.split())
        if not pixels.translate(None, _WHITE):
            return None
        return _PageImage(pixels, w, h, dpi)


@dataclass
class OcrPass:
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


def ocr_pass(data: bytes, candidates: list[int], kinds: list[str], ctx: Context) -> OcrPass:
    """Render each candidate page and OCR it, one page at a time, in page order: at most
    ``ocr_max_pages`` pages go to tesseract, and none once less than OCR_RESERVE_S of the
    document's deadline is left, so the text already read is still written."""
    out = OcrPass()
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
    (OCR_RESERVE_S, or a tenth of a short ``tool_deadline_s``)."""
    return ctx.time_left() - min(OCR_RESERVE_S, 0.1 * ctx.limits.tool_deadline_s)
