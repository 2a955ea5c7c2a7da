"""A small PDF writer for tests: pages of text, outlines, named destinations, RC4 encryption.

Objects are plain Python values — ``dict`` (a PDF dictionary, keys are names), ``list`` (an
array), ``int``/``float``, ``bool``, ``None`` (null), :class:`Name`, :class:`Ref`, ``bytes``
(a string; encrypted with the object's key when the file is encrypted) and :class:`Stream` —
serialised by :class:`PdfWriter`, which also writes the cross-reference table and the trailer.
:class:`PdfBuilder` makes the common documents (Helvetica text pages, image pages, outlines),
and the ``make_*`` functions at the bottom build the hostile files the reader tests use.

Encryption is the PDF 1.4 standard security handler, revisions 2 (40-bit) and 3 (128-bit),
written by hand from the PDF reference's algorithms 3.1–3.5 (MD5 + RC4), so the tests need no
PDF library that could share a bug with the readers under test.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field
from typing import Any, Union

PAD = bytes.fromhex("28BF4E5E4E758A4164004E56FFFA01082E2E00B6D0683E802F0CA9FE6453697A")


class Name(str):
    """A PDF name: ``Name("Type")`` is written ``/Type``."""


@dataclass(frozen=True)
class Ref:
    """An indirect reference ``num 0 R``."""

    num: int


@dataclass
class Stream:
    """A stream object: its dictionary (``/Length`` is added) and its already-encoded bytes."""

    dict: dict[str, Any]
    data: bytes


@dataclass(frozen=True)
class Raw:
    """Bytes written as they are, for objects no well-behaved writer would produce."""

    data: bytes


OutlineDest = Union[int, tuple[str, Any], None]


@dataclass
class OutlineItem:
    """An outline entry for :meth:`PdfBuilder.add_outline`.

    ``dest``: a 0-based page index (``/Dest [page /Fit]``), ``("goto", i)`` (a ``/A`` GoTo
    action), ``("name", b"x")`` (a named destination string), ``("page", Ref)`` or None.
    """

    title: bytes | str
    dest: OutlineDest = None
    children: list["OutlineItem"] = field(default_factory=list)


def rc4(key: bytes, data: bytes) -> bytes:
    """RC4 (the stream cipher of PDF's standard security handler)."""
    s = list(range(256))
    j = 0
    for i in range(256):
        j = (j + s[i] + key[i % len(key)]) & 0xFF
        s[i], s[j] = s[j], s[i]
    out = bytearray()
    i = j = 0
    for b in data:
        i = (i + 1) & 0xFF
        j = (j + s[i]) & 0xFF
        s[i], s[j] = s[j], s[i]
        out.append(b ^ s[(s[i] + s[j]) & 0xFF])
    return bytes(out)


def _pad(password: bytes) -> bytes:
    return (password + PAD)[:32]


class RC4Security:
    """The standard security handler, R2 (40-bit) or R3 (128-bit)."""

    def __init__(
        self, user: bytes = b"", owner: bytes = b"owner", bits: int = 128, permissions: int = -4,
        file_id: bytes = b"bastion-test-id!",
    ) -> None:
        if bits not in (40, 128):
            raise ValueError("bits must be 40 or 128")
        self.revision = 2 if bits == 40 else 3
        self.n = bits // 8
        self.p = permissions
        self.file_id = file_id
        self.o = self._owner_entry(owner or user, user)  # algorithm 3.3
        self.key = self._file_key(user)  # algorithm 3.2
        self.u = self._user_entry()  # algorithms 3.4 / 3.5

    def _owner_entry(self, owner: bytes, user: bytes) -> bytes:
        digest = hashlib.md5(_pad(owner)).digest()
        if self.revision >= 3:
            for _ in range(50):
                digest = hashlib.md5(digest).digest()
        key = digest[: self.n]
        out = rc4(key, _pad(user))
        if self.revision >= 3:
            for i in range(1, 20):
                out = rc4(bytes(b ^ i for b in key), out)
        return out

    def _file_key(self, user: bytes) -> bytes:
        h = hashlib.md5(_pad(user))
        h.update(self.o)
        h.update((self.p & 0xFFFFFFFF).to_bytes(4, "little"))
        h.update(self.file_id)
        digest = h.digest()
        if self.revision >= 3:
            for _ in range(50):
                digest = hashlib.md5(digest[: self.n]).digest()
        return digest[: self.n]

    def _user_entry(self) -> bytes:
        if self.revision == 2:
            return rc4(self.key, PAD)
        out = rc4(self.key, hashlib.md5(PAD + self.file_id).digest())
        for i in range(1, 20):
            out = rc4(bytes(b ^ i for b in self.key), out)
        return out + b"\x00" * 16

    def object_key(self, num: int) -> bytes:
        """Algorithm 3.1: the key for the strings and streams of object ``num`` (generation 0)."""
        digest = hashlib.md5(self.key + num.to_bytes(3, "little") + b"\x00\x00").digest()
        return digest[: min(self.n + 5, 16)]

    def encrypt_dict(self) -> dict[str, Any]:
        return {
            "Filter": Name("Standard"), "V": 1 if self.revision == 2 else 2,
            "R": self.revision, "Length": self.n * 8, "O": self.o, "U": self.u, "P": self.p,
        }


def _string(b: bytes) -> bytes:
    return b"<" + b.hex().encode() + b">"


class PdfWriter:
    """Numbered objects, serialised with a cross-reference table and a trailer."""

    def __init__(self) -> None:
        self.objects: dict[int, Any] = {}
        self._next = 1

    def reserve(self) -> Ref:
        ref = Ref(self._next)
        self._next += 1
        return ref

    def add(self, obj: Any) -> Ref:
        ref = self.reserve()
        self.objects[ref.num] = obj
        return ref

    def set(self, ref: Ref, obj: Any) -> None:
        self.objects[ref.num] = obj

    def _ser(self, obj: Any, key: bytes | None) -> bytes:
        if isinstance(obj, Raw):
            return obj.data
        if isinstance(obj, Name):
            return b"/" + obj.encode("latin-1")
        if isinstance(obj, Ref):
            return b"%d 0 R" % obj.num
        if obj is None:
            return b"null"
        if isinstance(obj, bool):
            return b"true" if obj else b"false"
        if isinstance(obj, int):
            return b"%d" % obj
        if isinstance(obj, float):
            return (b"%.4f" % obj).rstrip(b"0").rstrip(b".")
        if isinstance(obj, str):  # a text string in PDFDocEncoding (Latin-1 here)
            obj = obj.encode("latin-1")
        if isinstance(obj, bytes):
            return _string(rc4(key, obj) if key else obj)
        if isinstance(obj, list):
            return b"[" + b" ".join(self._ser(o, key) for o in obj) + b"]"
        if isinstance(obj, dict):
            body = b" ".join(
                self._ser(Name(k), None) + b" " + self._ser(v, key) for k, v in obj.items()
            )
            return b"<<" + body + b">>"
        raise TypeError(f"cannot write {type(obj).__name__}")

    def tobytes(
        self, root: Ref, *, info: Ref | None = None, security: RC4Security | None = None,
        version: bytes = b"1.4",
    ) -> bytes:
        out = bytearray(b"%PDF-" + version + b"\n%\xe2\xe3\xcf\xd3\n")
        enc_ref = self.add(security.encrypt_dict()) if security else None
        offsets: dict[int, int] = {}
        for num in sorted(self.objects):
            obj = self.objects[num]
            key = security.object_key(num) if security and num != enc_ref.num else None
            offsets[num] = len(out)
            out += b"%d 0 obj\n" % num
            if isinstance(obj, Stream):
                data = rc4(key, obj.data) if key else obj.data
                out += self._ser({**obj.dict, "Length": len(data)}, key)
                out += b"\nstream\n" + data + b"\nendstream"
            else:
                out += self._ser(obj, key)
            out += b"\nendobj\n"
        size = max(self.objects) + 1
        xref = len(out)
        out += b"xref\n0 %d\n0000000000 65535 f \n" % size
        for num in range(1, size):
            if num in offsets:
                out += b"%010d 00000 n \n" % offsets[num]
            else:
                out += b"0000000000 65535 f \n"
        trailer: dict[str, Any] = {"Size": size, "Root": root}
        if info is not None:
            trailer["Info"] = info
        if security is not None:
            trailer["Encrypt"] = enc_ref
            trailer["ID"] = [security.file_id, security.file_id]
        out += b"trailer\n" + self._ser(trailer, None) + b"\nstartxref\n%d\n%%%%EOF\n" % xref
        return bytes(out)


def text_content(text: str, size: int = 12) -> bytes:
    """A content stream showing ``text`` (lines split on newlines) in /F1."""
    ops = [b"BT /F1 %d Tf %d TL 72 720 Td" % (size, size + 2)]
    for line in text.split("\n"):
        escaped = line.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(")
        ops.append(b"(" + escaped.replace(b")", b"\\)") + b") Tj T*")
    ops.append(b"ET")
    return b"\n".join(ops)


class PdfBuilder:
    """A document of pages under one /Pages node, with a catalog, info and outline to edit."""

    def __init__(self, compress: bool = False) -> None:
        self.w = PdfWriter()
        self.compress = compress
        self.pages_ref = self.w.reserve()
        self.font = self.w.add({
            "Type": Name("Font"), "Subtype": Name("Type1"), "BaseFont": Name("Helvetica"),
            "Encoding": Name("WinAnsiEncoding"),
        })
        self.page_refs: list[Ref] = []
        self.catalog: dict[str, Any] = {"Type": Name("Catalog"), "Pages": self.pages_ref}
        self.info: dict[str, Any] = {}
        self.named: dict[bytes, int] = {}  # named destinations -> 0-based page index
        self.page_count: int | None = None  # overrides /Count (for broken page trees)

    def stream(self, data: bytes, extra: dict[str, Any] | None = None) -> Stream:
        d = dict(extra or {})
        if self.compress:
            d["Filter"] = Name("FlateDecode")
            data = zlib.compress(data)
        return Stream(d, data)

    def add_page(self, content: bytes, resources: dict[str, Any] | None = None) -> Ref:
        res = resources if resources is not None else {"Font": {"F1": self.font}}
        ref = self.w.add({
            "Type": Name("Page"), "Parent": self.pages_ref, "MediaBox": [0, 0, 612, 792],
            "Resources": res, "Contents": self.w.add(self.stream(content)),
        })
        self.page_refs.append(ref)
        return ref

    def add_text_page(self, text: str) -> Ref:
        return self.add_page(text_content(text))

    def add_image_page(self, gray: bytes, width: int, height: int) -> Ref:
        """A page whose only content is an 8-bit grayscale image scaled to the page width
        (or to its height, for a tall image), at the top of the page."""
        image = self.w.add(Stream({
            "Type": Name("XObject"), "Subtype": Name("Image"), "Width": width,
            "Height": height, "ColorSpace": Name("DeviceGray"), "BitsPerComponent": 8,
            "Filter": Name("FlateDecode"),
        }, zlib.compress(gray)))
        scale = min(540 / width, 720 / height)
        w, h = width * scale, height * scale
        content = b"q %.2f 0 0 %.2f 36 %.2f cm /Im1 Do Q" % (w, h, 792 - 36 - h)
        return self.add_page(content, {"XObject": {"Im1": image}})

    def add_outline(self, items: list[OutlineItem]) -> Ref:
        root = self.w.reserve()
        first, last = self._outline_level(items, root)
        self.w.set(root, {"Type": Name("Outlines"), "First": first, "Last": last,
                          "Count": len(items)})
        self.catalog["Outlines"] = root
        return root

    def _outline_level(self, items: list[OutlineItem], parent: Ref) -> tuple[Ref, Ref]:
        refs = [self.w.reserve() for _ in items]
        for i, (item, ref) in enumerate(zip(items, refs)):
            d: dict[str, Any] = {"Title": item.title, "Parent": parent}
            if i > 0:
                d["Prev"] = refs[i - 1]
            if i + 1 < len(refs):
                d["Next"] = refs[i + 1]
            if item.children:
                d["First"], d["Last"] = self._outline_level(item.children, ref)
                d["Count"] = len(item.children)
            d.update(self._dest(item.dest))
            self.w.set(ref, d)
        return refs[0], refs[-1]

    def _dest(self, dest: OutlineDest) -> dict[str, Any]:
        if dest is None:
            return {}
        if isinstance(dest, int):
            return {"Dest": [self.page_refs[dest], Name("Fit")]}
        kind, value = dest
        if kind == "goto":
            return {"A": {"S": Name("GoTo"), "D": [self.page_refs[value], Name("Fit")]}}
        if kind == "name":
            return {"Dest": value}
        if kind == "page":
            return {"Dest": [value, Name("Fit")]}
        raise ValueError(kind)

    def build(self, *, security: RC4Security | None = None, version: bytes = b"1.4") -> bytes:
        count = self.page_count if self.page_count is not None else len(self.page_refs)
        self.w.set(self.pages_ref, {"Type": Name("Pages"), "Kids": list(self.page_refs),
                                    "Count": count})
        if self.named:
            names: list[Any] = []
            for name in sorted(self.named):
                names += [name, [self.page_refs[self.named[name]], Name("Fit")]]
            self.catalog["Names"] = {"Dests": self.w.add({"Names": names})}
        root = self.w.add(self.catalog)
        info = self.w.add(self.info) if self.info else None
        return self.w.tobytes(root, info=info, security=security, version=version)


def utf16_text(s: str) -> bytes:
    """A PDF text string in UTF-16BE with its byte-order mark."""
    return b"\xfe\xff" + s.encode("utf-16-be")


def make_text_pdf(
    pages: list[str], *, title: bytes | str | None = None, compress: bool = False,
    security: RC4Security | None = None,
) -> bytes:
    """One page of Helvetica text per entry of ``pages``."""
    b = PdfBuilder(compress=compress)
    for text in pages:
        b.add_text_page(text)
    if title is not None:
        b.info["Title"] = title
    return b.build(security=security)


def make_many_pages(n: int, marker: str = "page") -> bytes:
    """``n`` pages, page i reading ``f"{marker} {i} ..."`` over a few lines (Flate)."""
    b = PdfBuilder(compress=True)
    for i in range(1, n + 1):
        b.add_text_page(f"{marker} {i} begins here\n" + "lorem ipsum dolor sit amet\n" * 6
                        + f"end of {marker} {i}")
    return b.build()


def make_nested_outline() -> bytes:
    b = PdfBuilder()
    for i in range(1, 5):
        b.add_text_page(f"Chapter page {i}")
    b.add_outline([
        OutlineItem("Introduction", 0),
        OutlineItem("Part One", ("goto", 1), [
            OutlineItem("Section 1.1", 1),
            OutlineItem("Section 1.2", 2, [OutlineItem("Deep item", 3)]),
        ]),
        OutlineItem("No destination"),
        OutlineItem("   Appendix \xe9  ", 3),
    ])
    return b.build()


def make_looping_outline() -> bytes:
    """An outline whose /Next chain loops back to its first item and whose child is its parent."""
    b = PdfBuilder()
    b.add_text_page("Looping outline body")
    b.add_text_page("second page")
    root, a, c, kid = b.w.reserve(), b.w.reserve(), b.w.reserve(), b.w.reserve()
    b.w.set(root, {"Type": Name("Outlines"), "First": a, "Last": c})
    b.w.set(a, {"Title": b"Loop A", "Parent": root, "Next": c, "First": kid,
                "Dest": [b.page_refs[0], Name("Fit")]})
    b.w.set(c, {"Title": b"Loop B", "Parent": root, "Next": a,
                "Dest": [b.page_refs[1], Name("Fit")]})
    b.w.set(kid, {"Title": b"Loop child", "Parent": a, "First": a, "Next": kid,
                  "Dest": [b.page_refs[1], Name("Fit")]})
    b.catalog["Outlines"] = root
    return b.build()


def make_long_outline(n: int) -> bytes:
    """A flat outline of ``n`` items, all pointing to page 1."""
    b = PdfBuilder()
    b.add_text_page("long outline")
    b.add_outline([OutlineItem(f"item {i}", 0) for i in range(n)])
    return b.build()


def make_named_dests() -> bytes:
    b = PdfBuilder()
    for i in range(1, 4):
        b.add_text_page(f"Named page {i}")
    b.named = {b"chap.two": 1, b"chap.three": 2}
    b.add_outline([
        OutlineItem("By name", ("name", b"chap.two")),
        OutlineItem("Unknown name", ("name", b"no.such.dest")),
        OutlineItem("Dangling ref", ("page", Ref(999))),
        OutlineItem("By array", 2),
    ])
    return b.build()


def make_no_tounicode() -> bytes:
    """Text in a Type3 font without /ToUnicode whose glyph codes are control characters, the
    way subset fonts from some producers come out: no engine can map them to letters."""
    b = PdfBuilder()
    glyph = b.w.add(Stream({}, b"500 0 0 0 500 700 d1 0 0 500 700 re f"))
    codes = list(range(1, 30))
    font = b.w.add({
        "Type": Name("Font"), "Subtype": Name("Type3"), "FontBBox": [0, 0, 500, 700],
        "FontMatrix": [0.001, 0, 0, 0.001, 0, 0], "FirstChar": 1, "LastChar": 29,
        "Widths": [500] * 29,
        "Encoding": {"Type": Name("Encoding"),
                     "Differences": [1] + [Name(f"g{c}") for c in codes]},
        "CharProcs": {f"g{c}": glyph for c in codes},
        "Resources": {},
    })
    line = bytes(codes)
    ops = b"BT /T3 12 Tf 72 720 Td " + b"".join(
        _string(line) + b" Tj 0 -14 Td " for _ in range(20)) + b"ET"
    b.add_page(ops, {"Font": {"T3": font}})
    return b.build()


def make_positioned_words(lines: list[list[str]], gap: float, char_space: float = 0.0,
                          pages: int = 1) -> bytes:
    """Words placed one by one with ``Td`` and no space characters between them, ``gap``
    points apart (at 10 pt), in a Type3 font whose glyphs (a-z) are 5 points wide: the way
    some typesetters set words.  ``char_space`` (``Tc``) spaces the letters too."""
    b = PdfBuilder()
    letters = "abcdefghijklmnopqrstuvwxyz"
    glyph = b.w.add(Stream({}, b"500 0 0 0 450 700 d1 0 0 450 700 re f"))
    font = b.w.add({
        "Type": Name("Font"), "Subtype": Name("Type3"), "FontBBox": [0, 0, 500, 700],
        "FontMatrix": [0.001, 0, 0, 0.001, 0, 0], "FirstChar": 97, "LastChar": 122,
        "Widths": [500] * 26,
        "Encoding": {"Type": Name("Encoding"), "Differences": [97] + [Name(c) for c in letters]},
        "CharProcs": {c: glyph for c in letters}, "Resources": {},
    })
    for _ in range(pages):
        ops = [b"BT /T3 10 Tf %.3f Tc 72 720 Td" % char_space]
        for words in lines:
            x = 0.0
            for word in words:
                ops.append(b"(%s) Tj" % word.encode("ascii"))
                advance = (5 + char_space) * len(word) + gap
                ops.append(b"%.3f 0 Td" % advance)
                x += advance
            ops.append(b"%.3f -14 Td" % -x)
        ops.append(b"ET")
        b.add_page(b"\n".join(ops), {"Font": {"T3": font}})
    return b.build()


def make_failing_page() -> bytes:
    """Three pages of text; page 2's /MediaBox holds a name (pdfminer fails on that page) and
    the page tree claims a fourth page that does not exist (PDFium fails to load it)."""
    b = PdfBuilder()
    b.add_text_page("First good page")
    ref = b.add_text_page("Second page text")
    b.w.objects[ref.num]["MediaBox"] = Raw(b"[0 0 /Foo 792]")
    b.add_text_page("Third good page")
    b.page_count = 4
    return b.build()


def make_zero_pages() -> bytes:
    return PdfBuilder().build()


def make_junk_header(text: str) -> bytes:
    """A valid PDF behind 2,000 bytes of junk: PDFium looks for the header only in the first
    1,024 bytes and gives up; pdfminer and poppler recover."""
    return b"J" * 2000 + b"\n" + make_text_pdf([text])


def render_text_gray(text: str, size: int = 48, turned: int = 0) -> tuple[bytes, int, int]:
    """``text`` (lines split on newlines) in black on white with Pillow's default font,
    turned ``turned`` degrees counter-clockwise (a scan lying on its side or upside down):
    (8-bit gray samples, width, height)."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=size)
    probe = ImageDraw.Draw(Image.new("L", (1, 1)))
    left, top, right, bottom = probe.multiline_textbbox((0, 0), text, font=font)
    width, height = right - left + 2 * size, bottom - top + 2 * size
    im = Image.new("L", (width, height), 255)
    ImageDraw.Draw(im).multiline_text((size - left, size - top), text, font=font, fill=0)
    if turned:
        im = im.rotate(turned, expand=True, fillcolor=255)
    return im.tobytes(), im.width, im.height


def make_image_only(text: str, turned: int = 0) -> bytes:
    """One page holding ``text`` only as pixels (a scanned page), turned ``turned`` degrees
    counter-clockwise."""
    b = PdfBuilder()
    gray, width, height = render_text_gray(text, turned=turned)
    b.add_image_page(gray, width, height)
    return b.build()


GERMAN_PROSE = (
    "Größere Änderungen überließ man „den Fachleuten“ – so hieß es.\n"
    "Über die Straße fuhr ein Öltankwagen; die Bürger schüttelten den Kopf.\n"
    "Süße Äpfel, bittere Öfen: Maßstäbe für Qualität gibt es überall.\n"
)


def make_german_prose(pages: int = 3) -> bytes:
    """German prose (umlauts, ß, „…“ and – ) in Helvetica with /WinAnsiEncoding, pages of it."""
    return make_text_pdf([GERMAN_PROSE * 6 for _ in range(pages)], compress=True)


def _box_font(b: PdfBuilder, names: dict[int, str]) -> Ref:
    """A Type3 font whose glyphs are boxes, code -> glyph name as given (no /ToUnicode)."""
    glyph = b.w.add(Stream({}, b"500 0 0 0 450 700 d1 0 0 450 700 re f"))
    first, last = min(names), max(names)
    differences: list[Any] = []
    for code in sorted(names):
        differences += [code, Name(names[code])]
    return b.w.add({
        "Type": Name("Font"), "Subtype": Name("Type3"), "FontBBox": [0, 0, 500, 700],
        "FontMatrix": [0.001, 0, 0, 0.001, 0, 0], "FirstChar": first, "LastChar": last,
        "Widths": [500] * (last - first + 1),
        "Encoding": {"Type": Name("Encoding"), "Differences": differences},
        "CharProcs": {name: glyph for name in set(names.values())}, "Resources": {},
    })


def make_raw_code_punctuation(text: str) -> bytes:
    """``text`` (cp1252) in a Type3 font whose letters have their standard glyph names but
    whose punctuation glyphs have private names: engines give the raw codes, so „ “ – come
    out as C1 control characters (U+0084, U+0093, U+0096), as from fonts of some producers."""
    b = PdfBuilder()
    raw = text.encode("cp1252")
    names = {c: f"g{c}" for c in set(raw)}
    for c in set(raw):
        ch = bytes([c]).decode("cp1252")
        if ch.isascii() and ch.isalpha():
            names[c] = ch
        elif ch == " ":
            names[c] = "space"
    font = _box_font(b, names)
    ops = [b"BT /T3 10 Tf 14 TL 72 720 Td"]
    for line in raw.split(b"\n"):
        ops.append(_string(line) + b" Tj T*")
    ops.append(b"ET")
    b.add_page(b"\n".join(ops), {"Font": {"T3": font}})
    return b.build()


def make_mixed_scan(text_pages: list[str], scanned: dict[int, str]) -> bytes:
    """Text pages with scanned pages among them: ``scanned`` maps a 0-based position to the
    text drawn as pixels there (a typed cover page in front of an office scan)."""
    b = PdfBuilder()
    texts = iter(text_pages)
    for i in range(len(text_pages) + len(scanned)):
        if i in scanned:
            gray, width, height = render_text_gray(scanned[i])
            b.add_image_page(gray, width, height)
        else:
            b.add_text_page(next(texts))
    return b.build()


def make_garbage_page_among_text(
    text_pages: list[str], garbage_at: int, scanned: str | None = None,
) -> bytes:
    """Text pages with one page whose text layer is in a font whose codes map to control
    characters.  With ``scanned``, that layer is invisible (render mode 3) over an image of
    ``scanned``: an OCR layer written with a broken font, the pixels still readable."""
    b = PdfBuilder()
    font = _box_font(b, {c: f"g{c}" for c in range(1, 30)})
    texts = iter(text_pages)
    for i in range(len(text_pages) + 1):
        if i != garbage_at:
            b.add_text_page(next(texts))
            continue
        mode = b"3 Tr " if scanned else b""
        ops = b"BT /T3 12 Tf " + mode + b"72 720 Td " + b"".join(
            _string(bytes(range(1, 30))) + b" Tj 0 -14 Td " for _ in range(20)) + b"ET"
        resources: dict[str, Any] = {"Font": {"T3": font}}
        if scanned:
            gray, width, height = render_text_gray(scanned)
            resources["XObject"] = {"Im1": b.w.add(Stream({
                "Type": Name("XObject"), "Subtype": Name("Image"), "Width": width,
                "Height": height, "ColorSpace": Name("DeviceGray"), "BitsPerComponent": 8,
                "Filter": Name("FlateDecode")}, zlib.compress(gray)))}
            h = 540 * height / width
            ops = b"q 540 0 0 %.2f 36 %.2f cm /Im1 Do Q\n" % (h, 792 - 36 - h) + ops
        b.add_page(ops, resources)
    return b.build()


def make_annotated(page_text: str | None, notes: list[tuple[str, str]]) -> bytes:
    """One page (with ``page_text``, or blank) carrying annotations ``(subtype, contents)``:
    ``Text`` (a sticky note, given a /Popup as viewers write them), ``FreeText``,
    ``Highlight``, …; a /Link and a /Widget are added too (they carry no note)."""
    b = PdfBuilder()
    page = b.add_page(text_content(page_text) if page_text else b"")
    annots: list[Ref] = []
    for k, (subtype, contents) in enumerate(notes):
        rect = [72, 600 - 40 * k, 300, 630 - 40 * k]
        d: dict[str, Any] = {"Type": Name("Annot"), "Subtype": Name(subtype), "Rect": rect,
                             "Contents": utf16_text(contents), "P": page}
        if subtype == "FreeText":
            d["DA"] = b"/Helv 10 Tf 0 g"
        if subtype == "Highlight":
            d["QuadPoints"] = [72, 630, 300, 630, 72, 600, 300, 600]
        ref = b.w.add(d)
        annots.append(ref)
        if subtype == "Text":
            popup = b.w.add({"Type": Name("Annot"), "Subtype": Name("Popup"),
                             "Rect": [320, 600, 500, 700], "Parent": ref, "P": page,
                             "Contents": utf16_text(contents)})
            d["Popup"] = popup
            annots.append(popup)
    annots.append(b.w.add({"Type": Name("Annot"), "Subtype": Name("Link"),
                           "Rect": [72, 100, 200, 120], "Contents": b"link words",
                           "A": {"S": Name("URI"), "URI": b"https://example.org"}}))
    annots.append(b.w.add({"Type": Name("Annot"), "Subtype": Name("Widget"), "FT": Name("Tx"),
                           "T": b"field", "V": b"field value", "Rect": [72, 60, 200, 80],
                           "Contents": b"widget words"}))
    b.w.objects[page.num]["Annots"] = annots
    return b.build()


ROTATED_LINES = ["alpha bravo charlie delta", "echo foxtrot golf hotel",
                 "india juliet kilo lima", "mike november oscar papa"]


def rotated_content(angle: int, x: float, y: float, lines: list[str], size: int = 12) -> bytes:
    """``lines`` set with a text matrix turned ``angle`` degrees counter-clockwise (0, 90,
    180, 270), the first line's start at (x, y), each next line below it in the text's own
    frame."""
    c = {0: 1, 90: 0, 180: -1, 270: 0}[angle]
    s = {0: 0, 90: 1, 180: 0, 270: -1}[angle]
    ops = []
    for k, line in enumerate(lines):
        ox, oy = x + k * (size + 2) * s, y - k * (size + 2) * c
        escaped = line.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(")
        ops.append(b"BT /F1 %d Tf %d %d %d %d %.1f %.1f Tm (%s) Tj ET"
                   % (size, c, s, -s, c, ox, oy, escaped.replace(b")", b"\\)")))
    return b"\n".join(ops)


def make_rotated_text(lines: list[str] | None = None) -> bytes:
    """Four pages, the same lines on each, set at 0, 90, 180 and 270 degrees; then a page with
    /Rotate 90 whose text is turned to read upright on screen (a landscape page), and a page
    with a horizontal heading over a block of text turned 90 degrees (a table's side label)."""
    lines = lines or ROTATED_LINES
    b = PdfBuilder()
    for angle, x, y in ((0, 72, 720), (90, 300, 100), (180, 540, 300), (270, 100, 600)):
        b.add_page(rotated_content(angle, x, y, lines))
    ref = b.add_page(rotated_content(90, 100, 72, lines))
    b.w.objects[ref.num]["Rotate"] = 270
    b.add_page(text_content("Heading above the side label") + b"\n"
               + rotated_content(90, 300, 200, lines))
    return b.build()


def make_mapped_text(lines: list[str]) -> bytes:
    """``lines`` in a Type3 box font whose /ToUnicode maps each code to a character of the
    text, beyond U+FFFF too (a surrogate pair in the CMap): PDFium's text then holds
    characters its UTF-16 output writes as two units."""
    b = PdfBuilder()
    chars = sorted(set("".join(lines)) - {" "})
    codes = {ch: 0x41 + i for i, ch in enumerate(chars)}  # at most 62 characters
    codes[" "] = 0x20
    ref = _box_font(b, {c: "space" if ch == " " else f"g{c}" for ch, c in codes.items()})
    pairs = "\n".join(f"<{codes[ch]:02x}> <{ch.encode('utf-16-be').hex()}>" for ch in chars)
    cmap = (f"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n"
            f"1 begincodespacerange <00> <ff> endcodespacerange\n"
            f"{len(chars)} beginbfchar\n{pairs}\nendbfchar\n"
            f"endcmap CMapName currentdict /CMap defineresource pop end end").encode()
    b.w.objects[ref.num]["ToUnicode"] = b.w.add(Stream({}, cmap))
    ops = [b"BT /T3 10 Tf 14 TL 72 720 Td"]
    for line in lines:
        ops.append(_string(bytes(codes[ch] for ch in line)) + b" Tj T*")
    ops.append(b"ET")
    b.add_page(b"\n".join(ops), {"Font": {"T3": ref}})
    return b.build()
