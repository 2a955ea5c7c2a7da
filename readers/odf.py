"""ODT, ODS and ODP (and templates, and the flat ``.fodt/.fods/.fodp`` files) as plain text.

A zip package is read from its ``content.xml``; a flat file is one XML document.  Both go
through :mod:`readers.xmlsafe` (capped bytes, an expat parser that refuses DTDs) and are
streamed: only the open paragraph or row is held.  Which family it is comes from the body
element (``office:text``, ``office:spreadsheet``, ``office:presentation``), so one set of
rules serves all three; they are listed in ``docs/readers/office.md``.  Extractors: ``odt``,
``ods``, ``odp`` (``odg`` for a drawing read as a presentation).
"""

from __future__ import annotations

import re
import zipfile
from typing import Callable

from .base import Context, Document, Reader, ReadResult, TextSink
from .errors import CorruptDocument, EncryptedDocument
from .xmlsafe import (
    Budget, Flow, bytes_chunks, member_chunks, open_zip, parse_xml, run_capped, to_int,
)

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0 "
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0 "
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0 "
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0 "
PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0 "
SVG = "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0 "

_BASE = "application/vnd.oasis.opendocument."
MIMES = tuple(
    _BASE + kind + variant
    for kind in ("text", "spreadsheet", "presentation")
    for variant in ("", "-template", "-flat-xml")
)
EXTENSIONS = (".odt", ".ods", ".odp", ".ott", ".ots", ".otp", ".fodt", ".fods", ".fodp")

_BODY_KIND = {
    OFFICE + "text": "odt",
    OFFICE + "spreadsheet": "ods",
    OFFICE + "presentation": "odp",
    OFFICE + "drawing": "odg",
}
# Subtrees with no reading text: comments, deleted changes, note numbers, index templates,
# shape titles/descriptions, form controls.
_SKIPPED = frozenset({
    OFFICE + "annotation", TEXT + "tracked-changes", TEXT + "note-citation",
    SVG + "title", SVG + "desc", OFFICE + "forms",
    TEXT + "table-of-content-source", TEXT + "alphabetical-index-source",
    TEXT + "illustration-index-source", TEXT + "table-index-source",
    TEXT + "object-index-source", TEXT + "user-index-source", TEXT + "bibliography-source",
})
_WS = re.compile(r"[\t\n\r ]{2,}|[\t\n\r]")
_MAX_SPACES = 1000  # one text:s element expands to at most this many spaces


