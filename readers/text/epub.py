"""EPUB 2 and 3: the spine's documents in reading order, through the HTML reader.

``META-INF/container.xml`` names the package document (the OPF); its ``<manifest>`` maps ids to
members and its ``<spine>`` lists them in reading order.  Each spine item that is (X)HTML is
read with :func:`bastion.readers.text.markup.html_to_text` (its charset sniffed as the HTML reader does);
other spine items (images, SVG) are skipped; ``linear="no"`` items are kept, after the linear
ones, as readers show them at the end.  The title is the first ``dc:title`` of the package
metadata (the result's ``title``); all of its Dublin Core metadata (creators, language, dates,
description, subjects, publisher, identifier) is its ``metadata``.  Every member is read through :mod:`bastion.readers.office.xmlsafe`'s capped
decompression (``max_member_bytes``, ``max_xml_bytes``) and XML parser that refuses DTDs.
A DRM-encrypted book (``META-INF/encryption.xml`` naming a spine document) is
``error``/``encrypted``.  Extractor ``epub``.
"""

from __future__ import annotations

import posixpath
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument, EncryptedDocument
from ..metadata import DocMeta
from . import textcodec
from .markup import html_to_text, prescan
from ..office.xmlsafe import Budget, member_chunks, open_zip, parse_xml

EPUB = "application/epub+zip"
CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container "
OPF = "http://www.idpf.org/2007/opf "
DC = "http://purl.org/dc/elements/1.1/ "
ENC = "http://www.w3.org/2001/04/xmlenc# "
_HTML_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")


def _member(zf, names: dict[str, str], path: str, budget: Budget) -> bytes:
    real = names.get(path) or names.get(path.lower())
    if real is None:
        raise KeyError(path)
    return b"".join(member_chunks(zf, real, budget))


def _rootfile(zf, names, budget: Budget) -> str:
    found: list[str] = []

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == CONTAINER + "rootfile" and not found:
            if a.get("media-type", "application/oebps-package+xml") == \
                    "application/oebps-package+xml" and a.get("full-path"):
                found.append(a["full-path"])

    try:
        data = _member(zf, names, "META-INF/container.xml", budget)
    except KeyError:
        raise CorruptDocument("EPUB without META-INF/container.xml") from None
    parse_xml([data], "META-INF/container.xml", start)
    if not found:
        raise CorruptDocument("EPUB container names no package document")
    return found[0]


Manifest = dict[str, tuple[str, str]]  # id -> (href, media type)


def _package(data: bytes, name: str) -> tuple[str, Manifest, list[tuple[str, bool]]]:
    manifest: Manifest = {}
    spine: list[tuple[str, bool]] = []
    title: list[str] = []
    state: dict[str, Any] = {"title": False, "buf": []}

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == OPF + "item" and a.get("id") and a.get("href"):
            manifest[a["id"]] = (a["href"], a.get("media-type", ""))
        elif tag == OPF + "itemref" and a.get("idref"):
            spine.append((a["idref"], a.get("linear", "yes").strip().lower() != "no"))
        elif tag == DC + "title" and not title:
            state["title"] = True
            state["buf"] = []

    def end(tag: str) -> None:
        if tag == DC + "title" and state["title"]:
            state["title"] = False
            text = " ".join("".join(state["buf"]).split())
            if text:
                title.append(text)

    def chars(s: str) -> None:
        if state["title"]:
            state["buf"].append(s)

    parse_xml([data], name, start, end, chars)
    return (title[0] if title else ""), manifest, spine


def _book_meta(data: bytes, name: str) -> DocMeta:
    """The package document's Dublin Core metadata (already parsed once: a malformed OPF
    stopped the read before this)."""
    from ..office.docprops import opf_meta, properties

    return opf_meta(properties(data, name))


def _encrypted(zf, names, budget: Budget) -> set[str]:
    if "META-INF/encryption.xml" not in names:
        return set()
    out: set[str] = set()

    def start(tag: str, a: dict[str, str]) -> None:
        if tag == ENC + "CipherReference" and a.get("URI"):
            out.add(posixpath.normpath(unquote(a["URI"])))

    parse_xml([_member(zf, names, "META-INF/encryption.xml", budget)],
              "META-INF/encryption.xml", start)
    return out


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    zf = open_zip(doc.data)
    names: dict[str, str] = {}
    for n in zf.namelist():
        names.setdefault(n, n)
        names.setdefault(n.lower(), n)
    budget = Budget(ctx.limits)
    got = ReadResult("epub")
    try:
        opf = _rootfile(zf, names, budget)
        try:
            data = _member(zf, names, opf, budget)
        except KeyError:
            raise CorruptDocument(f"EPUB package document {opf} missing") from None
        title, manifest, spine = _package(data, opf)
        got = replace(got, title=title or None).with_metadata(_book_meta(data, opf))
        base = posixpath.dirname(opf)
        encrypted = _encrypted(zf, names, budget)
        order = [i for i in spine if i[1]] + [i for i in spine if not i[1]]
        read_items = 0
        missing = []
        for idref, _linear in order:
            item = manifest.get(idref)
            if item is None:
                continue
            href, media = item
            if media not in _HTML_TYPES:
                continue
            path = posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))
            if path in encrypted:
                raise EncryptedDocument(f"EPUB with encrypted content ({path}): DRM")
            try:
                body = _member(zf, names, path, budget)
            except KeyError:
                missing.append(path)
                continue
            text, _ = textcodec.decode(body, prescan(body) or textcodec.xml_declared(body))
            html_to_text(text, sink, ctx.limits)
            read_items += 1
        got = replace(got, details={"spine_items": read_items})
    except CapReached as cap:
        cap.extractor = cap.extractor or "epub"
        cap.put_over(got)
        raise
    warnings = tuple(f"EPUB spine item missing: {p}" for p in missing[:20])
    if not read_items:
        got = replace(got, empty_reason="EPUB spine holds no readable (X)HTML document")
    return replace(got, warnings=warnings)


READER = Reader(
    name="epub",
    version=2,
    mimes=(EPUB,),
    extensions=(".epub",),
    settings=("max_member_bytes", "max_xml_bytes", "max_parts"),
    read=read,
    libraries=("charset-normalizer",),
)
