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
NS_C = "http://schemas.openxmlformats.org/drawingml/2006/chart"
NS_DGM = "http://schemas.openxmlformats.org/drawingml/2006/diagram"
NS_WP = "http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
PKG = "http://schemas.openxmlformats.org/package/2006/relationships"
OFFDOC = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"

DECL = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
W_ROOT = (f'xmlns:w="{NS_W}" xmlns:r="{NS_R}" xmlns:mc="{NS_MC}" xmlns:wps="{NS_WPS}" '
          f'xmlns:v="{NS_V}"')


_OOXML = "application/vnd.openxmlformats-officedocument."
_CONTENT_TYPES = (  # part name pattern -> content type, for [Content_Types].xml
    (r"word/document\.xml", _OOXML + "wordprocessingml.document.main+xml"),
    (r"word/styles\.xml", _OOXML + "wordprocessingml.styles+xml"),
    (r"word/numbering\.xml", _OOXML + "wordprocessingml.numbering+xml"),
    (r"word/comments\.xml", _OOXML + "wordprocessingml.comments+xml"),
    (r"word/header\d*\.xml", _OOXML + "wordprocessingml.header+xml"),
    (r"word/footer\d*\.xml", _OOXML + "wordprocessingml.footer+xml"),
    (r"word/footnotes\.xml", _OOXML + "wordprocessingml.footnotes+xml"),
    (r"word/endnotes\.xml", _OOXML + "wordprocessingml.endnotes+xml"),
    (r"xl/workbook\.xml", _OOXML + "spreadsheetml.sheet.main+xml"),
    (r"xl/worksheets/sheet\d*\.xml", _OOXML + "spreadsheetml.worksheet+xml"),
    (r"xl/sharedStrings\.xml", _OOXML + "spreadsheetml.sharedStrings+xml"),
    (r"xl/styles\.xml", _OOXML + "spreadsheetml.styles+xml"),
    (r"xl/comments\d*\.xml", _OOXML + "spreadsheetml.comments+xml"),
    (r"xl/drawings/drawing\d*\.xml", _OOXML + "drawing+xml"),
    (r"(word|xl|ppt)/charts/chart\d*\.xml", _OOXML + "drawingml.chart+xml"),
    (r"(word|xl|ppt)/diagrams/data\d*\.xml", _OOXML + "drawingml.diagramData+xml"),
    (r"ppt/presentation\.xml", _OOXML + "presentationml.presentation.main+xml"),
    (r"ppt/slides/slide\d*\.xml", _OOXML + "presentationml.slide+xml"),
    (r"ppt/notesSlides/notesSlide\d*\.xml", _OOXML + "presentationml.notesSlide+xml"),
    (r"ppt/comments/comment\d*\.xml", _OOXML + "presentationml.comments+xml"),
)


def _content_types_for(names: list[str]) -> str:
    """``[Content_Types].xml`` naming every part the builders write, so other tools (the
    bench's peers) open the packages too."""
    import re

    over = ""
    for name in names:
        for pat, ct in _CONTENT_TYPES:
            if re.fullmatch(pat, name):
                over += f'<Override PartName="/{name}" ContentType="{ct}"/>'
                break
    return (f'{DECL}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
            '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
            'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
            '<Default Extension="xlsx" ContentType="' + _OOXML + 'spreadsheetml.sheet"/>'
            '<Default Extension="docx" ContentType="' + _OOXML + 'wordprocessingml.document"/>'
            '<Default Extension="bin" ContentType="application/vnd.openxmlformats-'
            f'officedocument.oleObject"/>{over}</Types>')