class _Content:
    """Events of an ODF body (``content.xml`` or a flat file) turned into lines."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.kind = ""  # odt / ods / odp / odg once the body element is seen
        self.in_body = False
        self.skip = 0
        self.in_p = 0  # open text:p / text:h
        self.tables = 0  # open table:table
        self.slides = 0
        self.cells: list[tuple[int, str | None]] = []  # open cells: (repeat, ISO date)
        self.rows: list[int] = []  # open rows: their repeat count
        f = flow
        self.starts: dict[str, Callable[[dict[str, str]], None]] = {
            TEXT + "p": self._p_start,
            TEXT + "h": self._p_start,
            TEXT + "s": self._spaces,
            TEXT + "tab": lambda a: f.add("\t") if self.in_p else None,
            TEXT + "line-break": lambda a: f.add("\n") if self.in_p else None,
            TABLE + "table": self._table_start,
            TABLE + "table-row": self._row_start,
            TABLE + "table-cell": self._cell_start,
            TABLE + "covered-table-cell": self._cell_start,
            DRAW + "page": self._page_start,
            PRESENTATION + "notes": self._notes_start,
            **{tag: self._kind(kind) for tag, kind in _BODY_KIND.items()},
        }
        self.ends: dict[str, Callable[[], None]] = {
            TEXT + "p": self._p_end,
            TEXT + "h": self._p_end,
            TABLE + "table": self._table_end,
            TABLE + "table-row": self._row_end,
            TABLE + "table-cell": self._cell_end,
            TABLE + "covered-table-cell": self._cell_end,
            PRESENTATION + "notes": self._notes_end,
        }

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        if self.skip:
            self.skip += 1
        elif self.in_body:
            if tag in _SKIPPED:
                self.skip = 1
                return
            f = self.starts.get(tag)
            if f is not None:
                f(attrs)
        elif tag == OFFICE + "body":
            self.in_body = True

    def end(self, tag: str) -> None:
        if self.skip:
            self.skip -= 1
        elif self.in_body:
            if tag == OFFICE + "body":
                self.in_body = False
                return
            f = self.ends.get(tag)
            if f is not None:
                f()

    def text(self, data: str) -> None:
        if self.in_p and not self.skip:
            self.flow.add(_WS.sub(" ", data))

    def _kind(self, kind: str) -> Callable[[dict[str, str]], None]:
        def handler(_attrs: dict[str, str]) -> None:
            self.kind = self.kind or kind
        return handler

    def _p_start(self, _attrs: dict[str, str]) -> None:
        self.in_p += 1
        self.flow.open_para()

    def _p_end(self) -> None:
        self.in_p -= 1
        self.flow.close_para()

    def _spaces(self, attrs: dict[str, str]) -> None:
        if self.in_p:
            self.flow.add(" " * min(max(to_int(attrs.get(TEXT + "c"), 1), 1), _MAX_SPACES))

    def _table_start(self, attrs: dict[str, str]) -> None:
        if not self.tables and self.kind == "ods":
            self.flow.heading(f"# {attrs.get(TABLE + 'name', '')}")
        self.tables += 1

    def _table_end(self) -> None:
        self.tables -= 1

    def _row_start(self, attrs: dict[str, str]) -> None:
        self.rows.append(max(to_int(attrs.get(TABLE + "number-rows-repeated"), 1), 1))
        self.flow.open_row()

    def _row_end(self) -> None:
        self.flow.close_row(self.rows.pop() if self.rows else 1)

    def _cell_start(self, attrs: dict[str, str]) -> None:
        repeat = max(to_int(attrs.get(TABLE + "number-columns-repeated"), 1), 1)
        date = attrs.get(OFFICE + "date-value") if (
            attrs.get(OFFICE + "value-type") == "date") else None
        self.cells.append((repeat, date))
        self.flow.open_cell()

    def _cell_end(self) -> None:
        repeat, date = self.cells.pop() if self.cells else (1, None)
        self.flow.close_cell(repeat, value=date)

    def _page_start(self, _attrs: dict[str, str]) -> None:
        self.slides += 1
        self.flow.heading(f"# slide {self.slides}")

    def _notes_start(self, _attrs: dict[str, str]) -> None:
        self.flow.pending_heading = "## notes"

    def _notes_end(self) -> None:
        self.flow.pending_heading = None


def _check_manifest(zf: zipfile.ZipFile, names: set[str], budget: Budget) -> None:
    """Refuse a password-protected package (its manifest carries encryption data)."""
    part = "META-INF/manifest.xml"
    if part in names and any(b"encryption-data" in c for c in member_chunks(zf, part, budget)):
        raise EncryptedDocument("encrypted document")


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    """Write the text of an ODF package or flat ODF file; rules in the module docstring."""
    budget = Budget(ctx.limits)
    flow = Flow(sink, ctx.limits)
    content = _Content(flow)
    try:
        if doc.data[:2] == b"PK":
            with open_zip(doc.data) as zf:
                names = set(zf.namelist())
                _check_manifest(zf, names, budget)
                if "content.xml" not in names:
                    raise CorruptDocument("not an OpenDocument package (no content.xml)")
                chunks = member_chunks(zf, "content.xml", budget)
                run_capped(flow, lambda: parse_xml(
                    chunks, "content.xml", content.start, content.end, content.text))
        else:
            name = doc.name or "flat ODF"
            chunks = bytes_chunks(doc.data, name, budget)
            run_capped(flow, lambda: parse_xml(
                chunks, name, content.start, content.end, content.text))
    except (KeyError, IndexError, ValueError, RecursionError) as e:
        raise CorruptDocument(f"damaged {doc.name or 'document'}: {e!r}") from None
    if not content.kind:
        raise CorruptDocument("not an OpenDocument text, spreadsheet or presentation")
    meta = {"slides": content.slides} if content.kind in ("odp", "odg") else {}
    return ReadResult(content.kind, meta)


READER = Reader(name="odf", version=1, mimes=MIMES, extensions=EXTENSIONS,
                settings=("max_member_bytes", "max_xml_bytes"), read=read)
