"""Outlook messages (``.msg``, [MS-OXMSG]): headers, body and attachments, as for ``.eml``.

A ``.msg`` is an OLE2 compound file (opened with ``olefile``) whose MAPI properties are streams
named ``__substg1.0_<tag><type>`` (strings ``001F`` UTF-16LE or ``001E`` 8-bit in the message's
code page, binary ``0102``) plus fixed-size values in ``__properties_version1.0``.  Output, in
the e-mail reader's shape (docs/readers/text-formats.md):

* ``From:`` (sender name and SMTP address), ``To:``, ``Cc:``, ``Date:`` (the submit time, else
  the delivery time, as RFC 5322 in UTC), ``Subject:``, a blank line;
* the body: ``PR_BODY`` (plain text), else ``PR_HTML`` through the HTML reader, else the
  compressed RTF body (``PR_RTF_COMPRESSED``, decompressed with ``compressed-rtf`` (MIT), the
  [MS-OXRTFCP] algorithm) through the RTF reader;
* each attachment as ``[attachment: name (mime, N bytes)]`` then its text, read through
  ``ctx.read_nested`` like an e-mail's (a failure says why: ``: not read: …``); an attached
  message (``PR_ATTACH_DATA_OBJ`` storage) is rendered the same way as the outer one, up to
  ``Limits.max_depth`` levels.

Extractor ``msg``; ``meta`` has ``subject`` and ``attachments``.  No GPL code: ``extract-msg``
is GPL and is not used.
"""

from __future__ import annotations

import struct
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

from ..base import NESTED_LIBRARIES, NESTED_TOOLS, Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, CorruptDocument, ReaderError, Unsupported
from ..metadata import DocMeta
from ..text import textcodec
from ..text.markup import html_to_text, prescan
from .nested import line_out

MSG = "application/vnd.ms-outlook"

PT_STRING8 = 0x001E
PT_UNICODE = 0x001F
PT_BINARY = 0x0102
PT_OBJECT = 0x000D
PT_LONG = 0x0003
PT_SYSTIME = 0x0040

PR_SUBJECT = 0x0037
PR_CLIENT_SUBMIT_TIME = 0x0039
PR_DISPLAY_TO = 0x0E04
PR_DISPLAY_CC = 0x0E03
PR_MESSAGE_DELIVERY_TIME = 0x0E06
PR_BODY = 0x1000
PR_RTF_COMPRESSED = 0x1009
PR_HTML = 0x1013
PR_SENDER_NAME = 0x0C1A
PR_SENDER_EMAIL = 0x0C1F
PR_SENDER_SMTP = 0x5D01
PR_SENT_REPR_SMTP = 0x5D02
PR_ATTACH_DATA = 0x3701
PR_ATTACH_FILENAME = 0x3704
PR_ATTACH_LONG_FILENAME = 0x3707
PR_ATTACH_MIME_TAG = 0x370E
PR_DISPLAY_NAME = 0x3001
PR_INTERNET_CPID = 0x3FDE
PR_MESSAGE_CODEPAGE = 0x3FFD
PR_INTERNET_MESSAGE_ID = 0x1035

_ATTACH = "__attach_version1.0_#"


class _Msg:
    """The properties of one message: the root storage or an attached message's storage."""

    def __init__(self, ole, prefix: str, top: bool) -> None:
        self.ole = ole
        self.prefix = prefix  # "" or "__attach_version1.0_#00000000/__substg1.0_3701000D/"
        self.fixed = _fixed_props(ole, prefix, 32 if top else 24)
        cp = self.fixed.get(PR_INTERNET_CPID) or self.fixed.get(PR_MESSAGE_CODEPAGE)
        self.codec = _codec(cp)

    def raw(self, tag: int, ptype: int, prefix: str | None = None) -> bytes | None:
        name = f"{self.prefix if prefix is None else prefix}__substg1.0_{tag:04X}{ptype:04X}"
        if not self.ole.exists(name):
            return None
        try:
            with self.ole.openstream(name) as f:
                return f.read()
        except Exception as e:  # noqa: BLE001 - a damaged sector chain
            raise CorruptDocument(f"damaged .msg stream {name}: {type(e).__name__}") from None

    def string(self, tag: int, prefix: str | None = None) -> str:
        data = self.raw(tag, PT_UNICODE, prefix)
        if data is not None:
            return data.decode("utf-16-le", "replace").rstrip("\x00")
        data = self.raw(tag, PT_STRING8, prefix)
        if data is not None:
            return data.decode(self.codec, "replace").rstrip("\x00")
        return ""


def _codec(cp: int | None) -> str:
    import codecs

    if cp in (None, 0, 1200):
        return "cp1252"
    for name in (f"cp{cp}", {65001: "utf-8", 20127: "ascii", 28591: "latin-1"}.get(cp, "")):
        if name:
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "cp1252"