def zip_bytes(members: dict[str, str | bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    ct = members.get("[Content_Types].xml")
    if ct is not None and b'PartName="/main"' in (ct if isinstance(ct, bytes) else ct.encode()):
        members = {**members, "[Content_Types].xml": _content_types_for(list(members))}
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


# -- charts, SmartArt, drawings (shared by the families) ---------------------------------------


def chart_xml(title: str, series: list[tuple[str, list[str], list[str]]], fmt: str = "") -> str:
    sers = ""
    for name, cats, vals in series:
        cpts = "".join(f'<c:pt idx="{i}"><c:v>{escape(c)}</c:v></c:pt>' for i, c in enumerate(cats))
        vpts = "".join(f'<c:pt idx="{i}"><c:v>{v}</c:v></c:pt>' for i, v in enumerate(vals))
        code = f"<c:formatCode>{escape(fmt)}</c:formatCode>" if fmt else ""
        sers += (f"<c:ser><c:tx><c:strRef><c:strCache><c:pt idx=\"0\"><c:v>{name}</c:v></c:pt>"
                 "</c:strCache></c:strRef></c:tx><c:cat><c:strRef><c:strCache>"
                 f"{cpts}</c:strCache></c:strRef></c:cat><c:val><c:numRef><c:numCache>{code}"
                 f"{vpts}</c:numCache></c:numRef></c:val></c:ser>")
    return (f'{DECL}<c:chartSpace xmlns:c="{NS_C}" xmlns:a="{NS_A}"><c:chart><c:title>'
            f"<c:tx><c:rich><a:p><a:r><a:t>{title}</a:t></a:r></a:p></c:rich></c:tx></c:title>"
            f"<c:plotArea><c:barChart>{sers}</c:barChart><c:valAx><c:title><c:tx><c:rich><a:p>"
            "<a:r><a:t>axistitleword</a:t></a:r></a:p></c:rich></c:tx></c:title></c:valAx>"
            "</c:plotArea></c:chart></c:chartSpace>")


def diagram_xml(parent: str = "parentnode", child: str = "childnode",
                sibling: str = "siblingnode") -> str:
    """A SmartArt data model: a parent with a child, and a sibling, written out of order."""
    def pt(mid: str, text: str, typ: str = "") -> str:
        t = f' type="{typ}"' if typ else ""
        body = (f"<dgm:t><a:bodyPr/><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t>"
                if text else "")
        return f'<dgm:pt modelId="{mid}"{t}>{body}</dgm:pt>'

    pts = (pt("0", "", "doc") + pt("2", child) + pt("1", parent)
           + pt("9", "transjunk", "parTrans") + pt("3", sibling))
    cxns = ('<dgm:cxn modelId="10" srcId="0" destId="1" srcOrd="0"/>'
            '<dgm:cxn modelId="11" srcId="1" destId="2" srcOrd="0"/>'
            '<dgm:cxn modelId="12" srcId="0" destId="3" srcOrd="1"/>'
            '<dgm:cxn modelId="13" srcId="2" destId="0" srcOrd="0"/>')  # a cycle: harmless
    return (f'{DECL}<dgm:dataModel xmlns:dgm="{NS_DGM}" xmlns:a="{NS_A}"><dgm:ptLst>'
            f"{pts}</dgm:ptLst><dgm:cxnLst>{cxns}</dgm:cxnLst></dgm:dataModel>")


def drawing_run(inner: str, descr: str = "") -> str:
    d = f' descr="{descr}"' if descr else ""
    return (f'<w:r><w:drawing><wp:inline xmlns:wp="{NS_WP}"><wp:docPr id="1" name="x"{d}/>'
            f'<a:graphic xmlns:a="{NS_A}"><a:graphicData>{inner}</a:graphicData></a:graphic>'
            "</wp:inline></w:drawing></w:r>")


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
    return (f'<p:sp><p:nvSpPr><p:cNvPr id="2" name="t"/><p:cNvSpPr txBox="1"/>{ph_el}'
            f"</p:nvSpPr><p:spPr/><p:txBody><a:bodyPr/>{body}</p:txBody></p:sp>")


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


def poison_member(data: bytes, member: str, at: float = 0.0) -> bytes:
    """The zip ``data`` with a byte of ``member``'s compressed stream replaced, ``at`` (0 to 1)
    of the way in: at 0, a deflate block of the reserved type.  A reader that inflates that
    far gets an error (a bad block, a bad CRC at the end); one that stops before (or never
    starts) cannot tell."""
    info = zipfile.ZipFile(io.BytesIO(data)).getinfo(member)
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + name_len + extra_len + int(at * info.compress_size)
    return data[:start] + bytes([data[start] ^ 0xFF if at else 0xFF]) + data[start + 1:]


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


# -- issue 20: one document per class of text, for bench/peers.py -----------------------------


def issue20_documents() -> list[tuple[str, str, bytes, list[str], str]]:
    """``(class, file name, bytes, phrases, match)``: small documents, each holding one class
    of text the office readers used to miss, with the phrases a reader must show.  ``match``
    is ``"exact"`` (the phrase as written, case and runs of white space aside) or ``"words"``
    (punctuation aside too: a list label ``1)`` matches a Markdown ``1.``)."""
    out: list[tuple[str, str, bytes, list[str], str]] = []

    def numbered(text: str, num: str, ilvl: int = 0) -> str:
        return w_p(f'<w:pPr><w:numPr><w:ilvl w:val="{ilvl}"/><w:numId w:val="{num}"/>'
                   "</w:numPr></w:pPr>", text)

    numbering = (
        '<w:abstractNum w:abstractNumId="0"><w:lvl w:ilvl="0"><w:start w:val="1"/>'
        '<w:numFmt w:val="decimal"/><w:lvlText w:val="%1)"/></w:lvl><w:lvl w:ilvl="1">'
        '<w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%2."/></w:lvl>'
        '</w:abstractNum><w:abstractNum w:abstractNumId="1"><w:lvl w:ilvl="0"><w:start '
        'w:val="3"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>'
        '</w:abstractNum><w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>'
        '<w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>')
    body = (numbered("clausealpha", "1") + numbered("itembravo", "1", 1)
            + numbered("itemcharlie", "1", 1) + numbered("clausedelta", "1")
            + numbered("romanecho", "2") + numbered("romanfoxtrot", "2"))
    out.append(("list numbering", "numbering.docx", docx(body, numbering=numbering),
                ["1 clausealpha", "a itembravo", "b itemcharlie", "2 clausedelta",
                 "III romanecho", "IV romanfoxtrot"], "words"))
    lists = ('<text:list-style style:name="L1"><text:list-level-style-number text:level="1" '
             'style:num-format="i" style:num-suffix=")"/></text:list-style>')
    odt_list = ('<text:list text:style-name="L1"><text:list-item><text:p>odtlistgolf</text:p>'
                "</text:list-item><text:list-item><text:p>odtlisthotel</text:p>"
                "</text:list-item></text:list>")
    out.append(("list numbering", "numbering.odt", odf("text", odt_list, automatic=lists),
                ["i odtlistgolf", "ii odtlisthotel"], "words"))

    comments = ('<w:comment w:id="0" w:author="Ann"><w:p><w:r><w:t>docxcommentindia</w:t>'
                "</w:r></w:p></w:comment>")
    out.append(("comments", "comments.docx", docx(
        w_p("bodyjuliet", '<w:r><w:commentReference w:id="0"/></w:r>'), comments=comments),
        ["docxcommentindia"], "exact"))
    m = zip_members(xlsx([("S", "sheet1.xml", '<row r="1"><c r="A1" t="inlineStr"><is><t>'
                                              "cellkilo</t></is></c></row>")]))
    m["xl/comments1.xml"] = (f'{DECL}<comments xmlns="{NS_S}"><authors><author>A</author>'
                             '</authors><commentList><comment ref="A1" authorId="0"><text><t>'
                             "xlsxnotelima</t></text></comment></commentList></comments>")
    m["xl/worksheets/_rels/sheet1.xml.rels"] = rels(("rC", "comments", "../comments1.xml"))
    out.append(("comments", "comments.xlsx", zip_bytes(m), ["xlsxnotelima"], "exact"))
    m = zip_members(pptx([(a_sp("slidemike"), None)]))
    m["ppt/comments/comment1.xml"] = (f'{DECL}<p:cmLst xmlns:p="{NS_P}"><p:cm authorId="0">'
                                      "<p:text>pptxcommentnovember</p:text></p:cm></p:cmLst>")
    m["ppt/slides/_rels/slide1.xml.rels"] = rels(("rC", "comments", "../comments/comment1.xml"))
    out.append(("comments", "comments.pptx", zip_bytes(m), ["pptxcommentnovember"], "exact"))
    out.append(("comments", "comments.odt", odf("text", (
        "<text:p>bodyoscar<office:annotation><dc:creator>C</dc:creator><text:p>"
        "odtannotationpapa</text:p></office:annotation></text:p>")), ["odtannotationpapa"],
        "exact"))

    out.append(("comments", "comments.rtf", (
        rb"{\rtf1\ansi\pard bodypapa{\*\atnauthor R}\chatn{\*\annotation rtfcommentquebec}"
        rb"\par}"), ["rtfcommentquebec"], "exact"))

    out.append(("headers and footers", "header.docx", docx(
        w_p("bodyquebec"), headers=[w_p("docxheaderromeo")], footers=[w_p("docxfootersierra")]),
        ["docxheaderromeo", "docxfootersierra"], "exact"))
    m = zip_members(xlsx([("S", "sheet1.xml", '<row r="1"><c r="A1"><v>1</v></c></row>')]))
    m["xl/worksheets/sheet1.xml"] = (
        f'{DECL}<worksheet xmlns="{NS_S}"><sheetData><row r="1"><c r="A1"><v>1</v></c></row>'
        "</sheetData><headerFooter><oddHeader>&amp;Cxlsxheadertango</oddHeader><oddFooter>"
        "&amp;Lxlsxfooteruniform&amp;RPage &amp;P</oddFooter></headerFooter></worksheet>")
    out.append(("headers and footers", "header.xlsx", zip_bytes(m),
                ["xlsxheadertango", "xlsxfooteruniform"], "exact"))
    master = ("<office:master-styles><style:master-page style:name=\"Standard\"><style:header>"
              "<text:p>odtheadervictor</text:p></style:header><style:footer><text:p>"
              "odtfooterwhiskey</text:p></style:footer></style:master-page>"
              "</office:master-styles>")
    out.append(("headers and footers", "header.odt", odf("text", "<text:p>bodyxray</text:p>",
                                                         styles=master),
                ["odtheadervictor", "odtfooterwhiskey"], "exact"))
    out.append(("headers and footers", "header.rtf", (
        rb"{\rtf1\ansi{\header \pard rtfheaderyankee\par}{\footer \pard rtffooterzulu\par}"
        rb"\pard bodyword\par}"), ["rtfheaderyankee", "rtffooterzulu"], "exact"))

    chart = chart_xml("charttitleamber", [("seriesbronze", ["catcopper", "catdiamond"],
                                           ["271", "828"])])
    out.append(("charts", "chart.docx", docx(
        w_p("anchor", drawing_run(f'<c:chart xmlns:c="{NS_C}" r:id="rC"/>')),
        parts={"word/charts/chart1.xml": chart}, part_rels=[("rC", "chart", "charts/chart1.xml")]),
        ["charttitleamber", "seriesbronze", "catcopper", "catdiamond", "271", "828"], "exact"))
    out.append(("charts", "chart.xlsx", _xlsx_drawing(
        "<xdr:graphicFrame><a:graphic><a:graphicData><c:chart r:id=\"rC\"/></a:graphicData>"
        "</a:graphic></xdr:graphicFrame>",
        {"xl/charts/chart1.xml": chart_xml("sheetchartemerald", [
            ("seriesflint", ["catgarnet"], ["314"])])},
        [("rC", "chart", "../charts/chart1.xml")]),
        ["sheetchartemerald", "seriesflint", "catgarnet", "314"], "exact"))

    dgm = diagram_xml("smartparenthazel", "smartchildiris", "smartsiblingjade")
    out.append(("SmartArt", "smartart.docx", docx(
        w_p("anchor", drawing_run(f'<dgm:relIds xmlns:dgm="{NS_DGM}" r:dm="rD"/>')),
        parts={"word/diagrams/data1.xml": dgm},
        part_rels=[("rD", "diagramData", "diagrams/data1.xml")]),
        ["smartparenthazel", "smartchildiris", "smartsiblingjade"], "exact"))
    m = zip_members(pptx([(a_sp("slide"), None)]))
    m["ppt/diagrams/data1.xml"] = diagram_xml("pptsmartkarst", "pptsmartlapis", "pptsmartmarl")
    m["ppt/slides/_rels/slide1.xml.rels"] = rels(("rD", "diagramData", "../diagrams/data1.xml"))
    out.append(("SmartArt", "smartart.pptx", zip_bytes(m),
                ["pptsmartkarst", "pptsmartlapis", "pptsmartmarl"], "exact"))

    out.append(("shapes and text boxes", "shape.xlsx", _xlsx_drawing(
        '<xdr:sp><xdr:nvSpPr><xdr:cNvPr id="2" name="TextBox 1"/></xdr:nvSpPr><xdr:txBody>'
        "<a:p><a:r><a:t>xlsxtextboxnickel</a:t></a:r></a:p></xdr:txBody></xdr:sp>", {}, []),
        ["xlsxtextboxnickel"], "exact"))
    out.append(("shapes and text boxes", "shape.rtf", (
        rb"{\rtf1\ansi\pard before\par{\shp{\*\shpinst{\sp{\sn shapeType}{\sv 202}}"
        rb"{\shptxt \pard rtfshapeonyx\par}}}\pard after\par}"), ["rtfshapeonyx"], "exact"))

    out.append(("alt text", "alt.docx", docx(w_p("anchor", drawing_run(
        '<pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"/>',
        descr="docxaltpearl"))), ["docxaltpearl"], "exact"))
    out.append(("alt text", "alt.xlsx", _xlsx_drawing(
        '<xdr:pic><xdr:nvPicPr><xdr:cNvPr id="3" name="Picture 2" descr="xlsxaltquartz"/>'
        "</xdr:nvPicPr></xdr:pic>", {}, []), ["xlsxaltquartz"], "exact"))
    out.append(("alt text", "alt.pptx", pptx([(
        '<p:pic><p:nvPicPr><p:cNvPr id="4" name="Picture 3" descr="pptxaltruby"/><p:cNvPicPr/>'
        "<p:nvPr/></p:nvPicPr><p:blipFill/><p:spPr/></p:pic>", None)]), ["pptxaltruby"],
        "exact"))

    styles = (f'{DECL}<styleSheet xmlns="{NS_S}"><numFmts count="5">'
              '<numFmt numFmtId="164" formatCode="&quot;$&quot;#,##0.00"/>'
              '<numFmt numFmtId="165" formatCode="h:mm"/>'
              '<numFmt numFmtId="166" formatCode="0.00E+00"/>'
              '<numFmt numFmtId="167" formatCode="# ?/?"/>'
              '<numFmt numFmtId="168" formatCode="0.0&quot; kg&quot;"/></numFmts>'
              '<cellXfs count="7"><xf numFmtId="0"/><xf numFmtId="164"/><xf numFmtId="165"/>'
              '<xf numFmtId="166"/><xf numFmtId="167"/><xf numFmtId="9"/><xf numFmtId="168"/>'
              "</cellXfs></styleSheet>")
    vals = [("1", "4321.5"), ("2", "0.8125"), ("3", "654321"), ("4", "2.75"), ("5", "0.025"),
            ("6", "72.25")]
    cells = "".join(f'<c r="{chr(65 + i)}1" s="{s}"><v>{v}</v></c>' for i, (s, v) in
                    enumerate(vals))
    out.append(("numbers as shown", "numbers.xlsx", xlsx(
        [("N", "sheet1.xml", f'<row r="1">{cells}</row>')], styles=styles),
        ["$4,321.50", "19:30", "6.54E+05", "2 3/4", "3%", "72.3 kg"], "exact"))

    inner = xlsx([("Inner", "sheet1.xml", '<row r="1"><c r="A1" t="inlineStr"><is><t>'
                                          "embeddedsapphire</t></is></c></row>")])
    ole = ('<w:r><w:object><o:OLEObject xmlns:o="urn:schemas-microsoft-com:office:office" '
           'r:id="rE"/></w:object></w:r>')
    out.append(("embedded objects", "embedded.docx", docx(
        w_p("anchor", ole), parts={"word/embeddings/Microsoft_Excel_Worksheet.xlsx": inner},
        part_rels=[("rE", "package", "embeddings/Microsoft_Excel_Worksheet.xlsx")]),
        ["embeddedsapphire"], "exact"))
    sheet = ('<table:table table:name="E"><table:table-row><table:table-cell><text:p>'
             "odtobjecttopaz</text:p></table:table-cell></table:table-row></table:table>")
    out.append(("embedded objects", "embedded.odt", odf(
        "text", '<text:p>anchor<draw:frame><draw:object xlink:href="./Object 1"/></draw:frame>'
                "</text:p>", objects={"Object 1": ("spreadsheet", sheet)}),
        ["odtobjecttopaz"], "exact"))

    out.append(("format characters", "softhyphen.docx", docx(w_p(
        "hyphen\u00adated umber\u00adlla zero\u200bwidth")), ["hyphenated", "umberlla",
                                                              "zerowidth"], "exact"))
    return out


def _xlsx_drawing(inner: str, parts: dict[str, str], drawing_rels: list) -> bytes:
    xdr = "http://schemas.openxmlformats.org/drawingml/2006/spreadsheetDrawing"
    m = zip_members(xlsx([("S", "sheet1.xml", '<row r="1"><c r="A1"><v>1</v></c></row>')]))
    m["xl/worksheets/sheet1.xml"] = (
        f'{DECL}<worksheet xmlns="{NS_S}" xmlns:r="{NS_R}"><sheetData><row r="1"><c r="A1">'
        '<v>1</v></c></row></sheetData><drawing r:id="rD"/></worksheet>')
    m["xl/worksheets/_rels/sheet1.xml.rels"] = rels(("rD", "drawing",
                                                     "../drawings/drawing1.xml"))
    m["xl/drawings/drawing1.xml"] = (
        f'{DECL}<xdr:wsDr xmlns:xdr="{xdr}" xmlns:a="{NS_A}" xmlns:r="{NS_R}" xmlns:c="{NS_C}">'
        f"<xdr:twoCellAnchor>{inner}</xdr:twoCellAnchor></xdr:wsDr>")
    if drawing_rels:
        m["xl/drawings/_rels/drawing1.xml.rels"] = rels(*drawing_rels)
    m.update(parts)
    return zip_bytes(m)
