"""E-mail (RFC 822 / MIME): headers, the body, then one line per attachment with its text.

Parsed with :class:`email.parser.BytesParser` and ``email.policy.default``.  Output:

* ``From:``, ``To:``, ``Cc:``, ``Date:``, ``Subject:`` lines (those present; encoded words
  decoded, folded lines joined), a blank line;
* the body: the ``text/plain`` part :meth:`~email.message.EmailMessage.get_body` picks, else
  the HTML one through :func:`bastion.readers.text.markup.html_to_text`.  Transfer encodings are undone;
  the part's bytes are decoded by :func:`bastion.readers.text.textcodec.choose` with the part's
  ``charset=`` as the declared charset (BOM, NUL pattern, strict UTF-8, the declared charset
  if the bytes decode with it, the detector, windows-1252);
* every other leaf part, other than the alternative renderings of a body, as
  ``[attachment: name (mime, N bytes)]`` followed by its text, read through
  ``ctx.read_nested``; when that fails the line says why (``: not read: …``).  An attached
  ``message/rfc822`` is rendered the same way as the outer message, up to
  :data:`MAX_DEPTH` messages deep.

The parser's defects (a missing boundary, bad base64, …) become ``warnings``; a message with
defects still yields its text.  Extractor ``email``; ``meta`` has ``subject`` and
``attachments``, and ``metadata`` (:func:`message_metadata`): From as the authors, Date as
``created``, Subject as title and subject, Content-Language, and the fields ``from``, ``to``,
``cc``, ``bcc``, ``reply_to``, ``message_id``, ``in_reply_to`` and ``date`` as written.
"""

from __future__ import annotations

import mimetypes
from dataclasses import replace
from typing import TYPE_CHECKING, Any

# The email package is imported where an e-mail is read: ~11 ms that every run's parent (which
# only plans) and every worker's start would pay otherwise.
if TYPE_CHECKING:
    from email.message import Message

from ..base import NESTED_LIBRARIES, NESTED_TOOLS, Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument, ReaderError, Unsupported
from ..text import textcodec
from ..text.markup import html_to_text

if TYPE_CHECKING:
    from ..metadata import DocMeta

HEADERS = ("From", "To", "Cc", "Date", "Subject")
MAX_DEPTH = 3  # attached messages inside attached messages


class _State:
    """What one read collects besides text."""

    def __init__(self, ctx: Context, sink: TextSink) -> None:
        self.ctx = ctx
        self.sink = sink
        self.warnings: list[str] = []
        self.attachments = 0
        self.caps: list[CapReached] = []  # attachment-level caps, raised after the message

    def defects(self, part: Message) -> None:
        for defect in getattr(part, "defects", ()):
            note = f"e-mail defect: {type(defect).__name__}"
            if note not in self.warnings:
                self.warnings.append(note)


def _header(msg: Message, name: str) -> str:
    """A header's decoded value on one line ('' if absent); the raw value if it won't parse."""
    try:
        values = msg.get_all(name) or []
        text = ", ".join(str(v) for v in values)
    except Exception:  # noqa: BLE001 - a malformed header must not lose the message
        text = ", ".join(v for k, v in msg.raw_items() if k.lower() == name.lower())
    return " ".join(text.split())


def decode_payload(payload: bytes, charset: str | None) -> str:
    """Text of a part's decoded bytes, ``charset`` being the part's declared one."""
    if payload.isascii() and b"\x1b" not in payload and 0 not in payload:
        return payload.decode("ascii")
    return textcodec.decode(payload, charset)[0]


def _payload(part: Message) -> bytes:
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _leaves(msg: Message) -> list[tuple[Message, bool]]:
    """Leaf parts in order, each with whether it lies inside a multipart/alternative.
    Iterative; does not enter attached messages."""
    from email.message import Message

    out: list[tuple[Message, bool]] = []
    todo: list[tuple[Message, bool]] = [(msg, False)]
    while todo:
        part, in_alt = todo.pop()
        if part.is_multipart() and part.get_content_maintype() == "multipart":
            alt = in_alt or part.get_content_subtype() == "alternative"
            payload = part.get_payload()
            if isinstance(payload, list):
                todo.extend((p, alt) for p in reversed(payload) if isinstance(p, Message))
        else:
            out.append((part, in_alt))
    return out


