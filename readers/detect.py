"""MIME detection: content first, the file name's extension second.

The order, as ``file``/libmagic and Tika decide:

1. a signature at offset 0, where its format puts it (PDF, RTF, OLE2, ZIP, images, gzip,
   bzip2, xz, 7z, tar's ``ustar`` at 257 or a valid tar header checksum…).  A container's
   magic at offset 0 wins over anything found later: a ZIP whose first member is a PDF is a
   ZIP.  ZIP containers are told apart by their parts (``word/document.xml`` …) or their
   ``mimetype`` member (ODF, EPUB); OLE2 files by the stream names of their directory
   (``WordDocument``, ``Workbook``, ``PowerPoint Document``, ``__substg1.0_*``,
   ``EncryptedPackage``);
2. a PDF header later in the first 1024 bytes, the window pdf.js and poppler search, only when
   the file is not text (:func:`_late_pdf`): junk before a PDF is accepted as readers accept
   it, but a Markdown file that mentions ``%PDF-1.7`` in its first lines stays text;
3. text told from binary by :func:`bastion.readers.text.textcodec.looks_like_text` (a BOM, a UTF-32/16 NUL
   pattern, few control characters; a few stray NUL bytes are text), then refined by its
   content (HTML, XML, SVG, flat ODF, e-mail headers) and only then by its extension
   (CSV, JSON, …).

A ``.txt`` holding a PDF is a PDF; an extension-less DOCX is a DOCX; an HTML file named
``.txt`` is HTML.

Why not libmagic or ``filetype``: libmagic runs a large C parser over hostile bytes inside the
parent process, and its OOXML verdict depends on member order; ``filetype`` knows no text,
HTML or e-mail and finds OOXML by scanning for byte strings.  The rules bastion needs fit in
this module and read at most the head of a file, a ZIP's tail and central directory within
fixed caps (:mod:`bastion.readers.zipdir`) and an OLE2 directory's sectors within theirs, through
the descriptor the walk opened.
"""

from __future__ import annotations

import os
import re
import stat
import struct

from . import zipdir
from .text import textcodec

HEAD_BYTES = 64 * 1024  # how much of a file detection looks at (plus a ZIP directory)
MAX_ZIP_ENTRIES = zipdir.MAX_ENTRIES  # a directory larger than this is not inspected further
_MAX_READ = 1 << 20  # the most one read of a file being detected returns (a sector, a tail)
PDF_WINDOW = 1024  # pdf.js and poppler look for the header in the first 1024 bytes
MAX_OLE_DIR_SECTORS = 256  # directory sectors read to name an OLE2 file's streams

OCTET = "application/octet-stream"
TEXT = "text/plain"

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
OOXML_ENCRYPTED = "application/x-ooxml-encrypted"
OLE2 = "application/x-ole-storage"
ZIP = "application/zip"
TAR = "application/x-tar"
EPUB = "application/epub+zip"
DOC = "application/msword"
XLS = "application/vnd.ms-excel"
PPT = "application/vnd.ms-powerpoint"
MSG = "application/vnd.ms-outlook"

_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")

# When the directory cannot be read (a damaged or truncated file), the extension decides.
_OLE_BY_EXT = {
    ".doc": DOC, ".dot": DOC, ".xls": XLS, ".xlt": XLS, ".ppt": PPT, ".pps": PPT,
    ".pot": PPT, ".msg": MSG,
}

