"""A ZIP's central directory read for detection, within fixed caps on bytes and entries.

Detection runs in the parent process, outside the sandbox, on files anyone may have written.
:func:`scan` therefore reads no more than a fixed number of bytes: the end record from the
last 64 KiB + 22 bytes (and a ZIP64 end record, 56 bytes, where its locator points), then the
central directory only when the end record says it is at most :data:`MAX_DIR_BYTES` long, of
which at most :data:`MAX_ENTRIES` entries are parsed; then at most one ``mimetype`` member of
at most 200 bytes.  Nothing grows with what a file claims: a directory that is larger, or
holds more entries than declared past the cap, makes the file a plain ZIP.  ``zipfile`` is not
used: it reads the whole directory into ``ZipInfo`` objects first (3 million entries behind an
end record that claims 1 took the walk to 2 GB).

The rules are ``zipfile``'s where a file is well formed (the end record found as it finds it,
the offset of data prepended to the archive, names decoded as UTF-8 or CP437, a ``mimetype``
member compared with its local header and its CRC), so a document gets the type it had.  Where
they differ, on damaged or hostile files only: a directory holding more than 100,000 entries
behind an end record that declares fewer is a plain ZIP (``zipfile`` read them all), and so is
a ``mimetype`` member compressed with bzip2 or LZMA (ODF and EPUB require it stored).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

__all__ = ["MAX_DIR_BYTES", "MAX_ENTRIES", "ZipParts", "scan"]

MAX_ENTRIES = 100_000  # a directory declaring or holding more is not inspected further
MAX_DIR_BYTES = 16 << 20  # a directory longer than this is not read
MAX_MIMETYPE = 200  # an ODF/EPUB ``mimetype`` member is a short ASCII string

# the member names that tell OOXML and EPUB packages apart (compared lower-cased, "/")
PARTS = ("word/document.xml", "xl/workbook.xml", "ppt/presentation.xml",
         "meta-inf/container.xml")

_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_TAIL = 65535 + 22


@dataclass(frozen=True)
class ZipParts:
    """What a ZIP's directory says about its kind: which of :data:`PARTS` it holds, whether a
    member ends in ``.opf``, and its ``mimetype`` member's text (None when there is none or
    it cannot be read)."""

    parts: frozenset[str]
    opf: bool
    mimetype: str | None


class _Bad(Exception):
    """The archive is not one ``zipfile`` would open (or not within the caps)."""


def scan(src) -> ZipParts | None:
    """The directory of the ZIP that ``src`` reads (``size()`` and ``read_at(offset, n)``),
    or None when it is damaged, too large, or over the caps."""
    try:
        return _scan(src)
    except (_Bad, struct.error, UnicodeDecodeError, zlib.error, OSError, ValueError):
        return None


def _scan(src) -> ZipParts:
    size = src.size()
    count, size_cd, offset_cd, at = _end_record(src, size)
    if count > MAX_ENTRIES:
        raise _Bad("too many entries")
    if size_cd > MAX_DIR_BYTES:
        raise _Bad("directory too long")
    concat = at - size_cd - offset_cd  # bytes prepended to the archive (zipfile's rule)
    if at >= 20 and src.read_at(at - 20, 4) == _EOCD64_LOCATOR:
        concat -= 56 + 20
    start = offset_cd + concat
    if start < 0:
        raise _Bad("bad offset")
    data = src.read_at(start, size_cd)
    if len(data) != size_cd:
        raise _Bad("truncated directory")
    parts: set[str] = set()
    opf = False
    mime_entry: tuple | None = None
    pos = entries = 0
    while pos < size_cd:
        entries += 1
        if entries > MAX_ENTRIES:
            raise _Bad("too many entries")
        head = data[pos : pos + 46]
        if len(head) != 46 or head[:4] != _CENTRAL:
            raise _Bad("bad directory entry")
        if head[6] > 63:  # zipfile's MAX_EXTRACT_VERSION
            raise _Bad("zip file version")
        (flags, method, crc, csize, usize, n, m, k,
         offset) = struct.unpack_from("<8xHH4xIIIHHH8xI", head)
        raw = data[pos + 46 : pos + 46 + n]
        extra = data[pos + 46 + n : pos + 46 + n + m]
        name = raw.decode("utf-8") if flags & 0x800 else raw.decode("cp437")
        _check_extra(extra)
        pos += 46 + n + m + k
        cut = name.find("\x00")
        short = name if cut < 0 else name[:cut]
        if short == "mimetype":
            mime_entry = (name, flags, method, crc, csize, usize, offset + concat)
        low = short.replace("\\", "/").lower()
        if low in PARTS:
            parts.add(low)
        elif low.endswith(".opf"):
            opf = True
    mimetype = None
    if mime_entry is not None:
        mimetype = _mimetype(src, *mime_entry)
    return ZipParts(frozenset(parts), opf, mimetype)


def _end_record(src, size: int) -> tuple[int, int, int, int]:
    """(entries, directory size, directory offset, where the end record is), as ``zipfile``
    finds them: the last 22 bytes when they are an end record without a comment, else the
    last end signature in the last 64 KiB + 22; a ZIP64 end record where its locator says."""
    if size < 22:
        raise _Bad("too short")
    at = size - 22
    rec = src.read_at(at, 22)
    if not (rec[:4] == _EOCD and rec[-2:] == b"\x00\x00"):
        start = max(size - _TAIL, 0)
        tail = src.read_at(start, size - start)
        i = tail.rfind(_EOCD)
        if i < 0:
            raise _Bad("no end record")
        rec = tail[i : i + 22]
        if len(rec) != 22:
            raise _Bad("truncated end record")
        at = start + i
    disk, disk_cd, _, count, size_cd, offset_cd = struct.unpack_from("<4xHHHHII", rec)
    if count == 0xFFFF:  # as before this module: not inspected further
        return MAX_ENTRIES + 1, size_cd, offset_cd, at
    if at >= 20:
        loc = src.read_at(at - 20, 20)
        if loc[:4] == _EOCD64_LOCATOR:
            disk_eocd, offset64, disks = struct.unpack_from("<IQI", loc, 4)
            if disk_eocd or disks > 1:
                raise _Bad("spans disks")
            rec64 = src.read_at(at - 20 - 56, 56)
            if len(rec64) != 56 or rec64[:4] != _EOCD64:
                raise _Bad("bad zip64 end record")
            count, size_cd, offset_cd = struct.unpack_from("<QQQ", rec64, 32)
    return count, size_cd, offset_cd, at


def _check_extra(extra: bytes) -> None:
    """``zipfile``'s check of an entry's extra field: each record fits."""
    while len(extra) >= 4:
        _, ln = struct.unpack_from("<HH", extra)
        if ln + 4 > len(extra):
            raise _Bad("corrupt extra field")
        extra = extra[ln + 4:]


def _mimetype(src, name: str, flags: int, method: int, crc: int, csize: int, usize: int,
              offset: int) -> str | None:
    """The text of the ``mimetype`` member, stripped; None when it is over 200 bytes (not
    read).  A member that cannot be read as ``zipfile`` would read it (encrypted, another
    method than stored or deflated, its local header naming another file, a wrong CRC,
    truncated) makes the whole file a plain ZIP, as it did through ``zipfile``."""
    if usize > MAX_MIMETYPE:
        return None
    if flags & 0x61 or method not in (0, 8):  # encrypted, patched, strong encryption
        raise _Bad("mimetype member not readable here")
    if offset < 0:
        raise _Bad("bad offset")
    local = src.read_at(offset, 30)
    if len(local) != 30 or local[:4] != _LOCAL:
        raise _Bad("bad local header")
    lflags = struct.unpack_from("<H", local, 6)[0]
    n, m = struct.unpack_from("<HH", local, 26)
    raw = src.read_at(offset + 30, n)
    lname = raw.decode("utf-8") if lflags & 0x800 else raw.decode("cp437")
    if lname != name:
        raise _Bad("local header names another file")
    body = offset + 30 + n + m
    want = min(csize, usize if method == 0 else 64 * 1024)
    data = src.read_at(body, want)
    if len(data) != want:
        raise _Bad("mimetype member truncated")
    if method == 8:
        data = zlib.decompressobj(-15).decompress(data, usize + 1)[:usize]
    if zlib.crc32(data) != crc:  # zipfile's check (a short member with the right CRC passes)
        raise _Bad("mimetype member damaged")
    return data.decode("ascii", "replace").strip()
