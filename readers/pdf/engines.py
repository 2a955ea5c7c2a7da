"""The text engines — PDFium, pdfplumber and pdftotext — as one protocol of typed events: a
:class:`~bastion.readers.pdf.pages.PdfMeta` (pages, title, outline, info), then one
:class:`~bastion.readers.pdf.pages.PageText` per page (its text and annotations, or its error)
(:func:`iter_pdf`); their versions, asked once per process (:func:`engine_version`); and
``bastion pdftext``, the protocol as JSON lines for a parent (:func:`pdftext_main`:
``{"meta": {"pages", "title", "outline", "info"}}``, then ``{"page": n, "text": …}`` or
``{"page": n, "error": …}``)."""

from __future__ import annotations

import ctypes
import functools
import io
import json
import logging
import sys
from typing import Any, BinaryIO, Generator, TextIO, Union, cast

from ..base import Context, Limits, MiB
from ..errors import CorruptDocument, EncryptedDocument, ReaderError, ToolFailed
from .annotations import Notes, miner_annotations, note_text
from .info import INFO_KEYS
from .outline import MinerOutline, PdfiumOutline, walk_outline
from .pages import PageText, PdfMeta
from .pdfium import (PROBE_CHARS, Angles, Gaps, Pdfium, pdfium_annots, pdfium_api,
                     pdfium_error)
from .text import clean_page, decode_text_string, first_line

ENCRYPTED = "encrypted PDF (password required)"
TIMED_OUT = "pdf extraction timed out"
OVER_OUTPUT = "pdf text over the output limit"
MAX_INPUT_BYTES = 200 * MiB  # what ``pdftext_main`` reads from stdin
BUILTIN_ENGINES = ("pdfium", "pdfplumber")

# the meta event, then the page events
Events = Generator[Union[PdfMeta, PageText], None, None]


# pdfplumber's words break at a gap over PLUMBER_WORD_GAP x the font size (its default, 3 points
# at any size, glued words 0.2 em apart: F1 against MuPDF 0.896 -> 0.965 on the peers corpus;
# 0.08, 0.10, 0.12 and 0.15 all score 0.964-0.965 there).
PLUMBER_WORD_GAP = 0.10


def _pdfium_meta(pdf: Any) -> PdfMeta:
    """Page count, title and outline of an open PDFium document."""
    title = (pdf.get_metadata_value("Title") or "").replace("\x00", "").strip()
    try:
        outline = walk_outline(PdfiumOutline(pdf))
    except Exception:  # a broken outline costs the outline, never the text
        outline = []
    info = {}
    for key in INFO_KEYS:
        try:
            value = (pdf.get_metadata_value(key) or "").replace("\x00", "").strip()
        except Exception:  # one unreadable entry costs that entry
            value = ""
        if value:
            info[key] = value
    return PdfMeta(len(pdf), title or None, tuple(outline), info)


def _pdfium_events(data: bytes, max_pages: int) -> Events:
    pdf = _pdfium_open(data)
    try:
        n = len(pdf)
        yield _pdfium_meta(pdf)
        api = pdfium_api()
        angles, reader_notes = Angles(api), Notes(pdfium_annots())
        probe = _Probe(Gaps(api))
        handle = ctypes.cast(pdf.raw, ctypes.c_void_p).value
        for i in range(min(n, max_pages)):
            try:
                text, notes = _pdfium_page(api, handle, i, angles, probe, reader_notes)
            except Exception as e:
                yield PageText(i + 1, error=f"{type(e).__name__}: {e}")
                continue
            yield PageText(i + 1, clean_page(text.replace("\x02", "-")), annotations=tuple(notes))
    finally:
        pdf.close()


def _pdfium_open(data: bytes) -> Any:
    """The PDFium document, or the reader's error for a file it refuses."""
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        return pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        code = getattr(e, "err_code", None)
        if code == raw.FPDF_ERR_PASSWORD:
            raise EncryptedDocument(ENCRYPTED) from None
        if code == raw.FPDF_ERR_SECURITY:
            raise EncryptedDocument("encrypted PDF (unsupported security handler)") from None
        reason = "no pages" if code == raw.FPDF_ERR_SUCCESS else str(e)
        raise CorruptDocument(f"unreadable PDF: {reason}") from None


