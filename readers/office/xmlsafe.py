"""The safety layer of the office readers: capped zip members, a refusing XML parser.

* :func:`open_zip` and :func:`member_chunks` read one zip member as 64 KiB chunks, counting the
  *decompressed* bytes while reading (the header's sizes are never trusted) against
  ``Limits.max_member_bytes`` and, through :class:`Budget`, the document's running total
  against ``Limits.max_xml_bytes``.  Reaching either raises :class:`CapReached`, so the text
  read so far is kept; every zip failure becomes :class:`CorruptDocument`.
* :func:`parse_xml` streams those chunks through ``xml.parsers.expat`` with namespace
  processing (tags arrive as ``"uri localname"``).  It refuses any DTD or entity declaration
  (no billion laughs, no external entities) and any encoding other than UTF-8 or UTF-16.

The line builder the readers drive with paragraph, row and cell events is
:mod:`bastion.readers.office.flow`'s.
"""

from __future__ import annotations

import io
import lzma
import re
import struct
import zipfile
import zlib
from typing import Callable, Iterable, Iterator
from xml.parsers import expat

from ..base import Limits
from ..errors import CapReached, CorruptDocument, EncryptedDocument

CHUNK = 64 * 1024


StartFn = Callable[[str, dict[str, str]], None]
EndFn = Callable[[str], None]
TextFn = Callable[[str], None]

# What zipfile and its decompressors raise on damaged or hostile archives.
_ZIP_ERRORS = (
    zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
    NotImplementedError, RuntimeError, zlib.error, lzma.LZMAError, struct.error,
)

