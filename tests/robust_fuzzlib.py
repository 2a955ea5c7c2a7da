"""The fuzzing engine shared by ``tests/test_fuzz.py`` (a short deterministic slice) and
``bench/fuzz.py`` (the long run): seeds, mutations and the invariant.

Seeds come from the test fixtures (``tests/officegen.py``, ``tests/pdfgen.py``,
``tests/samples/**``) plus small HTML / CSV / TSV / e-mail / RTF / text / XML / image seeds
built here.  Mutations are of two kinds:

* **bytes** — bit flips, random bytes, truncation, deletion, insertion, duplication of a
  range, splicing with another seed, insertion of format tokens (``<!DOCTYPE``, ``\\bin``,
  ``stream``, ``&#``, a NUL, a BOM …);
* **structure** — for ZIP packages (DOCX/XLSX/PPTX/ODF): a member's contents mutated, two
  members' contents swapped, a member dropped, duplicated or renamed, the package re-zipped
  stored or deflated; for PDFs: one ``N 0 obj … endobj`` body mutated, two bodies swapped, one
  deleted or duplicated, a ``/Length`` or ``/Count`` changed (the xref table is left stale).

Every mutation is a tuple ``(op, a, b, payload)`` of plain values, so hypothesis can draw and
shrink them and a crash reproduces from the saved bytes alone.

The invariant (:func:`check`): MIME detection returns a string without raising (in memory and
from a file, the same answer), and ``read_document`` returns exactly one ``Outcome`` whose
status is ``ok``/``empty``/``unsupported``/``error`` (with a known ``error_kind`` when
``error``, non-blank text when ``ok``), and no exception escapes.  A ``MemoryError`` is
allowed (the worker turns it into ``error``/``memory``); anything else escaping is a reader bug
(the worker would record ``internal``).
"""

from __future__ import annotations

import io
import random
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "samples"
STATUSES = ("ok", "empty", "unsupported", "error")

# -- seeds ------------------------------------------------------------------------------------


def _png(width: int = 4, height: int = 3) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + bytes([(x * 40 + y * 20) & 0xFF for x in range(width)])
                   for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0,
                                                               0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _eml() -> bytes:
    return (b"From: Alice <alice@example.org>\r\nTo: bob@example.org\r\n"
            b"Subject: =?utf-8?q?Quarterly_r=C3=A9port?=\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n"
            b"Message-ID: <1@example.org>\r\nMIME-Version: 1.0\r\n"
            b"Content-Type: multipart/mixed; boundary=\"XX\"\r\n\r\n"
            b"--XX\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Content-Transfer-Encoding: quoted-printable\r\n\r\nHello Bob,=0A the r=C3=A9port.\r\n"
            b"--XX\r\nContent-Type: text/html\r\n\r\n<html><body><p>Hi <b>there</b></p></body>"
            b"</html>\r\n"
            b"--XX\r\nContent-Type: text/csv; name=\"t.csv\"\r\nContent-Disposition: attachment;"
            b" filename=\"t.csv\"\r\nContent-Transfer-Encoding: base64\r\n\r\n"
            b"YSxiLGMKMSwyLDMK\r\n"
            b"--XX\r\nContent-Type: message/rfc822\r\n\r\nFrom: c@example.org\r\nSubject: inner\r\n"
            b"Date: Mon, 1 Jan 2024 10:00:00 +0000\r\n\r\ninner body\r\n--XX--\r\n")


