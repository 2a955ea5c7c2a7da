"""Archives: zip, tar (plain, gzip, bzip2, xz), single-file gzip/bzip2/xz, and 7z.

Every member is read in memory inside the worker, streamed and capped as it is decompressed,
then handed to :class:`bastion.readers.containers.nested.Members`, which detects its type and reads it through the
registry, recursively.  The caps (``Limits``): ``max_depth``, ``max_members``,
``max_member_bytes`` (one member, decompressed), ``max_unpacked_bytes`` (all archives of one
document) and ``max_compression_ratio`` (a stream that inflates more than that is stopped as it
inflates; a zip member that *declares* more is not inflated at all).  Member paths are data:
they name members in the text (``=== member: dir/a.txt ===``), never a file on disk.

* zip: :mod:`zipfile`; encrypted members are ``error``/``encrypted``, unknown compression
  methods ``unsupported``, damaged ones ``error``/``corrupt``;
* tar: :mod:`tarfile` in stream mode over bastion's own capped decompressor (so the ratio and
  byte caps see every byte); regular files only (links, devices, FIFOs are not members);
* ``.gz``/``.bz2``/``.xz`` holding one file: that file is the one member, named after the
  archive without its suffix; when it is a tar, the archive is read as a tar;
* 7z: the ``7zz`` (or ``7z``) tool as a sensor, in the document's scratch directory: one
  listing, then one extraction of every member to its standard output, split by the listed
  sizes.  Without the tool a 7z archive is ``unsupported`` naming it.
"""

from __future__ import annotations

import bz2
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from typing import Callable

from ..base import (NESTED_LIBRARIES, NESTED_TOOLS, Context, Document, Reader, ReadResult,
                    TextSink, ToolResult)
from ..errors import CapReached, CorruptDocument, EncryptedDocument, Unsupported, missing_tool
from .nested import RATIO_GRACE, Members, Ratio, charge_unpacked

CHUNK = 1 << 16

ZIP = "application/zip"
TAR = "application/x-tar"
GZIP = "application/gzip"
BZIP2 = "application/x-bzip2"
XZ = "application/x-xz"
SEVEN_Z = "application/x-7z-compressed"

_SUFFIXES = {".tgz": ".tar", ".tbz2": ".tar", ".tbz": ".tar", ".txz": ".tar",
             ".gz": "", ".bz2": "", ".xz": "", ".z": ""}


# ---------------------------------------------------------------------------------------------
# Capped decompression
# ---------------------------------------------------------------------------------------------

class _Decompressed(io.RawIOBase):
    """A gzip, bzip2 or xz stream over bytes in memory, decompressed as it is read, under the
    compression-ratio and unpacked-bytes caps.  Concatenated streams are read on (as gzip and
    bzip2 do)."""

    def __init__(self, data: bytes, kind: str, ctx: Context, where: str) -> None:
        self.view = memoryview(data)
        self.kind = kind
        self.ctx = ctx
        self.ratio = Ratio(ctx, where)
        self.where = where
        self.pos = 0  # input consumed (fed to the decompressor)
        self.produced = 0
        self.dec = self._new()
        self.pending = b""  # input handed over but not yet consumed by the decompressor
        self.done = False
        self.head = b""  # bytes peeked and not yet read

    def _new(self):
        if self.kind == GZIP:
            return zlib.decompressobj(31)
        if self.kind == BZIP2:
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor()

    def readable(self) -> bool:
        return True

    def _more(self, n: int) -> bytes:
        while not self.done:
            if self.kind == GZIP:
                if not self.pending and self.pos < len(self.view):
                    self.pending = bytes(self.view[self.pos:self.pos + CHUNK])
                    self.pos += len(self.pending)
                out = self.dec.decompress(self.pending, n)
                self.pending = self.dec.unconsumed_tail
                if self.dec.eof:
                    rest = self.dec.unused_data + self.pending
                    self.pending = b""
                    self.pos -= len(rest)
                    if self.pos < len(self.view) and self.view[self.pos] == 0x1F:
                        self.dec = self._new()
                    else:
                        self.done = True
                elif not out and not self.pending and self.pos >= len(self.view):
                    raise CorruptDocument(f"{self.where}: truncated compressed stream")
            else:
                if self.dec.needs_input:
                    chunk = bytes(self.view[self.pos:self.pos + CHUNK])
                    self.pos += len(chunk)
                else:
                    chunk = b""
                out = self.dec.decompress(chunk, n)
                if self.dec.eof:
                    rest = self.dec.unused_data
                    self.pos -= len(rest)
                    if self.pos < len(self.view) and rest[:1] in (b"B", b"\xfd"):
                        self.dec = self._new()
                    else:
                        self.done = True
                elif not out and self.dec.needs_input and self.pos >= len(self.view):
                    raise CorruptDocument(f"{self.where}: truncated compressed stream")
            if out:
                self.produced += len(out)
                charge_unpacked(self.ctx, len(out), self.where)
                self.ratio.check(self.produced, self.pos)
                return out
        return b""

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            n = CHUNK
        if self.head:
            out, self.head = self.head[:n], self.head[n:]
            return out
        try:
            return self._more(max(n, 1))
        except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as e:
            raise CorruptDocument(f"{self.where}: damaged compressed stream: {e}") from None

    def readinto(self, b) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def peek(self, n: int) -> bytes:
        while len(self.head) < n:
            got = self._more(n - len(self.head))
            if not got:
                break
            self.head += got
        return self.head[:n]


