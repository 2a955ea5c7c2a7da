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
runs, one process per image, as before.  ``tools_used`` and ``details["ocr"]["engine"]`` say
``tesseract`` for both.  The orientation of a scanned PDF page (:func:`detect_rotation`) is
asked of a second warm engine holding the ``osd`` model, the ``--psm 0`` command's call.  In a
worker, an image read already in the run is not read again (readers/ocr/memo.py: same bytes,
same answer).

Resolution: an image of more than ``MAX_OCR_PIXELS`` (an A4 page at 300 dpi), or one that says
it is over 300 dpi, is scaled down (Pillow, area average) to an effective 300 dpi before OCR,
when that shrinks a side to ``MIN_GAIN`` or less: a 600-dpi page OCRs in 1/1.6 of the time
with 99.3 % of its words (bench/ocr.py), while a page 15 % too large would gain nothing
(recognition scales every text line to a fixed height anyway).  ``details["ocr"]["scaled"]``
records the size OCRed.  An image whose pixels are all nearly the same (a blank page, a flat
colour: the gray range of its pixels under ``BLANK_RANGE``) is not sent to OCR at all:
``details["ocr"]["skipped"]`` says so, and the record is ``empty`` as tesseract would leave it.

The language: each image (and each scanned PDF page) is read by the language pack(s) of its own
language and script, chosen per page among the installed packs, or the manifest's
``ocr_languages`` (:func:`read_page`, readers/ocr/choose.py, readers/ocr/packs.py); the packs
that read it, its script and the packs missing go into ``details["ocr"]`` and the record.

Tesseract writes its TSV (one row per word with its confidence); the text is rebuilt from the
rows — words joined by a space, lines by a line feed, paragraphs and blocks by a blank line —
and the mean word confidence comes with it (:class:`OcrText`).
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import choose as chooser, memo as ocrmemo, engine as tessapi, packs as ocrpacks
from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CorruptDocument, ReaderError, ToolFailed, Unsupported, missing_tool

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
    sure_words: int = 0  # words of SURE_LETTERS letters or more read at SURE_CONF or more


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


SURE_CONF = 90.0
SURE_LETTERS = 5


def _sure(word: str, conf: float) -> bool:
    return conf >= SURE_CONF and sum(c.isalpha() for c in word) >= SURE_LETTERS


def parse_tsv(tsv: str) -> OcrText:
    """Tesseract's TSV (``level page block par line word left top width height conf text``)
    to the text, the mean confidence of its words and how many long words it read surely
    (:attr:`OcrText.sure_words`)."""
    lines: list[tuple[tuple[str, str], list[str]]] = []  # ((block, par), words) per line
    key: tuple[str, ...] | None = None
    confs: list[float] = []
    sure = 0
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
            sure += _sure(word, conf)
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
    return OcrText("\n".join(out), mean, sum(len(w) for _, w in lines), sure)


def ocr_image(
    image: Path | bytes, ctx: Context, dpi: int | None = None, timeout: float | None = None,
    language: str = LANGUAGE,
) -> OcrText:
    """What tesseract reads in ``image`` with the pack(s) ``language`` (``eng``, ``deu+eng``):
    a file, or the bytes of an image (PNG, PNM, …).  ``dpi``: the image's resolution, when
    known; ``timeout``: less than the document's deadline.  The warm engine reads it when it
    can, else the command (the image
    bytes on its stdin, or the file).  An image this worker has read already (the context's
    ``ocr_memo``, readers/ocr/memo.py) is not read again.

    Raises Unsupported without tesseract and ToolFailed (first stderr line) when it fails.
    """
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(missing_tool(NEEDS_TESSERACT, ctx.limits))
    engine = warm_engine(ctx, language)
    memo, key, got = _recall(ctx, f"text:{language}", engine is not None, image, dpi)
    if got is not ocrmemo.MISSING:
        return got
    if engine is not None:
        got = _ocr_warm(engine, image, ctx, dpi, timeout)
    else:
        got = _ocr_command(tesseract, image, ctx, dpi, timeout, language)
    if key is not None and memo is not None:
        memo.put(key, got, len(got.text))
    return got


def warm_engine(ctx: Context, language: str = LANGUAGE) -> tessapi.Engine | None:
    """This worker's warm engine for ``language`` when it can read for the ``tesseract``
    command."""
    if not USE_LIBRARY:
        return None
    return tessapi.engine(tesseract_version(ctx), language, tessdata(ctx))


def tessdata(ctx: Context) -> str | None:
    """The data directory the tool set found (readers/runtime/toolset.py); None: the
    library's own (a context without the tool set)."""
    return ctx.tools.get(ocrpacks.TESSDATA)


