"""Document properties written in XML: OOXML ``docProps``, ODF ``meta.xml``, XMP and EPUB OPF.

:func:`properties` reads one small XML part through :mod:`bastion.readers.office.xmlsafe`'s
refusing parser and gathers each property element's text by ``(namespace, name)``: a list
(``rdf:li`` items, repeated elements such as ``dc:creator`` in an OPF or ``meta:keyword``
in ODF, each an item), and the attributes of ``rdf:Description`` and ``meta:document-
statistic`` (XMP writes simple properties as attributes).  The ``*_meta`` functions map one
format's properties to a :class:`bastion.readers.metadata.DocMeta`.
"""

from __future__ import annotations

from typing import Any, Iterable

from ..metadata import DocMeta, split_keywords, split_people
from .xmlsafe import parse_xml

MAX_PROPS_BYTES = 4 << 20  # bytes of one properties part read (the rest is ignored)
MAX_VALUES = 200  # values kept per property

DC = "http://purl.org/dc/elements/1.1/"
DCTERMS = "http://purl.org/dc/terms/"
CP = "http://schemas.openxmlformats.org/package/2006/metadata/core-properties"
EP = "http://schemas.openxmlformats.org/officeDocument/2006/extended-properties"
ODF_META = "urn:oasis:names:tc:opendocument:xmlns:meta:1.0"
ODF_OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XMP = "http://ns.adobe.com/xap/1.0/"
PDF = "http://ns.adobe.com/pdf/1.3/"
OPF = "http://www.idpf.org/2007/opf"
XML_LANG = "http://www.w3.org/XML/1998/namespace lang"

_CONTAINERS = {f"{RDF} Seq", f"{RDF} Bag", f"{RDF} Alt", f"{RDF} li", f"{RDF} RDF",
               f"{RDF} Description", "adobe:ns:meta/ xmpmeta", f"{ODF_OFFICE} document-meta",
               f"{ODF_OFFICE} meta", f"{CP} coreProperties", f"{EP} Properties",
               f"{OPF} package", f"{OPF} metadata"}


class Props:
    """The properties of one part: ``values[(ns, name)]`` their texts in order, ``attrs``
    the attributes of the elements whose attributes are properties."""

    def __init__(self) -> None:
        self.values: dict[str, list[str]] = {}
        self.attrs: dict[str, str] = {}
        self.langs: dict[str, str] = {}  # a property's xml:lang, when declared

    def first(self, *keys: str) -> str | None:
        for key in keys:
            for v in self.values.get(key, ()):
                if v.strip():
                    return v
            attr = self.attrs.get(key)
            if attr and attr.strip():
                return attr
        return None

    def all(self, key: str) -> list[str]:
        out = [v for v in self.values.get(key, ()) if v.strip()]
        if not out and self.attrs.get(key):
            out = [self.attrs[key]]
        return out


def properties(data: bytes | Iterable[bytes], name: str) -> Props:
    """Parse one properties part (bytes, or chunks) into :class:`Props`; raises what
    :func:`bastion.readers.office.xmlsafe.parse_xml` raises on malformed or refused XML."""
    props = Props()
    stack: list[tuple[str, str | None, int]] = []  # (tag, the property it is in, items then)
    buf: list[str] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag in (f"{RDF} Description", f"{ODF_META} document-statistic"):
            for k, v in attrs.items():
                if " " in k:
                    props.attrs.setdefault(k, v)
        if tag == f"{OPF} meta" and attrs.get("property"):
            tag = f"{OPF} meta:{attrs['property']}"
        elif tag == f"{OPF} meta" and attrs.get("name") and attrs.get("content"):
            props.attrs.setdefault(f"{OPF} meta:{attrs['name']}", attrs["content"])
        parent = stack[-1][1] if stack else None
        if tag in _CONTAINERS:
            mine = parent
        else:
            mine = tag
            if attrs.get(XML_LANG):
                props.langs.setdefault(tag, attrs[XML_LANG])
        if tag == f"{RDF} li" or tag not in _CONTAINERS:
            buf.clear()
        stack.append((tag, mine, len(props.values.get(mine, ())) if mine else 0))

    def end(_tag: str) -> None:
        tag, mine, before = stack.pop()
        if mine is None:
            return
        values = props.values.setdefault(mine, [])
        if tag == f"{RDF} li" or (tag == mine and len(values) == before):
            if len(values) < MAX_VALUES:
                values.append("".join(buf))
        buf.clear()

    def text(s: str) -> None:
        if stack and stack[-1][1] is not None and sum(map(len, buf)) < 1 << 16:
            buf.append(s)

    def chunks() -> Iterable[bytes]:
        seen = 0
        for chunk in ([data] if isinstance(data, bytes) else data):
            if seen + len(chunk) > MAX_PROPS_BYTES:
                yield chunk[:MAX_PROPS_BYTES - seen]
                return
            seen += len(chunk)
            yield chunk

    parse_xml(chunks(), name, start, end, text)
    return props