def small_seeds() -> list[tuple[str, str, bytes]]:
    """(family, file name, bytes) built in code: the text formats and an image."""
    html = (b"<!DOCTYPE html><html><head><title>T&amp;itle</title><style>p{}</style>"
            b"<script>var x='<p>no</p>';</script></head><body><h1>Head</h1><p>Para &eacute; "
            b"&#x263A; &#1234567;<br>two</p><table><tr><td>a</td><td>b</td></tr></table>"
            b"<pre>  keep\n  lines</pre><ul><li>one<li>two</ul><!-- c --></body></html>")
    xhtml = (b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body>'
             b"<p>xhtml text</p></body></html>")
    rtf = (b"{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Times;}}{\\info{\\title T}}"
           b"{\\*\\generator x;}\\pard Hello \\b bold\\b0 caf\\'e9 \\u8364? euro\\par"
           b"{\\field{\\*\\fldinst HYPERLINK \"x\"}{\\fldrslt link}}\\par"
           b"\\trowd\\cellx1000\\cellx2000 a\\cell b\\cell\\row {\\pict\\pngblip 89504e47}"
           b"\\bin4 \x00\x01\x02\x03 end}")
    return [
        ("markup", "page.html", html),
        ("markup", "page.xhtml", xhtml),
        ("delimited", "table.csv", b"name,qty,\"quoted, field\"\r\napple,3,\"a \"\"b\"\"\"\r\n"
                                   b"pear,5,x\r\n\xe9t\xe9,1,cp1252\r\n"),
        ("delimited", "table.tsv", b"a\tb\tc\n1\t2\t3\n\"x\ty\"\t\t\n"),
        ("mail", "message.eml", _eml()),
        ("rtf", "doc.rtf", rtf),
        ("text", "notes.txt", "Plain text, caf\u00e9, \u20ac, \u65e5\u672c\n\tTab\r\nCRLF\r"
                              "CR\n".encode()),
        ("text", "utf16.txt", "\ufeffUTF-16 text with BOM\n".encode("utf-16-le")),
        ("text", "nobom16.txt", "BOM-less UTF-16 text here\n".encode("utf-16-le")),
        ("text", "legacy.txt", b"cp1252 \x93quoted\x94 \x80 and latin \xff\n"),
        ("text", "data.json", b'{"k": ["v", 1, null, {"\\u00e9": true}]}\n'),
        ("text", "conf.xml", b'<?xml version="1.0"?><!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>'),
        ("text", "pic.svg", b'<svg xmlns="http://www.w3.org/2000/svg"><text>svg</text></svg>'),
        ("ocr", "image.png", _png()),
        ("ocr", "image.gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"),
        ("other", "blob.bin", bytes(range(256)) * 2),
    ]


def office_seeds() -> list[tuple[str, str, bytes]]:
    from tests import officegen as og

    out = [
        ("ooxml", "gen.docx", og.docx(og.w_p("Hello", "world") + og.w_p("Second para"),
                                      headers=[og.w_p("head")], footers=[og.w_p("foot")],
                                      footnotes='<w:footnote w:id="1">' + og.w_p("note")
                                      + "</w:footnote>")),
        ("ooxml", "gen.xlsx", og.xlsx([("S1", "sheet1.xml",
                                        '<row r="1"><c r="A1" t="s"><v>0</v></c>'
                                        '<c r="B1"><v>42</v></c><c r="C1" t="inlineStr"><is><t>'
                                        'inline</t></is></c></row>')], shared=["shared str"])),
        ("ooxml", "gen.pptx", og.pptx([(og.a_sp("Title", ph="title") + og.a_sp("body"),
                                        og.a_sp("notes"))])),
        ("odf", "gen.odt", og.odf("text", "<text:h>Head</text:h><text:p>Para <text:span>x"
                                  "</text:span><text:s text:c=\"3\"/>y</text:p>")),
        ("odf", "gen.ods", og.odf("spreadsheet", '<table:table table:name="T"><table:table-row>'
                                  '<table:table-cell table:number-columns-repeated="3">'
                                  "<text:p>c</text:p></table:table-cell></table:table-row>"
                                  "</table:table>")),
        ("odf", "gen.odp", og.odf("presentation", "<draw:page><draw:frame><draw:text-box>"
                                  "<text:p>slide</text:p></draw:text-box></draw:frame>"
                                  "</draw:page>")),
        ("odf", "gen.fodt", og.flat_odf("text", "<text:p>flat text</text:p>")),
        ("other", "ole.doc", og.ole2_blob()),
    ]
    for p in sorted((SAMPLES / "office").glob("*")):
        if p.suffix in (".docx", ".xlsx", ".pptx"):
            out.append(("ooxml", p.name, p.read_bytes()))
        elif p.suffix in (".odt", ".ods", ".odp"):
            out.append(("odf", p.name, p.read_bytes()))
    return out


