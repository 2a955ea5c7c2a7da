"""The pure-Python batch: which documents may share a process, and the read that refuses a native part.

One document, one process (:mod:`bastion.readers.runtime.zygote`) has one exception: documents
whose reader runs Python alone — the interpreter's own code and its built-in C modules
(``_sre``, ``binascii``, ``_codecs``, ``_json``, ``unicodedata``), charset_normalizer (Python,
compiled by mypyc) and the language model's arithmetic (numpy), never a parser library of a
file format (PDFium, tesseract, 7-Zip, zlib, expat, Pillow, libxml2) — share a process for at
most :data:`BATCH_DOCS` documents in a row: plain text (``text``), HTML through
:mod:`html.parser` (``markup``) and e-mail through the :mod:`email` package (``mail``).

Each document sent to such a shared process is *pure*: its read context reads an embedded
document (an e-mail's attachment) only when the reader chosen for it is one of
:data:`PURE_READERS` too.  For any other (a PDF, an image, an archive, an Office file) it
raises :class:`OwnProcess` once the part's type is known and before any reader sees it; the
process answers that this document needs a process of its own, and the pool sends it again,
alone, to a fresh one (:mod:`bastion.readers.runtime.pool`).  docs/security.md says what the
batch costs in isolation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..base import Context, TextSink

# the readers whose documents may share a process (the parent decides, on the job's reader)
PURE_READERS = frozenset({"text", "markup", "mail"})
# documents one shared process reads at most: what a compromised decoder of that Python code could
# see of the documents after it (docs/security.md), against a fork, a sandbox and the copy-on-write
# faults of a warm interpreter shared by fewer documents (docs/performance.md: 64 -> 256 cut the
# workers' CPU for plain texts by about a quarter)
BATCH_DOCS = 256


class OwnProcess(BaseException):
    """Raised where a pure document would reach a reader that is not pure: the document is
    read again in a process of its own.  A ``BaseException``, so that no reader's ``except
    Exception`` makes a verdict of it; :func:`bastion.readers.runtime.workermain.handle`
    answers it."""


def pure_nested(ctx: "Context", data: bytes, name: str, sink: "TextSink") -> str:
    """Read an embedded document of a pure document: through the registry as usual when its
    reader is pure (or there is none: ``Unsupported``), else :class:`OwnProcess`.  Choosing
    the reader reads the part's first bytes in Python (:func:`bastion.readers.detect.
    detect_bytes`), nothing more."""
    from ..containers.nested import select_for
    from ..dispatch import read_nested

    _, reader = select_for(ctx, data, name)
    if reader is not None and reader.name not in PURE_READERS:
        raise OwnProcess(reader.name)
    return read_nested(ctx, data, name, sink)