def ooxml_meta(core: Props | None, app: Props | None, kind: str) -> DocMeta:
    """docProps/core.xml and docProps/app.xml of a DOCX (``kind`` "docx"), XLSX or PPTX."""
    core = core or Props()
    app = app or Props()
    authors = split_people(core.first(f"{DC} creator"))
    counts: dict[str, Any] = {
        "pages": app.first(f"{EP} Pages"), "words": app.first(f"{EP} Words"),
        "characters": app.first(f"{EP} Characters"),
        "paragraphs": app.first(f"{EP} Paragraphs"),
    }
    if kind == "pptx":
        counts = {"slides": app.first(f"{EP} Slides"), "words": app.first(f"{EP} Words"),
                  "paragraphs": app.first(f"{EP} Paragraphs")}
    elif kind == "xlsx":
        counts = {}
    return DocMeta.make(
        title=core.first(f"{DC} title"), authors=authors,
        created=core.first(f"{DCTERMS} created"), modified=core.first(f"{DCTERMS} modified"),
        subject=core.first(f"{DC} subject"), description=core.first(f"{DC} description"),
        keywords=split_keywords(core.first(f"{CP} keywords")),
        language=core.first(f"{DC} language"),
        fields={"last_modified_by": core.first(f"{CP} lastModifiedBy"),
                "category": core.first(f"{CP} category"),
                "content_status": core.first(f"{CP} contentStatus"),
                "application": app.first(f"{EP} Application"),
                "company": app.first(f"{EP} Company"), "manager": app.first(f"{EP} Manager")},
        **counts)


def odf_meta(props: Props, kind: str) -> DocMeta:
    """meta.xml (or a flat file's ``office:meta``) of an ODT, ODS or ODP."""
    creator = props.first(f"{ODF_META} initial-creator")
    last = props.first(f"{DC} creator")
    authors = [creator] if creator else ([last] if last else [])
    stats: dict[str, Any] = {
        "pages": props.attrs.get(f"{ODF_META} page-count"),
        "words": props.attrs.get(f"{ODF_META} word-count"),
        "characters": props.attrs.get(f"{ODF_META} character-count"),
        "paragraphs": props.attrs.get(f"{ODF_META} paragraph-count"),
    }
    if kind == "ods":
        stats = {"sheets": props.attrs.get(f"{ODF_META} table-count")}
    elif kind == "odp":
        stats = {"slides": props.attrs.get(f"{ODF_META} page-count"),
                 "words": stats["words"]}
    keywords: list[str] = []
    for k in props.all(f"{ODF_META} keyword"):
        keywords.extend(split_keywords(k))
    return DocMeta.make(
        title=props.first(f"{DC} title"), authors=authors,
        created=props.first(f"{ODF_META} creation-date"), modified=props.first(f"{DC} date"),
        subject=props.first(f"{DC} subject"), description=props.first(f"{DC} description"),
        keywords=keywords, language=props.first(f"{DC} language"),
        fields={"last_modified_by": last if creator and last != creator else None,
                "application": props.first(f"{ODF_META} generator")},
        **stats)


def xmp_meta(props: Props) -> DocMeta:
    """An XMP packet (a PDF's, an image's): Dublin Core, xmp: and pdf: properties."""
    keywords = list(props.all(f"{DC} subject"))
    if not keywords:
        keywords = list(split_keywords(props.first(f"{PDF} Keywords")))
    return DocMeta.make(
        title=props.first(f"{DC} title"), authors=props.all(f"{DC} creator"),
        created=props.first(f"{XMP} CreateDate"),
        modified=props.first(f"{XMP} ModifyDate", f"{XMP} MetadataDate"),
        description=props.first(f"{DC} description"), keywords=keywords,
        language=props.first(f"{DC} language"),
        fields={"producer": props.first(f"{PDF} Producer"),
                "creator_tool": props.first(f"{XMP} CreatorTool")})


def opf_meta(props: Props) -> DocMeta:
    """An EPUB's package document (OPF): its Dublin Core metadata."""
    modified = props.first(f"{OPF} meta:dcterms:modified", f"{DCTERMS} modified")
    dates = props.all(f"{DC} date")
    keywords: list[str] = []
    for k in props.all(f"{DC} subject"):
        keywords.extend(split_keywords(k))
    return DocMeta.make(
        title=props.first(f"{DC} title"), authors=props.all(f"{DC} creator"),
        created=dates[0] if dates else None, modified=modified,
        description=props.first(f"{DC} description"), keywords=keywords,
        language=props.first(f"{DC} language"),
        fields={"publisher": props.first(f"{DC} publisher"),
                "identifier": props.first(f"{DC} identifier"),
                "contributors": props.all(f"{DC} contributor")})