def _pdfium_page(api: Pdfium, handle: Any, i: int, angles: Angles, probe: "_Probe",
                 reader_notes: Notes) -> tuple[str, list[str]]:
    """Page ``i``'s text and its annotation notes (a broken annotation costs the notes,
    never the text)."""
    page = api.load_page(handle, i)
    if not page:
        raise pdfium_error("Failed to load page.")
    try:
        text = _pdfium_text(api, page, angles, probe)
        try:
            notes = reader_notes.read(page)
        except Exception:
            notes = []
    finally:
        api.close_page(page)
    return text, notes


def _pdfium_text(api: Pdfium, page: int, angles: Angles, probe: "_Probe") -> str:
    """A page's text: laid out again when it is set at an angle, respaced where the document
    needs it, else PDFium's text within the page's box."""
    textpage = api.load_text(page)
    if not textpage:
        raise pdfium_error("Failed to load text page.")
    try:
        whole = None  # the page's text_range, once asked for
        if angles.rotated(textpage):
            whole = api.text_range(textpage)
            text = angles.relayout(textpage, whole)
            if text is not None:
                return text
        text = probe.respaced(api, textpage, whole)
        return text if text is not None else api.text_bounded(page, textpage)
    finally:
        api.close_text(textpage)


class _Probe:
    """Whether a document's glued words are put apart (:class:`Gaps`): decided on its first
    PROBE_CHARS characters (two gaps found there: every page is respaced; none: no page)."""

    __slots__ = ("gaps", "respace", "probed", "breaks")

    def __init__(self, gaps: Gaps) -> None:
        self.gaps = gaps
        self.respace: bool | None = None  # None: probing; then every page, or none
        self.probed = self.breaks = 0

    def respaced(self, api: Pdfium, textpage: int, whole: str | None) -> str | None:
        """The page's text with its gaps as spaces; None when PDFium's own text stands
        (the document is not respaced, or the page has no gap)."""
        found = None
        if self.respace is None:  # probing: the first characters
            whole = api.text_range(textpage) if whole is None else whole
            limit = PROBE_CHARS - self.probed
            found = self.gaps.respace(textpage, whole, limit)
            if found is not None:
                self.probed += min(len(found[0]), limit)
                self.breaks += found[1]
                if self.breaks >= 2:
                    self.respace = True
                elif self.probed >= PROBE_CHARS:
                    self.respace = False
            if limit < len(whole):  # the probe saw part of the page
                found = None
        if not self.respace:
            return None
        if found is None:
            whole = api.text_range(textpage) if whole is None else whole
            found = self.gaps.respace(textpage, whole)
        return found[0] if found is not None and found[1] else None


def _miner_pages(doc: Any) -> list[tuple[int, dict[str, Any]]]:
    """The page tree's leaves as (object id, attributes with inherited ones), depth first,
    each object once; pdfminer's own walk (which also scans for pages without a tree) when
    the tree gives none."""
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdftypes import PDFObjRef, resolve1

    pages: list[tuple[int, dict[str, Any]]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, dict[str, Any]]] = [(doc.catalog.get("Pages"), {})]
    while stack:
        ref, inherited = stack.pop()
        if not isinstance(ref, PDFObjRef) or ref.objid in seen:
            continue
        seen.add(ref.objid)
        node = resolve1(ref)
        if not isinstance(node, dict):
            continue
        attrs = {**inherited, **node}
        kind = getattr(resolve1(node.get("Type")), "name", None)
        if kind == "Pages" or (kind is None and "Kids" in node):
            passed = {k: v for k, v in attrs.items() if k in PDFPage.INHERITABLE_ATTRS}
            kids = resolve1(node.get("Kids"))
            for kid in reversed(kids if isinstance(kids, list) else []):
                stack.append((kid, passed))
        elif kind == "Page":
            pages.append((int(ref.objid), attrs))
    if not pages:
        pages = [(int(cast(Any, p.pageid)), dict(p.attrs))
                 for p in PDFPage.create_pages(doc)]
    return pages


