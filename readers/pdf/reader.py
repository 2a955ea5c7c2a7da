"""The PDF reader: text per page, the engines tried in turn, each page judged and OCRed where
it needs it, and the result with every page's provenance.

Engines are tried in turn — ``Limits.pdf_engines`` (default PDFium, then pdfplumber), then
``pdftotext`` when the tool is present — until one opens the file, does not crash and gives
at least one readable page (readers/pdf/engines.py: one protocol of events for all three);
the record names the engine that produced the text and the warnings say why earlier ones were
passed over.  Pages are separated by a form feed in the text, each page's annotation notes
after its text.  Each page is judged on its own (readers/pdf/text.py): a page whose text layer
is blank, short or garbage (under 90% printable) is rendered (PDFium, or ``pdftoppm``) and
OCRed with ``tesseract`` when it is present (readers/pdf/ocrpass.py), and the result's
``page_sources`` says how every page's text was made.  ``docs/readers/pdf.md`` has the rules
and measurements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..base import Context, Document, Limits, Reader, ReadResult, TextSink
from ..errors import (CapReached,
                      CorruptDocument,
                      EncryptedDocument,
                      ReaderError,
                      ToolFailed,
                      Unsupported,
                      missing_tool)
from ..ocr.packs import TESSDATA
from ..ocr.reader import NEEDS_TESSERACT, document_meta, tesseract_version
from ..render.events import Heading, Note, PageBreak
from .annotations import ANNOTATION_MARK, note_line
from .engines import Events, engine_version, iter_pdf, pdftotext_events
from .info import info_strings, metadata_text, pdf_meta
from .ocrpass import OcrPass, ocr_pass
from .pages import OcrProvenance, OutlineEntry, PageSource, PageText, PdfMeta
from .text import clean_page, measure, page_kind, printable_ratio

NO_TEXT_LAYER = "no text layer (scanned PDF?)"
NEEDS_PDFTOTEXT = "needs pdftotext (poppler) on this machine"
GARBAGE = "pdf text is not readable (under 90% printable characters)"
MAX_PAGE_WARNINGS = 20


@dataclass
class _Extraction:
    """One engine's pass over the document."""

    meta: PdfMeta
    texts: list[str] = field(default_factory=list)  # pages 1…, "" for a failed page
    notes: list[list[str]] = field(default_factory=list)  # each page's annotation text
    errors: list[str] = field(default_factory=list)  # "page N: why"
    failed: set[int] = field(default_factory=set)  # 0-based indices of the failed pages
    chars_full: bool = False  # stopped early: the text already exceeds the character budget


def _collect(events: Events, max_chars: int) -> _Extraction:
    """Run an engine to the end, or until its text is over the character budget."""
    try:
        meta = next(events)
        if not isinstance(meta, PdfMeta):
            raise TypeError("a PDF engine's first event is its meta")
        got = _Extraction(meta=meta)
        chars = 0
        for event in events:
            if not isinstance(event, PageText):
                raise TypeError("a PDF engine's events after the meta are pages")
            text = event.text
            if event.error is not None:
                got.errors.append(f"page {event.page}: {event.error}")
                got.failed.add(len(got.texts))
            got.texts.append(text)
            notes = list(event.annotations)
            got.notes.append(notes)
            chars += len(text) + 1 + sum(len(n) + len(ANNOTATION_MARK) + 1 for n in notes)
            if chars > max_chars:
                got.chars_full = True
                break
        return got
    finally:
        events.close()


def _engine_chain(ctx: Context) -> list[str]:
    """``Limits.pdf_engines`` in order, then pdftotext when present (unless the setting
    places it itself); pdftotext only when the tool is in ``ctx.tools``."""
    chain = list(dict.fromkeys(ctx.limits.pdf_engines))
    if "pdftotext" not in chain:
        chain.append("pdftotext")
    return [e for e in chain if e != "pdftotext" or "pdftotext" in ctx.tools]


def _page_list(indices: list[int]) -> str:
    """``page 2`` or ``pages 2, 5, 7`` (1-based), at most MAX_PAGE_WARNINGS, then a count."""
    shown = ", ".join(str(i + 1) for i in indices[:MAX_PAGE_WARNINGS])
    more = len(indices) - MAX_PAGE_WARNINGS
    return ("page " if len(indices) == 1 else "pages ") + shown + (
        f" and {more} more" if more > 0 else "")


