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


class CapReached(Exception):
    """A budget was reached.  Not a failure: the text so far is kept, marked with the cap."""

    def __init__(
        self, cap: str, detail: str = "", *, extractor: str | None = None,
        meta: dict | None = None, warnings: list[str] | None = None,
    ) -> None:
        super().__init__(cap, detail)
        self.cap = cap
        self.detail = detail
        self.extractor = extractor  # set by a reader that wants its detail kept on a cap
        self.meta = meta or {}
        self.warnings = list(warnings or [])  # what the reader survived before the cap
