"""A PDF's typed values: what an engine reports (the document's :class:`PdfMeta`, then one
:class:`PageText` per page), its outline's :class:`OutlineEntry`, and how each page's text was
made (:class:`PageSource`, the sidecar's ``page_sources``).

All frozen: the reader builds a page's provenance once it knows it (``dataclasses.replace``
for what a later step adds), never by editing it in place.  Each value's ``to_json`` is its
form on the wire (``bastion pdftext``'s JSON lines) and in the sidecar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True, slots=True)
class OutlineEntry:
    """One bookmark: its title, its 1-based page, its depth (1 at the top)."""

    title: str
    page: int
    level: int

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "page": self.page, "level": self.level}


@dataclass(frozen=True, slots=True)
class PdfMeta:
    """What an engine reads before the pages: the page count, the Info title, the outline,
    the Info dictionary's text entries."""

    pages: int
    title: str | None = None
    outline: tuple[OutlineEntry, ...] = ()
    info: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pages": self.pages, "title": self.title,
                               "outline": [e.to_json() for e in self.outline]}
        if self.info:
            out["info"] = dict(self.info)
        return {"meta": out}


@dataclass(frozen=True, slots=True)
class PageText:
    """One page as an engine read it: its text and its annotations' notes, or why it failed."""

    page: int  # 1-based
    text: str = ""
    error: str | None = None
    annotations: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return {"page": self.page, "error": self.error}
        out: dict[str, Any] = {"page": self.page, "text": self.text}
        if self.annotations:
            out["annotations"] = list(self.annotations)
        return out


@dataclass(frozen=True, slots=True)
class OcrProvenance:
    """How an OCRed page was read: the packs that read it, its script and language, the packs
    it would have wanted and lacks (readers/ocr/choose.py)."""

    languages: tuple[str, ...]
    script: str | None = None
    language: str | None = None
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"languages": list(self.languages)}
        if self.script:
            out["script"] = self.script
        if self.language:
            out["language"] = self.language
        if self.missing:
            out["missing"] = list(self.missing)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class PageSource:
    """How one page's text was made.  ``source``: ``native`` (the engine's text layer),
    ``ocr`` (tesseract's reading, with ``confidence``, ``renderer``, ``dpi``, the language
    ``ocr`` provenance, ``turned`` when it lay on its side), ``failed`` (the engine failed on
    it), ``dropped`` (garbage text left out: ``reason``).  Beside it: ``ocr_unused`` (why an
    OCR reading was not kept), ``blank`` (OCR found the page blank), ``not_ocred`` (why it
    was not OCRed), ``annotations`` (notes written after its text)."""

    page: int
    source: str
    engine: str | None
    version: str | None
    confidence: float | None = None
    renderer: str | None = None
    dpi: int | None = None
    ocr: OcrProvenance | None = None
    turned: int | None = None
    ocr_unused: str | None = None
    blank: bool = False
    not_ocred: str | None = None
    reason: str | None = None
    annotations: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"page": self.page, "source": self.source,
                               "engine": self.engine, "version": self.version}
        if self.source == "ocr":
            out.update(confidence=self.confidence, renderer=self.renderer, dpi=self.dpi)
            if self.ocr is not None:
                out.update(self.ocr.to_json())
            if self.turned:
                out["turned"] = self.turned
        if self.reason is not None:
            out["reason"] = self.reason
        if self.ocr_unused is not None:
            out["ocr_unused"] = self.ocr_unused
        if self.blank:
            out["blank"] = True
        if self.not_ocred is not None:
            out["not_ocred"] = self.not_ocred
        if self.annotations is not None:
            out["annotations"] = self.annotations
        return out
