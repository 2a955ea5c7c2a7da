"""PDF: text per page from PDFium, pdfplumber or pdftotext, with title, outline and OCR.

One protocol serves both ways of running the built-in engines.  :func:`iter_pdf` yields a
``{"meta": {"pages", "title", "outline"}}`` event and then one ``{"page": n, "text": …}`` (or
``{"page": n, "error": …}``) event per page; :func:`read` consumes it inside the worker, and
:func:`pdftext_main` (``bastion pdftext [-max-pages N] [-engine NAME] < file.pdf``) writes it as
JSON lines for a parent (``tests/pdftext_client.py`` reads them back).

Engines are tried in turn — ``Limits.pdf_engines`` (default PDFium, then pdfplumber), then
``pdftotext`` when the tool is present — until one opens the file, does not crash and gives
text that is at least 90% printable; the record names the engine that produced the text and
the warnings say why earlier ones were passed over.  Pages are separated by a form feed in the
text.  A PDF without a text layer is OCRed page by page (``pdftoppm`` + ``tesseract``) when
both tools are present.  ``docs/readers/pdf.md`` has the measurements behind these choices.
"""

from __future__ import annotations

import ctypes
import io
import json
import logging
import operator
import re
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Generator, Hashable, Protocol, TextIO

from .base import Context, Document, Limits, MiB, Reader, ReadResult, TextSink
from .errors import (
    CapReached, CorruptDocument, EncryptedDocument, ReaderError, ToolFailed, Unsupported,
)
from .ocr import ocr_image_file

ENCRYPTED = "encrypted PDF (password required)"
NO_TEXT_LAYER = "no text layer (scanned PDF?)"
TIMED_OUT = "pdf extraction timed out"
OVER_OUTPUT = "pdf text over the output limit"
NEEDS_PDFTOTEXT = "needs pdftotext (poppler) on this machine"
GARBAGE = "pdf text is not readable (under 90% printable characters)"

MAX_INPUT_BYTES = 200 * MiB  # what ``pdftext_main`` reads from stdin
MAX_OUTLINE_ITEMS = 10_000
MIN_PRINTABLE = 0.90
BUILTIN_ENGINES = ("pdfium", "pdfplumber")
MAX_PAGE_WARNINGS = 20

# What makes text "not printable": C0/C1 controls other than whitespace, private-use code
# points, U+FFFD and non-characters, and pdfminer's "(cid:N)" for glyphs it cannot map.
_BAD = re.compile(
    "[\x00-\x08\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\ufffe\uffff\U000f0000-\U0010ffff]")
_CID = re.compile(r"\(cid:\d+\)")

Events = Generator[dict[str, Any], None, None]  # the meta event, then page events


# ---------------------------------------------------------------------------- text helpers

def decode_text_string(raw: bytes) -> str:
    """A PDF text string: UTF-16BE after ``FE FF``, UTF-8 after its BOM (PDF 2.0), otherwise
    PDFDocEncoding, read as Latin-1 (the two differ only in a few punctuation marks); trimmed."""
    if raw.startswith(b"\xfe\xff"):
        text = raw[2:].decode("utf-16-be", "replace")
    elif raw.startswith(b"\xef\xbb\xbf"):
        text = raw[3:].decode("utf-8", "replace")
    else:
        text = raw.decode("latin-1")
    return text.replace("\x00", "").strip()


def printable_ratio(text: str) -> float:
    """Share of the non-space characters that are printable (1.0 for blank text)."""
    text, cids = _CID.subn("\ufffd", text)
    total = len(text) - sum(text.count(c) for c in " \t\n\r\f\v")
    if total <= 0:
        return 1.0
    bad = len(_BAD.findall(text))
    return max(0.0, 1.0 - bad / total)