class _Pages:
    """The kept engine's pages as the finish makes them: each page's text, its kind (readers/pdf/
    text.py's judgement), how its text was made (the provenance the record keeps) and its
    annotation notes."""

    __slots__ = ("texts", "kinds", "sources", "notes")

    def __init__(self, got: _Extraction, kinds: list[str], engine: str,
                 version: str | None) -> None:
        self.texts = list(got.texts)
        self.kinds = kinds
        self.sources = [PageSource(page=i + 1, source="failed" if i in got.failed else "native",
                                   engine=engine, version=version) for i in range(len(kinds))]
        self.notes: list[list[str]] = [[] for _ in self.texts]

    def mark(self, i: int, **facts: Any) -> None:
        """Facts added to page ``i``'s provenance."""
        self.sources[i] = replace(self.sources[i], **facts)

    def take_ocr(self, ocr: OcrPass, ctx: Context) -> None:
        """Each page's OCR reading, where it reads more than the text layer; the pages OCR
        found blank."""
        for i, (choice, renderer, dpi, turned) in ocr.done.items():
            unused = self._ocr_unused(i, choice.reading.text)
            if unused:
                self.mark(i, ocr_unused=unused)
                continue
            found = choice.reading
            self.texts[i] = clean_page(found.text)
            self.sources[i] = PageSource(
                page=i + 1, source="ocr", engine="tesseract", version=tesseract_version(ctx),
                confidence=found.confidence, renderer=renderer, dpi=dpi,
                ocr=OcrProvenance(tuple(choice.packs), choice.script or None,
                                  choice.language or None, tuple(choice.missing)),
                turned=turned or None)
        for i in ocr.blank:
            self.mark(i, blank=True)

    def _ocr_unused(self, i: int, read: str) -> str | None:
        """Why page ``i``'s OCR reading is not kept (None: it is)."""
        read_chars, own_chars = measure(read)[0], measure(self.texts[i])[0]
        if not read_chars:
            return "read nothing"
        if self.kinds[i] == "short" and read_chars < 2 * own_chars:
            # OCR of a few words drops and misreads letters ("Test" -> "est"): a short text
            # layer stays unless OCR found text it lacks (a page number over a scan)
            return "read no more than the text layer"
        return None

    def drop_garbage(self, candidates: list[int], ctx: Context, warnings: list[str]) -> None:
        """The garbage pages OCR did not read: dropped, never stored (a page of glyphs without
        a Unicode mapping)."""
        garbage = [i for i in candidates
                   if self.kinds[i] == "garbage" and self.sources[i].source != "ocr"]
        for i in garbage:
            ratio = printable_ratio(self.texts[i])
            self.texts[i] = ""
            self.mark(i, source="dropped", reason=f"garbage text ({ratio:.0%} printable)")
        if garbage:
            why = "" if "tesseract" in ctx.tools else \
                f", not OCRed: {missing_tool(NEEDS_TESSERACT, ctx.limits)}"
            warnings.append(f"{_page_list(garbage)}: garbage text dropped{why}")

    def not_ocred(self, ocr: OcrPass, ctx: Context, warnings: list[str]) -> None:
        """Why the pages OCR did not read were not read; the pages it failed on."""
        why = (missing_tool(NEEDS_TESSERACT, ctx.limits) if "tesseract" not in ctx.tools
               else "no renderer opens the file")
        for pages, reason in ((ocr.untried, why), (ocr.capped, "ocr_max_pages reached"),
                              (ocr.stopped, "the deadline was near")):
            for i in pages:
                self.mark(i, not_ocred=reason)
        unread = [i for i in ocr.untried if self.kinds[i] == "blank"]
        if unread:
            warnings.append(f"{_page_list(unread)}: no text layer, not OCRed: {why}")
        for i, message in sorted(ocr.failed.items())[:MAX_PAGE_WARNINGS]:
            warnings.append(f"OCR page {i + 1}: {message}")
        if len(ocr.failed) > MAX_PAGE_WARNINGS:
            warnings.append(f"OCR failed on {len(ocr.failed) - MAX_PAGE_WARNINGS} more pages")

    def annotations(self, notes: list[list[str]]) -> None:
        """Each page's annotations, as the notes written after its text."""
        for i, page_notes in enumerate(notes):
            if page_notes:
                self.notes[i] = [note_line(note) for note in page_notes]
                self.mark(i, annotations=len(page_notes))

    def empty(self) -> bool:
        return not any(t.strip() or n for t, n in zip(self.texts, self.notes))