def pdf_seeds() -> list[tuple[str, str, bytes]]:
    from tests import pdfgen as pg

    out = [
        ("pdf", "gen.pdf", pg.make_text_pdf(["first page text", "second page"], title="T")),
        ("pdf", "genz.pdf", pg.make_text_pdf(["compressed page"], compress=True)),
        ("pdf", "outline.pdf", pg.make_nested_outline()),
        ("pdf", "loop.pdf", pg.make_looping_outline()),
        ("pdf", "named.pdf", pg.make_named_dests()),
        ("pdf", "notounicode.pdf", pg.make_no_tounicode()),
        ("pdf", "zero.pdf", pg.make_zero_pages()),
        ("pdf", "junk.pdf", pg.make_junk_header("junk header")),
        ("pdf", "enc.pdf", pg.make_text_pdf(["owner only"], security=pg.RC4Security())),
        ("pdf", "encpw.pdf", pg.make_text_pdf(["secret"], security=pg.RC4Security(b"pw", bits=40))),
    ]
    for p in sorted((SAMPLES / "pdf").glob("*.pdf")):
        if p.stat().st_size <= 64 * 1024:  # the larger samples slow each iteration down
            out.append(("pdf", p.name, p.read_bytes()))
    return out


def all_seeds() -> list[tuple[str, str, bytes]]:
    return small_seeds() + office_seeds() + pdf_seeds()


# -- mutations --------------------------------------------------------------------------------

TOKENS = (
    b"\x00", b"\xff\xfe", b"\xef\xbb\xbf", b"\r", b"\n\n", b"<", b">", b"&", b"&#", b"&#x",
    b"<!DOCTYPE a [<!ENTITY e SYSTEM 'file:///etc/passwd'>]>", b"<!ENTITY x \"&x;&x;\">",
    b"<![CDATA[", b"]]>", b"</", b"<?xml version='1.0' encoding='utf-16'?>", b"\\bin999999 ",
    b"\\u-1", b"\\'", b"{\\*", b"{", b"}", b"\\par", b"obj", b"endobj", b"stream\n",
    b"endstream", b"/Length 999999", b"<<", b">>", b"/Type /Page", b"/Count -1", b"R",
    b"/Filter /FlateDecode", b"\"", b",", b"\t", b"=?utf-8?b?", b"--XX", b"Content-Type: ",
    b"charset=unknown-8bit", b"%PDF-1.7\n", b"PK\x03\x04", b"PK\x05\x06", b"\xc3\x28",
    b"\xed\xa0\x80", b"9" * 20, b"-1", b"\xf4\x90\x80\x80",
)

BYTE_OPS = ("flip", "set", "truncate", "delete", "insert", "dup", "splice", "token")
ZIP_OPS = ("zmember", "zswap", "zdrop", "zdup", "zrename", "zstore")
PDF_OPS = ("pobj", "pswap", "pdrop", "pdup", "plength")
OPS = BYTE_OPS + ZIP_OPS + PDF_OPS

Mutation = tuple[str, int, int, bytes]


def mutate_bytes(data: bytes, op: str, a: int, b: int, payload: bytes,
                 other: bytes = b"") -> bytes:
    n = len(data)
    if op == "flip":
        if not n:
            return payload[:1]
        i = a % n
        return data[:i] + bytes([data[i] ^ (1 << (b % 8))]) + data[i + 1:]
    if op == "set":
        if not n:
            return payload
        i = a % n
        chunk = payload or bytes([b % 256])
        return data[:i] + chunk + data[i + len(chunk):]
    if op == "truncate":
        return data[: a % (n + 1)]
    if op == "delete":
        if not n:
            return data
        i = a % n
        return data[:i] + data[i + 1 + b % 64:]
    if op == "insert":
        i = a % (n + 1)
        return data[:i] + (payload or bytes([b % 256])) + data[i:]
    if op == "dup":
        if not n:
            return data
        i = a % n
        length = 1 + b % min(n - i, 4096)
        times = 1 + (b >> 12) % 8
        return data[: i + length] + data[i: i + length] * times + data[i + length:]
    if op == "splice":
        if not other:
            return data
        i, j = a % (n + 1), b % (len(other) + 1)
        return data[:i] + other[j:j + 1 + (a >> 8) % 4096]
    if op == "token":
        tok = TOKENS[b % len(TOKENS)]
        i = a % (n + 1)
        return data[:i] + tok + data[i:]
    return data


