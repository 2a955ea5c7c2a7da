"""Builders of small Office Open XML and OpenDocument files for the reader tests.

Each function returns the bytes of a package made with :mod:`zipfile` from XML strings, so a
test names exactly the marker words it expects.  The hostile builders (bomb, lying sizes,
million runs, OLE2 blob) live here too.
"""

from __future__ import annotations

import io
import struct
import zipfile
from xml.sax.saxutils import escape

NS_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
NS_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
NS_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
NS_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
NS_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
NS_WPS = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
NS_V = "urn:schemas-microsoft-com:vml"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFDOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"

DECL = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
W_ROOT = (f'xmlns:w="{NS_W}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}" xmlns:wps="{NS_WPS}" '
          f'xmlns:v="{NS_V}"')


def zip_bytes(members: dict[str, str | bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data.encode("utf-8") if isinstance(data, str) else data)
    return buf.getvalue()


def zip_members(data: bytes) -> dict[str, str | bytes]:
    """The members of a zip, to rebuild it with parts removed or reordered."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def rels(*entries: tuple[str, str, str]) -> str:
    body = "".join(f'<Relationship Id="{i}" Type="{t if "/" in t else OFFDOC + "/" + t}" '
                   f'Target="{target}"/>' for i, t, target in entries)
    return f'{DECL}<Relationships xmlns="{PKG}">{body}</Relationships>'


def content_types(main_ct: str) -> str:
    return (f'{DECL}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            f'<Override PartName="/main" ContentType="{main_ct}"/></Types>')


# -- DOCX -------------------------------------------------------------------------------------


def w_p(*runs: str) -> str:
    """A paragraph; plain strings become runs, strings starting with '<' are raw XML."""
    return "<w:p>" + "".join(r if r.startswith("<") else f"<w:r><w:t>{escape(r)}</w:t></w:r>"
                             for r in runs) + "</w:p>"


def docx(body: str, *, headers: list[str] = (), footers: list[str] = (),
         footnotes: str = "", endnotes: str = "", numbering: str = "", styles: str = "",
         comments: str = "", parts: dict[str, str | bytes] | None = None,
         part_rels: list[tuple[str, str, str]] = ()) -> bytes:
    """A DOCX whose body is ``body`` (paragraph/table XML); headers etc. are their inner XML.

    ``numbering``/``styles``/``comments``: the inner XML of those parts; ``parts``: more
    members as they are; ``part_rels``: more ``(id, type, target)`` of document.xml (a type
    with a ``/`` is taken whole, else as an officeDocument relationship type)."""
    members: dict[str, str | bytes] = {
        "[Content_Types].xml": content_types("application/vnd.openxmlformats-officedocument."
                                             "wordprocessingml.document.main+xml"),
        "_rels/.rels": rels(("rId1", "officeDocument", "word/document.xml")),
        "word/document.xml": f"{DECL}<w:document {W_ROOT}><w:body>{body}</w:body></w:document>",
    }
    doc_rels = []
    for i, h in enumerate(headers, 1):
        members[f"word/header{i}.xml"] = f"{DECL}<w:hdr {W_ROOT}>{h}</w:hdr>"
        doc_rels.append((f"rIdH{i}", "header", f"header{i}.xml"))
    for i, ft in enumerate(footers, 1):
        members[f"word/footer{i}.xml"] = f"{DECL}<w:ftr {W_ROOT}>{ft}</w:ftr>"
        doc_rels.append((f"rIdF{i}", "footer", f"footer{i}.xml"))
    for kind, inner in (("footnote", footnotes), ("endnote", endnotes)):
        if inner:
            members[f"word/{kind}s.xml"] = f"{DECL}<w:{kind}s {W_ROOT}>{inner}</w:{kind}s>"
            doc_rels.append((f"rId{kind}", f"{kind}s", f"{kind}s.xml"))
    for name, root, inner in (("numbering", "numbering", numbering), ("styles", "styles", styles),
                              ("comments", "comments", comments)):
        if inner:
            members[f"word/{name}.xml"] = f"{DECL}<w:{root} {W_ROOT}>{inner}</w:{root}>"
            doc_rels.append((f"rId{name}", name, f"{name}.xml"))
    members.update(parts or {})
    doc_rels.extend(part_rels)
    members["word/_rels/document.xml.rels"] = rels(*doc_rels)
    return zip_bytes(members)


# -- XLSX -------------------------------------------------------------------------------------


def xlsx(sheets: list[tuple[str, str, str]], shared: list[str] = (), styles: str = "",
         date1904: bool = False) -> bytes:
    """``sheets``: (sheet name, part file name, sheetData inner XML) in workbook order."""
    sheet_el = "".join(f'<sheet name="{escape(n)}" sheetId="{i}" r:id="rIdS{i}"/>'
                       for i, (n, _, _) in enumerate(sheets, 1))
    pr = '<workbookPr date1904="1"/>' if date1904 else "<workbookPr/>"
    members: dict[str, str | bytes] = {
        "[Content_Types].xml": content_types("application/vnd.openxmlformats-officedocument."
                                             "spreadsheetml.sheet.main+xml"),
        "_rels/.rels": rels(("rId1", "officeDocument", "xl/workbook.xml")),
        "xl/workbook.xml": (f'{DECL}<workbook xmlns="{NS_S}" xmlns:r="{NS_R}">{pr}'
                            f"<sheets>{sheet_el}</sheets></workbook>"),
        "xl/_rels/workbook.xml.rels": rels(
            *[(f"rIdS{i}", "worksheet", f"worksheets/{f}") for i, (_, f, _) in
              enumerate(sheets, 1)],
            ("rIdSS", "sharedStrings", "sharedStrings.xml"), ("rIdSt", "styles", "styles.xml")),
    }
    for _, f, data in sheets:
        members[f"xl/worksheets/{f}"] = (f'{DECL}<worksheet xmlns="{NS_S}">'
                                         f"<sheetData>{data}</sheetData></worksheet>")
    sis = "".join(s if s.startswith("<si>") else f"<si><t>{escape(s)}</t></si>" for s in shared)
    members["xl/sharedStrings.xml"] = (f'{DECL}<sst xmlns="{NS_S}" count="{len(shared)}">'
                                       f"{sis}</sst>")
    members["xl/styles.xml"] = styles or f'{DECL}<styleSheet xmlns="{NS_S}"/>'
    return zip_bytes(members)


# -- PPTX -------------------------------------------------------------------------------------


def a_sp(*paras: str, ph: str = "") -> str:
    """A shape with one text body; ``paras`` are paragraph texts (raw XML if starting '<')."""
    ph_el = f'<p:nvPr><p:ph type="{ph}"/></p:nvPr>' if ph else "<p:nvPr/>"
    body = "".join(p if p.startswith("<") else f"<a:p><a:r><a:t>{escape(p)}</a:t></a:r></a:p>"
                   for p in paras)
    return (f'<p:sp><p:nvSpPr><p:cNvPr id="2" name="t"/><p:cNvSpPr/>{ph_el}</p:nvSpPr>'
            f"<p:spPr/><p:txBody><a:bodyPr/>{body}</p:txBody></p:sp>")


def _sld(root: str, shapes: str) -> str:
    return (f'{DECL}<p:{root} xmlns:a="{NS_A}" xmlns:p="{NS_P}" xmlns:r="{NS_R}" '
            f'xmlns:mc="{NS_MC}"><p:cSld><p:spTree>{shapes}</p:spTree></p:cSld></p:{root}>')


def pptx(slides: list[tuple[str, str | None]], *, with_presentation: bool = True) -> bytes:
    """``slides``: (shapes XML, notes shapes XML or None) in presentation order."""
    members: dict[str, str | bytes] = {
        "[Content_Types].xml": content_types("application/vnd.openxmlformats-officedocument."
                                             "presentationml.presentation.main+xml"),
        "_rels/.rels": rels(("rId1", "officeDocument", "ppt/presentation.xml")),
    }
    ids = "".join(f'<p:sldId id="{255 + i}" r:id="rIdS{i}"/>' for i in range(1, len(slides) + 1))
    if with_presentation:
        members["ppt/presentation.xml"] = (
            f'{DECL}<p:presentation xmlns:p="{NS_P}" xmlns:r="{NS_R}">'
            f"<p:sldIdLst>{ids}</p:sldIdLst></p:presentation>")
        members["ppt/_rels/presentation.xml.rels"] = rels(
            *[(f"rIdS{i}", "slide", f"slides/slide{i}.xml") for i in range(1, len(slides) + 1)])
    for i, (shapes, notes) in enumerate(slides, 1):
        members[f"ppt/slides/slide{i}.xml"] = _sld("sld", shapes)
        if notes is not None:
            members[f"ppt/notesSlides/notesSlide{i}.xml"] = _sld("notes", notes)
            members[f"ppt/slides/_rels/slide{i}.xml.rels"] = rels(
                ("rIdN", "notesSlide", f"../notesSlides/notesSlide{i}.xml"))
    return zip_bytes(members)


# -- ODF --------------------------------------------------------------------------------------

ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:chart="urn:oasis:names:tc:opendocument:xmlns:chart:1.0" '
    'xmlns:xlink="http://www.w3.org/1999/xlink"'
)
ODF_KIND = {"text": "odt", "spreadsheet": "ods", "presentation": "odp"}


def odf(kind: str, body: str, manifest_extra: str = "", *, styles: str = "",
        automatic: str = "", objects: dict[str, tuple[str, str]] | None = None) -> bytes:
    """An ODF package (``kind`` text/spreadsheet/presentation) whose body holds ``body``.

    ``styles``: the inner XML of ``styles.xml``'s root (``office:styles``,
    ``office:master-styles``); ``automatic``: content.xml's automatic styles; ``objects``:
    embedded object folders, name -> (kind, body), as LibreOffice writes ``Object 1/``."""
    mime = f"application/vnd.oasis.opendocument.{kind}"

    def content_xml(k: str, b: str, auto: str = "") -> str:
        return (f'{DECL}<office:document-content {ODF_NS} office:version="1.3">'
                f"<office:automatic-styles>{auto}</office:automatic-styles>"
                f"<office:body><office:{k}>{b}</office:{k}></office:body>"
                "</office:document-content>")

    entries = ('<manifest:file-entry manifest:full-path="content.xml" manifest:media-type='
               f'"text/xml">{manifest_extra}</manifest:file-entry>')
    for name, (k, _) in (objects or {}).items():
        entries += (f'<manifest:file-entry manifest:full-path="{name}/" manifest:media-type='
                    f'"application/vnd.oasis.opendocument.{k}"/>')
    manifest = (f'{DECL}<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:'
                f'xmlns:manifest:1.0">{entries}</manifest:manifest>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), mime)  # stored, first, as ODF wants
        zf.writestr("content.xml", content_xml(kind, body, automatic))
        if styles:
            zf.writestr("styles.xml", f'{DECL}<office:document-styles {ODF_NS} '
                                      f'office:version="1.3">{styles}</office:document-styles>')
        for name, (k, b) in (objects or {}).items():
            zf.writestr(f"{name}/content.xml", content_xml(k, b))
        zf.writestr("META-INF/manifest.xml", manifest)
    return buf.getvalue()



def flat_odf(kind: str, body: str, styles: str = "") -> bytes:
    """A flat ODF file (``.fodt`` & co.): one XML document, optionally with master styles."""
    mime = f"application/vnd.oasis.opendocument.{kind}"
    return (f'{DECL}<office:document {ODF_NS} office:version="1.3" office:mimetype="{mime}">'
            f"{styles}<office:body><office:{kind}>{body}</office:{kind}></office:body>"
            "</office:document>").encode("utf-8")


# -- hostile ----------------------------------------------------------------------------------


def docx_bomb(path: str, size: int) -> None:
    """A DOCX at ``path`` whose document.xml inflates to about ``size`` bytes of whitespace
    after one marker paragraph (valid XML, so only the byte caps can stop it)."""
    head = f"{DECL}<w:document {W_ROOT}><w:body>{w_p('bombmarker')}".encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("_rels/.rels", rels(("rId1", "officeDocument", "word/document.xml")))
        with zf.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(head)
            block = b" " * (1 << 20)
            for _ in range(size >> 20):
                f.write(block)
            f.write(b"</w:body></w:document>")


def zero_bomb(size: int) -> bytes:
    """A zip with one member of ``size`` zero bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("word/document.xml", "w", force_zip64=True) as f:
            block = bytes(1 << 20)
            for _ in range(size >> 20):
                f.write(block)
    return buf.getvalue()


def million_runs(n: int = 1_000_000) -> bytes:
    """A DOCX with one paragraph of ``n`` runs."""
    runs = "<w:r><w:t>ab </w:t></w:r>" * n
    return docx(f"<w:p>{runs}</w:p>")


def lie_about_size(data: bytes, member: str, size: int) -> bytes:
    """Patch the uncompressed size of ``member`` in its local and central headers."""
    out = bytearray(data)
    name = member.encode()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        info = zf.getinfo(member)
    local = info.header_offset
    assert out[local:local + 4] == b"PK\x03\x04"
    struct.pack_into("<I", out, local + 22, size)
    central = out.find(b"PK\x01\x02")
    while central != -1:
        name_len = struct.unpack_from("<H", out, central + 28)[0]
        if out[central + 46:central + 46 + name_len] == name:
            struct.pack_into("<I", out, central + 24, size)
            break
        central = out.find(b"PK\x01\x02", central + 4)
    else:
        raise AssertionError("member not found in the central directory")
    return bytes(out)


def ole2_blob() -> bytes:
    """The OLE2 magic and a header's worth of padding: what an encrypted OOXML starts with."""
    return b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504) + "EncryptedPackage".encode(
        "utf-16-le")
