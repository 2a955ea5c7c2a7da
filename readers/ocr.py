"""Images: text by OCR with ``tesseract``, and the OCR helper the PDF reader uses for scans.

An image is checked with Pillow first (header only): it must be a known format and hold no
more than ``Image.MAX_IMAGE_PIXELS`` pixels, so a decompression bomb never reaches tesseract.
PNG, JPEG, TIFF and BMP go to tesseract as they are; GIF, WebP and anything else Pillow opens
are converted to PNG first (their first frame), because leptonica builds may lack those codecs.
Without tesseract the result is ``unsupported``.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

from .base import Context, Document, Reader, ReadResult, TextSink
from .errors import CorruptDocument, ReaderError, ToolFailed, Unsupported

NEEDS_TESSERACT = "needs tesseract on this machine"
NO_TEXT = "no text recognised in the image"

# Formats tesseract (leptonica) reads directly, with the suffix their file gets.
_DIRECT = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif", "BMP": ".bmp"}


def ocr_image_file(path: Path, ctx: Context) -> str:
    """The text tesseract (English) reads in the image file ``path``.

    Raises Unsupported without tesseract and ToolFailed (first stderr line) when it fails.
    """
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(NEEDS_TESSERACT)
    result = ctx.run_tool([tesseract, str(path), "stdout", "-l", "eng"])
    if result.returncode != 0:
        lines = [l.strip() for l in result.stderr.decode("utf-8", "replace").splitlines()]
        first = next((l for l in lines if l), f"exit {result.returncode}")
        raise ToolFailed(f"tesseract: {first[:300]}")
    return result.stdout.decode("utf-8", "replace")


def _prepare(doc: Document, ctx: Context) -> Path:
    """The image as a file in the scratch dir, in a format tesseract reads.

    ``Image.open`` reads the header only and checks the pixel count there: past
    ``MAX_IMAGE_PIXELS`` Pillow warns (made an error here), past twice that it raises.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(doc.data)) as im:
                suffix = _DIRECT.get(im.format or "")
                if suffix:
                    path = ctx.tmpdir / f"image{suffix}"
                    path.write_bytes(doc.data)
                else:
                    path = ctx.tmpdir / "image.png"
                    im.convert("RGBA" if "A" in im.getbands() else "RGB").save(path, "PNG")
                return path
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ReaderError(
            f"image too large to OCR (over {Image.MAX_IMAGE_PIXELS} pixels)") from None
    except UnidentifiedImageError:
        raise CorruptDocument("unreadable image: not an image format Pillow knows") from None
    except (OSError, ValueError, SyntaxError) as e:
        raise CorruptDocument(f"unreadable image: {e}") from None


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    if "tesseract" not in ctx.tools:
        raise Unsupported(NEEDS_TESSERACT)
    path = _prepare(doc, ctx)
    try:
        text = ocr_image_file(path, ctx)
    finally:
        path.unlink(missing_ok=True)
    lines = [line.rstrip() for line in text.replace("\f", "\n").split("\n")]
    text = "\n".join(lines).strip("\n")
    meta = {} if text.strip() else {"empty_reason": NO_TEXT}
    sink.write(text + "\n" if text.strip() else "")
    return ReadResult(extractor="tesseract", meta=meta)


READER = Reader(
    name="ocr",
    version=1,
    mimes=("image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"),
    extensions=(".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
    tools=("tesseract",),
    uses_tool_deadline=True,
    read=read,
)
