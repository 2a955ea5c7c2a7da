"""The detection table: real files of every supported type, and the traps around them.

Each row is a real file (from tests/samples/, origins in each folder's ORIGIN.md) under the
name it has or a misleading one, or a trap built from real files: text that mentions magic
numbers, a ZIP holding a PDF, a PDF behind junk as readers accept it, an HTML file named
``.txt``.  The whole table holds for ``detect_bytes`` and for the walk's ``detect_file``.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
from pathlib import Path
from typing import Callable

import pytest

from bastion.readers import detect
from bastion.readers.base import Document, Limits
from bastion.readers.detect import detect_bytes, detect_file
from bastion.readers.dispatch import read_document
from bastion.readers.runtime.context import LocalContext

SAMPLES = Path(__file__).parent / "samples"
DOCX = detect.DOCX
XLSX = detect.XLSX
PPTX = detect.PPTX
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"


def sample(rel: str) -> bytes:
    return (SAMPLES / rel).read_bytes()


def zipped(members: list[tuple[str, bytes]], stored: bool = False) -> bytes:
    buf = io.BytesIO()
    method = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            zf.writestr(info, data, compress_type=method)
    return buf.getvalue()


def tarred(members: list[tuple[str, bytes]], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pre_posix_tar(members: list[tuple[str, bytes]]) -> bytes:
    """A tar whose headers carry no ``ustar`` magic (7th-edition Unix layout)."""
    data = bytearray(tarred(members, tarfile.USTAR_FORMAT))
    at = 0
    while at + 512 <= len(data) and data[at]:
        header = data[at : at + 512]
        header[257:265] = b"\x00" * 8  # magic and version
        header[265:345] = b"\x00" * 80  # uname, gname
        header[148:156] = b" " * 8
        header[148:156] = b"%06o\x00 " % sum(header)
        data[at : at + 512] = header
        size = int(bytes(header[124:136]).strip(b"\x00 ") or b"0", 8)
        at += 512 + (size + 511) // 512 * 512
    return bytes(data)


PDF = "pdf/crazyones.pdf"
GERMAN = "text/windows-1252-german.txt"
MARKDOWN_PDF = (
    b"# Notes on the PDF format\n\n"
    b"A PDF file starts with a header line such as `%PDF-1.7`, then a comment with\n"
    b"binary bytes, then objects.  Older files say %PDF-1.4.\n\n"
    b"    %PDF-1.7\n    1 0 obj << /Type /Catalog >> endobj\n\nMDPDFMARK ends here.\n"
)
PJL = b"\x1b%-12345X@PJL JOB NAME=\"scan\"\r\n@PJL ENTER LANGUAGE = PDF\r\n"

# label -> (how to make the bytes, file name, expected MIME type)
Row = tuple[Callable[[], bytes], str, str]
TABLE: dict[str, Row] = {
    # real files of every supported type, under their own names and without a name
    **{f"pdf-{p.stem}": ((lambda p=p: p.read_bytes()), p.name, "application/pdf")
       for p in sorted((SAMPLES / "pdf").glob("*.pdf"))},
    "pdf-as-txt": (lambda: sample("pdf/crazyones.pdf"), "crazyones.txt", "application/pdf"),
    "docx": (lambda: sample("office/hdr-header-footer.docx"), "a.docx", DOCX),
    "docx-no-ext": (lambda: sample("office/blk-paras-and-tables.docx"), "report", DOCX),
    "xlsx": (lambda: sample("office/reveng1.xlsx"), "a.xlsx", XLSX),
    "xlsx-backslash-names": (lambda: sample("office/apachepoi_49609.xlsx"), "poi", XLSX),
    "pptx": (lambda: sample("office/sld-notes.pptx"), "deck", PPTX),
    "odt": (lambda: sample("office/serious_poem.odt"), "poem.zip", ODT),
    "ods": (lambda: sample("office/pythagoras.ods"), "calc", ODS),
    "odp": (lambda: sample("office/cols.odp"), "slides.pptx", ODP),
    "epub": (lambda: sample("detect/serious_poem.epub"), "book", detect.EPUB),
    "doc": (lambda: sample("detect/word97.doc"), "legacy", detect.DOC),
    "doc-named-xls": (lambda: sample("detect/word97.doc"), "wrong.xls", detect.DOC),
    "xls": (lambda: sample("detect/excel97.xls"), "legacy", detect.XLS),
    "ppt": (lambda: sample("detect/powerpoint97.ppt"), "legacy", detect.PPT),
    "msg": (lambda: sample("detect/outlook.msg"), "mail", detect.MSG),
    "ooxml-encrypted": (lambda: sample("detect/encrypted.docx"), "secret.docx",
                        detect.OOXML_ENCRYPTED),
    "7z": (lambda: sample("detect/archive.7z"), "archive", "application/x-7z-compressed"),
    "rtf": (lambda: sample("rtf/la_dame.rtf"), "letter.txt", "application/rtf"),
    "html": (lambda: sample("html/wikipedia-code.html"), "page.html", "text/html"),
    "eml": (lambda: sample("eml/sample.eml"), "message", "message/rfc822"),
    "eml-multipart": (lambda: sample("eml/multipart.eml"), "m.eml", "message/rfc822"),
    "csv": (lambda: sample("csv/FY09_EDU_Recipients_by_State.csv"), "t.csv", "text/csv"),
    "tsv": (lambda: sample("csv/dummy.tsv"), "t.tsv", "text/tab-separated-values"),
    "text-cp1252": (lambda: sample(GERMAN), "notes", "text/plain"),
    "text-shift-jis": (lambda: sample("text/shift_jis-japanese.txt"), "readme", "text/plain"),
    "text-utf32-nobom": (lambda: sample("text/utf-32le-nobom.txt"), "ticks", "text/plain"),
    "xml-declared": (lambda: sample("text/iso-8859-5-russian-declared.xml"), "feed",
                     "application/xml"),
    "markdown": (lambda: sample("pdf/ORIGIN.md"), "ORIGIN.md", "text/markdown"),
    # archives written by the standard library's own writers, holding real files
    "zip": (lambda: zipped([("a.txt", sample(GERMAN)), ("b.rtf", sample("rtf/la_dame.rtf"))]),
            "files.docx", detect.ZIP),
    "tar": (lambda: tarred([("a.txt", sample(GERMAN))]), "files", detect.TAR),
    "tar-gnu": (lambda: tarred([("a.txt", sample(GERMAN))], tarfile.GNU_FORMAT), "x.txt",
                detect.TAR),
    "tar-pre-posix": (lambda: pre_posix_tar([("notes.txt", sample(GERMAN))]), "old",
                      detect.TAR),
    "tar-of-a-pdf": (lambda: tarred([("p.pdf", sample("pdf/crazyones.pdf"))]), "t.pdf",
                     detect.TAR),
    "gzip": (lambda: gzip.compress(sample(GERMAN), mtime=0), "a.txt.gz", "application/gzip"),
    "tar-gz": (lambda: gzip.compress(tarred([("a.txt", sample(GERMAN))]), mtime=0), "a.tgz",
               "application/gzip"),
    "bzip2": (lambda: bz2.compress(sample(GERMAN)), "a.bz2", "application/x-bzip2"),
    "xz": (lambda: lzma.compress(sample(GERMAN)), "a.xz", "application/x-xz"),
    # traps: text that mentions magic numbers stays text
    "md-mentions-pdf-header": (lambda: MARKDOWN_PDF, "pdf-notes.md", "text/markdown"),
    "txt-mentions-pdf-header": (lambda: MARKDOWN_PDF, "notes", "text/plain"),
    "txt-starts-with-id3": (lambda: b"ID3 tags hold the title of an MP3 file.\n", "n.txt",
                            "text/plain"),
    "txt-starts-with-bzh": (lambda: b"BZh9 is how a bzip2 stream begins.\n", "n",
                            "text/plain"),
    "txt-starts-with-oggs": (lambda: b"OggS pages carry Vorbis audio.\n", "n", "text/plain"),
    "txt-ustar-at-257": (lambda: b"x" * 257 + b"ustar is the tar magic\n", "n", "text/plain"),
    # traps: a container's magic at offset 0 wins over a signature later in the first KiB
    "zip-holding-a-pdf": (lambda: zipped([("scan.pdf", sample(PDF))], stored=True),
                          "scan.pdf", detect.ZIP),
    "zip-holding-a-pdf-and-text": (lambda: zipped([("a.pdf", sample(PDF)),
                                                   ("b.txt", sample(GERMAN))], stored=True),
                                   "bundle", detect.ZIP),
    # traps: a PDF behind junk, where pdf.js and poppler still find it (first 1024 bytes)
    "pdf-after-pjl": (lambda: PJL + sample(PDF), "job.prn", "application/pdf"),
    "pdf-after-binary-junk": (lambda: bytes(range(256)) * 3 + sample(PDF), "x",
                              "application/pdf"),
    "pdf-after-http-headers": (lambda: b"HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\n"
                               b"Content-Length: 4711\r\n\r\n" + sample(PDF), "download",
                               "application/pdf"),
    "pdf-header-past-1024": (lambda: bytes(range(256)) * 5 + sample(PDF), "x", detect.OCTET),
    # traps: an HTML file named .txt is HTML
    "html-named-txt": (lambda: sample("text/windows-1255-hebrew.html"), "page.txt",
                       "text/html"),
    "html-utf32-named-txt": (lambda: sample("text/utf-32le-nobom-declares-utf16.html"),
                             "page.txt", "text/html"),
    "binary-named-txt": (lambda: bytes(range(1, 8)) * 300, "weird.txt", detect.OCTET),
}


@pytest.mark.parametrize("label", sorted(TABLE))
def test_detection_table(label: str, tmp_path: Path) -> None:
    make, name, expected = TABLE[label]
    data = make()
    assert detect_bytes(data, name) == expected
    path = tmp_path / name
    path.write_bytes(data)
    assert detect_file(path, name, data[: detect.HEAD_BYTES]) == expected


def test_table_covers_every_real_sample() -> None:
    """Every sample folder of a format detection knows has a row."""
    used = {p.parent.name for p in SAMPLES.rglob("*") if p.is_file()}
    assert used >= {"pdf", "office", "html", "csv", "eml", "rtf", "text", "detect"}
    rows = " ".join(str(make.__code__.co_consts) for make, _, _ in TABLE.values())
    for p in (SAMPLES / "detect").iterdir():
        if p.name != "ORIGIN.md":
            assert f"detect/{p.name}" in rows, p.name


@pytest.mark.parametrize("label", ["md-mentions-pdf-header", "txt-mentions-pdf-header"])
def test_text_mentioning_a_pdf_header_keeps_its_text(label: str) -> None:
    make, name, mime = TABLE[label]
    out = read_document(Document(make(), name, mime), LocalContext(Limits()))
    assert out.status == "ok" and "MDPDFMARK ends here." in out.text


@pytest.mark.parametrize("label", ["pdf-after-pjl", "pdf-after-binary-junk",
                                   "pdf-after-http-headers"])
def test_a_pdf_behind_junk_is_read(label: str) -> None:
    make, name, mime = TABLE[label]
    out = read_document(Document(make(), name, mime), LocalContext(Limits()))
    assert out.status == "ok" and "crazy ones" in out.text.lower()


def test_ole_directory_decides_over_the_extension() -> None:
    """The streams of the directory name the type; only a file whose directory cannot be
    read falls back on its extension."""
    data = sample("detect/excel97.xls")
    assert detect_bytes(data, "book.doc") == detect.XLS
    damaged = data[:512]  # the header alone: the directory cannot be read
    assert detect_bytes(damaged, "book.doc") == detect.DOC
    assert detect_bytes(damaged, "thing") == detect.OLE2