def installed_packs(ctx: Context) -> dict[str, str | None]:
    """The language packs in the data directory, by name -> identity (sha256)."""
    return {name: ocrpacks.identity(path)
            for name, path in ocrpacks.listed(tessdata(ctx)).items()}


def _used(ctx: Context) -> None:
    ctx.tools_used.add("tesseract")


def _recall(ctx: Context, call: str, warm: bool, image: Path | bytes,
            dpi: int | None) -> tuple[ocrmemo.OcrMemo | None, tuple | None, Any]:
    """The context's memo, the key of this call in it — everything tesseract's answer
    depends on (the call, the path that answers, the command and its version, the dpi, the
    image's bytes) — and the answer it holds (tesseract then counted as used), else
    :data:`ocrmemo.MISSING`; ``(None, None, MISSING)`` without a memo."""
    memo = ctx.ocr_memo
    if memo is None:
        return None, None, ocrmemo.MISSING
    data = image if isinstance(image, bytes) else image.read_bytes()
    key = (call, warm, ctx.tools.get("tesseract"), tesseract_version(ctx), tessdata(ctx), dpi,
           ocrmemo.digest(data))
    got = memo.get(key)
    if got is not ocrmemo.MISSING:
        _used(ctx)
    return memo, key, got


def _data_args(ctx: Context) -> list[str]:
    where = tessdata(ctx)
    return ["--tessdata-dir", where] if where else []