_ODF_MIMES = {
    "application/vnd.oasis.opendocument.text",
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.presentation",
    "application/vnd.oasis.opendocument.graphics",
    "application/vnd.oasis.opendocument.text-template",
    "application/vnd.oasis.opendocument.spreadsheet-template",
    "application/vnd.oasis.opendocument.presentation-template",
    EPUB,
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

# Signatures at offset 0, each long enough that text does not begin with it by chance.
_OTHER_MAGIC: tuple[tuple[re.Pattern[bytes], str], ...] = tuple(
    (re.compile(magic, re.S), mime) for magic, mime in (
        (rb"\x1f\x8b\x08", "application/gzip"),
        (rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)", "application/x-bzip2"),
        (rb"\xfd7zXZ\x00", "application/x-xz"),
        (rb"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
        (rb"Rar!\x1a\x07", "application/vnd.rar"),
        (rb"\x7fELF", "application/x-executable"),
        (rb"\x28\xb5\x2f\xfd", "application/zstd"),
        (rb"SQLite format 3\x00", "application/vnd.sqlite3"),
        (rb"OggS\x00", "audio/ogg"),
        (rb"fLaC[\x00\x80]", "audio/flac"),
        (rb"ID3[\x02-\x04]\x00", "audio/mpeg"),
    ))
_PDF_HEADER = re.compile(rb"%PDF-\d\.\d")

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
    return _detect(data[:HEAD_BYTES], name, _Bytes(data))


def detect_file(source: int | str | bytes | os.PathLike, name: str, head: bytes) -> str:
    """Detect the MIME type of a file whose first bytes (``head``, ≥ 64 KiB unless the file is
    shorter) were already read.  ``source`` is the file's open descriptor (read with
    ``pread``: its offset is left alone) or its path (opened at most once, without following a
    symlink or blocking, and only for a ZIP's tail or an OLE2 directory)."""
    if isinstance(source, int):
        return _detect(head[:HEAD_BYTES], name, _Fd(source))
    with _Path(source) as f:
        return _detect(head[:HEAD_BYTES], name, f)


class _Bytes:
    """Reads at offsets of a document held in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def size(self) -> int:
        return len(self.data)

    def read_at(self, offset: int, n: int) -> bytes:
        return self.data[offset : offset + n] if offset >= 0 else b""


class _Fd:
    """Reads at offsets of an open descriptor (``pread``, capped at ``_MAX_READ``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or n <= 0:
            return b""
        return os.pread(self.fd, min(n, _MAX_READ), offset)


class _Path(_Fd):
    """A path opened on first use (``O_NOFOLLOW | O_NONBLOCK``; a file that is not regular
    reads as empty), closed on exit."""

    def __init__(self, path: str | bytes | os.PathLike) -> None:
        super().__init__(-1)
        self.path = path

    def _open(self) -> bool:
        if self.fd == -1:
            self.fd = -2
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
                             | os.O_NOCTTY | os.O_CLOEXEC)
            except OSError:
                return False
            if stat.S_ISREG(os.fstat(fd).st_mode):
                self.fd = fd
            else:
                os.close(fd)
        return self.fd >= 0

    def size(self) -> int:
        return super().size() if self._open() else 0

    def read_at(self, offset: int, n: int) -> bytes:
        return super().read_at(offset, n) if self._open() else b""

    def __enter__(self) -> "_Path":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)
        self.fd = -2


def _detect(head: bytes, name: str, src) -> str:
    ext = _ext(name)
    try:
        kind = _signature(head, ext, src)
    except OSError:
        kind = None
    if kind is not None:
        return kind
    if not head:
        return _TEXT_BY_EXT.get(ext, TEXT)
    text = textcodec.looks_like_text(head)
    if _late_pdf(head, text):
        return "application/pdf"
    if not text:
        return OCTET
    return _text_kind(head, ext)


def _signature(head: bytes, ext: str, src) -> str | None:
    """The type a signature at offset 0 names (tar's at 257), or None."""
    if head.startswith(b"%PDF-"):
        return "application/pdf"
    if head.startswith(b"{\\rtf"):
        return "application/rtf"
    if head.startswith(_OLE_MAGIC):
        return _ole_kind(head, ext, src)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return _zip_kind(src)
    for magic, mime in _IMAGE_MAGIC:
        if head.startswith(magic):
            return mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"BM") and len(head) >= 26 and _plausible_bmp(head):
        return "image/bmp"
    for pattern, mime in _OTHER_MAGIC:
        if pattern.match(head):
            return mime
    if _is_tar(head):
        return TAR
    return None


def _late_pdf(head: bytes, text: bool) -> bool:
    """A PDF header after offset 0 but inside the first 1024 bytes, where pdf.js and poppler
    still find it, counts only in a file that is not text: junk before a PDF (a PJL job
    header, a MacBinary header, HTTP headers saved with the body) is followed by a binary
    body, while a text file that mentions the header stays text, so its words are never
    handed to a PDF reader that would fail on them."""
    if text:
        return False
    found = _PDF_HEADER.search(head, 1, PDF_WINDOW + 8)
    return found is not None and found.start() < PDF_WINDOW


def _is_tar(head: bytes) -> bool:
    """A tar header: ``ustar`` at 257 (POSIX, GNU), or a pre-POSIX header whose checksum
    (the unsigned sum of its bytes, the checksum field read as spaces) holds."""
    if len(head) < 512 or head[0] == 0:
        return False
    if head[257:263] in (b"ustar\x00", b"ustar "):
        return True
    field = head[148:156].replace(b"\x00", b" ").strip()
    if not field or not field.isdigit() or b"8" in field or b"9" in field:
        return False
    return int(field, 8) == sum(head[:148]) + 8 * 32 + sum(head[156:512])


def _plausible_bmp(head: bytes) -> bool:
    size, _, offset, dib = struct.unpack_from("<IIII", head, 2)
    return dib in (12, 40, 52, 56, 64, 108, 124) and 14 + dib <= offset


