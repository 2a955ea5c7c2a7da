"""The reader registry and the one function that runs a reader on a document.

Readers are declared as data (:class:`bastion.readers.base.Reader`), one ``READER`` in each
family's module; :data:`MODULES` names those modules in the registry's order, read top to
bottom: the first reader that accepts the MIME type wins, then the first that accepts the
extension.

The registry is a frozen value, :class:`Registry` (:data:`BUILTIN`: the modules' readers alone),
built once by what dispatches and passed in.  Its modules are imported when first needed, once
per process: :meth:`Registry.readers` imports them all (the parent, which keys tasks on every
reader's version); :meth:`Registry.select` and :meth:`Registry.by_name` only the family chosen,
so a worker handed only PDFs never imports the Office, e-mail or archive readers (a worker's
start is ≈ 30 ms of CPU shorter on such a run).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, replace
from typing import Iterable

from .base import (Context, Document, Limits, Reader, ReadResult, TextSink, cap_note,
                   normalize_text)
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

# What each reader takes (its READER's mimes and extensions), in the registry's order: choosing
# a reader imports only the chosen one's module, not every family's (the parent of
# `bastion text`).  tests/test_text_command.py checks it is what the modules declare.
SPECS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pdf": (
        ("application/pdf",),
        (".pdf",)),
    "officecrypt": (
        ("application/x-ooxml-encrypted",),
        ()),
    "ooxml": (
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",
         "application/vnd.openxmlformats-officedocument.wordprocessingml.template",
         "application/vnd.ms-word.document.macroEnabled.12",
         "application/vnd.ms-word.template.macroEnabled.12",
         "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
         "application/vnd.openxmlformats-officedocument.spreadsheetml.template",
         "application/vnd.ms-excel.sheet.macroEnabled.12",
         "application/vnd.ms-excel.template.macroEnabled.12",
         "application/vnd.openxmlformats-officedocument.presentationml.presentation",
         "application/vnd.openxmlformats-officedocument.presentationml.template",
         "application/vnd.openxmlformats-officedocument.presentationml.slideshow",
         "application/vnd.ms-powerpoint.presentation.macroEnabled.12",
         "application/vnd.ms-powerpoint.template.macroEnabled.12",
         "application/vnd.ms-powerpoint.slideshow.macroEnabled.12"),
        (".docx", ".docm", ".dotx", ".dotm", ".xlsx", ".xlsm", ".xltx", ".xltm", ".pptx",
         ".pptm", ".potx", ".potm", ".ppsx", ".ppsm")),
    "odf": (
        ("application/vnd.oasis.opendocument.text",
         "application/vnd.oasis.opendocument.text-template",
         "application/vnd.oasis.opendocument.text-flat-xml",
         "application/vnd.oasis.opendocument.spreadsheet",
         "application/vnd.oasis.opendocument.spreadsheet-template",
         "application/vnd.oasis.opendocument.spreadsheet-flat-xml",
         "application/vnd.oasis.opendocument.presentation",
         "application/vnd.oasis.opendocument.presentation-template",
         "application/vnd.oasis.opendocument.presentation-flat-xml"),
        (".odt", ".ods", ".odp", ".ott", ".ots", ".otp", ".fodt", ".fods", ".fodp")),
    "rtf": (
        ("application/rtf", "text/rtf"),
        (".rtf",)),
    "markup": (
        ("text/html", "application/xhtml+xml"),
        (".html", ".htm", ".xhtml")),
    "mail": (
        ("message/rfc822",),
        (".eml",)),
    "outlook": (
        ("application/vnd.ms-outlook", "application/x-msg"),
        (".msg",)),
    "legacy": (
        ("application/msword", "application/vnd.ms-excel", "application/vnd.ms-powerpoint",
         "application/x-ole-storage", "application/vnd.ms-word", "application/x-msexcel",
         "application/mspowerpoint"),
        (".doc", ".dot", ".xls", ".xlt", ".ppt", ".pot", ".pps")),
    "epub": (
        ("application/epub+zip",),
        (".epub",)),
    "archive": (
        ("application/zip", "application/x-tar", "application/gzip", "application/x-bzip2",
         "application/x-xz", "application/x-7z-compressed", "application/x-gzip",
         "application/x-gtar", "application/x-compressed-tar",
         "application/x-xz-compressed-tar", "application/x-bzip2-compressed-tar"),
        (".zip", ".tar", ".tgz", ".tar.gz", ".gz", ".bz2", ".xz", ".7z", ".tbz2", ".txz")),
    "delimited": (
        ("text/csv", "text/tab-separated-values"),
        (".csv", ".tsv", ".tab")),
    "ocr": (
        ("image/png", "image/jpeg", "image/tiff", "image/bmp", "image/gif", "image/webp"),
        (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp")),
    "text": (
        ("text/plain", "text/markdown", "text/x-python", "text/x-c", "text/x-shellscript",
         "application/json", "application/yaml", "application/toml", "application/xml",
         "text/xml", "application/sql", "application/x-pem-file", "image/svg+xml",
         "application/javascript", "text/javascript", "text/css"),
        (".txt", ".text", ".log", ".md", ".rst", ".json", ".yaml", ".yml", ".toml", ".xml",
         ".sql", ".svg", ".pem", ".py", ".c", ".h", ".js", ".css", ".sh")),
}

@functools.cache
def _load(name: str) -> Reader:
    """The READER of the registry's module ``name``, imported once per process."""
    reader: Reader = importlib.import_module(f"{__package__}.{MODULES[name]}").READER
    if reader.name != name:
        raise RuntimeError(f"{MODULES[name]}.READER is named {reader.name!r}, not {name!r}")
    return reader


