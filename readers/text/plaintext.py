"""The text reader: ``text/*``, JSON, YAML, TOML, XML, SQL, SVG, PEM and source code.

The encoding is :func:`bastion.readers.text.textcodec.choose`'s (BOM, NUL pattern, strict UTF-8, an XML
declaration's ``encoding`` for XML, the detector, windows-1252), recorded as
``text:<encoding>`` and the result's ``encoding_source``.  The bytes are decoded a chunk at a time.
NUL bytes are removed by the store's normalisation, so a few stray NULs or a NUL-padded log
are text; binary masquerading as text (control characters beyond 2 %, or NULs scattered
through it; :func:`bastion.readers.text.textcodec.binary_reason`) is ``unsupported``.
"""

from __future__ import annotations

from . import textcodec
from ..base import Context, Document, Reader, ReadResult, TextSink
from ..errors import CapReached, Unsupported
from ..render.events import Code, Fragment

# Source code and data formats: their Markdown is the text as a fenced code block, with the
# language its info string names (by MIME type, then extension); text/markdown is Markdown
# already (its own text, as written); any other text is paragraphs, every character escaped.
_CODE_MIMES = {
    "text/x-python": "python", "text/x-c": "c", "text/x-shellscript": "sh",
    "application/json": "json", "application/yaml": "yaml", "application/toml": "toml",
    "application/xml": "xml", "text/xml": "xml", "application/sql": "sql",
    "application/x-pem-file": "", "image/svg+xml": "xml", "application/javascript": "js",
    "text/javascript": "js", "text/css": "css",
}
_CODE_EXTENSIONS = {
    ".py": "python", ".c": "c", ".h": "c", ".js": "js", ".css": "css", ".sh": "sh",
    ".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".xml": "xml",
    ".sql": "sql", ".svg": "xml", ".pem": "",
}
_MARKDOWN_EXTENSIONS = (".md", ".markdown")


def _kind(doc: Document) -> tuple[str, str]:
    """How the text is shown in Markdown: ("code", language), ("markdown", ""), ("text", "")."""
    name = doc.name.lower()
    if doc.mime == "text/markdown" or name.endswith(_MARKDOWN_EXTENSIONS):
        return "markdown", ""
    if doc.mime in _CODE_MIMES:
        return "code", _CODE_MIMES[doc.mime]
    ext = name[name.rfind("."):] if "." in name else ""
    if ext in _CODE_EXTENSIONS:
        return "code", _CODE_EXTENSIONS[ext]
    return "text", ""


def read(doc: Document, sink: TextSink, ctx: Context) -> ReadResult:
    head = doc.data[: 1 << 16]
    if not textcodec.looks_like_text(head):  # before any detector runs on binary bytes
        reason = textcodec.binary_reason(head.decode("latin-1")) or "control characters"
        raise Unsupported(f"binary content, not text ({doc.mime}): {reason}")
    choice = textcodec.choose(doc.data, textcodec.xml_declared(doc.data))
    extractor = f"text:{choice.codec}"
    kind, language = _kind(doc) if sink.structured else ("text", "")
    write = sink.layout if kind == "markdown" else sink.write
    if kind == "code":
        sink.open(Code(language))
    first = True
    try:
        try:
            for piece in textcodec.pieces(doc.data, choice):
                if first:
                    why = textcodec.binary_reason(piece)
                    if why is not None:
                        raise Unsupported(f"binary content, not text ({doc.mime}): {why}")
                    first = False
                write(piece)
        finally:
            if kind == "markdown":  # the Markdown is the text as far as it was written
                sink.mark(Fragment(sink.getvalue()))
            elif kind == "code":
                sink.close()
    except CapReached as cap:
        cap.extractor = cap.extractor or extractor
        cap.keep(ReadResult(extractor, encoding_source=choice.source))
        raise
    return ReadResult(extractor, encoding_source=choice.source,
                      warnings=tuple(textcodec.warnings(choice)))


READER = Reader(
    name="text",
    version=2,
    mimes=(
        "text/plain", "text/markdown", "text/x-python", "text/x-c", "text/x-shellscript",
        "application/json", "application/yaml", "application/toml", "application/xml",
        "text/xml", "application/sql", "application/x-pem-file", "image/svg+xml",
        "application/javascript", "text/javascript", "text/css",
    ),
    extensions=(".txt", ".text", ".log", ".md", ".rst", ".json", ".yaml", ".yml", ".toml",
                ".xml", ".sql", ".svg", ".pem", ".py", ".c", ".h", ".js", ".css", ".sh"),
    read=read,
    libraries=("charset-normalizer",),
)
