"""A PDF's own metadata: its Info dictionary and its XMP packet, as one DocMeta.

The engines hand over the Info dictionary as they read it (``meta["info"]``: PDFium's
``FPDF_GetMetaText`` values, pdfminer's decoded text strings).  The XMP packet is found in the
file's bytes: the document's packet is stored uncompressed (ISO 32000 recommends it, so that
tools which do not parse PDF can find it), and of the packets found the last one using the
``pdf:`` namespace is taken (an incremental update appends the newer one; an embedded image's
packet does not use that namespace).  A compressed document packet is not read.  XMP fills
what it declares (several ``dc:creator`` authors, a language); Info fills the rest, its
``Author`` split on ``;``.
"""

from __future__ import annotations

import re
from typing import Any

from ..metadata import DocMeta, split_keywords, split_people

MAX_PACKETS = 64  # XMP packets looked at in one file
MAX_PACKET_BYTES = 1 << 20
_PDF_NS = b"http://ns.adobe.com/pdf/1.3/"
_START = re.compile(rb"<x:xmpmeta\b|<x:xapmeta\b")
_END = re.compile(rb"</x:xmpmeta>|</x:xapmeta>")
INFO_KEYS = ("Title", "Author", "Subject", "Keywords", "Creator", "Producer", "CreationDate",
             "ModDate")


def xmp_packet(data: bytes) -> bytes | None:
    """The document's uncompressed XMP packet (``<x:xmpmeta>…</x:xmpmeta>``), or None."""
    found = None
    pos = 0
    for _ in range(MAX_PACKETS):
        m = _START.search(data, pos)
        if m is None:
            break
        end = _END.search(data, m.end(), m.start() + MAX_PACKET_BYTES)
        if end is None:
            break
        packet = data[m.start():end.end()]
        if _PDF_NS in packet:
            found = packet
        pos = end.end()
    return found


def info_strings(info: Any) -> dict[str, str]:
    """The Info dictionary's text entries an engine read (only the standard keys)."""
    if not isinstance(info, dict):
        return {}
    return {k: v for k, v in info.items() if k in INFO_KEYS and isinstance(v, str) and v}


def pdf_meta(data: bytes, info: dict[str, str], pages: int | None) -> DocMeta:
    """The document's metadata from its XMP packet and Info dictionary."""
    from_info = DocMeta.make(
        title=info.get("Title"), authors=split_people(info.get("Author")),
        created=info.get("CreationDate"), modified=info.get("ModDate"), date_kind="pdf",
        subject=info.get("Subject"), keywords=split_keywords(info.get("Keywords")),
        fields={"producer": info.get("Producer"), "creator_tool": info.get("Creator")},
        pages=pages)
    packet = xmp_packet(data)
    if packet is None:
        return from_info
    from ..errors import ReaderError
    from ..office.docprops import properties, xmp_meta

    try:
        from_xmp = xmp_meta(properties(packet, "XMP packet"))
    except ReaderError:  # malformed or refused XML: Info alone
        return from_info
    return from_xmp.merged(from_info)


def metadata_text(doc_meta: DocMeta) -> str:
    """The words a document holds only in its metadata, as lines under ``## metadata`` (a
    scanned PDF's title, authors, subject, keywords, description); "" when it has none."""
    lines = [f"{label}: {value}" for label, value in (
        ("Title", doc_meta.title), ("Author", "; ".join(doc_meta.authors)),
        ("Subject", doc_meta.subject), ("Description", doc_meta.description),
        ("Keywords", ", ".join(doc_meta.keywords))) if value]
    return "## metadata\n" + "\n".join(lines) if lines else ""
