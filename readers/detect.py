"""MIME detection: content first, the file name's extension second.

Magic numbers decide binary formats (PDF, RTF, OLE2, ZIP containers, images); ZIP containers
are told apart by their parts (``word/document.xml`` …) or their ``mimetype`` member (ODF,
EPUB); text is told from binary by decoding a sample; text is then refined by its content
(HTML, XML, SVG, flat ODF, e-mail headers) and only then by its extension (CSV, JSON, …).
A ``.txt`` holding a PDF is a PDF; an extension-less DOCX is a DOCX.

Why not libmagic or ``filetype``: libmagic runs a large C parser over hostile bytes inside the
parent process, and its OOXML verdict depends on member order; ``filetype`` knows no text,
HTML or e-mail and finds OOXML by scanning for byte strings.  The rules bastion needs fit in
this module and read at most the head of a file plus a ZIP's central directory.
"""

from __future__ import annotations

import io
import os
import re
import struct
import zipfile
from typing import BinaryIO

HEAD_BYTES = 64 * 1024  # how much of a file detection looks at (plus a ZIP directory)
MAX_ZIP_ENTRIES = 100_000  # a directory larger than this is not inspected further

OCTET = "application/octet-stream"
TEXT = "text/plain"

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
OOXML_ENCRYPTED = "application/x-ooxml-encrypted"
OLE2 = "application/x-ole-storage"

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")

_OLE_BY_EXT = {
    ".doc": "application/msword",
    ".dot": "application/msword",
    ".xls": "application/vnd.ms-excel",
    ".ppt": "application/vnd.ms-powerpoint",
    ".msg": "application/vnd.ms-outlook",
}

_ODF_MIMES = {
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.presentation",
    "application/vnd.oasis.opendocument.graphics",
    "application/vnd.oasis.opendocument.text-template",
    "application/vnd.oasis.opendocument.spreadsheet-template",
    "application/vnd.oasis.opendocument.presentation-template",
    "application/epub+zip",
}

# Text refined by extension, after content rules found nothing more specific.
_TEXT_BY_EXT = {
    ".csv": "text/csv",
    ".tsv": "text/tab-separated-values",
    ".tab": "text/tab-separated-values",
    ".json": "application/json",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".toml": "application/toml",
    ".xml": "application/xml",
    ".sql": "application/sql",
    ".pem": "application/x-pem-file",
    ".crt": "application/x-pem-file",
    ".md": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "application/xhtml+xml",
    ".eml": "message/rfc822",
    ".svg": "image/svg+xml",
}

_IMAGE_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)

_OTHER_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "application/gzip"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"\x7fELF", "application/x-executable"),
    (b"\x28\xb5\x2f\xfd", "application/zstd"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
    (b"OggS", "audio/ogg"),
    (b"fLaC", "audio/flac"),
    (b"ID3", "audio/mpeg"),
)

_HTML_RE = re.compile(
    rb"^(?:\s|<!--.*?-->)*(?:<!doctype\s+html|<html[\s>]|<head[\s>]|<body[\s>])", re.I | re.S
)
_HTML_LOOSE_RE = re.compile(rb"<html[\s>]|<body[\s>]|<!doctype\s+html", re.I)
_XML_RE = re.compile(rb"^\s*<\?xml[\s?]", re.I)
_SVG_RE = re.compile(rb"<svg[\s>]", re.I)
_XHTML_RE = re.compile(rb"<html[^>]*xmlns=[\"']http://www\.w3\.org/1999/xhtml", re.I)
_FLAT_ODF_RE = re.compile(
    rb"<office:document[^>]*office:mimetype=[\"'](application/vnd\.oasis\.opendocument\.[a-z]+)",
    re.I,
)
_HEADER_RE = re.compile(rb"^([A-Za-z][A-Za-z0-9-]*):[ \t]*\S?", re.M)
_MAIL_HEADERS = {
    b"from", b"to", b"cc", b"subject", b"date", b"message-id", b"received", b"return-path",
    b"mime-version", b"content-type", b"delivered-to", b"reply-to", b"sender",
}


def _ext(name: str) -> str:
    return os.path.splitext(name.lower())[1]


def detect_bytes(data: bytes, name: str = "") -> str:
    """Detect the MIME type of a document held in memory."""
    return _detect(data[:HEAD_BYTES], name, lambda: io.BytesIO(data), data)


def detect_file(path: str | bytes | os.PathLike, name: str, head: bytes) -> str:
    """Detect the MIME type of a file whose first bytes (``head``, ≥ 64 KiB unless the file is
    shorter) were already read; the file is opened again only for a ZIP directory."""

    def opener() -> BinaryIO:
        return open(path, "rb")

    return _detect(head[:HEAD_BYTES], name, opener, None)


def _detect(head: bytes, name: str, opener, whole: bytes | None) -> str:
    ext = _ext(name)
    if head.startswith(b"%PDF-") or b"%PDF-" in head[:1024]:
        return "application/pdf"
    if head.startswith(b"{\\rtf"):
        return "application/rtf"
    if head.startswith(_OLE_MAGIC):
        return _ole_kind(head, ext, opener, whole)
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_kind(head, opener)
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"BM") and len(head) >= 26 and _plausible_bmp(head):
        return "image/bmp"
    for magic, mime in _OTHER_MAGIC:
        if head.startswith(magic):
            return mime
    if not head:
        return _TEXT_BY_EXT.get(ext, TEXT)
    if not looks_like_text(head):
        return OCTET
    return _text_kind(head, ext)


