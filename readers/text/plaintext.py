"""The text reader: ``text/*``, JSON, YAML, TOML, XML, SQL, SVG, PEM and source code.

The encoding is :func:`bastion.readers.text.textcodec.choose`'s (BOM, NUL pattern, strict UTF-8, an XML
declaration's ``encoding`` for XML, the detector, windows-1252), recorded as
``text:<encoding>`` and the result's ``encoding_source``.  The bytes are decoded a chunk at a time.
NUL bytes are removed by the store's normalisation, so a few stray NULs or a NUL-padded log
are text; binary masquerading as text (control characters beyond 2 %, or NULs scattered
through it; :func:`bastion.readers.text.textcodec.binary_reason`) is ``unsupported``.
"""

from __future__ import annotations

from . import textcodec
from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, Unsupported


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    head = doc.data[: 1 << 16]
    if not textcodec.looks_like_text(head):  # before any detector runs on binary bytes
        reason = textcodec.binary_reason(head.decode("latin-1")) or "control characters"
        raise Unsupported(f"binary content, not text ({doc.mime}): {reason}")
    choice = textcodec.choose(doc.data, textcodec.xml_declared(doc.data))
    extractor = f"text:{choice.codec}"
    first = True
    try:
        for piece in textcodec.pieces(doc.data, choice):
            if first:
                why = textcodec.binary_reason(piece)
                if why is not None:
                    raise Unsupported(f"binary content, not text ({doc.mime}): {why}")
                first = False
            sink.write(piece)
    except CapReached as cap:
        cap.extractor = cap.extractor or extractor
        cap.keep(ReadResult(extractor, encoding_source=choice.source))
        raise
    return ReadResult(extractor, encoding_source=choice.source,
                      warnings=tuple(textcodec.warnings(choice)))


READER = Reader(
    name="text",
    version=2,
    mimes=(
        "text/plain", "text/markdown", "text/x-python", "text/x-c", "text/x-shellscript",
        "application/json", "application/yaml", "application/toml", "application/xml",
        "text/xml", "application/sql", "application/x-pem-file", "image/svg+xml",
        "application/javascript", "text/javascript", "text/css",
    ),
    extensions=(".txt", ".text", ".log", ".md", ".rst", ".json", ".yaml", ".yml", ".toml",
                ".xml", ".sql", ".svg", ".pem", ".py", ".c", ".h", ".js", ".css", ".sh"),
    read=read,
    libraries=("charset-normalizer",),
)
