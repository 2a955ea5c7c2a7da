"""The errors a reader raises, and the fixed vocabulary of ``error_kind``.

Exception tree (each class carries the ``kind`` written to the record)::

    ReaderError                 base; kind "error"
    ├── CorruptDocument         kind "corrupt"     the bytes are not a valid document
    ├── EncryptedDocument       kind "encrypted"   a password is needed
    ├── ToolFailed              kind "tool_failed" an external tool exited badly
    ├── Unsupported             status "unsupported", not "error": no reader or tool here
    └── ChangedSinceWalk        kind "changed"     the file's bytes no longer match the walk's sha256

    CapReached                  not an error: a budget was reached; the text read so far is kept
                                and ends with one line naming the cap (see ``TextSink``)

The runtime adds the kinds it detects from outside the reader: ``timeout``, ``memory``,
``crash``, ``output_limit``, ``internal``, ``worker`` (an answer the parent refused); a cluster run (``tasks/cluster/run.py``) adds ``cluster``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .metadata import DocMeta
from .result import ReadResult

# Every ``error_kind`` a record may carry.  ``docs/records.md`` documents each one.
ERROR_KINDS: tuple[str, ...] = (
    "corrupt",
    "encrypted",
    "tool_failed",
    "changed",
    "unreadable",
    "timeout",
    "memory",
    "crash",
    "output_limit",
    "internal",
    "worker",
    "cluster",
    "error",
)


class ReaderError(Exception):
    """A document could not be read.  One ``error`` record; the run goes on."""

    kind = "error"

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        if kind is not None:
            self.kind = kind

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.kind


class CorruptDocument(ReaderError):
    kind = "corrupt"


class EncryptedDocument(ReaderError):
    kind = "encrypted"


class ToolFailed(ReaderError):
    kind = "tool_failed"


class ChangedSinceWalk(ReaderError):
    kind = "changed"


class Unsupported(Exception):
    """No reader (or no tool) on this machine can read this document.

    The message names what would handle it, e.g. ``"needs tesseract on this machine"``.
    """

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else "unsupported"


OFF = "not used: external tools are off (--no-external)"


def missing_tool(message: str, limits: Any) -> str:
    """The message of a document whose external tool did not run: ``message`` ("needs
    tesseract on this machine") as it is, or, when the run turned external tools off
    (``limits.external_off``), that the tool was not used for that reason, whether or not
    it is installed ("needs tesseract, not used: external tools are off (--no-external)")."""
    if not getattr(limits, "external_off", False):
        return message
    return f"{message.removesuffix(' on this machine')}, {OFF}"


class CapReached(Exception):
    """A budget was reached.  Not a failure: the text so far is kept, marked with the cap.

    ``result`` is what the reader knew when it stopped (its extractor, metadata, the warnings
    it keeps …): the document's :class:`~bastion.readers.result.ReadResult` as far as it got,
    None when the reader had nothing to say (the cap raised by a :class:`TextSink` write)."""

    def __init__(self, cap: str, detail: str = "", *,
                 result: ReadResult | None = None) -> None:
        super().__init__(cap, detail)
        self.cap = cap
        self.detail = detail
        self.result = result

    @property
    def extractor(self) -> str | None:
        """The reader's detail kept on a cap (None: the reader's name)."""
        return (self.result.extractor or None) if self.result is not None else None

    @extractor.setter
    def extractor(self, name: str | None) -> None:
        self.result = (replace(self.result, extractor=name or "") if self.result is not None
                       else ReadResult(name or ""))

    def put_over(self, result: ReadResult) -> None:
        """The cap's result laid over ``result`` (what the cap's reader set wins)."""
        self.result = self.result.over(result) if self.result is not None else result

    def with_metadata(self, doc_meta: DocMeta) -> None:
        """The document's own metadata put in the cap's result
        (:meth:`~bastion.readers.result.ReadResult.with_metadata`)."""
        self.result = (self.result or ReadResult("")).with_metadata(doc_meta)

    def keep(self, result: ReadResult) -> None:
        """``result`` (with the cap's extractor, when it names one) as the cap's, unless the
        cap already carries facts of its own (a nested reader's)."""
        if self.result is None or self.result == ReadResult(self.result.extractor):
            self.result = replace(result, extractor=self.extractor or result.extractor)