def _fixed_props(ole, prefix: str, header: int) -> dict[int, int]:
    """Fixed-size property values (PT_LONG, PT_SYSTIME …) from ``__properties_version1.0``."""
    name = prefix + "__properties_version1.0"
    if not ole.exists(name):
        return {}
    try:
        with ole.openstream(name) as f:
            data = f.read()
    except Exception:  # noqa: BLE001 - the fixed properties are optional
        return {}
    out: dict[int, int] = {}
    for at in range(header, len(data) - 15, 16):
        tag, _flags, value = struct.unpack_from("<IIQ", data, at)
        ptype, pid = tag & 0xFFFF, tag >> 16
        if ptype == PT_SYSTIME:
            out[pid] = value
        elif ptype == PT_LONG:
            out[pid] = value & 0xFFFFFFFF
    return out


def _filetime(value: int | None) -> str:
    if not value:
        return ""
    try:
        dt = datetime(1601, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=value // 10)
    except OverflowError:
        return ""
    return format_datetime(dt)


def _one_line(s: str) -> str:
    return " ".join(s.replace("\x00", "").split())


def _headers(msg: _Msg) -> list[str]:
    return [f"{k}: {v}" for k, v in _header_values(msg) if v]


def _header_values(msg: _Msg) -> tuple[tuple[str, str], ...]:
    sender = _one_line(msg.string(PR_SENDER_NAME))
    address = _one_line(msg.string(PR_SENDER_SMTP) or msg.string(PR_SENT_REPR_SMTP))
    if not address:
        raw = _one_line(msg.string(PR_SENDER_EMAIL))
        address = raw if "@" in raw else ""
    if sender and address and address not in sender:
        sender = f"{sender} <{address}>"
    sender = sender or address
    date = _filetime(msg.fixed.get(PR_CLIENT_SUBMIT_TIME) or
                     msg.fixed.get(PR_MESSAGE_DELIVERY_TIME))
    return (("From", sender), ("To", _one_line(msg.string(PR_DISPLAY_TO))),
            ("Cc", _one_line(msg.string(PR_DISPLAY_CC))), ("Date", date),
            ("Subject", _one_line(msg.string(PR_SUBJECT))))


def message_metadata(msg: _Msg) -> DocMeta:
    """The message's own properties: the sender as its author, the submit (else delivery)
    time as ``created``, the subject; To and Cc as Outlook shows them (``;``-separated
    display names), the Internet Message-ID, as its fields."""
    values = dict(_header_values(msg))
    split = (lambda v: [x for x in v.split(";")] if v else [])
    subject = values["Subject"] or None
    return DocMeta.make(
        title=subject, subject=subject, authors=[values["From"]] if values["From"] else [],
        created=values["Date"] or None, date_kind="email",
        fields={"from": values["From"], "to": split(values["To"]), "cc": split(values["Cc"]),
                "date": values["Date"],
                "message_id": _one_line(msg.string(PR_INTERNET_MESSAGE_ID))})


def _body(msg: _Msg, sink: TextSink, ctx: Context, warnings: list[str]) -> None:
    plain = msg.string(PR_BODY)
    if plain.strip():
        sink.write(plain if plain.endswith("\n") else plain + "\n")
        return
    html = msg.raw(PR_HTML, PT_BINARY)
    if html is None:
        text = msg.string(PR_HTML)
        if text.strip():
            html_to_text(text, sink, ctx.limits)
            return
    elif html.strip():
        # the body's own declaration first, then the message's code page
        declared = prescan(html) or textcodec.xml_declared(html) or msg.codec
        text, _ = textcodec.decode(html, declared)
        html_to_text(text, sink, ctx.limits)
        return
    rtf = msg.raw(PR_RTF_COMPRESSED, PT_BINARY)
    if rtf:
        _rtf_body(rtf, sink, ctx, warnings)


def _rtf_body(data: bytes, sink: TextSink, ctx: Context, warnings: list[str]) -> None:
    from compressed_rtf import decompress

    from ..text import rtf

    if len(data) < 16:
        warnings.append("compressed RTF body too short")
        return
    raw_size = struct.unpack_from("<I", data, 4)[0]
    if raw_size > ctx.limits.max_member_bytes:
        raise CapReached("max_member_bytes", f"compressed RTF body declares {raw_size} bytes")
    try:
        plain = decompress(data)
    except Exception as e:  # noqa: BLE001 - a damaged compressed stream
        warnings.append(f"compressed RTF body unreadable: {type(e).__name__}: {e}")
        return
    try:
        rtf.read(Document(plain, "body.rtf", "application/rtf"), sink, ctx)
    except CapReached:
        raise
    except ReaderError as e:
        warnings.append(f"RTF body unreadable: {e.message}")


class _State:
    def __init__(self, ole, ctx: Context, sink: TextSink) -> None:
        self.ole = ole
        self.ctx = ctx
        self.sink = sink
        self.warnings: list[str] = []
        self.attachments = 0
        self.caps: list[CapReached] = []


def _attachment_storages(ole, prefix: str) -> list[str]:
    names: set[str] = set()
    depth = prefix.count("/")
    for entry in ole.listdir(streams=True, storages=True):
        path = "/".join(entry)
        if not path.startswith(prefix):
            continue
        parts = entry[depth:]
        if parts and parts[0].startswith(_ATTACH):
            names.add(prefix + parts[0] + "/")
    return sorted(names)


def _write_message(msg: _Msg, state: _State, level: int) -> str:
    sink = state.sink
    from .mail import header_lines

    header_lines(sink, _headers(msg))
    _body(msg, sink, state.ctx, state.warnings)
    for storage in _attachment_storages(state.ole, msg.prefix):
        _write_attachment(msg, storage, state, level)
    return _one_line(msg.string(PR_SUBJECT))


def _write_attachment(msg: _Msg, storage: str, state: _State, level: int) -> None:
    sink = state.sink
    state.attachments += 1
    shown = _one_line(msg.string(PR_ATTACH_LONG_FILENAME, storage) or
                      msg.string(PR_ATTACH_FILENAME, storage) or
                      msg.string(PR_DISPLAY_NAME, storage)) or "(unnamed)"
    mime = _one_line(msg.string(PR_ATTACH_MIME_TAG, storage)) or "application/octet-stream"
    inner = f"{storage}__substg1.0_{PR_ATTACH_DATA:04X}{PT_OBJECT:04X}/"
    if state.ole.exists(inner.rstrip("/")) and state.ole.exists(inner + "__properties_version1.0"):
        depth = state.ctx.state.depth + level + 1
        if depth > state.ctx.limits.max_depth:
            cap = CapReached("max_depth", f"attached message {shown} nested deeper than "
                                          f"{state.ctx.limits.max_depth}")
            state.caps.append(cap)
            line_out(sink, f"[attachment: {shown} (message/rfc822): not read: limit: max_depth]")
            return
        line_out(sink, f"[attachment: {shown} (message/rfc822)]")
        _write_message(_Msg(state.ole, inner, top=False), state, level + 1)
        return
    data = msg.raw(PR_ATTACH_DATA, PT_BINARY, storage)
    if data is None:
        line_out(sink, f"[attachment: {shown} ({mime}): not read: no data (a link or an OLE "
                       "object)]")
        return
    line = f"[attachment: {shown} ({mime}, {len(data)} bytes)"
    from .nested import attachment

    detect_name = shown if shown != "(unnamed)" else "attachment"
    attachment(state.ctx, sink, line, data, detect_name, state.caps)


def read_ole(ole, doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    """Read an opened OLE2 file that holds an Outlook message."""
    state = _State(ole, ctx, sink)
    own = DocMeta()
    try:
        top = _Msg(ole, "", top=True)
        own = message_metadata(top)
        subject = _write_message(top, state, 0)
    except CapReached as cap:
        cap.extractor = cap.extractor or "msg"
        cap.result = ReadResult("", details={"attachments": state.attachments}).over(cap.result)
        cap.with_metadata(own)
        raise
    except (ReaderError, Unsupported, MemoryError):
        raise
    except Exception as e:  # noqa: BLE001 - a hostile structure
        raise CorruptDocument(f".msg could not be read: {type(e).__name__}: {e}") from None
    details: dict[str, Any] = {"attachments": state.attachments}
    if subject:
        details["subject"] = subject
    result = ReadResult("msg", details=details).with_metadata(
        own.merged(DocMeta(attachments=state.attachments)))
    if state.caps:
        first = state.caps[0]
        raise CapReached(first.cap, first.detail, result=result)
    return replace(result, warnings=tuple(state.warnings))


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    from ..office.ole import kind_of, open_ole

    ole = open_ole(doc.data)
    try:
        if kind_of(ole) != "msg":
            raise CorruptDocument("OLE2 file without Outlook message properties")
        return read_ole(ole, doc, sink, ctx)
    finally:
        ole.close()


READER = Reader(
    name="outlook",
    version=2,
    mimes=(MSG, "application/x-msg"),
    extensions=(".msg",),
    # attachments go through the other readers: their tools and settings are this reader's too
    tools=NESTED_TOOLS,
    uses_tool_deadline=True,
    settings=("max_depth", "max_parts", "max_member_bytes", "max_xml_bytes", "pdf_engines",
              "max_pages", "ocr_max_pages", "ocr_dpi", "max_unpacked_bytes", "max_members",
              "max_compression_ratio", "ocr_languages"),
    read=read,
    libraries=NESTED_LIBRARIES,
)