def _finish(
    doc: Document, sink: TextSink, ctx: Context, engine: str, got: _Extraction,
    kinds: list[str], warnings: list[str],
) -> ReadResult:
    """The kept engine's pages, each page that needs it OCRed, annotations after each page;
    the text into the sink and the provenance of every page into the meta."""
    pages = _Pages(got, kinds, engine, engine_version(engine, ctx))
    candidates = [i for i, k in enumerate(kinds) if k != "text" and i not in got.failed]
    ocr = ocr_pass(doc.data, candidates, kinds, ctx) if candidates else OcrPass()
    pages.take_ocr(ocr, ctx)
    pages.drop_garbage(candidates, ctx, warnings)
    pages.not_ocred(ocr, ctx, warnings)
    pages.annotations(got.notes)
    result = _result(doc, engine, got.meta, pages.sources, ocr)
    if pages.empty():
        return _metadata_only(sink, result, _no_text(ocr), warnings)
    _write_pages(sink, pages.texts, pages.notes, got.meta.outline, result, warnings)
    caps = _caps(ctx.limits, got, ocr)
    if caps:
        for cap, detail in caps[1:]:
            warnings.append(f"{cap} reached: {detail}")
        raise CapReached(caps[0][0], caps[0][1],
                         result=replace(result, warnings=tuple(warnings)))
    return replace(result, warnings=tuple(warnings))


def _result(doc: Document, engine: str, meta: PdfMeta, sources: list[PageSource],
            ocr: OcrPass) -> ReadResult:
    """The result: the engine (and tesseract, when a page's text is its reading), the pages'
    provenance, the OCR's languages, the document's metadata."""
    pages_ocr = sum(1 for s in sources if s.source == "ocr")
    kept = [ocr.done[i][0] for i, s in enumerate(sources) if s.source == "ocr"]
    packs = document_meta([c for c, *_ in ocr.done.values()], kept)
    doc_meta = pdf_meta(doc.data, info_strings(dict(meta.info)), meta.pages)
    return ReadResult(
        f"{engine}+tesseract" if pages_ocr else engine, pages=meta.pages, title=meta.title,
        outline=meta.outline, page_sources=tuple(sources), pages_ocr=pages_ocr,
        ocr_languages=packs.ocr_languages, ocr_missing=packs.ocr_missing,
        ocr_packs=packs.ocr_packs).with_metadata(doc_meta)


def _metadata_only(sink: TextSink, result: ReadResult, reason: str,
                   warnings: list[str]) -> ReadResult:
    """No page holds text: empty, unless the document's metadata holds words (a scan whose
    only words are in its Info/XMP: those words are its text)."""
    only = metadata_text(result.metadata) if result.metadata is not None else ""
    if not only:
        return replace(result, empty_reason=reason, warnings=tuple(warnings))
    warnings.append(f"{reason}: the text is the document's metadata")
    _write_pages(sink, [only], [[]], (), result, warnings)
    return replace(result, warnings=tuple(warnings))


def _caps(limits: Limits, got: _Extraction, ocr: OcrPass) -> list[tuple[str, str]]:
    """The caps the document reached (the first is the record's, the others warnings)."""
    caps: list[tuple[str, str]] = []
    n = got.meta.pages
    if n > limits.max_pages and not got.chars_full:
        caps.append(("max_pages", f"{limits.max_pages} of {n} pages"))
    if ocr.capped:
        total = len(ocr.done) + len(ocr.failed) + len(ocr.capped)
        caps.append(("ocr_max_pages", f"{limits.ocr_max_pages} of {total} pages to OCR"))
    if ocr.stopped:
        caps.append(("ocr_deadline", f"not OCRed: {_page_list(ocr.stopped)}"))
    return caps


def _no_text(ocr: OcrPass) -> str:
    """Why a PDF holds no text: no text layer, and what OCR made of its pages (read them and
    found no words, found them blank, failed); "scanned PDF?" only while OCR has not looked
    (no tesseract, a cap or the deadline reached first: the warnings and the pages'
    ``not_ocred`` say which)."""
    if ocr.done:
        pages = sorted(ocr.done)
        return f"no text layer, and OCR read no text on {_page_list(pages)}"
    if ocr.failed:
        return f"no text layer, and OCR failed on {_page_list(sorted(ocr.failed))}"
    if ocr.blank and not (ocr.untried or ocr.capped or ocr.stopped):
        return "no text layer, and its pages are blank"
    return NO_TEXT_LAYER


