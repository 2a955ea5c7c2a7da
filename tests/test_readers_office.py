"""Office readers (bastion.readers.office.ooxml, bastion.readers.office.odf) and their safety layer (bastion.readers.office.xmlsafe).

Fixtures are built in code by ``tests/officegen.py``, each with unique marker words; real
documents written by Word/LibreOffice live in ``tests/samples/office`` (see its ORIGIN.md).
"""

from __future__ import annotations

import io
import random
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

import officegen as og
from bastion.readers.base import Document, Limits, MiB, ReadResult
from bastion.readers.dispatch import Outcome, read_document
from bastion.readers.errors import CapReached
from bastion.readers.runtime.context import LocalContext
from bastion.readers.office import xmlsafe

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
ODT = "application/vnd.oasis.opendocument.text"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
ODP = "application/vnd.oasis.opendocument.presentation"
REPO = Path(__file__).resolve().parent.parent
SAMPLES = Path(__file__).resolve().parent / "samples" / "office"


def read(data: bytes, name: str, mime: str, **limits: int) -> Outcome:
    return read_document(Document(data, name, mime), LocalContext(Limits(**limits)))


def lines(out: Outcome) -> list[str]:
    assert out.status == "ok", (out.status, out.error)
    return out.text.splitlines()


# -- DOCX -------------------------------------------------------------------------------------


def test_docx_paragraph_tab_break_and_tab_stops():
    body = og.w_p(
        '<w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>',
        "alphaword",
        "<w:r><w:tab/><w:t>betaword</w:t><w:br/><w:t>gammaword</w:t><w:cr/>"
        '<w:noBreakHyphen/><w:sym w:font="Segoe" w:char="2605"/>'
        '<w:sym w:font="Wingdings" w:char="F0E0"/></w:r>',
    ) + og.w_p("secondpara")
    out = read(og.docx(body), "a.docx", DOCX)
    assert out.extractor == "docx"
    assert out.text == "alphaword\tbetaword\ngammaword\n-\u2605\nsecondpara\n"


TEXTBOX = (
    '<w:r><mc:AlternateContent><mc:Choice Requires="wps"><w:drawing><wps:wsp><wps:txbx>'
    '<w:txbxContent><w:p><w:r><w:t>boxword</w:t></w:r></w:p></w:txbxContent>'
    '</wps:txbx></wps:wsp></w:drawing></mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>'
    '<w:txbxContent><w:p><w:r><w:t>boxword</w:t></w:r></w:p></w:txbxContent>'
    '</v:textbox></v:shape></w:pict></mc:Fallback></mc:AlternateContent></w:r>'
)


def test_docx_text_box_once_after_its_paragraph():
    body = og.w_p("anchorstart", TEXTBOX, "anchorend") + og.w_p("nextpara")
    out = read(og.docx(body), "box.docx", DOCX)
    assert lines(out) == ["anchorstartanchorend", "boxword", "nextpara"]
    assert out.text.count("boxword") == 1


def test_docx_fallback_taken_when_no_choice():
    fallback_only = TEXTBOX.replace('<mc:Choice Requires="wps">', "<mc:Fallback>").replace(
        "</mc:Choice><mc:Fallback>", "</mc:Fallback><mc:Fallback>")
    out = read(og.docx(og.w_p("anchor", fallback_only)), "fb.docx", DOCX)
    assert lines(out) == ["anchor", "boxword"]


def test_docx_headers_footers_notes():
    footnotes = (
        '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/><w:t>sepjunk</w:t>'
        '</w:r></w:p></w:footnote>'
        '<w:footnote w:type="continuationSeparator" w:id="0"><w:p><w:r><w:t>contjunk</w:t>'
        "</w:r></w:p></w:footnote>"
        f'<w:footnote w:id="1">{og.w_p("footnoteword")}</w:footnote>'
    )
    body = og.w_p("bodyword", '<w:r><w:footnoteReference w:id="1"/></w:r>')
    data = og.docx(body, headers=[og.w_p("headerword")], footers=[og.w_p("footerword")],
                   footnotes=footnotes,
                   endnotes=f'<w:endnote w:id="1">{og.w_p("endnoteword")}</w:endnote>')
    assert lines(read(data, "h.docx", DOCX)) == [
        "bodyword", "## header", "headerword", "## footer", "footerword",
        "## footnotes", "footnoteword", "## endnotes", "endnoteword"]


def test_docx_headers_in_numeric_order_without_rels():
    data = og.docx(og.w_p("bodyword"), headers=[og.w_p(f"hdr{i}") for i in range(1, 12)])
    members = og.zip_members(data)
    del members["word/_rels/document.xml.rels"]
    out = read(og.zip_bytes(dict(sorted(members.items()))), "h.docx", DOCX)
    assert lines(out) == ["bodyword", "## header"] + [f"hdr{i}" for i in range(1, 12)]


def test_docx_table_rows_cells_and_nested_table():
    def tc(*paras: str) -> str:
        return "<w:tc>" + "".join(og.w_p(p) if not p.startswith("<") else p
                                  for p in paras) + "</w:tc>"

    nested = "<w:tbl><w:tr>" + tc("innerA") + tc("innerB") + "</w:tr></w:tbl>"
    table = ("<w:tbl><w:tr>" + tc("c11") + tc("c12", "c12more") + "</w:tr>"
             "<w:tr>" + tc("c21") + tc() + tc(nested) + tc() + "</w:tr></w:tbl>")
    out = read(og.docx(og.w_p("before") + table + og.w_p("after")), "t.docx", DOCX)
    # a table nested in a cell is not flattened onto its row's line (issue 43): its rows
    # follow the row that holds it, each on a line of its own
    assert lines(out) == ["before", "c11\tc12 c12more", "c21", "innerA\tinnerB", "after"]
    deeper = "<w:tbl><w:tr>" + tc("d1") + tc("d2") + "</w:tr><w:tr>" + tc("d3") + "</w:tr></w:tbl>"
    nested = ("<w:tbl><w:tr>" + tc("innerA", deeper) + tc("innerB") + "</w:tr><w:tr>"
              + tc("innerC") + "</w:tr></w:tbl>")
    table = ("<w:tbl><w:tr>" + tc("c11") + tc("c12 before", nested, "c12 after") + tc("c13")
             + "</w:tr><w:tr>" + tc("c21") + "</w:tr></w:tbl>")
    out = read(og.docx(table), "t.docx", DOCX)
    assert lines(out) == ["c11\tc12 before c12 after\tc13", "innerA\tinnerB", "d1\td2", "d3",
                          "innerC", "c21"]


def test_docx_revisions_and_fields():
    body = og.w_p(
        "keptword ",
        '<w:del w:id="1" w:author="x"><w:r><w:delText>deletedword</w:delText></w:r>'
        "<w:r><w:t>deletedtoo</w:t></w:r></w:del>",
        '<w:ins w:id="2" w:author="x"><w:r><w:t>insertedword</w:t></w:r></w:ins>',
        '<w:moveFrom w:id="3"><w:r><w:t>movedaway</w:t></w:r></w:moveFrom>',
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> PAGEREF junkinstr </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t> fieldresult</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>',
        '<w:fldSimple w:instr="DATE"><w:r><w:t> simplefield</w:t></w:r></w:fldSimple>',
    )
    assert lines(read(og.docx(body), "r.docx", DOCX)) == [
        "keptword insertedword fieldresult simplefield"]


def test_docx_found_by_parts_without_mime_or_package_rels():
    members = og.zip_members(og.docx(og.w_p("partsword")))
    del members["_rels/.rels"]
    out = read(og.zip_bytes(members), "noext", "application/zip")
    # a plain zip is an archive: its members are read, the DOCX reader is not chosen
    assert out.status == "ok" and out.extractor == "zip"
    out = read(og.zip_bytes(members), "x.docx", "application/octet-stream")
    assert lines(out) == ["partsword"]


# -- XLSX -------------------------------------------------------------------------------------

STYLES = (
    f'<styleSheet xmlns="{og.NS_S}"><numFmts count="2">'
    '<numFmt numFmtId="164" formatCode="yyyy\\-mm\\-dd\\ hh:mm"/>'
    '<numFmt numFmtId="165" formatCode="0.00&quot;m&quot;"/></numFmts>'
    '<cellStyleXfs count="1"><xf numFmtId="14"/></cellStyleXfs>'
    '<cellXfs count="5"><xf numFmtId="0"/><xf numFmtId="14"/><xf numFmtId="164"/>'
    '<xf numFmtId="165"/><xf numFmtId="20"/></cellXfs></styleSheet>'
)


def test_xlsx_values_dates_gaps_and_sheet_order():
    shared = ["sharedword", "<si><r><t>rich</t></r><r><t>word</t></r>"
              "<rPh sb=\"0\" eb=\"1\"><t>phonetic</t></rPh></si>", "zetaword"]
    alpha = (
        '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="C1" t="inlineStr"><is><t>inlineword</t>'
        '</is></c><c r="D1" t="s"><v>1</v></c></row>'
        '<row r="2"><c r="A2"><v>3.14</v></c><c r="B2" t="b"><v>1</v></c>'
        '<c r="C2" t="b"><v>0</v></c><c r="D2" t="e"><v>#DIV/0!</v></c>'
        '<c r="E2" t="str"><f>A1&amp;""</f><v>formulaword</v></c></row>'
        '<row r="3"><c r="A3" s="0"/></row>'  # empty row: dropped
        '<row r="5"><c r="A5" s="1"><v>45306</v></c><c r="B5" s="2"><v>45306.5</v></c>'
        '<c r="C5" s="3"><v>12.5</v></c><c r="D5" s="4"><v>0.75</v></c><c r="E5">'
        "<v>45306</v></c></row>"
    )
    zeta = '<row r="1"><c r="B1" t="s"><v>2</v></c></row>'
    # workbook order: Zeta (file sheet2.xml) before Alpha (file sheet1.xml)
    data = og.xlsx([("Zeta", "sheet2.xml", zeta), ("Alpha", "sheet1.xml", alpha)],
                   shared=shared, styles=og.DECL + STYLES)
    out = read(data, "x.xlsx", XLSX)
    assert out.extractor == "xlsx"
    assert lines(out) == [
        "# Zeta",
        "\tzetaword",
        "# Alpha",
        "sharedword\t\tinlineword\trichword",
        "3.14\tTRUE\tFALSE\t#DIV/0!\tformulaword",
        "1/15/2024\t2024-01-15 12:00\t12.50m\t18:00\t45306",  # as their formats show them
    ]


