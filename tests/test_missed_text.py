"""Text classes the readers used to miss, each found on real documents (issue 35): list
numbers of numbering overrides and restarts, documents inside embedded documents, ODP
master-page headers and footers, ODF drawing shapes and their titles/descriptions, spreadsheet
dates and times as their cell format shows them, PDF form field values."""

from __future__ import annotations

from bastion.readers.base import Document, Limits
from bastion.readers.dispatch import Outcome, read_document
from bastion.readers.runtime.context import LocalContext
from tests import officegen as og

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def read(data: bytes, name: str, mime: str) -> Outcome:
    return read_document(Document(data, name, mime), LocalContext(Limits()))


def lines(out: Outcome) -> list[str]:
    assert out.status == "ok", (out.status, out.error)
    return out.text.splitlines()


def numbered(text: str, num: str, ilvl: int = 0) -> str:
    return og.w_p(f'<w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num}"/>'
                  "</w:numPr></w:pPr>", text)


NUMBERING = (
    '<w:abstractNum w:abstractNumId="0">'
    '<w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/>'
    '<w:lvlText w:val="%1)"/></w:lvl>'
    '<w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/>'
    '<w:lvlText w:val="%2."/></w:lvl></w:abstractNum>'
    '<w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
    # a restarted list at 7 (Word's "Restart numbering" / "Set numbering value")
    '<w:num w:numId="3"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="0">'
    '<w:startOverride w:val="7"/></w:lvlOverride></w:num>'
    # a restart that sets the second level's value, not the first's
    '<w:num w:numId="5"><w:abstractNumId w:val="0"/><w:lvlOverride w:ilvl="1">'
    '<w:startOverride w:val="5"/></w:lvlOverride></w:num>'
)


def test_docx_numbering_overrides_and_restarts_number_as_word_does() -> None:
    body = (numbered("one", "1") + numbered("two", "1")
            + numbered("seven", "3") + numbered("eight", "3")
            + numbered("three", "1")  # back in the first list: it goes on where it was
            + numbered("fresh", "5") + numbered("echo", "5", 1) + numbered("foxtrot", "5", 1)
            + numbered("second", "5"))
    out = read(og.docx(body, numbering=NUMBERING), "n.docx", DOCX)
    assert lines(out) == ["1) one", "2) two", "7) seven", "8) eight", "3) three",
                          "1) fresh", "e. echo", "f. foxtrot", "2) second"]


XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLS = "application/vnd.ms-excel"
ODS = "application/vnd.oasis.opendocument.spreadsheet"
SAMPLES = __import__("pathlib").Path(__file__).resolve().parent / "samples"


def sample_lines(folder: str, name: str, mime: str) -> list[str]:
    return lines(read((SAMPLES / folder / name).read_bytes(), name, mime))


def test_spreadsheet_dates_and_times_as_their_cell_format_shows_them() -> None:
    """Real workbooks: Excel's built-in short date (14), custom d/mm/yyyy, dddd, mmmm dd,
    yyyy and dd-mm-yyyy hh:mm:ss, in XLSX and XLS alike (they used to print ISO 8601)."""
    for name, mime in (("reveng1.xlsx", XLSX), ("reveng1.xls", XLS)):
        got = sample_lines("office" if mime == XLSX else "legacy", name, mime)
        assert "Short Date\t12/31/1999\t1/1/2000" in got, name
        assert "Long Date\tFriday, January 18, 2008\tSaturday, January 19, 2008" in got, name
    assert "03-08-2017 14:35:00\t14:40:30" in sample_lines("office", "timeformat.xlsx", XLSX)
    formate = sample_lines("legacy", "Formate.xls", XLS)
    assert "Huber\t03/07/1907" in formate and "Öcker\tTuesday, May 03, 1988" in formate
    # Excel's m/d/yyyy h:mm (built-in 22), as the issue saw it
    styles = (f'{og.DECL}<styleSheet xmlns="{og.NS_S}"><cellXfs count="2"><xf numFmtId="0"/>'
              '<xf numFmtId="22" applyNumberFormat="1"/></cellXfs></styleSheet>')
    data = og.xlsx([("S", "s1.xml",
                     '<row r="1"><c r="A1" s="1"><v>40801.640277777777</v></c></row>')],
                   styles=styles)
    assert lines(read(data, "d.xlsx", XLSX)) == ["# S", "9/15/2011 15:22"]