def _drain(read: Callable[[int], bytes], path: str, ctx: Context, *,
           ratio: Ratio | None = None, consumed: Callable[[], int] | None = None,
           charge: bool = True) -> bytes:
    """All of one member's bytes, under ``max_member_bytes`` (and the ratio and byte caps when
    this read is what decompresses)."""
    cap = ctx.limits.max_member_bytes
    buf = bytearray()
    while chunk := read(CHUNK):
        buf += chunk
        if len(buf) > cap:
            raise CapReached("max_member_bytes", f"over {cap} bytes decompressed")
        if charge:
            charge_unpacked(ctx, len(chunk), path)
        if ratio is not None and consumed is not None:
            ratio.check(len(buf), consumed())
    return bytes(buf)


# ---------------------------------------------------------------------------------------------
# The formats
# ---------------------------------------------------------------------------------------------

_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, lzma.LZMAError, EOFError,
               OSError, ValueError, KeyError, RuntimeError)


_UTF8_FLAG = 0x800  # general purpose bit 11: the name is UTF-8
_UNICODE_PATH = 0x7075  # Info-ZIP's Unicode Path extra field
_WORD = re.compile(r"[^\W\d_]+")


def zip_names(infos: list[zipfile.ZipInfo]) -> dict[int, str]:
    """Each member's name (by ``id`` of its ZipInfo).  A name flagged UTF-8 is as zipfile
    read it; else Info-ZIP's Unicode Path field gives it, when its CRC matches the name's
    bytes; else the archive's unflagged names are decoded alike: as UTF-8 when they all are
    (what most zip tools write without the flag), as cp866 (the Russian DOS code page) when
    that reads every non-ASCII letter as Cyrillic and no word mixes it with Latin, else as
    cp437 (the zip standard's, which zipfile assumes: its accented letters and Greek
    symbols are what cp866's Cyrillic becomes)."""
    named: dict[int, str] = {}
    raw: dict[int, bytes] = {}
    for info in infos:
        if info.flag_bits & _UTF8_FLAG:
            named[id(info)] = info.filename
            continue
        try:
            original = info.filename.encode("cp437")
        except UnicodeEncodeError:  # (zipfile read it otherwise): kept as it read it
            named[id(info)] = info.filename
            continue
        unicode_path = _unicode_path(info.extra, original)
        if unicode_path is not None:
            named[id(info)] = unicode_path
        elif original.isascii():
            named[id(info)] = info.filename
        else:
            raw[id(info)] = original
    if raw:
        encoding = _legacy_encoding(list(raw.values()))
        for key, original in raw.items():
            named[key] = original.decode(encoding, "replace")
    return named


def _unicode_path(extra: bytes, original: bytes) -> str | None:
    """The UTF-8 name of Info-ZIP's Unicode Path extra field (0x7075: version 1, the CRC-32
    of the header's name, the name), when it is there and its CRC matches ``original``."""
    at = 0
    while at + 4 <= len(extra):
        kind = int.from_bytes(extra[at:at + 2], "little")
        size = int.from_bytes(extra[at + 2:at + 4], "little")
        body = extra[at + 4:at + 4 + size]
        at += 4 + size
        if kind != _UNICODE_PATH or len(body) < 5 or body[0] != 1:
            continue
        if int.from_bytes(body[1:5], "little") != zlib.crc32(original):
            return None  # the name was changed after the field was written: not trusted
        try:
            return body[5:].decode("utf-8")
        except UnicodeDecodeError:
            return None
    return None