def _plausible_bmp(head: bytes) -> bool:
    size, _, offset, dib = struct.unpack_from("<IIII", head, 2)
    return dib in (12, 40, 52, 56, 64, 108, 124) and 14 + dib <= offset


def _ole_kind(head: bytes, ext: str, opener, whole: bytes | None) -> str:
    # The directory naming the streams may sit anywhere; an encrypted OOXML package is small
    # enough at its start that the first MiB holds it in practice.
    sample = whole[: 1 << 20] if whole is not None else _read_prefix(opener, 1 << 20)
    if _ENCRYPTED_PACKAGE in sample:
        return OOXML_ENCRYPTED
    return _OLE_BY_EXT.get(ext, OLE2)


def _read_prefix(opener, n: int) -> bytes:
    try:
        with opener() as f:
            return f.read(n)
    except OSError:
        return b""


def _zip_kind(head: bytes, opener) -> str:
    try:
        with opener() as f:
            if _zip_entry_count(f) > MAX_ZIP_ENTRIES:
                return "application/zip"
            f.seek(0)
            with zipfile.ZipFile(f) as zf:
                names = set(zf.namelist())
                if "mimetype" in names:
                    info = zf.getinfo("mimetype")
                    if info.file_size <= 200:
                        with zf.open(info) as m:
                            kind = m.read(201).decode("ascii", "replace").strip()
                        if kind in _ODF_MIMES:
                            return kind
                if "word/document.xml" in names:
                    return DOCX
                if "xl/workbook.xml" in names:
                    return XLSX
                if "ppt/presentation.xml" in names:
                    return PPTX
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, KeyError,
            NotImplementedError, EOFError, RuntimeError, struct.error):
        pass
    return "application/zip"


def _zip_entry_count(f: BinaryIO) -> int:
    """Entries declared by the end-of-central-directory record (0 when not found)."""
    f.seek(0, os.SEEK_END)
    size = f.tell()
    tail = min(size, 65536 + 22)
    f.seek(size - tail)
    buf = f.read(tail)
    at = buf.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(buf):
        return 0
    count = struct.unpack_from("<H", buf, at + 10)[0]
    return MAX_ZIP_ENTRIES + 1 if count == 0xFFFF else count


def looks_like_text(sample: bytes) -> bool:
    """True when a sample decodes as text: a BOM, BOM-less UTF-16, UTF-8 or a single-byte
    text with few control characters."""
    if sample.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        return True
    if b"\x00" in sample:
        return utf16_guess(sample) is not None
    head = sample[:8192]
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    return controls * 100 <= len(head) * 2  # ≤ 2 % stray control bytes


_CONTROL_BYTES = bytes(b for b in range(32) if b not in (8, 9, 10, 12, 13, 27))


def utf16_guess(sample: bytes) -> str | None:
    """'utf-16-le' / 'utf-16-be' when NUL bytes sit in every other position of a sample."""
    s = sample[:4096]
    if len(s) < 4:
        return None
    even = s[0::2]
    odd = s[1::2]
    n = min(len(even), len(odd))
    if not n:
        return None
    zero_odd = odd.count(0) / n
    zero_even = even.count(0) / n
    if zero_odd > 0.4 and zero_even < 0.05:
        return "utf-16-le"
    if zero_even > 0.4 and zero_odd < 0.05:
        return "utf-16-be"
    return None


def _ascii_view(head: bytes) -> bytes:
    """The head as 8-bit text for pattern matching (UTF-16 squeezed to its low bytes)."""
    if head.startswith(b"\xef\xbb\xbf"):
        return head[3:]
    kind = None
    if head.startswith(b"\xff\xfe"):
        kind, head = "utf-16-le", head[2:]
    elif head.startswith(b"\xfe\xff"):
        kind, head = "utf-16-be", head[2:]
    elif b"\x00" in head[:4096]:
        kind = utf16_guess(head)
    if kind == "utf-16-le":
        return head[0::2]
    if kind == "utf-16-be":
        return head[1::2]
    return head


def _text_kind(head: bytes, ext: str) -> str:
    view = _ascii_view(head)
    if _XML_RE.match(view):
        flat = _FLAT_ODF_RE.search(view)
        if flat:
            return flat.group(1).decode("ascii").lower() + "-flat-xml"
        if _XHTML_RE.search(view):
            return "application/xhtml+xml"
        if _SVG_RE.search(view[:4096]):
            return "image/svg+xml"
        return "application/xml"
    if _HTML_RE.match(view) or (ext in (".html", ".htm") and _HTML_LOOSE_RE.search(view)):
        return "text/html"
    if _SVG_RE.match(view.lstrip()):
        return "image/svg+xml"
    if _looks_like_mail(view):
        return "message/rfc822"
    return _TEXT_BY_EXT.get(ext, TEXT)


def _looks_like_mail(view: bytes) -> bool:
    """RFC 5322 header block at the start: several known header fields before a blank line."""
    block = view[:8192].split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    names = {m.group(1).lower() for m in _HEADER_RE.finditer(block)}
    known = names & _MAIL_HEADERS
    first = block.split(b"\n", 1)[0]
    if not _HEADER_RE.match(first) and not first.startswith(b"From "):
        return False
    return len(known) >= 3 and bool(known & {b"from", b"subject", b"date", b"message-id"})