def test_ods_date_cells_keep_the_text_they_show() -> None:
    body = ('<table:table table:name="S"><table:table-row>'
            '<table:table-cell office:value-type="date" office:date-value="2011-09-15T15:22:00">'
            "<text:p>09/15/2011 15:22</text:p></table:table-cell>"
            '<table:table-cell office:value-type="date" office:date-value="2011-09-16"/>'
            "</table:table-row></table:table>")
    out = read(og.odf("spreadsheet", body), "d.ods", ODS)
    assert lines(out) == ["# S", "09/15/2011 15:22\t2011-09-16"]  # no text shown: ISO


def test_pdf_form_field_values_after_their_page() -> None:
    """A real LibreOffice form (pypdf's sample): the values typed into its fields."""
    data = (SAMPLES / "pdf" / "libreoffice-form.pdf").read_bytes()
    for engine in ("pdfium", "pdfplumber"):
        out = read_document(Document(data, "form.pdf", "application/pdf"),
                            LocalContext(Limits(pdf_engines=(engine,))))
        assert out.extractor == engine
        got = lines(out)
        assert got[-2:] == ["[form field: First Name] Alice", "[form field: First Name_2] Bob"]
        assert "Example for a Form" in got


ODP = "application/vnd.oasis.opendocument.presentation"
ODT = "application/vnd.oasis.opendocument.text"


def test_odp_master_page_headers_footers_and_shapes() -> None:
    """LibreOffice's own ODP (tests/samples/office-src/lo-master.fodp): the master page's
    header and footer frames and its plain shape are on every slide; its title placeholder
    (template text) is not; a slide shape's svg:title and svg:desc are its alt text."""
    assert sample_lines("office", "lo-master.odp", ODP) == [
        "# slide 1", "Slide body words.", "[alt text: Shape title words]",
        "[alt text: Shape description words]", "Text inside the shape",
        "## header", "Master header: Board pack", "## footer",
        "Master footer: Acme confidential", "## master page", "Master stamp: Draft"]


def test_odt_drawing_shapes_text_title_and_description() -> None:
    body = ('<text:p>Before</text:p><text:p><draw:custom-shape text:anchor-type="paragraph">'
            "<svg:title>SHAPETITLE</svg:title><svg:desc>SHAPEDESC</svg:desc>"
            "<text:p>SHAPETEXT</text:p><draw:enhanced-geometry/></draw:custom-shape></text:p>"
            '<draw:rect text:anchor-type="page"><svg:title>RECTTITLE</svg:title>'
            "<text:p>RECTTEXT</text:p></draw:rect><text:p>After</text:p>")
    assert lines(read(og.odf("text", body), "s.odt", ODT)) == [
        "Before", "[alt text: SHAPETITLE]", "[alt text: SHAPEDESC]", "SHAPETEXT",
        "[alt text: RECTTITLE]", "RECTTEXT", "After"]


def test_dates_of_one_libreoffice_workbook_alike_in_ods_xlsx_and_xls() -> None:
    """One workbook (lo-dates.fods) written by LibreOffice three ways: each shows its dates
    and times as the cells' formats do."""
    rows = ["Meeting\t9/15/2011 15:22", "Deadline\t05-Jan-24", "Lunch\t12:30 PM"]
    for name, mime in (("lo-dates.ods", ODS), ("lo-dates.xlsx", XLSX), ("lo-dates.xls", XLS)):
        assert sample_lines("office", name, mime)[1:4] == rows, name


def test_documents_inside_embedded_documents() -> None:
    """A text with an embedded text that embeds a spreadsheet: as LibreOffice packages it
    (``Object 1/Object 1/``) and as the flat file it came from (inline ``draw:object``
    documents, whose inner ``office:body`` used to end the outer one: the rest was lost)."""
    packaged = sample_lines("office", "lo-nested.odt", ODT)
    assert packaged == ["Outer document text.", "[embedded: Object 1 (odt)]",
                        "Inner document text.", "[embedded: Object 1 (ods)]", "# Deep",
                        "Innermost cell words", "Outer closing text."]
    flat = sample_lines("office-src", "lo-nested.fodt", ODT)
    assert flat == ["Outer document text.", "[embedded: inline object (odt)]",
                    "Inner document text.", "[embedded: inline object (ods)]",
                    "Innermost cell words", "Outer closing text."]
