"""The reader registry and the one function that runs a reader on a document.

Readers are declared as data (:class:`bastion.readers.base.Reader`), one ``READER`` in each
family's module; :data:`MODULES` names those modules in the registry's order, read top to
bottom: the first reader that accepts the MIME type wins, then the first that accepts the
extension.

The modules are imported when first needed.  :func:`registry` (also ``dispatch.REGISTRY``)
imports them all: the parent, which selects among every reader and keys tasks on their
versions, and a worker reading an e-mail or an archive, whose members may be of any family.
:func:`by_name` imports only the family named: a worker handed only PDFs never imports the
Office, e-mail or archive readers (a worker's start is ≈ 30 ms of CPU shorter on such a run).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from .base import Context, Document, Reader, ReadResult, TextSink, cap_note, normalize_text
from .errors import CapReached, ReaderError, Unsupported

# reader name -> its module (relative to this package), in the registry's order
MODULES: dict[str, str] = {
    "pdf": "pdf.reader",
    "officecrypt": "office.officecrypt",  # before ooxml: an encrypted package under the default password
    "ooxml": "office.ooxml",
    "odf": "office.odf",
    "rtf": "text.rtf",
    "markup": "text.markup",
    "mail": "containers.mail",
    "outlook": "containers.outlook",
    "legacy": "office.legacy",
    "epub": "text.epub",
    "archive": "containers.archive",
    "delimited": "text.delimited",
    "ocr": "ocr.reader",
    "text": "text.plaintext",  # last: it also takes any text/* the others did not claim
}

_first: tuple[Reader, ...] = ()  # readers the embedding program put before the registry's


def _load(name: str) -> Reader:
    reader: Reader = importlib.import_module(f"{__package__}.{MODULES[name]}").READER
    if reader.name != name:
        raise RuntimeError(f"{MODULES[name]}.READER is named {reader.name!r}, not {name!r}")
    return reader


def registry() -> tuple[Reader, ...]:
    """Every reader, in order (every family's module imported, once)."""
    loaded = globals().get("REGISTRY")
    if loaded is None:
        loaded = _first + tuple(_load(name) for name in MODULES)
        globals()["REGISTRY"] = loaded
    return loaded


def __getattr__(name: str) -> Any:  # PEP 562: ``dispatch.REGISTRY`` loads the registry
    if name == "REGISTRY":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def put_first(readers: tuple[Reader, ...]) -> None:
    """Put ``readers`` before the registry's (a worker's extra readers: the tests' hostile
    ones), without loading the registry."""
    global _first
    _first = tuple(readers) + _first
    loaded = globals().get("REGISTRY")
    if loaded is not None:
        globals()["REGISTRY"] = tuple(readers) + loaded


def select(mime: str, name: str = "") -> Reader | None:
    """The reader for a MIME type (then the file name's extension), or None."""
    readers = registry()
    for reader in readers:
        if mime in reader.mimes:
            return reader
    for reader in readers:
        if reader.accepts(mime, name):
            return reader
    if mime.startswith("text/"):
        return by_name("text")
    return None


def reader_versions() -> dict[str, int]:
    return {r.name: r.version for r in registry()}


@dataclass
class Outcome:
    """The result of reading one document, before it reaches the store."""

    status: str  # ok | empty | unsupported | error
    text: str = ""
    extractor: str | None = None
    error: str | None = None
    error_kind: str | None = None
    limit: str | None = None  # the cap reached, when the text was cut short
    meta: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def by_name(name: str | None) -> Reader | None:
    """The registry's reader of that name (the one the parent chose for a job); only its
    module is imported, unless the whole registry already is."""
    loaded = globals().get("REGISTRY")
    for reader in _first if loaded is None else loaded:
        if reader.name == name:
            return reader
    if loaded is not None or name not in MODULES:
        return None
    return _load(name)


def read_document(doc: Document, ctx: Context, reader: Reader | None = None) -> Outcome:
    """Run ``reader`` (selected here when not given: the parent gives the one it chose);
    every way a reader can fail becomes an Outcome."""
    if reader is None:
        reader = select(doc.mime, doc.name)
    if reader is None:
        return Outcome("unsupported", extractor=None, error=f"no reader for {doc.mime}")
    sink = TextSink(ctx.limits.max_chars)
    limit = None
    result: ReadResult | None = None
    try:
        result = reader.read(doc, sink, ctx)
    except CapReached as cap:
        limit = cap.cap
        sink_text = sink.getvalue()
        note = cap_note(cap.cap, cap.detail)
        text = (sink_text if sink_text.endswith("\n") or not sink_text else sink_text + "\n")
        text += note + "\n"
        extractor = getattr(cap, "extractor", None) or reader.name
        meta = getattr(cap, "meta", None) or {}
        text = normalize_text(text)
        warnings = list(getattr(cap, "warnings", None) or [])
        return Outcome("ok", text, extractor, limit=limit,
                       meta=_languages(meta, text, warnings), warnings=warnings)
    except Unsupported as u:
        return Outcome("unsupported", extractor=reader.name, error=u.message)
    except ReaderError as e:
        return Outcome("error", extractor=getattr(e, "extractor", None) or reader.name,
                       error=e.message, error_kind=e.kind)
    text = normalize_text(sink.getvalue())
    status = "ok" if text.strip() else "empty"
    error = result.meta.pop("empty_reason", None) if status == "empty" else None
    # a cap a reader met and went on past (an embedded document nested too deep, noted in
    # its place in the text): the record names it, the text is not cut short
    limit = result.meta.pop("limit", None)
    return Outcome(status, text if status == "ok" else "", result.extractor, error=error,
                   limit=limit if isinstance(limit, str) and status == "ok" else None,
                   meta=(_languages(result.meta, text, result.warnings) if status == "ok"
                         else result.meta),
                   warnings=result.warnings)


def _languages(meta: dict[str, Any], text: str, warnings: list[str]) -> dict[str, Any]:
    """``meta`` with the main languages of every reader's text (readers/text/langid.py);
    none, and a warning, when the model does not fit the worker's memory cap."""
    from .text import langid

    try:
        return {**meta, "languages": langid.main_languages(text)}
    except langid.Unavailable as e:
        warnings.append(str(e))
        return meta


def read_nested(ctx: Context, data: bytes, name: str, sink: TextSink) -> str:
    """Read an embedded document into ``sink``; its extractor.  The one mechanism for e-mail
    attachments and archive members: :func:`bastion.readers.containers.nested.read_embedded`."""
    from .containers.nested import read_embedded

    return read_embedded(ctx, data, name, sink).extractor
