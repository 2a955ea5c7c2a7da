"""The text reader: ``text/*``, JSON, YAML, TOML, XML, SQL, SVG, PEM and source code.

Decoding order, the first that applies wins and is recorded as ``text:<encoding>``:
a byte-order mark (UTF-8, UTF-16 LE/BE); BOM-less UTF-16 told by the share of NUL bytes in
alternate positions; strict UTF-8; cp1252; Latin-1 for the five bytes cp1252 leaves undefined.
Binary masquerading as text (control bytes beyond 2 % once decoded) is ``unsupported``.
"""

from __future__ import annotations

import codecs

from .base import Context, Document, Reader, ReadResult, TextSink
from .detect import utf16_guess
from .errors import Unsupported

CHUNK = 1 << 20  # bytes decoded at a time for large files

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)

# Control characters that plain text carries; anything else below U+0020 counts as binary.
_TEXT_CONTROLS = frozenset("\t\n\r\f\b\x1b")
_CONTROL_TABLE = {c: None for c in range(32) if chr(c) not in _TEXT_CONTROLS}


def choose_encoding(data: bytes) -> tuple[str, int]:
    """The encoding to decode ``data`` with, and how many BOM bytes to skip."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return name, len(bom)
    guess = utf16_guess(data)
    if guess:
        return guess, 0
    if _is_utf8(data):
        return "utf-8", 0
    try:
        data.decode("cp1252")
        return "cp1252", 0
    except UnicodeDecodeError:
        return "latin-1", 0


def _is_utf8(data: bytes) -> bool:
    if len(data) <= 8 * CHUNK:
        try:
            data.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    view = memoryview(data)
    try:
        for at in range(0, len(data), CHUNK):
            dec.decode(view[at : at + CHUNK], final=at + CHUNK >= len(data))
    except UnicodeDecodeError:
        return False
    return True


def decode_into(data: bytes, sink: TextSink) -> str:
    """Decode ``data`` into ``sink`` chunk by chunk; returns the encoding used."""
    encoding, skip = choose_encoding(data)
    # a BOM is trusted but not checked: bytes it does not cover decode as U+FFFD
    errors = "replace" if skip or encoding.startswith("utf-16") else "strict"
    if len(data) <= 8 * CHUNK:
        sink.write(data[skip:].decode(encoding, errors))
        return encoding
    dec = codecs.getincrementaldecoder(encoding)(errors)
    view = memoryview(data)
    for at in range(skip, len(data), CHUNK):
        sink.write(dec.decode(view[at : at + CHUNK], final=at + CHUNK >= len(data)))
    return encoding


def binary_share(text: str) -> float:
    """Share of characters that plain text would not hold (C0 controls other than the usual)."""
    if not text:
        return 0.0
    sample = text[:1 << 16]
    stripped = sample.translate(_CONTROL_TABLE)
    return (len(sample) - len(stripped)) / len(sample)


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    encoding = decode_into(doc.data, sink)
    if binary_share(sink.getvalue()) > 0.02:
        raise Unsupported(f"binary content, not text ({doc.mime})")
    return ReadResult(extractor=f"text:{encoding}")


READER = Reader(
    name="text",
    version=1,
    mimes=(
        "text/plain", "text/markdown", "text/x-python", "text/x-c", "text/x-shellscript",
        "application/json", "application/yaml", "application/toml", "application/xml",
        "text/xml", "application/sql", "application/x-pem-file", "image/svg+xml",
        "application/javascript", "text/javascript", "text/css",
    ),
    extensions=(".txt", ".text", ".log", ".md", ".rst", ".json", ".yaml", ".yml", ".toml",
                ".xml", ".sql", ".svg", ".pem", ".py", ".c", ".h", ".js", ".css", ".sh"),
    read=read,
)
