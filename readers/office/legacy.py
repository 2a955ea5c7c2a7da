"""Word, Excel and PowerPoint 97–2003 (``.doc``, ``.xls``, ``.ppt``): OLE2 compound files.

The container is opened with ``olefile`` (BSD); its streams decide the kind, whatever the
extension says: ``WordDocument`` → :mod:`bastion.readers.office.worddoc`, ``Workbook``/``Book`` → ``xlrd``
(BSD; BIFF2–BIFF8), ``PowerPoint Document`` → :mod:`bastion.readers.office.pptdoc`, Outlook's ``__substg1.0_``
streams → :mod:`bastion.readers.containers.outlook`, ``EncryptedPackage`` → :mod:`bastion.readers.office.officecrypt`.  An OLE2
file with none of these is ``unsupported``.

A file encrypted with Excel's default password (``VelvetSweatshop``) is decrypted
(:func:`bastion.readers.office.officecrypt.decrypt_default`) and read; any other encrypted file is
``error``/``encrypted``.  The text follows the rules of the OOXML readers
(docs/readers/office.md): ``.xls`` a ``# <sheet name>`` line per sheet and one tab-separated line
per row, numbers and dates as the cell's format shows them; ``.ppt`` ``# slide N`` per slide
and ``## notes``; ``.doc`` the body, then headers and footers, footnotes, endnotes, text boxes.
Extractors ``doc``, ``xls``, ``ppt`` (``…+velvetsweatshop`` when decrypted).
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any

from ..base import (NESTED_LIBRARIES, NESTED_TOOLS, Context, Document, Reader, ReadResult,
                   SinkBuffer, TextSink)
from ..errors import CapReached, CorruptDocument, EncryptedDocument, Unsupported
from .officecrypt import decrypt_default
from .ole import OLE_MAGIC, kind_of, open_ole, stream, summary_meta

DOC = "application/msword"
XLS = "application/vnd.ms-excel"
PPT = "application/vnd.ms-powerpoint"
OLE2 = "application/x-ole-storage"
_CELL_CONTROLS = {i: None for i in (*range(32), 127)} | {9: " ", 10: " ", 13: " "}


# Word ---------------------------------------------------------------------------------------

def _read_doc(ole, data: bytes, decrypted: bool) -> tuple[str, str]:
    from . import worddoc

    word = stream(ole, "WordDocument")
    if worddoc.is_encrypted(word):
        if decrypted:
            raise EncryptedDocument("Word document still encrypted after decryption")
        return _read_decrypted(data, "doc", "Word document")
    table_name = worddoc.table_stream_name(word)
    if not ole.exists(table_name):
        raise CorruptDocument(f"Word document without its table stream {table_name}")
    parsed = worddoc.parse(word, stream(ole, table_name))
    return worddoc.text(parsed), "doc"


# PowerPoint ---------------------------------------------------------------------------------

def _read_ppt(ole, data: bytes, decrypted: bool, warnings: list[str]) -> tuple[str, str]:
    from . import pptdoc

    body = stream(ole, "PowerPoint Document")
    user = stream(ole, "Current User") if ole.exists("Current User") else None
    try:
        found, notes = pptdoc.slides(body, user)
    except EncryptedDocument:
        if decrypted:
            raise
        return _read_decrypted(data, "ppt", "PowerPoint presentation")
    warnings.extend(notes)
    return pptdoc.text(found), "ppt"


# Excel --------------------------------------------------------------------------------------

def _cell_text(book, cell, formats: dict[int, Any]) -> str:
    """A cell as the XLSX reader shows one: numbers by their format (readers/office/numfmt.py),
    dates as ISO 8601, times by the format's own tokens."""
    import xlrd

    from .numfmt import compile_format
    from .ooxml import _number, _serial_date

    ctype = cell.ctype
    if ctype in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return ""
    if ctype == xlrd.XL_CELL_TEXT:
        # as the XLSX reader: line breaks and tabs become spaces (a row stays one line); other
        # control characters are dropped
        return str(cell.value).translate(_CELL_CONTROLS)
    if ctype == xlrd.XL_CELL_BOOLEAN:
        return "TRUE" if cell.value else "FALSE"
    if ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERR")
    value = float(cell.value)
    fmt = formats.get(cell.xf_index)
    timey = fmt is not None and fmt.kind in ("date", "datetime", "time", "elapsed")
    if ctype == xlrd.XL_CELL_DATE or timey:
        base = datetime(1904, 1, 1) if book.datemode else datetime(1899, 12, 30)
        shown_as = fmt if timey and fmt is not None else compile_format("yyyy-mm-dd")
        assert shown_as is not None  # a built-in date format compiles
        return _serial_date(repr(value), shown_as, base)
    if fmt is not None and fmt.kind in ("number", "literal"):
        shown = fmt.render(value)
        if shown is not None:
            return shown
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return _number(repr(value))