@dataclass(frozen=True)
class Registry:
    """The readers, in the order they are chosen: ``first`` (an embedding program's own
    readers, put before the registry's: the tests' misbehaving ones), then :data:`MODULES`'s.

    Built once by whatever dispatches (a worker's main, the extract stage's plan, the API's
    :class:`~bastion.extractor.Extractor` and so ``bastion text``) and passed in, to the read
    context too (:class:`bastion.readers.runtime.context.LocalContext`): nothing is kept in a
    module global.  The modules' readers are imported when first needed (:meth:`by_name`,
    :meth:`select`: only the chosen family's; :meth:`readers`: every family's)."""

    first: tuple[Reader, ...] = ()

    @classmethod
    def with_modules(cls, modules: Iterable[str]) -> "Registry":
        """The registry with the ``READER`` of each of ``modules`` (import names) first."""
        return cls(tuple(importlib.import_module(m).READER for m in modules))

    def readers(self) -> tuple[Reader, ...]:
        """Every reader, in order (every family's module imported, once per process)."""
        return self.first + tuple(_load(name) for name in MODULES)

    def versions(self) -> dict[str, int]:
        return {r.name: r.version for r in self.readers()}

    def by_name(self, name: str | None) -> Reader | None:
        """The reader of that name (the one the parent chose for a job); only its module is
        imported."""
        for reader in self.first:
            if reader.name == name:
                return reader
        return _load(name) if name in MODULES else None

    def select(self, mime: str, name: str = "") -> Reader | None:
        """The reader for a MIME type (then the file name's extension), or None.  The choice
        is made on :data:`SPECS` (what each module's reader declares) and only the chosen
        reader's module is imported."""
        for reader in self.first:
            if mime in reader.mimes:
                return reader
        for reader_name, (mimes, _) in SPECS.items():
            if mime in mimes:
                return _load(reader_name)
        for reader in self.first:
            if reader.accepts(mime, name):
                return reader
        lower = name.lower()
        for reader_name, (_, extensions) in SPECS.items():
            if any(lower.endswith(ext) for ext in extensions):
                return _load(reader_name)
        if mime.startswith("text/"):
            return _load("text")
        return None


BUILTIN = Registry()  # the registry's own readers, nothing put first


def select(mime: str, name: str = "") -> Reader | None:
    """The built-in registry's reader for a MIME type (then the extension), or None."""
    return BUILTIN.select(mime, name)


@dataclass(frozen=True)
class Outcome:
    """The result of reading one document, before it reaches the store."""

    status: str  # ok | empty | unsupported | error
    text: str = ""
    extractor: str | None = None
    error: str | None = None
    error_kind: str | None = None
    limit: str | None = None  # the cap reached, when the text was cut short
    result: ReadResult | None = None  # the reader's result (none when it failed)
    warnings: tuple[str, ...] = ()
    markdown: str | None = None  # the Markdown rendering of the text (ok, when asked for)


