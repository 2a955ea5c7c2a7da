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
    """Collects a reader's text under the character budget: the plain text, and the stream's
    structure for whoever renders it (:mod:`bastion.readers.render`).

    ``write`` appends what fits and raises :class:`CapReached` once the budget is used up, so
    a reader stops at the cap without special code; the runtime keeps the text so far and
    ends it with :func:`cap_note`.  Beside ``write`` (the document's text) a reader sends
    ``layout`` (the plain text's own separators and markers), ``md`` (text only the Markdown
    shows), ``open``/``close`` around blocks and links and ``mark`` for points: the stream of
    :mod:`bastion.readers.render.events`.  This sink keeps the plain text only: ``layout``
    is text to it and the structure costs nothing; :class:`~bastion.readers.render.sink.
    MarkdownSink` renders the Markdown as well (``structured``: a reader may skip building
    structure it would not keep).  The budget counts the plain text's characters either way,
    so the plain text is the same whichever sink reads it.
    """

    __slots__ = ("_parts", "_chars", "max_chars")

    structured = False  # True: the structure events are rendered (build them)

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

    layout = write  # the plain text's separators and markers: plain text here

    def md(self, s: str) -> None:
        """Text only the Markdown shows (none here)."""

    def open(self, node: Any) -> None:
        """A block or link starts (:mod:`bastion.readers.render.events`)."""

    def close(self) -> None:
        """The innermost open block or link ends."""

    def mark(self, node: Any) -> None:
        """A point in the stream: a page break, a line break, an embedded document's
        Markdown."""

    def nested(self, max_chars: int) -> "TextSink":
        """A sink of the same kind for an embedded document read apart (its text then put
        into this one with :meth:`include`)."""
        return type(self)(max_chars)

    def include(self, sub: "TextSink", text: str | None = None) -> None:
        """Put in an embedded document read into ``sub`` (:meth:`nested`): ``text`` (the
        form this document shows it in; default its own text), and its Markdown."""
        self.write(sub.getvalue() if text is None else text)

    def markdown(self) -> str | None:
        """The Markdown rendered so far (None: this sink renders none)."""
        return None

    @property
    def chars(self) -> int:
        return self._chars

    def getvalue(self) -> str:
        return "".join(self._parts)


class SinkBuffer:
    """Text gathered in memory and handed to a :class:`TextSink` in chunks, so a large table or
    page is a few big sink writes rather than one per row or word.  ``flush`` before raising a
    cap, so the text so far reaches the sink.  For a structured sink the events are held in
    order with the text and replayed at the same points, so the budget strikes at the same
    character."""

    __slots__ = ("sink", "buf", "size", "chunk", "ops")

    def __init__(self, sink: TextSink, chunk: int = 1 << 16) -> None:
        self.sink = sink
        self.buf: list[str] = []
        self.size = 0
        self.chunk = chunk
        self.ops: list[tuple[int, Any]] | None = [] if sink.structured else None

    def put(self, s: str) -> None:
        if self.ops is not None:
            self.ops.append((0, s))  # render.events.TEXT
        else:
            self.buf.append(s)
        self.size += len(s)
        if self.size >= self.chunk:
            self.flush()

    def layout(self, s: str) -> None:
        if self.ops is None:
            self.put(s)
            return
        self.ops.append((1, s))  # render.events.LAYOUT
        self.size += len(s)
        if self.size >= self.chunk:
            self.flush()

    def event(self, op: int, value: Any = None) -> None:
        """A structure event in its place (kept only for a structured sink)."""
        if self.ops is not None:
            self.ops.append((op, value))

    def put_events(self, events: list[tuple[int, Any]], size: int) -> None:
        """A recorded stream (structured sink only) holding ``size`` characters of plain
        text, put as one ``put`` of that text would be (the same flush points)."""
        assert self.ops is not None
        self.ops.extend(events)
        self.size += size
        if self.size >= self.chunk:
            self.flush()

    def flush(self) -> None:
        if self.ops is not None:
            if self.ops:
                from .render.events import replay

                ops, self.ops = self.ops, []
                self.size = 0
                replay(ops, self.sink)
            return
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
class ReadState:
    """What the reading of one document keeps as it goes, declared: every level of the
    documents inside it (archive members, attachments, objects in Office files, a decrypted
    package) shares it through the context's ``state``, one per walked document.  A reader
    keeps nothing else on the context."""

    depth: int = 0  # how deep the document being read sits in the walked file (0: itself)
    member_prefix: str = ""  # the path of the archive being read inside the walked file ("a.zip!/")
    decrypting: bool = False  # a package decrypted with Office's default password is being read
    unpacked: int = 0  # bytes decompressed from archives so far (Limits.max_unpacked_bytes)
    # the monotonic time the first embedded document started, and the document's time budget
    # then: no new member is started in the last share of it (readers/containers/nested.py)
    nesting_started: float | None = None
    nesting_budget_s: float | None = None
    # the embedded documents' own metadata, {"path", "metadata"} (the sidecar's "embedded")
    embedded: list[dict[str, Any]] = field(default_factory=list)
    # the embedded documents' OCR facts, joined to the walked document's verdict
    ocr_languages: set[str] = field(default_factory=set)
    ocr_missing: set[str] = field(default_factory=set)
    ocr_packs: dict[str, str | None] = field(default_factory=dict)


class Context(Protocol):
    """What a reader may use besides its document (:class:`bastion.readers.runtime.context.LocalContext`)."""

    limits: Limits
    tools: dict[str, str]  # tool name -> absolute path, only the tools present and allowed
    deadline: float  # the monotonic time the whole document must be read by
    tools_used: set[str]  # the external tools that ran for this document
    ocr_memo: Any  # the worker's readers/ocr/memo.OcrMemo (None: none)
    state: ReadState  # the document's reading state, shared by its embedded documents

    def time_left(self) -> float:
        """Seconds until ``deadline`` (at least 0.1)."""
        ...

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