def test_xlsx_date1904_and_cells_without_refs():
    data = og.xlsx([("S", "sheet1.xml",
                     '<row><c s="1"><v>0</v></c><c t="inlineStr"><is><t>a\tb</t></is></c></row>')],
                   styles=og.DECL + STYLES, date1904=True)
    assert lines(read(data, "x.xlsx", XLSX)) == ["# S", "1/1/1904\ta b"]


def test_xlsx_hostile_column_ref_hits_max_parts():
    data = og.xlsx([("S", "sheet1.xml",
                     '<row><c r="A1" t="inlineStr"><is><t>firstcell</t></is></c>'
                     '<c r="ZZZZZZ1"><v>1</v></c></row>')])
    out = read(data, "x.xlsx", XLSX, max_parts=1000)
    assert out.limit == "max_parts"
    assert out.text.startswith("# S\nfirstcell\n[bastion: text truncated, max_parts")


# -- PPTX -------------------------------------------------------------------------------------


def test_pptx_twelve_slides_numeric_order_with_notes():
    slides = [(og.a_sp(f"slideword{i}") + og.a_sp("9", ph="sldNum"),
               og.a_sp("", ph="sldImg") + og.a_sp(f"noteword{i}") + og.a_sp(f"{i}", ph="sldNum"))
              for i in range(1, 13)]
    out = read(og.pptx(slides), "p.pptx", PPTX)
    assert out.extractor == "pptx"
    expected = []
    for i in range(1, 13):
        expected += [f"# slide {i}", f"slideword{i}", "## notes", f"noteword{i}"]
    assert lines(out) == expected
    assert out.result == ReadResult("pptx", details={"slides": 12}, languages=())


def test_pptx_without_presentation_part_sorts_numerically():
    slides = [(og.a_sp(f"slideword{i}"), None) for i in range(1, 13)]
    members = og.zip_members(og.pptx(slides, with_presentation=False))
    # lexical member order (slide1, slide10, slide11, slide12, slide2, ...)
    out = read(og.zip_bytes(dict(sorted(members.items()))), "p.pptx", PPTX)
    assert [ln for ln in lines(out) if ln.startswith("slideword")] == [
        f"slideword{i}" for i in range(1, 13)]


def test_pptx_table_group_breaks_and_empty_notes():
    table = (
        '<p:graphicFrame><a:graphic><a:graphicData><a:tbl><a:tr><a:tc><a:txBody><a:p><a:r>'
        "<a:t>cellA</a:t></a:r></a:p></a:txBody></a:tc><a:tc><a:txBody><a:p><a:r><a:t>cellB"
        "</a:t></a:r></a:p></a:txBody></a:tc></a:tr></a:tbl></a:graphicData></a:graphic>"
        "</p:graphicFrame>"
    )
    group = "<p:grpSp>" + og.a_sp("groupedword") + "</p:grpSp>"
    brk = og.a_sp("<a:p><a:r><a:t>lineone</a:t></a:r><a:br/><a:r><a:t>linetwo</a:t></a:r>"
                  '<a:fld type="datetime"><a:t>fieldword</a:t></a:fld></a:p>')
    alt = ('<mc:AlternateContent><mc:Choice Requires="p14">' + og.a_sp("altword")
           + "</mc:Choice><mc:Fallback>" + og.a_sp("altword") + "</mc:Fallback>"
           "</mc:AlternateContent>")
    out = read(og.pptx([(table + group + brk + alt, og.a_sp("", ph="body"))]), "p.pptx", PPTX)
    assert lines(out) == ["# slide 1", "cellA\tcellB", "groupedword", "lineone",
                          "linetwofieldword", "altword"]


# -- ODF --------------------------------------------------------------------------------------

ODT_BODY = (
    "<text:tracked-changes><text:changed-region text:id=\"c1\"><text:deletion>"
    "<office:change-info/><text:p>deletedword</text:p></text:deletion></text:changed-region>"
    "</text:tracked-changes>"
    "<text:h text:outline-level=\"1\">headingword</text:h>"
    "<text:p>one<text:s text:c=\"3\"/>two<text:tab/>three<text:line-break/>four"
    "<text:span> spanword</text:span><office:annotation><dc:creator>x</dc:creator>"
    "<text:p>commentword</text:p></office:annotation></text:p>"
    "<text:p>   collapsed \n  spaces  </text:p>"
    "<text:list><text:list-item><text:p>itemone</text:p></text:list-item>"
    "<text:list-item><text:p>itemtwo</text:p></text:list-item></text:list>"
    "<text:p>anchorword<draw:frame><draw:text-box><text:p>frameword</text:p></draw:text-box>"
    "</draw:frame><text:note text:note-class=\"footnote\">"
    "<text:note-citation>1</text:note-citation>"
    "<text:note-body><text:p>noteword</text:p></text:note-body></text:note> tail</text:p>"
    "<table:table table:name=\"T\"><table:table-column table:number-columns-repeated=\"3\"/>"
    "<table:table-row><table:table-cell><text:p>t11</text:p></table:table-cell>"
    "<table:table-cell table:number-columns-repeated=\"2\"><text:p>rep</text:p>"
    "</table:table-cell></table:table-row></table:table>"
)


def test_odt_paragraphs_lists_frames_notes_tables():
    out = read(og.odf("text", ODT_BODY), "d.odt", ODT)
    assert out.extractor == "odt"
    assert lines(out) == [
        "headingword",
        "one   two\tthree",
        "four spanword",
        "[comment: x] commentword",
        " collapsed spaces ",
        "itemone",
        "itemtwo",
        "anchorword tail",
        "frameword",
        "noteword",
        "t11\trep\trep",
    ]


def test_fodt_flat_file_master_header_after_the_body():
    styles = ("<office:master-styles><style:master-page xmlns:style=\"urn:oasis:names:tc:"
              "opendocument:xmlns:style:1.0\"><style:header><text:p>masterheader</text:p>"
              "</style:header></style:master-page></office:master-styles>")
    data = og.flat_odf("text", "<text:p>flatword</text:p>", styles)
    for mime in (ODT, "application/vnd.oasis.opendocument.text-flat-xml"):
        out = read(data, "f.fodt", mime)
        assert (out.extractor, lines(out)) == ("odt", ["flatword", "## header", "masterheader"])


ODS_BODY = (
    '<table:table table:name="First">'
    '<table:table-column table:number-columns-repeated="16384"/>'
    "<table:table-row><table:table-cell office:value-type=\"string\"><text:p>aword</text:p>"
    "</table:table-cell><table:table-cell/><table:table-cell office:value-type=\"float\" "
    "office:value=\"3.5\"><text:p>3.5</text:p></table:table-cell>"
    "<table:table-cell table:number-columns-repeated=\"3\"><text:p>rep</text:p>"
    "</table:table-cell><table:table-cell table:number-columns-repeated=\"16378\"/>"
    "</table:table-row>"
    '<table:table-row table:number-rows-repeated="1048570"><table:table-cell '
    'table:number-columns-repeated="16384"/></table:table-row>'
    "<table:table-row table:number-rows-repeated=\"2\"><table:table-cell "
    "office:value-type=\"date\" office:date-value=\"2024-01-15\"><text:p>15/01/24</text:p>"
    "</table:table-cell><table:table-cell office:value-type=\"boolean\" "
    "office:boolean-value=\"true\"><text:p>TRUE</text:p></table:table-cell>"
    "<table:covered-table-cell/><table:table-cell><text:p>x</text:p>"
    "<office:annotation><text:p>cellcomment</text:p></office:annotation></table:table-cell>"
    "</table:table-row></table:table>"
    '<table:table table:name="Second"><table:table-row><table:table-cell>'
    "<text:p>secondword</text:p></table:table-cell></table:table-row></table:table>"
)


def test_ods_sheets_repeats_and_dates():
    out = read(og.odf("spreadsheet", ODS_BODY), "s.ods", ODS)
    assert out.extractor == "ods"
    assert lines(out) == [
        "# First",
        "aword\t\t3.5\trep\trep\trep",
        "15/01/24\tTRUE\t\tx",  # a date cell's text as shown (its date-value: no text)
        "15/01/24\tTRUE\t\tx",
        "[comment D1048572] cellcomment",
        "# Second",
        "secondword",
    ]


@pytest.mark.timeout(60)
def test_ods_hostile_repeats_are_capped():
    cell = ('<table:table-row><table:table-cell table:number-columns-repeated="1000000000">'
            "<text:p>v</text:p></table:table-cell></table:table-row>")
    out = read(og.odf("spreadsheet", f'<table:table table:name="H">{cell}</table:table>'),
               "h.ods", ODS, max_parts=5000)
    assert out.limit == "max_parts" and out.text.count("v") == 5000
    # a row repeated 10**15 times: a step per repeat never ends (the timeout says so)
    rows = ('<table:table-row table:number-rows-repeated="1000000000000000"><table:table-cell>'
            "<text:p>rowword</text:p></table:table-cell></table:table-row>")
    out = read(og.odf("spreadsheet", f'<table:table table:name="H">{rows}</table:table>'),
               "h.ods", ODS, max_chars=1_000_000)
    assert out.limit == "max_chars"
    assert out.text.count("rowword") == (1_000_000 - len("# H\n")) // len("rowword\n")


def test_odp_slides_and_notes():
    def page(n: int, notes: str) -> str:
        frame = (f'<draw:frame presentation:class="title"><draw:text-box><text:p>slide{n}word'
                 "</text:p></draw:text-box></draw:frame>")
        return (f'<draw:page draw:name="page{n}">{frame}<presentation:notes>'
                f"<draw:page-thumbnail/>{notes}</presentation:notes></draw:page>")

    note = '<draw:frame><draw:text-box><text:p>noteword</text:p></draw:text-box></draw:frame>'
    out = read(og.odf("presentation", page(1, note) + page(2, "")), "p.odp", ODP)
    assert out.extractor == "odp"
    assert lines(out) == ["# slide 1", "slide1word", "## notes", "noteword",
                          "# slide 2", "slide2word"]


