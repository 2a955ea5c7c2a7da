"""What a document says about itself: one metadata type (readers/metadata.py) filled by every
reader that can, read through the real sandboxed worker; dates as ISO 8601 with the source's
offset; the record's main fields, the sidecar of every document with metadata (nested
documents' own under ``embedded``), the schemas; a scan whose only words are its metadata."""

from __future__ import annotations

import io
import json
import zipfile
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from bastion.extractor import Extractor
from bastion.readers.metadata import MAX_STRING, DocMeta, clean, iso_date
from bastion.tasks.cli import main
from tests.pdfgen import Name, PdfBuilder, Stream, render_text_gray
from tests.schemacheck import validate_output

SAMPLES = Path(__file__).resolve().parent / "samples"

XMP = """<?xpacket begin="\ufeff" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description rdf:about="" xmlns:pdf="http://ns.adobe.com/pdf/1.3/" pdf:Producer="hand"
 xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:CreateDate="2011-09-15T15:22:00+02:00"/>
<rdf:Description rdf:about="" xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:creator><rdf:Seq><rdf:li>Ann Author</rdf:li><rdf:li>Bob Writer</rdf:li></rdf:Seq></dc:creator>
<dc:language><rdf:Bag><rdf:li>de-CH</rdf:li></rdf:Bag></dc:language>
<dc:subject><rdf:Bag><rdf:li>alpha</rdf:li><rdf:li>beta</rdf:li></rdf:Bag></dc:subject>
</rdf:Description></rdf:RDF></x:xmpmeta>
<?xpacket end="w"?>"""


@pytest.fixture(scope="module")
def ex():
    with Extractor(tools=None) as e:
        yield e


def pdf_with_metadata(*, xmp: bool, text: str | None = "Body text of the report.") -> bytes:
    b = PdfBuilder()
    if text is None:  # a scanned page: pixels only
        gray, w, h = render_text_gray("SCANNED")
        b.add_image_page(gray, w, h)
    else:
        b.add_text_page(text)
    b.info.update(Title="Quarterly Report", Author="Ann Author; Bob Writer",
                  Subject="Finance", Keywords="q3, revenue",
                  CreationDate="D:20110915152200+02'00'", ModDate="D:20120101000000Z")
    if xmp:
        b.catalog["Metadata"] = b.w.add(Stream({"Type": Name("Metadata"),
                                                "Subtype": Name("XML")}, XMP.encode()))
    return b.build()


# -- the type ---------------------------------------------------------------------------------


@pytest.mark.parametrize("raw, kind, iso", [
    ("D:20110915152200+02'00'", "auto", "2011-09-15T15:22:00+02:00"),
    ("D:20110915152200Z", "auto", "2011-09-15T15:22:00+00:00"),
    ("D:20110915", "auto", "2011-09-15T00:00:00"),
    ("20110915152200-05'30", "pdf", "2011-09-15T15:22:00-05:30"),
    ("2011-09-15T15:22:00Z", "auto", "2011-09-15T15:22:00+00:00"),
    ("2011-09-15T15:22:00.123", "auto", "2011-09-15T15:22:00"),
    ("2011-09-15T15:22:00+0100", "auto", "2011-09-15T15:22:00+01:00"),
    ("2011-09-15", "auto", "2011-09-15"),
    ("2011:09:15 15:22:00", "auto", "2011-09-15T15:22:00"),
    ("Thu, 15 Sep 2011 15:22:00 -0400", "email", "2011-09-15T15:22:00-04:00"),
    ("Thu, 15 Sep 2011 15:22:00 -0000", "email", "2011-09-15T15:22:00"),
    (datetime(2011, 9, 15, 15, 22), "auto", "2011-09-15T15:22:00"),
    ("not a date", "auto", None), ("D:20111345", "auto", None), ("", "auto", None),
    (None, "auto", None), (12, "auto", None),
])
def test_dates_become_iso_8601_with_the_source_offset(raw, kind, iso) -> None:
    assert iso_date(raw, kind=kind) == iso


def test_strings_are_cleaned_and_capped_like_text() -> None:
    assert clean("  A\x00 title\r\nsecond\x07  line  ") == "A title\nsecond line"
    assert clean("e\u0301") == "\u00e9"  # NFC
    assert len(clean("x" * (MAX_STRING * 2))) == MAX_STRING
    assert clean(" \t\n") is None and clean(3) is None
    m = DocMeta.make(title=" T ", authors=["A", "A", " ", "B"], words="12", pages=-1,
                     keywords=["k"] * 3, fields={"to": ["x", ""], "message_id": " <id> "})
    assert m.to_json() == {"title": "T", "authors": ["A", "B"], "keywords": ["k"],
                           "words": 12, "fields": {"message_id": "<id>", "to": ["x"]}}
    assert DocMeta.from_json(m.to_json()) == m
    assert DocMeta.from_json({"title": 5, "authors": "nope", "pages": "x"}) == DocMeta()
    assert not DocMeta() and DocMeta(pages=0)


