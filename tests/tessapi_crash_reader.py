"""A reader that crashes inside libtesseract in its worker (tests/test_tessapi.py).

``application/x-tess-crash``: the document is an image; the reader OCRs it with the worker's
warm engine (readers/ocr/engine.py, the real library), then hands the library an image pointer
that points nowhere, so the crash happens in tesseract's own code, in the worker process.
"""

from __future__ import annotations

from bastion.readers.ocr import reader as ocr, engine as tessapi
from bastion.readers.base import Context, Document, Reader, ReadResult, TextSink

MIME = "application/x-tess-crash"


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    got = ocr.ocr_image(doc.data, ctx)  # loads the warm engine in this worker
    engine = tessapi.engine(ocr.tesseract_version(ctx))
    assert engine is not None, "no warm engine in the worker"
    sink.write(got.text)
    engine._libs.tess.TessBaseAPISetImage2(engine._api, 16)  # a Pix* that is not one
    engine._libs.tess.TessBaseAPIRecognize(engine._api, None)
    return ReadResult(extractor="tess-crash")


READER = Reader(name="tess-crash", version=1, mimes=(MIME,), extensions=(".tesscrash",),
                tools=("tesseract",), read=read)
