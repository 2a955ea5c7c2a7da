"""Images: text by OCR with ``tesseract``, and the OCR helper the PDF reader uses for scans.

An image is checked with Pillow first (header only): it must be a known format and hold no
more than ``Image.MAX_IMAGE_PIXELS`` pixels, so a decompression bomb never reaches tesseract.
PNG, JPEG, TIFF and BMP go to tesseract as they are; GIF, WebP and anything else Pillow opens
are converted first (their first frame), because leptonica builds may lack those codecs: to
PPM (the pixels, nothing to encode or decode), or to PNG when they have transparency.  The
command gets a file in the scratch directory, or PNM bytes on its stdin; the warm engine the
bytes (no file is written).  Without tesseract the result is ``unsupported``.

The engine: the ``tesseract`` command keys the task (readers/runtime/toolset.py asks its version) and is
what the reader needs; inside a worker the recognition itself runs in a warm engine,
``libtesseract`` through its C API (readers/ocr/engine.py), loaded on the worker's first image and
used only when its version is the command's.  Both run the same library calls on the same
image, so the text is the same; without the library (or with another version) the command
runs, one process per image, as before.  ``tools_used`` and ``meta["ocr"]["engine"]`` say
``tesseract`` for both.  The orientation of a scanned PDF page (:func:`detect_rotation`) is
asked of a second warm engine holding the ``osd`` model, the ``--psm 0`` command's call.  In a
worker, an image read already in the run is not read again (readers/ocr/memo.py: same bytes,
same answer).

Resolution: an image of more than ``MAX_OCR_PIXELS`` (an A4 page at 300 dpi), or one that says
it is over 300 dpi, is scaled down (Pillow, area average) to an effective 300 dpi before OCR,
when that shrinks a side to ``MIN_GAIN`` or less: a 600-dpi page OCRs in 1/1.6 of the time
with 99.3 % of its words (bench/ocr.py), while a page 15 % too large would gain nothing
(recognition scales every text line to a fixed height anyway).  ``meta["ocr"]["scaled"]``
records the size OCRed.  An image whose pixels are all nearly the same (a blank page, a flat
colour: the gray range of its pixels under ``BLANK_RANGE``) is not sent to OCR at all:
``meta["ocr"]["skipped"]`` says so, and the record is ``empty`` as tesseract would leave it.

Tesseract writes its TSV (one row per word with its confidence); the text is rebuilt from the
rows — words joined by a space, lines by a line feed, paragraphs and blocks by a blank line —
and the mean word confidence comes with it (:class:`OcrText`).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import memo as ocrmemo, engine as tessapi
from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CorruptDocument, ReaderError, ToolFailed, Unsupported

NEEDS_TESSERACT = "needs tesseract on this machine"
NO_TEXT = "no text recognised in the image"
LANGUAGE = "eng"

# Formats tesseract (leptonica) reads directly, with the suffix their file gets.
_DIRECT = {"PNG": ".png", "JPEG": ".jpg", "TIFF": ".tif", "BMP": ".bmp"}

# An A4 page at 300 dpi: larger images are scaled down to it before OCR (see the docstring).
MAX_OCR_PIXELS = 2480 * 3508
OCR_DPI = 300
MIN_GAIN = 0.75  # scale only when a side shrinks to this or less
BLANK_RANGE = 12  # gray levels (0-255): a reduced copy spanning fewer than this is blank
SKIPPED_BLANK = "blank image: no text to recognise"
USE_LIBRARY = True  # False: always the tesseract command (bench/ocr.py measures both)

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
    (PNG, PNM, …).  ``dpi``: the image's resolution, when known; ``timeout``: less than the
    document's deadline.  The warm engine reads it when it can, else the command (the image
    bytes on its stdin, or the file).  An image this worker has read already (the context's
    ``ocr_memo``, readers/ocr/memo.py) is not read again.

    Raises Unsupported without tesseract and ToolFailed (first stderr line) when it fails.
    """
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(NEEDS_TESSERACT)
    engine = warm_engine(ctx)
    memo, key, got = _recall(ctx, "text", engine is not None, image, dpi)
    if got is not ocrmemo.MISSING:
        return got
    if engine is not None:
        got = _ocr_warm(engine, image, ctx, dpi, timeout)
    else:
        got = _ocr_command(tesseract, image, ctx, dpi, timeout)
    if key is not None:
        memo.put(key, got, len(got.text))
    return got


def warm_engine(ctx: Context) -> tessapi.Engine | None:
    """This worker's warm engine (English) when it can read for the ``tesseract`` command."""
    return tessapi.engine(tesseract_version(ctx)) if USE_LIBRARY else None


def _used(ctx: Context) -> None:
    used = getattr(ctx, "tools_used", None)
    if used is not None:
        used.add("tesseract")