def test_odf_encrypted_and_missing_content():
    enc = og.odf("text", "<text:p>x</text:p>",
                 manifest_extra='<manifest:encryption-data manifest:checksum="x"/>')
    out = read(enc, "e.odt", ODT)
    assert (out.status, out.error_kind) == ("error", "encrypted")
    out = read(og.zip_bytes({"mimetype": ODT}), "e.odt", ODT)
    assert (out.status, out.error_kind) == ("error", "corrupt")


# -- hostile input ----------------------------------------------------------------------------

BOMB_SIZE = 300 * MiB


@pytest.fixture(scope="module")
def bomb_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bomb") / "bomb.docx"
    og.docx_bomb(str(path), BOMB_SIZE)
    return path


def test_zip_bomb_member_capped_while_reading(bomb_path: Path, tmp_path: Path):
    # a byte 90% of the way into document.xml's stream (about 270 MiB in, past every cap
    # here) is poisoned: a reader that inflated the member to its end would end in an error
    # (as it does reading a small bomb poisoned so)
    og.docx_bomb(str(tmp_path / "small.docx"), 4 * MiB)
    small = og.poison_member((tmp_path / "small.docx").read_bytes(), "word/document.xml", 0.9)
    with pytest.raises(Exception, match="Error -3|CRC"), \
            zipfile.ZipFile(io.BytesIO(small)).open("word/document.xml") as whole:
        while whole.read(1 << 20):
            pass
    data = og.poison_member(bomb_path.read_bytes(), "word/document.xml", at=0.9)
    assert len(data) < 2 * MiB
    out = read(data, "bomb.docx", DOCX)
    assert out.limit == "max_member_bytes", out
    assert out.text.startswith("bombmarker\n[bastion: text truncated, max_member_bytes")
    out = read(data, "bomb.docx", DOCX, max_member_bytes=1 * MiB)
    assert out.limit == "max_member_bytes"
    out = read(data, "bomb.docx", DOCX, max_xml_bytes=2 * MiB)
    assert out.limit == "max_xml_bytes"


def test_zero_bomb_counted_decompressed():
    data = og.zero_bomb(64 * MiB)
    zf = xmlsafe.open_zip(data)
    budget = xmlsafe.Budget(Limits(max_member_bytes=4 * MiB))
    seen = 0
    with pytest.raises(CapReached) as cap:
        for chunk in xmlsafe.member_chunks(zf, "word/document.xml", budget):
            seen += len(chunk)
    assert cap.value.cap == "max_member_bytes" and seen <= 4 * MiB
    out = read(data, "zero.docx", DOCX)
    assert (out.status, out.error_kind) == ("error", "corrupt")


def _doc_xml(prolog: str, word: str = "&lol9;") -> bytes:
    return og.zip_bytes({
        "word/document.xml": f'<?xml version="1.0"?>{prolog}<w:document xmlns:w="{og.NS_W}">'
                             f"<w:body><w:p><w:r><w:t>{word}</w:t></w:r></w:p></w:body>"
                             "</w:document>"})


BILLION_LAUGHS = (
    '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;">'
    + "".join(f'<!ENTITY lol{i} "' + f"&lol{i - 1};" * 10 + '">' for i in range(2, 10))
    + "]>"
)


@pytest.mark.parametrize("prolog,word", [
    (BILLION_LAUGHS, "&lol9;"),
    ('<!DOCTYPE w:document [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>', "&xxe;"),
    ('<!DOCTYPE w:document SYSTEM "http://example.invalid/x.dtd">', "plain"),
    ("<!DOCTYPE w:document>", "plain"),
])
def test_dtd_and_entities_refused(prolog: str, word: str):
    out = read(_doc_xml(prolog, word), "x.docx", DOCX)
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert "DTD or entity declaration refused" in out.error
    assert "root:" not in out.text


def test_undeclared_entity_is_corrupt():
    out = read(_doc_xml("", "&undeclared;"), "x.docx", DOCX)
    assert (out.status, out.error_kind) == ("error", "corrupt")


def test_encodings_utf16_accepted_latin1_refused():
    xml = (f'<?xml version="1.0" encoding="UTF-16"?><w:document xmlns:w="{og.NS_W}"><w:body>'
           f'{og.w_p("utf16word")}</w:body></w:document>')
    for enc in ("utf-16", "utf-16-be"):
        bom = b"" if enc == "utf-16" else b"\xfe\xff"
        data = og.zip_bytes({"word/document.xml": bom + xml.encode(enc)})
        assert lines(read(data, "u.docx", DOCX)) == ["utf16word"]
    latin = xml.replace("UTF-16", "ISO-8859-1").replace("utf16word", "caf\xe9").encode("latin-1")
    out = read(og.zip_bytes({"word/document.xml": latin}), "l.docx", DOCX)
    assert (out.status, out.error_kind) == ("error", "corrupt") and "ISO-8859-1" in out.error
    utf32 = og.zip_bytes({"word/document.xml": xml.replace("UTF-16", "UTF-32").encode("utf-32")})
    assert read(utf32, "u.docx", DOCX).error_kind == "corrupt"


def test_member_lying_about_its_size():
    """Sizes in the headers are never trusted: too small fails zipfile's CRC check (corrupt),
    too large allocates nothing and reads the real bytes, still under the member count."""
    body = og.w_p("liarword") + og.w_p("x" * 50_000)
    small = og.lie_about_size(og.docx(body), "word/document.xml", 10)
    out = read(small, "lie.docx", DOCX)
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert "damaged zip member word/document.xml" in out.error
    big = og.lie_about_size(og.docx(body), "word/document.xml", 2 ** 32 - 2)
    assert lines(read(big, "lie.docx", DOCX))[0] == "liarword"
    out = read(big, "lie.docx", DOCX, max_member_bytes=20_000)
    assert out.limit == "max_member_bytes" and "liarword" not in out.text


def test_million_runs_capped_at_max_parts():
    out = read(og.million_runs(), "runs.docx", DOCX)
    assert out.limit == "max_parts"
    first, note = out.text.splitlines()
    # a text node cut by a 64 KiB parse chunk arrives as two parts, so a few runs fewer
    assert first.startswith("ab ab ") and 199_900 * 3 < len(first) <= 200_001 * 3
    assert note == ("[bastion: text truncated, max_parts reached: "
                    "200000 parts in one paragraph or row]")


def test_char_cap_keeps_text_so_far():
    out = read(og.docx("".join(og.w_p(f"para{i}") for i in range(1000))), "c.docx", DOCX,
               max_chars=100)
    assert out.limit == "max_chars" and out.text.startswith("para0\npara1\n")


@pytest.mark.parametrize("mime", [
    "application/x-ooxml-encrypted", DOCX, XLSX,
])
def test_encrypted_ooxml(mime: str):
    out = read(og.ole2_blob(), "secret.docx", mime)
    # (the x-ooxml-encrypted type first tries the default password: its message says why not)
    assert (out.status, out.error_kind) == ("error", "encrypted")
    assert out.error.startswith("encrypted")


@pytest.mark.parametrize("mime,name,data", [
    (DOCX, "t.docx", og.docx(og.w_p("truncword"))[:200]),
    (DOCX, "t.docx", og.docx(og.w_p("truncword"))[:-30]),
    (DOCX, "n.docx", b"this is not a zip at all"),
    (XLSX, "n.xlsx", b""),
    (PPTX, "n.pptx", og.zip_bytes({"other.txt": "hello"})),
    (ODT, "n.odt", b"PK\x03\x04garbage"),
    (ODT, "n.fodt", b"<office:document"),
    (ODS, "n.ods", b"not xml"),
])
def test_broken_packages_are_corrupt(mime: str, name: str, data: bytes):
    out = read(data, name, mime)
    assert (out.status, out.error_kind) == ("error", "corrupt"), out


def test_truncations_and_flips_raise_only_named_errors():
    """Every prefix and random damage of each format ends as ok/empty/error, never a crash."""
    rng = random.Random(7)
    samples = [
        (og.docx(og.w_p("a", TEXTBOX) + og.w_p("b"), headers=[og.w_p("h")]), "d.docx", DOCX),
        (og.xlsx([("S", "sheet1.xml", '<row><c r="A1" t="s"><v>0</v></c></row>')],
                 shared=["s"], styles=og.DECL + STYLES), "x.xlsx", XLSX),
        (og.pptx([(og.a_sp("s"), og.a_sp("n"))]), "p.pptx", PPTX),
        (og.odf("spreadsheet", ODS_BODY), "s.ods", ODS),
        (og.flat_odf("text", ODT_BODY), "f.fodt", ODT),
    ]
    for data, name, mime in samples:
        cuts = sorted({rng.randrange(len(data)) for _ in range(40)})
        variants = [data[:c] for c in cuts]
        for _ in range(40):
            b = bytearray(data)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            variants.append(bytes(b))
        for v in variants:
            out = read(v, name, mime)  # read_document lets only unnamed exceptions escape
            assert out.status in ("ok", "empty", "error")


# -- memory -----------------------------------------------------------------------------------

RSS_SCRIPT = textwrap.dedent("""
    import resource, sys
    sys.path.insert(0, {repo!r})
    from bastion.readers.base import Document, Limits
    from bastion.readers.dispatch import read_document
    from bastion.readers.runtime.context import LocalContext

    def peak_kib():
        # VmHWM belongs to this exec'd image; ru_maxrss may carry the forking parent's peak
        try:
            with open("/proc/self/status") as f:
                return int(next(ln for ln in f if ln.startswith("VmHWM:")).split()[1])
        except OSError:
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    from bastion.readers.text.langid import main_languages
    main_languages("a few words to load the language model " * 20)  # before the baseline:
    data = open(sys.argv[1], "rb").read()  # every text's languages are named (issue 34)
    base = peak_kib()
    out = read_document(Document(data, sys.argv[2], sys.argv[3]), LocalContext(Limits()))
    print(out.status, out.limit, base, peak_kib())
""")


def _peak_rss_kib(path: Path, name: str, mime: str) -> tuple[str, int, int]:
    proc = subprocess.run(
        [sys.executable, "-c", RSS_SCRIPT.format(repo=str(REPO)), str(path), name, mime],
        capture_output=True, text=True, timeout=120, check=True)
    _status, limit, base, peak = proc.stdout.split()
    return limit, int(base), int(peak)


