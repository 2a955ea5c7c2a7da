"""Word/Excel/PowerPoint 97–2003, Outlook .msg, and Office files under the default password.

Real samples (tests/samples/legacy/ORIGIN.md): files from olefile's, xlrd's and msg-parser's
test suites, and .doc/.xls/.ppt written by LibreOffice from the repository's OOXML samples.
Encrypted packages are made here with msoffcrypto-tool; hostile structures are built by hand.
"""

from __future__ import annotations

from dataclasses import replace
import io
import shutil
import struct
from pathlib import Path

import pytest

from bastion.readers.office import pptdoc, worddoc
from bastion.readers.base import Document, Limits, ReadResult
from bastion.readers.detect import detect_bytes
from bastion.readers.dispatch import read_document, select
from bastion.readers.runtime.context import LocalContext

SAMPLES = Path(__file__).parent / "samples" / "legacy"
OFFICE = Path(__file__).parent / "samples" / "office"


def read(data: bytes, name: str, limits: Limits | None = None):
    ctx = LocalContext(limits or Limits())
    return read_document(Document(data, name, detect_bytes(data, name)), ctx)


def sample(name: str, as_name: str | None = None):
    return read((SAMPLES / name).read_bytes(), as_name or name)


# -- Word -------------------------------------------------------------------------------------

def test_doc_saved_by_word():
    out = sample("test-ole-file.doc")
    assert (out.status, out.extractor) == ("ok", "doc")
    assert out.text == "Test OLE file, saved as Word 97-2003 Document.\n"


def test_doc_headers_and_footers_after_the_body():
    out = sample("hdr-header-footer.doc")
    assert out.text.splitlines() == [
        "section with header", "section without header of its own.",
        "Header for section-1", "Footer for section 1"]


def test_doc_tables_and_footer_field_result():
    lines = sample("blk-paras-and-tables.doc").text.splitlines()
    assert lines[0] == "Lorem ipsum dolor sit amet, consectetur adipiscing elit."
    assert "Donec semper facilisis metus finibus malesuada." in lines
    assert "Left-side\tRight-side" in lines  # a footer table row: cells by tabs
    assert "Copyright\tPage-number" in lines


def test_doc_table_rows_from_paragraph_properties_keep_empty_cells():
    # without the TTP marks "a1, , c1" would look like a row end after a1
    assert sample("table-empty-cells.doc").text.splitlines() == [
        "before", "a1\t\tc1", "a2\tb2", "\t\tc3", "after"]


def test_doc_found_by_content_without_extension():
    data = (SAMPLES / "test-ole-file.doc").read_bytes()
    # typed by its OLE directory (a WordDocument stream), whatever the name
    assert detect_bytes(data, "noext") == "application/msword"
    out = read(data, "noext")
    assert (out.status, out.extractor) == ("ok", "doc")


def test_word_fields_and_control_characters():
    raw = ("Intro \x13 PAGEREF _Toc1 \\h \x14fieldresult\x15 end\r"
           "cell1\x07cell2\x07\x07row2\x07\x07"
           "soft\x0bbreak non\x1ebreaking opt\x1fional\x01\x08\r"
           "\x13 outer \x13 inner \x14innerresult\x15 code \x14outerresult\x15\r")
    assert worddoc.clean(raw).splitlines() == [
        "Intro fieldresult end", "cell1\tcell2", "row2", "soft", "break non-breaking optional",
        "outerresult"]


def test_word_hostile_fib_and_piece_table_are_corrupt():
    word = bytearray((SAMPLES / "test-ole-file.doc").read_bytes())
    out = read(bytes(word[:3000]), "cut.doc")  # the OLE container itself is cut
    assert (out.status, out.error_kind) == ("error", "corrupt")
    from bastion.readers.errors import CorruptDocument, Unsupported
    with pytest.raises(CorruptDocument):
        worddoc.parse(b"\x00" * 600, b"")
    fib = bytearray(600)
    struct.pack_into("<HH", fib, 0, 0xA5EC, 0x65)  # Word 6/95
    with pytest.raises(Unsupported):
        worddoc.parse(bytes(fib), b"")


# -- Excel ------------------------------------------------------------------------------------

def test_xls_formats_dates_times_percent_from_xlrd_suite():
    lines = sample("Formate.xls").text.splitlines()
    assert lines[0] == "# Blätt1"
    for row in ("Huber\t03/07/1907", "Morgen\t06:34", "gut\t97.4%", "viel\t1,000.30 €",
                "wenig\t1.20 €"):
        assert row in lines
    assert "# ÖÄÜ" in lines