def _recall(ctx: Context, call: str, warm: bool, image: Path | bytes,
            dpi: int | None) -> tuple[ocrmemo.OcrMemo | None, tuple | None, Any]:
    """The context's memo, the key of this call in it — everything tesseract's answer
    depends on (the call, the path that answers, the command and its version, the dpi, the
    image's bytes) — and the answer it holds (tesseract then counted as used), else
    :data:`ocrmemo.MISSING`; ``(None, None, MISSING)`` without a memo."""
    memo = getattr(ctx, "ocr_memo", None)
    if memo is None:
        return None, None, ocrmemo.MISSING
    data = image if isinstance(image, bytes) else image.read_bytes()
    key = (call, warm, ctx.tools.get("tesseract"), tesseract_version(ctx), dpi,
           ocrmemo.digest(data))
    got = memo.get(key)
    if got is not ocrmemo.MISSING:
        _used(ctx)
    return memo, key, got


def _ocr_command(tesseract: str, image: Path | bytes, ctx: Context, dpi: int | None,
                 timeout: float | None) -> OcrText:
    """:func:`ocr_image` by the ``tesseract`` command, one process for the image."""
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


def _ocr_warm(engine: tessapi.Engine, image: Path | bytes, ctx: Context, dpi: int | None,
              timeout: float | None) -> OcrText:
    """:func:`ocr_image` in this process's engine, under what is left of the deadline."""
    _used(ctx)
    left = ctx.time_left() if hasattr(ctx, "time_left") else None
    limit = left if timeout is None else (timeout if left is None else min(timeout, left))
    data = image if isinstance(image, bytes) else image.read_bytes()
    try:
        return parse_tsv(engine.tsv(data, dpi=dpi, timeout=limit))
    except tessapi.Timeout:
        raise ToolFailed(f"tesseract timed out after {limit:g} s", kind="timeout") from None
    except tessapi.EngineError as e:
        raise ToolFailed(f"tesseract: {e}") from None


def detect_rotation(
    image: bytes, ctx: Context, dpi: int | None = None, timeout: float | None = None,
) -> int | None:
    """How many degrees clockwise the image (bytes on tesseract's stdin) must be turned to
    stand upright, by tesseract's orientation and script detection (``--psm 0``, the ``osd``
    model); None when it finds none.  In a worker the warm engine's ``osd`` model answers
    (readers/ocr/engine.py, the same library call the command makes), else the command runs.
    Raises ToolFailed when tesseract cannot run."""
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(NEEDS_TESSERACT)
    engine = tessapi.engine(tesseract_version(ctx), tessapi.OSD) if USE_LIBRARY else None
    memo, key, got = _recall(ctx, "rotation", engine is not None, image, dpi)
    if got is not ocrmemo.MISSING:
        return got
    got = _rotation(tesseract, engine, image, ctx, dpi, timeout)
    if key is not None and engine is not None:  # the command's failures may be passing ones
        memo.put(key, got)
    return got


def _rotation(tesseract: str, engine: tessapi.Engine | None, image: bytes, ctx: Context,
              dpi: int | None, timeout: float | None) -> int | None:
    """:func:`detect_rotation` by the warm ``osd`` model (the command's answer without its
    start and model load, ≈ 0.1 s of CPU), else by the command."""
    if engine is not None:
        _used(ctx)
        try:
            return engine.rotation(image, dpi=dpi)
        except tessapi.EngineError:
            return None
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


@dataclass(frozen=True)
class _Prepared:
    image: bytes | None  # what to OCR, in a format tesseract reads; None: nothing
    suffix: str | None = None  # the command reads it from a file of this suffix; None: PNM
    dpi: int | None = None  # its resolution, when scaled from a known one
    skipped: str | None = None  # why nothing is OCRed
    scaled: tuple[int, int] | None = None  # the size OCRed, when scaled down


def _target_scale(im) -> float:
    """The factor that brings ``im`` to an effective OCR_DPI, or 1.0 when that would save
    little (less than MIN_GAIN a side): recognition works on text lines scaled to a fixed
    height, so a modest excess costs little, while a 600-dpi page takes 1.6× the time."""
    scale = 1.0
    dpi = im.info.get("dpi")
    try:
        declared = float(min(dpi)) if dpi else 0.0
    except (TypeError, ValueError):
        declared = 0.0
    if declared > OCR_DPI:
        scale = OCR_DPI / declared
    pixels = im.width * im.height
    if pixels * scale * scale > MAX_OCR_PIXELS:
        scale = (MAX_OCR_PIXELS / pixels) ** 0.5
    return scale if scale <= MIN_GAIN else 1.0


