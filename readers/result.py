"""What a reader returns besides its text: one frozen, typed :class:`ReadResult`.

The worker maps it field for field to the document's verdict
(:meth:`bastion.readers.runtime.verdict.Verdict.of_outcome`) and to its sidecar
(:meth:`ReadResult.sidecar`).  A reader builds it as it reads (``dataclasses.replace``,
:meth:`ReadResult.with_metadata`, :meth:`ReadResult.over`); a reader stopped by a budget hands
what it had on its :class:`~bastion.readers.errors.CapReached`.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, MISSING, dataclass, field, fields, replace
from typing import Any

from .metadata import DocMeta
from .pdf.pages import OutlineEntry, PageSource

# What a document's sidecar (``extract/<aa>/<stem>.meta.json``) keeps of its reader's result,
# in this order: :meth:`ReadResult.sidecar`
SIDECAR = ("pages", "title", "outline", "page_sources", "metadata", "embedded")
MAX_TITLE = 4096  # characters of the sidecar's title (the record's: Verdict.MAX_STRING)


@dataclass(frozen=True)
class ReadResult:
    """What a reader returns besides its text: the one value the worker maps to the
    document's :class:`~bastion.readers.runtime.verdict.Verdict`
    (:meth:`~bastion.readers.runtime.verdict.Verdict.of_outcome`) and to its sidecar
    (:meth:`sidecar`).  A field left at its default says nothing: :meth:`over` lays one result
    over another by the fields set."""

    extractor: str  # e.g. "html", "text:cp1252", "pdfium"
    _: KW_ONLY
    warnings: tuple[str, ...] = ()  # problems the reader survived
    pages: int | None = None
    title: str | None = None  # the record's title (else the metadata's)
    outline: tuple[OutlineEntry, ...] | None = None  # a PDF's bookmarks
    page_sources: tuple[PageSource, ...] | None = None  # a PDF's: each page's provenance
    pages_ocr: int | None = None  # PDF pages whose text came from OCR
    metadata: DocMeta | None = None  # what the document declares about itself (never empty)
    # the metadata of the documents embedded in this one: {"path", "metadata"} (JSON form)
    embedded: tuple[dict[str, Any], ...] | None = None
    members: dict[str, int] | None = None  # an archive's members by outcome
    encoding_source: str | None = None  # how the text encoding was chosen: bom, declared, …
    languages: tuple[tuple[str, float], ...] = ()  # the text's main languages (langid)
    ocr_languages: tuple[str, ...] = ()  # tesseract packs whose reading is in the text
    ocr_missing: tuple[str, ...] = ()  # packs OCR would have used, not installed
    ocr_packs: dict[str, str | None] | None = None  # packs OCR looked at -> identity (None: absent)
    empty_reason: str | None = None  # why the document holds no text, when it holds none
    limit: str | None = None  # a cap met deeper down and gone past (the text is not cut short)
    # the reader's own facts that nothing downstream reads (a CSV's delimiter and rows, a
    # page's charset, an RTF's code page, the OCR pass's details …): for tests and people
    details: dict[str, Any] = field(default_factory=dict)

    def with_metadata(self, doc_meta: DocMeta) -> "ReadResult":
        """This result with ``doc_meta`` as its metadata (when it holds anything), and its
        title as the result's unless the reader set one."""
        if not doc_meta:
            return self
        return replace(self, metadata=doc_meta,
                       title=self.title if self.title or not doc_meta.title else doc_meta.title)

    def over(self, under: "ReadResult | None") -> "ReadResult":
        """``under`` with every field this result sets (not at its default) put over it, the
        extractor and the details merged the same way."""
        if under is None:
            return self
        changed = {f.name: getattr(self, f.name) for f in fields(self)
                   if f.name not in ("extractor", "details")
                   and getattr(self, f.name) != _DEFAULTS[f.name]}
        return replace(under, extractor=self.extractor or under.extractor,
                       details={**under.details, **self.details}, **changed)

    def sidecar(self) -> dict[str, Any]:
        """The sidecar's JSON form: the :data:`SIDECAR` fields this result has."""
        out: dict[str, Any] = {}
        for name in SIDECAR:
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, DocMeta):
                v = v.to_json()
            elif name == "title":
                v = v[:MAX_TITLE]
            elif name == "pages" and not (type(v) is int and 0 <= v < 1 << 53):
                continue  # no count (the verdict's pages are kept the same way)
            elif isinstance(v, tuple):
                v = [x.to_json() if hasattr(x, "to_json") else x for x in v]
            out[name] = v
        return out


_DEFAULTS: dict[str, Any] = {f.name: (f.default if f.default is not MISSING else None)
                             for f in fields(ReadResult)}
