"""Injected with ``WorkerPool(extra_readers=...)``: a worker without the language model's
mapped cache file (readers/text/langmodel.py), as for a user whose cache cannot be had, so that
its first text unpacks the model in memory.  The worker imports this module after it mapped
the file and before it loads the model; :data:`READER` reads nothing a test sends."""

from bastion.readers.base import Reader, ReadResult
from bastion.readers.text import langid

langid._mapped = lambda: None  # what _load asks


def read(doc, sink, ctx) -> ReadResult:  # pragma: no cover - no document has its type
    sink.write("")
    return ReadResult(extractor="unmapped")


READER = Reader(name="unmapped", version=1, mimes=("application/x-unmapped-langid",),
                extensions=(".unmapped-langid",), read=read)