_XML_DECL = re.compile(rb"""^\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_ALLOWED_ENCODINGS = frozenset({"utf-8", "utf8", "utf-16", "utf16", "utf-16le", "utf-16be"})


class Budget:
    """One document's decompression budgets: per member, and the running XML total."""

    __slots__ = ("max_member", "max_xml", "xml_used")

    def __init__(self, limits: Limits) -> None:
        self.max_member = limits.max_member_bytes
        self.max_xml = limits.max_xml_bytes
        self.xml_used = 0

    def charge(self, n: int, name: str) -> None:
        self.xml_used += n
        if self.xml_used > self.max_xml:
            raise CapReached("max_xml_bytes", f"over {self.max_xml} bytes of XML at {name}")


def open_zip(data: bytes) -> zipfile.ZipFile:
    """The zip archive in ``data``; CorruptDocument when it is not one."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except _ZIP_ERRORS as e:
        raise CorruptDocument(f"not a valid zip archive: {e}") from None


def member_chunks(zf: zipfile.ZipFile, name: str, budget: Budget) -> Iterator[bytes]:
    """Decompressed chunks of one member, capped by size as they are read."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise CorruptDocument(f"missing part {name}") from None
    if info.flag_bits & 0x1:
        raise EncryptedDocument(f"zip member {name} is encrypted")
    total = 0
    try:
        with zf.open(info) as f:
            while chunk := f.read(CHUNK):
                total += len(chunk)
                if total > budget.max_member:
                    raise CapReached(
                        "max_member_bytes", f"{name} over {budget.max_member} bytes decompressed"
                    )
                budget.charge(len(chunk), name)
                yield chunk
    except _ZIP_ERRORS as e:
        raise CorruptDocument(f"damaged zip member {name}: {e}") from None


def bytes_chunks(data: bytes, name: str, budget: Budget) -> Iterator[bytes]:
    """A whole-file XML document (ODF flat XML) as chunks, under the same caps as a member."""
    for off in range(0, len(data), CHUNK):
        chunk = data[off:off + CHUNK]
        if off + len(chunk) > budget.max_member:
            raise CapReached("max_member_bytes", f"{name} over {budget.max_member} bytes")
        budget.charge(len(chunk), name)
        yield chunk


def _refuse_dtd(*_args: object) -> None:
    raise CorruptDocument("XML with a DTD or entity declaration refused")


def _refuse_external(*_args: object) -> int:
    raise CorruptDocument("XML with an external entity refused")


def check_encoding(head: bytes, name: str) -> None:
    """Refuse XML that is neither UTF-8 nor UTF-16, judged by BOM and declaration."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") or head[:4] in (b"<\x00?\x00", b"\x00<\x00?"):
        if head[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
            raise CorruptDocument(f"{name}: XML encoding UTF-32 refused")
        return
    if head[:3] == b"\xef\xbb\xbf":
        head = head[3:]
    elif head[:1] == b"\x00" or head[:4] == b"\x4c\x6f\xa7\x94":  # UTF-32BE, EBCDIC
        raise CorruptDocument(f"{name}: XML neither UTF-8 nor UTF-16 refused")
    m = _XML_DECL.match(head[:1024])
    if m and m.group(1).decode("ascii").lower() not in _ALLOWED_ENCODINGS:
        enc = m.group(1).decode("ascii")
        raise CorruptDocument(f"{name}: XML encoding {enc} refused (only UTF-8 and UTF-16)")


def new_parser() -> expat.XMLParserType:
    """An expat parser with namespace processing (tags ``"uri localname"``), buffered text,
    and every DTD, entity declaration and external entity refused."""
    p = expat.ParserCreate(namespace_separator=" ")
    p.buffer_text = True
    p.buffer_size = CHUNK
    p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    p.StartDoctypeDeclHandler = _refuse_dtd
    p.EntityDeclHandler = _refuse_dtd
    p.UnparsedEntityDeclHandler = _refuse_dtd
    p.ExternalEntityRefHandler = _refuse_external
    return p


def feed(p: expat.XMLParserType, chunks: Iterable[bytes], name: str) -> None:
    """Stream ``chunks`` through a parser from :func:`new_parser`.

    Character data is buffered by expat, so a text handler sees whole text nodes (up to
    64 KiB).  Exceptions raised by a handler (``CapReached`` from the sink) stop the parse
    and propagate; malformed XML becomes :class:`CorruptDocument`.
    """
    first = True
    try:
        for chunk in chunks:
            if first:
                check_encoding(chunk, name)
                first = False
            p.Parse(chunk, False)
        p.Parse(b"", True)
    except expat.ExpatError as e:
        raise CorruptDocument(f"{name}: malformed XML ({expat.ErrorString(e.code)}, "
                              f"line {e.lineno})") from None


def parse_xml(
    chunks: Iterable[bytes], name: str, start: StartFn, end: EndFn | None = None,
    text: TextFn | None = None,
) -> None:
    """Stream ``chunks`` through a refusing parser calling the handlers (see :func:`feed`)."""
    p = new_parser()
    p.StartElementHandler = start
    if end is not None:
        p.EndElementHandler = end
    if text is not None:
        p.CharacterDataHandler = text
    feed(p, chunks, name)


def collect(chunks: Iterable[bytes], name: str, tags: frozenset[str]) -> list[tuple[str, dict]]:
    """The ``(tag, attrs)`` of every element named in ``tags``, in document order (small parts)."""
    found: list[tuple[str, dict]] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag in tags:
            found.append((tag, attrs))

    parse_xml(chunks, name, start)
    return found


def one_line(s: str) -> str:
    """``s`` with line breaks and tabs as spaces (for a name put on a heading line)."""
    if "\n" in s or "\r" in s or "\t" in s:
        s = s.replace("\r", " ").replace("\n", " ").replace("\t", " ")
    return s


# Format characters that change no word a reader sees: the soft hyphen (U+00AD, shown only at a
# line break), the zero-width space and word joiner (U+200B, U+2060: invisible break hints) and
# U+FEFF (a stray byte-order mark) are removed; the non-breaking hyphen (U+2011) becomes ``-``.
# Joiners (U+200C/U+200D) and direction marks carry meaning (shaping, bidi) and are kept.
FORMAT_CHARS = {0x00AD: None, 0x200B: None, 0x2060: None, 0xFEFF: None, 0x2011: "-"}
_FORMAT_RE = re.compile("[\u00ad\u200b\u2060\ufeff\u2011]")


def clean(s: str) -> str:
    """``s`` with the format characters of :data:`FORMAT_CHARS` removed or replaced."""
    if s.isascii() or not _FORMAT_RE.search(s):
        return s
    return s.translate(FORMAT_CHARS)


def to_int(value: str | None, default: int = 0) -> int:
    """An integer attribute, or ``default`` when absent or not a number."""
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        return default
