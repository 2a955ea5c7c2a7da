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
``LEPTONICA`` name the shared objects; a test points them at a missing path), no English model,
or a version other than the ``tesseract`` command's, which keys the task (readers/tools.py asks
the command); the caller then runs the command.
"""

from __future__ import annotations

import atexit
import ctypes
import os
from dataclasses import dataclass

LIBRARY = "libtesseract.so.5"
LEPTONICA = "liblept.so.5"
LANGUAGE = "eng"
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
    sigs = {
        "TessVersion": ([], cp),
        "TessBaseAPICreate": ([], vp),
        "TessBaseAPIDelete": ([vp], None),
        "TessBaseAPIInit3": ([vp, cp, cp], ci),
        "TessBaseAPISetVariable": ([vp, cp, cp], ci),
        "TessBaseAPISetPageSegMode": ([vp, ci], None),
        "TessBaseAPISetImage2": ([vp, vp], None),
        "TessBaseAPISetSourceResolution": ([vp, ci], None),
        "TessBaseAPIRecognize": ([vp, vp], ci),
        "TessBaseAPIGetTsvText": ([vp, ci], vp),
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
    lsigs = {
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


class Engine:
    """One loaded tesseract (English), used for one image at a time."""

    def __init__(self, libs: _Libs) -> None:
        self._libs = libs
        self.version: str = libs.tess.TessVersion().decode("ascii", "replace")
        self._api = libs.tess.TessBaseAPICreate()
        if not self._api:
            raise EngineError("TessBaseAPICreate failed")
        if libs.tess.TessBaseAPIInit3(self._api, None, LANGUAGE.encode()) != 0:
            libs.tess.TessBaseAPIDelete(self._api)
            self._api = None
            raise EngineError(f"no {LANGUAGE} model for the tesseract library")
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

    def _settings(self, dpi: int | None) -> None:
        t = self._libs.tess
        t.TessBaseAPISetPageSegMode(self._api, PSM_AUTO)
        t.TessBaseAPISetVariable(self._api, b"user_defined_dpi", str(dpi or 0).encode())

    def tsv(self, image: bytes, dpi: int | None = None, timeout: float | None = None) -> str:
        """The TSV the ``tesseract IMAGE stdout tsv`` command writes for ``image`` (header
        line first, then the rows of every page).  Raises EngineError, Timeout."""
        t = self._libs.tess
        pixes = self._pages(image)
        rows = ["level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth"
                "\theight\tconf\ttext\n"]
        try:
            self._settings(dpi)
            for page, pix in enumerate(pixes):
                t.TessBaseAPISetImage2(self._api, pix)
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

    def close(self) -> None:
        if self._api:
            self._libs.tess.TessBaseAPIEnd(self._api)
            self._libs.tess.TessBaseAPIDelete(self._api)
            self._api = None


_ENGINE: dict[str, Engine | None] = {}  # expected version -> the engine (None: unusable)


def engine(version: str | None) -> Engine | None:
    """This process's engine, loaded on first use, when the library's version is ``version``
    (the ``tesseract`` command's, which keys the task); None when it cannot be used."""
    if version is None:
        return None
    if version not in _ENGINE:
        got: Engine | None = None
        # the worker's environment has it already (CHILD_ENV); libgomp reads it when loaded
        os.environ.setdefault("OMP_THREAD_LIMIT", "1")
        try:
            libs = _bind(LIBRARY, LEPTONICA)
            if libs.tess.TessVersion().decode("ascii", "replace") == version:
                got = Engine(libs)
        except (OSError, AttributeError, EngineError):
            got = None
        _ENGINE[version] = got
        if got is not None and len(_ENGINE) == 1:
            atexit.register(reset)
    return _ENGINE[version]


def reset() -> None:
    """Forget the loaded engines (tests that change ``LIBRARY``)."""
    for e in _ENGINE.values():
        if e is not None:
            e.close()
    _ENGINE.clear()