def _ole_kind(head: bytes, ext: str, src) -> str:
    names, complete = _ole_names(head, src)
    kind = _ole_type(names)
    if kind is not None:
        return kind
    if complete:
        return OLE2  # a compound file of another kind (Thumbs.db, .msi, …)
    # The directory could not be read to its end: an encrypted OOXML package is small enough
    # at its start that the first MiB holds its directory in practice; else the extension.
    sample = src.read_at(0, 1 << 20)
    if _ENCRYPTED_PACKAGE in sample:
        return OOXML_ENCRYPTED
    return _OLE_BY_EXT.get(ext, OLE2)


def _ole_type(names: set[str]) -> str | None:
    """The type the stream names of an OLE2 directory say, or None."""
    if "EncryptedPackage" in names:
        return OOXML_ENCRYPTED
    if "WordDocument" in names:
        return DOC
    if "PowerPoint Document" in names:
        return PPT
    if "Workbook" in names or "Book" in names:
        return XLS
    if "__properties_version1.0" in names or any(n.startswith("__substg1.0_") for n in names):
        return MSG
    return None


def _ole_names(head: bytes, src) -> tuple[set[str], bool]:
    """The stream and storage names of an OLE2 compound file's directory, following the
    directory's sector chain through the FAT (at most MAX_OLE_DIR_SECTORS sectors, and 64
    DIFAT sectors), and whether the chain was read to its end."""
    names: set[str] = set()
    if len(head) < 512:
        return names, False
    shift = struct.unpack_from("<H", head, 30)[0]
    if shift not in (9, 12):
        return names, False
    size = 1 << shift
    n_fat, first_dir = struct.unpack_from("<II", head, 44)
    first_difat, n_difat = struct.unpack_from("<II", head, 68)
    fat_sids = list(struct.unpack_from("<109I", head, 76)[: min(n_fat, 109)])
    try:
        def sector(sid: int) -> bytes:
            return src.read_at((sid + 1) * size, size)

        per_fat = size // 4
        difat, hops = first_difat, 0
        while len(fat_sids) < n_fat and difat < 0xFFFFFFFA and hops < min(n_difat, 64):
            block = sector(difat)
            if len(block) < size:
                break
            entries = struct.unpack(f"<{per_fat}I", block)
            fat_sids.extend(entries[:-1][: n_fat - len(fat_sids)])
            difat, hops = entries[-1], hops + 1
        fats: dict[int, tuple[int, ...]] = {}
        sid = first_dir
        seen: set[int] = set()
        while sid != 0xFFFFFFFE:  # ENDOFCHAIN
            if sid in seen or len(seen) >= MAX_OLE_DIR_SECTORS or sid // per_fat >= len(
                    fat_sids):
                return names, False
            seen.add(sid)
            data = sector(sid)
            if len(data) < size:
                return names, False
            for at in range(0, size, 128):
                length, kind = struct.unpack_from("<HB", data, at + 64)
                if kind in (1, 2, 5) and 2 <= length <= 64:
                    names.add(data[at : at + length - 2].decode("utf-16-le", "replace"))
            index = sid // per_fat
            if index not in fats:
                fat = sector(fat_sids[index])
                if len(fat) < size:
                    return names, False
                fats[index] = struct.unpack(f"<{per_fat}I", fat)
            sid = fats[index][sid % per_fat]
        return names, True
    except (OSError, struct.error, ValueError):
        return names, False


def _zip_kind(src) -> str:
    """A ZIP told apart by its ``mimetype`` member (ODF, EPUB) or its parts (OOXML, EPUB),
    from a directory read within fixed caps (:mod:`bastion.readers.zipdir`)."""
    found = zipdir.scan(src)
    if found is None:
        return ZIP
    if found.mimetype in _ODF_MIMES:
        return found.mimetype
    parts = found.parts
    if "word/document.xml" in parts:
        return DOCX
    if "xl/workbook.xml" in parts:
        return XLSX
    if "ppt/presentation.xml" in parts:
        return PPTX
    if "meta-inf/container.xml" in parts and found.opf:
        return EPUB
    return ZIP


def looks_like_text(sample: bytes) -> bool:
    """True when a sample is text (:func:`bastion.readers.text.textcodec.looks_like_text`)."""
    return textcodec.looks_like_text(sample)


def _ascii_view(head: bytes) -> bytes:
    """The head as 8-bit text for pattern matching (UTF-16/32 squeezed to ASCII)."""
    marked = textcodec.bom(head)
    codec, skip = marked if marked is not None else (textcodec.nul_pattern(head), 0)
    if codec is None or codec == "utf-8":
        return head[skip:]
    text = head[skip : skip + 16384].decode(codec, "replace")
    return text.encode("ascii", "replace")


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