def read_document(doc: Document, ctx: Context, reader: Reader | None = None, *,
                  markdown: bool = False) -> Outcome:
    """Run ``reader`` (selected by the context's registry when not given: the parent gives
    the one it chose); every way a reader can fail becomes an Outcome.  ``markdown``: render
    the Markdown of the same stream too (:class:`~bastion.readers.render.sink.MarkdownSink`;
    the plain text is the same either way)."""
    if reader is None:
        reader = ctx.select(doc.mime, doc.name)
    if reader is None:
        return Outcome("unsupported", extractor=None, error=f"no reader for {doc.mime}")
    sink = _sink(ctx.limits.max_chars, markdown)
    try:
        result = reader.read(doc, sink, ctx)
    except CapReached as cap:
        sink_text = sink.getvalue()
        note = cap_note(cap.cap, cap.detail)
        text = (sink_text if sink_text.endswith("\n") or not sink_text else sink_text + "\n")
        text += note + "\n"
        got = _with_embedded(cap.result or ReadResult(""), ctx)
        text = normalize_text(text)
        got, warnings = _languages(got, text, ctx.limits)
        return Outcome("ok", text, got.extractor or reader.name, limit=cap.cap, result=got,
                       warnings=warnings, markdown=_markdown(sink, note))
    except Unsupported as u:
        return Outcome("unsupported", extractor=reader.name, error=u.message)
    except ReaderError as e:
        return Outcome("error", extractor=getattr(e, "extractor", None) or reader.name,
                       error=e.message, error_kind=e.kind)
    result = _with_embedded(result, ctx)
    text = normalize_text(sink.getvalue())
    status = "ok" if text.strip() else "empty"
    error = result.empty_reason if status == "empty" else None
    # a cap a reader met and went on past (an embedded document nested too deep, noted in
    # its place in the text): the record names it, the text is not cut short
    limit = result.limit
    warnings = result.warnings
    if status == "ok":
        result, warnings = _languages(result, text, ctx.limits)
    return Outcome(status, text if status == "ok" else "", result.extractor, error=error,
                   limit=limit if status == "ok" else None, result=result, warnings=warnings,
                   markdown=_markdown(sink) if status == "ok" else None)


def _sink(max_chars: int, markdown: bool) -> TextSink:
    """The document's sink: plain text, or plain text and Markdown."""
    if not markdown:
        return TextSink(max_chars)
    from .render.sink import MarkdownSink

    return MarkdownSink(max_chars)


def _markdown(sink: TextSink, note: str | None = None) -> str | None:
    """The sink's Markdown in the store's normal form (with the cap's ``note`` at its end),
    None for a plain sink."""
    if not sink.structured:  # (the renderer is not imported by a plain read: a document's
        return None          # process forked from the worker would import it every time)
    from .render.sink import MarkdownSink

    assert isinstance(sink, MarkdownSink)
    if note is not None:
        sink.end_note(note)
    return normalize_text(sink.markdown())


def _languages(result: ReadResult, text: str,
               limits: Limits) -> tuple[ReadResult, tuple[str, ...]]:
    """``result`` with the main languages of every reader's text (readers/text/langid.py),
    and its warnings; none, and a warning more, when the model does not fit the worker's
    memory cap; ``result`` as it is when the caller asked for no languages
    (``limits.name_languages``)."""
    if not limits.name_languages:
        return result, result.warnings
    from .text import langid

    try:
        return replace(result, languages=langid.main_languages(text)), result.warnings
    except langid.Unavailable as e:
        return result, (*result.warnings, str(e))


def _with_embedded(result: ReadResult, ctx: Context) -> ReadResult:
    """``result`` with the metadata of the documents embedded in this one (gathered in the
    reading state by :func:`bastion.readers.metadata.note_embedded`) as ``embedded``, and
    their OCR facts (:func:`bastion.readers.containers.nested.note_ocr`) joined to its own."""
    state = ctx.state
    if state.embedded:
        result = replace(result, embedded=tuple(state.embedded))
        state.embedded.clear()
    if state.ocr_languages:
        result = replace(result, ocr_languages=tuple(sorted(
            set(result.ocr_languages) | state.ocr_languages)))
    if state.ocr_missing:
        result = replace(result, ocr_missing=tuple(sorted(
            set(result.ocr_missing) | state.ocr_missing)))
    if state.ocr_packs:
        result = replace(result, ocr_packs=dict(sorted(
            {**state.ocr_packs, **(result.ocr_packs or {})}.items())))
    state.ocr_languages, state.ocr_missing, state.ocr_packs = set(), set(), {}
    return result


def read_nested(ctx: Context, data: bytes, name: str, sink: TextSink) -> str:
    """Read an embedded document into ``sink``; its extractor.  The one mechanism for e-mail
    attachments and archive members: :func:`bastion.readers.containers.nested.read_embedded`."""
    from .containers.nested import read_embedded

    return read_embedded(ctx, data, name, sink).extractor
