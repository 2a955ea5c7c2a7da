"""The shape every reader shares: budgets, the capped text sink, the read context, the spec.

A reader is a frozen :class:`Reader` spec (name, version, MIME types, extensions, tools) plus
one ``read(doc, sink, ctx)`` function.  It writes text into a :class:`TextSink`, returns a
:class:`ReadResult` with the extractor detail and metadata, and raises the named errors of
:mod:`readers.errors`.  Readers never run in the parent: :mod:`readers.worker` calls them
inside a worker process.
"""

from __future__ import annotations

import codecs
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from .errors import CapReached

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Limits:
    """Per-document budgets.  Defaults are the documented ones (docs/readers.md)."""

    deadline_s: float = 60.0  # wall clock per document, built-in readers
    tool_deadline_s: float = 300.0  # wall clock per document when an external tool runs
    max_output_bytes: int = 64 * MiB  # text bytes a worker may hand back
    memory_bytes: int = 1 * GiB  # RLIMIT_AS of a worker
    max_chars: int = 16 * MiB  # characters of text per document (16 Mi)
    max_parts: int = 200_000  # parts (runs, cells, fields) in one paragraph or row
    max_member_bytes: int = 64 * MiB  # one zip member, decompressed
    max_xml_bytes: int = 256 * MiB  # XML per document, decompressed
    max_pages: int = 2000  # PDF pages extracted
    ocr_max_pages: int = 50  # scanned-PDF pages sent to OCR
    ocr_dpi: int = 200
    stderr_bytes: int = 4 * KiB
    pdf_engines: tuple[str, ...] = ("pdfium", "pdfplumber")

    def as_dict(self) -> dict[str, Any]:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Limits":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        if "pdf_engines" in known:
            known["pdf_engines"] = tuple(known["pdf_engines"])
        return cls(**known)


def cap_note(cap: str, detail: str = "") -> str:
    """The one line that ends a text cut short by a budget."""
    extra = f": {detail}" if detail else ""
    return f"[bastion: text truncated, {cap} reached{extra}]"


class TextSink:
    """Collects a reader's text under the character budget.

    ``write`` appends what fits and raises :class:`CapReached` once the budget is used up, so
    a reader stops at the cap without special code; the runtime keeps the text so far and
    ends it with :func:`cap_note`.
    """

    __slots__ = ("_parts", "_chars", "max_chars")

    def __init__(self, max_chars: int) -> None:
        self._parts: list[str] = []
        self._chars = 0
        self.max_chars = max_chars

    def write(self, s: str) -> None:
        if not s:
            return
        room = self.max_chars - self._chars
        if len(s) > room:
            if room > 0:
                self._parts.append(s[:room])
                self._chars += room
            raise CapReached("max_chars", f"{self.max_chars} characters")
        self._parts.append(s)
        self._chars += len(s)

    @property
    def chars(self) -> int:
        return self._chars

    def getvalue(self) -> str:
        return "".join(self._parts)


class SinkBuffer:
    """Text gathered in memory and handed to a :class:`TextSink` in chunks, so a large table or
    page is a few big sink writes rather than one per row or word.  ``flush`` before raising a
    cap, so the text so far reaches the sink."""

    __slots__ = ("sink", "buf", "size", "chunk")

    def __init__(self, sink: TextSink, chunk: int = 1 << 16) -> None:
        self.sink = sink
        self.buf: list[str] = []
        self.size = 0
        self.chunk = chunk

    def put(self, s: str) -> None:
        self.buf.append(s)
        self.size += len(s)
        if self.size >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            text = "".join(self.buf)
            self.buf.clear()
            self.size = 0
            self.sink.write(text)


@dataclass(frozen=True)
class Document:
    """One file handed to a reader: its bytes (already checked against the walk's sha256)."""

    data: bytes
    name: str  # the file's base name, for extension hints and messages only
    mime: str


@dataclass
class ReadResult:
    """What a reader returns besides its text."""

    extractor: str  # e.g. "html", "text:cp1252", "pdfium"
    meta: dict[str, Any] = field(default_factory=dict)  # pages, title, outline, …
    warnings: list[str] = field(default_factory=list)


class Context(Protocol):
    """What a reader may use besides its document (:class:`readers.context.LocalContext`)."""

    limits: Limits
    tools: dict[str, str]  # tool name -> absolute path, only the tools present and allowed
    tmpdir: Path  # private scratch directory, emptied after each document

    def run_tool(
        self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None,
        max_output: int | None = None, scratch: bool = True,
        while_running: "Callable[[], None] | None" = None,
    ) -> "ToolResult": ...

    def read_nested(self, data: bytes, name: str, sink: TextSink) -> str:
        """Read an embedded document (an e-mail attachment) into ``sink``; returns its
        extractor name.  Raises the same errors as a reader."""
        ...


@dataclass(frozen=True)
class ToolResult:
    returncode: int
    stdout: bytes
    stderr: bytes  # at most Limits.stderr_bytes
    truncated: bool = False  # stdout was cut at max_output


ReadFn = Callable[[Document, TextSink, Context], ReadResult]


@dataclass(frozen=True)
class Reader:
    """A reader: declared as data, selected by MIME type (then extension) in registry order."""

    name: str
    version: int
    mimes: tuple[str, ...]
    read: ReadFn
    extensions: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()  # external tools it may use (sensors, not dependencies)
    uses_tool_deadline: bool = False  # deadline is Limits.tool_deadline_s when a tool is present
    settings: tuple[str, ...] = ()  # Limits fields that change this reader's text (task key)

    def accepts(self, mime: str, name: str = "") -> bool:
        if mime in self.mimes:
            return True
        lower = name.lower()
        return any(lower.endswith(ext) for ext in self.extensions)


# Byte-order marks, UTF-32 before UTF-16 (the UTF-32-LE mark begins with the UTF-16-LE one)
_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def bom_codec(data: bytes) -> tuple[str, int] | None:
    """(codec, bytes to skip) when ``data`` starts with a byte-order mark, else None."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return codec, len(bom)
    return None


def normalize_text(text: str) -> str:
    """The store's normal form: CRLF and lone CR become LF, NUL removed, NFC."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text