def _write_message(msg: Message, state: _State, depth: int) -> str:
    """Headers, body and attachments of one message; returns its subject."""
    from email.message import EmailMessage

    sink = state.sink
    state.defects(msg)
    lines = [f"{name}: {value}" for name in HEADERS if (value := _header(msg, name))]
    header_lines(sink, lines)
    try:
        body = msg.get_body(preferencelist=("plain", "html")) if isinstance(
            msg, EmailMessage) else None
    except Exception:  # noqa: BLE001 - a malformed structure: no body, parts listed below
        body = None
    if body is not None:
        state.defects(body)
        text = decode_payload(_payload(body), body.get_content_charset())
        if body.get_content_subtype() == "html":
            html_to_text(text, sink, state.ctx.limits)
        elif sink.structured and _html_body(msg, body, sink, state, text):
            pass  # the text body in the text, its HTML alternative's structure in the Markdown
        else:
            sink.write(text if text.endswith("\n") or not text else text + "\n")
    for part, in_alt in _leaves(msg):
        if part is body:
            continue
        state.defects(part)
        if in_alt and part.get_content_maintype() == "text" and not _is_named(part):
            continue  # another rendering of the body
        if body is not None and _body_part(part):
            _write_text(part, state)  # more of the body (plain and HTML side by side in a
            continue                  # multipart/mixed, a list's footer): not an attachment
        _write_attachment(part, state, depth)
    return _header(msg, "Subject")


def header_lines(sink: TextSink, lines: list[str]) -> None:
    """A message's header lines (``From: …``), then a blank line: one paragraph, a line
    break between the headers."""
    if not lines:
        return
    if not sink.structured:
        sink.write("\n".join(lines) + "\n\n")
        return
    from ..render.events import LineBreak, Paragraph

    sink.open(Paragraph())
    for i, line in enumerate(lines):
        if i:
            sink.layout("\n")
            sink.mark(LineBreak())
        sink.write(line)
    sink.close()
    sink.layout("\n\n")


def _html_body(msg: Message, body: Message, sink: TextSink, state: _State, text: str) -> bool:
    """For a structured sink: the text body ``text`` as the plain text shows it, and the
    message's HTML alternative of it (when it has one) as the Markdown, read into a sink of
    its own; False when there is no HTML alternative."""
    from email.message import EmailMessage

    try:
        rich = msg.get_body(preferencelist=("html",)) if isinstance(msg, EmailMessage) else None
    except Exception:  # noqa: BLE001 - a malformed structure: the text body alone
        rich = None
    if rich is None or rich is body:
        return False
    sub = sink.nested(max(sink.max_chars - sink.chars, 0))
    try:
        html_to_text(decode_payload(_payload(rich), rich.get_content_charset()), sub,
                     state.ctx.limits)
    except CapReached:
        pass  # its Markdown as far as it went (the text is the text body's)
    sink.include(sub, text if text.endswith("\n") or not text else text + "\n")
    return True


def _write_text(part: Message, state: _State) -> None:
    """A text part of the body: its text (an HTML one's through the HTML reader)."""
    text = decode_payload(_payload(part), part.get_content_charset())
    if part.get_content_subtype() == "html":
        html_to_text(text, state.sink, state.ctx.limits)
    else:
        state.sink.write(text if text.endswith("\n") or not text else text + "\n")


def _body_part(part: Message) -> bool:
    """A plain or HTML text part with no name and not marked as an attachment: part of the
    message's body, as a mail client shows it inline."""
    return part.get_content_type() in ("text/plain", "text/html") and not _is_named(part)


def _addresses(msg: Message, name: str) -> list[str]:
    """A header's addresses, each as written (``Name <addr>``, or the address alone)."""
    from email.utils import getaddresses

    value = _header(msg, name)
    if not value:
        return []
    try:
        pairs = getaddresses([value])
    except Exception:  # noqa: BLE001 - a header the parser cannot split: kept whole
        return [value]
    # written out as shown, not re-encoded (formataddr would make a name RFC 2047 again)
    out = [f"{n} <{a}>" if n and a else (a or n) for n, a in pairs if a or n]
    return out or [value]