def _pdfplumber_events(data: bytes, max_pages: int) -> Events:
    import pdfplumber
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect
    from pdfminer.pdfpage import PDFPage
    from pdfminer.pdftypes import resolve1

    # pdfminer logs every oddity of a broken file as a warning; the page errors say enough.
    logging.getLogger("pdfminer").setLevel(logging.ERROR)
    try:
        pdf = pdfplumber.PDF(io.BytesIO(data))
        doc = pdf.doc
        pages = _miner_pages(doc)
    except Exception as e:
        cause = e.args[0] if e.args and isinstance(e.args[0], Exception) else e
        if isinstance(cause, PDFPasswordIncorrect):
            raise EncryptedDocument(ENCRYPTED) from None
        if isinstance(cause, PDFEncryptionError):
            raise EncryptedDocument("encrypted PDF (unsupported security handler)") from None
        raise CorruptDocument(f"unreadable PDF: {type(cause).__name__}: {cause}") from None
    if not pages:
        raise CorruptDocument("unreadable PDF: no pages")
    title = None
    info_text: dict[str, str] = {}
    for info in doc.info:
        if not isinstance(info, dict):
            continue
        for key in INFO_KEYS:
            try:
                raw = resolve1(info.get(key))
            except Exception:  # a broken reference costs that entry
                continue
            if isinstance(raw, bytes) and key not in info_text:
                value = decode_text_string(raw).replace("\x00", "").strip()
                if value:
                    info_text[key] = value
    title = info_text.get("Title")
    try:
        numbers = {objid: i for i, (objid, _) in enumerate(pages, 1)}
        outline = walk_outline(MinerOutline(doc, numbers))
    except Exception:  # a broken outline costs the outline, never the text
        outline = []
    yield PdfMeta(len(pages), title, tuple(outline), info_text)
    for i, (objid, attrs) in enumerate(pages[:max_pages], 1):
        try:
            page = pdfplumber.page.Page(pdf, PDFPage(doc, objid, attrs, None), page_number=i)
            try:
                text = page.extract_text(x_tolerance_ratio=PLUMBER_WORD_GAP)
                try:
                    notes = miner_annotations(page)
                except Exception:  # a broken annotation costs the notes, never the text
                    notes = []
            finally:
                page.close()
        except Exception as e:
            yield PageText(i, error=f"{type(e).__name__}: {e}")
            continue
        yield PageText(i, clean_page(text), annotations=tuple(notes))


def iter_pdf(data: bytes, engine: str, max_pages: int) -> Events:
    """The line protocol as events: the meta event (full page count), then pages 1…
    min(pages, max_pages).  Raises EncryptedDocument or CorruptDocument before any event."""
    if engine == "pdfium":
        return _pdfium_events(data, max_pages)
    if engine == "pdfplumber":
        return _pdfplumber_events(data, max_pages)
    raise ReaderError(f"unknown PDF engine {engine!r} (known: {', '.join(BUILTIN_ENGINES)})")


def pdftotext_events(
    data: bytes, ctx: Context, max_pages: int, meta: PdfMeta | None,
) -> Events:
    """pdftotext as an engine: ``-layout`` text split on its form feeds.  It gives no title or
    outline, so the meta is the one an engine already read, else PDFium's (read while
    pdftotext runs), else a page count.  The PDF goes to pdftotext's stdin as a memory file
    (``fd://0``): no scratch directory, nothing written to disk.  The annotation notes are
    PDFium's, read while pdftotext runs too (none when PDFium cannot open the file)."""
    probed: list[PdfMeta | None] = []
    notes: dict[int, list[str]] = {}

    def probe() -> None:
        try:
            import pypdfium2 as pdfium

            pdf = pdfium.PdfDocument(data)
        except Exception:  # PDFium cannot open it: pdftotext's text and page count alone
            probed.append(None)
            return
        try:
            if meta is None:
                probed.append(_pdfium_meta(pdf))
            api = pdfium_api()
            reader, handle = Notes(pdfium_annots()), ctypes.cast(pdf.raw, ctypes.c_void_p).value
            for i in range(min(len(pdf), max_pages)):
                try:
                    page = api.load_page(handle, i)
                    if not page:
                        continue
                    try:
                        found = reader.read(page)
                    finally:
                        api.close_page(page)
                except Exception:  # a broken page or annotation costs its notes only
                    continue
                if found:
                    notes[i + 1] = found
        finally:
            pdf.close()

    result = ctx.run_tool([ctx.tools["pdftotext"], "-layout", "-enc", "UTF-8", "-l",
                           str(max_pages), "fd://0", "-"], input=data, scratch=False,
                          while_running=probe)
    if meta is None and probed:
        meta = probed[0]
    if result.truncated:
        raise ReaderError(OVER_OUTPUT, kind="output_limit")
    if result.returncode != 0:
        line = first_line(result.stderr)
        if "password" in line.lower():
            raise EncryptedDocument(ENCRYPTED)
        raise CorruptDocument(f"unreadable PDF: {line or f'pdftotext exit {result.returncode}'}")
    pages = result.stdout.decode("utf-8", "replace").split("\f")
    if pages[-1].strip() == "":
        pages.pop()  # pdftotext ends every page, the last one too, with a form feed
    yield meta or PdfMeta(len(pages))
    for i, text in enumerate(pages, 1):
        # poppler draws the appearance of some annotations (free text) into the page's text:
        # a note already there is not repeated
        flat = " ".join(text.split())
        found = [n for n in notes.get(i, ()) if " ".join(note_text(n).split()) not in flat]
        yield PageText(i, clean_page(text), annotations=tuple(found))


