"""Documents inside documents: the one mechanism for archive members and e-mail attachments.

A container reader hands each embedded document to :func:`read_embedded` (an e-mail's
attachments arrive through ``ctx.read_nested``, which calls it too).  It detects the bytes'
type with :func:`bastion.readers.detect.detect_bytes`, selects a reader from the registry and runs it
one level deeper, under per-document budgets that every level shares:

* ``Limits.max_depth``: how deep documents may nest inside the walked file (the walked file is
  depth 0, a member of it depth 1).  A document past it is not read (``CapReached("max_depth")``);
* ``Limits.max_unpacked_bytes``: the bytes all archives of one document may decompress,
  charged by :class:`Unpacked` as the decompressors produce them.

:class:`Members` is what one archive keeps while it reads its members: their counts by outcome
(``ok``, ``unsupported``, ``error``, ``empty``, and ``limit`` for a member a cap stopped), the
header line that names each member in the text, and the caps reached along the way, so the
archive's record carries ``limit`` even when it went on past a member the cap stopped.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from ..base import Context, Document, ReadResult, TextSink
from ..errors import CapReached, ReaderError, Unsupported

if TYPE_CHECKING:
    from ..base import Reader

# Caps that end the whole document when a member reaches them: the budget is spent for every
# member after it too.  Any other cap (depth, one member's size or ratio, an inner archive's
# member count) stops that member only; the archive goes on and reports the cap at its end.
DOCUMENT_CAPS = frozenset({"max_chars", "max_unpacked_bytes", "deadline_s"})

RATIO_GRACE = 1 << 20  # bytes a stream may produce before the compression-ratio cap applies
DEADLINE_RESERVE = 0.1  # share of the document's deadline kept back: no new member after it
MIN_RESERVE_S = 2.0


def _nesting(ctx: Context) -> None:
    """Start the document's nesting clock (its first embedded document, or archive): the
    time budget the deadline reserve is a share of (``ReadState.nesting_budget_s``)."""
    state = ctx.state
    if state.nesting_started is None:
        state.nesting_started = time.monotonic()
        state.nesting_budget_s = ctx.deadline - state.nesting_started


def charge_unpacked(ctx: Context, n: int, where: str) -> None:
    """Count ``n`` decompressed bytes against the document's ``max_unpacked_bytes``."""
    _nesting(ctx)
    state = ctx.state
    state.unpacked += n
    cap = ctx.limits.max_unpacked_bytes
    if state.unpacked > cap:
        raise CapReached("max_unpacked_bytes", f"over {cap} bytes decompressed at {where}")


def check_deadline(ctx: Context) -> None:
    """Raise ``CapReached("deadline_s")`` when too little of the document's time is left to
    start another member (the worker would be killed mid-member, losing all the text)."""
    _nesting(ctx)
    budget = ctx.state.nesting_budget_s
    if budget is None:
        return
    reserve = max(MIN_RESERVE_S, DEADLINE_RESERVE * budget)
    if ctx.deadline - time.monotonic() < reserve:
        raise CapReached("deadline_s", f"stopped with {reserve:.0f} s of the deadline left")


class Ratio:
    """The compression-ratio cap on one stream: ``check(produced, consumed)`` after each chunk."""

    __slots__ = ("max_ratio", "where")

    def __init__(self, ctx: Context, where: str) -> None:
        self.max_ratio = ctx.limits.max_compression_ratio
        self.where = where

    def check(self, produced: int, consumed: int) -> None:
        if produced > RATIO_GRACE and produced > self.max_ratio * max(consumed, 1):
            raise CapReached(
                "max_compression_ratio",
                f"{self.where} over {self.max_ratio:g}:1 ({produced} bytes from {consumed})",
            )


def select_for(ctx: Context, data: bytes, name: str) -> tuple[str, "Reader | None"]:
    """The type of an embedded document and its reader, chosen by the context's registry
    (``ctx.select``: the registry is not imported here, which would close an import circle
    through every reader that nests)."""
    from ..detect import detect_bytes

    mime = detect_bytes(data, name)
    return mime, ctx.select(mime, name)


def read_embedded(ctx: Context, data: bytes, name: str, sink: TextSink, *,
                  deeper: bool = True) -> ReadResult:
    """Read an embedded document into ``sink`` one level deeper; the reader's result.

    Raises what a reader raises: :class:`Unsupported`, :class:`ReaderError`, and
    :class:`CapReached` (``max_depth`` when the document sits deeper than the cap allows).
    ``deeper=False`` reads a document that replaces its container rather than sitting in it
    (a decrypted Office file) at the same depth.
    """
    state = ctx.state
    depth = state.depth
    if deeper and depth >= ctx.limits.max_depth:
        raise CapReached("max_depth", f"{name} nested deeper than {ctx.limits.max_depth}")
    _nesting(ctx)
    mime, reader = select_for(ctx, data, name)
    if reader is None:
        raise Unsupported(f"no reader for {mime}")
    state.depth = depth + (1 if deeper else 0)
    try:
        result = reader.read(Document(data, name, mime), sink, ctx)
    finally:
        state.depth = depth
    if deeper:  # its own metadata, kept under its path for the walked file's sidecar
        from ..metadata import note_embedded

        prefix = state.member_prefix
        inner = prefix[:-2] if prefix.endswith("!/") else ""
        label = inner if inner.rsplit("/", 1)[-1] == name else prefix + name
        note_embedded(ctx, label, result.metadata)
    note_ocr(ctx, result)
    return result