def _gray_palette(im) -> bool:
    palette = im.getpalette() or []
    return all(palette[i] == palette[i + 1] == palette[i + 2]
               for i in range(0, len(palette) - 2, 3))


def _is_blank(im) -> bool:
    """Every pixel within BLANK_RANGE levels in every colour band (a blank page, a flat
    colour; transparency aside): one speck of dust is enough to send the image to OCR."""
    if im.mode in ("L", "RGB", "RGBA", "LA", "CMYK"):
        bands = im.getextrema()
        if im.mode == "L":
            bands = (bands,)
        elif "A" in im.mode:
            bands = bands[:-1]
    else:
        bands = (im.convert("L").getextrema(),)
    return all(high - low < BLANK_RANGE for low, high in bands)


def _prepare(doc: Document, ctx: Context) -> _Prepared:
    """The image in a format tesseract reads (its own bytes, PPM or PNG when converted, PNM
    when scaled), at the resolution the text needs (see the module docstring); or why there is
    nothing to OCR.

    ``Image.open`` reads the header only and checks the pixel count there: past
    ``MAX_IMAGE_PIXELS`` Pillow warns (made an error here), past twice that it raises.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(doc.data)) as im:
                single = getattr(im, "n_frames", 1) == 1
                scale = _target_scale(im) if single else 1.0
                if single:
                    im.load()
                    if _is_blank(im):
                        return _Prepared(None, skipped=SKIPPED_BLANK)
                if scale != 1.0:
                    return _scaled(im, scale)
                suffix = _DIRECT.get(im.format or "")
                if suffix:
                    return _Prepared(doc.data, suffix=suffix)
                if "A" in im.getbands():  # PNG keeps the transparency
                    buf = io.BytesIO()
                    im.convert("RGBA").save(buf, "PNG")
                    return _Prepared(buf.getvalue(), suffix=".png")
                return _Prepared(_pnm(im.convert("RGB")))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise ReaderError(
            f"image too large to OCR (over {Image.MAX_IMAGE_PIXELS} pixels)") from None
    except UnidentifiedImageError:
        raise CorruptDocument("unreadable image: not an image format Pillow knows") from None
    except (OSError, ValueError, SyntaxError) as e:
        raise CorruptDocument(f"unreadable image: {e}") from None


def _scaled(im, scale: float) -> _Prepared:
    """``im`` scaled by ``scale`` (area average), gray when it is gray, as PNM bytes (no
    encoding: tesseract reads them as they are), with its dpi scaled alike."""
    from PIL import Image

    gray = im.mode in ("1", "L", "LA", "I", "I;16", "F") or (
        im.mode == "P" and _gray_palette(im))
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    small = im.convert("L" if gray else "RGB").resize(size, Image.Resampling.BOX)
    dpi = None
    try:
        if im.info.get("dpi"):
            dpi = round(float(min(im.info["dpi"])) * scale) or None
    except (TypeError, ValueError):
        pass
    return _Prepared(_pnm(small), dpi=dpi, scaled=size)


def _pnm(im) -> bytes:
    """An ``L`` or ``RGB`` image as binary PGM or PPM: no encoding to pay, the pixels as they
    are, which the warm engine hands to tesseract without parsing (readers/ocr/engine.py)."""
    head = b"P5" if im.mode == "L" else b"P6"
    return head + b"\n%d %d\n255\n" % im.size + im.tobytes()


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    if "tesseract" not in ctx.tools:
        raise Unsupported(NEEDS_TESSERACT)
    prepared = _prepare(doc, ctx)
    info: dict[str, object] = {"engine": "tesseract", "version": tesseract_version(ctx)}
    meta: dict[str, object] = {"ocr": info}
    if prepared.image is None:
        info["skipped"] = prepared.skipped
        meta["empty_reason"] = NO_TEXT
        sink.write("")
        return ReadResult(extractor="tesseract", meta=meta)
    path = None
    if prepared.suffix and warm_engine(ctx) is None:  # the command reads it from a file
        path = ctx.tmpdir / f"image{prepared.suffix}"
        path.write_bytes(prepared.image)
    try:
        got = ocr_image(path or prepared.image, ctx, dpi=prepared.dpi)
    finally:
        if path is not None:
            path.unlink(missing_ok=True)
    text = got.text.strip("\n")
    info["confidence"] = got.confidence
    if prepared.scaled:
        info["scaled"] = list(prepared.scaled)
    if not text.strip():
        meta["empty_reason"] = NO_TEXT
    sink.write(text + "\n" if text.strip() else "")
    return ReadResult(extractor="tesseract", meta=meta)


READER = Reader(
    name="ocr",
    version=3,
    mimes=("image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"),
    extensions=(".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
    tools=("tesseract",),
    uses_tool_deadline=True,
    libraries=("pillow",),
    read=read,
)