def _zip_read(data: bytes) -> list[tuple[zipfile.ZipInfo, bytes]] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
            if len(infos) > 200 or sum(i.file_size for i in infos) > 32 << 20:
                return None
            return [(i, zf.read(i)) for i in infos]
    except Exception:  # noqa: BLE001 — not a readable zip (any more): fall back to bytes
        return None


def _zip_write(members: list[tuple[str, bytes]], stored: bool) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED) as zf:
        for name, body in members:
            zf.writestr(zipfile.ZipInfo(name), body) if name == "mimetype" else \
                zf.writestr(name, body)
    return buf.getvalue()


def mutate_zip(data: bytes, op: str, a: int, b: int, payload: bytes) -> bytes | None:
    entries = _zip_read(data)
    if not entries:
        return None
    members = [(i.filename, body) for i, body in entries]
    stored = all(i.compress_type == zipfile.ZIP_STORED for i, _ in entries)
    k = len(members)
    i, j = a % k, b % k
    if op == "zmember":  # byte-mutate one member (prefer the XML parts)
        xml = [x for x, (name, _) in enumerate(members) if name.endswith(".xml")]
        if xml:
            i = xml[a % len(xml)]
        name, body = members[i]
        sub = BYTE_OPS[b % len(BYTE_OPS)]
        sub = "token" if sub == "splice" else sub
        members[i] = (name, mutate_bytes(body, sub, a >> 3, b >> 3, payload))
    elif op == "zswap":
        (ni, bi), (nj, bj) = members[i], members[j]
        members[i], members[j] = (ni, bj), (nj, bi)
    elif op == "zdrop":
        del members[i]
    elif op == "zdup":
        name, body = members[i]
        members.insert(j, (name if b % 2 else name + "x", body))
    elif op == "zrename":
        name, body = members[i]
        members[i] = (mutate_bytes(name.encode(), "flip", a >> 2, b, b"").decode("utf-8",
                                                                                   "replace")
                      or "x", body)
    elif op == "zstore":
        stored = not stored
    try:
        return _zip_write(members, stored)
    except Exception:  # noqa: BLE001 — a name zipfile will not write: leave the bytes alone
        return None


_OBJ_RE = re.compile(rb"\d+\s+\d+\s+obj\b(.*?)\bendobj", re.S)


def mutate_pdf(data: bytes, op: str, a: int, b: int, payload: bytes) -> bytes | None:
    spans = [m.span(1) for m in _OBJ_RE.finditer(data[: 4 << 20])]
    if not spans:
        return None
    k = len(spans)
    (s1, e1), (s2, e2) = spans[a % k], spans[b % k]
    if op == "pobj":
        sub = BYTE_OPS[b % len(BYTE_OPS)]
        sub = "token" if sub == "splice" else sub
        body = mutate_bytes(data[s1:e1], sub, a >> 3, b >> 3, payload)
        return data[:s1] + body + data[e1:]
    if op == "pswap":
        if s1 == s2:
            return None
        if s1 > s2:
            (s1, e1), (s2, e2) = (s2, e2), (s1, e1)
        return data[:s1] + data[s2:e2] + data[e1:s2] + data[s1:e1] + data[e2:]
    if op == "pdrop":
        return data[:s1] + data[e1:]
    if op == "pdup":
        return data[:e1] + data[s2:e2] + data[e1:]
    if op == "plength":
        m = re.search(rb"/(Length|Count|Size|First|Last|Prev|N)\s+(-?\d+)", data[s1:e1])
        if not m:
            return None
        value = [b"0", b"-1", b"999999999", b"2147483648", b"1", b"3 0 R"][b % 6]
        at, end = s1 + m.start(2), s1 + m.end(2)
        return data[:at] + value + data[end:]
    return None