def note_ocr(ctx: Context, result: ReadResult) -> None:
    """Keep an embedded document's OCR facts in the reading state, for the walked file's
    verdict (:func:`bastion.readers.dispatch.read_document` adds them): the packs its reading
    used, those missing, and the condition on the packs that keys it (``ocr_packs``), so that
    installing a pack re-reads the archive or e-mail whose scan could use it, as it re-reads
    the scan alone."""
    state = ctx.state
    state.ocr_languages.update(result.ocr_languages)
    state.ocr_missing.update(result.ocr_missing)
    if result.ocr_packs is not None:
        state.ocr_packs.update(result.ocr_packs)


def printable(name: str) -> str:
    """A member path as it may appear on one line of text: control characters escaped.  A
    member path is data: never used to open a file."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256
                   else f"\\u{ord(c):04x}" for c in name)


def line_out(sink: TextSink, line: str) -> None:
    """One line of bastion's own (a member's header, an attachment's) into ``sink``: the line
    and a line break; a paragraph of its own in the Markdown."""
    if not sink.structured:
        sink.write(line + "\n")
        return
    from ..render.events import Paragraph

    sink.open(Paragraph())
    sink.write(line)
    sink.close()
    sink.layout("\n")


def _lines_out(sink: TextSink, text: str) -> None:
    """Lines of bastion's own (``line\\n`` each), as :func:`line_out` writes them."""
    if not sink.structured:
        sink.write(text)
        return
    for line in text.splitlines():
        line_out(sink, line)


def _text_out(sink: TextSink, sub: TextSink, text: str) -> None:
    """An embedded document's text (read into ``sub``), ending with a line break."""
    shown = text if text.endswith("\n") or not text else text + "\n"
    sink.include(sub, shown)


def header(path: str, note: str = "") -> str:
    """The line that opens a member's text: ``=== member: dir/a.txt ===``; a member that gave
    no text says why: ``=== member: b.bin [unsupported: no reader for …] ===``."""
    extra = f" [{printable(note)}]" if note else ""
    return f"=== member: {printable(path)}{extra} ===\n"