def _ocr_command(tesseract: str, image: Path | bytes, ctx: Context, dpi: int | None,
                 timeout: float | None, language: str = LANGUAGE) -> OcrText:
    """:func:`ocr_image` by the ``tesseract`` command, one process for the image."""
    source = "stdin" if isinstance(image, bytes) else str(image)
    argv = [tesseract, source, "stdout", *_data_args(ctx), "-l", language]
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
    left = ctx.time_left()
    limit = left if timeout is None else min(timeout, left)
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
    stand upright (:func:`detect_osd`); None when tesseract finds none."""
    return detect_osd(image, ctx, dpi, timeout).rotation


def detect_osd(
    image: bytes, ctx: Context, dpi: int | None = None, timeout: float | None = None,
) -> tessapi.Osd:
    """Tesseract's orientation and script detection (``--psm 0``, the ``osd`` model) on the
    image (bytes on tesseract's stdin): the degrees clockwise that make it upright and its
    script, None when it finds none.  In a worker the warm engine's ``osd`` model answers
    (readers/ocr/engine.py, the same library call the command makes), else the command runs.
    Raises ToolFailed when tesseract cannot run."""
    tesseract = ctx.tools.get("tesseract")
    if tesseract is None:
        raise Unsupported(missing_tool(NEEDS_TESSERACT, ctx.limits))
    engine = (tessapi.engine(tesseract_version(ctx), tessapi.OSD, tessdata(ctx))
              if USE_LIBRARY else None)
    memo, key, got = _recall(ctx, "osd", engine is not None, image, dpi)
    if got is not ocrmemo.MISSING:
        return got
    got = _osd(tesseract, engine, image, ctx, dpi, timeout)
    if key is not None and memo is not None and engine is not None:  # the command's failures
        memo.put(key, got)  # may be passing ones
    return got


_NO_OSD = tessapi.Osd(None, None, 0.0)


def _osd(tesseract: str, engine: tessapi.Engine | None, image: bytes, ctx: Context,
         dpi: int | None, timeout: float | None) -> tessapi.Osd:
    """:func:`detect_osd` by the warm ``osd`` model (the command's answer without its start
    and model load, ≈ 0.1 s of CPU), else by the command."""
    if engine is not None:
        _used(ctx)
        try:
            return engine.osd(image, dpi=dpi)
        except tessapi.EngineError:
            return _NO_OSD
    argv = [tesseract, "stdin", "stdout", *_data_args(ctx), "--psm", "0"]
    if dpi:
        argv += ["--dpi", str(dpi)]
    result = ctx.run_tool(argv, input=image, scratch=False, timeout=timeout,
                          max_output=64 * 1024)
    if result.returncode != 0:  # too few characters, no osd model, …
        return _NO_OSD
    found: dict[str, str] = {}
    for line in result.stdout.decode("utf-8", "replace").splitlines():
        name, _, value = line.partition(":")
        found[name.strip()] = value.strip()
    rotate = found.get("Rotate", "")
    try:
        conf = round(float(found.get("Script confidence", "0")), 2)
    except ValueError:
        conf = 0.0
    return tessapi.Osd(int(rotate) % 360 if rotate.isdigit() else None,
                       found.get("Script") or None, conf)


def read_page(
    image: bytes | Path, ctx: Context, dpi: int | None = None, timeout: float | None = None,
) -> chooser.PageChoice:
    """The image read in its language (readers/ocr/choose.py): by the packs the manifest's
    ``ocr_languages`` names, or chosen among the installed ones (``auto``).  A context
    without the tool set's data directory reads English, as before.  Raises as
    :func:`ocr_image`."""
    def recognise(language: str) -> OcrText:
        left = _left(ctx, timeout)
        return ocr_image(image, ctx, dpi=dpi, language=language,
                         timeout=None if left is None else max(0.1, left))

    if tessdata(ctx) is None:
        got = recognise(LANGUAGE)
        return chooser.PageChoice(got, (LANGUAGE,), None, None, (), ocrpacks.Condition(), 1)

    def detect() -> tessapi.Osd:
        data = image if isinstance(image, bytes) else image.read_bytes()
        left = _left(ctx, timeout)
        return detect_osd(data, ctx, dpi, None if left is None else max(0.1, left))

    languages = tuple(ctx.limits.ocr_languages)
    try:
        return chooser.choose(recognise, detect, installed_packs(ctx), languages)
    except LookupError:
        raise ToolFailed(f"tesseract: no language pack in {tessdata(ctx)}") from None


def _left(ctx: Context, timeout: float | None) -> float | None:
    """What is left of ``timeout`` and of the document's deadline (None: no limit)."""
    left = ctx.time_left()
    return left if timeout is None else min(timeout, left)


def provenance(choice: chooser.PageChoice) -> dict[str, object]:
    """A page's OCR language provenance (its ``details["ocr"]`` or sidecar entry): the packs
    that read it, its script and language."""
    out: dict[str, object] = {"languages": list(choice.packs)}
    if choice.script:
        out["script"] = choice.script
    if choice.language:
        out["language"] = choice.language
    if choice.missing:
        out["missing"] = list(choice.missing)
    return out


def document_meta(choices: list[chooser.PageChoice],
                  kept: list[chooser.PageChoice] | None = None) -> ReadResult:
    """What a document's pages' choices put in its record: the packs used by the readings
    ``kept`` (default: all) in ``ocr_languages``, the packs missing (``ocr_missing``) and the
    condition on the packs that keys it (``ocr_packs``)."""
    used = sorted({p for c in (choices if kept is None else kept) for p in c.packs})
    missing = sorted({p for c in choices for p in c.missing})
    cond: dict[str, str | None] = {}
    for c in choices:
        cond.update(c.condition.items)
    return ReadResult("", ocr_languages=tuple(used), ocr_missing=tuple(missing),
                      ocr_packs=dict(sorted(cond.items())) if cond else None)


def ocr_image_file(path: Path, ctx: Context) -> str:
    """The text tesseract reads in the image file ``path``, in its language (see
    :func:`read_page`)."""
    return read_page(path, ctx).reading.text


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
        raise Unsupported(missing_tool(NEEDS_TESSERACT, ctx.limits))
    prepared = _prepare(doc, ctx)
    info: dict[str, object] = {"engine": "tesseract", "version": tesseract_version(ctx)}
    if prepared.image is None:
        info["skipped"] = prepared.skipped
        sink.write("")
        return ReadResult("tesseract", empty_reason=NO_TEXT, details={"ocr": info})
    path = None
    if prepared.suffix and warm_engine(ctx) is None:  # the command reads it from a file
        path = ctx.tmpdir / f"image{prepared.suffix}"
        path.write_bytes(prepared.image)
    try:
        choice = read_page(path or prepared.image, ctx, dpi=prepared.dpi)
    finally:
        if path is not None:
            path.unlink(missing_ok=True)
    got = choice.reading
    text = got.text.strip("\n")
    info["confidence"] = got.confidence
    info.update(provenance(choice))
    if prepared.scaled:
        info["scaled"] = list(prepared.scaled)
    sink.write(text + "\n" if text.strip() else "")
    return replace(document_meta([choice]), extractor="tesseract",
                   empty_reason=None if text.strip() else NO_TEXT, details={"ocr": info})


READER = Reader(
    name="ocr",
    version=4,
    mimes=("image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"),
    extensions=(".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp"),
    tools=("tesseract", ocrpacks.TESSDATA),
    uses_tool_deadline=True,
    settings=("ocr_languages",),
    libraries=("pillow",),
    read=read,
)