def _write_pages(sink: TextSink, texts: list[str], notes: list[list[str]],
                 outline: tuple[OutlineEntry, ...], result: ReadResult,
                 warnings: list[str]) -> None:
    """Pages into the sink separated by form feeds, each page's annotation notes after its
    text; a character cap keeps the result and the warnings so far.  A structured sink gets
    the page structure too (:func:`_page_structure`)."""
    try:
        if sink.structured:
            _page_structure(sink, texts, notes, outline)
            return
        for i, (text, page_notes) in enumerate(zip(texts, notes)):
            if page_notes:
                block = "\n".join(page_notes)
                text = f"{text}\n{block}" if text else block
            if i:
                sink.write("\f")
            sink.write(text + "\n" if text else "")
    except CapReached as cap:
        raise CapReached(cap.cap, cap.detail,
                         result=replace(result, warnings=tuple(warnings))) from None


_SECTION_NUMBER = re.compile(r"^(?:\d+(?:\.\d+)*\.?|[A-Z]\.|[IVXLC]+\.)\s+")


def _page_structure(sink: TextSink, texts: list[str], notes: list[list[str]],
                    outline: tuple[OutlineEntry, ...]) -> None:
    """The pages as the plain text has them, with what the PDF itself says of their
    structure (no layout is guessed): a page break before each page after the first, the
    outline's entries as headings — on the line of their page that holds their title, else
    at the top of the page (in the Markdown only) — and the annotations as notes."""
    by_page: dict[int, list[OutlineEntry]] = {}
    for entry in outline:
        if entry.title.strip():
            by_page.setdefault(entry.page, []).append(entry)
    for i, (text, page_notes) in enumerate(zip(texts, notes)):
        if i:
            sink.layout("\f")
            sink.mark(PageBreak(i + 1))
        lines = text.split("\n") if text else []
        found = _heading_lines(sink, by_page.get(i + 1, []), lines)
        segments = _segments(lines, found)
        for k, (heading, part) in enumerate(segments):
            if k:
                sink.layout("\n")
            if heading is None:
                sink.write(part)  # its line breaks the text's own (soft breaks)
            else:
                sink.open(Heading(min(max(heading.level, 1), 6)))
                sink.write(part)
                sink.close()
        for j, note in enumerate(page_notes):
            if j or segments:
                sink.layout("\n")
            sink.open(Note("annotation"))
            sink.write(note)
            sink.close()
        if segments or page_notes:
            sink.layout("\n")


def _plain(line: str) -> str:
    """A title or a line as compared: its section number aside."""
    return _SECTION_NUMBER.sub("", " ".join(line.split())).casefold()


def _heading_lines(sink: TextSink, entries: list[OutlineEntry],
                   lines: list[str]) -> dict[int, OutlineEntry]:
    """The lines of a page that are its outline entries' titles (line index -> entry); an
    entry whose title is not a line of its own is a heading at the top of the page, in the
    Markdown alone."""
    found: dict[int, OutlineEntry] = {}
    for entry in entries:
        want = _plain(entry.title)
        at = next((k for k, line in enumerate(lines) if k not in found
                   and want and _plain(line) == want), None)
        if at is not None:
            found[at] = entry
        else:
            sink.open(Heading(min(max(entry.level, 1), 6)))
            sink.md(" ".join(entry.title.split()))
            sink.close()
    return found


def _segments(lines: list[str],
              found: dict[int, OutlineEntry]) -> list[tuple[OutlineEntry | None, str]]:
    """A page's lines as runs of lines between its heading lines, each heading line a
    segment of its own (with its entry)."""
    segments: list[tuple[OutlineEntry | None, str]] = []
    run: list[str] = []
    for k, line in enumerate(lines):
        entry_here = found.get(k)
        if entry_here is None:
            run.append(line)
            continue
        if run:
            segments.append((None, "\n".join(run)))
            run = []
        segments.append((entry_here, line))
    if run:
        segments.append((None, "\n".join(run)))
    return segments