def _legacy_encoding(names: list[bytes]) -> str:
    """The one encoding of an archive's unflagged, non-ASCII names (see :func:`zip_names`)."""
    try:
        for name in names:
            name.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    for name in names:
        for word in _WORD.findall(name.decode("cp866")):
            cyrillic = sum("\u0400" <= c <= "\u04ff" for c in word)
            if not word.isascii() and cyrillic != sum(not c.isascii() for c in word):
                return "cp437"  # a letter of cp866's that is not Cyrillic
            if cyrillic and cyrillic != len(word):
                return "cp437"  # Latin and Cyrillic in one word: not a Russian name
    return "cp866" if any(any("\u0400" <= c <= "\u04ff" for c in n.decode("cp866"))
                          for n in names) else "cp437"


def _read_zip(data: bytes, members: Members, ctx: Context) -> None:
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except _ZIP_ERRORS as e:
        raise CorruptDocument(f"not a valid zip archive: {e}") from None
    limits = ctx.limits
    names = zip_names(infos)
    for info in infos:
        if info.is_dir():
            continue
        path = names[id(info)]
        members.next_member(path)
        if info.flag_bits & 0x1:
            members.skip(path, "error", "the member needs a password", "encrypted")
            continue
        if info.file_size > limits.max_member_bytes:
            members.capped(path, CapReached(
                "max_member_bytes", f"declares {info.file_size} bytes decompressed"))
            continue
        packed = min(info.compress_size, len(data))
        if info.file_size > RATIO_GRACE and info.file_size > limits.max_compression_ratio * max(
                packed, 1):
            members.capped(path, CapReached(
                "max_compression_ratio",
                f"declares {info.file_size} bytes from {info.compress_size}"))
            continue
        try:
            with zf.open(info) as f:
                # zipfile stops at the declared size (and checks the CRC), so what a member
                # may inflate to was checked above
                body = _drain(f.read, path, ctx, ratio=Ratio(ctx, path), consumed=lambda: packed)
        except CapReached as cap:
            if cap.cap == "max_unpacked_bytes":
                raise
            members.capped(path, cap)
            continue
        except NotImplementedError as e:
            members.skip(path, "unsupported", f"zip: {e}")
            continue
        except _ZIP_ERRORS as e:
            members.skip(path, "error", f"damaged zip member: {e}")
            continue
        members.read(path, body)


def _read_tar(stream: io.RawIOBase | io.BufferedIOBase, members: Members, ctx: Context,
              charge: bool) -> None:
    try:
        tf = tarfile.open(fileobj=stream, mode="r|")  # noqa: SIM115 - closed below
    except tarfile.TarError as e:
        raise CorruptDocument(f"not a valid tar archive: {e}") from None
    got_any = False
    try:
        while True:
            try:
                info = tf.next()
            except (tarfile.TarError, CorruptDocument) as e:
                if not got_any:
                    raise CorruptDocument(f"not a valid tar archive: {e}") from None
                members.skip("(rest of the archive)", "error", f"damaged tar: {e}")
                return
            if info is None:
                return
            got_any = True
            if not info.isfile():
                continue  # directories, links, devices, FIFOs hold no text of their own
            path = info.name
            members.next_member(path)
            if info.size > ctx.limits.max_member_bytes:
                members.capped(path, CapReached(
                    "max_member_bytes", f"declares {info.size} bytes"))
                continue
            f = tf.extractfile(info)
            if f is None:
                continue
            try:
                body = _drain(f.read, path, ctx, charge=charge)
            except CapReached as cap:
                if cap.cap in ("max_unpacked_bytes", "max_compression_ratio"):
                    raise  # the archive's own stream: nothing after this point is read
                members.capped(path, cap)
                continue
            except (tarfile.TarError, EOFError, OSError, CorruptDocument) as e:
                members.skip(path, "error", f"damaged tar member: {e}")
                return
            members.read(path, body)
    finally:
        tf.close()


def _is_tar(head: bytes) -> bool:
    return len(head) >= 263 and head[257:262] == b"ustar"


def _member_name(doc_name: str) -> str:
    lower = doc_name.lower()
    for suffix, repl in _SUFFIXES.items():
        if lower.endswith(suffix) and len(doc_name) > len(suffix):
            return doc_name[: -len(suffix)] + repl
    return doc_name + ".out"