def test_counts_are_ascii_digits_within_2_53_and_field_names_bounded() -> None:
    """What a document declares is bounded at the source: a count of ``"²"`` (a digit to
    ``str.isdigit``, which ``int`` refuses: the reader failed with ValueError), of 4,300
    digits or over 2**53 is no count; a field's name over 256 characters is left out."""
    m = DocMeta.make(pages="²", words="9" * 4300, slides=1 << 64, sheets=" 7 ", characters="٣")
    assert m.to_json() == {"sheets": 7}
    assert DocMeta.from_json({"pages": "²"}) == DocMeta()
    m = DocMeta.make(fields={"k" * 257: "v", "ok": "v", 5: "v"})  # type: ignore
    assert m.to_json() == {"fields": {"ok": "v"}}


# -- every format, through the worker -----------------------------------------------------------


def test_pdf_info_and_xmp_two_authors(ex: Extractor) -> None:
    info_only = ex.extract_bytes(pdf_with_metadata(xmp=False), "r.pdf")
    m = info_only.metadata
    assert info_only.ok and m.authors == ("Ann Author", "Bob Writer")
    assert (m.title, m.subject, m.keywords) == ("Quarterly Report", "Finance", ("q3", "revenue"))
    assert (m.created, m.modified) == ("2011-09-15T15:22:00+02:00", "2012-01-01T00:00:00+00:00")
    assert m.pages == 1
    r = ex.extract_bytes(pdf_with_metadata(xmp=True), "r.pdf")
    m = r.metadata
    assert m.authors == ("Ann Author", "Bob Writer") and m.language == "de-CH"
    assert m.keywords == ("alpha", "beta") and dict(m.fields)["producer"] == "hand"
    assert m.title == "Quarterly Report"  # Info fills what XMP does not declare
    v = r.verdict  # the record's main fields
    assert (v.title, v.authors, v.created, v.subject, v.declared_language) == (
        "Quarterly Report", ("Ann Author", "Bob Writer"), "2011-09-15T15:22:00+02:00",
        "Finance", "de-CH")


def test_a_scan_whose_only_words_are_its_metadata_yields_them(ex: Extractor) -> None:
    r = ex.extract_bytes(pdf_with_metadata(xmp=False, text=None), "scan.pdf")
    assert r.status == "ok", (r.status, r.error)
    assert r.text == ("## metadata\nTitle: Quarterly Report\nAuthor: Ann Author; Bob Writer\n"
                      "Subject: Finance\nKeywords: q3, revenue\n")
    assert any("the text is the document's metadata" in w for w in r.warnings)
    bare = PdfBuilder()
    gray, w, h = render_text_gray("SCANNED")
    bare.add_image_page(gray, w, h)
    assert ex.extract_bytes(bare.build(), "bare.pdf").status == "empty"  # nothing to say


@pytest.mark.parametrize("sample, expect", [
    ("office/blk-paras-and-tables.docx", {
        "authors": ["Steve Canny"], "created": "2023-11-03T17:14:00+00:00",
        "modified": "2023-11-03T17:41:00+00:00", "pages": 1, "words": 22}),
    ("office/shp-shapes.pptx", {"title": "Presentation", "authors": ["python-pptx"],
                                "slides": 2}),
    ("office/reveng1.xlsx", {"authors": ["John Machin"], "sheets": 3,
                             "created": "2007-12-22T21:10:05+00:00"}),
    ("office/headerfooter.odt", {"authors": ["Søren Roug"], "created": "2008-03-20T22:39:17",
                                 "pages": 1, "words": 6}),
    ("office/pythagoras.ods", {"authors": ["Søren Roug"], "sheets": 3}),
    ("office/cols.odp", {"title": "Slide 1", "authors": ["Elaine Schoch"], "slides": 1}),
    ("legacy/hdr-header-footer.doc", {"authors": ["Steve Canny"],
                                      "modified": "2018-12-30T21:33:00+00:00"}),
    ("detect/word97.doc", {"authors": ["Laurence Ipsum"], "pages": 1, "words": 7}),
    ("legacy/reveng1.xls", {"authors": ["John Machin"]}),
    ("detect/powerpoint97.ppt", {"title": "Embedded Objects", "slides": 1}),
    ("eml/multipart.eml", {"title": "Multi-part boundary", "subject": "Multi-part boundary",
                           "authors": ["Foo Bar <foo.bar@example.com>"],
                           "created": "2018-04-29T14:05:09-04:00", "language": "en-US",
                           "attachments": 1}),
    ("legacy/other.msg", {"created": "2017-11-27T09:44:30+00:00", "attachments": 2}),
    ("text/utf-32le-nobom-declares-utf16.html", {
        "title": "Unicode Plane 1 Example Using UTF-16", "authors": ["Tex Texin"],
        "language": "en-US"}),
    ("detect/serious_poem.epub", {"language": "en", "modified": "2008-07-17T20:53:03+00:00"}),
    ("rtf/headers_footers.rtf", {"title": "Body Text", "authors": ["Cynthia Johnson"],
                                 "created": "2003-09-25T15:27:00", "pages": 3, "words": 22}),
])
def test_each_format_reports_its_own_metadata(ex: Extractor, sample: str, expect: dict) -> None:
    r = ex.extract_file(SAMPLES / sample)
    assert r.ok, (r.status, r.error)
    got = r.metadata.to_json()
    for key, value in expect.items():
        assert got.get(key) == value, (sample, key, got)