def engine_version(engine: str, ctx: Context) -> str | None:
    """The version of a text engine: PDFium's build, pdfplumber's release, poppler's
    (``pdftotext -v`` of the context's pdftotext); each asked once per process."""
    if engine == "pdftotext":
        path = ctx.tools.get("pdftotext")
        return _pdftotext_version(path, ctx.limits.stderr_bytes) if path else None
    return _library_version(engine)


@functools.cache
def _library_version(engine: str) -> str | None:
    """PDFium's build or pdfplumber's release (None for another name, or when it is not
    installed)."""
    try:
        if engine == "pdfium":
            import pypdfium2.version

            return str(pypdfium2.version.PDFIUM_INFO.version).split("@")[0]
        if engine == "pdfplumber":
            import pdfplumber

            return str(pdfplumber.__version__)
    except (ImportError, AttributeError):
        pass
    return None


@functools.cache
def _pdftotext_version(path: str, max_stderr: int) -> str | None:
    """``pdftotext -v``'s version (poppler's), asked once per tool path and process (the
    document whose text is pdftotext's has run it already: its tools name it)."""
    from ..runtime.toolcall import run_tool

    try:
        res = run_tool([path, "-v"], timeout=10, max_output=64 * 1024, max_stderr=max_stderr)
    except ToolFailed:
        return None
    line = (res.stderr + res.stdout).decode("utf-8", "replace").split("\n")[0]
    return line.rsplit(" ", 1)[-1].strip() or None


def pdftext_main(argv: list[str], stdin: BinaryIO, stdout: TextIO) -> int:
    """``bastion pdftext [-max-pages N] [-engine NAME] < file.pdf``: the protocol as JSON lines.

    Exit 0 ok, 3 encrypted (a user password is needed), 4 unreadable (cannot be opened, no
    pages), 1 anything else, with one line on stderr.  Reads no environment, opens no network.
    """
    max_pages = Limits().max_pages
    engine = Limits().pdf_engines[0]
    args = list(argv)
    try:
        while args:
            flag = args.pop(0)
            name, _, value = flag.lstrip("-").partition("=")
            if not value:
                value = args.pop(0)
            if name == "max-pages":
                max_pages = int(value)
            elif name == "engine":
                engine = value
            else:
                raise ValueError(f"unknown flag {flag}")
        if max_pages < 0:
            raise ValueError("-max-pages must be 0 or more")
    except (ValueError, IndexError) as e:
        print(f"pdftext: {e or 'flag needs a value'}", file=sys.stderr)
        return 1
    data = stdin.read(MAX_INPUT_BYTES + 1)
    if len(data) > MAX_INPUT_BYTES:
        print(f"pdftext: input over {MAX_INPUT_BYTES // MiB} MiB", file=sys.stderr)
        return 1
    try:
        for event in iter_pdf(data, engine, max_pages):
            stdout.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        stdout.flush()
    except EncryptedDocument as e:
        print(e.message, file=sys.stderr)
        return 3
    except CorruptDocument as e:
        print(e.message.removeprefix("unreadable PDF: "), file=sys.stderr)
        return 4
    except Exception as e:
        print(f"pdftext: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0