def message_metadata(msg: Message) -> "DocMeta":
    """What a message's own headers declare: From as its authors, Date as created, Subject,
    Content-Language; To, Cc, Bcc, Reply-To, Message-ID, In-Reply-To as its fields."""
    from ..metadata import DocMeta

    subject = _header(msg, "Subject")
    fields: dict[str, Any] = {key: _addresses(msg, name) for key, name in
              (("from", "From"), ("to", "To"), ("cc", "Cc"), ("bcc", "Bcc"),
               ("reply_to", "Reply-To"))}
    fields.update(message_id=_header(msg, "Message-ID"), in_reply_to=_header(msg, "In-Reply-To"),
                  date=_header(msg, "Date"))
    return DocMeta.make(title=subject, subject=subject, authors=fields["from"],
                        created=_header(msg, "Date") or None, date_kind="email",
                        language=_header(msg, "Content-Language") or None, fields=fields)


def _is_named(part: Message) -> bool:
    return part.get_filename() is not None or part.get_content_disposition() == "attachment"


def _filename(part: Message, mime: str) -> tuple[str, str]:
    """(name shown, name given to detection)."""
    try:
        name = part.get_filename()
    except Exception:  # noqa: BLE001 - a garbled RFC 2231 parameter
        name = None
    if name:
        name = " ".join(name.split())
        return name, name
    return "(unnamed)", "attachment" + (mimetypes.guess_extension(mime) or "")


def _write_attachment(part: Message, state: _State, depth: int) -> None:
    from email.message import Message

    sink = state.sink
    mime = part.get_content_type()
    shown, name = _filename(part, mime)
    state.attachments += 1
    if mime == "message/rfc822":
        inner = part.get_payload()
        inner = inner[0] if isinstance(inner, list) and inner else None
        if not isinstance(inner, Message):
            line_out(sink, f"[attachment: {shown} ({mime}): not read: empty]")
        elif depth >= MAX_DEPTH:
            line_out(sink, f"[attachment: {shown} ({mime}): not read: nested too deep]")
        else:
            line_out(sink, f"[attachment: {shown} ({mime})]")
            _write_message(inner, state, depth + 1)
        return
    data = _payload(part)
    line = f"[attachment: {shown} ({mime}, {len(data)} bytes)"
    from .nested import attachment

    attachment(state.ctx, sink, line, data, name, state.caps)


def line_out(sink: TextSink, line: str) -> None:
    """One line of bastion's own (an attachment's) as a paragraph of its own."""
    from .nested import line_out as out

    out(sink, line)


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    from email import policy
    from email.parser import BytesParser

    state = _State(ctx, sink)
    own = ReadResult("")
    try:
        msg = BytesParser(policy=policy.default).parsebytes(doc.data)
        own = ReadResult("", metadata=message_metadata(msg))
        subject = _write_message(msg, state, 0)
    except CapReached as cap:
        cap.extractor = cap.extractor or "email"
        cap.put_over(own)
        raise
    except (ReaderError, Unsupported, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - the email package on hostile structure
        raise CorruptDocument(f"e-mail could not be parsed: {type(e).__name__}: {e}") from None
    details: dict[str, Any] = {"attachments": state.attachments}
    if subject:
        details["subject"] = subject
    result = ReadResult("email", metadata=replace(own.metadata, attachments=state.attachments)
                        if own.metadata is not None else None, details=details)
    if state.caps:
        first = state.caps[0]
        raise CapReached(first.cap, first.detail, result=result)
    return replace(result, warnings=tuple(state.warnings))


READER = Reader(
    name="mail",
    version=4,
    mimes=("message/rfc822",),
    extensions=(".eml",),
    # Attachments go through the other readers, so the mail reader declares their tools and
    # settings too: a scanned attachment is OCRed when tesseract is here, and installing it
    # re-tries the e-mails whose attachments needed it.
    tools=NESTED_TOOLS,
    uses_tool_deadline=True,
    settings=("pdf_engines", "max_pages", "ocr_max_pages", "ocr_dpi", "max_member_bytes",
              "max_xml_bytes", "max_depth", "max_members", "max_unpacked_bytes",
              "max_compression_ratio", "ocr_languages"),
    read=read,
    libraries=NESTED_LIBRARIES,
)