@pytest.mark.slow
def test_peak_rss_bounded(bomb_path: Path, tmp_path: Path):
    """Peak RSS (VmHWM) of a fresh interpreter reading each hostile file stays < 300 MB.

    Measured on the development machine (Python 3.11, expat 2.5): the 300 MB bomb, cut at the
    64 MiB member cap, peaks at 21 MB (+0.1 MB over the interpreter with the file loaded);
    the million-run paragraph (cut at 200 000 parts) at 35 MB (+15 MB).
    """
    runs = tmp_path / "runs.docx"
    runs.write_bytes(og.million_runs())
    for path, cap in ((bomb_path, "max_member_bytes"), (runs, "max_parts")):
        limit, base_kib, peak_kib = _peak_rss_kib(path, path.name, DOCX)
        assert limit == cap
        assert peak_kib < 300 * 1024, f"{path.name}: peak RSS {peak_kib} KiB"
        assert peak_kib - base_kib < 100 * 1024, f"{path.name}: grew {peak_kib - base_kib} KiB"


# -- real documents ---------------------------------------------------------------------------

# file name -> (MIME, extractor, phrase); each phrase checked against the part's XML
# (``unzip -p FILE PART``).  Origins and generators are in samples/office/ORIGIN.md.
REAL = {
    "hdr-header-footer.docx": (DOCX, "docx", "## header\nHeader for section-1\n## footer\n"
                                             "Footer for section 1\n"),
    "blk-paras-and-tables.docx": (DOCX, "docx", "Donec semper facilisis metus finibus malesuada."),
    "reveng1.xlsx": (XLSX, "xlsx", "# ZZZfirstsheet\ndescription\tentered\tcalculated\n"),
    "merged_cells.xlsx": (XLSX, "xlsx", "# Sheet3\nFoo\t\tBar\nBaz\t\tBoo\n"),
    "apachepoi_49609.xlsx": (XLSX, "xlsx", "# FAM\n\tCycle\tA1\tA2\tA3"),  # '\\' names
    "tbl-cell.pptx": (PPTX, "pptx", "unladen swallows\n# slide 2"),
    "sld-notes.pptx": (PPTX, "pptx", "# slide 1\n## notes\nNotes\n# slide 2"),
    "serious_poem.odt": (ODT, "odt", "The boy stood    on the burning deck,"),
    "simpletable.odt": (ODT, "odt", "Cell 1\tCell 2\nCell 3 (bold)\tCell 4 (italic)"),
    "chinese_spreadsheet.ods": (ODS, "ods", "# \u5de5\u4f5c\u88681\ntest\ttest\ttest"),
    "pythagoras.ods": (ODS, "ods", "# Sheet1\n3\n4\n5\n7\n# Sheet2\n"),
    "cols.odp": (ODP, "odp", "41 Sed nisl lectus, dictum vel aliquam rhoncus"),
    "ol.odp": (ODP, "odp", "1. Elf\n2. Tsvelf\n"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_documents(name: str):
    mime, extractor, phrase = REAL[name]
    out = read((SAMPLES / name).read_bytes(), name, mime)
    assert out.status == "ok" and out.extractor == extractor, out.error
    assert phrase in out.text


def test_real_external_entity_sample_refused():
    """odfpy's nasty.odt declares an external entity in content.xml."""
    out = read((SAMPLES / "nasty.odt").read_bytes(), "nasty.odt", ODT)
    assert (out.status, out.error_kind) == ("error", "corrupt")
    assert "DTD or entity declaration refused" in out.error


def test_samples_are_small_and_documented():
    files = [p for p in SAMPLES.iterdir() if p.name != "ORIGIN.md"]
    assert all(p.stat().st_size < 200 * 1024 for p in files)
    assert sum(p.stat().st_size for p in files) < 1536 * 1024
    origin = (SAMPLES / "ORIGIN.md").read_text(encoding="utf-8")
    assert all(f"`{p.name}`" in origin for p in files)


def test_ooxml_content_wins_over_a_wrong_mime():
    data = og.xlsx([("Only", "sheet1.xml",
                     "<row><c t=\"inlineStr\"><is><t>cellword</t></is></c></row>")])
    out = read(data, "mislabelled.docx", DOCX)
    assert (out.extractor, lines(out)) == ("xlsx", ["# Only", "cellword"])


def test_pptx_chart_titles_series_categories_and_values_are_read() -> None:
    """A chart follows its slide: a ``[chart]`` line, its title, then its data as a table
    (categories, then one row per series with its values)."""
    chart = (f'{og.DECL}<c:chartSpace xmlns:c="http://schemas.openxmlformats.org/drawingml/2006/'
             f'chart" xmlns:a="{og.NS_A}"><c:chart><c:title><c:tx><c:rich><a:p><a:r>'
             "<a:t>charttitlemarker</a:t></a:r></a:p></c:rich></c:tx></c:title><c:plotArea>"
             "<c:barChart><c:ser><c:tx><c:strRef><c:strCache><c:pt idx=\"0\"><c:v>seriesmarker"
             "</c:v></c:pt></c:strCache></c:strRef></c:tx><c:cat><c:strRef><c:strCache>"
             "<c:pt idx=\"0\"><c:v>categorymarker</c:v></c:pt></c:strCache></c:strRef></c:cat>"
             "<c:val><c:numRef><c:numCache><c:pt idx=\"0\"><c:v>987654</c:v></c:pt>"
             "</c:numCache></c:numRef></c:val></c:ser></c:barChart></c:plotArea></c:chart>"
             "</c:chartSpace>")
    members = og.zip_members(og.pptx([(og.a_sp("slidemarker"), None)]))
    members["ppt/charts/chart1.xml"] = chart
    members["ppt/slides/_rels/slide1.xml.rels"] = og.rels(
        ("rIdC", "chart", "../charts/chart1.xml"))
    out = read(og.zip_bytes(members), "c.pptx", PPTX)
    assert lines(out) == ["# slide 1", "slidemarker", "[chart]", "charttitlemarker",
                          "\tcategorymarker", "seriesmarker\t987654"]


def test_xlsx_numbers_as_shown_not_as_stored() -> None:
    sheet = ('<row r="1"><c r="A1"><v>1.0299999999999999</v></c><c r="B1"><v>42</v></c>'
             '<c r="C1"><v>3.0000000000000004</v></c></row>')
    out = read(og.xlsx([("Numbers", "sheet1.xml", sheet)]), "n.xlsx", XLSX)
    assert out.status == "ok"
    assert "1.03\t42\t3\n" in out.text


def test_xlsx_number_formats_as_shown() -> None:
    """Fixed decimals, thousands separators and percent, built-in and custom, as the
    application shows them (what a person reads), not the stored double."""
    styles = (f'{og.DECL}<styleSheet xmlns="{og.NS_S}"><numFmts count="1">'
              '<numFmt numFmtId="170" formatCode="0.0%"/></numFmts>'
              '<cellXfs count="5"><xf numFmtId="0"/><xf numFmtId="2"/><xf numFmtId="4"/>'
              '<xf numFmtId="9"/><xf numFmtId="170"/></cellXfs></styleSheet>')
    sheet = ('<row r="1"><c r="A1" s="1"><v>3</v></c><c r="B1" s="2"><v>1234567.891</v></c>'
             '<c r="C1" s="3"><v>0.5</v></c><c r="D1" s="4"><v>0.1234</v></c></row>')
    out = read(og.xlsx([("F", "sheet1.xml", sheet)], styles=styles), "f.xlsx", XLSX)
    assert "3.00\t1,234,567.89\t50%\t12.3%" in out.text


# -- issue 20: the text Office readers used to leave behind -----------------------------------

NUMBERING = (
    '<w:abstractNum w:abstractNumId="0">'
    '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
    '<w:lvlText w:val="%1)"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/>'
    '<w:lvlText w:val="%2."/></w:lvl>'
    '<w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="upperRoman"/>'
    '<w:lvlText w:val="%1.%2.%3"/><w:suff w:val="space"/></w:lvl></w:abstractNum>'
    '<w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/>'
    '<w:lvlText w:val="\uf0b7"/></w:lvl></w:abstractNum>'
    '<w:abstractNum w:abstractNumId="2"><w:lvl w:ilvl="0"><w:start w:val="4"/>'
    '<w:numFmt w:val="lowerRoman"/><w:lvlText w:val="(%1)"/><w:pStyle w:val="Clause"/>'
    '</w:lvl></w:abstractNum>'
    '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
    '<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>'
    '<w:num w:numId="3"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0">'
    '<w:startOverride w:val="7"/></w:lvlOverride></w:num>'
    '<w:num w:numId="4"><w:abstractNumId w:val="2"/></w:num>'
)
STYLES_NUM = ('<w:style w:type="paragraph" w:styleId="Clause"><w:pPr><w:numPr>'
              '<w:numId w:val="4"/></w:numPr></w:pPr></w:style>'
              '<w:style w:type="paragraph" w:styleId="SubClause"><w:basedOn w:val="Clause"/>'
              '</w:style>')


def numbered(text: str, num: str, ilvl: int = 0) -> str:
    return og.w_p(f'<w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num}"/>'
                  "</w:numPr></w:pPr>", text)


def styled(text: str, style: str) -> str:
    return og.w_p(f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>', text)


def test_docx_list_numbers_as_shown():
    """Per-level formats and counters, deeper levels restarting, bullets from the symbol font,
    a start override on a second list of the same definition, numbering through a style
    (and a style based on it), and numId 0 switching numbering off."""
    body = (numbered("firstclause", "1") + numbered("subalpha", "1", 1)
            + numbered("subbeta", "1", 1) + numbered("deepword", "1", 2)
            + numbered("secondclause", "1") + numbered("subagain", "1", 1)
            + numbered("bulletword", "2") + numbered("", "1")  # empty: counts, no line
            + numbered("restartword", "3") + styled("styledclause", "Clause")
            + styled("basedclause", "SubClause")
            + og.w_p('<w:pPr><w:pStyle w:val="Clause"/><w:numPr><w:numId w:val="0"/>'
                     "</w:numPr></w:pPr>", "unnumbered"))
    out = read(og.docx(body, numbering=NUMBERING, styles=STYLES_NUM), "n.docx", DOCX)
    assert lines(out) == [
        "1) firstclause", "a. subalpha", "b. subbeta", "1.b.I deepword", "2) secondclause",
        "a. subagain", "\u2022 bulletword", "7) restartword", "(iv) styledclause",
        "(v) basedclause", "unnumbered"]


def test_list_number_formats():
    from bastion.readers.office.ooxml import list_number
    assert [list_number(n, "lowerLetter") for n in (1, 26, 27, 28)] == ["a", "z", "aa", "bb"]
    assert [list_number(n, "upperRoman") for n in (4, 9, 14, 1999)] == [
        "IV", "IX", "XIV", "MCMXCIX"]
    assert list_number(3, "decimalZero") == "03" and list_number(2, "ordinal") == "2nd"
    assert list_number(12, "ordinal") == "12th" and list_number(5, "unknownFmt") == "5"
    assert list_number(3, "cardinalText") == "Three" and list_number(3, "ordinalText") == "Third"


DOCX_COMMENTS = (
    '<w:comment w:id="0" w:author="Ann Auditor"><w:p><w:r><w:t>firstremark</w:t></w:r></w:p>'
    '<w:p><w:r><w:t>secondpara</w:t></w:r><w:del><w:r><w:delText>gone</w:delText></w:r>'
    "</w:del></w:p></w:comment>"
    '<w:comment w:id="1" w:author=""><w:p><w:r><w:t>orphanremark</w:t></w:r></w:p></w:comment>'
)


def test_docx_comments_after_their_paragraph():
    body = (og.w_p('<w:commentRangeStart w:id="0"/>', "commentedword",
                   '<w:commentRangeEnd w:id="0"/><w:r><w:commentReference w:id="0"/></w:r>')
            + og.w_p("nextword"))
    out = read(og.docx(body, comments=DOCX_COMMENTS), "c.docx", DOCX)
    assert lines(out) == ["commentedword", "[comment: Ann Auditor] firstremark secondpara",
                          "nextword", "## comments", "[comment] orphanremark"]


C_NS, DGM_NS = og.NS_C, og.NS_DGM
chart_xml, diagram_xml, drawing_run = og.chart_xml, og.diagram_xml, og.drawing_run


def test_docx_chart_diagram_alt_text_and_embedded_workbook():
    """After the paragraph that anchors them: a picture's alt text, a chart (titles, then
    the data as a table, values as the chart's format shows them), a SmartArt diagram (its
    nodes, parents first) and an embedded workbook read through the readers."""
    pic = drawing_run("<pic:pic xmlns:pic=\"x\"/>", descr="altdescword")
    chart = drawing_run(f'<c:chart xmlns:c="{C_NS}" r:id="rIdChart"/>')
    dgm = drawing_run(f'<dgm:relIds xmlns:dgm="{DGM_NS}" r:dm="rIdDgm"/>')
    ole = ('<w:r><w:object><o:OLEObject xmlns:o="urn:schemas-microsoft-com:office:office" '
           'r:id="rIdOle" ProgID="Excel.Sheet.12"/></w:object></w:r>')
    inner = og.xlsx([("Inner", "sheet1.xml",
                      '<row r="1"><c r="A1" t="inlineStr"><is><t>embeddedcellword</t></is>'
                      "</c></row>")])
    data = og.docx(
        og.w_p("anchorword", pic, chart, dgm, ole) + og.w_p("afterword"),
        parts={"word/charts/chart1.xml": chart_xml("charttitleword", [
                   ("seriesone", ["catA", "catB"], ["0.25", "0.5"]),
                   ("seriestwo", ["catA", "catB"], ["1", "2"])], fmt="0%"),
               "word/diagrams/data1.xml": diagram_xml(),
               "word/embeddings/Microsoft_Excel_Worksheet.xlsx": inner},
        part_rels=[("rIdChart", "chart", "charts/chart1.xml"),
                   ("rIdDgm", "diagramData", "diagrams/data1.xml"),
                   ("rIdOle", "package", "embeddings/Microsoft_Excel_Worksheet.xlsx")])
    out = read(data, "d.docx", DOCX)
    assert lines(out) == [
        "anchorword", "[alt text: altdescword]",
        "[chart]", "charttitleword", "axistitleword", "\tcatA\tcatB",
        "seriesone\t25%\t50%", "seriestwo\t100%\t200%",
        "[diagram]", "parentnode", "childnode", "siblingnode",
        "[embedded: Microsoft_Excel_Worksheet.xlsx (xlsx)]", "# Inner", "embeddedcellword",
        "afterword"]


def test_docx_vml_picture_alt_text_once():
    """A VML picture's ``alt`` is its alt text; inside mc:AlternateContent the DrawingML
    branch is read and the VML fallback not, so it appears once."""
    vml = '<w:r><w:pict><v:shape alt="vmlaltword"><v:imagedata/></v:shape></w:pict></w:r>'
    both = ('<w:r><mc:AlternateContent><mc:Choice Requires="wps">'
            + drawing_run("", descr="choicealtword")[5:-6]
            + "</mc:Choice><mc:Fallback><w:pict><v:shape alt=\"choicealtword\"/></w:pict>"
            "</mc:Fallback></mc:AlternateContent></w:r>")
    out = read(og.docx(og.w_p("oldpic", vml) + og.w_p("newpic", both)), "v.docx", DOCX)
    assert lines(out) == ["oldpic", "[alt text: vmlaltword]", "newpic",
                          "[alt text: choicealtword]"]


def test_docx_embedded_nesting_is_bounded_and_failures_are_one_line():
    """A document embedding itself embeds no deeper than the nesting limit; an embedded part
    no reader takes is one line saying why."""
    def with_embed(payload: bytes, name: str) -> bytes:
        ole = ('<w:r><w:object><o:OLEObject xmlns:o="urn:schemas-microsoft-com:office:office" '
               'r:id="rIdOle"/></w:object></w:r>')
        return og.docx(og.w_p("levelword", ole), parts={f"word/embeddings/{name}": payload},
                       part_rels=[("rIdOle", "package", f"embeddings/{name}")])

    doc = og.docx(og.w_p("innermost"))
    for _ in range(6):
        doc = with_embed(doc, "Document.docx")
    out = read(doc, "deep.docx", DOCX)
    assert out.status == "ok"
    assert out.text.count("levelword") == 4  # this document and MAX_NESTING levels inside
    last = lines(out)[-1]
    assert last.startswith("[embedded: Document.docx: not read: ") and "too deep" in last
    assert out.limit == "max_depth"  # the cap met is named in the record, never a silent ok
    out = read(with_embed(b"\x00\x01 not a document", "oleObject1.bin"), "b.docx", DOCX)
    assert lines(out)[0] == "levelword"
    assert lines(out)[1].startswith("[embedded: oleObject1.bin: not read: ")


# -- XLSX -------------------------------------------------------------------------------------

NUMFMT_STYLES = (
    f'{og.DECL}<styleSheet xmlns="{og.NS_S}"><numFmts count="9">'
    '<numFmt numFmtId="164" formatCode="&quot;$&quot;#,##0.00"/>'
    '<numFmt numFmtId="165" formatCode="[$\u20ac-407] #,##0.00;[Red]-[$\u20ac-407] #,##0.00"/>'
    '<numFmt numFmtId="166" formatCode="0.00&quot; kg&quot;"/>'
    '<numFmt numFmtId="167" formatCode="h:mm"/>'
    '<numFmt numFmtId="168" formatCode="0.00E+00"/>'
    '<numFmt numFmtId="169" formatCode="# ?/?"/>'
    '<numFmt numFmtId="170" formatCode="[h]:mm"/>'
    '<numFmt numFmtId="171" formatCode="#,##0;(#,##0)"/>'
    '<numFmt numFmtId="172" formatCode="000-00-0000"/></numFmts>'
    '<cellXfs count="13"><xf numFmtId="0"/><xf numFmtId="164"/><xf numFmtId="165"/>'
    '<xf numFmtId="166"/><xf numFmtId="167"/><xf numFmtId="168"/><xf numFmtId="169"/>'
    '<xf numFmtId="9"/><xf numFmtId="170"/><xf numFmtId="171"/><xf numFmtId="18"/>'
    '<xf numFmtId="172"/><xf numFmtId="10"/></cellXfs></styleSheet>'
)


def test_xlsx_numbers_as_excel_shows_them():
    vals = [("1", "1234.5"), ("2", "-1234.5"), ("3", "12.5"), ("4", "45306.75"),
            ("5", "123456"), ("6", "1.25"), ("7", "0.025"), ("8", "1.1458333333333333"),
            ("9", "-5"), ("10", "0.75"), ("11", "123456789"), ("12", "0.000125")]
    cells = "".join(f'<c r="{chr(65 + i)}1" s="{s}"><v>{v}</v></c>' for i, (s, v) in
                    enumerate(vals))
    out = read(og.xlsx([("F", "sheet1.xml", f'<row r="1">{cells}</row>')],
                       styles=NUMFMT_STYLES), "f.xlsx", XLSX)
    assert lines(out) == ["# F", "\t".join([
        "$1,234.50", "-\u20ac 1,234.50", "12.50 kg", "18:00", "1.23E+05", "1 1/4", "3%",
        "27:30", "(5)", "6:00 PM", "123-45-6789", "0.01%"])]


def test_number_format_rounding_and_sections():
    from bastion.readers.office.numfmt import compile_format
    cases = [("0%", 0.025, "3%"), ("0.00", 1.005, "1.01"), ("0", 2.5, "3"), ("0", -2.5, "-3"),
             ("#,##0,\"K\"", 1234567, "1,235K"), ("#.00", 0.5, ".50"), ("0.0#", 1.5, "1.5"),
             ('#,##0;-#,##0;"zero"', 0, "zero"), ("00000", 42, "00042"),
             ("##0.0E+0", 123456, "123.5E+3"), ("# ??/16", 1.5, "1 8/16"),
             ('General" units"', 3.5, "3.5 units")]
    for code, value, shown in cases:
        assert compile_format(code).render(value) == shown, code
    assert compile_format("General") is None and compile_format("@") is None
    assert compile_format("x" * 1000) is None  # over MAX_CODE: General


THREADED_NS = "http://schemas.microsoft.com/office/spreadsheetml/2018/threadedcomments"


def xlsx_with_extras(sheet: str, sheet_tail: str = "", members: dict | None = None,
                     sheet_rels: list[tuple[str, str, str]] = (),
                     wb_rels: list[tuple[str, str, str]] = ()) -> bytes:
    m = og.zip_members(og.xlsx([("Data", "sheet1.xml", sheet)]))
    m["xl/worksheets/sheet1.xml"] = (
        f'{og.DECL}<worksheet xmlns="{og.NS_S}" xmlns:r="{og.NS_R}"><sheetData>{sheet}'
        f"</sheetData>{sheet_tail}</worksheet>")
    if sheet_rels:
        m["xl/worksheets/_rels/sheet1.xml.rels"] = og.rels(*sheet_rels)
    if wb_rels:
        wb = m["xl/_rels/workbook.xml.rels"].decode()
        extra = og.rels(*wb_rels).split(f'<Relationships xmlns="{og.PKG}">')[1]
        m["xl/_rels/workbook.xml.rels"] = wb.replace("</Relationships>", extra)
    m.update(members or {})
    return og.zip_bytes(m)


def test_xlsx_comments_threads_headers_footers():
    """Notes and threaded comments follow the row of their cell (a cell's threaded comment
    replaces the legacy copy); header and footer texts, &-codes removed, follow the sheet."""
    sheet = ('<row r="1"><c r="A1" t="inlineStr"><is><t>cellone</t></is></c></row>'
             '<row r="3"><c r="B3" t="inlineStr"><is><t>cellthree</t></is></c></row>')
    tail = ('<headerFooter><oddHeader>&amp;L&amp;"Arial,Bold"&amp;14Leftheadword&amp;C'
            "Page &amp;P of &amp;N&amp;RR&amp;&amp;D</oddHeader><evenHeader>&amp;L&amp;"
            '"Arial,Bold"&amp;14Leftheadword&amp;CPage &amp;P of &amp;N&amp;RR&amp;&amp;D'
            "</evenHeader><oddFooter>&amp;C&amp;KFF0000Footerword &amp;D</oddFooter>"
            "</headerFooter>")
    comments = (f'{og.DECL}<comments xmlns="{og.NS_S}"><authors><author>Legacy Author</author>'
                '</authors><commentList><comment ref="A1" authorId="0"><text><r><t>noteword'
                '</t></r></text></comment><comment ref="B2" authorId="0"><text><t>'
                "[Threaded comment] legacycopy</t></text></comment><comment ref=\"C9\" "
                'authorId="0"><text><t>emptyrownote</t></text></comment></commentList>'
                "</comments>")
    threaded = (f'{og.DECL}<ThreadedComments xmlns="{THREADED_NS}"><threadedComment ref="B2" '
                'id="{1}" personId="{P1}"><text>threadword</text></threadedComment>'
                '<threadedComment ref="B2" id="{2}" parentId="{1}" personId="{P2}"><text>'
                "replyword</text></threadedComment></ThreadedComments>")
    persons = (f'{og.DECL}<personList xmlns="{THREADED_NS}"><person displayName="Tess Thread" '
               'id="{P1}"/><person displayName="Rita Reply" id="{P2}"/></personList>')
    data = xlsx_with_extras(
        sheet, tail,
        members={"xl/comments1.xml": comments, "xl/threadedComments/tc1.xml": threaded,
                 "xl/persons/person.xml": persons},
        sheet_rels=[("rC", "comments", "../comments1.xml"),
                    ("rT", "http://schemas.microsoft.com/office/2017/10/relationships/"
                           "threadedComment", "../threadedComments/tc1.xml")],
        wb_rels=[("rP", "http://schemas.microsoft.com/office/2017/10/relationships/person",
                  "persons/person.xml")])
    out = read(data, "c.xlsx", XLSX)
    assert lines(out) == [
        "# Data", "cellone", "[comment A1: Legacy Author] noteword",
        "[comment B2: Tess Thread] threadword", "[comment B2: Rita Reply] replyword",
        "\tcellthree", "[comment C9: Legacy Author] emptyrownote",
        "## header", "Leftheadword\tPage of\tR&D", "## footer", "Footerword"]


def test_xlsx_drawing_shapes_alt_text_and_chart():
    xdr = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
    drawing = (
        f'{og.DECL}<xdr:wsDr xmlns:xdr="{xdr}" xmlns:a="{og.NS_A}" xmlns:r="{og.NS_R}" '
        f'xmlns:c="{C_NS}"><xdr:twoCellAnchor><xdr:sp><xdr:nvSpPr><xdr:cNvPr id="2" '
        'name="TextBox 1"/></xdr:nvSpPr><xdr:txBody><a:p><a:r><a:t>shapetextword</a:t></a:r>'
        "</a:p></xdr:txBody></xdr:sp></xdr:twoCellAnchor><xdr:twoCellAnchor><xdr:pic>"
        '<xdr:nvPicPr><xdr:cNvPr id="3" name="Picture 2" descr="picturealtword"/>'
        "</xdr:nvPicPr></xdr:pic></xdr:twoCellAnchor><xdr:twoCellAnchor><xdr:graphicFrame>"
        '<a:graphic><a:graphicData><c:chart r:id="rIdC"/></a:graphicData></a:graphic>'
        "</xdr:graphicFrame></xdr:twoCellAnchor></xdr:wsDr>")
    data = xlsx_with_extras(
        '<row r="1"><c r="A1"><v>5</v></c></row>', '<drawing r:id="rD"/>',
        members={"xl/drawings/drawing1.xml": drawing,
                 "xl/drawings/_rels/drawing1.xml.rels": og.rels(
                     ("rIdC", "chart", "../charts/chart1.xml")),
                 "xl/charts/chart1.xml": chart_xml("sheetchartword",
                                                   [("s", ["x1", "x2"], ["3", "4.5"])])},
        sheet_rels=[("rD", "drawing", "../drawings/drawing1.xml")])
    assert lines(read(data, "d.xlsx", XLSX)) == [
        "# Data", "5", "shapetextword", "[alt text: picturealtword]", "[chart]",
        "sheetchartword", "axistitleword", "\tx1\tx2", "s\t3\t4.5"]


def test_xlsx_protected_with_default_password_is_read(tmp_path: Path):
    """Excel encrypts a workbook that is only protected (against changes) with the default
    password ``VelvetSweatshop``: it opens without asking, so it is read; another password
    stays ``encrypted``."""
    msoffcrypto = pytest.importorskip("msoffcrypto")
    from msoffcrypto.format.ooxml import OOXMLFile

    members = og.zip_members(og.xlsx([("Locked", "sheet1.xml",
                                       '<row r="1"><c r="A1" t="inlineStr"><is><t>'
                                       "protectedword</t></is></c></row>")]))
    members["docProps/thumbnail.jpeg"] = random.Random(3).randbytes(6000)  # msoffcrypto
    plain = og.zip_bytes(members)  # mis-sizes the mini stream of a package under 4 KiB
    for password, status in (("VelvetSweatshop", "ok"), ("secret", "error")):
        buf = io.BytesIO()
        OOXMLFile(io.BytesIO(plain)).encrypt(password, buf)
        out = read(buf.getvalue(), "locked.xlsx", "application/x-ooxml-encrypted")
        assert out.status == status, out.error
        if status == "ok":
            assert lines(out) == ["# Locked", "protectedword"]
            assert out.result.details["default_password"] is True
        else:
            assert out.error_kind == "encrypted"
    assert msoffcrypto


# -- PPTX -------------------------------------------------------------------------------------

P188_NS = "http://schemas.microsoft.com/office/powerpoint/2018/8/main"


def test_pptx_comments_alt_text_diagram_and_embedded():
    pic = ('<p:pic><p:nvPicPr><p:cNvPr id="4" name="Picture 3" descr="slidealtword"/>'
           "<p:cNvPicPr/><p:nvPr/></p:nvPicPr></p:pic>")
    members = og.zip_members(og.pptx([(og.a_sp("slidebodyword") + pic, og.a_sp("noteword")),
                                       (og.a_sp("secondslide"), None)]))
    legacy = (f'{og.DECL}<p:cmLst xmlns:p="{og.NS_P}"><p:cm authorId="1"><p:text>'
              "legacycommentword</p:text></p:cm></p:cmLst>")
    modern = (f'{og.DECL}<p188:cmLst xmlns:p188="{P188_NS}" xmlns:a="{og.NS_A}"><p188:cm '
              'authorId="{A1}"><p188:txBody><a:p><a:r><a:t>moderncommentword</a:t></a:r></a:p>'
              '</p188:txBody><p188:replyLst><p188:reply authorId="{A2}"><p188:txBody><a:p><a:r>'
              "<a:t>modernreplyword</a:t></a:r></a:p></p188:txBody></p188:reply></p188:replyLst>"
              "</p188:cm></p188:cmLst>")
    members["ppt/comments/comment1.xml"] = legacy
    members["ppt/comments/modernComment_1.xml"] = modern
    members["ppt/commentAuthors.xml"] = (
        f'{og.DECL}<p:cmAuthorLst xmlns:p="{og.NS_P}"><p:cmAuthor id="1" name="Leo Legacy"/>'
        "</p:cmAuthorLst>")
    members["ppt/authors.xml"] = (f'{og.DECL}<p188:authorLst xmlns:p188="{P188_NS}">'
                                  '<p188:author id="{A1}" name="Mo Modern"/><p188:author '
                                  'id="{A2}" name="Ray Reply"/></p188:authorLst>')
    members["ppt/diagrams/data1.xml"] = diagram_xml()
    members["ppt/embeddings/Microsoft_Word_Document.docx"] = og.docx(og.w_p("embeddocword"))
    members["ppt/slides/_rels/slide1.xml.rels"] = og.rels(
        ("rIdN", "notesSlide", "../notesSlides/notesSlide1.xml"),
        ("rIdD", "diagramData", "../diagrams/data1.xml"),
        ("rIdE", "package", "../embeddings/Microsoft_Word_Document.docx"),
        ("rIdC", "comments", "../comments/comment1.xml"),
        ("rIdM", "http://schemas.microsoft.com/office/2018/10/relationships/comments",
         "../comments/modernComment_1.xml"))
    out = read(og.zip_bytes(members), "p.pptx", PPTX)
    assert lines(out) == [
        "# slide 1", "slidebodyword", "[alt text: slidealtword]",
        "[diagram]", "parentnode", "childnode", "siblingnode",
        "[embedded: Microsoft_Word_Document.docx (docx)]", "embeddocword",
        "[comment: Leo Legacy] legacycommentword", "[comment: Mo Modern] moderncommentword",
        "[comment: Ray Reply] modernreplyword", "## notes", "noteword",
        "# slide 2", "secondslide"]


# -- ODF --------------------------------------------------------------------------------------

ODF_LISTS = (
    '<text:list-style style:name="LNum"><text:list-level-style-number text:level="1" '
    'style:num-format="1" style:num-suffix=")"/><text:list-level-style-number text:level="2" '
    'style:num-format="a" style:num-suffix="." text:display-levels="2"/>'
    '<text:list-level-style-number text:level="3" style:num-format="I" style:num-prefix="("'
    ' style:num-suffix=")"/></text:list-style>'
    '<text:list-style style:name="LBul"><text:list-level-style-bullet text:level="1" '
    'text:bullet-char="\ue00a"/></text:list-style>'
    '<style:style style:name="PL" style:family="paragraph" style:list-style-name="LBul"/>'
)


def test_odt_list_labels_as_shown():
    """Number formats per level with prefix, suffix and display-levels, nested restarts,
    continue-numbering, start-value, list headers unnumbered, a bullet from a symbol font,
    and a list whose style comes from its paragraphs' style."""
    def item(text: str, inner: str = "", start: str = "") -> str:
        s = f' text:start-value="{start}"' if start else ""
        return f"<text:list-item{s}><text:p>{text}</text:p>{inner}</text:list-item>"

    sub = ('<text:list>' + item("subone") + item("subtwo", '<text:list>' + item("deepone")
                                                + "</text:list>") + "</text:list>")
    body = ('<text:list text:style-name="LNum">' + item("firstitem") + item("seconditem", sub)
            + "<text:list-header><text:p>headerline</text:p></text:list-header>"
            + item("thirditem") + "</text:list>"
            + "<text:p>between</text:p>"
            + '<text:list text:style-name="LNum" text:continue-numbering="true">'
            + item("fourthitem") + item("jumpitem", start="9") + "</text:list>"
            + '<text:list><text:list-item><text:p text:style-name="PL">bulletitem</text:p>'
            "</text:list-item></text:list>")
    out = read(og.odf("text", body, automatic=ODF_LISTS), "l.odt", ODT)
    assert lines(out) == [
        "1) firstitem", "2) seconditem", "2.a. subone", "2.b. subtwo", "(I) deepone",
        "headerline", "3) thirditem", "between", "4) fourthitem", "9) jumpitem",
        "\u2022 bulletitem"]


def test_odf_annotations_headers_footers_and_objects():
    master = (
        "<office:master-styles><style:master-page style:name=\"Standard\"><style:header>"
        "<text:p>headerword <text:page-number>1</text:page-number></text:p></style:header>"
        "<style:header-left style:display=\"false\"><text:p>hiddenword</text:p>"
        "</style:header-left><style:footer><style:region-left><text:p>leftfoot</text:p>"
        "</style:region-left><style:region-right><text:p><text:sheet-name>???"
        "</text:sheet-name></text:p></style:region-right></style:footer></style:master-page>"
        "<style:master-page style:name=\"Other\"><style:header><text:p>headerword "
        "<text:page-number>2</text:page-number></text:p></style:header></style:master-page>"
        "</office:master-styles>")
    chart_body = ("<chart:chart><chart:title><text:p>odfcharttitle</text:p></chart:title>"
                  "<table:table table:name=\"local-table\"><table:table-row><table:table-cell/>"
                  "<table:table-cell><text:p>colword</text:p></table:table-cell>"
                  "</table:table-row><table:table-row><table:table-cell><text:p>rowword"
                  "</text:p></table:table-cell><table:table-cell office:value-type=\"float\" "
                  "office:value=\"42\"><text:p>42</text:p></table:table-cell></table:table-row>"
                  "</table:table></chart:chart>")
    sheet_body = ('<table:table table:name="Embedded"><table:table-row><table:table-cell>'
                  "<text:p>objectcellword</text:p></table:table-cell></table:table-row>"
                  "</table:table>")
    frame = ('<draw:frame><draw:object xlink:href="./Object 1"/></draw:frame>'
             '<draw:frame><draw:object xlink:href="./Object 2"/><svg:desc>framealtword'
             "</svg:desc></draw:frame>")
    body = ("<text:p>annotated<office:annotation><dc:creator>Carla Critic</dc:creator>"
            "<dc:date>2024-01-01</dc:date><text:p>remarkword</text:p><text:p>more</text:p>"
            f"</office:annotation> text</text:p><text:p>objects{frame}</text:p>")
    data = og.odf("text", body, styles=master,
                  objects={"Object 1": ("chart", chart_body),
                           "Object 2": ("spreadsheet", sheet_body)})
    out = read(data, "a.odt", ODT)
    assert lines(out) == [
        "annotated text", "[comment: Carla Critic] remarkword more", "objects",
        "[chart]", "odfcharttitle", "\tcolword", "rowword\t42",
        "[embedded: Object 2 (ods)]", "# Embedded", "objectcellword",
        "[alt text: framealtword]",
        "## header", "headerword", "## footer", "leftfoot"]


def test_odp_footer_declarations():
    body = ('<presentation:footer-decl presentation:name="ftr1">slidefooterword'
            "</presentation:footer-decl><draw:page draw:name=\"p1\" presentation:use-footer-name"
            '="ftr1"><draw:frame><draw:text-box><text:p>slideword</text:p></draw:text-box>'
            "</draw:frame></draw:page>")
    assert lines(read(og.odf("presentation", body), "f.odp", ODP)) == [
        "# slide 1", "slideword", "## footer", "slidefooterword"]


# -- format characters ------------------------------------------------------------------------

def test_soft_hyphens_and_invisible_breaks_removed_everywhere():
    """U+00AD, U+200B, U+2060 and U+FEFF are removed, U+2011 becomes '-', in every office
    family; joiners (U+200C/D) are kept."""
    word = "in\u00adfor\u200bma\u2060tion\ufeff non\u2011stop \u200dkept"
    want = "information non-stop \u200dkept"
    docx = og.docx(og.w_p(word) + og.w_p('<w:r><w:t>soft</w:t><w:softHyphen/><w:t>ware</w:t>'
                                         "</w:r>"))
    assert lines(read(docx, "s.docx", DOCX)) == [want, "software"]
    xlsx = og.xlsx([("S", "sheet1.xml", '<row r="1"><c r="A1" t="s"><v>0</v></c>'
                     f'<c r="B1" t="inlineStr"><is><t>{word}</t></is></c></row>')],
                   shared=[word])
    assert lines(read(xlsx, "s.xlsx", XLSX)) == ["# S", f"{want}\t{want}"]
    pptx = og.pptx([(og.a_sp(word), None)])
    assert lines(read(pptx, "s.pptx", PPTX)) == ["# slide 1", want]
    odt = og.odf("text", f"<text:p>{word}</text:p>")
    assert lines(read(odt, "s.odt", ODT)) == [want]


# -- issue 20 classes in real documents (origins in samples/office/ORIGIN.md) -----------------

REAL_CLASSES = {
    # DOCX comments (Word), each after the paragraph its reference sits in
    "comments-rich-para.docx": (DOCX, [
        "Some text worthy of note.\n[comment: Steve Canny] Text with hyperlink "
        "https://google.com embedded.\nOther document text.",
        "Paragraph 6\n[comment] Paragraph with Heading 2 paragraph style.\n"]),
    # list numbering through the "List Number" paragraph style (Word for Mac)
    "num-having-numbering-part.docx": (DOCX, ["1. Paragraph having List Number style.\n"]),
    # SmartArt and a chart with its data (Word for Mac)
    "shp-inline-shape-access.docx": (DOCX, [
        "[diagram]\nfoo\nbar\nbaz\n",
        "[chart]\n\tCategory 1\tCategory 2\tCategory 3\tCategory 4\n"
        "Series 1\t4.3\t2.5\t3.5\t4.5\nSeries 2\t2.4\t4.4\t1.8\t2.8\n"]),
    # cell notes (Excel; Google Docs)
    "test_comments_excel.xlsx": (XLSX, ["# Sheet1\n[comment B1: Author] hello\n",
                                        "[comment C2: Author] 1st line 2nd line\n"]),
    "test_comments_gdocs.xlsx": (XLSX, ["# Sheet1\n[comment B1] Just a test\n"]),
    # a chart sheet's drawing and the default LibreOffice footer ("Page &P")
    "sheets_order.xlsx": (XLSX, ["14\t2744\n[chart]\n\t-10\t-9\t-8",
                                 "y\t-1000\t-729\t-512", "## footer\nPage\n# e\n"]),
    # a footer with font codes and fields (Excel)
    "input-weird.xlsx": (XLSX, [
        "## footer\nSHP\\\\SRSReports\tCompany Confidential\tPage of\n"]),
    # time-only formats (hh:mm:ss) and a date-time one
    "timeformat.xlsx": (XLSX, ["03-08-2017 14:35:00\t14:40:30\n", "00:01:59\n"]),
    # percent formats rounded as Excel rounds (0.005 with 0% shows 1%)
    "percentage.xlsx": (XLSX, ["1.23%\n50%\n1%\n0.01%\n"]),
    # PowerPoint: picture alt text, a chart with its data, SmartArt
    "shp-shapes.pptx": (PPTX, ["Picture is shapes[2]\n[alt text: python-powered.png]\n",
                               "\t1st Qtr\t2nd Qtr\t3rd Qtr\t4th Qtr\n"
                               "Sales\t8.2\t3.2\t1.4\t1.2\n",
                               "[diagram]\nshapes[5]\nSmart Art\n"]),
    # an Excel workbook embedded in a slide, read through the readers
    "shp-access-ole-object.pptx": (PPTX, [
        "# slide 1\n[embedded: Microsoft_Excel_Worksheet.xlsx (xlsx)]\n# Sheet1\n1\n2\n3\n"]),
    # master-page header and footer (fields dropped) after the body
    "headerfooter.odt": (ODT, ["Lorem ipsum\n## header\nHeader\t\tTest\n## footer\n"
                               "Footer\t\tBottom\n"]),
    # bullets per level
    "twolevellist.odt": (ODT, ["\u25cf Item B\n\u25cb Subitem B.1\n\u25cb Subitem B.2 (bold)\n"
                               "\u25cf Item C\n"]),
    "definitionlists.odt": (ODT, ["\u2022 liste 1\n\u2022 liste 2\n1. nummer 1\n2. nummer 2\n"]),
    # a spreadsheet object embedded in a slide
    "emb_spreadsheet.odp": (ODP, ["[embedded: Object 1 (ods)]\n# Sheet1\ncol1\tcol2\tcol3\n"
                                  "val11\tval21\tval31\n"]),
}


@pytest.mark.parametrize("name", sorted(REAL_CLASSES))
def test_real_documents_issue20_classes(name: str):
    mime, phrases = REAL_CLASSES[name]
    out = read((SAMPLES / name).read_bytes(), name, mime)
    assert out.status == "ok", out.error
    for phrase in phrases:
        assert phrase in out.text


def test_bench_class_documents_show_their_phrases():
    """The documents bench/peers.py scores every tool on (tests/officegen.issue20_documents):
    bastion shows every phrase, as the table's matching rules read them."""
    import re
    from bastion.readers.detect import detect_bytes

    for cls, name, data, phrases, match in og.issue20_documents():
        out = read(data, name, detect_bytes(data, name))
        assert out.status == "ok", (name, out.error)

        def norm(s: str) -> str:
            s = s.lower()
            return " ".join((re.sub(r"[^\w]+", " ", s) if match == "words" else s).split())

        for phrase in phrases:
            assert norm(phrase) in norm(out.text), (cls, name, phrase)


def test_hostile_chart_and_diagram_are_capped():
    """A chart or SmartArt part with more points than max_parts stops with that cap, the text
    so far kept, instead of holding every point."""
    chart = og.chart_xml("hugechart", [(f"s{i}", ["c"] * 50, ["1"] * 50) for i in range(100)])
    dgm = og.diagram_xml().replace("</dgm:cxnLst>", '<dgm:cxn srcId="1" destId="2"/>' * 5000
                                   + "</dgm:cxnLst>")
    for part, typ, el in (("word/charts/chart1.xml", "chart",
                           f'<c:chart xmlns:c="{og.NS_C}" r:id="rX"/>'),
                          ("word/diagrams/data1.xml", "diagramData",
                           f'<dgm:relIds xmlns:dgm="{og.NS_DGM}" r:dm="rX"/>')):
        data = og.docx(og.w_p("beforecap", og.drawing_run(el)),
                       parts={part: chart if typ == "chart" else dgm},
                       part_rels=[("rX", typ, part.split("/", 1)[1])])
        out = read(data, "h.docx", DOCX, max_parts=1000)
        assert out.limit == "max_parts", typ
        assert out.text.startswith("beforecap\n")


def test_xlsx_drawing_smartart_and_embedded_document():
    xdr = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
    drawing = (f'{og.DECL}<xdr:wsDr xmlns:xdr="{xdr}" xmlns:a="{og.NS_A}" xmlns:r="{og.NS_R}">'
               "<xdr:twoCellAnchor><xdr:graphicFrame><a:graphic><a:graphicData>"
               f'<dgm:relIds xmlns:dgm="{og.NS_DGM}" r:dm="rIdD"/></a:graphicData></a:graphic>'
               "</xdr:graphicFrame></xdr:twoCellAnchor></xdr:wsDr>")
    data = xlsx_with_extras(
        '<row r="1"><c r="A1"><v>7</v></c></row>',
        '<drawing r:id="rD"/><oleObjects><oleObject progId="Word.Document.12" r:id="rO"/>'
        "</oleObjects>",
        members={"xl/drawings/drawing1.xml": drawing,
                 "xl/drawings/_rels/drawing1.xml.rels": og.rels(
                     ("rIdD", "diagramData", "../diagrams/data1.xml")),
                 "xl/diagrams/data1.xml": og.diagram_xml("xlparent", "xlchild", "xlsibling"),
                 "xl/embeddings/Microsoft_Word_Document.docx": og.docx(og.w_p("xlembedword"))},
        sheet_rels=[("rD", "drawing", "../drawings/drawing1.xml"),
                    ("rO", "package", "../embeddings/Microsoft_Word_Document.docx")])
    assert lines(read(data, "s.xlsx", XLSX)) == [
        "# Data", "7", "[diagram]", "xlparent", "xlchild", "xlsibling",
        "[embedded: Microsoft_Word_Document.docx (docx)]", "xlembedword"]


def test_number_format_grouping_and_literal_sections():
    from bastion.readers.office.numfmt import compile_format
    assert compile_format("#,#00000").render(42) == "00,042"
    assert compile_format('0;"negative"').render(-3) == "negative"
    assert compile_format("#,##0").render(0.3) == "0"


# -- issue 20 classes in documents LibreOffice wrote (samples/office/ORIGIN.md, "Written by
# LibreOffice"; the flat sources in samples/office-src) ---------------------------------------

LO_TEXT = [
    "The committee met on Monday. Minutes follow.",
    "[comment: Ada Reviewer] Check the date with finance. Second comment paragraph.",
    "Budget information for the well-known year 2024-25.",  # U+00AD dropped, U+2011 as -
    "A marked phrase ends here.",
    "[comment: Bo Editor] Range comment on this phrase.",
    "Before the box.",
    "Text box sentence here.",  # once, though the DOCX has it in mc:Choice and mc:Fallback
    "Footnoted claim.",
]


def test_libreoffice_odt_annotations_soft_hyphens_frame_and_footnote():
    raw = (SAMPLES / "lo-notes.odt").read_bytes()
    assert "in\u00adfor".encode() in xmlsafe.open_zip(raw).read("content.xml")
    out = read(raw, "lo-notes.odt", ODT)
    assert lines(out) == LO_TEXT + ["The footnote body.", "Last paragraph."]


def test_libreoffice_docx_comments_soft_hyphens_and_text_box():
    raw = (SAMPLES / "lo-notes.docx").read_bytes()
    xml = xmlsafe.open_zip(raw).read("word/document.xml")
    assert b"<w:softHyphen/>" in xml and b"<w:noBreakHyphen/>" in xml
    assert xml.count(b"Text box sentence here.") == 2  # both branches of AlternateContent
    out = read(raw, "lo-notes.docx", DOCX)
    assert lines(out) == LO_TEXT + ["Last paragraph.", "## footnotes", "\tThe footnote body."]


def test_libreoffice_pptx_comments_before_the_notes():
    out = read((SAMPLES / "lo-notes.pptx").read_bytes(), "lo-notes.pptx", PPTX)
    assert lines(out) == [
        "# slide 1", "Quarterly review slide.",
        "[comment: Ada Reviewer] Add the revenue chart.",
        "[comment: Bo Editor] Agreed, next week.",
        "## notes", "Speaker note for slide one.",
        "# slide 2", "Second slide text.", "[comment: Bo Editor] Slide two remark."]


LO_SHEET = [
    "# Budget", "Item\tAmount", "Rent\t1200", "[comment B2: Ada Reviewer] Rent rises in June.",
    "Power\t80", "[comment A3: Bo Editor] Power bill estimate. Second line of the note.",
    "[comment B5: Ada Reviewer] Note on an empty cell.", "Total\t1280",
    "Sheet text box words.", "Cell anchored box.", "## footer", "Page"]


def test_libreoffice_xlsx_notes_and_text_boxes():
    out = read((SAMPLES / "lo-notes.xlsx").read_bytes(), "lo-notes.xlsx", XLSX)
    assert lines(out) == LO_SHEET


def test_libreoffice_workbook_under_the_default_password():
    """lo-notes.xlsx encrypted by msoffcrypto-tool with VelvetSweatshop (not by Excel)."""
    raw = (SAMPLES / "lo-velvet.xlsx").read_bytes()
    assert raw[:8] == bytes.fromhex("d0cf11e0a1b11ae1")
    out = read(raw, "lo-velvet.xlsx", "application/x-ooxml-encrypted")
    assert lines(out) == LO_SHEET
    assert out.result.details["default_password"] is True


def test_libreoffice_ods_annotations_and_text_boxes_read_as_the_xlsx():
    """The same workbook as lo-notes.xlsx: cell annotations after their rows, the text boxes
    (one in table:shapes, one anchored to B3) after the sheet's rows, not in the cell."""
    raw = (SAMPLES / "lo-notes.ods").read_bytes()
    xml = xmlsafe.open_zip(raw).read("content.xml")
    assert b"<table:shapes>" in xml and b'table:end-cell-address="Budget.D4"' in xml
    assert lines(read(raw, "lo-notes.ods", ODS)) == LO_SHEET


def test_libreoffice_odp_annotations_before_the_notes_as_in_the_pptx():
    """LibreOffice writes a slide's officeooo:annotation after its presentation:notes; the
    comments still come after the slide's text and before ``## notes``, as in lo-notes.pptx."""
    raw = (SAMPLES / "lo-notes.odp").read_bytes()
    xml = xmlsafe.open_zip(raw).read("content.xml")
    assert xml.index(b"</presentation:notes>") < xml.index(b"<officeooo:annotation")
    odp = lines(read(raw, "lo-notes.odp", ODP))
    pptx = lines(read((SAMPLES / "lo-notes.pptx").read_bytes(), "lo-notes.pptx", PPTX))
    assert odp == pptx and "[comment: Ada Reviewer] Add the revenue chart." in odp


def test_ods_drawings_after_the_rows_and_capped_by_max_parts():
    """A sheet's shapes (table:shapes, and shapes anchored in cells: a group held as one) wait
    for the end of its rows; more held lines than max_parts reach that cap, the open row and
    the held lines written first."""
    frame = '<draw:frame><draw:text-box><text:p>{}</text:p></draw:text-box></draw:frame>'
    cell = "<table:table-row><table:table-cell>{}<text:p>{}</text:p></table:table-cell></table:table-row>"
    group = f"<draw:g>{frame.format('groupword')}{frame.format('groupword2')}</draw:g>"
    body = (f'<table:table table:name="S"><table:shapes>{frame.format("shapeword")}'
            f'</table:shapes>{cell.format(group, "cellword")}'
            f'{cell.format(frame.format("boxword"), "lastcell")}</table:table>')
    data = og.odf("spreadsheet", body)
    assert lines(read(data, "d.ods", ODS)) == [
        "# S", "cellword", "lastcell", "shapeword", "groupword", "groupword2", "boxword"]
    out = read(data, "d.ods", ODS, max_parts=3)
    assert out.limit == "max_parts"
    assert out.text.splitlines()[:6] == [
        "# S", "cellword", "shapeword", "groupword", "groupword2", "boxword"]
