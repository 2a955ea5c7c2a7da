"""Images: text by OCR with ``tesseract``, and the OCR helper the PDF reader uses for scans.

An image is checked with Pillow first (header only): it must be a known format and hold no
more than ``Image.MAX_IMAGE_PIXELS`` pixels, so a decompression bomb never reaches tesseract.
PNG, JPEG, TIFF and BMP go to tesseract as they are; GIF, WebP and anything else Pillow opens
are converted to PNG first (their first frame), because leptonica builds may lack those codecs.
Without tesseract the result is ``unsupported``.

Tesseract writes its TSV (one row per word with its confidence); the text is rebuilt from the
rows — words joined by a space, lines by a line feed, paragraphs and blocks by a blank line —
and the mean word confidence comes with it (:class:`OcrText`).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

from .base import Context, Document, Reader, ReadResult, TextSink
from .errors import CorruptDocument, ReaderError, ToolFailed, Unsupported

NEEDS_TESSERACT = "needs tesseract on this machine"
NO_TEXT = "no text recognised in the image"
LANGUAGE = "eng"

# Formats tesseract (leptonica) reads directly, with the suffix their file gets.
_DIRECT = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif", "BMP": ".bmp"}

_VERSIONS: dict[str, str | None] = {}  # tesseract path -> its version, asked once per worker


@dataclass(frozen=True)
class OcrText:
    """What tesseract read in one image."""

    text: str  # lines without trailing spaces, no form feed
    confidence: float | None  # mean word confidence 0-100, one decimal; None without words
    words: int


def tesseract_version(ctx: Context) -> str | None:
    """``tesseract --version``'s number (``"5.3.0"``), asked once per tool path and process."""
    path = ctx.tools.get("tesseract")
    if path is None:
        return None
    if path not in _VERSIONS:
        version = None
        try:
            result = ctx.run_tool([path, "--version"], timeout=10, max_output=64 * 1024,
                                  scratch=False)
            for line in (result.stdout + b"\n" + result.stderr).decode(
                    "utf-8", "replace").splitlines():
                if line.lower().startswith("tesseract "):
                    version = line.split()[1].lstrip("v")
                    break
        except ToolFailed:
            pass
        _VERSIONS[path] = version
    return _VERSIONS[path]


def parse_tsv(tsv: str) -> OcrText:
    """Tesseract's TSV (``level page block par line word left top width height conf text``)
    to the text and the mean confidence of its words."""
    lines: list[tuple[tuple[str, str], list[str]]] = []  # ((block, par), words) per line
    key: tuple[str, ...] | None = None
    confs: list[float] = []
    for row in tsv.split("\n")[1:]:
        cols = row.split("\t")
        if len(cols) < 12 or cols[0] != "5":
            continue
        word = cols[11].strip()
        if not word:
            continue
        try:
            conf = float(cols[10])
        except ValueError:
            conf = -1.0
        if conf >= 0:
            confs.append(conf)
        line_key = (cols[1], cols[2], cols[3], cols[4])
        if line_key != key:
            key = line_key
            lines.append(((cols[2], cols[3]), []))
        lines[-1][1].append(word)
    out: list[str] = []
    previous: tuple[str, str] | None = None
    for par, words in lines:
        if previous is not None and par != previous:
            out.append("")
        out.append(" ".join(words))
        previous = par
    mean = round(sum(confs) / len(confs), 1) if confs else None
    return OcrText("\n".join(out), mean, sum(len(w) for _, w in lines))


def ocr_image(
    image: Path | bytes, ctx: Context, dpi: int | None = None, timeout: float | None = None,
) -> OcrText:
    """What tesseract (English) reads in ``image``: a file, or the bytes of an image
    (PNG, PNM, …) given on its stdin.  ``dpi``: the image's resolution, when known;
    ``timeout``: less than the document's deadline.

    Raises Unsupported without tesseract and ToolFailed (first stderr line) when it fails.
    """
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(NEEDS_TESSERACT)
    source = "stdin" if isinstance(image, bytes) else str(image)
    argv = [tesseract, source, "stdout", "-l", LANGUAGE]
    if dpi:
        argv += ["--dpi", str(dpi)]
    result = ctx.run_tool(argv + ["tsv"], input=image if isinstance(image, bytes) else None,
                          scratch=not isinstance(image, bytes), timeout=timeout)
    if result.returncode != 0:
        lines = [l.strip() for l in result.stderr.decode("utf-8", "replace").splitlines()]
        first = next((l for l in lines if l), f"exit {result.returncode}")
        raise ToolFailed(f"tesseract: {first[:300]}")
    return parse_tsv(result.stdout.decode("utf-8", "replace"))


def detect_rotation(
    image: bytes, ctx: Context, dpi: int | None = None, timeout: float | None = None,
) -> int | None:
    """How many degrees clockwise the image (bytes on tesseract's stdin) must be turned to
    stand upright, by tesseract's orientation and script detection (``--psm 0``, the ``osd``
    model); None when it finds none.  Raises ToolFailed when tesseract cannot run."""
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(NEEDS_TESSERACT)
    argv = [tesseract, "stdin", "stdout", "--psm", "0"]
    if dpi:
        argv += ["--dpi", str(dpi)]
    result = ctx.run_tool(argv, input=image, scratch=False, timeout=timeout,
                          max_output=64 * 1024)
    if result.returncode != 0:  # too few characters, no osd model, …
        return None
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "Rotate" and value.strip().isdigit():
            return int(value) % 360
    return None


def ocr_image_file(path: Path, ctx: Context) -> str:
    """The text tesseract (English) reads in the image file ``path`` (see :func:`ocr_image`)."""
    return ocr_image(path, ctx).text


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
        got = ocr_image(path, ctx)
    finally:
        path.unlink(missing_ok=True)
    text = got.text.strip("\n")
    meta: dict[str, object] = {"ocr": {"engine": "tesseract", "version": tesseract_version(ctx),
                                       "confidence": got.confidence}}
    if not text.strip():
        meta["empty_reason"] = NO_TEXT
    sink.write(text + "\n" if text.strip() else "")
    return ReadResult(extractor="tesseract", meta=meta)


READER = Reader(
    name="ocr",
    version=2,
    mimes=("image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"),
    extensions=(".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
    tools=("tesseract",),
    uses_tool_deadline=True,
    read=read,
)
