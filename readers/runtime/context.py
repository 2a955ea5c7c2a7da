"""The read context of one document: its limits, its tools, its scratch dir, its deadline.

:class:`LocalContext` implements :class:`bastion.readers.base.Context`.  Whoever builds one
hands it the reader registry (``registry``, a :class:`bastion.readers.dispatch.Registry`; the
built-in one by default) and the function that reads an embedded document (``nested``,
normally :func:`bastion.readers.dispatch.read_nested`); this module imports no reader.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..base import Context, Limits, ReadState, TextSink, ToolResult
from .toolcall import run_tool

if TYPE_CHECKING:
    from ..dispatch import Registry
    from ..ocr.memo import OcrMemo

# (context, data, name, sink) -> extractor name; raises the errors a reader raises
NestedRead = Callable[[Context, bytes, str, TextSink], str]


class LocalContext:
    """A reader context for one document: limits, allowed tools, a private scratch dir.

    The worker builds one per document; tests build one to call a reader directly.  Embedded
    documents (attachments, archive members) are read through ``nested`` and chosen with
    :meth:`select`, on the ``registry`` the builder gave (default: the built-in one).  Its
    attributes are declared (``__slots__``): what a reading keeps is its ``state``
    (:class:`~bastion.readers.base.ReadState`), and setting anything else fails.
    """

    __slots__ = ("registry", "limits", "tools", "_tmpdir", "deadline", "state", "tools_used",
                 "nested", "ocr_memo", "__weakref__")

    def __init__(
        self, limits: Limits | None = None, tools: dict[str, str] | None = None,
        tmpdir: Path | None = None, deadline: float | None = None, *,
        nested: NestedRead | None = None, ocr_memo: "OcrMemo | None" = None,
        registry: "Registry | None" = None,
    ) -> None:
        self.registry = registry
        self.limits = limits or Limits()
        self.tools = dict(tools or {})
        # The scratch directory is made on first use: most readers never need one, and a
        # mkdir + rmtree per document is most of the isolation overhead on a slow disk.
        self._tmpdir = Path(tmpdir) if tmpdir else None
        # monotonic time by which the whole document must be done; tools get what is left
        self.deadline = deadline if deadline is not None else (
            time.monotonic() + self.limits.tool_deadline_s
        )
        self.state = ReadState()  # what the reading keeps, shared by embedded documents
        self.tools_used: set[str] = set()  # the tools that ran for this document
        self.nested = nested
        # the worker's readers/ocrmemo.OcrMemo: images OCRed already in the run (None: none)
        self.ocr_memo = ocr_memo

    def select(self, mime: str, name: str) -> Any:
        """The reader the context's registry chooses (for a document handed over without one,
        for an embedded document)."""
        if self.registry is None:
            from ..dispatch import BUILTIN

            self.registry = BUILTIN
        return self.registry.select(mime, name)

    @property
    def tmpdir(self) -> Path:
        if self._tmpdir is None:
            # made here (a context built without one: the API's callers, the tests): removed
            # with the context, as tempfile.TemporaryDirectory removes its own
            self._tmpdir = Path(tempfile.mkdtemp(prefix="bastion-"))
            weakref.finalize(self, shutil.rmtree, self._tmpdir, True)
        else:
            self._tmpdir.mkdir(parents=True, exist_ok=True)
        return self._tmpdir

    def time_left(self) -> float:
        return max(0.1, self.deadline - time.monotonic())

    def run_tool(
        self, argv: list[str], *, input: bytes | None = None, timeout: float | None = None,
        max_output: int | None = None, scratch: bool = True,
        while_running: Callable[[], None] | None = None,
    ) -> ToolResult:
        limit = self.time_left() if timeout is None else min(timeout, self.time_left())
        # ``scratch``: the tool runs in the document's scratch directory (made for it); a tool
        # that only reads stdin and writes stdout runs where the worker is, and its input is
        # a memory file
        where = self.tmpdir if scratch else None
        name = os.path.basename(argv[0])
        self.tools_used.add(next((t for t, p in self.tools.items() if p == argv[0]), name))
        return run_tool(
            argv, input=input, timeout=limit,
            max_output=max_output if max_output is not None else self.limits.max_output_bytes,
            max_stderr=self.limits.stderr_bytes, cwd=where, input_dir=where,
            while_running=while_running,
        )

    def read_nested(self, data: bytes, name: str, sink: TextSink) -> str:
        """Read an embedded document through ``nested`` (given by whoever built the context;
        by default the registry's :func:`bastion.readers.dispatch.read_nested`, imported here only
        when needed, so no reader module imports the registry)."""
        if self.nested is not None:
            return self.nested(self, data, name, sink)
        from ..dispatch import read_nested

        return read_nested(self, data, name, sink)
