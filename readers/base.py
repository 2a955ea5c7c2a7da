"""The shape every reader shares: budgets, the capped text sink, the read context, the spec.

A reader is a frozen :class:`Reader` spec (name, version, MIME types, extensions, tools) plus
one ``read(doc, sink, ctx)`` function.  It writes text into a :class:`TextSink`, returns a
:class:`~bastion.readers.result.ReadResult` (the extractor detail, metadata, pages …), and raises the named errors of
:mod:`bastion.readers.errors`.  Readers never run in the parent: :mod:`bastion.readers.runtime.workermain` calls them
inside a worker process.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Protocol

from .errors import CapReached
from .result import SIDECAR, ReadResult  # noqa: F401 - the reader contract's

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


# How a manifest writes each Limits field: "seconds" (a positive number), "size" (bytes, with
# an optional unit), "count" (a positive integer), "engines" (a list of PDF engine names),
# "languages" (``auto`` or a list of tesseract language packs);
# "internal" fields are not manifest keys.
LIMIT_KINDS = ("seconds", "size", "count", "ratio", "engines", "languages", "internal")


def _limit(default: Any, kind: str) -> Any:
    """A Limits field with its manifest kind."""
    assert kind in LIMIT_KINDS, kind
    return field(default=default, metadata={"kind": kind})


def limit_kinds(limits: type | None = None) -> dict[str, str]:
    """Each field of ``limits`` (default :class:`Limits`) by name: its kind, ``"internal"``
    when the field declares none."""
    return {f.name: f.metadata.get("kind", "internal")
            for f in fields(limits if limits is not None else Limits)}


@dataclass(frozen=True)
class Limits:
    """Per-document budgets.  Defaults are the documented ones (docs/readers.md).

    Each field's ``metadata["kind"]`` says how a manifest writes it (:data:`LIMIT_KINDS`);
    the manifest's ``limits`` keys are derived from it, so a new field needs only its kind.
    """

    deadline_s: float = _limit(60.0, "seconds")  # wall clock per document, built-in readers
    tool_deadline_s: float = _limit(300.0, "seconds")  # wall clock when an external tool runs
    max_output_bytes: int = _limit(64 * MiB, "size")  # text bytes a worker may hand back
    memory_bytes: int = _limit(1 * GiB, "size")  # RLIMIT_AS of a worker
    max_chars: int = _limit(16 * MiB, "count")  # characters of text per document (16 Mi)
    max_parts: int = _limit(200_000, "count")  # parts (runs, cells, fields) in a paragraph or row
    max_member_bytes: int = _limit(64 * MiB, "size")  # one zip member, decompressed
    max_xml_bytes: int = _limit(256 * MiB, "size")  # XML per document, decompressed
    max_pages: int = _limit(2000, "count")  # PDF pages extracted
    ocr_max_pages: int = _limit(50, "count")  # scanned-PDF pages sent to OCR
    ocr_dpi: int = _limit(200, "count")
    stderr_bytes: int = _limit(4 * KiB, "internal")
    pdf_engines: tuple[str, ...] = _limit(("pdfium", "pdfplumber"), "engines")
    # the packs OCR reads with: ("auto",) chooses per page (readers/ocr/choose.py)
    ocr_languages: tuple[str, ...] = _limit(("auto",), "languages")
    # Documents inside documents (archive members, attachments): docs/readers/containers.md
    max_depth: int = _limit(3, "count")  # nesting inside the walked file (an archive: 1)
    max_members: int = _limit(10_000, "count")  # members read from one archive
    max_unpacked_bytes: int = _limit(256 * MiB, "size")  # decompressed from archives, per doc
    max_compression_ratio: float = _limit(100.0, "ratio")  # unpacked / packed, past 1 MiB
    # every text's languages named (readers/text/langid.py; its model costs ≈ 0.15 s of CPU
    # per worker to map, readers/text/langmodel.py): a sweep always; ``bastion text`` without
    # --json leaves them out
    name_languages: bool = _limit(True, "internal")
    # the run's external tools are off (--no-external, BASTION_NO_EXTERNAL=1, the API's
    # tools=None): a reader that would call one says it was not used for that reason rather
    # than that it is missing (readers/errors.py ``missing_tool``); part of the task key of
    # the readers that may call a tool
    external_off: bool = _limit(False, "internal")

    def as_dict(self) -> dict[str, Any]:
        return {
            k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Limits":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        for name in ("pdf_engines", "ocr_languages"):
            if name in known:
                known[name] = tuple(known[name])
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


class Context(Protocol):
    """What a reader may use besides its document (:class:`bastion.readers.runtime.context.LocalContext`)."""

    limits: Limits
    tools: dict[str, str]  # tool name -> absolute path, only the tools present and allowed
    @property
    def tmpdir(self) -> Path:
        """The private scratch directory, emptied after each document."""
        ...

    def run_tool(
        self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None,
        max_output: int | None = None, scratch: bool = True,
        while_running: "Callable[[], None] | None" = None,
    ) -> "ToolResult": ...

    def select(self, mime: str, name: str) -> "Reader | None":
        """The reader the registry chooses for an embedded document."""
        ...

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
    # Python distributions whose version changes its text (their versions are in the key)
    libraries: tuple[str, ...] = ()

    def accepts(self, mime: str, name: str = "") -> bool:
        if mime in self.mimes:
            return True
        lower = name.lower()
        return any(lower.endswith(ext) for ext in self.extensions)


def normalize_text(text: str) -> str:
    """The store's normal form: CRLF and lone CR become LF, NUL removed, NFC."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


# Every library a reader of nested documents (an archive, an e-mail) may reach through them.
NESTED_LIBRARIES = ("charset-normalizer", "compressed-rtf", "msoffcrypto-tool", "olefile",
                    "pdfplumber", "pypdfium2", "xlrd")
# Every tool such a reader may reach through them: 7-Zip for archives, the PDF reader's and
# OCR's, with tesseract's data directory (``tessdata``, readers/ocr/packs.py), whose packs
# OCR chooses among for an image or scanned page inside an archive or e-mail
NESTED_TOOLS = ("7zz", "7z", "pdftotext", "pdftoppm", "tesseract", "tessdata")