class Members:
    """One archive's members as they are read: counts by outcome, text, deferred caps.

    Lines for members without text wait until a member gives text, so an archive none of whose
    members could be read leaves no text and becomes ``unsupported``/``error``/``empty``
    (:meth:`finish`).
    """

    def __init__(self, ctx: Context, sink: TextSink, prefix: str = "") -> None:
        self.ctx = ctx
        self.sink = sink
        self.prefix = prefix  # the archive's own path inside the walked file, e.g. "a.zip!/"
        self.counts = {"ok": 0, "unsupported": 0, "error": 0, "empty": 0}
        self.seen = 0
        self.caps: list[CapReached] = []
        self.first_error: ReaderError | None = None
        self.first_unsupported: str | None = None
        self._pending: list[str] = []
        self.extractors: set[str] = set()

    def _count(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def _emit(self, line: str) -> None:
        if self.counts["ok"]:
            _lines_out(self.sink, line)
        else:
            self._pending.append(line)

    def _flush_pending(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            _lines_out(self.sink, "".join(pending))

    def next_member(self, path: str) -> None:
        """Called before each member is read: the member-count and deadline caps."""
        check_deadline(self.ctx)
        if self.seen >= self.ctx.limits.max_members:
            raise CapReached("max_members",
                             f"more than {self.ctx.limits.max_members} members at {path}")
        self.seen += 1

    def skip(self, path: str, status: str, note: str, kind: str = "corrupt") -> None:
        """A member not handed to a reader (encrypted, unsupported compression, damaged …);
        ``kind`` is the error kind of an ``error``, shown first in its line."""
        self._count(status)
        if status == "error":
            note = f"{kind}: {note}"
            if self.first_error is None:
                self.first_error = ReaderError(f"{path}: {note}", kind=kind)
        if status == "unsupported" and self.first_unsupported is None:
            self.first_unsupported = f"{path}: {note}"
        self._emit(header(self.prefix + path, f"{status}: {note}"))

    def capped(self, path: str, cap: CapReached) -> None:
        """A member a member-level cap stopped before it gave any text."""
        self._count("limit")
        self.caps.append(cap)
        self._emit(header(self.prefix + path, f"limit: {cap.cap}: {cap.detail}"))

    def read(self, path: str, data: bytes) -> None:
        """Detect and read one member's bytes, recursively; its text goes to the sink."""
        base = path.rstrip("/").rsplit("/", 1)[-1]
        room = max(self.sink.max_chars - self.sink.chars, 0)
        sub = self.sink.nested(room)
        inner_prefix = self.prefix + path + "!/"
        state = self.ctx.state
        saved = state.member_prefix
        state.member_prefix = inner_prefix
        try:
            result = read_embedded(self.ctx, data, base, sub)
        except CapReached as cap:
            self._capped_text(path, sub, cap)
            return
        except Unsupported as u:
            self.skip(path, "unsupported", u.message)
            return
        except ReaderError as e:
            self._count("error")
            if self.first_error is None:
                self.first_error = e
            self._emit(header(self.prefix + path, f"error: {e.kind}: {e.message}"))
            return
        finally:
            state.member_prefix = saved
        self._result(path, sub, result)

    def _result(self, path: str, sub: TextSink, result: ReadResult) -> None:
        text = sub.getvalue()
        inner = result.members
        if isinstance(inner, dict):  # an archive inside: its members count, not itself
            for key, n in inner.items():
                self._count(key, n)
            if text.strip():
                self._flush_pending()
                _text_out(self.sink, sub, text)
            return
        if not text.strip():
            self._count("empty")
            self._emit(header(self.prefix + path, "empty"))
            return
        self._count("ok")
        self.extractors.add(result.extractor)
        self._flush_pending()
        _lines_out(self.sink, header(self.prefix + path))
        _text_out(self.sink, sub, text)

    def _capped_text(self, path: str, sub: TextSink, cap: CapReached) -> None:
        text = sub.getvalue()
        inner = cap.result.members if cap.result is not None else None
        if isinstance(inner, dict):
            for key, n in inner.items():
                self._count(key, n)
        elif text.strip():
            self._count("ok")
        if text.strip():
            self._flush_pending()
            if not isinstance(inner, dict):
                _lines_out(self.sink, header(self.prefix + path))
            _text_out(self.sink, sub, text)
        elif not isinstance(inner, dict):
            self._count("limit")
            self._emit(header(self.prefix + path, f"limit: {cap.cap}: {cap.detail}"))
        if cap.cap in DOCUMENT_CAPS:
            raise cap
        self.caps.append(cap)
        if text.strip() and not isinstance(inner, dict):
            line_out(self.sink, f"[bastion: member truncated, {cap.cap} reached]")

    def members(self) -> dict[str, int]:
        """The members' counts by outcome (``limit`` only when a cap stopped one)."""
        return {k: v for k, v in self.counts.items() if v or k != "limit"}

    def finish(self, extractor: str) -> ReadResult:
        """The archive's result: ok when a member gave text (with the first deferred cap
        raised so the record names it), else the members' verdict."""
        full = ReadResult(extractor, members=self.members())
        if self.counts["ok"]:
            self._flush_pending()
            if self.caps:
                first = self.caps[0]
                raise CapReached(first.cap, first.detail, result=full)
            return full
        if self.caps:
            self._flush_pending()
            first = self.caps[0]
            raise CapReached(first.cap, first.detail, result=full)
        if self.first_error is not None:
            e = self.first_error
            raise type(e)(f"no member could be read; first: {e.message}", kind=e.kind)
        if self.first_unsupported is not None:
            raise Unsupported(f"no member could be read; first: {self.first_unsupported}")
        return replace(full, empty_reason="no member holds text" if self.seen
                       else "archive has no members")

    def stop(self, cap: CapReached, extractor: str) -> CapReached:
        """A document-level cap reached while reading this archive: the text so far is kept,
        with the counts so far."""
        self._flush_pending()
        cap.extractor = cap.extractor or extractor
        cap.result = replace(cap.result or ReadResult(""), members=self.members())
        return cap


def attachment(ctx: Context, sink: TextSink, line: str, data: bytes, name: str,
               caps: list[CapReached]) -> None:
    """Write an attachment (of an e-mail, an Outlook message): its ``line`` (``[attachment:
    name (type, size)``, closed here with what became of it), then its text read through the
    readers.  A cap of the attachment alone (nesting depth, an archive's caps) ends only the
    attachment, noted in place and kept in ``caps`` for the message's record; a cap of the
    whole document is raised."""
    sub = sink.nested(max(sink.max_chars - sink.chars, 0))
    note = ""
    try:
        ctx.read_nested(data, name, sub)
    except CapReached as cap:
        line_out(sink, line + "]")
        _text_out(sink, sub, sub.getvalue())
        if cap.cap in DOCUMENT_CAPS:
            raise
        caps.append(cap)
        line_out(sink, f"[bastion: attachment not read to its end, {cap.cap} reached]")
        return
    except Unsupported as e:
        note = f": not read: {e.message}"
    except ReaderError as e:
        note = f": not read: {e.kind}: {e.message}"
    line_out(sink, line + note + "]")
    _text_out(sink, sub, sub.getvalue())