def _read_compressed(doc: Document, kind: str, members: Members, ctx: Context) -> str:
    stream = _Decompressed(doc.data, kind, ctx, doc.name)
    try:
        head = stream.peek(512)
    except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError) as e:
        raise CorruptDocument(f"damaged compressed stream: {e}") from None
    if _is_tar(head):
        _read_tar(stream, members, ctx, charge=False)
        return "tar"
    path = _member_name(doc.name)
    members.next_member(path)
    try:
        body = _drain(stream.read, path, ctx, charge=False)
    except CapReached as cap:
        if cap.cap == "max_unpacked_bytes":
            raise
        members.capped(path, cap)
        return "single"
    members.read(path, body)
    return "single"


# 7z through the 7-Zip command line tool ----------------------------------------------------

SEVEN_Z_TOOLS = ("7zz", "7z")
_SLT_FIELD = re.compile(r"^([A-Za-z ]+?) = (.*)$")
_SEVEN_Z_ERROR = re.compile(r"^ERROR: (.+?) : (.+)$")


def _seven_zip_tool(ctx: Context) -> str:
    for name in SEVEN_Z_TOOLS:
        if name in ctx.tools:
            return ctx.tools[name]
    raise Unsupported(missing_tool("7z archives need 7zz or 7z (7-Zip) on this machine",
                                   ctx.limits))


def _list_7z(out: str) -> list[dict[str, str]]:
    entries: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    for line in out.split("\n"):
        if not line.strip():
            if cur:
                entries.append(cur)
                cur = {}
            continue
        m = _SLT_FIELD.match(line)
        if m:
            if m.group(1) == "Path" and "Path" in cur:
                entries.append(cur)
                cur = {}
            cur[m.group(1)] = m.group(2)
    if cur:
        entries.append(cur)
    return [e for e in entries if "Path" in e]


def _read_7z(doc: Document, members: Members, ctx: Context) -> None:
    exe = _seven_zip_tool(ctx)
    where = ctx.tmpdir / "archive.7z"
    where.write_bytes(doc.data)
    entries = _seven_z_entries(ctx, exe, where.name)
    sizes = _seven_z_sizes(entries)
    total = sum(sizes)
    limits = ctx.limits
    if total > RATIO_GRACE and total > limits.max_compression_ratio * max(len(doc.data), 1):
        raise CapReached("max_compression_ratio",
                         f"declares {total} bytes from {len(doc.data)}")
    if any(e.get("Encrypted") == "+" for e in entries):
        for e in entries:
            members.next_member(e["Path"])
            members.skip(e["Path"], "error", "the member needs a password", "encrypted")
        return
    room = limits.max_unpacked_bytes - ctx.state.unpacked
    over = total > room  # the members that fit are read, then the cap ends the document
    extracted = ctx.run_tool([exe, "x", "-so", "-bd", _NO_PASSWORD, "--", where.name],
                             max_output=max(room, 0) if over else total + 1)
    if not over and (extracted.truncated or len(extracted.stdout) > total):
        raise CorruptDocument("7z extraction gave more bytes than the listing declares")
    charge_unpacked(ctx, len(extracted.stdout), doc.name)
    body = memoryview(extracted.stdout)
    failed = _seven_z_failures(extracted)
    at = 0
    for e, size in zip(entries, sizes):
        path = e["Path"]
        members.next_member(path)
        complete = at + size <= len(body)
        if over and not complete:
            raise CapReached("max_unpacked_bytes", f"the 7z archive declares {total} bytes, "
                                                   f"over the {room} left at {path}")
        chunk = bytes(body[at:at + size]) if complete else b""
        at += size
        _seven_z_member(members, ctx, path, size, chunk if complete else None,
                        failed.get(path), extracted)


# -p with a password no archive has: a header-encrypted archive fails instead of prompting
_NO_PASSWORD = "-pbastion-no-password"


def _seven_z_entries(ctx: Context, exe: str, name: str) -> list[dict[str, str]]:
    """The archive's file entries as 7-Zip lists them (directories left out)."""
    listing = ctx.run_tool([exe, "l", "-slt", "-ba", "-sccUTF-8", _NO_PASSWORD, "--", name],
                           max_output=64 << 20)
    if listing.returncode != 0:
        err = listing.stderr.decode("utf-8", "replace")
        if "password" in err.lower() or "encrypted" in err.lower():
            raise EncryptedDocument("7z archive with encrypted headers needs a password")
        raise CorruptDocument(f"7z cannot list the archive: {err.strip()[:300]}")
    return [e for e in _list_7z(listing.stdout.decode("utf-8", "replace"))
            if not e.get("Attributes", "").startswith("D") and e.get("Folder") != "+"]