def test_xls_ragged_rows_and_empty_sheets():
    assert sample("ragged.xls").text.splitlines() == [
        "# Sheet1", "a\tb\tc", "d\te", "f", "g\th\tI\tj", "k\t\t\tl", "# Sheet2", "# Sheet3"]


def test_biff4_workbook_without_ole_container():
    lines = sample("biff4_no_format_no_window2.xls").text.splitlines()
    assert lines[:3] == ["# Sheet 1", "ID\tTOTAL\tMAIN\tSUB", "A\tDOG & CAT PRODUCTS\tDog & Cat Product"]


def test_xls_written_by_libreoffice_matches_the_xlsx_reader():
    xls = sample("reveng1.xls").text.splitlines()
    xlsx = read((OFFICE / "reveng1.xlsx").read_bytes(), "reveng1.xlsx").text.splitlines()
    for row in ("#div/0!\t#DIV/0!\t#DIV/0!", "true\tTRUE\tTRUE",
                "Short Date\t12/31/1999\t1/1/2000"):
        assert row in xls and row in xlsx
    # the entered values (first two columns; LibreOffice's export recalculates some formulas),
    # except the control characters the XLSX reader leaves escaped (_x0001_)
    entered = {tuple(line.split("\t")[:2]) for line in xlsx if "_x00" not in line}
    same = len(entered & {tuple(line.split("\t")[:2]) for line in xls}) / len(entered)
    assert same > 0.9, same


# -- PowerPoint -------------------------------------------------------------------------------

def test_ppt_slides_in_order_and_notes():
    out = sample("sld-notes.ppt")
    assert (out.status, out.extractor) == ("ok", "ppt")
    assert out.text.splitlines() == ["# slide 1", "## notes", "Notes", "# slide 2"]
    lines = sample("tbl-cell.ppt").text.splitlines()
    assert lines[:2] == ["# slide 1", "having custom margins"]
    assert lines.index("# slide 2") < lines.index("merged cell") < lines.index("# slide 3")
    assert lines[-9:] == list("abcdefghi")


def _records(*recs: bytes) -> bytes:
    return b"".join(recs)


def _rec(rtype: int, body: bytes, ver: int = 0, inst: int = 0) -> bytes:
    return struct.pack("<HHI", ver | (inst << 4), rtype, len(body)) + body


def test_ppt_edit_chain_loop_and_missing_directory_fall_back_to_stream_order():
    slide = _rec(pptdoc.RT_SLIDE, _rec(pptdoc.RT_TEXT_CHARS, "loopword".encode("utf-16-le")),
                 ver=0xF)
    # a UserEditAtom whose previous edit is itself and whose directory is not one
    edit_at = len(slide)
    edit = _rec(pptdoc.RT_USER_EDIT, struct.pack("<IHBBIIII", 0, 0, 0, 3, edit_at, 0, 1, 0)
                + bytes(8))
    stream = slide + edit
    current_user = bytes(16) + struct.pack("<I", edit_at) + bytes(8)
    found, warnings = pptdoc.slides(stream, current_user)
    assert pptdoc.text(found) == "# slide 1\nloopword\n"
    assert warnings and "stream order" in warnings[0]


@pytest.mark.slow
def test_ppt_deeply_nested_containers_are_walked_without_recursion():
    inner = _rec(pptdoc.RT_TEXT_BYTES, b"deepword")
    for _ in range(50_000):
        inner = _rec(0x0F00, inner, ver=0xF)
    found, _ = pptdoc.slides(_rec(pptdoc.RT_SLIDE, inner, ver=0xF), None)
    assert found[0].texts == ("deepword",)


# -- Outlook ----------------------------------------------------------------------------------

def test_msg_headers_body_and_attached_message():
    out = sample("outer.msg")
    assert (out.status, out.extractor) == ("ok", "msg")
    assert out.result.metadata.subject == "outer subject"
    assert replace(out.result, metadata=None, warnings=()) == ReadResult(
        "msg", details={"attachments": 1, "subject": "outer subject"}, title="outer subject",
        languages=())
    assert out.text.splitlines() == [
        "To: outer@foo.bar", "Date: Tue, 15 Nov 2016 23:29:05 +0000", "Subject: outer subject",
        "", "Outer body", "[attachment: test (message/rfc822)]", "To: test@foobar.com",
        "Date: Tue, 15 Nov 2016 23:28:26 +0000", "Subject: test", "", "body"]


