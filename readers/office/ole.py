"""OLE2 compound files (the container of .doc, .xls, .ppt and .msg), through olefile: open one,
read a stream, tell which kind of document it holds by the streams present, read its summary
information (title, author, dates, counts) as metadata."""

from __future__ import annotations

import io
from typing import Any

from ..errors import CorruptDocument
from ..metadata import DocMeta, split_keywords, split_people

OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


def open_ole(data: bytes):
    """The OLE2 compound file in ``data``; CorruptDocument when it is not one."""
    import olefile

    if not data.startswith(OLE_MAGIC):
        raise CorruptDocument("not an OLE2 compound file")
    try:
        return olefile.OleFileIO(io.BytesIO(data))
    except Exception as e:  # noqa: BLE001 - olefile raises OSError, struct.error, … on damage
        raise CorruptDocument(f"damaged OLE2 compound file: {type(e).__name__}: {e}") from None


def stream(ole, name: str) -> bytes:
    try:
        with ole.openstream(name) as f:
            return f.read()
    except Exception as e:  # noqa: BLE001 - a damaged sector chain
        raise CorruptDocument(f"damaged OLE2 stream {name!r}: {type(e).__name__}: {e}") from None


def kind_of(ole) -> str:
    """``doc``, ``xls``, ``ppt``, ``msg``, ``encrypted`` or ``""`` by the streams present."""
    if ole.exists("EncryptedPackage"):
        return "encrypted"
    if ole.exists("WordDocument"):
        return "doc"
    if ole.exists("Workbook") or ole.exists("Book"):
        return "xls"
    if ole.exists("PowerPoint Document"):
        return "ppt"
    if ole.exists("__properties_version1.0") or any(
            e and e[0].startswith("__substg1.0_") for e in ole.listdir()):
        return "msg"
    return ""


def _decoder(codepage: object):
    """How the summary information's 8-bit strings decode (its PID_CODEPAGE)."""
    import codecs

    name = {1200: "utf-16-le", 65001: "utf-8", 10000: "mac-roman"}.get(
        codepage if isinstance(codepage, int) else 0,
        f"cp{codepage}" if isinstance(codepage, int) and codepage > 0 else "cp1252")
    try:
        codecs.lookup(name)
    except LookupError:
        name = "cp1252"

    def decode(value: object) -> str | None:
        if isinstance(value, bytes):
            return value.decode(name, "replace").replace("\x00", "")
        return value if isinstance(value, str) else None

    return decode


def summary_meta(ole, kind: str) -> DocMeta:
    """The ``\x05SummaryInformation`` and ``\x05DocumentSummaryInformation`` streams of a
    .doc, .xls or .ppt (``kind``); a damaged stream costs the metadata, never the text.
    olefile gives the times as UTC (FILETIME)."""
    try:
        m = ole.get_metadata()
    except Exception:  # noqa: BLE001 - olefile on a damaged property set
        return DocMeta()
    text = _decoder(getattr(m, "codepage", None))
    created, modified = getattr(m, "create_time", None), getattr(m, "last_saved_time", None)
    from datetime import datetime, timezone

    def utc(v: object) -> object:
        if isinstance(v, datetime) and v.year > 1601:
            return v.replace(tzinfo=timezone.utc) if v.tzinfo is None else v
        return None

    counts: dict[str, Any] = {}
    if kind == "doc":
        counts = {"pages": m.num_pages, "words": m.num_words, "characters": m.num_chars,
                  "paragraphs": getattr(m, "par_count", None)}
    elif kind == "ppt":
        counts = {"slides": getattr(m, "slides", None), "words": m.num_words,
                  "paragraphs": getattr(m, "par_count", None)}
    return DocMeta.make(
        title=text(m.title), authors=split_people(text(m.author)),
        created=utc(created), modified=utc(modified), subject=text(m.subject),
        description=text(m.comments), keywords=split_keywords(text(m.keywords)),
        fields={"last_modified_by": text(m.last_saved_by),
                "application": text(m.creating_application), "company": text(m.company),
                "category": text(m.category), "manager": text(getattr(m, "manager", None))},
        **counts)
