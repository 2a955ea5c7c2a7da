"""OLE2 compound files (the container of .doc, .xls, .ppt and .msg), through olefile: open one,
read a stream, tell which kind of document it holds by the streams present."""

from __future__ import annotations

import io

from ..errors import CorruptDocument

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