@dataclass
class _Tried:
    """What the engines tried so far left: why each was passed over (``failures``), the first
    refusal for encryption, the first engine whose pages are all garbage, the first meta an
    engine read (pdftotext reports it)."""

    failures: list[str] = field(default_factory=list)
    encrypted: EncryptedDocument | None = None
    garbage: tuple[str, _Extraction, list[str]] | None = None
    meta: PdfMeta | None = None

    def run(self, engine: str, doc: Document, ctx: Context) -> _Extraction | None:
        """The engine's pass over the document, or None (the reason kept) when it could not
        read it."""
        limits = ctx.limits
        try:
            if engine == "pdftotext":
                events = pdftotext_events(doc.data, ctx, limits.max_pages, self.meta)
            else:
                events = iter_pdf(doc.data, engine, limits.max_pages)
            got = _collect(events, limits.max_chars)
        except MemoryError:
            raise
        except EncryptedDocument as e:
            # Engines differ on encryption: PDFium refuses some AES-256 files with an empty
            # user password that pdfminer and poppler open.  Let the next engine try.
            self.encrypted = self.encrypted or e
            self.failures.append(f"{engine}: {e.message}")
            return None
        except ToolFailed as e:
            if e.kind == "timeout":
                raise
            self.failures.append(f"{engine}: {e.message}")
            return None
        except ReaderError as e:
            self.failures.append(f"{engine}: {e.message}")
            return None
        except Exception as e:  # the engine crashed: try the next one
            self.failures.append(f"{engine} crashed: {type(e).__name__}: {e}")
            return None
        self.meta = self.meta or got.meta
        return got

    def kinds(self, engine: str, got: _Extraction) -> list[str] | None:
        """The kind of each page of an engine's pass that is kept; None (the reason kept)
        when every page failed, or all it read is garbage."""
        if got.texts and len(got.errors) == len(got.texts):
            self.failures.append(f"{engine}: every page failed ({got.errors[0]})")
            return None
        kinds = [page_kind(t) for t in got.texts]
        if "text" not in kinds and "garbage" in kinds and not any(got.notes):
            # nothing readable but glyphs without a Unicode mapping: another engine may map
            # them (pdfminer and poppler read some fonts PDFium does not)
            bad = "".join(t for t, k in zip(got.texts, kinds) if k == "garbage")
            self.failures.append(f"{engine}: garbage text ({printable_ratio(bad):.0%} printable)")
            self.garbage = self.garbage or (engine, got, kinds)
            return None
        return kinds

    def error(self, ctx: Context) -> ReaderError | Unsupported:
        """Why no engine's text is kept."""
        if self.garbage is not None:
            if "pdftotext" not in ctx.tools:
                return Unsupported(missing_tool(NEEDS_PDFTOTEXT, ctx.limits))
            return ReaderError(f"{GARBAGE}: " + "; ".join(self.failures))
        if self.encrypted is not None:  # no engine could open it without a password
            return self.encrypted
        return CorruptDocument(_unreadable_message(self.failures))


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    tried = _Tried()
    for engine in _engine_chain(ctx):
        got = tried.run(engine, doc, ctx)
        kinds = tried.kinds(engine, got) if got is not None else None
        if got is not None and kinds is not None:
            return _finish(doc, sink, ctx, engine, got, kinds, _warnings(tried.failures, got))
    if tried.garbage is not None and "tesseract" in ctx.tools:
        # every engine read garbage: the pages can still be read from their pixels
        engine, got, kinds = tried.garbage
        return _finish(doc, sink, ctx, engine, got, kinds, _warnings(tried.failures, got))
    raise tried.error(ctx)


def _warnings(failures: list[str], got: _Extraction) -> list[str]:
    """Why earlier engines were passed over, then the pages the kept one failed on."""
    page_warnings = got.errors[:MAX_PAGE_WARNINGS]
    if len(got.errors) > MAX_PAGE_WARNINGS:
        page_warnings.append(f"{len(got.errors) - MAX_PAGE_WARNINGS} more pages failed")
    return [f"skipped {f}" for f in failures] + page_warnings


def _unreadable_message(failures: list[str]) -> str:
    """The first engine's reason, with the ``unreadable PDF:`` prefix only once."""
    if not failures:
        return "unreadable PDF: no PDF engine configured"
    first = failures[0].split(": ", 1)[-1]
    return first if first.startswith("unreadable PDF") else f"unreadable PDF: {first}"


READER = Reader(
    name="pdf",
    # 4: metadata (Info, XMP; a scan's metadata as its text), form field values; 5: and OCR
    # in each page's language (the installed packs in the key)
    version=5,
    mimes=("application/pdf",),
    extensions=(".pdf",),
    tools=("pdftotext", "pdftoppm", "tesseract", TESSDATA),
    uses_tool_deadline=True,
    settings=("pdf_engines", "max_pages", "ocr_max_pages", "ocr_dpi", "ocr_languages"),
    read=read,
    libraries=("pypdfium2", "pdfplumber"),
)