def _seven_z_sizes(entries: list[dict[str, str]]) -> list[int]:
    """Each entry's declared size (a size that is not a number: a corrupt listing)."""
    sizes: list[int] = []
    for e in entries:
        try:
            sizes.append(int(e.get("Size") or 0))
        except ValueError:
            raise CorruptDocument(f"7z listing: bad size {e.get('Size')!r}") from None
    return sizes


def _seven_z_failures(extracted: ToolResult) -> dict[str, str]:
    """The members 7-Zip could not extract: member path -> its complaint ("CRC Failed", …)."""
    failed: dict[str, str] = {}
    if extracted.returncode != 0:
        for line in extracted.stderr.decode("utf-8", "replace").splitlines():
            m = _SEVEN_Z_ERROR.match(line.strip())
            if m:
                failed[m.group(2)] = m.group(1)
    return failed


def _seven_z_member(members: Members, ctx: Context, path: str, size: int,
                    chunk: bytes | None, failure: str | None, extracted: ToolResult) -> None:
    """One member: 7-Zip's failure, a member cut short (``chunk`` None), one over the member
    cap, or read."""
    if failure is not None:
        members.skip(path, "error", f"7z: {failure}")
    elif chunk is None:
        err = extracted.stderr.decode("utf-8", "replace").strip().replace("\n", " ")
        members.skip(path, "error", f"7z could not extract the member: {err[:200]}")
    elif size > ctx.limits.max_member_bytes:
        members.capped(path, CapReached("max_member_bytes", f"declares {size} bytes"))
    else:
        members.read(path, chunk)


# ---------------------------------------------------------------------------------------------

def _kind(doc: Document) -> str:
    head = doc.data[:264]
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")):
        return ZIP
    if head.startswith(b"\x1f\x8b"):
        return GZIP
    if head.startswith(b"BZh"):
        return BZIP2
    if head.startswith(b"\xfd7zXZ\x00"):
        return XZ
    if head.startswith(b"7z\xbc\xaf\x27\x1c"):
        return SEVEN_Z
    if _is_tar(head):
        return TAR
    if doc.mime == TAR or doc.name.lower().endswith(".tar"):
        return TAR  # a pre-POSIX (v7) tar has no magic: its name says it
    raise CorruptDocument("not an archive this reader knows (no zip, tar, gzip, bzip2, xz or "
                          "7z signature)")


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    kind = _kind(doc)
    members = Members(ctx, sink, ctx.state.member_prefix)
    extractor = {ZIP: "zip", TAR: "tar", GZIP: "gzip", BZIP2: "bzip2", XZ: "xz",
                 SEVEN_Z: "7z"}[kind]
    try:
        if kind == ZIP:
            _read_zip(doc.data, members, ctx)
        elif kind == TAR:
            _read_tar(io.BytesIO(doc.data), members, ctx, charge=False)
        elif kind == SEVEN_Z:
            _read_7z(doc, members, ctx)
        else:
            inner = _read_compressed(doc, kind, members, ctx)
            if inner == "tar":
                extractor = f"tar+{extractor}"
    except CapReached as cap:
        raise members.stop(cap, extractor) from None
    return members.finish(extractor)


READER = Reader(
    name="archive",
    version=2,  # 2: members' own metadata in the sidecar (embedded); their readers' issue-35 text
    mimes=(ZIP, TAR, GZIP, BZIP2, XZ, SEVEN_Z, "application/x-gzip", "application/x-gtar",
           "application/x-compressed-tar", "application/x-xz-compressed-tar",
           "application/x-bzip2-compressed-tar"),
    extensions=(".zip", ".tar", ".tgz", ".tar.gz", ".gz", ".bz2", ".xz", ".7z", ".tbz2",
                ".txz"),
    # Members go through the other readers: their tools and settings are this reader's too
    tools=NESTED_TOOLS,
    uses_tool_deadline=True,
    settings=("max_depth", "max_members", "max_member_bytes", "max_unpacked_bytes",
              "max_compression_ratio", "max_parts", "pdf_engines", "max_pages", "ocr_max_pages",
              "ocr_dpi", "max_xml_bytes", "ocr_languages"),
    read=read,
    libraries=NESTED_LIBRARIES,
)
