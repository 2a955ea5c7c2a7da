"""A warm tesseract: the C API of ``libtesseract`` through ctypes, loaded once per worker.

The ``tesseract`` command loads its model (``eng.traineddata``) again for every image, about
0.15 s of CPU before any recognition.  A worker that OCRs keeps one engine instead: the library
is opened and the model loaded on the first image (:func:`engine`), and every later image of
that worker reuses it.  It runs inside the worker process, so the worker's caps hold for it:
its memory counts against the worker's ``RLIMIT_AS``, a hang is the pool's deadline and a crash
(an abort in the library) kills the worker, which the pool turns into the document's one
``crashed`` record.  Recognition also carries tesseract's own deadline (a monitor with
``TessMonitorSetDeadlineMSecs``), so a slow image normally ends as a ``ToolFailed`` timeout
before the pool has to kill anything.

The engine does what the ``tesseract IMAGE stdout -l eng [--dpi N] tsv`` command does, through
the same library calls: the image is decoded by leptonica (``pixReadMem``, what the command
uses for a file or stdin, every page of a multi-page TIFF), the page segmentation is automatic
(``PSM_AUTO``, the command's default), ``--dpi`` is ``user_defined_dpi``, and the TSV is
``TessBaseAPIGetTsvText`` per page, the text the command's TSV renderer writes.  The same image
and version therefore give the same text on both paths (tests/test_tessapi.py compares them on
real images and scanned pages).

:func:`engine` returns None when the library cannot be used: not installed (``LIBRARY`` and
``LEPTONICA`` name the shared objects; a test points them at a missing path), no model for
the language, or a version other than the ``tesseract`` command's, which keys the task (readers/runtime/toolset.py asks
the command); the caller then runs the command.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
from dataclasses import dataclass
from typing import Any

LIBRARY = "libtesseract.so.5"
LEPTONICA = "liblept.so.5"
LANGUAGE = "eng"
OSD = "osd"  # the orientation and script model (``--psm 0``)
PSM_OSD_ONLY = 0
PSM_AUTO = 3

_IFF_TIFF = (4, 5, 6, 7, 8, 9, 10, 17)  # leptonica's IFF_TIFF* input formats


class EngineError(Exception):
    """The library could not read an image or gave up (deadline, failed recognition)."""


class Timeout(EngineError):
    """Recognition passed its deadline."""


@dataclass(frozen=True)
class _Libs:
    tess: ctypes.CDLL
    lept: ctypes.CDLL
    libc: ctypes.CDLL


def _bind(path_tess: str, path_lept: str) -> _Libs:
    tess = ctypes.CDLL(path_tess)
    lept = ctypes.CDLL(path_lept)
    vp, cp, ci = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    sigs: dict[str, tuple[list[Any], Any]] = {
        "TessVersion": ([], cp),
        "TessBaseAPICreate": ([], vp),
        "TessBaseAPIDelete": ([vp], None),
        "TessBaseAPIInit3": ([vp, cp, cp], ci),
        "TessBaseAPISetVariable": ([vp, cp, cp], ci),
        "TessBaseAPISetPageSegMode": ([vp, ci], None),
        "TessBaseAPISetImage": ([vp, vp, ci, ci, ci, ci], None),
        "TessBaseAPISetImage2": ([vp, vp], None),
        "TessBaseAPISetSourceResolution": ([vp, ci], None),
        "TessBaseAPIRecognize": ([vp, vp], ci),
        "TessBaseAPIGetTsvText": ([vp, ci], vp),
        "TessBaseAPIDetectOrientationScript": ([vp, ctypes.POINTER(ci),
                                                ctypes.POINTER(ctypes.c_float),
                                                ctypes.POINTER(cp),
                                                ctypes.POINTER(ctypes.c_float)], ci),
        "TessBaseAPIClear": ([vp], None),
        "TessBaseAPIEnd": ([vp], None),
        "TessDeleteText": ([vp], None),
        "TessMonitorCreate": ([], vp),
        "TessMonitorDelete": ([vp], None),
        "TessMonitorSetDeadlineMSecs": ([vp, ci], None),
    }
    for name, (args, res) in sigs.items():
        fn = getattr(tess, name)
        fn.argtypes, fn.restype = args, res
    lsigs: dict[str, tuple[list[Any], Any]] = {
        "pixReadMem": ([cp, ctypes.c_size_t], vp),
        "pixReadMemTiff": ([cp, ctypes.c_size_t, ci], vp),
        "findFileFormatBuffer": ([cp, ctypes.POINTER(ci)], ci),
        "tiffGetCount": ([vp, ctypes.POINTER(ci)], ci),
        "fopenReadFromMemory": ([cp, ctypes.c_size_t], vp),
        "pixDestroy": ([ctypes.POINTER(vp)], None),
    }
    for name, (args, res) in lsigs.items():
        fn = getattr(lept, name)
        fn.argtypes, fn.restype = args, res
    libc = ctypes.CDLL(None)
    libc.fclose.argtypes, libc.fclose.restype = [vp], ci
    return _Libs(tess, lept, libc)


def _pnm(image: bytes) -> tuple[int, int, int, int] | None:
    """``(offset, width, height, channels)`` of the pixels of a binary PGM or PPM written the
    way bastion writes them (``P5``/``P6``, one line feed between fields, maxval 255, exactly
    the pixels after): such bytes are handed to tesseract as they are (``SetImage``), the
    pixels leptonica's PNM reader would produce, without its byte-by-byte parse (0.2 s for an
    A4 page in colour).  None for anything else, which leptonica reads."""
    if image[:3] not in (b"P5\n", b"P6\n"):
        return None
    end = image.find(b"\n255\n", 3, 64)
    size = image[3:end].split(b" ") if end > 0 else []
    if len(size) != 2 or not all(v.isdigit() for v in size):
        return None
    width, height = int(size[0]), int(size[1])
    channels = 1 if image[1:2] == b"5" else 3
    offset = end + 5
    if width <= 0 or height <= 0 or len(image) - offset != width * height * channels:
        return None
    return offset, width, height, channels


@dataclass(frozen=True)
class Osd:
    """What orientation and script detection found on a page."""

    rotation: int | None  # degrees clockwise that make it upright; None: no orientation
    script: str | None  # as tesseract names it: "Latin", "Cyrillic", "Han", …
    script_confidence: float


class Engine:
    """One loaded tesseract model (``eng``, ``deu+eng``, … or ``osd`` for the orientation and
    script), from the data directory ``datapath`` (None: the library's own), used for one
    image at a time."""

    def __init__(self, libs: _Libs, language: str = LANGUAGE, datapath: str | None = None) -> None:
        self._libs = libs
        self.language = language
        self.version: str = libs.tess.TessVersion().decode("ascii", "replace")
        self._api = libs.tess.TessBaseAPICreate()
        if not self._api:
            raise EngineError("TessBaseAPICreate failed")
        where = os.fsencode(datapath) if datapath else None
        if libs.tess.TessBaseAPIInit3(self._api, where, language.encode()) != 0:
            libs.tess.TessBaseAPIDelete(self._api)
            self._api = None
            raise EngineError(f"no {language} model for the tesseract library")
        # its notes ("Estimating resolution as …") would go to the worker's stderr
        libs.tess.TessBaseAPISetVariable(self._api, b"debug_file", os.devnull.encode())

    def _pages(self, image: bytes) -> list[int]:
        """The leptonica images of ``image`` (every page of a TIFF); raises EngineError."""
        lept = self._libs.lept
        fmt = ctypes.c_int(0)
        lept.findFileFormatBuffer(image, ctypes.byref(fmt))
        pixes: list[int] = []
        if fmt.value in _IFF_TIFF:
            stream = lept.fopenReadFromMemory(image, len(image))
            count = ctypes.c_int(0)
            if stream:
                lept.tiffGetCount(stream, ctypes.byref(count))
                self._libs.libc.fclose(stream)
            for n in range(max(1, count.value)):
                pix = lept.pixReadMemTiff(image, len(image), n)
                if not pix:
                    break
                pixes.append(pix)
        else:
            pix = lept.pixReadMem(image, len(image))
            if pix:
                pixes.append(pix)
        if not pixes:
            raise EngineError("leptonica cannot read the image")
        return pixes

    def _free(self, pixes: list[int]) -> None:
        for pix in pixes:
            ref = ctypes.c_void_p(pix)
            self._libs.lept.pixDestroy(ctypes.byref(ref))

    def _set_image(self, image: bytes, raw: tuple[int, int, int, int] | None,
                   pixes: list[int], page: int) -> None:
        """Page ``page`` of ``image`` as the engine's image: leptonica's (``pixes``), or the
        PNM's pixels as they are (``raw``, see :func:`_pnm`; tesseract copies them)."""
        if raw is None:
            self._libs.tess.TessBaseAPISetImage2(self._api, pixes[page])
            return
        offset, width, height, channels = raw
        base = ctypes.cast(ctypes.c_char_p(image), ctypes.c_void_p).value or 0
        self._libs.tess.TessBaseAPISetImage(self._api, base + offset, width, height, channels,
                                            width * channels)

    def _settings(self, dpi: int | None, psm: int = PSM_AUTO) -> None:
        t = self._libs.tess
        t.TessBaseAPISetPageSegMode(self._api, psm)
        t.TessBaseAPISetVariable(self._api, b"user_defined_dpi", str(dpi or 0).encode())

    def tsv(self, image: bytes, dpi: int | None = None, timeout: float | None = None) -> str:
        """The TSV the ``tesseract IMAGE stdout tsv`` command writes for ``image`` (header
        line first, then the rows of every page).  Raises EngineError, Timeout."""
        t = self._libs.tess
        raw = _pnm(image)
        pixes = [] if raw else self._pages(image)
        rows = ["level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth"
                "\theight\tconf\ttext\n"]
        try:
            self._settings(dpi)
            for page in range(len(pixes) or 1):
                self._set_image(image, raw, pixes, page)
                monitor = t.TessMonitorCreate()
                try:
                    if timeout is not None:
                        t.TessMonitorSetDeadlineMSecs(monitor, max(1, int(timeout * 1000)))
                    if t.TessBaseAPIRecognize(self._api, monitor) != 0:
                        raise Timeout("timed out") if timeout is not None else EngineError(
                            "recognition failed")
                finally:
                    t.TessMonitorDelete(monitor)
                got = t.TessBaseAPIGetTsvText(self._api, page)
                if got:
                    try:
                        rows.append(ctypes.string_at(got).decode("utf-8", "replace"))
                    finally:
                        t.TessDeleteText(got)
        finally:
            t.TessBaseAPIClear(self._api)
            self._free(pixes)
        return "".join(rows)

    def rotation(self, image: bytes, dpi: int | None = None) -> int | None:
        """:meth:`osd`'s rotation."""
        return self.osd(image, dpi).rotation

    def osd(self, image: bytes, dpi: int | None = None) -> Osd:
        """What ``tesseract IMAGE stdout --psm 0 [--dpi N]`` prints as ``Rotate:`` for the
        first page of ``image``: the degrees clockwise that make it upright (0, 90, 180, 270),
        or None when tesseract finds no orientation (too few characters).  The command's
        ``GetOsdText`` is ``DetectOrientationScript`` formatted, and its ``Rotate`` is the
        detected orientation's complement (``OrientationIdToValue``); this engine must hold
        the ``osd`` model.  The script is the one the same call names (``Script:``), None
        with the orientation.  Raises EngineError when leptonica cannot read the image."""
        t = self._libs.tess
        raw = _pnm(image)
        pixes = [] if raw else self._pages(image)
        try:
            self._settings(dpi, PSM_OSD_ONLY)
            self._set_image(image, raw, pixes, 0)
            degrees, conf, script_conf = ctypes.c_int(0), ctypes.c_float(0), ctypes.c_float(0)
            script = ctypes.c_char_p()
            if not t.TessBaseAPIDetectOrientationScript(
                    self._api, ctypes.byref(degrees), ctypes.byref(conf), ctypes.byref(script),
                    ctypes.byref(script_conf)):
                return Osd(None, None, 0.0)
            name = script.value.decode("ascii", "replace") if script.value else None
            return Osd((360 - degrees.value) % 360, name, round(float(script_conf.value), 2))
        finally:
            t.TessBaseAPIClear(self._api)
            self._free(pixes)

    def close(self) -> None:
        if getattr(self, "_api", None):
            self._libs.tess.TessBaseAPIEnd(self._api)
            self._libs.tess.TessBaseAPIDelete(self._api)
            self._api = None

    def __del__(self) -> None:
        self.close()


def engine(version: str | None, language: str = LANGUAGE,
           datapath: str | None = None) -> Engine | None:
    """This process's engine for ``language`` (``eng``, ``deu+eng``, or ``osd`` for the
    orientation and script) from the data directory ``datapath``, loaded on first use, when
    the library's version is ``version`` (the ``tesseract`` command's, which keys the task);
    None when it cannot be used.  A worker keeps every model it loaded (a fast model is
    2-10 MB)."""
    if version is None:
        return None
    return _loaded(version, language, datapath)


@functools.cache
def _loaded(version: str, language: str, datapath: str | None) -> Engine | None:
    """:func:`engine`'s, once per process and arguments (None remembered too)."""
    # the worker's environment has it already (CHILD_ENV); libgomp reads it when loaded
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")
    try:
        libs = _bind(LIBRARY, LEPTONICA)
        if libs.tess.TessVersion().decode("ascii", "replace") == version:
            return Engine(libs, language, datapath)
    except (OSError, AttributeError, EngineError):
        pass
    return None


def reset() -> None:
    """Forget the loaded engines (tests that change ``LIBRARY``): each is closed as it goes
    (:meth:`Engine.__del__`)."""
    _loaded.cache_clear()


atexit.register(reset)  # the engines are ended before the interpreter goes