def apply(data: bytes, mutations: list[Mutation], other: bytes = b"") -> bytes:
    """Apply mutations in order; a structural op that does not apply becomes a byte op."""
    for op, a, b, payload in mutations:
        new: bytes | None = None
        if op in ZIP_OPS:
            new = mutate_zip(data, op, a, b, payload)
        elif op in PDF_OPS:
            new = mutate_pdf(data, op, a, b, payload)
        if new is None:
            new = mutate_bytes(data, op if op in BYTE_OPS else BYTE_OPS[a % len(BYTE_OPS)],
                               a, b, payload, other)
        data = new[: 8 << 20]  # keep inputs bounded: duplication can grow them
    return data


def random_mutations(rng: random.Random, family: str) -> list[Mutation]:
    """A random list of 1–6 mutations, structural ones favoured for their family."""
    ops: list[str] = list(BYTE_OPS)
    if family in ("ooxml", "odf"):
        ops += list(ZIP_OPS) * 2
    elif family == "pdf":
        ops += list(PDF_OPS) * 2
    out = []
    for _ in range(1 + min(5, int(rng.expovariate(0.7)))):
        payload = rng.randbytes(rng.choice((0, 1, 2, 4, 16)))
        out.append((rng.choice(ops), rng.getrandbits(32), rng.getrandbits(32), payload))
    return out


# -- the invariant ----------------------------------------------------------------------------


@dataclass
class Verdict:
    """What one input did: the reader selected, the outcome's status, or the escape."""

    mime: str
    reader: str
    status: str
    error_kind: str | None
    failure: str | None  # None when the invariant held


def fuzz_limits():
    from bastion.readers.base import Limits, MiB

    # small enough that mutated bombs and long runs stay quick; the caps still trigger
    return Limits(max_chars=1 * MiB, max_member_bytes=16 * MiB, max_xml_bytes=32 * MiB,
                  max_pages=50, max_output_bytes=8 * MiB, pdf_engines=("pdfium", "pdfplumber"))


def check(data: bytes, name: str, ctx: Any, file_dir: Path | None = None) -> Verdict:
    """Run detection and the reader in-process on one input; report any broken invariant."""
    from bastion.readers.base import Document
    from bastion.readers.detect import detect_bytes, detect_file
    from bastion.readers.dispatch import Outcome, read_document, select
    from bastion.readers.errors import ERROR_KINDS

    try:
        mime = detect_bytes(data, name)
    except Exception as e:  # noqa: BLE001
        return Verdict("?", "?", "escape", None, f"detect_bytes raised {type(e).__name__}: {e}")
    if not isinstance(mime, str) or not mime:
        return Verdict("?", "?", "escape", None, f"detect_bytes returned {mime!r}")
    if file_dir is not None:
        path = file_dir / "input"
        path.write_bytes(data)
        try:
            from bastion.readers.detect import HEAD_BYTES

            mime2 = detect_file(str(path), name, data[:HEAD_BYTES])
        except Exception as e:  # noqa: BLE001
            return Verdict(mime, "?", "escape", None,
                           f"detect_file raised {type(e).__name__}: {e}")
        if mime2 != mime:
            return Verdict(mime, "?", "escape", None,
                           f"detect_file says {mime2}, detect_bytes says {mime}")
    reader = select(mime, name)
    rname = reader.name if reader else "none"
    try:
        outcome = read_document(Document(data, name, mime), ctx)
    except MemoryError:
        return Verdict(mime, rname, "error", "memory", None)
    except Exception as e:  # noqa: BLE001
        return Verdict(mime, rname, "escape", None,
                       f"{rname} raised {type(e).__name__}: {str(e)[:200]}")
    if not isinstance(outcome, Outcome):
        return Verdict(mime, rname, "escape", None, f"read_document returned {outcome!r}")
    st = outcome.status
    problem = None
    if st not in STATUSES:
        problem = f"status {st!r}"
    elif st == "error" and outcome.error_kind not in ERROR_KINDS:
        problem = f"error_kind {outcome.error_kind!r}"
    elif st == "ok" and (not isinstance(outcome.text, str) or not outcome.text.strip()):
        problem = "ok without text"
    elif st != "ok" and outcome.text:
        problem = f"{st} with text"
    return Verdict(mime, rname, st if problem is None else "escape", outcome.error_kind,
                   problem)