# The built-in short date formats (14, 22) as xlrd names them when the file does not, and as
# an en-US Excel shows them (the XLSX reader's too)
_SHORT_DATES = {14: ("m/d/yy", "m/d/yyyy"), 22: ("m/d/yy h:mm", "m/d/yyyy h:mm")}


def _xf_kinds(book) -> dict[int, Any]:
    """The compiled number format of each XF record (cell style) that has one."""
    from .numfmt import compile_format

    formats: dict[int, Any] = {}
    for i, xf in enumerate(getattr(book, "xf_list", ()) or ()):
        fmt = book.format_map.get(xf.format_key)
        code = fmt.format_str if fmt is not None else None
        if code is not None and _SHORT_DATES.get(xf.format_key, (None,))[0] == code:
            code = _SHORT_DATES[xf.format_key][1]  # xlrd's default for the built-in
        compiled = compile_format(code) if code is not None else None
        if compiled is not None:
            formats[i] = compiled
    return formats


def _read_xls(ole, data: bytes, decrypted: bool, sink: TextSink, ctx: Context
              ) -> tuple[str | None, str]:
    import xlrd

    try:
        book = xlrd.open_workbook(file_contents=data, formatting_info=True, on_demand=True,
                                  logfile=io.StringIO(), ragged_rows=True)
    except xlrd.XLRDError as e:
        if "encrypted" in str(e).lower():
            if decrypted:
                raise EncryptedDocument("Excel workbook still encrypted after decryption") \
                    from None
            if ole is None:
                raise EncryptedDocument("encrypted BIFF2-4 workbook") from None
            plain = decrypt_default(data, "Excel workbook")
            inner = open_ole(plain)
            try:
                text, _ = _read_xls(inner, plain, True, sink, ctx)
            finally:
                inner.close()
            return text, "xls+velvetsweatshop"
        if "formatting_info" in str(e) or "not supported" in str(e).lower():
            book = _open_plain(data)
        else:
            raise CorruptDocument(f"Excel workbook could not be read: {e}") from None
    except NotImplementedError:  # formatting_info on a BIFF version xlrd cannot format
        book = _open_plain(data)
    except Exception as e:  # noqa: BLE001 - xlrd on hostile bytes (struct.error, IndexError …)
        raise CorruptDocument(f"Excel workbook could not be read: {type(e).__name__}: {e}") \
            from None
    out = SinkBuffer(sink)
    max_parts = ctx.limits.max_parts
    try:
        kinds = _xf_kinds(book)
        for index in range(book.nsheets):
            sheet = book.sheet_by_index(index)
            out.put(f"# {' '.join(sheet.name.split())}\n")
            for r in range(sheet.nrows):
                row = sheet.row(r)
                if len(row) > max_parts:
                    out.flush()
                    raise CapReached("max_parts", f"row {r + 1} of {sheet.name} has "
                                                  f"{len(row)} cells")
                cells = [_cell_text(book, c, kinds) for c in row]
                while cells and not cells[-1]:
                    cells.pop()
                if cells:
                    out.put("\t".join(cells) + "\n")
            book.unload_sheet(index)
        out.flush()
    except CapReached:
        out.flush()
        raise
    except Exception as e:  # noqa: BLE001 - xlrd on a damaged sheet
        out.flush()
        raise CorruptDocument(f"Excel sheet could not be read: {type(e).__name__}: {e}") \
            from None
    return None, "xls"