def test_rtf_info_group_escapes_and_code_page(ex: Extractor) -> None:
    rtf = (rb"{\rtf1\ansi\ansicpg1251{\info{\title \'cf\'f0\'e8\'e2\'e5\'f2 \{x\}}"
           rb"{\author Ann\uc1\u8364?; Bob}{\keywords a, b}"
           rb"{\creatim\yr2011\mo9\dy15\hr15\min22}{\nofpages4}}Body text\par}")
    r = ex.extract_bytes(rtf, "i.rtf")
    assert r.ok and r.text == "Body text\n"
    assert r.metadata.to_json() == {
        "title": "\u041f\u0440\u0438\u0432\u0435\u0442 {x}", "authors": ["Ann\u20ac", "Bob"],
        "created": "2011-09-15T15:22:00", "keywords": ["a", "b"], "pages": 4}


def test_email_and_outlook_fields(ex: Extractor) -> None:
    eml = ex.extract_file(SAMPLES / "eml" / "sample.eml").metadata
    f = dict(eml.fields)
    assert f["to"] == ("Foo Bar <foo.bar@example.com>",) and f["from"] == eml.authors
    msg = dict(ex.extract_file(SAMPLES / "legacy" / "other.msg").metadata.fields)
    assert msg["message_id"] == "<99d78a$k8gjl@esa2.mentor.iphmx.com>"
    assert msg["to"] == ("yosipnps@model.com",)


def test_nested_documents_keep_their_own_metadata(ex: Extractor) -> None:
    docx = (SAMPLES / "office" / "hdr-header-footer.docx").read_bytes()
    eml = (SAMPLES / "eml" / "multipart.eml").read_bytes()
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("deep/report.docx", docx)
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w") as z:
        z.writestr("mail.eml", eml)
        z.writestr("inner.zip", inner.getvalue())
        z.writestr("plain.txt", "no metadata here\n")
    r = ex.extract_bytes(outer.getvalue(), "bundle.zip")
    assert r.ok
    by_path = dict(r.embedded)
    assert sorted(by_path) == ["inner.zip!/deep/report.docx", "mail.eml"]
    assert by_path["mail.eml"].subject == "Multi-part boundary"
    assert by_path["inner.zip!/deep/report.docx"].authors == ("Steve Canny",)
    assert not r.metadata  # the archive itself declares nothing


def test_a_sweep_writes_the_sidecar_and_record_fields_for_every_format(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for sample in ("office/hdr-header-footer.docx", "eml/sample.eml", "detect/word97.doc",
                   "office/headerfooter.odt"):
        (root / Path(sample).name).write_bytes((SAMPLES / sample).read_bytes())
    (root / "report.pdf").write_bytes(pdf_with_metadata(xmp=True))
    (root / "plain.txt").write_text("nothing declared\n")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump({"version": 1, "stages": ["walk", "extract"],
                                        "roots": [{"name": "r", "path": str(root)}]}))
    out = tmp_path / "out"
    assert main(["sweep", str(manifest), "--out", str(out), "-q", "-j", "1",
                 "--no-external"]) == 0
    assert validate_output(out) == []
    records = {json.loads(x)["path"]: json.loads(x) for x in open(out / "extract.jsonl")}
    assert records["hdr-header-footer.docx"]["authors"] == ["Steve Canny"]
    assert records["sample.eml"]["created"] == "2014-01-29T11:10:06+01:00"
    assert records["report.pdf"]["declared_language"] == "de-CH"
    assert records["plain.txt"]["authors"] == [] and records["plain.txt"]["created"] is None
    for path, rec in records.items():
        sidecar = out / rec["text"].replace(".txt", ".meta.json")
        if path == "plain.txt":
            assert not sidecar.exists()
            continue
        meta = json.loads(sidecar.read_text())["metadata"]
        assert meta and (meta.get("authors") or meta.get("title")), path
