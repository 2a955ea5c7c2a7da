"""The sink that renders both: the plain text, exactly as :class:`~bastion.readers.base.TextSink`
keeps it, and the Markdown of the same stream (:class:`~bastion.readers.render.markdown.
Markdown`).

The character budget counts the plain text only, and a ``write`` cut at the budget hands the
Markdown the same cut text, so both renderings end at the same character of the document.
"""

from __future__ import annotations

from typing import Any

from ..base import TextSink
from ..errors import CapReached
from .events import Fragment
from .markdown import Markdown


class MarkdownSink(TextSink):
    """A :class:`TextSink` that renders the stream's Markdown too (``structured``)."""

    __slots__ = ("renderer", "_done")

    structured = True

    def __init__(self, max_chars: int) -> None:
        super().__init__(max_chars)
        self.renderer = Markdown()
        self._done: str | None = None

    def write(self, s: str) -> None:
        if not s:
            return
        room = self.max_chars - self._chars
        if len(s) > room:
            if room > 0:
                self._parts.append(s[:room])
                self._chars += room
                self.renderer.text(s[:room])
            raise CapReached("max_chars", f"{self.max_chars} characters")
        self._parts.append(s)
        self._chars += len(s)
        self.renderer.text(s)

    def layout(self, s: str) -> None:
        TextSink.write(self, s)

    def md(self, s: str) -> None:
        self.renderer.text(s)

    def open(self, node: Any) -> None:
        self.renderer.open(node)

    def close(self) -> None:
        self.renderer.close()

    def mark(self, node: Any) -> None:
        self.renderer.mark(node)

    def include(self, sub: TextSink, text: str | None = None) -> None:
        shown = sub.getvalue() if text is None else text
        rendered = sub.markdown()
        if rendered is None:  # a plain sink: its text is all there is
            self.write(shown)
            return
        self.mark(Fragment(rendered))
        self.layout(shown)

    def markdown(self) -> str:
        """The Markdown of everything written (what is open is closed: call it at the end)."""
        if self._done is None:
            self._done = self.renderer.finish()
        return self._done

    def end_note(self, line: str) -> None:
        """A line of bastion's own after the text (a cap's note) in the Markdown."""
        self.renderer.note(line)
        self._done = None