def test_msg_unicode_and_a_pdf_attachment_read_through_the_readers():
    out = sample("other.msg")
    assert out.status == "ok"
    lines = out.text.splitlines()
    assert lines[0] == "From: Mail Delivery Subsystem <mailer-daemon@tjdpf.org.cn>"
    assert "Subject: 投递状态通知 (Failure Notice)" in lines
    assert "[attachment: default_attachment.eml (message/rfc822)]" in lines
    pdf = [i for i, line in enumerate(lines) if line.startswith("[attachment: 北京") and
           "application/octet-stream, 144702 bytes)]" in line]
    assert pdf, lines
    assert "销售主管" in "\n".join(lines[pdf[0] + 1:pdf[0] + 5])  # the PDF's own text


def test_msg_with_only_a_compressed_rtf_body(tmp_path: Path):
    import olefile

    path = tmp_path / "rtf-only.msg"
    shutil.copy(SAMPLES / "outer.msg", path)
    ole = olefile.OleFileIO(str(path), write_mode=True)
    ole.write_stream("__substg1.0_1000001F", " ".encode("utf-16-le") * 12)  # PR_BODY blanked
    ole.close()
    out = read(path.read_bytes(), "rtf-only.msg")
    assert out.status == "ok"
    assert "Outer body" in out.text.splitlines()  # from PR_RTF_COMPRESSED (\fromhtml RTF)


def test_msg_attached_message_counts_against_the_depth_cap():
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("mail/outer.msg", (SAMPLES / "outer.msg").read_bytes())
    out = read(buf.getvalue(), "mail.zip", Limits(max_depth=1))  # the .msg is level 1
    assert out.status == "ok" and out.limit == "max_depth"
    assert "Outer body" in out.text and "To: test@foobar.com" not in out.text
    assert "[attachment: test (message/rfc822): not read: limit: max_depth]" in out.text
    assert "To: test@foobar.com" in read(buf.getvalue(), "mail.zip").text


def test_msg_found_by_content_and_not_confused_with_office():
    data = (SAMPLES / "outer.msg").read_bytes()
    assert read(data, "noext").extractor == "msg"
    assert select("application/vnd.ms-outlook").name == "outlook"


# -- encryption -------------------------------------------------------------------------------

def _encrypt(data: bytes, password: str) -> bytes:
    from msoffcrypto.format.ooxml import OOXMLFile

    out = io.BytesIO()
    OOXMLFile(io.BytesIO(data)).encrypt(password, out)
    return out.getvalue()


def test_velvetsweatshop_xlsx_is_decrypted_and_read():
    plain = (OFFICE / "merged_cells.xlsx").read_bytes()
    locked = _encrypt(plain, "VelvetSweatshop")
    assert detect_bytes(locked, "m.xlsx") == "application/x-ooxml-encrypted"
    out = read(locked, "m.xlsx")
    assert (out.status, out.extractor) == ("ok", "xlsx+velvetsweatshop")
    assert out.text == read(plain, "m.xlsx").text
    assert "decrypted with the default password VelvetSweatshop" in out.warnings


def test_other_passwords_stay_encrypted():
    locked = _encrypt((OFFICE / "merged_cells.xlsx").read_bytes(), "s3cret-password")
    out = read(locked, "m.xlsx")
    assert (out.status, out.error_kind) == ("error", "encrypted")


def test_encrypted_package_inside_a_zip_is_read_as_a_member():
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("book.xlsx", _encrypt((OFFICE / "merged_cells.xlsx").read_bytes(),
                                          "VelvetSweatshop"))
    out = read(buf.getvalue(), "books.zip")
    assert out.status == "ok" and "=== member: book.xlsx ===" in out.text
    assert "Foo" in out.text


# -- hostile containers -----------------------------------------------------------------------

def test_ole_without_known_streams_is_unsupported_and_garbage_is_corrupt():
    import olefile

    data = bytearray((SAMPLES / "test-ole-file.doc").read_bytes())
    # rename the WordDocument stream's directory entry: an OLE2 file of no known kind
    name = "WordDocument".encode("utf-16-le")
    at = data.index(name)
    data[at:at + len(name)] = "XordDocument".encode("utf-16-le")
    assert olefile.isOleFile(io.BytesIO(bytes(data)))
    out = read(bytes(data), "x.doc")
    assert out.status == "unsupported" and "OLE2 file without" in out.error
    out = read(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(2000), "zero.xls")
    assert (out.status, out.error_kind) == ("error", "corrupt")