def _open_plain(data: bytes):
    import xlrd

    try:
        return xlrd.open_workbook(file_contents=data, on_demand=True, logfile=io.StringIO(),
                                  ragged_rows=True)
    except Exception as e:  # noqa: BLE001
        raise CorruptDocument(f"Excel workbook could not be read: {type(e).__name__}: {e}") \
            from None


# --------------------------------------------------------------------------------------------

def _read_decrypted(data: bytes, kind: str, what: str) -> tuple[str, str]:
    plain = decrypt_default(data, what)
    inner = open_ole(plain)
    try:
        if kind == "doc":
            text, extractor = _read_doc(inner, plain, True)
        else:
            text, extractor = _read_ppt(inner, plain, True, [])
    finally:
        inner.close()
    return text, extractor + "+velvetsweatshop"


# A BIFF2–BIFF4 workbook is a bare record stream, not an OLE2 file: its first record is a BOF
_BIFF_BOF = (b"\x09\x00", b"\x09\x02", b"\x09\x04", b"\x09\x08")


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    if not doc.data.startswith(OLE_MAGIC) and doc.data[:2] in _BIFF_BOF:
        try:
            _, extractor = _read_xls(None, doc.data, False, sink, ctx)
        except CapReached as cap:
            cap.extractor = cap.extractor or "xls"
            raise
        return ReadResult(extractor)
    ole = open_ole(doc.data)
    warnings: list[str] = []
    try:
        kind = kind_of(ole)
        if kind == "msg":
            from ..containers import outlook

            return outlook.read_ole(ole, doc, sink, ctx)
        if kind == "encrypted":
            from . import officecrypt

            ole.close()
            return officecrypt.read(doc, sink, ctx)
        own = summary_meta(ole, kind)
        text: str | None
        if kind == "doc":
            text, extractor = _read_doc(ole, doc.data, False)
        elif kind == "ppt":
            text, extractor = _read_ppt(ole, doc.data, False, warnings)
        elif kind == "xls":
            try:
                text, extractor = _read_xls(ole, doc.data, False, sink, ctx)
            except CapReached as cap:
                cap.extractor = cap.extractor or "xls"
                cap.with_metadata(own)
                raise
        else:
            raise Unsupported("OLE2 file without a Word, Excel, PowerPoint or Outlook stream")
    finally:
        ole.close()
    if text is not None:
        try:
            sink.write(text)
        except CapReached as cap:
            cap.extractor = cap.extractor or extractor
            cap.with_metadata(own)
            raise
    return ReadResult(extractor, warnings=tuple(warnings)).with_metadata(own)


READER = Reader(
    name="legacy",
    version=2,  # 2: metadata, dates as their format shows them
    mimes=(DOC, XLS, PPT, OLE2, "application/vnd.ms-word", "application/x-msexcel",
           "application/mspowerpoint"),
    extensions=(".doc", ".dot", ".xls", ".xlt", ".ppt", ".pot", ".pps"),
    # an OLE2 file may be an Outlook message, whose attachments go through the other readers
    tools=NESTED_TOOLS,
    uses_tool_deadline=True,
    settings=("max_parts", "max_depth", "max_member_bytes", "max_xml_bytes", "pdf_engines",
              "max_pages", "ocr_max_pages", "ocr_dpi", "max_unpacked_bytes", "max_members",
              "max_compression_ratio", "ocr_languages"),
    read=read,
    libraries=NESTED_LIBRARIES,
)