def _clean_page(text: str) -> str:
    """One page's text: LF line ends, no form feeds (they separate pages), no NUL, valid
    UTF-8, no trailing spaces, no blank lines around it."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\f", "\n").replace("\x00", "")
    if not text.isascii():
        text = text.encode("utf-8", "replace").decode("utf-8")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _first_line(stderr: bytes) -> str:
    for line in stderr.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


# --------------------------------------------------------------------------- outline walk

class OutlineSource(Protocol):
    """How one engine exposes outline items to :func:`walk_outline`."""

    def first_child(self, node: Any) -> Any: ...  # None at the end; ``node`` None = the root
    def next_sibling(self, node: Any) -> Any: ...
    def key(self, node: Any) -> Hashable: ...  # the same object gives the same key
    def title(self, node: Any) -> str: ...
    def page(self, node: Any) -> int | None: ...  # 1-based, None when unresolvable


def walk_outline(src: OutlineSource) -> list[dict[str, Any]]:
    """The outline in reading order: ``[{"title", "page", "level"}]``, level 1 at the top.

    Depth first without recursion; an object seen before ends its chain (outlines can loop);
    at most ``MAX_OUTLINE_ITEMS`` items are visited; items without a resolvable page are left
    out, their children are not.
    """
    items: list[dict[str, Any]] = []
    seen: set[Hashable] = set()
    stack: list[tuple[Any, int]] = [(src.first_child(None), 1)]
    while stack and len(seen) < MAX_OUTLINE_ITEMS:
        node, level = stack.pop()
        if node is None:
            continue
        key = src.key(node)
        if key in seen:
            continue
        seen.add(key)
        stack.append((src.next_sibling(node), level))
        stack.append((src.first_child(node), level + 1))
        page = src.page(node)
        if page is not None:
            items.append({"title": src.title(node), "page": page, "level": level})
    return items


class _PdfiumOutline:
    """Outline items as PDFium bookmarks (PDFium resolves named destinations itself)."""

    def __init__(self, pdf: Any) -> None:
        import pypdfium2.raw as raw

        self.raw = raw
        self.pdf = pdf

    def first_child(self, node: Any) -> Any:
        child = self.raw.FPDFBookmark_GetFirstChild(self.pdf, node)
        return child if child else None

    def next_sibling(self, node: Any) -> Any:
        nxt = self.raw.FPDFBookmark_GetNextSibling(self.pdf, node)
        return nxt if nxt else None

    def key(self, node: Any) -> Hashable:
        return ctypes.addressof(node.contents)

    def title(self, node: Any) -> str:
        n = self.raw.FPDFBookmark_GetTitle(node, None, 0)
        buf = ctypes.create_string_buffer(n)
        self.raw.FPDFBookmark_GetTitle(node, buf, n)
        return buf.raw[: max(n - 2, 0)].decode("utf-16-le", "replace").strip()

    def page(self, node: Any) -> int | None:
        raw = self.raw
        dest = raw.FPDFBookmark_GetDest(self.pdf, node)
        if not dest:
            action = raw.FPDFBookmark_GetAction(node)
            if action and raw.FPDFAction_GetType(action) == raw.PDFACTION_GOTO:
                dest = raw.FPDFAction_GetDest(self.pdf, action)
        if not dest:
            return None
        index = raw.FPDFDest_GetDestPageIndex(self.pdf, dest)
        return index + 1 if index >= 0 else None


class _MinerOutline:
    """Outline items as pdfminer objects, page references mapped through the page tree."""

    def __init__(self, doc: Any, page_numbers: dict[int, int]) -> None:
        from pdfminer.pdftypes import PDFObjRef, resolve1
        from pdfminer.psparser import PSLiteral

        self.doc = doc
        self.page_numbers = page_numbers
        self.ref_type, self.resolve, self.literal = PDFObjRef, resolve1, PSLiteral
        self.root = self._dict(doc.catalog.get("Outlines"))

    def _dict(self, obj: Any) -> dict[str, Any]:
        obj = self.resolve(obj)
        return obj if isinstance(obj, dict) else {}

    def first_child(self, node: Any) -> Any:
        return (self.root if node is None else self._dict(node)).get("First")

    def next_sibling(self, node: Any) -> Any:
        return self._dict(node).get("Next")

    def key(self, node: Any) -> Hashable:
        return node.objid if isinstance(node, self.ref_type) else id(node)

    def title(self, node: Any) -> str:
        raw = self.resolve(self._dict(node).get("Title"))
        return decode_text_string(raw) if isinstance(raw, bytes) else ""

    def _name(self, obj: Any) -> str | bytes | None:
        if isinstance(obj, self.literal):
            return obj.name
        return obj if isinstance(obj, (bytes, str)) else None

    def page(self, node: Any) -> int | None:
        item = self._dict(node)
        dest = self.resolve(item.get("Dest"))
        if dest is None:
            action = self._dict(item.get("A"))
            if self._name(self.resolve(action.get("S"))) == "GoTo":
                dest = self.resolve(action.get("D"))
        name = self._name(dest)
        if name is not None:
            try:
                dest = self.resolve(self.doc.get_dest(name))
            except Exception:  # pdfminer raises KeyError, or worse on a broken name tree
                return None
        if isinstance(dest, dict):
            dest = self.resolve(dest.get("D"))
        if isinstance(dest, list) and dest and isinstance(dest[0], self.ref_type):
            return self.page_numbers.get(dest[0].objid)
        return None


# -------------------------------------------------------------------------- the engines

# pdfplumber's words break at a gap over PLUMBER_WORD_GAP x the font size (its default, 3 points
# at any size, glued words 0.2 em apart: F1 against MuPDF 0.896 -> 0.965 on the peers corpus;
# 0.08, 0.10, 0.12 and 0.15 all score 0.964-0.965 there).
PLUMBER_WORD_GAP = 0.10
#
# PDFium puts a space where the content stream's positioning leaves a gap wider than about
# half the font's space width; with a font that declares no usable space width (groff's, for
# one), words set with TJ kerning come out glued ("ifthere").  Those gaps are put back from
# the glyphs' boxes: a gap wider than WORD_GAP x the glyph height between two glyphs on one
# line is a word break.  It costs a PDFium call per character, so each document is probed:
# the first PROBE_CHARS characters are checked, and the whole document only when the probe
# found two such gaps.  docs/readers/pdf.md has the measurements.
WORD_GAP = 0.12
PROBE_CHARS = 1500
_SPACE = frozenset(" \t\r\n\f\x00\x02\xa0")


class _Gaps:
    """The word breaks PDFium's text misses, from each glyph's loose box (its advance)."""

    def __init__(self) -> None:
        import pypdfium2.raw as raw

        # The same PDFium function through a plain prototype: pypdfium2's binding checks its
        # argument types on every call, which triples the cost of a call per character.
        address = ctypes.cast(raw.FPDFText_GetLooseCharBox, ctypes.c_void_p).value
        self._box = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                     ctypes.c_void_p)(address)
        self._count = raw.FPDFText_CountChars

    def respace(self, textpage: Any, limit: int | None = None) -> tuple[str, int] | None:
        """The page's text with a space at every gap, and how many were put in; None when
        PDFium's text does not map one character to one index (characters beyond U+FFFF).
        With ``limit``, only the first ``limit`` characters are looked at (a probe)."""
        from array import array

        handle = textpage.raw
        n = self._count(handle)
        text = textpage.get_text_range()
        if len(text) != n or n < 2:
            return None
        m = n if limit is None else max(2, min(n, limit))
        boxes = (ctypes.c_float * (4 * m))()
        base = ctypes.addressof(boxes)
        page = ctypes.cast(handle, ctypes.c_void_p).value
        for _ in map(self._box, [page] * m, range(m), range(base, base + 16 * m, 16)):
            pass
        values = array("f", bytes(boxes))  # left, top, right, bottom per character
        left, top, right, bottom = values[0::4], values[1::4], values[2::4], values[3::4]
        # glyphs set edge to edge (nearly all pairs) are dropped by the first, cheap test
        breaks = []
        spacing: dict[int, float] = {}  # a run of glyphs' median gap (letter-spacing), by start
        for i in [i for i, g in enumerate(map(operator.sub, left[1:], right), 1) if g > 0.01]:
            if text[i] in _SPACE or text[i - 1] in _SPACE:
                continue
            height = max(top[i] - bottom[i], top[i - 1] - bottom[i - 1])
            gap = left[i] - right[i - 1]
            if gap <= WORD_GAP * height or abs(bottom[i] - bottom[i - 1]) >= 0.3 * height:
                continue
            # the run of glyphs around the gap (PDFium's "word"): a gap counts only against
            # the run's usual spacing, so letter-spaced text is not cut into letters
            start = i - 1
            while start > 0 and text[start - 1] not in _SPACE:
                start -= 1
            usual = spacing.get(start)
            if usual is None:
                end = i + 1
                while end < m and text[end] not in _SPACE:
                    end += 1
                gaps = sorted(left[k] - right[k - 1] for k in range(start + 1, end))
                usual = spacing[start] = gaps[len(gaps) // 2]
            if gap - max(usual, 0.0) > WORD_GAP * height:
                breaks.append(i)
        if not breaks:
            return text, 0
        parts, start = [], 0
        for i in breaks:
            parts.append(text[start:i])
            start = i
        parts.append(text[start:])
        return " ".join(parts), len(breaks)


def _pdfium_events(data: bytes, max_pages: int) -> Events:
    import pypdfium2 as pdfium
    import pypdfium2.raw as raw

    try:
        pdf = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        code = getattr(e, "err_code", None)
        if code == raw.FPDF_ERR_PASSWORD:
            raise EncryptedDocument(ENCRYPTED) from None
        if code == raw.FPDF_ERR_SECURITY:
            raise EncryptedDocument("encrypted PDF (unsupported security handler)") from None
        reason = "no pages" if code == raw.FPDF_ERR_SUCCESS else str(e)
        raise CorruptDocument(f"unreadable PDF: {reason}") from None
    try:
        n = len(pdf)
        title = (pdf.get_metadata_value("Title") or "").replace("\x00", "").strip()
        try:
            outline = walk_outline(_PdfiumOutline(pdf))
        except Exception:  # a broken outline costs the outline, never the text
            outline = []
        yield {"meta": {"pages": n, "title": title or None, "outline": outline}}
        gaps = _Gaps()
        respace: bool | None = None  # None: probing; then every page, or none
        probed = breaks = 0
        for i in range(min(n, max_pages)):
            try:
                page = pdf[i]
                try:
                    textpage = page.get_textpage()
                    try:
                        text = None
                        if respace is None:  # probing: the first characters only
                            found = gaps.respace(textpage, PROBE_CHARS - probed)
                            if found is not None:
                                probed += min(len(found[0]), PROBE_CHARS - probed)
                                breaks += found[1]
                                if breaks >= 2:
                                    respace = True
                                elif probed >= PROBE_CHARS:
                                    respace = False
                        if respace:
                            found = gaps.respace(textpage)
                            if found is not None and found[1]:
                                text = found[0]
                        if text is None:
                            text = textpage.get_text_bounded()
                    finally:
                        textpage.close()
                finally:
                    page.close()
            except Exception as e:
                yield {"page": i + 1, "error": f"{type(e).__name__}: {e}"}
                continue
            yield {"page": i + 1, "text": _clean_page(text.replace("\x02", "-"))}
    finally:
        pdf.close()


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
            pages.append((ref.objid, attrs))
    if not pages:
        pages = [(p.pageid, p.attrs) for p in PDFPage.create_pages(doc)]
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
    for info in doc.info:
        raw = resolve1(info.get("Title")) if isinstance(info, dict) else None
        if isinstance(raw, bytes):
            title = decode_text_string(raw) or None
            break
    try:
        numbers = {objid: i for i, (objid, _) in enumerate(pages, 1)}
        outline = walk_outline(_MinerOutline(doc, numbers))
    except Exception:  # a broken outline costs the outline, never the text
        outline = []
    yield {"meta": {"pages": len(pages), "title": title, "outline": outline}}
    for i, (objid, attrs) in enumerate(pages[:max_pages], 1):
        try:
            page = pdfplumber.page.Page(pdf, PDFPage(doc, objid, attrs, None), page_number=i)
            try:
                text = page.extract_text(x_tolerance_ratio=PLUMBER_WORD_GAP)
            finally:
                page.close()
        except Exception as e:
            yield {"page": i, "error": f"{type(e).__name__}: {e}"}
            continue
        yield {"page": i, "text": _clean_page(text)}


def iter_pdf(data: bytes, engine: str, max_pages: int) -> Events:
    """The line protocol as events: the meta event (full page count), then pages 1…
    min(pages, max_pages).  Raises EncryptedDocument or CorruptDocument before any event."""
    if engine == "pdfium":
        return _pdfium_events(data, max_pages)
    if engine == "pdfplumber":
        return _pdfplumber_events(data, max_pages)
    raise ReaderError(f"unknown PDF engine {engine!r} (known: {', '.join(BUILTIN_ENGINES)})")


def _pdftotext_events(
    data: bytes, ctx: Context, max_pages: int, meta: dict[str, Any] | None,
) -> Events:
    """pdftotext as an engine: ``-layout`` text split on its form feeds.  It gives no title or
    outline, so the meta is the one an engine already read, else PDFium's (read while
    pdftotext runs), else a page count.  The PDF goes to pdftotext's stdin as a memory file
    (``fd://0``): no scratch directory, nothing written to disk."""
    probed: list[dict[str, Any] | None] = []

    def probe() -> None:
        events = _pdfium_events(data, 0)
        try:
            probed.append(next(events)["meta"])
        except (CorruptDocument, EncryptedDocument):
            probed.append(None)
        finally:
            events.close()

    result = ctx.run_tool([ctx.tools["pdftotext"], "-layout", "-enc", "UTF-8", "-l",
                           str(max_pages), "fd://0", "-"], input=data, scratch=False,
                          while_running=probe if meta is None else None)
    if meta is None and probed:
        meta = probed[0]
    if result.truncated:
        raise ReaderError(OVER_OUTPUT, kind="output_limit")
    if result.returncode != 0:
        line = _first_line(result.stderr)
        if "password" in line.lower():
            raise EncryptedDocument(ENCRYPTED)
        raise CorruptDocument(f"unreadable PDF: {line or f'pdftotext exit {result.returncode}'}")
    pages = result.stdout.decode("utf-8", "replace").split("\f")
    if pages[-1].strip() == "":
        pages.pop()  # pdftotext ends every page, the last one too, with a form feed
    yield {"meta": meta or {"pages": len(pages), "title": None, "outline": []}}
    for i, text in enumerate(pages, 1):
        yield {"page": i, "text": _clean_page(text)}


# ------------------------------------------------------------------------------ the reader

@dataclass
class _Extraction:
    """One engine's pass over the document."""

    meta: dict[str, Any]
    texts: list[str] = field(default_factory=list)  # pages 1…, "" for a failed page
    errors: list[str] = field(default_factory=list)  # "page N: why"
    chars_full: bool = False  # stopped early: the text already exceeds the character budget


def _collect(events: Events, max_chars: int) -> _Extraction:
    """Run an engine to the end, or until its text is over the character budget."""
    try:
        got = _Extraction(meta=next(events)["meta"])
        chars = 0
        for event in events:
            text = event.get("text", "")
            if "error" in event:
                got.errors.append(f"page {event['page']}: {event['error']}")
            got.texts.append(text)
            chars += len(text) + 1
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


def _write_pages(
    sink: TextSink, texts: list[str], extractor: str, meta: dict[str, Any],
) -> None:
    """Pages into the sink separated by form feeds; a character cap keeps extractor and meta."""
    try:
        for i, text in enumerate(texts):
            if i:
                sink.write("\f")
            sink.write(text + "\n" if text else "")
    except CapReached as cap:
        raise CapReached(cap.cap, cap.detail, extractor=extractor, meta=meta) from None


def _ocr_pages(
    data: bytes, pages: int, ctx: Context, warnings: list[str],
) -> list[str]:
    """Render pages 1…min(pages, ocr_max_pages) with pdftoppm, one at a time, and OCR each."""
    limits = ctx.limits
    pdf = ctx.tmpdir / "scanned.pdf"
    pdf.write_bytes(data)
    texts: list[str] = []
    failures = 0
    for n in range(1, min(pages, limits.ocr_max_pages) + 1):
        prefix = ctx.tmpdir / f"page-{n}"
        image = prefix.with_suffix(".png")
        try:
            res = ctx.run_tool([ctx.tools["pdftoppm"], "-r", str(limits.ocr_dpi), "-f", str(n),
                                "-l", str(n), "-png", "-gray", "-singlefile", str(pdf),
                                str(prefix)])
            if res.returncode != 0 or not image.exists():
                raise ToolFailed(f"pdftoppm: {_first_line(res.stderr) or 'no image'}")
            texts.append(_clean_page(ocr_image_file(image, ctx)))
        except ToolFailed as e:
            if e.kind == "timeout":
                raise
            failures += 1
            texts.append("")
            warnings.append(f"OCR page {n}: {e.message}")
        finally:
            image.unlink(missing_ok=True)
    pdf.unlink()
    if texts and failures == len(texts):
        raise ToolFailed(f"OCR failed on every page: {warnings[-1]}")
    return texts


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    limits = ctx.limits
    meta: dict[str, Any] | None = None
    failures: list[str] = []
    garbage = False
    encrypted: EncryptedDocument | None = None
    for engine in _engine_chain(ctx):
        try:
            if engine == "pdftotext":
                events = _pdftotext_events(doc.data, ctx, limits.max_pages, meta)
            else:
                events = iter_pdf(doc.data, engine, limits.max_pages)
            got = _collect(events, limits.max_chars)
        except MemoryError:
            raise
        except EncryptedDocument as e:
            # Engines differ on encryption: PDFium refuses some AES-256 files with an empty
            # user password that pdfminer and poppler open.  Let the next engine try.
            encrypted = encrypted or e
            failures.append(f"{engine}: {e.message}")
            continue
        except ToolFailed as e:
            if e.kind == "timeout":
                raise
            failures.append(f"{engine}: {e.message}")
            continue
        except ReaderError as e:
            failures.append(f"{engine}: {e.message}")
            continue
        except Exception as e:  # the engine crashed: try the next one
            failures.append(f"{engine} crashed: {type(e).__name__}: {e}")
            continue
        meta = meta or got.meta  # pdftotext reports the first meta an engine read
        if got.texts and len(got.errors) == len(got.texts):
            failures.append(f"{engine}: every page failed ({got.errors[0]})")
            continue
        page_warnings = got.errors[:MAX_PAGE_WARNINGS]
        if len(got.errors) > MAX_PAGE_WARNINGS:
            page_warnings.append(f"{len(got.errors) - MAX_PAGE_WARNINGS} more pages failed")
        warnings = [f"skipped {f}" for f in failures] + page_warnings
        if not any(t.strip() for t in got.texts):
            return _no_text(doc, sink, ctx, engine, got.meta, warnings)
        ratio = printable_ratio("".join(got.texts))
        if ratio < MIN_PRINTABLE:
            garbage = True
            failures.append(f"{engine}: garbage text ({ratio:.0%} printable)")
            continue
        _write_pages(sink, got.texts, engine, got.meta)
        n = got.meta["pages"]
        if n > limits.max_pages and not got.chars_full:
            raise CapReached("max_pages", f"{limits.max_pages} of {n} pages", extractor=engine,
                             meta=got.meta)
        return ReadResult(extractor=engine, meta=got.meta, warnings=warnings)
    if garbage:
        if "pdftotext" not in ctx.tools:
            raise Unsupported(NEEDS_PDFTOTEXT)
        raise ReaderError(f"{GARBAGE}: " + "; ".join(failures))
    if encrypted is not None:  # no engine could open it without a password
        raise encrypted
    raise CorruptDocument(_unreadable_message(failures))


def _unreadable_message(failures: list[str]) -> str:
    """The first engine's reason, with the ``unreadable PDF:`` prefix only once."""
    if not failures:
        return "unreadable PDF: no PDF engine configured"
    first = failures[0].split(": ", 1)[-1]
    return first if first.startswith("unreadable PDF") else f"unreadable PDF: {first}"


def _no_text(
    doc: Document, sink: TextSink, ctx: Context, engine: str, meta: dict[str, Any],
    warnings: list[str],
) -> ReadResult:
    """Every page blank: OCR when pdftoppm and tesseract are present, else ``empty``."""
    if not ("pdftoppm" in ctx.tools and "tesseract" in ctx.tools):
        return ReadResult(extractor=engine, meta={**meta, "empty_reason": NO_TEXT_LAYER},
                          warnings=warnings)
    extractor = "pdftoppm+tesseract"
    texts = _ocr_pages(doc.data, meta["pages"], ctx, warnings)
    if not any(t.strip() for t in texts):
        return ReadResult(extractor=extractor, meta={**meta, "empty_reason": NO_TEXT_LAYER},
                          warnings=warnings)
    _write_pages(sink, texts, extractor, meta)
    if meta["pages"] > ctx.limits.ocr_max_pages:
        raise CapReached("ocr_max_pages", f"{ctx.limits.ocr_max_pages} of {meta['pages']} pages",
                         extractor=extractor, meta=meta)
    return ReadResult(extractor=extractor, meta=meta, warnings=warnings)


READER = Reader(
    name="pdf",
    version=2,
    mimes=("application/pdf",),
    extensions=(".pdf",),
    tools=("pdftotext", "pdftoppm", "tesseract"),
    uses_tool_deadline=True,
    settings=("pdf_engines", "max_pages", "ocr_max_pages", "ocr_dpi"),
    read=read,
)


# ------------------------------------------------------------------------------ child mode

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
            stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
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
